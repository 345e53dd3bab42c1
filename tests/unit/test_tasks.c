/*
 * Proves task handling on the CPU runtime with more stubs than cores:
 * - 50 tasks submitted without waiting (chains on shared memories, snapshot
 *   readers between them, independent writers) finish with the results of
 *   running them one by one in submit order; pm_task_wait_all reports the
 *   first failure; pm_finalize waits for unfinished tasks;
 * - program threads submitting at once (chains and tasks without
 *   memories): each one's pm_task_wait_all returns only once every task it
 *   submitted is done, with the serial results;
 * - pm_task_test says "not done" while a task is held and gives its status
 *   once it finished, without pm_task_wait; a task whose subscriptions
 *   overlap fails after the task it waits for and runs nothing;
 * - pm_task_stats counts every subtask once, all on CPU stubs, on this host;
 * - a double-precision sum reduce over 1000 subtasks of very different
 *   magnitudes gives the same bits on every run, with 4 stubs and with 1,
 *   and under every scheduling policy;
 * - on one stub, a task submitted while a chain runs is not passed by the
 *   chain's later tasks;
 * - with any grain, and under uneven load that makes idle stubs steal, each
 *   subtask runs exactly once;
 * - tasks beyond what the slabs of task blocks hold (a small
 *   PMLIB_TASK_CACHE_MB), of one subtask and of several (blocks of two
 *   sizes), run as the others, round after round and after pmlib is
 *   started again.
 */
#include "testutil.h"

#include <float.h>
#include <pthread.h>
#include <math.h>

/* Subtask `id` of `n` owns elements [slice_lo(id), slice_lo(id + 1)). */
static size_t slice_lo(uint64_t id, uint64_t n, size_t elems)
{
    return (size_t)(id * elems / n);
}

/* ------------------------------------------------------------------------ */
/* Many tasks in flight                                                      */
/* ------------------------------------------------------------------------ */

enum step_kind {
    STEP_ADD,      /* x += 1 on memory 0, in place */
    STEP_AFFINE,   /* x = 3x + k + i on memory 0: the order matters */
    STEP_SNAPSHOT, /* copy memory 0 (read) into memory 1 (written) */
    STEP_FILL,     /* memory 0 = k * 1000 + i, written */
    STEP_FAIL      /* like STEP_FILL, but subtask 1 fails */
};

typedef struct step_conf {
    int kind;
    uint32_t k;
    uint32_t elems;
    uint32_t sleep_us; /* per subtask, to let tasks overlap in time */
} step_conf_t;

#define STEP_ELEMS 256
#define STEP_SUBTASKS 8

static step_conf_t get_step(const pm_subtask_info_t *info)
{
    step_conf_t c;

    memcpy(&c, info->conf, sizeof(c));
    return c;
}

static int step_subscribe(pm_subscription_t *sub,
                          const pm_subtask_info_t *info)
{
    step_conf_t c = get_step(info);
    size_t lo = slice_lo(info->id, info->count, c.elems) * 4;
    size_t len = slice_lo(info->id + 1, info->count, c.elems) * 4 - lo;

    switch (c.kind) {
    case STEP_ADD:
    case STEP_AFFINE:
        return pm_subscribe(sub, 0, PM_READ_WRITE, lo, len);
    case STEP_SNAPSHOT: {
        int rc = pm_subscribe(sub, 0, PM_READ, lo, len);

        return rc ? rc : pm_subscribe(sub, 1, PM_WRITE, lo, len);
    }
    default:
        return pm_subscribe(sub, 0, PM_WRITE, lo, len);
    }
}

static int step_cpu(const pm_subtask_info_t *info)
{
    step_conf_t c = get_step(info);
    size_t lo = slice_lo(info->id, info->count, c.elems);
    size_t hi = slice_lo(info->id + 1, info->count, c.elems);
    uint32_t *x = info->mem[0];

    if (c.sleep_us)
        tu_sleep_us(c.sleep_us);
    for (size_t i = lo; i < hi; i++) {
        switch (c.kind) {
        case STEP_ADD:
            x[i] += 1;
            break;
        case STEP_AFFINE:
            x[i] = x[i] * 3u + c.k + (uint32_t)i;
            break;
        case STEP_SNAPSHOT:
            ((uint32_t *)info->mem[1])[i] = x[i];
            break;
        default:
            x[i] = c.k * 1000u + (uint32_t)i;
            break;
        }
    }
    return (c.kind == STEP_FAIL && info->id == 1) ? 1 : 0;
}

