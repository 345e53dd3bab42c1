/*
 * pmlib_tb: a pmlib implementation of Task Bench, written against Task
 * Bench's public C API (core_c.h). Build it with build.sh in this folder.
 *
 * Two mappings of a task graph onto pmlib:
 *
 *   step   (default) one pmlib task per timestep of each graph, one subtask
 *          per point. The outputs of a timestep live in one memory of
 *          max_width slots of output_bytes_per_task bytes; two memories per
 *          graph alternate between even and odd timesteps. Subtask p of
 *          timestep t subscribes PM_READ to the slots of its dependencies in
 *          the memory of t-1 and PM_WRITE to its own slot in the memory of t.
 *          A graph without any dependency (trivial) reads nothing, and its
 *          timesteps write a ring of STEP_RING memories in turn, so that
 *          timesteps wait only for the one STEP_RING before (which wrote
 *          the same memory), as the pattern allows.
 *   point  (-pm-mapping point) one pmlib task of one subtask per point: each
 *          point has two memories of one slot (even and odd timesteps); the
 *          task of point p at timestep t adds the memories of its
 *          dependencies at t-1 as PM_READ and its own as PM_WRITE. At most
 *          15 dependencies per point (a task holds 16 memories).
 *
 * Every task is submitted without waiting; pmlib orders them through the
 * memories they share, and host 0 waits for all of them at the end. Task
 * Bench's task_graph_execute_point_scratch checks every input it is given
 * (timestep and point of the producer), so a missing or misordered
 * dependency aborts the run.
 *
 * Under an MPI launcher every rank runs this program: every rank builds the
 * graphs from the same arguments and registers the callbacks, host 0 times
 * and submits, the others serve in pm_finalize.
 *
 * Options besides Task Bench's own (which app_create parses and which this
 * program leaves alone):
 *   -pm-mapping step|point   the mapping above (default step)
 *   -pm-sched pull|static    pmlib's scheduling policy (default: pmlib's)
 *   -pm-warmup N             untimed runs of the whole graph set first
 *                            (default 1, as Task Bench's MPI implementation,
 *                            which times the second of two runs)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core_c.h"
#include "pmlib.h"

#define CHECK(call)                                                          \
    do {                                                                     \
        int check_rc_ = (call);                                              \
        if (check_rc_ < 0) {                                                 \
            fprintf(stderr, "pmlib_tb: %s failed: %s (%s)\n", #call,        \
                    pm_strerror(check_rc_), pm_errname(check_rc_));          \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

/* The dependencies of every point of every dependence set of a graph, as
 * Task Bench returns them (inclusive intervals, in its order), read once at
 * start so that callbacks do not allocate. */
struct deps {
    long nsets, width;
    long *first;  /* [nsets * width + 1]: index of the first interval */
    interval_t *iv;
};

/* Step memories of a graph without dependencies. */
#define STEP_RING 8

struct graph {
    task_graph_t g;
    struct deps d;
    int nstep;                    /* step mapping: memories in use, 2 or STEP_RING */
    pm_memory_t step_mem[STEP_RING]; /* step mapping: outputs of timestep t in t % nstep */
    pm_memory_t *point_mem[2];    /* point mapping: one memory per point */
};

/* Dependencies handled without allocating; more go through malloc. */
#define SMALL_DEPS 64

static struct graph *graphs;
static long ngraphs;
static size_t max_scratch;

/* One scratch buffer per stub thread, prepared once. */
static __thread char *scratch_buf;

