/*
 * matmul: C = A x B for fp32 matrices, row-major: A is M x K, B is K x N,
 * C is M x N (the generated ones are square).
 *
 * Each subtask computes a block of C: R rows by W columns, from the same
 * rows of A and the same columns of B (a strided subscription: one block of
 * W floats from every row of B). With W = N (the CPU default) a subtask
 * reads all of B, which pmlib sends once to each host and GPU and keeps
 * cached there. With narrower blocks (the default on hosts with several
 * GPUs) a GPU starts on its first block once that block's panel of B is
 * in, instead of waiting for all of B.
 * The serial reference, which --verify trusts, is one single-threaded
 * cblas_sgemm on the whole matrices; the CPU callback makes the same call
 * on its block, the cuda callback calls cuBLAS (or a plain kernel) on the
 * stream pmlib gives it.
 */
#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "appdevice.h"
#include "appio.h"
#include "matmul.h" /* enum matmul_kernel, matmul_gpu() */
#include "pmlib.h"

#define DEFAULT_N 1024u
#define VERIFY_N 512u
#define MAX_N 65536u  /* 16 GiB per matrix; cblas and cuBLAS take int sizes */
#define ROW_GRANULE 16u
#define MIN_PANEL 8192u /* floats in a row of a default panel of B: 32 KiB */

/* Uniform in [-1, 1) from a hash of the element index: the same every run. */
static float entry(uint64_t i, uint64_t salt)
{
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15u ^ salt;

    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9u;
    z ^= z >> 29;
    return (float)(z >> 40) / (float)(1 << 23) - 1.0f; /* 24 bits: exact */
}

static void fill(float *a, float *b, uint64_t n)
{
    for (uint64_t i = 0; i < n * n; i++) {
        a[i] = entry(i, 0xA);
        b[i] = entry(i, 0xB);
    }
}

/* Serial reference: the whole product in one call; A is m x k, B k x n. */
static void matmul_serial(const float *a, const float *b, float *c, int m,
                          int k, int n)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a,
                k, b, n, 0.0f, c, n);
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

/* All 64-bit fields: no padding bytes to leave uninitialized in the blob. */
struct matmul_conf {
    uint64_t m, k, n; /* A is m x k, B is k x n, C is m x n */
    uint64_t rows;   /* rows of C per block; the last may get fewer */
    uint64_t cols;   /* columns of C per block; the last may get fewer */
    uint64_t kernel; /* enum matmul_kernel */
};

enum { MEM_A, MEM_B, MEM_C };

static uint64_t row_blocks(const struct matmul_conf *cf)
{
    return (cf->m + cf->rows - 1) / cf->rows;
}

static uint64_t subtask_count(const struct matmul_conf *cf)
{
    return row_blocks(cf) * ((cf->n + cf->cols - 1) / cf->cols);
}

/* A block of C: rows [r0, r1) and columns [c0, c1). */
struct block {
    uint64_t r0, r1, c0, c1;
};

/* Subtask k's block; blocks are numbered down each panel of columns, so a
 * host or GPU given consecutive subtasks reuses the panel of B it has. */
static struct block block_of(const struct matmul_conf *cf, uint64_t k)
{
    struct block b;

    b.r0 = k % row_blocks(cf) * cf->rows;
    b.c0 = k / row_blocks(cf) * cf->cols;
    b.r1 = b.r0 + cf->rows < cf->m ? b.r0 + cf->rows : cf->m;
    b.c1 = b.c0 + cf->cols < cf->n ? b.c0 + cf->cols : cf->n;
    return b;
}

static int matmul_subscribe(pm_subscription_t *sub,
                            const pm_subtask_info_t *info)
{
    const struct matmul_conf *cf = info->conf;
    size_t a_row = cf->k * sizeof(float), row_bytes = cf->n * sizeof(float);
    struct block b = block_of(cf, info->id);
    size_t width = (b.c1 - b.c0) * sizeof(float), col = b.c0 * sizeof(float);
    int rc;

    rc = pm_subscribe(sub, MEM_A, PM_READ, b.r0 * a_row,
                      (b.r1 - b.r0) * a_row);
    /* Columns [c0, c1) of every row of B, and of my rows of C. */
    if (rc == 0)
        rc = pm_subscribe_strided(sub, MEM_B, PM_READ, col, width, row_bytes,
                                  cf->k);
    if (rc == 0)
        rc = pm_subscribe_strided(sub, MEM_C, PM_WRITE,
                                  b.r0 * row_bytes + col, width, row_bytes,
                                  b.r1 - b.r0);
    return rc;
}

