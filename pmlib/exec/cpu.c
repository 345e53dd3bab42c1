/*
 * The CPU stub: runs the subtasks of a chunk in id order on this thread
 * (and so do GPU stubs in the checking mode, over device copies).
 * Reduced memories get a private output per subtask: the first subtask of a
 * chunk writes straight into the chunk's accumulator, later ones into a
 * scratch buffer merged into it right away; the chunk's accumulators then
 * go up the task's merge tree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/check.h"
#include "exec/guard.h"
#include "reduce/tree.h"
#include "exec/stubs.h"

static int cpu_init(pm__stub_t *s)
{
    s->priv = calloc(1, sizeof(pm__host_run_t));
    return s->priv ? 0 : PM_ENOMEM;
}

void pm__host_run_free(pm__host_run_t *hr)
{
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        free(hr->scratch[m]);
        hr->scratch[m] = NULL;
        hr->cap[m] = 0;
    }
    pm__check_free(hr->check);
    hr->check = NULL;
    pm__guard_free(hr);
}

static void cpu_fini(pm__stub_t *s)
{
    if (s->priv == NULL)
        return;
    pm__host_run_free(s->priv);
    free(s->priv);
    s->priv = NULL;
}

typedef struct private_out {
    bool used, direct;
    uint64_t lo;
} private_out_t;

/* Points info->mem[m] of each reduced memory at a fresh private output. */
static int open_private(pm__host_run_t *p, pm__task_t *t, pm__accset_t *acc, pm__subs_view_t v,
                        pm_subtask_info_t *info, private_out_t *out)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        uint64_t lo = 0, hi = 0;
        out[m].used = false;
        if (t->desc.mem[m].reduce == PM_REDUCE_NONE)
            continue;
        info->mem[m] = NULL;
        if (!pm__subs_hull(v, m, &lo, &hi))
            continue;
        out[m] = (private_out_t){.used = true, .direct = acc->acc[m].data == NULL, .lo = lo};
        if (out[m].direct) {
            if (pm__acc_reserve(t, m, &acc->acc[m], lo, hi) != 0)
                return PM_ENOMEM;
            info->mem[m] = pm__natural(acc->acc[m].data, acc->acc[m].lo);
            continue;
        }
        if (p->cap[m] < hi - lo) {
            free(p->scratch[m]);
            p->cap[m] = 0;
            p->scratch[m] = malloc(hi - lo);
            if (p->scratch[m] == NULL)
                return PM_ENOMEM;
            p->cap[m] = hi - lo;
        }
        pm__acc_fill(t, m, p->scratch[m], lo, lo, hi);
        info->mem[m] = pm__natural(p->scratch[m], lo);
    }
    return 0;
}

/* Merges each private output into the chunk's accumulator. */
static int close_private(pm__host_run_t *p, pm__task_t *t, pm__accset_t *acc, pm__subs_view_t v,
                         const private_out_t *out)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        if (!out[m].used)
            continue;
        pm__acc_t w = {0};
        int rc = pm__subs_written(v, m, &w);
        for (uint32_t i = 0; i < w.ncov && rc == 0; i++) {
            if (out[m].direct)
                rc = pm__acc_cover(&acc->acc[m], w.cov[i].lo, w.cov[i].hi);
            else
                rc = pm__acc_merge_range(t, m, &acc->acc[m], p->scratch[m], out[m].lo,
                                         w.cov[i].lo, w.cov[i].hi);
        }
        pm__acc_free(&w);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const char *kind_name(const pm__stub_t *s)
{
    return s->ops->kind == PM_DEVICE_GPU ? "gpu" : "cpu";
}

void pm__host_run_fail(pm__host_run_t *p, const pm__stub_t *s, pm__task_t *t, uint64_t id,
                       int status, const char *what)
{
    if (p->guarded) { /* the winner's failures only */
        pm__guard_t *g = &p->guard;
        if (g->status == 0 || id < g->failed_id) {
            g->status = status;
            g->failed_id = id;
            snprintf(g->what, sizeof g->what, "subtask %llu: %s on host %d, %s stub %d",
                     (unsigned long long)id, what, pm__rt.host, kind_name(s), s->index);
        }
        return;
    }
    pm__task_fail(t, status, id, "subtask %llu: %s on host %d, %s stub %d",
                  (unsigned long long)id, what, pm__rt.host, kind_name(s), s->index);
}

const char *pm__merge_failure(int rc)
{
    return rc == PM_ECALLBACK ? "the reduce callback failed" : "out of memory merging its reduce output";
}

/* The callback on the checking mode's views (exec/check.c). */
static int run_checked(pm__host_run_t *p, pm__stub_t *s, pm__task_t *t, pm__subs_view_t v,
                       pm_subtask_info_t *info, pm__host_call_fn call)
{
    if (p->check == NULL && (p->check = pm__check_new()) == NULL) {
        pm__host_run_fail(p, s, t, info->id, PM_ENOMEM, "out of memory for the checking mode's views");
        return PM__CALL_FAILED;
    }
    if (pm__check_enter(p->check, t, v, info) != 0) {
        pm__host_run_fail(p, s, t, info->id, PM_ENOMEM, "out of memory for the checking mode's views");
        return PM__CALL_FAILED;
    }
    int rc = call(s, t, info);
    int crc = pm__check_leave(p->check, t, v, info);
    return rc != 0 ? rc : crc != 0 ? PM__CALL_FAILED : 0;
}

