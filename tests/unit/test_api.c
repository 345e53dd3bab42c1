/*
 * Proves that bad input to the public API is answered with the exact
 * documented error code, never a crash or a hang:
 * - every call before pm_init (and after pm_finalize) returns PM_ENOTINIT,
 *   a second pm_init returns PM_EINIT;
 * - pm_strerror/pm_errname cover every code of PM_ERROR_LIST and unknown codes;
 * - callback registration and task descriptors reject bad input;
 * - errors found while subscribing (bad memory index, out of bounds,
 *   overlapping writes, access not allowed) fail the task with that code;
 * - a failing CPU callback fails the task with PM_ECALLBACK, names the
 *   subtask in the stats and leaves the other subtasks' outputs in place;
 * - released handles answer PM_EBADHANDLE, objects in use answer PM_EBUSY;
 * - memory versions start at 1 and move only when the memory is written.
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                 */
/* ------------------------------------------------------------------------ */

/* What the "probe" subscribe callback does wrong, chosen by the conf blob. */
enum probe_kind {
    PROBE_BAD_INDEX,     /* memory index 3 of a 1-memory task */
    PROBE_NEG_INDEX,     /* memory index -1 */
    PROBE_RANGE,         /* 8 bytes straddling the end */
    PROBE_RANGE_WRAP,    /* offset + length wraps around SIZE_MAX */
    PROBE_STRIDED_RANGE, /* the last block of a strided range leaves */
    PROBE_WRITE_ON_READ, /* PM_WRITE on a memory added with PM_READ */
    PROBE_RW_ON_READ,    /* PM_READ_WRITE on a memory added with PM_READ */
    PROBE_FAIL_PLAIN     /* no bad subscription; the callback returns 1 */
};

typedef struct probe_conf {
    int kind;
    int propagate;       /* return pm_subscribe's error (1) or 0 (0) */
    uint64_t bad_subtask; /* the one subtask that does the bad thing */
} probe_conf_t;

static atomic_int probe_rc;   /* what pm_subscribe answered the bad call */
static atomic_int cpu_calls;  /* CPU callbacks run */

static int probe_bad_call(pm_subscription_t *sub, const probe_conf_t *c,
                          size_t bytes)
{
    switch (c->kind) {
    case PROBE_BAD_INDEX:
        return pm_subscribe(sub, 3, PM_READ, 0, 4);
    case PROBE_NEG_INDEX:
        return pm_subscribe(sub, -1, PM_READ, 0, 4);
    case PROBE_RANGE:
        return pm_subscribe(sub, 0, PM_READ, bytes - 4, 8);
    case PROBE_RANGE_WRAP:
        return pm_subscribe(sub, 0, PM_READ, SIZE_MAX - 2, 8);
    case PROBE_STRIDED_RANGE:
        /* blocks at 0, 16, ..., 16 * (count - 1); the last one ends past */
        return pm_subscribe_strided(sub, 0, PM_READ, 0, 8, 16,
                                    bytes / 16 + 1);
    case PROBE_WRITE_ON_READ:
        return pm_subscribe(sub, 0, PM_WRITE, 0, 4);
    case PROBE_RW_ON_READ:
        return pm_subscribe(sub, 0, PM_READ_WRITE, 0, 4);
    default:
        return 0;
    }
}

static int probe_subscribe(pm_subscription_t *sub,
                           const pm_subtask_info_t *info)
{
    probe_conf_t conf;
    const probe_conf_t *c = &conf;
    int rc;

    /* the blob carries no alignment promise: copy it out */
    memcpy(&conf, info->conf, sizeof(conf));
    /* every subtask reads its own 4 bytes legally */
    if (pm_subscribe(sub, 0, PM_READ, (info->id * 4) % info->mem_bytes[0],
                     4) != PM_OK)
        tu_note(1);
    if (info->id != c->bad_subtask)
        return 0;
    if (c->kind == PROBE_FAIL_PLAIN)
        return 1;
    rc = probe_bad_call(sub, c, info->mem_bytes[0]);
    atomic_store(&probe_rc, rc);
    return c->propagate ? rc : 0;
}

static int count_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    atomic_fetch_add(&cpu_calls, 1);
    return 0;
}

/* Writes bytes [id * 48, id * 48 + 64): neighbours overlap by 16 bytes. */
static int overlap_subscribe(pm_subscription_t *sub,
                             const pm_subtask_info_t *info)
{
    pm_access_t a = (info->id % 2) ? PM_READ_WRITE : PM_WRITE;

    return pm_subscribe(sub, 0, a, info->id * 48, 64);
}

