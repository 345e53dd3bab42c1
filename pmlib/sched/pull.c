/* Pull (default): equal initial shares, then idle stubs steal half a range. */
#include <stdlib.h>

#include "sched/ranges.h"

static int pull_init(pm__task_t *t, int nstubs)
{
    double *w = malloc((size_t)nstubs * sizeof *w);
    if (w == NULL)
        return PM_ENOMEM;
    pm__ranges_equal_weights(t, nstubs, w);
    int rc = pm__ranges_init(t, nstubs, w);
    free(w);
    return rc;
}

/* Slower stubs than this many times the fastest one are held back at the end. */
#define PM__SLOW_FACTOR 4

/*
 * Whether a slow stub (a CPU core beside GPUs) should take another chunk:
 * not when the faster stubs would finish every chunk left before it
 * finished this one, which would only make the task end later. Only faster
 * stubs that have not left the task count: they look at the ranges again,
 * while one that left may be asleep.
 */
/* A stub's time per chunk: measured in this task, else its kind's history
 * with these callbacks, else 0 (unknown). */
static uint64_t chunk_ns(const pm__task_t *t, int s)
{
    uint64_t ns = atomic_load_explicit(&t->counts[s].chunk_ns, memory_order_relaxed);
    if (ns == 0 && t->cbs.hist != NULL)
        ns = atomic_load_explicit(&t->cbs.hist->ns_per_subtask[pm__rt.stubs[s].ops->kind == PM_DEVICE_GPU],
                                  memory_order_relaxed) * t->grain;
    return ns;
}

static bool worth_taking(const pm__task_t *t, int stub)
{
    uint64_t mine = chunk_ns(t, stub);
    if (mine == 0)
        return true;
    double rate = 0; /* chunks per ns of the stubs clearly faster than this one */
    for (int s = 0; s < t->sched->nstubs; s++) {
        uint64_t ns = chunk_ns(t, s);
        if (s != stub && ns > 0 && ns * PM__SLOW_FACTOR < mine &&
            atomic_load_explicit(&t->counts[s].active, memory_order_acquire) &&
            pm__task_runnable_on(t, &pm__rt.stubs[s]))
            rate += 1.0 / (double)ns;
    }
    if (rate == 0)
        return true;
    bool take = (double)mine < (double)pm__ranges_left(t) / rate;
    pm__debug("task %llu stub %d: %llu ns per chunk, %llu chunks left, faster stubs %.0f ns per chunk: %s",
              (unsigned long long)t->seq, stub, (unsigned long long)mine,
              (unsigned long long)pm__ranges_left(t), 1.0 / rate, take ? "takes" : "leaves them");
    return take;
}

static bool pull_take(pm__task_t *t, int stub, uint64_t *chunk)
{
    if (!worth_taking(t, stub))
        return false;
    return pm__ranges_take_own(t, stub, chunk) || pm__ranges_steal(t, stub, chunk);
}

const pm__sched_policy_t pm__sched_pull = {
    .name = "pull",
    .id = PM_SCHED_PULL,
    .init = pull_init,
    .take = pull_take,
    .left = pm__ranges_left,
    .fini = pm__ranges_fini,
};
