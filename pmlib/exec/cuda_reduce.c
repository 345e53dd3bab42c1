/*
 * Reduce outputs of the GPU stub (exec/cuda_int.h): built-in ops merge on
 * the device into one accumulator per chunk; custom reduces merge on the
 * host as a subtask retires.
 */
#include "exec/cuda_int.h"

#include <stdlib.h>

/* ---- merging reduce outputs ---------------------------------------------- */

/* Merges [lo, hi) of a private output into the chunk's accumulator as
 * pm__acc_merge_range does on the host: reduced where the accumulator holds
 * output already, copied elsewhere; so CPU and GPU give the same bits. */
static int merge_range(run_t *r, slot_t *sl, chunk_state_t *cs, int m, uint64_t lo, uint64_t hi)
{
    const pm_task_memory_t *tm = &r->t->desc.mem[m];
    void *acc = pm__natural(cs->dacc[m].ptr, cs->dlo[m]);
    void *out = pm__natural(sl->use[m].buf.ptr, sl->use[m].lo);
    const pm__acc_t *a = &cs->dcov[m];
    uint64_t pos = lo;
    int rc = 0;
    for (uint32_t i = 0; i < a->ncov && pos < hi && rc == 0; i++) {
        const pm__range_t iv = a->cov[i];
        if (iv.hi <= pos)
            continue;
        if (iv.lo >= hi)
            break;
        if (iv.lo > pos)
            rc = PM__CUDA(QUIET, cudaMemcpyAsync(at(acc, pos), at(out, pos), iv.lo - pos,
                                                 cudaMemcpyDeviceToDevice, sl->stream));
        uint64_t olo = iv.lo > pos ? iv.lo : pos, ohi = iv.hi < hi ? iv.hi : hi;
        if (rc == 0)
            rc = PM__CUDA(QUIET, (cudaError_t)pm__cuda_reduce_apply(
                                     tm->reduce, tm->type, at(acc, olo), at(out, olo),
                                     (ohi - olo) / pm_type_size(tm->type), sl->stream));
        pos = ohi;
    }
    if (rc == 0 && pos < hi)
        rc = PM__CUDA(QUIET, cudaMemcpyAsync(at(acc, pos), at(out, pos), hi - pos,
                                             cudaMemcpyDeviceToDevice, sl->stream));
    return rc ? rc : pm__acc_cover(&cs->dcov[m], lo, hi);
}

/* Enqueues the subtask's built-in reduce merges behind those of lower ids
 * (the chunk's `merged` event orders them across streams). */
int pm__cu_after_callback(run_t *r, slot_t *sl, chunk_state_t *cs, pm__subs_view_t v)
{
    int rc = 0;
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        enum use_kind k = sl->use[m].kind;
        if (k != USE_DIRECT && k != USE_MERGE)
            continue;
        pm__acc_t w = {0};
        rc = pm__subs_written(v, m, &w);
        if (rc == 0 && k == USE_MERGE)
            rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, cs->merged, 0));
        for (uint32_t i = 0; i < w.ncov && rc == 0; i++)
            rc = k == USE_MERGE ? merge_range(r, sl, cs, m, w.cov[i].lo, w.cov[i].hi)
                                : pm__acc_cover(&cs->dcov[m], w.cov[i].lo, w.cov[i].hi);
        if (rc == 0)
            rc = PM__CUDA(QUIET, cudaEventRecord(cs->merged, sl->stream));
        pm__acc_free(&w);
    }
    return rc;
}

/* Copies a custom-reduced output home and merges it into the chunk's host
 * accumulator with the task's reduce callback, in id order. */
int pm__cu_merge_custom(run_t *r, slot_t *sl, pm__subs_view_t v, int m)
{
    cuda_priv_t *p = r->p;
    const mem_use_t *u = &sl->use[m];
    if (p->scratch_cap < u->hi - u->lo) {
        free(p->scratch);
        p->scratch_cap = 0;
        if ((p->scratch = malloc(u->hi - u->lo)) == NULL)
            return PM_ENOMEM;
        p->scratch_cap = u->hi - u->lo;
    }
    pm__acc_t w = {0};
    pm__sub_t q;
    int rc = pm__subs_written(v, m, &w);
    for (uint32_t i = 0; i < w.ncov && rc == 0; i++)
        rc = pm__cu_copy_out(r, sl, pm__natural(u->buf.ptr, u->lo), pm__natural(p->scratch, u->lo), false,
                      pm__cu_range_parts(&q, m, w.cov[i].lo, w.cov[i].hi), true);
    for (uint32_t i = 0; i < w.ncov && rc == 0; i++)
        rc = pm__acc_merge_range(r->t, m, &sl->cs->acc->acc[m], p->scratch, u->lo, w.cov[i].lo,
                                 w.cov[i].hi);
    pm__acc_free(&w);
    return rc;
}

