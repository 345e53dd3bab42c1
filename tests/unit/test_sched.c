/*
 * Range hand-out and stealing: every chunk of a task goes to exactly one
 * stub, whatever the interleaving; initial shares are contiguous and follow
 * the weights; idle stubs steal under pull and never under static.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sched/ranges.h"
#include "taskshell.h"

#define NSTUBS 4

static pm__stub_t stubs[NSTUBS];

static pm__task_t *make_task(uint64_t nchunks, pm_sched_t sched)
{
    return ts_task(nchunks, sched, NULL, stubs, NSTUBS);
}

START_TEST(pull_hands_out_each_chunk_once)
{
    const uint64_t n = 1000;
    pm__task_t *t = make_task(n, PM_SCHED_PULL);
    int *seen = calloc(n, sizeof *seen);
    uint64_t c;
    /* Initial shares: stub s starts at s * n / NSTUBS. */
    for (int s = 0; s < NSTUBS; s++) {
        ck_assert(t->policy->take(t, s, &c));
        ck_assert_uint_eq(c, (uint64_t)s * n / NSTUBS);
        seen[c]++;
    }
    /* Round-robin until every stub is refused. */
    for (int idle = 0; idle < NSTUBS;) {
        idle = 0;
        for (int s = 0; s < NSTUBS; s++) {
            if (t->policy->take(t, s, &c))
                seen[c]++;
            else
                idle++;
        }
    }
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(seen[i], 1);
    free(seen);
    ts_free(t);
}
END_TEST

START_TEST(idle_stubs_steal_under_pull)
{
    const uint64_t n = 400;
    pm__task_t *t = make_task(n, PM_SCHED_PULL);
    int *seen = calloc(n, sizeof *seen);
    uint64_t c, taken = 0;
    /* Stub 0 sleeps; the others drain everything, including its share. */
    for (int busy = 1; busy;) {
        busy = 0;
        for (int s = 1; s < NSTUBS; s++)
            if (t->policy->take(t, s, &c)) {
                seen[c]++;
                taken++;
                busy = 1;
            }
    }
    ck_assert_uint_eq(taken, n);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(seen[i], 1);
    uint64_t steals = 0;
    for (int s = 0; s < NSTUBS; s++)
        steals += t->counts[s].steals;
    ck_assert_uint_gt(steals, 0);
    ck_assert(!t->policy->take(t, 0, &c));
    free(seen);
    ts_free(t);
}
END_TEST

START_TEST(static_never_steals)
{
    const uint64_t n = 100;
    pm__task_t *t = make_task(n, PM_SCHED_STATIC_EQUAL);
    uint64_t c, got = 0;
    while (t->policy->take(t, 1, &c)) {
        ck_assert(c >= 25 && c < 50);
        got++;
    }
    ck_assert_uint_eq(got, 25);
    /* Stub 0 still has its whole share. */
    ck_assert(t->policy->take(t, 0, &c));
    ck_assert_uint_eq(c, 0);
    ts_free(t);
}
END_TEST

START_TEST(weights_set_share_sizes)
{
    pm__task_t *t = calloc(1, sizeof *t);
    t->nchunks = 1000;
    t->hi = 1000;
    t->counts = calloc(NSTUBS, sizeof *t->counts);
    t->sched_space = pm__aligned_alloc(pm__ranges_space(NSTUBS));
    const double w[NSTUBS] = {1, 3, 0, 4};
    ck_assert_int_eq(pm__ranges_init(t, NSTUBS, w), 0);
    const uint64_t lo[NSTUBS] = {0, 125, 500, 500}, hi[NSTUBS] = {125, 500, 500, 1000};
    for (int s = 0; s < NSTUBS; s++) {
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].lo), lo[s]);
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].hi), hi[s]);
    }
    pm__ranges_fini(t);
    free(t->sched_space);
    free(t->counts);
    free(t);
}
END_TEST

struct racer {
    pm__task_t *t;
    int stub;
    atomic_int *seen;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    uint64_t c;
    while (r->t->policy->take(r->t, r->stub, &c))
        atomic_fetch_add(&r->seen[c], 1);
    return NULL;
}

START_TEST(concurrent_take_and_steal)
{
    const uint64_t n = 20000;
    pm__task_t *t = make_task(n, PM_SCHED_PULL);
    atomic_int *seen = calloc(n, sizeof *seen);
    pthread_t th[NSTUBS];
    struct racer r[NSTUBS];
    for (int s = 0; s < NSTUBS; s++) {
        r[s] = (struct racer){t, s, seen};
        pthread_create(&th[s], NULL, race, &r[s]);
    }
    for (int s = 0; s < NSTUBS; s++)
        pthread_join(th[s], NULL);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(atomic_load(&seen[i]), 1);
    free(seen);
    ts_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("ranges");
    tcase_add_test(tc, pull_hands_out_each_chunk_once);
    tcase_add_test(tc, idle_stubs_steal_under_pull);
    tcase_add_test(tc, static_never_steals);
    tcase_add_test(tc, weights_set_share_sizes);
    tcase_add_test(tc, concurrent_take_and_steal);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
