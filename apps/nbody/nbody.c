/*
 * nbody: all-pairs gravity (G = 1, softened) in float for N bodies, T steps.
 *
 * A step kicks every velocity by the acceleration from all bodies, then
 * drifts every position (semi-implicit Euler). In pmlib each step is a task:
 * subtask k reads the positions and masses of all bodies at step s and
 * writes the velocities and step s + 1 positions of its own block, into the
 * other of two position memories; the two swap roles every step. All T
 * tasks are submitted at once: pmlib runs them in order, since each writes
 * what the next one reads.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "appdevice.h"
#include "appio.h"
#include "nbody.h" /* nbody_gpu_step() */
#include "pmlib.h"

#define DEFAULT_N 16384u
#define VERIFY_N 2048u
#define DEFAULT_STEPS 10u
#define MAX_N (1u << 26)    /* the GPU kernel indexes bodies with int */
#define BLOCK_GRANULE 256u  /* the GPU kernel's threads per block */
#define DT 0.01f
#define EPS2 1e-4f          /* softening^2; > 0 also keeps r = 0 finite */
#define FLOPS_PER_PAIR 20.0 /* the customary count for one interaction */

/* A position (x, y, z, mass in w) or a velocity (w unused): a GPU float4. */
struct vec4 {
    float x, y, z, w;
};

/* Uniform in [-1, 1) from a hash of a draw counter: the same every run. */
static float uniform(uint64_t i)
{
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15u;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return (float)(z >> 40) / (float)(1 << 23) - 1.0f;
}

/*
 * Bodies uniform in the unit ball, total mass about 1, small random
 * velocities shifted so that the total momentum starts at (about) zero.
 */
static void init_bodies(struct vec4 *pos, struct vec4 *vel, uint64_t n)
{
    double p[3] = {0, 0, 0}, mass = 0;
    uint64_t draw = 0;

    for (uint64_t i = 0; i < n; i++) {
        float x, y, z;

        do {
            x = uniform(draw++), y = uniform(draw++), z = uniform(draw++);
        } while (x * x + y * y + z * z > 1.0f);
        pos[i] = (struct vec4){x, y, z, (1.0f + 0.5f * uniform(draw++)) / n};
        vel[i] = (struct vec4){0.1f * uniform(draw++), 0.1f * uniform(draw++),
                               0.1f * uniform(draw++), 0.0f};
        p[0] += pos[i].w * vel[i].x, p[1] += pos[i].w * vel[i].y;
        p[2] += pos[i].w * vel[i].z, mass += pos[i].w;
    }
    for (uint64_t i = 0; i < n; i++) {
        vel[i].x -= (float)(p[0] / mass);
        vel[i].y -= (float)(p[1] / mass);
        vel[i].z -= (float)(p[2] / mass);
    }
}

/*
 * The step of bodies [begin, end): the serial loop body, shared by the
 * serial reference and the CPU callback. The inner loop is a plain float
 * reduction; `omp simd` allows the compiler to vectorize it.
 */
static void step_block(const struct vec4 *pos, struct vec4 *next,
                       struct vec4 *vel, uint64_t n, uint64_t begin,
                       uint64_t end, float dt, float eps2)
{
    for (uint64_t i = begin; i < end; i++) {
        const struct vec4 p = pos[i];
        float ax = 0.0f, ay = 0.0f, az = 0.0f;

#pragma omp simd reduction(+ : ax, ay, az)
        for (uint64_t j = 0; j < n; j++) {
            float dx = pos[j].x - p.x, dy = pos[j].y - p.y, dz = pos[j].z - p.z;
            float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = pos[j].w * inv * inv * inv;

            ax += dx * s, ay += dy * s, az += dz * s;
        }
        vel[i].x += ax * dt, vel[i].y += ay * dt, vel[i].z += az * dt;
        next[i] = (struct vec4){p.x + vel[i].x * dt, p.y + vel[i].y * dt,
                                p.z + vel[i].z * dt, p.w};
    }
}