/* The serial call restricted to my block: same offsets and strides. */
static int matmul_cpu(const pm_subtask_info_t *info)
{
    const struct matmul_conf *cf = info->conf;
    const float *a = info->mem[MEM_A], *b = info->mem[MEM_B];
    float *c = info->mem[MEM_C];
    int n = (int)cf->n, inner = (int)cf->k;
    struct block k = block_of(cf, info->id);

    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(k.r1 - k.r0),
                (int)(k.c1 - k.c0), inner, 1.0f, a + k.r0 * cf->k, inner,
                b + k.c0, n, 0.0f, c + k.r0 * cf->n + k.c0, n);
    return 0;
}

#if PMLIB_HAVE_CUDA
/* Device pointers, same offsets as matmul_cpu. */
static int matmul_cuda(const pm_subtask_info_t *info, void *stream)
{
    const struct matmul_conf *cf = info->conf;
    const float *a = info->mem[MEM_A], *b = info->mem[MEM_B];
    float *c = info->mem[MEM_C];
    struct block k = block_of(cf, info->id);

    return matmul_gpu(a + k.r0 * cf->k, b + k.c0, c + k.r0 * cf->n + k.c0,
                      (int)(k.r1 - k.r0), (int)(k.c1 - k.c0), (int)cf->k,
                      (int)cf->n, (enum matmul_kernel)cf->kernel, stream);
}
#endif

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    uint64_t m, k, n;        /* A is m x k, B k x n; -n N: all three N */
    uint64_t rows, cols;     /* 0: the defaults, chosen once pmlib is up */
    enum matmul_kernel kernel;
    int devices, serial, verify, force;
    unsigned runs;
    const char *a, *b, *output; /* .npy files, or NULL */
};

