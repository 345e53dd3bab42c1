/*
 * The GPU stub. Proves that: a GPU-only task writes the serial loop's
 * bytes, strided subscriptions included, whatever the grain; a task
 * reading what the GPU's mirror holds but for a few rows copies in only
 * those rows; a GPU that lacks what another GPU of the host wrote copies it
 * from that GPU (peer copies, when the two can; contiguous and strided),
 * or from the host with PMLIB_CUDA_PEER=0; a read-only
 * input read by every subtask crosses PCIe once, stays cached for the next
 * task and is copied again once its version changes; when device memory is
 * short the least recently used cached input is evicted and no task fails;
 * memories the program page-locked are copied directly; built-in and custom
 * reduces on the GPU give the CPU stub's bits, also when CPU and GPU stubs
 * share the task; a cuda callback that returns an error or reports a bad
 * launch fails the task with PM_ECALLBACK naming the subtask, and the GPU
 * stays usable; a kernel fault fails the task and pmlib still finalizes; a
 * callback set with only a cuda callback runs; PMLIB_NGPU and
 * PMLIB_CUDA_DEVICES pick the GPUs. Exits 77 (skipped) without a GPU.
 */
#include "../unit/testutil.h"

#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels.h"

/* Submits a task, waits, fetches its stats and releases it; its status. */
static int run_stats(const pm_task_desc_t *desc, pm_task_stats_t *st)
{
    pm_task_t t = PM_TASK_NULL;
    ck_assert_int_eq(pm_task_submit(desc, &t), PM_OK);
    int rc = pm_task_wait(t);
    ck_assert_int_eq(pm_task_stats(t, st), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    return rc;
}

static void reg(const char *name, pm_subscribe_fn sub, pm_cpu_fn cpu, pm_cuda_fn cuda,
                pm_reduce_fn reduce)
{
    pm_callbacks_t cb;
    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.subscribe = sub;
    cb.cpu = cpu;
    cb.cuda = cuda;
    cb.reduce = reduce;
    ck_assert_int_eq(pm_callbacks_register(name, &cb), PM_OK);
}

/* ---- a slice per subtask: out[i] = f(i) --------------------------------- */

typedef struct slice_conf {
    uint64_t n;
    int64_t fail_id; /* returns 7 there */
    int64_t bad_id;  /* launches badly there */
    int64_t fault_id; /* a kernel faults there */
    int64_t stray_id; /* writes one element past its slice there */
} slice_conf_t;

static double f_of(uint64_t i)
{
    return (double)i * 0.5 + 3.0;
}

static void slice_of(const pm_subtask_info_t *info, uint64_t n, uint64_t *lo, uint64_t *hi)
{
    *lo = n * info->id / info->count;
    *hi = n * (info->id + 1) / info->count;
}

static int slice_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const slice_conf_t *c = info->conf;
    uint64_t lo, hi;
    slice_of(info, c->n, &lo, &hi);
    return pm_subscribe(sub, 0, PM_WRITE, lo * sizeof(double), (hi - lo) * sizeof(double));
}

static int slice_cuda(const pm_subtask_info_t *info, void *stream)
{
    const slice_conf_t *c = info->conf;
    uint64_t lo, hi;
    slice_of(info, c->n, &lo, &hi);
    tu_note(info->device != PM_DEVICE_GPU || info->device_index < 0 || info->mem[0] == NULL);
    if ((int64_t)info->id == c->bad_id)
        return tk_bad_launch(info->mem[0], stream);
    if ((int64_t)info->id == c->fault_id)
        return tk_fault(stream);
    tk_fill_f(info->mem[0], lo, (int64_t)info->id == c->stray_id ? hi + 1 : hi, stream);
    return (int64_t)info->id == c->fail_id ? 7 : 0;
}

static int slice_cpu(const pm_subtask_info_t *info)
{
    const slice_conf_t *c = info->conf;
    double *out = info->mem[0];
    uint64_t lo, hi;
    slice_of(info, c->n, &lo, &hi);
    tu_note(info->device != PM_DEVICE_CPU);
    for (uint64_t i = lo; i < hi; i++)
        out[i] = f_of(i);
    return 0;
}

/* A slice task over a fresh memory of n doubles (filled with garbage). */
static pm_memory_t slice_task(pm_task_desc_t *d, slice_conf_t *c, const char *name,
                              uint64_t n, uint64_t subtasks)
{
    pm_memory_t m = tu_memory(n * sizeof(double));
    memset(pm_memory_data(m), 0xA5, n * sizeof(double));
    *c = (slice_conf_t){.n = n, .fail_id = -1, .bad_id = -1, .fault_id = -1, .stray_id = -1};
    tu_desc(d, name, subtasks);
    tu_add(d, m, PM_WRITE);
    d->conf = c;
    d->conf_bytes = sizeof *c;
    return m;
}

static void check_slices(pm_memory_t m, uint64_t n)
{
    const double *out = pm_memory_data(m);
    for (uint64_t i = 0; i < n; i++)
        if (out[i] != f_of(i))
            ck_abort_msg("out[%llu] = %g, expected %g", (unsigned long long)i, out[i], f_of(i));
}

START_TEST(test_gpu_only_task_equals_serial_loop)
{
    const uint64_t n = 1u << 20, subtasks = 64;
    const uint64_t grains[] = {1, 4, 0};
    reg("gpu-slices", slice_subscribe, NULL, slice_cuda, NULL);
    for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
        pm_task_desc_t d;
        slice_conf_t c;
        pm_task_stats_t st;
        pm_memory_t m = slice_task(&d, &c, "gpu-slices", n, subtasks);
        d.devices = PM_DEVICE_GPU;
        d.grain = grains[g];
        ck_assert_int_eq(run_stats(&d, &st), PM_OK);
        check_slices(m, n);
        ck_assert_uint_eq(st.subtasks_gpu, subtasks);
        ck_assert_uint_eq(st.subtasks_cpu, 0);
        ck_assert_uint_eq(st.bytes_from_gpu, n * sizeof(double));
        ck_assert_uint_eq(st.bytes_to_gpu, 0); /* write-only: nothing goes in */
        ck_assert_int_eq(pm_memory_release(m), PM_OK);
    }
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}
END_TEST

