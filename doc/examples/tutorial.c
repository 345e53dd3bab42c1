/*
 * The program of doc/tutorial.md.
 *
 * Serial loop: y[i] = a * x[i] over an int64 vector, with the sum of y and
 * an order-dependent hash of y. The pmlib version runs one slice of the
 * loop per subtask, merges the sums with a built-in reduce and the hashes
 * with a custom one, repeats the task with other factors (the input stays
 * cached on other hosts), collects the indices of the multiples of 7 by
 * redistribution, and finally (on one host) shows what a failed task
 * reports.
 *
 * Every result is compared with the serial loop; the program exits 1 if
 * one differs. Usage: tutorial [N] (N elements, default 1000000). Run it
 * alone or under mpirun: every rank runs main, host 0 does the work.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmlib.h"

#define DEFAULT_N 1000000u
#define PER_SUBTASK 10000u              /* elements per subtask */
#define HASH_BASE UINT64_C(1099511628211) /* any odd constant will do */

/* ------------------------------------------------------------------------ */
/* Step 1: the serial loop                                                   */
/* ------------------------------------------------------------------------ */

static void scale_serial(const int64_t *x, int64_t *y, uint64_t n, int64_t a,
                         int64_t *sum, uint64_t *hash)
{
    int64_t s = 0;
    uint64_t h = 0;

    for (uint64_t i = 0; i < n; i++) {
        y[i] = a * x[i];
        s += y[i];
        h = h * HASH_BASE + (uint64_t)y[i];
    }
    *sum = s;
    *hash = h;
}

/* The input; any formula of the index will do. */
static void fill(int64_t *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] = (int64_t)(i % 1009) - 504;
}

/* ------------------------------------------------------------------------ */
/* Step 2: callbacks                                                         */
/* ------------------------------------------------------------------------ */

/* The config blob: copied at submit and handed to every host. */
struct conf {
    uint64_t n;   /* elements */
    uint64_t per; /* elements per subtask; the last subtask may get fewer */
    int64_t a;    /* the factor */
};

/* Task memories, in the order the descriptor adds them. */
enum { MEM_X, MEM_Y, MEM_SUM, MEM_HASH };

/* The hash of a run of elements, and HASH_BASE to the power of its length. */
struct hash {
    uint64_t h, p;
};

static uint64_t subtask_count(const struct conf *c)
{
    return (c->n + c->per - 1) / c->per;
}

/* Subtask id owns elements [*lo, *hi). */
static void slice(const struct conf *c, uint64_t id, uint64_t *lo, uint64_t *hi)
{
    *lo = id * c->per;
    *hi = *lo + c->per < c->n ? *lo + c->per : c->n;
}

static int scale_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi;
    int rc;

    slice(info->conf, info->id, &lo, &hi);
    rc = pm_subscribe(sub, MEM_X, PM_READ, lo * sizeof(int64_t),
                      (hi - lo) * sizeof(int64_t));
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_Y, PM_WRITE, lo * sizeof(int64_t),
                          (hi - lo) * sizeof(int64_t));
    if (rc == 0) /* every subtask writes the one sum: a reduce merges them */
        rc = pm_subscribe(sub, MEM_SUM, PM_WRITE, 0, sizeof(int64_t));
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_HASH, PM_WRITE, 0, sizeof(struct hash));
    return rc;
}

static int scale_cpu(const pm_subtask_info_t *info)
{
    const struct conf *c = info->conf;
    const int64_t *x = info->mem[MEM_X]; /* natural view: x[i] is element i */
    int64_t *y = info->mem[MEM_Y];
    int64_t s = 0;
    uint64_t lo, hi, h = 0, p = 1;

    slice(c, info->id, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++) { /* the serial loop body */
        y[i] = c->a * x[i];
        s += y[i];
        h = h * HASH_BASE + (uint64_t)y[i];
        p *= HASH_BASE;
    }
    /* This subtask's sum starts at 0, the identity of PM_REDUCE_SUM. */
    *(int64_t *)info->mem[MEM_SUM] += s;
    /* A custom reduce's buffer starts as zeros: write all of it. */
    *(struct hash *)info->mem[MEM_HASH] = (struct hash){h, p};
    return 0;
}

