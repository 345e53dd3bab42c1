/*
 * A task whose only chunk belongs to one particular stub still runs when
 * every stub sleeps: under PM_SCHED_STATIC_EQUAL a task of one subtask gives
 * its chunk to stub 0, and the stubs do not steal. With PMLIB_SPIN_US=0 the
 * stubs sleep as soon as they find no work, so each submit finds them all
 * asleep. Waking only "as many stubs as the task has chunks" once woke a
 * stub that owned no chunk of the task; it went back to sleep and the task
 * never ran.
 *
 * Tasks the model knows to be short wake fewer stubs, and a chunk that runs
 * long wakes the rest. Pollers whose spells end as work is handed to them
 * still run it. Threads that poll by yielding sleep instead while
 * other programs keep the cores from the process.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "testutil.h"

#include <sched.h>
#include <stdio.h>

#include "core/internal.h"

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

/* Which stubs ran subtasks of the current task (a bit each), how many each
 * ran, and how long each subtask sleeps (0: none). */
static atomic_uint stubs_used;
static atomic_int ran_on[32];
static atomic_int nap_us;

/* With subtasks that nap, a stub's second subtask waits (up to 10 s) for
 * another stub to run one: the first chunk ran long, which must have
 * engaged the others. Waiting, not a time window, keeps a loaded machine
 * (woken stubs that do not run for a while) from failing the check. */
static void wait_for_company(void)
{
    double end = tu_now() + 10.0;
    while (__builtin_popcount(atomic_load(&stubs_used)) < 2 && tu_now() < end)
        tu_sleep_us(1000);
}

static int mark_cpu(const pm_subtask_info_t *info)
{
    atomic_fetch_or(&stubs_used, 1u << (info->stub & 31));
    int mine = atomic_fetch_add(&ran_on[info->stub & 31], 1) + 1;
    int us = atomic_load(&nap_us);
    if (us > 0) {
        tu_sleep_us(us);
        if (mine == 2)
            wait_for_company();
    }
    return 0;
}

static int run_marked(const pm_task_desc_t *desc)
{
    atomic_store(&stubs_used, 0);
    for (int i = 0; i < 32; i++)
        atomic_store(&ran_on[i], 0);
    ck_assert_int_eq(tu_run(desc), PM_OK);
    return __builtin_popcount(atomic_load(&stubs_used));
}

/*
 * A task the performance model knows to be a few microseconds of work does
 * not wake every stub: with polling off, each of 100 tasks of 16 tiny
 * subtasks wakes one stub (the others stay asleep), not all 3 or 4 that
 * sleep. Should the model be
 * wrong, a chunk that runs long wakes the others: 16 subtasks of 10 ms
 * never run on one stub alone.
 */
START_TEST(test_short_tasks_wake_few_stubs)
{
    pm_task_desc_t desc;

    ck_assert_int_eq(setenv("PMLIB_SPIN_US", "0", 1), 0);
    tu_init_ncpu("4");
    tu_register("mark", NULL, mark_cpu);
    tu_desc(&desc, "mark", 16);
    for (int i = 0; i < 20; i++) /* the model learns the time per subtask */
        run_marked(&desc);
    /* Each task wakes one stub, or a few more when a chunk ran long (a
     * preempted stub): far from every parked stub for each. */
    uint64_t before = atomic_load(&pm__rt.woken);
    for (int i = 0; i < 100; i++)
        run_marked(&desc);
    uint64_t woken = atomic_load(&pm__rt.woken) - before;
    /* Under a sanitizer every subtask runs many times slower and its
     * chunks run long often: the count then measures the sanitizer (200
     * to 324 wake-ups in 100 tasks under ThreadSanitizer on 2 busy
     * cores), so only plain builds check it. */
    if (getenv("PMLIB_TEST_SANITIZER") == NULL)
        ck_assert_uint_le(woken, 200);

    /* 16 subtasks of 10 ms: the first chunk runs long and engages the
     * other stubs, which then run some of the rest (a stub waits in its
     * second subtask until another has come: a woken stub that the system
     * does not run for 150 ms on a loaded machine is slow, not wrong). */
    atomic_store(&nap_us, 10000);
    desc.subtasks = 16;
    ck_assert_int_gt(run_marked(&desc), 1);
    ck_assert_int_eq(pm_finalize(), PM_OK);
}
END_TEST

