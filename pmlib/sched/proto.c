/*
 * The task protocol between hosts.
 *
 * Host 0 sends a running task to every host with that host's initial share
 * of the chunks. A host runs its share on its stubs, fetching the input
 * ranges its subtasks subscribed (data/data.c) and reporting each chunk to host 0
 * with the bytes it wrote and any failure. A host that runs dry asks the
 * other hosts, one at a time, for half of their largest range; once every
 * host has said no, it is drained: it sends host 0 its reduce partials (the
 * finished subtrees of the fixed merge tree) and its counters. Host 0
 * finishes the task when every chunk is done and every host drained, then
 * tells every host, which frees its copy.
 */
#include "sched/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/acc.h"
#include "data/dir.h"
#include "sched/hosts.h"
#include "sched/ranges.h"
#include "sched/policy.h"
#include "reduce/tree.h"
#include "trace/trace.h"

/* ---- host 0: sending a task --------------------------------------------- */

static void send_task(const pm__task_t *t, int h)
{
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, t->seq);
    pm__wbuf_str(&b, t->cbs->name);
    pm__wbuf_u64(&b, t->desc.subtasks);
    pm__wbuf_u64(&b, t->grain);
    pm__wbuf_i32(&b, t->desc.nmem);
    for (int m = 0; m < t->desc.nmem; m++) {
        pm__wbuf_u64(&b, t->mems[m]->handle);
        pm__wbuf_u64(&b, t->mems[m]->bytes);
        pm__wbuf_u64(&b, t->mems[m]->version);
        pm__wbuf_i32(&b, t->desc.mem[m].access);
        pm__wbuf_i32(&b, t->desc.mem[m].reduce);
        pm__wbuf_i32(&b, t->desc.mem[m].type);
        pm__wbuf_i32(&b, (int32_t)(((t->lazy_mask >> m) & 1) | (((t->home_mask >> m) & 1) << 1)));
        pm__data_put_away(&b, t->mems[m]);
    }
    pm__wbuf_u64(&b, t->desc.conf_bytes);
    pm__wbuf_put(&b, t->conf, t->desc.conf_bytes);
    pm__wbuf_i32(&b, (int32_t)t->desc.flags);
    pm__wbuf_i32(&b, t->desc.sched);
    pm__wbuf_i32(&b, t->desc.devices);
    pm__wbuf_u64(&b, t->host_lo[h]);
    pm__wbuf_u64(&b, t->host_hi[h]);
    pm__wbuf_i32(&b, t->no_grants);
    pm__data_put_push(&b, t, h);
    pm__comm_send(h, PM__TAG_TASK, &b);
}

/* Whether host h was sent task t: a host the costs gave no chunk is not
 * told of the task at all (it could only ask for work that would not pay,
 * and host 0 would wait for it to say so). */
static bool sent_to(const pm__task_t *t, int h)
{
    return !t->hosts_by_cost || t->host_fed[h] != 0 || t->nchunks == 0;
}

/* While a task spanning hosts runs, the comm thread polls with the shortest
 * naps: requests for its data must be answered in microseconds. A task that
 * stays on host 0 keeps it as it was. */
static void task_started(pm__task_t *t)
{
    /* Lazy memories: written ranges stay where written (not reduced ones:
     * their partials merge on host 0). Host 0's own chunks fetch what other
     * hosts hold and record what they write. */
    for (int m = 0; m < t->desc.nmem; m++) {
        if (t->mems[m]->lazy && t->desc.mem[m].reduce == PM_REDUCE_NONE &&
            (t->desc.mem[m].access & PM_WRITE)) {
            t->lazy_mask |= 1u << m;
            if (pm__data_home_reads(t->mems[m]))
                t->home_mask |= 1u << m;
        }
        if (pm__data_is_away(t->mems[m]))
            t->home_dir = true;
    }
    for (int h = 1; h < pm__rt.nhosts; h++) {
        if (!sent_to(t, h)) {
            atomic_fetch_sub(&t->outstanding, 1); /* it will not drain; chunks keep this above 0 */
            continue;
        }
        if (!t->comm_on)
            pm__comm_active(1);
        t->comm_on = true;
        send_task(t, h);
    }
}

static void task_finished(pm__task_t *t)
{
    if (t->comm_on)
        pm__comm_active(-1);
    t->comm_on = false;
    for (int h = 1; h < pm__rt.nhosts; h++) {
        if (!sent_to(t, h) && t->status == 0)
            continue; /* a failure is told to every host */
        pm__wbuf_t b = {0};
        pm__wbuf_u64(&b, t->seq);
        pm__wbuf_i32(&b, t->status);
        pm__wbuf_str(&b, pm__task_message(t));
        pm__comm_send(h, PM__TAG_TASK_END, &b);
    }
}

/* ---- other hosts: receiving a task -------------------------------------- */

typedef struct pending_msg {
    struct pending_msg *next;
    int src;
    unsigned char *data;
    size_t n;
} pending_msg_t;

