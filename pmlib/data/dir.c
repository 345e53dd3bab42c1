/* The directory's map of a memory: which host holds which range (dir.h). */
#include "data/dir.h"

#include <stdlib.h>
#include <string.h>

#include "pmlib.h"

uint32_t pm__holders_find(const pm__holders_t *h, uint64_t at)
{
    uint32_t lo = 0, hi = h->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (h->r[mid].hi <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int pm__holders_touch(const pm__holders_t *h, uint64_t lo, uint64_t hi)
{
    uint32_t i = pm__holders_find(h, lo);
    return lo < hi && i < h->n && h->r[i].lo < hi;
}

static int reserve(pm__holders_t *h, uint32_t n)
{
    if (n <= h->cap)
        return 0;
    uint32_t cap = h->cap ? h->cap : 8;
    while (cap < n)
        cap *= 2;
    pm__held_t *r = realloc(h->r, (size_t)cap * sizeof *r);
    if (r == NULL)
        return PM_ENOMEM;
    h->r = r;
    h->cap = cap;
    return 0;
}

int pm__holders_set(pm__holders_t *h, uint64_t lo, uint64_t hi, int32_t host)
{
    if (lo >= hi)
        return 0;
    /* [i, j): the ranges [lo, hi) overlaps; they give way to at most three:
     * what sticks out on the left, the new one, what sticks out on the right. */
    uint32_t i = pm__holders_find(h, lo), j = i;
    while (j < h->n && h->r[j].lo < hi)
        j++;
    pm__held_t put[3];
    uint32_t k = 0;
    if (i < j && h->r[i].lo < lo)
        put[k++] = (pm__held_t){h->r[i].lo, lo, h->r[i].host};
    if (host != 0)
        put[k++] = (pm__held_t){lo, hi, host};
    if (i < j && h->r[j - 1].hi > hi)
        put[k++] = (pm__held_t){hi, h->r[j - 1].hi, h->r[j - 1].host};
    if (k > j - i && reserve(h, h->n + k - (j - i)) != 0)
        return PM_ENOMEM;
    if (h->n > j && k != j - i)
        memmove(h->r + i + k, h->r + j, (size_t)(h->n - j) * sizeof *h->r);
    if (k > 0)
        memcpy(h->r + i, put, (size_t)k * sizeof *put);
    h->n = h->n + k - (j - i);
    /* Merge touching neighbours of one holder around what changed. */
    uint32_t from = i > 0 ? i - 1 : 0, to = i + k + 1 < h->n ? i + k + 1 : h->n;
    uint32_t w = from;
    for (uint32_t q = from + 1; q < to; q++) {
        if (h->r[w].hi == h->r[q].lo && h->r[w].host == h->r[q].host)
            h->r[w].hi = h->r[q].hi;
        else
            h->r[++w] = h->r[q];
    }
    if (to > from) {
        uint32_t gone = (to - from) - (w - from + 1);
        memmove(h->r + w + 1, h->r + to, (size_t)(h->n - to) * sizeof *h->r);
        h->n -= gone;
    }
    return 0;
}

int pm__holders_copy(pm__holders_t *to, const pm__holders_t *from)
{
    if (reserve(to, from->n) != 0)
        return PM_ENOMEM;
    if (from->n > 0)
        memcpy(to->r, from->r, (size_t)from->n * sizeof *to->r);
    to->n = from->n;
    return 0;
}

void pm__holders_free(pm__holders_t *h)
{
    free(h->r);
    *h = (pm__holders_t){0};
}
