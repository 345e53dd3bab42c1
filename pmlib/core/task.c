/*
 * Tasks: descriptor checks, submission, dependencies between tasks that
 * share memories, completion, waiting and statistics.
 */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cuda.h"
#include "reduce/ops.h"

/* Chunks per task when the descriptor leaves the grain to pmlib: enough for
 * load balance on many stubs, few enough that hand-out costs nothing. */
#define PM__AUTO_CHUNKS 4096

size_t pm_type_size(pm_type_t type)
{
    switch (type) {
    case PM_INT32: case PM_UINT32: case PM_FLOAT: return 4;
    case PM_INT64: case PM_UINT64: case PM_DOUBLE: return 8;
    default: return 0;
    }
}

int pm_task_desc_init(pm_task_desc_t *desc)
{
    if (desc == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_init: desc is NULL");
    memset(desc, 0, sizeof *desc);
    desc->sched = PM_SCHED_DEFAULT;
    desc->devices = PM_DEVICE_ANY;
    return 0;
}

int pm_task_desc_add(pm_task_desc_t *desc, pm_memory_t memory, pm_access_t access)
{
    if (desc == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_add: desc is NULL");
    if (access != PM_READ && access != PM_WRITE && access != PM_READ_WRITE)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_add: access %d is not PM_READ, PM_WRITE or PM_READ_WRITE", (int)access);
    if (desc->nmem < 0 || desc->nmem >= PM_MAX_TASK_MEMORIES)
        return PM__FAIL(PM_ETOOMANY, "pm_task_desc_add: a task uses at most %d memories; "
                        "merge memories or split the task", PM_MAX_TASK_MEMORIES);
    int i = desc->nmem++;
    desc->mem[i] = (pm_task_memory_t){.memory = memory, .access = access,
                                      .reduce = PM_REDUCE_NONE, .type = PM_TYPE_NONE};
    return i;
}

static int check_reduce(int index, pm_reduce_op_t op, pm_type_t type)
{
    if (op == PM_REDUCE_NONE || op == PM_REDUCE_CUSTOM)
        return 0;
    int rc = pm__reduce_check(op, type);
    if (rc == PM_ETYPE)
        return PM__FAIL(rc, "memory %d: bitwise reduce ops need an integer type, not float or double", index);
    if (rc != 0)
        return PM__FAIL(rc, "memory %d: reduce op %d / type %d is not a built-in reduce; "
                        "use PM_REDUCE_SUM..PM_REDUCE_BXOR with PM_INT32..PM_DOUBLE", index, (int)op, (int)type);
    return 0;
}

int pm_task_desc_reduce(pm_task_desc_t *desc, int index, pm_reduce_op_t op, pm_type_t type)
{
    if (desc == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_reduce: desc is NULL");
    if (index < 0 || index >= desc->nmem)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_reduce: memory index %d, but the descriptor has %d memories",
                        index, desc->nmem);
    int rc = check_reduce(index, op, type);
    if (rc != 0)
        return rc;
    desc->mem[index].reduce = op;
    desc->mem[index].type = op == PM_REDUCE_CUSTOM ? PM_TYPE_NONE : type;
    return 0;
}

/* ---- checks at submit -------------------------------------------------- */

static int check_desc(const pm_task_desc_t *d, const pm__callbacks_t **cbs)
{
    if (d == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc is NULL; fill one with pm_task_desc_init");
    if (d->callbacks == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->callbacks is NULL; set it to a name given to pm_callbacks_register");
    *cbs = pm__registry_find(d->callbacks);
    if (*cbs == NULL)
        return PM__FAIL(PM_ENOCALLBACK, "pm_task_submit: no callbacks named '%.64s' on host %d; "
                        "call pm_callbacks_register on every host before submitting", d->callbacks, pm__rt.host);
    if (d->subtasks == 0)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: a task needs at least one subtask (desc->subtasks is 0)");
    if (d->nmem < 0 || d->nmem > PM_MAX_TASK_MEMORIES)
        return PM__FAIL(PM_ETOOMANY, "pm_task_submit: desc->nmem is %d; a task uses 0 to %d memories",
                        d->nmem, PM_MAX_TASK_MEMORIES);
    if (d->conf_bytes > 0 && d->conf == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->conf is NULL but conf_bytes is %zu", d->conf_bytes);
    if (d->devices & ~PM_DEVICE_ANY || d->devices == 0)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->devices must be PM_DEVICE_CPU, PM_DEVICE_GPU or both");
    if (d->sched != PM_SCHED_DEFAULT && pm__sched_policy(d->sched) == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->sched %d is not a pm_sched_t value", (int)d->sched);
    for (int i = 0; i < d->nmem; i++) {
        const pm_task_memory_t *m = &d->mem[i];
        if (m->access != PM_READ && m->access != PM_WRITE && m->access != PM_READ_WRITE)
            return PM__FAIL(PM_EINVAL, "pm_task_submit: memory %d has access %d; use PM_READ, PM_WRITE or PM_READ_WRITE",
                            i, (int)m->access);
        int rc = check_reduce(i, m->reduce, m->type);
        if (rc != 0)
            return rc;
        if (m->reduce != PM_REDUCE_NONE && m->access == PM_READ)
            return PM__FAIL(PM_EINVAL, "pm_task_submit: memory %d is reduced but added as PM_READ; add it with PM_WRITE",
                            i);
        if (m->reduce == PM_REDUCE_CUSTOM && (*cbs)->cb.reduce == NULL)
            return PM__FAIL(PM_EINVAL, "pm_task_submit: memory %d uses PM_REDUCE_CUSTOM but callbacks '%s' have no reduce callback",
                            i, (*cbs)->name);
        for (int j = 0; j < i; j++)
            if (d->mem[j].memory.id == m->memory.id)
                return PM__FAIL(PM_EINVAL, "pm_task_submit: the same memory is task memory %d and %d; name each memory once",
                                j, i);
    }
    return 0;
}

int pm__gpu_eligible(const pm__task_t *t, int major, int minor)
{
    const pm_callbacks_t *cb = &t->cbs.cb;
    if (cb->cuda == NULL || !(t->desc.devices & PM_DEVICE_GPU) || major * 10 + minor < t->desc.min_cc)
        return 0;
    return cb->device_filter == NULL ||
           cb->device_filter(PM_DEVICE_GPU, major, minor, t->conf, t->desc.conf_bytes);
}

int pm__task_runnable_on(const pm__task_t *t, const pm__stub_t *s)
{
    const pm_callbacks_t *cb = &t->cbs.cb;
#if PMLIB_HAVE_CUDA
    if (s->ops->kind == PM_DEVICE_GPU && !pm__cuda_stub_usable(s))
        return 0;
#endif
    if (s->ops->kind == PM_DEVICE_GPU)
        return pm__gpu_eligible(t, s->major, s->minor);
    if (cb->cpu == NULL || !(t->desc.devices & PM_DEVICE_CPU))
        return 0;
    return cb->device_filter == NULL ||
           cb->device_filter(PM_DEVICE_CPU, 0, 0, t->conf, t->desc.conf_bytes);
}

/* How much of a task host h should get first: its stubs that can run it
 * (all hosts alike under static-equal). */
static double host_weight(const pm__task_t *t, int h)
{
    const pm_callbacks_t *cb = &t->cbs.cb;
    double w = 0;
    if (cb->cpu != NULL && (t->desc.devices & PM_DEVICE_CPU) &&
        (cb->device_filter == NULL || cb->device_filter(PM_DEVICE_CPU, 0, 0, t->conf, t->desc.conf_bytes)))
        w += pm__hosts[h].ncpu;
    for (int g = 0; g < pm__hosts[h].ngpu && g < PM__MAX_GPUS; g++)
        w += pm__gpu_eligible(t, pm__hosts[h].gpu[g].major, pm__hosts[h].gpu[g].minor);
    if (t->desc.sched == PM_SCHED_STATIC_EQUAL && w > 0)
        w = 1;
    return w;
}

static int check_devices(const pm__task_t *t)
{
    for (int h = 0; h < pm__rt.nhosts; h++)
        if (host_weight(t, h) > 0)
            return 0;
    const pm_callbacks_t *cb = &t->cbs.cb;
    int gpus = 0;
    for (int h = 0; h < pm__rt.nhosts; h++)
        gpus += pm__hosts[h].ngpu;
    if (cb->cpu == NULL && gpus == 0)
        return PM__FAIL(PM_ENODEVICE, "callbacks '%s' have no cpu callback and no host has GPU stubs; "
                        "add a cpu callback or run on hosts with GPUs", t->cbs.name);
    if (t->desc.devices == PM_DEVICE_GPU && gpus == 0)
        return PM__FAIL(PM_ENODEVICE, "the task may run only on GPUs (desc->devices) and no host has one; "
                        "allow PM_DEVICE_CPU or run on hosts with GPUs (pmlib-info lists them)");
    return PM__FAIL(PM_ENODEVICE, "no stub may run callbacks '%s' (device mask %d, device filter); "
                    "widen desc->devices or the filter", t->cbs.name, t->desc.devices);
}

/* Host 0 splits the chunks among hosts in contiguous shares by weight. */
static int split_hosts(pm__task_t *t)
{
    int n = pm__rt.nhosts;
    t->host_lo = calloc((size_t)n, sizeof *t->host_lo);
    t->host_hi = calloc((size_t)n, sizeof *t->host_hi);
    if (t->host_lo == NULL || t->host_hi == NULL)
        return PM_ENOMEM;
    double total = 0, acc = 0;
    for (int h = 0; h < n; h++)
        total += host_weight(t, h);
    uint64_t lo = 0;
    for (int h = 0; h < n; h++) {
        acc += host_weight(t, h);
        uint64_t hi = (uint64_t)((double)t->nchunks * (acc / total) + 0.5);
        if (hi > t->nchunks || h == n - 1)
            hi = t->nchunks;
        if (host_weight(t, h) <= 0)
            hi = lo;
        t->host_lo[h] = lo;
        t->host_hi[h] = hi;
        lo = hi;
    }
    t->lo = t->host_lo[0];
    t->hi = t->host_hi[0];
    return 0;
}

/* ---- creation ---------------------------------------------------------- */

static void task_free(pm__task_t *t)
{
    pm__task_free_pieces(t);
    pthread_mutex_destroy(&t->redist_lock);
    free(t->running);
    free(t->running_since);
    free(t->copied);
    free(t->done_map);
    free(t->host_lo);
    free(t->host_hi);
    if (t->chunk_subs != NULL) {
        for (uint64_t c = 0; c < t->nchunks; c++)
            pm__chunk_subs_free(&t->chunk_subs[c]);
        free(t->chunk_subs);
    }
    if (t->policy != NULL)
        t->policy->fini(t);
    pm__reduce_tree_free(t);
    pthread_mutex_destroy(&t->err_lock);
    free(t->counts);
    free(t->dependents);
    free(t->conf);
    free(t);
}

int pm__task_create(const pm_task_desc_t *d, const pm__callbacks_t *cbs, pm__task_t **out)
{
    pm__task_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return PM_ENOMEM;
    pthread_mutex_init(&t->err_lock, NULL);
    pthread_mutex_init(&t->redist_lock, NULL);
    t->failed_host = -1;
    t->desc = *d;
    t->cbs = *cbs;
    t->failed_subtask = UINT64_MAX;
    t->t_submit = pm__now();
    if (d->conf_bytes > 0) {
        t->conf = malloc(d->conf_bytes);
        if (t->conf == NULL)
            goto nomem;
        memcpy(t->conf, d->conf, d->conf_bytes);
    }
    t->desc.conf = t->conf;
    t->desc.callbacks = t->cbs.name;
    if (t->desc.sched == PM_SCHED_DEFAULT)
        t->desc.sched = pm__rt.default_sched;
    t->grain = d->grain ? d->grain : (d->subtasks + PM__AUTO_CHUNKS - 1) / PM__AUTO_CHUNKS;
    t->nchunks = (d->subtasks + t->grain - 1) / t->grain;
    t->lo = 0;
    t->hi = t->nchunks;
    atomic_init(&t->outstanding, t->nchunks + (uint64_t)(pm__rt.nhosts - 1));
    for (int i = 0; i < d->nmem; i++)
        t->nred += d->mem[i].reduce != PM_REDUCE_NONE;
    t->counts = pm__aligned_alloc((size_t)pm__rt.nstubs * sizeof *t->counts);
    if (t->counts == NULL)
        goto nomem;
    memset(t->counts, 0, (size_t)pm__rt.nstubs * sizeof *t->counts);
    for (int i = 0; i < pm__rt.nstubs; i++) /* every stub will look at the task */
        atomic_init(&t->counts[i].active, 1);
    if (pm__rt.nhosts > 1) {
        int n = pm__rt.nstubs;
        t->running = calloc((size_t)n, sizeof *t->running);
        t->running_since = calloc((size_t)n, sizeof *t->running_since);
        t->copied = calloc((size_t)n, sizeof *t->copied);
        t->done_map = pm__rt.host == 0 ? calloc(t->nchunks, sizeof *t->done_map) : NULL;
        if (t->running == NULL || t->running_since == NULL || t->copied == NULL ||
            (pm__rt.host == 0 && t->done_map == NULL))
            goto nomem;
        for (int i = 0; i < n; i++)
            atomic_init(&t->running[i], UINT64_MAX);
    }
    if (cbs->cb.subscribe != NULL) {
        t->chunk_subs = calloc(t->nchunks, sizeof *t->chunk_subs);
        if (t->chunk_subs == NULL)
            goto nomem;
    }
    if (t->nred > 0 && pm__reduce_tree_create(t) != 0)
        goto nomem;
    *out = t;
    return 0;
nomem:
    task_free(t);
    return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory for a task of %llu subtasks",
                    (unsigned long long)d->subtasks);
}

/* Whether `later` must wait for `earlier`: they share a memory one writes. */
static int conflicts(const pm__task_t *earlier, const pm__task_t *later)
{
    for (int i = 0; i < earlier->desc.nmem; i++)
        for (int j = 0; j < later->desc.nmem; j++)
            if (earlier->mems[i] == later->mems[j] &&
                ((earlier->desc.mem[i].access | later->desc.mem[j].access) & PM_WRITE))
                return 1;
    return 0;
}

static int add_dependent(pm__task_t *earlier, pm__task_t *later)
{
    if (earlier->ndependents == earlier->cap_dependents) {
        int cap = earlier->cap_dependents ? earlier->cap_dependents * 2 : 4;
        pm__task_t **n = realloc(earlier->dependents, (size_t)cap * sizeof *n);
        if (n == NULL)
            return PM_ENOMEM;
        earlier->dependents = n;
        earlier->cap_dependents = cap;
    }
    earlier->dependents[earlier->ndependents++] = later;
    later->ndeps++;
    return 0;
}

/* Makes a task whose dependencies are done runnable (runtime lock held). */
/* From here on subtasks may write; versions will move. */
static void start_running_locked(pm__task_t *t)
{
    t->state = PM__TASK_RUN;
    t->t_start = pm__now();
    atomic_store(&t->started, 1);
    if (pm__rt.nhosts > 1)
        pm__proto_task_started(t);
}

static void make_ready_locked(pm__task_t *t)
{
    if (t->chunk_subs != NULL)
        t->state = PM__TASK_PREPARE;
    else
        start_running_locked(t);
    pthread_cond_broadcast(&pm__rt.work_cv);
}

/* Resolves memories, dependencies and the handle; runtime lock held. */
static int enqueue_locked(pm__task_t *t)
{
    for (int i = 0; i < t->desc.nmem; i++) {
        t->mems[i] = pm__memory_lookup_locked(t->desc.mem[i].memory);
        if (t->mems[i] == NULL)
            return PM__FAIL(PM_EBADHANDLE, "pm_task_submit: memory %d of the task was released or never created", i);
    }
    for (pm__task_t *e = pm__rt.active; e != NULL; e = e->next)
        if (conflicts(e, t) && add_dependent(e, t) != 0)
            return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory");
    t->handle = pm__handle_add(&pm__rt.tasks, t);
    if (t->handle == 0)
        return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory for handles");
    for (int i = 0; i < t->desc.nmem; i++)
        t->mems[i]->users++;
    t->seq = ++pm__rt.next_seq;
    if (pm__rt.active_tail != NULL)
        pm__rt.active_tail->next = t;
    else
        pm__rt.active = t;
    pm__rt.active_tail = t;
    t->state = PM__TASK_WAITING;
    if (t->ndeps == 0)
        make_ready_locked(t);
    return 0;
}

/* Undoes add_dependent calls made for `t` by a failed enqueue. */
static void drop_dependencies_locked(pm__task_t *t)
{
    for (pm__task_t *e = pm__rt.active; e != NULL; e = e->next)
        if (e->ndependents > 0 && e->dependents[e->ndependents - 1] == t)
            e->ndependents--;
}

int pm_task_submit(const pm_task_desc_t *desc, pm_task_t *task)
{
    PM__CHECK_INIT("pm_task_submit");
    if (pm__rt.host != 0)
        return PM__FAIL(PM_EINVAL, "pm_task_submit on host %d: only host 0 submits tasks; "
                        "the other hosts run their share inside pm_finalize", pm__rt.host);
    if (task == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: task is NULL; pass the address of a pm_task_t");
    *task = PM_TASK_NULL;
    const pm__callbacks_t *cbs = NULL;
    pthread_mutex_lock(&pm__rt.lock); /* the registry may grow meanwhile */
    int rc = check_desc(desc, &cbs);
    pm__callbacks_t cbcopy;
    if (rc == 0)
        cbcopy = *cbs;
    pthread_mutex_unlock(&pm__rt.lock);
    if (rc != 0)
        return rc;
    pm__task_t *t;
    rc = pm__task_create(desc, &cbcopy, &t);
    if (rc != 0)
        return rc;
    rc = check_devices(t);
    if (rc == 0 && pm__rt.nhosts > 1 && split_hosts(t) != 0)
        rc = PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory");
    if (rc == 0) {
        t->policy = pm__sched_policy(t->desc.sched);
        rc = t->policy->init(t, pm__rt.nstubs);
        if (rc != 0)
            t->policy = NULL;
    }
    if (rc != 0) {
        task_free(t);
        return rc;
    }
    pthread_mutex_lock(&pm__rt.lock);
    rc = enqueue_locked(t);
    if (rc != 0) {
        drop_dependencies_locked(t);
        if (t->handle != 0)
            pm__handle_remove(&pm__rt.tasks, t->handle);
    }
    pthread_mutex_unlock(&pm__rt.lock);
    if (rc != 0) {
        task_free(t);
        return rc;
    }
    task->id = t->handle;
    pm__debug("task %llu submitted: %llu subtasks in %llu chunks, callbacks '%s', %s",
              (unsigned long long)t->seq, (unsigned long long)desc->subtasks,
              (unsigned long long)t->nchunks, t->cbs.name, t->policy->name);
    return 0;
}

/* ---- failure and completion -------------------------------------------- */

static void task_finish(pm__task_t *t);

void pm__task_fail(pm__task_t *t, int status, uint64_t id, const char *fmt, ...)
{
    char msg[sizeof t->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pm__task_fail_remote(t, status, id, pm__rt.host, msg);
}

void pm__task_fail_remote(pm__task_t *t, int status, uint64_t id, int host, const char *msg)
{
    pthread_mutex_lock(&t->err_lock);
    t->nfailed++;
    if (t->status == 0 || id < t->failed_subtask) {
        t->status = status;
        t->failed_subtask = id;
        t->failed_host = host;
        snprintf(t->message, sizeof t->message, "%s", msg);
    }
    pthread_mutex_unlock(&t->err_lock);
}

void pm__task_prepared(pm__task_t *t)
{
    if (t->status == 0)
        pm__subscribe_check_overlap(t);
    if (t->status != 0) {
        /* Nothing ran and no other host has seen the task: finish it now. */
        atomic_store(&t->outstanding, 0);
        task_finish(t);
        return;
    }
    pthread_mutex_lock(&pm__rt.lock);
    start_running_locked(t);
    pthread_cond_broadcast(&pm__rt.work_cv);
    pthread_mutex_unlock(&pm__rt.lock);
}

void pm__task_done(pm__task_t *t, uint64_t n)
{
    if (atomic_fetch_sub(&t->outstanding, n) == n)
        task_finish(t);
}

static void fill_stats(pm__task_t *t)
{
    pm_task_stats_t *s = &t->stats;
    memset(s, 0, sizeof *s);
    s->status = t->status;
    s->failed_subtask = t->failed_subtask;
    s->failed_host = t->status != 0 ? t->failed_host : -1;
    s->seconds = t->t_end - t->t_submit;
    s->run_seconds = atomic_load(&t->started) ? t->t_end - t->t_start : 0;
    for (int i = 0; i < pm__rt.nstubs; i++) {
        const pm__stub_counts_t *c = &t->counts[i];
        s->subtasks += c->subtasks;
        s->steals += c->steals;
        s->bytes_to_gpu += c->bytes_to_gpu;
        s->bytes_from_gpu += c->bytes_from_gpu;
        s->gpu_cache_hits += c->gpu_cache_hits;
        if (pm__rt.stubs[i].ops->kind == PM_DEVICE_GPU)
            s->subtasks_gpu += c->subtasks;
        else
            s->subtasks_cpu += c->subtasks;
        s->stubs += c->subtasks > 0;
    }
    s->subtasks_remote = atomic_load(&t->subtasks_remote);
    s->subtasks += s->subtasks_remote;
    s->subtasks_cpu += s->subtasks_remote - atomic_load(&t->subtasks_remote_gpu);
    s->steals += atomic_load(&t->remote_counts[PM__RC_STEALS]);
    s->steals_remote = atomic_load(&t->steals_remote) + atomic_load(&t->remote_counts[PM__RC_STEALS_REMOTE]);
    s->bytes_to_gpu += atomic_load(&t->remote_counts[PM__RC_TO_GPU]);
    s->bytes_from_gpu += atomic_load(&t->remote_counts[PM__RC_FROM_GPU]);
    s->gpu_cache_hits += atomic_load(&t->remote_counts[PM__RC_HITS]);
    s->multi_assigned = atomic_load(&t->remote_counts[PM__RC_COPIES]);
    s->subtasks_gpu += atomic_load(&t->subtasks_remote_gpu);
    /* Each host counts the bytes it received from another. */
    s->bytes_moved = atomic_load(&t->bytes_moved) + atomic_load(&t->remote_counts[PM__RC_BYTES_MOVED]);
    s->bytes_sent = atomic_load(&t->bytes_sent) + atomic_load(&t->remote_counts[PM__RC_BYTES_SENT]);
}

static void release_locked(pm__task_t *t)
{
    /* A task that failed before any subtask ran changed nothing. */
    int ran = atomic_load(&t->started);
    for (int i = 0; i < t->desc.nmem; i++) {
        t->mems[i]->users--;
        if ((t->desc.mem[i].access & PM_WRITE) && ran)
            t->mems[i]->version++;
    }
    pm__task_t **pp = &pm__rt.active, *prev = NULL;
    while (*pp != t) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = t->next;
    if (pm__rt.active_tail == t)
        pm__rt.active_tail = prev;
    t->next = NULL;
    for (int i = 0; i < t->ndependents; i++)
        if (--t->dependents[i]->ndeps == 0)
            make_ready_locked(t->dependents[i]);
    t->ndependents = 0;
    if (t->status != 0 && pm__rt.first_failure == 0)
        pm__rt.first_failure = t->status;
}

static void task_finish(pm__task_t *t)
{
    if (t->status == 0 && t->tree != NULL)
        pm__reduce_tree_apply(t);
    pm__task_gather_pieces(t);
    if (pm__rt.nhosts > 1)
        pm__proto_task_finished(t);
    t->t_end = pm__now();
    pm__trace_span(-1, PM__TRACE_TASK, t->seq, t->nchunks, t->t_submit, t->t_end);
    fill_stats(t);
    if (t->status != 0) {
        if (t->nfailed > 1)
            pm__error("task %llu ('%s') failed: %s (%s); %llu subtasks failed in all",
                      (unsigned long long)t->seq, t->cbs.name, t->message, pm_errname(t->status),
                      (unsigned long long)t->nfailed);
        else
            pm__error("task %llu ('%s') failed: %s (%s)", (unsigned long long)t->seq,
                      t->cbs.name, t->message, pm_errname(t->status));
    }
    pthread_mutex_lock(&pm__rt.lock);
    release_locked(t);
    t->state = PM__TASK_DONE;
    pthread_cond_broadcast(&pm__rt.done_cv);
    pthread_mutex_unlock(&pm__rt.lock);
}

/* ---- waiting ----------------------------------------------------------- */

static int lookup_locked(const char *fn, pm_task_t task, pm__task_t **t)
{
    *t = pm__handle_get(&pm__rt.tasks, task.id);
    if (*t == NULL)
        return PM__FAIL(PM_EBADHANDLE, "%s: task handle %#llx was released or never submitted",
                        fn, (unsigned long long)task.id);
    return 0;
}

int pm_task_test(pm_task_t task, int *done)
{
    PM__CHECK_INIT("pm_task_test");
    if (done == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_test: done is NULL");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_test", task, &t);
    if (rc == 0) {
        *done = t->state == PM__TASK_DONE;
        rc = *done ? t->status : 0;
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_wait(pm_task_t task)
{
    PM__CHECK_INIT("pm_task_wait");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_wait", task, &t);
    if (rc == 0) {
        while (t->state != PM__TASK_DONE)
            pthread_cond_wait(&pm__rt.done_cv, &pm__rt.lock);
        rc = t->status;
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_wait_all(void)
{
    PM__CHECK_INIT("pm_task_wait_all");
    pthread_mutex_lock(&pm__rt.lock);
    while (pm__rt.active != NULL)
        pthread_cond_wait(&pm__rt.done_cv, &pm__rt.lock);
    int rc = pm__rt.first_failure;
    pm__rt.first_failure = 0;
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_stats(pm_task_t task, pm_task_stats_t *stats)
{
    PM__CHECK_INIT("pm_task_stats");
    if (stats == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_stats: stats is NULL");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_stats", task, &t);
    if (rc == 0 && t->state != PM__TASK_DONE)
        rc = PM__FAIL(PM_EBUSY, "pm_task_stats: the task is still running; pm_task_wait for it first");
    if (rc == 0)
        *stats = t->stats;
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_redistributed(pm_task_t task, pm_memory_t *memory)
{
    PM__CHECK_INIT("pm_task_redistributed");
    if (memory == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_redistributed: memory is NULL");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_redistributed", task, &t);
    if (rc == 0 && t->state != PM__TASK_DONE)
        rc = PM__FAIL(PM_EBUSY, "pm_task_redistributed: the task is still running; pm_task_wait for it first");
    if (rc == 0) {
        *memory = t->redistributed;
        t->redistributed = PM_MEMORY_NULL; /* the program owns it now */
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_release(pm_task_t task)
{
    PM__CHECK_INIT("pm_task_release");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_release", task, &t);
    if (rc == 0 && t->state != PM__TASK_DONE)
        rc = PM__FAIL(PM_EBUSY, "pm_task_release: the task is still running; pm_task_wait for it first");
    if (rc == 0)
        pm__handle_remove(&pm__rt.tasks, t->handle);
    pthread_mutex_unlock(&pm__rt.lock);
    if (rc == 0)
        task_free(t);
    return rc;
}

pm__task_t *pm__task_find_locked(uint64_t seq)
{
    for (pm__task_t *t = pm__rt.active; t != NULL; t = t->next)
        if (t->seq == seq)
            return t;
    for (pm__task_t *t = pm__rt.remote_tasks; t != NULL; t = t->next_remote)
        if (t->seq == seq)
            return t;
    return NULL;
}

void pm__task_destroy(pm__task_t *t)
{
    task_free(t);
}

void pm__task_free_all(void)
{
    while (pm__rt.remote_tasks != NULL) {
        pm__task_t *t = pm__rt.remote_tasks;
        pm__rt.remote_tasks = t->next_remote;
        task_free(t);
    }
    pm__handle_table_t *h = &pm__rt.tasks;
    for (uint32_t i = 0; i < h->cap; i++)
        if (h->obj[i] != NULL)
            task_free(h->obj[i]);
    pm__handle_table_free(h);
}