/* ---- strided subscriptions: subtask c writes column c ---------------------- */

typedef struct mat_conf {
    uint64_t rows, cols;
} mat_conf_t;

static int column_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const mat_conf_t *c = info->conf;
    return pm_subscribe_strided(sub, 0, PM_WRITE, info->id * sizeof(double), sizeof(double),
                                c->cols * sizeof(double), c->rows);
}

static int column_cuda(const pm_subtask_info_t *info, void *stream)
{
    const mat_conf_t *c = info->conf;
    return tk_fill_column(info->mem[0], c->rows, c->cols, info->id, stream);
}

/* Runs the column task over m and checks the matrix. */
static void run_columns(pm_memory_t m, mat_conf_t c)
{
    pm_task_desc_t d;
    pm_task_stats_t st;
    tu_desc(&d, "gpu-columns", c.cols);
    tu_add(&d, m, PM_WRITE);
    d.conf = &c;
    d.conf_bytes = sizeof c;
    d.devices = PM_DEVICE_GPU;
    d.grain = 3;
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    const double *a = pm_memory_data(m);
    for (uint64_t r = 0; r < c.rows; r++)
        for (uint64_t k = 0; k < c.cols; k++)
            ck_assert_msg(a[r * c.cols + k] == (double)(r * 1000 + k), "m[%llu][%llu] = %g",
                          (unsigned long long)r, (unsigned long long)k, a[r * c.cols + k]);
    /* Only the column blocks come back, not the gaps between them. */
    ck_assert_uint_eq(st.bytes_from_gpu, c.rows * c.cols * sizeof(double));
}

START_TEST(test_strided_columns)
{
    mat_conf_t c = {.rows = 4096, .cols = 48};
    reg("gpu-columns", column_subscribe, NULL, column_cuda, NULL);
    run_columns(tu_memory(c.rows * c.cols * sizeof(double)), c);
}
END_TEST

/*
 * ---- a mirror that lacks a few rows --------------------------------------
 * Task A writes every row of a rows x cols matrix on the GPU but rows
 * [skip_lo, skip_hi), which keep the bytes the host gave them; task B then
 * copies each column out (strided reads of every row). The GPU's mirror
 * holds all of A's output, so B must copy in only the skipped rows, and
 * its columns must show both A's values and the host's.
 */
typedef struct skip_conf {
    uint64_t rows, cols, per, skip_lo, skip_hi;
} skip_conf_t;

static int skip_rows_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const skip_conf_t *c = info->conf;
    uint64_t lo = info->id * c->per, hi = lo + c->per, row = c->cols * sizeof(double);
    int rc = 0;
    if (lo < c->skip_lo)
        rc = pm_subscribe(sub, 0, PM_WRITE, lo * row, ((hi < c->skip_lo ? hi : c->skip_lo) - lo) * row);
    if (rc == 0 && hi > c->skip_hi) {
        uint64_t from = lo > c->skip_hi ? lo : c->skip_hi;
        rc = pm_subscribe(sub, 0, PM_WRITE, from * row, (hi - from) * row);
    }
    return rc;
}

static int skip_rows_cuda(const pm_subtask_info_t *info, void *stream)
{
    const skip_conf_t *c = info->conf;
    uint64_t lo = info->id * c->per, hi = lo + c->per;
    int rc = 0;
    if (lo < c->skip_lo)
        rc = tk_fill_f(info->mem[0], lo * c->cols, (hi < c->skip_lo ? hi : c->skip_lo) * c->cols, stream);
    if (rc == 0 && hi > c->skip_hi)
        rc = tk_fill_f(info->mem[0], (lo > c->skip_hi ? lo : c->skip_hi) * c->cols, hi * c->cols, stream);
    return rc;
}

static int copy_column_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const skip_conf_t *c = info->conf;
    int rc = pm_subscribe_strided(sub, 0, PM_READ, info->id * sizeof(double), sizeof(double),
                                  c->cols * sizeof(double), c->rows);
    if (rc == 0)
        rc = pm_subscribe(sub, 1, PM_WRITE, info->id * c->rows * sizeof(double), c->rows * sizeof(double));
    return rc;
}

static int copy_column_cuda(const pm_subtask_info_t *info, void *stream)
{
    const skip_conf_t *c = info->conf;
    return tk_copy_column(info->mem[1], info->mem[0], c->rows, c->cols, info->id, stream);
}

/*
 * Task A writes the rows of matrix m but the skipped ones on the GPUs, then
 * task B copies every column of m into `out` (strided reads of every row),
 * both on `sched` (B in chunks of `grain` columns, 0: the default); each
 * column must show A's values, and the skipped rows the host's (-i).
 * *st: B's stats.
 */
static void rows_then_columns(const skip_conf_t *c, pm_memory_t m, pm_memory_t out,
                              pm_sched_t sched, uint64_t grain, pm_task_stats_t *st)
{
    reg("gpu-skip-rows", skip_rows_subscribe, NULL, skip_rows_cuda, NULL);
    reg("gpu-copy-columns", copy_column_subscribe, NULL, copy_column_cuda, NULL);
    pm_task_desc_t d;
    tu_desc(&d, "gpu-skip-rows", c->rows / c->per);
    tu_add(&d, m, PM_WRITE);
    d.conf = c;
    d.conf_bytes = sizeof *c;
    d.devices = PM_DEVICE_GPU;
    d.sched = sched;
    ck_assert_int_eq(run_stats(&d, st), PM_OK);

    tu_desc(&d, "gpu-copy-columns", c->cols);
    tu_add(&d, m, PM_READ);
    tu_add(&d, out, PM_WRITE);
    d.conf = c;
    d.conf_bytes = sizeof *c;
    d.devices = PM_DEVICE_GPU;
    d.sched = sched;
    if (grain != 0)
        d.grain = grain;
    ck_assert_int_eq(run_stats(&d, st), PM_OK);
    const double *o = pm_memory_data(out);
    for (uint64_t r = 0; r < c->rows; r++)
        for (uint64_t k = 0; k < c->cols; k++) {
            uint64_t i = r * c->cols + k;
            double want = r >= c->skip_lo && r < c->skip_hi ? -(double)i : (double)i * 0.5 + 3.0;
            ck_assert_msg(o[k * c->rows + r] == want, "column %llu row %llu: %g, expected %g",
                          (unsigned long long)k, (unsigned long long)r, o[k * c->rows + r], want);
        }
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}