/*
 * Pollers whose spells end while work is handed out: with 1 us spells the
 * stubs keep adding themselves to the pollers and taking themselves off,
 * while the program thread hands tasks of one chunk straight to a poller
 * and tasks of several chunks poke several (and waits now and then, so
 * that stubs also park and are woken). A stub that a poker takes off as
 * its spell ends is owed that poke and must wait for it: otherwise the
 * handed task never runs and the waits hang. The tasks of one chunk go
 * to pollers of the program thread's stash (where several poll, stashed
 * stubs whose spell ends also take themselves back meanwhile: the
 * protocol's own test is in the scheduling suite). Every subtask runs,
 * with its own id and task.
 */
#define SPELL_TASKS 3000
#define SPELL_WIDE 6
static atomic_int spell_runs[SPELL_TASKS * SPELL_WIDE];

static int spell_cpu(const pm_subtask_info_t *info)
{
    uint32_t task = SPELL_TASKS;
    if (info->conf_bytes == sizeof task && info->id < SPELL_WIDE)
        memcpy(&task, info->conf, sizeof task);
    tu_note(task >= SPELL_TASKS);
    if (task < SPELL_TASKS)
        atomic_fetch_add(&spell_runs[task * SPELL_WIDE + info->id], 1);
    return 0;
}

static uint64_t spell_width(uint32_t task)
{
    return task % 3 == 0 ? SPELL_WIDE : 1;
}

START_TEST(test_pollers_spells_end_as_work_comes)
{
    static pm_task_t tasks[SPELL_TASKS];
    pm_task_desc_t desc;

    ck_assert_int_eq(setenv("PMLIB_SPIN_US", "1", 1), 0);
    tu_init_ncpu("4");
    tu_register("spell", NULL, spell_cpu);
    for (uint32_t i = 0; i < SPELL_TASKS; i++) {
        tu_desc(&desc, "spell", spell_width(i));
        desc.conf = &i;
        desc.conf_bytes = sizeof i;
        ck_assert_int_eq(pm_task_submit(&desc, &tasks[i]), PM_OK);
        if (i % 200 == 199) /* idle stubs: spells end, stubs park */
            ck_assert_int_eq(pm_task_wait(tasks[i]), PM_OK);
    }
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);
    int missing = 0, stray = 0;
    for (uint32_t i = 0; i < SPELL_TASKS; i++) {
        for (uint64_t k = 0; k < SPELL_WIDE; k++) {
            int n = atomic_load(&spell_runs[i * SPELL_WIDE + k]);
            /* At least once: a straggling subtask may also run as a copy. */
            missing += k < spell_width(i) && n < 1;
            stray += k >= spell_width(i) && n != 0;
        }
        ck_assert_int_eq(pm_task_release(tasks[i]), PM_OK);
    }
    ck_assert_int_eq(missing, 0);
    ck_assert_int_eq(stray, 0);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    ck_assert_int_eq(pm_finalize(), PM_OK);
}
END_TEST

/* Stub threads may be bound to cores of their own (PMLIB_BIND): each
 * subtask records how many CPUs the thread running it may use. */
#define MAX_STUBS 256
static atomic_int cpus_of[MAX_STUBS];

static int affinity_cpu(const pm_subtask_info_t *info)
{
    cpu_set_t set;
    if (info->stub >= 0 && info->stub < MAX_STUBS && sched_getaffinity(0, sizeof set, &set) == 0)
        atomic_store(&cpus_of[info->stub], CPU_COUNT(&set));
    return 0;
}

/* Runs one subtask per stub, each on its own stub, with PMLIB_NCPU=ncpu
 * and PMLIB_BIND=bind; how many CPUs stub `stub` could use. */