static char *thread_scratch(void)
{
    if (scratch_buf == NULL && max_scratch > 0) {
        scratch_buf = aligned_alloc(64, (max_scratch + 63) / 64 * 64);
        if (scratch_buf == NULL)
            return NULL;
        task_graph_prepare_scratch(scratch_buf, max_scratch);
    }
    return scratch_buf;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void read_deps(struct graph *gr)
{
    task_graph_t g = gr->g;
    long nsets = task_graph_max_dependence_sets(g), width = g.max_width;
    long n = 0, cap = 1024;

    gr->d.nsets = nsets;
    gr->d.width = width;
    gr->d.first = malloc((size_t)(nsets * width + 1) * sizeof(long));
    gr->d.iv = malloc((size_t)cap * sizeof(interval_t));
    if (gr->d.first == NULL || gr->d.iv == NULL) {
        fprintf(stderr, "pmlib_tb: out of memory for the dependencies\n");
        exit(1);
    }
    for (long s = 0; s < nsets; s++) {
        for (long p = 0; p < width; p++) {
            interval_list_t l = task_graph_dependencies(g, s, p);
            long k = interval_list_num_intervals(l);

            gr->d.first[s * width + p] = n;
            if (n + k > cap) {
                while (n + k > cap)
                    cap *= 2;
                gr->d.iv = realloc(gr->d.iv, (size_t)cap * sizeof(interval_t));
                if (gr->d.iv == NULL) {
                    fprintf(stderr, "pmlib_tb: out of memory for the dependencies\n");
                    exit(1);
                }
            }
            for (long i = 0; i < k; i++)
                gr->d.iv[n++] = interval_list_interval(l, i);
            interval_list_destroy(l);
        }
    }
    gr->d.first[nsets * width] = n;
}

/* Visits the points of timestep t-1 that point p of timestep t depends on
 * (clamped to the points that exist at t-1), in Task Bench's order. */
struct step_shape {
    long graph, timestep, offset, width, last_offset, last_width, dset;
};

static void shape_of(long gi, long t, struct step_shape *s)
{
    task_graph_t g = graphs[gi].g;

    memset(s, 0, sizeof *s);
    s->graph = gi;
    s->timestep = t;
    s->offset = task_graph_offset_at_timestep(g, t);
    s->width = task_graph_width_at_timestep(g, t);
    s->last_offset = task_graph_offset_at_timestep(g, t - 1);
    s->last_width = task_graph_width_at_timestep(g, t - 1);
    s->dset = task_graph_dependence_set_at_timestep(g, t);
}

/* Fills up to `max` dependency points of point p into out[]; returns their
 * number (which may exceed max: then only max were written). */
static long dep_points(const struct step_shape *s, long p, long *out, long max)
{
    const struct deps *d = &graphs[s->graph].d;
    long n = 0, lo = s->last_offset, hi = s->last_offset + s->last_width - 1;

    if (s->timestep == 0)
        return 0;
    for (long i = d->first[s->dset * d->width + p]; i < d->first[s->dset * d->width + p + 1]; i++) {
        long a = d->iv[i].start > lo ? d->iv[i].start : lo;
        long b = d->iv[i].end < hi ? d->iv[i].end : hi;
        for (long q = a; q <= b; q++) {
            if (n < max)
                out[n] = q;
            n++;
        }
    }
    return n;
}

/* Runs point p of a timestep: Task Bench checks the inputs and fills the
 * output. inputs[i] points at the output of dependency i. */
static int run_point(const struct step_shape *s, long p, char *output,
                     const char **inputs, long ninputs)
{
    static __thread size_t *sizes;
    static __thread long sizes_cap;
    task_graph_t g = graphs[s->graph].g;
    char *scratch = thread_scratch();

    if (max_scratch > 0 && scratch == NULL)
        return 1;
    if (ninputs > sizes_cap) {
        long cap = ninputs > SMALL_DEPS ? ninputs : SMALL_DEPS;
        size_t *n = realloc(sizes, (size_t)cap * sizeof *n);
        if (n == NULL)
            return 1;
        sizes = n;
        sizes_cap = cap;
    }
    for (long i = 0; i < ninputs; i++)
        sizes[i] = g.output_bytes_per_task;
    task_graph_execute_point_scratch(g, s->timestep, p, output, g.output_bytes_per_task,
                                     inputs, sizes, (size_t)ninputs, scratch,
                                     g.scratch_bytes_per_task);
    return 0;
}

/* ---- step mapping: memory 0 = outputs of t-1 (absent at t = 0), the last
 * memory = outputs of t; subtask i is point offset + i. */

static int step_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const struct step_shape *s = info->conf;
    size_t bytes = graphs[s->graph].g.output_bytes_per_task;
    long p = s->offset + (long)info->id, out = info->nmem - 1;
    const struct deps *d = &graphs[s->graph].d;
    int rc;

    if (s->timestep > 0) {
        long lo = s->last_offset, hi = s->last_offset + s->last_width - 1;
        for (long i = d->first[s->dset * d->width + p]; i < d->first[s->dset * d->width + p + 1]; i++) {
            long a = d->iv[i].start > lo ? d->iv[i].start : lo;
            long b = d->iv[i].end < hi ? d->iv[i].end : hi;
            if (a > b)
                continue;
            rc = pm_subscribe(sub, 0, PM_READ, (size_t)a * bytes, (size_t)(b - a + 1) * bytes);
            if (rc != 0)
                return rc;
        }
    }
    return pm_subscribe(sub, (int)out, PM_WRITE, (size_t)p * bytes, bytes);
}