/* Tasks that arrive before this host serves (its program is still
 * registering callbacks) wait here; guarded by the runtime lock. */
static pending_msg_t *pending_head, *pending_tail;
static atomic_int npending; /* so the comm thread's poll takes no lock */

static void send_nack(uint64_t seq, const char *why)
{
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, seq);
    pm__wbuf_str(&b, why);
    pm__comm_send(0, PM__TAG_TASK_NACK, &b);
}

static void send_drained_locked(pm__task_t *t);

/* Reads a task message into a descriptor; mirrors for its memories. */
static int read_task(pm__rbuf_t *m, uint64_t *seq, char *name, pm_task_desc_t *d,
                     pm__memory_t **mems, uint32_t *lazy, uint32_t *home, uint64_t *lo, uint64_t *hi,
                     bool *no_grants)
{
    pm__holders_t away = {0};
    int rc = 0;
    *lazy = *home = 0;
    pm_task_desc_init(d);
    *seq = pm__rbuf_u64(m);
    pm__rbuf_str(m, name, PM__NAME_MAX);
    d->subtasks = pm__rbuf_u64(m);
    d->grain = pm__rbuf_u64(m);
    d->nmem = pm__rbuf_i32(m);
    if (m->bad || d->nmem < 0 || d->nmem > PM_MAX_TASK_MEMORIES || d->subtasks == 0 || d->grain == 0)
        return PM_EINVAL;
    for (int i = 0; i < d->nmem; i++) {
        uint64_t handle = pm__rbuf_u64(m), bytes = pm__rbuf_u64(m), version = pm__rbuf_u64(m);
        d->mem[i].access = pm__rbuf_i32(m);
        d->mem[i].reduce = pm__rbuf_i32(m);
        d->mem[i].type = pm__rbuf_i32(m);
        int32_t mode = pm__rbuf_i32(m);
        *lazy |= (uint32_t)(mode & 1) << i;
        *home |= (uint32_t)((mode & 3) == 3) << i; /* home only for a lazy memory */
        int share = -1;
        rc = m->bad ? PM_EINVAL : pm__data_get_away(m, bytes, &away, &share);
        if (rc == 0) {
            mems[i] = pm__data_mirror(handle, bytes, version, &away, share);
            if (mems[i] == NULL)
                rc = PM_ENOMEM;
        }
        if (rc != 0) {
            pm__holders_free(&away);
            return rc;
        }
    }
    pm__holders_free(&away);
    d->conf_bytes = pm__rbuf_u64(m);
    d->conf = pm__rbuf_get(m, d->conf_bytes);
    d->flags = (unsigned)pm__rbuf_i32(m);
    d->sched = pm__rbuf_i32(m);
    d->devices = pm__rbuf_i32(m);
    *lo = pm__rbuf_u64(m);
    *hi = pm__rbuf_u64(m);
    *no_grants = pm__rbuf_i32(m) != 0;
    d->callbacks = name;
    return m->bad ? PM_EINVAL : 0;
}

static int runnable_here(const pm__task_t *t)
{
    for (int s = 0; s < pm__rt.nstubs; s++)
        if (pm__task_runnable_on(t, &pm__rt.stubs[s]))
            return 1;
    return 0;
}

static void start_remote_task(pm__rbuf_t *m, double late)
{
    char name[PM__NAME_MAX], why[200];
    pm_task_desc_t d;
    pm__memory_t *mems[PM_MAX_TASK_MEMORIES];
    uint64_t seq, lo, hi;
    uint32_t lazy, home;
    bool no_grants = false;
    pm__task_t *t = NULL;
    int rc = read_task(m, &seq, name, &d, mems, &lazy, &home, &lo, &hi, &no_grants);
    if (rc != 0) {
        snprintf(why, sizeof why, "host %d could not read the task (%s)", pm__rt.host, pm_strerror(rc));
        goto nack;
    }
    const pm__callbacks_t *cbs = pm__registry_get(name);
    if (cbs == NULL) {
        snprintf(why, sizeof why, "no callbacks named '%s' are registered on host %d; "
                 "register them on every host", name, pm__rt.host);
        rc = PM_ENOCALLBACK;
        goto nack;
    }
    rc = pm__task_create(&d, cbs, &t);
    if (rc == 0) {
        t->seq = seq;
        t->remote = true;
        t->no_grants = no_grants;
        t->woke_late = late;
        t->lazy_mask = lazy;
        t->home_mask = home;
        t->lo = lo;
        t->hi = hi;
        memcpy(t->mems, mems, sizeof mems[0] * (size_t)d.nmem);
        rc = pm__data_take_push(m, t);
    }
    if (rc == 0) {
        t->policy = pm__sched_policy(t->desc.sched);
        rc = t->policy ? t->policy->init(t, pm__rt.nstubs) : PM_EINVAL;
        if (rc != 0)
            t->policy = NULL;
    }
    if (rc != 0) {
        snprintf(why, sizeof why, "host %d could not set up the task (%s)", pm__rt.host, pm_strerror(rc));
        goto nack;
    }
    pthread_mutex_lock(&pm__rt.lock);
    __atomic_store_n(&t->state, PM__TASK_RUN, __ATOMIC_RELEASE);
    rc = pm__task_add_remote_locked(t);
    if (rc == 0 && !runnable_here(t)) { /* nothing to run here: drained at once */
        t->drained = t->copies_done = 1;
        send_drained_locked(t);
    }
    pthread_mutex_unlock(&pm__rt.lock);
    if (rc != 0) {
        snprintf(why, sizeof why, "host %d could not set up the task (%s)", pm__rt.host, pm_strerror(rc));
        goto nack;
    }
    pm__comm_active(1); /* until host 0 ends it */
    return;
nack:
    if (t != NULL)
        pm__task_destroy(t);
    pm__warn("task %llu: %s", (unsigned long long)seq, why);
    send_nack(seq, why);
}

