/*
 * The performance model (model.h): online averages per device, and the
 * small text file per callback set that keeps them across runs.
 *
 * File (version 1), one record per line:
 *   pmlib-model 1
 *   callbacks NAME            (the escaped callbacks name, as in the file name)
 *   # comment lines
 *   KIND SAMPLES NS IN OUT HELD PROBE DEVICE-NAME
 *   end
 * KIND is cpu or gpu; NS, IN and OUT per subtask; HELD and PROBE drive the
 * re-probing of held-back devices. Anything else is not a model file: it
 * is ignored with one warning and rewritten at pm_finalize.
 */
#define _GNU_SOURCE
#include "sched/model.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAX ((size_t)64 << 10) /* a model file is a few hundred bytes */
#define ESC_MAX (3 * PM__NAME_MAX + 1)

static uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double double_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static double get_d(const atomic_uint_fast64_t *a)
{
    return double_of(atomic_load_explicit(a, memory_order_relaxed));
}

static uint64_t get_u(const atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void set_u(atomic_uint_fast64_t *a, uint64_t v)
{
    atomic_store_explicit(a, v, memory_order_relaxed);
}

/* ---- device names ------------------------------------------------------- */

/* Copies a device name, control characters made spaces, ends trimmed. */
static void clean_name(char *out, size_t size, const char *in)
{
    size_t n = 0;
    while (*in == ' ' || *in == '\t')
        in++;
    for (; *in != '\0' && n + 1 < size; in++)
        out[n++] = ((unsigned char)*in < 0x20 || *in == 0x7f) ? ' ' : *in;
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
    if (n == 0)
        snprintf(out, size, "?");
}

static char cpu_name[96];
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* CPUs are told apart by the processor's name, so that a cache directory
 * shared by different machines keeps one line per kind of processor. */
static void read_cpu_name(void)
{
    snprintf(cpu_name, sizeof cpu_name, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            clean_name(cpu_name, sizeof cpu_name, colon + 1);
            break;
        }
    }
    fclose(f);
}

static const char *stub_device_name(const pm__stub_t *s)
{
    if (s->ops->kind == PM_DEVICE_GPU)
        return s->name;
    pthread_once(&cpu_once, read_cpu_name);
    return cpu_name;
}

static int find_dev(const pm__model_t *m, int kind, const char *name)
{
    for (int i = 0; i < m->ndev; i++)
        if (m->dev[i].kind == kind && strcmp(m->dev[i].name, name) == 0)
            return i;
    return -1;
}

/* The device's index, added empty if new; -1 when the model is full. */
static int find_or_add(pm__model_t *m, int kind, const char *name)
{
    char clean[sizeof m->dev[0].name];
    clean_name(clean, sizeof clean, name);
    int i = find_dev(m, kind, clean);
    if (i >= 0 || m->ndev == PM__MODEL_MAX_DEVICES)
        return i;
    i = m->ndev++;
    memset(&m->dev[i], 0, sizeof m->dev[i]);
    m->dev[i].kind = kind;
    memcpy(m->dev[i].name, clean, sizeof clean);
    return i;
}

/* ---- learning and lookup ------------------------------------------------ */

