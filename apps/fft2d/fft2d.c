/*
 * fft2d: a forward 2-D FFT of a rows x cols array of complex floats
 * (row-major, in place) as two pmlib tasks over one memory.
 *
 * Task 1 transforms the rows: subtask k owns a block of whole rows, one
 * contiguous range. Task 2 transforms the columns: subtask k owns a block of
 * columns, subscribed with pm_subscribe_strided (`rows` pieces of
 * per * 8 bytes, cols * 8 bytes apart) and transformed where it lies.
 * Strided subscriptions instead of a transpose task: no second array, no
 * extra pass over memory, and pmlib moves only the subscribed bytes to other
 * hosts and GPUs. Waiting for task 1 before submitting task 2 is the sync
 * point (both write the memory, so pmlib would order them anyway; waiting
 * gives each pass its own time).
 *
 * CPU: FFTW (fftwf_plan_many_dft, FFTW_ESTIMATE); GPU: cuFFT, columns
 * through a transpose on the device (kernels/fft2d.cu). The serial reference is the same row-column
 * code on one core; --verify compares with one fftwf_plan_dft_2d of the
 * whole array instead, a transform this file did not write.
 */
#include <errno.h>
#include <fftw3.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "appdevice.h"
#include "appio.h"
#include "pmlib.h"
#if PMLIB_HAVE_CUDA
#include "fft2d.h"
#endif

#define DEFAULT_ROWS 4096u
#define DEFAULT_COLS 4096u
#define VERIFY_ROWS 256u
#define VERIFY_COLS 512u
/*
 * Single-precision FFTs err by about eps * log2(rows * cols) in relative L2
 * norm (eps = 6e-8, so ~1.5e-6 at 4096 x 4096); 1e-5 leaves room for the
 * different orders in which FFTW, cuFFT and the 2-D plan add the terms.
 */
#define MAX_REL_ERROR 1e-5
/* FFTW and cuFFT take int sizes and strides; this keeps every index < 2^31. */
#define MAX_ELEMENTS ((uint64_t)INT32_MAX)

/* The input: the array given (--input), or any formula of the index, as
 * long as every version uses it. */
static void fill(fftwf_complex *x, uint64_t n, const fftwf_complex *given)
{
    if (given != NULL) {
        memcpy(x, given, n * sizeof *x);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t h = (i + 1) * 0x9E3779B97F4A7C15u;

        h ^= h >> 31;
        x[i][0] = (float)((h >> 40) & 0xFFFF) / 32768.0f - 1.0f;
        x[i][1] = (float)((h >> 16) & 0xFFFF) / 32768.0f - 1.0f;
    }
}

/*
 * howmany transforms of length n: element j of transform b is at
 * x + b * dist + j * stride (in complex elements).
 */
struct batch {
    int n, howmany, stride, dist;
};

/*
 * FFTW plans, one per shape and alignment, shared by every thread:
 * fftwf_execute_dft is thread-safe, the planner is not, so planning and
 * destroying go under plan_lock. FFTW_ESTIMATE leaves the data untouched,
 * so the first caller of a shape plans on its own data.
 */
#define MAX_PLANS 32

struct plan_entry {
    struct batch shape;
    int align;
    fftwf_plan plan;
};

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan_entry plans[MAX_PLANS];
static int nplans;

static int same_shape(const struct plan_entry *e, const struct batch *b,
                      int align)
{
    return e->shape.n == b->n && e->shape.howmany == b->howmany &&
           e->shape.stride == b->stride && e->shape.dist == b->dist &&
           e->align == align;
}

/* The cached plan, or a one-off one (*cached = 0) when the cache is full;
 * NULL when FFTW cannot plan. */
