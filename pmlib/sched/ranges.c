/* Range hand-out and stealing shared by the scheduling policies. */
#include "sched/ranges.h"

#include <stdlib.h>
#include <string.h>

/* The slots first (each on its own cache line), then the state. */
size_t pm__ranges_space(int nstubs)
{
    return (size_t)nstubs * sizeof(pm__range_slot_t) + sizeof(struct pm__sched_state) +
           (size_t)nstubs * sizeof(atomic_uchar);
}

/* Slots whose use a task's plan tracks (struct pm__sched_state.used). */
#define PM__USED_BITS 64

/* Slot s is about to hold chunks (every path that puts some in a slot
 * calls it, before the chunks are there). */
static void mark_used(struct pm__sched_state *st, int s)
{
    if (s < PM__USED_BITS)
        atomic_fetch_or_explicit(&st->used, (uint_fast64_t)1 << s, memory_order_release);
}

/*
 * Slots are set up lazily: ranges_init writes the slots of stubs with a
 * share (and those an earlier init of the task wrote), and a slot whose
 * gen is not the task's is an empty range (a task block is reused, and
 * writing all 16 stubs' lines at submit cost a cache miss each). A thread
 * that locks a slot makes it the task's first; a slot of an older gen is
 * unlocked, since a block is reused only once no thread holds its task.
 * Readers without the lock see gen after lo and hi (release, acquire).
 */
static pm__range_slot_t *lock_slot(struct pm__sched_state *st, int s)
{
    pm__range_slot_t *r = &st->slot[s];
    pm__lock(&r->lock);
    if (atomic_load_explicit(&r->gen, memory_order_relaxed) != st->gen) {
        atomic_store_explicit(&r->lo, 0, memory_order_relaxed);
        atomic_store_explicit(&r->hi, 0, memory_order_relaxed);
        atomic_store_explicit(&r->gen, st->gen, memory_order_release);
    }
    return r;
}

/* Chunks in slot s, read without its lock. */
static uint64_t slot_span(const struct pm__sched_state *st, int s)
{
    const pm__range_slot_t *r = &st->slot[s];
    if (atomic_load_explicit(&r->gen, memory_order_acquire) != st->gen)
        return 0;
    uint64_t lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&r->hi, memory_order_relaxed);
    return hi > lo ? hi - lo : 0;
}

/* A plan's state, empty: no chunk in it, spares in the room it keeps (an
 * earlier plan's spares are freed). The slots are left as they are. */
static struct pm__sched_state *state_init(pm__task_t *t, int nstubs)
{
    free(t->sched_heap);
    t->sched_heap = NULL;
    struct pm__sched_state *st = (struct pm__sched_state *)((char *)t->sched_space +
                                                            (size_t)nstubs * sizeof(pm__range_slot_t));
    memset(st, 0, sizeof *st);
    st->slot = t->sched_space;
    st->gen = t->gen;
    st->left = (atomic_uchar *)(st + 1);
    for (int i = 0; i < nstubs; i++)
        atomic_init(&st->left[i], 0);
    st->nstubs = nstubs;
    atomic_init(&st->nleft, 0);
    atomic_init(&st->min_chunk_ns, UINT64_MAX);
    st->spare = st->spare_room;
    st->capspare = 1;
    return st;
}

/* Stub s's weight: weight[s], or under `equal` 1 for a stub that may run
 * the task and 0 for one that may not. */
static double share_weight(const pm__task_t *t, const double *weight, bool equal, int s)
{
    if (equal)
        return pm__task_runnable_on(t, &pm__rt.stubs[s]);
    return weight != NULL ? weight[s] : 0;
}

/* Shares proportional to weight[], or equal among the stubs that may run
 * the task (`equal`: integer arithmetic, the same shares). */