START_TEST(test_mirror_copies_in_only_missing_rows)
{
    skip_conf_t c = {.rows = 512, .cols = 64, .per = 32, .skip_lo = 100, .skip_hi = 110};
    /* One GPU: with two, each one's mirror holds only the rows it wrote. */
    ck_assert_int_eq(pm_finalize(), PM_OK);
    ck_assert_int_eq(setenv("PMLIB_NGPU", "1", 1), 0);
    tu_init_ncpu("2");
    pm_memory_t m = tu_memory(c.rows * c.cols * sizeof(double));
    pm_memory_t out = tu_memory(c.rows * c.cols * sizeof(double));
    double *a = pm_memory_data(m);
    for (uint64_t i = 0; i < c.rows * c.cols; i++)
        a[i] = -(double)i;
    pm_task_stats_t st;
    rows_then_columns(&c, m, out, PM_SCHED_DEFAULT, 4, &st);
    /* Only the skipped rows came in (the whole matrix before). */
    ck_assert_uint_eq(st.bytes_to_gpu, (c.skip_hi - c.skip_lo) * c.cols * sizeof(double));
}
END_TEST

/* ---- a read-only input read by every subtask ------------------------------ */

static int combine_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const uint64_t *n = info->conf;
    uint64_t lo, hi;
    slice_of(info, *n, &lo, &hi);
    int rc = pm_subscribe(sub, 0, PM_READ, 0, *n * sizeof(double));
    if (rc == 0)
        rc = pm_subscribe(sub, 1, PM_WRITE, lo * sizeof(double), (hi - lo) * sizeof(double));
    return rc;
}

static int combine_cuda(const pm_subtask_info_t *info, void *stream)
{
    const uint64_t *n = info->conf;
    uint64_t lo, hi;
    slice_of(info, *n, &lo, &hi);
    return tk_combine(info->mem[1], info->mem[0], *n, lo, hi, stream);
}

static void check_combined(pm_memory_t in, pm_memory_t out, uint64_t n)
{
    const double *a = pm_memory_data(in), *b = pm_memory_data(out);
    for (uint64_t i = 0; i < n; i++)
        if (b[i] != 2.0 * a[i] + a[(i * 7) % n])
            ck_abort_msg("out[%llu] = %g, expected %g", (unsigned long long)i, b[i],
                         2.0 * a[i] + a[(i * 7) % n]);
}

static void fill_input(pm_memory_t in, uint64_t n, uint64_t salt)
{
    double *a = pm_memory_data(in);
    for (uint64_t i = 0; i < n; i++)
        a[i] = (double)((i + salt) % 1000) * 0.25;
}

/* Runs the combine task (out from in, n elements each) and checks it. */
static void run_combine(pm_memory_t in, pm_memory_t out, uint64_t n, pm_task_stats_t *st)
{
    pm_task_desc_t d;
    tu_desc(&d, "gpu-combine", 32);
    tu_add(&d, in, PM_READ);
    tu_add(&d, out, PM_WRITE);
    d.conf = &n;
    d.conf_bytes = sizeof n;
    d.devices = PM_DEVICE_GPU;
    d.grain = 2;
    memset(pm_memory_data(out), 0, n * sizeof(double));
    ck_assert_int_eq(run_stats(&d, st), PM_OK);
    check_combined(in, out, n);
}

/*
 * ---- GPUs that copy from each other ---------------------------------------
 * Every GPU writes its share of `in`; then every subtask reads all of it.
 * Each GPU's mirror holds its own share, and with two GPUs that can reach
 * each other the other half comes from the other GPU, not from the host;
 * with PMLIB_CUDA_PEER=0 it comes from the host. The results are the
 * serial loop's either way.
 */
static void run_shares(uint64_t n, int ngpu, pm_task_stats_t *st)
{
    pm_task_desc_t d;
    slice_conf_t c;
    pm_memory_t in = slice_task(&d, &c, "gpu-share-fill", n, 2 * (uint64_t)ngpu);
    d.devices = PM_DEVICE_GPU;
    d.sched = PM_SCHED_STATIC_EQUAL;
    ck_assert_int_eq(run_stats(&d, st), PM_OK);
    check_slices(in, n);
    pm_memory_t out = tu_memory(n * sizeof(double));
    tu_desc(&d, "gpu-combine", 2 * (uint64_t)ngpu);
    tu_add(&d, in, PM_READ);
    tu_add(&d, out, PM_WRITE);
    d.conf = &n;
    d.conf_bytes = sizeof n;
    d.devices = PM_DEVICE_GPU;
    d.sched = PM_SCHED_STATIC_EQUAL;
    ck_assert_int_eq(run_stats(&d, st), PM_OK);
    check_combined(in, out, n);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}

/* The bytes of the "gpu copy" spans of a trace file. */
static uint64_t traced_copy_bytes(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    uint64_t bytes = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        const char *b = strstr(line, "\"name\":\"gpu copy\"") ? strstr(line, "\"bytes\":") : NULL;
        if (b != NULL)
            bytes += strtoull(b + 8, NULL, 10);
    }
    fclose(f);
    return bytes;
}

