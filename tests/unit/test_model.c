/*
 * The performance model: a model file is written at the end and read back
 * with equal values; garbage, truncated, other-version, other-callbacks and
 * otherwise bad files are ignored with exactly one warning and replaced;
 * PMLIB_MODEL_DIR moves the files or (off) stops them; file names are safe
 * for any callbacks name; the pull policy gives a device the model knows to
 * be far slower no chunk, keeps equal shares when the model knows nothing,
 * and lets a held-back device probe now and then, unless one chunk of it
 * would take several times the whole task.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "sched/model.h"
#include "sched/ranges.h"
#include "taskshell.h"

#define NSTUBS 4

static const pm__device_ops_t fake_gpu_ops = {.name = "gpu", .kind = PM_DEVICE_GPU};

/* Stub 0 a GPU named "Test GPU 7", the others CPU cores. */
static pm__stub_t stubs[NSTUBS];

static void make_stubs(void)
{
    for (int i = 0; i < NSTUBS; i++)
        stubs[i] = (pm__stub_t){.index = i, .ops = &pm__cpu_ops, .speed = 1.0};
    stubs[0].ops = &fake_gpu_ops;
    snprintf(stubs[0].name, sizeof stubs[0].name, "Test GPU 7");
}

static char tmpdir[256];

/* A fresh directory for the model files; PMLIB_MODEL_DIR names it. */
static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/pmlib-model-XXXXXX", P_tmpdir);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", tmpdir, 1), 0);
    make_stubs();
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    nftw(tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void model_path(const char *dir, const char *name, char *out, size_t size)
{
    ck_assert(pm__model_path(dir, name, out, size));
}

static void write_text(const char *path, const void *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* stderr goes to a file while a model is made; returns the warnings. */
static int warn_fd = -1, saved_stderr = -1;
static char warn_path[300];

static void capture_start(void)
{
    snprintf(warn_path, sizeof warn_path, "%s/stderr.txt", tmpdir);
    fflush(stderr);
    saved_stderr = dup(2);
    warn_fd = open(warn_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(warn_fd, 0);
    dup2(warn_fd, 2);
}

static int capture_end(char *text, size_t size)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    close(warn_fd);
    size_t len;
    const char *s = read_text(warn_path, &len);
    snprintf(text, size, "%s", s);
    unlink(warn_path);
    int n = 0;
    for (const char *p = s; (p = strstr(p, ": warn: ")) != NULL; p++)
        n++;
    return n;
}

/* A model that learned a few chunks: GPU 10 ns and 64/8 bytes per
 * subtask, CPU 250 ns per subtask (all three CPU stubs are one device). */
static void learn(pm__model_t *m)
{
    pm__model_note(m, 0, 100, 1000, 64, 8);
    pm__model_note(m, 1, 4, 1000, 0, 0);
    pm__model_note(m, 2, 2, 500, 0, 0);
}

START_TEST(written_and_read_back)
{
    const char *name = "saxpy/v1: x..y %20";
    pm__model_t *m = pm__model_create(name, stubs, NSTUBS);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->ndev, 2);
    ck_assert(pm__model_ns(m, 0) == 0); /* nothing known yet */
    learn(m);
    ck_assert(pm__model_ns(m, 0) == 10.0);
    ck_assert(pm__model_ns(m, 3) == 250.0);
    ck_assert(pm__model_held_back(m, 1) == false);
    pm__model_destroy(m);

    char path[512];
    model_path(tmpdir, name, path, sizeof path);
    ck_assert_int_eq(access(path, R_OK), 0);
    ck_assert_int_eq(count_files(tmpdir), 1); /* no temporary file left */

    capture_start();
    m = pm__model_create(name, stubs, NSTUBS);
    char err[2048];
    ck_assert_int_eq(capture_end(err, sizeof err), 0);
    ck_assert(pm__model_ns(m, 0) == 10.0);
    ck_assert(pm__model_ns(m, 1) == 250.0);
    double in, out;
    pm__model_bytes(m, 0, &in, &out);
    ck_assert(in == 64.0 && out == 8.0);
    const pm__model_dev_t *g = pm__model_dev_of(m, 0), *c = pm__model_dev_of(m, 2);
    ck_assert_int_eq(g->kind, PM_DEVICE_GPU);
    ck_assert_str_eq(g->name, "Test GPU 7");
    ck_assert_uint_eq(atomic_load(&g->samples), 1);
    ck_assert_int_eq(c->kind, PM_DEVICE_CPU);
    ck_assert_uint_eq(atomic_load(&c->samples), 2);
    ck_assert_uint_eq(atomic_load(&c->held), 1);
    ck_assert_ptr_eq(pm__model_dev_of(m, 1), c);

    /* Values are the same after another round trip with nothing learned. */
    pm__model_destroy(m);
    m = pm__model_create(name, stubs, NSTUBS);
    ck_assert(pm__model_ns(m, 0) == 10.0 && pm__model_ns(m, 3) == 250.0);
    pm__model_destroy(m);
}
END_TEST

/* Bytes once moved, then never again: the average decays toward 0 over
 * thousands of chunks and must still write and read back (it used to pass
 * through subnormal numbers, which the reader refused, dropping the model);
 * a file holding such a number is read as 0, not refused. */
START_TEST(decayed_averages_read_back)
{
    const char *name = "decay";
    pm__model_t *m = pm__model_create(name, stubs, NSTUBS);
    ck_assert_ptr_nonnull(m);
    pm__model_note(m, 0, 1, 1000, 4096, 4096);
    for (int i = 0; i < 20000; i++)
        pm__model_note(m, 0, 1, 1000, 0, 0);
    double in, out;
    pm__model_bytes(m, 0, &in, &out);
    ck_assert(in == 0 || in >= 1e-300);
    pm__model_destroy(m);
    capture_start();
    m = pm__model_create(name, stubs, NSTUBS);
    char err[2048];
    ck_assert_msg(capture_end(err, sizeof err) == 0, "warned: %s", err);
    ck_assert(pm__model_ns(m, 0) == 1000.0);
    pm__model_destroy(m);

    char path[512];
    model_path(tmpdir, name, path, sizeof path);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "pmlib-model 1\ncallbacks decay\n"
               "gpu 12000 1305.5 4.9406564584124654e-324 0 0 0 Test GPU 7\nend\n");
    fclose(f);
    capture_start();
    m = pm__model_create(name, stubs, NSTUBS);
    ck_assert_msg(capture_end(err, sizeof err) == 0, "warned: %s", err);
    ck_assert(pm__model_ns(m, 0) == 1305.5);
    pm__model_bytes(m, 0, &in, &out);
    ck_assert(in == 0 && out == 0);
    pm__model_destroy(m);
}
END_TEST

