/*
 * Reduce accumulators: the private output of one or more subtasks for one
 * reduced memory. The buffer spans [lo, hi) of the memory; `cov` lists the
 * byte ranges some subtask actually wrote (sorted, disjoint), which are the
 * only bytes merged and, at the end, written back.
 */
#ifndef PMLIB_REDUCE_ACC_H
#define PMLIB_REDUCE_ACC_H

#include "core/internal.h"

typedef struct pm__range {
    uint64_t lo, hi;
} pm__range_t;

typedef struct pm__acc {
    uint64_t lo, hi;
    unsigned char *data; /* NULL while empty */
    pm__range_t *cov;
    uint32_t ncov, capcov;
} pm__acc_t;

/* One accumulator per reduced memory of a task. */
typedef struct pm__accset {
    pm__acc_t acc[PM_MAX_TASK_MEMORIES];
} pm__accset_t;

/* The natural-view base pointer of a buffer that starts at byte `lo`. */
static inline void *pm__natural(void *buf, uint64_t lo)
{
    return (void *)((uintptr_t)buf - (uintptr_t)lo);
}

/* Fills [lo, hi) of `buf` (which starts at byte `base`) as a fresh private
 * output of task memory m: the memory's bytes when the task reads it, else
 * the op's identity (zeros for a custom reduce). */
void pm__acc_fill(const pm__task_t *t, int m, unsigned char *buf, uint64_t base,
                  uint64_t lo, uint64_t hi);
/* Makes the buffer span at least [lo, hi), filling new bytes fresh. */
int pm__acc_reserve(const pm__task_t *t, int m, pm__acc_t *a, uint64_t lo, uint64_t hi);
/* Marks [lo, hi) as written. */
int pm__acc_cover(pm__acc_t *a, uint64_t lo, uint64_t hi);
/* Interval sets: `cov` alone, no data. Whether [lo, hi) lies inside one
 * range; whether any byte of it does. */
bool pm__acc_covers(const pm__acc_t *a, uint64_t lo, uint64_t hi);
bool pm__acc_touches(const pm__acc_t *a, uint64_t lo, uint64_t hi);
/* The first part [*glo, *ghi) of [lo, hi) outside every range; false when
 * the ranges cover all of it. */
bool pm__acc_gap(const pm__acc_t *a, uint64_t lo, uint64_t hi, uint64_t *glo, uint64_t *ghi);
/* Whether each of the `count` blocks of `block` bytes `stride` apart from
 * `off` lies inside one range. */
bool pm__acc_covers_rows(const pm__acc_t *a, uint64_t off, uint64_t block, uint64_t stride,
                         uint64_t count);
/* Adds (or, with add false, removes) the `count` blocks of `block` bytes
 * `stride` apart from `off`, in one pass over the set. */
int pm__acc_apply_rows(pm__acc_t *a, uint64_t off, uint64_t block, uint64_t stride,
                       uint64_t count, bool add);
/* Merges [lo, hi) of `from` (a buffer starting at byte `from_lo`) into `a`:
 * reduced where `a` already holds output, copied elsewhere. `from` holds the
 * outputs of higher subtask ids. */
int pm__acc_merge_range(const pm__task_t *t, int m, pm__acc_t *a,
                        const unsigned char *from, uint64_t from_lo,
                        uint64_t lo, uint64_t hi);
/* Merges all of `b` into `a` (a holds the lower subtask ids). */
int pm__acc_merge(const pm__task_t *t, int m, pm__acc_t *a, const pm__acc_t *b);
void pm__acc_free(pm__acc_t *a);

pm__accset_t *pm__accset_new(void);
void pm__accset_free(const pm__task_t *t, pm__accset_t *s);

#endif /* PMLIB_REDUCE_ACC_H */