static void on_task(int src, pm__rbuf_t *m)
{
    pthread_mutex_lock(&pm__rt.lock);
    int serving = pm__rt.serving;
    if (!serving) {
        pending_msg_t *p = malloc(sizeof *p);
        unsigned char *copy = malloc(m->n ? m->n : 1);
        if (p != NULL && copy != NULL) {
            memcpy(copy, m->p, m->n);
            *p = (pending_msg_t){.next = NULL, .src = src, .data = copy, .n = m->n};
            if (pending_tail)
                pending_tail->next = p;
            else
                pending_head = p;
            pending_tail = p;
            atomic_fetch_add(&npending, 1);
        } else {
            free(p);
            free(copy);
            pm__error("out of memory queueing a task from host %d", src);
        }
    }
    pthread_mutex_unlock(&pm__rt.lock);
    if (serving)
        start_remote_task(m, pm__comm_round_gap());
}

void pm__proto_serve(void)
{
    pthread_mutex_lock(&pm__rt.lock);
    pm__rt.serving = 1;
    pthread_mutex_unlock(&pm__rt.lock);
}

/* Comm thread: starts the tasks that waited for this host to serve. */
static void poll_pending(void)
{
    while (atomic_load(&npending) > 0) {
        pthread_mutex_lock(&pm__rt.lock);
        pending_msg_t *p = pm__rt.serving ? pending_head : NULL;
        if (p != NULL) {
            atomic_fetch_sub(&npending, 1);
            pending_head = p->next;
            if (pending_head == NULL)
                pending_tail = NULL;
        }
        pthread_mutex_unlock(&pm__rt.lock);
        if (p == NULL)
            return;
        pm__rbuf_t r = {.p = p->data, .n = p->n};
        start_remote_task(&r, 0);
        free(p->data);
        free(p);
    }
}

static void free_pending(void)
{
    while (pending_head != NULL) {
        pending_msg_t *p = pending_head;
        pending_head = p->next;
        free(p->data);
        free(p);
    }
    pending_tail = NULL;
    atomic_store(&npending, 0);
}

/* ---- host 0: a host cannot run a task ------------------------------------ */

static void on_task_nack(int src, pm__rbuf_t *m)
{
    char why[256];
    uint64_t seq = pm__rbuf_u64(m);
    pm__rbuf_str(m, why, sizeof why);
    if (m->bad)
        return;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    pthread_mutex_unlock(&pm__rt.lock);
    if (t == NULL)
        return;
    pm__task_fail_remote(t, strstr(why, "no callbacks") ? PM_ENOCALLBACK : PM_EHOST, UINT64_MAX, src, why);
    /* Its share never ran and it will not drain: count both as done. */
    pm__task_done(t, t->host_hi[src] - t->host_lo[src] + 1);
}

/* ---- stealing between hosts --------------------------------------------- */


/* Whether asking host v for chunks of t may pay: not host 0 once it said
 * it grants no more of them. */
static bool may_ask(const pm__task_t *t, int v)
{
    return v != pm__rt.host && !(v == 0 && t->no_grants);
}

static void drain_locked(pm__task_t *t);

static void ask_next_victim_locked(pm__task_t *t)
{
    int n = pm__rt.nhosts;
    int v = (t->steal_victim + 1) % n;
    for (int i = 0; i < n && !may_ask(t, v); i++)
        v = (v + 1) % n;
    if (!may_ask(t, v)) { /* none left to ask (the callers count them) */
        drain_locked(t);
        return;
    }
    t->steal_victim = v;
    t->steal_pending = 1;
    t->steal_since = pm__trace_on() ? pm__now() : 0;
    /* With the chunks per second this host's stubs run in the task, not
     * counting waits for inputs (0: none run yet), so that host 0 weighs
     * its speed against moving the data. */
    double rate = pm__stubs_rate(t, true);
    uint64_t bits;
    memcpy(&bits, &rate, sizeof bits);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, t->seq);
    pm__wbuf_u64(&b, bits);
    pm__comm_send(v, PM__TAG_STEAL_REQ, &b);
}