static int init_shares(pm__task_t *t, int nstubs, const double *weight, bool equal)
{
    if (t->sched_space == NULL)
        return PM_EINTERNAL;
    struct pm__sched_state *st = state_init(t, nstubs);
    const bool again = t->sched_slots; /* an earlier plan of this task wrote slots */
    double total = 0;
    for (int s = 0; s < nstubs; s++)
        total += share_weight(t, weight, equal, s);
    double acc = 0;
    const uint64_t n = t->hi - t->lo;
    uint64_t lo = t->lo;
    for (int s = 0; s < nstubs; s++) {
        const double w = share_weight(t, weight, equal, s);
        acc += w;
        /* Rounded to the nearest chunk: n acc / total + 1/2 (equal shares,
         * whose sums are whole numbers: in integers while they fit, as most
         * do). */
        uint64_t hi = t->lo;
        if (total > 0 && equal && n <= UINT32_MAX)
            hi += (2 * n * (uint64_t)acc + (uint64_t)total) / (2 * (uint64_t)total);
        else if (total > 0)
            hi += (uint64_t)((double)n * (acc / total) + 0.5);
        if (hi > t->hi || (s == nstubs - 1 && total > 0))
            hi = t->hi;
        if (w <= 0)
            hi = lo;
        /* A slot without a share is left alone when it is of an older gen
         * (it reads as empty), but not when an earlier init of this task
         * wrote it: host 0 plans its share again once it has placed the
         * task among the hosts (core/task.c), and a range left from the
         * first plan would run chunks another host runs too. Its gen is
         * read only then: a first plan reads no slot it gives nothing. */
        pm__range_slot_t *r = &st->slot[s];
        if (hi > lo || (again && atomic_load_explicit(&r->gen, memory_order_relaxed) == st->gen)) {
            mark_used(st, s);
            atomic_store_explicit(&r->lock.held, 0, memory_order_relaxed);
            atomic_store_explicit(&r->lo, lo, memory_order_relaxed);
            atomic_store_explicit(&r->hi, hi, memory_order_relaxed);
            atomic_store_explicit(&r->gen, st->gen, memory_order_release);
            t->sched_slots = true;
        }
        lo = hi;
    }
    atomic_init(&st->nleft, lo - t->lo);
    t->sched = st;
    return 0;
}

int pm__ranges_init(pm__task_t *t, int nstubs, const double *weight)
{
    return init_shares(t, nstubs, weight, false);
}

int pm__ranges_init_equal(pm__task_t *t, int nstubs)
{
    return init_shares(t, nstubs, NULL, true);
}

int pm__ranges_init_pooled(pm__task_t *t, int nstubs)
{
    if (t->sched_space == NULL)
        return PM_EINTERNAL;
    if (t->sched_slots) { /* planned before: its slots may hold shares */
        int rc = pm__ranges_init(t, nstubs, NULL);
        if (rc != 0)
            return rc;
    } else {
        /* No plan of this task wrote a slot, so none holds its gen and
         * each reads as empty: none is touched (on 16 stubs, 16 lines out
         * of every cache with many tasks in flight). */
        t->sched = state_init(t, nstubs);
    }
    if (t->hi <= t->lo)
        return 0;
    struct pm__sched_state *st = t->sched;
    st->spare[0][0] = t->lo;
    st->spare[0][1] = t->hi;
    st->nspare = 1;
    atomic_init(&st->spare_chunks, t->hi - t->lo);
    atomic_init(&st->nleft, t->hi - t->lo);
    return 0;
}

static void left_add(struct pm__sched_state *st, uint64_t n)
{
    atomic_fetch_add_explicit(&st->nleft, n, memory_order_relaxed);
}

static void left_sub(struct pm__sched_state *st, uint64_t n)
{
    atomic_fetch_sub_explicit(&st->nleft, n, memory_order_relaxed);
}

/* Moves a spare range into the stub's empty slot; false if none. */
static bool take_spare(struct pm__sched_state *st, int stub)
{
    if (atomic_load_explicit(&st->spare_chunks, memory_order_relaxed) == 0)
        return false;
    bool moved = false;
    pm__lock(&st->spare_lock);
    pm__range_slot_t *r = lock_slot(st, stub);
    if (st->nspare > 0 &&
        atomic_load_explicit(&r->lo, memory_order_relaxed) >=
            atomic_load_explicit(&r->hi, memory_order_relaxed)) {
        uint64_t lo = st->spare[st->nspare - 1][0], hi = st->spare[--st->nspare][1];
        mark_used(st, stub);
        atomic_store_explicit(&r->lo, lo, memory_order_relaxed);
        atomic_store_explicit(&r->hi, hi, memory_order_relaxed);
        atomic_fetch_sub(&st->spare_chunks, hi - lo);
        moved = true;
    }
    pm__unlock(&r->lock);
    pm__unlock(&st->spare_lock);
    return moved;
}