static void usage(void)
{
    printf(
"usage: matmul [-n N | --a A.npy --b B.npy] [--output C.npy] [-f] [--rows R]\n"
"              [--cols W] [--kernel cublas|simple] [--runs K]\n"
"              [--device cpu|gpu|all] [--no-serial] [--verify] [--help]\n"
"\n"
"Computes C = A x B for fp32 matrices (row-major; generated ones are N x N\n"
"with entries uniform in [-1, 1)). Each subtask computes a block of R rows\n"
"by W columns of C: cblas_sgemm on a CPU core, cuBLAS sgemm on a GPU. The\n"
"serial reference is one single-threaded cblas_sgemm of the whole\n"
"matrices. Times exclude filling the matrices; the pmlib time covers\n"
"pm_task_submit + pm_task_wait.\n"
"\n"
"  -n N             matrix order of the generated A and B (default %u; with\n"
"                   --verify %u)\n"
"  --a A.npy, --b B.npy\n"
"                   multiply these instead: NumPy .npy, float32 ('<f4'),\n"
"                   C order, A of M x K and B of K x N (each size up to\n"
"                   %u)\n"
"  --output C.npy   write C there (float32, M x N); replaces an existing\n"
"                   file, an input too, only with -f (inputs are read in\n"
"                   full first)\n"
"  -f, --force      replace the output if it exists\n"
"  --rows R         rows per block (default: about 16 subtasks per GPU in\n"
"                   use, else 4 per core; a multiple of %u)\n"
"  --cols W         columns per block (default N; with g > 1 GPUs on a host,\n"
"                   N / g but at least %u, so that each GPU starts once its\n"
"                   panel of B is in, not all of B)\n"
"  --kernel K       GPU code: cublas (default) or simple (a plain kernel)\n"
"  --runs K         run the pmlib product K times on the same matrices\n"
"                   (default 1) and report the best; every run copies A\n"
"                   and B afresh, the first also pays one-time costs\n"
"                   (CUDA context, cuBLAS handles, ...)\n"
"  --device D       cpu, gpu or all (default all: CPU cores and GPUs)\n"
"  --no-serial      skip the serial run, so no speedup is printed\n"
"  --verify         check every element against the serial product:\n"
"                   |C - Cref| <= 2.1 K 2^-24 (|A||B|), twice the worst-case\n"
"                   error of one fp32 dot product of length K; exit 1 if not\n"
"                   (with --runs, the product of the last run)\n"
"\n"
"Exit status: 0, 1 when --verify fails, 2 for bad arguments or files.\n"
"Environment: PMLIB_NCPU (CPU stubs per host, default one per core),\n"
"PMLIB_SCHED (pull, static or proportional), PMLIB_LOG. Under mpirun every\n"
"host takes part; host 0 owns the matrices and prints the results.\n",
           DEFAULT_N, VERIFY_N, MAX_N, ROW_GRANULE, MIN_PANEL);
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0, 0, 0, 0, 0, MATMUL_CUBLAS, PM_DEVICE_ANY, 1, 0,
                          0, 1, NULL, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "-n") == 0) {
            o->n = app_size_arg("matmul", a, val);
            i++;
            if (o->n == 0 || o->n > MAX_N)
                app_usage_error("matmul", "-n must be 1 to %u", MAX_N);
        } else if (strcmp(a, "--rows") == 0) {
            o->rows = app_size_arg("matmul", a, val);
            i++;
            if (o->rows == 0)
                app_usage_error("matmul", "--rows must be at least 1");
        } else if (strcmp(a, "--cols") == 0) {
            o->cols = app_size_arg("matmul", a, val);
            i++;
            if (o->cols == 0)
                app_usage_error("matmul", "--cols must be at least 1");
        } else if (strcmp(a, "--kernel") == 0) {
            if (val != NULL && strcmp(val, "cublas") == 0)
                o->kernel = MATMUL_CUBLAS;
            else if (val != NULL && strcmp(val, "simple") == 0)
                o->kernel = MATMUL_SIMPLE;
            else
                app_usage_error("matmul", "--kernel: use cublas or simple");
            i++;
        } else if (strcmp(a, "--runs") == 0) {
            o->runs = app_runs_arg("matmul", a, val);
            i++;
        } else if (strcmp(a, "--device") == 0) {
            o->devices = app_device_arg("matmul", a, val);
            i++;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0) {
            o->force = 1;
        } else if (strcmp(a, "--a") == 0 || strcmp(a, "--b") == 0 ||
                   strcmp(a, "--output") == 0) {
            if (val == NULL)
                app_usage_error("matmul", "%s needs a file name", a);
            *(a[2] == 'a' ? &o->a : a[2] == 'b' ? &o->b : &o->output) = val;
            i++;
        } else {
            app_usage_error("matmul", "unknown option '%s'", a);
        }
    }
    if ((o->a == NULL) != (o->b == NULL))
        app_usage_error("matmul", "give both --a and --b");
    if (o->a != NULL && o->n != 0)
        app_usage_error("matmul", "--a and --b give the size; drop -n");
    if (o->n == 0)
        o->n = o->verify ? VERIFY_N : DEFAULT_N;
    o->m = o->k = o->n; /* --a and --b set their own later */
    if (o->verify && !o->serial)
        app_usage_error("matmul", "--verify needs the serial run; "
                        "drop --no-serial");
}

/* ------------------------------------------------------------------------ */
/* Host 0: run both versions and compare                                     */
/* ------------------------------------------------------------------------ */

static double gflops(const struct matmul_conf *cf, double seconds)
{
    return 2.0 * (double)cf->m * (double)cf->k * (double)cf->n / seconds / 1e9;
}

/* Runs the task once; records the seconds spent in submit + wait. */
static void run_pmlib(const struct options *o, const struct matmul_conf *cf,
                      pm_memory_t a, pm_memory_t b, pm_memory_t c,
                      struct app_runs *times)
{
    pm_task_desc_t desc;
    pm_task_stats_t st = {0};
    pm_task_t task;
    double t0, seconds;

    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "matmul";
    desc.subtasks = subtask_count(cf);
    desc.conf = cf;
    desc.conf_bytes = sizeof *cf;
    desc.devices = o->devices;
    APP_CHECK(pm_task_desc_add(&desc, a, PM_READ));  /* MEM_A */
    APP_CHECK(pm_task_desc_add(&desc, b, PM_READ));  /* MEM_B */
    APP_CHECK(pm_task_desc_add(&desc, c, PM_WRITE)); /* MEM_C */