/* Multi-assign: a drained host may run copies of chunks still running on
 * other hosts; the first report of a chunk wins on host 0. Only for tasks
 * without reduced memories (a copy's output would merge twice) and only on
 * hosts other than 0 (host 0 writes memories in place). */
static bool can_copy(const pm__task_t *t)
{
    return t->remote && t->desc.sched == PM_SCHED_PULL && t->nred == 0 &&
           !(t->desc.flags & PM_TASK_NO_MULTI_ASSIGN) && pm__rt.nhosts > 2;
}

static void maybe_send_drained_locked(pm__task_t *t)
{
    if (t->remote && t->drained && t->copies_done && t->inprogress == 0 && !t->drain_sent)
        send_drained_locked(t);
}

/* Asks the next other host (not 0, not this one) for a copy of a straggler. */
static void ask_copy_locked(pm__task_t *t)
{
    int k = t->copy_tried, h;
    for (h = 1; h < pm__rt.nhosts; h++)
        if (h != pm__rt.host && k-- == 0)
            break;
    if (h >= pm__rt.nhosts) {
        t->copies_done = 1;
        maybe_send_drained_locked(t);
        return;
    }
    t->copy_pending = 1;
    pm__debug("task %llu: asks host %d for a copy of a straggler", (unsigned long long)t->seq, h);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, t->seq);
    pm__comm_send(h, PM__TAG_COPY_REQ, &b);
}

static void drain_locked(pm__task_t *t)
{
    t->drained = 1;
    if (can_copy(t))
        ask_copy_locked(t);
    else
        t->copies_done = 1;
    maybe_send_drained_locked(t);
}

void pm__proto_want_work_locked(pm__task_t *t)
{
    if (t->steal_pending || t->copy_pending || t->drain_sent)
        return;
    if (t->drained) {
        if (!t->copies_done)
            ask_copy_locked(t);
        return;
    }
    if (t->desc.sched != PM_SCHED_PULL) {
        /* Static shares never move: drained once every local share is taken
         * (a stub that has not started yet still holds its own). */
        if (pm__ranges_left(t) == 0)
            drain_locked(t);
        return;
    }
    if (t->steal_tried == 0) {
        t->steal_victim = pm__rt.host;
        t->steal_tried = pm__rt.host != 0 && t->no_grants; /* host 0 counts as asked */
    }
    if (t->steal_tried >= pm__rt.nhosts - 1) {
        drain_locked(t);
        return;
    }
    ask_next_victim_locked(t);
}

/* Replies to a copy request: a chunk id, or one of these. */
#define PM__COPY_NONE UINT64_MAX        /* nothing runs or waits here: stop asking */
#define PM__COPY_RETRY (UINT64_MAX - 1) /* chunks still wait or just started: ask again */

/* A chunk running here long enough (1 ms) to be worth a copy elsewhere. */
static uint64_t straggler_locked(pm__task_t *t)
{
    uint64_t now = (uint64_t)(pm__now() * 1e9), best = PM__COPY_NONE, oldest = UINT64_MAX;
    int pick = -1;
    for (int s = 0; s < pm__rt.nstubs; s++) {
        uint64_t c = atomic_load(&t->running[s]), since = atomic_load(&t->running_since[s]);
        if (c == UINT64_MAX || atomic_load(&t->copied[s]))
            continue;
        if (now - since < 1000000) {
            best = best == PM__COPY_NONE ? PM__COPY_RETRY : best;
            continue;
        }
        if (since >= oldest)
            continue;
        oldest = since;
        best = c;
        pick = s;
    }
    if (pick >= 0)
        atomic_store(&t->copied[pick], 1);
    else if (pm__ranges_left(t) > 0)
        best = PM__COPY_RETRY;
    return best;
}

static void on_copy_req(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m), chunk = PM__COPY_NONE;
    if (m->bad)
        return;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    if (t != NULL && t->remote && t->running != NULL && can_copy(t) && !t->drain_sent)
        chunk = straggler_locked(t);
    pthread_mutex_unlock(&pm__rt.lock);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, seq);
    pm__wbuf_u64(&b, chunk);
    pm__comm_send(src, PM__TAG_COPY_REPLY, &b);
}

static void on_copy_reply(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m), chunk = pm__rbuf_u64(m);
    (void)src;
    if (m->bad)
        return;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    if (t != NULL && t->state == PM__TASK_RUN && !t->drain_sent && t->copy_pending) {
        t->copy_pending = 0;
        if (chunk == PM__COPY_RETRY) {
            ask_copy_locked(t); /* the same host again */
        } else if (chunk < t->nchunks) {
            pm__debug("task %llu: running a copy of chunk %llu of host %d", (unsigned long long)seq,
                      (unsigned long long)chunk, src);
            pm__ranges_install(t, chunk, chunk + 1);
            uint64_t first, last;
            pm__chunk_span(t, chunk, &first, &last);
            t->copies += (int)(last - first);
            pm__task_ready_locked(t);
        } else {
            t->copy_tried++;
            ask_copy_locked(t);
        }
    }
    pthread_mutex_unlock(&pm__rt.lock);
}

