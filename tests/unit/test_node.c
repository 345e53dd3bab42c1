/*
 * Proves the machine's table of GPU copies (data/node.c), through which
 * the GPUs of the hosts of one machine copy from each other: a reader
 * finds a record of another process only for the same memory, at the same
 * version, and only where the record's ranges hold every row of the part
 * asked for; it never finds its own process's; a record names the first
 * ranges when it has more than fit (a subset is still true); an owner
 * that is about to write publishes an empty record for the next version;
 * an owner cannot take a record back without waiting while a reader
 * copies from it, and a reader that comes after it was taken back finds
 * nothing; rows and records are limited and given back. Mirrors of other
 * processes not opened yet are offered one by one, and a count says when
 * a new one was published. A thread that
 * publishes while another reads never lets the reader see a record whose
 * fields belong to two publications (under ThreadSanitizer in CI).
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "data/node.h"

static void *table;
static const unsigned char ipc_a[PM__NODE_IPC] = {1, 2, 3};

static void setup(void)
{
    table = calloc(1, PM__SHM_TABLE_BYTES);
    ck_assert_ptr_nonnull(table);
    pm__node_use_table(table);
}

static void teardown(void)
{
    pm__node_use_table(NULL);
    pm__node_as_process(0);
    free(table);
}

static pm__sub_t part(uint64_t off, uint64_t block, uint64_t stride, uint64_t count)
{
    return (pm__sub_t){.offset = off, .block = block, .stride = stride, .count = count};
}

static int join_as(int pid, unsigned char tag)
{
    unsigned char dev[PM__NODE_DEV] = {tag};
    pm__node_as_process(pid);
    return pm__node_join(dev);
}

/* [0, 100) and [200, 300) of memory 9 at version 5, by process 1. */
static int publish_two(int row, int *rec)
{
    pm__acc_t r = {0};
    ck_assert_int_eq(pm__acc_cover(&r, 0, 100), 0);
    ck_assert_int_eq(pm__acc_cover(&r, 200, 300), 0);
    int rc = pm__node_publish(row, rec, 9, 77, ipc_a, 5, &r);
    pm__acc_free(&r);
    return rc;
}

START_TEST(test_reader_finds_only_what_is_held)
{
    int row = join_as(1, 0xA), rec = -1;
    ck_assert_int_ge(row, 0);
    ck_assert_int_eq(publish_two(row, &rec), 0);
    ck_assert_int_ge(rec, 0);
    int mine = join_as(2, 0xB);
    ck_assert_int_ge(mine, 0);
    ck_assert_int_ne(mine, row);
    pm__node_hold_t h;
    pm__sub_t in = part(10, 50, 50, 1), gap = part(90, 20, 20, 1), second = part(250, 40, 40, 1);
    pm__sub_t rows = part(20, 30, 200, 2), rows_out = part(20, 30, 100, 3);
    ck_assert(pm__node_take(mine, 9, 5, &in, &h));
    ck_assert_int_eq(h.row, row);
    ck_assert_int_eq(h.rec, rec);
    ck_assert_uint_eq(h.gen, 77);
    ck_assert_int_eq(memcmp(h.ipc, ipc_a, PM__NODE_IPC), 0);
    ck_assert_uint_eq(h.dev[0], 0xA);
    pm__node_drop(&h);
    ck_assert(pm__node_take(mine, 9, 5, &second, &h));
    pm__node_drop(&h);
    ck_assert(pm__node_take(mine, 9, 5, &rows, &h)); /* rows at 20 and 220 */
    pm__node_drop(&h);
    ck_assert(!pm__node_take(mine, 9, 5, &rows_out, &h)); /* the row at 120 is not held */
    ck_assert(!pm__node_take(mine, 9, 5, &gap, &h));
    ck_assert(!pm__node_take(mine, 9, 4, &in, &h));  /* another version */
    ck_assert(!pm__node_take(mine, 9, 6, &in, &h));
    ck_assert(!pm__node_take(mine, 8, 5, &in, &h));  /* another memory */
    pm__node_as_process(1); /* its own process's records are never offered */
    ck_assert(!pm__node_take(-1, 9, 5, &in, &h));
    ck_assert(!pm__node_read_now(row, rec));
}
END_TEST

