/*
 * Stubs: one worker thread per CPU core (and, with CUDA, per GPU). A stub
 * looks for work in its kind's ready list, oldest task first: subscribe
 * chunks of a preparing task or subtask chunks of a running one. It keeps a
 * chunk in hand while it asks for the next, so the task cannot complete
 * (and be freed) under it.
 */
#define _GNU_SOURCE
#include "core/internal.h"
#include "exec/cuda.h"
#include "exec/guard.h"
#include "sched/model.h"
#include "sched/proto.h"
#include "sched/ranges.h"
#include "exec/stubs.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* JOB_ASK: a task of several hosts has nothing left here; ask the other
 * hosts for work (under the runtime lock alone: asking may take the task
 * off the ready lists, which takes the ready lock). */
enum job { JOB_NONE, JOB_PREPARE, JOB_RUN, JOB_ASK };

/* Ready tasks a stub looks at before it gives up: the list holds only tasks
 * with chunks to hand out, so work is near its front. */
#define PM__READY_LOOK 64

/* Work from the ready list of the stub's kind, oldest task first: subscribe
 * chunks of a preparing task or subtask chunks of a running one. A task
 * with nothing left to hand out here leaves the list (and, with several
 * hosts, asks the others for work). Work lock held (lock_work). */
static enum job find_work_locked(pm__stub_t *s, pm__task_t **task, uint64_t *chunk)
{
    const int kind = s->ops->kind == PM_DEVICE_GPU;
    int looked = 0;
    for (pm__task_t *t = pm__rt.ready[kind].head, *next; t != NULL && looked < PM__READY_LOOK;
         t = next, looked++) {
        next = t->rlink[kind].next;
        int state = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
        if (state == PM__TASK_PREPARE) {
            uint64_t k = atomic_fetch_add(&t->prep_next, 1);
            if (k + 1 >= t->nchunks)
                pm__task_unready_locked(t); /* back once the subtasks may run */
            if (k < t->nchunks) {
                *task = t;
                *chunk = k;
                return JOB_PREPARE;
            }
        } else if (state == PM__TASK_RUN) {
            if (pm__task_runnable_on(t, s) && t->policy->take(t, s->index, chunk)) {
                *task = t;
                if (t->remote) /* counted where a host drains */
                    t->inprogress++;
                /* Its last chunk on one host: off the lists now, while the
                 * lock is held, rather than by the next look or its end. */
                if (pm__rt.nhosts == 1 && t->policy->left(t) == 0)
                    pm__task_unready_locked(t);
                return JOB_RUN;
            }
            if (t->policy->left(t) == 0) {
                pm__task_unready_locked(t);
                /* More from other hosts, unless no stub here may run it (a
                 * GPU task on a host without GPUs, met while it was still
                 * listed for its subscriptions): chunks it took would wait
                 * here forever. */
                if (pm__rt.nhosts > 1 && t->run_kinds != 0) {
                    *task = t;
                    return JOB_ASK;
                }
            }
        }
    }
    return JOB_NONE;
}

/* After a stub counts its last chunk done it must not read the task again:
 * another stub may finish it and the program free it; hence `n`. */
static void prepare_loop(const pm__stub_t *s, pm__task_t *t, uint64_t k)
{
    const uint64_t n = t->nchunks;
    for (;;) {
        double t0 = pm__now();
        pm__subscribe_chunk(t, k);
        pm__trace_span(s->index, PM__TRACE_SUBSCRIBE, t->seq, k, t0, pm__now());
        uint64_t next = atomic_fetch_add(&t->prep_next, 1);
        if (atomic_fetch_add(&t->prep_done, 1) + 1 == n)
            pm__task_prepared(t);
        if (next >= n)
            return;
        k = next;
    }
}

static void average_in(atomic_uint_fast64_t *avg, uint64_t ns)
{
    uint64_t old = atomic_load_explicit(avg, memory_order_relaxed);
    atomic_store_explicit(avg, old ? (3 * old + ns) / 4 : ns, memory_order_relaxed);
}

/* Subtasks of the nk chunks from k. */
static uint64_t span_subtasks(const pm__task_t *t, uint64_t k, uint64_t nk)
{
    uint64_t first, last, unused;
    pm__chunk_span(t, k, &first, &last);
    if (nk > 1)
        pm__chunk_span(t, k + nk - 1, &unused, &last);
    return last - first;
}

/* Running averages of the stub's time per chunk (this task) and of its
 * kind's time per subtask (these callbacks), for the scheduler: nk chunks
 * of n subtasks in all took `seconds`. */
static void note_time(const pm__stub_t *s, pm__task_t *t, uint64_t n, uint64_t nk, double seconds)
{
    uint64_t ns = (uint64_t)(seconds * 1e9) + 1;
    pm__stub_counts_t *c = pm__counts_own(t, s->index);
    average_in(&c->chunk_ns, ns / nk + 1);
    if (t->sched != NULL && t->nchunks > 1) { /* the shortest average so far (sched/pull.c) */
        uint64_t avg = atomic_load_explicit(&c->chunk_ns, memory_order_relaxed);
        uint64_t least = atomic_load_explicit(&t->sched->min_chunk_ns, memory_order_relaxed);
        while (avg < least && !atomic_compare_exchange_weak_explicit(&t->sched->min_chunk_ns, &least, avg,
                                                                      memory_order_relaxed,
                                                                      memory_order_relaxed))
            ;
    }
    pm__model_note_chunk(t, s, n, ns);
}

