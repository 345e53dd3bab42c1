/*
 * Fine-grained iterative task graphs (run with 1 and 3 hosts).
 *
 * Three stencil graphs of different widths advance STEPS timesteps each; a
 * timestep of a graph is one task of 1 to 4 subtasks (the count changes
 * with the timestep), each subtask owning a contiguous block of points:
 *
 *   new[p] = mix(old[p-1] + 3 old[p] + 5 old[p+1] + t + g) (+ cross[p % w'])
 *
 * with missing neighbours at the edges counting 0. Each graph keeps its
 * points in two memories, written on even and odd timesteps (double
 * buffering: the task of t reads the memory of t-1 and writes that of t,
 * which the task of t-1 read). Every seventh timestep, graph g > 0 also
 * reads the memory graph g-1 wrote at the same timestep (cross), which
 * orders tasks of different graphs.
 *
 * A fourth graph is mapped point by point: each of its 6 points has two
 * memories of 8 words, and the task of point p at timestep t is one subtask
 * that reads the memories of points p-1, p and p+1 (periodic) at t-1 and
 * writes its own at t.
 *
 * Everything is submitted before waiting (several thousand tasks in
 * flight); host 0 then waits for all and compares every memory with a
 * serial computation of the same graphs. It prints FINEGRAIN-OK and exits 0
 * when all hold; the first wrong word is printed otherwise.
 *
 * Usage: finegrain [STEPS]  (default 600)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pmlib.h"

#define NSTEN 3
#define NPOINTS 6
#define PWORDS 8

static const size_t sten_width[NSTEN] = {40, 64, 97};

/* A stencil timestep's configuration: identical bytes on every host. */
typedef struct sten_conf {
    uint32_t graph, cross; /* cross: memory 2 is graph-1's buffer of this step */
    uint64_t t;
} sten_conf_t;

typedef struct point_conf {
    uint64_t t, point;
} point_conf_t;

static uint64_t sten_value(const sten_conf_t *c, size_t w, size_t p, const uint64_t *old,
                           const uint64_t *cross, size_t cross_w)
{
    uint64_t left = p > 0 ? old[p - 1] : 0, right = p + 1 < w ? old[p + 1] : 0;
    uint64_t v = mix(left + 3 * old[p] + 5 * right + c->t + c->graph);

    if (cross != NULL)
        v += cross[p % cross_w];
    return v;
}

static void block(uint64_t id, uint64_t count, size_t w, size_t *lo, size_t *hi)
{
    *lo = (size_t)(id * w / count);
    *hi = (size_t)((id + 1) * w / count);
}

/* Memory 0: the old buffer (read), 1: the new one (written), 2: cross. */
static int sten_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const sten_conf_t *c = info->conf;
    size_t w = info->mem_bytes[0] / 8, lo, hi, rlo, rhi;
    int rc;

    if (c == NULL || info->conf_bytes != sizeof *c)
        return -1;
    block(info->id, info->count, w, &lo, &hi);
    rlo = lo > 0 ? lo - 1 : 0;
    rhi = hi < w ? hi + 1 : w;
    rc = pm_subscribe(sub, 0, PM_READ, rlo * 8, (rhi - rlo) * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, 1, PM_WRITE, lo * 8, (hi - lo) * 8);
    if (rc == 0 && c->cross)
        rc = pm_subscribe(sub, 2, PM_READ, 0, info->mem_bytes[2]);
    return rc;
}

static int sten_cpu(const pm_subtask_info_t *info)
{
    const sten_conf_t *c = info->conf;
    size_t w = info->mem_bytes[0] / 8, lo, hi;
    const uint64_t *old = info->mem[0], *cross = c->cross ? info->mem[2] : NULL;
    uint64_t *out = info->mem[1];

    block(info->id, info->count, w, &lo, &hi);
    for (size_t p = lo; p < hi; p++)
        out[p] = sten_value(c, w, p, old, cross, c->cross ? info->mem_bytes[2] / 8 : 1);
    return 0;
}

static void point_value(const point_conf_t *c, const uint64_t *const in[3], uint64_t *out)
{
    for (size_t j = 0; j < PWORDS; j++)
        out[j] = mix(in[0][j] + 7 * in[1][(j + 1) % PWORDS] + 11 * in[2][j] + c->t * 131 + c->point);
}