static int overlap_cpu(const pm_subtask_info_t *info)
{
    memset((char *)info->mem[0] + info->id * 48, 0xFF, 64);
    atomic_fetch_add(&cpu_calls, 1);
    return 0;
}

/* Slots of 8 int32 per subtask in memory 0. */
#define SLOT 8

static int slot_subscribe(pm_subscription_t *sub,
                          const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * SLOT * sizeof(int32_t),
                        SLOT * sizeof(int32_t));
}

/* The conf holds the failing subtask ids, ending with UINT64_MAX. */
static int failing_cpu(const pm_subtask_info_t *info)
{
    const char *conf = info->conf;
    int32_t *out = (int32_t *)info->mem[0];
    uint64_t fail;

    for (int e = 0; e < SLOT; e++)
        out[info->id * SLOT + e] = (int32_t)(info->id * 100 + e + 1);
    for (size_t k = 0; k < info->conf_bytes / sizeof(fail); k++) {
        memcpy(&fail, conf + k * sizeof(fail), sizeof(fail));
        if (fail == info->id)
            return 7;
    }
    return 0;
}

static tu_gate_t gate;

/* Writes slot `id` once the test opens the gate. */
static int gated_cpu(const pm_subtask_info_t *info)
{
    tu_note(tu_gate_wait(&gate, 3.0) != 0);
    ((int32_t *)info->mem[0])[info->id * SLOT] = 1;
    return 0;
}

static atomic_int redistribute_rc;

static int redistribute_cpu(const pm_subtask_info_t *info)
{
    uint64_t v = info->id;

    /* Keys in reverse id order: the gathered memory must come out reversed. */
    atomic_store(&redistribute_rc, pm_redistribute(info, info->count - info->id, &v,
                                                   sizeof(v)));
    return 0;
}

static int dummy_cuda(const pm_subtask_info_t *info, void *stream)
{
    (void)info;
    (void)stream;
    return 0;
}

static void setup(void)
{
    tu_setup_ncpu4();
    atomic_store(&probe_rc, 1);
    atomic_store(&cpu_calls, 0);
    atomic_store(&redistribute_rc, 1);
    tu_gate_close(&gate);
    tu_register("probe", probe_subscribe, count_cpu);
    tu_register("overlap", overlap_subscribe, overlap_cpu);
    tu_register("failing", slot_subscribe, failing_cpu);
    tu_register("gated", slot_subscribe, gated_cpu);
    tu_register("count", NULL, count_cpu);
    tu_register("redistribute", NULL, redistribute_cpu);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

/* Every stateful call answers PM_ENOTINIT; pure helpers still work. */
static void assert_not_initialized(void)
{
    pm_memory_t m = {1};
    pm_task_t t = {1};
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_callbacks_t cb;
    size_t bytes;
    uint64_t version;
    int n, done;

    ck_assert_int_eq(pm_finalize(), PM_ENOTINIT);
    ck_assert_int_eq(pm_host_id(), -1);
    ck_assert_int_eq(pm_host_count(), 0);
    ck_assert_int_eq(pm_device_count(PM_DEVICE_ANY, &n), PM_ENOTINIT);
    ck_assert_int_eq(pm_memory_create(64, &m), PM_ENOTINIT);
    ck_assert_ptr_null(pm_memory_data(m));
    ck_assert_int_eq(pm_memory_size(m, &bytes), PM_ENOTINIT);
    ck_assert_int_eq(pm_memory_version(m, &version), PM_ENOTINIT);
    ck_assert_int_eq(pm_memory_touch(m), PM_ENOTINIT);
    ck_assert_int_eq(pm_memory_release(m), PM_ENOTINIT);

    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.cpu = count_cpu;
    ck_assert_int_eq(pm_callbacks_register("count", &cb), PM_ENOTINIT);

    ck_assert_int_eq(pm_task_desc_init(&desc), PM_OK);
    desc.callbacks = "count";
    desc.subtasks = 4;
    /* A descriptor is plain data: it is filled and checked without pmlib. */
    ck_assert_int_eq(pm_task_desc_add(&desc, m, PM_WRITE), 0);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, 0, PM_REDUCE_SUM, PM_DOUBLE), PM_OK);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, 0, PM_REDUCE_BAND, PM_DOUBLE), PM_ETYPE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_ENOTINIT);
    ck_assert_int_eq(pm_task_test(t, &done), PM_ENOTINIT);
    ck_assert_int_eq(pm_task_wait(t), PM_ENOTINIT);
    ck_assert_int_eq(pm_task_wait_all(), PM_ENOTINIT);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_ENOTINIT);
    ck_assert_int_eq(pm_task_release(t), PM_ENOTINIT);

    ck_assert_ptr_nonnull(pm_version());
    ck_assert_str_eq(pm_errname(PM_ENOTINIT), "PM_ENOTINIT");
    ck_assert_uint_eq(pm_type_size(PM_DOUBLE), sizeof(double));
}