/*
 * Appends the run in `from` to the run in `into`. pmlib passes the lower
 * subtask ids as `into`, so this order is the serial order.
 */
static int hash_reduce(const pm_reduce_info_t *info, void *into, const void *from)
{
    for (size_t off = info->offset; off < info->offset + info->length;
         off += sizeof(struct hash)) {
        struct hash *a = (struct hash *)((char *)into + off);
        const struct hash *b = (const struct hash *)((const char *)from + off);

        a->h = a->h * b->p + b->h;
        a->p = a->p * b->p;
    }
    return 0;
}

/* Redistribution: each subtask emits the indices i of its slice where
 * y[i] is a multiple of 7, as one piece keyed by its first index. */
static int sevens_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi;

    slice(info->conf, info->id, &lo, &hi);
    return pm_subscribe(sub, 0, PM_READ, lo * sizeof(int64_t),
                        (hi - lo) * sizeof(int64_t));
}

static int sevens_cpu(const pm_subtask_info_t *info)
{
    const int64_t *y = info->mem[0];
    uint64_t lo, hi, k = 0, *found;
    int rc;

    slice(info->conf, info->id, &lo, &hi);
    found = malloc((hi - lo) * sizeof *found);
    if (found == NULL)
        return 1; /* nonzero: the subtask, and so the task, fails */
    for (uint64_t i = lo; i < hi; i++)
        if (y[i] % 7 == 0)
            found[k++] = i;
    rc = k > 0 ? pm_redistribute(info, lo, found, k * sizeof *found) : 0;
    free(found);
    return rc;
}

/* A subscribe callback with an off-by-one bug: the last subtask reaches one
 * element past the end of the memory. */
static int buggy_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi;

    slice(info->conf, info->id, &lo, &hi);
    return pm_subscribe(sub, 0, PM_READ, lo * sizeof(int64_t),
                        (hi - lo + 1) * sizeof(int64_t));
}

static int nothing_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    return 0;
}

/* Every host registers the same callback sets under the same names. */
static int register_callbacks(void)
{
    pm_callbacks_t cb;
    int rc;

    pm_callbacks_init(&cb);
    cb.subscribe = scale_subscribe;
    cb.cpu = scale_cpu;
    cb.reduce = hash_reduce; /* for memories reduced with PM_REDUCE_CUSTOM */
    rc = pm_callbacks_register("scale", &cb);

    pm_callbacks_init(&cb);
    cb.subscribe = sevens_subscribe;
    cb.cpu = sevens_cpu;
    if (rc == 0)
        rc = pm_callbacks_register("sevens", &cb);

    pm_callbacks_init(&cb);
    cb.subscribe = buggy_subscribe;
    cb.cpu = nothing_cpu;
    if (rc == 0)
        rc = pm_callbacks_register("buggy", &cb);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Step 3: the task, on host 0                                               */
/* ------------------------------------------------------------------------ */

/* Stops the program when a pmlib call fails; otherwise returns its value. */
static int check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "tutorial: %s: %s (%s)\n", what, pm_strerror(rc),
                pm_errname(rc));
        exit(1);
    }
    return rc;
}

/* The memories of the scale task. */
struct mems {
    pm_memory_t x, y, sum, hash;
};

/* Runs the scale task once; fills *st with its statistics. */
static int run_scale(const struct mems *m, const struct conf *c,
                     unsigned flags, pm_task_stats_t *st)
{
    pm_task_desc_t d;
    pm_task_t task;
    int rc;

    pm_task_desc_init(&d);
    d.callbacks = "scale";
    d.subtasks = subtask_count(c);
    d.conf = c;
    d.conf_bytes = sizeof *c;
    d.flags = flags;
    check(pm_task_desc_add(&d, m->x, PM_READ), "add x");      /* MEM_X */
    check(pm_task_desc_add(&d, m->y, PM_WRITE), "add y");     /* MEM_Y */
    check(pm_task_desc_add(&d, m->sum, PM_WRITE), "add sum"); /* MEM_SUM */
    check(pm_task_desc_add(&d, m->hash, PM_WRITE), "add hash"); /* MEM_HASH */
    check(pm_task_desc_reduce(&d, MEM_SUM, PM_REDUCE_SUM, PM_INT64), "reduce sum");
    check(pm_task_desc_reduce(&d, MEM_HASH, PM_REDUCE_CUSTOM, PM_TYPE_NONE),
          "reduce hash");

    check(pm_task_submit(&d, &task), "submit"); /* returns at once */
    rc = pm_task_wait(task);                    /* 0, or why it failed */
    check(pm_task_stats(task, st), "stats");
    check(pm_task_release(task), "release");
    return rc;
}