/* The subtasks' view of task t on stub s. From one subtask to the next
 * only the id changes, and the memories that a private reduce output or
 * the checking mode set again before each subtask. */
static void view_init(pm_subtask_info_t *info, const pm__host_run_t *p, const pm__stub_t *s,
                      pm__task_t *t)
{
    *info = (pm_subtask_info_t){.count = t->desc.subtasks, .nmem = t->desc.nmem,
                                .conf = t->conf, .conf_bytes = t->desc.conf_bytes,
                                .host = pm__rt.host, .stub = s->index,
                                .device = s->ops->kind, .device_index = s->device_index,
                                .internal = t};
    for (int m = 0; m < t->desc.nmem; m++) {
        if (p->guarded) { /* a loser may run after the memories are gone */
            info->mem[m] = p->guard.on[m] ? pm__natural(p->guard.buf[m], p->guard.lo[m]) : NULL;
            info->mem_bytes[m] = p->guard.bytes[m];
            continue;
        }
        info->mem[m] = t->mems[m]->data;
        info->mem_bytes[m] = t->mems[m]->bytes;
    }
}

/* Runs one chunk's subtasks through the view `info` of the task. */
static void run_in_view(pm__host_run_t *p, pm__stub_t *s, pm__task_t *t, uint64_t chunk,
                        pm_subtask_info_t *info, pm__host_call_fn call)
{
    uint64_t first, last;
    pm__chunk_span(t, chunk, &first, &last);
    pm__accset_t *acc = t->nred ? pm__accset_new() : NULL;
    private_out_t out[PM_MAX_TASK_MEMORIES];
    for (uint64_t id = first; id < last; id++) {
        pm__subs_view_t v = pm__subs_of(t, chunk, id);
        info->id = id;
        if (t->nred) {
            int rc = acc ? open_private(p, t, acc, v, info, out) : PM_ENOMEM;
            if (rc != 0) {
                pm__host_run_fail(p, s, t, id, PM_ENOMEM, "out of memory for its private reduce output");
                continue;
            }
        }
        int rc = pm__check_mode ? run_checked(p, s, t, v, info, call) : call(s, t, info);
        if (rc != 0) {
            char what[64];
            snprintf(what, sizeof what, "the %s callback returned %d", kind_name(s), rc);
            if (rc != PM__CALL_FAILED)
                pm__host_run_fail(p, s, t, id, PM_ECALLBACK, what);
            continue;
        }
        if (t->nred && (rc = close_private(p, t, acc, v, out)) != 0)
            pm__host_run_fail(p, s, t, id, rc, pm__merge_failure(rc));
    }
    if (p->guarded) { /* the winner counts and merges them */
        p->guard.subtasks = last - first;
        p->guard.acc = acc;
        return;
    }
    pm__counts_own(t, s->index)->subtasks += last - first;
    if (acc != NULL) {
        int rc = pm__reduce_tree_push(t, 0, chunk, acc);
        if (rc != 0)
            pm__host_run_fail(p, s, t, first, rc, pm__merge_failure(rc));
    }
}

static int cpu_call(pm__stub_t *s, pm__task_t *t, pm_subtask_info_t *info)
{
    (void)s;
    return t->cbs->cb.cpu(info);
}

void pm__host_run_chunk(pm__host_run_t *p, pm__stub_t *s, pm__task_t *t, uint64_t chunk,
                        pm__host_call_fn call)
{
    pm_subtask_info_t info;
    view_init(&info, p, s, t);
    run_in_view(p, s, t, chunk, &info, call);
}

static void cpu_run_chunk(pm__stub_t *s, pm__task_t *t, uint64_t chunk)
{
    pm__host_run_chunk(s->priv, s, t, chunk, cpu_call);
}

/* A batch: one view for its chunks (subtasks of one chunk share it already,
 * so those of the next see nothing new). Built per chunk, it was a third
 * of a chunk's own time in a chain of tasks of 16 one-subtask chunks (its
 * 320 bytes zeroed with a string store at every chunk). */
static void cpu_run_chunks(pm__stub_t *s, pm__task_t *t, uint64_t chunk, uint64_t n)
{
    /* Never guarded: a guard runs one chunk (exec/guard.c). */
    pm__host_run_t *p = s->priv;
    pm_subtask_info_t info;
    view_init(&info, p, s, t);
    for (uint64_t i = 0; i < n; i++)
        run_in_view(p, s, t, chunk + i, &info, cpu_call);
}

const pm__device_ops_t pm__cpu_ops = {
    .name = "cpu",
    .kind = PM_DEVICE_CPU,
    .init = cpu_init,
    .run_chunk = cpu_run_chunk,
    .run_chunks = cpu_run_chunks,
    .fini = cpu_fini,
};
