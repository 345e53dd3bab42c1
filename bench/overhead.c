/*
 * overhead: what pmlib costs per subtask when the subtask does nothing.
 *
 * Submits one task of N empty subtasks (no memories, no subscriptions, a CPU
 * callback that returns 0) and divides the time of submit + wait by N. Each
 * policy runs R times; the best run shows the floor, the median the typical.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "pmlib.h"

#define DEFAULT_N 1000000u
#define DEFAULT_RUNS 5u
#define MAX_RUNS 1000u

struct options {
    uint64_t n, runs;
    int pull, stat; /* which policies to measure */
};

static int empty_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    return 0;
}

static void usage(void)
{
    printf(
"usage: overhead [-n N] [--runs R] [--sched pull|static|both] [--help]\n"
"\n"
"Measures pmlib's cost per subtask: one task of N empty subtasks (default\n"
"%u; 1e6 and 1M work too), no memories, a CPU callback that returns 0.\n"
"Prints, per policy, the time of pm_task_submit + pm_task_wait divided by N\n"
"in microseconds: the best and the median of R runs (default %u).\n"
"\n"
"Environment: PMLIB_NCPU (CPU stubs per host, default one per core).\n",
           DEFAULT_N, DEFAULT_RUNS);
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){DEFAULT_N, DEFAULT_RUNS, 1, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "-n") == 0) {
            o->n = app_size_arg("overhead", a, val);
            i++;
        } else if (strcmp(a, "--runs") == 0) {
            o->runs = app_size_arg("overhead", a, val);
            i++;
        } else if (strcmp(a, "--sched") == 0 && val != NULL &&
                   (!strcmp(val, "pull") || !strcmp(val, "static") ||
                    !strcmp(val, "both"))) {
            o->pull = strcmp(val, "static") != 0;
            o->stat = strcmp(val, "pull") != 0;
            i++;
        } else if (strcmp(a, "--sched") == 0) {
            app_usage_error("overhead", "--sched takes pull, static or both");
        } else {
            app_usage_error("overhead", "unknown option '%s'", a);
        }
    }
    if (o->n == 0)
        app_usage_error("overhead", "-n must be at least 1");
    if (o->runs == 0 || o->runs > MAX_RUNS)
        app_usage_error("overhead", "--runs must be between 1 and %u",
                        MAX_RUNS);
}

/* Seconds for one task of n empty subtasks, submit to completion. */
static double run_once(uint64_t n, pm_sched_t sched)
{
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t task;
    double t0, seconds;

    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "empty";
    desc.subtasks = n;
    desc.sched = sched;
    desc.devices = PM_DEVICE_CPU; /* there is no CUDA callback */

    t0 = app_now();
    APP_CHECK(pm_task_submit(&desc, &task));
    APP_CHECK(pm_task_wait(task));
    seconds = app_now() - t0;
    /* A figure this small is only worth printing if every subtask ran. */
    APP_CHECK(pm_task_stats(task, &st));
    if (st.subtasks != n) {
        fprintf(stderr, "overhead: the task ran %" PRIu64 " of %" PRIu64
                " subtasks\n", st.subtasks, n);
        exit(1);
    }
    APP_CHECK(pm_task_release(task));
    return seconds;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static void measure(const char *name, pm_sched_t sched, const struct options *o)
{
    double t[MAX_RUNS], best_us, median_us;
    size_t runs = (size_t)o->runs;

    for (size_t r = 0; r < runs; r++)
        t[r] = run_once(o->n, sched);
    qsort(t, runs, sizeof t[0], cmp_double);
    best_us = t[0] * 1e6 / (double)o->n;
    median_us = (t[(runs - 1) / 2] + t[runs / 2]) / 2 * 1e6 / (double)o->n;
    printf("sched=%-6s  best %.4g us/subtask  median %.4g us/subtask"
           "  (best run %.3f ms)\n", name, best_us, median_us, t[0] * 1e3);
    printf("result app=overhead sched=%s n=%" PRIu64 " runs=%zu best_us=%.6f"
           " median_us=%.6f\n", name, o->n, runs, best_us, median_us);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct options opt;
    pm_callbacks_t cb;
    int ncpu;

    parse_options(argc, argv, &opt);
    APP_CHECK(pm_init(&argc, &argv));
    APP_CHECK(pm_callbacks_init(&cb));
    cb.cpu = empty_cpu;
    APP_CHECK(pm_callbacks_register("empty", &cb));

    if (pm_host_id() == 0) {
        APP_CHECK(pm_device_count(PM_DEVICE_CPU, &ncpu));
        printf("overhead: %" PRIu64 " empty subtasks, %" PRIu64 " runs per "
               "policy, pmlib %s, hosts=%d cpus_host0=%d\n", opt.n, opt.runs,
               pm_version(), pm_host_count(), ncpu);
        if (opt.stat)
            measure("static", PM_SCHED_STATIC_EQUAL, &opt);
        if (opt.pull)
            measure("pull", PM_SCHED_PULL, &opt);
    }
    APP_CHECK(pm_finalize());
    return 0;
}