static fftwf_plan get_plan(const struct batch *b, fftwf_complex *x,
                           int *cached)
{
    int align = fftwf_alignment_of((float *)x);
    fftwf_plan p = NULL;

    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < nplans && p == NULL; i++)
        if (same_shape(&plans[i], b, align))
            p = plans[i].plan;
    *cached = 1;
    if (p == NULL) {
        p = fftwf_plan_many_dft(1, &b->n, b->howmany, x, NULL, b->stride,
                                b->dist, x, NULL, b->stride, b->dist,
                                FFTW_FORWARD, FFTW_ESTIMATE);
        *cached = p != NULL && nplans < MAX_PLANS;
        if (*cached)
            plans[nplans++] = (struct plan_entry){*b, align, p};
    }
    pthread_mutex_unlock(&plan_lock);
    return p;
}

static void release_plans(void)
{
    for (int i = 0; i < nplans; i++)
        fftwf_destroy_plan(plans[i].plan);
    nplans = 0;
    fftwf_cleanup();
}

/* Runs one batch in place; 0, or -1 when FFTW cannot plan it. */
static int run_batch(const struct batch *b, fftwf_complex *x)
{
    int cached;
    fftwf_plan p = get_plan(b, x, &cached);

    if (p == NULL)
        return -1;
    fftwf_execute_dft(p, x, x);
    if (!cached) {
        pthread_mutex_lock(&plan_lock);
        fftwf_destroy_plan(p);
        pthread_mutex_unlock(&plan_lock);
    }
    return 0;
}

/* Transforms rows [first, first + count) of the array x. */
static int fft_rows(fftwf_complex *x, uint64_t cols, uint64_t first,
                    uint64_t count)
{
    struct batch b = {(int)cols, (int)count, 1, (int)cols};

    return run_batch(&b, x + first * cols);
}

/*
 * Transforms columns [first, first + count) of the rows x cols array x.
 * Columns go through a small buffer, COLUMN_GROUP at a time (one cache line
 * per row): with a power-of-two cols every element of a column maps to the
 * same cache set, and FFTW_ESTIMATE transforming them in place ran ten times
 * slower than the rows.
 */
#define COLUMN_GROUP 8

static int fft_columns(fftwf_complex *x, uint64_t rows, uint64_t cols,
                       uint64_t first, uint64_t count)
{
    fftwf_complex *buf = fftwf_malloc(rows * COLUMN_GROUP * sizeof *buf);
    int rc = buf == NULL ? -1 : 0;

    for (uint64_t c = first; c < first + count && rc == 0; c += COLUMN_GROUP) {
        int w = (int)(first + count - c < COLUMN_GROUP ? first + count - c
                                                       : COLUMN_GROUP);
        struct batch b = {(int)rows, w, w, 1};

        for (uint64_t r = 0; r < rows; r++)
            memcpy(buf[r * w], x[r * cols + c], w * sizeof *buf);
        rc = run_batch(&b, buf);
        for (uint64_t r = 0; r < rows; r++)
            memcpy(x[r * cols + c], buf[r * w], w * sizeof *buf);
    }
    fftwf_free(buf);
    return rc;
}

/* Serial reference: every row, then every column, on one core. */
static int fft2d_serial(fftwf_complex *x, uint64_t rows, uint64_t cols)
{
    if (fft_rows(x, cols, 0, rows) != 0)
        return -1;
    return fft_columns(x, rows, cols, 0, cols);
}