/* Chunks a stub runs back to back, with one hand-out, timing and count for
 * them all: as many as keep such a run near PM__BATCH_NS by the stub's own
 * time per chunk in this task, else by the model's for its device. The
 * other stubs may steal what is not taken. Should the first chunk of a
 * batch run longer than PM__BATCH_LONG times the guess (the model did not
 * know the task), the rest of the batch goes back to the stub's range if
 * it is worth another stub at that chunk's time. */
#define PM__BATCH_NS 1000
#define PM__BATCH_MAX 4096
#define PM__BATCH_LONG 4

/* Expected ns per chunk of stub s in task t (0: not known). */
static uint64_t expect_ns(const pm__stub_t *s, const pm__task_t *t)
{
    return (uint64_t)pm__model_chunk_ns(t, s->index);
}

/* Takes the chunks after chunk k (which the stub holds) that join it in a
 * batch; returns the batch's size, k included, and in *guess the expected
 * ns per chunk. */
static uint64_t take_batch(pm__stub_t *s, pm__task_t *t, uint64_t k, uint64_t *guess)
{
    uint64_t ns = *guess = expect_ns(s, t);
    if (ns == 0)
        return 1;
    uint64_t b;
    /* A task whose whole work is worth no more than one stub (no other
     * was engaged for it, core/task.c) runs as one batch: batches of
     * PM__BATCH_NS cost their hand-outs and timings for stubs that do
     * not come (16 cores, tasks of 16 empty subtasks on one memory: 3
     * batches a task where 2 cores, faster per chunk, ran one). */
    if ((double)ns * (double)t->nchunks <= pm__poke_worth_ns())
        b = PM__BATCH_MAX;
    else if (2 * ns > PM__BATCH_NS)
        return 1;
    else
        b = PM__BATCH_NS / ns < PM__BATCH_MAX ? PM__BATCH_NS / ns : PM__BATCH_MAX;
    return 1 + pm__ranges_extend(t, s->index, k + 1, b - 1);
}

bool pm__stub_give_back(pm__task_t *t, int stub, uint64_t lo, uint64_t hi)
{
    pthread_mutex_lock(&pm__rt.ready_lock);
    bool back = pm__ranges_untake(t, stub, lo, hi);
    if (back && !__atomic_load_n(&t->listed, __ATOMIC_RELAXED))
        pm__task_relist_locked(t);
    pthread_mutex_unlock(&pm__rt.ready_lock);
    return back;
}

/* Runs the nk chunks from k (a batch of one stub); returns how many ran,
 * the rest having gone back to the stub's range. */
static uint64_t run_batch(pm__stub_t *s, pm__task_t *t, uint64_t k, uint64_t nk, uint64_t guess_ns,
                          double t0)
{
    s->ops->run_chunk(s, t, k);
    if (nk == 1)
        return 1;
    uint64_t took = (uint64_t)((pm__now() - t0) * 1e9);
    /* Given back only when the rest would engage another stub at the
     * first chunk's time: else it only costs the ready lock twice and
     * lays the chunks open to stubs that happen by (16 cores, a chain of
     * tasks of 16 one-subtask chunks: about one task in 15 gave its batch
     * back after a slow first chunk, and the chain then spread over
     * stubs). */
    if (took > PM__BATCH_LONG * guess_ns && pm__task_worth_more(nk - 1, took) &&
        pm__stub_give_back(t, s->index, k + 1, k + nk)) {
        pm__task_wake_more(t, s->ops->kind, took);
        return 1;
    }
    if (s->ops->run_chunks != NULL) {
        s->ops->run_chunks(s, t, k + 1, nk - 1);
    } else {
        for (uint64_t i = 1; i < nk; i++)
            s->ops->run_chunk(s, t, k + i);
    }
    return nk;
}

/* Takes the chunk after the current one; on another host its inputs start
 * coming at once, while the current chunk runs. */
static bool take_next(pm__stub_t *s, pm__task_t *t, uint64_t *next, pm__fetch_t **fetch)
{
    bool more = t->policy->take(t, s->index, next);
    if (fetch != NULL) /* only hosts other than 0 fetch, and they pass one */
        *fetch = NULL;
    if (more && t->remote) {
        /* The remote host drains only once nothing is held. */
        pthread_mutex_lock(&pm__rt.lock);
        t->inprogress++;
        pthread_mutex_unlock(&pm__rt.lock);
        *fetch = pm__proto_prefetch(t, *next);
    }
    return more;
}

#if PMLIB_HAVE_CUDA
/* A GPU stub's feed: the policy hands it chunks; each complete one is
 * counted as the loop below counts a chunk. On a host other than 0 the
 * next chunk's inputs are asked for as it is taken, while the chunks
 * before it run, and each chunk is reported to host 0 with its written
 * ranges; host 0 with ranges of a lazy memory away fetches them before a
 * chunk and records what the chunk wrote. */