START_TEST(file_names_are_safe)
{
    const char *names[] = {"..", ".hidden", "a/b", "a b", "a%2Fb", "tab\there", "\xc3\xa9t\xc3\xa9"};
    const int n = (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < n; i++) {
        char path[512];
        model_path(tmpdir, names[i], path, sizeof path);
        const char *base = path + strlen(tmpdir) + 1;
        ck_assert_ptr_null(strchr(base, '/'));
        ck_assert(base[0] != '.');
        for (const char *p = base; *p; p++)
            ck_assert(*p > ' ' && *p < 0x7f);
        pm__model_t *m = pm__model_create(names[i], stubs, NSTUBS);
        learn(m);
        pm__model_destroy(m);
        ck_assert_int_eq(access(path, R_OK), 0);
    }
    ck_assert_int_eq(count_files(tmpdir), n); /* one file each, no collision */
}
END_TEST

/* Bad files: each is ignored with one warning, the model starts empty,
 * and the end of the run replaces it with a valid file. */
static void check_ignored(const char *what, const void *text, size_t len)
{
    const char *name = "bad-files";
    char path[512], err[2048];
    model_path(tmpdir, name, path, sizeof path);
    write_text(path, text, len);
    capture_start();
    pm__model_t *m = pm__model_create(name, stubs, NSTUBS);
    int warnings = capture_end(err, sizeof err);
    ck_assert_msg(warnings == 1, "%s: %d warnings: %s", what, warnings, err);
    ck_assert_msg(strstr(err, "performance model") != NULL && strstr(err, path) != NULL,
                  "%s: %s", what, err);
    ck_assert_msg(pm__model_ns(m, 0) == 0 && pm__model_ns(m, 1) == 0, "%s: not ignored", what);
    learn(m);
    pm__model_destroy(m);
    capture_start();
    m = pm__model_create(name, stubs, NSTUBS);
    ck_assert_int_eq(capture_end(err, sizeof err), 0);
    ck_assert_msg(pm__model_ns(m, 0) == 10.0, "%s: not rewritten", what);
    pm__model_destroy(m);
}

