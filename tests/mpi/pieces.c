/*
 * Payloads of several pieces between 2 hosts, at the transport's level.
 *
 * Host 1 asks host 0 for each case in turn; host 0 sends the case's bytes
 * from its own layout of pieces (a pattern of each byte's place in the
 * stream and the case), and host 1 receives them into a different layout
 * of the same total. Host 1 checks every byte against the pattern and that
 * the gaps around its pieces were not written. The cases cover each way a
 * payload of pieces travels (comm/bulk.c): few bytes inline, one piece raw,
 * large pieces each its own message, small pieces sharing messages, a
 * payload of small pieces too large for that (packed, or read by the
 * receiver from the sender's memory on one machine; run again with
 * PMLIB_CMA=0 for the packing), pieces of every
 * size with empty ones among them, and more pieces than a payload has
 * messages. With --huge instead: pieces over 1 GiB (a message's most),
 * 2.2 GiB in all, so that a piece is split among messages.
 *
 * Host 1 prints PIECES-OK and exits 0 when every case holds.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "pmlib.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define MAXSEG 2200
#define GAP 72     /* bytes between pieces (not a multiple of 8 or 64) */
#define FILL 0xEE  /* what the receiver's gaps hold */

/* A layout: nseg pieces of these lengths, laid out with gaps. */
typedef struct layout {
    int nseg;
    uint64_t len[MAXSEG];
} layout_t;

typedef struct pcase {
    const char *name;
    layout_t send, recv;
} pcase_t;

static pcase_t cases[16];
static int ncases;

static void equal(layout_t *l, int n, uint64_t each)
{
    l->nseg = n;
    for (int i = 0; i < n; i++)
        l->len[i] = each;
}

/* n pieces of uneven lengths adding up to total: each about total / n,
 * give or take a third, the last taking the rest. */
static void uneven(layout_t *l, int n, uint64_t total)
{
    uint64_t left = total, each = total / (uint64_t)n;
    l->nseg = n;
    for (int i = 0; i < n - 1; i++) {
        uint64_t v = each - each / 3 + (uint64_t)(i * 7919 % 1000) * (each * 2 / 3) / 1000;
        v = v < left ? v : left;
        l->len[i] = v;
        left -= v;
    }
    l->len[n - 1] = left;
}

static uint64_t total(const layout_t *l)
{
    uint64_t t = 0;
    for (int i = 0; i < l->nseg; i++)
        t += l->len[i];
    return t;
}

static uint64_t room(const layout_t *l)
{
    return total(l) + (uint64_t)(l->nseg + 1) * GAP;
}

/* The segments of a layout in buf (a gap before each piece). */
static int segs_of(const layout_t *l, unsigned char *buf, pm__seg_t *segs)
{
    uint64_t at = GAP;
    for (int i = 0; i < l->nseg; i++) {
        segs[i] = (pm__seg_t){buf + at, l->len[i]};
        at += l->len[i] + GAP;
    }
    return l->nseg;
}

static unsigned char pattern(int c, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(c + 1) * 0xC2B2AE3D27D4EB4FULL;
    x ^= x >> 29;
    return (unsigned char)(x ^ (x >> 11));
}

#define GiB ((uint64_t)1 << 30)

/* Pieces over a message's most (1 GiB): a piece split among messages, a
 * short one after it, and a receiver of other lengths. */
static void add_huge_cases(void)
{
    pcase_t *c = &cases[ncases++];
    c->name = "pieces over 1 GiB";
    c->send.nseg = 3;
    c->send.len[0] = GiB + GiB / 8 + 3;
    c->send.len[1] = 5;
    c->send.len[2] = GiB - 7;
    uneven(&c->recv, 2, total(&c->send));
}