typedef struct gpu_feed {
    pm__chunk_feed_t base;
    pm__stub_t *s;
    pm__task_t *t;
    double last;        /* when the previous chunk completed */
    pm__fetch_t *fetch; /* another host: the taken chunk's inputs, on their way */
} gpu_feed_t;

/* None left here: other hosts are asked at once, while the chunks in the
 * GPU's pipeline still run, rather than once they are done (PageRank 3e7,
 * 2 ranks x 1 GPU: host 0 asked only after its last four chunks, 1 ms
 * later, and got one chunk of host 1's five). */
static bool feed_next(pm__chunk_feed_t *f, uint64_t *chunk)
{
    gpu_feed_t *g = (gpu_feed_t *)f;
    pm__task_t *t = g->t;
    if (take_next(g->s, t, chunk, t->remote ? &g->fetch : NULL))
        return true;
    if (pm__rt.nhosts > 1) {
        pthread_mutex_lock(&pm__rt.lock);
        if (t->state == PM__TASK_RUN && t->policy->left(t) == 0)
            pm__proto_want_work_locked(t);
        pthread_mutex_unlock(&pm__rt.lock);
    }
    return false;
}

/* Another host takes chunks ahead once inputs of the task had to come from
 * elsewhere: taking a chunk starts its inputs coming (run_loop's rule). */
static bool feed_ahead(pm__chunk_feed_t *f)
{
    const pm__task_t *t = ((gpu_feed_t *)f)->t;
    return t->remote && __atomic_load_n(&t->fetched, __ATOMIC_RELAXED);
}

static int feed_ready(pm__chunk_feed_t *f, uint64_t chunk, bool wait)
{
    gpu_feed_t *g = (gpu_feed_t *)f;
    if (!wait && g->fetch != NULL && !pm__data_fetched(g->fetch))
        return PM__FEED_LATER;
    pm__fetch_t *started = g->fetch;
    g->fetch = NULL;
    return pm__proto_before_chunk(g->t, chunk, started);
}

static void feed_done(pm__chunk_feed_t *f, uint64_t chunk, double since)
{
    gpu_feed_t *g = (gpu_feed_t *)f;
    pm__task_t *t = g->t;
    double now = pm__now();
    const uint64_t n = span_subtasks(t, chunk, 1);
    /* Chunks overlap in the pipeline: each costs the time since the one
     * before it completed (or since it started, if later). */
    double took = now - (since > g->last ? since : g->last);
    note_time(g->s, t, n, 1, took);
    g->last = now;
    pm__trace_span(g->s->index, PM__TRACE_CHUNK, t->seq, chunk, since, now);
    if (t->home_dir)
        pm__data_home_wrote(t, chunk);
    atomic_fetch_add(&t->subtasks_done, n);
    if (t->remote)
        pm__proto_after_chunk(t, chunk, PM_DEVICE_GPU, (uint64_t)(took * 1e9) + 1,
                              (uint64_t)(t->woke_late * 1e9));
    else
        pm__task_done(t, 1);
}
#endif