static int step_cpu(const pm_subtask_info_t *info)
{
    const struct step_shape *s = info->conf;
    size_t bytes = graphs[s->graph].g.output_bytes_per_task;
    long p = s->offset + (long)info->id;
    long small_pts[SMALL_DEPS];
    const char *small_inputs[SMALL_DEPS];
    long n = dep_points(s, p, small_pts, SMALL_DEPS);
    long *pts = small_pts;
    const char **inputs = small_inputs;
    int rc;

    if (n > SMALL_DEPS) {
        pts = malloc((size_t)n * sizeof *pts);
        inputs = malloc((size_t)n * sizeof *inputs);
        if (pts == NULL || inputs == NULL) {
            free(pts);
            free((void *)inputs);
            return 1;
        }
        dep_points(s, p, pts, n);
    }
    for (long i = 0; i < n; i++)
        inputs[i] = (const char *)info->mem[0] + (size_t)pts[i] * bytes;
    rc = run_point(s, p, (char *)info->mem[info->nmem - 1] + (size_t)p * bytes, inputs, n);
    if (n > SMALL_DEPS) {
        free(pts);
        free((void *)inputs);
    }
    return rc;
}

/* ---- point mapping: memories 0..n-1 = the dependencies' outputs at t-1,
 * memory n = this point's output at t; one subtask. */

struct point_conf {
    struct step_shape s;
    long point;
};

static int point_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc;

    for (int i = 0; i + 1 < info->nmem; i++) {
        rc = pm_subscribe(sub, i, PM_READ, 0, info->mem_bytes[i]);
        if (rc != 0)
            return rc;
    }
    return pm_subscribe(sub, info->nmem - 1, PM_WRITE, 0, info->mem_bytes[info->nmem - 1]);
}

static int point_cpu(const pm_subtask_info_t *info)
{
    const struct point_conf *c = info->conf;
    const char *inputs[PM_MAX_TASK_MEMORIES];

    for (int i = 0; i + 1 < info->nmem; i++)
        inputs[i] = info->mem[i];
    return run_point(&c->s, c->point, info->mem[info->nmem - 1], inputs, info->nmem - 1);
}

/* ---- host 0 ---- */

struct options {
    int point_mapping;
    pm_sched_t sched;
    long warmup;
};

static void parse_own_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0, PM_SCHED_DEFAULT, 1};
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "-pm-mapping") == 0) {
            if (val != NULL && strcmp(val, "step") == 0)
                o->point_mapping = 0;
            else if (val != NULL && strcmp(val, "point") == 0)
                o->point_mapping = 1;
            else {
                fprintf(stderr, "pmlib_tb: -pm-mapping takes step or point\n");
                exit(2);
            }
            i++;
        } else if (strcmp(argv[i], "-pm-sched") == 0) {
            if (val != NULL && strcmp(val, "pull") == 0)
                o->sched = PM_SCHED_PULL;
            else if (val != NULL && strcmp(val, "static") == 0)
                o->sched = PM_SCHED_STATIC_EQUAL;
            else {
                fprintf(stderr, "pmlib_tb: -pm-sched takes pull or static\n");
                exit(2);
            }
            i++;
        } else if (strcmp(argv[i], "-pm-warmup") == 0) {
            if (val == NULL || atol(val) < 0) {
                fprintf(stderr, "pmlib_tb: -pm-warmup takes a count of 0 or more\n");
                exit(2);
            }
            o->warmup = atol(val);
            i++;
        }
    }
}

