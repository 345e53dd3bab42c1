/*
 * Proves the natural view and the subscription forms on the CPU runtime:
 * - subtasks writing disjoint slices through info->mem[i] + offset give
 *   exactly what the serial loop gives, at byte granularity too, and bytes
 *   no subtask subscribed keep their content;
 * - strided subscriptions (one or more matrix columns per subtask, rows
 *   with padding) read and write the right elements;
 * - read-only inputs stay untouched beside written outputs, also with three
 *   memories of different modes in one task;
 * - the subtask info (ids, count, memory sizes, device) is right;
 * - without a subscribe callback every subtask still runs once;
 * - the config blob is copied at submit: changing the caller's copy (and
 *   the descriptor) afterwards does not reach the subtasks;
 * - tasks of two shapes in turn (a row pass and a column pass) subscribe
 *   once each and then reuse their checked subscriptions; a third shape
 *   of the same callbacks makes the oldest subscribe again;
 * - tasks whose configuration changes every time (a timestep in it) give
 *   the serial result while pmlib stops keeping their subscriptions, and
 *   once such tasks start to repeat their configuration, they reuse
 *   subscriptions again within PM__SUBS_RETRY (64) tasks;
 * - a subtask with many more subscriptions than its chunk's first room
 *   (records grown out of the task's own allocation) reads and writes
 *   every one of them.
 */
#include "testutil.h"

/* Subtask `id` of `n` owns elements [slice_lo(id), slice_lo(id + 1)). */
static size_t slice_lo(uint64_t id, uint64_t n, size_t elems)
{
    return (size_t)(id * elems / n);
}

/* ------------------------------------------------------------------------ */
/* Disjoint slices                                                           */
/* ------------------------------------------------------------------------ */

typedef struct slice_conf {
    size_t elems;   /* elements in the memory */
    size_t esize;   /* bytes per element */
    int gaps;       /* subtasks subscribe only every other element */
} slice_conf_t;

static slice_conf_t get_slice_conf(const pm_subtask_info_t *info)
{
    slice_conf_t c;

    memcpy(&c, info->conf, sizeof(c));
    return c;
}

static uint32_t slice_value(size_t off)
{
    return (uint32_t)(off * 2654435761u + 17);
}

static int slice_subscribe(pm_subscription_t *sub,
                           const pm_subtask_info_t *info)
{
    slice_conf_t c = get_slice_conf(info);
    size_t lo = slice_lo(info->id, info->count, c.elems);
    size_t hi = slice_lo(info->id + 1, info->count, c.elems);

    if (hi == lo)
        return 0; /* an empty slice subscribes nothing */
    if (c.gaps) {
        /* even elements of the slice, one block each */
        size_t first = lo + (lo % 2);

        if (first >= hi)
            return 0;
        return pm_subscribe_strided(sub, 0, PM_WRITE, first * c.esize,
                                    c.esize, 2 * c.esize,
                                    (hi - first + 1) / 2);
    }
    return pm_subscribe(sub, 0, PM_WRITE, lo * c.esize, (hi - lo) * c.esize);
}

/* The loop body of the serial code: element e gets slice_value(offset). */
static int slice_cpu(const pm_subtask_info_t *info)
{
    slice_conf_t c = get_slice_conf(info);
    size_t lo = slice_lo(info->id, info->count, c.elems);
    size_t hi = slice_lo(info->id + 1, info->count, c.elems);

    for (size_t e = lo; e < hi; e++) {
        size_t off = e * c.esize;
        char *p = (char *)info->mem[0] + off;

        if (c.gaps && e % 2)
            continue;
        if (c.esize == 1)
            *(uint8_t *)p = (uint8_t)slice_value(off);
        else
            memcpy(p, &(uint32_t){slice_value(off)}, sizeof(uint32_t));
    }
    return 0;
}

