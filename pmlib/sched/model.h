/*
 * The performance model: per callback set and per device (a kind plus, for
 * GPUs, the model name; for CPUs the processor's name), the time a subtask
 * takes there and the bytes it moves to and from it, learned online and
 * kept across runs in one small file per callback set.
 *
 * Stubs feed it after each chunk with a few relaxed atomics; the scheduler
 * reads it when a stub has not timed a chunk of the task itself.
 */
#ifndef PMLIB_SCHED_MODEL_H
#define PMLIB_SCHED_MODEL_H

#include "core/internal.h"
#include "sched/ranges.h"

#define PM__MODEL_VERSION 1
#define PM__MODEL_MAX_DEVICES 32   /* devices per file; more are dropped */
#define PM__MODEL_WINDOW 16        /* the average follows about the last 16 chunks */
#define PM__MODEL_PROBE_MIN 16     /* a held-back device probes after this many tasks... */
#define PM__MODEL_PROBE_MAX 4096   /* ...doubling up to this many while it stays slow */

/* One device of a model. Doubles are kept as their bits in atomics. */
typedef struct pm__model_dev {
    int kind;                     /* PM_DEVICE_CPU or PM_DEVICE_GPU */
    char name[96];
    atomic_uint_fast64_t samples; /* chunks averaged in, all runs */
    atomic_uint_fast64_t ns;      /* double: ns per subtask */
    atomic_uint_fast64_t bytes_in, bytes_out; /* double: bytes per subtask to/from it */
    atomic_uint_fast64_t held;    /* tasks it was held back from since it last ran */
    atomic_uint_fast64_t probe_every; /* held tasks before a probe; 0: PM__MODEL_PROBE_MIN */
    uint64_t loaded_samples, loaded_held, loaded_probe; /* as read from the file */
} pm__model_dev_t;

typedef struct pm__model {
    char cbname[PM__NAME_MAX];
    int ndev;
    pm__model_dev_t dev[PM__MODEL_MAX_DEVICES];
    int nstubs;
    int *stub_dev; /* this host's stub index -> dev index */
    int cpu_dev;   /* this host's CPUs' dev index, -1: no CPU stub */
} pm__model_t;

/* A model for callback set `name`: the devices of its file when that file
 * is valid, plus one device per distinct device among `stubs` (this
 * host's). NULL only when out of memory. */
pm__model_t *pm__model_create(const char *name, const pm__stub_t *stubs, int nstubs);
/* Writes the model's file (unless the model is off) and frees it. */
void pm__model_destroy(pm__model_t *m);

/* Averages in one chunk of `subtasks` subtasks that took `ns` on `stub`
 * and moved the given bytes per subtask to and from its device. */
void pm__model_note(pm__model_t *m, int stub, uint64_t subtasks, uint64_t ns,
                    double bytes_in, double bytes_out);

/* What the model knows of `stub`'s device: ns per subtask (0: nothing). */
double pm__model_ns(const pm__model_t *m, int stub);
/* The same for this host's CPU stubs (one device). */
double pm__model_cpu_ns(const pm__model_t *m);
/* The same for a device by kind and name, such as another host's GPU
 * (CPUs: this host's processor, taken to be every host's). */
double pm__model_ns_named(const pm__model_t *m, int kind, const char *name);
/* Stub `stub`'s time per chunk of task t: measured in this task, else the
 * model's for its device and these callbacks, else 0 (unknown). Inline:
 * the pull policy asks it for every stub on each take. */
static inline double pm__model_chunk_ns(const pm__task_t *t, int stub)
{
    const pm__stub_counts_t *c = pm__counts_peek(t, stub);
    uint64_t ns = c != NULL ? atomic_load_explicit(&c->chunk_ns, memory_order_relaxed) : 0;
    if (ns > 0)
        return (double)ns;
    /* A task only CPU stubs of one device run: the time the model had
     * when the task began, in the task's own block, rather than the
     * model's entry, which every chunk's end writes: read by each stub as
     * it takes its first chunk, that line made 16 stubs starting a task
     * wait for each other. */
    const struct pm__sched_state *st = t->sched;
    if (st != NULL && st->cpu_only && st->one_device && st->model_least > 0)
        return st->model_least;
    return pm__model_ns(t->cbs->model, stub) * (double)t->grain;
}
/* Bytes per subtask moved to and from it (0 when unknown). */
void pm__model_bytes(const pm__model_t *m, int stub, double *in, double *out);
const pm__model_dev_t *pm__model_dev_of(const pm__model_t *m, int stub);

/* Held-back bookkeeping: counts a task `stub`'s device was held back from;
 * true when that device should probe one chunk of this task instead. */
bool pm__model_held_back(pm__model_t *m, int stub);
/* The device ran by the model's own choice: probe soon again when it stops paying. */
void pm__model_paid(pm__model_t *m, int stub);

/* Files. The directory from PMLIB_MODEL_DIR, XDG_CACHE_HOME or HOME (false:
 * the model is off) and a callback set's file in it (false: too long). */
bool pm__model_dir(char *out, size_t size);
bool pm__model_path(const char *dir, const char *cbname, char *out, size_t size);
/* Reads a file into `m` (which keeps its name); false, with one warning
 * naming the file and why, if it is unreadable as a model of that name. */
bool pm__model_load(pm__model_t *m, const char *path);
/* Writes `m` atomically (temporary file, rename); merges the devices of
 * the file on disk that this process did not measure. */
int pm__model_save(const pm__model_t *m, const char *path);

/* The stubs' report of a finished chunk of `subtasks` subtasks that took
 * `ns` to the callback set's performance model. */
void pm__model_note_chunk(const pm__task_t *t, const pm__stub_t *s, uint64_t subtasks, uint64_t ns);

#endif /* PMLIB_SCHED_MODEL_H */