/* Submits one step task of `subtasks` subtasks over memories m0 (and m1
 * for snapshots). */
static pm_task_t submit_step_n(int kind, uint32_t k, pm_memory_t m0,
                               pm_memory_t m1, uint32_t sleep_us, uint64_t subtasks)
{
    step_conf_t c = {kind, k, STEP_ELEMS, sleep_us};
    pm_task_desc_t desc;
    pm_task_t t = PM_TASK_NULL;

    tu_desc(&desc, "step", subtasks);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    switch (kind) {
    case STEP_ADD:
    case STEP_AFFINE:
        tu_add(&desc, m0, PM_READ_WRITE);
        break;
    case STEP_SNAPSHOT:
        tu_add(&desc, m0, PM_READ);
        tu_add(&desc, m1, PM_WRITE);
        break;
    default:
        tu_add(&desc, m0, PM_WRITE);
        break;
    }
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    return t;
}

static pm_task_t submit_step(int kind, uint32_t k, pm_memory_t m0,
                             pm_memory_t m1, uint32_t sleep_us)
{
    return submit_step_n(kind, k, m0, m1, sleep_us, STEP_SUBTASKS);
}

#define NTASKS 50

START_TEST(test_many_tasks_in_flight)
{
    pm_memory_t add = tu_memory(STEP_ELEMS * 4), aff = tu_memory(STEP_ELEMS * 4);
    pm_memory_t other[NTASKS];
    pm_task_t t[NTASKS];
    uint32_t aff_ref[STEP_ELEMS], snap_ref[NTASKS][STEP_ELEMS];
    uint32_t adds = 0;

    memset(aff_ref, 0, sizeof(aff_ref));
    for (uint32_t k = 0; k < NTASKS; k++) {
        other[k] = PM_MEMORY_NULL;
        switch (k % 5) {
        case 0:
        case 4:
            t[k] = submit_step(STEP_ADD, k, add, PM_MEMORY_NULL, 50);
            adds++;
            break;
        case 1:
            t[k] = submit_step(STEP_AFFINE, k, aff, PM_MEMORY_NULL, 50);
            for (uint32_t i = 0; i < STEP_ELEMS; i++)
                aff_ref[i] = aff_ref[i] * 3u + k + i;
            break;
        case 2:
            other[k] = tu_memory(STEP_ELEMS * 4);
            t[k] = submit_step(STEP_SNAPSHOT, k, aff, other[k], 0);
            memcpy(snap_ref[k], aff_ref, sizeof(aff_ref));
            break;
        default:
            other[k] = tu_memory(STEP_ELEMS * 4);
            t[k] = submit_step(STEP_FILL, k, other[k], PM_MEMORY_NULL, 0);
            break;
        }
    }
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);

    for (uint32_t k = 0; k < NTASKS; k++) {
        int done = -1;

        ck_assert_int_eq(pm_task_test(t[k], &done), PM_OK);
        ck_assert_int_eq(done, 1);
        ck_assert_int_eq(pm_task_wait(t[k]), PM_OK);
        ck_assert_int_eq(pm_task_release(t[k]), PM_OK);
    }
    ck_assert_uint_eq(adds, 20);
    for (uint32_t i = 0; i < STEP_ELEMS; i++) {
        ck_assert_uint_eq(((uint32_t *)pm_memory_data(add))[i], adds);
        ck_assert_uint_eq(((uint32_t *)pm_memory_data(aff))[i], aff_ref[i]);
    }
    for (uint32_t k = 0; k < NTASKS; k++) {
        const uint32_t *p;

        if (k % 5 != 2 && k % 5 != 3)
            continue;
        p = pm_memory_data(other[k]);
        if (k % 5 == 2)
            ck_assert_mem_eq(p, snap_ref[k], sizeof(snap_ref[k]));
        else
            for (uint32_t i = 0; i < STEP_ELEMS; i++)
                ck_assert_uint_eq(p[i], k * 1000u + i);
    }
}
END_TEST

/* More tasks in flight than the slabs of task blocks hold (a 2 MiB bound:
 * one slab of about 1,000 blocks, then blocks of malloc, freed), two
 * rounds, then pmlib started again: every round adds its tasks in full.
 * The tasks form two chains, one of tasks of one subtask, whose blocks
 * are smaller (no room for a scheduling state), between those of the
 * other; on a busy machine each link may wait for a stub's turn, hence
 * the case's longer timeout. */
#define SLAB_TASKS 1500

