/*
 * Proves the directory's map of holders (data/dir.c: pm__holders_set,
 * pm__holders_find, pm__holders_touch, pm__holders_copy, pm__holders_free)
 * against a byte map that records, for each byte, the host holding it (0 for
 * home): random settings of ranges to hosts 0 to 4, after each of which the
 * map must be sorted, disjoint, free of host 0, with touching neighbours of
 * different holders, and hold each byte exactly as the byte map does; find
 * and touch must agree with a linear scan and with the byte map; a copy must
 * equal its source. Hand-written cases pin down splitting, merging, taking
 * everything home and the empty range.
 */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/dir.h"

#define SPAN 4096
#define HOSTS 5 /* 0 (home) to 4 */

/* The map equals the byte map, in canonical form. */
static void check_same(const pm__holders_t *h, const int8_t *map)
{
    int8_t seen[SPAN] = {0};
    ck_assert_uint_le(h->n, h->cap);
    for (uint32_t i = 0; i < h->n; i++) {
        const pm__held_t *r = &h->r[i];
        ck_assert_uint_lt(r->lo, r->hi);
        ck_assert_uint_le(r->hi, SPAN);
        ck_assert_int_gt(r->host, 0);
        ck_assert_int_lt(r->host, HOSTS);
        if (i > 0) {
            /* sorted and disjoint */
            ck_assert_uint_ge(r->lo, h->r[i - 1].hi);
            /* touching neighbours of one holder merge */
            if (r->lo == h->r[i - 1].hi)
                ck_assert_int_ne(r->host, h->r[i - 1].host);
        }
        for (uint64_t b = r->lo; b < r->hi; b++)
            seen[b] = (int8_t)r->host;
    }
    ck_assert_int_eq(memcmp(seen, map, SPAN), 0);
}

/* What pm__holders_find must return: the first range ending after `at`. */
static uint32_t find_scan(const pm__holders_t *h, uint64_t at)
{
    uint32_t i = 0;
    while (i < h->n && h->r[i].hi <= at)
        i++;
    return i;
}

static int touch_map(const int8_t *map, uint64_t lo, uint64_t hi)
{
    for (uint64_t b = lo; b < hi && b < SPAN; b++)
        if (map[b] != 0)
            return 1;
    return 0;
}

/* A freed map holds no array. */
static void check_freed(const pm__holders_t *h)
{
    ck_assert_ptr_null(h->r);
    ck_assert_uint_eq(h->n, 0);
    ck_assert_uint_eq(h->cap, 0);
}

static void check_equal(const pm__holders_t *a, const pm__holders_t *b)
{
    ck_assert_uint_eq(a->n, b->n);
    for (uint32_t i = 0; i < a->n; i++) {
        ck_assert_uint_eq(a->r[i].lo, b->r[i].lo);
        ck_assert_uint_eq(a->r[i].hi, b->r[i].hi);
        ck_assert_int_eq(a->r[i].host, b->r[i].host);
    }
}

/* A random range of [0, SPAN): mostly short, so that ranges pile up and get
 * split, sometimes long, so that many are swallowed at once. */
static void random_range(unsigned *seed, uint64_t *lo, uint64_t *hi)
{
    uint64_t len;
    switch (rand_r(seed) % 4) {
    case 0:
        len = 1 + (uint64_t)rand_r(seed) % 8;
        break;
    case 3:
        len = 1 + (uint64_t)rand_r(seed) % SPAN;
        break;
    default:
        len = 1 + (uint64_t)rand_r(seed) % 128;
        break;
    }
    *lo = (uint64_t)rand_r(seed) % (SPAN - len + 1);
    *hi = *lo + len;
}

START_TEST(test_set_matches_byte_map)
{
    int8_t map[SPAN];
    pm__holders_t h = {0}, c = {0};
    unsigned seed = 12345;
    for (int round = 0; round < 20; round++) {
        memset(map, 0, sizeof map);
        for (int op = 0; op < 250; op++) {
            uint64_t lo, hi;
            random_range(&seed, &lo, &hi);
            int32_t host = rand_r(&seed) % HOSTS;
            ck_assert_int_eq(pm__holders_set(&h, lo, hi, host), 0);
            memset(map + lo, host, hi - lo);
            check_same(&h, map);
            /* The range just set is touched exactly when it went away. */
            ck_assert_int_eq(pm__holders_touch(&h, lo, hi), host != 0);
            /* find against a linear scan, touch against the byte map */
            for (int q = 0; q < 8; q++) {
                uint64_t at = (uint64_t)rand_r(&seed) % (SPAN + 16);
                ck_assert_uint_eq(pm__holders_find(&h, at), find_scan(&h, at));
                uint64_t tlo = (uint64_t)rand_r(&seed) % (SPAN + 1);
                uint64_t thi = tlo + (uint64_t)rand_r(&seed) % 64;
                if (q == 0)
                    thi = tlo; /* the empty range touches nothing */
                ck_assert_int_eq(pm__holders_touch(&h, tlo, thi), touch_map(map, tlo, thi));
            }
        }
        /* A copy equals its source, whatever it held before. */
        ck_assert_int_eq(pm__holders_copy(&c, &h), 0);
        check_equal(&c, &h);
        check_same(&c, map);
        /* Taking everything home empties the map, and leaves the copy be. */
        ck_assert_int_eq(pm__holders_set(&h, 0, SPAN, 0), 0);
        ck_assert_uint_eq(h.n, 0);
        check_same(&c, map);
    }
    pm__holders_free(&c);
    check_freed(&c);
    pm__holders_free(&h);
    check_freed(&h);
}
END_TEST