/* What --verify trusts: one FFTW 2-D plan of the whole array. */
static int fft2d_fftw(fftwf_complex *x, uint64_t rows, uint64_t cols)
{
    fftwf_plan p;

    pthread_mutex_lock(&plan_lock);
    p = fftwf_plan_dft_2d((int)rows, (int)cols, x, x, FFTW_FORWARD,
                          FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    if (p == NULL)
        return -1;
    fftwf_execute(p);
    pthread_mutex_lock(&plan_lock);
    fftwf_destroy_plan(p);
    pthread_mutex_unlock(&plan_lock);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

enum { PASS_ROWS, PASS_COLS };

/* The config blob of one pass. */
struct fft2d_conf {
    uint64_t rows, cols;
    uint64_t per; /* rows (PASS_ROWS) or columns (PASS_COLS) per subtask */
    int pass;
};

static uint64_t lines(const struct fft2d_conf *cf)
{
    return cf->pass == PASS_ROWS ? cf->rows : cf->cols;
}

static uint64_t subtask_count(const struct fft2d_conf *cf)
{
    return (lines(cf) + cf->per - 1) / cf->per;
}

/* Subtask k owns rows or columns [*first, *first + *count). */
static void span(const struct fft2d_conf *cf, uint64_t k, uint64_t *first,
                 uint64_t *count)
{
    *first = k * cf->per;
    *count = *first + cf->per < lines(cf) ? cf->per : lines(cf) - *first;
}

static int fft2d_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const struct fft2d_conf *cf = info->conf;
    size_t elem = sizeof(fftwf_complex);
    uint64_t first, count;

    span(cf, info->id, &first, &count);
    if (cf->pass == PASS_ROWS) /* whole rows: one contiguous range */
        return pm_subscribe(sub, 0, PM_READ_WRITE, first * cf->cols * elem,
                            count * cf->cols * elem);
    /* a block of columns: the same few elements of every row */
    return pm_subscribe_strided(sub, 0, PM_READ_WRITE, first * elem,
                                count * elem, cf->cols * elem, cf->rows);
}

/* The serial code's two loops, over this subtask's rows or columns only. */
static int fft2d_cpu(const pm_subtask_info_t *info)
{
    const struct fft2d_conf *cf = info->conf;
    uint64_t first, count;

    span(cf, info->id, &first, &count);
    if (cf->pass == PASS_ROWS)
        return fft_rows(info->mem[0], cf->cols, first, count) != 0;
    return fft_columns(info->mem[0], cf->rows, cf->cols, first, count) != 0;
}

#if PMLIB_HAVE_CUDA
/* The GPU transforms a block of columns where it lies (kernels/fft2d.cu
 * transposes it through a scratch buffer for cuFFT). */
static int fft2d_cuda(const pm_subtask_info_t *info, void *stream)
{
    const struct fft2d_conf *cf = info->conf;
    fftwf_complex *x = info->mem[0];
    uint64_t first, count;

    span(cf, info->id, &first, &count);
    if (cf->pass == PASS_ROWS)
        return fft2d_gpu_batch(x + first * cf->cols, (int)cf->cols,
                               (int)count, 1, (int)cf->cols, stream);
    return fft2d_gpu_batch(x + first, (int)cf->rows, (int)count,
                           (int)cf->cols, 1, stream);
}
#endif

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    uint64_t rows, cols, subtasks; /* subtasks 0: the apps' default */
    int devices, serial, verify, force;
    unsigned runs;
    const char *input, *output; /* .npy files, or NULL */
};

static void usage(void)
{
    printf(
"usage: fft2d [--rows R] [--cols C | --input A.npy] [--output F.npy] [-f]\n"
"             [--subtasks N] [--runs K] [--device cpu|gpu|all] [--no-serial]\n"
"             [--verify] [--help]\n"
"\n"
"Forward 2-D FFT, in place, of a rows x cols row-major array of complex\n"
"floats, as two pmlib tasks: the rows (a block of rows per subtask), then\n"
"the columns (a block of columns per subtask, strided subscriptions). CPU\n"
"subtasks use FFTW (FFTW_ESTIMATE), GPU subtasks cuFFT. The serial run is\n"
"the same row-column code on one core.\n"
"\n"
"  --rows R, --cols C  array size of the generated input (default %u x %u;\n"
"                      with --verify and no size, %u x %u); rows * cols < 2^31\n"
"  --input A.npy       transform this array instead: NumPy .npy, complex64\n"
"                      ('<c8'), 2-D (rows, cols), C order\n"
"  --output F.npy      write the transform there (complex64, rows x cols);\n"
"                      replaces an existing file, the input too, only with\n"
"                      -f (the input is read in full first)\n"
"  -f, --force         replace the output if it exists\n"
"  --subtasks N        subtasks per pass (default: about 16 per GPU in use,\n"
"                      else 4 per core)\n"
"  --runs K            run the pmlib transform K times (default 1), each on\n"
"                      the input refilled, and report the best; the first\n"
"                      also pays one-time costs (CUDA context, cuFFT plans)\n"
"  --device D          cpu, gpu or all (default all: CPU cores and GPUs)\n"
"  --no-serial         skip the serial run, so no speedup is printed\n"
"  --verify            compare with one fftwf_plan_dft_2d of the whole array;\n"
"                      exit 1 when the relative L2 error exceeds %g\n"
"                      (with --runs, the result of the last run)\n"
"\n"
"Exit status: 0, 1 when --verify fails, 2 for bad arguments or files.\n"
"Environment: PMLIB_NCPU (CPU stubs per host). Under mpirun every host\n"
"takes part; host 0 owns the array and prints the results.\n",
           DEFAULT_ROWS, DEFAULT_COLS, VERIFY_ROWS, VERIFY_COLS, MAX_REL_ERROR);
}

