/*
 * Pull (default): initial shares follow the speeds the performance model
 * knows (equal while it knows nothing), then idle stubs steal half a
 * range. A stub much slower than others leaves the end of a task to them,
 * and a device that would not pay even at the start takes nothing but a
 * rare probe chunk.
 */
#include <stdlib.h>

#include "sched/model.h"
#include "sched/ranges.h"

/* Slower stubs than this many times the fastest one are held back at the end. */
#define PM__SLOW_FACTOR 4

static bool writes_in_place(const pm__task_t *t)
{
    for (int i = 0; i < t->desc.nmem; i++)
        if ((t->desc.mem[i].access & PM_WRITE) && t->desc.mem[i].reduce == PM_REDUCE_NONE)
            return true;
    return false;
}

/* Whether stub s is a CPU core. */
static bool on_cpu(int s)
{
    return pm__rt.stubs[s].ops->kind == PM_DEVICE_CPU;
}

/*
 * What a chunk on a CPU costs beyond its own time when a GPU may run the
 * task and the task writes memory in place: a GPU keeps what it wrote in
 * its mirror for the next task, but must copy in what a CPU wrote. Its
 * time per subtask over the bytes it moves per subtask bounds its time per
 * byte, so the bytes it writes per subtask bound that cost. 0 if unknown.
 */
static double copy_back_ns(const pm__task_t *t, int nstubs, bool in_place)
{
    if (!in_place || (t->sched != NULL && t->sched->cpu_only))
        return 0;
    double worst = 0;
    for (int s = 0; s < nstubs; s++) {
        if (pm__rt.stubs[s].ops->kind != PM_DEVICE_GPU || !pm__task_runnable_on(t, &pm__rt.stubs[s]))
            continue;
        double ns = pm__model_ns(t->cbs->model, s), in, out;
        pm__model_bytes(t->cbs->model, s, &in, &out);
        if (ns > 0 && out > 0 && ns * out / (in + out) > worst)
            worst = ns * out / (in + out);
    }
    return worst * (double)t->grain;
}

/* Whether stub s may run the task and has not left it (`gone`; NULL:
 * none has). */
static bool may_come(const pm__task_t *t, const atomic_uchar *gone, int s)
{
    return (gone == NULL || !atomic_load_explicit(&gone[s], memory_order_acquire)) &&
           pm__task_runnable_on(t, &pm__rt.stubs[s]);
}

/* Below this much of the GPUs' time for the rest of a task, a CPU core
 * whose speed for these callbacks is not known yet leaves the task to
 * them: one chunk of it may outlast their whole share (a core is often
 * 100x slower than a GPU), and what it could add to so short a task is
 * small. */
#define PM__UNKNOWN_CPU_NS 1e9

/* Whether a stub whose speed is unknown takes a chunk: yes, unless it is
 * a CPU core beside GPUs that may run the task and will (not gone), and
 * those have not run a chunk yet or would finish the rest within
 * PM__UNKNOWN_CPU_NS. */
static bool unknown_pays(const pm__task_t *t, int nstubs, int stub, uint64_t left,
                         const atomic_uchar *gone)
{
    if (!on_cpu(stub))
        return true;
    double rate = 0; /* the GPUs' chunks per ns */
    for (int s = 0; s < nstubs; s++) {
        if (on_cpu(s) || !may_come(t, gone, s))
            continue;
        double ns = pm__model_chunk_ns(t, s);
        if (ns <= 0)
            return false; /* its first chunk tells */
        rate += 1.0 / ns;
    }
    return rate == 0 || (double)left / rate >= PM__UNKNOWN_CPU_NS;
}

/*
 * Whether no stub can be clearly faster than `stub`, whose time per chunk
 * is `mine`, without looking at each stub (whose counters other cores
 * write): for a task only CPU stubs run, every stub's time is at least the
 * shortest any stub has averaged in the task, or the shortest time the
 * model knew for their devices when the task began, where it has not run
 * a chunk yet.
 */
static bool none_clearly_faster(const pm__task_t *t, double mine)
{
    if (t->sched == NULL || !t->sched->cpu_only) /* NULL: planning */
        return false;
    double least = t->sched->model_least;
    uint64_t m = atomic_load_explicit(&t->sched->min_chunk_ns, memory_order_relaxed);
    if (m != UINT64_MAX && (least <= 0 || (double)m < least))
        least = (double)m;
    return least > 0 && mine <= least * PM__SLOW_FACTOR;
}

