/*
 * PMLIB_TRACE=file.json: a Chrome trace-event file (chrome://tracing,
 * Perfetto) with one track per stub: each chunk of subtasks, each
 * subscribe pass and each wait for a chunk's inputs is a span, each task a
 * span on a "tasks" track, and each payload this host received from
 * another host a span on a "transfers" track (from the request or report
 * to the last byte landed; its source and destination hosts and bytes as
 * arguments). The file is written as the program runs:
 * each stub keeps two small buffers of its own spans (no lock on the hot
 * path); when one is full it hands it to a writer thread, which formats the
 * spans and appends them to the file, and goes on with the other, so memory
 * stays bounded however long the program runs and the stubs do not stop
 * to format (512 spans took a stub 0.4 to 0.7 ms, which in a trace of
 * short tasks delayed every task after them). Should the writer still hold
 * the other buffer, the stub formats and writes its spans itself.
 * PMLIB_TRACE_MAX_MB caps the file: past it, spans are dropped with a
 * warning. With several hosts, host 0 writes file.json without the closing
 * bracket and host h writes file.json.h without the opening one, so
 * `cat file.json file.json.1 ...` is one trace (viewers accept the missing
 * closing bracket).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "core/internal.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Spans a track holds before it writes them out. */
#define PM__TRACE_BATCH 512
/* The longest line of one span. */
#define PM__TRACE_LINE 192

typedef struct span {
    double t0, t1;
    uint64_t task, chunk; /* transfers: chunk is the bytes */
    int what;
    int from, to; /* transfers: hosts */
} span_t;

typedef struct track {
    span_t s[2][PM__TRACE_BATCH];
    size_t n;             /* spans in s[cur] */
    int cur;              /* the buffer being filled */
    atomic_int handed[2]; /* a full buffer the writer has not written yet */
    char text[PM__TRACE_BATCH * PM__TRACE_LINE]; /* formatted by the owner */
} track_t;

static struct {
    FILE *f;
    char *path;
    double origin;
    track_t *tracks; /* one per stub, then one for tasks, one for transfers */
    int ntracks;
    pthread_mutex_t tasks_lock; /* the tasks track */
    pthread_mutex_t file_lock;  /* f, written, capped */
    uint64_t written, cap;      /* bytes; cap 0: none */
    bool capped;
    /* The writer: full buffers queue as 2 * track + buffer under wlock. */
    bool writer;                /* started */
    pthread_t thread;
    pthread_mutex_t wlock;
    pthread_cond_t wcv;
    int *queue, qhead, qlen;    /* room for two buffers per track */
    bool stop;
    char *wtext;                /* the writer's formatting buffer */
} T;

static const char *const what_names[] = {"chunk", "subscribe", "fetch", "task", "transfer", "gpu copy",
                                         "gpu wait", "steal", "report", "drained", "gpu open"};
/* What a span's number is, by kind (transfers have their own line). */
static const char *const what_args[] = {"chunk", "chunk", "chunk", "chunk", "bytes", "bytes",
                                        "chunk", "chunks", "chunk", "host", "row"};
_Static_assert(sizeof what_names / sizeof *what_names == PM__TRACE_GPU_OPEN + 1 &&
                   sizeof what_args / sizeof *what_args == PM__TRACE_GPU_OPEN + 1,
               "a name and an argument for each kind of span");

int pm__trace_on(void)
{
    return T.f != NULL;
}

static char *host_path(const char *v)
{
    if (pm__rt.host == 0)
        return strdup(v);
    size_t n = strlen(v) + 16;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s.%d", v, pm__rt.host);
    return p;
}

/* The writer thread; without it (out of memory or threads) each track's
 * owner writes its spans itself. */
static void *writer_main(void *arg);

static void start_writer(void)
{
    T.queue = malloc(2 * (size_t)T.ntracks * sizeof *T.queue);
    T.wtext = malloc(PM__TRACE_BATCH * PM__TRACE_LINE);
    if (T.queue == NULL || T.wtext == NULL)
        return;
    pthread_mutex_init(&T.wlock, NULL);
    pthread_cond_init(&T.wcv, NULL);
    if (pthread_create(&T.thread, NULL, writer_main, NULL) != 0) {
        pthread_mutex_destroy(&T.wlock);
        pthread_cond_destroy(&T.wcv);
        return;
    }
    pthread_setname_np(T.thread, "pmlib-trace");
    T.writer = true;
}