START_TEST(bad_files_are_ignored_with_one_warning)
{
    /* A valid file to cut and alter. */
    pm__model_t *m = pm__model_create("bad-files", stubs, NSTUBS);
    learn(m);
    pm__model_destroy(m);
    char path[512];
    model_path(tmpdir, "bad-files", path, sizeof path);
    size_t len;
    char good[4096];
    snprintf(good, sizeof good, "%s", read_text(path, &len));
    ck_assert_ptr_nonnull(strstr(good, "pmlib-model 1\n"));

    unsigned char garbage[512];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (unsigned char)(i * 151 + 7);
    check_ignored("garbage", garbage, sizeof garbage);
    check_ignored("empty", "", 0);
    check_ignored("truncated", good, len / 2);
    check_ignored("no end line", good, len - 4);

    char alt[4096 + 64];
    snprintf(alt, sizeof alt, "pmlib-model 99\n%s", strchr(good, '\n') + 1);
    check_ignored("other version", alt, strlen(alt));
    snprintf(alt, sizeof alt, "pmlib-model 1 extra\n%s", strchr(good, '\n') + 1);
    check_ignored("bad header", alt, strlen(alt));
    snprintf(alt, sizeof alt, "pmlib-model 1\ncallbacks other%s", strstr(good, "\n#"));
    check_ignored("other callbacks", alt, strlen(alt));

    const char *bodies[] = {
        "gpu 1 nan 0 0 0 0 X\n",          /* not a number */
        "gpu 1 -5 0 0 0 0 X\n",           /* negative */
        "gpu 0 5 0 0 0 0 X\n",            /* no samples */
        "gpu 1 5 0 0 0 0\n",              /* no name */
        "tpu 1 5 0 0 0 0 X\n",            /* unknown kind */
        "gpu 1 5 0 0 0 0 X\ngpu 1 6 0 0 0 0 X\n", /* listed twice */
        "gpu 1 5 0 0 0 999999 X\n",       /* probe interval out of range */
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        snprintf(alt, sizeof alt, "pmlib-model 1\ncallbacks bad-files\n%send\n", bodies[i]);
        check_ignored(bodies[i], alt, strlen(alt));
    }
    snprintf(alt, sizeof alt, "%sextra\n", good);
    check_ignored("text after end", alt, strlen(alt));
}
END_TEST

START_TEST(off_writes_nothing)
{
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    char dir[512];
    ck_assert(!pm__model_dir(dir, sizeof dir));
    pm__model_t *m = pm__model_create("off", stubs, NSTUBS);
    learn(m);
    pm__model_destroy(m);
    ck_assert_int_eq(count_files(tmpdir), 0);
}
END_TEST

START_TEST(dir_moves_the_files)
{
    char moved[512], path[600];
    snprintf(moved, sizeof moved, "%s/not/yet/there", tmpdir);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", moved, 1), 0);
    pm__model_t *m = pm__model_create("moved", stubs, NSTUBS);
    learn(m);
    pm__model_destroy(m);
    model_path(moved, "moved", path, sizeof path);
    ck_assert_int_eq(access(path, R_OK), 0);

    /* Unset: XDG_CACHE_HOME, else HOME. */
    ck_assert_int_eq(unsetenv("PMLIB_MODEL_DIR"), 0);
    ck_assert_int_eq(setenv("XDG_CACHE_HOME", tmpdir, 1), 0);
    ck_assert(pm__model_dir(moved, sizeof moved));
    snprintf(path, sizeof path, "%s/pmlib/model", tmpdir);
    ck_assert_str_eq(moved, path);
    ck_assert_int_eq(unsetenv("XDG_CACHE_HOME"), 0);
    ck_assert_int_eq(setenv("HOME", tmpdir, 1), 0);
    ck_assert(pm__model_dir(moved, sizeof moved));
    snprintf(path, sizeof path, "%s/.cache/pmlib/model", tmpdir);
    ck_assert_str_eq(moved, path);
    m = pm__model_create("home", stubs, NSTUBS);
    learn(m);
    pm__model_destroy(m);
    char file[700];
    model_path(path, "home", file, sizeof file);
    ck_assert_int_eq(access(file, R_OK), 0);
}
END_TEST

