/*
 * Ordering between tasks through their memories (run with 1 and 3 hosts).
 *
 * A fixed pseudo-random program of a few thousand small tasks over four
 * memories, each task 1 to 4 subtasks that own contiguous slices:
 *
 *   AXPY   Y = Y * 3 + rev(X) + k    Y read-write, X read
 *   XOR    Y = rev(X) ^ (k + i)      Y written, X read
 *   SCALE  Y = Y * 5 + k             Y read-write, alone
 *   MIX    Z = X * 7 + rev(W) + k    Z written, X and W read
 *
 * rev(X)[i] is X[n - 1 - i]: every subtask reads the whole of X, so a
 * reader that ran before an earlier writer finished, or a writer that ran
 * before an earlier reader finished, sees or leaves wrong words. uint64
 * arithmetic wraps exactly and each step depends on the one before, so any
 * ordering violation (read after write, write after read, write after
 * write) changes the final words.
 *
 * Half of the tasks use a fixed k per kind, so many tasks repeat the same
 * callbacks, subtask count, configuration bytes and memory sizes and host 0
 * reuses their subscriptions; every eighth task asks for fresh ones. Memory
 * 3 is larger, so tasks that name it have other shapes.
 *
 * Phase 1 submits every task, then waits for all. Phase 2 continues from
 * there in batches: wait for all, compare, write some words of two memories
 * through pm_memory_data and pm_memory_touch them, then the next batch.
 * Every memory must equal a serial replay of the same steps on plain
 * arrays. Host 0 prints DEPS-OK and exits 0 when everything holds; a
 * mismatch prints the first wrong word and exits 1.
 *
 * Tasks use pull scheduling; --static makes a third of them use
 * PM_SCHED_STATIC_EQUAL, where a task of fewer chunks than stubs may wait
 * for one particular stub.
 *
 * Usage: dependencies [--static] [TASKS]  (default 3000; phase 2 runs as
 * many again)
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pmlib.h"

#define NMEM 4
#define BATCHES 6

static const size_t mem_words[NMEM] = {256, 256, 256, 384};

enum kind { K_AXPY, K_XOR, K_SCALE, K_MIX, K_COUNT };

static const char *const kind_names[K_COUNT] = {"axpy", "xor", "scale", "mix"};

/* The configuration of a task: the same bytes on every host. */
typedef struct dep_conf {
    uint32_t kind;
    uint32_t pad;
    uint64_t k;
} dep_conf_t;

/* One step of the program, as submitted and as replayed. */
typedef struct op {
    dep_conf_t c;
    int out, in1, in2; /* memory numbers; in1/in2 -1 when unused */
    int subtasks;
    int repeat;        /* k is the kind's fixed one: a repeated shape */
    unsigned flags;
    pm_sched_t sched;
} op_t;

static int mix_static; /* --static */

static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* ---- the steps: the callbacks and the replay share them -------------------- */

/* Words a task works on: the smallest of its memories. */
static size_t task_words(const op_t *o)
{
    size_t n = mem_words[o->out];

    if (o->in1 >= 0 && mem_words[o->in1] < n)
        n = mem_words[o->in1];
    if (o->in2 >= 0 && mem_words[o->in2] < n)
        n = mem_words[o->in2];
    return n;
}

/* Word i of the output; y, x, w are the task memories (x, w may be NULL). */
static uint64_t step(const dep_conf_t *c, size_t n, size_t i, const uint64_t *y,
                     const uint64_t *x, const uint64_t *w)
{
    switch (c->kind) {
    case K_AXPY:
        return y[i] * 3 + x[n - 1 - i] + c->k;
    case K_XOR:
        return x[n - 1 - i] ^ (c->k + i);
    case K_SCALE:
        return y[i] * 5 + c->k;
    default:
        return x[i] * 7 + w[n - 1 - i] + c->k;
    }
}

static void slice(uint64_t id, uint64_t count, size_t n, size_t *lo, size_t *hi)
{
    *lo = (size_t)(id * n / count);
    *hi = (size_t)((id + 1) * n / count);
}

/* Words of the task from the sizes pmlib passes: the smallest memory. */
static size_t info_words(const pm_subtask_info_t *info)
{
    size_t n = info->mem_bytes[0] / 8;

    for (int m = 1; m < info->nmem; m++)
        if (info->mem_bytes[m] / 8 < n)
            n = info->mem_bytes[m] / 8;
    return n;
}

static int dep_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const dep_conf_t *c = info->conf;
    size_t n, lo, hi;
    int rc;

    if (c == NULL || info->conf_bytes != sizeof *c || c->kind >= K_COUNT)
        return -1;
    n = info_words(info);
    slice(info->id, info->count, n, &lo, &hi);
    rc = pm_subscribe(sub, 0, c->kind == K_XOR || c->kind == K_MIX ? PM_WRITE : PM_READ_WRITE,
                      lo * 8, (hi - lo) * 8);
    for (int m = 1; m < info->nmem && rc == 0; m++)
        rc = pm_subscribe(sub, m, PM_READ, 0, n * 8);
    return rc;
}

