/*
 * tasks: what pmlib costs per task, the figure StarPU's tasks_overhead,
 * async_tasks_overhead and sync_tasks_overhead examples print.
 *
 *   empty   N independent tasks of one empty subtask, no memories: submit
 *           them all, then pm_task_wait_all, then release them. Also the
 *           first run alone (empty_first), whose task blocks are fresh.
 *   shared  N tasks that all read and write one 64 KiB memory, 16 subtasks
 *           each (each subscribes its own 4 KiB): they run one after the
 *           other, in submit order; submitted all before waiting.
 *   sync    N times: submit one empty task, wait for it, release it.
 *   steps   batches of 1,000 tasks of 2 subtasks, task i writing 16 bytes
 *           per subtask of memory i mod 8 with a new configuration (its
 *           step), as Task Bench's trivial graph submits them; also the
 *           program thread's CPU time per submit and per release, which
 *           the other threads running on its core do not change.
 *
 * Prints microseconds per task (submit + run + wait + release over N), the
 * submit part alone, and for `shared` the same at several counts in flight.
 */
#include <inttypes.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "pmlib.h"

#define SHARED_BYTES 65536u
#define SHARED_SUBTASKS 16u
#define STEP_RING 8
#define STEP_BATCH 1000u
#define STEP_BATCHES 20u

struct options {
    uint64_t n, runs;
    int empty, shared, sync, steps;
};

static int empty_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    return 0;
}

static int slice_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t b = SHARED_BYTES / SHARED_SUBTASKS;
    return pm_subscribe(sub, 0, PM_READ_WRITE, info->id * b, b);
}

/* steps: subtask id writes bytes 16 id .. 16 id + 15 of its task's memory. */
static int step_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 16, 16);
}

static void usage(void)
{
    printf(
"usage: tasks [-n N] [--runs R] [--only empty|shared|sync|steps] [--help]\n"
"\n"
"Measures pmlib's cost per task (default N = 100000 tasks):\n"
"  empty   N independent tasks of one empty subtask, submitted all, then\n"
"          pm_task_wait_all and pm_task_release of each; also the first run\n"
"          alone (empty_first: fresh task blocks, as a program's first burst);\n"
"  shared  N tasks reading and writing one 64 KiB memory, 16 subtasks each,\n"
"          all in flight at once (they run in submit order), at N/100, N/10\n"
"          and N tasks;\n"
"  sync    N times pm_task_submit + pm_task_wait + pm_task_release;\n"
"  steps   batches of 1000 tasks of 2 subtasks, each writing 16 bytes per\n"
"          subtask of one of 8 memories in turn, with a new configuration\n"
"          each (as Task Bench's trivial graph); also prints the program\n"
"          thread's CPU time per submit and per release (least of\n"
"          max(R, 20) batches).\n"
"Prints microseconds per task, best of R runs (default 3), and the submit\n"
"part alone. Result lines start with 'result'.\n"
"\n"
"Environment: PMLIB_NCPU (CPU stubs per host, default one per core).\n");
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){100000, 3, 1, 1, 1, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "-n") == 0) {
            o->n = app_size_arg("tasks", a, val);
            i++;
        } else if (strcmp(a, "--runs") == 0) {
            o->runs = app_size_arg("tasks", a, val);
            i++;
        } else if (strcmp(a, "--only") == 0 && val != NULL) {
            o->empty = strcmp(val, "empty") == 0;
            o->shared = strcmp(val, "shared") == 0;
            o->sync = strcmp(val, "sync") == 0;
            o->steps = strcmp(val, "steps") == 0;
            if (!o->empty && !o->shared && !o->sync && !o->steps)
                app_usage_error("tasks", "--only takes empty, shared, sync or steps");
            i++;
        } else {
            app_usage_error("tasks", "unknown option '%s'", a);
        }
    }
    if (o->n == 0 || o->runs == 0 || o->runs > 100)
        app_usage_error("tasks", "-n must be at least 1 and --runs 1 to 100");
}

struct figures {
    double total, submit;          /* seconds */
    double cpu_submit, cpu_release; /* the program thread's CPU seconds (steps) */
};

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check_stats(pm_task_t t, uint64_t subtasks)
{
    pm_task_stats_t st;

    APP_CHECK(pm_task_stats(t, &st));
    if (st.subtasks != subtasks || st.status != 0) {
        fprintf(stderr, "tasks: a task ran %" PRIu64 " of %" PRIu64 " subtasks\n",
                st.subtasks, subtasks);
        exit(1);
    }
}

