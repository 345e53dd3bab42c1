/* Reduce accumulators: private outputs merged range by range. */
#include "reduce/acc.h"

#include <stdlib.h>
#include <string.h>

#include "core/ops.h"

void pm__acc_fill(const pm__task_t *t, int m, unsigned char *buf, uint64_t base,
                  uint64_t lo, uint64_t hi)
{
    const pm_task_memory_t *tm = &t->desc.mem[m];
    unsigned char *dst = buf + (lo - base);
    if (tm->access & PM_READ)
        memcpy(dst, (const unsigned char *)t->mems[m]->data + lo, hi - lo);
    else if (tm->reduce == PM_REDUCE_CUSTOM)
        memset(dst, 0, hi - lo);
    else
        pm__reduce_identity(tm->reduce, tm->type, dst, (hi - lo) / pm_type_size(tm->type));
}

int pm__acc_reserve(const pm__task_t *t, int m, pm__acc_t *a, uint64_t lo, uint64_t hi)
{
    if (a->data == NULL) {
        a->data = malloc(hi - lo ? hi - lo : 1);
        if (a->data == NULL)
            return PM_ENOMEM;
        a->lo = lo;
        a->hi = hi;
        pm__acc_fill(t, m, a->data, lo, lo, hi);
        return 0;
    }
    if (lo >= a->lo && hi <= a->hi)
        return 0;
    uint64_t nlo = lo < a->lo ? lo : a->lo;
    uint64_t nhi = hi > a->hi ? hi : a->hi;
    unsigned char *n = malloc(nhi - nlo);
    if (n == NULL)
        return PM_ENOMEM;
    /* Bytes outside the coverage are never read, so only the old span moves. */
    memcpy(n + (a->lo - nlo), a->data, a->hi - a->lo);
    free(a->data);
    a->data = n;
    a->lo = nlo;
    a->hi = nhi;
    return 0;
}

int pm__acc_cover(pm__acc_t *a, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return 0;
    if (a->ncov > 0 && a->cov[a->ncov - 1].hi == lo) { /* the common append */
        a->cov[a->ncov - 1].hi = hi;
        return 0;
    }
    if (a->ncov == a->capcov) {
        uint32_t cap = a->capcov ? a->capcov * 2 : 4;
        pm__range_t *n = realloc(a->cov, cap * sizeof *n);
        if (n == NULL)
            return PM_ENOMEM;
        a->cov = n;
        a->capcov = cap;
    }
    /* Keep ranges before [lo, hi), absorb the ones it touches, shift the rest. */
    uint32_t i = 0, j;
    while (i < a->ncov && a->cov[i].hi < lo)
        i++;
    j = i;
    while (j < a->ncov && a->cov[j].lo <= hi) {
        if (a->cov[j].lo < lo)
            lo = a->cov[j].lo;
        if (a->cov[j].hi > hi)
            hi = a->cov[j].hi;
        j++;
    }
    uint32_t tail = a->ncov - j;
    if (j == i)
        memmove(&a->cov[i + 1], &a->cov[i], tail * sizeof *a->cov);
    else
        memmove(&a->cov[i + 1], &a->cov[j], tail * sizeof *a->cov);
    a->cov[i].lo = lo;
    a->cov[i].hi = hi;
    a->ncov = i + 1 + tail;
    return 0;
}

/* The first range whose end lies beyond lo. */
static uint32_t first_after(const pm__acc_t *a, uint64_t lo)
{
    uint32_t l = 0, h = a->ncov;
    while (l < h) {
        uint32_t mid = l + (h - l) / 2;
        if (a->cov[mid].hi <= lo)
            l = mid + 1;
        else
            h = mid;
    }
    return l;
}

bool pm__acc_covers(const pm__acc_t *a, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return true;
    uint32_t i = first_after(a, lo);
    return i < a->ncov && a->cov[i].lo <= lo && hi <= a->cov[i].hi;
}

bool pm__acc_covers_rows(const pm__acc_t *a, uint64_t off, uint64_t block, uint64_t stride,
                         uint64_t count)
{
    for (uint64_t k = 0; k < count; k++)
        if (!pm__acc_covers(a, off + k * stride, off + k * stride + block))
            return false;
    return true;
}

bool pm__acc_touches(const pm__acc_t *a, uint64_t lo, uint64_t hi)
{
    uint32_t i = first_after(a, lo);
    return lo < hi && i < a->ncov && a->cov[i].lo < hi;
}

bool pm__acc_gap(const pm__acc_t *a, uint64_t lo, uint64_t hi, uint64_t *glo, uint64_t *ghi)
{
    uint32_t i = first_after(a, lo);
    if (i < a->ncov && a->cov[i].lo <= lo) /* ranges never touch: one holds lo at most */
        lo = a->cov[i++].hi;
    if (lo >= hi)
        return false;
    *glo = lo;
    *ghi = i < a->ncov && a->cov[i].lo < hi ? a->cov[i].lo : hi;
    return true;
}