static void check_options(struct options *o, int sized)
{
    if (sized && o->input != NULL)
        app_usage_error("fft2d", "--input gives the size; drop --rows and "
                        "--cols");
    if (!sized && o->verify) {
        o->rows = VERIFY_ROWS;
        o->cols = VERIFY_COLS;
    }
    if (o->rows == 0 || o->cols == 0 || o->rows > MAX_ELEMENTS / o->cols)
        app_usage_error("fft2d", "--rows and --cols must be at least 1 and "
                        "rows * cols below 2^31");
    if (o->devices == PM_DEVICE_GPU && !PMLIB_HAVE_CUDA)
        app_usage_error("fft2d", "--device gpu: this build has no CUDA support; "
                        "use --device cpu");
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    int sized = 0;

    *o = (struct options){DEFAULT_ROWS, DEFAULT_COLS, 0, PM_DEVICE_ANY, 1, 0,
                          0, 1, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "--rows") == 0 || strcmp(a, "--cols") == 0) {
            *(a[2] == 'r' ? &o->rows : &o->cols) = app_size_arg("fft2d", a, val);
            sized = 1;
            i++;
        } else if (strcmp(a, "--subtasks") == 0) {
            o->subtasks = app_size_arg("fft2d", a, val);
            if (o->subtasks == 0)
                app_usage_error("fft2d", "--subtasks must be at least 1");
            i++;
        } else if (strcmp(a, "--runs") == 0) {
            o->runs = app_runs_arg("fft2d", a, val);
            i++;
        } else if (strcmp(a, "--device") == 0) {
            o->devices = app_device_arg("fft2d", a, val);
            i++;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0) {
            o->force = 1;
        } else if (strcmp(a, "--input") == 0 || strcmp(a, "--output") == 0) {
            if (val == NULL)
                app_usage_error("fft2d", "%s needs a file name", a);
            *(a[2] == 'i' ? &o->input : &o->output) = val;
            i++;
        } else {
            app_usage_error("fft2d", "unknown option '%s'", a);
        }
    }
    check_options(o, sized);
}

/* ------------------------------------------------------------------------ */
/* Host 0: run both versions and compare                                     */
/* ------------------------------------------------------------------------ */

/* Runs one pass and waits for it: the sync point between the two. */
static double run_pass(const struct options *o, struct fft2d_conf *cf,
                       pm_memory_t data, pm_task_stats_t *total)
{
    uint64_t n = lines(cf);
    pm_task_desc_t desc;
    pm_task_t task;
    double t0;

    cf->per = o->subtasks > 0 ? (n + o->subtasks - 1) / o->subtasks
                              : app_default_per_subtask_on(n, 1, o->devices);
    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = cf->pass == PASS_ROWS ? "fft2d-rows" : "fft2d-columns";
    desc.subtasks = subtask_count(cf);
    desc.conf = cf;
    desc.conf_bytes = sizeof *cf;
    desc.devices = o->devices;
    APP_CHECK(pm_task_desc_add(&desc, data, PM_READ_WRITE));
    t0 = app_now();
    APP_CHECK(pm_task_submit(&desc, &task));
    APP_CHECK(pm_task_wait(task));
    t0 = app_now() - t0;
    app_add_stats(total, task);
    APP_CHECK(pm_task_release(task));
    return t0;
}