    t0 = app_now();
    APP_CHECK(pm_task_submit(&desc, &task));
    APP_CHECK(pm_task_wait(task));
    seconds = app_now() - t0;

    app_add_stats(&st, task);
    app_runs_record(times, seconds, &st);
    printf("  %.1f GFLOP/s\n", gflops(cf, seconds));
    app_print_stats(&st);
    APP_CHECK(pm_task_release(task));
}

/* Returns the serial run's seconds, or -1 when it is skipped. */
static double run_serial(const struct options *o,
                         const struct matmul_conf *cf, const float *a,
                         const float *b, float **ref)
{
    double t0, seconds;

    if (!o->serial)
        return -1;
    *ref = malloc(cf->m * cf->n * sizeof **ref);
    if (*ref == NULL) {
        fprintf(stderr, "matmul: no memory for the serial product; "
                "try --no-serial or a smaller -n\n");
        exit(1);
    }
    /* Touched like pmlib's zero-filled C, so neither time has page faults. */
    memset(*ref, 0, cf->m * cf->n * sizeof **ref);
    t0 = app_now();
    matmul_serial(a, b, *ref, (int)cf->m, (int)cf->k, (int)cf->n);
    seconds = app_now() - t0;
    printf("serial: %.3f s  %.1f GFLOP/s\n", seconds, gflops(cf, seconds));
    return seconds;
}

/*
 * C and Cref each lie within gamma_k |A||B| of the exact product, whatever
 * the order of summation (gamma_k = k u / (1 - k u), u = 2^-24, k the
 * inner size), so they differ by at most 2 gamma_k |A||B|; 2.1 k u also
 * covers the rounding of |A||B| itself. A wrong row or offset gives errors
 * near 1 instead.
 */
static int close_enough(const float *c, const float *ref, const float *a,
                        const float *b, const struct matmul_conf *cf)
{
    const uint64_t n = cf->n, mn = cf->m * cf->n;
    const double bound = 2.1 * (double)cf->k * ldexp(1.0, -24);
    float *abs_a = malloc(cf->m * cf->k * sizeof(float));
    float *abs_b = malloc(cf->k * cf->n * sizeof(float));
    float *abs_ab = malloc(mn * sizeof(float));
    double worst = 0;
    uint64_t bad = 0, first = 0;

    if (abs_a == NULL || abs_b == NULL || abs_ab == NULL) {
        fprintf(stderr, "matmul: no memory to verify; try a smaller -n\n");
        exit(1);
    }
    for (uint64_t i = 0; i < cf->m * cf->k; i++)
        abs_a[i] = fabsf(a[i]);
    for (uint64_t i = 0; i < cf->k * cf->n; i++)
        abs_b[i] = fabsf(b[i]);
    matmul_serial(abs_a, abs_b, abs_ab, (int)cf->m, (int)cf->k, (int)cf->n);
    for (uint64_t i = 0; i < mn; i++) {
        double err = fabs((double)c[i] - (double)ref[i]);
        double scale = abs_ab[i] > 0 ? abs_ab[i] : 1e-30;

        if (err / scale > worst)
            worst = err / scale;
        if (!(err <= bound * scale) && bad++ == 0) /* NaN counts as bad */
            first = i;
    }
    printf("verify: max |C - Cref| / (|A||B|) = %.3g, bound %.3g\n", worst,
           bound);
    if (bad > 0)
        printf("verify: %" PRIu64 " elements out of bound; first C[%" PRIu64
               "][%" PRIu64 "] = %g, serial %g\n", bad, first / n, first % n,
               c[first], ref[first]);
    free(abs_a);
    free(abs_b);
    free(abs_ab);
    return bad == 0;
}

