/*
 * Straggler copies on one host (exec/guard.h).
 *
 * A chunk written in place cannot be run twice: the slower run would write
 * after the task ended, and a program may already have changed those bytes.
 * So a chunk that may straggle runs guarded: its subscribed bytes of each
 * memory (reduced memories have private partials anyway) are copied into a
 * buffer of the stub's own spanning the hull of its ranges, and it runs
 * there. Only the subscribed bytes: others may be written meanwhile. A CPU stub that runs dry copies the same bytes and runs the
 * chunk too. The first to finish claims it under the running stub's guard
 * lock, writes back the ranges it subscribed for writing, pushes its reduce
 * partials, applies its failures and pieces, and counts the chunk; the
 * other drops all of it. The copy reads the memories only before the
 * original can claim (guard_snapping), so neither run touches a memory
 * after the task ended, and each holds the task's block while it may
 * outlive the task (pm__task_hold).
 *
 * Which chunks run guarded, since the copies of their bytes cost: a stub's
 * chunks while their time is not known (the first task of these
 * callbacks), up to 1 MiB; for a while after the stub lost a chunk to a
 * copy; and, when they take 50 us or more (a copy starts after 200 us at
 * the earliest), for a while after the stub was slow and a task's last
 * chunks (none left to hand out). Known chunks copy
 * at most half a byte per nanosecond of their time.
 */
#define _GNU_SOURCE
#include "exec/guard.h"

#include "core/internal.h"
#include "sched/model.h"
#include "sched/ranges.h"
#include "reduce/tree.h"
#include "trace/trace.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define PM__GUARD_UNKNOWN_BYTES (1u << 20)
#define PM__GUARD_BYTES_PER_NS 0.5
#define PM__GUARD_MAX_BYTES (64u << 20)
#define PM__GUARD_TAIL_NS 50000
#define PM__GUARD_SUSPECT 8
/* A copy starts once the chunk has run twice the copier's expected time,
 * and at least this long (this long when the copier's time is unknown). */
#define PM__COPY_MIN_NS 200000
#define PM__COPY_UNKNOWN_NS 1000000

static atomic_int guarded_now; /* stubs with a guarded chunk published */
/* Held while a guarded chunk's bytes are copied in or its written ranges
 * copied back: another chunk of the task may write bytes this one only
 * reads (reads and writes of two subtasks may overlap; writes may not),
 * and the two copies are the runtime's own, so they must not race. */
static pm__lock_t copy_lock;

static uint64_t now_ns(void)
{
    return (uint64_t)(pm__now() * 1e9);
}

bool pm__guard_any(void)
{
    return atomic_load_explicit(&guarded_now, memory_order_relaxed) > 0;
}

/* A reduced memory read as well starts each partial from the memory's
 * content, which a loser would read after the task ended. */
static bool reads_reduced(const pm__task_t *t)
{
    for (int m = 0; m < t->desc.nmem; m++)
        if (t->desc.mem[m].reduce != PM_REDUCE_NONE && (t->desc.mem[m].access & PM_READ))
            return true;
    return false;
}

static bool copies_allowed(const pm__task_t *t)
{
    return !reads_reduced(t) && !t->remote && !t->home_dir && t->desc.sched == PM_SCHED_PULL &&
           !(t->desc.flags & PM_TASK_NO_MULTI_ASSIGN) && !pm__check_mode && pm__rt.ncpu > 1 &&
           (t->chunk_subs != NULL || t->desc.nmem == 0);
}

/* The hull of chunk k's ranges in each memory not reduced; returns the
 * bytes of all hulls. */
static uint64_t hulls(const pm__task_t *t, uint64_t k, pm__guard_t *g)
{
    uint64_t first, last, bytes = 0;
    for (int m = 0; m < t->desc.nmem; m++)
        g->on[m] = false;
    if (t->chunk_subs == NULL)
        return 0;
    pm__chunk_span(t, k, &first, &last);
    for (uint64_t id = first; id < last; id++) {
        pm__subs_view_t v = pm__subs_of(t, k, id);
        for (int m = 0; m < t->desc.nmem; m++) {
            uint64_t a, b;
            if (t->desc.mem[m].reduce != PM_REDUCE_NONE || !pm__subs_hull(v, m, &a, &b))
                continue;
            if (!g->on[m] || a < g->lo[m])
                g->lo[m] = a;
            if (!g->on[m] || b > g->hi[m])
                g->hi[m] = b;
            g->on[m] = true;
        }
    }
    for (int m = 0; m < t->desc.nmem; m++)
        bytes += g->on[m] ? g->hi[m] - g->lo[m] : 0;
    return bytes;
}

