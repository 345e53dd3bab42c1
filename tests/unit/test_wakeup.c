/*
 * A task whose only chunk belongs to one particular stub still runs when
 * every stub sleeps: under PM_SCHED_STATIC_EQUAL a task of one subtask gives
 * its chunk to stub 0, and the stubs do not steal. With PMLIB_SPIN_US=0 the
 * stubs sleep as soon as they find no work, so each submit finds them all
 * asleep. Waking only "as many stubs as the task has chunks" once woke a
 * stub that owned no chunk of the task; it went back to sleep and the task
 * never ran.
 */
#include "testutil.h"

static atomic_int ran;

static int one_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    atomic_fetch_add(&ran, 1);
    return 0;
}

START_TEST(test_static_one_chunk_all_asleep)
{
    pm_task_desc_t desc;

    ck_assert_int_eq(setenv("PMLIB_SPIN_US", "0", 1), 0);
    tu_init_ncpu("4");
    tu_register("one", NULL, one_cpu);
    tu_desc(&desc, "one", 1);
    desc.sched = PM_SCHED_STATIC_EQUAL;
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(atomic_load(&ran), 200);
    ck_assert_int_eq(pm_finalize(), PM_OK);
}
END_TEST

static Suite *wakeup_suite(void)
{
    Suite *s = suite_create("wakeup");
    TCase *tc = tcase_create("static_one_chunk");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_static_one_chunk_all_asleep);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(wakeup_suite());
}