/* Serial reference; the final positions end in pos[steps % 2]. */
static void nbody_serial(struct vec4 *pos[2], struct vec4 *vel, uint64_t n,
                         uint64_t steps)
{
    for (uint64_t s = 0; s < steps; s++)
        step_block(pos[s % 2], pos[(s + 1) % 2], vel, n, 0, n, DT, EPS2);
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

struct nbody_conf {
    uint64_t n;     /* bodies */
    uint64_t block; /* bodies per subtask; the last may get fewer */
    float dt, eps2;
};

/* Task memories: positions now, next (the other buffer), velocities. */
enum { MEM_POS, MEM_NEXT, MEM_VEL };

static uint64_t subtask_count(const struct nbody_conf *cf)
{
    return (cf->n + cf->block - 1) / cf->block;
}

/* Subtask k owns bodies [begin, end). */
static void body_block(const struct nbody_conf *cf, uint64_t k,
                       uint64_t *begin, uint64_t *end)
{
    *begin = k * cf->block;
    *end = *begin + cf->block < cf->n ? *begin + cf->block : cf->n;
}

static int nbody_subscribe(pm_subscription_t *sub,
                           const pm_subtask_info_t *info)
{
    const struct nbody_conf *cf = info->conf;
    size_t sz = sizeof(struct vec4);
    uint64_t begin, end;
    int rc;

    body_block(cf, info->id, &begin, &end);
    rc = pm_subscribe(sub, MEM_POS, PM_READ, 0, cf->n * sz); /* every body */
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_NEXT, PM_WRITE, begin * sz,
                          (end - begin) * sz);
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_VEL, PM_READ_WRITE, begin * sz,
                          (end - begin) * sz);
    return rc;
}

static int nbody_cpu(const pm_subtask_info_t *info)
{
    const struct nbody_conf *cf = info->conf;
    uint64_t begin, end;

    body_block(cf, info->id, &begin, &end);
    step_block(info->mem[MEM_POS], info->mem[MEM_NEXT], info->mem[MEM_VEL],
               cf->n, begin, end, cf->dt, cf->eps2);
    return 0;
}

#if PMLIB_HAVE_CUDA
static int nbody_cuda(const pm_subtask_info_t *info, void *stream)
{
    const struct nbody_conf *cf = info->conf;
    uint64_t begin, end;

    body_block(cf, info->id, &begin, &end);
    return nbody_gpu_step(info->mem[MEM_POS], info->mem[MEM_NEXT],
                          info->mem[MEM_VEL], (int)cf->n, (int)begin,
                          (int)end, cf->dt, cf->eps2, stream);
}
#endif

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    uint64_t n, steps, block; /* n, block 0: the defaults */
    int devices, serial, verify, force;
    const char *input, *output; /* .npy files, or NULL */
};