static void run_loop(pm__stub_t *s, pm__task_t *t, uint64_t k)
{
    if (s->ops->ready != NULL)
        s->ops->ready(s); /* untimed: one-time set-up is not the task's speed */
#if PMLIB_HAVE_CUDA
    if (s->ops == &pm__cuda_ops) {
        /* One stream of chunks, so the GPU's pipeline never drains
         * between them; the feed reports each chunk. Its chunks are not
         * offered for copies (t->running): a GPU is rarely the
         * straggler, and several of its chunks are in flight. */
        const bool fetches = t->remote || t->home_dir;
        gpu_feed_t f = {{feed_next, feed_ahead, fetches ? feed_ready : NULL, feed_done}, s, t, pm__now(), NULL};
        pm__cuda_run_chunks(s, t, k, &f.base);
        return;
    }
#endif
    pm__fetch_t *fetch = NULL;
    /* CPU stubs batch on one host, under pull (on several, chunks are
     * reported to host 0 one by one). */
    const bool batches = t->nchunks > 1 && pm__rt.nhosts == 1 && t->desc.sched == PM_SCHED_PULL &&
                         !t->remote && !t->home_dir;
    uint64_t guess = 0; /* ns per chunk expected */
    uint64_t nk = batches ? take_batch(s, t, k, &guess) : 1; /* chunks from k on, run as one batch */
    for (;;) {
        if (pm__rt.nhosts > 1)
            pm__comm_hand_over();
        if (pm__rt.nhosts > 1 && t->running != NULL) { /* other hosts may ask for a copy of it */
            atomic_store(&t->running_since[s->index], (uint64_t)(pm__now() * 1e9));
            atomic_store(&t->running[s->index], k);
        }
        double t0 = pm__now();
        uint64_t next = 0, ran_ns = 0, late_ns = 0;
        bool more, ahead = false;
        pm__fetch_t *next_fetch = NULL;
        if (t->remote) {
            /* Host 0 takes what its first report of the task adds to
             * running the chunk for the cost of involving this host; the
             * time the task waited here behind this stub's chunks of
             * earlier tasks is not part of it. */
            const double ready = s->last_end > t->t_submit ? s->last_end : t->t_submit;
            const double queued = ready - t->t_submit;
            /* How long its message may have waited for a round here, and
             * then the task for an idle stub to wake: what a probe of a
             * host left out (and idle) leaves out (sched/proto.c). */
            late_ns = (uint64_t)((t->woke_late + (t0 > ready ? t0 - ready : 0)) * 1e9);
            int rc = pm__proto_before_chunk(t, k, fetch);
            /* The next chunk is taken before this one runs, so that its
             * inputs come meanwhile, once inputs of the task had to come
             * from another host here. Where none do (memories shared in
             * place, or kept from earlier tasks), a chunk taken ahead
             * only waits for this one, and a host that runs dry cannot
             * steal it (PageRank 2e6 on 2 ranks of one stub, cpu2: host
             * 0 idled 12 to 14 ms of each 50 ms iteration). */
            ahead = __atomic_load_n(&t->fetched, __ATOMIC_RELAXED);
            more = ahead && take_next(s, t, &next, &next_fetch);
            if (rc == 0) {
                double r0 = pm__now();
                s->ops->run_chunk(s, t, k);
                s->last_end = pm__now();
                ran_ns = (uint64_t)((s->last_end - r0) * 1e9) + 1;
                average_in(&pm__counts_own(t, s->index)->run_ns, ran_ns);
                ran_ns += (uint64_t)(queued * 1e9);
            }
        } else if (t->home_dir) {
            /* Host 0 with ranges of a lazy memory on other hosts: fetch
             * what the chunk reads, record what it wrote. */
            if (pm__proto_before_chunk(t, k, NULL) == 0) {
                s->ops->run_chunk(s, t, k);
                pm__data_home_wrote(t, k);
            }
            more = false;
        } else {
            enum pm__guard_end g = PM__GUARD_NONE;
            if (nk == 1 && pm__guard_wanted(s, t, k))
                g = pm__guard_run(s, t, k);
            if (g == PM__GUARD_LOST) {
                /* A copy counted the chunk, and the task may have ended:
                 * only the block is still ours, through the copy's hold. */
                pm__task_unhold(t);
                return;
            }
            if (g == PM__GUARD_NONE)
                nk = run_batch(s, t, k, nk, guess, t0);
            more = false; /* taken below, after the chunk */
        }
        double t1 = pm__now();
        const uint64_t n = span_subtasks(t, k, nk);
        note_time(s, t, n, nk, t1 - t0);
        if (t->sched != NULL && nk == 1) { /* far slower than the task's fastest: guard a while */
            uint64_t least = atomic_load_explicit(&t->sched->min_chunk_ns, memory_order_relaxed);
            if (least != UINT64_MAX && (t1 - t0) * 1e9 > 4.0 * (double)least)
                pm__guard_note_slow(s);
        }
        pm__task_wake_more(t, s->ops->kind, (uint64_t)((t1 - t0) * 1e9 / (double)nk));
        pm__trace_span(s->index, PM__TRACE_CHUNK, t->seq, k, t0, t1);
        if (pm__rt.nhosts > 1 && t->running != NULL) {
            atomic_store(&t->running[s->index], UINT64_MAX);
            atomic_store(&t->copied[s->index], 0);
        }
        uint64_t next_n = 1;
        if (!t->remote) {
            more = take_next(s, t, &next, &next_fetch);
            if (more && batches)
                next_n = take_batch(s, t, next, &guess);
        } else if (!ahead) { /* before this chunk's report: the host stays undrained */
            more = take_next(s, t, &next, &next_fetch);
        }
        atomic_fetch_add(&t->subtasks_done, n);
        if (t->remote)
            pm__proto_after_chunk(t, k, s->ops->kind, ran_ns, late_ns);
        else
            pm__task_done(t, nk);
        if (!more)
            return;
        k = next;
        nk = next_n;
        fetch = next_fetch;
    }
}

/* What a stub holds while it looks for work: the ready lock, and with
 * several hosts the runtime lock first (taking a chunk of another host's
 * task and asking other hosts for work change state under it). */
static void lock_work(void)
{
    if (pm__rt.nhosts > 1)
        pthread_mutex_lock(&pm__rt.lock);
    pthread_mutex_lock(&pm__rt.ready_lock);
}

static void unlock_work(void)
{
    pthread_mutex_unlock(&pm__rt.ready_lock);
    if (pm__rt.nhosts > 1)
        pthread_mutex_unlock(&pm__rt.lock);
}

/* Whether an idle stub may poll (read under the ready lock, or as a hint
 * without it, idle_unlocked): the first one always; more
 * while the stubs not asleep, this one included, fit in the cores left
 * beside the program's thread, so that a poller never takes a core from a
 * thread with work. */
static bool may_poll_locked(void)
{
    return pm__pollers_count(0) + pm__pollers_count(1) == 0 || pm__stubs_poll_room() >= 0;
}

/* Whether a poke came (s->handed is then to be read). */
static bool poke_done(const pm__stub_t *s)
{
    return pm__poke_state(atomic_load_explicit(&s->poke, memory_order_acquire)) == PM__POKE_DONE;
}