START_TEST(test_gpus_copy_from_each_other)
{
    const uint64_t n = (uint64_t)1 << 20;
    int ngpu = 0;
    ck_assert_int_eq(pm_device_count(PM_DEVICE_GPU, &ngpu), PM_OK);
    reg("gpu-share-fill", slice_subscribe, slice_cpu, slice_cuda, NULL);
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    pm_task_stats_t st;
    run_shares(n, ngpu, &st);
    if (ngpu == 2 && tk_peer_ok(0, 1) && tk_peer_ok(1, 0)) {
        /* Each GPU took the half it lacked from the other. */
        ck_assert_uint_eq(st.bytes_gpu_peer, n * sizeof(double));
        ck_assert_uint_eq(st.bytes_to_gpu, 0);
    } else if (ngpu == 1) {
        ck_assert_uint_eq(st.bytes_gpu_peer, 0);
    }

    /* Strided: each GPU writes its half of a matrix's rows, then each
     * copies out columns, reading every row: the other half's rows of a
     * column come from the other GPU as one strided piece. */
    skip_conf_t c = {.rows = 512, .cols = 64, .per = 32, .skip_lo = 512, .skip_hi = 512};
    rows_then_columns(&c, tu_memory(c.rows * c.cols * sizeof(double)),
                      tu_memory(c.rows * c.cols * sizeof(double)), PM_SCHED_STATIC_EQUAL, 0, &st);
    if (ngpu == 2 && tk_peer_ok(0, 1) && tk_peer_ok(1, 0)) {
        ck_assert_uint_eq(st.bytes_gpu_peer, c.cols * (c.rows / 2) * sizeof(double));
        ck_assert_uint_eq(st.bytes_to_gpu, 0);
    }

    /* Traced: a "gpu copy" span for each peer copy, the bytes adding up. */
    ck_assert_int_eq(pm_finalize(), PM_OK);
    char trace[] = "/tmp/pmlib-gpu-copy-XXXXXX";
    int fd = mkstemp(trace);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(setenv("PMLIB_TRACE", trace, 1), 0);
    tu_init_ncpu("2");
    ck_assert_int_eq(unsetenv("PMLIB_TRACE"), 0);
    reg("gpu-share-fill", slice_subscribe, slice_cpu, slice_cuda, NULL);
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    run_shares(n, ngpu, &st);
    uint64_t peer = st.bytes_gpu_peer;
    ck_assert_int_eq(pm_finalize(), PM_OK);
    ck_assert_uint_eq(traced_copy_bytes(trace), peer);
    if (ngpu == 2 && tk_peer_ok(0, 1) && tk_peer_ok(1, 0))
        ck_assert_uint_eq(peer, n * sizeof(double));
    unlink(trace);
    tu_init_ncpu("2");

    ck_assert_int_eq(pm_finalize(), PM_OK);
    ck_assert_int_eq(setenv("PMLIB_CUDA_PEER", "0", 1), 0);
    tu_init_ncpu("2");
    ck_assert_int_eq(unsetenv("PMLIB_CUDA_PEER"), 0);
    reg("gpu-share-fill", slice_subscribe, slice_cpu, slice_cuda, NULL);
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    run_shares(n, ngpu, &st);
    ck_assert_uint_eq(st.bytes_gpu_peer, 0);
    ck_assert_uint_eq(st.bytes_to_gpu, (uint64_t)(ngpu - 1) * n * sizeof(double));
}
END_TEST

START_TEST(test_read_only_input_cached)
{
    uint64_t n = 1u << 18;
    pm_memory_t in = tu_memory(n * sizeof(double)), out = tu_memory(n * sizeof(double));
    pm_task_stats_t st1, st2, st3;
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    fill_input(in, n, 0);
    run_combine(in, out, n, &st1);
    ck_assert_uint_ge(st1.bytes_to_gpu, n * sizeof(double));
    ck_assert_uint_gt(st1.gpu_cache_hits, 0);

    run_combine(in, out, n, &st2);
    ck_assert_uint_lt(st2.bytes_to_gpu, st1.bytes_to_gpu);
    ck_assert_uint_gt(st2.gpu_cache_hits, 0);

    /* A new version must not be served from the cache. */
    fill_input(in, n, 17);
    ck_assert_int_eq(pm_memory_touch(in), PM_OK);
    run_combine(in, out, n, &st3);
    ck_assert_uint_ge(st3.bytes_to_gpu, n * sizeof(double));
}
END_TEST

/*
 * Tasks read 512 MiB inputs in turn where two fit: each time the least
 * recently used cached input makes room, so every task copies its input
 * again, and no task fails. `hog` takes the GPU's memory (from every
 * process on it) so that cudaMalloc itself runs out.
 */
static void evict_rounds(int hog)
{
    const uint64_t n = (uint64_t)64 << 20;
    pm_memory_t in[4], out = tu_memory(n * sizeof(double));
    pm_task_stats_t st;
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    for (int k = 0; k < 4; k++) {
        in[k] = tu_memory(n * sizeof(double));
        fill_input(in[k], n, (uint64_t)k);
    }
    if (hog)
        ck_assert_int_eq(tk_hog((size_t)1400 << 20), 0);
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 4; k++) {
            run_combine(in[k], out, n, &st);
            ck_assert_uint_ge(st.bytes_to_gpu, n * sizeof(double));
        }
    }
    if (hog)
        ck_assert_int_eq(tk_unhog(), 0);
}

START_TEST(test_cache_evicts_at_memory_limit)
{
    setenv("PMLIB_CUDA_MEMORY_MB", "1400", 1);
    tu_init_ncpu("1");
    evict_rounds(0);
    tu_teardown();
}
END_TEST

/* Only with PMLIB_TEST_EXCLUSIVE_GPU=1: filling the GPU would make other
 * processes on it (parallel tests too) fail. */
START_TEST(test_cache_evicts_when_device_full)
{
    const char *v = getenv("PMLIB_TEST_EXCLUSIVE_GPU");
    if (v == NULL || strcmp(v, "1") != 0)
        return;
    tu_init_ncpu("1");
    evict_rounds(1);
    tu_teardown();
}
END_TEST

/* Only with PMLIB_TEST_EXCLUSIVE_GPU=1: with the GPU full, subtasks whose
 * buffers do not fit run with their cpu callback instead, and none fails. */
