/*
 * Small helpers shared by the unit suites: the init/finalize fixtures, a
 * gate that holds a CPU callback until the test opens it, a value mixer for
 * test data, and the suite runner every main() uses.
 *
 * Callbacks run on pmlib's stub threads, where a failing ck_assert would not
 * stop the test cleanly; they record problems in atomics (tu_note) that the
 * test body asserts after the task finished.
 */
#ifndef PMLIB_TESTUTIL_H
#define PMLIB_TESTUTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pmlib.h"

/* Problems seen inside callbacks; each test asserts it stayed 0. */
static atomic_int tu_callback_errors;

/* Records one problem seen in a callback when `bad` is true. */
static inline void tu_note(int bad)
{
    if (bad)
        atomic_fetch_add(&tu_callback_errors, 1);
}

/* Starts pmlib with `ncpu` CPU stubs; more stubs than cores on purpose. */
static inline void tu_init_ncpu(const char *ncpu)
{
    atomic_store(&tu_callback_errors, 0);
    ck_assert_int_eq(setenv("PMLIB_NCPU", ncpu, 1), 0);
    ck_assert_int_eq(pm_init(NULL, NULL), PM_OK);
}

static inline void tu_setup_ncpu4(void)
{
    tu_init_ncpu("4");
}

static inline void tu_setup_ncpu1(void)
{
    tu_init_ncpu("1");
}

static inline void tu_teardown(void)
{
    ck_assert_int_eq(pm_finalize(), PM_OK);
}

/* Seconds on a monotonic clock. */
static inline double tu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void tu_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

    nanosleep(&ts, NULL);
}

/* A gate that CPU callbacks wait on until the test opens it. */
typedef struct tu_gate {
    atomic_int open;
} tu_gate_t;

static inline void tu_gate_close(tu_gate_t *g)
{
    atomic_store(&g->open, 0);
}

static inline void tu_gate_open(tu_gate_t *g)
{
    atomic_store(&g->open, 1);
}

/*
 * Waits until the gate opens; gives up after `max_s` seconds (returning -1)
 * so that a broken runtime makes the test fail instead of hang.
 */
static inline int tu_gate_wait(tu_gate_t *g, double max_s)
{
    double end = tu_now() + max_s;

    while (!atomic_load(&g->open)) {
        if (tu_now() > end)
            return -1;
        tu_sleep_us(200);
    }
    return 0;
}

/* A well-mixed 64-bit value from (a, b); test data, not randomness. */
static inline uint64_t tu_mix(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b * 0xD1B54A32D192ED03ull +
                 0x2545F4914F6CDD1Dull;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Creates a memory of `bytes` bytes or fails the test. */
static inline pm_memory_t tu_memory(size_t bytes)
{
    pm_memory_t m = PM_MEMORY_NULL;

    ck_assert_int_eq(pm_memory_create(bytes, &m), PM_OK);
    ck_assert_ptr_nonnull(pm_memory_data(m));
    return m;
}

/* Registers a callback set with the given subscribe and cpu callbacks. */
static inline void tu_register(const char *name, pm_subscribe_fn subscribe,
                               pm_cpu_fn cpu)
{
    pm_callbacks_t cb;

    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.subscribe = subscribe;
    cb.cpu = cpu;
    ck_assert_int_eq(pm_callbacks_register(name, &cb), PM_OK);
}

/* Starts a descriptor for `subtasks` subtasks of callback set `name`. */
static inline void tu_desc(pm_task_desc_t *desc, const char *name,
                           uint64_t subtasks)
{
    ck_assert_int_eq(pm_task_desc_init(desc), PM_OK);
    desc->callbacks = name;
    desc->subtasks = subtasks;
}

/* Adds a memory to a descriptor and checks the index it got. */
static inline int tu_add(pm_task_desc_t *desc, pm_memory_t m, pm_access_t a)
{
    int idx = pm_task_desc_add(desc, m, a);

    ck_assert_int_ge(idx, 0);
    return idx;
}

/* Submits a task, waits for it and returns its status; releases it. */
static inline int tu_run(const pm_task_desc_t *desc)
{
    pm_task_t t = PM_TASK_NULL;
    int rc;

    ck_assert_int_eq(pm_task_submit(desc, &t), PM_OK);
    rc = pm_task_wait(t);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    return rc;
}

/* Runs a suite in Check's default (forking) mode; the exit status of main. */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* PMLIB_TESTUTIL_H */