static void setup4(void);

START_TEST(test_task_blocks_beyond_slabs)
{
    for (int life = 0; life < 2; life++) {
        pm_memory_t m = tu_memory(STEP_ELEMS * 4), one = tu_memory(STEP_ELEMS * 4);
        static pm_task_t t[SLAB_TASKS], t1[SLAB_TASKS];

        for (int round = 1; round <= 2; round++) {
            for (uint32_t k = 0; k < SLAB_TASKS; k++) {
                t[k] = submit_step(STEP_ADD, k, m, PM_MEMORY_NULL, 0);
                t1[k] = submit_step_n(STEP_ADD, k, one, PM_MEMORY_NULL, 0, 1);
            }
            ck_assert_int_eq(pm_task_wait_all(), PM_OK);
            for (uint32_t k = 0; k < SLAB_TASKS; k++) {
                ck_assert_int_eq(pm_task_release(t[k]), PM_OK);
                ck_assert_int_eq(pm_task_release(t1[k]), PM_OK);
            }
            for (uint32_t i = 0; i < STEP_ELEMS; i++) {
                ck_assert_uint_eq(((uint32_t *)pm_memory_data(m))[i], (uint32_t)(round * SLAB_TASKS));
                ck_assert_uint_eq(((uint32_t *)pm_memory_data(one))[i], (uint32_t)(round * SLAB_TASKS));
            }
        }
        ck_assert_int_eq(pm_memory_release(m), PM_OK);
        ck_assert_int_eq(pm_memory_release(one), PM_OK);
        ck_assert_int_eq(pm_finalize(), PM_OK);
        setup4();
    }
}
END_TEST

/* Several program threads submit at once, each a chain of tasks on its own
 * memory and as many tasks without memories, then wait for all: when a
 * thread's pm_task_wait_all returns, every task it submitted before is done
 * (the count of unfinished tasks never misses one, whichever thread's
 * submit or task end moved it last). Threads record what they find
 * (tu_note); the test checks it after joining them. */
#define SUBMITTERS 4
#define SUBMITTER_TASKS 300

static atomic_int ticks;

static int tick_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    atomic_fetch_add(&ticks, 1);
    return 0;
}

typedef struct submitter {
    pm_memory_t m;
    pm_task_t chain[SUBMITTER_TASKS], lone[SUBMITTER_TASKS];
} submitter_t;

static void *submitter_main(void *arg)
{
    submitter_t *w = arg;
    step_conf_t c = {STEP_ADD, 0, STEP_ELEMS, 0};
    for (int k = 0; k < SUBMITTER_TASKS; k++) {
        pm_task_desc_t desc;
        tu_note(pm_task_desc_init(&desc) != PM_OK);
        desc.callbacks = "step";
        desc.subtasks = STEP_SUBTASKS;
        desc.conf = &c;
        desc.conf_bytes = sizeof(c);
        tu_note(pm_task_desc_add(&desc, w->m, PM_READ_WRITE) != PM_OK);
        tu_note(pm_task_submit(&desc, &w->chain[k]) != PM_OK);
        tu_note(pm_task_desc_init(&desc) != PM_OK);
        desc.callbacks = "tick";
        desc.subtasks = 1;
        tu_note(pm_task_submit(&desc, &w->lone[k]) != PM_OK);
    }
    tu_note(pm_task_wait_all() != PM_OK);
    for (int k = 0; k < SUBMITTER_TASKS; k++) {
        int done = -1;
        tu_note(pm_task_test(w->chain[k], &done) != PM_OK || done != 1);
        done = -1;
        tu_note(pm_task_test(w->lone[k], &done) != PM_OK || done != 1);
    }
    const uint32_t *x = pm_memory_data(w->m);
    for (uint32_t i = 0; i < STEP_ELEMS; i++)
        tu_note(x[i] != SUBMITTER_TASKS);
    return NULL;
}

START_TEST(test_submit_from_threads)
{
    static submitter_t w[SUBMITTERS];
    pthread_t th[SUBMITTERS];
    atomic_store(&ticks, 0);
    for (int i = 0; i < SUBMITTERS; i++)
        w[i].m = tu_memory(STEP_ELEMS * 4);
    for (int i = 0; i < SUBMITTERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, submitter_main, &w[i]), 0);
    for (int i = 0; i < SUBMITTERS; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    /* At least once each: a straggling subtask may also run as a copy
     * (design-notes.md, "Straggler copies within a host"), and what a
     * callback does outside the task's memories is not undone. */
    ck_assert_int_ge(atomic_load(&ticks), SUBMITTERS * SUBMITTER_TASKS);
    for (int i = 0; i < SUBMITTERS; i++) {
        for (int k = 0; k < SUBMITTER_TASKS; k++) {
            ck_assert_int_eq(pm_task_release(w[i].chain[k]), PM_OK);
            ck_assert_int_eq(pm_task_release(w[i].lone[k]), PM_OK);
        }
        ck_assert_int_eq(pm_memory_release(w[i].m), PM_OK);
    }
}
END_TEST