START_TEST(test_split_merge_home)
{
    pm__holders_t h = {0};
    ck_assert_uint_eq(pm__holders_find(&h, 0), 0);
    ck_assert(!pm__holders_touch(&h, 0, SPAN));

    /* Another holder inside a range splits it in three. */
    ck_assert_int_eq(pm__holders_set(&h, 100, 200, 1), 0);
    ck_assert_int_eq(pm__holders_set(&h, 140, 160, 2), 0);
    ck_assert_uint_eq(h.n, 3);
    ck_assert(h.r[0].lo == 100 && h.r[0].hi == 140 && h.r[0].host == 1);
    ck_assert(h.r[1].lo == 140 && h.r[1].hi == 160 && h.r[1].host == 2);
    ck_assert(h.r[2].lo == 160 && h.r[2].hi == 200 && h.r[2].host == 1);
    ck_assert_uint_eq(pm__holders_find(&h, 99), 0);
    ck_assert_uint_eq(pm__holders_find(&h, 140), 1);
    ck_assert_uint_eq(pm__holders_find(&h, 199), 2);
    ck_assert_uint_eq(pm__holders_find(&h, 200), 3);
    ck_assert(pm__holders_touch(&h, 199, 300));
    ck_assert(!pm__holders_touch(&h, 200, 300));
    ck_assert(!pm__holders_touch(&h, 0, 100));

    /* Giving the middle back to the first holder joins the three again. */
    ck_assert_int_eq(pm__holders_set(&h, 140, 160, 1), 0);
    ck_assert_uint_eq(h.n, 1);
    ck_assert(h.r[0].lo == 100 && h.r[0].hi == 200 && h.r[0].host == 1);

    /* The same holder next to a range, on either side, extends it. */
    ck_assert_int_eq(pm__holders_set(&h, 200, 250, 1), 0);
    ck_assert_uint_eq(h.n, 1);
    ck_assert(h.r[0].lo == 100 && h.r[0].hi == 250 && h.r[0].host == 1);
    ck_assert_int_eq(pm__holders_set(&h, 50, 100, 1), 0);
    ck_assert_uint_eq(h.n, 1);
    ck_assert(h.r[0].lo == 50 && h.r[0].hi == 250 && h.r[0].host == 1);

    /* Another holder next to it stays apart. */
    ck_assert_int_eq(pm__holders_set(&h, 250, 300, 3), 0);
    ck_assert_uint_eq(h.n, 2);
    ck_assert(h.r[1].lo == 250 && h.r[1].hi == 300 && h.r[1].host == 3);

    /* Filling the gap between two ranges of one holder joins them. */
    ck_assert_int_eq(pm__holders_set(&h, 400, 500, 3), 0);
    ck_assert_uint_eq(h.n, 3);
    ck_assert_int_eq(pm__holders_set(&h, 300, 400, 3), 0);
    ck_assert_uint_eq(h.n, 2);
    ck_assert(h.r[1].lo == 250 && h.r[1].hi == 500 && h.r[1].host == 3);

    /* Taking a middle home cuts a range in two. */
    ck_assert_int_eq(pm__holders_set(&h, 100, 120, 0), 0);
    ck_assert_uint_eq(h.n, 3);
    ck_assert(h.r[0].lo == 50 && h.r[0].hi == 100 && h.r[0].host == 1);
    ck_assert(h.r[1].lo == 120 && h.r[1].hi == 250 && h.r[1].host == 1);
    ck_assert(!pm__holders_touch(&h, 100, 120));
    ck_assert(pm__holders_touch(&h, 100, 121));

    /* The empty range changes nothing. */
    ck_assert_int_eq(pm__holders_set(&h, 110, 110, 4), 0);
    ck_assert_int_eq(pm__holders_set(&h, 115, 105, 4), 0);
    ck_assert_int_eq(pm__holders_set(&h, 70, 70, 0), 0);
    ck_assert_uint_eq(h.n, 3);
    ck_assert(!pm__holders_touch(&h, 100, 120));
    ck_assert(h.r[0].lo == 50 && h.r[0].hi == 100 && h.r[0].host == 1);

    /* Taking everything home empties the map. */
    ck_assert_int_eq(pm__holders_set(&h, 0, SPAN, 0), 0);
    ck_assert_uint_eq(h.n, 0);
    ck_assert(!pm__holders_touch(&h, 0, SPAN));
    ck_assert_uint_eq(pm__holders_find(&h, 0), 0);

    /* Copying the empty map empties the target. */
    pm__holders_t c = {0};
    ck_assert_int_eq(pm__holders_set(&c, 10, 20, 2), 0);
    ck_assert_int_eq(pm__holders_copy(&c, &h), 0);
    ck_assert_uint_eq(c.n, 0);
    pm__holders_free(&c);
    pm__holders_free(&h);
    check_freed(&h);
}
END_TEST

/* A map that has never held anything (or has been freed) holds no array:
 * taking a range home on it, or the empty range, changes nothing. */
START_TEST(test_home_on_empty_map)
{
    pm__holders_t h = {0};
    ck_assert_int_eq(pm__holders_set(&h, 10, 20, 0), 0);
    ck_assert_uint_eq(h.n, 0);
    ck_assert_int_eq(pm__holders_set(&h, 20, 10, 3), 0);
    ck_assert_uint_eq(h.n, 0);
    ck_assert(!pm__holders_touch(&h, 0, SPAN));
    ck_assert_int_eq(pm__holders_set(&h, 10, 20, 2), 0);
    pm__holders_free(&h);
    ck_assert_int_eq(pm__holders_set(&h, 0, SPAN, 0), 0);
    ck_assert_uint_eq(h.n, 0);
    pm__holders_free(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dir");
    TCase *tc = tcase_create("dir");
    tcase_add_test(tc, test_set_matches_byte_map);
    tcase_add_test(tc, test_split_merge_home);
    tcase_add_test(tc, test_home_on_empty_map);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