/* Memories 0..2: points p-1, p, p+1 at t-1 (read); 3: point p at t. */
static int point_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = 0;

    (void)info;
    for (int m = 0; m < 3 && rc == 0; m++)
        rc = pm_subscribe(sub, m, PM_READ, 0, PWORDS * 8);
    return rc == 0 ? pm_subscribe(sub, 3, PM_WRITE, 0, PWORDS * 8) : rc;
}

static int point_cpu(const pm_subtask_info_t *info)
{
    const uint64_t *in[3] = {info->mem[0], info->mem[1], info->mem[2]};

    if (info->conf == NULL || info->conf_bytes != sizeof(point_conf_t))
        return -1;
    point_value(info->conf, in, info->mem[3]);
    return 0;
}

/* ---- host 0 ---- */

struct state {
    pm_memory_t sten[NSTEN][2], pts[NPOINTS][2];
    uint64_t *ref_sten[NSTEN][2], ref_pts[NPOINTS][2][PWORDS];
};

static int submit(pm_task_desc_t *d, pm_task_t *tasks, size_t *n, const char *what, long t)
{
    int rc = pm_task_submit(d, &tasks[*n]);

    if (rc != 0)
        return fail("%s task of timestep %ld not submitted: %s", what, t, pm_errname(rc));
    (*n)++;
    return 0;
}

/* Submits timestep t of every graph and computes it serially too. */
static int step(struct state *s, long t, pm_task_t *tasks, size_t *n)
{
    int cur = (int)(t & 1), old = cur ^ 1, rc;
    pm_task_desc_t d;

    for (uint32_t g = 0; g < NSTEN; g++) {
        sten_conf_t c = {g, g > 0 && t % 7 == 0, (uint64_t)t};
        size_t w = sten_width[g];

        pm_task_desc_init(&d);
        d.callbacks = "finegrain-stencil";
        d.subtasks = 1 + (uint64_t)((t + g) % 4);
        d.conf = &c;
        d.conf_bytes = sizeof c;
        pm_task_desc_add(&d, s->sten[g][old], PM_READ);
        pm_task_desc_add(&d, s->sten[g][cur], PM_WRITE);
        if (c.cross)
            pm_task_desc_add(&d, s->sten[g - 1][cur], PM_READ);
        if ((rc = submit(&d, tasks, n, "a stencil", t)) != 0)
            return rc;
        for (size_t p = 0; p < w; p++)
            s->ref_sten[g][cur][p] =
                sten_value(&c, w, p, s->ref_sten[g][old], c.cross ? s->ref_sten[g - 1][cur] : NULL,
                           c.cross ? sten_width[g - 1] : 1);
    }
    for (int p = 0; p < NPOINTS; p++) {
        point_conf_t c = {(uint64_t)t, (uint64_t)p};
        int nb[3] = {(p + NPOINTS - 1) % NPOINTS, p, (p + 1) % NPOINTS};
        const uint64_t *in[3];

        pm_task_desc_init(&d);
        d.callbacks = "finegrain-point";
        d.subtasks = 1;
        d.conf = &c;
        d.conf_bytes = sizeof c;
        for (int k = 0; k < 3; k++) {
            pm_task_desc_add(&d, s->pts[nb[k]][old], PM_READ);
            in[k] = s->ref_pts[nb[k]][old];
        }
        pm_task_desc_add(&d, s->pts[p][cur], PM_WRITE);
        if ((rc = submit(&d, tasks, n, "a point", t)) != 0)
            return rc;
        point_value(&c, in, s->ref_pts[p][cur]);
    }
    return 0;
}

static int compare(struct state *s)
{
    for (int g = 0; g < NSTEN; g++)
        for (int b = 0; b < 2; b++) {
            const uint64_t *m = pm_memory_data(s->sten[g][b]);
            for (size_t p = 0; p < sten_width[g]; p++)
                if (m[p] != s->ref_sten[g][b][p])
                    return fail("stencil graph %d buffer %d point %zu is %016llx, want %016llx",
                                g, b, p, (unsigned long long)m[p],
                                (unsigned long long)s->ref_sten[g][b][p]);
        }
    for (int p = 0; p < NPOINTS; p++)
        for (int b = 0; b < 2; b++) {
            const uint64_t *m = pm_memory_data(s->pts[p][b]);
            for (size_t j = 0; j < PWORDS; j++)
                if (m[j] != s->ref_pts[p][b][j])
                    return fail("point graph point %d buffer %d word %zu is %016llx, want %016llx",
                                p, b, j, (unsigned long long)m[j],
                                (unsigned long long)s->ref_pts[p][b][j]);
        }
    return 0;
}