/* The owner about to write: an empty record for the version it makes. */
START_TEST(test_writer_drops_what_it_held)
{
    int row = join_as(1, 0xA), rec = -1;
    ck_assert_int_eq(publish_two(row, &rec), 0);
    int kept = rec;
    ck_assert_int_eq(pm__node_publish(row, &rec, 9, 77, ipc_a, 6, NULL), 0);
    ck_assert_int_eq(rec, kept);
    int mine = join_as(2, 0xB);
    pm__node_hold_t h;
    pm__sub_t in = part(10, 50, 50, 1);
    ck_assert(!pm__node_take(mine, 9, 5, &in, &h));
    ck_assert(!pm__node_take(mine, 9, 6, &in, &h));
}
END_TEST

/* A record that is read stays; one taken back is found no more. */
START_TEST(test_withdraw_waits_for_readers)
{
    int row = join_as(1, 0xA), rec = -1;
    ck_assert_int_eq(publish_two(row, &rec), 0);
    int mine = join_as(2, 0xB);
    pm__node_hold_t h, h2;
    pm__sub_t in = part(10, 50, 50, 1);
    ck_assert(pm__node_take(mine, 9, 5, &in, &h));
    ck_assert(pm__node_take(mine, 9, 5, &in, &h2));
    ck_assert(pm__node_read_now(row, rec));
    pm__node_as_process(1);
    ck_assert(!pm__node_withdraw(row, rec, false));
    pm__node_drop(&h);
    ck_assert(!pm__node_withdraw(row, rec, false));
    pm__node_drop(&h2);
    ck_assert(pm__node_current(row, rec, 77));
    ck_assert(pm__node_withdraw(row, rec, false));
    ck_assert(!pm__node_current(row, rec, 77));
    pm__node_as_process(2);
    ck_assert(!pm__node_take(mine, 9, 5, &in, &h));
}
END_TEST

/* Mirrors opened ahead of need: the count of publications moves with a
 * new mirror (not with a new version of one), and a reader is offered
 * each mirror of other processes it has not seen, counted as read. */
static uint64_t seen_gen;

static bool seen_one(void *ctx, int row, uint64_t gen)
{
    (void)ctx;
    (void)row;
    return gen == seen_gen;
}

START_TEST(test_unseen_mirrors_are_offered)
{
    int row = join_as(1, 0xA), rec = -1;
    uint64_t n0 = pm__node_news();
    ck_assert_int_eq(publish_two(row, &rec), 0); /* mirror 77 */
    uint64_t n1 = pm__node_news();
    ck_assert_uint_gt(n1, n0);
    ck_assert_int_eq(pm__node_publish(row, &rec, 9, 77, ipc_a, 6, NULL), 0); /* its next version */
    ck_assert_uint_eq(pm__node_news(), n1);
    int other = -1;
    ck_assert_int_eq(pm__node_publish(row, &other, 8, 78, ipc_a, 1, NULL), 0); /* mirror 78 */
    ck_assert_uint_gt(pm__node_news(), n1);
    int mine = join_as(2, 0xB);
    pm__node_hold_t h;
    seen_gen = 0;
    ck_assert(pm__node_take_unseen(mine, seen_one, NULL, &h));
    ck_assert_int_eq(h.row, row);
    ck_assert_uint_eq(h.gen, 77);
    ck_assert_uint_eq(h.dev[0], 0xA);
    ck_assert(pm__node_read_now(row, rec));
    pm__node_drop(&h);
    seen_gen = 77;
    ck_assert(pm__node_take_unseen(mine, seen_one, NULL, &h));
    ck_assert_uint_eq(h.gen, 78);
    ck_assert_int_eq(h.rec, other);
    pm__node_drop(&h);
    pm__node_as_process(1); /* a process's own mirrors are never offered */
    seen_gen = 0;
    ck_assert(!pm__node_take_unseen(row, seen_one, NULL, &h));
    ck_assert(pm__node_withdraw(row, rec, false));
    ck_assert(pm__node_withdraw(row, other, false));
    pm__node_as_process(2);
    ck_assert(!pm__node_take_unseen(mine, seen_one, NULL, &h));
}
END_TEST