/*
 * Host 0, asked for work by host h: as many queued chunks as h finishes no
 * later than host 0 would, counting the bytes they move (and, for a host
 * new to the task, the bytes every chunk reads). Speeds as measured in the
 * task, else by the model; unknown: half of a range, as other hosts give.
 */
static uint64_t grant_locked(pm__task_t *t, int h, double theirs)
{
    double mine = pm__stubs_rate(t, false);
    if (mine <= 0)
        mine = pm__host_speed(t, 0);
    if (theirs <= 0)
        theirs = pm__host_speed(t, h);
    if (mine <= 0 || theirs <= 0)
        return UINT64_MAX;
    double lat = pm__hosts_cost(t, h, t->host_fed[h] != 0, &theirs);
    uint64_t k = pm__grant_by_cost(mine, theirs, lat, pm__ranges_left(t));
    pm__debug("task %llu: host %d asks for work: %.3g chunks/s here, %.3g there, %.3g s away: %llu chunks",
              (unsigned long long)t->seq, h, mine, theirs, lat, (unsigned long long)k);
    return k;
}

/* Another host: whether every stub here that may run t is in a chunk of
 * it, so that a chunk left queued would wait for one of them to end (at
 * least a chunk's time) while the asking host is idle. GPU stubs do not
 * say (t->running): not then. */
static bool stubs_all_busy(const pm__task_t *t)
{
    if (t->running == NULL)
        return false;
    int busy = 0;
    for (int s = 0; s < pm__rt.nstubs; s++) {
        const pm__stub_t *st = &pm__rt.stubs[s];
        if (!pm__task_runnable_on(t, st))
            continue;
        if (st->ops->kind != PM_DEVICE_CPU || atomic_load(&t->running[s]) == UINT64_MAX)
            return false;
        busy++;
    }
    return busy > 0;
}

static void on_steal_req(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m), bits = pm__rbuf_u64(m), lo = 0, hi = 0;
    if (m->bad)
        return;
    double theirs;
    memcpy(&theirs, &bits, sizeof theirs);
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    if (t != NULL && t->state == PM__TASK_RUN && t->sched != NULL && !t->drain_sent &&
        t->desc.sched == PM_SCHED_PULL) {
        uint64_t max = pm__rt.host != 0 || t->host_fed == NULL ? UINT64_MAX
                       : t->no_grants                         ? 0
                                                              : grant_locked(t, src, theirs);
        bool lone = pm__rt.host != 0 && stubs_all_busy(t);
        if (max > 0 && pm__ranges_give(t, max, lone, &lo, &hi)) {
            if (t->host_fed != NULL && !t->host_fed[src])
                t->host_fed[src] = 3; /* fed by stealing: its first report is no sample */
            pm__debug("task %llu: host %d takes chunks %llu..%llu", (unsigned long long)seq, src,
                      (unsigned long long)lo, (unsigned long long)hi - 1);
        }
    }
    pthread_mutex_unlock(&pm__rt.lock);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, seq);
    pm__wbuf_u64(&b, lo);
    pm__wbuf_u64(&b, hi);
    pm__comm_send(src, PM__TAG_STEAL_REPLY, &b);
}

static void on_steal_reply(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m), lo = pm__rbuf_u64(m), hi = pm__rbuf_u64(m);
    (void)src;
    if (m->bad || hi < lo)
        return;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    if (t != NULL && t->state == PM__TASK_RUN && !t->drain_sent) {
        t->steal_pending = 0;
        if (pm__trace_on())
            pm__trace_span(-1, PM__TRACE_STEAL, seq, hi - lo, t->steal_since, pm__now());
        if (hi > lo) {
            pm__ranges_install(t, lo, hi);
            t->steal_tried = 0;
            atomic_fetch_add(&t->steals_remote, 1);
            pm__task_ready_locked(t);
        } else if (++t->steal_tried >= pm__rt.nhosts - 1) {
            drain_locked(t);
        } else {
            ask_next_victim_locked(t);
        }
    }
    pthread_mutex_unlock(&pm__rt.lock);
}

/* ---- other hosts: reporting chunks --------------------------------------- */

static void subscribe_once(pm__task_t *t, uint64_t chunk)
{
    if (t->chunk_subs != NULL && t->chunk_subs[chunk].start == NULL)
        pm__subscribe_chunk(t, chunk);
}

pm__fetch_t *pm__proto_prefetch(pm__task_t *t, uint64_t chunk)
{
    pm__fetch_t *f = NULL;
    subscribe_once(t, chunk);
    if (pm__data_prefetch(t, chunk, &f) != 0)
        f = NULL;
    return f;
}

int pm__proto_before_chunk(pm__task_t *t, uint64_t chunk, pm__fetch_t *started)
{
    subscribe_once(t, chunk);
    double t0 = pm__now();
    int rc = pm__data_fetch(t, chunk, started);
    if (pm__trace_on())
        pm__trace_span(-1, PM__TRACE_FETCH, t->seq, chunk, t0, pm__now());
    return rc;
}