START_TEST(test_calls_before_init)
{
    assert_not_initialized();
}
END_TEST

START_TEST(test_calls_after_finalize)
{
    pm_memory_t m;

    ck_assert_int_eq(setenv("PMLIB_NCPU", "4", 1), 0);
    ck_assert_int_eq(pm_init(NULL, NULL), PM_OK);
    ck_assert_int_eq(pm_memory_create(64, &m), PM_OK);
    ck_assert_int_eq(pm_finalize(), PM_OK);
    assert_not_initialized();
}
END_TEST

START_TEST(test_init_twice)
{
    ck_assert_int_eq(pm_init(NULL, NULL), PM_EINIT);
    /* the first init is unharmed */
    ck_assert_int_eq(pm_host_id(), 0);
    ck_assert_int_eq(pm_host_count(), 1);
}
END_TEST

START_TEST(test_single_host_identity)
{
    int n = -1;

    ck_assert_int_eq(pm_host_id(), 0);
    ck_assert_int_eq(pm_host_count(), 1);
    ck_assert_int_eq(pm_device_count(PM_DEVICE_CPU, &n), PM_OK);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(pm_device_count(PM_DEVICE_CPU, NULL), PM_EINVAL);
}
END_TEST

START_TEST(test_version)
{
    char expect[64];

    snprintf(expect, sizeof(expect), "%d.%d.%d", PMLIB_VERSION_MAJOR,
             PMLIB_VERSION_MINOR, PMLIB_VERSION_PATCH);
    ck_assert_str_eq(pm_version(), expect);
    ck_assert_int_eq(PMLIB_VERSION,
                     PMLIB_VERSION_MAJOR * 10000 + PMLIB_VERSION_MINOR * 100 +
                         PMLIB_VERSION_PATCH);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Error names and messages                                                  */
/* ------------------------------------------------------------------------ */

typedef struct err_entry {
    int code;
    const char *name;
    const char *msg;
} err_entry_t;

#define ERR_ENTRY(name, value, msg) {PM_##name, "PM_" #name, msg},
static const err_entry_t all_errors[] = {PM_ERROR_LIST(ERR_ENTRY)};
#undef ERR_ENTRY
#define NERRORS ((int)(sizeof(all_errors) / sizeof(all_errors[0])))

START_TEST(test_error_names)
{
    for (int i = 0; i < NERRORS; i++) {
        const char *name = pm_errname(all_errors[i].code);
        const char *msg = pm_strerror(all_errors[i].code);

        ck_assert_int_lt(all_errors[i].code, 0);
        ck_assert_ptr_nonnull(name);
        ck_assert_ptr_nonnull(msg);
        ck_assert_str_eq(name, all_errors[i].name);
        ck_assert_str_eq(msg, all_errors[i].msg);
        for (int j = 0; j < i; j++) {
            ck_assert_int_ne(all_errors[j].code, all_errors[i].code);
            ck_assert_str_ne(pm_errname(all_errors[j].code), name);
        }
    }
    ck_assert_str_eq(pm_strerror(PM_OK), "success");
    ck_assert_ptr_nonnull(pm_errname(PM_OK));
}
END_TEST

/* Unknown codes get a non-NULL text that is no known code's name. */
START_TEST(test_error_unknown)
{
    const int unknown[] = {1, 42, -99, -1000, INT_MIN, INT_MAX};

    for (size_t u = 0; u < sizeof(unknown) / sizeof(unknown[0]); u++) {
        const char *name = pm_errname(unknown[u]);

        ck_assert_ptr_nonnull(name);
        ck_assert_ptr_nonnull(pm_strerror(unknown[u]));
        for (int i = 0; i < NERRORS; i++)
            ck_assert_str_ne(name, all_errors[i].name);
    }
}
END_TEST

START_TEST(test_type_size)
{
    ck_assert_uint_eq(pm_type_size(PM_INT32), 4);
    ck_assert_uint_eq(pm_type_size(PM_INT64), 8);
    ck_assert_uint_eq(pm_type_size(PM_UINT32), 4);
    ck_assert_uint_eq(pm_type_size(PM_UINT64), 8);
    ck_assert_uint_eq(pm_type_size(PM_FLOAT), 4);
    ck_assert_uint_eq(pm_type_size(PM_DOUBLE), 8);
    ck_assert_uint_eq(pm_type_size(PM_TYPE_NONE), 0);
    ck_assert_uint_eq(pm_type_size((pm_type_t)99), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Registration and descriptors                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_submit_null_callbacks_name)
{
    pm_task_desc_t desc;
    pm_task_t t;

    tu_desc(&desc, NULL, 4);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_EINVAL);
    ck_assert_int_eq(pm_task_submit(NULL, &t), PM_EINVAL);
    tu_desc(&desc, "count", 4);
    ck_assert_int_eq(pm_task_submit(&desc, NULL), PM_EINVAL);
}
END_TEST

START_TEST(test_submit_unknown_callbacks)
{
    pm_task_desc_t desc;
    pm_task_t t;

    tu_desc(&desc, "no-such-callbacks", 4);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_ENOCALLBACK);
    ck_assert_int_eq(atomic_load(&cpu_calls), 0);
}
END_TEST