START_TEST(test_wait_all_reports_failure)
{
    pm_memory_t m[3] = {tu_memory(STEP_ELEMS * 4), tu_memory(STEP_ELEMS * 4),
                        tu_memory(STEP_ELEMS * 4)};
    pm_task_t t[3];

    t[0] = submit_step(STEP_FILL, 1, m[0], PM_MEMORY_NULL, 0);
    t[1] = submit_step(STEP_FAIL, 2, m[1], PM_MEMORY_NULL, 0);
    t[2] = submit_step(STEP_FILL, 3, m[2], PM_MEMORY_NULL, 0);
    ck_assert_int_eq(pm_task_wait_all(), PM_ECALLBACK);
    ck_assert_int_eq(pm_task_wait(t[0]), PM_OK);
    ck_assert_int_eq(pm_task_wait(t[1]), PM_ECALLBACK);
    ck_assert_int_eq(pm_task_wait(t[2]), PM_OK);
    for (uint32_t i = 0; i < STEP_ELEMS; i++)
        ck_assert_uint_eq(((uint32_t *)pm_memory_data(m[2]))[i], 3000u + i);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(pm_task_release(t[k]), PM_OK);
}
END_TEST

START_TEST(test_wait_all_nothing_submitted)
{
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);
}
END_TEST

static atomic_int finalize_runs;

static int slow_count_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    tu_sleep_us(2000);
    atomic_fetch_add(&finalize_runs, 1);
    return 0;
}

/* No teardown here: the test finalizes itself. */
START_TEST(test_finalize_waits_for_tasks)
{
    pm_task_desc_t desc;
    pm_task_t t;

    atomic_store(&finalize_runs, 0);
    tu_register("slow", NULL, slow_count_cpu);
    tu_desc(&desc, "slow", 40);
    desc.flags = PM_TASK_NO_MULTI_ASSIGN;
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_finalize(), PM_OK);
    ck_assert_int_eq(atomic_load(&finalize_runs), 40);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* pm_task_test                                                              */
/* ------------------------------------------------------------------------ */

static tu_gate_t gate;

static int gated_cpu(const pm_subtask_info_t *info)
{
    tu_note(tu_gate_wait(&gate, 3.0) != 0);
    ((uint32_t *)info->mem[0])[info->id] = (uint32_t)info->id * 5u + 1u;
    return info->id == 3 && info->conf != NULL ? 1 : 0;
}

static int one_elem_subscribe(pm_subscription_t *sub,
                              const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 4, 4);
}

/* Polls pm_task_test until the task is done; returns its status. */
static int poll_until_done(pm_task_t t)
{
    double end = tu_now() + 3.0;
    int done = 0, rc = PM_OK;

    while (tu_now() < end) {
        rc = pm_task_test(t, &done);
        if (done)
            break;
        ck_assert_int_eq(rc, PM_OK);
        tu_sleep_us(500);
    }
    ck_assert_int_eq(done, 1);
    return rc;
}

static void check_task_test(int fail)
{
    const uint64_t n = 8;
    const int marker = 1; /* any conf makes subtask 3 fail */
    pm_memory_t m = tu_memory(n * 4);
    const uint32_t *p = pm_memory_data(m);
    pm_task_desc_t desc;
    pm_task_t t;
    int done = -1, rc_before;

    tu_desc(&desc, "gated", n);
    if (fail) {
        desc.conf = &marker;
        desc.conf_bytes = sizeof(marker);
    }
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    rc_before = pm_task_test(t, &done);
    tu_gate_open(&gate);
    ck_assert_int_eq(rc_before, PM_OK);
    ck_assert_int_eq(done, 0);

    ck_assert_int_eq(poll_until_done(t), fail ? PM_ECALLBACK : PM_OK);
    /* asking again gives the same answer */
    done = -1;
    ck_assert_int_eq(pm_task_test(t, &done), fail ? PM_ECALLBACK : PM_OK);
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(pm_task_wait(t), fail ? PM_ECALLBACK : PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    for (uint64_t i = 0; i < n; i++)
        if (!fail || i != 3)
            ck_assert_uint_eq(p[i], (uint32_t)i * 5u + 1u);
}

START_TEST(test_task_test)
{
    check_task_test(0);
}
END_TEST

START_TEST(test_task_test_failed)
{
    check_task_test(1);
}
END_TEST

/* Every subtask writes all of memory 0: the subscriptions overlap. */
static atomic_int overlap_runs;

static int overlap_subscribe(pm_subscription_t *sub,
                             const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, 0, info->mem_bytes[0]);
}