/* The opening bracket (host 0) and the names of the process and tracks. */
static void write_header(void)
{
    if (pm__rt.host == 0)
        fputs("[\n", T.f);
    fprintf(T.f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"host %d\"}}",
            pm__rt.host == 0 ? "" : ",\n", pm__rt.host, pm__rt.host);
    for (int k = 0; k < T.ntracks; k++) {
        char name[32];
        if (k < pm__rt.nstubs)
            snprintf(name, sizeof name, "%s %d", pm__rt.stubs[k].ops->name,
                     pm__rt.stubs[k].device_index);
        else
            snprintf(name, sizeof name, k == pm__rt.nstubs ? "tasks" : "transfers");
        fprintf(T.f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                pm__rt.host, k, name);
    }
}

void pm__trace_init(void)
{
    const char *v = getenv("PMLIB_TRACE");
    memset(&T, 0, sizeof T);
    if (v == NULL || *v == '\0')
        return;
    T.cap = pm__env_uint("PMLIB_TRACE_MAX_MB", "megabytes", 1, UINT64_C(1) << 40, 0) << 20;
    T.ntracks = pm__rt.nstubs + 2;
    T.tracks = calloc((size_t)T.ntracks, sizeof *T.tracks);
    T.path = host_path(v);
    if (T.tracks == NULL || T.path == NULL) {
        pm__warn("PMLIB_TRACE: out of memory; no trace");
        goto fail;
    }
    T.f = fopen(T.path, "w");
    if (T.f == NULL) {
        pm__warn("PMLIB_TRACE: cannot write %s; no trace (check the directory exists and is writable)",
                 T.path);
        goto fail;
    }
    T.origin = pm__now();
    pthread_mutex_init(&T.tasks_lock, NULL);
    pthread_mutex_init(&T.file_lock, NULL);
    write_header();
    start_writer();
    return;
fail:
    free(T.tracks);
    free(T.path);
    memset(&T, 0, sizeof T);
}

/* Formats n spans of track k into text; returns the length. */
static size_t format_spans(int k, const span_t *s, size_t n, char *text)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const span_t *sp = &s[i];
        int w = sp->what == PM__TRACE_GPU_COPY ?
            snprintf(text + len, PM__TRACE_LINE,
                     ",\n{\"ph\":\"X\",\"name\":\"gpu copy\",\"cat\":\"transfer\",\"pid\":%d,\"tid\":%d,"
                     "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"task\":%llu,\"from_gpu\":%d,\"to_gpu\":%d,"
                     "\"bytes\":%llu}}",
                     pm__rt.host, k, (sp->t0 - T.origin) * 1e6, (sp->t1 - sp->t0) * 1e6,
                     (unsigned long long)sp->task, sp->from, sp->to, (unsigned long long)sp->chunk) :
            sp->what == PM__TRACE_MOVE ?
            snprintf(text + len, PM__TRACE_LINE,
                     ",\n{\"ph\":\"X\",\"name\":\"transfer\",\"cat\":\"transfer\",\"pid\":%d,\"tid\":%d,"
                     "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"task\":%llu,\"from\":%d,\"to\":%d,\"bytes\":%llu}}",
                     pm__rt.host, k, (sp->t0 - T.origin) * 1e6, (sp->t1 - sp->t0) * 1e6,
                     (unsigned long long)sp->task, sp->from, sp->to, (unsigned long long)sp->chunk) :
            snprintf(text + len, PM__TRACE_LINE,
                         ",\n{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,"
                         "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"task\":%llu,\"%s\":%llu}}",
                         what_names[sp->what], what_names[sp->what], pm__rt.host, k,
                         (sp->t0 - T.origin) * 1e6, (sp->t1 - sp->t0) * 1e6,
                         (unsigned long long)sp->task, what_args[sp->what], (unsigned long long)sp->chunk);
        if (w > 0 && w < PM__TRACE_LINE)
            len += (size_t)w;
    }
    return len;
}

/* Appends formatted spans to the file. */
static void write_text(const char *text, size_t len)
{
    pthread_mutex_lock(&T.file_lock);
    if (T.cap != 0 && T.written + len > T.cap) {
        if (!T.capped)
            pm__warn("PMLIB_TRACE: %s reached %llu MB (PMLIB_TRACE_MAX_MB); later spans are dropped",
                     T.path, (unsigned long long)(T.cap >> 20));
        T.capped = true;
    } else if (fwrite(text, 1, len, T.f) == len) {
        T.written += len;
    }
    pthread_mutex_unlock(&T.file_lock);
}

/* Formats and writes the spans of the buffer being filled, by the track's
 * owner (or under tasks_lock for the shared tracks). */
static void flush_track(int k)
{
    track_t *tr = &T.tracks[k];
    write_text(tr->text, format_spans(k, tr->s[tr->cur], tr->n, tr->text));
    tr->n = 0;
}

