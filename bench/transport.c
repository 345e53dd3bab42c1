/*
 * transport: pmlib's data path between two hosts beside MPI's own, in one run.
 *
 * The pattern is the one of a fetch: host 1 asks host 0 for N bytes with a
 * small request and waits for them to land in its buffer. First with plain
 * MPI (MPI_Send of the request, MPI_Recv of the reply, by the main thread
 * before pmlib starts), then through pmlib's transport (the comm threads,
 * payloads sent from and received into the buffers). For each size: the
 * best of several batches, in GB/s, and pmlib's share of MPI's rate; for
 * 8-byte replies, the round trip in microseconds. With --pieces P, pmlib's
 * payloads are P pieces of equal size a piece apart on both sides (the
 * written ranges of many chunks), weighed against MPI moving the same
 * bytes in one piece.
 *
 * Run with 2 ranks: mpiexec -n 2 bench/transport [--max MiB] [--compress]
 *                   [--pieces P]
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "comm/comm.h"

#define TAG_REQ 7
#define TAG_REPLY 8

static unsigned char *buf;
static uint64_t max_bytes = (uint64_t)256 << 20;
static unsigned flags;
static int npieces = 1;

/* The payload of n bytes: one piece, or npieces pieces a piece apart. */
static int payload_segs(uint64_t n, pm__seg_t *segs)
{
    if (npieces <= 1 || n < (uint64_t)npieces) {
        segs[0] = (pm__seg_t){buf, n};
        return 1;
    }
    uint64_t each = n / (uint64_t)npieces;
    for (int i = 0; i < npieces; i++) {
        uint64_t len = i == npieces - 1 ? n - each * (uint64_t)(npieces - 1) : each;
        segs[i] = (pm__seg_t){buf + 2 * each * (uint64_t)i, len};
    }
    return npieces;
}

/* ---- plain MPI ------------------------------------------------------------ */

static double mpi_round(int rank, uint64_t n, int iters)
{
    uint64_t req = n;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 1) {
            MPI_Send(&req, 1, MPI_UINT64_T, 0, TAG_REQ, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)n, MPI_BYTE, 0, TAG_REPLY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&req, 1, MPI_UINT64_T, 1, TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)req, MPI_BYTE, 1, TAG_REPLY, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    MPI_Bcast(&t, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    return t / iters;
}

/* ---- pmlib's transport ------------------------------------------------------- */

#define MAX_PIECES 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static atomic_int landed;
static int finished;

/* Host 0: replies with the requested bytes, sent from the buffer. */
static void on_ping(int src, pm__rbuf_t *m)
{
    uint64_t n = pm__rbuf_u64(m);
    if (n == UINT64_MAX) { /* host 1 is done */
        pthread_mutex_lock(&lock);
        finished = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&lock);
        return;
    }
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, n);
    pm__seg_t segs[MAX_PIECES];
    int nseg = payload_segs(n, segs);
    pm__comm_send_bulk(src, PM__TAG_PONG, &b, segs, nseg, flags, NULL, NULL);
}

static void reply_landed(void *arg, int status, uint64_t raw, uint64_t wire)
{
    (void)arg;
    (void)raw;
    (void)wire;
    if (status != 0)
        fprintf(stderr, "transport: a reply did not land (%d)\n", status);
    pm__comm_expect(-1);
    pthread_mutex_lock(&lock);
    atomic_store(&landed, 1);
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&lock);
}

/* Host 1: the reply lands straight in the buffer. */
static void on_pong(int src, pm__rbuf_t *m)
{
    (void)src;
    uint64_t n = pm__rbuf_u64(m);
    pm__seg_t segs[MAX_PIECES];
    int nseg = payload_segs(n, segs);
    pm__comm_recv_bulk(m, segs, nseg, reply_landed, NULL);
}

static bool reply_in(const void *arg)
{
    (void)arg;
    if (atomic_load(&landed))
        return true;
    pm__comm_poll();
    return atomic_load(&landed);
}

static void pm_request(uint64_t n)
{
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, n);
    atomic_store(&landed, 0);
    pm__comm_expect(1);
    pm__comm_send(0, PM__TAG_PING, &b);
    /* As a stub waits for its inputs: a short spell polling, making
     * progress itself where ranks have one core each (pm__comm_poll), then
     * sleep. */
    pm__comm_spin(reply_in, NULL, pm__rt.spin_ns);
    pthread_mutex_lock(&lock);
    while (!atomic_load(&landed))
        pthread_cond_wait(&cv, &lock);
    pthread_mutex_unlock(&lock);
}

static double pm_round(uint64_t n, int iters)
{
    double t0 = pm__now();
    for (int i = 0; i < iters; i++)
        pm_request(n);
    return (pm__now() - t0) / iters;
}

/* ---- driver ------------------------------------------------------------------ */

#define NSIZES 32
static uint64_t sizes[NSIZES];
static int nsizes;
static double mpi_s[NSIZES], pm_s[NSIZES];

static int iters_for(uint64_t n)
{
    uint64_t it = ((uint64_t)64 << 20) / (n ? n : 1);
    return it < 3 ? 3 : it > 2000 ? 2000 : (int)it;
}