static int dep_cpu(const pm_subtask_info_t *info)
{
    const dep_conf_t *c = info->conf;
    uint64_t *y = info->mem[0];
    const uint64_t *x = info->nmem > 1 ? info->mem[1] : NULL;
    const uint64_t *w = info->nmem > 2 ? info->mem[2] : NULL;
    size_t n, lo, hi;

    if (c == NULL || y == NULL)
        return -1;
    n = info_words(info);
    slice(info->id, info->count, n, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        y[i] = step(c, n, i, y, x, w);
    return 0;
}

/* Runs a step on the plain arrays; outputs of XOR and MIX never alias their
 * inputs, and AXPY and SCALE read y[i] before writing it. */
static void replay(const op_t *o, uint64_t *ref[NMEM])
{
    size_t n = task_words(o);
    uint64_t *y = ref[o->out];
    const uint64_t *x = o->in1 >= 0 ? ref[o->in1] : NULL;
    const uint64_t *w = o->in2 >= 0 ? ref[o->in2] : NULL;

    for (size_t i = 0; i < n; i++)
        y[i] = step(&o->c, n, i, y, x, w);
}

/* ---- the program ------------------------------------------------------------- */

/* A memory other than the ones in `used` (a bit mask). */
static int pick(uint64_t *rs, unsigned used)
{
    for (;;) {
        int m = (int)(next_rand(rs) % NMEM);

        if (!(used & (1u << m)))
            return m;
    }
}

static op_t make_op(uint64_t *rs)
{
    static const uint64_t fixed_k[K_COUNT] = {11, 0x5151, 7, 1234567};
    uint64_t r = next_rand(rs);
    op_t o;

    memset(&o, 0, sizeof o);
    o.c.kind = (uint32_t)(r % K_COUNT);
    o.out = pick(rs, 0);
    o.in1 = o.c.kind == K_SCALE ? -1 : pick(rs, 1u << o.out);
    o.in2 = o.c.kind == K_MIX ? pick(rs, 1u << o.out | 1u << o.in1) : -1;
    o.subtasks = 1 + (int)((r >> 8) % 4);
    /* Half the tasks repeat a shape: same conf bytes for the same kind. */
    o.repeat = (r >> 16) % 2;
    o.c.k = o.repeat ? fixed_k[o.c.kind] : next_rand(rs);
    o.flags = (r >> 20) % 8 == 0 ? PM_TASK_FRESH_SUBSCRIPTIONS : 0;
    o.sched = mix_static && (r >> 24) % 3 == 0 ? PM_SCHED_STATIC_EQUAL : PM_SCHED_PULL;
    return o;
}

static int submit_op(const op_t *o, pm_memory_t mem[NMEM], pm_task_t *t)
{
    pm_task_desc_t d;
    int rc;

    pm_task_desc_init(&d);
    d.callbacks = "deps";
    d.subtasks = (uint64_t)o->subtasks;
    d.conf = &o->c;
    d.conf_bytes = sizeof o->c;
    d.flags = o->flags;
    d.sched = o->sched;
    rc = pm_task_desc_add(&d, mem[o->out],
                          o->c.kind == K_XOR || o->c.kind == K_MIX ? PM_WRITE : PM_READ_WRITE);
    if (rc >= 0 && o->in1 >= 0)
        rc = pm_task_desc_add(&d, mem[o->in1], PM_READ);
    if (rc >= 0 && o->in2 >= 0)
        rc = pm_task_desc_add(&d, mem[o->in2], PM_READ);
    return rc < 0 ? rc : pm_task_submit(&d, t);
}

static int compare(const char *where, pm_memory_t mem[NMEM], uint64_t *ref[NMEM])
{
    for (int m = 0; m < NMEM; m++) {
        const uint64_t *p = pm_memory_data(mem[m]);

        for (size_t i = 0; i < mem_words[m]; i++)
            if (p[i] != ref[m][i])
                return fail("%s: memory %d word %zu is %016llx, want %016llx (the serial order)",
                            where, m, i, (unsigned long long)p[i], (unsigned long long)ref[m][i]);
    }
    return 0;
}

/* Submits ops [first, first + count) without waiting, replaying each; then
 * waits for all of them and releases their handles. */
static int run_batch(const op_t *ops, int first, int count, pm_memory_t mem[NMEM],
                     uint64_t *ref[NMEM], pm_task_t *tasks, uint64_t *remote)
{
    int rc = 0, n = 0;

    for (; n < count; n++) {
        const op_t *o = &ops[first + n];

        rc = submit_op(o, mem, &tasks[n]);
        if (rc != 0) {
            rc = fail("task %d (%s) not submitted: %s", first + n, kind_names[o->c.kind],
                      pm_errname(rc));
            break;
        }
        replay(o, ref);
    }
    int wrc = pm_task_wait_all();
    if (wrc != 0 && rc == 0)
        rc = fail("pm_task_wait_all after tasks %d..%d: %s", first, first + count - 1,
                  pm_errname(wrc));
    for (int i = 0; i < n; i++) {
        int trc = pm_task_wait(tasks[i]);
        pm_task_stats_t st;

        if (trc != 0 && rc == 0)
            rc = fail("task %d (%s) failed: %s", first + i, kind_names[ops[first + i].c.kind],
                      pm_errname(trc));
        if (pm_task_stats(tasks[i], &st) == 0)
            *remote += st.subtasks_remote;
        pm_task_release(tasks[i]);
    }
    return rc;
}

/* Host 0's own writes between batches, on the memory and the replay alike. */
static int host_writes(int batch, uint64_t *rs, pm_memory_t mem[NMEM], uint64_t *ref[NMEM])
{
    for (int j = 0; j < 2; j++) {
        int m = (batch + j * 2) % NMEM;
        uint64_t *p = pm_memory_data(mem[m]);

        for (size_t i = 0; i < mem_words[m]; i++)
            if (next_rand(rs) % 4 == 0)
                p[i] = ref[m][i] = next_rand(rs);
        if (pm_memory_touch(mem[m]) != 0)
            return fail("batch %d: pm_memory_touch of memory %d failed", batch, m);
    }
    return 0;
}

static int run(int ntasks)
{
    pm_memory_t mem[NMEM] = {PM_MEMORY_NULL};
    uint64_t *ref[NMEM] = {NULL}, rs = 20240601, remote = 0;
    op_t *ops = calloc((size_t)ntasks * 2, sizeof *ops);
    pm_task_t *tasks = calloc((size_t)ntasks, sizeof *tasks);
    int rc = 0, reused = 0, fresh = 0;

    if (ops == NULL || tasks == NULL)
        rc = fail("out of memory");
    for (int m = 0; m < NMEM && rc == 0; m++) {
        uint64_t *p;

        ref[m] = malloc(mem_words[m] * 8);
        if (ref[m] == NULL || pm_memory_create(mem_words[m] * 8, &mem[m]) != 0 ||
            (p = pm_memory_data(mem[m])) == NULL) {
            rc = fail("memory %d not created", m);
            break;
        }
        for (size_t i = 0; i < mem_words[m]; i++)
            p[i] = ref[m][i] = next_rand(&rs);
        if (pm_memory_touch(mem[m]) != 0)
            rc = fail("pm_memory_touch of memory %d failed", m);
    }
    for (int i = 0; i < ntasks * 2 && rc == 0; i++) {
        ops[i] = make_op(&rs);
        reused += ops[i].repeat;
        fresh += !!(ops[i].flags & PM_TASK_FRESH_SUBSCRIPTIONS);
    }

    /* Phase 1: everything in flight at once. */
    if (rc == 0)
        rc = run_batch(ops, 0, ntasks, mem, ref, tasks, &remote);
    if (rc == 0)
        rc = compare("phase 1 (all tasks in flight)", mem, ref);
    if (rc == 0)
        printf("ok: %d tasks submitted before waiting equal the serial order\n", ntasks);

    /* Phase 2: batches with host writes and touches between them. */
    for (int b = 0; b < BATCHES && rc == 0; b++) {
        int first = ntasks + b * ntasks / BATCHES, last = ntasks + (b + 1) * ntasks / BATCHES;
        char where[64];

        rc = run_batch(ops, first, last - first, mem, ref, tasks, &remote);
        snprintf(where, sizeof where, "phase 2, after batch %d", b);
        if (rc == 0)
            rc = compare(where, mem, ref);
        if (rc == 0 && b + 1 < BATCHES)
            rc = host_writes(b, &rs, mem, ref);
    }
    if (rc == 0)
        printf("ok: %d more tasks in %d batches with host writes between them equal the serial "
               "order (%d tasks of repeated shapes, %d asking for fresh subscriptions)\n",
               ntasks, BATCHES, reused, fresh);
    if (rc == 0)
        printf("ok: %llu subtasks ran on other hosts\n", (unsigned long long)remote);
    if (rc == 0 && pm_host_count() > 1 && remote == 0)
        rc = fail("no subtask ran on another host");

    for (int m = 0; m < NMEM; m++) {
        free(ref[m]);
        if (mem[m].id)
            pm_memory_release(mem[m]);
    }
    free(ops);
    free(tasks);
    return rc;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    int ntasks = 3000, rc;

    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = dep_subscribe;
    cb.cpu = dep_cpu;
    if (pm_callbacks_register("deps", &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--static") == 0)
            mix_static = 1;
        else
            ntasks = atoi(argv[i]);
    }
    if (ntasks < BATCHES) {
        fprintf(stderr, "usage: dependencies [--static] [TASKS], TASKS >= %d\n", BATCHES);
        pm_finalize();
        return 2;
    }
    rc = run(ntasks);
    if (rc == 0)
        printf("DEPS-OK\n");
    fflush(stdout);
    if (pm_finalize() != 0)
        rc = 1;
    return rc;
}