/* n tasks, all submitted before waiting; mem: shared memory or NULL. */
static struct figures run_batch(uint64_t n, const pm_memory_t *mem, pm_task_t *tasks)
{
    pm_task_desc_t desc;
    struct figures f = {0};

    APP_CHECK(pm_task_desc_init(&desc));
    desc.devices = PM_DEVICE_CPU;
    if (mem != NULL) {
        desc.callbacks = "slices";
        desc.subtasks = SHARED_SUBTASKS;
        desc.grain = 1;
        APP_CHECK(pm_task_desc_add(&desc, *mem, PM_READ_WRITE));
    } else {
        desc.callbacks = "empty";
        desc.subtasks = 1;
    }
    double t0 = app_now();
    for (uint64_t i = 0; i < n; i++)
        APP_CHECK(pm_task_submit(&desc, &tasks[i]));
    double t1 = app_now();
    APP_CHECK(pm_task_wait_all());
    /* Spot checks outside the timing would cost a stats call per task in
     * it; check the first and the last, released below. */
    check_stats(tasks[0], desc.subtasks);
    check_stats(tasks[n - 1], desc.subtasks);
    for (uint64_t i = 0; i < n; i++)
        APP_CHECK(pm_task_release(tasks[i]));
    f.total = app_now() - t0;
    f.submit = t1 - t0;
    return f;
}

static struct figures run_sync(uint64_t n)
{
    pm_task_desc_t desc;
    pm_task_t t;
    struct figures f = {0};

    APP_CHECK(pm_task_desc_init(&desc));
    desc.devices = PM_DEVICE_CPU;
    desc.callbacks = "empty";
    desc.subtasks = 1;
    double t0 = app_now();
    for (uint64_t i = 0; i < n; i++) {
        double s0 = app_now();
        APP_CHECK(pm_task_submit(&desc, &t));
        f.submit += app_now() - s0;
        APP_CHECK(pm_task_wait(t));
        APP_CHECK(pm_task_release(t));
    }
    f.total = app_now() - t0;
    return f;
}

/* One batch of `steps`: STEP_BATCH tasks submitted, waited for, released. */
static struct figures run_steps(const pm_memory_t *ring, pm_task_t *tasks)
{
    struct figures f;
    double t0 = app_now(), c0 = thread_cpu();
    for (uint64_t i = 0; i < STEP_BATCH; i++) {
        pm_task_desc_t desc;
        uint64_t step = i;
        APP_CHECK(pm_task_desc_init(&desc));
        desc.callbacks = "steps";
        desc.subtasks = 2;
        desc.devices = PM_DEVICE_CPU;
        desc.conf = &step;
        desc.conf_bytes = sizeof step;
        APP_CHECK(pm_task_desc_add(&desc, ring[i % STEP_RING], PM_WRITE));
        APP_CHECK(pm_task_submit(&desc, &tasks[i]));
    }
    double t1 = app_now(), c1 = thread_cpu();
    APP_CHECK(pm_task_wait_all());
    check_stats(tasks[0], 2);
    check_stats(tasks[STEP_BATCH - 1], 2);
    double c2 = thread_cpu();
    for (uint64_t i = 0; i < STEP_BATCH; i++)
        APP_CHECK(pm_task_release(tasks[i]));
    f.cpu_release = thread_cpu() - c2;
    f.total = app_now() - t0;
    f.submit = t1 - t0;
    f.cpu_submit = c1 - c0;
    return f;
}

static void report(const char *what, uint64_t n, uint64_t runs, const struct figures *best)
{
    double us = best->total * 1e6 / (double)n, sub = best->submit * 1e6 / (double)n;
    printf("%-8s %8" PRIu64 " tasks  %8.3f us/task  (submit %.3f us/task)\n", what, n, us, sub);
    printf("result app=tasks workload=%s n=%" PRIu64 " runs=%" PRIu64 " us_per_task=%.4f"
           " submit_us=%.4f\n", what, n, runs, us, sub);
    fflush(stdout);
}

/* The smaller of two times, 0 meaning none yet. */
static double least(double a, double b)
{
    return a == 0 || (b > 0 && b < a) ? b : a;
}