/* Transforms data once; records the seconds of the two passes. */
static void run_pmlib(const struct options *o, pm_memory_t data,
                      struct app_runs *times)
{
    struct fft2d_conf cf = {o->rows, o->cols, 0, PASS_ROWS};
    pm_task_stats_t total = {0};
    double rows_s, cols_s;

    rows_s = run_pass(o, &cf, data, &total);
    cf.pass = PASS_COLS;
    cols_s = run_pass(o, &cf, data, &total);
    app_runs_record(times, rows_s + cols_s, &total);
    printf("  (rows %.3f s, columns %.3f s)\n", rows_s, cols_s);
    app_print_stats(&total);
}

/* Relative L2 error ||x - ref|| / ||ref|| over n floats, in double. */
static double rel_error(const float *x, const float *ref, uint64_t n)
{
    double diff = 0, norm = 0;

    for (uint64_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)ref[i];

        diff += d * d;
        norm += (double)ref[i] * ref[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* A new array holding the input, or exit. */
static fftwf_complex *input_copy(uint64_t n, const char *what,
                                 const fftwf_complex *given)
{
    fftwf_complex *x = fftwf_malloc(n * sizeof *x);

    if (x == NULL) {
        fprintf(stderr, "fft2d: no memory for the %s; try a smaller array\n",
                what);
        exit(1);
    }
    fill(x, n, given);
    return x;
}

/* Returns the serial run's seconds, or -1 when it is skipped. */
static double run_serial(const struct options *o, const fftwf_complex *given)
{
    fftwf_complex *x;
    double t0;
    int rc;

    if (!o->serial)
        return -1;
    x = input_copy(o->rows * o->cols, "serial copy (or use --no-serial)",
                   given);
    t0 = app_now();
    rc = fft2d_serial(x, o->rows, o->cols);
    t0 = app_now() - t0;
    fftwf_free(x);
    if (rc != 0) {
        fprintf(stderr, "fft2d: FFTW cannot plan the serial transform\n");
        exit(1);
    }
    printf("serial: %.3f s\n", t0);
    return t0;
}

/* Compares x with FFTW's 2-D transform; returns "OK" or "MISMATCH". */
static const char *verify(const struct options *o, const void *x,
                          const fftwf_complex *given)
{
    fftwf_complex *ref = input_copy(o->rows * o->cols, "verify copy", given);
    double t0 = app_now(), err;

    if (fft2d_fftw(ref, o->rows, o->cols) != 0) {
        fprintf(stderr, "fft2d: FFTW cannot plan the 2-D transform\n");
        exit(1);
    }
    printf("fftw 2-D plan: %.3f s\n", app_now() - t0);
    err = rel_error((const float *)x, (const float *)ref,
                    2 * o->rows * o->cols);
    fftwf_free(ref);
    printf("verify: relative L2 error %.3g (bound %g)\n", err, MAX_REL_ERROR);
    return err <= MAX_REL_ERROR ? "OK" : "MISMATCH";
}

/*
 * --input: checks the header, takes its size into o and reads the array;
 * NULL after one line on stderr.
 */
static fftwf_complex *read_input(struct options *o)
{
    struct app_npy npy;
    fftwf_complex *x;

    if (app_npy_open(&npy, "fft2d", o->input, "c8", 2) != 0)
        return NULL;
    if (npy.count == 0 || npy.shape[0] > MAX_ELEMENTS / npy.shape[1]) {
        fprintf(stderr, "fft2d: %s: shape (%" PRIu64 ", %" PRIu64 ") must "
                "have at least one element and fewer than 2^31\n", o->input,
                npy.shape[0], npy.shape[1]);
        app_npy_close(&npy);
        return NULL;
    }
    o->rows = npy.shape[0];
    o->cols = npy.shape[1];
    if ((x = fftwf_malloc(npy.count * sizeof *x)) == NULL) {
        fprintf(stderr, "fft2d: no memory for '%s'\n", o->input);
        app_npy_close(&npy);
        return NULL;
    }
    if (app_npy_read(&npy, x) != 0) {
        fftwf_free(x);
        return NULL;
    }
    return x;
}

/* Returns the exit status: 0, 1 when --verify fails, 2 for a file error. */
static int run(struct options *o)
{
    const char *inputs[] = {o->input, NULL};
    fftwf_complex *given = NULL;
    const char *verdict = "skipped";
    struct app_runs times = {.runs = o->runs};
    struct app_out out;
    double serial_s, flops;
    pm_memory_t data;
    uint64_t n;
    int status;

    app_require_devices("fft2d", o->devices, PMLIB_HAVE_CUDA);
    if (o->input != NULL && (given = read_input(o)) == NULL)
        return 2;
    /* before any work: a bad output fails at once */
    if (o->output != NULL &&
        app_out_open_in_place(&out, "fft2d", o->output, o->force,
                              inputs) != 0) {
        fftwf_free(given);
        return 2;
    }
    n = o->rows * o->cols;
    flops = 5.0 * (double)n * log2((double)n);
    printf("fft2d: %" PRIu64 " x %" PRIu64 " complex floats (%.1f MB, %s) "
           "device=%s hosts=%d\n", o->rows, o->cols,
           (double)n * sizeof(fftwf_complex) / 1e6,
           o->input != NULL ? o->input : "generated",
           app_device_name(o->devices), pm_host_count());
    serial_s = run_serial(o, given);

    APP_CHECK(pm_memory_create(n * sizeof(fftwf_complex), &data));
    for (unsigned r = 0; r < o->runs; r++) {
        /* In place: every run starts again from the input, filled untimed;
         * the touch tells pmlib the host pointer rewrote it. */
        fill(pm_memory_data(data), n, given);
        APP_CHECK(pm_memory_touch(data));
        run_pmlib(o, data, &times);
    }
    printf("        %.2f GFLOP/s (5 N log2 N%s)", flops / times.best / 1e9,
           o->runs > 1 ? ", best run" : "");
    if (serial_s > 0)
        printf(", serial %.2f GFLOP/s", flops / serial_s / 1e9);
    printf("\n");

    if (o->verify)
        verdict = verify(o, pm_memory_data(data), given);
    status = strcmp(verdict, "MISMATCH") == 0;
    if (o->output != NULL) {
        uint64_t shape[2] = {o->rows, o->cols};

        if (app_out_finish(&out, app_npy_write(out.f, "c8", 2, shape,
                                               pm_memory_data(data)) == 0) != 0)
            status = 2;
    }
    app_print_result_runs("fft2d", n, serial_s, &times, verdict);
    APP_CHECK(pm_memory_release(data));
    fftwf_free(given);
    return status;
}

int main(int argc, char **argv)
{
    struct options opt;
    pm_callbacks_t cb;
    int status = 0;

    parse_options(argc, argv, &opt);
    APP_CHECK(pm_init(&argc, &argv));

    /* Every host registers the callbacks; only host 0 owns data and submits. */
    APP_CHECK(pm_callbacks_init(&cb));
    cb.subscribe = fft2d_subscribe;
    cb.cpu = fft2d_cpu;
#if PMLIB_HAVE_CUDA
    if (opt.devices & PM_DEVICE_GPU) /* registering it readies the GPUs */
        cb.cuda = fft2d_cuda;
#endif
    /* One name per pass: a column costs about three rows (strided), and
     * pmlib learns speeds per callbacks set. */
    APP_CHECK(pm_callbacks_register("fft2d-rows", &cb));
    APP_CHECK(pm_callbacks_register("fft2d-columns", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
#if PMLIB_HAVE_CUDA
    fft2d_gpu_release();
#endif
    release_plans();
    return status;
}