bool pm__ranges_take_own(pm__task_t *t, int stub, uint64_t *chunk)
{
    bool got = false;
    for (int pass = 0; pass < 2 && !got; pass++) {
        if (pass == 1 && !take_spare(t->sched, stub))
            break;
        pm__range_slot_t *r = lock_slot(t->sched, stub);
        uint64_t lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
        if (lo < atomic_load_explicit(&r->hi, memory_order_relaxed)) {
            *chunk = lo;
            atomic_store_explicit(&r->lo, lo + 1, memory_order_relaxed);
            got = true;
        }
        pm__unlock(&r->lock);
    }
    if (got)
        left_sub(t->sched, 1);
    return got;
}

uint64_t pm__ranges_extend(pm__task_t *t, int stub, uint64_t next, uint64_t max)
{
    uint64_t n = 0;
    pm__range_slot_t *r = lock_slot(t->sched, stub);
    uint64_t lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&r->hi, memory_order_relaxed);
    if (lo == next && hi > lo) {
        n = hi - lo < max ? hi - lo : max;
        atomic_store_explicit(&r->lo, lo + n, memory_order_relaxed);
    }
    pm__unlock(&r->lock);
    if (n > 0)
        left_sub(t->sched, n);
    return n;
}

bool pm__ranges_untake(pm__task_t *t, int stub, uint64_t lo, uint64_t hi)
{
    left_add(t->sched, hi - lo);
    pm__range_slot_t *r = lock_slot(t->sched, stub);
    bool back = atomic_load_explicit(&r->lo, memory_order_relaxed) == hi;
    if (back)
        atomic_store_explicit(&r->lo, lo, memory_order_relaxed);
    pm__unlock(&r->lock);
    if (!back)
        left_sub(t->sched, hi - lo);
    return back;
}

/* The stub with the most chunks left, other than `self` (-1: any): among
 * the slots marked used, and every slot past those the bits track. */
static int pick_victim(const struct pm__sched_state *st, int self)
{
    int best = -1;
    uint64_t most = 0;
    uint_fast64_t bits = atomic_load_explicit(&st->used, memory_order_acquire);
    for (int s = 0; s < st->nstubs;) {
        if (s < PM__USED_BITS) {
            bits &= ~(uint_fast64_t)0 << s;
            if (bits == 0) {
                s = PM__USED_BITS;
                continue;
            }
            s = __builtin_ctzll((unsigned long long)bits);
            if (s >= st->nstubs)
                break;
        }
        uint64_t n = s == self ? 0 : slot_span(st, s);
        if (n > most) {
            most = n;
            best = s;
        }
        s++;
    }
    return best;
}

bool pm__ranges_steal(pm__task_t *t, int stub, uint64_t *chunk)
{
    struct pm__sched_state *st = t->sched;
    if (atomic_load_explicit(&st->nleft, memory_order_relaxed) == 0)
        return false;
    for (;;) {
        int v = pick_victim(st, stub);
        if (v < 0)
            return false;
        pm__range_slot_t *vr = lock_slot(st, v);
        uint64_t lo = atomic_load_explicit(&vr->lo, memory_order_relaxed);
        uint64_t hi = atomic_load_explicit(&vr->hi, memory_order_relaxed);
        if (hi <= lo) { /* emptied meanwhile: look again */
            pm__unlock(&vr->lock);
            continue;
        }
        /* The victim keeps the front (it is working there); take the back half. */
        uint64_t take = (hi - lo) / 2;
        if (take == 0)
            take = 1;
        uint64_t first = hi - take;
        atomic_store_explicit(&vr->hi, first, memory_order_relaxed);
        pm__unlock(&vr->lock);

        pm__range_slot_t *own = lock_slot(st, stub);
        if (take > 1)
            mark_used(st, stub);
        atomic_store_explicit(&own->lo, first + 1, memory_order_relaxed);
        atomic_store_explicit(&own->hi, hi, memory_order_relaxed);
        pm__unlock(&own->lock);
        pm__counts_own(t, stub)->steals++;
        left_sub(st, 1);
        *chunk = first;
        return true;
    }
}

uint64_t pm__ranges_left(const pm__task_t *t)
{
    return atomic_load_explicit(&t->sched->nleft, memory_order_relaxed);
}