/*
 * Fills in the block sizes not given. On CPUs and one GPU, blocks of whole
 * rows: every host or GPU receives all of B either way. With k GPUs, k
 * panels of columns (but rows of at least MIN_PANEL floats, which copy at
 * full speed): blocks are numbered down each panel, so each GPU mostly
 * works in one panel and waits for 1/k of B before its first product,
 * not all of it, while A comes in one block of rows at a time behind the
 * products. Rows per block keep about 16 subtasks per GPU (4 per core without).
 */
static void default_blocks(const struct options *o, struct matmul_conf *cf)
{
    uint64_t per = app_default_per_subtask_on(cf->m, ROW_GRANULE, o->devices);
    uint64_t panels;
    int gpus = 0;

    if (o->devices & PM_DEVICE_GPU)
        APP_CHECK(pm_device_count(PM_DEVICE_GPU, &gpus));
    if (cf->cols == 0) {
        cf->cols = cf->n;
        if (gpus > 1) {
            uint64_t w = (cf->n + (uint64_t)gpus - 1) / (uint64_t)gpus;

            w = (w + ROW_GRANULE - 1) / ROW_GRANULE * ROW_GRANULE;
            cf->cols = w > MIN_PANEL ? w : MIN_PANEL;
        }
    }
    cf->cols = cf->cols < cf->n ? cf->cols : cf->n;
    panels = (cf->n + cf->cols - 1) / cf->cols;
    if (cf->rows == 0)
        cf->rows = per * panels;
    cf->rows = cf->rows < cf->m ? cf->rows : cf->m;
}

/* Opens one of --a, --b: float32, 2-D; -1 after one line. */
static int open_matrix(struct app_npy *npy, const char *path)
{
    if (app_npy_open(npy, "matmul", path, "f4", 2) != 0)
        return -1;
    if (npy->shape[0] == 0 || npy->shape[0] > MAX_N || npy->shape[1] == 0 ||
        npy->shape[1] > MAX_N) {
        fprintf(stderr, "matmul: %s: shape (%" PRIu64 ", %" PRIu64 ") is not "
                "a matrix of 1 to %u rows and columns\n", path, npy->shape[0],
                npy->shape[1], MAX_N);
        app_npy_close(npy);
        return -1;
    }
    return 0;
}

/*
 * Checks --a and --b and takes their sizes into o->m, o->k and o->n before
 * anything is allocated; the data is read later, straight into the memories.
 */
static int open_inputs(struct options *o, struct app_npy npy[2])
{
    if (open_matrix(&npy[0], o->a) != 0)
        return -1;
    if (open_matrix(&npy[1], o->b) != 0) {
        app_npy_close(&npy[0]);
        return -1;
    }
    if (npy[0].shape[1] != npy[1].shape[0]) {
        fprintf(stderr, "matmul: %s is %" PRIu64 " x %" PRIu64 " but %s is %"
                PRIu64 " x %" PRIu64 "; the columns of --a must be as many "
                "as the rows of --b\n", o->a, npy[0].shape[0],
                npy[0].shape[1], o->b, npy[1].shape[0], npy[1].shape[1]);
        app_npy_close(&npy[0]);
        app_npy_close(&npy[1]);
        return -1;
    }
    o->m = npy[0].shape[0];
    o->k = npy[0].shape[1];
    o->n = npy[1].shape[1];
    return 0;
}

/* Writes C to the output opened before the work; 0 or 2. */
static int write_output(struct app_out *out, const float *c, uint64_t m,
                        uint64_t n)
{
    uint64_t shape[2] = {m, n};

    return app_out_finish(out, app_npy_write(out->f, "f4", 2, shape, c) == 0);
}