START_TEST(test_out_of_device_memory_runs_on_cpu)
{
    const char *v = getenv("PMLIB_TEST_EXCLUSIVE_GPU");
    if (v == NULL || strcmp(v, "1") != 0)
        return;
    const uint64_t n = (uint64_t)32 << 20; /* 256 MiB of doubles, 32 MiB per subtask */
    pm_task_desc_t d;
    slice_conf_t c;
    tu_init_ncpu("1");
    reg("gpu-slices-cpu", slice_subscribe, slice_cpu, slice_cuda, NULL);
    pm_memory_t m = slice_task(&d, &c, "gpu-slices-cpu", n, 8);
    ck_assert_int_eq(tk_hog((size_t)8 << 20), 0);
    ck_assert_int_eq(tu_run(&d), PM_OK);
    ck_assert_int_eq(tk_unhog(), 0);
    check_slices(m, n);
    tu_teardown();
}
END_TEST

/* Memories the program page-locked are copied without the staging buffers. */
START_TEST(test_pinned_memories_copy_directly)
{
    const uint64_t n = 1u << 20;
    mat_conf_t c = {.rows = 4096, .cols = 48};
    pm_task_stats_t st;
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    reg("gpu-columns", column_subscribe, NULL, column_cuda, NULL);
    pm_memory_t in = tu_memory(n * sizeof(double)), out = tu_memory(n * sizeof(double));
    pm_memory_t mat = tu_memory(c.rows * c.cols * sizeof(double));
    /* With GPUs and cuda callbacks registered, pmlib allocates memories
     * page-locked: registering them again is refused, and tasks copy them
     * directly (no staging). */
    ck_assert_int_ne(tk_pin(pm_memory_data(in), n * sizeof(double)), 0);
    ck_assert_int_ne(tk_pin(pm_memory_data(mat), c.rows * c.cols * sizeof(double)), 0);
    fill_input(in, n, 3);
    run_combine(in, out, n, &st);
    run_columns(mat, c);
}
END_TEST

/* Memories made before any cuda callback is registered are left pageable
 * (no GPU is set up for a process that never runs a cuda callback); tasks
 * on them still run on the GPU, through the staging buffers. */
START_TEST(test_memories_before_cuda_callbacks_are_pageable)
{
    const uint64_t n = 1u << 18;
    pm_memory_t in = tu_memory(n * sizeof(double)), out = tu_memory(n * sizeof(double));
    pm_task_stats_t st;
    ck_assert_int_eq(tk_pin(pm_memory_data(in), n * sizeof(double)), 0);
    ck_assert_int_eq(tk_unpin(pm_memory_data(in)), 0);
    reg("gpu-combine", combine_subscribe, NULL, combine_cuda, NULL);
    fill_input(in, n, 5);
    run_combine(in, out, n, &st);
    ck_assert_uint_ge(st.bytes_to_gpu, n * sizeof(double));
}
END_TEST

/* ---- reduces --------------------------------------------------------------- */

/* Elements of each reduced memory; subtask ranges overlap in varied ways. */
#define RK 4096
enum { R_SUM64, R_SUMD, R_MINF, R_RW64, R_CUSTOM, R_NMEM };

static void reduce_range(uint64_t id, uint64_t *lo, uint64_t *hi)
{
    *lo = (id * 389) % (RK / 2);
    *hi = *lo + RK / 2 - (id % 5) * 64;
}

static int reduce_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    static const size_t es[R_NMEM] = {8, 8, 4, 8, 8};
    uint64_t lo, hi;
    int rc = 0;
    reduce_range(info->id, &lo, &hi);
    for (int m = 0; m < R_NMEM && rc == 0; m++)
        rc = pm_subscribe(sub, m, m == R_RW64 ? PM_READ_WRITE : PM_WRITE, lo * es[m],
                          (hi - lo) * es[m]);
    return rc;
}

static int reduce_cuda(const pm_subtask_info_t *info, void *stream)
{
    uint64_t lo, hi;
    reduce_range(info->id, &lo, &hi);
    tk_contrib(info->mem[R_SUM64], info->mem[R_SUMD], info->mem[R_MINF], lo, hi, info->id, stream);
    tk_contrib(info->mem[R_RW64], NULL, NULL, lo, hi, info->id, stream);
    return tk_contrib(info->mem[R_CUSTOM], NULL, NULL, lo, hi, info->id, stream);
}

/* The CPU twin of tk_contrib; volatile keeps each product rounded alone. */
static void contrib_cpu(int64_t *s, double *d, float *f, uint64_t lo, uint64_t hi, uint64_t id)
{
    for (uint64_t j = lo; j < hi; j++) {
        if (s != NULL)
            s[j] += (int64_t)(id * 1000003u + j * 7919u) - 5000000;
        if (d != NULL) {
            volatile double v = (double)(id * 131 + j) * 0.1;
            d[j] = d[j] + v;
        }
        if (f != NULL) {
            volatile float v = (float)((id * 37 + j * 11) % 1009) * 0.3f;
            f[j] = v < f[j] ? v : f[j];
        }
    }
}

static int reduce_cpu(const pm_subtask_info_t *info)
{
    uint64_t lo, hi;
    reduce_range(info->id, &lo, &hi);
    contrib_cpu(info->mem[R_SUM64], info->mem[R_SUMD], info->mem[R_MINF], lo, hi, info->id);
    contrib_cpu(info->mem[R_RW64], NULL, NULL, lo, hi, info->id);
    contrib_cpu(info->mem[R_CUSTOM], NULL, NULL, lo, hi, info->id);
    return 0;
}

static int sum64_reduce(const pm_reduce_info_t *info, void *into, const void *from)
{
    int64_t *a = into;
    const int64_t *b = from;
    for (size_t i = info->offset / 8; i < (info->offset + info->length) / 8; i++)
        a[i] += b[i];
    return 0;
}

typedef struct reduce_mems {
    pm_memory_t m[R_NMEM];
} reduce_mems_t;

static const size_t reduce_es[R_NMEM] = {8, 8, 4, 8, 8};

