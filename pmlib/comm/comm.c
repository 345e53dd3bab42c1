/*
 * MPI start-up and the comm thread. A program started without a launcher is
 * one host and never touches MPI; under mpirun every rank is a host. The
 * comm thread alone calls MPI between pm_init and pm_finalize: it starts
 * what other threads queue, progresses payloads (bulk.c), receives and
 * dispatches control messages, and watches that every host is still alive.
 *
 * It never sleeps while anything it could progress is in flight, while a
 * reply is awaited or while a task spanning hosts runs here: then it polls,
 * yielding the core between rounds. Otherwise it polls for a short spell
 * (PMLIB_SPIN_US) and then naps ever longer, up to 1 ms; a queued send
 * wakes it at once.
 */
#define _GNU_SOURCE
#include "comm/transport.h"

#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

MPI_Comm pm__bulk_comm = MPI_COMM_NULL;

/* Seconds between heartbeats; PMLIB_HOST_TIMEOUT must be at least twice it. */
#define PM__HEARTBEAT 1.0
#define PM__HOST_TIMEOUT_DEFAULT 30.0

static struct {
    int we_initialized_mpi;
    int running;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int asleep;
    pm__out_t *head, *tail;
    int stop;
    pm__out_t **fl; /* started sends */
    int nfl, capfl;
    atomic_int expect, active;
    atomic_bool queued; /* head is not empty */
    double *last_heard;
    double last_beat;
    double host_timeout;
    /* Whether idle stubs make progress themselves (pm__comm_poll): where a
     * rank has one core for its stubs, its comm thread and its stub take
     * turns on it, and each message otherwise waits for that turn. */
    atomic_bool stub_polls;
    /* Whether the launcher bound this rank to cores no other rank of the
     * machine may use: then a stub polling for the comm thread shares its
     * core with threads of this rank alone (pm__comm_spin). */
    bool own_cores;
    /* The launcher left the ranks of this machine unbound (unbound): this
     * rank's share of the cores (pm__comm_share), nshare of them. */
    bool unbound;
    int nshare;
    cpu_set_t share;
    int core_sharers; /* ranks of this machine whose cores meet this rank's, itself included */
    /* When the last round ended, and how long before this one began
     * (progress lock): a message received in this round may have waited
     * that long for it, while the host napped. */
    double round_end, round_gap;
} C;

/* One thread at a time sends, receives and runs the handlers: the comm
 * thread, or a stub in pm__comm_poll or pm__comm_hand_over (MPI is
 * initialized MPI_THREAD_SERIALIZED). It guards the started sends (C.fl),
 * the payload streams (bulk.c) and C.last_heard. */
static pthread_mutex_t progress = PTHREAD_MUTEX_INITIALIZER;

/* The handlers of tags PM__TAG_PING to PM__TAG_LAST, and the function
 * every round runs, as the layers above set them. */
static pm__handler_fn handlers[PM__TAG_LAST - PM__TAG_PING];
static void (*round_fn)(void);
static void (*lost_fn)(int dead);

void pm__comm_handle(int tag, pm__handler_fn fn)
{
    if (tag >= PM__TAG_PING && tag < PM__TAG_LAST)
        handlers[tag - PM__TAG_PING] = fn;
}

void pm__comm_on_round(void (*fn)(void))
{
    round_fn = fn;
}

void pm__comm_on_host_lost(void (*fn)(int dead))
{
    lost_fn = fn;
}

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

/* Whether this rank's cores (its affinity mask) are disjoint from those of
 * every other rank of the machine (collective over `node`); *sharers
 * counts the ranks whose cores meet this rank's, itself included. */
static bool cores_of_its_own(MPI_Comm node, int me, int n, int *sharers)
{
    cpu_set_t mine;
    bool own = sched_getaffinity(0, sizeof mine, &mine) == 0;
    if (!own)
        CPU_ZERO(&mine);
    cpu_set_t *all = malloc((size_t)n * sizeof *all);
    if (all == NULL) {
        pm__error("out of memory comparing the ranks' cores; aborting the job");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node);
    *sharers = 1;
    for (int r = 0; r < n && own; r++) {
        cpu_set_t both;
        CPU_AND(&both, &mine, &all[r]);
        *sharers += r != me && CPU_COUNT(&both) > 0;
    }
    free(all);
    return own && *sharers == 1;
}