static void add_cases(void)
{
    pcase_t *c;
    /* Few bytes in all, in pieces: inline in the control message. */
    c = &cases[ncases++];
    c->name = "inline";
    equal(&c->send, 40, 100);
    uneven(&c->recv, 7, total(&c->send));
    /* One piece on the sender's side, several on the receiver's. */
    c = &cases[ncases++];
    c->name = "raw";
    equal(&c->send, 1, 3 * MiB + 5);
    uneven(&c->recv, 13, total(&c->send));
    /* One piece up to 1 MiB: read by the receiver on one machine (raw
     * with PMLIB_CMA=0), into several pieces or one, empty ones around. */
    c = &cases[ncases++];
    c->name = "one piece read";
    equal(&c->send, 1, 600 * KiB + 3);
    uneven(&c->recv, 5, total(&c->send));
    c = &cases[ncases++];
    c->name = "one piece among empty ones";
    c->send.nseg = 3;
    c->send.len[0] = 0;
    c->send.len[1] = MiB;
    c->send.len[2] = 0;
    equal(&c->recv, 1, MiB);
    /* Large pieces: one message each; the receiver's in one piece. */
    c = &cases[ncases++];
    c->name = "large pieces";
    equal(&c->send, 32, 256 * KiB);
    equal(&c->recv, 1, total(&c->send));
    /* Large pieces, both sides alike (a fetch of a chunk's writes). */
    c = &cases[ncases++];
    c->name = "large pieces alike";
    equal(&c->send, 24, 300 * KiB + 8);
    equal(&c->recv, 24, 300 * KiB + 8);
    /* Small pieces, few bytes in all: they share messages. */
    c = &cases[ncases++];
    c->name = "small pieces";
    equal(&c->send, 300, 1000);
    uneven(&c->recv, 9, total(&c->send));
    /* Small pieces, many bytes: packed. */
    c = &cases[ncases++];
    c->name = "packed";
    equal(&c->send, 2048, 4 * KiB);
    uneven(&c->recv, 5, total(&c->send));
    /* Packed, into more and smaller pieces than it left: a host on the
     * same machine that reads the sender's pieces itself runs out of the
     * receiving side's pieces first in each stretch it copies. */
    c = &cases[ncases++];
    c->name = "packed into small pieces";
    equal(&c->send, 600, 14 * KiB);
    uneven(&c->recv, 2190, total(&c->send));
    /* Every size, empty pieces among them, a short tail. */
    c = &cases[ncases++];
    c->name = "mixed";
    c->send.nseg = 9;
    {
        const uint64_t v[] = {100, 3 * KiB, 700 * KiB, 0, 5, 2 * MiB + 3, 64 * KiB - 1, 0, 17};
        memcpy(c->send.len, v, sizeof v);
    }
    uneven(&c->recv, 11, total(&c->send));
    /* More pieces than a payload has messages: neighbours pair up. */
    c = &cases[ncases++];
    c->name = "many pieces";
    equal(&c->send, 2100, 64 * KiB + 40);
    uneven(&c->recv, 2000, total(&c->send));
}

/* ---- host 0 ------------------------------------------------------------------ */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int finished;
static unsigned char *sbuf;
static pm__seg_t ssegs[MAXSEG];

static void on_ping(int src, pm__rbuf_t *m)
{
    uint64_t k = pm__rbuf_u64(m);
    if (k >= (uint64_t)ncases) { /* host 1 is done */
        pthread_mutex_lock(&lock);
        finished = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&lock);
        return;
    }
    const pcase_t *c = &cases[k];
    int n = segs_of(&c->send, sbuf, ssegs);
    uint64_t at = 0;
    for (int i = 0; i < n; i++)
        for (uint64_t j = 0; j < ssegs[i].n; j++, at++)
            ((unsigned char *)ssegs[i].p)[j] = pattern((int)k, at);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, k);
    /* The next request comes after this payload has landed, so the
     * sender's buffer is not reused while it is in flight. */
    pm__comm_send_bulk(src, PM__TAG_PONG, &b, ssegs, n, 0, NULL, NULL);
}

/* ---- host 1 ------------------------------------------------------------------ */

static unsigned char *rbuf;
static pm__seg_t rsegs[MAXSEG];
static atomic_int landed, status;

static void reply_landed(void *arg, int st, uint64_t raw, uint64_t wire)
{
    (void)arg;
    (void)wire;
    (void)raw;
    pm__comm_expect(-1);
    pthread_mutex_lock(&lock);
    atomic_store(&status, st);
    atomic_store(&landed, 1);
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&lock);
}