/*
 * Whether a chunk on `stub` pays: not when the stubs clearly faster than
 * it would finish the `left` chunks before it finished this one, which
 * would only make the task end later. Every stub is weighed with its own
 * copy-back cost, so the fastest never declines. A faster stub counts
 * unless its last take found nothing (`gone`; NULL: none has): one that
 * has not come yet will, and one that left may be asleep. `back` is
 * copy_back_ns(); *over, when not NULL, this chunk's time over the faster
 * stubs' time for all that is left (0 when none is faster).
 */
static bool pays(const pm__task_t *t, int nstubs, int stub, uint64_t left,
                 const atomic_uchar *gone, double back, double *over)
{
    if (over != NULL)
        *over = 0;
    /* Stubs of one device, this one with less than two chunks of the task
     * run: no evidence against it (below), and nothing else to weigh. */
    const pm__stub_counts_t *mc = pm__counts_peek(t, stub);
    const bool one_chunk = (mc != NULL ? mc->subtasks : 0) < 2 * t->grain;
    if (one_chunk && t->sched != NULL && t->sched->cpu_only && t->sched->one_device)
        return true;
    double mine = pm__model_chunk_ns(t, stub);
    if (mine == 0)
        return unknown_pays(t, nstubs, stub, left, gone);
    if (none_clearly_faster(t, mine))
        return true;
    mine += on_cpu(stub) ? back : 0;
    /* Against stubs of its own device, one chunk is no evidence: a core
     * the system took away for a while makes one chunk slow, and the stub
     * that left the rest to an equal one not yet running (not woken, or
     * not scheduled on a busy machine) held the task for milliseconds. */
    const pm__model_dev_t *dev = pm__model_dev_of(t->cbs->model, stub);
    double rate = 0; /* chunks per ns of the stubs clearly faster than this one */
    for (int s = 0; s < nstubs; s++) {
        if (one_chunk && s != stub && pm__model_dev_of(t->cbs->model, s) == dev)
            continue;
        double ns = s == stub ? 0 : pm__model_chunk_ns(t, s);
        if (ns > 0 && on_cpu(s))
            ns += back;
        if (ns > 0 && ns * PM__SLOW_FACTOR < mine && may_come(t, gone, s) && !pm__guard_stalled(pm__rt.stubs, s, ns))
            rate += 1.0 / ns;
    }
    if (rate == 0)
        return true;
    double ratio = mine * rate / (double)left;
    if (over != NULL)
        *over = ratio;
    bool take = ratio < 1;
    pm__debug("task %llu stub %d: %.0f ns per chunk, %llu chunks left, faster stubs %.0f ns per chunk: %s",
              (unsigned long long)t->seq, stub, mine, (unsigned long long)left, 1.0 / rate,
              take ? "takes" : "leaves them");
    return take;
}

/* A device held back probes a chunk now and then only while one chunk of
 * it would take less than this many times the rest of the task: a probe
 * of a device far slower (a CPU core beside a GPU, 100x slower or more)
 * would hold the whole task for nothing. */
#define PM__PROBE_WITHIN 4

/* Whether no stub before `s` is of the same device (model entry). */
static bool first_of_device(const pm__task_t *t, const double *w, int s)
{
    const pm__model_dev_t *d = pm__model_dev_of(t->cbs->model, s);
    for (int i = 0; i < s; i++)
        if (w[i] > 0 && pm__model_dev_of(t->cbs->model, i) == d)
            return false;
    return true;
}

/*
 * The first chunks: when the model knows every eligible device, shares in
 * proportion to their speeds and none for a device that would not pay even
 * at the start. Such a device still probes one chunk now and then, lest it
 * never be measured again (model.c: after 16 held-back tasks, then 32, ...);
 * returns the stub that probes in this task, or -1.
 */