/* The run with the least total; the CPU times are each the least of any run. */
static void keep_best(struct figures *best, struct figures f)
{
    double cs = least(best->cpu_submit, f.cpu_submit), cr = least(best->cpu_release, f.cpu_release);
    if (best->total == 0 || f.total < best->total)
        *best = f;
    best->cpu_submit = cs;
    best->cpu_release = cr;
}

int main(int argc, char **argv)
{
    struct options o;
    pm_callbacks_t cb;
    int ncpu;

    parse_options(argc, argv, &o);
    APP_CHECK(pm_init(&argc, &argv));
    APP_CHECK(pm_callbacks_init(&cb));
    cb.cpu = empty_cpu;
    APP_CHECK(pm_callbacks_register("empty", &cb));
    cb.subscribe = slice_subscribe;
    APP_CHECK(pm_callbacks_register("slices", &cb));
    cb.subscribe = step_subscribe;
    APP_CHECK(pm_callbacks_register("steps", &cb));

    if (pm_host_id() == 0) {
        pm_task_t *tasks = malloc((o.n > STEP_BATCH ? o.n : STEP_BATCH) * sizeof *tasks);
        if (tasks == NULL) {
            fprintf(stderr, "tasks: out of memory for %" PRIu64 " task handles\n", o.n);
            return 1;
        }
        APP_CHECK(pm_device_count(PM_DEVICE_CPU, &ncpu));
        printf("tasks: pmlib %s, hosts=%d cpus_host0=%d, best of %" PRIu64 " runs\n",
               pm_version(), pm_host_count(), ncpu, o.runs);
        if (o.empty) {
            struct figures best = {0}, first = {0};
            for (uint64_t r = 0; r < o.runs; r++) {
                struct figures f = run_batch(o.n, NULL, tasks);
                if (r == 0)
                    first = f;
                keep_best(&best, f);
            }
            report("empty", o.n, o.runs, &best);
            /* The first burst takes its task blocks fresh from the kernel,
             * as a program that submits its tasks once does. */
            report("empty_first", o.n, 1, &first);
        }
        if (o.shared) {
            pm_memory_t m;
            APP_CHECK(pm_memory_create(SHARED_BYTES, &m));
            memset(pm_memory_data(m), 0, SHARED_BYTES);
            uint64_t counts[3] = {o.n / 100, o.n / 10, o.n};
            for (int c = 0; c < 3; c++) {
                if (counts[c] == 0)
                    continue;
                struct figures best = {0};
                for (uint64_t r = 0; r < o.runs; r++)
                    keep_best(&best, run_batch(counts[c], &m, tasks));
                report("shared", counts[c], o.runs, &best);
            }
            APP_CHECK(pm_memory_release(m));
        }
        if (o.steps) {
            pm_memory_t ring[STEP_RING];
            for (int i = 0; i < STEP_RING; i++)
                APP_CHECK(pm_memory_create(32, &ring[i]));
            struct figures best = {0};
            uint64_t batches = o.runs > STEP_BATCHES ? o.runs : STEP_BATCHES;
            for (uint64_t r = 0; r < batches; r++)
                keep_best(&best, run_steps(ring, tasks));
            report("steps", STEP_BATCH, batches, &best);
            printf("steps    program thread CPU per task: submit %.3f us, release %.3f us (least of %" PRIu64
                   " batches)\n", best.cpu_submit * 1e6 / STEP_BATCH, best.cpu_release * 1e6 / STEP_BATCH,
                   batches);
            printf("result app=tasks workload=steps_cpu n=%u runs=%" PRIu64 " submit_cpu_us=%.4f"
                   " release_cpu_us=%.4f\n", STEP_BATCH, batches, best.cpu_submit * 1e6 / STEP_BATCH,
                   best.cpu_release * 1e6 / STEP_BATCH);
            for (int i = 0; i < STEP_RING; i++)
                APP_CHECK(pm_memory_release(ring[i]));
        }
        if (o.sync) {
            struct figures best = {0};
            for (uint64_t r = 0; r < o.runs; r++)
                keep_best(&best, run_sync(o.n < 20000 ? o.n : 20000));
            report("sync", o.n < 20000 ? o.n : 20000, o.runs, &best);
        }
        free(tasks);
    }
    APP_CHECK(pm_finalize());
    return 0;
}