static void usage(void)
{
    printf(
"usage: nbody [-n N | --input BODIES.npy] [--output BODIES.npy] [-f]\n"
"             [--steps T] [--block B] [--device cpu|gpu|all] [--no-serial]\n"
"             [--verify] [--help]\n"
"\n"
"Simulates N bodies under all-pairs gravity (G = 1, softening eps^2 = %g)\n"
"in float for T steps of dt = %g: each step adds a_i dt to every velocity,\n"
"  a_i = sum_j m_j (r_j - r_i) / (|r_j - r_i|^2 + eps^2)^(3/2),\n"
"then v_i dt to every position. Bodies start uniform in the unit ball with\n"
"total mass about 1 and zero total momentum. Each subtask moves B bodies;\n"
"the GPU kernel stages positions through shared memory in tiles of %u.\n"
"GFLOP/s count %.0f flops per interaction, N^2 interactions per step. The\n"
"pmlib time covers submitting the T tasks and waiting for them.\n"
"\n"
"  -n N             bodies (default %u; with --verify %u)\n"
"  --input FILE     start from these bodies instead: NumPy .npy, float32\n"
"                   ('<f4'), N x 7, a row per body: x y z vx vy vz m\n"
"                   (finite, m >= 0)\n"
"  --output FILE    write the bodies after the last step there, in the same\n"
"                   form; replaces an existing file, the input too, only\n"
"                   with -f (the input is read in full first)\n"
"  -f, --force      replace the output if it exists\n"
"  --steps T        time steps (default %u)\n"
"  --block B        bodies per subtask (default: about 16 subtasks per GPU\n"
"                   in use, else 4 per core; a multiple of %u)\n"
"  --device D       cpu, gpu or all (default all: CPU cores and GPUs)\n"
"  --no-serial      skip the serial run, so no speedup is printed\n"
"  --verify         compare with the serial run: positions and velocities\n"
"                   within 1e-3 of the largest change the run made, total\n"
"                   momentum kept within 1e-5 of sum m|v|; exit 1 if not.\n"
"                   Meant for short runs: over many steps, close encounters\n"
"                   amplify the rounding differences of GPUs (rsqrtf, order)\n"
"\n"
"Exit status: 0, 1 when --verify fails, 2 for bad arguments or files.\n"
"Environment: PMLIB_NCPU (CPU stubs per host, default one per core),\n"
"PMLIB_SCHED (pull, static or proportional), PMLIB_LOG. Under mpirun every\n"
"host takes part; host 0 owns the bodies and prints the results.\n",
           (double)EPS2, (double)DT, BLOCK_GRANULE, FLOPS_PER_PAIR, DEFAULT_N,
           VERIFY_N, DEFAULT_STEPS, BLOCK_GRANULE);
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0, DEFAULT_STEPS, 0, PM_DEVICE_ANY, 1, 0, 0, NULL,
                          NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "-n") == 0) {
            o->n = app_size_arg("nbody", a, val);
            i++;
            if (o->n == 0 || o->n > MAX_N)
                app_usage_error("nbody", "-n must be 1 to %u", MAX_N);
        } else if (strcmp(a, "--steps") == 0) {
            o->steps = app_size_arg("nbody", a, val);
            i++;
            if (o->steps == 0)
                app_usage_error("nbody", "--steps must be at least 1");
        } else if (strcmp(a, "--block") == 0) {
            o->block = app_size_arg("nbody", a, val);
            i++;
            if (o->block == 0)
                app_usage_error("nbody", "--block must be at least 1");
        } else if (strcmp(a, "--device") == 0) {
            o->devices = app_device_arg("nbody", a, val);
            i++;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0) {
            o->force = 1;
        } else if (strcmp(a, "--input") == 0 || strcmp(a, "--output") == 0) {
            if (val == NULL)
                app_usage_error("nbody", "%s needs a file name", a);
            *(a[2] == 'i' ? &o->input : &o->output) = val;
            i++;
        } else {
            app_usage_error("nbody", "unknown option '%s'", a);
        }
    }
    if (o->input != NULL && o->n != 0)
        app_usage_error("nbody", "--input gives the bodies; drop -n");
    if (o->n == 0)
        o->n = o->verify ? VERIFY_N : DEFAULT_N;
    if (o->verify && !o->serial)
        app_usage_error("nbody", "--verify needs the serial run; "
                        "drop --no-serial");
}

/* ------------------------------------------------------------------------ */
/* Host 0: run both versions and compare                                     */
/* ------------------------------------------------------------------------ */

static double gflops(const struct options *o, double seconds)
{
    double pairs = (double)o->n * (double)o->n * (double)o->steps;

    return FLOPS_PER_PAIR * pairs / seconds / 1e9;
}

/* Step s reads pos[s % 2] and writes pos[(s + 1) % 2]: the double buffer. */
static void submit_step(const struct options *o, const struct nbody_conf *cf,
                        pm_memory_t pos[2], pm_memory_t vel, uint64_t s,
                        pm_task_t *task)
{
    pm_task_desc_t desc;

    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "nbody";
    desc.subtasks = subtask_count(cf);
    desc.conf = cf;
    desc.conf_bytes = sizeof *cf;
    desc.devices = o->devices;
    APP_CHECK(pm_task_desc_add(&desc, pos[s % 2], PM_READ));   /* MEM_POS */
    APP_CHECK(pm_task_desc_add(&desc, pos[(s + 1) % 2], PM_WRITE)); /* NEXT */
    APP_CHECK(pm_task_desc_add(&desc, vel, PM_READ_WRITE));    /* MEM_VEL */
    APP_CHECK(pm_task_submit(&desc, task));
}

/*
 * Runs the T steps; returns the seconds from first submit to last wait and
 * the steps' stats, summed, in *st.
 */