static int overlap_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    atomic_fetch_add(&overlap_runs, 1);
    return 0;
}

/*
 * A task whose subscriptions fail fails in its turn: not before the task it
 * waits for, and without running or holding up the task after it. Small
 * tasks are subscribed as they are submitted, large ones once ready; the
 * loop index picks the size.
 */
START_TEST(test_bad_subscriptions_fail_in_turn)
{
    const uint64_t n = 8, bad_subtasks = _i == 0 ? 4 : 200;
    pm_memory_t m = tu_memory(STEP_ELEMS * 4);
    const uint32_t *p = pm_memory_data(m);
    pm_task_desc_t desc;
    pm_task_t a, b, c;
    int done = -1;

    atomic_store(&overlap_runs, 0);
    tu_desc(&desc, "gated", n);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &a), PM_OK);
    tu_desc(&desc, "overlap", bad_subtasks);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &b), PM_OK);
    c = submit_step(STEP_ADD, 0, m, PM_MEMORY_NULL, 0);

    ck_assert_int_eq(pm_task_test(b, &done), PM_OK);
    ck_assert_int_eq(done, 0); /* still waiting for a */
    tu_gate_open(&gate);
    ck_assert_int_eq(pm_task_wait(b), PM_EOVERLAP);
    done = 0;
    ck_assert_int_eq(pm_task_test(a, &done), PM_OK);
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(pm_task_wait(c), PM_OK);
    ck_assert_int_eq(atomic_load(&overlap_runs), 0);
    for (uint64_t i = 0; i < STEP_ELEMS; i++)
        ck_assert_uint_eq(p[i], (i < n ? (uint32_t)i * 5u + 1u : 0u) + 1u);
    ck_assert_int_eq(pm_task_release(a), PM_OK);
    ck_assert_int_eq(pm_task_release(b), PM_OK);
    ck_assert_int_eq(pm_task_release(c), PM_OK);
}
END_TEST