static void print_table(void)
{
    printf("transport: host 1 fetches N bytes from host 0 (request, then reply), best of 5 batches%s\n",
           flags ? ", pmlib compressing" : "");
    if (npieces > 1)
        printf("pmlib's payloads in %d pieces a piece apart (MPI's in one)\n", npieces);
    printf("%12s %12s %12s %8s\n", "bytes", "MPI", "pmlib", "pmlib/MPI");
    for (int k = 0; k < nsizes; k++) {
        if (sizes[k] < 4096)
            printf("%12llu %9.2f us %9.2f us %7.2fx  (round trip; pmlib - 2 x MPI = %.2f us)\n",
                   (unsigned long long)sizes[k], mpi_s[k] * 1e6, pm_s[k] * 1e6, pm_s[k] / mpi_s[k],
                   (pm_s[k] - 2 * mpi_s[k]) * 1e6);
        else
            printf("%12llu %7.2f GB/s %7.2f GB/s %8.0f%%\n", (unsigned long long)sizes[k],
                   sizes[k] / mpi_s[k] / 1e9, sizes[k] / pm_s[k] / 1e9, 100 * mpi_s[k] / pm_s[k]);
    }
    fflush(stdout);
}

static void usage(void)
{
    printf("usage: mpiexec -n 2 transport [--max MIB] [--compress] [--pieces P] [--help]\n"
           "\n"
           "Host 1 asks host 0 for N bytes and waits for them, for N from 8 bytes\n"
           "and 64 KiB up to --max MiB (default 256): first with MPI_Send/MPI_Recv,\n"
           "then through pmlib's transport. Prints for each size the best of 5\n"
           "batches: MPI's and pmlib's rate in GB/s and pmlib's share of MPI's; for\n"
           "8 bytes, the round trip in microseconds. --compress sends pmlib's\n"
           "payloads with compression on (the buffer holds a compressible pattern).\n"
           "--pieces P (1 to %d) makes each of pmlib's payloads P pieces of equal\n"
           "size, a piece apart on both hosts (MPI still moves one piece).\n"
           "Host 1 waits for each reply as a stub waits for its inputs. Ranks that\n"
           "mpiexec binds to cores of their own (its default for 2 ranks) and\n"
           "unbound ones (--bind-to none) wait differently where a rank has one\n"
           "core: doc/design-notes.md, \"The transport\".\n",
           MAX_PIECES);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            max_bytes = strtoull(argv[++i], NULL, 10) << 20;
        } else if (strcmp(argv[i], "--pieces") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > MAX_PIECES) {
                fprintf(stderr, "transport: --pieces needs a count from 1 to %d\n", MAX_PIECES);
                return 2;
            }
            npieces = (int)v;
        } else if (strcmp(argv[i], "--compress") == 0) {
            flags = PM__BULK_ZLIB;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "transport: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "transport: run it with 2 ranks (mpiexec -n 2)\n");
        MPI_Finalize();
        return 2;
    }
    if (max_bytes < ((uint64_t)64 << 10) || max_bytes > ((uint64_t)1 << 30)) {
        if (rank == 0)
            fprintf(stderr, "transport: --max must be from 1 to 1024 MiB\n");
        MPI_Finalize();
        return 2;
    }
    /* Pieces lie a piece apart: twice the bytes. */
    uint64_t room = npieces > 1 ? 2 * max_bytes : max_bytes;
    buf = malloc(room);
    if (buf == NULL) {
        fprintf(stderr, "transport: out of memory for %llu bytes\n", (unsigned long long)max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (uint64_t i = 0; i < room; i++) /* compressible, not constant */
        buf[i] = (unsigned char)((i / 64) % 7 + (i % 3));
    sizes[nsizes++] = 8;
    for (uint64_t n = 64 << 10; n <= max_bytes && nsizes < NSIZES; n *= 4)
        sizes[nsizes++] = n;

    for (int k = 0; k < nsizes; k++) {
        mpi_round(rank, sizes[k], 3); /* warm up */
        double best = 1e30;
        for (int b = 0; b < 5; b++) {
            double s = mpi_round(rank, sizes[k], iters_for(sizes[k]));
            best = s < best ? s : best;
        }
        mpi_s[k] = best;
    }

    /* In place before any message can arrive. */
    pm__comm_handle(PM__TAG_PING, on_ping);
    pm__comm_handle(PM__TAG_PONG, on_pong);
    if (pm_init(&argc, &argv) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 1) {
        /* The requester waits as a stub waits for its inputs, and stands
         * where one would: where the launcher left the ranks unbound,
         * stubs are bound within their rank's share of the cores. */
        pm__comm_bind_share();
        for (int k = 0; k < nsizes; k++) {
            pm_round(sizes[k], 3);
            double best = 1e30;
            for (int b = 0; b < 5; b++) {
                double s = pm_round(sizes[k], iters_for(sizes[k]));
                best = s < best ? s : best;
            }
            pm_s[k] = best;
        }
        pm__wbuf_t b = {0};
        pm__wbuf_u64(&b, UINT64_MAX);
        pm__comm_send(0, PM__TAG_PING, &b);
        print_table();
    } else {
        pthread_mutex_lock(&lock);
        while (!finished)
            pthread_cond_wait(&cv, &lock);
        pthread_mutex_unlock(&lock);
    }
    pm_finalize();
    MPI_Finalize();
    free(buf);
    return 0;
}