static int plan(pm__task_t *t, int nstubs, double *w, bool in_place)
{
    const uint64_t n = t->hi - t->lo;
    /* Cores whose speed is not known yet beside GPUs whose speed is: the
     * cores wait for the GPUs' first chunk and join only when the GPUs
     * would need a second or more (unknown_pays), so they start with no
     * share and steal if they join. Else the GPUs took the cores' shares
     * one chunk at a time, and two GPUs ran alternate blocks (fft2d's
     * columns then each took rows from the other GPU in 16 pieces, not
     * one: 1.4x the time of the same task without the cores). */
    bool gpu_known = false, other_unknown = false;
    for (int s = 0; s < nstubs; s++)
        if (w[s] > 0 && !on_cpu(s)) {
            bool known = pm__model_ns(t->cbs->model, s) > 0;
            gpu_known |= known;
            other_unknown |= !known;
        }
    for (int s = 0; gpu_known && !other_unknown && s < nstubs; s++)
        if (w[s] > 0 && on_cpu(s) && pm__model_ns(t->cbs->model, s) <= 0)
            w[s] = 0;
    const pm__model_dev_t *one = NULL; /* the device, while all are alike */
    bool alike = true;
    for (int s = 0; s < nstubs && alike; s++) {
        if (w[s] <= 0)
            continue;
        const pm__model_dev_t *d = pm__model_dev_of(t->cbs->model, s);
        alike = one == NULL || d == one;
        one = d;
    }
    if (alike || n == 0)
        return -1; /* stubs of one device: equal shares */
    for (int s = 0; s < nstubs; s++)
        if (w[s] > 0 && pm__model_ns(t->cbs->model, s) <= 0)
            return -1; /* keep equal shares: today's measurements decide */
    int probe = -1;
    const double back = copy_back_ns(t, nstubs, in_place);
    double few[64], *speed = nstubs <= 64 ? few : malloc((size_t)nstubs * sizeof *speed);
    if (speed == NULL)
        return -1;
    for (int s = 0; s < nstubs; s++) {
        speed[s] = 0;
        if (w[s] <= 0)
            continue;
        double over;
        bool held = !pays(t, nstubs, s, n, NULL, back, &over);
        if (first_of_device(t, w, s)) {
            if (!held)
                pm__model_paid(t->cbs->model, s);
            else if (pm__model_held_back(t->cbs->model, s) && probe < 0 && over < PM__PROBE_WITHIN)
                probe = s;
        }
        if (!held)
            speed[s] = 1.0 / (pm__model_ns(t->cbs->model, s) + (on_cpu(s) ? back : 0) / (double)t->grain);
    }
    /* Never none: some stub must hold the chunks (the fastest never
     * declines, but the weights are rounded doubles). */
    bool any = false;
    for (int s = 0; s < nstubs; s++)
        any |= speed[s] > 0;
    for (int s = 0; any && s < nstubs; s++)
        w[s] = speed[s];
    if (speed != few)
        free(speed);
    if (probe >= 0)
        pm__debug("task %llu: stub %d probes a chunk for its device, held back by the model",
                  (unsigned long long)t->seq, probe);
    return probe;
}

/* What the model says of the stubs that may run t: whether they are all
 * CPU cores (cpu_only) counted as one device (one_device), and the
 * shortest time per chunk it knows for them (0: none). Each device's
 * average is read once: stubs write them as chunks end, so every read may
 * cost a cache miss. */
static void model_view(const pm__task_t *t, int nstubs, bool *cpu_only, bool *one_device,
                       double *least)
{
    const pm__model_dev_t *last = NULL;
    int devices = 0;
    *cpu_only = true;
    *least = 0;
    if (t->run_kinds == 1u) { /* CPU stubs alone, every one: one device (model.c) */
        *one_device = true;
        /* Not for a task of one chunk, which is pooled whatever its time:
         * the stub that takes it reads the model if it needs to, not the
         * submitting thread (16 cores: 5% of its time per empty task). */
        if (t->nchunks > 1)
            *least = pm__model_cpu_ns(t->cbs->model) * (double)t->grain;
        return;
    }
    for (int s = 0; s < nstubs; s++) {
        if (!pm__task_runnable_on(t, &pm__rt.stubs[s]))
            continue;
        *cpu_only &= on_cpu(s);
        const pm__model_dev_t *d = pm__model_dev_of(t->cbs->model, s);
        if (d == last && devices > 0)
            continue;
        devices++;
        last = d;
        double ns = pm__model_ns(t->cbs->model, s) * (double)t->grain;
        if (ns > 0 && (*least == 0 || ns < *least))
            *least = ns;
    }
    *one_device = devices == 1;
}