START_TEST(test_task_test_bad_args)
{
    pm_task_desc_t desc;
    pm_memory_t m = tu_memory(4 * 4);
    pm_task_t t;

    tu_gate_open(&gate);
    tu_desc(&desc, "gated", 4);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_test(t, NULL), PM_EINVAL);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Stats                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_stats_counts)
{
    const uint64_t n = 24;
    pm_memory_t m = tu_memory(STEP_ELEMS * 4);
    step_conf_t c = {STEP_FILL, 9, STEP_ELEMS, 100};
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;

    tu_desc(&desc, "step", n);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    desc.devices = PM_DEVICE_CPU;
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_int_eq(pm_task_stats(t, NULL), PM_EINVAL);
    ck_assert_int_eq(pm_task_release(t), PM_OK);

    ck_assert_int_eq(st.status, PM_OK);
    ck_assert_uint_eq(st.failed_subtask, UINT64_MAX);
    ck_assert_int_eq(st.failed_host, -1);
    ck_assert_uint_eq(st.subtasks, n);
    ck_assert_uint_eq(st.subtasks_cpu, n);
    ck_assert_uint_eq(st.subtasks_gpu, 0);
    ck_assert_uint_eq(st.subtasks_remote, 0);
    ck_assert_uint_eq(st.steals_remote, 0);
    ck_assert_uint_eq(st.bytes_moved, 0);
    ck_assert_uint_eq(st.bytes_sent, 0);
    ck_assert_uint_eq(st.bytes_to_gpu, 0);
    ck_assert_uint_eq(st.bytes_from_gpu, 0);
    ck_assert_int_ge(st.stubs, 1);
    ck_assert_int_le(st.stubs, 4);
    ck_assert(st.run_seconds >= 0.0);
    ck_assert(st.seconds >= st.run_seconds);
    /* 24 subtasks of 100 us on at most 4 stubs take at least 600 us */
    ck_assert(st.seconds >= 500e-6);
    for (uint32_t i = 0; i < STEP_ELEMS; i++)
        ck_assert_uint_eq(((uint32_t *)pm_memory_data(m))[i], 9000u + i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Determinism of a floating-point reduce                                    */
/* ------------------------------------------------------------------------ */

#define DET_SUBTASKS 1000
#define DET_ELEMS 4
#define DET_RUNS 10

typedef struct det_conf {
    uint32_t run;   /* shifts which subtasks are slow, to vary the schedule */
    uint32_t elems;
} det_conf_t;

static double det_value(uint64_t id, uint64_t e)
{
    uint64_t r = tu_mix(id, e + 11);
    double sign = (r >> 63) ? -1.0 : 1.0;
    double frac = (double)((r >> 12) & 0xFFFFFFFFFull) / 68719476736.0;

    return sign * ldexp(1.0 + frac, (int)(r % 81) - 40);
}

static int det_subscribe(pm_subscription_t *sub,
                         const pm_subtask_info_t *info)
{
    det_conf_t c;

    memcpy(&c, info->conf, sizeof(c));
    return pm_subscribe(sub, 0, PM_WRITE, 0, c.elems * sizeof(double));
}

static int det_cpu(const pm_subtask_info_t *info)
{
    det_conf_t c;
    double *acc = info->mem[0];

    memcpy(&c, info->conf, sizeof(c));
    if ((info->id + c.run * 7) % 50 == 0)
        tu_sleep_us(100);
    for (uint32_t e = 0; e < c.elems; e++)
        acc[e] += det_value(info->id, e);
    return 0;
}

/* Runs the sum once under `sched`; the result's bits go to `out`. */
static void det_run(uint32_t run, pm_sched_t sched, double out[DET_ELEMS])
{
    det_conf_t c = {run, DET_ELEMS};
    pm_memory_t m = tu_memory(DET_ELEMS * sizeof(double));
    pm_task_desc_t desc;
    int idx;

    tu_desc(&desc, "det", DET_SUBTASKS);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    desc.sched = sched;
    idx = tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, PM_REDUCE_SUM, PM_DOUBLE),
                     PM_OK);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    memcpy(out, pm_memory_data(m), DET_ELEMS * sizeof(double));
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}

/* Close to the serial sum in id order (any order is within this bound). */
static void det_check_close(const double got[DET_ELEMS])
{
    for (uint64_t e = 0; e < DET_ELEMS; e++) {
        double ref = 0.0, abs_sum = 0.0;

        for (uint64_t id = 0; id < DET_SUBTASKS; id++) {
            ref += det_value(id, e);
            abs_sum += fabs(det_value(id, e));
        }
        ck_assert(fabs(got[e] - ref) <=
                  2.0 * DET_SUBTASKS * DBL_EPSILON * abs_sum);
    }
}

static void check_repeatable(void)
{
    double first[DET_ELEMS], again[DET_ELEMS];

    det_run(0, PM_SCHED_DEFAULT, first);
    det_check_close(first);
    for (uint32_t run = 1; run < DET_RUNS; run++) {
        det_run(run, PM_SCHED_DEFAULT, again);
        ck_assert_msg(memcmp(first, again, sizeof(first)) == 0,
                      "run %u gave different bits than run 0", run);
    }
}

START_TEST(test_deterministic_sum_4_stubs)
{
    check_repeatable();
}
END_TEST

START_TEST(test_deterministic_sum_1_stub)
{
    int n = 0;

    ck_assert_int_eq(pm_device_count(PM_DEVICE_CPU, &n), PM_OK);
    ck_assert_int_eq(n, 1);
    check_repeatable();
}
END_TEST

/* One stub: a chain of CHAIN_TASKS tasks on one memory, the first held
 * at a gate, then an independent task. Each records its place in the
 * order the stub ran them. */
#define CHAIN_TASKS 200
#define LONE_ID CHAIN_TASKS

static tu_gate_t order_gate;
static atomic_int order_next;
static int order_of[CHAIN_TASKS + 1];

static int ordered_cpu(const pm_subtask_info_t *info)
{
    int id = *(const int *)info->conf;
    if (id == 0)
        tu_note(tu_gate_wait(&order_gate, 30) != 0);
    int at = atomic_fetch_add(&order_next, 1);
    tu_note(at > CHAIN_TASKS);
    if (at <= CHAIN_TASKS)
        order_of[at] = id;
    return 0;
}