static void run_slices(size_t elems, size_t esize, uint64_t n, int gaps)
{
    slice_conf_t c = {elems, esize, gaps};
    pm_memory_t m = tu_memory(elems * esize);
    unsigned char *p = pm_memory_data(m);
    unsigned char *expect = malloc(elems * esize);
    pm_task_desc_t desc;

    ck_assert_ptr_nonnull(expect);
    /* content the task must leave alone where nobody subscribed */
    for (size_t i = 0; i < elems * esize; i++)
        p[i] = (unsigned char)(i * 7 + 3);
    ck_assert_int_eq(pm_memory_touch(m), PM_OK);
    memcpy(expect, p, elems * esize);

    for (size_t e = 0; e < elems; e++) {
        size_t off = e * esize;

        if (gaps && e % 2)
            continue;
        if (esize == 1)
            expect[off] = (uint8_t)slice_value(off);
        else
            memcpy(expect + off, &(uint32_t){slice_value(off)}, 4);
    }

    tu_desc(&desc, "slices", n);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_mem_eq(p, expect, elems * esize);
    free(expect);
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}

START_TEST(test_disjoint_slices)
{
    run_slices(1001, sizeof(uint32_t), 13, 0);
}
END_TEST

/* Slices of odd byte lengths at odd offsets. */
START_TEST(test_disjoint_byte_slices)
{
    run_slices(997, 1, 7, 0);
}
END_TEST

/* Every other element subscribed: the others keep their old bytes. */
START_TEST(test_unsubscribed_bytes_kept)
{
    run_slices(1001, sizeof(uint32_t), 13, 1);
}
END_TEST