static void put_status(pm__wbuf_t *b, pm__task_t *t)
{
    pm__lock(&t->err_lock);
    pm__wbuf_i32(b, t->status);
    pm__wbuf_u64(b, t->failed_subtask);
    pm__wbuf_u64(b, t->nfailed);
    pm__wbuf_str(b, pm__task_message(t));
    t->nfailed = 0; /* host 0 adds them up */
    pm__unlock(&t->err_lock);
}

/* Sends the pieces of the chunk's subtasks [first, last) and drops them;
 * pieces of chunks other stubs run stay for their own reports. */
static void put_pieces(pm__wbuf_t *b, pm__task_t *t, uint64_t first, uint64_t last)
{
    pm__lock(&t->redist_lock);
    size_t at = b->n, n = 0, keep = 0;
    pm__wbuf_u64(b, 0);
    for (size_t i = 0; i < t->npieces; i++) {
        pm__piece_t *p = &t->pieces[i];
        if (p->id < first || p->id >= last) {
            t->pieces[keep++] = *p;
            continue;
        }
        pm__wbuf_u64(b, p->key);
        pm__wbuf_u64(b, p->id);
        pm__wbuf_u64(b, p->bytes);
        pm__wbuf_put(b, p->data, p->bytes);
        free(p->data);
        n++;
    }
    t->npieces = keep;
    if (!b->oom)
        memcpy(b->p + at, &n, sizeof n);
    pm__unlock(&t->redist_lock);
}

void pm__proto_after_chunk(pm__task_t *t, uint64_t chunk, pm_device_kind_t kind, uint64_t run_ns,
                           uint64_t late_ns)
{
    uint64_t first, last;
    pm__chunk_span(t, chunk, &first, &last);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, t->seq);
    pm__wbuf_u64(&b, chunk);
    pm__wbuf_u64(&b, last - first);
    pm__wbuf_i32(&b, kind);
    pm__wbuf_u64(&b, run_ns);
    pm__wbuf_u64(&b, late_ns);
    put_status(&b, t);
    pm__seg_t *segs;
    int nseg;
    unsigned flags = (unsigned)pm__data_put_writes(&b, t, chunk, &segs, &nseg);
    put_pieces(&b, t, first, last);
    /* The written bytes go from the mirrors, which nothing writes again
     * before host 0 has them: this task has no other writer of them, and a
     * later writer waits for this task to end. */
    pm__comm_send_bulk(0, PM__TAG_CHUNK_DONE, &b, segs, nseg, flags, NULL, NULL);
    free(segs);
    pthread_mutex_lock(&pm__rt.lock);
    t->inprogress--;
    maybe_send_drained_locked(t);
    pthread_mutex_unlock(&pm__rt.lock);
}

static void get_status(pm__rbuf_t *m, pm__task_t *t, int src)
{
    char msg[256];
    int32_t status = pm__rbuf_i32(m);
    uint64_t failed = pm__rbuf_u64(m), nfailed = pm__rbuf_u64(m);
    pm__rbuf_str(m, msg, sizeof msg);
    /* nfailed counts the failures since the host's last report. */
    if (!m->bad && status != 0 && nfailed > 0) {
        pm__task_fail_remote(t, status, failed, src, msg);
        pm__lock(&t->err_lock);
        t->nfailed += nfailed - 1;
        pm__unlock(&t->err_lock);
    }
}

static void get_pieces(pm__rbuf_t *m, pm__task_t *t)
{
    uint64_t n = pm__rbuf_u64(m);
    for (uint64_t i = 0; i < n && !m->bad; i++) {
        uint64_t key = pm__rbuf_u64(m), id = pm__rbuf_u64(m), bytes = pm__rbuf_u64(m);
        const void *data = pm__rbuf_get(m, bytes);
        unsigned char *copy = data ? malloc(bytes ? bytes : 1) : NULL;
        if (copy == NULL) {
            pm__task_fail(t, PM_ENOMEM, id, "out of memory gathering redistributed output");
            continue;
        }
        memcpy(copy, data, bytes);
        if (pm__task_add_piece(t, key, id, copy, bytes) != 0)
            free(copy);
    }
}

/* A chunk's report whose written bytes are still landing. */
typedef struct chunk_report {
    pm__task_t *t;
    uint64_t chunk, nsub;
    int32_t kind;
    int src;
    double t0; /* the report arrived */
} chunk_report_t;