/* Ranks the launcher left unbound (each may run on every core of the
 * machine) share out the cores: rank r of n takes the r-th n-th. */
static void find_share(int me, int n)
{
    cpu_set_t mask;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 2 || online <= 0 || sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < online)
        return;
    int per = CPU_COUNT(&mask) / n, seen = 0;
    CPU_ZERO(&C.share);
    for (int c = 0; c < CPU_SETSIZE && per > 0; c++) {
        if (!CPU_ISSET(c, &mask))
            continue;
        if (seen >= per * me && seen < per * (me + 1))
            CPU_SET(c, &C.share);
        seen++;
    }
    C.unbound = true;
    C.nshare = per;
}

int pm__comm_share(int *cores, int max)
{
    if (!C.unbound)
        return -1;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < max && n < C.nshare; c++)
        if (CPU_ISSET(c, &C.share))
            cores[n++] = c;
    return n;
}

bool pm__comm_bind_share(void)
{
    if (C.nshare == 0 || pm__rt.bind == 0 || sched_setaffinity(0, sizeof C.share, &C.share) != 0)
        return false;
    pm__own_core = true;
    return true;
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
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return PM__FAIL(PM_EINIT, "pm_init called after pm_finalize (or MPI_Finalize) in a process "
                        "started by mpirun: MPI cannot start again; call pm_init once per process");
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
    C.own_cores = cores_of_its_own(node, *local_rank, *local_size, &C.core_sharers);
    find_share(*local_rank, *local_size);
    MPI_Comm_free(&node);
    *host = rank;
    *nhosts = size;
    if (size > 1)
        install_sigterm();
    return 0;
}

/* ---- sending ------------------------------------------------------------ */

