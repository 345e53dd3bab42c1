/*
 * Subscriptions: the subscribe callbacks of a task run chunk by chunk before
 * any subtask does, so that bad ranges and overlapping writes fail the task
 * before a byte is written.
 */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many written blocks the overlap check is skipped (with a
 * warning), except in checking mode (PMLIB_CHECK=1). */
#define PM__OVERLAP_CHECK_MAX (1u << 26)

static const char *access_word(int a)
{
    return a == PM_READ ? "reading" : a == PM_WRITE ? "writing" : "reading and writing";
}

/* Records the first bad subscription of a subtask; keeps later ones out. */
static int sub_error(pm_subscription_t *sub, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int sub_error(pm_subscription_t *sub, int code, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sub->err == 0) {
        sub->err = code;
        pm__task_fail(sub->task, code, sub->id, "subtask %llu %s",
                      (unsigned long long)sub->id, msg);
    }
    return code;
}

static int push(pm__chunk_subs_t *cs, const pm__sub_t *r)
{
    if (cs->n == cs->cap) {
        uint32_t cap = cs->cap ? cs->cap * 2 : 16;
        pm__sub_t *n = realloc(cs->recs, cap * sizeof *n);
        if (n == NULL)
            return PM_ENOMEM;
        cs->recs = n;
        cs->cap = cap;
    }
    cs->recs[cs->n++] = *r;
    return 0;
}

int pm_subscribe_strided(pm_subscription_t *sub, int mem, pm_access_t access,
                         size_t offset, size_t block, size_t stride, size_t count)
{
    if (sub == NULL || sub->task == NULL)
        return PM__FAIL(PM_EINVAL, "pm_subscribe: sub is NULL; pass the sub given to the subscribe callback");
    const pm__task_t *t = sub->task;
    if (mem < 0 || mem >= t->desc.nmem)
        return sub_error(sub, PM_EINVAL, "subscribes memory %d, but the task has %d memories (indices 0..%d)",
                         mem, t->desc.nmem, t->desc.nmem - 1);
    if (access != PM_READ && access != PM_WRITE && access != PM_READ_WRITE)
        return sub_error(sub, PM_EINVAL, "subscribes memory %d with access %d; use PM_READ, PM_WRITE or PM_READ_WRITE",
                         mem, (int)access);
    const pm_task_memory_t *tm = &t->desc.mem[mem];
    if (access & ~tm->access)
        return sub_error(sub, PM_EACCESS, "subscribes memory %d for %s, but the task added it for %s only; "
                         "add it with PM_READ_WRITE or subscribe it for %s",
                         mem, access_word(access), access_word(tm->access), access_word(tm->access));
    if (block == 0 || count == 0)
        return 0;
    size_t bytes = t->mems[mem]->bytes;
    if (count > 1 && stride < block)
        return sub_error(sub, PM_EINVAL, "subscribes memory %d with stride %zu smaller than its block %zu; "
                         "blocks of one subscription must not overlap", mem, stride, block);
    /* Last byte + 1 = offset + (count-1)*stride + block, checked for overflow. */
    size_t span = block;
    if (count > 1 && (stride > (SIZE_MAX - block) / (count - 1)))
        span = SIZE_MAX;
    else if (count > 1)
        span = (count - 1) * stride + block;
    if (offset > bytes || span > bytes - offset)
        return sub_error(sub, PM_ERANGE, "subscribes bytes %zu..%zu of memory %d, which has %zu bytes; "
                         "keep offset + length within the memory", offset,
                         span == SIZE_MAX ? SIZE_MAX : offset + span - 1, mem, bytes);
    if (count > 1 && stride == block) { /* blocks end to end: one range */
        block = span;
        count = 1;
    }
    if (tm->reduce != PM_REDUCE_NONE) {
        size_t es = tm->reduce == PM_REDUCE_CUSTOM ? 1 : pm_type_size(tm->type);
        if (count > 1)
            return sub_error(sub, PM_ENOTSUP, "subscribes reduced memory %d with a strided range; "
                             "subscribe each block of a reduced memory separately", mem);
        if (offset % es != 0 || block % es != 0)
            return sub_error(sub, PM_EINVAL, "subscribes bytes %zu..%zu of memory %d, reduced over %zu-byte elements; "
                             "use offsets and lengths that are multiples of %zu", offset, offset + block - 1, mem, es, es);
    }
    pm__sub_t r = {.offset = offset, .block = block, .stride = count > 1 ? stride : block,
                   .count = count, .mem = (uint8_t)mem, .access = (uint8_t)access};
    if (push(sub->subs, &r) != 0)
        return sub_error(sub, PM_ENOMEM, "could not record a subscription (out of memory)");
    return 0;
}

int pm_subscribe(pm_subscription_t *sub, int mem, pm_access_t access, size_t offset, size_t length)
{
    return pm_subscribe_strided(sub, mem, access, offset, length, length, 1);
}