static void chunk_landed(void *arg, int status, uint64_t raw, uint64_t wire)
{
    chunk_report_t *c = arg;
    pm__task_t *t = c->t;
    if (t->host_run != NULL && c->src < pm__rt.nhosts)
        atomic_store(&t->host_run[c->src].last, pm__now());
    if (status == 0) {
        pm__data_count(t, c->src, raw, wire);
        if (raw > 0)
            pm__trace_move(c->src, 0, t->seq, raw, c->t0, pm__now());
        if (c->t0 > 0)
            pm__trace_span(-1, PM__TRACE_REPORT, t->seq, c->chunk, c->t0, pm__now());
    } else
        pm__task_fail(t, PM_EHOST, UINT64_MAX, "a chunk's output from another host did not arrive whole (%s)",
                      pm_strerror(status));
    atomic_fetch_add(&t->subtasks_remote, c->nsub);
    if (c->kind == PM_DEVICE_GPU)
        atomic_fetch_add(&t->subtasks_remote_gpu, c->nsub);
    atomic_fetch_add(&t->subtasks_done, c->nsub);
    free(c);
    pm__task_done(t, 1);
}

static void on_chunk_done(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m), chunk = pm__rbuf_u64(m), nsub = pm__rbuf_u64(m);
    int32_t kind = pm__rbuf_i32(m);
    uint64_t run_ns = pm__rbuf_u64(m), late_ns = pm__rbuf_u64(m);
    if (m->bad)
        return;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    if (t != NULL && t->host_fed != NULL && src < pm__rt.nhosts &&
        (t->host_fed[src] == 1 || t->host_fed[src] == 4 || t->host_fed[src] == 6)) {
        /* A host's first report of a task it had a share of from the start:
         * what involving it cost beyond running the chunk and moving its
         * bytes (messages, wake-ups). A host measured again after being
         * left out was idle and slow to wake: that may only lower it, and
         * without the nap the task's message may have waited for there.
         * Else that wait stays in: left out, such a host napped up to
         * 1 ms between rounds, its probes measured the naps, and it stayed
         * out for good (Task Bench stencil_1d on 2 ranks x 1 stub ran one
         * whole run in three or so on host 0 alone, 1.6x slower). */
        bool probe = t->host_fed[src] == 4, cold = probe || t->host_fed[src] == 6;
        t->host_fed[src] = probe ? 5 : 2;
        double moved = pm__hosts_moving(src, t->xfer_common + t->xfer_in + t->xfer_out);
        double late = cold ? (double)late_ns * 1e-9 : 0;
        pm__hosts_note_overhead(src, pm__now() - t->t_start - (double)run_ns * 1e-9 - moved - late, cold);
    }
    if (t != NULL && t->host_run != NULL && src < pm__rt.nhosts)
        atomic_fetch_add(&t->host_run[src].chunks, 1);
    pthread_mutex_unlock(&pm__rt.lock);
    if (t == NULL || chunk >= t->nchunks)
        return;
    /* A multi-assigned chunk reports twice; the first report wins (the
     * other's bytes are dropped). */
    if (t->done_map != NULL && atomic_exchange(&t->done_map[chunk], 1))
        return;
    chunk_report_t *c = malloc(sizeof *c);
    if (c == NULL) {
        pm__error("out of memory taking a chunk's report from host %d; aborting the job", src);
        abort();
    }
    *c = (chunk_report_t){t, chunk, nsub, kind, src, pm__trace_on() ? pm__now() : 0};
    int nseg = 0;
    get_status(m, t, src);
    pm__seg_t *segs = pm__data_get_writes(m, t, src, &nseg);
    get_pieces(m, t);
    /* Last: for a small payload chunk_landed runs at once and may end the task. */
    pm__comm_recv_bulk(m, segs, segs ? nseg : 0, chunk_landed, c);
    free(segs);
}

/* ---- draining ------------------------------------------------------------ */

static void put_partial(void *ctx, int level, uint64_t index, pm__accset_t *acc)
{
    pm__wbuf_t *b = ((void **)ctx)[0];
    pm__task_t *t = ((void **)ctx)[1];
    pm__wbuf_i32(b, level);
    pm__wbuf_u64(b, index);
    pm__data_put_accset(b, t, acc);
    pm__accset_free(t, acc);
}

static void send_drained_locked(pm__task_t *t)
{
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, t->seq);
    uint64_t steals = 0, to_gpu = 0, from_gpu = 0, hits = 0, peer = 0;
    for (int s = 0; s < pm__rt.nstubs; s++) {
        const pm__stub_counts_t *c = pm__counts_peek(t, s);
        if (c == NULL)
            continue;
        steals += c->steals;
        to_gpu += c->bytes_to_gpu;
        from_gpu += c->bytes_from_gpu;
        hits += c->gpu_cache_hits;
        peer += c->bytes_gpu_peer;
    }
    /* In the order of enum pm__remote_count. */
    pm__wbuf_u64(&b, steals);
    pm__wbuf_u64(&b, atomic_load(&t->steals_remote));
    pm__wbuf_u64(&b, to_gpu);
    pm__wbuf_u64(&b, from_gpu);
    pm__wbuf_u64(&b, hits);
    pm__wbuf_u64(&b, (uint64_t)t->copies);
    pm__wbuf_u64(&b, atomic_load(&t->bytes_moved));
    pm__wbuf_u64(&b, atomic_load(&t->bytes_sent));
    pm__wbuf_u64(&b, peer);
    /* Count first so the reader knows how many follow. */
    size_t at = b.n;
    pm__wbuf_u64(&b, 0);
    void *ctx[2] = {&b, t};
    uint64_t n = (uint64_t)pm__reduce_tree_partials(t, put_partial, ctx);
    if (!b.oom)
        memcpy(b.p + at, &n, sizeof n);
    put_status(&b, t);
    /* What this host received from each host, so host 0 knows who sent what. */
    for (int h = 0; h < pm__rt.nhosts; h++)
        pm__wbuf_u64(&b, t->xbytes ? atomic_load(&t->xbytes[h]) : 0);
    pm__comm_send(0, PM__TAG_DRAINED, &b);
    t->drain_sent = 1;
    /* No stub may find it again; it stays known until host 0 ends it. */
    pm__task_drop_remote_locked(t);
}