/* More subtasks than elements: some slices are empty. */
START_TEST(test_more_subtasks_than_elements)
{
    run_slices(10, sizeof(uint32_t), 64, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Strided: columns of a row-major matrix                                    */
/* ------------------------------------------------------------------------ */

/*
 * B is ROWS x LD int32 (row-major, COLS used, LD - COLS padding); A is
 * COLS x ROWS. Subtask j owns `width` columns of B starting at j * width,
 * i.e. the same rows of A.
 */
#define ROWS 24
#define COLS 10
#define LD 13

typedef struct col_conf {
    int width;
} col_conf_t;

static int col_width(const pm_subtask_info_t *info)
{
    col_conf_t c;

    memcpy(&c, info->conf, sizeof(c));
    return c.width;
}

/* Scatter: read rows of A contiguously, write columns of B strided. */
static int scatter_subscribe(pm_subscription_t *sub,
                             const pm_subtask_info_t *info)
{
    size_t w = (size_t)col_width(info), j0 = info->id * w;
    int rc;

    rc = pm_subscribe(sub, 0, PM_READ, j0 * ROWS * 4, w * ROWS * 4);
    if (rc == PM_OK)
        rc = pm_subscribe_strided(sub, 1, PM_WRITE, j0 * 4, w * 4, LD * 4,
                                  ROWS);
    return rc;
}

static int scatter_cpu(const pm_subtask_info_t *info)
{
    const int32_t *a = info->mem[0];
    int32_t *b = info->mem[1];
    size_t w = (size_t)col_width(info), j0 = info->id * w;

    for (size_t j = j0; j < j0 + w; j++)
        for (size_t r = 0; r < ROWS; r++)
            b[r * LD + j] = a[j * ROWS + r];
    return 0;
}

/* Gather: read columns of B strided, write rows of A contiguously. */
static int gather_subscribe(pm_subscription_t *sub,
                            const pm_subtask_info_t *info)
{
    size_t w = (size_t)col_width(info), j0 = info->id * w;
    int rc;

    rc = pm_subscribe_strided(sub, 1, PM_READ, j0 * 4, w * 4, LD * 4, ROWS);
    if (rc == PM_OK)
        rc = pm_subscribe(sub, 0, PM_WRITE, j0 * ROWS * 4, w * ROWS * 4);
    return rc;
}

static int gather_cpu(const pm_subtask_info_t *info)
{
    int32_t *a = info->mem[0];
    const int32_t *b = info->mem[1];
    size_t w = (size_t)col_width(info), j0 = info->id * w;

    for (size_t j = j0; j < j0 + w; j++)
        for (size_t r = 0; r < ROWS; r++)
            a[j * ROWS + r] = b[r * LD + j] * 3 + 1;
    return 0;
}

static int32_t a_value(size_t j, size_t r)
{
    return (int32_t)(j * 1000 + r * 7 + 1);
}

START_TEST(test_strided_columns)
{
    col_conf_t c = {_i};
    const size_t ncol = COLS / (size_t)c.width;
    pm_memory_t ma = tu_memory(COLS * ROWS * 4), mb = tu_memory(ROWS * LD * 4);
    int32_t *a = pm_memory_data(ma), *b = pm_memory_data(mb);
    pm_task_desc_t desc;

    for (size_t j = 0; j < COLS; j++)
        for (size_t r = 0; r < ROWS; r++)
            a[j * ROWS + r] = a_value(j, r);
    for (size_t i = 0; i < ROWS * LD; i++)
        b[i] = -1; /* padding sentinel */
    ck_assert_int_eq(pm_memory_touch(ma), PM_OK);
    ck_assert_int_eq(pm_memory_touch(mb), PM_OK);

    /* B = A^T through strided writes */
    tu_desc(&desc, "scatter", ncol);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    tu_add(&desc, ma, PM_READ);
    tu_add(&desc, mb, PM_WRITE);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    for (size_t r = 0; r < ROWS; r++)
        for (size_t j = 0; j < LD; j++)
            ck_assert_int_eq(b[r * LD + j], j < COLS ? a_value(j, r) : -1);
    for (size_t j = 0; j < COLS; j++)
        for (size_t r = 0; r < ROWS; r++)
            ck_assert_int_eq(a[j * ROWS + r], a_value(j, r));

    /* A = 3 B^T + 1 through strided reads */
    tu_desc(&desc, "gather", ncol);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    tu_add(&desc, ma, PM_WRITE);
    tu_add(&desc, mb, PM_READ);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    for (size_t j = 0; j < COLS; j++)
        for (size_t r = 0; r < ROWS; r++)
            ck_assert_int_eq(a[j * ROWS + r], a_value(j, r) * 3 + 1);
}
END_TEST

/*
 * Blocks end to end (stride == block) are one range: allowed even on a
 * reduced memory, where a strided subscription is not. Every subtask adds
 * id + 1 to each of its elements, written as ROWS blocks of 4 int64.
 */
#define TILED 4

static int tiled_subscribe(pm_subscription_t *sub,
                           const pm_subtask_info_t *info)
{
    (void)info;
    return pm_subscribe_strided(sub, 0, PM_WRITE, 0, TILED * 8, TILED * 8,
                                ROWS);
}

static int tiled_cpu(const pm_subtask_info_t *info)
{
    int64_t *x = info->mem[0];

    for (size_t i = 0; i < TILED * ROWS; i++)
        x[i] += (int64_t)info->id + 1;
    return 0;
}

START_TEST(test_end_to_end_blocks_are_one_range)
{
    pm_memory_t m = tu_memory(TILED * ROWS * 8);
    const int64_t *x = pm_memory_data(m);
    pm_task_desc_t desc;
    int idx;

    tu_desc(&desc, "tiled", 5);
    idx = tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, PM_REDUCE_SUM,
                                         PM_INT64), PM_OK);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    for (size_t i = 0; i < TILED * ROWS; i++)
        ck_assert_int_eq(x[i], 1 + 2 + 3 + 4 + 5);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Read-only input beside a written output; three memories                   */
/* ------------------------------------------------------------------------ */

#define VEC 1000
#define VEC_TASKS 9

static int axpy_subscribe(pm_subscription_t *sub,
                          const pm_subtask_info_t *info)
{
    size_t lo = slice_lo(info->id, info->count, VEC);
    size_t hi = slice_lo(info->id + 1, info->count, VEC);
    int rc;

    rc = pm_subscribe(sub, 0, PM_READ, lo * 8, (hi - lo) * 8);
    if (rc == PM_OK)
        rc = pm_subscribe(sub, 1, PM_WRITE, lo * 8, (hi - lo) * 8);
    return rc;
}

static int axpy_cpu(const pm_subtask_info_t *info)
{
    const double *x = info->mem[0];
    double *y = info->mem[1];
    size_t lo = slice_lo(info->id, info->count, VEC);
    size_t hi = slice_lo(info->id + 1, info->count, VEC);

    for (size_t i = lo; i < hi; i++)
        y[i] = 2.5 * x[i] + (double)i;
    return 0;
}

START_TEST(test_read_input_write_output)
{
    pm_memory_t mx = tu_memory(VEC * 8), my = tu_memory(VEC * 8);
    double *x = pm_memory_data(mx), *y = pm_memory_data(my);
    pm_task_desc_t desc;
    uint64_t vx0, vx1, vy0, vy1;

    for (size_t i = 0; i < VEC; i++)
        x[i] = (double)i * 0.5 - 100.0;
    ck_assert_int_eq(pm_memory_touch(mx), PM_OK);
    ck_assert_int_eq(pm_memory_version(mx, &vx0), PM_OK);
    ck_assert_int_eq(pm_memory_version(my, &vy0), PM_OK);

    tu_desc(&desc, "axpy", VEC_TASKS);
    tu_add(&desc, mx, PM_READ);
    tu_add(&desc, my, PM_WRITE);
    ck_assert_int_eq(tu_run(&desc), PM_OK);

    for (size_t i = 0; i < VEC; i++) {
        double xi = (double)i * 0.5 - 100.0;

        ck_assert(x[i] == xi);
        ck_assert(y[i] == 2.5 * xi + (double)i);
    }
    ck_assert_int_eq(pm_memory_version(mx, &vx1), PM_OK);
    ck_assert_int_eq(pm_memory_version(my, &vy1), PM_OK);
    ck_assert_uint_eq(vx1, vx0);
    ck_assert_uint_gt(vy1, vy0);
}
END_TEST

/* a (PM_READ), b (PM_READ_WRITE), c (PM_WRITE): c = a * b; b += a. */
static int three_subscribe(pm_subscription_t *sub,
                           const pm_subtask_info_t *info)
{
    size_t lo = slice_lo(info->id, info->count, VEC);
    size_t hi = slice_lo(info->id + 1, info->count, VEC);
    const pm_access_t acc[3] = {PM_READ, PM_READ_WRITE, PM_WRITE};

    /* the subscribe callback sees the task's shape but no data */
    tu_note(info->nmem != 3);
    for (int m = 0; m < 3; m++) {
        int rc;

        tu_note(info->mem_bytes[m] != VEC * sizeof(int64_t));
        rc = pm_subscribe(sub, m, acc[m], lo * 8, (hi - lo) * 8);
        if (rc != PM_OK)
            return rc;
    }
    return 0;
}

static int three_cpu(const pm_subtask_info_t *info)
{
    const int64_t *a = info->mem[0];
    int64_t *b = info->mem[1], *c = info->mem[2];
    size_t lo = slice_lo(info->id, info->count, VEC);
    size_t hi = slice_lo(info->id + 1, info->count, VEC);

    tu_note(info->nmem != 3);
    for (size_t i = lo; i < hi; i++) {
        c[i] = a[i] * b[i];
        b[i] += a[i];
    }
    return 0;
}

START_TEST(test_three_memories)
{
    pm_memory_t m[3];
    int64_t *a, *b, *c;
    pm_task_desc_t desc;
    uint64_t v0[3], v1[3];

    for (int k = 0; k < 3; k++)
        m[k] = tu_memory(VEC * sizeof(int64_t));
    a = pm_memory_data(m[0]);
    b = pm_memory_data(m[1]);
    c = pm_memory_data(m[2]);
    for (size_t i = 0; i < VEC; i++) {
        a[i] = (int64_t)i - 300;
        b[i] = (int64_t)(i * i) + 5;
        c[i] = 123456789; /* replaced: every element is subscribed */
    }
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(pm_memory_touch(m[k]), PM_OK);
        ck_assert_int_eq(pm_memory_version(m[k], &v0[k]), PM_OK);
    }

    tu_desc(&desc, "three", VEC_TASKS);
    ck_assert_int_eq(pm_task_desc_add(&desc, m[0], PM_READ), 0);
    ck_assert_int_eq(pm_task_desc_add(&desc, m[1], PM_READ_WRITE), 1);
    ck_assert_int_eq(pm_task_desc_add(&desc, m[2], PM_WRITE), 2);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);

    for (size_t i = 0; i < VEC; i++) {
        int64_t ai = (int64_t)i - 300, bi = (int64_t)(i * i) + 5;

        ck_assert_int_eq(a[i], ai);
        ck_assert_int_eq(b[i], bi + ai);
        ck_assert_int_eq(c[i], ai * bi);
    }
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(pm_memory_version(m[k], &v1[k]), PM_OK);
    ck_assert_uint_eq(v1[0], v0[0]);
    ck_assert_uint_gt(v1[1], v0[1]);
    ck_assert_uint_gt(v1[2], v0[2]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The subtask info                                                          */
/* ------------------------------------------------------------------------ */

#define INFO_TASKS 40
static atomic_int runs[INFO_TASKS];

static int info_cpu(const pm_subtask_info_t *info)
{
    tu_note(info->count != INFO_TASKS);
    tu_note(info->id >= info->count);
    tu_note(info->nmem != 1);
    tu_note(info->mem_bytes[0] != 4 * INFO_TASKS);
    tu_note(info->conf != NULL || info->conf_bytes != 0);
    tu_note(info->host != 0);
    tu_note(info->stub < 0);
    tu_note(info->device != PM_DEVICE_CPU);
    tu_note(info->device_index < 0);
    if (info->id < INFO_TASKS) {
        atomic_fetch_add(&runs[info->id], 1);
        ((uint32_t *)info->mem[0])[info->id] = (uint32_t)info->id + 1;
    }
    return 0;
}

static int one_elem_subscribe(pm_subscription_t *sub,
                              const pm_subtask_info_t *info)
{
    tu_note(info->id >= info->count);
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 4, 4);
}