static double run_pmlib(const struct options *o, const struct nbody_conf *cf,
                        pm_memory_t pos[2], pm_memory_t vel,
                        pm_task_stats_t *st)
{
    pm_task_t *tasks = malloc(o->steps * sizeof *tasks);
    double t0, seconds;

    if (tasks == NULL) {
        fprintf(stderr, "nbody: no memory for %" PRIu64 " task handles\n",
                o->steps);
        exit(1);
    }
    t0 = app_now();
    for (uint64_t s = 0; s < o->steps; s++)
        submit_step(o, cf, pos, vel, s, &tasks[s]);
    for (uint64_t s = 0; s < o->steps; s++)
        APP_CHECK(pm_task_wait(tasks[s]));
    seconds = app_now() - t0;

    printf("pmlib:  %.3f s  %.1f GFLOP/s\n", seconds, gflops(o, seconds));
    for (uint64_t s = 0; s < o->steps; s++) {
        app_add_stats(st, tasks[s]);
        APP_CHECK(pm_task_release(tasks[s]));
    }
    app_print_stats(st);
    free(tasks);
    return seconds;
}

/*
 * The serial run on copies of the start. Returns its seconds, or -1 when it
 * is skipped; ref[0..1] are its position buffers, ref[2] its velocities.
 */
static double run_serial(const struct options *o, const struct vec4 *pos0,
                         const struct vec4 *vel0, struct vec4 *ref[3])
{
    size_t bytes = o->n * sizeof(struct vec4);
    double t0, seconds;

    if (!o->serial)
        return -1;
    for (int k = 0; k < 3; k++) {
        ref[k] = malloc(bytes);
        if (ref[k] == NULL) {
            fprintf(stderr, "nbody: no memory for the serial copy; "
                    "try --no-serial or a smaller -n\n");
            exit(1);
        }
    }
    memcpy(ref[0], pos0, bytes);
    memset(ref[1], 0, bytes);
    memcpy(ref[2], vel0, bytes);
    t0 = app_now();
    nbody_serial(ref, ref[2], o->n, o->steps);
    seconds = app_now() - t0;
    printf("serial: %.3f s  %.1f GFLOP/s\n", seconds, gflops(o, seconds));
    return seconds;
}

/* The largest distance |a_i - b_i| over the bodies (w ignored). */
static double max_dist(const struct vec4 *a, const struct vec4 *b, uint64_t n)
{
    double worst = 0;

    for (uint64_t i = 0; i < n; i++) {
        double dx = a[i].x - b[i].x, dy = a[i].y - b[i].y, dz = a[i].z - b[i].z;
        double d = sqrt(dx * dx + dy * dy + dz * dz);

        if (!(d <= worst)) /* NaN wins, so that it is reported */
            worst = d;
    }
    return worst;
}

/* |total momentum - p0| relative to sum m|v|, in double. */
static double momentum_drift(const struct vec4 *pos, const struct vec4 *vel,
                             uint64_t n, const double p0[3])
{
    double p[3] = {0, 0, 0}, scale = 0, dp;

    for (uint64_t i = 0; i < n; i++) {
        double m = pos[i].w;

        p[0] += m * vel[i].x, p[1] += m * vel[i].y, p[2] += m * vel[i].z;
        scale += m * sqrt((double)vel[i].x * vel[i].x +
                          (double)vel[i].y * vel[i].y +
                          (double)vel[i].z * vel[i].z);
    }
    dp = sqrt((p[0] - p0[0]) * (p[0] - p0[0]) + (p[1] - p0[1]) *
              (p[1] - p0[1]) + (p[2] - p0[2]) * (p[2] - p0[2]));
    return scale > 0 ? dp / scale : dp; /* bodies at rest: no scale */
}

/*
 * Errors are measured against what the run did (the largest displacement,
 * the largest velocity change), so a wrong force shows up as order 1 while
 * rounding (float sums in another order, rsqrtf on GPUs) stays far below.
 */
