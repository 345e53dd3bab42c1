/*
 * Proves the interval sets of reduce/acc.c (pm__acc_cover, pm__acc_apply_rows,
 * pm__acc_covers, pm__acc_covers_rows, pm__acc_touches, pm__acc_gap), which the GPU stub
 * and the other hosts' mirrors use to know which bytes are valid, against a
 * byte map: random strided additions and removals, after each of which the
 * set must be sorted, disjoint, non-adjacent and hold exactly the bytes the
 * map holds, and the gaps of any range must be exactly its bytes the map
 * lacks, each as long as it can be.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "reduce/acc.h"

#define SPAN 4096

/* The set equals the map, in canonical form. */
static void check_same(const pm__acc_t *a, const unsigned char *map)
{
    unsigned char seen[SPAN] = {0};
    for (uint32_t i = 0; i < a->ncov; i++) {
        ck_assert_uint_lt(a->cov[i].lo, a->cov[i].hi);
        ck_assert_uint_le(a->cov[i].hi, SPAN);
        if (i > 0) /* disjoint and not touching: touching ranges merge */
            ck_assert_uint_gt(a->cov[i].lo, a->cov[i - 1].hi);
        for (uint64_t b = a->cov[i].lo; b < a->cov[i].hi; b++)
            seen[b] = 1;
    }
    ck_assert_int_eq(memcmp(seen, map, SPAN), 0);
}

/* The gaps of a random range are the bytes the map lacks there, maximal. */
static void check_gaps(const pm__acc_t *a, const unsigned char *map, unsigned *seed)
{
    uint64_t lo = (uint64_t)rand_r(seed) % SPAN;
    uint64_t hi = lo + (uint64_t)rand_r(seed) % (SPAN - lo + 1);
    unsigned char gap[SPAN], want[SPAN];
    memset(gap, 0, SPAN);
    for (uint64_t b = 0; b < SPAN; b++)
        want[b] = b >= lo && b < hi && !map[b];
    for (uint64_t pos = lo, g0, g1; pm__acc_gap(a, pos, hi, &g0, &g1); pos = g1) {
        ck_assert_uint_ge(g0, pos);
        ck_assert_uint_lt(g0, g1);
        ck_assert_uint_le(g1, hi);
        ck_assert(g1 == hi || map[g1]); /* ends where the set begins */
        memset(gap + g0, 1, g1 - g0);
    }
    ck_assert_int_eq(memcmp(gap, want, SPAN), 0);
}

static void map_rows(unsigned char *map, uint64_t off, uint64_t block, uint64_t stride,
                     uint64_t count, bool add)
{
    for (uint64_t k = 0; k < count; k++)
        memset(map + off + k * stride, add, block);
}

START_TEST(test_rows_match_byte_map)
{
    unsigned char map[SPAN];
    pm__acc_t a = {0};
    unsigned seed = 12345;
    for (int round = 0; round < 20; round++) {
        memset(map, 0, sizeof map);
        a.ncov = 0;
        for (int op = 0; op < 200; op++) {
            uint64_t block = 1 + (uint64_t)rand_r(&seed) % 64;
            uint64_t stride = block + (uint64_t)rand_r(&seed) % 96;
            uint64_t count = 1 + (uint64_t)rand_r(&seed) % 24;
            if ((count - 1) * stride + block > SPAN)
                count = 1;
            uint64_t off = (uint64_t)rand_r(&seed) % (SPAN - (count - 1) * stride - block + 1);
            bool add = rand_r(&seed) % 3 != 0;
            ck_assert_int_eq(pm__acc_apply_rows(&a, off, block, stride, count, add), 0);
            map_rows(map, off, block, stride, count, add);
            check_same(&a, map);
            /* The rows just added are covered; those just removed are not. */
            ck_assert(pm__acc_covers_rows(&a, off, block, stride, count) == add);
            check_gaps(&a, map, &seed);
        }
    }
    pm__acc_free(&a);
}
END_TEST

START_TEST(test_covers_and_touches)
{
    pm__acc_t a = {0};
    ck_assert(!pm__acc_touches(&a, 0, 10));
    ck_assert(!pm__acc_covers(&a, 0, 1));
    ck_assert(pm__acc_covers(&a, 5, 5)); /* the empty range */
    ck_assert_int_eq(pm__acc_apply_rows(&a, 100, 10, 40, 3, true), 0); /* 100-110 140-150 180-190 */
    ck_assert_uint_eq(a.ncov, 3);
    ck_assert(pm__acc_covers(&a, 140, 150));
    ck_assert(!pm__acc_covers(&a, 139, 150));
    ck_assert(!pm__acc_covers(&a, 105, 145)); /* spans a hole */
    ck_assert(pm__acc_touches(&a, 105, 145));
    ck_assert(pm__acc_touches(&a, 189, 300));
    ck_assert(!pm__acc_touches(&a, 110, 140));
    ck_assert(!pm__acc_touches(&a, 190, 300));
    ck_assert(!pm__acc_touches(&a, 0, 100));
    /* Cutting the middle of each range leaves two pieces of each. */
    ck_assert_int_eq(pm__acc_apply_rows(&a, 103, 2, 40, 3, false), 0);
    ck_assert_uint_eq(a.ncov, 6);
    ck_assert(pm__acc_covers(&a, 100, 103));
    ck_assert(!pm__acc_touches(&a, 103, 105));
    /* Filling the holes with one contiguous range joins everything. */
    ck_assert_int_eq(pm__acc_apply_rows(&a, 100, 90, 90, 1, true), 0);
    ck_assert_uint_eq(a.ncov, 1);
    ck_assert(pm__acc_covers(&a, 100, 190));
    pm__acc_free(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("intervals");
    TCase *tc = tcase_create("intervals");
    tcase_add_test(tc, test_rows_match_byte_map);
    tcase_add_test(tc, test_covers_and_touches);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