START_TEST(test_subtask_info)
{
    pm_memory_t m = tu_memory(4 * INFO_TASKS);
    const uint32_t *p = pm_memory_data(m);
    pm_task_desc_t desc;

    for (int i = 0; i < INFO_TASKS; i++)
        atomic_store(&runs[i], 0);
    tu_desc(&desc, "info", INFO_TASKS);
    desc.flags = PM_TASK_NO_MULTI_ASSIGN; /* runs are counted */
    desc.devices = PM_DEVICE_CPU;
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    for (int i = 0; i < INFO_TASKS; i++) {
        ck_assert_int_eq(atomic_load(&runs[i]), 1);
        ck_assert_uint_eq(p[i], (uint32_t)i + 1);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* No subscribe callback                                                     */
/* ------------------------------------------------------------------------ */

static int count_cpu(const pm_subtask_info_t *info)
{
    if (info->id < INFO_TASKS)
        atomic_fetch_add(&runs[info->id], 1);
    return 0;
}

START_TEST(test_no_subscribe_no_memories)
{
    pm_task_desc_t desc;

    for (int i = 0; i < INFO_TASKS; i++)
        atomic_store(&runs[i], 0);
    tu_desc(&desc, "nosub", INFO_TASKS);
    desc.flags = PM_TASK_NO_MULTI_ASSIGN;
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    for (int i = 0; i < INFO_TASKS; i++)
        ck_assert_int_eq(atomic_load(&runs[i]), 1);
}
END_TEST

/* A memory nobody subscribes is neither read nor written back. */
START_TEST(test_no_subscribe_with_memory)
{
    pm_memory_t m = tu_memory(256);
    unsigned char *p = pm_memory_data(m);
    pm_task_desc_t desc;
    uint64_t v0, v1;

    for (int i = 0; i < INFO_TASKS; i++)
        atomic_store(&runs[i], 0);
    for (int i = 0; i < 256; i++)
        p[i] = (unsigned char)(255 - i);
    ck_assert_int_eq(pm_memory_touch(m), PM_OK);
    ck_assert_int_eq(pm_memory_version(m, &v0), PM_OK);
    tu_desc(&desc, "nosub", INFO_TASKS);
    desc.flags = PM_TASK_NO_MULTI_ASSIGN;
    tu_add(&desc, m, PM_READ);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    for (int i = 0; i < INFO_TASKS; i++)
        ck_assert_int_eq(atomic_load(&runs[i]), 1);
    for (int i = 0; i < 256; i++)
        ck_assert_uint_eq(p[i], (unsigned char)(255 - i));
    ck_assert_int_eq(pm_memory_version(m, &v1), PM_OK);
    ck_assert_uint_eq(v1, v0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The config blob is copied at submit                                       */
/* ------------------------------------------------------------------------ */

typedef struct blob {
    int32_t scale;
    double offset;
    char tag[16];
    uint64_t elems;
} blob_t;

static tu_gate_t gate;
static const blob_t *caller_blob;

static int blob_subscribe(pm_subscription_t *sub,
                          const pm_subtask_info_t *info)
{
    blob_t b;

    tu_note(info->conf_bytes != sizeof(b));
    memcpy(&b, info->conf, sizeof(b));
    tu_note(b.elems != 64);
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

static int blob_cpu(const pm_subtask_info_t *info)
{
    blob_t b;

    /* run only after the caller changed its copy */
    tu_note(tu_gate_wait(&gate, 3.0) != 0);
    tu_note(info->conf_bytes != sizeof(b));
    tu_note(info->conf == (const void *)caller_blob);
    memcpy(&b, info->conf, sizeof(b));
    tu_note(strcmp(b.tag, "original") != 0);
    tu_note(b.elems != 64);
    ((double *)info->mem[0])[info->id] = b.scale * (double)info->id + b.offset;
    return 0;
}

START_TEST(test_conf_copied_at_submit)
{
    blob_t b;
    pm_memory_t m = tu_memory(64 * 8);
    const double *out = pm_memory_data(m);
    pm_task_desc_t desc;
    pm_task_t t;

    memset(&b, 0, sizeof(b));
    b.scale = 3;
    b.offset = 0.25;
    strcpy(b.tag, "original");
    b.elems = 64;
    caller_blob = &b;

    tu_desc(&desc, "blob", 64);
    desc.conf = &b;
    desc.conf_bytes = sizeof(b);
    tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);

    /* the caller reuses its blob and descriptor right away */
    b.scale = -7;
    b.offset = 1e9;
    strcpy(b.tag, "changed");
    b.elems = 5;
    desc.subtasks = 3;
    desc.callbacks = "no-such-callbacks";
    tu_gate_open(&gate);

    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    for (int i = 0; i < 64; i++)
        ck_assert(out[i] == 3.0 * i + 0.25);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void setup(void)
{
    tu_setup_ncpu4();
    tu_gate_close(&gate);
    tu_register("slices", slice_subscribe, slice_cpu);
    tu_register("scatter", scatter_subscribe, scatter_cpu);
    tu_register("gather", gather_subscribe, gather_cpu);
    tu_register("axpy", axpy_subscribe, axpy_cpu);
    tu_register("three", three_subscribe, three_cpu);
    tu_register("tiled", tiled_subscribe, tiled_cpu);
    tu_register("info", one_elem_subscribe, info_cpu);
    tu_register("nosub", NULL, count_cpu);
    tu_register("blob", blob_subscribe, blob_cpu);
}

/* ------------------------------------------------------------------------ */
/* Subscriptions reused by tasks of the same shape                            */
/* ------------------------------------------------------------------------ */

#define SHAPE_N 16 /* a SHAPE_N x SHAPE_N matrix of uint32 */

static atomic_int shape_subscribes;

/* pass 0: subtask i owns row i; pass 1: column i; pass 2: both halves of
 * row i in two ranges. Each subtask adds pass + 1 to what it owns. */
static int shape_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const int *pass = info->conf;
    size_t row = SHAPE_N * sizeof(uint32_t);
    atomic_fetch_add(&shape_subscribes, 1);
    if (*pass == 1)
        return pm_subscribe_strided(sub, 0, PM_READ_WRITE, info->id * sizeof(uint32_t), sizeof(uint32_t),
                                    row, SHAPE_N);
    if (*pass == 2) {
        int rc = pm_subscribe(sub, 0, PM_READ_WRITE, info->id * row, row / 2);
        return rc != 0 ? rc : pm_subscribe(sub, 0, PM_READ_WRITE, info->id * row + row / 2, row / 2);
    }
    return pm_subscribe(sub, 0, PM_READ_WRITE, info->id * row, row);
}

static int shape_cpu(const pm_subtask_info_t *info)
{
    const int *pass = info->conf;
    uint32_t *m = info->mem[0];
    for (uint64_t k = 0; k < SHAPE_N; k++) {
        uint64_t i = *pass == 1 ? k * SHAPE_N + info->id : info->id * SHAPE_N + k;
        m[i] += (uint32_t)*pass + 1;
    }
    return 0;
}

/* Runs a task of SHAPE_N subtasks of callbacks `name` over m with the
 * configuration conf; the subscribe calls it made. */
static int run_counted(pm_memory_t m, const char *name, const void *conf, size_t conf_bytes)
{
    pm_task_desc_t d;
    int before = atomic_load(&shape_subscribes);
    tu_desc(&d, name, SHAPE_N);
    tu_add(&d, m, PM_READ_WRITE);
    d.conf = conf;
    d.conf_bytes = conf_bytes;
    ck_assert_int_eq(tu_run(&d), PM_OK);
    return atomic_load(&shape_subscribes) - before;
}

/* Runs a pass; the subscribe calls it made. */
static int run_shape(pm_memory_t m, int pass)
{
    return run_counted(m, "shapes", &pass, sizeof pass);
}

START_TEST(test_two_shapes_in_turn_reuse_subscriptions)
{
    pm_memory_t m = tu_memory(SHAPE_N * SHAPE_N * sizeof(uint32_t));
    memset(pm_memory_data(m), 0, SHAPE_N * SHAPE_N * sizeof(uint32_t));
    tu_register("shapes", shape_subscribe, shape_cpu);
    ck_assert_int_eq(run_shape(m, 0), SHAPE_N);
    ck_assert_int_eq(run_shape(m, 1), SHAPE_N);
    for (int round = 0; round < 3; round++) {
        ck_assert_int_eq(run_shape(m, 0), 0);
        ck_assert_int_eq(run_shape(m, 1), 0);
    }
    /* A third shape takes the place of the oldest (the row pass). */
    ck_assert_int_eq(run_shape(m, 2), SHAPE_N);
    ck_assert_int_eq(run_shape(m, 0), SHAPE_N);
    /* rows: 5 x 1 + 1 x 3; columns: 4 x 2 */
    const uint32_t *a = pm_memory_data(m);
    for (size_t i = 0; i < SHAPE_N * SHAPE_N; i++)
        ck_assert_uint_eq(a[i], 5 * 1 + 3 + 4 * 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Configurations that change every task; many records per subtask          */
/* ------------------------------------------------------------------------ */

struct step_conf {
    int step; /* changes every task: no two tasks share a configuration */
    int pass;
};

static int step_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const struct step_conf *c = info->conf;
    int pass = c->pass;
    pm_subtask_info_t view = *info;
    view.conf = &pass;
    return shape_subscribe(sub, &view);
}

static int step_cpu(const pm_subtask_info_t *info)
{
    const struct step_conf *c = info->conf;
    uint32_t *m = info->mem[0];
    for (uint64_t k = 0; k < SHAPE_N; k++)
        m[info->id * SHAPE_N + k] += (uint32_t)c->step;
    return 0;
}

static int run_step(pm_memory_t m, int step)
{
    struct step_conf c = {.step = step, .pass = 0};
    return run_counted(m, "steps", &c, sizeof c);
}

START_TEST(test_changing_conf_then_repeating)
{
    pm_memory_t m = tu_memory(SHAPE_N * SHAPE_N * sizeof(uint32_t));
    memset(pm_memory_data(m), 0, SHAPE_N * SHAPE_N * sizeof(uint32_t));
    tu_register("steps", step_subscribe, step_cpu);
    uint32_t want = 0;
    for (int step = 1; step <= 100; step++) { /* never the same configuration */
        ck_assert_int_eq(run_step(m, step), SHAPE_N);
        want += (uint32_t)step;
    }
    /* One configuration not seen before (none kept holds it) from now on:
     * reuse resumes within 64 tasks and then holds. */
    int first_reuse = -1;
    for (int i = 0; i < 80; i++) {
        int subscribed = run_step(m, 1000);
        want += 1000;
        if (first_reuse < 0 && subscribed == 0)
            first_reuse = i;
        else if (first_reuse >= 0)
            ck_assert_int_eq(subscribed, 0);
    }
    ck_assert_int_ge(first_reuse, 0);
    ck_assert_int_le(first_reuse, 65);
    const uint32_t *a = pm_memory_data(m);
    for (size_t i = 0; i < SHAPE_N * SHAPE_N; i++)
        ck_assert_uint_eq(a[i], want);
}
END_TEST

/* Subtask i owns bytes i*MANY .. i*MANY+MANY-1, subscribed one byte at a
 * time every other byte, then the bytes between: MANY records. */
#define MANY 48

static int many_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t b = (size_t)pass; b < MANY; b += 2) {
            int rc = pm_subscribe(sub, 0, PM_READ_WRITE, info->id * MANY + b, 1);
            if (rc != 0)
                return rc;
        }
    return 0;
}

static int many_cpu(const pm_subtask_info_t *info)
{
    unsigned char *m = info->mem[0];
    for (size_t b = 0; b < MANY; b++)
        m[info->id * MANY + b] = (unsigned char)(m[info->id * MANY + b] * 3 + info->id + b);
    return 0;
}

START_TEST(test_many_records_per_subtask)
{
    const uint64_t n = 2 + (uint64_t)_i * 37; /* a task subscribed at submit, and one by the stubs */
    pm_memory_t m = tu_memory(n * MANY);
    unsigned char *a = pm_memory_data(m), *want = malloc(n * MANY);
    ck_assert_ptr_nonnull(want);
    for (size_t i = 0; i < n * MANY; i++)
        a[i] = want[i] = (unsigned char)(i * 7);
    tu_register("many", many_subscribe, many_cpu);
    for (int round = 0; round < 3; round++) {
        pm_task_desc_t d;
        tu_desc(&d, "many", n);
        tu_add(&d, m, PM_READ_WRITE);
        d.flags |= round == 2 ? PM_TASK_FRESH_SUBSCRIPTIONS : 0;
        ck_assert_int_eq(tu_run(&d), PM_OK);
        for (uint64_t id = 0; id < n; id++)
            for (size_t b = 0; b < MANY; b++)
                want[id * MANY + b] = (unsigned char)(want[id * MANY + b] * 3 + id + b);
    }
    ck_assert_mem_eq(a, want, n * MANY);
    free(want);
}
END_TEST

static Suite *subscribe_suite(void)
{
    Suite *s = suite_create("subscribe");
    TCase *view = tcase_create("natural_view");
    TCase *strided = tcase_create("strided");
    TCase *modes = tcase_create("modes");
    TCase *misc = tcase_create("info_and_conf");

    tcase_add_checked_fixture(view, setup, tu_teardown);
    tcase_add_checked_fixture(strided, setup, tu_teardown);
    tcase_add_checked_fixture(modes, setup, tu_teardown);
    tcase_add_checked_fixture(misc, setup, tu_teardown);

    tcase_add_test(view, test_disjoint_slices);
    tcase_add_test(view, test_disjoint_byte_slices);
    tcase_add_test(view, test_unsubscribed_bytes_kept);
    tcase_add_test(view, test_more_subtasks_than_elements);
    /* _i is the number of columns per subtask: 1 (one element) or 2 */
    tcase_add_loop_test(strided, test_strided_columns, 1, 3);
    tcase_add_test(strided, test_end_to_end_blocks_are_one_range);
    tcase_add_test(modes, test_read_input_write_output);
    tcase_add_test(modes, test_three_memories);
    tcase_add_test(misc, test_subtask_info);
    tcase_add_test(misc, test_no_subscribe_no_memories);
    tcase_add_test(misc, test_no_subscribe_with_memory);
    tcase_add_test(misc, test_conf_copied_at_submit);
    tcase_add_test(misc, test_two_shapes_in_turn_reuse_subscriptions);
    tcase_add_test(misc, test_changing_conf_then_repeating);
    tcase_add_loop_test(misc, test_many_records_per_subtask, 0, 3);

    suite_add_tcase(s, view);
    suite_add_tcase(s, strided);
    suite_add_tcase(s, modes);
    suite_add_tcase(s, misc);
    return s;
}

int main(void)
{
    return tu_run_suite(subscribe_suite());
}