/* Compares the pmlib results with the serial loop's; 1 when they agree. */
static int same(const struct mems *m, uint64_t n, int64_t a, const char *label)
{
    const int64_t *x = pm_memory_data(m->x);
    const int64_t *y = pm_memory_data(m->y);
    int64_t *ref = malloc(n * sizeof *ref), ref_sum;
    uint64_t ref_hash, bad = 0;
    const struct hash *h = pm_memory_data(m->hash);
    int64_t sum = *(const int64_t *)pm_memory_data(m->sum);

    if (ref == NULL) {
        fprintf(stderr, "tutorial: no memory for the serial copy\n");
        exit(1);
    }
    scale_serial(x, ref, n, a, &ref_sum, &ref_hash);
    for (uint64_t i = 0; i < n; i++)
        bad += y[i] != ref[i];
    free(ref);
    printf("%-10s a=%-3" PRId64 " sum=%-12" PRId64 " hash=%016" PRIx64 "  %s\n",
           label, a, sum, h->h,
           bad == 0 && sum == ref_sum && h->h == ref_hash ? "OK" : "MISMATCH");
    if (bad > 0)
        printf("  %" PRIu64 " elements of y differ from the serial loop\n", bad);
    if (sum != ref_sum)
        printf("  sum %" PRId64 ", serial %" PRId64 "\n", sum, ref_sum);
    if (h->h != ref_hash)
        printf("  hash %016" PRIx64 ", serial %016" PRIx64 "\n", h->h, ref_hash);
    return bad == 0 && sum == ref_sum && h->h == ref_hash;
}

static void print_traffic(const pm_task_stats_t *st, const struct mems *m)
{
    uint64_t vx, vy;

    check(pm_memory_version(m->x, &vx), "version x");
    check(pm_memory_version(m->y, &vy), "version y");
    printf("           versions x=%" PRIu64 " y=%" PRIu64 "; subtasks %" PRIu64
           " (%" PRIu64 " on other hosts); bytes between hosts %" PRIu64
           " (%" PRIu64 " sent)\n", vx, vy, st->subtasks, st->subtasks_remote,
           st->bytes_moved, st->bytes_sent);
}

/* The indices of the multiples of 7 in y, gathered by redistribution. */
static int run_sevens(const struct mems *m, const struct conf *c)
{
    pm_task_desc_t d;
    pm_task_t task;
    pm_memory_t out;
    size_t bytes = 0;
    uint64_t expect = 0, got = 0, bad = 0;
    const int64_t *y = pm_memory_data(m->y);

    pm_task_desc_init(&d);
    d.callbacks = "sevens";
    d.subtasks = subtask_count(c);
    d.conf = c;
    d.conf_bytes = sizeof *c;
    check(pm_task_desc_add(&d, m->y, PM_READ), "add y");
    check(pm_task_submit(&d, &task), "submit");
    check(pm_task_wait(task), "wait");
    check(pm_task_redistributed(task, &out), "redistributed");
    check(pm_task_release(task), "release");

    const uint64_t *idx = NULL;
    if (out.id != PM_MEMORY_NULL.id) { /* NULL when nothing was emitted */
        check(pm_memory_size(out, &bytes), "size");
        idx = pm_memory_data(out);
    }
    got = bytes / sizeof(uint64_t);
    for (uint64_t i = 0; i < c->n; i++) /* the serial loop */
        if (y[i] % 7 == 0) {
            if (expect >= got || idx[expect] != i)
                bad++;
            expect++;
        }
    printf("sevens     %" PRIu64 " indices, serial %" PRIu64 "  %s\n", got,
           expect, bad == 0 && got == expect ? "OK" : "MISMATCH");
    if (out.id != PM_MEMORY_NULL.id)
        check(pm_memory_release(out), "release out");
    return bad == 0 && got == expect;
}

