/*
 * Straggler copies on one host: a stub that runs dry runs a copy of a
 * chunk another stub is still running, and the first to finish wins.
 *
 * Stub 1's callback blocks on a gate the test opens only after pm_task_wait
 * returned, so the task can end only through a copy: no timing is assumed.
 * The results must equal the serial ones exactly, a read-write range must be
 * changed once (the loser's private output is dropped) and a reduced memory
 * must merge the chunk's partial once.
 */
#include <stdbool.h>

#include "testutil.h"

#define N 16

static tu_gate_t gate;
static atomic_int slow_entered, slow_left, slow_timeouts;

static double input(uint64_t i)
{
    return (double)(tu_mix(i, 7) % 1000);
}

static int sub_cb(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t at = info->id * sizeof(double);
    int rc = pm_subscribe(sub, 0, PM_READ, at, sizeof(double));
    rc |= pm_subscribe(sub, 1, PM_WRITE, at, sizeof(double));
    rc |= pm_subscribe(sub, 2, PM_READ_WRITE, at, sizeof(double));
    if (info->nmem > 3)
        rc |= pm_subscribe(sub, 3, PM_WRITE, 0, sizeof(double));
    return rc;
}

/* Stub 1 is the straggler: it waits for the gate. Stub 0 waits until
 * stub 1 holds a chunk, so that there is one to copy. */
static int cpu_cb(const pm_subtask_info_t *info)
{
    if (info->stub == 1) {
        atomic_store(&slow_entered, 1);
        if (tu_gate_wait(&gate, 30) != 0)
            atomic_fetch_add(&slow_timeouts, 1);
        atomic_store(&slow_left, 1);
    } else {
        double end = tu_now() + 5;
        while (!atomic_load(&slow_entered) && tu_now() < end)
            tu_sleep_us(100);
    }
    const double *in = info->mem[0];
    double *out = info->mem[1], *rw = info->mem[2];
    out[info->id] = 3 * in[info->id] + 1;
    rw[info->id] += 1;
    if (info->nmem > 3)
        ((double *)info->mem[3])[0] = in[info->id];
    return 0;
}

static void run_with_straggler(bool reduce)
{
    pm_memory_t in = tu_memory(N * sizeof(double)), out = tu_memory(N * sizeof(double)),
                rw = tu_memory(N * sizeof(double)), sum = tu_memory(sizeof(double));
    double *x = pm_memory_data(in), *r = pm_memory_data(rw);
    for (uint64_t i = 0; i < N; i++) {
        x[i] = input(i);
        r[i] = (double)i;
    }
    *(double *)pm_memory_data(sum) = 0;
    ck_assert_int_eq(pm_memory_touch(in), PM_OK);

    pm_task_desc_t desc;
    tu_desc(&desc, "straggler", N);
    desc.grain = 1;
    tu_add(&desc, in, PM_READ);
    tu_add(&desc, out, PM_WRITE);
    tu_add(&desc, rw, PM_READ_WRITE);
    if (reduce) {
        int s = tu_add(&desc, sum, PM_WRITE);
        ck_assert_int_eq(pm_task_desc_reduce(&desc, s, PM_REDUCE_SUM, PM_DOUBLE), PM_OK);
    }
    tu_gate_close(&gate);
    atomic_store(&slow_entered, 0);
    atomic_store(&slow_left, 0);
    atomic_store(&slow_timeouts, 0);

    pm_task_t t = PM_TASK_NULL;
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    /* Ended while the straggler still waits: a copy ran its chunk. */
    ck_assert_int_eq(atomic_load(&slow_entered), 1);
    ck_assert_int_eq(atomic_load(&slow_left), 0);
    pm_task_stats_t st;
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_uint_eq(st.subtasks, N);
    ck_assert_uint_ge(st.multi_assigned, 1);

    const double *y = pm_memory_data(out);
    double want = 0;
    for (uint64_t i = 0; i < N; i++) {
        ck_assert(y[i] == 3 * input(i) + 1);
        ck_assert(r[i] == (double)i + 1);
        want += input(i);
    }
    if (reduce)
        ck_assert(*(double *)pm_memory_data(sum) == want);

    /* The loser finishes after the task; nothing it does may show. */
    tu_gate_open(&gate);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    double end = tu_now() + 10;
    while (!atomic_load(&slow_left) && tu_now() < end)
        tu_sleep_us(200);
    ck_assert_int_eq(atomic_load(&slow_left), 1);
    ck_assert_int_eq(atomic_load(&slow_timeouts), 0);
    for (uint64_t i = 0; i < N; i++) {
        ck_assert(y[i] == 3 * input(i) + 1);
        ck_assert(r[i] == (double)i + 1);
    }
    if (reduce)
        ck_assert(*(double *)pm_memory_data(sum) == want);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    ck_assert_int_eq(pm_memory_release(in), PM_OK);
    ck_assert_int_eq(pm_memory_release(out), PM_OK);
    ck_assert_int_eq(pm_memory_release(rw), PM_OK);
    ck_assert_int_eq(pm_memory_release(sum), PM_OK);
}

static void setup(void)
{
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    tu_init_ncpu("2");
    tu_register("straggler", sub_cb, cpu_cb);
}

START_TEST(test_copy_wins_over_straggler)
{
    run_with_straggler(false);
}
END_TEST

START_TEST(test_copy_wins_with_reduce)
{
    run_with_straggler(true);
}
END_TEST

static Suite *copies_suite(void)
{
    Suite *s = suite_create("copies");
    TCase *tc = tcase_create("straggler");

    tcase_add_checked_fixture(tc, setup, tu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_copy_wins_over_straggler);
    tcase_add_test(tc, test_copy_wins_with_reduce);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(copies_suite());
}
