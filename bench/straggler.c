/*
 * straggler: what one slow stub costs a task. Each subtask sleeps --us
 * microseconds, on stub 1 --slow times longer (a core taken by another
 * program, say). Runs the task --runs times with straggler copies (the
 * default) and with PM_TASK_NO_MULTI_ASSIGN, checks every result against
 * the serial loop (each under a callback set of its own, so that neither
 * learns from the other), and prints the slowest and the mean time of each
 * beside the fast stub's time for the whole task alone (subtasks x one
 * sleep, timed here).
 * Run with at least 2 CPU stubs (PMLIB_NCPU=2 or more).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "appcommon.h"
#include "pmlib.h"

static long base_us = 100, slow = 100;

static void nap(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int st_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = pm_subscribe(sub, 0, PM_READ, info->id * sizeof(double), sizeof(double));
    return rc != 0 ? rc : pm_subscribe(sub, 1, PM_WRITE, info->id * sizeof(double), sizeof(double));
}

static int st_cpu(const pm_subtask_info_t *info)
{
    nap(info->stub == 1 ? base_us * slow : base_us);
    ((double *)info->mem[1])[info->id] = 3 * ((const double *)info->mem[0])[info->id] + 1;
    return 0;
}

static void usage(void)
{
    printf("usage: straggler [-n SUBTASKS] [--us US] [--slow X] [--runs R] [--help]\n"
           "  -n      subtasks per task (default 16)\n"
           "  --us    each subtask's sleep in microseconds (default 100)\n"
           "  --slow  how many times longer stub 1 sleeps (default 100)\n"
           "  --runs  tasks of each kind (default 4)\n"
           "Run with PMLIB_NCPU=2 or more.\n");
}

/* The slowest and the mean seconds of `runs` tasks with the given flags (a
 * straggler costs only the runs in which the slow stub took a chunk); exits
 * on a wrong result. */
static double slowest_of(uint64_t n, uint64_t runs, unsigned flags, pm_memory_t in, pm_memory_t out,
                         double *mean, uint64_t *copies)
{
    double worst = 0, sum = 0;
    *copies = 0;
    for (uint64_t r = 0; r < runs; r++) {
        pm_task_desc_t d;
        pm_task_t t;
        pm_task_stats_t st;
        memset(pm_memory_data(out), 0, n * sizeof(double));
        APP_CHECK(pm_memory_touch(out));
        APP_CHECK(pm_task_desc_init(&d));
        d.callbacks = flags ? "straggler-nocopies" : "straggler"; /* a model each */
        d.subtasks = n;
        d.grain = 1;
        d.devices = PM_DEVICE_CPU;
        d.flags = flags;
        APP_CHECK(pm_task_desc_add(&d, in, PM_READ));
        APP_CHECK(pm_task_desc_add(&d, out, PM_WRITE));
        double t0 = app_now();
        APP_CHECK(pm_task_submit(&d, &t));
        APP_CHECK(pm_task_wait(t));
        double s = app_now() - t0;
        APP_CHECK(pm_task_stats(t, &st));
        APP_CHECK(pm_task_release(t));
        *copies += st.multi_assigned;
        const double *x = pm_memory_data(in), *y = pm_memory_data(out);
        for (uint64_t i = 0; i < n; i++)
            if (y[i] != 3 * x[i] + 1) {
                fprintf(stderr, "straggler: subtask %" PRIu64 " wrong\n", i);
                exit(1);
            }
        sum += s;
        if (s > worst)
            worst = s;
    }
    *mean = sum / (double)runs;
    return worst;
}

int main(int argc, char **argv)
{
    uint64_t n = 16, runs = 4, us = 100, times = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        } else if (strcmp(a, "-n") == 0) {
            n = app_size_arg("straggler", a, val);
        } else if (strcmp(a, "--us") == 0) {
            us = app_size_arg("straggler", a, val);
        } else if (strcmp(a, "--slow") == 0) {
            times = app_size_arg("straggler", a, val);
        } else if (strcmp(a, "--runs") == 0) {
            runs = app_size_arg("straggler", a, val);
        } else {
            app_usage_error("straggler", "unknown option '%s'", a);
        }
        i++;
    }
    if (n < 1 || n > 1u << 20 || us < 1 || us > 1000000 || times < 1 || times > 10000 || runs < 1 ||
        runs > 100)
        app_usage_error("straggler", "-n 1 to 2^20, --us 1 to 10^6, --slow 1 to 10^4, --runs 1 to 100");
    base_us = (long)us;
    slow = (long)times;
    APP_CHECK(pm_init(&argc, &argv));
    pm_callbacks_t cb;
    APP_CHECK(pm_callbacks_init(&cb));
    cb.subscribe = st_subscribe;
    cb.cpu = st_cpu;
    APP_CHECK(pm_callbacks_register("straggler", &cb));
    APP_CHECK(pm_callbacks_register("straggler-nocopies", &cb));
    if (pm_host_id() != 0)
        return pm_finalize() != 0;
    int ncpu = 0;
    APP_CHECK(pm_device_count(PM_DEVICE_CPU, &ncpu));
    if (ncpu < 2) {
        fprintf(stderr, "straggler: needs 2 CPU stubs or more (PMLIB_NCPU=2)\n");
        pm_finalize();
        return 2;
    }
    pm_memory_t in, out;
    APP_CHECK(pm_memory_create(n * sizeof(double), &in));
    APP_CHECK(pm_memory_create(n * sizeof(double), &out));
    double *x = pm_memory_data(in);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (double)(i % 1000);
    APP_CHECK(pm_memory_touch(in));

    double t0 = app_now();
    for (uint64_t i = 0; i < n; i++)
        nap(base_us);
    double alone = app_now() - t0;
    uint64_t c_on, c_off;
    double on_mean, off_mean;
    double on = slowest_of(n, runs, 0, in, out, &on_mean, &c_on);
    double off = slowest_of(n, runs, PM_TASK_NO_MULTI_ASSIGN, in, out, &off_mean, &c_off);
    printf("%-40s %12s %12s %12s\n", "ms per task", "slowest", "mean", "slowest/alone");
    printf("%-40s %12.2f %12s %12s\n", "fast stub alone (subtasks x one sleep)", alone * 1e3, "", "1.00");
    printf("%-40s %12.2f %12.2f %12.2f\n", "with straggler copies", on * 1e3, on_mean * 1e3, on / alone);
    printf("%-40s %12.2f %12.2f %12.2f\n", "without (PM_TASK_NO_MULTI_ASSIGN)", off * 1e3, off_mean * 1e3,
           off / alone);
    printf("result app=straggler n=%" PRIu64 " stubs=%d us=%ld slow=%ld runs=%" PRIu64 " alone_ms=%.3f "
           "copies_ms=%.3f copies_mean_ms=%.3f nocopies_ms=%.3f nocopies_mean_ms=%.3f copies=%" PRIu64 "\n",
           n, ncpu, base_us, slow, runs, alone * 1e3, on * 1e3, on_mean * 1e3, off * 1e3, off_mean * 1e3,
           c_on);
    APP_CHECK(pm_memory_release(in));
    APP_CHECK(pm_memory_release(out));
    return pm_finalize() != 0;
}