START_TEST(unwritable_dir_warns_once)
{
    char file[300], dir[400], err[2048];
    snprintf(file, sizeof file, "%s/a-file", tmpdir);
    write_text(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/models", file); /* under a plain file: cannot be made */
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", dir, 1), 0);
    capture_start();
    for (int i = 0; i < 3; i++) {
        pm__model_t *m = pm__model_create("nowhere", stubs, NSTUBS);
        learn(m);
        pm__model_destroy(m);
    }
    int warnings = capture_end(err, sizeof err);
    ck_assert_msg(warnings == 1, "%d warnings: %s", warnings, err);
    ck_assert_ptr_nonnull(strstr(err, "PMLIB_MODEL_DIR"));
}
END_TEST

START_TEST(devices_of_other_processes_are_kept)
{
    /* One process has the GPU, another only CPUs: the file keeps both. */
    pm__model_t *a = pm__model_create("shared", stubs, 1);
    pm__model_t *b = pm__model_create("shared", stubs + 1, NSTUBS - 1);
    pm__model_note(a, 0, 10, 100, 0, 0);
    pm__model_note(b, 0, 10, 5000, 0, 0);
    pm__model_destroy(a);
    pm__model_destroy(b);
    pm__model_t *m = pm__model_create("shared", stubs, NSTUBS);
    ck_assert(pm__model_ns(m, 0) == 10.0);
    ck_assert(pm__model_ns(m, 1) == 500.0);
    pm__model_destroy(m);
}
END_TEST

START_TEST(held_back_devices_probe_less_and_less_often)
{
    pm__model_t *m = pm__model_create("probe", stubs, NSTUBS);
    learn(m);
    int at[3] = {0}, k = 0;
    for (int task = 1; task <= PM__MODEL_PROBE_MIN * 7 && k < 3; task++)
        if (pm__model_held_back(m, 1))
            at[k++] = task;
    ck_assert_int_eq(k, 3);
    ck_assert_int_eq(at[0], PM__MODEL_PROBE_MIN);
    ck_assert_int_eq(at[1], 3 * PM__MODEL_PROBE_MIN);
    ck_assert_int_eq(at[2], 7 * PM__MODEL_PROBE_MIN);
    /* It paid: the next probe is soon again. */
    pm__model_paid(m, 1);
    int first = 0;
    for (int task = 1; task <= PM__MODEL_PROBE_MIN && !first; task++)
        if (pm__model_held_back(m, 1))
            first = task;
    ck_assert_int_eq(first, PM__MODEL_PROBE_MIN);
    pm__model_destroy(m);
}
END_TEST

/* ---- the pull policy with a model ---------------------------------------- */

static pm__stub_t cpu_stubs[NSTUBS];

/* A task shell of `nchunks` one-subtask chunks on NSTUBS CPU stubs, whose
 * model `m` sees stub 0 as the fast device. */
static pm__task_t *make_task(uint64_t nchunks, pm__model_t *m)
{
    return ts_task(nchunks, PM_SCHED_PULL, m, cpu_stubs, NSTUBS);
}

/* Chunks each stub gets, taking in turn until all are refused. */
static void drain(pm__task_t *t, uint64_t got[NSTUBS])
{
    uint64_t c;
    memset(got, 0, NSTUBS * sizeof *got);
    for (int idle = 0; idle < NSTUBS;) {
        idle = 0;
        for (int s = 0; s < NSTUBS; s++) {
            if (t->policy->take(t, s, &c))
                got[s]++;
            else
                idle++;
        }
    }
}

/* Stub 0 starts with every chunk of t (n of them) and runs them all. */
static void all_on_stub0(pm__task_t *t, uint64_t n)
{
    for (int s = 1; s < NSTUBS; s++)
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].hi), atomic_load(&t->sched->slot[s].lo));
    uint64_t got[NSTUBS];
    drain(t, got);
    ck_assert_uint_eq(got[0], n);
}