int pm__acc_apply_rows(pm__acc_t *a, uint64_t off, uint64_t block, uint64_t stride,
                       uint64_t count, bool add)
{
    if (block == 0 || count == 0 || (!add && a->ncov == 0))
        return 0;
    if (add && (count == 1 || stride == block))
        return pm__acc_cover(a, off, off + (count - 1) * stride + block);
    /* Both lists are sorted by start, so one merge builds the result. */
    uint64_t cap = (uint64_t)a->ncov + count + 1;
    if (cap > UINT32_MAX)
        return PM_ENOMEM;
    pm__range_t *out = malloc(cap * sizeof *out);
    if (out == NULL)
        return PM_ENOMEM;
    uint32_t n = 0, i = 0;
    uint64_t q = 0;
    if (add) {
        while (i < a->ncov || q < count) {
            pm__range_t x;
            uint64_t rlo = off + q * stride;
            if (q < count && (i == a->ncov || rlo < a->cov[i].lo))
                x = (pm__range_t){rlo, rlo + block}, q++;
            else
                x = a->cov[i++];
            if (n > 0 && x.lo <= out[n - 1].hi) {
                if (x.hi > out[n - 1].hi)
                    out[n - 1].hi = x.hi;
            } else {
                out[n++] = x;
            }
        }
    } else {
        for (i = 0; i < a->ncov; i++) {
            uint64_t lo = a->cov[i].lo, hi = a->cov[i].hi;
            /* Rows that end before this range cannot touch later ones. */
            while (q < count && off + q * stride + block <= lo)
                q++;
            for (uint64_t k = q; k < count && off + k * stride < hi; k++) {
                uint64_t rlo = off + k * stride;
                if (rlo > lo)
                    out[n++] = (pm__range_t){lo, rlo};
                if (rlo + block > lo)
                    lo = rlo + block;
            }
            if (lo < hi)
                out[n++] = (pm__range_t){lo, hi};
        }
    }
    free(a->cov);
    a->cov = out;
    a->ncov = n;
    a->capcov = (uint32_t)cap;
    return 0;
}

static int reduce_part(const pm__task_t *t, int m, pm__acc_t *a, const unsigned char *from,
                       uint64_t from_lo, uint64_t lo, uint64_t hi)
{
    const pm_task_memory_t *tm = &t->desc.mem[m];
    if (tm->reduce != PM_REDUCE_CUSTOM) {
        pm__reduce_apply(tm->reduce, tm->type, a->data + (lo - a->lo), from + (lo - from_lo),
                         (hi - lo) / pm_type_size(tm->type));
        return 0;
    }
    pm_reduce_info_t info = {.mem = m, .offset = lo, .length = hi - lo,
                             .conf = t->conf, .conf_bytes = t->desc.conf_bytes};
    int rc = t->cbs->cb.reduce(&info, pm__natural(a->data, a->lo),
                              pm__natural((void *)(uintptr_t)from, from_lo));
    return rc == 0 ? 0 : PM_ECALLBACK;
}

int pm__acc_merge_range(const pm__task_t *t, int m, pm__acc_t *a,
                        const unsigned char *from, uint64_t from_lo,
                        uint64_t lo, uint64_t hi)
{
    int rc = pm__acc_reserve(t, m, a, lo, hi);
    if (rc != 0)
        return rc;
    uint64_t pos = lo;
    for (uint32_t i = 0; i < a->ncov && pos < hi; i++) {
        const pm__range_t iv = a->cov[i];
        if (iv.hi <= pos)
            continue;
        if (iv.lo >= hi)
            break;
        if (iv.lo > pos)
            memcpy(a->data + (pos - a->lo), from + (pos - from_lo), iv.lo - pos);
        uint64_t olo = iv.lo > pos ? iv.lo : pos;
        uint64_t ohi = iv.hi < hi ? iv.hi : hi;
        rc = reduce_part(t, m, a, from, from_lo, olo, ohi);
        if (rc != 0)
            return rc;
        pos = ohi;
    }
    if (pos < hi)
        memcpy(a->data + (pos - a->lo), from + (pos - from_lo), hi - pos);
    return pm__acc_cover(a, lo, hi);
}

int pm__acc_merge(const pm__task_t *t, int m, pm__acc_t *a, const pm__acc_t *b)
{
    for (uint32_t i = 0; i < b->ncov; i++) {
        int rc = pm__acc_merge_range(t, m, a, b->data, b->lo, b->cov[i].lo, b->cov[i].hi);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void pm__acc_free(pm__acc_t *a)
{
    free(a->data);
    free(a->cov);
    *a = (pm__acc_t){0};
}

pm__accset_t *pm__accset_new(void)
{
    return calloc(1, sizeof(pm__accset_t));
}

void pm__accset_free(const pm__task_t *t, pm__accset_t *s)
{
    if (s == NULL)
        return;
    for (int m = 0; m < t->desc.nmem; m++)
        pm__acc_free(&s->acc[m]);
    free(s);
}
