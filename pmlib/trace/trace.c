/*
 * PMLIB_TRACE=file.json: a Chrome trace-event file (chrome://tracing,
 * Perfetto) with one track per stub: each chunk of subtasks, each
 * subscribe pass and each fetch of inputs from host 0 is a span, and each
 * task a span on a "tasks" track. Stubs append to their own buffers, so
 * tracing takes no lock on the hot path; the file is written at
 * pm_finalize. With several hosts, host 0 writes file.json without the
 * closing bracket and host h writes file.json.h without the opening one, so
 * `cat file.json file.json.1 ...` is one trace (viewers accept the missing
 * closing bracket).
 */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    double t0, t1;
    uint64_t task, chunk;
    int what;
} span_t;

typedef struct track {
    span_t *s;
    size_t n, cap;
} track_t;

static struct {
    char *path;
    double origin;
    track_t *tracks; /* one per stub, then one for tasks */
    char (*names)[32]; /* the stubs' names, kept for after they stop */
    int ntracks;
    pthread_mutex_t tasks_lock;
} T;

static const char *const what_names[] = {"chunk", "subscribe", "fetch", "task"};

int pm__trace_on(void)
{
    return T.path != NULL;
}

void pm__trace_init(void)
{
    const char *v = getenv("PMLIB_TRACE");
    memset(&T, 0, sizeof T);
    if (v == NULL || *v == '\0')
        return;
    T.ntracks = pm__rt.nstubs + 1;
    T.tracks = calloc((size_t)T.ntracks, sizeof *T.tracks);
    T.names = calloc((size_t)T.ntracks, sizeof *T.names);
    T.path = T.tracks && T.names ? strdup(v) : NULL;
    if (T.path == NULL) {
        free(T.tracks);
        free(T.names);
        T.tracks = NULL;
        T.names = NULL;
        pm__warn("PMLIB_TRACE: out of memory; no trace");
        return;
    }
    T.origin = pm__now();
    pthread_mutex_init(&T.tasks_lock, NULL);
    for (int s = 0; s < pm__rt.nstubs; s++)
        snprintf(T.names[s], sizeof T.names[s], "%s %d", pm__rt.stubs[s].ops->name,
                 pm__rt.stubs[s].device_index);
    snprintf(T.names[T.ntracks - 1], sizeof T.names[0], "tasks");
}

void pm__trace_span(int stub, int what, uint64_t task, uint64_t chunk, double t0, double t1)
{
    if (T.path == NULL)
        return;
    bool shared = stub < 0 || stub >= T.ntracks - 1;
    track_t *tr = &T.tracks[shared ? T.ntracks - 1 : stub];
    if (shared)
        pthread_mutex_lock(&T.tasks_lock);
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 1024;
        span_t *s = realloc(tr->s, cap * sizeof *s);
        if (s != NULL) {
            tr->s = s;
            tr->cap = cap;
        }
    }
    if (tr->n < tr->cap)
        tr->s[tr->n++] = (span_t){t0, t1, task, chunk, what};
    if (shared)
        pthread_mutex_unlock(&T.tasks_lock);
}

static void write_track_name(FILE *f, int tid, const char *name, int *first)
{
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
            *first ? "" : ",\n", pm__rt.host, tid, name);
    *first = 0;
}

static void write_file(FILE *f)
{
    int first;
    if (pm__rt.host == 0)
        fputs("[\n", f);
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"host %d\"}}",
            pm__rt.host == 0 ? "" : ",\n", pm__rt.host, pm__rt.host);
    first = 0;
    for (int k = 0; k < T.ntracks; k++)
        write_track_name(f, k, T.names[k], &first);
    for (int k = 0; k < T.ntracks; k++) {
        const track_t *tr = &T.tracks[k];
        for (size_t i = 0; i < tr->n; i++) {
            const span_t *sp = &tr->s[i];
            fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"task\":%llu,\"chunk\":%llu}}",
                    what_names[sp->what], what_names[sp->what], pm__rt.host, k,
                    (sp->t0 - T.origin) * 1e6, (sp->t1 - sp->t0) * 1e6,
                    (unsigned long long)sp->task, (unsigned long long)sp->chunk);
        }
    }
    /* Trace viewers accept a missing closing bracket: with several hosts it is
     * left out so that the files can be concatenated. */
    fputs(pm__rt.nhosts == 1 ? "\n]\n" : "\n", f);
}

/* After the stubs stopped: writes the file and frees the buffers. */
void pm__trace_finish(void)
{
    if (T.path == NULL)
        return;
    char *path = T.path;
    if (pm__rt.host != 0) {
        size_t n = strlen(T.path) + 16;
        path = malloc(n);
        if (path != NULL)
            snprintf(path, n, "%s.%d", T.path, pm__rt.host);
    }
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f == NULL) {
        pm__warn("PMLIB_TRACE: cannot write %s; no trace", path ? path : T.path);
    } else {
        write_file(f);
        if (fclose(f) != 0)
            pm__warn("PMLIB_TRACE: writing %s failed", path);
    }
    if (path != T.path)
        free(path);
    for (int k = 0; k < T.ntracks; k++)
        free(T.tracks[k].s);
    free(T.tracks);
    free(T.names);
    free(T.path);
    pthread_mutex_destroy(&T.tasks_lock);
    memset(&T, 0, sizeof T);
}
