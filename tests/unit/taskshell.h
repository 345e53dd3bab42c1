/*
 * A task shell for the scheduling tests: just what a policy reads, on
 * `nstubs` CPU stubs (written into `stubs` and installed in the runtime),
 * each of which may run the task; chunks of one subtask each.
 */
#ifndef PMLIB_TASKSHELL_H
#define PMLIB_TASKSHELL_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "exec/stubs.h"
#include "sched/policy.h"
#include "sched/ranges.h"

/* When set, stub 0 of the next shells runs these ops (a GPU, say). */
static const pm__device_ops_t *ts_stub0_ops;

static int ts_noop(const pm_subtask_info_t *info)
{
    (void)info;
    return 0;
}

static inline pm__task_t *ts_task(uint64_t nchunks, pm_sched_t sched, struct pm__model *model,
                                  pm__stub_t *stubs, int nstubs)
{
    pm__task_t *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    t->nchunks = nchunks;
    t->hi = nchunks;
    t->grain = 1;
    t->desc.subtasks = nchunks;
    t->desc.devices = PM_DEVICE_ANY;
    t->desc.sched = sched;
    pm__callbacks_t *set = calloc(1, sizeof *set);
    ck_assert_ptr_nonnull(set);
    set->cb.cpu = ts_noop;
    set->model = model;
    set->set = set;
    t->cbs = set;
    t->counts = calloc((size_t)nstubs, sizeof *t->counts); /* gen 0, the task's: all in use */
    t->runnable = calloc((size_t)nstubs, 1);
    /* Room for every memory a test may give the task (none known: NULL). */
    t->desc.mem = calloc(PM_MAX_TASK_MEMORIES, sizeof *t->desc.mem);
    t->mems = calloc(PM_MAX_TASK_MEMORIES, sizeof *t->mems);
    ck_assert(t->desc.mem != NULL && t->mems != NULL);
    t->sched_space = pm__aligned_alloc(pm__ranges_space(nstubs));
    ck_assert(t->counts != NULL && t->runnable != NULL && t->sched_space != NULL);
    memset(t->sched_space, 0, pm__ranges_space(nstubs)); /* slots of gen 0, the task's */
    for (int i = 0; i < nstubs; i++) {
        stubs[i] = (pm__stub_t){.index = i, .ops = &pm__cpu_ops, .speed = 1.0};
        t->runnable[i] = 1;
    }
    if (ts_stub0_ops != NULL && nstubs > 0)
        stubs[0].ops = ts_stub0_ops;
    pm__rt.stubs = stubs;
    pm__rt.nstubs = nstubs;
    t->policy = pm__sched_policy(sched);
    ck_assert_ptr_nonnull(t->policy);
    ck_assert_int_eq(t->policy->init(t, nstubs), 0);
    return t;
}

static inline void ts_free(pm__task_t *t)
{
    t->policy->fini(t);
    free(t->sched_space);
    free(t->counts);
    free(t->runnable);
    free(t->desc.mem);
    free(t->mems);
    free((void *)t->cbs);
    free(t);
}

#endif /* PMLIB_TASKSHELL_H */