bool pm__ranges_give(pm__task_t *t, uint64_t max, bool lone, uint64_t *lo, uint64_t *hi)
{
    struct pm__sched_state *st = t->sched;
    for (;;) {
        int v = pick_victim(st, -1);
        if (v < 0)
            return false;
        pm__range_slot_t *vr = lock_slot(st, v);
        uint64_t a = atomic_load_explicit(&vr->lo, memory_order_relaxed);
        uint64_t b = atomic_load_explicit(&vr->hi, memory_order_relaxed);
        if (b <= a) {
            pm__unlock(&vr->lock);
            continue;
        }
        /* Half by default; a lone chunk stays, as it starts here sooner
         * than its data could move, unless the caller found every stub
         * here busy (`lone`): then it would wait for one of them. */
        uint64_t half = (b - a) / 2 > 0 ? (b - a) / 2 : (uint64_t)lone;
        uint64_t take = max == UINT64_MAX ? half : max < b - a ? max : b - a;
        if (take > 0)
            atomic_store_explicit(&vr->hi, b - take, memory_order_relaxed);
        pm__unlock(&vr->lock);
        if (take == 0)
            return false;
        left_sub(st, take);
        *lo = b - take;
        *hi = b;
        return true;
    }
}

void pm__ranges_install(pm__task_t *t, uint64_t lo, uint64_t hi)
{
    struct pm__sched_state *st = t->sched;
    left_add(st, hi - lo);
    /* Ranges are asked for when the stubs run dry, so an empty eligible slot
     * usually exists; a busy one is extended when adjacent; else the range
     * waits as a spare for the next stub that runs out. */
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < st->nstubs; s++) {
            if (!pm__task_runnable_on(t, &pm__rt.stubs[s]))
                continue;
            pm__range_slot_t *r = lock_slot(st, s);
            uint64_t a = atomic_load_explicit(&r->lo, memory_order_relaxed);
            uint64_t b = atomic_load_explicit(&r->hi, memory_order_relaxed);
            bool ok = pass == 0 ? a >= b : (b == lo || a == hi);
            if (ok) {
                mark_used(st, s);
                atomic_store_explicit(&r->lo, a < b && a < lo ? a : lo, memory_order_relaxed);
                atomic_store_explicit(&r->hi, a < b && b > hi ? b : hi, memory_order_relaxed);
            }
            pm__unlock(&r->lock);
            if (ok)
                return;
        }
    }
    pm__lock(&st->spare_lock);
    if (st->nspare == st->capspare) {
        int cap = 2 * st->capspare;
        bool room = st->spare == st->spare_room;
        uint64_t (*n)[2] = realloc(room ? NULL : st->spare, (size_t)cap * sizeof *n);
        if (n != NULL)
            t->sched_heap = n; /* freed by fini without reading the state */
        if (n == NULL) { /* cannot happen in practice: a few bytes */
            pm__unlock(&st->spare_lock);
            pm__error("task %llu: no memory to keep chunks %llu..%llu from another host",
                      (unsigned long long)t->seq, (unsigned long long)lo,
                      (unsigned long long)hi - 1);
            abort();
        }
        if (room)
            memcpy(n, st->spare_room, sizeof st->spare_room);
        st->spare = n;
        st->capspare = cap;
    }
    st->spare[st->nspare][0] = lo;
    st->spare[st->nspare++][1] = hi;
    atomic_fetch_add(&st->spare_chunks, hi - lo);
    pm__unlock(&st->spare_lock);
}

void pm__ranges_fini(pm__task_t *t)
{
    /* Not a line of the state is read: at the end of a task with many in
     * flight they are out of every cache (empty tasks, 50,000 in flight:
     * this function was 8% of the program's thread when it read
     * whether the spares had been allocated). */
    free(t->sched_heap);
    t->sched_heap = NULL;
    t->sched = NULL; /* the rest lives in the task's block */
}

int pm__ranges_equal_weights(const pm__task_t *t, int nstubs, double *weight)
{
    int n = 0;
    for (int s = 0; s < nstubs; s++) {
        weight[s] = pm__task_runnable_on(t, &pm__rt.stubs[s]) ? 1.0 : 0.0;
        n += weight[s] > 0;
    }
    return n;
}