static void create_memories(const struct options *o)
{
    for (long gi = 0; gi < ngraphs; gi++) {
        struct graph *gr = &graphs[gi];
        size_t bytes = gr->g.output_bytes_per_task;

        /* No interval in any dependence set: no timestep reads another. */
        gr->nstep = gr->d.first[gr->d.nsets * gr->d.width] == 0 ? STEP_RING : 2;
        for (int b = 0; !o->point_mapping && b < gr->nstep; b++)
            CHECK(pm_memory_create((size_t)gr->g.max_width * bytes, &gr->step_mem[b]));
        for (int b = 0; o->point_mapping && b < 2; b++) {
            gr->point_mem[b] = malloc((size_t)gr->g.max_width * sizeof(pm_memory_t));
            if (gr->point_mem[b] == NULL) {
                fprintf(stderr, "pmlib_tb: out of memory\n");
                exit(1);
            }
            for (long p = 0; p < gr->g.max_width; p++)
                CHECK(pm_memory_create(bytes, &gr->point_mem[b][p]));
        }
    }
}

static void release_memories(const struct options *o)
{
    for (long gi = 0; gi < ngraphs; gi++) {
        struct graph *gr = &graphs[gi];
        for (int b = 0; !o->point_mapping && b < gr->nstep; b++)
            CHECK(pm_memory_release(gr->step_mem[b]));
        for (int b = 0; o->point_mapping && b < 2; b++) {
            for (long p = 0; p < gr->g.max_width; p++)
                CHECK(pm_memory_release(gr->point_mem[b][p]));
            free(gr->point_mem[b]);
        }
    }
}

/* The point mapping needs at most PM_MAX_TASK_MEMORIES - 1 dependencies. */
static void check_point_mapping(void)
{
    long pts[PM_MAX_TASK_MEMORIES];

    for (long gi = 0; gi < ngraphs; gi++) {
        for (long t = 1; t < graphs[gi].g.timesteps; t++) {
            struct step_shape s;
            shape_of(gi, t, &s);
            for (long p = s.offset; p < s.offset + s.width; p++) {
                long n = dep_points(&s, p, pts, PM_MAX_TASK_MEMORIES);
                if (n > PM_MAX_TASK_MEMORIES - 1) {
                    fprintf(stderr,
                            "pmlib_tb: -pm-mapping point: point %ld of graph %ld has %ld "
                            "dependencies; a pmlib task holds at most %d memories, so at most "
                            "%d dependencies (use -pm-mapping step)\n",
                            p, gi, n, PM_MAX_TASK_MEMORIES, PM_MAX_TASK_MEMORIES - 1);
                    exit(2);
                }
            }
        }
    }
}

/* Submits every task of every graph, timestep by timestep, without waiting.
 * Returns the number of handles written to tasks[]. */
static size_t submit_all(const struct options *o, pm_task_t *tasks)
{
    size_t n = 0;
    long max_steps = 0;

    for (long gi = 0; gi < ngraphs; gi++)
        if (graphs[gi].g.timesteps > max_steps)
            max_steps = graphs[gi].g.timesteps;

    for (long t = 0; t < max_steps; t++) {
        for (long gi = 0; gi < ngraphs; gi++) {
            struct graph *gr = &graphs[gi];
            struct step_shape s;
            pm_task_desc_t desc;

            if (t >= gr->g.timesteps)
                continue;
            shape_of(gi, t, &s);
            if (s.width == 0)
                continue;
            if (!o->point_mapping) {
                CHECK(pm_task_desc_init(&desc));
                desc.callbacks = "taskbench-step";
                desc.subtasks = (uint64_t)s.width;
                desc.devices = PM_DEVICE_CPU;
                desc.sched = o->sched;
                desc.conf = &s;
                desc.conf_bytes = sizeof s;
                if (t > 0 && gr->nstep == 2)
                    CHECK(pm_task_desc_add(&desc, gr->step_mem[(t - 1) & 1], PM_READ));
                CHECK(pm_task_desc_add(&desc, gr->step_mem[t % gr->nstep], PM_WRITE));
                CHECK(pm_task_submit(&desc, &tasks[n++]));
                continue;
            }
            for (long p = s.offset; p < s.offset + s.width; p++) {
                long pts[PM_MAX_TASK_MEMORIES];
                long k = dep_points(&s, p, pts, PM_MAX_TASK_MEMORIES);
                struct point_conf c;

                if (k > PM_MAX_TASK_MEMORIES - 1) {
                    fprintf(stderr, "pmlib_tb: point %ld has %ld dependencies (at most %d)\n",
                            p, k, PM_MAX_TASK_MEMORIES - 1);
                    exit(2);
                }
                memset(&c, 0, sizeof c);
                c.s = s;
                c.point = p;
                CHECK(pm_task_desc_init(&desc));
                desc.callbacks = "taskbench-point";
                desc.subtasks = 1;
                desc.devices = PM_DEVICE_CPU;
                desc.sched = o->sched;
                desc.conf = &c;
                desc.conf_bytes = sizeof c;
                for (long i = 0; i < k; i++)
                    CHECK(pm_task_desc_add(&desc, gr->point_mem[(t - 1) & 1][pts[i]], PM_READ));
                CHECK(pm_task_desc_add(&desc, gr->point_mem[t & 1][p], PM_WRITE));
                CHECK(pm_task_submit(&desc, &tasks[n++]));
            }
        }
    }
    return n;
}