static bool poked(const void *arg)
{
    return poke_done(arg) || atomic_load_explicit(&pm__rt.shutdown, memory_order_relaxed);
}

/* A polling stub's wait where it makes the comm thread's progress itself:
 * done when poked, or when a message it handled added work (a task from
 * host 0, a dependency it ended) that may need no poke: the stub that
 * makes work ready counts itself as one to run it. */
typedef struct {
    const pm__stub_t *s;
    uint64_t gen;
} poll_wait_t;

static bool poked_or_news(const void *arg)
{
    const poll_wait_t *w = arg;
    if (poked(w->s))
        return true;
    return pm__comm_poll() > 0 && atomic_load_explicit(&pm__rt.work_gen, memory_order_acquire) != w->gen;
}

/* A sleep until work is added (ready lock held; returns with no lock
 * held), or until a straggler's copy is due (wait_ns, exec/guard.c).
 * Work is added under the ready lock, which the wait releases; gen is the
 * work generation the caller last looked at. */
static void park(pm__stub_t *s, uint64_t wait_ns, uint64_t gen)
{
    const int kind = s->ops->kind == PM_DEVICE_GPU;
    if (!atomic_load(&pm__rt.shutdown) && atomic_load(&pm__rt.work_gen) == gen) {
        pm__rt.parked[kind]++;
        atomic_store(&s->parked, true);
        if (wait_ns == 0 && kind == 0 && pm__guard_any())
            wait_ns = 1000000; /* a chunk may straggle: look again in 1 ms */
        if (wait_ns > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + wait_ns;
            ts.tv_sec += (time_t)(ns / 1000000000u);
            ts.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&pm__rt.work_cv[kind], &pm__rt.ready_lock, &ts);
        } else {
            pthread_cond_wait(&pm__rt.work_cv[kind], &pm__rt.ready_lock);
        }
        atomic_store(&s->parked, false);
        pm__rt.parked[kind]--;
    }
    pthread_mutex_unlock(&pm__rt.ready_lock);
}

/* Off the pollers by itself; false when a poker took it off first and
 * its poke is coming (await_poke). */
static bool leave_pollers(pm__stub_t *s, int kind)
{
    if (!pm__pollers_remove(s, kind))
        return false;
    atomic_store(&s->parked, false);
    return true;
}

/* The poke a poker that took this stub off the pollers owes it: true
 * and the task it hands (or NULL) in *t; false when the stub was in a
 * program thread's stash and took itself back (no poke comes). */
static bool await_poke(pm__stub_t *s, pm__task_t **t)
{
    for (;;) {
        if (poke_done(s)) {
            *t = pm__poke_taken(s);
            return true;
        }
        if (pm__poke_take_back(s)) {
            atomic_store(&s->parked, false);
            return false;
        }
        pm__cpu_relax();
    }
}

/* A stub on the pollers, no lock held, polls for `spell` ns: returns the
 * task a poke handed it (or NULL, a poke without one), else NULL once it
 * left the pollers and, its spell over, slept (park). */
static pm__task_t *poll_spell(pm__stub_t *s, uint64_t wait_ns, uint64_t spell, uint64_t gen)
{
    const int kind = s->ops->kind == PM_DEVICE_GPU;
    /* Poked: the poker took it off the pollers, so no lock is needed
     * (many stubs poked at once would queue for it). */
    poll_wait_t w = {s, gen};
    bool done = pm__rt.nhosts > 1 ? pm__comm_spin(poked_or_news, &w, spell) : pm__spin_for(poked, s, spell);
    if (done && poke_done(s))
        return pm__poke_taken(s);
    pthread_mutex_lock(&pm__rt.ready_lock);
    if (!leave_pollers(s, kind)) {
        pthread_mutex_unlock(&pm__rt.ready_lock);
        pm__task_t *t;
        if (await_poke(s, &t))
            return t;
        pthread_mutex_lock(&pm__rt.ready_lock); /* taken back: as if it left */
    }
    if (wait_ns > 0 && wait_ns <= spell) { /* the copy is due: look now */
        pthread_mutex_unlock(&pm__rt.ready_lock);
        return NULL;
    }
    park(s, wait_ns > 0 ? wait_ns - spell : 0, gen);
    return NULL;
}

/* Onto the pollers: from now on a thread that adds work may poke it. */
static void join_pollers(pm__stub_t *s, int kind)
{
    atomic_store_explicit(&s->poke, ++s->joins << 8 | PM__POKE_WAIT, memory_order_relaxed);
    atomic_store(&s->parked, true); /* comes only when poked */
    pm__pollers_add(s, kind);
}

/*
 * No work found (work lock held): poll a short spell (PMLIB_SPIN_US) so new
 * work starts within microseconds, then sleep until work is added. Returns
 * with no lock held. A polling stub watches only its own poke: the thread
 * that adds work pokes as many pollers as the work is worth
 * (pm__task_ready_locked), so new work sends no crowd of stubs after the
 * ready lock and a few stubs stay busy while the others wait.
 */