/* Copies chunk k's subscribed bytes of memory m into its hull buffer:
 * only those, since other chunks may be writing the bytes between them. */
static int copy_in(pm__guard_t *g, const pm__task_t *t, uint64_t k, int m)
{
    uint64_t first, last;
    pm__acc_t u = {0}; /* the union: subtasks often share what they read */
    int rc = 0;
    pm__chunk_span(t, k, &first, &last);
    for (uint64_t id = first; id < last && rc == 0; id++) {
        pm__subs_view_t v = pm__subs_of(t, k, id);
        for (uint32_t i = 0; i < v.n && rc == 0; i++)
            if (v.r[i].mem == m)
                rc = pm__acc_apply_rows(&u, v.r[i].offset, v.r[i].block, v.r[i].stride, v.r[i].count, true);
    }
    const unsigned char *from = t->mems[m]->data;
    pm__lock(&copy_lock);
    for (uint32_t i = 0; i < u.ncov && rc == 0; i++)
        memcpy(g->buf[m] + (u.cov[i].lo - g->lo[m]), from + u.cov[i].lo, u.cov[i].hi - u.cov[i].lo);
    pm__unlock(&copy_lock);
    pm__acc_free(&u);
    return rc;
}

/* Copies chunk k's bytes in (hulls() first). */
static int snapshot(pm__guard_t *g, const pm__task_t *t, uint64_t k)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        g->bytes[m] = t->mems[m]->bytes;
        if (!g->on[m])
            continue;
        size_t n = (size_t)(g->hi[m] - g->lo[m]);
        if (g->cap[m] < n) {
            free(g->buf[m]);
            g->cap[m] = 0;
            if ((g->buf[m] = malloc(n)) == NULL)
                return PM_ENOMEM;
            g->cap[m] = n;
        }
        if (copy_in(g, t, k, m) != 0)
            return PM_ENOMEM;
    }
    g->acc = NULL;
    g->subtasks = 0;
    g->status = 0;
    return 0;
}

bool pm__guard_wanted(pm__stub_t *s, const pm__task_t *t, uint64_t k)
{
    if (s->ops->kind != PM_DEVICE_CPU || !copies_allowed(t))
        return false;
    pm__host_run_t *p = s->priv;
    /* A task only CPUs run, known to be short when it began: not worth
     * it, and told from the task's own state, without reading the model
     * that other stubs keep writing (most tasks end here). */
    if (p->lost == 0 && t->sched != NULL && t->sched->cpu_only && t->sched->model_least > 0 &&
        t->sched->model_least < PM__GUARD_TAIL_NS)
        return false;
    uint64_t expect_ns = (uint64_t)pm__model_chunk_ns(t, s->index), budget;
    bool tail = t->policy->left(t) == 0;
    if (expect_ns == 0)
        budget = PM__GUARD_UNKNOWN_BYTES;
    else if (p->lost > 0 || ((p->suspect > 0 || tail) && expect_ns >= PM__GUARD_TAIL_NS))
        budget = (uint64_t)((double)expect_ns * PM__GUARD_BYTES_PER_NS);
    else
        return false;
    if (budget > PM__GUARD_MAX_BYTES)
        budget = PM__GUARD_MAX_BYTES;
    return hulls(t, k, &p->guard) <= budget;
}

void pm__guard_note_slow(pm__stub_t *s)
{
    if (s->ops->kind == PM_DEVICE_CPU)
        ((pm__host_run_t *)s->priv)->suspect = PM__GUARD_SUSPECT;
}

static void drop_pieces(pm__host_run_t *p)
{
    for (size_t i = 0; i < p->npieces; i++)
        free(p->pieces[i].data);
    p->npieces = 0;
}

bool pm__guard_keep_piece(pm__task_t *t, uint64_t key, uint64_t id, unsigned char *data,
                          size_t bytes)
{
    pm__stub_t *s = pm__self_stub;
    if (s == NULL || s->ops->kind != PM_DEVICE_CPU)
        return false;
    pm__host_run_t *p = s->priv;
    if (!p->guarded)
        return false;
    if (p->npieces == p->cap_pieces) {
        size_t cap = p->cap_pieces ? 2 * p->cap_pieces : 16;
        struct pm__guard_piece *n = realloc(p->pieces, cap * sizeof *n);
        if (n == NULL) { /* the chunk fails as pm_redistribute would have */
            free(data);
            pm__host_run_fail(p, s, t, id, PM_ENOMEM, "out of memory keeping a redistributed piece");
            return true;
        }
        p->pieces = n;
        p->cap_pieces = cap;
    }
    p->pieces[p->npieces++] = (struct pm__guard_piece){key, id, data, bytes};
    return true;
}