static void out_of_memory(const char *what)
{
    pm__error("out of memory %s; aborting the job", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

pm__out_t *pm__tx_control(int dest, int tag, pm__wbuf_t *b)
{
    pm__out_t *o = calloc(1, sizeof *o);
    if (o == NULL || b->oom) {
        /* A message we cannot send would leave a host waiting forever. */
        pm__error("cannot queue a %zu-byte message to host %d (out of memory); aborting the job", b->n,
                  dest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    o->dest = dest;
    o->tag = tag;
    o->owned = b->p;
    o->addr = b->p ? (const void *)b->p : (const void *)"";
    o->count = b->n;
    o->type = MPI_BYTE;
    *b = (pm__wbuf_t){0};
    return o;
}

void pm__tx_queue(pm__out_t *first, pm__out_t *last)
{
    pthread_mutex_lock(&C.lock);
    if (C.tail)
        C.tail->next = first;
    else
        C.head = first;
    C.tail = last;
    atomic_store_explicit(&C.queued, true, memory_order_relaxed);
    if (C.asleep)
        pthread_cond_signal(&C.wake);
    pthread_mutex_unlock(&C.lock);
}

void pm__comm_send(int dest, int tag, pm__wbuf_t *msg)
{
    /* Every control message ends in a byte saying whether a payload follows. */
    unsigned char none = 0;
    pm__wbuf_put(msg, &none, 1);
    pm__out_t *o = pm__tx_control(dest, tag, msg);
    if (o->count > INT32_MAX) {
        pm__error("cannot send a %llu-byte control message to host %d (over 2 GiB); aborting the job",
                  (unsigned long long)o->count, dest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pm__tx_queue(o, o);
}

/* How long a stub about to run a chunk waits for the comm thread to take
 * up the messages queued before it (seconds). */
#define PM__HAND_OVER_MAX 50e-6

static int stub_round(bool wait_for_queued);

void pm__comm_hand_over(void)
{
    if (!pm__rt.crowded || !C.running)
        return;
    /* The stub makes a round itself: it sends what was queued, and what
     * came meanwhile (reports, requests) is taken up between its chunks
     * rather than once the system's scheduler preempts it for the comm
     * thread, which took milliseconds. */
    if (atomic_load_explicit(&C.stub_polls, memory_order_acquire)) {
        /* Where the comm thread is in a round, it may have passed its
         * sends already: what is queued (another host's share of the task
         * this chunk belongs to) would then wait until the system
         * preempts this stub for it, after the chunk (on cpu2, stencil
         * timesteps of two 146 us chunks took 340 us instead of 160 in
         * whole runs). So the stub waits for that round to end and sends
         * itself. */
        stub_round(true);
        return;
    }
    if (!atomic_load_explicit(&C.queued, memory_order_relaxed))
        return;
    double until = pm__now() + PM__HAND_OVER_MAX;
    do
        pm__yield();
    while (atomic_load_explicit(&C.queued, memory_order_relaxed) && pm__now() < until);
}

void pm__comm_expect(int delta)
{
    atomic_fetch_add(&C.expect, delta);
}

void pm__comm_active(int delta)
{
    atomic_fetch_add(&C.active, delta);
}

/* Whether a message is the comm thread's own housekeeping (heartbeats):
 * it does not count as work, so an idle host's naps keep growing. */
static bool housekeeping(int tag)
{
    return tag == PM__TAG_HEARTBEAT;
}

static int start_sends(void)
{
    /* Queued later than this look: the next round sends it (a nap looks
     * again under the lock before it sleeps). */
    if (!atomic_load_explicit(&C.queued, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&C.lock);
    pm__out_t *o = C.head;
    C.head = C.tail = NULL;
    atomic_store_explicit(&C.queued, false, memory_order_relaxed);
    pthread_mutex_unlock(&C.lock);
    int n = 0;
    while (o != NULL) {
        pm__out_t *next = o->next;
        if (C.nfl == C.capfl) {
            int cap = C.capfl ? C.capfl * 2 : 64;
            pm__out_t **f = realloc(C.fl, (size_t)cap * sizeof *f);
            if (f == NULL)
                out_of_memory("tracking messages");
            C.fl = f;
            C.capfl = cap;
        }
        if (o->bo != NULL && o->addr == NULL)
            pm__bulk_frag_prepare(o);
        MPI_Isend(o->addr, (int)o->count, o->type, o->dest, o->tag,
                  o->on_bulk ? pm__bulk_comm : MPI_COMM_WORLD, &o->req);
        C.fl[C.nfl++] = o;
        n += !housekeeping(o->tag);
        o = next;
    }
    return n;
}

static int finish_sends(void)
{
    int n = 0;
    for (int i = 0; i < C.nfl;) {
        int done = 0;
        pm__out_t *o = C.fl[i];
        MPI_Test(&o->req, &done, MPI_STATUS_IGNORE);
        if (!done) {
            i++;
            continue;
        }
        C.fl[i] = C.fl[--C.nfl];
        n += !housekeeping(o->tag);
        if (o->type != MPI_BYTE)
            MPI_Type_free(&o->type);
        if (o->bo != NULL)
            pm__bulk_frag_sent(o);
        free(o->owned);
        free(o);
    }
    return n;
}

static int sends_pending(void)
{
    pthread_mutex_lock(&C.lock);
    int queued = C.head != NULL;
    pthread_mutex_unlock(&C.lock);
    return queued || C.nfl > 0 || pm__bulk_busy();
}

/* ---- receiving ---------------------------------------------------------- */

static void shutdown_received(void)
{
    pthread_mutex_lock(&pm__rt.lock);
    pm__rt.shutdown_received = 1;
    pthread_cond_broadcast(&pm__rt.done_cv);
    pthread_mutex_unlock(&pm__rt.lock);
}

/* Host 0 found a host dead: say why and end this process now. */
static void abort_received(int src, pm__rbuf_t *m)
{
    char why[256];
    pm__rbuf_str(m, why, sizeof why);
    pm__error("host %d ended the job: %s", src, m->bad ? "a host failed" : why);
    fflush(stdout);
    _exit(1);
}

static int receive(void)
{
    int n = 0, flag = 1;
    while (flag) {
        MPI_Status st;
        MPI_Message msg;
        /* A matched probe: the receive below takes this very message
         * without matching it a second time. */
        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st);
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
        MPI_Mrecv(data, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        C.last_heard[st.MPI_SOURCE] = pm__now();
        pm__rbuf_t r = {.p = data, .n = (size_t)count};
        if (pm__bulk_take_trailer(&r, st.MPI_SOURCE) != 0)
            r.bad = true;
        else if (st.MPI_TAG == PM__TAG_SHUTDOWN)
            shutdown_received();
        else if (st.MPI_TAG == PM__TAG_ABORT)
            abort_received(st.MPI_SOURCE, &r);
        else if (st.MPI_TAG >= PM__TAG_PING && st.MPI_TAG < PM__TAG_LAST &&
                 handlers[st.MPI_TAG - PM__TAG_PING] != NULL)
            handlers[st.MPI_TAG - PM__TAG_PING](st.MPI_SOURCE, &r);
        pm__bulk_after_handler(&r);
        if (r.bad)
            pm__error("malformed message (tag %d, %d bytes) from host %d ignored", st.MPI_TAG, count,
                      st.MPI_SOURCE);
        free(data);
        n += !housekeeping(st.MPI_TAG);
    }
    return n;
}

/* ---- liveness ----------------------------------------------------------- */

/* Whether the launcher keeps a job going when its processes exit nonzero
 * (Open MPI's mpirun --enable-recovery): it then exits 0 whatever they
 * return, even after MPI_Abort. */
static bool launcher_tolerates_loss(void)
{
    const char *v = getenv("OMPI_MCA_orte_enable_recovery");
    if (v == NULL)
        v = getenv("PRTE_MCA_prte_enable_recovery");
    return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

/* Process `pid`'s command name and parent, from /proc; false if unknown. */
static bool proc_stat(pid_t pid, char *comm, size_t size, pid_t *parent)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* pid (comm) state ppid ...; comm may hold spaces and parentheses. */
    char *open = strchr(line, '('), *close = strrchr(line, ')');
    int ppid = 0;
    if (open == NULL || close == NULL || close < open || sscanf(close + 1, " %*c %d", &ppid) != 1)
        return false;
    snprintf(comm, size, "%.*s", (int)(close - open - 1), open + 1);
    *parent = (pid_t)ppid;
    return true;
}

/* In a child of the exiting process: once the parent is gone (and a
 * moment later, so that whatever waits for it sees its status), stop the
 * launcher. Only async-signal-safe calls. */
static void stop_after_parent(pid_t parent, pid_t launcher)
{
    for (int i = 0; i < 500 && getppid() == parent; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    nanosleep(&(struct timespec){.tv_nsec = 200000000}, NULL);
    kill(launcher, SIGTERM);
    _exit(0);
}

/*
 * A launcher that tolerates lost processes would report the job a success:
 * stop the nearest launcher process above this one (mpirun on its node, or
 * the daemon that started this process), which makes mpirun exit nonzero.
 * A child does it once this process has exited, so the launcher records
 * its status first.
 */
static void fail_the_launcher(void)
{
    if (!launcher_tolerates_loss())
        return;
    static const char *const names[] = {"mpirun", "mpiexec", "orterun", "orted", "prterun", "prte", "prted"};
    pid_t pid = getppid(), parent;
    char comm[64];
    for (int up = 0; up < 8 && pid > 1 && proc_stat(pid, comm, sizeof comm, &parent); up++, pid = parent) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strcmp(comm, names[i]) == 0) {
                pm__error("the launcher tolerates lost processes (--enable-recovery): stopping it "
                          "(%s, pid %d) so that the job does not exit 0", comm, (int)pid);
                pid_t me = getpid();
                fflush(stderr);
                if (fork() == 0)
                    stop_after_parent(me, pid);
                return;
            }
        }
    }
}

/* A host fell silent: MPI cannot go on without it. Host 0 tells every
 * other host to exit nonzero (a launcher that tolerates lost processes, such
 * as mpirun --enable-recovery, would not stop them), waits a moment for the
 * notices to leave, and exits nonzero itself. */
static void host_lost(int dead, double silent)
{
    char why[160];
    snprintf(why, sizeof why, "host %d has not answered for %.0f s (killed, crashed or unreachable)",
             dead, silent);
    pm__error("%s; ending the job (PMLIB_HOST_TIMEOUT sets the limit)", why);
    if (pm__rt.host == 0) {
        if (lost_fn != NULL)
            lost_fn(dead);
        for (int h = 1; h < pm__rt.nhosts; h++) {
            if (h == dead)
                continue;
            pm__wbuf_t b = {0};
            pm__wbuf_str(&b, why);
            pm__comm_send(h, PM__TAG_ABORT, &b);
        }
        double until = pm__now() + 2 * PM__HEARTBEAT;
        while (pm__now() < until) {
            start_sends();
            finish_sends();
            if (!sends_pending())
                break;
            sched_yield();
        }
        if (launcher_tolerates_loss()) /* the others log why before the launcher stops them */
            nanosleep(&(struct timespec){.tv_nsec = 500000000}, NULL);
    }
    fflush(stdout);
    fail_the_launcher();
    _exit(1);
}

/* Host 0 and every other host exchange heartbeats; one that falls silent
 * ends the whole job. */
static void heartbeat(double now)
{
    if (now - C.last_beat >= PM__HEARTBEAT) {
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
        if (now - C.last_heard[h] > C.host_timeout)
            host_lost(h, now - C.last_heard[h]);
    }
}

/* A thread idle this long (seconds) with no task running naps
 * PM__IDLE_NAP between rounds instead of 1 ms: each round polls MPI,
 * some 30 us of CPU, and an idle process should use next to none. The
 * first message from another host after such a pause waits at most that
 * long; one queued here wakes the thread at once. */
#define PM__IDLE_LONG 1.0
#define PM__IDLE_NAP 5e-3

/* A crowded host's naps while a task spans hosts: a quarter of the time
 * the thread has been idle, from 10 us to 1 ms. A message then waits at
 * most a quarter longer than the thread had been idle, and a chunk of
 * milliseconds sees about one wake-up per millisecond: each wake-up
 * preempts a stub, and on a 2-core machine with 2 ranks naps of 10 to
 * 50 us made PageRank's chunks 1.5 times slower. */
#define PM__CROWDED_NAP_MIN 10e-6
#define PM__CROWDED_NAP_MAX 1e-3

/* How long to nap after a round that did nothing (0: only yield the core).
 * Bytes on the wire are progressed without a pause. A reply awaited or a
 * task spanning hosts keeps the thread polling. On a machine with fewer
 * cores than pmlib's busy threads, while a task spans hosts: where a rank
 * has one core (2 ranks on 2 cores) the thread polls, yielding that core
 * between rounds, since it can only run on the stubs' core anyway and a
 * yielding thread takes next to nothing from a stub there, where a nap's
 * wake-up preempts it; naps made a Task Bench timestep spanning 2 hosts
 * take 550 us for 40 us of work. With more cores per rank it naps, so as
 * not to take a core from a stub (polling cost 2 ranks of 8 stubs on 16
 * cores 15 to 40%). Otherwise, after the spell, naps grow to 1 ms, and
 * after a second to 5 ms. */
static double nap_length(double idle, bool busy)
{
    const double spin = (double)pm__rt.spin_ns * 1e-9; /* PMLIB_SPIN_US */
    if (busy)
        return 0;
    /* Crowded now: the stubs awake leave no core of this rank spare. A
     * host of 32 cores with 2 ranks of 16 stubs counts as crowded, but
     * with its CPU stubs asleep under a GPU task it is not, and naps of up
     * to 1 ms made each message of PageRank's steals and reports wait 0.1
     * to 0.9 ms (2 ranks x 1 GPU). */
    bool crowded = pm__rt.crowded && atomic_load(&C.active) > 0 && pm__stubs_spare() < 1;
    if (crowded && atomic_load_explicit(&pm__rt.spin_room, memory_order_relaxed) <= 0)
        return 0;
    if (atomic_load(&C.expect) > 0)
        return crowded ? 5e-6 : 0;
    if (crowded)
        return fmin(fmax(0.25 * idle, PM__CROWDED_NAP_MIN), PM__CROWDED_NAP_MAX);
    if (idle < spin)
        return 0;
    if (atomic_load(&C.active) > 0)
        return 20e-6;
    if (idle < spin + 0.01)
        return idle < spin + 0.001 ? 20e-6 : 100e-6;
    return idle < spin + PM__IDLE_LONG ? 1e-3 : PM__IDLE_NAP;
}

/* A contended process's shortest nap: each wake-up preempts whatever runs
 * on the core, possibly a stub of this job. */
#define PM__CONTENDED_NAP_MIN 100e-6

/* Naps (a queued send ends the nap at once) or polls on: yielding the
 * core where the stubs awake leave none of the rank's spare (one may need
 * this core), with a pause otherwise (a yield costs a system call, and
 * each hop of a message waited for it: 2 ranks on 32 cores, a round trip
 * of 2 x MPI + 4.3 to 4.8 us, 2.4 to 3.6 without). busy: sends or
 * payloads in flight. Where the process is contended (other
 * programs keep the cores: pm__contended), it naps a quarter of the time
 * it has been idle, 100 us to 1 ms, instead of yielding: each yield would
 * cost their time slice, and a fetch crossing two comm threads took
 * milliseconds (tests/mpi/prefetch beside two busy loops on 2 cores:
 * 257 s, 0.85 s alone). */
static void nap(double now, double idle, bool busy)
{
    double s = nap_length(idle, busy);
    if (s <= 0) {
        if (!pm__contended(now)) {
            if (pm__stubs_spare() >= 1)
                pm__cpu_relax();
            else
                pm__yield();
            return;
        }
        s = fmin(fmax(0.25 * idle, PM__CONTENDED_NAP_MIN), PM__CROWDED_NAP_MAX);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(s * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&C.lock);
    if (C.head == NULL && !C.stop) {
        C.asleep = 1;
        pthread_cond_timedwait(&C.wake, &C.lock, &ts);
        C.asleep = 0;
    }
    pthread_mutex_unlock(&C.lock);
}

/* One round: sends, payloads, receives (and their handlers), remote tasks
 * waiting to start; the count of messages that were work. Progress lock
 * held. */
static int round_locked(void)
{
    double start = pm__now();
    C.round_gap = C.round_end > 0 && start > C.round_end ? start - C.round_end : 0;
    int work = start_sends();
    work += finish_sends();
    work += pm__bulk_progress();
    int got = receive();
    if (round_fn != NULL)
        round_fn();
    if (got > 0) {
        /* What the handlers queued (a reply, a payload) leaves now, and a
         * payload they began to take is progressed at once, instead of a
         * round later. */
        if (atomic_load_explicit(&C.queued, memory_order_relaxed))
            work += start_sends();
        work += pm__bulk_progress();
    }
    C.round_end = pm__now();
    return work + got;
}

double pm__comm_round_gap(void)
{
    return C.round_gap;
}

/* A stub's round, where stubs make progress (the caller read C.stub_polls
 * with acquire order, so it sees the comm state pm__comm_start set up
 * before the flag; stubs start first). None while another thread makes
 * one, unless wait_for_queued and sends are queued: then after it. */
static int stub_round(bool wait_for_queued)
{
    if (pthread_mutex_trylock(&progress) != 0) {
        if (!wait_for_queued || !atomic_load_explicit(&C.queued, memory_order_relaxed))
            return 0;
        pthread_mutex_lock(&progress);
    }
    int work = round_locked();
    pthread_mutex_unlock(&progress);
    return work;
}

/* Only where the rank has cores of its own: unbound, a stub that keeps its
 * core for 20 us may keep it from another rank's comm thread (2 ranks on
 * 2 cores, unbound: in one sample half the runs of bench/transport moved
 * 64 KiB at 21% of MPI's rate, against 57 to 64% yielding at every look;
 * in another the rule did better; bound, it did better in every one).
 * Unbound ranks' comm threads and stubs now stay on their share of the
 * cores, so a waiter bound there keeps its core as a bound rank's does
 * (2 ranks on cpu2, unbound: a round trip of 2 x MPI + 1.3 us instead of
 * 3.7 to 4.3, 64 KiB at 80 to 82% of MPI's rate instead of 61 to 65%). */
bool pm__comm_spin(bool (*done)(const void *arg), const void *arg, uint64_t ns)
{
    return atomic_load_explicit(&C.stub_polls, memory_order_relaxed) && (C.own_cores || pm__own_core)
               ? pm__spin_self(done, arg, ns)
               : pm__spin_for(done, arg, ns);
}

int pm__comm_core_sharers(void)
{
    return C.core_sharers > 1 ? C.core_sharers : 1;
}

int pm__comm_poll(void)
{
    return atomic_load_explicit(&C.stub_polls, memory_order_acquire) ? stub_round(false) : 0;
}

static void *comm_main(void *arg)
{
    pm__internal_thread = 1;
    (void)arg;
    /* Naps of tens of microseconds should last about that long. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    /* Where a rank has one core for all its threads and the launcher left
     * the ranks unbound, the thread stays on its rank's core, as the stubs
     * do: its waiters may then keep that core between looks (below). */
    if (pm__rt.crowded && atomic_load(&pm__rt.spin_room) <= 0)
        pm__comm_bind_share();
    double idle_since = pm__now();
    for (;;) {
        pthread_mutex_lock(&progress);
        int work = round_locked();
        /* The round's end is now, as far as what follows can tell: an
         * idle round costs two readings of the clock, not five. */
        const double now = C.round_end;
        heartbeat(now);
        bool busy = C.nfl > 0 || pm__bulk_busy();
        pthread_mutex_unlock(&progress);
        if (__atomic_load_n(&C.stop, __ATOMIC_ACQUIRE)) {
            pthread_mutex_lock(&progress);
            bool pending = sends_pending();
            pthread_mutex_unlock(&progress);
            if (!pending)
                break;
        }
        if (work)
            idle_since = now;
        else
            nap(now, now - idle_since, busy);
    }
    return NULL;
}

/* ---- start and stop ------------------------------------------------------ */

/* PMLIB_HOST_TIMEOUT: seconds, finite, at least two heartbeats. */
static double host_timeout_from_env(void)
{
    const char *v = getenv("PMLIB_HOST_TIMEOUT");
    if (v == NULL || *v == '\0')
        return PM__HOST_TIMEOUT_DEFAULT;
    char *end;
    double t = strtod(v, &end);
    if (*end != '\0' || !isfinite(t) || t < 2 * PM__HEARTBEAT) {
        pm__warn("PMLIB_HOST_TIMEOUT=%s is not a finite number of seconds of at least %.0f "
                 "(twice the %.0f s heartbeat); using %.0f", v, 2 * PM__HEARTBEAT, PM__HEARTBEAT,
                 PM__HOST_TIMEOUT_DEFAULT);
        return PM__HOST_TIMEOUT_DEFAULT;
    }
    return t;
}

int pm__comm_start(const pm__host_info_t *me)
{
    C.host_timeout = host_timeout_from_env();
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
    if (MPI_Comm_dup(MPI_COMM_WORLD, &pm__bulk_comm) != MPI_SUCCESS)
        return PM__FAIL(PM_EMPI, "pm_init: cannot make the communicator for payloads");
    int rc = pm__bulk_start();
    if (rc != 0)
        return rc;
    pm__bulk_probe();
    pm__shm_probe();
    pthread_mutex_init(&C.lock, NULL);
    pthread_cond_init(&C.wake, NULL);
    if (pthread_create(&C.thread, NULL, comm_main, NULL) != 0)
        return PM__FAIL(PM_ENOMEM, "pm_init: cannot start the comm thread");
    pthread_setname_np(C.thread, "pmlib-comm");
    C.running = 1;
    atomic_store(&C.stub_polls, pm__rt.crowded && atomic_load(&pm__rt.spin_room) <= 0 &&
                                    pm__env_uint("PMLIB_STUB_POLLS", "0 or 1", 0, 1, 1) != 0);
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

void pm__comm_stop(void)
{
    atomic_store(&C.stub_polls, false);
    if (C.running) {
        pthread_mutex_lock(&C.lock);
        __atomic_store_n(&C.stop, 1, __ATOMIC_RELEASE);
        pthread_cond_signal(&C.wake);
        pthread_mutex_unlock(&C.lock);
        pthread_join(C.thread, NULL);
        pthread_mutex_destroy(&C.lock);
        pthread_cond_destroy(&C.wake);
        pm__bulk_stop();
        MPI_Comm_free(&pm__bulk_comm);
        C.running = 0;
    }
}

void pm__comm_finalize(void)
{
    pm__comm_stop();
    pm__shm_fini();
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
