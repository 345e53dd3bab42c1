/*
 * The directory of copies between hosts, per memory: the ranges whose
 * current bytes are not on host 0, each with the host that holds them (the
 * host whose subtasks wrote them). Ranges not listed are current on host 0.
 * Host 0 keeps the map of each memory; a task carries it to the hosts that
 * run the task, which fetch each range they lack from its holder and keep
 * valid what they hold themselves.
 */
#ifndef PMLIB_COMM_DIR_H
#define PMLIB_COMM_DIR_H

#include <stdint.h>

typedef struct pm__held {
    uint64_t lo, hi;
    int32_t host; /* never 0 */
} pm__held_t;

/* Sorted, disjoint; neighbours that touch have different holders. */
typedef struct pm__holders {
    pm__held_t *r;
    uint32_t n, cap;
} pm__holders_t;

/* Makes host `host` the holder of [lo, hi); host 0 takes the range home
 * (off the map). PM_ENOMEM leaves the map as it was. */
int pm__holders_set(pm__holders_t *h, uint64_t lo, uint64_t hi, int32_t host);
/* The index of the first range that ends after `at` (n when none). */
uint32_t pm__holders_find(const pm__holders_t *h, uint64_t at);
/* Whether any byte of [lo, hi) is held away from host 0. */
int pm__holders_touch(const pm__holders_t *h, uint64_t lo, uint64_t hi);
/* Replaces the contents of `to` with those of `from`. */
int pm__holders_copy(pm__holders_t *to, const pm__holders_t *from);
void pm__holders_free(pm__holders_t *h);

#endif /* PMLIB_COMM_DIR_H */