/* Resets the memories and runs the reduce task on `devices`. */
static void run_reduce(const reduce_mems_t *rm, int devices, pm_task_stats_t *st)
{
    pm_task_desc_t d;
    tu_desc(&d, "gpu-reduce", 37);
    for (int m = 0; m < R_NMEM; m++) {
        memset(pm_memory_data(rm->m[m]), 0, RK * reduce_es[m]);
        if (m == R_RW64)
            for (int64_t j = 0; j < RK; j++)
                ((int64_t *)pm_memory_data(rm->m[m]))[j] = 3 * j;
        ck_assert_int_eq(pm_memory_touch(rm->m[m]), PM_OK);
        tu_add(&d, rm->m[m], m == R_RW64 ? PM_READ_WRITE : PM_WRITE);
    }
    ck_assert_int_eq(pm_task_desc_reduce(&d, R_SUM64, PM_REDUCE_SUM, PM_INT64), PM_OK);
    ck_assert_int_eq(pm_task_desc_reduce(&d, R_SUMD, PM_REDUCE_SUM, PM_DOUBLE), PM_OK);
    ck_assert_int_eq(pm_task_desc_reduce(&d, R_MINF, PM_REDUCE_MIN, PM_FLOAT), PM_OK);
    ck_assert_int_eq(pm_task_desc_reduce(&d, R_RW64, PM_REDUCE_SUM, PM_INT64), PM_OK);
    ck_assert_int_eq(pm_task_desc_reduce(&d, R_CUSTOM, PM_REDUCE_CUSTOM, PM_TYPE_NONE), PM_OK);
    d.devices = devices;
    d.grain = 4;
    ck_assert_int_eq(run_stats(&d, st), PM_OK);
}

static void reduce_setup(reduce_mems_t *rm)
{
    for (int m = 0; m < R_NMEM; m++)
        rm->m[m] = tu_memory(RK * reduce_es[m]);
    reg("gpu-reduce", reduce_subscribe, reduce_cpu, reduce_cuda, sum64_reduce);
}

/* Copies the memories' current content. */
static void snapshot(const reduce_mems_t *rm, unsigned char **out)
{
    for (int m = 0; m < R_NMEM; m++) {
        out[m] = malloc(RK * reduce_es[m]);
        ck_assert_ptr_nonnull(out[m]);
        memcpy(out[m], pm_memory_data(rm->m[m]), RK * reduce_es[m]);
    }
}

/* The serial loop for the order-independent parts: int64 sums and float min. */
static void check_serial(unsigned char **res)
{
    static int64_t s[RK];
    static float f[RK];
    memset(s, 0, sizeof s);
    for (int j = 0; j < RK; j++)
        f[j] = 0.0f; /* bytes no subtask wrote keep the memory's zeros */
    int covered[RK] = {0};
    for (uint64_t id = 0; id < 37; id++) {
        uint64_t lo, hi;
        reduce_range(id, &lo, &hi);
        for (uint64_t j = lo; j < hi; j++) {
            float v = (float)((id * 37 + j * 11) % 1009) * 0.3f;
            s[j] += (int64_t)(id * 1000003u + j * 7919u) - 5000000;
            f[j] = covered[j] && f[j] <= v ? f[j] : v;
            covered[j]++;
        }
    }
    ck_assert_int_eq(memcmp(res[R_SUM64], s, sizeof s), 0);
    ck_assert_int_eq(memcmp(res[R_CUSTOM], s, sizeof s), 0);
    ck_assert_int_eq(memcmp(res[R_MINF], f, sizeof f), 0);
    const int64_t *rw = (const int64_t *)res[R_RW64];
    for (int j = 0; j < RK; j++)
        ck_assert_int_eq(rw[j], covered[j] ? s[j] + covered[j] * 3 * (int64_t)j : 3 * (int64_t)j);
}

static void compare_runs(unsigned char **a, unsigned char **b)
{
    for (int m = 0; m < R_NMEM; m++)
        ck_assert_msg(memcmp(a[m], b[m], RK * reduce_es[m]) == 0,
                      "reduced memory %d differs between the runs", m);
}

START_TEST(test_reduce_gpu_equals_cpu)
{
    reduce_mems_t rm;
    pm_task_stats_t st;
    unsigned char *gpu[R_NMEM], *cpu[R_NMEM], *mix[R_NMEM];
    reduce_setup(&rm);
    run_reduce(&rm, PM_DEVICE_GPU, &st);
    ck_assert_uint_eq(st.subtasks_gpu, 37);
    snapshot(&rm, gpu);
    run_reduce(&rm, PM_DEVICE_CPU, &st);
    ck_assert_uint_eq(st.subtasks_cpu, 37);
    snapshot(&rm, cpu);
    run_reduce(&rm, PM_DEVICE_ANY, &st);
    snapshot(&rm, mix);
    check_serial(cpu);
    compare_runs(gpu, cpu);
    compare_runs(mix, cpu);
    for (int m = 0; m < R_NMEM; m++) {
        free(gpu[m]);
        free(cpu[m]);
        free(mix[m]);
    }
}
END_TEST

/* ---- failures ----------------------------------------------------------------- */

/* A good slice task on the GPU: the stub is still usable. */
static void check_gpu_still_runs(void)
{
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    pm_memory_t m = slice_task(&d, &c, "gpu-slices", 4096, 8);
    d.devices = PM_DEVICE_GPU;
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    check_slices(m, 4096);
}

START_TEST(test_callback_error_fails_task)
{
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    reg("gpu-slices", slice_subscribe, NULL, slice_cuda, NULL);
    slice_task(&d, &c, "gpu-slices", 4096, 16);
    c.fail_id = 5;
    d.devices = PM_DEVICE_GPU;
    d.grain = 2;
    ck_assert_int_eq(run_stats(&d, &st), PM_ECALLBACK);
    ck_assert_int_eq(st.status, PM_ECALLBACK);
    ck_assert_uint_eq(st.failed_subtask, 5);
    check_gpu_still_runs();
}
END_TEST

START_TEST(test_bad_launch_fails_task)
{
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    reg("gpu-slices", slice_subscribe, NULL, slice_cuda, NULL);
    slice_task(&d, &c, "gpu-slices", 4096, 16);
    c.bad_id = 3;
    d.devices = PM_DEVICE_GPU;
    ck_assert_int_eq(run_stats(&d, &st), PM_ECALLBACK);
    ck_assert_uint_eq(st.failed_subtask, 3);
    check_gpu_still_runs();
}
END_TEST

