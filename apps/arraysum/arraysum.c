/*
 * arraysum: the first pmlib sample app, meant to be copied.
 *
 * Applies f R times, in place, to every element of an int32 array, then sums
 * the array as int64. The serial reference comes first, then the pmlib
 * callbacks that run the same loop body on one slice per subtask, then main.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "appdevice.h"
#include "pmlib.h"

#define DEFAULT_N 10000000u
#define DEFAULT_REPEAT 25u
#define DEFAULT_C 1000.0
#define ELEMENTS_PER_SUBTASK 65536u

/*
 * f(x) = floor(C * |sin x|^(|cos x|^(1/3))), in double. cbrt, not
 * pow(y, 1.0 / 3): the two can differ in the last bit, and the serial and
 * pmlib versions must call the very same function to compare exactly.
 */
static inline int32_t element(int32_t x, double c)
{
    double v = (double)x;

    return (int32_t)floor(c * pow(fabs(sin(v)), cbrt(fabs(cos(v)))));
}

/* Any formula of the index will do, as long as both versions use it. */
static void fill(int32_t *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] = (int32_t)(i % 100003);
}

/*
 * Serial reference. Elements are independent, so applying all R rounds to
 * one element before the next equals R passes, and is kinder to the cache.
 */
static int64_t arraysum_serial(int32_t *x, uint64_t n, uint64_t repeat,
                               double c)
{
    int64_t sum = 0;

    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t r = 0; r < repeat; r++)
            x[i] = element(x[i], c);
        sum += x[i];
    }
    return sum;
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

/* The config blob: pmlib copies it at submit and hands it to every host. */
struct arraysum_conf {
    uint64_t n;           /* elements */
    uint64_t per_subtask; /* elements per subtask; the last one may get fewer */
    uint64_t repeat;
    double c;
};

/* Task memories, in the order run_pmlib adds them to the task. */
enum { MEM_ARRAY, MEM_SUM };

static uint64_t subtask_count(const struct arraysum_conf *cf)
{
    return (cf->n + cf->per_subtask - 1) / cf->per_subtask;
}

/* Subtask k owns elements [begin, end). */
static void slice(const struct arraysum_conf *cf, uint64_t k, uint64_t *begin,
                  uint64_t *end)
{
    *begin = k * cf->per_subtask;
    *end = *begin + cf->per_subtask < cf->n ? *begin + cf->per_subtask : cf->n;
}

static int arraysum_subscribe(pm_subscription_t *sub,
                              const pm_subtask_info_t *info)
{
    uint64_t begin, end;
    int rc;

    slice(info->conf, info->id, &begin, &end);
    rc = pm_subscribe(sub, MEM_ARRAY, PM_READ_WRITE, begin * sizeof(int32_t),
                      (end - begin) * sizeof(int32_t));
    if (rc == 0) /* every subtask writes the one sum: the reduce merges them */
        rc = pm_subscribe(sub, MEM_SUM, PM_WRITE, 0, sizeof(int64_t));
    return rc;
}

/* The serial loop body over one slice; x is indexed with global indices. */
static int arraysum_cpu(const pm_subtask_info_t *info)
{
    const struct arraysum_conf *cf = info->conf;
    int32_t *x = info->mem[MEM_ARRAY];
    int64_t sum = 0;
    uint64_t begin, end;

    slice(cf, info->id, &begin, &end);
    for (uint64_t i = begin; i < end; i++) {
        for (uint64_t r = 0; r < cf->repeat; r++)
            x[i] = element(x[i], cf->c);
        sum += x[i];
    }
    /* The subtask's copy of the sum starts at 0, the identity of the sum. */
    *(int64_t *)info->mem[MEM_SUM] += sum;
    return 0;
}

#if PMLIB_HAVE_CUDA
#include "arraysum.h"

/* The same slice on a GPU: the kernel (kernels/arraysum.cu) is the loop body. */
static int arraysum_gpu(const pm_subtask_info_t *info, void *stream)
{
    const struct arraysum_conf *cf = info->conf;
    uint64_t begin, end;

    slice(cf, info->id, &begin, &end);
    return arraysum_cuda_launch(info->mem[MEM_ARRAY], info->mem[MEM_SUM], begin, end,
                                cf->repeat, cf->c, stream);
}
static const pm_cuda_fn arraysum_cuda = arraysum_gpu;
#else
static const pm_cuda_fn arraysum_cuda = NULL;
#endif

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    uint64_t n, repeat, subtasks; /* subtasks 0: one per ELEMENTS_PER_SUBTASK */
    pm_sched_t sched;
    int devices; /* mask of pm_device_kind */
    int serial, verify;
};