/* A task that becomes ready in a chain does not pass a task listed before
 * it: the independent task, submitted while the chain's first task runs,
 * runs right after that task, not after the whole chain (a stub once ran
 * each task it made ready before anything listed). */
START_TEST(test_chain_does_not_pass_listed_task)
{
    pm_task_t tasks[CHAIN_TASKS + 1];
    pm_task_desc_t d;
    pm_memory_t m = tu_memory(64);

    tu_gate_close(&order_gate);
    atomic_store(&order_next, 0);
    for (int i = 0; i <= CHAIN_TASKS; i++) {
        tu_desc(&d, "ordered", 1);
        if (i < CHAIN_TASKS)
            tu_add(&d, m, PM_READ_WRITE);
        d.conf = &i;
        d.conf_bytes = sizeof i;
        ck_assert_int_eq(pm_task_submit(&d, &tasks[i]), PM_OK);
    }
    tu_gate_open(&order_gate);
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);
    ck_assert_int_eq(atomic_load(&order_next), CHAIN_TASKS + 1);
    ck_assert_int_eq(order_of[0], 0);
    int lone_at = -1, last = -1;
    for (int at = 0; at <= CHAIN_TASKS; at++) {
        if (order_of[at] == LONE_ID) {
            lone_at = at;
            continue;
        }
        ck_assert_int_gt(order_of[at], last); /* the chain in submit order */
        last = order_of[at];
    }
    ck_assert_int_ge(lone_at, 1);
    ck_assert_int_le(lone_at, 2);
    for (int i = 0; i <= CHAIN_TASKS; i++)
        ck_assert_int_eq(pm_task_release(tasks[i]), PM_OK);
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}
END_TEST