START_TEST(test_register_twice)
{
    pm_callbacks_t cb;

    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.cpu = count_cpu;
    ck_assert_int_eq(pm_callbacks_register("twice", &cb), PM_OK);
    ck_assert_int_eq(pm_callbacks_register("twice", &cb), PM_EEXIST);
    /* also when the set differs: names are unique */
    cb.subscribe = probe_subscribe;
    ck_assert_int_eq(pm_callbacks_register("twice", &cb), PM_EEXIST);
}
END_TEST

START_TEST(test_register_without_cpu_or_cuda)
{
    pm_callbacks_t cb;

    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.subscribe = probe_subscribe;
    ck_assert_int_eq(pm_callbacks_register("empty", &cb), PM_EINVAL);
    /* the failed name stays free */
    cb.cpu = count_cpu;
    ck_assert_int_eq(pm_callbacks_register("empty", &cb), PM_OK);
}
END_TEST

START_TEST(test_register_bad_arguments)
{
    pm_callbacks_t cb;
    char name[80];

    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.cpu = count_cpu;
    ck_assert_int_eq(pm_callbacks_register(NULL, &cb), PM_EINVAL);
    ck_assert_int_eq(pm_callbacks_register("nullset", NULL), PM_EINVAL);
    /* 63 bytes is the longest name */
    memset(name, 'a', 63);
    name[63] = '\0';
    ck_assert_int_eq(pm_callbacks_register(name, &cb), PM_OK);
    memset(name, 'b', 64);
    name[64] = '\0';
    ck_assert_int_eq(pm_callbacks_register(name, &cb), PM_EINVAL);
}
END_TEST

START_TEST(test_zero_subtasks)
{
    pm_task_desc_t desc;
    pm_task_t t;

    tu_desc(&desc, "count", 0);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_EINVAL);
    ck_assert_int_eq(atomic_load(&cpu_calls), 0);
}
END_TEST

START_TEST(test_too_many_memories)
{
    pm_memory_t m[PM_MAX_TASK_MEMORIES + 1];
    pm_task_desc_t desc;

    tu_desc(&desc, "count", 1);
    desc.flags = PM_TASK_NO_MULTI_ASSIGN; /* counted below */
    for (int i = 0; i <= PM_MAX_TASK_MEMORIES; i++)
        m[i] = tu_memory(64);
    for (int i = 0; i < PM_MAX_TASK_MEMORIES; i++)
        ck_assert_int_eq(pm_task_desc_add(&desc, m[i], PM_READ), i);
    ck_assert_int_eq(pm_task_desc_add(&desc, m[PM_MAX_TASK_MEMORIES], PM_READ),
                     PM_ETOOMANY);
    ck_assert_int_eq(desc.nmem, PM_MAX_TASK_MEMORIES);
    /* the full descriptor is still a valid task */
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(atomic_load(&cpu_calls), 1);
}
END_TEST

START_TEST(test_bitwise_reduce_on_float)
{
    const pm_reduce_op_t bitwise[] = {PM_REDUCE_BAND, PM_REDUCE_BOR,
                                      PM_REDUCE_BXOR};
    pm_task_desc_t desc;
    pm_memory_t m = tu_memory(64);
    int idx;

    tu_desc(&desc, "count", 1);
    idx = tu_add(&desc, m, PM_WRITE);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, bitwise[i], PM_FLOAT),
                         PM_ETYPE);
        ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, bitwise[i], PM_DOUBLE),
                         PM_ETYPE);
        ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, bitwise[i], PM_INT32),
                         PM_OK);
    }
    ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, PM_REDUCE_SUM, PM_FLOAT),
                     PM_OK);
}
END_TEST

START_TEST(test_reduce_bad_index)
{
    pm_task_desc_t desc;
    pm_memory_t m = tu_memory(64);

    tu_desc(&desc, "count", 1);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, 1, PM_REDUCE_SUM, PM_INT32),
                     PM_EINVAL);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, -1, PM_REDUCE_SUM, PM_INT32),
                     PM_EINVAL);
}
END_TEST