static void usage(void)
{
    printf(
"usage: arraysum [-n N] [--repeat R] [--subtasks N] [--sched pull|static]\n"
"                [--device cpu|gpu|all] [--no-serial] [--verify] [--help]\n"
"\n"
"Applies R times, in place, to every element x of an int32 array\n"
"    x = (int32_t)floor(C * pow(fabs(sin((double)x)), cbrt(fabs(cos((double)x)))))\n"
"with C = %.0f, then sums the array as int64 (in pmlib: PM_REDUCE_SUM on\n"
"PM_INT64). The array starts as x[i] = (int32_t)(i %% 100003). Times exclude\n"
"filling the array; the pmlib time covers pm_task_submit + pm_task_wait.\n"
"\n"
"  -n N             elements (default %u); 6e7, 60M and 1.5k work too\n"
"  --repeat R       times f is applied (default %u)\n"
"  --subtasks N     subtasks (default: one per %u elements)\n"
"  --sched P        pull (dynamic) or static (equal shares); default: the\n"
"                   PMLIB_SCHED environment variable, else pull\n"
"  --device D       cpu, gpu or all (default all: every CPU core and GPU)\n"
"  --no-serial      skip the serial run, so no speedup is printed\n"
"  --verify         compare the pmlib array and sum with the serial ones;\n"
"                   exit 1 if they differ\n"
"\n"
"Environment: PMLIB_NCPU (CPU stubs per host, default one per core),\n"
"PMLIB_SCHED (policy when --sched is not given). Under mpirun every host\n"
"takes part; host 0 owns the data and prints the results.\n",
           DEFAULT_C, DEFAULT_N, DEFAULT_REPEAT, ELEMENTS_PER_SUBTASK);
}

/* --sched and --device values. */
static void parse_choice(const char *opt, const char *val, struct options *o)
{
    if (val == NULL)
        app_usage_error("arraysum", "%s needs a value", opt);
    if (strcmp(opt, "--sched") == 0 && strcmp(val, "pull") == 0)
        o->sched = PM_SCHED_PULL;
    else if (strcmp(opt, "--sched") == 0 && strcmp(val, "static") == 0)
        o->sched = PM_SCHED_STATIC_EQUAL;
    else if (strcmp(opt, "--device") == 0 && strcmp(val, "cpu") == 0)
        o->devices = PM_DEVICE_CPU;
    else if (strcmp(opt, "--device") == 0 && strcmp(val, "gpu") == 0)
        o->devices = PM_DEVICE_GPU;
    else if (strcmp(opt, "--device") == 0 && strcmp(val, "all") == 0)
        o->devices = PM_DEVICE_ANY;
    else
        app_usage_error("arraysum", "%s: unknown value '%s'", opt, val);
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){DEFAULT_N, DEFAULT_REPEAT, 0, PM_SCHED_DEFAULT,
                          PM_DEVICE_ANY, 1, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "-n") == 0) {
            o->n = app_size_arg("arraysum", a, val);
            i++;
        } else if (strcmp(a, "--repeat") == 0) {
            o->repeat = app_size_arg("arraysum", a, val);
            i++;
        } else if (strcmp(a, "--subtasks") == 0) {
            o->subtasks = app_size_arg("arraysum", a, val);
            i++;
            if (o->subtasks == 0)
                app_usage_error("arraysum", "--subtasks must be at least 1");
        } else if (strcmp(a, "--sched") == 0 || strcmp(a, "--device") == 0) {
            parse_choice(a, val, o);
            i++;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else {
            app_usage_error("arraysum", "unknown option '%s'", a);
        }
    }
    if (o->n == 0 || o->n > SIZE_MAX / sizeof(int32_t))
        app_usage_error("arraysum", "-n must be at least 1 and the array "
                        "must fit in memory");
    if (o->verify && !o->serial)
        app_usage_error("arraysum", "--verify needs the serial run; "
                        "drop --no-serial");
    if (o->devices == PM_DEVICE_GPU && arraysum_cuda == NULL)
        app_usage_error("arraysum", "this build has no CUDA support; "
                        "use --device cpu");
}

/* ------------------------------------------------------------------------ */
/* Host 0: run both versions and compare                                     */
/* ------------------------------------------------------------------------ */

/*
 * Runs the task once; returns the seconds spent in submit + wait and its
 * stats in *st.
 */