static size_t count_tasks(const struct options *o)
{
    size_t n = 0;
    for (long gi = 0; gi < ngraphs; gi++)
        for (long t = 0; t < graphs[gi].g.timesteps; t++) {
            long w = task_graph_width_at_timestep(graphs[gi].g, t);
            n += o->point_mapping ? (size_t)w : (w > 0);
        }
    return n;
}

static double run_once(const struct options *o, pm_task_t *tasks)
{
    double t0 = now();
    size_t n = submit_all(o, tasks);
    int rc = pm_task_wait_all();
    double elapsed = now() - t0;

    if (rc != 0) {
        fprintf(stderr, "pmlib_tb: a task failed: %s (%s)\n", pm_strerror(rc), pm_errname(rc));
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        CHECK(pm_task_release(tasks[i]));
    return elapsed;
}

int main(int argc, char **argv)
{
    struct options o;
    pm_callbacks_t cb;
    app_t app;
    task_graph_list_t list;
    int rc;

    CHECK(pm_init(&argc, &argv));
    parse_own_options(argc, argv, &o);
    app = app_create(argc, argv);
    list = app_task_graphs(app);
    ngraphs = task_graph_list_num_task_graphs(list);
    graphs = calloc((size_t)ngraphs, sizeof *graphs);
    if (graphs == NULL) {
        fprintf(stderr, "pmlib_tb: out of memory\n");
        return 1;
    }
    for (long gi = 0; gi < ngraphs; gi++) {
        graphs[gi].g = task_graph_list_task_graph(list, gi);
        if (graphs[gi].g.scratch_bytes_per_task > max_scratch)
            max_scratch = graphs[gi].g.scratch_bytes_per_task;
        read_deps(&graphs[gi]);
    }
    task_graph_list_destroy(list);

    CHECK(pm_callbacks_init(&cb));
    cb.subscribe = step_subscribe;
    cb.cpu = step_cpu;
    CHECK(pm_callbacks_register("taskbench-step", &cb));
    cb.subscribe = point_subscribe;
    cb.cpu = point_cpu;
    CHECK(pm_callbacks_register("taskbench-point", &cb));

    if (pm_host_id() == 0) {
        size_t ntasks;
        pm_task_t *tasks;
        double elapsed;

        app_display(app);
        if (o.point_mapping)
            check_point_mapping();
        ntasks = count_tasks(&o);
        tasks = malloc((ntasks > 0 ? ntasks : 1) * sizeof *tasks);
        if (tasks == NULL) {
            fprintf(stderr, "pmlib_tb: out of memory for %zu task handles\n", ntasks);
            return 1;
        }
        create_memories(&o);
        for (long w = 0; w < o.warmup; w++)
            run_once(&o, tasks);
        elapsed = run_once(&o, tasks);
        app_report_timing(app, elapsed);
        release_memories(&o);
        free(tasks);
    }
    rc = pm_finalize();
    for (long gi = 0; gi < ngraphs; gi++) {
        free(graphs[gi].d.first);
        free(graphs[gi].d.iv);
    }
    free(graphs);
    app_destroy(app);
    if (rc != 0) {
        fprintf(stderr, "pmlib_tb: pm_finalize: %s\n", pm_strerror(rc));
        return 1;
    }
    return 0;
}
