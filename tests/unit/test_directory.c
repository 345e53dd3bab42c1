/*
 * Proves the directory of copies on a host (data/copies.c), which host
 * mirrors and GPU mirrors both keep their state in: a new version keeps
 * only what a copy wrote and sent home, so a write invalidates every other
 * copy; a copy holds a part at a version only where it is valid and not
 * being written, or written by the task that made that version and home;
 * the nearest holder found is another place's copy of the same memory, a
 * GPU's and never a host's, one the caller accepts, and never one taken
 * off the directory; strided parts marked and unmarked row by row split and
 * merge ranges exactly as a byte map says.
 */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/copies.h"

#define SPAN 4096

static pm__sub_t part(uint64_t off, uint64_t block, uint64_t stride, uint64_t count)
{
    return (pm__sub_t){.offset = off, .block = block, .stride = stride, .count = count};
}

static pm__copy_t copy_at(int place, uint64_t version)
{
    return (pm__copy_t){.handle = 7, .bytes = SPAN, .version = version, .place = place};
}

/* A new version: what the copy wrote and sent home stays valid, nothing else;
 * a copy that wrote nothing (another place wrote) keeps nothing. */
START_TEST(test_write_invalidates_other_copies)
{
    pm__copy_t writer = copy_at(0, 3), other = copy_at(1, 3);
    pm__sub_t all = part(0, SPAN, SPAN, 1), mine = part(1024, 512, 512, 1);
    ck_assert_int_eq(pm__copy_mark(&writer.valid, &all, true), 0);
    ck_assert_int_eq(pm__copy_mark(&other.valid, &all, true), 0);
    /* The writer's subtask writes [1024, 1536) and sends it home. */
    ck_assert_int_eq(pm__copy_mark(&writer.valid, &mine, false), 0);
    ck_assert_int_eq(pm__copy_mark(&writer.writing, &mine, true), 0);
    ck_assert_int_eq(pm__copy_mark(&writer.pending, &mine, true), 0);
    ck_assert(!pm__copy_holds(&writer, 3, &mine)); /* being written */
    ck_assert(pm__copy_holds(&writer, 4, &mine));  /* home: valid at the next version */
    ck_assert(pm__copy_holds(&other, 3, &mine));   /* the old bytes, at the old version */
    ck_assert(!pm__copy_holds(&other, 4, &mine));
    pm__copy_sync(&writer, 4);
    pm__copy_sync(&other, 4);
    ck_assert_uint_eq(writer.version, 4);
    ck_assert(pm__copy_holds(&writer, 4, &mine));
    ck_assert(!pm__copy_holds(&writer, 4, &all));
    ck_assert_uint_eq(writer.writing.ncov, 0);
    ck_assert_uint_eq(writer.pending.ncov, 0);
    ck_assert_uint_eq(other.valid.ncov, 0);
    /* Two versions on (another task wrote in between): nothing is known. */
    ck_assert_int_eq(pm__copy_mark(&writer.pending, &mine, true), 0);
    pm__copy_sync(&writer, 6);
    ck_assert_uint_eq(writer.valid.ncov, 0);
    /* The same version again changes nothing. */
    ck_assert_int_eq(pm__copy_mark(&writer.valid, &mine, true), 0);
    pm__copy_sync(&writer, 6);
    ck_assert(pm__copy_holds(&writer, 6, &mine));
    pm__copy_free(&writer);
    pm__copy_free(&other);
}
END_TEST

static int rejected;

static bool not_gpu_1(pm__copy_t *c, void *arg)
{
    (void)arg;
    if (c->place == 1) {
        rejected++;
        return false;
    }
    return true;
}

/* The holder found is a listed GPU copy of the same memory, other than the
 * asker, that holds the part and that the asker accepts. */