START_TEST(pull_keeps_equal_shares_when_the_model_knows_nothing)
{
    pm__model_t *m = pm__model_create("pull-empty", stubs, NSTUBS);
    pm__task_t *t = make_task(100, m);
    for (int s = 0; s < NSTUBS; s++)
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].hi) - atomic_load(&t->sched->slot[s].lo), 25);
    uint64_t got[NSTUBS];
    drain(t, got);
    for (int s = 0; s < NSTUBS; s++)
        ck_assert_uint_eq(got[s], 25);
    ts_free(t);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

START_TEST(pull_gives_a_far_slower_device_nothing)
{
    pm__model_t *m = pm__model_create("pull-slow", stubs, NSTUBS);
    /* Stub 0's device: 1 us per subtask; the others' 1 ms. */
    pm__model_note(m, 0, 1, 1000, 0, 0);
    pm__model_note(m, 1, 1, 1000000, 0, 0);
    pm__task_t *t = make_task(100, m);
    all_on_stub0(t, 100);
    ts_free(t);
    uint64_t got[NSTUBS];

    /* Many chunks: the slow device pays at the start, and gets a share. */
    t = make_task(4000, m);
    ck_assert_uint_gt(atomic_load(&t->sched->slot[1].hi) - atomic_load(&t->sched->slot[1].lo), 0);
    ts_free(t);

    /* 1000x slower: a chunk of it would take 10x the whole task on the
     * fast device, so it never probes either. */
    for (int task = 0; task < 4 * PM__MODEL_PROBE_MIN; task++) {
        t = make_task(100, m);
        drain(t, got);
        ck_assert_uint_eq(got[0], 100);
        ts_free(t);
    }
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);

    /* 200x slower, 100 chunks: one of its chunks takes twice the task;
     * held back task after task, one of its stubs probes one chunk. */
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", tmpdir, 1), 0);
    m = pm__model_create("pull-probe", stubs, NSTUBS);
    pm__model_note(m, 0, 1, 1000, 0, 0);
    pm__model_note(m, 1, 1, 200000, 0, 0);
    int probes = 0;
    for (int task = 0; task < 4 * PM__MODEL_PROBE_MIN; task++) {
        t = make_task(100, m);
        drain(t, got);
        uint64_t slow = got[1] + got[2] + got[3];
        ck_assert_uint_le(slow, 1);
        ck_assert_uint_eq(got[0] + slow, 100);
        probes += slow == 1;
        ts_free(t);
    }
    ck_assert_int_eq(probes, 2); /* after 16 tasks, then 32 more */
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* A task worth fewer stubs than the host has (one per pm__poke_worth_ns()
 * of its work) starts as one pool: the first stub takes it whole and
 * another steals half, where shares would leave a chunk or two with stubs
 * that were never engaged; a task worth every stub gets equal shares. */
