/*
 * Walking a subtask's stored subscriptions: shared by the device stubs.
 */
#ifndef PMLIB_EXEC_SUBS_H
#define PMLIB_EXEC_SUBS_H

#include "reduce/acc.h"

/* The subscriptions of one subtask. */
typedef struct pm__subs_view {
    const pm__sub_t *r;
    uint32_t n;
} pm__subs_view_t;

static inline pm__subs_view_t pm__subs_of(const pm__task_t *t, uint64_t chunk, uint64_t id)
{
    pm__subs_view_t v = {NULL, 0};
    if (t->chunk_subs == NULL)
        return v;
    const pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
    uint64_t k = id - chunk * t->grain;
    v.r = cs->recs + cs->start[k];
    v.n = cs->start[k + 1] - cs->start[k];
    return v;
}

/* Hull [lo, hi) of the subscriptions of memory m in v; false if none. */
static inline bool pm__subs_hull(pm__subs_view_t v, int m, uint64_t *lo, uint64_t *hi)
{
    bool any = false;
    for (uint32_t i = 0; i < v.n; i++) {
        const pm__sub_t *r = &v.r[i];
        if (r->mem != m)
            continue;
        uint64_t a = r->offset, b = r->offset + (r->count - 1) * r->stride + r->block;
        if (!any || a < *lo)
            *lo = a;
        if (!any || b > *hi)
            *hi = b;
        any = true;
    }
    return any;
}

/* The union of the ranges of reduced memory m that v writes (reduced
 * memories have no strided subscriptions), so no byte merges twice. */
static inline int pm__subs_written(pm__subs_view_t v, int m, pm__acc_t *w)
{
    int rc = 0;
    for (uint32_t i = 0; i < v.n && rc == 0; i++)
        if (v.r[i].mem == m && (v.r[i].access & PM_WRITE))
            rc = pm__acc_cover(w, v.r[i].offset, v.r[i].offset + v.r[i].block);
    return rc;
}

#endif /* PMLIB_EXEC_SUBS_H */