/* The merge order depends on subtask ids only, not on the policy. */
START_TEST(test_policies_same_bits)
{
    const pm_sched_t policy[] = {PM_SCHED_DEFAULT, PM_SCHED_STATIC_EQUAL,
                                 PM_SCHED_STATIC_PROPORTIONAL};
    double pull[DET_ELEMS], other[DET_ELEMS];

    det_run(0, PM_SCHED_PULL, pull);
    det_check_close(pull);
    for (size_t k = 0; k < sizeof(policy) / sizeof(policy[0]); k++) {
        det_run(1, policy[k], other);
        ck_assert_msg(memcmp(pull, other, sizeof(pull)) == 0,
                      "policy %d gave different bits than pull",
                      (int)policy[k]);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Grain, policies and uneven load: every subtask exactly once               */
/* ------------------------------------------------------------------------ */

#define ONCE_MAX 400
static atomic_int once_runs[ONCE_MAX];

typedef struct once_conf {
    uint32_t slow; /* subtasks below this id sleep 1 ms */
} once_conf_t;

static int once_cpu(const pm_subtask_info_t *info)
{
    once_conf_t c;

    memcpy(&c, info->conf, sizeof(c));
    if (info->id < c.slow)
        tu_sleep_us(1000);
    if (info->id < ONCE_MAX)
        atomic_fetch_add(&once_runs[info->id], 1);
    ((uint64_t *)info->mem[0])[info->id] = tu_mix(info->id, 3);
    return 0;
}

static int once_subscribe(pm_subscription_t *sub,
                          const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

static void check_once(uint64_t n, uint64_t grain, pm_sched_t sched,
                       uint32_t slow)
{
    once_conf_t c = {slow};
    pm_memory_t m = tu_memory(n * 8);
    const uint64_t *p = pm_memory_data(m);
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;

    ck_assert_uint_le(n, ONCE_MAX);
    for (int i = 0; i < ONCE_MAX; i++)
        atomic_store(&once_runs[i], 0);
    tu_desc(&desc, "once", n);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    desc.grain = grain;
    desc.sched = sched;
    desc.flags = PM_TASK_NO_MULTI_ASSIGN; /* runs are counted */
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);

    ck_assert_uint_eq(st.subtasks, n);
    ck_assert_uint_eq(st.multi_assigned, 0);
    /* 24 ms of sleeping subtasks: idle stubs must have helped */
    if (slow > 0 && sched == PM_SCHED_PULL)
        ck_assert_int_gt(st.stubs, 1);
    for (uint64_t id = 0; id < n; id++) {
        ck_assert_msg(atomic_load(&once_runs[id]) == 1,
                      "subtask %llu ran %d times", (unsigned long long)id,
                      atomic_load(&once_runs[id]));
        ck_assert_uint_eq(p[id], tu_mix(id, 3));
    }
}

/* _i picks the grain: 1, 7 (does not divide 100), 100, 1000 (> subtasks). */
START_TEST(test_grain_runs_each_once)
{
    const uint64_t grains[] = {1, 7, 100, 1000};

    check_once(100, grains[_i], PM_SCHED_PULL, 0);
}
END_TEST

START_TEST(test_static_equal_grain_runs_each_once)
{
    check_once(100, 7, PM_SCHED_STATIC_EQUAL, 0);
}
END_TEST

START_TEST(test_static_proportional_runs_each_once)
{
    check_once(101, 0, PM_SCHED_STATIC_PROPORTIONAL, 0);
}
END_TEST

/* The first 24 subtasks are slow: the other stubs must take over the rest. */
START_TEST(test_uneven_load_runs_each_once)
{
    check_once(ONCE_MAX, 0, PM_SCHED_PULL, 24);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void register_all(void)
{
    tu_gate_close(&gate);
    tu_register("step", step_subscribe, step_cpu);
    tu_register("gated", one_elem_subscribe, gated_cpu);
    tu_register("det", det_subscribe, det_cpu);
    tu_register("once", once_subscribe, once_cpu);
    tu_register("overlap", overlap_subscribe, overlap_cpu);
    tu_register("tick", NULL, tick_cpu);
    tu_register("ordered", NULL, ordered_cpu);
}

static void setup4(void)
{
    tu_setup_ncpu4();
    register_all();
}

static void setup_small_cache(void)
{
    ck_assert_int_eq(setenv("PMLIB_TASK_CACHE_MB", "2", 1), 0);
    setup4();
}

static void teardown_small_cache(void)
{
    tu_teardown();
    unsetenv("PMLIB_TASK_CACHE_MB");
}

static void setup1(void)
{
    tu_setup_ncpu1();
    register_all();
}

static Suite *tasks_suite(void)
{
    Suite *s = suite_create("tasks");
    TCase *flight = tcase_create("in_flight");
    TCase *fin = tcase_create("finalize");
    TCase *test = tcase_create("test_and_stats");
    TCase *det = tcase_create("determinism");
    TCase *det1 = tcase_create("determinism_one_stub");
    TCase *once = tcase_create("exactly_once");
    TCase *slabs = tcase_create("task_blocks");

    tcase_add_checked_fixture(flight, setup4, tu_teardown);
    tcase_add_checked_fixture(fin, setup4, NULL);
    tcase_add_checked_fixture(test, setup4, tu_teardown);
    tcase_add_checked_fixture(det, setup4, tu_teardown);
    tcase_add_checked_fixture(det1, setup1, tu_teardown);
    tcase_add_checked_fixture(once, setup4, tu_teardown);
    tcase_add_checked_fixture(slabs, setup_small_cache, teardown_small_cache);
    tcase_set_timeout(slabs, 60);

    tcase_add_test(flight, test_many_tasks_in_flight);
    tcase_add_test(flight, test_wait_all_reports_failure);
    tcase_add_test(flight, test_wait_all_nothing_submitted);
    tcase_add_test(flight, test_submit_from_threads);
    tcase_add_test(fin, test_finalize_waits_for_tasks);
    tcase_add_test(test, test_task_test);
    tcase_add_test(test, test_task_test_failed);
    tcase_add_test(test, test_task_test_bad_args);
    tcase_add_loop_test(test, test_bad_subscriptions_fail_in_turn, 0, 2);
    tcase_add_test(test, test_stats_counts);
    tcase_add_test(det, test_deterministic_sum_4_stubs);
    tcase_add_test(det, test_policies_same_bits);
    tcase_add_test(det1, test_deterministic_sum_1_stub);
    tcase_add_test(det1, test_chain_does_not_pass_listed_task);
    tcase_add_loop_test(once, test_grain_runs_each_once, 0, 4);
    tcase_add_test(once, test_static_equal_grain_runs_each_once);
    tcase_add_test(once, test_static_proportional_runs_each_once);
    tcase_add_test(once, test_uneven_load_runs_each_once);
    tcase_add_test(slabs, test_task_blocks_beyond_slabs);

    suite_add_tcase(s, flight);
    suite_add_tcase(s, fin);
    suite_add_tcase(s, test);
    suite_add_tcase(s, det);
    suite_add_tcase(s, det1);
    suite_add_tcase(s, once);
    suite_add_tcase(s, slabs);
    return s;
}

int main(void)
{
    return tu_run_suite(tasks_suite());
}