START_TEST(test_kernel_fault_fails_task)
{
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    const char *fork_env = getenv("CK_FORK");
    if (fork_env != NULL && strcmp(fork_env, "no") == 0)
        return; /* the lost context would break the tests after it */
    reg("gpu-slices", slice_subscribe, NULL, slice_cuda, NULL);
    slice_task(&d, &c, "gpu-slices", 4096, 8);
    c.fault_id = 4;
    d.devices = PM_DEVICE_GPU;
    d.grain = 1;
    ck_assert_int_eq(run_stats(&d, &st), PM_ECALLBACK);
    /* A lost context fails everything the GPU does after the fault: a
     * lower subtask in flight there, or one it takes later (GPUs pull
     * chunks in no fixed order), may meet it first and take the blame, as
     * a callback's failure whichever way it met it. */
    ck_assert_uint_le(st.failed_subtask, 4);
}
END_TEST

/* ---- sharing and callback sets --------------------------------------------------- */

START_TEST(test_cpu_and_gpu_share_a_task)
{
    const uint64_t n = 1u << 20, subtasks = 512;
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    reg("both-slices", slice_subscribe, slice_cpu, slice_cuda, NULL);
    pm_memory_t m = slice_task(&d, &c, "both-slices", n, subtasks);
    d.grain = 1;
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    check_slices(m, n);
    ck_assert_uint_gt(st.subtasks_gpu, 0);
    ck_assert_uint_eq(st.subtasks_gpu + st.subtasks_cpu, subtasks);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}
END_TEST

static atomic_int cuda_calls;

static int count_cuda(const pm_subtask_info_t *info, void *stream)
{
    (void)stream;
    tu_note(info->nmem != 0);
    atomic_fetch_add(&cuda_calls, 1);
    return 0;
}

START_TEST(test_cuda_only_callbacks_run)
{
    const uint64_t n = 1u << 16;
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    reg("cuda-only", slice_subscribe, NULL, slice_cuda, NULL);
    pm_memory_t m = slice_task(&d, &c, "cuda-only", n, 24);
    ck_assert_int_eq(run_stats(&d, &st), PM_OK); /* devices left at PM_DEVICE_ANY */
    check_slices(m, n);
    ck_assert_uint_eq(st.subtasks_gpu, 24);

    reg("cuda-nothing-else", NULL, NULL, count_cuda, NULL);
    atomic_store(&cuda_calls, 0);
    tu_desc(&d, "cuda-nothing-else", 10);
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    ck_assert_int_eq(atomic_load(&cuda_calls), 10);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}
END_TEST

/* ---- choosing GPUs ----------------------------------------------------------------- */

static int gpus_with(const char *ngpu, const char *devices)
{
    int n = -1;
    if (ngpu)
        setenv("PMLIB_NGPU", ngpu, 1);
    else
        unsetenv("PMLIB_NGPU");
    if (devices)
        setenv("PMLIB_CUDA_DEVICES", devices, 1);
    else
        unsetenv("PMLIB_CUDA_DEVICES");
    ck_assert_int_eq(pm_init(NULL, NULL), PM_OK);
    ck_assert_int_eq(pm_device_count(PM_DEVICE_GPU, &n), PM_OK);
    return n;
}

START_TEST(test_env_picks_gpus)
{
    pm_task_desc_t d;
    pm_task_t t;
    setenv("PMLIB_NCPU", "1", 1);
    int all = gpus_with(NULL, NULL);
    ck_assert_int_ge(all, 1);
    ck_assert_int_eq(pm_finalize(), PM_OK);

    ck_assert_int_eq(gpus_with("0", NULL), 0);
    reg("gpu-slices", slice_subscribe, NULL, slice_cuda, NULL);
    tu_desc(&d, "gpu-slices", 4);
    d.devices = PM_DEVICE_GPU;
    ck_assert_int_eq(pm_task_submit(&d, &t), PM_ENODEVICE);
    ck_assert_int_eq(pm_finalize(), PM_OK);

    ck_assert_int_eq(gpus_with(NULL, "0"), 1);
    ck_assert_int_eq(pm_finalize(), PM_OK);
    /* A repeated and a bad entry are skipped with a warning. */
    ck_assert_int_eq(gpus_with(NULL, "0,0,9999,x"), 1);
    ck_assert_int_eq(pm_finalize(), PM_OK);
    ck_assert_int_eq(gpus_with("1", NULL), 1);
    ck_assert_int_eq(pm_finalize(), PM_OK);
}
END_TEST

/* ---- the checking mode on the GPU ---------------------------------------------------- */

/* Each subtask reads and writes only its slice lo..hi-1; subtask 3 also
 * writes its slice of the input, which the task added as PM_READ. */
static int peek_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const uint64_t *n = info->conf;
    uint64_t lo, hi;
    slice_of(info, *n, &lo, &hi);
    int rc = pm_subscribe(sub, 0, PM_READ, lo * sizeof(double), (hi - lo) * sizeof(double));
    if (rc == 0)
        rc = pm_subscribe(sub, 1, PM_WRITE, lo * sizeof(double), (hi - lo) * sizeof(double));
    return rc;
}

static int peek_cuda(const pm_subtask_info_t *info, void *stream)
{
    const uint64_t *n = info->conf;
    uint64_t lo, hi;
    slice_of(info, *n, &lo, &hi);
    if (info->id == 3 && info->count == 8)
        tk_fill_f(info->mem[0], lo, hi, stream);
    return tk_combine(info->mem[1], info->mem[0], *n, lo, hi, stream);
}

static pm_task_t submit_peek(pm_memory_t in, pm_memory_t out, uint64_t *n, uint64_t subtasks)
{
    pm_task_desc_t d;
    pm_task_t t = PM_TASK_NULL;
    tu_desc(&d, "gpu-peek", subtasks);
    tu_add(&d, in, PM_READ);
    tu_add(&d, out, PM_WRITE);
    d.conf = n;
    d.conf_bytes = sizeof *n;
    d.devices = PM_DEVICE_GPU;
    ck_assert_int_eq(pm_task_submit(&d, &t), PM_OK);
    return t;
}