START_TEST(test_find_nearest_holder)
{
    pm__copy_t host = copy_at(PM__PLACE_HOST, 2), g0 = copy_at(0, 2), g1 = copy_at(1, 2),
               g2 = copy_at(2, 2), stranger = copy_at(3, 2);
    stranger.handle = 8;
    pm__sub_t all = part(0, SPAN, SPAN, 1), want = part(100, 50, 200, 4);
    pm__copy_t *each[] = {&host, &g0, &g1, &g2, &stranger};
    pm__copies_lock();
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(pm__copy_mark(&each[i]->valid, &all, i != 3), 0); /* g2 holds nothing */
        pm__copies_add(each[i]);
    }
    /* g0 asks: the host copy and the other memory's never answer; g1 does. */
    pm__copy_t *c = pm__copies_find(&g0, 7, SPAN, 2, &want, NULL, NULL);
    ck_assert_ptr_eq(c, &g1);
    /* Refused by the asker (no direct path to GPU 1): none left. */
    rejected = 0;
    ck_assert_ptr_null(pm__copies_find(&g0, 7, SPAN, 2, &want, not_gpu_1, NULL));
    ck_assert_int_eq(rejected, 1);
    /* g1 asks: g0. A different size or version: none. */
    ck_assert_ptr_eq(pm__copies_find(&g1, 7, SPAN, 2, &want, NULL, NULL), &g0);
    ck_assert_ptr_null(pm__copies_find(&g1, 7, SPAN / 2, 2, &want, NULL, NULL));
    ck_assert_ptr_null(pm__copies_find(&g1, 7, SPAN, 3, &want, NULL, NULL));
    /* g0 writes one row of the part: not offered while it runs. */
    pm__sub_t row = part(300, 10, 10, 1);
    ck_assert_int_eq(pm__copy_mark(&g0.writing, &row, true), 0);
    ck_assert_ptr_null(pm__copies_find(&g1, 7, SPAN, 2, &want, NULL, NULL));
    /* Taken off the directory: never found again. */
    pm__copies_remove(&g1);
    ck_assert_ptr_null(pm__copies_find(&g0, 7, SPAN, 2, &want, NULL, NULL));
    for (int i = 0; i < 5; i++)
        pm__copies_remove(each[i]);
    pm__copies_unlock();
    for (int i = 0; i < 5; i++)
        pm__copy_free(each[i]);
}
END_TEST

/* Strided parts marked and unmarked at random: covers and touches answer
 * as a byte map does, so ranges split and merge exactly. */
START_TEST(test_parts_split_and_merge)
{
    unsigned char map[SPAN];
    memset(map, 0, sizeof map);
    pm__acc_t a = {0};
    srand(12345);
    for (int step = 0; step < 400; step++) {
        uint64_t block = 1 + (uint64_t)rand() % 64, stride = block + (uint64_t)rand() % 64;
        uint64_t count = 1 + (uint64_t)rand() % 8;
        uint64_t span = (count - 1) * stride + block;
        uint64_t off = (uint64_t)rand() % (SPAN - span);
        pm__sub_t q = part(off, block, stride, count);
        bool add = rand() % 3 != 0;
        ck_assert_int_eq(pm__copy_mark(&a, &q, add), 0);
        for (uint64_t k = 0; k < count; k++)
            memset(map + off + k * stride, add, block);
        /* Ranges stay sorted, disjoint and apart (merged when they touch). */
        for (uint32_t i = 0; i + 1 < a.ncov; i++)
            ck_assert_uint_lt(a.cov[i].hi, a.cov[i + 1].lo);
        uint64_t p_off = (uint64_t)rand() % (SPAN - span);
        pm__sub_t p = part(p_off, block, stride, count);
        bool all = true, any = false;
        for (uint64_t k = 0; k < count; k++)
            for (uint64_t b = 0; b < block; b++) {
                all &= map[p_off + k * stride + b] != 0;
                any |= map[p_off + k * stride + b] != 0;
            }
        ck_assert_int_eq(pm__copy_covers(&a, &p), all);
        ck_assert_int_eq(pm__copy_touches(&a, &p), any);
    }
    pm__acc_free(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("directory");
    TCase *tc = tcase_create("directory");
    tcase_add_test(tc, test_write_invalidates_other_copies);
    tcase_add_test(tc, test_find_nearest_holder);
    tcase_add_test(tc, test_parts_split_and_merge);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