/* The winner: its written ranges into the memories, its partials up the
 * merge tree, its failures and pieces into the task. */
static void commit(pm__host_run_t *p, pm__stub_t *s, pm__task_t *t, uint64_t k)
{
    pm__guard_t *g = &p->guard;
    uint64_t first, last;
    pm__chunk_span(t, k, &first, &last);
    pm__lock(&copy_lock);
    for (uint64_t id = first; id < last && t->chunk_subs != NULL; id++) {
        pm__subs_view_t v = pm__subs_of(t, k, id);
        for (uint32_t i = 0; i < v.n; i++) {
            const pm__sub_t *r = &v.r[i];
            int m = r->mem;
            if (!(r->access & PM_WRITE) || !g->on[m])
                continue;
            unsigned char *to = t->mems[m]->data;
            for (uint64_t c = 0; c < r->count; c++) {
                uint64_t at = r->offset + c * r->stride;
                memcpy(to + at, g->buf[m] + (at - g->lo[m]), r->block);
            }
        }
    }
    pm__unlock(&copy_lock);
    pm__counts_own(t, s->index)->subtasks += g->subtasks;
    if (g->acc != NULL) {
        int rc = pm__reduce_tree_push(t, 0, k, g->acc);
        if (rc != 0)
            pm__host_run_fail(p, s, t, first, rc, pm__merge_failure(rc));
        g->acc = NULL;
    }
    if (g->status != 0)
        pm__task_fail(t, g->status, g->failed_id, "%s", g->what);
    for (size_t i = 0; i < p->npieces; i++) {
        struct pm__guard_piece *q = &p->pieces[i];
        if (pm__task_add_piece(t, q->key, q->id, q->data, q->bytes) != 0) {
            free(q->data);
            pm__host_run_fail(p, s, t, q->id, PM_ENOMEM, "out of memory keeping a redistributed piece");
        }
    }
    p->npieces = 0;
}

static void drop(pm__host_run_t *p, const pm__task_t *t)
{
    pm__accset_free(t, p->guard.acc);
    p->guard.acc = NULL;
    drop_pieces(p);
}

/* Frees the buffers larger than `keep` bytes. */
static void free_buffers(pm__guard_t *g, size_t keep)
{
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++)
        if (g->cap[m] > keep) {
            free(g->buf[m]);
            g->buf[m] = NULL;
            g->cap[m] = 0;
        }
}

/* Large buffers are not kept between guarded chunks. */
static void trim(pm__guard_t *g)
{
    free_buffers(g, 4u << 20);
}

/* Runs chunk k on the guard's buffers (snapshot taken). */
static void run_guarded(pm__stub_t *s, pm__task_t *t, uint64_t k)
{
    pm__host_run_t *p = s->priv;
    p->guarded = true;
    s->ops->run_chunk(s, t, k);
    p->guarded = false;
}

enum pm__guard_end pm__guard_run(pm__stub_t *s, pm__task_t *t, uint64_t k)
{
    pm__host_run_t *p = s->priv;
    if (snapshot(&p->guard, t, k) != 0)
        return PM__GUARD_NONE;
    pm__lock(&s->guard_lock);
    s->guard_chunk = k;
    atomic_store_explicit(&s->guard_since_ns, now_ns(), memory_order_relaxed);
    s->guard_copied = false;
    s->guard_snapping = false;
    atomic_store_explicit(&s->guard_task, t, memory_order_release);
    pm__unlock(&s->guard_lock);
    atomic_fetch_add(&guarded_now, 1);
    /* A CPU stub asleep since before may copy it: it wakes, finds it not
     * due yet and sleeps until it is (stubs.c, idle). */
    if (atomic_load_explicit(&pm__rt.parked[0], memory_order_relaxed) > 0)
        pthread_cond_signal(&pm__rt.work_cv[0]);

    run_guarded(s, t, k);

    pm__lock(&s->guard_lock);
    while (s->guard_snapping) { /* a copy still reads the memories: it may */
        pm__unlock(&s->guard_lock);
        sched_yield();
        pm__lock(&s->guard_lock);
    }
    bool won = atomic_load_explicit(&s->guard_task, memory_order_relaxed) == t;
    atomic_store_explicit(&s->guard_task, NULL, memory_order_relaxed);
    pm__unlock(&s->guard_lock);
    atomic_fetch_sub(&guarded_now, 1);
    if (won) {
        commit(p, s, t, k);
        trim(&p->guard);
        p->suspect -= p->suspect > 0;
        p->lost -= p->lost > 0;
        return PM__GUARD_WON;
    }
    drop(p, t);
    trim(&p->guard);
    p->lost = PM__GUARD_SUSPECT;
    return PM__GUARD_LOST;
}