static pm__task_t *idle(pm__stub_t *s, uint64_t wait_ns)
{
    const int kind = s->ops->kind == PM_DEVICE_GPU;
    uint64_t gen = atomic_load_explicit(&pm__rt.work_gen, memory_order_acquire);
    /* A stub waiting for a straggler's copy to fall due (wait_ns) polls
     * too, until then at most: sleeping instead, it came only through a
     * system call's wake-up, 10 to 20 us late for the next timestep of a
     * dependent task whose chunks were guarded (2 cores, chunks of 150
     * us: every timestep 28 us longer). */
    const uint64_t spell = wait_ns > 0 && wait_ns < pm__rt.spin_ns ? wait_ns : pm__rt.spin_ns;
    bool poll = spell > 0 && may_poll_locked();
    if (poll)
        join_pollers(s, kind);
    if (pm__rt.nhosts > 1)
        pthread_mutex_unlock(&pm__rt.lock);
    if (poll) {
        pthread_mutex_unlock(&pm__rt.ready_lock);
        return poll_spell(s, wait_ns, spell, gen);
    }
    park(s, wait_ns, gen);
    return NULL;
}

/*
 * The way to idle without the ready lock (one host): a stub that finds no
 * task listed for its kind joins the pollers, then looks again; a thread
 * that lists a task reads the pollers after it set ready_any (both sides
 * fenced, core/task.c), so either the stub sees the task and goes the
 * locked way, or the lister sees the stub and may poke it. True when it
 * idled (*t: a task handed with a poke, or NULL); false: take the ready
 * lock and look (something is listed, a chunk may straggle, or polling is
 * off). The ready lock was the one lock every stub took as it went idle
 * (16 cores, 100,000 empty tasks: a seventh of the stubs' samples in the
 * kernel, under that lock's futex calls).
 */
static bool idle_unlocked(pm__stub_t *s, pm__task_t **t)
{
    const int kind = s->ops->kind == PM_DEVICE_GPU;
    if (pm__rt.nhosts > 1 || pm__rt.spin_ns == 0 || atomic_load(&pm__rt.shutdown) ||
        atomic_load_explicit(&pm__rt.ready_any[kind], memory_order_relaxed) ||
        (kind == 0 && pm__guard_any()))
        return false;
    uint64_t gen = atomic_load_explicit(&pm__rt.work_gen, memory_order_acquire);
    if (!may_poll_locked()) /* read without the lock: a hint as under it */
        return false;
    join_pollers(s, kind);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&pm__rt.ready_any[kind])) {
        if (leave_pollers(s, kind))
            return false;
        return await_poke(s, t);
    }
    *t = poll_spell(s, 0, pm__rt.spin_ns, gen);
    return true;
}

/* A task handed with a poke (one host): a chunk of it if one is left for
 * this stub, taken without the ready lock; then the hold is dropped (which
 * frees the task if it ended and was released meanwhile, so t must not be
 * read after a false return; a chunk taken keeps it from ending). */
static bool take_handed(pm__stub_t *s, pm__task_t *t, uint64_t *chunk)
{
    bool got = pm__task_runnable_on(t, s) && t->policy->take(t, s->index, chunk);
    if (got && t->policy->left(t) == 0)
        pm__task_unready_drained(t);
    pm__task_unhold(t);
    return got;
}

static void *stub_main(void *arg)
{
    pm__stub_t *s = arg;
    pm__internal_thread = 1;
    pm__self_stub = s;
    for (;;) {
        pm__own_core = atomic_load_explicit(&s->in_share, memory_order_relaxed); /* bound after it started */
        if (atomic_load_explicit(&s->warm, memory_order_relaxed) && atomic_exchange(&s->warm, false))
            s->ops->ready(s);
        pm__task_t *t;
        uint64_t k;
        if (s->mine != NULL) { /* made ready by this stub, kept for it */
            t = s->mine;
            s->mine = NULL;
            if (pm__task_runnable_on(t, s) && t->policy->take(t, s->index, &k))
                run_loop(s, t, k);
            /* Chunks this stub declined (the policy judged another stub
             * better, at the first take or a later one): only stubs it
             * poked know the task, so it goes on the lists. Held until
             * here, so it is still readable once done. */
            if (t->policy->left(t) > 0)
                pm__task_unkeep(t);
            pm__task_unhold(t);
            continue;
        }
        if (idle_unlocked(s, &t)) {
            if (t != NULL && take_handed(s, t, &k))
                run_loop(s, t, k);
            continue;
        }
        lock_work();
        if (atomic_load(&pm__rt.shutdown)) {
            unlock_work();
            break;
        }
        enum job j = find_work_locked(s, &t, &k);
        uint64_t wait_ns = 0;
        if (j == JOB_NONE && s->ops->kind == PM_DEVICE_CPU && pm__guard_any()) {
            /* Nothing to take, but a chunk may be straggling. */
            unlock_work();
            if (pm__guard_copy(s, &wait_ns))
                continue;
            lock_work();
            if (atomic_load(&pm__rt.shutdown)) {
                unlock_work();
                break;
            }
            j = find_work_locked(s, &t, &k);
        }
        if (j == JOB_NONE) {
            t = idle(s, wait_ns);
            if (t != NULL && take_handed(s, t, &k))
                run_loop(s, t, k);
            continue;
        }
        if (j == JOB_ASK) { /* several hosts: the runtime lock is held */
            pthread_mutex_unlock(&pm__rt.ready_lock);
            pm__proto_want_work_locked(t);
            pthread_mutex_unlock(&pm__rt.lock);
            continue;
        }
        unlock_work();
        if (j == JOB_PREPARE)
            prepare_loop(s, t, k);
        else
            run_loop(s, t, k);
    }
    return NULL;
}

