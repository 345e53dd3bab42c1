/*
 * Bytes moved between hosts per iteration of an iterative task, the shape
 * of PageRank: every subtask reads all of a large read-only input (the
 * "graph") and its slice of a small vector, and writes its slice of the
 * next vector. Run under mpirun with 2 or more hosts; prints, for each
 * iteration, bytes moved (raw) and sent (after compression) in four
 * set-ups: cache on/off x compression off/auto. "Cache off" touches the
 * input before each iteration, as a program that rewrote it would.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "pmlib.h"

struct conf {
    uint64_t input_bytes, slice;
};

enum { MEM_INPUT, MEM_X, MEM_NEXT };

static int subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const struct conf *c = info->conf;
    uint64_t off = info->id * c->slice * sizeof(double);
    pm_subscribe(sub, MEM_INPUT, PM_READ, 0, c->input_bytes);
    pm_subscribe(sub, MEM_X, PM_READ, off, c->slice * sizeof(double));
    return pm_subscribe(sub, MEM_NEXT, PM_WRITE, off, c->slice * sizeof(double));
}

static int cpu(const pm_subtask_info_t *info)
{
    const struct conf *c = info->conf;
    const unsigned char *in = info->mem[MEM_INPUT];
    const double *x = info->mem[MEM_X];
    double *next = info->mem[MEM_NEXT];
    uint64_t lo = info->id * c->slice;
    for (uint64_t i = lo; i < lo + c->slice; i++)
        next[i] = 0.5 * x[i] + in[i % c->input_bytes];
    return 0;
}

/* A graph-like input: mostly small repeating numbers, so it compresses. */
static void fill_input(unsigned char *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 7 + i / 4096) % 13);
}

static void run(const char *label, int cache, unsigned flags, uint64_t input_bytes, int iters,
                uint64_t subtasks, uint64_t slice)
{
    pm_memory_t in, x, next;
    APP_CHECK(pm_memory_create(input_bytes, &in));
    APP_CHECK(pm_memory_create(subtasks * slice * sizeof(double), &x));
    APP_CHECK(pm_memory_create(subtasks * slice * sizeof(double), &next));
    fill_input(pm_memory_data(in), input_bytes);
    APP_CHECK(pm_memory_touch(in));
    struct conf c = {input_bytes, slice};
    printf("%-22s", label);
    uint64_t moved_total = 0, sent_total = 0;
    for (int it = 0; it < iters; it++) {
        if (!cache && it > 0)
            APP_CHECK(pm_memory_touch(in));
        pm_task_desc_t d;
        pm_task_desc_init(&d);
        d.callbacks = "iterative";
        d.subtasks = subtasks;
        d.conf = &c;
        d.conf_bytes = sizeof c;
        d.flags = flags;
        APP_CHECK(pm_task_desc_add(&d, in, PM_READ));
        APP_CHECK(pm_task_desc_add(&d, it % 2 ? next : x, PM_READ));
        APP_CHECK(pm_task_desc_add(&d, it % 2 ? x : next, PM_WRITE));
        pm_task_t t;
        pm_task_stats_t st;
        APP_CHECK(pm_task_submit(&d, &t));
        APP_CHECK(pm_task_wait(t));
        APP_CHECK(pm_task_stats(t, &st));
        APP_CHECK(pm_task_release(t));
        printf(" %9.2f/%-7.2f", st.bytes_moved / 1e6, st.bytes_sent / 1e6);
        if (it > 0) {
            moved_total += st.bytes_moved;
            sent_total += st.bytes_sent;
        }
    }
    printf("  | steady: %.2f MB moved, %.2f MB sent per iteration\n",
           moved_total / 1e6 / (iters - 1), sent_total / 1e6 / (iters - 1));
    printf("result bench=iterative setup=%s cache=%d compress=%s moved_mb=%.3f sent_mb=%.3f\n", label, cache,
           flags ? "auto" : "off", moved_total / 1e6 / (iters - 1), sent_total / 1e6 / (iters - 1));
    pm_memory_release(in);
    pm_memory_release(x);
    pm_memory_release(next);
}

int main(int argc, char **argv)
{
    uint64_t input_bytes = 16000000, subtasks = 64, slice = 4096;
    int iters = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: mpirun -n H iterative [--input BYTES] [--iters N]\n\n"
                   "Bytes moved between hosts per iteration of a PageRank-shaped task: every\n"
                   "subtask reads all of a read-only input (default 16 MB) and writes a slice of\n"
                   "a vector. Prints MB moved/sent per iteration with the cache on and off and\n"
                   "compression off and automatic. Needs 2 or more hosts (mpirun -n 2).\n");
            return 0;
        } else if (strcmp(argv[i], "--input") == 0 && i + 1 < argc) {
            input_bytes = app_size_arg("iterative", "--input", argv[++i]);
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = (int)app_size_arg("iterative", "--iters", argv[++i]);
        } else {
            app_usage_error("iterative", "unknown argument '%s'", argv[i]);
        }
    }
    if (iters < 2)
        app_usage_error("iterative", "--iters must be at least 2");
    APP_CHECK(pm_init(&argc, &argv));
    pm_callbacks_t cb;
    pm_callbacks_init(&cb);
    cb.subscribe = subscribe;
    cb.cpu = cpu;
    APP_CHECK(pm_callbacks_register("iterative", &cb));
    if (pm_host_id() == 0) {
        if (pm_host_count() < 2)
            fprintf(stderr, "iterative: one host only; nothing moves (run under mpirun -n 2)\n");
        printf("iterative: input %.1f MB, %d hosts; per iteration MB moved/sent:\n", input_bytes / 1e6,
               pm_host_count());
        run("cache on, no compress", 1, 0, input_bytes, iters, subtasks, slice);
        run("cache off, no compress", 0, 0, input_bytes, iters, subtasks, slice);
        run("cache on, compress", 1, PM_TASK_COMPRESS_AUTO, input_bytes, iters, subtasks, slice);
        run("cache off, compress", 0, PM_TASK_COMPRESS_AUTO, input_bytes, iters, subtasks, slice);
    }
    return APP_CHECK(pm_finalize()) ? 1 : 0;
}