/*
 * PMLIB_CHECK=1 on GPU subtasks: right code gives the serial loop's bytes,
 * and the stats count the views that crossed to the GPU and back;
 * a write past a subscription fails the task with PM_ESTRAY naming the
 * subtask and keeps the stray bytes out of the memory; a read outside the
 * subscriptions sees the poison; a write into a PM_READ memory fails the
 * task with PM_EACCESS and leaves the memory as it was.
 */
START_TEST(test_checking_mode_on_the_gpu)
{
    ck_assert_int_eq(pm_finalize(), PM_OK);
    ck_assert_int_eq(setenv("PMLIB_CHECK", "1", 1), 0);
    ck_assert_int_eq(pm_init(NULL, NULL), PM_OK);
    const uint64_t subtasks = 16;
    uint64_t n = 4096;
    pm_task_desc_t d;
    slice_conf_t c;
    pm_task_stats_t st;
    reg("gpu-slices", slice_subscribe, NULL, slice_cuda, NULL);
    pm_memory_t m = slice_task(&d, &c, "gpu-slices", n, subtasks);
    d.devices = PM_DEVICE_GPU;
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    check_slices(m, n);
    ck_assert_uint_eq(st.subtasks_gpu, subtasks);
    /* Each subtask's view is the whole memory, and the stats count it. */
    ck_assert_uint_eq(st.bytes_to_gpu, subtasks * n * sizeof(double));
    ck_assert_uint_eq(st.bytes_from_gpu, subtasks * n * sizeof(double));

    memset(pm_memory_data(m), 0xA5, n * sizeof(double));
    c.stray_id = 5;
    ck_assert_int_eq(run_stats(&d, &st), PM_ESTRAY);
    ck_assert_uint_eq(st.failed_subtask, 5);
    check_slices(m, n); /* the element past slice 5 is subtask 6's, not the stray write's */
    ck_assert_int_eq(pm_memory_release(m), PM_OK);

    /* Reads outside the subscriptions see the poison, on the GPU too. */
    reg("gpu-peek", peek_subscribe, NULL, peek_cuda, NULL);
    pm_memory_t in = tu_memory(n * sizeof(double)), out = tu_memory(n * sizeof(double));
    fill_input(in, n, 0);
    pm_task_t t = submit_peek(in, out, &n, subtasks);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    double poison;
    memset(&poison, PM_CHECK_POISON, sizeof poison);
    const double *a = pm_memory_data(in), *b = pm_memory_data(out);
    uint64_t poisoned = 0;
    for (uint64_t k = 0; k < subtasks; k++) {
        uint64_t lo = n * k / subtasks, hi = n * (k + 1) / subtasks;
        for (uint64_t i = lo; i < hi; i++) {
            uint64_t j = (i * 7) % n;
            double other = j >= lo && j < hi ? a[j] : poison;
            ck_assert_msg(b[i] == 2.0 * a[i] + other, "out[%llu] = %g", (unsigned long long)i, b[i]);
            poisoned += !(j >= lo && j < hi);
        }
    }
    ck_assert_uint_gt(poisoned, 0);

    /* Subtask 3 of 8 writes the PM_READ input. */
    fill_input(in, n, 0);
    t = submit_peek(in, out, &n, 8);
    ck_assert_int_eq(pm_task_wait(t), PM_EACCESS);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_uint_eq(st.failed_subtask, 3);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_msg(a[i] == (double)(i % 1000) * 0.25, "in[%llu] changed", (unsigned long long)i);
    ck_assert_int_eq(unsetenv("PMLIB_CHECK"), 0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------ */

static void setup(void)
{
    tu_init_ncpu("2");
}

/*
 * Whether pmlib finds a GPU here: 1, 0, or -1 if pmlib does not start. Asked
 * in a child process, since CUDA must not be initialized in the process that
 * Check forks the tests from.
 */
static int have_gpu(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        if (pm_init(NULL, NULL) != PM_OK)
            _exit(2);
        pm_device_count(PM_DEVICE_GPU, &n);
        pm_finalize();
        _exit(n > 0 ? 0 : 1);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status) == 0 ? 1 : WEXITSTATUS(status) == 1 ? 0 : -1;
}

int main(void)
{
    setenv("PMLIB_NCPU", "1", 1);
    int gpu = have_gpu();
    if (gpu == 0) {
        printf("no usable GPU on this host: skipped\n");
        return 77;
    }
    if (gpu < 0) {
        fprintf(stderr, "pm_init failed while looking for GPUs\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("gpu stub");
    tcase_add_checked_fixture(tc, setup, tu_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gpu_only_task_equals_serial_loop);
    tcase_add_test(tc, test_strided_columns);
    tcase_add_test(tc, test_mirror_copies_in_only_missing_rows);
    tcase_add_test(tc, test_gpus_copy_from_each_other);
    tcase_add_test(tc, test_read_only_input_cached);
    tcase_add_test(tc, test_pinned_memories_copy_directly);
    tcase_add_test(tc, test_memories_before_cuda_callbacks_are_pageable);
    tcase_add_test(tc, test_reduce_gpu_equals_cpu);
    tcase_add_test(tc, test_callback_error_fails_task);
    tcase_add_test(tc, test_bad_launch_fails_task);
    tcase_add_test(tc, test_kernel_fault_fails_task);
    tcase_add_test(tc, test_cpu_and_gpu_share_a_task);
    tcase_add_test(tc, test_cuda_only_callbacks_run);
    tcase_add_test(tc, test_checking_mode_on_the_gpu);
    suite_add_tcase(s, tc);
    TCase *env = tcase_create("environment");
    tcase_set_timeout(env, 120);
    tcase_add_test(env, test_env_picks_gpus);
    tcase_add_test(env, test_cache_evicts_at_memory_limit);
    tcase_add_test(env, test_out_of_device_memory_runs_on_cpu);
    tcase_add_test(env, test_cache_evicts_when_device_full);
    suite_add_tcase(s, env);
    return tu_run_suite(s);
}