/* More ranges than a record names: the first ones are named. */
START_TEST(test_many_ranges_name_a_subset)
{
    int row = join_as(1, 0xA), rec = -1;
    pm__acc_t r = {0};
    for (uint64_t i = 0; i < 200; i++)
        ck_assert_int_eq(pm__acc_cover(&r, i * 100, i * 100 + 50), 0);
    ck_assert_int_eq(pm__node_publish(row, &rec, 9, 1, ipc_a, 3, &r), 0);
    pm__acc_free(&r);
    int mine = join_as(2, 0xB);
    pm__node_hold_t h;
    pm__sub_t first = part(0, 50, 100, 10), last = part(19900, 50, 50, 1);
    ck_assert(pm__node_take(mine, 9, 3, &first, &h));
    pm__node_drop(&h);
    ck_assert(!pm__node_take(mine, 9, 3, &last, &h));
}
END_TEST

START_TEST(test_rows_and_records_are_limited)
{
    int rows[PM__NODE_ROWS];
    for (int i = 0; i < PM__NODE_ROWS; i++)
        ck_assert_int_eq(rows[i] = join_as(1 + i, (unsigned char)i), i);
    ck_assert_int_eq(join_as(99, 0xF), -1);
    pm__node_as_process(1);
    int n = 0, rec;
    do {
        rec = -1;
        if (pm__node_publish(rows[0], &rec, 100 + (uint64_t)n, 1, ipc_a, 1, NULL) == 0)
            n++;
    } while (rec >= 0);
    ck_assert_int_ge(n, 16);
    pm__node_leave(rows[0]); /* takes back every record and the row */
    ck_assert_int_eq(join_as(99, 0xF), rows[0]);
    rec = -1;
    ck_assert_int_eq(pm__node_publish(rows[0], &rec, 5, 1, ipc_a, 1, NULL), 0);
}
END_TEST

/* The owner's publication i names version i % 50 + 1, gen i and [0, 8 (i
 * % 1000 + 1)); a reader that finds version v must see a gen that goes
 * with it. */
static atomic_int stop;

static void *publisher(void *arg)
{
    int row = *(int *)arg, rec = -1;
    for (uint64_t i = 1; !atomic_load(&stop); i++) {
        pm__acc_t r = {0};
        if (pm__acc_cover(&r, 0, 8 * (i % 1000 + 1)) == 0)
            pm__node_publish(row, &rec, 9, i, ipc_a, i % 50 + 1, &r);
        pm__acc_free(&r);
        if (i % 7 == 0)
            pm__node_withdraw(row, rec, true);
    }
    return NULL;
}

START_TEST(test_readers_never_see_half_a_record)
{
    int row = join_as(1, 0xA), mine = join_as(2, 0xB);
    atomic_store(&stop, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, publisher, &row), 0);
    int found = 0, wrong = 0;
    for (int i = 0; i < 200000 && found < 1000; i++) {
        pm__node_hold_t h;
        pm__sub_t q = part(0, 8, 8, 1);
        uint64_t v = (uint64_t)i % 50 + 1;
        if (pm__node_take(mine, 9, v, &q, &h)) {
            found++;
            wrong += h.gen % 50 + 1 != v;
            pm__node_drop(&h);
        }
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(wrong, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("node");
    TCase *tc = tcase_create("node");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_reader_finds_only_what_is_held);
    tcase_add_test(tc, test_writer_drops_what_it_held);
    tcase_add_test(tc, test_withdraw_waits_for_readers);
    tcase_add_test(tc, test_unseen_mirrors_are_offered);
    tcase_add_test(tc, test_many_ranges_name_a_subset);
    tcase_add_test(tc, test_rows_and_records_are_limited);
    tcase_add_test(tc, test_readers_never_see_half_a_record);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