/* A task that fails: what pm_task_wait and pm_task_stats report. */
static int run_buggy(const struct mems *m, const struct conf *c)
{
    pm_task_desc_t d;
    pm_task_t task;
    pm_task_stats_t st;
    int rc;

    pm_task_desc_init(&d);
    d.callbacks = "buggy";
    d.subtasks = subtask_count(c);
    d.conf = c;
    d.conf_bytes = sizeof *c;
    check(pm_task_desc_add(&d, m->x, PM_READ), "add x");
    printf("buggy      (the next error line from pmlib is expected)\n");
    fflush(stdout);
    check(pm_task_submit(&d, &task), "submit");
    rc = pm_task_wait(task);
    check(pm_task_stats(task, &st), "stats");
    check(pm_task_release(task), "release");
    printf("buggy      wait: %s (%s); failed_subtask %" PRIu64
           ", failed_host %d\n", pm_errname(rc), pm_strerror(rc),
           st.failed_subtask, st.failed_host);
    return rc == PM_ERANGE && st.failed_subtask == d.subtasks - 1 &&
           st.failed_host == 0;
}

static int run(uint64_t n)
{
    struct mems m;
    struct conf c = {n, PER_SUBTASK, 3};
    pm_task_stats_t st;
    int ok = 1;

    check(pm_memory_create(n * sizeof(int64_t), &m.x), "create x");
    check(pm_memory_create(n * sizeof(int64_t), &m.y), "create y");
    check(pm_memory_create(sizeof(int64_t), &m.sum), "create sum");
    check(pm_memory_create(sizeof(struct hash), &m.hash), "create hash");
    fill(pm_memory_data(m.x), n);
    check(pm_memory_touch(m.x), "touch x"); /* we wrote x between tasks */

    /* One task: scale, sum and hash. */
    check(run_scale(&m, &c, 0, &st), "scale");
    ok &= same(&m, n, c.a, "scale");
    print_traffic(&st, &m);

    /* The same task with other factors: x is unchanged, so hosts that
     * already hold its slices do not receive them again. */
    for (int64_t a = 4; a <= 6; a++) {
        c.a = a;
        check(run_scale(&m, &c, PM_TASK_COMPRESS_AUTO, &st), "scale");
        ok &= same(&m, n, c.a, "again");
        print_traffic(&st, &m);
    }

    /* The program changes x: it says so, and the next task resends it. */
    int64_t *x = pm_memory_data(m.x);
    for (uint64_t i = 0; i < n; i += 2)
        x[i] = -x[i];
    check(pm_memory_touch(m.x), "touch x");
    check(run_scale(&m, &c, PM_TASK_COMPRESS_AUTO, &st), "scale");
    ok &= same(&m, n, c.a, "touched");
    print_traffic(&st, &m);

    ok &= run_sevens(&m, &c);
    /* A failed task also makes pm_finalize fail on every other host, so
     * under mpirun the job would end with status 1: show it on one host. */
    if (pm_host_count() == 1)
        ok &= run_buggy(&m, &c);
    else
        printf("buggy      skipped on several hosts\n");

    check(pm_memory_release(m.hash), "release hash");
    check(pm_memory_release(m.sum), "release sum");
    check(pm_memory_release(m.y), "release y");
    check(pm_memory_release(m.x), "release x");
    printf("tutorial: %s\n", ok ? "OK" : "MISMATCH");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    uint64_t n = DEFAULT_N;
    int status = 0, host, rc;

    if (argc > 1 && (n = strtoull(argv[1], NULL, 10)) == 0) {
        fprintf(stderr, "usage: tutorial [N]  (N elements, at least 1)\n");
        return 2;
    }
    check(pm_init(&argc, &argv), "pm_init");
    check(register_callbacks(), "register"); /* on every host */
    host = pm_host_id();
    if (host == 0)
        status = run(n);
    /* Host 0: waits for its tasks. Other hosts: serve host 0 until it
     * finalizes, then report whether a task failed. */
    rc = pm_finalize();
    if (rc != 0) {
        fprintf(stderr, "tutorial: host %d: a task failed: %s\n", host,
                pm_strerror(rc));
        status = 1;
    }
    return status;
}