START_TEST(pull_pools_a_task_worth_fewer_stubs_than_the_host_has)
{
    pm__stub_t cores[NSTUBS]; /* the model sees one device */
    for (int i = 0; i < NSTUBS; i++)
        cores[i] = (pm__stub_t){.index = i, .ops = &pm__cpu_ops, .speed = 1.0};
    pm__model_t *m = pm__model_create("pull-pool", cores, NSTUBS);
    pm__model_note(m, 1, 1, 200, 0, 0); /* 200 ns per subtask */
    const int ncpu = pm__rt.ncpu, nhosts = pm__rt.nhosts;
    pm__rt.ncpu = NSTUBS;
    pm__rt.nhosts = 1;
    /* 16 chunks: 3.2 us of work, under a stub's worth on each of 4 stubs. */
    pm__task_t *t = make_task(16, m);
    for (int s = 0; s < NSTUBS; s++)
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].hi), atomic_load(&t->sched->slot[s].lo));
    uint64_t c, seen = 0;
    ck_assert(t->policy->take(t, 2, &c));
    seen |= 1ull << c;
    ck_assert_uint_eq(atomic_load(&t->sched->slot[2].hi) - atomic_load(&t->sched->slot[2].lo), 15);
    ck_assert(t->policy->take(t, 0, &c)); /* steals the back half of stub 2's */
    seen |= 1ull << c;
    ck_assert_uint_eq(atomic_load(&t->sched->slot[2].hi) - atomic_load(&t->sched->slot[2].lo), 8);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[0].hi) - atomic_load(&t->sched->slot[0].lo), 6);
    for (int i = 0; i < 8; i++) { /* stub 2 runs its own */
        ck_assert(t->policy->take(t, 2, &c));
        seen |= 1ull << c;
    }
    /* Stub 3 finds what stub 0's steal put in its slot. */
    ck_assert(t->policy->take(t, 3, &c));
    seen |= 1ull << c;
    ck_assert_uint_eq(atomic_load(&t->sched->slot[0].hi) - atomic_load(&t->sched->slot[0].lo), 3);
    for (int idle = 0; idle < NSTUBS;) {
        idle = 0;
        for (int s = 0; s < NSTUBS; s++) {
            if (t->policy->take(t, s, &c)) {
                ck_assert_uint_eq(seen & (1ull << c), 0);
                seen |= 1ull << c;
            } else {
                idle++;
            }
        }
    }
    ck_assert_uint_eq(seen, 0xffffu);
    ts_free(t);
    /* 1000 chunks: 200 us, worth every stub: a share each. */
    t = make_task(1000, m);
    for (int s = 0; s < NSTUBS; s++)
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].hi) - atomic_load(&t->sched->slot[s].lo), 250);
    ts_free(t);
    pm__rt.ncpu = ncpu;
    pm__rt.nhosts = nhosts;
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* A stub declines a chunk because faster stubs will take it; but if those
 * are asleep without having looked at the task (they were not woken for
 * it), nobody would: the decliner must take the chunk after all. */
