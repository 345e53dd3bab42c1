/*
 * MPI start-up and the comm thread. A program started without a launcher is
 * one host and never touches MPI; under mpirun every rank is a host. The
 * comm thread alone calls MPI between pm_init and pm_finalize: it sends
 * what stubs queue, receives and dispatches messages, and watches that
 * every host is still alive.
 */
#define _GNU_SOURCE
#include "comm/comm.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

pm__host_info_t *pm__hosts;

typedef struct out_msg {
    struct out_msg *next;
    int dest, tag;
    pm__wbuf_t buf;
} out_msg_t;

typedef struct inflight {
    MPI_Request req;
    unsigned char *buf;
} inflight_t;

static struct {
    int we_initialized_mpi;
    int running;
    pthread_t thread;
    pthread_mutex_t lock;
    out_msg_t *head, *tail;
    int stop;
    inflight_t *fl;
    int nfl, capfl;
    double *last_heard;
    double last_beat;
    double host_timeout;
} C;

static const pm__handler_fn handlers[PM__TAG_LAST - PM__TAG_TASK] = {
    [PM__TAG_TASK - PM__TAG_TASK] = pm__proto_on_task,
    [PM__TAG_TASK_NACK - PM__TAG_TASK] = pm__proto_on_task_nack,
    [PM__TAG_DATA_REQ - PM__TAG_TASK] = pm__data_on_req,
    [PM__TAG_DATA_REPLY - PM__TAG_TASK] = pm__data_on_reply,
    [PM__TAG_CHUNK_DONE - PM__TAG_TASK] = pm__proto_on_chunk_done,
    [PM__TAG_STEAL_REQ - PM__TAG_TASK] = pm__proto_on_steal_req,
    [PM__TAG_STEAL_REPLY - PM__TAG_TASK] = pm__proto_on_steal_reply,
    [PM__TAG_DRAINED - PM__TAG_TASK] = pm__proto_on_drained,
    [PM__TAG_TASK_END - PM__TAG_TASK] = pm__proto_on_task_end,
    [PM__TAG_MEM_RELEASE - PM__TAG_TASK] = pm__data_on_mem_release,
    [PM__TAG_COPY_REQ - PM__TAG_TASK] = pm__proto_on_copy_req,
    [PM__TAG_COPY_REPLY - PM__TAG_TASK] = pm__proto_on_copy_reply,
};

/* Whether an MPI launcher started this process (Open MPI, PMIx, PMI). */
static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_SIZE") != NULL;
}

/* mpirun stops the other ranks with SIGTERM when one dies: say why. */
static void on_sigterm(int sig)
{
    static const char msg[] = "pmlib: error: the MPI launcher is stopping this host, most likely "
                              "because another host died or failed; unfinished tasks are lost\n";
    (void)sig;
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r;
    _exit(1);
}

static void install_sigterm(void)
{
    struct sigaction old;
    if (sigaction(SIGTERM, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigterm;
        sigaction(SIGTERM, &sa, NULL);
    }
}

int pm__comm_init(int *argc, char ***argv, int *host, int *nhosts, int *local_rank, int *local_size)
{
    int inited = 0, provided = 0, rank = 0, size = 1;
    *host = 0;
    *nhosts = 1;
    *local_rank = 0;
    *local_size = 1;
    if (!launched_by_mpi())
        return 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return PM__FAIL(PM_EMPI, "pm_init: MPI_Init_thread failed; check the mpirun command line");
        C.we_initialized_mpi = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local_rank);
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
    *host = rank;
    *nhosts = size;
    if (size > 1)
        install_sigterm();
    return 0;
}

/* ---- sending ------------------------------------------------------------ */