static int close_enough(const struct options *o, const struct vec4 *pos,
                        const struct vec4 *vel, struct vec4 *ref[3],
                        const struct vec4 *pos0, const struct vec4 *vel0)
{
    const struct vec4 *ref_pos = ref[o->steps % 2], *ref_vel = ref[2];
    double moved = max_dist(ref_pos, pos0, o->n);
    double kicked = max_dist(ref_vel, vel0, o->n);
    double ex = max_dist(pos, ref_pos, o->n) / (moved > 0 ? moved : 1);
    double ev = max_dist(vel, ref_vel, o->n) / (kicked > 0 ? kicked : 1);
    double p0[3] = {0, 0, 0}, zero[3] = {0, 0, 0};
    double dp0 = momentum_drift(pos0, vel0, o->n, zero), dp;

    for (uint64_t i = 0; i < o->n; i++) {
        p0[0] += (double)pos0[i].w * vel0[i].x;
        p0[1] += (double)pos0[i].w * vel0[i].y;
        p0[2] += (double)pos0[i].w * vel0[i].z;
    }
    dp = momentum_drift(pos, vel, o->n, p0);
    printf("verify: positions %.2e, velocities %.2e of the largest change "
           "(bound 1e-3); momentum drift %.2e of sum m|v| (bound 1e-5; "
           "start %.2e)\n", ex, ev, dp, dp0);
    return ex <= 1e-3 && ev <= 1e-3 && dp <= 1e-5;
}

/* The columns of a body in a bodies file: x y z vx vy vz m. */
#define BODY_COLUMNS 7

/*
 * --input: checks the file and reads it into *pos and *vel (allocated
 * here); takes its count into o->n. -1 after one line naming the file and,
 * for a bad body, its row.
 */
static int read_bodies(struct options *o, struct vec4 **pos, struct vec4 **vel)
{
    struct app_npy npy;
    float *rows = NULL;
    uint64_t n;

    if (app_npy_open(&npy, "nbody", o->input, "f4", 2) != 0)
        return -1;
    n = npy.shape[0];
    if (npy.shape[1] != BODY_COLUMNS || n == 0 || n > MAX_N) {
        fprintf(stderr, "nbody: %s: shape (%" PRIu64 ", %" PRIu64 ") is not "
                "N x %d (x y z vx vy vz m) with N from 1 to %u\n", o->input,
                n, npy.shape[1], BODY_COLUMNS, MAX_N);
        app_npy_close(&npy);
        return -1;
    }
    rows = malloc(n * BODY_COLUMNS * sizeof *rows);
    *pos = malloc(n * sizeof **pos);
    *vel = malloc(n * sizeof **vel);
    if (rows == NULL || *pos == NULL || *vel == NULL) {
        fprintf(stderr, "nbody: no memory for the %" PRIu64 " bodies of '%s'\n",
                n, o->input);
        app_npy_close(&npy);
        goto fail;
    }
    if (app_npy_read(&npy, rows) != 0)
        goto fail;
    for (uint64_t i = 0; i < n; i++) {
        const float *r = rows + i * BODY_COLUMNS;

        for (int k = 0; k < BODY_COLUMNS; k++) {
            if (!isfinite(r[k]) || (k == 6 && r[k] < 0)) {
                fprintf(stderr, "nbody: %s: body %" PRIu64 " (row %" PRIu64
                        "): %s is %g; give finite values and masses >= 0\n",
                        o->input, i, i, (const char *[]){"x", "y", "z", "vx",
                        "vy", "vz", "m"}[k], (double)r[k]);
                goto fail;
            }
        }
        (*pos)[i] = (struct vec4){r[0], r[1], r[2], r[6]};
        (*vel)[i] = (struct vec4){r[3], r[4], r[5], 0.0f};
    }
    free(rows);
    o->n = n;
    return 0;
fail:
    free(rows);
    free(*pos);
    free(*vel);
    *pos = *vel = NULL;
    return -1;
}

/* Writes the bodies as rows x y z vx vy vz m to the output opened before
 * the work; 0 or 2. */
static int write_bodies(struct app_out *out, const struct vec4 *pos,
                        const struct vec4 *vel, uint64_t n)
{
    float *rows = malloc(n * BODY_COLUMNS * sizeof *rows);
    uint64_t shape[2] = {n, BODY_COLUMNS};
    int rc;

    if (rows == NULL) {
        fprintf(stderr, "nbody: no memory to write '%s'\n", out->path);
        app_out_abort(out);
        return 2;
    }
    for (uint64_t i = 0; i < n; i++) {
        float *r = rows + i * BODY_COLUMNS;

        r[0] = pos[i].x, r[1] = pos[i].y, r[2] = pos[i].z;
        r[3] = vel[i].x, r[4] = vel[i].y, r[5] = vel[i].z, r[6] = pos[i].w;
    }
    rc = app_npy_write(out->f, "f4", 2, shape, rows);
    int saved = errno;
    free(rows);
    errno = saved;
    return app_out_finish(out, rc == 0);
}