static double run_pmlib(const struct options *o, const struct arraysum_conf *cf,
                        pm_memory_t array, pm_memory_t sum,
                        pm_task_stats_t *st)
{
    pm_task_desc_t desc;
    pm_task_t task;
    double t0, seconds;

    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "arraysum";
    desc.subtasks = subtask_count(cf);
    desc.conf = cf;
    desc.conf_bytes = sizeof *cf;
    desc.sched = o->sched;
    desc.devices = o->devices;
    APP_CHECK(pm_task_desc_add(&desc, array, PM_READ_WRITE)); /* MEM_ARRAY */
    APP_CHECK(pm_task_desc_add(&desc, sum, PM_WRITE));        /* MEM_SUM */
    APP_CHECK(pm_task_desc_reduce(&desc, MEM_SUM, PM_REDUCE_SUM, PM_INT64));

    t0 = app_now();
    APP_CHECK(pm_task_submit(&desc, &task));
    APP_CHECK(pm_task_wait(task));
    seconds = app_now() - t0;

    app_add_stats(st, task);
    printf("pmlib:  %.3f s  sum=%" PRId64 "  subtasks: cpu=%" PRIu64
           " gpu=%" PRIu64 " remote=%" PRIu64 "  stubs=%d steals=%" PRIu64 "\n",
           seconds, *(int64_t *)pm_memory_data(sum), st->subtasks_cpu,
           st->subtasks_gpu, st->subtasks_remote, st->stubs, st->steals);
    app_print_moved(st);
    APP_CHECK(pm_task_release(task));
    return seconds;
}

/* Compares bit for bit; prints what differs. */
static int same_result(const int32_t *x, int64_t sum, const int32_t *ref,
                       int64_t ref_sum, uint64_t n)
{
    uint64_t bad = 0, first = 0;

    for (uint64_t i = 0; i < n; i++)
        if (x[i] != ref[i] && bad++ == 0)
            first = i;
    if (bad > 0)
        printf("verify: %" PRIu64 " elements differ; first x[%" PRIu64
               "] = %" PRId32 ", serial %" PRId32 "\n",
               bad, first, x[first], ref[first]);
    if (sum != ref_sum)
        printf("verify: sum %" PRId64 ", serial %" PRId64 "\n", sum, ref_sum);
    return bad == 0 && sum == ref_sum;
}

/* Returns the serial run's seconds, or -1 when it is skipped. */
static double run_serial(const struct options *o, const struct arraysum_conf *cf,
                         int32_t **ref, int64_t *ref_sum)
{
    double t0, seconds;

    if (!o->serial)
        return -1;
    *ref = malloc(cf->n * sizeof **ref);
    if (*ref == NULL) {
        fprintf(stderr, "arraysum: no memory for the serial copy; "
                "try --no-serial or a smaller -n\n");
        exit(1);
    }
    fill(*ref, cf->n);
    t0 = app_now();
    *ref_sum = arraysum_serial(*ref, cf->n, cf->repeat, cf->c);
    seconds = app_now() - t0;
    printf("serial: %.3f s  sum=%" PRId64 "\n", seconds, *ref_sum);
    return seconds;
}

static int run(const struct options *o)
{
    uint64_t want = o->subtasks > 0 ? o->subtasks
                    : (o->n + ELEMENTS_PER_SUBTASK - 1) / ELEMENTS_PER_SUBTASK;
    struct arraysum_conf cf = {o->n, (o->n + want - 1) / want, o->repeat,
                               DEFAULT_C};
    pm_memory_t array, sum;
    pm_task_stats_t st = {0};
    int32_t *ref = NULL;
    int64_t ref_sum = 0;
    double serial_s, pmlib_s;
    const char *verdict = "skipped";
    int ncpu;

    APP_CHECK(pm_device_count(PM_DEVICE_CPU, &ncpu));
    printf("arraysum: n=%" PRIu64 " repeat=%" PRIu64 " C=%.0f subtasks=%" PRIu64
           " (%" PRIu64 " elements each) hosts=%d cpus_host0=%d\n",
           cf.n, cf.repeat, cf.c, subtask_count(&cf),
           cf.per_subtask, pm_host_count(), ncpu);

    serial_s = run_serial(o, &cf, &ref, &ref_sum);

    APP_CHECK(pm_memory_create(cf.n * sizeof(int32_t), &array));
    APP_CHECK(pm_memory_create(sizeof(int64_t), &sum));
    fill(pm_memory_data(array), cf.n);
    APP_CHECK(pm_memory_touch(array)); /* we wrote it through the host pointer */
    pmlib_s = run_pmlib(o, &cf, array, sum, &st);

    if (o->verify) {
        verdict = same_result(pm_memory_data(array),
                              *(int64_t *)pm_memory_data(sum), ref, ref_sum,
                              cf.n) ? "OK" : "MISMATCH";
        printf("verify: %s\n", verdict);
    }
    app_print_result("arraysum", cf.n, serial_s, pmlib_s, &st, verdict);
    APP_CHECK(pm_memory_release(sum));
    APP_CHECK(pm_memory_release(array));
    free(ref);
    return strcmp(verdict, "MISMATCH") == 0;
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
    cb.subscribe = arraysum_subscribe;
    cb.cpu = arraysum_cpu;
    if (opt.devices & PM_DEVICE_GPU) /* registering it readies the GPUs */
        cb.cuda = arraysum_cuda;
    APP_CHECK(pm_callbacks_register("arraysum", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
    return status;
}