void pm__comm_send(int dest, int tag, pm__wbuf_t *msg)
{
    out_msg_t *m = malloc(sizeof *m);
    if (m == NULL || msg->oom || msg->n > INT32_MAX) {
        /* A message we cannot send would leave a host waiting forever. */
        pm__error("cannot queue a %zu-byte message to host %d (out of memory or over 2 GiB); aborting the job",
                  msg->n, dest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    m->next = NULL;
    m->dest = dest;
    m->tag = tag;
    m->buf = *msg;
    *msg = (pm__wbuf_t){0};
    pthread_mutex_lock(&C.lock);
    if (C.tail)
        C.tail->next = m;
    else
        C.head = m;
    C.tail = m;
    pthread_mutex_unlock(&C.lock);
}

static int start_sends(void)
{
    pthread_mutex_lock(&C.lock);
    out_msg_t *m = C.head;
    C.head = C.tail = NULL;
    pthread_mutex_unlock(&C.lock);
    int n = 0;
    while (m != NULL) {
        out_msg_t *next = m->next;
        if (C.nfl == C.capfl) {
            int cap = C.capfl ? C.capfl * 2 : 64;
            inflight_t *f = realloc(C.fl, (size_t)cap * sizeof *f);
            if (f == NULL) {
                pm__error("out of memory tracking messages; aborting the job");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            C.fl = f;
            C.capfl = cap;
        }
        inflight_t *f = &C.fl[C.nfl++];
        f->buf = m->buf.p;
        MPI_Isend(m->buf.p ? (void *)m->buf.p : (void *)"", (int)m->buf.n, MPI_BYTE, m->dest,
                  m->tag, MPI_COMM_WORLD, &f->req);
        free(m);
        m = next;
        n++;
    }
    return n;
}

static int finish_sends(void)
{
    int n = 0;
    for (int i = 0; i < C.nfl;) {
        int done = 0;
        MPI_Test(&C.fl[i].req, &done, MPI_STATUS_IGNORE);
        if (!done) {
            i++;
            continue;
        }
        free(C.fl[i].buf);
        C.fl[i] = C.fl[--C.nfl];
        n++;
    }
    return n;
}

static int sends_pending(void)
{
    pthread_mutex_lock(&C.lock);
    int queued = C.head != NULL;
    pthread_mutex_unlock(&C.lock);
    return queued || C.nfl > 0;
}

/* ---- receiving ---------------------------------------------------------- */

static void shutdown_received(void)
{
    pthread_mutex_lock(&pm__rt.lock);
    pm__rt.shutdown_received = 1;
    pthread_cond_broadcast(&pm__rt.done_cv);
    pthread_mutex_unlock(&pm__rt.lock);
}

static int receive(void)
{
    int n = 0, flag = 1;
    while (flag) {
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag)
            break;
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        unsigned char *data = malloc(count > 0 ? (size_t)count : 1);
        if (data == NULL) {
            pm__error("out of memory receiving a %d-byte message from host %d; aborting the job",
                      count, st.MPI_SOURCE);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Recv(data, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        C.last_heard[st.MPI_SOURCE] = pm__now();
        pm__rbuf_t r = {.p = data, .n = (size_t)count};
        if (st.MPI_TAG == PM__TAG_SHUTDOWN)
            shutdown_received();
        else if (st.MPI_TAG >= PM__TAG_TASK && st.MPI_TAG < PM__TAG_LAST &&
                 handlers[st.MPI_TAG - PM__TAG_TASK] != NULL)
            handlers[st.MPI_TAG - PM__TAG_TASK](st.MPI_SOURCE, &r);
        if (r.bad)
            pm__error("malformed message (tag %d, %d bytes) from host %d ignored", st.MPI_TAG, count,
                      st.MPI_SOURCE);
        free(data);
        n++;
    }
    return n;
}

/* ---- liveness ----------------------------------------------------------- */

/* Host 0 and every other host exchange heartbeats; one that falls silent
 * ends the whole job, as MPI cannot go on without it. */
static void heartbeat(void)
{
    double now = pm__now();
    if (now - C.last_beat >= 1.0) {
        C.last_beat = now;
        for (int h = 0; h < pm__rt.nhosts; h++) {
            if (h == pm__rt.host || (pm__rt.host != 0 && h != 0))
                continue;
            pm__wbuf_t b = {0};
            pm__wbuf_u64(&b, 0);
            pm__comm_send(h, PM__TAG_HEARTBEAT, &b);
        }
    }
    for (int h = 0; h < pm__rt.nhosts; h++) {
        if (h == pm__rt.host || (pm__rt.host != 0 && h != 0))
            continue;
        if (now - C.last_heard[h] > C.host_timeout) {
            pm__error("host %d has not answered for %.0f s (killed, crashed or unreachable); "
                      "ending the job (PMLIB_HOST_TIMEOUT sets the limit)", h, now - C.last_heard[h]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void nap(int idle_rounds)
{
    struct timespec ts = {0, idle_rounds < 16 ? 5000 : idle_rounds < 128 ? 50000 : 1000000};
    nanosleep(&ts, NULL);
}

static void *comm_main(void *arg)
{
    (void)arg;
    int idle = 0;
    for (;;) {
        int work = start_sends();
        work += finish_sends();
        work += receive();
        pm__proto_poll();
        heartbeat();
        pthread_mutex_lock(&C.lock);
        int stop = C.stop;
        pthread_mutex_unlock(&C.lock);
        if (stop && !sends_pending())
            break;
        idle = work ? 0 : idle + 1;
        if (!work)
            nap(idle);
    }
    return NULL;
}

/* ---- start and stop ------------------------------------------------------ */

int pm__comm_start(const pm__host_info_t *me)
{
    if (!C.we_initialized_mpi && !launched_by_mpi()) {
        pm__hosts = calloc(1, sizeof *pm__hosts);
        if (pm__hosts == NULL)
            return PM_ENOMEM;
        pm__hosts[0] = *me;
        return 0;
    }
    int n = pm__rt.nhosts;
    pm__hosts = calloc((size_t)n, sizeof *pm__hosts);
    C.last_heard = calloc((size_t)n, sizeof *C.last_heard);
    if (pm__hosts == NULL || C.last_heard == NULL)
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory for the host table");
    MPI_Allgather(me, (int)sizeof *me, MPI_BYTE, pm__hosts, (int)sizeof *me, MPI_BYTE, MPI_COMM_WORLD);
    if (n == 1)
        return 0;
    double now = pm__now();
    for (int h = 0; h < n; h++)
        C.last_heard[h] = now;
    const char *t = getenv("PMLIB_HOST_TIMEOUT");
    C.host_timeout = t && atof(t) > 0 ? atof(t) : 30.0;
    pthread_mutex_init(&C.lock, NULL);
    if (pthread_create(&C.thread, NULL, comm_main, NULL) != 0)
        return PM__FAIL(PM_ENOMEM, "pm_init: cannot start the comm thread");
    pthread_setname_np(C.thread, "pmlib-comm");
    C.running = 1;
    return 0;
}

/* Host 0: tells every host to finish. Others: waits until host 0 says so. */
void pm__comm_shutdown(void)
{
    if (!C.running)
        return;
    if (pm__rt.host == 0) {
        for (int h = 1; h < pm__rt.nhosts; h++) {
            pm__wbuf_t b = {0};
            pm__wbuf_u64(&b, 0);
            pm__comm_send(h, PM__TAG_SHUTDOWN, &b);
        }
        return;
    }
    pthread_mutex_lock(&pm__rt.lock);
    while (!pm__rt.shutdown_received)
        pthread_cond_wait(&pm__rt.done_cv, &pm__rt.lock);
    pthread_mutex_unlock(&pm__rt.lock);
}

void pm__comm_finalize(void)
{
    if (C.running) {
        pthread_mutex_lock(&C.lock);
        C.stop = 1;
        pthread_mutex_unlock(&C.lock);
        pthread_join(C.thread, NULL);
        pthread_mutex_destroy(&C.lock);
        C.running = 0;
    }
    pm__data_free_mirrors();
    pm__proto_free_pending();
    free(C.fl);
    free(C.last_heard);
    free(pm__hosts);
    pm__hosts = NULL;
    int we = C.we_initialized_mpi;
    memset(&C, 0, sizeof C);
    if (we) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    }
}