static int cpus_seen(int ncpu, const char *bind, int stub)
{
    char n[16];
    pm_task_desc_t desc;
    snprintf(n, sizeof n, "%d", ncpu);
    ck_assert_int_eq(setenv("PMLIB_BIND", bind, 1), 0);
    tu_init_ncpu(n);
    tu_register("affinity", NULL, affinity_cpu);
    tu_desc(&desc, "affinity", (uint64_t)ncpu);
    desc.sched = PM_SCHED_STATIC_EQUAL;
    for (int i = 0; i < MAX_STUBS; i++)
        atomic_store(&cpus_of[i], 0);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(pm_finalize(), PM_OK);
    return atomic_load(&cpus_of[stub]);
}

START_TEST(test_stubs_bound_when_cores_allow)
{
    cpu_set_t mask;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
    int cores = CPU_COUNT(&mask);
    /* One stub always fits: bound to one core; not bound when told not to. */
    ck_assert_int_eq(cpus_seen(1, "1", 0), 1);
    ck_assert_int_eq(cpus_seen(1, "0", 0), cores);
    /* More stubs than cores: never bound, even when asked. */
    if (cores + 1 <= MAX_STUBS) {
        ck_assert_int_eq(cpus_seen(cores + 1, "1", 0), cores);
        ck_assert_int_eq(cpus_seen(cores + 1, "1", cores), cores);
    }
}
END_TEST

/* The CPU seconds of a made-up process, for pm__yield_took. */
static double fake_cpu;
static double read_fake_cpu(void)
{
    return fake_cpu;
}

/*
 * Yields that come back a time slice late make the process contended
 * (threads then sleep instead of polling by yielding) only while it gets
 * far less CPU than its share of the cores, as beside other programs that
 * keep the cores busy; not while its own threads keep them busy. After a
 * contended spell the rate is measured afresh (the spell's naps use little
 * CPU). Times are from long ago on the monotonic clock, so that nothing
 * carries over to the real one (Check runs each test in a process of its
 * own).
 */
START_TEST(test_contended_only_when_starved)
{
    const double t = 10.0;
    pm__rt.core_share = 1.0;
    fake_cpu = 100.0;
    ck_assert(pm__yield_took(t, 3e-3, read_fake_cpu)); /* slow: measured from here */
    ck_assert(!pm__contended(t));
    fake_cpu = 100.009; /* 9 ms of CPU in 10 ms: its own threads had the core */
    ck_assert(pm__yield_took(t + 0.010, 3e-3, read_fake_cpu));
    ck_assert(!pm__contended(t + 0.010));
    fake_cpu = 100.010; /* 1 ms in 10 ms: others had it */
    ck_assert(pm__yield_took(t + 0.020, 3e-3, read_fake_cpu));
    ck_assert(pm__contended(t + 0.020));
    ck_assert(pm__contended(t + 0.069));
    ck_assert(!pm__contended(t + 0.071));
    /* The first yield after the spell (fast) measures from there. */
    fake_cpu = 100.011;
    ck_assert(!pm__yield_took(t + 0.080, 1e-6, read_fake_cpu));
    fake_cpu = 100.020; /* 9 ms in 10 ms */
    ck_assert(pm__yield_took(t + 0.090, 3e-3, read_fake_cpu));
    ck_assert(!pm__contended(t + 0.090));
    /* Too soon after the last measure (2 ms) to tell: nothing changes. */
    ck_assert(pm__yield_took(t + 0.092, 3e-3, read_fake_cpu));
    ck_assert(!pm__contended(t + 0.092));
    /* Fast yields never make it contended. */
    fake_cpu = 100.020;
    ck_assert(!pm__yield_took(t + 0.200, 1e-6, read_fake_cpu));
    ck_assert(!pm__contended(t + 0.200));
}
END_TEST

static Suite *wakeup_suite(void)
{
    Suite *s = suite_create("wakeup");
    TCase *tc = tcase_create("static_one_chunk");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_static_one_chunk_all_asleep);
    tcase_add_test(tc, test_short_tasks_wake_few_stubs);
    tcase_add_test(tc, test_pollers_spells_end_as_work_comes);
    tcase_add_test(tc, test_stubs_bound_when_cores_allow);
    tcase_add_test(tc, test_contended_only_when_starved);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(wakeup_suite());
}