/* Returns the exit status: 0, 1 when --verify fails, 2 for a file error. */
static int run(struct options *o)
{
    const char *inputs[] = {o->a, o->b, NULL};
    struct app_npy npy[2];
    struct app_out out;
    struct matmul_conf cf;
    pm_memory_t a, b, c;
    float *ref = NULL;
    double serial_s;
    struct app_runs times = {.runs = o->runs};
    const char *verdict = "skipped";
    int status;

    app_require_devices("matmul", o->devices, PMLIB_HAVE_CUDA);
    if (o->a != NULL && open_inputs(o, npy) != 0)
        return 2;
    /* before any work: a bad output fails at once */
    if (o->output != NULL &&
        app_out_open_in_place(&out, "matmul", o->output, o->force,
                              inputs) != 0) {
        if (o->a != NULL) {
            app_npy_close(&npy[0]);
            app_npy_close(&npy[1]);
        }
        return 2;
    }
    cf = (struct matmul_conf){o->m, o->k, o->n, o->rows, o->cols, o->kernel};
    default_blocks(o, &cf);
    if (cf.m != cf.n || cf.k != cf.n)
        printf("matmul: m=%" PRIu64 " k=%" PRIu64 " ", cf.m, cf.k);
    else
        printf("matmul: ");
    printf("n=%" PRIu64 " rows=%" PRIu64 " cols=%" PRIu64
           " subtasks=%" PRIu64 " device=%s kernel=%s hosts=%d%s%s%s%s\n",
           cf.n, cf.rows, cf.cols, subtask_count(&cf),
           app_device_name(o->devices),
           cf.kernel == MATMUL_SIMPLE ? "simple" : "cublas", pm_host_count(),
           o->a != NULL ? " a=" : "", o->a != NULL ? o->a : "",
           o->a != NULL ? " b=" : "", o->a != NULL ? o->b : "");

    APP_CHECK(pm_memory_create(cf.m * cf.k * sizeof(float), &a));
    APP_CHECK(pm_memory_create(cf.k * cf.n * sizeof(float), &b));
    APP_CHECK(pm_memory_create(cf.m * cf.n * sizeof(float), &c));
    if (o->a == NULL) {
        fill(pm_memory_data(a), pm_memory_data(b), cf.n);
    } else if (app_npy_read(&npy[0], pm_memory_data(a)) != 0 ||
               app_npy_read(&npy[1], pm_memory_data(b)) != 0) {
        app_npy_close(&npy[1]);
        if (o->output != NULL)
            app_out_abort(&out);
        status = 2;
        goto release;
    }
    APP_CHECK(pm_memory_touch(a)); /* written through the host pointers */
    APP_CHECK(pm_memory_touch(b));

    serial_s = run_serial(o, &cf, pm_memory_data(a), pm_memory_data(b), &ref);
    /* Each run overwrites all of C from A and B, which stay as filled. The
     * touches make every run start from host memory: no run reuses copies
     * of A or B that an earlier one left on GPUs or other hosts. */
    for (unsigned r = 0; r < o->runs; r++) {
        APP_CHECK(pm_memory_touch(a));
        APP_CHECK(pm_memory_touch(b));
        run_pmlib(o, &cf, a, b, c, &times);
    }
    if (o->verify) {
        verdict = close_enough(pm_memory_data(c), ref, pm_memory_data(a),
                               pm_memory_data(b), &cf) ? "OK" : "MISMATCH";
        printf("verify: %s\n", verdict);
    }
    status = strcmp(verdict, "MISMATCH") == 0;
    if (o->output != NULL &&
        write_output(&out, pm_memory_data(c), cf.m, cf.n) != 0)
        status = 2;
    app_print_result_runs("matmul", cf.n, serial_s, &times, verdict);
release:
    APP_CHECK(pm_memory_release(c));
    APP_CHECK(pm_memory_release(b));
    APP_CHECK(pm_memory_release(a));
    free(ref);
    return status;
}

int main(int argc, char **argv)
{
    struct options opt;
    pm_callbacks_t cb;
    int status = 0;

    parse_options(argc, argv, &opt);
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(1); /* pmlib already runs one subtask per core */
#endif
    APP_CHECK(pm_init(&argc, &argv));

    /* Every host registers the callbacks; only host 0 owns data and submits. */
    APP_CHECK(pm_callbacks_init(&cb));
    cb.subscribe = matmul_subscribe;
    cb.cpu = matmul_cpu;
#if PMLIB_HAVE_CUDA
    if (opt.devices & PM_DEVICE_GPU) /* registering it readies the GPUs */
        cb.cuda = matmul_cuda;
#endif
    APP_CHECK(pm_callbacks_register("matmul", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
    return status;
}