int pm__subscribe_chunk(pm__task_t *t, uint64_t chunk)
{
    pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
    uint64_t first, last;
    pm__chunk_span(t, chunk, &first, &last);
    cs->start = malloc((size_t)(last - first + 1) * sizeof *cs->start);
    if (cs->start == NULL) {
        pm__task_fail(t, PM_ENOMEM, first, "out of memory recording subscriptions");
        return PM_ENOMEM;
    }
    pm_subtask_info_t info = {.count = t->desc.subtasks, .nmem = t->desc.nmem,
                              .conf = t->conf, .conf_bytes = t->desc.conf_bytes,
                              .host = pm__rt.host, .stub = -1, .device = PM_DEVICE_CPU};
    for (int m = 0; m < t->desc.nmem; m++)
        info.mem_bytes[m] = t->mems[m]->bytes;
    for (uint64_t id = first; id < last; id++) {
        pm_subscription_t sub = {.task = t, .subs = cs, .id = id};
        cs->start[id - first] = cs->n;
        info.id = id;
        int rc = t->cbs.cb.subscribe(&sub, &info);
        if (rc != 0 && sub.err == 0)
            pm__task_fail(t, PM_ECALLBACK, id, "subtask %llu: the subscribe callback returned %d",
                          (unsigned long long)id, rc);
    }
    cs->start[last - first] = cs->n;
    return 0;
}

void pm__chunk_subs_free(pm__chunk_subs_t *cs)
{
    free(cs->start);
    free(cs->recs);
    *cs = (pm__chunk_subs_t){0};
}

/* ---- overlapping writes ------------------------------------------------ */

typedef struct wblock {
    uint64_t lo, hi, id;
} wblock_t;

static int by_lo(const void *a, const void *b)
{
    const wblock_t *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Counts the written blocks of memory m (to size the check). */
static uint64_t count_blocks(const pm__task_t *t, int m)
{
    uint64_t n = 0;
    for (uint64_t c = 0; c < t->nchunks; c++) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[c];
        for (uint32_t i = 0; i < cs->n; i++)
            if (cs->recs[i].mem == m && (cs->recs[i].access & PM_WRITE))
                n += cs->recs[i].count;
    }
    return n;
}

static void collect_blocks(const pm__task_t *t, int m, wblock_t *b, int *sorted)
{
    uint64_t k = 0;
    *sorted = 1;
    for (uint64_t c = 0; c < t->nchunks; c++) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[c];
        uint64_t nsub = t->grain;
        for (uint64_t j = 0; j < nsub && c * t->grain + j < t->desc.subtasks; j++) {
            for (uint32_t i = cs->start[j]; i < cs->start[j + 1]; i++) {
                const pm__sub_t *r = &cs->recs[i];
                if (r->mem != m || !(r->access & PM_WRITE))
                    continue;
                for (uint64_t q = 0; q < r->count; q++) {
                    b[k].lo = r->offset + q * r->stride;
                    b[k].hi = b[k].lo + r->block;
                    b[k].id = c * t->grain + j;
                    if (k > 0 && b[k].lo < b[k - 1].lo)
                        *sorted = 0;
                    k++;
                }
            }
        }
    }
}

static int check_memory(pm__task_t *t, int m)
{
    uint64_t n = count_blocks(t, m);
    if (n < 2)
        return 0;
    if (n > PM__OVERLAP_CHECK_MAX && !pm__check_mode) {
        pm__warn("task %llu: memory %d has %llu written blocks; overlap check skipped "
                 "(PMLIB_CHECK=1 checks it)", (unsigned long long)t->seq, m, (unsigned long long)n);
        return 0;
    }
    wblock_t *b = n <= SIZE_MAX / sizeof *b ? malloc(n * sizeof *b) : NULL;
    if (b == NULL && pm__check_mode) {
        pm__task_fail(t, PM_ENOMEM, 0, "no memory to check the %llu written blocks of memory %d "
                      "for overlaps (PMLIB_CHECK=1 never skips it); subscribe fewer, larger blocks",
                      (unsigned long long)n, m);
        return PM_ENOMEM;
    }
    if (b == NULL) {
        pm__warn("task %llu: no memory to check memory %d for overlapping writes; check skipped",
                 (unsigned long long)t->seq, m);
        return 0;
    }
    int sorted;
    collect_blocks(t, m, b, &sorted);
    if (!sorted)
        qsort(b, n, sizeof *b, by_lo);
    uint64_t maxhi = b[0].hi, maxid = b[0].id;
    int rc = 0;
    for (uint64_t i = 1; i < n; i++) {
        if (b[i].lo < maxhi && b[i].id != maxid) {
            uint64_t a = maxid < b[i].id ? maxid : b[i].id, z = maxid < b[i].id ? b[i].id : maxid;
            uint64_t end = b[i].hi < maxhi ? b[i].hi : maxhi;
            pm__task_fail(t, PM_EOVERLAP, z,
                          "subtasks %llu and %llu both write bytes %llu..%llu of memory %d; "
                          "give the memory a reduce (pm_task_desc_reduce) or make the ranges disjoint",
                          (unsigned long long)a, (unsigned long long)z, (unsigned long long)b[i].lo,
                          (unsigned long long)end - 1, m);
            rc = PM_EOVERLAP;
            break;
        }
        if (b[i].hi > maxhi) {
            maxhi = b[i].hi;
            maxid = b[i].id;
        }
    }
    free(b);
    return rc;
}

int pm__subscribe_check_overlap(pm__task_t *t)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        if (t->desc.mem[m].reduce != PM_REDUCE_NONE || !(t->desc.mem[m].access & PM_WRITE))
            continue;
        int rc = check_memory(t, m);
        if (rc != 0)
            return rc;
    }
    return 0;
}