/* A running average: cur += (x - cur) * w, without a lock. */
static void average_in(atomic_uint_fast64_t *a, double x, double w)
{
    uint64_t old = atomic_load_explicit(a, memory_order_relaxed);
    for (;;) {
        double cur = double_of(old), next = cur + (x - cur) * w;
        /* A value decaying toward 0 would pass through subnormal numbers,
         * which the file's reader rejects as out of range: make it 0. */
        if (next < 1e-300)
            next = 0;
        uint64_t want = bits_of(next);
        if (atomic_compare_exchange_weak_explicit(a, &old, want, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
    }
}

const pm__model_dev_t *pm__model_dev_of(const pm__model_t *m, int stub)
{
    if (m == NULL || stub < 0 || stub >= m->nstubs || m->stub_dev[stub] < 0)
        return NULL;
    return &m->dev[m->stub_dev[stub]];
}

void pm__model_note(pm__model_t *m, int stub, uint64_t subtasks, uint64_t ns, double bytes_in,
                    double bytes_out)
{
    pm__model_dev_t *d = (pm__model_dev_t *)pm__model_dev_of(m, stub);
    if (d == NULL || subtasks == 0)
        return;
    uint64_t n = atomic_fetch_add_explicit(&d->samples, 1, memory_order_relaxed);
    /* The first chunk replaces what an earlier run left only in part: the
     * weight never falls below 1/WINDOW, so a changed program shows soon. */
    double w = n + 1 < PM__MODEL_WINDOW ? 1.0 / (double)(n + 1) : 1.0 / PM__MODEL_WINDOW;
    average_in(&d->ns, (double)ns / (double)subtasks, w);
    average_in(&d->bytes_in, bytes_in, w);
    average_in(&d->bytes_out, bytes_out, w);
}

void pm__model_note_chunk(const pm__task_t *t, const pm__stub_t *s, uint64_t subtasks, uint64_t ns)
{
    if (t->cbs->model == NULL)
        return;
    /* Bytes per subtask so far in this task: a GPU's copies; a CPU of a host
     * other than 0, what the host received (its only inputs). */
    const pm__stub_counts_t *c = pm__counts_peek(t, s->index);
    double in = 0, out = 0;
    if (s->ops->kind == PM_DEVICE_GPU) {
        if (c != NULL && c->subtasks > 0) {
            in = (double)c->bytes_to_gpu / (double)c->subtasks;
            out = (double)c->bytes_from_gpu / (double)c->subtasks;
        }
    } else if (t->remote) {
        uint64_t done = atomic_load_explicit(&t->subtasks_done, memory_order_relaxed);
        if (done > 0)
            in = (double)atomic_load_explicit(&t->bytes_moved, memory_order_relaxed) / (double)done;
    }
    pm__model_note(t->cbs->model, s->index, subtasks, ns, in, out);
}

/* ns per subtask of a device, 0 when it has no sample (or is NULL). */
static double dev_ns(const pm__model_dev_t *d)
{
    return d == NULL || get_u(&d->samples) == 0 ? 0 : get_d(&d->ns);
}

double pm__model_ns(const pm__model_t *m, int stub)
{
    return dev_ns(pm__model_dev_of(m, stub));
}

double pm__model_cpu_ns(const pm__model_t *m)
{
    return m != NULL && m->cpu_dev >= 0 ? dev_ns(&m->dev[m->cpu_dev]) : 0;
}

double pm__model_ns_named(const pm__model_t *m, int kind, const char *name)
{
    if (m == NULL)
        return 0;
    if (kind == PM_DEVICE_CPU && m->cpu_dev >= 0) /* asked at every ready task */
        return pm__model_cpu_ns(m);
    char clean[sizeof m->dev[0].name];
    if (kind == PM_DEVICE_CPU) { /* its name is clean already */
        pthread_once(&cpu_once, read_cpu_name);
        name = cpu_name;
    } else {
        clean_name(clean, sizeof clean, name);
        name = clean;
    }
    int i = find_dev(m, kind, name);
    return i < 0 ? 0 : dev_ns(&m->dev[i]);
}

void pm__model_bytes(const pm__model_t *m, int stub, double *in, double *out)
{
    const pm__model_dev_t *d = pm__model_dev_of(m, stub);
    bool known = d != NULL && get_u(&d->samples) > 0;
    *in = known ? get_d(&d->bytes_in) : 0;
    *out = known ? get_d(&d->bytes_out) : 0;
}

bool pm__model_held_back(pm__model_t *m, int stub)
{
    pm__model_dev_t *d = (pm__model_dev_t *)pm__model_dev_of(m, stub);
    if (d == NULL)
        return false;
    uint64_t every = get_u(&d->probe_every);
    if (every < PM__MODEL_PROBE_MIN)
        every = PM__MODEL_PROBE_MIN;
    uint64_t held = atomic_fetch_add_explicit(&d->held, 1, memory_order_relaxed) + 1;
    if (held < every || !atomic_compare_exchange_strong(&d->held, &held, 0))
        return false;
    /* Probe now; if the device is still slow, wait twice as long next time. */
    set_u(&d->probe_every, every * 2 < PM__MODEL_PROBE_MAX ? every * 2 : PM__MODEL_PROBE_MAX);
    return true;
}

void pm__model_paid(pm__model_t *m, int stub)
{
    pm__model_dev_t *d = (pm__model_dev_t *)pm__model_dev_of(m, stub);
    if (d == NULL)
        return;
    if (get_u(&d->held) != 0)
        set_u(&d->held, 0);
    if (get_u(&d->probe_every) != 0)
        set_u(&d->probe_every, 0);
}

/* ---- file names ---------------------------------------------------------- */

bool pm__model_dir(char *out, size_t size)
{
    const char *v = getenv("PMLIB_MODEL_DIR");
    int n;
    if (v != NULL && *v != '\0') {
        if (strcmp(v, "off") == 0)
            return false;
        n = snprintf(out, size, "%s", v);
    } else if ((v = getenv("XDG_CACHE_HOME")) != NULL && v[0] == '/') {
        n = snprintf(out, size, "%s/pmlib/model", v);
    } else if ((v = getenv("HOME")) != NULL && *v != '\0') {
        n = snprintf(out, size, "%s/.cache/pmlib/model", v);
    } else {
        return false;
    }
    return n > 0 && (size_t)n < size;
}

/* Letters, digits, '-', '_' and (not first) '.' stay; other bytes become
 * %XX, so any callbacks name is one safe file name, and no two collide. */
static void escape(const char *in, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; in[i] != '\0' && i < PM__NAME_MAX - 1; i++) {
        unsigned char c = (unsigned char)in[i];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || (c == '.' && i > 0);
        if (keep) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
}

bool pm__model_path(const char *dir, const char *cbname, char *out, size_t size)
{
    char esc[ESC_MAX];
    escape(cbname, esc);
    int n = snprintf(out, size, "%s/%s.model", dir, esc);
    return n > 0 && (size_t)n < size;
}

/* ---- reading ------------------------------------------------------------- */

/* The whole file, NUL-terminated; NULL with errno set when unreadable. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = malloc(FILE_MAX + 1);
    size_t n = buf != NULL ? fread(buf, 1, FILE_MAX + 1, f) : 0;
    int err = buf == NULL ? ENOMEM : ferror(f) ? EIO : n > FILE_MAX ? EFBIG : 0;
    fclose(f);
    if (err != 0) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Splits off the next line (without its newline); NULL when none is left
 * or the last one has no newline (a truncated file). */
static char *next_line(char **pos)
{
    char *s = *pos, *nl = strchr(s, '\n');
    if (nl == NULL)
        return NULL;
    *nl = '\0';
    *pos = nl + 1;
    return s;
}

static bool field_u(char **p, uint64_t *v)
{
    char *end;
    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    unsigned long long x = strtoull(*p, &end, 10);
    if (errno != 0 || *end != ' ')
        return false;
    *v = x;
    *p = end + 1;
    return true;
}

static bool field_d(char **p, double *v)
{
    char *end;
    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    double x = strtod(*p, &end);
    /* Underflow (a tiny value, as files of older versions may hold) reads as 0. */
    if (errno == ERANGE && end != *p && fabs(x) <= DBL_MIN)
        errno = 0, x = 0;
    if (errno != 0 || *end != ' ' || !isfinite(x) || x < 0)
        return false;
    *v = x;
    *p = end + 1;
    return true;
}

/* KIND SAMPLES NS IN OUT HELD PROBE NAME */
static bool parse_device(char *line, pm__model_t *m)
{
    int kind;
    if (strncmp(line, "cpu ", 4) == 0)
        kind = PM_DEVICE_CPU;
    else if (strncmp(line, "gpu ", 4) == 0)
        kind = PM_DEVICE_GPU;
    else
        return false;
    char *p = line + 4;
    uint64_t samples, held, probe;
    double ns, in, out;
    if (!field_u(&p, &samples) || !field_d(&p, &ns) || !field_d(&p, &in) || !field_d(&p, &out) ||
        !field_u(&p, &held) || !field_u(&p, &probe))
        return false;
    if (samples == 0 || probe > PM__MODEL_PROBE_MAX || *p == '\0' || *p == ' ' ||
        strlen(p) >= sizeof m->dev[0].name || find_dev(m, kind, p) >= 0 ||
        m->ndev == PM__MODEL_MAX_DEVICES)
        return false;
    pm__model_dev_t *d = &m->dev[find_or_add(m, kind, p)];
    if (strcmp(d->name, p) != 0) /* control characters or untrimmed */
        return false;
    set_u(&d->samples, samples);
    set_u(&d->ns, bits_of(ns));
    set_u(&d->bytes_in, bits_of(in));
    set_u(&d->bytes_out, bits_of(out));
    set_u(&d->held, held);
    set_u(&d->probe_every, probe);
    return true;
}

/* Parses a file's text into `m` (empty, named); NULL or why it is not a
 * model of that name. */
static const char *parse(char *text, size_t len, pm__model_t *m, char *why, size_t whysize)
{
    if (len == 0)
        return "it is empty";
    if (strlen(text) != len)
        return "it is not text";
    char *pos = text, *line = next_line(&pos), *end;
    if (line == NULL || strncmp(line, "pmlib-model ", 12) != 0 || line[12] < '0' || line[12] > '9')
        return "it does not start with a pmlib-model line";
    errno = 0;
    long version = strtol(line + 12, &end, 10);
    if (errno != 0 || *end != '\0')
        return "its pmlib-model line is not 'pmlib-model VERSION'";
    if (version != PM__MODEL_VERSION) {
        snprintf(why, whysize, "it is of version %ld, this pmlib reads version %d", version,
                 PM__MODEL_VERSION);
        return why;
    }
    char esc[ESC_MAX];
    escape(m->cbname, esc);
    line = next_line(&pos);
    if (line == NULL || strncmp(line, "callbacks ", 10) != 0)
        return "it names no callbacks";
    if (strcmp(line + 10, esc) != 0) {
        snprintf(why, whysize, "it is the model of callbacks '%.80s', not of '%s'", line + 10,
                 m->cbname);
        return why;
    }
    for (int n = 3;; n++) {
        line = next_line(&pos);
        if (line == NULL)
            return "it is truncated (no end line)";
        if (strcmp(line, "end") == 0)
            return *pos == '\0' ? NULL : "it goes on after its end line";
        if (line[0] == '#')
            continue;
        if (!parse_device(line, m)) {
            snprintf(why, whysize, "line %d is not a device record", n);
            return why;
        }
    }
}

/* What a device has learned, from one model to another. */
static void copy_dev(pm__model_dev_t *d, const pm__model_dev_t *s)
{
    set_u(&d->samples, get_u(&s->samples));
    set_u(&d->ns, get_u(&s->ns));
    set_u(&d->bytes_in, get_u(&s->bytes_in));
    set_u(&d->bytes_out, get_u(&s->bytes_out));
    set_u(&d->held, get_u(&s->held));
    set_u(&d->probe_every, get_u(&s->probe_every));
}

/* Merges the devices of a valid file into `m`; false, after one warning
 * unless `quiet`, when there is no such file or it is not valid. */
static bool load(pm__model_t *m, const char *path, bool quiet)
{
    size_t len = 0;
    char *text = slurp(path, &len);
    if (text == NULL) {
        if (errno != ENOENT && errno != ENOTDIR && !quiet) /* none there: not a defect */
            pm__warn("performance model: cannot read %s (%s); remove it, or set PMLIB_MODEL_DIR "
                     "to another directory or to off", path, strerror(errno));
        return false;
    }
    pm__model_t *f = calloc(1, sizeof *f);
    if (f == NULL) {
        free(text);
        return false;
    }
    memcpy(f->cbname, m->cbname, sizeof f->cbname);
    char why[256];
    const char *bad = parse(text, len, f, why, sizeof why);
    free(text);
    if (bad != NULL) {
        if (!quiet)
            pm__warn("performance model: ignoring %s: %s; it is rewritten at pm_finalize "
                     "(PMLIB_MODEL_DIR=off turns the model off)", path, bad);
        free(f);
        return false;
    }
    for (int i = 0; i < f->ndev; i++) {
        int j = find_or_add(m, f->dev[i].kind, f->dev[i].name);
        if (j < 0)
            break;
        pm__model_dev_t *d = &m->dev[j];
        copy_dev(d, &f->dev[i]);
        d->loaded_samples = get_u(&d->samples);
        d->loaded_held = get_u(&d->held);
        d->loaded_probe = get_u(&d->probe_every);
    }
    free(f);
    return true;
}

bool pm__model_load(pm__model_t *m, const char *path)
{
    return load(m, path, false);
}

/* ---- writing ------------------------------------------------------------- */

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return ENAMETOOLONG;
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return errno;
    return 0;
}

static bool changed_here(const pm__model_dev_t *d)
{
    return get_u(&d->samples) != d->loaded_samples || get_u(&d->held) != d->loaded_held ||
           get_u(&d->probe_every) != d->loaded_probe;
}

static void write_model(FILE *f, const pm__model_t *m)
{
    char esc[ESC_MAX];
    escape(m->cbname, esc);
    fprintf(f, "pmlib-model %d\ncallbacks %s\n", PM__MODEL_VERSION, esc);
    fprintf(f, "# kind samples ns-per-subtask bytes-in bytes-out held probe-every device\n");
    for (int i = 0; i < m->ndev; i++) {
        const pm__model_dev_t *d = &m->dev[i];
        if (get_u(&d->samples) == 0)
            continue;
        fprintf(f, "%s %llu %.17g %.17g %.17g %llu %llu %s\n",
                d->kind == PM_DEVICE_GPU ? "gpu" : "cpu", (unsigned long long)get_u(&d->samples),
                get_d(&d->ns), get_d(&d->bytes_in), get_d(&d->bytes_out),
                (unsigned long long)get_u(&d->held), (unsigned long long)get_u(&d->probe_every),
                d->name);
    }
    fprintf(f, "end\n");
}

static atomic_int warned_write;

int pm__model_save(const pm__model_t *m, const char *path)
{
    /* Another process (a host sharing the directory) may have written the
     * file since it was read: keep its devices that this one left alone. */
    pm__model_t *out = calloc(1, sizeof *out);
    if (out == NULL)
        return PM_ENOMEM;
    out->cpu_dev = -1;
    memcpy(out->cbname, m->cbname, sizeof out->cbname);
    load(out, path, true);
    for (int i = 0; i < m->ndev; i++) {
        const pm__model_dev_t *d = &m->dev[i];
        int j = find_dev(out, d->kind, d->name);
        if (get_u(&d->samples) == 0 || (j >= 0 && !changed_here(d)))
            continue;
        if (j < 0 && (j = find_or_add(out, d->kind, d->name)) < 0)
            continue;
        copy_dev(&out->dev[j], d);
    }

    char dir[PATH_MAX], tmp[PATH_MAX + 16];
    int err = 0, fd = -1;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir)
        *slash = '\0';
    if (slash != NULL && (err = make_dirs(dir)) != 0)
        goto out_warn;
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    if ((fd = mkstemp(tmp)) < 0) {
        err = errno;
        goto out_warn;
    }
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        err = errno;
        close(fd);
        goto out_unlink;
    }
    write_model(f, out);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        err = EIO;
        goto out_unlink;
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        goto out_unlink;
    }
    free(out);
    return 0;
