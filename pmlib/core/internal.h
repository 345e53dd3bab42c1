/*
 * Internal declarations shared by the runtime's layers. Never installed.
 * Internal non-static names start with pm__.
 */
#ifndef PMLIB_CORE_INTERNAL_H
#define PMLIB_CORE_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>

#include "pmlib.h"

/* ---- logging (core/log.c) ---------------------------------------------- */

enum pm__log_level { PM__LOG_ERROR = 0, PM__LOG_WARN, PM__LOG_INFO, PM__LOG_DEBUG };

extern atomic_int pm__log_threshold;
void pm__log_init(void);
void pm__log_set_host(int host);
void pm__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pm__error(...) pm__log(PM__LOG_ERROR, __VA_ARGS__)
#define pm__warn(...) pm__log(PM__LOG_WARN, __VA_ARGS__)
#define pm__info(...)                                                         \
    do {                                                                      \
        if (pm__log_threshold >= PM__LOG_INFO) pm__log(PM__LOG_INFO, __VA_ARGS__); \
    } while (0)
#ifdef NDEBUG
#define pm__debug(...) ((void)0)
#else
#define pm__debug(...)                                                        \
    do {                                                                      \
        if (pm__log_threshold >= PM__LOG_DEBUG) pm__log(PM__LOG_DEBUG, __VA_ARGS__); \
    } while (0)
#endif

/* A user mistake: log one line (what and how to fix) and return the code. */
#define PM__FAIL(code, ...) (pm__error(__VA_ARGS__), (code))

double pm__now(void);
/* Sets up pm__now's clock, once per process (core/log.c; pm_init). */
void pm__clock_init(void);
void *pm__aligned_alloc(size_t bytes);
/* Zeroed memory for large buffers filled piece by piece (core/log.c);
 * freed by pm__big_free with the same size. */
void *pm__big_calloc(size_t bytes);
void pm__big_free(void *p, size_t bytes);

/* A lock for short sections that rarely meet (a task's error and pieces, a
 * stub's range of chunks): all zero is unlocked, so a zeroed block needs no
 * set-up and nothing to tear down. A waiter spins, then yields its core. */
typedef struct pm__lock {
    atomic_int held;
} pm__lock_t;
void pm__lock_wait(pm__lock_t *l);
static inline void pm__lock(pm__lock_t *l)
{
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire) != 0)
        pm__lock_wait(l);
}
static inline void pm__unlock(pm__lock_t *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}
/* A whole number from the environment (core/runtime.c): `def` when `name`
 * is unset or empty, its value when that is from min to max, else `def`
 * after the warning "NAME=V is not WHAT from MIN to MAX; using DEF". */
uint64_t pm__env_uint(const char *name, const char *what, uint64_t min, uint64_t max,
                      uint64_t def);

/* ---- handles (core/handles.c) ------------------------------------------ */

/* Maps 64-bit handles (generation << 32 | slot + 1) to objects, so that a
 * released handle is recognised instead of being dereferenced. */
typedef struct pm__handle_table {
    void **obj;
    uint32_t *gen;
    uint32_t *free_list;
    uint32_t nfree, cap;
} pm__handle_table_t;

uint64_t pm__handle_add(pm__handle_table_t *t, void *obj);
void *pm__handle_get(const pm__handle_table_t *t, uint64_t h);
void pm__handle_remove(pm__handle_table_t *t, uint64_t h);
void pm__handle_table_free(pm__handle_table_t *t);

/* ---- memories (core/memory.c) ------------------------------------------ */

struct pm__task;
/* A task's place in a list of tasks, and such a list (runtime lock). */
typedef struct pm__tlink {
    struct pm__task *prev, *next;
    bool on;
} pm__tlink_t;
typedef struct pm__tlist {
    struct pm__task *head, *tail;
} pm__tlist_t;

/* A task's place among the readers of one of its memories. */
typedef struct pm__reader {
    struct pm__task *task;
    struct pm__reader *prev, *next;
    bool linked;
} pm__reader_t;

typedef struct pm__memory {
    uint64_t handle;
    void *data;
    size_t bytes;
    uint64_t version;
    int users; /* unfinished tasks naming this memory (runtime lock) */
    bool pinned; /* page-locked for the GPUs */
    /* Several hosts, all on this machine: its bytes live in a memory file
     * host 0 made (shm_fd there) and the other hosts map as their mirror,
     * so their subtasks read and write host 0's bytes in place. */
    bool shared;
    int shm_fd;
    /* Dependencies (runtime lock): the last unfinished task that writes
     * it, and the unfinished tasks that read it since that one was
     * submitted. A new reader waits for the writer; a new writer waits for
     * those readers, or for the writer when there are none. */
    struct pm__task *last_writer;
    pm__reader_t *readers;
    /* Several hosts (data/data.c): written ranges stay where written
     * (pm_memory_set_lazy); host 0's directory of the ranges other hosts
     * hold (NULL until the memory is made lazy). */
    bool lazy;
    struct pm__place *place;
    /* Host 0, several hosts: per host, the ranges sent to it with tasks at
     * the version `pushed_version` (runtime lock; NULL until the first). */
    struct pm__acc *pushed;
    uint64_t pushed_version;
} pm__memory_t;

/* Looks up a memory under the runtime lock; NULL if the handle is stale. */
pm__memory_t *pm__memory_lookup_locked(pm_memory_t m);
void pm__memory_free_all(void);

/* ---- callbacks (core/registry.c) --------------------------------------- */

#define PM__NAME_MAX 64

/* The performance model of a callback set (sched/model.h): how long a
 * subtask takes on each device, across tasks and runs; the scheduler's
 * guess before a stub has timed a chunk itself. */
struct pm__model;

typedef struct pm__callbacks {
    char name[PM__NAME_MAX];
    uint32_t name_hash; /* pm__name_hash(name): a short key for it (sched/hosts.c) */
    pm_callbacks_t cb;
    struct pm__model *model; /* stable while registered; NULL: none */
    /* The registered set itself (stable from registration to pm_finalize):
     * a task's copy names its set by this pointer, not by its name. */
    const struct pm__callbacks *set;
} pm__callbacks_t;