/* When a copy of a chunk stub s would run is due: twice s's expected time
 * for it, and at least PM__COPY_MIN_NS. */
static uint64_t due_ns(const pm__stub_t *s, const pm__task_t *t)
{
    uint64_t ns = (uint64_t)pm__model_chunk_ns(t, s->index);
    if (ns == 0)
        return PM__COPY_UNKNOWN_NS;
    return 2 * ns > PM__COPY_MIN_NS ? 2 * ns : PM__COPY_MIN_NS;
}

bool pm__guard_copy(pm__stub_t *s, uint64_t *wait_ns)
{
    *wait_ns = 0;
    if (s->ops->kind != PM_DEVICE_CPU || !pm__guard_any())
        return false;
    /* The oldest chunk due for a copy; the soonest due of the others. */
    uint64_t now = now_ns(), oldest = UINT64_MAX;
    int pick = -1;
    for (int i = 0; i < pm__rt.nstubs; i++) {
        pm__stub_t *o = &pm__rt.stubs[i];
        if (o == s || atomic_load_explicit(&o->guard_task, memory_order_relaxed) == NULL)
            continue;
        pm__lock(&o->guard_lock);
        pm__task_t *t = atomic_load_explicit(&o->guard_task, memory_order_relaxed);
        /* Set: the chunk is not counted yet, so the task is alive. */
        if (t != NULL && !o->guard_copied) {
            uint64_t since = atomic_load_explicit(&o->guard_since_ns, memory_order_relaxed);
            uint64_t ran = now - since, due = due_ns(s, t);
            if (ran >= due && since < oldest) {
                oldest = since;
                pick = i;
            } else if (ran < due && (*wait_ns == 0 || due - ran < *wait_ns)) {
                *wait_ns = due - ran;
            }
        }
        pm__unlock(&o->guard_lock);
    }
    if (pick < 0)
        return false;
    pm__stub_t *o = &pm__rt.stubs[pick];
    pm__lock(&o->guard_lock);
    pm__task_t *t = atomic_load_explicit(&o->guard_task, memory_order_relaxed);
    uint64_t k = o->guard_chunk;
    if (t == NULL || o->guard_copied || !pm__task_runnable_on(t, s)) {
        pm__unlock(&o->guard_lock);
        return false;
    }
    o->guard_copied = true;
    o->guard_snapping = true;
    pm__task_hold(t);
    pm__unlock(&o->guard_lock);

    pm__host_run_t *p = s->priv;
    hulls(t, k, &p->guard);
    int rc = snapshot(&p->guard, t, k);
    pm__lock(&o->guard_lock);
    o->guard_snapping = false;
    pm__unlock(&o->guard_lock);
    if (rc != 0) {
        trim(&p->guard);
        pm__task_unhold(t);
        return false;
    }
    pm__debug("task %llu: stub %d runs a copy of chunk %llu of stub %d, running for %.2f ms",
              (unsigned long long)t->seq, s->index, (unsigned long long)k, o->index,
              (double)(now - atomic_load_explicit(&o->guard_since_ns, memory_order_relaxed)) * 1e-6);
    double t0 = pm__now();
    run_guarded(s, t, k);
    double t1 = pm__now();

    pm__lock(&o->guard_lock);
    bool won = atomic_load_explicit(&o->guard_task, memory_order_relaxed) == t && o->guard_chunk == k;
    if (won) {
        atomic_store_explicit(&o->guard_task, NULL, memory_order_relaxed);
        pm__task_hold(t); /* for the original, which finds it lost */
    }
    pm__unlock(&o->guard_lock);
    if (won) {
        uint64_t first, last;
        pm__chunk_span(t, k, &first, &last);
        commit(p, s, t, k);
        pm__trace_span(s->index, PM__TRACE_CHUNK, t->seq, k, t0, t1);
        atomic_fetch_add(&t->copies_local, last - first);
        atomic_fetch_add(&t->subtasks_done, last - first);
        pm__task_done(t, 1);
    } else {
        drop(p, t);
    }
    trim(&p->guard);
    pm__task_unhold(t);
    return true;
}

void pm__guard_free(pm__host_run_t *p)
{
    free_buffers(&p->guard, 0);
    drop_pieces(p);
    free(p->pieces);
    p->pieces = NULL;
    p->cap_pieces = 0;
}