static int pull_init(pm__task_t *t, int nstubs)
{
    bool cpu_only, one_device;
    double least;
    model_view(t, nstubs, &cpu_only, &one_device, &least);
    /* One chunk that any CPU stub may take, on one host: nothing to share
     * out, steal or weigh, so no state but a flag (four lines of the task's
     * block fewer to write at each submit and at each take). */
    if (pm__rt.nhosts == 1 && t->hi - t->lo == 1 && cpu_only && one_device) {
        t->sched = NULL;
        atomic_init(&t->one_left, 1);
        return 0;
    }
    /* A task on one host whose whole work is worth fewer stubs than the
     * host has (core/task.c engages one per pm__poke_worth_ns() of it)
     * starts as one pool the first stub takes whole, and the stubs engaged
     * steal halves from it: split into a share per stub, the few stubs
     * engaged stole the others' shares piece by piece (16 empty subtasks
     * on 2 stubs: 4 steals; on 31 stubs: 13 a task, 14 us a task). So does
     * a task of one chunk for stubs of one device: any of them may take
     * it, and shares would only cost their setting up. */
    const uint64_t n = t->hi - t->lo;
    const bool pooled = pm__rt.nhosts == 1 && n > 0 && cpu_only && one_device &&
                        (n == 1 || (least > 0 && least * (double)n < pm__poke_worth_ns() * (double)pm__rt.ncpu));
    int probe = -1, rc;
    bool in_place = writes_in_place(t);
    if (pooled) {
        rc = pm__ranges_init_pooled(t, nstubs);
    } else if (cpu_only && one_device) {
        /* Stubs of one device take equal shares: plan() would find so,
         * reading each stub's model entry again. */
        rc = pm__ranges_init_equal(t, nstubs);
    } else {
        double few[64], *w = nstubs <= 64 ? few : malloc((size_t)nstubs * sizeof *w);
        if (w == NULL)
            return PM_ENOMEM;
        pm__ranges_equal_weights(t, nstubs, w);
        probe = plan(t, nstubs, w, in_place);
        rc = pm__ranges_init(t, nstubs, w);
        if (w != few)
            free(w);
    }
    if (rc == 0) {
        atomic_init(&t->sched->probe, probe);
        t->sched->in_place = in_place;
        t->sched->cpu_only = cpu_only;
        t->sched->model_least = least;
        t->sched->one_device = one_device;
    }
    return rc;
}

/* Whether no other stub that may run the task will come for its chunks:
 * each has left it (its last take found nothing, or it declined) or is
 * asleep without having looked. */
static bool others_left(const pm__task_t *t, int stub)
{
    const struct pm__sched_state *st = t->sched;
    for (int s = 0; s < st->nstubs; s++)
        if (s != stub && pm__task_runnable_on(t, &pm__rt.stubs[s]) && !atomic_load(&st->left[s]) &&
            !atomic_load(&pm__rt.stubs[s].parked))
            return false;
    return true;
}

static bool take_any(pm__task_t *t, int stub, uint64_t *chunk)
{
    return pm__ranges_take_own(t, stub, chunk) || pm__ranges_steal(t, stub, chunk);
}

/* The only chunk of a task without scheduling state (pull_init). */
static bool take_one(pm__task_t *t, uint64_t *chunk)
{
    if (!atomic_load_explicit(&t->one_left, memory_order_relaxed) ||
        !atomic_exchange_explicit(&t->one_left, 0, memory_order_acq_rel))
        return false;
    *chunk = t->lo;
    return true;
}

static uint64_t pull_left(const pm__task_t *t)
{
    return t->sched == NULL ? atomic_load_explicit(&t->one_left, memory_order_relaxed) : pm__ranges_left(t);
}

static bool pull_take(pm__task_t *t, int stub, uint64_t *chunk)
{
    if (t->sched == NULL)
        return take_one(t, chunk);
    struct pm__sched_state *st = t->sched;
    int me = stub; /* the probe is one chunk: the first take of the probing stub */
    bool probing = atomic_load_explicit(&st->probe, memory_order_relaxed) == stub &&
                   atomic_compare_exchange_strong(&st->probe, &me, -1);
    bool pay = probing || pays(t, st->nstubs, stub, pm__ranges_left(t), st->left,
                               copy_back_ns(t, st->nstubs, st->in_place), NULL);
    bool got = pay && take_any(t, stub, chunk);
    if (atomic_load_explicit(&st->left[stub], memory_order_relaxed) != !got) /* a line all write */
        atomic_store(&st->left[stub], !got);
    /* A stub that declines must not leave chunks nobody takes: stubs judge
     * each other by a model that moves while they look, so all could
     * decline at once and sleep. Each one that declines first says so, then
     * looks: of two declining together, at least one sees the other and
     * takes the chunk after all. */
    if (!got && !pay && pm__ranges_left(t) > 0 && others_left(t, stub) && take_any(t, stub, chunk)) {
        atomic_store(&st->left[stub], 0);
        got = true;
    }
    return got;
}

const pm__sched_policy_t pm__sched_pull = {
    .name = "pull",
    .id = PM_SCHED_PULL,
    .init = pull_init,
    .take = pull_take,
    .left = pull_left,
    .fini = pm__ranges_fini,
};