static void *writer_main(void *arg)
{
    (void)arg;
    pm__internal_thread = 1;
    pthread_mutex_lock(&T.wlock);
    for (;;) {
        while (T.qlen == 0 && !T.stop)
            pthread_cond_wait(&T.wcv, &T.wlock);
        if (T.qlen == 0)
            break; /* stopped, and nothing is left */
        int item = T.queue[T.qhead];
        T.qhead = (T.qhead + 1) % (2 * T.ntracks);
        T.qlen--;
        pthread_mutex_unlock(&T.wlock);
        track_t *tr = &T.tracks[item / 2];
        write_text(T.wtext, format_spans(item / 2, tr->s[item % 2], PM__TRACE_BATCH, T.wtext));
        atomic_store_explicit(&tr->handed[item % 2], 0, memory_order_release);
        pthread_mutex_lock(&T.wlock);
    }
    pthread_mutex_unlock(&T.wlock);
    return NULL;
}

/* A full buffer of track k (by its owner): to the writer, unless the
 * writer still holds the track's other buffer (then written here). */
static void buffer_full(int k)
{
    track_t *tr = &T.tracks[k];
    int other = tr->cur ^ 1;
    if (!T.writer || atomic_load_explicit(&tr->handed[other], memory_order_acquire)) {
        flush_track(k);
        return;
    }
    atomic_store_explicit(&tr->handed[tr->cur], 1, memory_order_relaxed);
    pthread_mutex_lock(&T.wlock);
    T.queue[(T.qhead + T.qlen) % (2 * T.ntracks)] = 2 * k + tr->cur;
    T.qlen++;
    pthread_cond_signal(&T.wcv);
    pthread_mutex_unlock(&T.wlock);
    tr->cur = other;
    tr->n = 0;
}

void pm__trace_span(int stub, int what, uint64_t task, uint64_t chunk, double t0, double t1)
{
    if (T.f == NULL)
        return;
    bool shared = stub < 0 || stub >= pm__rt.nstubs;
    int k = shared ? pm__rt.nstubs : stub;
    track_t *tr = &T.tracks[k];
    if (shared)
        pthread_mutex_lock(&T.tasks_lock);
    tr->s[tr->cur][tr->n++] = (span_t){t0, t1, task, chunk, what, 0, 0};
    if (tr->n == PM__TRACE_BATCH)
        buffer_full(k);
    if (shared)
        pthread_mutex_unlock(&T.tasks_lock);
}

/* A span on the transfers track (shared, under tasks_lock). */
static void transfer_span(int what, int from, int to, uint64_t task, uint64_t bytes, double t0, double t1)
{
    if (T.f == NULL)
        return;
    int k = pm__rt.nstubs + 1;
    track_t *tr = &T.tracks[k];
    pthread_mutex_lock(&T.tasks_lock);
    tr->s[tr->cur][tr->n++] = (span_t){t0, t1, task, bytes, what, from, to};
    if (tr->n == PM__TRACE_BATCH)
        buffer_full(k);
    pthread_mutex_unlock(&T.tasks_lock);
}

void pm__trace_move(int from, int to, uint64_t task, uint64_t bytes, double t0, double t1)
{
    transfer_span(PM__TRACE_MOVE, from, to, task, bytes, t0, t1);
}

void pm__trace_gpu_copy(int from, int to, uint64_t task, uint64_t bytes, double t0, double t1)
{
    transfer_span(PM__TRACE_GPU_COPY, from, to, task, bytes, t0, t1);
}

/* After the stubs stopped: writes what is left, closes the file. */
void pm__trace_finish(void)
{
    if (T.f == NULL)
        return;
    if (T.writer) { /* it writes what it was handed, then stops */
        pthread_mutex_lock(&T.wlock);
        T.stop = true;
        pthread_cond_signal(&T.wcv);
        pthread_mutex_unlock(&T.wlock);
        pthread_join(T.thread, NULL);
        pthread_mutex_destroy(&T.wlock);
        pthread_cond_destroy(&T.wcv);
        T.writer = false;
    }
    for (int k = 0; k < T.ntracks; k++)
        flush_track(k);
    /* Trace viewers accept a missing closing bracket: with several hosts it is
     * left out so that the files can be concatenated. */
    fputs(pm__rt.nhosts == 1 ? "\n]\n" : "\n", T.f);
    if (fclose(T.f) != 0)
        pm__warn("PMLIB_TRACE: writing %s failed (disk full?)", T.path);
    free(T.tracks);
    free(T.path);
    free(T.queue);
    free(T.wtext);
    pthread_mutex_destroy(&T.tasks_lock);
    pthread_mutex_destroy(&T.file_lock);
    memset(&T, 0, sizeof T);
}