START_TEST(pull_never_leaves_chunks_nobody_takes)
{
    pm__model_t *m = pm__model_create("pull-asleep", stubs, NSTUBS);
    pm__task_t *t = make_task(8, m);
    uint64_t c;
    /* Stub 0 ran two chunks of this task in 1 s each; the others would
     * take 1 ms. */
    atomic_store(&t->counts[0].chunk_ns, 1000000000u);
    t->counts[0].subtasks = 2 * t->grain;
    for (int s = 1; s < NSTUBS; s++)
        atomic_store(&t->counts[s].chunk_ns, 1000000u);
    /* Awake, they will come: stub 0 leaves the chunks to them. */
    ck_assert(!t->policy->take(t, 0, &c));
    /* Asleep: stub 0 takes them. */
    for (int s = 1; s < NSTUBS; s++)
        atomic_store(&cpu_stubs[s].parked, true);
    ck_assert(t->policy->take(t, 0, &c));
    for (int s = 1; s < NSTUBS; s++)
        atomic_store(&cpu_stubs[s].parked, false);
    ts_free(t);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* One slow chunk of a stub against equal stubs (a core taken away for a
 * while) is no reason to leave the rest to them: they may not run soon. */
START_TEST(pull_one_slow_chunk_is_no_evidence)
{
    pm__stub_t cores[NSTUBS]; /* the model sees one device */
    for (int i = 0; i < NSTUBS; i++)
        cores[i] = (pm__stub_t){.index = i, .ops = &pm__cpu_ops, .speed = 1.0};
    pm__model_t *m = pm__model_create("pull-one-slow", cores, NSTUBS);
    pm__task_t *t = make_task(8, m);
    uint64_t c;
    atomic_store(&t->counts[0].chunk_ns, 1000000000u);
    t->counts[0].subtasks = t->grain;
    for (int s = 1; s < NSTUBS; s++)
        atomic_store(&t->counts[s].chunk_ns, 1000000u);
    ck_assert(t->policy->take(t, 0, &c)); /* the others awake: takes anyway */
    t->counts[0].subtasks = 2 * t->grain; /* a second slow chunk: it leaves them */
    ck_assert(!t->policy->take(t, 0, &c));
    ts_free(t);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* A stub declines a chunk for a far faster GPU; while the GPU sleeps it
 * takes the chunk after all, but a GPU just woken for the task is on its
 * way: the stub leaves the chunk to it. */
START_TEST(pull_woken_gpus_count_as_coming)
{
    pm__model_t *m = pm__model_create("pull-woken", stubs, NSTUBS);
    pm__model_note(m, 0, 1, 1000, 0, 0);    /* the GPU: 1 us per subtask */
    pm__model_note(m, 1, 1, 1000000, 0, 0); /* a core: 1 ms */
    pm__task_t *t = make_task(8, m);
    t->policy->fini(t);
    cpu_stubs[0].ops = &fake_gpu_ops;
    ck_assert_int_eq(t->policy->init(t, NSTUBS), 0);
    uint64_t c;
    atomic_store(&cpu_stubs[0].parked, true);
    for (int s = 2; s < NSTUBS; s++)
        atomic_store(&cpu_stubs[s].parked, true);
    ck_assert(t->policy->take(t, 1, &c)); /* nobody else would come */
    pm__stubs_woken(1);
    ck_assert(!atomic_load(&cpu_stubs[0].parked));
    ck_assert(atomic_load(&cpu_stubs[2].parked)); /* only the GPU kind */
    ck_assert(!t->policy->take(t, 1, &c)); /* the GPU comes */
    ts_free(t);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* A task that writes in place, where a CPU chunk also costs the GPU its
 * copy back: every stub pays that cost in the comparison, or all would
 * decline (each CPU weighed with it against the others without it, the GPU
 * against the CPUs) and nobody would hold the chunks. */
START_TEST(pull_weighs_every_stub_with_its_copy_back)
{
    pm__model_t *m = pm__model_create("pull-copy-back", stubs, NSTUBS);
    /* The GPU: 10 ms per subtask, as many bytes out as in; a CPU 0.2 ms. */
    pm__model_note(m, 0, 1, 10000000, 4096, 4096);
    pm__model_note(m, 1, 1, 200000, 0, 0);
    pm__task_t *t = make_task(8, m);
    t->policy->fini(t);
    cpu_stubs[0].ops = &fake_gpu_ops;
    t->desc.nmem = 1;
    t->desc.mem[0].access = PM_READ_WRITE;
    t->desc.mem[0].reduce = PM_REDUCE_NONE;
    ck_assert_int_eq(t->policy->init(t, NSTUBS), 0);
    uint64_t got[NSTUBS], total = 0;
    drain(t, got);
    for (int s = 0; s < NSTUBS; s++)
        total += got[s];
    ck_assert_uint_eq(total, 8);
    ck_assert_uint_gt(got[0], 0); /* 5 ms of copy back make a CPU chunk the slower */
    ts_free(t);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* With nothing known of a CPU core's speed beside a GPU, a core waits for
 * the GPU's first chunk, then leaves the task to it if the GPU would finish
 * the rest within a second: one chunk of a core can outlast a GPU's whole
 * share. A longer task it joins (and so measures itself). */
START_TEST(pull_unknown_cpus_leave_short_tasks_to_the_gpu)
{
    pm__model_t *m = pm__model_create("pull-unknown", stubs, NSTUBS);
    uint64_t c;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t n = pass == 0 ? 100 : 2000;
        pm__task_t *t = make_task(n, m);
        cpu_stubs[0].ops = &fake_gpu_ops;
        ck_assert(!t->policy->take(t, 1, &c)); /* the GPU has not run a chunk */
        atomic_store(&t->counts[0].chunk_ns, 1000000u); /* 1 ms per chunk */
        /* 100 chunks: 0.1 s on the GPU, the cores leave them; 2000: 2 s,
         * they take a chunk. */
        ck_assert(t->policy->take(t, 1, &c) == (pass == 1));
        ts_free(t);
    }
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(m);
}
END_TEST

/* Cores of unknown speed beside a GPU the model knows start with no
 * share: the GPU's share is one contiguous range, and in a short task the
 * cores leave it all to the GPU. */
START_TEST(pull_unknown_cpus_start_with_no_share)
{
    pm__model_t *m = pm__model_create("pull-unknown-share", stubs, NSTUBS);
    pm__model_note(m, 0, 1, 1000, 0, 0); /* the GPU: 1 us per subtask */
    ts_stub0_ops = &fake_gpu_ops;
    pm__task_t *t = make_task(100, m);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[0].lo), 0);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[0].hi), 100);
    all_on_stub0(t, 100);
    ts_free(t);
    /* Nothing known of either: equal shares, as before. */
    pm__model_t *none = pm__model_create("pull-unknown-none", stubs, NSTUBS);
    t = make_task(100, none);
    for (int s = 0; s < NSTUBS; s++)
        ck_assert_uint_eq(atomic_load(&t->sched->slot[s].hi) - atomic_load(&t->sched->slot[s].lo), 25);
    ts_free(t);
    ck_assert_int_eq(setenv("PMLIB_MODEL_DIR", "off", 1), 0);
    pm__model_destroy(none);
    pm__model_destroy(m);
}
END_TEST