out_unlink:
    unlink(tmp);
out_warn:
    if (atomic_exchange(&warned_write, 1) == 0)
        pm__warn("performance model: cannot write %s (%s); set PMLIB_MODEL_DIR to a writable "
                 "directory, or to off", path, strerror(err));
    free(out);
    return PM_EINVAL;
}

/* ---- life ----------------------------------------------------------------- */

pm__model_t *pm__model_create(const char *name, const pm__stub_t *stubs, int nstubs)
{
    pm__model_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->stub_dev = calloc(nstubs > 0 ? (size_t)nstubs : 1, sizeof *m->stub_dev);
    if (m->stub_dev == NULL) {
        free(m);
        return NULL;
    }
    snprintf(m->cbname, sizeof m->cbname, "%s", name);
    m->nstubs = nstubs;
    /* This host's devices first, so that a full file cannot crowd them out. */
    m->cpu_dev = -1;
    for (int i = 0; i < nstubs; i++) {
        m->stub_dev[i] = find_or_add(m, stubs[i].ops->kind, stub_device_name(&stubs[i]));
        if (m->cpu_dev < 0 && stubs[i].ops->kind == PM_DEVICE_CPU)
            m->cpu_dev = m->stub_dev[i];
    }
    char dir[PATH_MAX], path[PATH_MAX];
    if (pm__model_dir(dir, sizeof dir) && pm__model_path(dir, name, path, sizeof path))
        load(m, path, false);
    return m;
}

void pm__model_destroy(pm__model_t *m)
{
    if (m == NULL)
        return;
    bool learned = false;
    for (int i = 0; i < m->ndev; i++)
        learned |= changed_here(&m->dev[i]);
    char dir[PATH_MAX], path[PATH_MAX];
    if (learned && pm__model_dir(dir, sizeof dir) && pm__model_path(dir, m->cbname, path, sizeof path))
        pm__model_save(m, path);
    free(m->stub_dev);
    free(m);
}