/* FNV-1a of a callback set's name. */
static inline uint32_t pm__name_hash(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p != 0; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* The set registered as `name` (stable until pm_finalize); NULL if none. */
const pm__callbacks_t *pm__registry_get(const char *name);
void pm__registry_clear(void);
/* Whether any callback set registered so far has a cuda callback. */
bool pm__registry_has_cuda(void);
/* Whether new host memory should be page-locked for the GPUs (core/memory.c). */
bool pm__want_pinned(void);

/* ---- subscriptions (core/subscribe.c) ---------------------------------- */

/* One subscription: `count` blocks of `block` bytes every `stride` bytes. */
typedef struct pm__sub {
    uint64_t offset, block, stride, count;
    uint8_t mem, access;
} pm__sub_t;

/* The subscriptions of the subtasks of one chunk, in id order: those of
 * subtask (first + k) are recs[start[k] .. start[k+1]). start is NULL until
 * the chunk is subscribed; it points into the task's chunk_subs allocation
 * (own false) until the records outgrow the room there. */
typedef struct pm__chunk_subs {
    uint32_t *start;
    pm__sub_t *recs;
    uint32_t n, cap;
    bool own; /* start is an allocation of its own */
} pm__chunk_subs_t;

struct pm__task;
struct pm_subscription {
    struct pm__task *task;
    pm__chunk_subs_t *subs;
    uint64_t id;
    int err;
};

/* Sets up t->chunk_subs: with room for the first records of every chunk in
 * the same allocation when the task is small. */
int pm__subs_alloc(struct pm__task *t);
int pm__subscribe_chunk(struct pm__task *t, uint64_t chunk);
/* Subscriptions kept across tasks (host 0): reuse gives a new task the
 * checked subscriptions of an earlier task of the same shape (true: its
 * subscribe phase is skipped); keep offers a task's checked ones to later
 * tasks; release drops the task's share of them. */
typedef struct pm__subs_set pm__subs_set_t;
bool pm__subs_reuse(struct pm__task *t);
void pm__subs_keep(struct pm__task *t);
void pm__subs_release(struct pm__task *t);
void pm__subs_cache_clear(void);
int pm__subscribe_check_overlap(struct pm__task *t);
void pm__chunk_subs_free(pm__chunk_subs_t *cs);
/* Frees a task's chunk table (from pm__subs_alloc). */
void pm__subs_table_free(pm__chunk_subs_t *table);

/* ---- tasks (core/task.c) ----------------------------------------------- */

enum pm__task_state {
    PM__TASK_WAITING, /* earlier tasks on its memories are unfinished */
    PM__TASK_PREPARE, /* subscribe callbacks are running */
    PM__TASK_RUN,     /* subtasks are running */
    PM__TASK_DONE
};

struct pm__sched_state;
struct pm__reduce_tree;

/* Per-stub counters of one task; written by that stub only. One cache
 * line: with 16 stubs, two lines each made a task without memories 4.5 KB
 * (_Static_assert below). Steals and cache hits of one stub in one task
 * stay far below 2^32 (each is a take of a range or a chunk's input). */
typedef struct pm__stub_counts {
    _Alignas(64) uint64_t subtasks;
    uint32_t steals, gpu_cache_hits;
    uint64_t bytes_to_gpu, bytes_from_gpu, bytes_gpu_peer;
    atomic_uint_fast64_t chunk_ns; /* running average time per chunk, read by others */
    atomic_uint_fast64_t run_ns;   /* the same without waiting for inputs (other hosts) */
    /* The task's gen once the stub zeroed them for it (pm__counts_own):
     * a reused block holds another task's counters, and zeroing every
     * stub's line at submit cost a cache miss per stub. */
    atomic_uint_fast64_t gen;
} pm__stub_counts_t;
_Static_assert(sizeof(pm__stub_counts_t) == 64, "a stub's counters of a task fill one cache line");

/* Counters other hosts report when they drain. */
enum pm__remote_count {
    PM__RC_STEALS, PM__RC_STEALS_REMOTE, PM__RC_TO_GPU, PM__RC_FROM_GPU, PM__RC_HITS,
    PM__RC_COPIES, PM__RC_BYTES_MOVED, PM__RC_BYTES_SENT, PM__RC_GPU_PEER, PM__REMOTE_COUNTS
};

/* A task's copy of its descriptor: the public one's fields, with room for
 * only the task's own memories (kept in the task's block). */
typedef struct pm__task_desc {
    const char *callbacks;
    uint64_t subtasks;
    int nmem;
    pm_task_memory_t *mem;
    const void *conf;
    size_t conf_bytes;
    unsigned flags;
    pm_sched_t sched;
    uint64_t grain;
    int devices;
    int min_cc;
} pm__task_desc_t;

/* Host 0: what another host ran of a task, against what the costs
 * expected (sched/hosts.c learns from the difference). */
typedef struct pm__host_ran {
    double chunk_s;       /* its devices' seconds per chunk at the split (0: unknown) */
    double after;         /* seconds of earlier tasks' work placed there before it */
    atomic_uint chunks;   /* chunks it reported */
    _Atomic double last;  /* when the bytes of its last chunk had landed here */
} pm__host_ran_t;

typedef struct pm__task {
    /* One line: what the stub that ends a task writes and pm_task_release
     * reads (on 16 cores these were four lines, each a miss at release and
     * again when the block was reused). The block's free-list link
     * overwrites `handle` while the block is unused. */
    _Alignas(64) uint64_t handle;
    /* This use of the block, counted per block: read before the head is
     * zeroed for the next use, on the line the free list's link was. */
    uint64_t gen;
    uint64_t seq; /* submit order */
    int state;    /* enum pm__task_state; written under the runtime lock */
    /* References to the block: the program's (dropped by pm_task_release)
     * and a straggler copy's or a losing straggler's (exec/guard.c), which
     * may still run after the task ended. The last one frees it. */
    atomic_int holds;
    int waiters;        /* threads in pm_task_wait on it (runtime lock) */
    atomic_int started; /* a subtask of it began */
    /* Chunks not yet done plus remote hosts not yet drained; whoever takes
     * it to zero finishes the task (one counter, so no one reads the task
     * after another thread may have finished it). */
    atomic_uint_fast64_t outstanding;
    atomic_uint_fast64_t subtasks_done; /* for the progress line */
    double t_end;

    pm__task_desc_t desc;
    void *conf; /* conf_room, or allocated when larger */
    const pm__callbacks_t *cbs; /* the registered set (stable until pm_finalize) */
    pm__memory_t **mems; /* desc.nmem of them, in the task's block */
    int nred;                           /* reduced memories */

    atomic_int ndeps; /* unfinished earlier tasks it waits for (+1 while held for subscribing at submit) */
    struct pm__task **dependents; /* dep_room until more are needed */
    int ndependents, cap_dependents;
    pm__reader_t *readers; /* per memory: among its readers (in the task's block) */
    pm__tlink_t alink;    /* among the unfinished tasks, submit order */
    pm__tlink_t rlink[2]; /* on the ready lists: [0] CPU, [1] GPU */
    /* Whether it is on a ready list (atomic; set under the ready lock, and
     * cleared as the last touch of the task there), read unlocked by a
     * task that ends without the runtime lock. */
    unsigned char listed;
    unsigned char run_kinds; /* ready lists while running: bit 0 CPU, bit 1 GPU */
    unsigned char all_kinds; /* ready lists while subscribing: every stub's kind */
    unsigned char every_kind; /* pull, and every stub of the kind may run it: bit 0 CPU, bit 1 GPU */
    /* Pull, one chunk for CPU stubs on one host: 1 until a stub takes it;
     * such a task has no scheduling state (sched NULL, sched/pull.c). */
    atomic_uchar one_left;
    /* The device filter's answers, asked once per task and device. */
    signed char filter_cpu; /* -1: not asked yet */
    unsigned char nfilter_gpu; /* answers in filter_gpu */
    bool lean;         /* its block has no room for a scheduling state (core/task.c, lean_task) */
    struct pm__task *hnext; /* sequence number table */

    uint64_t grain, nchunks;
    uint64_t lo, hi; /* this host's initial share of the chunks */
    /* prepare phase */
    pm__chunk_subs_t *chunk_subs; /* NULL when nothing subscribes */
    pm__subs_set_t *subs_set;     /* when chunk_subs are shared with other tasks */
    uint32_t subs_room;           /* bytes of room per chunk after chunk_subs[nchunks] (0: none) */
    bool prepared;                /* subscriptions known and checked already */
    bool subs_unkept;             /* found none to reuse, and its own will not be kept (core/subscribe.c) */
    bool sched_slots;  /* a plan of this task wrote stubs' slots (sched/ranges.c) */
    bool in_slab;      /* its block was cut from a slab (core/task.c): never freed alone */
    /* run phase */
    const struct pm__sched_policy *policy;
    struct pm__sched_state *sched;
    void *sched_space; /* room for the policy's state, in the task's block */
    void *sched_heap;  /* what the policy allocated beyond it (freed by its fini) */
    struct pm__reduce_tree *tree;
    pm__stub_counts_t *counts;       /* per stub: see pm__counts_own */
    unsigned char *runnable;         /* per stub: it may run the task (asked once per task); NULL: run_kinds says */
    atomic_uint_fast64_t copies_local; /* subtasks run again as copies on this host */

    /* several hosts: what a stub reads at each chunk (zero on one host) */
    bool remote;             /* run here on behalf of host 0 */
    bool home_dir;           /* host 0: a memory's ranges were held by other hosts as it started (see lazy_mask) */
    /* Output placed by pm_redistribute (core/redistribute.c), any host. */
    pm__lock_t redist_lock;
    struct pm__piece *pieces; /* redistributed output, unsorted */
    atomic_uint_fast64_t piece_seq;
    size_t npieces, cap_pieces;
    pm_memory_t redistributed;

    /* outcome */
    pm__lock_t err_lock;
    int status;
    uint64_t failed_subtask;
    int failed_host;
    uint64_t nfailed;
    char *message; /* what went wrong with failed_subtask (NULL: nothing) */
    double t_submit, t_start;

    /*
     * Not zeroed for each task (core/task.c, block_get): on 16 cores each
     * line of the head written at submit cost about 30 ns a task, the
     * block being out of every cache with many tasks in flight.
     */
    /* Read only through a field above: `conf` points here when the
     * configuration fits, nfilter_gpu counts the answers. */
    _Alignas(64) unsigned char conf_room[64];
    struct { short major, minor; bool ok; } filter_gpu[8];
    struct pm__task *dep_room[2]; /* `dependents` until more are needed */
    atomic_uint_fast64_t prep_next, prep_done; /* with chunk_subs: zeroed by pm__subs_alloc */
    /* Several hosts only: never written on one host, where they stay zero
     * as a fresh block has them (checked in AddressSanitizer builds). */
    _Alignas(64) uint64_t *host_lo; /* host 0: each host's initial share */
    uint64_t *host_hi;
    /* Multi-assign on hosts other than 0: the chunk each stub runs
     * (UINT64_MAX: none), when it started, and whether another host runs
     * a copy of it. */
    atomic_uint_fast64_t *running, *running_since;
    atomic_uchar *copied;
    bool fetched;            /* another host: inputs of it were asked for (atomic, data/data.c) */
    double woke_late;        /* another host: how long its task message may have waited there */
    double *host_busy;           /* host 0: seconds its share adds to each host's backlog */
    pm__host_ran_t *host_run;    /* host 0: what each host ran of the task, and by when */
    unsigned char *host_fed;     /* host 0, per host (rt lock): 0 no chunk of it, 1 a first
                                  * share, 2 reported one, 3 chunks by stealing, 4 a chunk
                                  * to measure it again (pm__hosts_probe_due), 5 that
                                  * chunk reported */
    bool hosts_by_cost;          /* host 0: shares by cost; hosts without one never see it */
    bool no_grants;              /* host 0 grants other hosts no more chunks (told with the task) */
    bool comm_on;                /* host 0: it keeps the comm thread polling (pm__comm_active) */
    double xfer_common, xfer_in, xfer_out; /* host 0: bytes per chunk (sched/hosts.h) */
    int inprogress;          /* rt lock: chunks held by this host's stubs (remote tasks) */
    int steal_pending, steal_victim, steal_tried, drained, drain_sent; /* rt lock */
    double steal_since; /* the pending ask went out (traced only; rt lock) */
    int copy_pending, copy_tried, copies_done, copies;                 /* rt lock */
    atomic_uchar *done_map; /* host 0: chunks reported done (first report wins) */
    atomic_uint_fast64_t subtasks_remote, subtasks_remote_gpu, steals_remote, bytes_moved, bytes_sent;
    atomic_uint_fast64_t remote_counts[PM__REMOTE_COUNTS]; /* host 0: summed over hosts */
    /* Lazy memories (data/data.c): bit m when memory m's writes stay where
     * written; in home_mask too when they also go home, where host 0's own
     * chunks read what other hosts held of that memory before (they will
     * not wait for it); home_dir (host 0) when a memory of the task had
     * ranges held by other hosts as it started, so host 0's chunks fetch
     * and record. */
    uint32_t lazy_mask, home_mask;
    /* Bytes by host (several hosts; 3 x nhosts): [0, n) what this host
     * received from each host; host 0 also sums the other hosts' reports:
     * [n, 2n) sent by each host, [2n, 3n) received by each host. */
    atomic_uint_fast64_t *xbytes;
} pm__task_t;
_Static_assert(offsetof(pm__task_t, desc) == 64, "what a task's end writes and its release reads fill its first line");
/* Zeroed for each task: up to the configuration's room; on several hosts
 * also from host_lo on (core/task.c). */
#define PM__TASK_ZEROED offsetof(pm__task_t, conf_room)
#define PM__TASK_HOSTS offsetof(pm__task_t, host_lo)

/* Stub s's counters in task t, zeroed at the stub's first use of them in
 * this task; only stub s calls it (one writer per line). */
static inline pm__stub_counts_t *pm__counts_own(pm__task_t *t, int s)
{
    pm__stub_counts_t *c = &t->counts[s];
    if (atomic_load_explicit(&c->gen, memory_order_relaxed) != t->gen) {
        c->subtasks = c->steals = 0;
        c->bytes_to_gpu = c->bytes_from_gpu = c->gpu_cache_hits = c->bytes_gpu_peer = 0;
        atomic_store_explicit(&c->chunk_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&c->run_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&c->gen, t->gen, memory_order_release);
    }
    return c;
}

/* Stub s's counters in task t for any thread; NULL while the stub has
 * none (all zero). */
static inline const pm__stub_counts_t *pm__counts_peek(const pm__task_t *t, int s)
{
    const pm__stub_counts_t *c = &t->counts[s];
    return atomic_load_explicit(&c->gen, memory_order_acquire) == t->gen ? c : NULL;
}

/* What went wrong with a failed task ("" when nothing did). */
static inline const char *pm__task_message(const pm__task_t *t)
{
    return t->status != 0 && t->message != NULL ? t->message : "";
}
#define PM__MESSAGE_MAX 256

/* The subtasks [first, last) of a chunk. */
static inline void pm__chunk_span(const pm__task_t *t, uint64_t chunk, uint64_t *first, uint64_t *last)
{
    *first = chunk * t->grain;
    *last = t->desc.subtasks - *first > t->grain ? *first + t->grain : t->desc.subtasks;
}

/* Records a failure of subtask `id`; the lowest id's message is the one
 * logged, once, when the task finishes. */
void pm__task_fail(pm__task_t *t, int status, uint64_t id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for a failure another host reported. */
void pm__task_fail_remote(pm__task_t *t, int status, uint64_t id, int host, const char *msg);
/* Called by the stub that completes the last prepare chunk. */
void pm__task_prepared(pm__task_t *t);
/* Counts n chunks (or drained hosts) done; the last one finishes the task.
 * The caller must not touch the task afterwards. */
void pm__task_done(pm__task_t *t, uint64_t n);
/* A reference to a task's block beyond the program's (holds): a straggler
 * copy may run on after the task ended, and a stub handed the task with a
 * poke may look at it late; the last reference frees it. */
void pm__task_hold(pm__task_t *t);
void pm__task_unhold(pm__task_t *t);
/* Builds a task from a checked descriptor (no handle, not queued). */
int pm__task_create(const pm_task_desc_t *d, const pm__callbacks_t *cbs, pm__task_t **out);
/* Remote tasks: look up by sequence number, free. */
pm__task_t *pm__task_find_locked(uint64_t seq);
/* Ready lists (runtime lock): a task with chunks stubs may take is on the
 * list of each device kind that may run it; stubs look only there. */
void pm__task_ready_locked(pm__task_t *t);
/* A polling CPU stub is worth poking for this much work on a host of two
 * cores: it starts within a fraction of a microsecond. A task with less
 * in all runs on one stub. pm__poke_worth_ns() scales it to the host. */
#define PM__POKE_WORTH_NS 2000.0
/* A stub's chunk of t took chunk_ns: if the chunks left are worth more
 * stubs at that time each (a chunk or pm__poke_worth_ns() of work a stub
 * besides the caller), pokes polling stubs of its kind and wakes parked
 * ones (ready lists engage fewer stubs for tasks the model deems short).
 * chunk_ns is one chunk's time, not a batch's. */
void pm__task_wake_more(pm__task_t *t, pm_device_kind_t kind, uint64_t chunk_ns);
/* Whether n chunks of chunk_ns each are worth engaging a CPU stub besides
 * the caller (by pm__task_wake_more's measure). */
bool pm__task_worth_more(uint64_t n, uint64_t chunk_ns);
/* Every stub of kind k (0 CPU, 1 GPU) was just woken: they are on their
 * way, so a stub that declines a chunk for them (the decliner's rule,
 * sched/pull.c) must not take them for absent in the moment before they
 * run. Clears their parked flags. */
void pm__stubs_woken(int k);
void pm__task_unready_locked(pm__task_t *t);
/* A task kept for the stub that made it ready (pm__stub_t.mine) with
 * chunks that stub declined (the policy judged another stub better):
 * listed, and stubs engaged for it as when a task is made ready, unless
 * stubs it poked ended it meanwhile (held, no lock held). */
void pm__task_unkeep(pm__task_t *t);
/* Takes t off the ready lists, if it is on them (no lock held). */
void pm__task_unready(pm__task_t *t);
/* The same for a running task a stub saw drained outside the ready lock
 * (its last chunk taken): only if nothing is left to hand out under the
 * lock, where a stub may have given chunks of a batch back meanwhile
 * (pm__stub_give_back). Unlisted with chunks left, the task was
 * found by no stub again: 15 stubs parked beside a task with 4 chunks left
 * in their ranges (tasks on one memory, 16-core host, 3 runs in 35). */
void pm__task_unready_drained(pm__task_t *t);
/* Back onto the ready lists, at their front (ready lock held): a running
 * task on one host whose chunks a stub gave back after the task had left
 * the lists (pm__stub_give_back in exec/stubs.h). */
void pm__task_relist_locked(pm__task_t *t);
/* Other hosts: a task host 0 sent is added to the unfinished tasks and made
 * ready; once drained it is taken off them (it stays known by sequence
 * number until host 0 ends it). */
int pm__task_add_remote_locked(pm__task_t *t);
void pm__task_drop_remote_locked(pm__task_t *t);
void pm__task_forget_remote_locked(pm__task_t *t);
void pm__task_destroy(pm__task_t *t);
void pm__task_free_all(void);
/* Waits until host 0 has no unfinished task (runtime lock held). */
void pm__task_wait_none_locked(void);
/* Host 0: submitted tasks not finished yet (0 or less: none). */
int64_t pm__tasks_unfinished(void);

/* ---- scheduling (sched/) ----------------------------------------------- */

/* A scheduling policy: hands chunk indices of a task to stubs. */
typedef struct pm__sched_policy {
    const char *name;
    pm_sched_t id;
    int (*init)(pm__task_t *t, int nstubs);
    /* Next chunk for `stub`; false when this stub gets no more chunks. */
    bool (*take)(pm__task_t *t, int stub, uint64_t *chunk);
    /* Chunks not yet handed out on this host (a snapshot). */
    uint64_t (*left)(const pm__task_t *t);
    void (*fini)(pm__task_t *t);
} pm__sched_policy_t;


/* ---- execution (exec/) ------------------------------------------------- */

/* A device kind's stub operations. */
typedef struct pm__stub pm__stub_t;
typedef struct pm__device_ops {
    const char *name;
    pm_device_kind_t kind;
    int (*init)(pm__stub_t *s);
    /* Makes the device ready on the calling stub thread (the first time:
     * context, streams, handles), before a task's chunks are timed, so
     * that one-time set-up is not taken for the task's speed. NULL: none. */
    void (*ready)(pm__stub_t *s);
    /* Runs the subtasks of one chunk of a task. */
    void (*run_chunk)(pm__stub_t *s, pm__task_t *t, uint64_t chunk);
    /* Runs the n chunks from `chunk` (a stub's batch, on one host), as
     * run_chunk would each. NULL: run_chunk for each. */
    void (*run_chunks)(pm__stub_t *s, pm__task_t *t, uint64_t chunk, uint64_t n);
    /* Whether the device still runs subtasks (false once it broke). NULL:
     * always. */
    bool (*usable)(const pm__stub_t *s);
    void (*fini)(pm__stub_t *s);
} pm__device_ops_t;

struct pm__stub {
    int index;            /* on this host */
    int device_index;     /* core or GPU ordinal */
    const pm__device_ops_t *ops;
    double speed;         /* relative speed for proportional shares */
    int major, minor;     /* GPU compute capability */
    char name[96];        /* GPU name */
    uint64_t mem_bytes;   /* GPU memory */
    pthread_t thread;
    void *priv;           /* device-specific state */
    double last_end;      /* when its last chunk of a remote task ended (the stub's own) */
    /* A task this stub made ready and runs next, held, not listed (one
     * host; core/task.c, keep_for_self): the stub's own. */
    struct pm__task *mine;
    /* What changes as the stub goes idle, on a cache line of its own (the
     * stubs are allocated aligned), apart from what others read above:
     * whether it is asleep, or polling without a poke (it comes only when
     * woken); and the poke it polls, set by the thread that hands it work. */
    _Alignas(64) atomic_bool parked;
    atomic_uint_fast64_t poke; /* PM__POKE_* in the low byte, `joins` when it joined above */
    struct pm__task *handed; /* with the poke: a task to take a chunk of, held (or NULL) */
    uint64_t joins;          /* times it joined the pollers (the stub's own) */
    atomic_bool warm;        /* asked to get its device ready (ops->ready) before any task */
    atomic_bool in_share;    /* bound to a core of its rank's share (exec/stubs.c, bind_stubs) */
    /* A chunk this CPU stub runs on private copies of its bytes, which an
     * idle stub may run a copy of (exec/guard.c); under guard_lock, but
     * guard_task is read unlocked by stubs looking for a straggler. */
    _Alignas(64) pm__lock_t guard_lock;
    _Atomic(struct pm__task *) guard_task; /* NULL: none */
    uint64_t guard_chunk;
    atomic_uint_fast64_t guard_since_ns;
    bool guard_copied;   /* a copy of it runs (one at most) */
    bool guard_snapping; /* that copy still reads the memories */
};

/* Whether stub `stub` has run a guarded chunk (exec/guard.c) for over 4
 * times `ns` (its time per chunk): not to be counted on to take more soon. */
static inline bool pm__guard_stalled(const pm__stub_t *stubs, int stub, double ns)
{
    const pm__stub_t *o = &stubs[stub];
    if (atomic_load_explicit(&o->guard_task, memory_order_relaxed) == NULL)
        return false;
    uint64_t since = atomic_load_explicit(&o->guard_since_ns, memory_order_relaxed);
    return (double)((uint64_t)(pm__now() * 1e9) - since) > 4 * ns;
}

/* Whether a stub may run the task's subtasks; whether a GPU of that compute
 * capability may (device mask, cuda callback, min_cc, device filter). */
static inline int pm__task_runnable_on(const pm__task_t *t, const pm__stub_t *s)
{
    if (s->ops->usable != NULL && !s->ops->usable(s))
        return 0;
    if (t->runnable == NULL) /* all of a kind alike */
        return (t->run_kinds >> (s->ops->kind == PM_DEVICE_GPU)) & 1u;
    return t->runnable[s->index];
}
int pm__gpu_eligible(const pm__task_t *t, int major, int minor);

/* ---- redistribution (core/redistribute.c) ------------------------------ */

typedef struct pm__piece {
    uint64_t key, id, seq;
    size_t bytes;
    unsigned char *data;
} pm__piece_t;

/* Adds a piece (takes `data`); thread-safe. */
int pm__task_add_piece(pm__task_t *t, uint64_t key, uint64_t id, unsigned char *data, size_t bytes);
/* Host 0, at the end of a task: sorts the pieces by key into a new memory. */
void pm__task_gather_pieces(pm__task_t *t);
void pm__task_free_pieces(pm__task_t *t);

/* ---- the hosts --------------------------------------------------------- */

/* What each host reported at start-up; the same table on every host (the
 * transport fills it at pm_init). */
#define PM__MAX_GPUS 16
typedef struct pm__gpu_desc {
    char name[96];
    int32_t major, minor;
    uint64_t mem_bytes;
} pm__gpu_desc_t;

typedef struct pm__host_info {
    int32_t ncpu, ngpu;
    double speed;
    pm__gpu_desc_t gpu[PM__MAX_GPUS];
} pm__host_info_t;
extern pm__host_info_t *pm__hosts;

/* How much of task t host h should get first: its stubs that may run it
 * (1 each under static-equal); whether CPU stubs may run t. */
double pm__host_weight(pm__task_t *t, int h);
bool pm__cpu_eligible(pm__task_t *t);
/* A prefetch of a chunk's inputs from other hosts (data/data.c). */
typedef struct pm__fetch pm__fetch_t;

/* ---- hooks: what core tells the layers above it ------------------------- */

/* Core calls no layer above it by name: the layers that care about memory
 * and task events fill this table at pm_init (init/init.c), which fills
 * every entry but pinned_alloc and pinned_free (a build without CUDA) and
 * released (one host): only those may be NULL. Core calls the others only
 * between pm_init and the end of pm_finalize. */
typedef struct pm__hooks {
    void *(*pinned_alloc)(size_t bytes); /* page-locked host memory, or NULL */
    void (*pinned_free)(void *p);
    /* Page-locks host memory made elsewhere (0 or an error) and undoes it. */
    int (*pin)(void *p, size_t bytes);
    void (*unpin)(void *p);
    /* Host 0, every host on this machine: a memory file the other hosts
     * map (NULL: none; *fd -1), and its end. */
    void *(*shared_alloc)(size_t bytes, int *fd);
    void (*shared_free)(void *p, size_t bytes, int fd);
    /* Host 0, runtime lock held unless said: other hosts hold ranges of m;
     * bring them home (lock not held, no task uses m); make m lazy or not. */
    bool (*away)(pm__memory_t *m);
    int (*gather)(pm__memory_t *m);
    int (*set_lazy)(pm__memory_t *m, bool lazy);
    void (*touched)(pm__memory_t *m);    /* the program wrote m: its bytes are current */
    void (*wrote_home)(pm__memory_t *m, uint64_t lo, uint64_t hi); /* host 0 wrote [lo, hi) */
    void (*created)(pm__memory_t *m);    /* m is new (no lock held; NULL: nothing to do) */
    void (*released)(pm__memory_t *m);   /* m's handle is gone (runtime lock held) */
    void (*freed)(pm__memory_t *m);      /* m's bytes go next (no lock held) */
    /* Host 0, several hosts: a submitted task gets its first shares of
     * chunks by stubs (0 or PM_ENOMEM); a pull task about to run, its
     * shares by cost (runtime lock held); a task that ended gives back
     * what it was expected to take of each host (runtime lock held). */
    int (*task_split)(pm__task_t *t);
    void (*task_place)(pm__task_t *t);
    void (*task_released)(pm__task_t *t);
    void (*task_started)(pm__task_t *t); /* host 0, several hosts, runtime lock held */
    void (*task_finished)(pm__task_t *t); /* host 0, several hosts */
    /* The scheduler: the policy of an id (NULL: none such); a callback set's
     * performance model, made at registration and destroyed at pm_finalize;
     * its time per subtask on a kind of device (0: unknown). */
    const struct pm__sched_policy *(*policy)(pm_sched_t id);
    struct pm__model *(*model_create)(const char *name, const struct pm__stub *stubs, int nstubs);
    void (*model_destroy)(struct pm__model *m);
    double (*model_ns)(const struct pm__model *m, int kind, const char *name);
    /* The reduce layer: the merge tree of a task with reduced memories
     * (made at creation, applied at its end). */
    int (*tree_create)(pm__task_t *t);
    int (*tree_apply)(pm__task_t *t);
    void (*tree_free)(pm__task_t *t);
    /* The stubs: a callback set with a cuda callback was registered (GPUs
     * set up now); a piece a redistributing subtask made (false: not a
     * straggler's copy's, keep it as usual). */
    void (*cuda_registered)(void);
    bool (*keep_piece)(pm__task_t *t, uint64_t key, uint64_t id, unsigned char *data, size_t bytes);
    /* The trace: a span (trace/trace.c, pm__trace_span). */
    void (*trace_span)(int stub, int what, uint64_t task, uint64_t chunk, double t0, double t1);
} pm__hooks_t;
extern pm__hooks_t pm__hooks;

/* ---- trace: what a span is (core tells the trace of tasks, trace/trace.h) */

enum pm__trace_what {
    PM__TRACE_CHUNK, PM__TRACE_SUBSCRIBE, PM__TRACE_FETCH, PM__TRACE_TASK, PM__TRACE_MOVE, PM__TRACE_GPU_COPY,
    PM__TRACE_GPU_WAIT, /* a GPU stub waiting for a subtask's stream (chunk: its chunk) */
    PM__TRACE_STEAL,    /* tasks track: asking another host for work (chunk: chunks got) */
    PM__TRACE_REPORT,   /* host 0's tasks track: a chunk's report landing (chunk: the chunk) */
    PM__TRACE_DRAINED,  /* host 0's tasks track: a host drained (chunk: the host) */
    PM__TRACE_GPU_OPEN  /* a GPU stub opening another rank's GPU memory (chunk: its row) */
};

/* ---- the runtime ------------------------------------------------------- */

typedef struct pm__runtime {
    int initialized;
    int host, nhosts;
    int nstubs, ncpu;
    int ncpu_set; /* PMLIB_NCPU was given */
    pm__stub_t *stubs;
    size_t ranges_bytes;      /* a task's per-stub scheduling state (sched/ranges.h) */
    size_t ranges_slots;      /* of which its per-stub slots, first */
    pm_sched_t default_sched;

    uint64_t spin_ns;         /* PMLIB_SPIN_US: how long idle threads poll */
    atomic_bool crowded;      /* more busy threads than cores: yield while polling */
    int bind;                 /* PMLIB_BIND: 0 never, 1 always, 2 by default (exec/stubs.c) */
    double core_share;        /* this rank's share of the machine's cores (pm__yield_took) */

    atomic_int shutdown;      /* stubs stop (set under both locks) */
    /* The idle stubs polling for work, per kind: a bit per stub index in
     * poll_words words, each kind's words on lines of their own
     * (pm__pollers_*). */
    atomic_uint_fast64_t *pollers[2];
    atomic_uint_fast64_t *stashed; /* CPU stubs in some program thread's stash, as the pollers */
    int poll_words;
    atomic_bool warm_asked;   /* pm__stubs_warm ran since the stubs started */

    /* What is above is read by polling stubs at every round and almost
     * never written. Each group below is written by some thread at every
     * task and starts a cache line of its own: on a line shared with what
     * pollers read, each submit would first take the line back from every
     * polling core. */

    /* The ready lists and the idle stubs have a lock of their own, so that
     * a stub looking for work does not take the runtime lock on one host.
     * Order: the runtime lock, then the ready lock, never the other way. */
    _Alignas(64) pthread_mutex_t ready_lock;
    pm__tlist_t ready[2];     /* tasks with chunks to hand out, per kind */
    pthread_cond_t work_cv[2]; /* stubs wait for work: [0] CPU stubs, [1] GPU stubs */
    atomic_int parked[2];     /* stubs asleep on work_cv, per kind (changed under the ready lock) */
    atomic_int spin_room;     /* stubs that may be busy or polling at once without
                                 taking the program's core (at least one polls) */
    atomic_int program_asleep; /* program threads asleep in a wait: their core
                                  is the stubs' meanwhile (one counts) */
    _Alignas(64) atomic_uint_fast64_t woken; /* stubs woken for work so far (at most) */
    atomic_uint_fast64_t work_gen; /* moves whenever work is added */
    /* Whether ready[k] holds a task (written under the ready lock when
     * that changes): on one host a stub that finds it false polls without
     * taking the ready lock (exec/stubs.c, idle_unlocked). */
    atomic_bool ready_any[2];

    /* Host 0: tasks submitted and finished, the unfinished ones being the
     * difference (pm__tasks_unfinished), and the threads in
     * pm_task_wait_all and in pm_task_wait (changed under the runtime
     * lock): a task that ends without the lock wakes them. Stubs write
     * `finished` and read the waiters at every task's end; submitting
     * threads write `submitted` under the runtime lock, on its line
     * below, which stubs read only while a thread waits for all. One
     * count written by both took a line from a stub at every submit (16
     * cores: a third of pm_task_submit's own time). */
    _Alignas(64) atomic_uint_fast64_t finished;
    int all_waiters, task_waiters; /* atomic */

    _Alignas(64) pthread_mutex_t lock; /* everything below */
    pthread_cond_t done_cv;   /* waiters wait for tasks */
    int serving, shutdown_received;
    int local_rank, local_size;
    pm__tlist_t active;       /* unfinished tasks, submit order (see list_all) */
    /* Every unfinished task is on `active` (the progress line reads it);
     * else a task without memories on one host is not, and ends without
     * the runtime lock. */
    bool list_all;
    atomic_uint_fast64_t submitted; /* host 0 (see finished) */
    pm__task_t **byseq;       /* sequence number table, chained */
    size_t nbyseq, byseq_cap;
    uint64_t next_seq;
    int first_failure;
    pm__handle_table_t memories, tasks;
} pm__runtime_t;

/* Thread-local state read at every call and every task: in the initial
 * block of the process's threads, one load off the thread pointer each.
 * The general model of a shared library called into the dynamic loader
 * for each (2% of the program thread's samples per empty task on 2
 * cores); the few bytes fit in the room the loader keeps in that block
 * for libraries opened later, so a dlopen of pmlib still works. */
#define PM__TLS _Thread_local __attribute__((tls_model("initial-exec")))
/* Set on threads pmlib starts (stubs, the comm thread): blocking calls made
 * from callbacks running on them return PM_EDEADLK. */
extern PM__TLS int pm__internal_thread;
/* The stub this thread runs (NULL: not a stub thread). */
extern PM__TLS pm__stub_t *pm__self_stub;
/* This thread runs on cores no other rank's threads of pmlib run on: set
 * by the comm thread and by stubs that pmlib bound within their rank's
 * share of the cores (comm/comm.c: pm__comm_spin). */
extern PM__TLS bool pm__own_core;
/* Polls `done` (an atomic flag or state) for up to PMLIB_SPIN_US before
 * the caller sleeps; true if it became true. */
bool pm__spin_until(bool (*done)(const void *arg), const void *arg);
/* The same for at most ns nanoseconds. */
bool pm__spin_for(bool (*done)(const void *arg), const void *arg, uint64_t ns);
/* The same for a `done` that makes the comm thread's progress itself
 * (pm__comm_spin): the caller yields the core only every few tens of
 * microseconds, since the comm thread it would yield to has nothing to do
 * that the caller does not. */
bool pm__spin_self(bool (*done)(const void *arg), const void *arg, uint64_t ns);
/* Yields the core; true when the yield came back a time slice later
 * (another thread had the core). When such yields come while this
 * process gets far less CPU than its share of the cores (other programs
 * keep them busy), the process is contended for a while (pm__contended):
 * threads that would poll by yielding sleep instead. A yielding thread is
 * runnable all along and gets the core back a slice later each time,
 * where a sleeping one runs as soon as it wakes: tests/mpi/prefetch
 * beside two busy loops on 2 cores took 257 s polling by yields (the
 * ranks using 1% of a core each), 0.85 s alone. */
bool pm__yield(void);
bool pm__contended(double now);
/* What pm__yield notes: a yield that ended at `at` (pm__now) took `took`
 * seconds; cpu() gives the process's CPU seconds (read only when
 * needed). True if the yield was slow. */
bool pm__yield_took(double at, double took, double (*cpu)(void));

extern pm__runtime_t pm__rt;

/*
 * Work a polling CPU stub is worth poking for on this host: 2 us on two
 * cores, times the square root of the cores over two (8 us on 32). A
 * second stub on a task makes both miss on the lines they share (the
 * task's counters, the stolen range, the end), and on a larger machine
 * each miss costs more (a line's round trip between two cores: 140 ns on
 * a 2-core machine, 220 to 350 ns on the 32-core GPU host) and more
 * stubs go through the ready lock as they go idle. Measured on the
 * 32-core host, chains of tasks of 16 empty subtasks: 6.3 to 6.9 us a
 * task with stubs worth 2 us, 3.7 to 4.0 with 4, 3.1 to 3.3 with 8, 2.7
 * to 3.3 with 16.
 */
static inline double pm__poke_worth_ns(void)
{
    return pm__rt.ncpu > 2 ? PM__POKE_WORTH_NS * sqrt((double)pm__rt.ncpu / 2) : PM__POKE_WORTH_NS;
}
/* PMLIB_CHECK: subtasks see only their subscribed bytes (exec/check.c). */
extern int pm__check_mode;
/* Cores of this rank that no thread of it needs now: beside the program's
 * core, those the stubs awake leave (the comm thread may run on one). */
static inline int pm__stubs_spare(void)
{
    /* The comm thread asks too, until pm_finalize has stopped the stubs. */
    int awake = __atomic_load_n(&pm__rt.nstubs, __ATOMIC_RELAXED) -
                atomic_load_explicit(&pm__rt.parked[0], memory_order_relaxed) -
                atomic_load_explicit(&pm__rt.parked[1], memory_order_relaxed);
    return atomic_load_explicit(&pm__rt.spin_room, memory_order_relaxed) - awake;
}

/* Stubs that may still become awake (busy or polling) without taking the
 * program's core: the cores of this rank less one, less the stubs not
 * asleep; below 0 when more are awake than fit. */
static inline int pm__stubs_poll_room(void)
{
    int lent = atomic_load_explicit(&pm__rt.program_asleep, memory_order_relaxed) > 0;
    return pm__stubs_spare() + lent;
}

/*
 * The polling stubs of kind k. A stub adds itself under the ready lock,
 * after it found no work there; a thread that hands out work takes one
 * off without that lock (one read-modify-write of the kind's word),
 * pokes it and owes it the poke from then on (a program thread takes
 * several at once: pm__stash_next). The ready lock's line, the
 * count and the list of pollers it replaced were three lines a submit
 * took from the stubs (16 cores: the ready lock's release was a third of
 * the program thread's time per empty task).
 */
static inline int pm__pollers_count(int k)
{
    int n = 0;
    for (int w = 0; w < pm__rt.poll_words; w++)
        n += __builtin_popcountll(atomic_load_explicit(&pm__rt.pollers[k][w], memory_order_relaxed));
    return n;
}

static inline void pm__pollers_add(const pm__stub_t *s, int k)
{
    atomic_fetch_or(&pm__rt.pollers[k][s->index / 64], 1ull << (s->index % 64));
}

/* Takes s off; false when a poker took it first (its poke is coming). */
static inline bool pm__pollers_remove(const pm__stub_t *s, int k)
{
    uint64_t bit = 1ull << (s->index % 64);
    return (atomic_fetch_and(&pm__rt.pollers[k][s->index / 64], ~bit) & bit) != 0;
}

/*
 * A stub's poke word: a state in the low byte, above it the count of the
 * stub's joins to the pollers, written as it joins. A thread that took
 * the stub off the pollers' word alone owes it the poke and stores
 * PM__POKE_DONE. A program thread may take several at once into a stash
 * of its own (core/task.c, one host): it reads each one's word, marks
 * them in `stashed`, and later hands one a task by a compare-exchange
 * from the word it read to PM__POKE_CLAIMED, then stores the task and
 * PM__POKE_DONE. A stashed stub whose spell ends takes itself back
 * (PM__POKE_BACK) instead of waiting: whichever compare-exchange comes
 * first wins, and a stub that joined again since has another count, so
 * an old stash never claims it. A poked stub clears its mark before it
 * joins again: a stub off the word and unmarked is owed its poke.
 */
enum { PM__POKE_WAIT = 0, PM__POKE_DONE = 1, PM__POKE_BACK = 2, PM__POKE_CLAIMED = 3 };

static inline unsigned pm__poke_state(uint64_t v)
{
    return (unsigned)(v & 0xffu);
}

/* Whether stub s is marked as in a stash; then the bit in *bit. */
static inline bool pm__poke_stashed(const pm__stub_t *s, uint64_t *bit)
{
    *bit = 1ull << (s->index % 64);
    return (atomic_load_explicit(&pm__rt.stashed[s->index / 64], memory_order_acquire) & *bit) != 0;
}

/* The stub's own try to leave a stash once its spell is over: true when
 * it is free (no poke comes), false when a poke is owed or was sent. */
static inline bool pm__poke_take_back(pm__stub_t *s)
{
    uint64_t bit;
    if (!pm__poke_stashed(s, &bit))
        return false;
    uint64_t v = atomic_load_explicit(&s->poke, memory_order_acquire);
    if (pm__poke_state(v) != PM__POKE_WAIT ||
        !atomic_compare_exchange_strong(&s->poke, &v, (v & ~(uint64_t)0xff) | PM__POKE_BACK))
        return false;
    atomic_fetch_and(&pm__rt.stashed[s->index / 64], ~bit);
    return true;
}

/* The calling thread's stash (core/task.c): its next stub, the stash
 * filled from the pollers when empty if `fill`, with the stub's poke word
 * when taken in *word (NULL: none); and the hand-over of t (held for it,
 * or NULL) to that stub, false when it took itself back first. */
pm__stub_t *pm__stash_next(bool fill, uint64_t *word);
bool pm__stash_poke(pm__stub_t *s, uint64_t word, struct pm__task *t);

/* A poked stub's handed task (or NULL); its stash mark cleared. */
static inline struct pm__task *pm__poke_taken(pm__stub_t *s)
{
    uint64_t bit;
    if (s->ops->kind == PM_DEVICE_CPU && pm__poke_stashed(s, &bit))
        atomic_fetch_and(&pm__rt.stashed[s->index / 64], ~bit);
    return s->handed;
}

/* Asks for the lines of [p, p + bytes) to be written soon (core/task.c):
 * they come owned, without waiting for them. */
void pm__prefetch_lines(const void *p, size_t bytes);
/* One polling stub of kind k, now the caller's to poke; NULL: none. The
 * highest index first: the same few stubs stay busy, the others park. */
static inline pm__stub_t *pm__pollers_pop(int k)
{
    for (int w = pm__rt.poll_words - 1; w >= 0; w--) {
        atomic_uint_fast64_t *word = &pm__rt.pollers[k][w];
        /* Owned before it is read: a plain read took the line shared
         * from the stub that last added itself, and the `and` then asked
         * for it again (two trips where one does). */
        pm__prefetch_lines(word, sizeof *word);
        uint64_t v = atomic_load_explicit(word, memory_order_relaxed);
        while (v != 0) {
            int b = 63 - __builtin_clzll(v);
            uint64_t old = atomic_fetch_and(word, ~(1ull << b));
            if (old & (1ull << b))
                return &pm__rt.stubs[w * 64 + b];
            v = old & ~(1ull << b);
        }
    }
    return NULL;
}

/* A polling thread's pause between looks (no system call). */
static inline void pm__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* This host's chunks per second in task t, summed over the stubs that timed
 * a chunk of it: by their run time alone (`run_only`) or by their time per
 * chunk, waits included. 0: none yet. */
static inline double pm__stubs_rate(const pm__task_t *t, bool run_only)
{
    double rate = 0;
    for (int s = 0; s < pm__rt.nstubs; s++) {
        const pm__stub_counts_t *c = pm__counts_peek(t, s);
        if (c == NULL)
            continue;
        uint64_t ns = atomic_load_explicit(run_only ? &c->run_ns : &c->chunk_ns, memory_order_relaxed);
        if (ns > 0)
            rate += 1e9 / (double)ns;
    }
    return rate;
}

/* The runtime's life: down, starting (pm_init runs), up, stopping
 * (pm_finalize runs). Only `up` admits calls. Public calls count themselves
 * inside pmlib while they run (core/calls.c), so that pm_finalize can refuse
 * to tear down under another thread. */
enum { PM__LIFE_DOWN, PM__LIFE_STARTING, PM__LIFE_UP, PM__LIFE_STOPPING };
extern atomic_int pm__life;
/* The count of calls of threads that got no line of their own
 * (core/calls.c): alone on its cache line, or the read-mostly globals
 * beside it would be taken from every stub's cache at each call. */
typedef struct {
    _Alignas(64) atomic_int n;
    char pad[64 - sizeof(atomic_int)];
} pm__calls_t;
extern pm__calls_t pm__inside;
int pm__enter(void);
void pm__leave(int *entered);
/* pm_init: lets pm_finalize fence the calling threads (core/calls.c). */
void pm__calls_init(void);
/* pm_finalize, the life no longer up: the calls of other threads still
 * inside pmlib. */
int pm__calls_inside(void);

/* Checks pm_init was called (logs what to do otherwise) and counts the call
 * inside pmlib until the enclosing block ends. A declaration: first in a
 * block. */
#define PM__CHECK_INIT(fn)                                                    \
    __attribute__((cleanup(pm__leave))) int pm__entered = pm__enter();        \
    if (!pm__entered)                                                         \
        return PM__FAIL(PM_ENOTINIT, "%s called before pm_init (or after pm_finalize); "   \
                        "call pm_init(&argc, &argv) first", fn)

#endif /* PMLIB_CORE_INTERNAL_H */