static void on_pong(int src, pm__rbuf_t *m)
{
    (void)src;
    uint64_t k = pm__rbuf_u64(m);
    const pcase_t *c = &cases[k < (uint64_t)ncases ? k : 0];
    int n = segs_of(&c->recv, rbuf, rsegs);
    pm__comm_recv_bulk(m, rsegs, n, reply_landed, NULL);
}

/* Asks for case k and checks what landed; 0 when it all holds. */
static int run_case(int k)
{
    const pcase_t *c = &cases[k];
    if (total(&c->send) != total(&c->recv)) {
        fprintf(stderr, "pieces: case '%s' is malformed\n", c->name);
        return 1;
    }
    memset(rbuf, FILL, room(&c->recv));
    atomic_store(&landed, 0);
    pm__comm_expect(1);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, (uint64_t)k);
    pm__comm_send(0, PM__TAG_PING, &b);
    pthread_mutex_lock(&lock);
    while (!atomic_load(&landed))
        pthread_cond_wait(&cv, &lock);
    pthread_mutex_unlock(&lock);
    if (atomic_load(&status) != 0) {
        fprintf(stderr, "pieces: case '%s' landed with status %d\n", c->name, atomic_load(&status));
        return 1;
    }
    int n = segs_of(&c->recv, rbuf, rsegs);
    uint64_t at = 0, bad = 0, first = UINT64_MAX;
    for (int i = 0; i < n; i++)
        for (uint64_t j = 0; j < rsegs[i].n; j++, at++)
            if (((unsigned char *)rsegs[i].p)[j] != pattern(k, at)) {
                bad++;
                first = first == UINT64_MAX ? at : first;
            }
    /* The gaps: before each piece and after the last. */
    uint64_t gap_bad = 0;
    unsigned char *p = rbuf;
    for (int i = 0; i <= n; i++) {
        for (int j = 0; j < GAP; j++)
            gap_bad += p[j] != FILL;
        if (i < n)
            p += GAP + c->recv.len[i];
    }
    if (bad || gap_bad) {
        fprintf(stderr, "pieces: case '%s': %llu of %llu bytes wrong (first at %llu), %llu gap bytes written\n",
                c->name, (unsigned long long)bad, (unsigned long long)at,
                (unsigned long long)(first == UINT64_MAX ? 0 : first), (unsigned long long)gap_bad);
        return 1;
    }
    printf("pieces: case '%s': %llu bytes in %d pieces into %d: ok\n", c->name, (unsigned long long)at,
           c->send.nseg, c->recv.nseg);
    return 0;
}

int main(int argc, char **argv)
{
    bool huge = argc > 1 && strcmp(argv[1], "--huge") == 0;
    if (huge)
        add_huge_cases();
    else
        add_cases();
    uint64_t most = 0;
    for (int k = 0; k < ncases; k++) {
        uint64_t a = room(&cases[k].send), b = room(&cases[k].recv);
        most = a > most ? a : most;
        most = b > most ? b : most;
    }
    unsigned char *buf = malloc(most);
    if (buf == NULL) {
        fprintf(stderr, "pieces: out of memory\n");
        return 1;
    }
    sbuf = rbuf = buf;
    /* In place before any message can arrive. */
    pm__comm_handle(PM__TAG_PING, on_ping);
    pm__comm_handle(PM__TAG_PONG, on_pong);
    if (pm_init(&argc, &argv) != PM_OK) {
        free(buf);
        return 1;
    }
    int host = pm_host_id(), hosts = pm_host_count();
    if (hosts != 2) {
        if (host == 0)
            fprintf(stderr, "pieces: run it with 2 hosts (mpiexec -n 2)\n");
        pm_finalize();
        free(buf);
        return 2;
    }
    int failed = 0;
    if (host == 1) {
        for (int k = 0; k < ncases; k++)
            failed |= run_case(k);
        pm__wbuf_t b = {0};
        pm__wbuf_u64(&b, UINT64_MAX);
        pm__comm_send(0, PM__TAG_PING, &b);
        if (!failed)
            printf("PIECES-OK\n");
        fflush(stdout);
    } else {
        pthread_mutex_lock(&lock);
        while (!finished)
            pthread_cond_wait(&cv, &lock);
        pthread_mutex_unlock(&lock);
    }
    pm_finalize();
    free(buf);
    return failed;
}