static int stubs_made;

/* The pollers' words for n stubs, each kind's on lines of its own. */
static int pollers_alloc(int n)
{
    int words = (n + 63) / 64;
    size_t bytes = ((size_t)words * sizeof(atomic_uint_fast64_t) + 63) & ~(size_t)63;
    atomic_uint_fast64_t *p = aligned_alloc(64, 3 * bytes);
    if (p == NULL)
        return PM_ENOMEM;
    memset(p, 0, 3 * bytes);
    pm__rt.pollers[0] = p;
    pm__rt.pollers[1] = (atomic_uint_fast64_t *)((char *)p + bytes);
    pm__rt.stashed = (atomic_uint_fast64_t *)((char *)p + 2 * bytes);
    pm__rt.poll_words = words;
    return 0;
}

static void pollers_free(void)
{
    free(pm__rt.pollers[0]);
    pm__rt.pollers[0] = pm__rt.pollers[1] = pm__rt.stashed = NULL;
    pm__rt.poll_words = 0;
}

/*
 * Binds each CPU stub to a core of its own (PMLIB_BIND, on by default), as
 * MPI launchers bind ranks: left to the system, two busy stubs sometimes
 * shared a core for a while, and a task of one chunk per stub waits for
 * the slowest (on 16 cores, 4 stubs' chunks took 24 us where the others'
 * took 12). The cores are this process's (its affinity mask), split among
 * the ranks of the host when the launcher did not bind them, the last
 * ones first, so that the program's thread keeps the first core. By
 * default stubs are bound only when a core is left for the program's
 * thread (bound stubs and a busy program thread on the same cores were
 * 1.5x slower per empty task on 2 cores), or when the ranks of a machine
 * share out its cores: there the system kept one rank's stub on the
 * other's core for whole runs (2 unbound ranks of one stub on cpu2:
 * matmul 2048 on both as slow as on one in some runs, PageRank 2e6 up to
 * 2.04x its one-rank time). PMLIB_BIND=1 binds them as long as they do not
 * outnumber the cores, 0 never. GPU stubs are never bound.
 */
static void bind_stubs(void)
{
    /* 2: not set (bind when a core is left for the program's thread). */
    uint64_t bind = pm__env_uint("PMLIB_BIND", "0 or 1", 0, 1, 2);
    pm__rt.bind = (int)bind;
    if (bind == 0)
        return;
    /* The cores: this rank's share where the launcher left the ranks
     * unbound, else the process's affinity mask. */
    int cores[CPU_SETSIZE], n = pm__comm_share(cores, CPU_SETSIZE);
    const bool share = n >= 0;
    if (!share) {
        cpu_set_t mask;
        if (sched_getaffinity(0, sizeof mask, &mask) != 0)
            return;
        n = 0;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &mask))
                cores[n++] = c;
    }
    int ncpu = 0;
    for (int i = 0; i < pm__rt.nstubs; i++)
        ncpu += pm__rt.stubs[i].ops->kind == PM_DEVICE_CPU;
    if (ncpu == 0 || ncpu > n || (bind == 2 && ncpu >= n && !share))
        return;
    int j = n - ncpu;
    for (int i = 0; i < pm__rt.nstubs; i++) {
        if (pm__rt.stubs[i].ops->kind != PM_DEVICE_CPU)
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cores[j], &one);
        if (pthread_setaffinity_np(pm__rt.stubs[i].thread, sizeof one, &one) != 0)
            return; /* not allowed here: the system places them */
        atomic_store(&pm__rt.stubs[i].in_share, share);
        j++;
    }
    pm__debug("host %d: %d CPU stubs bound to cores %d to %d", pm__rt.host, ncpu, cores[n - ncpu], cores[n - 1]);
}

/* CPU stubs first, then one per GPU this process drives. */
static void describe_stub(pm__stub_t *s, int i, const pm__gpu_info_t *gpus)
{
    s->index = i;
    s->device_index = i;
    s->ops = &pm__cpu_ops;
    s->speed = 1.0;
#if PMLIB_HAVE_CUDA
    if (i >= pm__rt.ncpu) {
        const pm__gpu_info_t *g = &gpus[i - pm__rt.ncpu];
        s->device_index = g->ordinal;
        s->ops = &pm__cuda_ops;
        s->speed = g->sm_count / 4.0; /* a rough guess; pull balances the rest */
        s->major = g->major;
        s->minor = g->minor;
        s->mem_bytes = g->mem_bytes;
        snprintf(s->name, sizeof s->name, "%s", g->name);
    }
#else
    (void)gpus;
#endif
}