static void on_drained(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m);
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = m->bad ? NULL : pm__task_find_locked(seq);
    pthread_mutex_unlock(&pm__rt.lock);
    if (t == NULL)
        return;
    if (pm__trace_on()) {
        double now = pm__now();
        pm__trace_span(-1, PM__TRACE_DRAINED, seq, (uint64_t)src, now, now);
    }
    for (int i = 0; i < PM__REMOTE_COUNTS; i++)
        atomic_fetch_add(&t->remote_counts[i], pm__rbuf_u64(m));
    uint64_t n = pm__rbuf_u64(m);
    for (uint64_t i = 0; i < n && !m->bad; i++) {
        int level = pm__rbuf_i32(m);
        uint64_t index = pm__rbuf_u64(m);
        pm__accset_t *acc = pm__data_get_accset(m, t, src);
        if (acc == NULL) {
            pm__task_fail(t, PM_EHOST, UINT64_MAX, "bad reduce partial from host %d", src);
            continue;
        }
        int rc = pm__reduce_tree_push(t, level, index, acc);
        if (rc != 0)
            pm__task_fail(t, rc, UINT64_MAX, "merging host %d's reduce partial failed (%s)", src,
                          pm_strerror(rc));
    }
    get_status(m, t, src);
    int nh = pm__rt.nhosts;
    for (int h = 0; h < nh && !m->bad; h++) {
        uint64_t got = pm__rbuf_u64(m);
        if (t->xbytes != NULL && !m->bad && src > 0 && src < nh) {
            atomic_fetch_add(&t->xbytes[nh + h], got);
            atomic_fetch_add(&t->xbytes[2 * nh + src], got);
        }
    }
    pm__task_done(t, 1);
}

/* ---- other hosts: the end of a task --------------------------------------- */

static void on_task_end(int src, pm__rbuf_t *m)
{
    char msg[256];
    (void)src;
    uint64_t seq = pm__rbuf_u64(m);
    int32_t status = pm__rbuf_i32(m);
    pm__rbuf_str(m, msg, sizeof msg);
    if (m->bad)
        return;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = pm__task_find_locked(seq);
    if (t != NULL && t->remote)
        pm__task_forget_remote_locked(t);
    else
        t = NULL;
    if (status != 0 && pm__rt.first_failure == 0)
        pm__rt.first_failure = status;
    pthread_mutex_unlock(&pm__rt.lock);
    if (status != 0)
        pm__error("task %llu failed: %s (%s)", (unsigned long long)seq, msg, pm_errname(status));
    if (t != NULL) {
        pm__comm_active(-1);
        pm__task_destroy(t);
    }
}

/* ---- set-up ---------------------------------------------------------------- */

void pm__proto_init(void)
{
    pm__comm_handle(PM__TAG_TASK, on_task);
    pm__comm_handle(PM__TAG_TASK_NACK, on_task_nack);
    pm__comm_handle(PM__TAG_CHUNK_DONE, on_chunk_done);
    pm__comm_handle(PM__TAG_STEAL_REQ, on_steal_req);
    pm__comm_handle(PM__TAG_STEAL_REPLY, on_steal_reply);
    pm__comm_handle(PM__TAG_DRAINED, on_drained);
    pm__comm_handle(PM__TAG_TASK_END, on_task_end);
    pm__comm_handle(PM__TAG_COPY_REQ, on_copy_req);
    pm__comm_handle(PM__TAG_COPY_REPLY, on_copy_reply);
    pm__comm_on_round(poll_pending);
    pm__hooks.task_started = task_started;
    pm__hooks.task_finished = task_finished;
    pm__hosts_hooks();
    if (pm__rt.nhosts > 1)
        pm__hosts_overhead_init(pm__rt.nhosts);
}

/* What a host costs a task beyond its bytes is at least a few round trips
 * (sched/hosts.h): the transport measured one to each host at start-up. */
void pm__proto_start(void)
{
    for (int h = 1; h < pm__rt.nhosts; h++)
        pm__hosts_seed_overhead(h, 2 * pm__comm_rtt(h));
}

void pm__proto_fini(void)
{
    free_pending();
    pm__hosts_overhead_free();
}