/* Returns the exit status: 0, 1 when --verify fails, 2 for a file error. */
static int run(struct options *o)
{
    const char *inputs[] = {o->input, NULL};
    struct nbody_conf cf;
    size_t bytes;
    struct vec4 *pos0 = NULL, *vel0 = NULL;
    struct vec4 *ref[3] = {NULL, NULL, NULL};
    pm_memory_t pos[2], vel;
    pm_task_stats_t st = {0};
    struct app_out out;
    double serial_s, pmlib_s;
    const char *verdict = "skipped";
    int status;

    app_require_devices("nbody", o->devices, PMLIB_HAVE_CUDA);
    if (o->input != NULL && read_bodies(o, &pos0, &vel0) != 0)
        return 2;
    /* before any work: a bad output fails at once */
    if (o->output != NULL &&
        app_out_open_in_place(&out, "nbody", o->output, o->force,
                              inputs) != 0) {
        free(pos0);
        free(vel0);
        return 2;
    }
    cf = (struct nbody_conf){o->n, o->block, DT, EPS2};
    bytes = o->n * sizeof(struct vec4);
    if (o->input == NULL) {
        pos0 = malloc(bytes);
        vel0 = malloc(bytes);
        if (pos0 == NULL || vel0 == NULL) {
            fprintf(stderr, "nbody: no memory for %" PRIu64 " bodies\n", o->n);
            exit(1);
        }
        init_bodies(pos0, vel0, cf.n);
    }
    if (cf.block == 0)
        cf.block = app_default_per_subtask_on(cf.n, BLOCK_GRANULE,
                                              o->devices);
    if (cf.block > cf.n)
        cf.block = cf.n;
    printf("nbody: n=%" PRIu64 " steps=%" PRIu64 " block=%" PRIu64
           " subtasks/step=%" PRIu64 " device=%s hosts=%d%s%s\n", cf.n,
           o->steps, cf.block, subtask_count(&cf), app_device_name(o->devices),
           pm_host_count(), o->input != NULL ? " input=" : "",
           o->input != NULL ? o->input : "");

    APP_CHECK(pm_memory_create(bytes, &pos[0]));
    APP_CHECK(pm_memory_create(bytes, &pos[1]));
    APP_CHECK(pm_memory_create(bytes, &vel));
    memcpy(pm_memory_data(pos[0]), pos0, bytes);
    memcpy(pm_memory_data(vel), vel0, bytes);
    APP_CHECK(pm_memory_touch(pos[0])); /* written through the host pointers */
    APP_CHECK(pm_memory_touch(vel));

    serial_s = run_serial(o, pos0, vel0, ref);
    pmlib_s = run_pmlib(o, &cf, pos, vel, &st);
    if (o->verify) {
        verdict = close_enough(o, pm_memory_data(pos[o->steps % 2]),
                               pm_memory_data(vel), ref, pos0, vel0)
                  ? "OK" : "MISMATCH";
        printf("verify: %s\n", verdict);
    }
    status = strcmp(verdict, "MISMATCH") == 0;
    if (o->output != NULL &&
        write_bodies(&out, pm_memory_data(pos[o->steps % 2]),
                     pm_memory_data(vel), cf.n) != 0)
        status = 2;
    app_print_result("nbody", cf.n, serial_s, pmlib_s, &st, verdict);
    APP_CHECK(pm_memory_release(vel));
    APP_CHECK(pm_memory_release(pos[1]));
    APP_CHECK(pm_memory_release(pos[0]));
    for (int k = 0; k < 3; k++)
        free(ref[k]);
    free(pos0);
    free(vel0);
    return status;
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
    cb.subscribe = nbody_subscribe;
    cb.cpu = nbody_cpu;
#if PMLIB_HAVE_CUDA
    if (opt.devices & PM_DEVICE_GPU) /* registering it readies the GPUs */
        cb.cuda = nbody_cuda;
#endif
    APP_CHECK(pm_callbacks_register("nbody", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
    return status;
}