START_TEST(test_memory_create_bad)
{
    pm_memory_t m = PM_MEMORY_NULL;

    ck_assert_int_eq(pm_memory_create(0, &m), PM_EINVAL);
    ck_assert_int_eq(pm_memory_create(64, NULL), PM_EINVAL);
}
END_TEST

START_TEST(test_memory_basics)
{
    pm_memory_t m = tu_memory(1000);
    size_t bytes = 0;
    unsigned char *p = pm_memory_data(m);

    ck_assert_int_eq(pm_memory_size(m, &bytes), PM_OK);
    ck_assert_uint_eq(bytes, 1000);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    for (size_t i = 0; i < bytes; i++)
        ck_assert_uint_eq(p[i], 0);
    ck_assert_int_eq(pm_memory_size(m, NULL), PM_EINVAL);
}
END_TEST

START_TEST(test_redistribute_gathers_by_key)
{
    pm_task_desc_t desc;
    pm_task_t t;
    pm_memory_t out;
    size_t bytes;

    tu_desc(&desc, "redistribute", 3);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(atomic_load(&redistribute_rc), PM_OK);
    ck_assert_int_eq(pm_task_redistributed(t, &out), PM_OK);
    ck_assert_int_eq(pm_memory_size(out, &bytes), PM_OK);
    ck_assert_uint_eq(bytes, 3 * sizeof(uint64_t));
    const uint64_t *v = pm_memory_data(out);
    ck_assert_uint_eq(v[0], 2);
    ck_assert_uint_eq(v[1], 1);
    ck_assert_uint_eq(v[2], 0);
    ck_assert_int_eq(pm_memory_release(out), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_int_eq(pm_redistribute(NULL, 0, &bytes, 1), PM_EINVAL);
}
END_TEST

/*
 * A cuda-only set must register (other hosts may have GPUs) but a task of it
 * that no device can run fails with PM_ENODEVICE, either at submit or as the
 * task's status.
 */
static int submit_status(const pm_task_desc_t *desc)
{
    pm_task_t t = PM_TASK_NULL;
    int rc = pm_task_submit(desc, &t);

    if (rc != PM_OK)
        return rc;
    rc = pm_task_wait(t);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    return rc;
}

START_TEST(test_cuda_only_no_device)
{
    pm_callbacks_t cb;
    pm_task_desc_t desc;
    int ngpu = -1;

    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.cuda = dummy_cuda;
    ck_assert_int_eq(pm_callbacks_register("cuda-only", &cb), PM_OK);

    /* CPU stubs only: no device can run it on any machine */
    tu_desc(&desc, "cuda-only", 4);
    desc.devices = PM_DEVICE_CPU;
    ck_assert_int_eq(submit_status(&desc), PM_ENODEVICE);

    /* all devices allowed, on a machine without GPUs */
    ck_assert_int_eq(pm_device_count(PM_DEVICE_GPU, &ngpu), PM_OK);
    if (ngpu == 0) {
        tu_desc(&desc, "cuda-only", 4);
        ck_assert_int_eq(submit_status(&desc), PM_ENODEVICE);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Errors found at subscribe time                                            */
/* ------------------------------------------------------------------------ */

/*
 * Runs the probe set on a 64-byte memory with the bad call in subtask 2 of
 * 8 and returns the task's status; checks what pm_subscribe answered and
 * that the stats name subtask 2.
 */
static int run_probe(int kind, int propagate, pm_access_t mode,
                     int expect_sub_rc)
{
    probe_conf_t c = {kind, propagate, 2};
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;
    pm_memory_t m = tu_memory(64);
    int rc;

    tu_desc(&desc, "probe", 8);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    tu_add(&desc, m, mode);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    rc = pm_task_wait(t);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_int_eq(st.status, rc);
    if (rc != PM_OK) {
        ck_assert_uint_eq(st.failed_subtask, 2);
        ck_assert_int_eq(st.failed_host, 0);
    }
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    if (kind != PROBE_FAIL_PLAIN)
        ck_assert_int_eq(atomic_load(&probe_rc), expect_sub_rc);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
    return rc;
}

START_TEST(test_subscribe_bad_index_propagated)
{
    ck_assert_int_eq(run_probe(PROBE_BAD_INDEX, 1, PM_READ, PM_EINVAL),
                     PM_EINVAL);
}
END_TEST

/* The runtime records the error even when the callback ignores it. */
START_TEST(test_subscribe_bad_index_ignored)
{
    ck_assert_int_eq(run_probe(PROBE_BAD_INDEX, 0, PM_READ, PM_EINVAL),
                     PM_EINVAL);
}
END_TEST

START_TEST(test_subscribe_negative_index)
{
    ck_assert_int_eq(run_probe(PROBE_NEG_INDEX, 0, PM_READ, PM_EINVAL),
                     PM_EINVAL);
}
END_TEST

START_TEST(test_subscribe_out_of_range)
{
    ck_assert_int_eq(run_probe(PROBE_RANGE, 1, PM_READ, PM_ERANGE), PM_ERANGE);
}
END_TEST

START_TEST(test_subscribe_out_of_range_ignored)
{
    ck_assert_int_eq(run_probe(PROBE_RANGE, 0, PM_READ, PM_ERANGE), PM_ERANGE);
}
END_TEST

START_TEST(test_subscribe_range_wraps)
{
    ck_assert_int_eq(run_probe(PROBE_RANGE_WRAP, 0, PM_READ, PM_ERANGE),
                     PM_ERANGE);
}
END_TEST

START_TEST(test_subscribe_strided_out_of_range)
{
    ck_assert_int_eq(run_probe(PROBE_STRIDED_RANGE, 0, PM_READ, PM_ERANGE),
                     PM_ERANGE);
}
END_TEST

START_TEST(test_subscribe_write_on_read_memory)
{
    ck_assert_int_eq(run_probe(PROBE_WRITE_ON_READ, 1, PM_READ, PM_EACCESS),
                     PM_EACCESS);
}
END_TEST

START_TEST(test_subscribe_write_on_read_memory_ignored)
{
    ck_assert_int_eq(run_probe(PROBE_RW_ON_READ, 0, PM_READ, PM_EACCESS),
                     PM_EACCESS);
}
END_TEST

/* A subscribe callback failing without a pmlib error is a callback error. */
START_TEST(test_subscribe_callback_fails)
{
    ck_assert_int_eq(run_probe(PROBE_FAIL_PLAIN, 1, PM_READ, 0), PM_ECALLBACK);
}
END_TEST

/* The same subscriptions are fine when the memory allows them. */
START_TEST(test_subscribe_write_allowed)
{
    ck_assert_int_eq(run_probe(PROBE_WRITE_ON_READ, 1, PM_READ_WRITE, PM_OK),
                     PM_OK);
}
END_TEST

START_TEST(test_overlapping_writes)
{
    pm_memory_t m = tu_memory(4 * 48 + 16);
    unsigned char *p = pm_memory_data(m);
    pm_task_desc_t desc;
    uint64_t v0, v1;
    size_t n = 4 * 48 + 16;

    memset(p, 0xA5, n);
    ck_assert_int_eq(pm_memory_touch(m), PM_OK);
    ck_assert_int_eq(pm_memory_version(m, &v0), PM_OK);
    tu_desc(&desc, "overlap", 4);
    tu_add(&desc, m, PM_READ_WRITE);
    ck_assert_int_eq(tu_run(&desc), PM_EOVERLAP);
    ck_assert_int_eq(atomic_load(&cpu_calls), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(p[i], 0xA5);
    ck_assert_int_eq(pm_memory_version(m, &v1), PM_OK);
    ck_assert_uint_eq(v1, v0); /* nothing ran, nothing changed */
}
END_TEST

/* Overlapping writes are fine on a reduced memory. */
START_TEST(test_overlapping_writes_with_reduce)
{
    pm_memory_t m = tu_memory(4 * 48 + 16);
    const unsigned char *p = pm_memory_data(m);
    pm_task_desc_t desc;
    int idx;

    tu_desc(&desc, "overlap", 4);
    desc.flags = PM_TASK_NO_MULTI_ASSIGN; /* counted below */
    idx = tu_add(&desc, m, PM_READ_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, PM_REDUCE_BOR, PM_UINT32),
                     PM_OK);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(atomic_load(&cpu_calls), 4);
    for (size_t i = 0; i < 4 * 48 + 16; i++)
        ck_assert_uint_eq(p[i], 0xFF);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Callback failure                                                          */
/* ------------------------------------------------------------------------ */

static void check_failed_task(const uint64_t *fail, uint64_t expect_first)
{
    const uint64_t n = 16;
    pm_memory_t m = tu_memory(n * SLOT * sizeof(int32_t));
    int32_t *out = pm_memory_data(m);
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;
    size_t nfail = 0;

    while (fail[nfail] != UINT64_MAX)
        nfail++;
    tu_desc(&desc, "failing", n);
    desc.conf = fail;
    desc.conf_bytes = (nfail + 1) * sizeof(uint64_t);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_ECALLBACK);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_int_eq(st.status, PM_ECALLBACK);
    ck_assert_uint_eq(st.failed_subtask, expect_first);
    ck_assert_int_eq(st.failed_host, 0);
    /* waiting again gives the same status */
    ck_assert_int_eq(pm_task_wait(t), PM_ECALLBACK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);

    for (uint64_t id = 0; id < n; id++) {
        int failed = 0;

        for (size_t k = 0; k < nfail; k++)
            failed |= fail[k] == id;
        if (failed)
            continue; /* what a failed subtask wrote is unspecified */
        for (int e = 0; e < SLOT; e++)
            ck_assert_int_eq(out[id * SLOT + e], (int32_t)(id * 100 + e + 1));
    }
}

START_TEST(test_cpu_callback_fails)
{
    const uint64_t fail[] = {5, UINT64_MAX};

    check_failed_task(fail, 5);
}
END_TEST

/* "First failing subtask" is the lowest id, whatever ran first. */
START_TEST(test_cpu_callback_fails_several)
{
    const uint64_t fail[] = {13, 9, 3, UINT64_MAX};

    check_failed_task(fail, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Released handles                                                          */
/* ------------------------------------------------------------------------ */

START_TEST(test_memory_use_after_release)
{
    pm_memory_t m = tu_memory(64), other = tu_memory(64);
    pm_task_desc_t desc;
    pm_task_t t;
    size_t bytes;
    uint64_t v;

    tu_desc(&desc, "count", 1);
    tu_add(&desc, m, PM_READ);
    ck_assert_int_eq(pm_memory_release(m), PM_OK);

    ck_assert_ptr_null(pm_memory_data(m));
    ck_assert_int_eq(pm_memory_size(m, &bytes), PM_EBADHANDLE);
    ck_assert_int_eq(pm_memory_version(m, &v), PM_EBADHANDLE);
    ck_assert_int_eq(pm_memory_touch(m), PM_EBADHANDLE);
    ck_assert_int_eq(pm_memory_release(m), PM_EBADHANDLE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_EBADHANDLE);
    ck_assert_int_eq(atomic_load(&cpu_calls), 0);

    /* a handle never handed out, and the null handle */
    ck_assert_ptr_null(pm_memory_data(PM_MEMORY_NULL));
    ck_assert_int_eq(pm_memory_size(PM_MEMORY_NULL, &bytes), PM_EBADHANDLE);
    ck_assert_int_eq(pm_memory_release((pm_memory_t){other.id + 1000}),
                     PM_EBADHANDLE);
    /* the other memory is unharmed */
    ck_assert_int_eq(pm_memory_size(other, &bytes), PM_OK);
    ck_assert_uint_eq(bytes, 64);
}
END_TEST

START_TEST(test_task_use_after_release)
{
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;
    int done;

    tu_desc(&desc, "count", 4);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);

    ck_assert_int_eq(pm_task_wait(t), PM_EBADHANDLE);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_EBADHANDLE);
    ck_assert_int_eq(pm_task_release(t), PM_EBADHANDLE);
    ck_assert_int_eq(pm_task_test(t, &done), PM_EBADHANDLE);
    ck_assert_int_eq(pm_task_wait(PM_TASK_NULL), PM_EBADHANDLE);
    ck_assert_int_eq(pm_task_release((pm_task_t){t.id + 1000}),
                     PM_EBADHANDLE);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Objects in use                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_busy_while_task_runs)
{
    const uint64_t n = 6;
    pm_memory_t m = tu_memory(n * SLOT * sizeof(int32_t));
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;
    int rc_release, rc_touch, rc_trelease, rc_stats, rc_test, done = -1;

    tu_desc(&desc, "gated", n);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);

    /* collect first, open the gate, then assert: a failure must not hang */
    rc_release = pm_memory_release(m);
    rc_touch = pm_memory_touch(m);
    rc_trelease = pm_task_release(t);
    rc_stats = pm_task_stats(t, &st);
    rc_test = pm_task_test(t, &done);
    tu_gate_open(&gate);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);

    ck_assert_int_eq(rc_release, PM_EBUSY);
    ck_assert_int_eq(rc_touch, PM_EBUSY);
    ck_assert_int_eq(rc_trelease, PM_EBUSY);
    ck_assert_int_eq(rc_stats, PM_EBUSY);
    ck_assert_int_eq(rc_test, PM_OK);
    ck_assert_int_eq(done, 0);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);

    /* finished: everything is allowed again */
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_int_eq(pm_memory_touch(m), PM_OK);
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_memory_versions)
{
    pm_memory_t m = tu_memory(8 * SLOT * sizeof(int32_t));
    pm_task_desc_t desc;
    uint64_t v0, v1, v2, v3;

    ck_assert_int_eq(pm_memory_version(m, &v0), PM_OK);
    ck_assert_uint_eq(v0, 1);
    ck_assert_int_eq(pm_memory_version(m, NULL), PM_EINVAL);

    /* a task that writes it */
    tu_gate_open(&gate);
    tu_desc(&desc, "gated", 8);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(pm_memory_version(m, &v1), PM_OK);
    ck_assert_uint_gt(v1, v0);

    /* a task that only reads it */
    tu_desc(&desc, "probe", 8);
    tu_add(&desc, m, PM_READ);
    {
        probe_conf_t c = {PROBE_FAIL_PLAIN, 0, UINT64_MAX};

        desc.conf = &c;
        desc.conf_bytes = sizeof(c);
        ck_assert_int_eq(tu_run(&desc), PM_OK);
    }
    ck_assert_int_eq(pm_memory_version(m, &v2), PM_OK);
    ck_assert_uint_eq(v2, v1);

    /* the program says it wrote it */
    ck_assert_int_eq(pm_memory_touch(m), PM_OK);
    ck_assert_int_eq(pm_memory_version(m, &v3), PM_OK);
    ck_assert_uint_gt(v3, v2);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *noinit = tcase_create("not_initialized");
    TCase *life = tcase_create("lifecycle");
    TCase *err = tcase_create("errors");
    TCase *reg = tcase_create("registration");
    TCase *sub = tcase_create("subscribe_errors");
    TCase *fail = tcase_create("callback_failure");
    TCase *handles = tcase_create("handles");
    TCase *ver = tcase_create("versions");

    /* these must run without pmlib started */
    tcase_add_test(noinit, test_calls_before_init);
    tcase_add_test(noinit, test_calls_after_finalize);

    TCase *with_init[] = {life, err, reg, sub, fail, handles, ver};
    for (size_t i = 0; i < sizeof(with_init) / sizeof(with_init[0]); i++)
        tcase_add_checked_fixture(with_init[i], setup, tu_teardown);

    tcase_add_test(life, test_init_twice);
    tcase_add_test(life, test_single_host_identity);
    tcase_add_test(life, test_version);

    tcase_add_test(err, test_error_names);
    tcase_add_test(err, test_error_unknown);
    tcase_add_test(err, test_type_size);

    tcase_add_test(reg, test_submit_null_callbacks_name);
    tcase_add_test(reg, test_submit_unknown_callbacks);
    tcase_add_test(reg, test_register_twice);
    tcase_add_test(reg, test_register_without_cpu_or_cuda);
    tcase_add_test(reg, test_register_bad_arguments);
    tcase_add_test(reg, test_zero_subtasks);
    tcase_add_test(reg, test_too_many_memories);
    tcase_add_test(reg, test_bitwise_reduce_on_float);
    tcase_add_test(reg, test_reduce_bad_index);
    tcase_add_test(reg, test_memory_create_bad);
    tcase_add_test(reg, test_memory_basics);
    tcase_add_test(reg, test_redistribute_gathers_by_key);
    tcase_add_test(reg, test_cuda_only_no_device);

    tcase_add_test(sub, test_subscribe_bad_index_propagated);
    tcase_add_test(sub, test_subscribe_bad_index_ignored);
    tcase_add_test(sub, test_subscribe_negative_index);
    tcase_add_test(sub, test_subscribe_out_of_range);
    tcase_add_test(sub, test_subscribe_out_of_range_ignored);
    tcase_add_test(sub, test_subscribe_range_wraps);
    tcase_add_test(sub, test_subscribe_strided_out_of_range);
    tcase_add_test(sub, test_subscribe_write_on_read_memory);
    tcase_add_test(sub, test_subscribe_write_on_read_memory_ignored);
    tcase_add_test(sub, test_subscribe_callback_fails);
    tcase_add_test(sub, test_subscribe_write_allowed);
    tcase_add_test(sub, test_overlapping_writes);
    tcase_add_test(sub, test_overlapping_writes_with_reduce);

    tcase_add_test(fail, test_cpu_callback_fails);
    tcase_add_test(fail, test_cpu_callback_fails_several);

    tcase_add_test(handles, test_memory_use_after_release);
    tcase_add_test(handles, test_task_use_after_release);
    tcase_add_test(handles, test_busy_while_task_runs);

    tcase_add_test(ver, test_memory_versions);

    suite_add_tcase(s, noinit);
    for (size_t i = 0; i < sizeof(with_init) / sizeof(with_init[0]); i++)
        suite_add_tcase(s, with_init[i]);
    return s;
}

int main(void)
{
    return tu_run_suite(api_suite());
}