int pm__stubs_start(void)
{
    pm__gpu_info_t *gpus = NULL;
    int ngpu = 0;
    atomic_store(&pm__rt.warm_asked, false);
    int rc = pm__cuda_discover(&gpus, &ngpu, pm__rt.local_rank, pm__rt.local_size);
    if (rc != 0)
        return rc;
    /* Each GPU stub is a busy thread: by default it takes one core's place. */
    if (!pm__rt.ncpu_set && ngpu > 0)
        pm__rt.ncpu = pm__rt.ncpu > ngpu ? pm__rt.ncpu - ngpu : 1;
    int n = pm__rt.ncpu + ngpu;
    size_t bytes = (size_t)n * sizeof *pm__rt.stubs; /* a multiple of the alignment */
    pm__rt.stubs = aligned_alloc(_Alignof(pm__stub_t), bytes);
    if (pm__rt.stubs == NULL || pollers_alloc(n) != 0) {
        free(pm__rt.stubs);
        pm__rt.stubs = NULL;
        free(gpus);
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory for %d stubs", n);
    }
    memset(pm__rt.stubs, 0, bytes);
    int made = 0;
    for (int i = 0; i < n; i++) {
        pm__stub_t *s = &pm__rt.stubs[made];
        describe_stub(s, i, gpus);
        s->index = made;
        rc = s->ops->init(s);
        if (rc == 0) {
            made++;
        } else if (s->ops->kind == PM_DEVICE_GPU) {
            /* A GPU that cannot be set up is left out; the CPUs still work. */
            pm__warn("pm_init: gpu %d of host %d cannot run a stub; continuing without it",
                     s->device_index, pm__rt.host);
            *s = (pm__stub_t){0};
        } else {
            free(gpus);
            goto fail;
        }
    }
    free(gpus);
    n = stubs_made = made;
    pm__rt.nstubs = n; /* before any stub runs: idle stubs read it */
    for (int i = 0; i < n; i++) {
        if (pthread_create(&pm__rt.stubs[i].thread, NULL, stub_main, &pm__rt.stubs[i]) != 0) {
            pthread_mutex_lock(&pm__rt.ready_lock);
            pm__rt.nstubs = i;
            pthread_mutex_unlock(&pm__rt.ready_lock);
            pm__stubs_stop();
            return PM__FAIL(PM_ENOMEM, "pm_init: cannot start stub thread %d of %d; lower PMLIB_NCPU", i, n);
        }
        char name[16];
        snprintf(name, sizeof name, "pmlib-%s%d", pm__rt.stubs[i].ops->name,
                 pm__rt.stubs[i].device_index % 1000);
        pthread_setname_np(pm__rt.stubs[i].thread, name);
    }
    bind_stubs();
    return 0;
fail:
    for (int i = 0; i < n; i++)
        if (pm__rt.stubs[i].ops != NULL && pm__rt.stubs[i].priv != NULL)
            pm__rt.stubs[i].ops->fini(&pm__rt.stubs[i]);
    free(pm__rt.stubs);
    pollers_free();
    pm__rt.stubs = NULL;
    return PM__FAIL(PM_ENOMEM, "pm_init: cannot set up the stubs");
}

/*
 * Called when callbacks with a cuda function are registered: the GPU stubs
 * set up their devices while the program still prepares its data, not in
 * its first task's time. Each stub makes its GPU's context there; several
 * GPUs of one process took 140 to 170 ms before their first chunk (2 x
 * H100, nbody's first step; one GPU 28 ms), about as long as a step.
 */
void pm__stubs_warm(void)
{
    if (atomic_exchange(&pm__rt.warm_asked, true))
        return;
    bool any = false;
    for (int i = 0; i < pm__rt.nstubs; i++)
        if (pm__rt.stubs[i].ops->ready != NULL) {
            atomic_store(&pm__rt.stubs[i].warm, true);
            any = true;
        }
    if (!any)
        return;
    pthread_mutex_lock(&pm__rt.ready_lock);
    atomic_fetch_add(&pm__rt.work_gen, 1); /* a stub about to park looks again */
    pthread_cond_broadcast(&pm__rt.work_cv[0]);
    pthread_cond_broadcast(&pm__rt.work_cv[1]);
    pthread_mutex_unlock(&pm__rt.ready_lock);
}

void pm__stubs_stop(void)
{
    pthread_mutex_lock(&pm__rt.lock);
    pthread_mutex_lock(&pm__rt.ready_lock);
    atomic_store(&pm__rt.shutdown, 1);
    atomic_fetch_add(&pm__rt.work_gen, 1);
    pthread_cond_broadcast(&pm__rt.work_cv[0]);
    pthread_cond_broadcast(&pm__rt.work_cv[1]);
    pthread_mutex_unlock(&pm__rt.ready_lock);
    pthread_mutex_unlock(&pm__rt.lock);
    for (int i = 0; i < pm__rt.nstubs; i++)
        pthread_join(pm__rt.stubs[i].thread, NULL);
    for (int i = 0; i < stubs_made && pm__rt.stubs; i++)
        pm__rt.stubs[i].ops->fini(&pm__rt.stubs[i]);
    free(pm__rt.stubs);
    pollers_free();
    pm__rt.stubs = NULL;
    __atomic_store_n(&pm__rt.nstubs, 0, __ATOMIC_RELAXED); /* the comm thread reads it */
}