static double monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* pm__now reads the seconds of CLOCK_MONOTONIC, whichever clock it reads
 * (the time stamp counter where the kernel keeps time by it): each
 * reading lies between two readings of CLOCK_MONOTONIC around it, to 1e-3
 * of the time since it was set up (and 10 us). */
static void clock_follows_monotonic_for(double seconds)
{
    pm__clock_init();
    const double start = monotonic();
    for (;;) {
        double a = monotonic();
        double n = pm__now();
        double b = monotonic();
        double tol = 1e-3 * (b - start) + 1e-5;
        ck_assert_msg(n >= a - tol && n <= b + tol, "pm__now %.9f outside [%.9f, %.9f] by more than %.9f",
                      n, a, b, tol);
        if (b - start > seconds)
            break;
    }
}

START_TEST(clock_follows_monotonic)
{
    clock_follows_monotonic_for(0.05);
}
END_TEST

START_TEST(clock_monotonic_by_choice)
{
    ck_assert_int_eq(setenv("PMLIB_CLOCK", "monotonic", 1), 0);
    clock_follows_monotonic_for(0.01);
    ck_assert_int_eq(unsetenv("PMLIB_CLOCK"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, written_and_read_back);
    tcase_add_test(tc, decayed_averages_read_back);
    tcase_add_test(tc, file_names_are_safe);
    tcase_add_test(tc, bad_files_are_ignored_with_one_warning);
    tcase_add_test(tc, off_writes_nothing);
    tcase_add_test(tc, dir_moves_the_files);
    tcase_add_test(tc, unwritable_dir_warns_once);
    tcase_add_test(tc, devices_of_other_processes_are_kept);
    tcase_add_test(tc, held_back_devices_probe_less_and_less_often);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("pull");
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_add_test(tp, pull_keeps_equal_shares_when_the_model_knows_nothing);
    tcase_add_test(tp, pull_gives_a_far_slower_device_nothing);
    tcase_add_test(tp, pull_never_leaves_chunks_nobody_takes);
    tcase_add_test(tp, pull_one_slow_chunk_is_no_evidence);
    tcase_add_test(tp, pull_pools_a_task_worth_fewer_stubs_than_the_host_has);
    tcase_add_test(tp, pull_weighs_every_stub_with_its_copy_back);
    tcase_add_test(tp, pull_unknown_cpus_leave_short_tasks_to_the_gpu);
    tcase_add_test(tp, pull_unknown_cpus_start_with_no_share);
    tcase_add_test(tp, pull_woken_gpus_count_as_coming);
    suite_add_tcase(s, tp);
    TCase *tk = tcase_create("clock");
    tcase_add_test(tk, clock_follows_monotonic);
    tcase_add_test(tk, clock_monotonic_by_choice);
    suite_add_tcase(s, tk);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