static int create(pm_memory_t *m, uint64_t *ref, size_t words, uint64_t seed)
{
    uint64_t *p;

    if (pm_memory_create(words * 8, m) != 0 || (p = pm_memory_data(*m)) == NULL)
        return fail("a memory of %zu words was not created", words);
    for (size_t i = 0; i < words; i++)
        p[i] = ref[i] = mix(seed * 1000 + i);
    if (pm_memory_touch(*m) != 0)
        return fail("pm_memory_touch failed");
    return 0;
}

static int run(long steps)
{
    struct state *s = calloc(1, sizeof *s);
    size_t per_step = NSTEN + NPOINTS, n = 0;
    pm_task_t *tasks = calloc((size_t)steps * per_step, sizeof *tasks);
    uint64_t remote = 0, subtasks = 0;
    int rc = 0;

    if (s == NULL || tasks == NULL)
        return fail("out of memory");
    for (int g = 0; g < NSTEN && rc == 0; g++)
        for (int b = 0; b < 2 && rc == 0; b++) {
            s->ref_sten[g][b] = malloc(sten_width[g] * 8);
            rc = s->ref_sten[g][b] == NULL ? fail("out of memory")
                                           : create(&s->sten[g][b], s->ref_sten[g][b],
                                                    sten_width[g], (uint64_t)(g * 2 + b));
        }
    for (int p = 0; p < NPOINTS && rc == 0; p++)
        for (int b = 0; b < 2 && rc == 0; b++)
            rc = create(&s->pts[p][b], s->ref_pts[p][b], PWORDS, (uint64_t)(100 + p * 2 + b));

    for (long t = 1; t <= steps && rc == 0; t++)
        rc = step(s, t, tasks, &n);
    int wrc = pm_task_wait_all();
    if (wrc != 0 && rc == 0)
        rc = fail("pm_task_wait_all: %s", pm_errname(wrc));
    for (size_t i = 0; i < n; i++) {
        pm_task_stats_t st;
        int trc = pm_task_wait(tasks[i]);

        if (trc != 0 && rc == 0)
            rc = fail("task %zu failed: %s", i, pm_errname(trc));
        if (pm_task_stats(tasks[i], &st) == 0) {
            remote += st.subtasks_remote;
            subtasks += st.subtasks;
        }
        pm_task_release(tasks[i]);
    }
    if (rc == 0)
        rc = compare(s);
    if (rc == 0)
        printf("ok: %zu tasks (%llu subtasks, %llu on other hosts) submitted before waiting "
               "equal the serial computation\n",
               n, (unsigned long long)subtasks, (unsigned long long)remote);
    if (rc == 0 && pm_host_count() > 1 && remote == 0)
        rc = fail("no subtask ran on another host");

    for (int g = 0; g < NSTEN; g++)
        for (int b = 0; b < 2; b++) {
            if (s->sten[g][b].id)
                pm_memory_release(s->sten[g][b]);
            free(s->ref_sten[g][b]);
        }
    for (int p = 0; p < NPOINTS; p++)
        for (int b = 0; b < 2; b++)
            if (s->pts[p][b].id)
                pm_memory_release(s->pts[p][b]);
    free(tasks);
    free(s);
    return rc;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    long steps = 600;
    int rc;

    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = sten_subscribe;
    cb.cpu = sten_cpu;
    rc = pm_callbacks_register("finegrain-stencil", &cb);
    cb.subscribe = point_subscribe;
    cb.cpu = point_cpu;
    if (rc == 0)
        rc = pm_callbacks_register("finegrain-point", &cb);
    if (rc != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    if (argc > 1)
        steps = atol(argv[1]);
    if (steps < 1) {
        fprintf(stderr, "usage: finegrain [STEPS], STEPS >= 1\n");
        pm_finalize();
        return 2;
    }
    rc = run(steps);
    if (rc == 0)
        printf("FINEGRAIN-OK\n");
    fflush(stdout);
    if (pm_finalize() != 0)
        rc = 1;
    return rc;
}
