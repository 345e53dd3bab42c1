/*
 * Subscriptions: the subscribe callbacks of a task run chunk by chunk before
 * any subtask does, so that bad ranges and overlapping writes fail the task
 * before a byte is written.
 */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many written blocks the overlap check is skipped (with a
 * warning), except in checking mode (PMLIB_CHECK=1). */
#define PM__OVERLAP_CHECK_MAX (1u << 26)

static const char *access_word(int a)
{
    return a == PM_READ ? "reading" : a == PM_WRITE ? "writing" : "reading and writing";
}

/* Records the first bad subscription of a subtask; keeps later ones out. */
static int sub_error(pm_subscription_t *sub, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int sub_error(pm_subscription_t *sub, int code, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sub->err == 0) {
        sub->err = code;
        pm__task_fail(sub->task, code, sub->id, "subtask %llu %s",
                      (unsigned long long)sub->id, msg);
    }
    return code;
}

/* A chunk's subscriptions are one block: start[], then the records, which
 * grow by reallocating the whole block (the first time out of the task's
 * room, by copying it). */
static int push(pm__chunk_subs_t *cs, const pm__sub_t *r)
{
    if (cs->n == cs->cap) {
        uint32_t cap = cs->cap * 2;
        size_t off = (size_t)((char *)cs->recs - (char *)cs->start);
        if (cap <= cs->cap)
            return PM_ENOMEM;
        char *b = cs->own ? realloc(cs->start, off + cap * sizeof *r) : malloc(off + cap * sizeof *r);
        if (b == NULL)
            return PM_ENOMEM;
        if (!cs->own)
            memcpy(b, cs->start, off + cs->n * sizeof *r);
        cs->start = (uint32_t *)b;
        cs->recs = (pm__sub_t *)(b + off);
        cs->cap = cap;
        cs->own = true;
    }
    cs->recs[cs->n++] = *r;
    return 0;
}

static size_t round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* A chunk of nsub subtasks begins with room for two records per subtask:
 * start[] takes `off` bytes, the records `cap`. */
static void first_room(uint64_t nsub, size_t *off, uint32_t *cap)
{
    *off = round16((size_t)(nsub + 1) * sizeof(uint32_t));
    *cap = nsub < 2048 ? 2 * (uint32_t)nsub + 2 : 4096;
}

/* The chunk table's bytes, where the chunks' room begins. */
static size_t table_bytes(const pm__task_t *t)
{
    return round16(t->nchunks * sizeof *t->chunk_subs);
}

/* A small task takes its chunks' first records from one allocation with
 * the chunk table: one malloc per task instead of one per chunk, which
 * counts where many small tasks are in flight. */
#define SUBS_ROOM_MAX 4096

/*
 * Chunk tables of small tasks are kept when freed, by size, for the next
 * tasks: with many small tasks in flight, malloc found each one among
 * freed blocks it had to sort and merge first (Task Bench's trivial graph,
 * width 2: malloc and free of the table were about a tenth of the
 * submitting thread). Each table starts after a header saying its size
 * class (0: an allocation of its own, never kept). At most TABLE_KEEP_MAX
 * bytes are kept, until pm_finalize; none under AddressSanitizer, so that
 * a stale pointer into a freed table is still caught.
 */
#if defined(__SANITIZE_ADDRESS__)
#define TABLE_KEEP 0
#else
#define TABLE_KEEP 1
#endif
#define TABLE_CLASS 64
#define TABLE_CLASSES 96 /* up to 6 KiB: the largest carved table is below it */
#define TABLE_KEEP_MAX ((size_t)32 << 20)

typedef struct table_hdr {
    struct table_hdr *next; /* while kept */
    uint32_t cls;           /* size class, 1..TABLE_CLASSES, or 0 */
    uint32_t pad;
} table_hdr_t;

static struct {
    pm__lock_t lock;
    table_hdr_t *head[TABLE_CLASSES + 1];
    size_t bytes;
} TK;

/* A table of `bytes`, zeroed for its first `zero` bytes. */
static pm__chunk_subs_t *table_get(size_t bytes, size_t zero)
{
    uint32_t cls = (uint32_t)((bytes + TABLE_CLASS - 1) / TABLE_CLASS);
    table_hdr_t *h = NULL;
    if (cls > TABLE_CLASSES) {
        cls = 0;
    } else if (TABLE_KEEP) {
        pm__lock(&TK.lock);
        h = TK.head[cls];
        if (h != NULL) {
            TK.head[cls] = h->next;
            TK.bytes -= (size_t)cls * TABLE_CLASS;
        }
        pm__unlock(&TK.lock);
    }
    if (h == NULL) {
        h = malloc(sizeof *h + (cls ? (size_t)cls * TABLE_CLASS : bytes));
        if (h == NULL)
            return NULL;
        h->cls = cls;
    }
    memset(h + 1, 0, zero);
    return (pm__chunk_subs_t *)(h + 1);
}

/* Frees a table from table_get (NULL: none). */
void pm__subs_table_free(pm__chunk_subs_t *table)
{
    if (table == NULL)
        return;
    table_hdr_t *h = (table_hdr_t *)table - 1;
    if (TABLE_KEEP && h->cls != 0) {
        size_t bytes = (size_t)h->cls * TABLE_CLASS;
        pm__lock(&TK.lock);
        bool keep = TK.bytes + bytes <= TABLE_KEEP_MAX;
        if (keep) {
            h->next = TK.head[h->cls];
            TK.head[h->cls] = h;
            TK.bytes += bytes;
        }
        pm__unlock(&TK.lock);
        if (keep)
            return;
    }
    free(h);
}

static void tables_kept_clear(void)
{
    pm__lock(&TK.lock);
    for (int c = 0; c <= TABLE_CLASSES; c++)
        while (TK.head[c] != NULL) {
            table_hdr_t *h = TK.head[c];
            TK.head[c] = h->next;
            free(h);
        }
    TK.bytes = 0;
    pm__unlock(&TK.lock);
}

int pm__subs_alloc(pm__task_t *t)
{
    size_t off;
    uint32_t cap;
    first_room(t->grain, &off, &cap);
    size_t room = off + (size_t)cap * sizeof(pm__sub_t);
    bool carve = t->nchunks <= SUBS_ROOM_MAX / room;
    size_t table = t->nchunks * sizeof *t->chunk_subs;
    t->chunk_subs = table_get(carve ? table_bytes(t) + t->nchunks * room : table, table);
    if (t->chunk_subs == NULL)
        return PM_ENOMEM;
    t->subs_room = carve ? (uint32_t)room : 0;
    atomic_init(&t->prep_next, 0); /* not zeroed with the task's head */
    atomic_init(&t->prep_done, 0);
    return 0;
}

/* The room of chunk c in the task's allocation, or NULL. */
static void *chunk_room(const pm__task_t *t, uint64_t c)
{
    if (t->subs_room == 0 || t->subs_set != NULL)
        return NULL;
    return (char *)t->chunk_subs + table_bytes(t) + c * t->subs_room;
}

int pm_subscribe_strided(pm_subscription_t *sub, int mem, pm_access_t access,
                         size_t offset, size_t block, size_t stride, size_t count)
{
    if (sub == NULL || sub->task == NULL)
        return PM__FAIL(PM_EINVAL, "pm_subscribe: sub is NULL; pass the sub given to the subscribe callback");
    const pm__task_t *t = sub->task;
    if (mem < 0 || mem >= t->desc.nmem)
        return sub_error(sub, PM_EINVAL, "subscribes memory %d, but the task has %d memories (indices 0..%d)",
                         mem, t->desc.nmem, t->desc.nmem - 1);
    if (access != PM_READ && access != PM_WRITE && access != PM_READ_WRITE)
        return sub_error(sub, PM_EINVAL, "subscribes memory %d with access %d; use PM_READ, PM_WRITE or PM_READ_WRITE",
                         mem, (int)access);
    const pm_task_memory_t *tm = &t->desc.mem[mem];
    if (access & ~tm->access)
        return sub_error(sub, PM_EACCESS, "subscribes memory %d for %s, but the task added it for %s only; "
                         "add it with PM_READ_WRITE or subscribe it for %s",
                         mem, access_word(access), access_word(tm->access), access_word(tm->access));
    if (block == 0 || count == 0)
        return 0;
    size_t bytes = t->mems[mem]->bytes;
    if (count > 1 && stride < block)
        return sub_error(sub, PM_EINVAL, "subscribes memory %d with stride %zu smaller than its block %zu; "
                         "blocks of one subscription must not overlap", mem, stride, block);
    /* Last byte + 1 = offset + (count-1)*stride + block, checked for overflow. */
    size_t span = block;
    if (count > 1 && (stride > (SIZE_MAX - block) / (count - 1)))
        span = SIZE_MAX;
    else if (count > 1)
        span = (count - 1) * stride + block;
    if (offset > bytes || span > bytes - offset)
        return sub_error(sub, PM_ERANGE, "subscribes bytes %zu..%zu of memory %d, which has %zu bytes; "
                         "keep offset + length within the memory", offset,
                         span == SIZE_MAX ? SIZE_MAX : offset + span - 1, mem, bytes);
    if (count > 1 && stride == block) { /* blocks end to end: one range */
        block = span;
        count = 1;
    }
    if (tm->reduce != PM_REDUCE_NONE) {
        size_t es = tm->reduce == PM_REDUCE_CUSTOM ? 1 : pm_type_size(tm->type);
        if (count > 1)
            return sub_error(sub, PM_ENOTSUP, "subscribes reduced memory %d with a strided range; "
                             "subscribe each block of a reduced memory separately", mem);
        if (offset % es != 0 || block % es != 0)
            return sub_error(sub, PM_EINVAL, "subscribes bytes %zu..%zu of memory %d, reduced over %zu-byte elements; "
                             "use offsets and lengths that are multiples of %zu", offset, offset + block - 1, mem, es, es);
    }
    pm__sub_t r = {.offset = offset, .block = block, .stride = count > 1 ? stride : block,
                   .count = count, .mem = (uint8_t)mem, .access = (uint8_t)access};
    if (push(sub->subs, &r) != 0)
        return sub_error(sub, PM_ENOMEM, "could not record a subscription (out of memory)");
    return 0;
}

int pm_subscribe(pm_subscription_t *sub, int mem, pm_access_t access, size_t offset, size_t length)
{
    return pm_subscribe_strided(sub, mem, access, offset, length, length, 1);
}

int pm__subscribe_chunk(pm__task_t *t, uint64_t chunk)
{
    pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
    uint64_t first, last;
    pm__chunk_span(t, chunk, &first, &last);
    size_t off;
    uint32_t cap;
    first_room(last - first, &off, &cap); /* fits the room: no chunk is longer than the grain */
    void *room = chunk_room(t, chunk);
    cs->own = room == NULL;
    cs->start = room != NULL ? room : malloc(off + cap * sizeof *cs->recs);
    if (cs->start == NULL) {
        pm__task_fail(t, PM_ENOMEM, first, "out of memory recording subscriptions");
        return PM_ENOMEM;
    }
    cs->recs = (pm__sub_t *)((char *)cs->start + off);
    cs->cap = cap;
    pm_subtask_info_t info = {.count = t->desc.subtasks, .nmem = t->desc.nmem,
                              .conf = t->conf, .conf_bytes = t->desc.conf_bytes,
                              .host = pm__rt.host, .stub = -1, .device = PM_DEVICE_CPU};
    for (int m = 0; m < t->desc.nmem; m++)
        info.mem_bytes[m] = t->mems[m]->bytes;
    for (uint64_t id = first; id < last; id++) {
        pm_subscription_t sub = {.task = t, .subs = cs, .id = id};
        cs->start[id - first] = cs->n;
        info.id = id;
        int rc = t->cbs->cb.subscribe(&sub, &info);
        if (rc != 0 && sub.err == 0)
            pm__task_fail(t, PM_ECALLBACK, id, "subtask %llu: the subscribe callback returned %d",
                          (unsigned long long)id, rc);
    }
    cs->start[last - first] = cs->n;
    return 0;
}

void pm__chunk_subs_free(pm__chunk_subs_t *cs)
{
    if (cs->own)
        free(cs->start); /* the records too */
    *cs = (pm__chunk_subs_t){0};
}

/* ---- overlapping writes ------------------------------------------------ */

typedef struct wblock {
    uint64_t lo, hi, id;
} wblock_t;

static int by_lo(const void *a, const void *b)
{
    const wblock_t *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Counts the written blocks of memory m (to size the check). */
static uint64_t count_blocks(const pm__task_t *t, int m)
{
    uint64_t n = 0;
    for (uint64_t c = 0; c < t->nchunks; c++) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[c];
        for (uint32_t i = 0; i < cs->n; i++)
            if (cs->recs[i].mem == m && (cs->recs[i].access & PM_WRITE))
                n += cs->recs[i].count;
    }
    return n;
}

static void collect_blocks(const pm__task_t *t, int m, wblock_t *b, int *sorted)
{
    uint64_t k = 0;
    *sorted = 1;
    for (uint64_t c = 0; c < t->nchunks; c++) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[c];
        uint64_t nsub = t->grain;
        for (uint64_t j = 0; j < nsub && c * t->grain + j < t->desc.subtasks; j++) {
            for (uint32_t i = cs->start[j]; i < cs->start[j + 1]; i++) {
                const pm__sub_t *r = &cs->recs[i];
                if (r->mem != m || !(r->access & PM_WRITE))
                    continue;
                for (uint64_t q = 0; q < r->count; q++) {
                    b[k].lo = r->offset + q * r->stride;
                    b[k].hi = b[k].lo + r->block;
                    b[k].id = c * t->grain + j;
                    if (k > 0 && b[k].lo < b[k - 1].lo)
                        *sorted = 0;
                    k++;
                }
            }
        }
    }
}

static int check_memory(pm__task_t *t, int m)
{
    uint64_t n = count_blocks(t, m);
    if (n < 2)
        return 0;
    if (n > PM__OVERLAP_CHECK_MAX && !pm__check_mode) {
        pm__warn("task %llu: memory %d has %llu written blocks; overlap check skipped "
                 "(PMLIB_CHECK=1 checks it)", (unsigned long long)t->seq, m, (unsigned long long)n);
        return 0;
    }
    wblock_t few[32];
    wblock_t *b = n <= 32 ? few : n <= SIZE_MAX / sizeof *b ? malloc(n * sizeof *b) : NULL;
    if (b == NULL && pm__check_mode) {
        pm__task_fail(t, PM_ENOMEM, 0, "no memory to check the %llu written blocks of memory %d "
                      "for overlaps (PMLIB_CHECK=1 never skips it); subscribe fewer, larger blocks",
                      (unsigned long long)n, m);
        return PM_ENOMEM;
    }
    if (b == NULL) {
        pm__warn("task %llu: no memory to check memory %d for overlapping writes; check skipped",
                 (unsigned long long)t->seq, m);
        return 0;
    }
    int sorted;
    collect_blocks(t, m, b, &sorted);
    if (!sorted)
        qsort(b, n, sizeof *b, by_lo);
    uint64_t maxhi = b[0].hi, maxid = b[0].id;
    int rc = 0;
    for (uint64_t i = 1; i < n; i++) {
        if (b[i].lo < maxhi && b[i].id != maxid) {
            uint64_t a = maxid < b[i].id ? maxid : b[i].id, z = maxid < b[i].id ? b[i].id : maxid;
            uint64_t end = b[i].hi < maxhi ? b[i].hi : maxhi;
            pm__task_fail(t, PM_EOVERLAP, z,
                          "subtasks %llu and %llu both write bytes %llu..%llu of memory %d; "
                          "give the memory a reduce (pm_task_desc_reduce) or make the ranges disjoint",
                          (unsigned long long)a, (unsigned long long)z, (unsigned long long)b[i].lo,
                          (unsigned long long)end - 1, m);
            rc = PM_EOVERLAP;
            break;
        }
        if (b[i].hi > maxhi) {
            maxhi = b[i].hi;
            maxid = b[i].id;
        }
    }
    if (b != few)
        free(b);
    return rc;
}

int pm__subscribe_check_overlap(pm__task_t *t)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        if (t->desc.mem[m].reduce != PM_REDUCE_NONE || !(t->desc.mem[m].access & PM_WRITE))
            continue;
        int rc = check_memory(t, m);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- answers kept across tasks ------------------------------------------ */

/*
 * A subscribe callback answers from the subtask id, the task's
 * configuration bytes and the memories' sizes (doc/api.md); so a task with
 * the same callbacks, subtask count, grain, configuration and memory sizes
 * and modes as an earlier one gets the same subscriptions, already checked
 * for overlapping writes. Host 0 keeps the last two checked sets of each
 * of a few callback sets and hands them to such tasks, which then skip the
 * subscribe phase. PM_TASK_FRESH_SUBSCRIPTIONS turns this off per task.
 * A callback set whose tasks never match (a timestep in the configuration)
 * would only pay for keeping: once PM__SUBS_BARREN of its sets in a row were
 * never reused, only every PM__SUBS_RETRY-th of its tasks keeps its set, so
 * that a program whose tasks begin to repeat is still noticed.
 */
struct pm__subs_set {
    atomic_int refs;
    uint64_t nchunks;
    pm__chunk_subs_t *chunks;
};

#define PM__SUBS_CACHE 8
/* Entries one callback set may hold: two, so that tasks of two shapes in
 * turn (the row and column passes of a 2-D FFT) both find theirs, while a
 * program whose configuration changes every task (a timestep in it) takes
 * no more than two from other callback sets. */
#define PM__SUBS_PER_CALLBACKS 2
#define PM__SUBS_BARREN 8
#define PM__SUBS_RETRY 64

typedef struct subs_key {
    const pm__callbacks_t *set; /* the callback set (registry.c) */
    uint64_t subtasks, grain;
    int nmem;
    size_t bytes[PM_MAX_TASK_MEMORIES];
    int access[PM_MAX_TASK_MEMORIES], reduce[PM_MAX_TASK_MEMORIES];
    size_t conf_bytes;
    unsigned char *conf;
} subs_key_t;

static struct {
    pthread_mutex_t lock;
    subs_key_t key[PM__SUBS_CACHE];
    pm__subs_set_t *set[PM__SUBS_CACHE];
    uint64_t used[PM__SUBS_CACHE], clock;
    uint32_t hits[PM__SUBS_CACHE];   /* tasks that reused the entry */
    uint32_t barren[PM__SUBS_CACHE]; /* its callback set's entries before it, in a row, never reused */
    uint32_t skipped[PM__SUBS_CACHE]; /* tasks of its callback set since it that kept nothing */
} SC = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool key_matches(const subs_key_t *k, const pm__task_t *t)
{
    if (k->set != t->cbs->set || k->subtasks != t->desc.subtasks || k->grain != t->grain ||
        k->nmem != t->desc.nmem || k->conf_bytes != t->desc.conf_bytes)
        return false;
    for (int m = 0; m < k->nmem; m++)
        if (k->bytes[m] != t->mems[m]->bytes || k->access[m] != (int)t->desc.mem[m].access ||
            k->reduce[m] != (int)t->desc.mem[m].reduce * 64 + (int)t->desc.mem[m].type)
            return false;
    return k->conf_bytes == 0 || memcmp(k->conf, t->conf, k->conf_bytes) == 0;
}

static void set_drop(pm__subs_set_t *set)
{
    if (set == NULL || atomic_fetch_sub(&set->refs, 1) != 1)
        return;
    for (uint64_t c = 0; c < set->nchunks; c++)
        pm__chunk_subs_free(&set->chunks[c]);
    pm__subs_table_free(set->chunks);
    free(set);
}

static bool cacheable(const pm__task_t *t)
{
    return pm__rt.host == 0 && t->chunk_subs != NULL && !t->remote &&
           !(t->desc.flags & PM_TASK_FRESH_SUBSCRIPTIONS);
}

/* Where a new kept set of callbacks `cb` would go (lock held). */
typedef struct {
    int slot;       /* the oldest of its own once it has PM__SUBS_PER_CALLBACKS, else an empty or the oldest entry */
    int newest;     /* its own newest entry, -1: none */
    uint32_t barren; /* its entries kept in a row that no task reused, the new one included */
} victim_t;

static victim_t victim_locked(const pm__callbacks_t *cb)
{
    int slot = 0, own = -1, nown = 0, newest = -1;
    bool reused = false;
    uint32_t barren = 0;
    for (int i = 0; i < PM__SUBS_CACHE; i++) {
        if (SC.set[i] != NULL && SC.key[i].set == cb) {
            nown++;
            if (own < 0 || SC.used[i] < SC.used[own])
                own = i;
            if (newest < 0 || SC.used[i] > SC.used[newest])
                newest = i;
            reused |= SC.hits[i] > 0;
            barren = SC.barren[i] > barren ? SC.barren[i] : barren;
        }
        if (SC.set[i] == NULL || (SC.set[slot] != NULL && SC.used[i] < SC.used[slot]))
            slot = i;
    }
    return (victim_t){.slot = nown >= PM__SUBS_PER_CALLBACKS ? own : slot, .newest = newest,
                      .barren = reused ? 0 : barren + 1};
}

/* Whether t's set is worth keeping: not when its callback set's last
 * PM__SUBS_BARREN entries were all never reused, except now and then
 * (lock held; its newest entry counts the tasks that kept nothing). */
static bool worth_keeping_locked(const pm__task_t *t)
{
    victim_t v = victim_locked(t->cbs->set);
    if (v.barren <= PM__SUBS_BARREN)
        return true;
    return ++SC.skipped[v.newest] % PM__SUBS_RETRY == 0;
}

/* A task that finds no set to reuse learns under the same lock whether
 * its own will be kept, so that pm__subs_keep need not take it again. */
bool pm__subs_reuse(pm__task_t *t)
{
    if (!cacheable(t))
        return false;
    pm__subs_set_t *hit = NULL;
    pthread_mutex_lock(&SC.lock);
    for (int i = 0; i < PM__SUBS_CACHE && hit == NULL; i++)
        if (SC.set[i] != NULL && key_matches(&SC.key[i], t)) {
            hit = SC.set[i];
            atomic_fetch_add(&hit->refs, 1);
            SC.used[i] = ++SC.clock;
            SC.hits[i]++;
        }
    if (hit == NULL)
        t->subs_unkept = !worth_keeping_locked(t);
    pthread_mutex_unlock(&SC.lock);
    if (hit == NULL)
        return false;
    pm__subs_table_free(t->chunk_subs); /* empty: nothing subscribed yet */
    t->chunk_subs = hit->chunks;
    t->subs_set = hit;
    return true;
}

void pm__subs_keep(pm__task_t *t)
{
    if (!cacheable(t) || t->subs_set != NULL || t->status != 0 || t->subs_unkept)
        return;
    pm__subs_set_t *set = malloc(sizeof *set);
    unsigned char *conf = t->desc.conf_bytes ? malloc(t->desc.conf_bytes) : NULL;
    if (set == NULL || (t->desc.conf_bytes && conf == NULL)) {
        free(set);
        free(conf);
        return; /* nothing kept: later tasks subscribe again */
    }
    atomic_init(&set->refs, 2); /* the cache's and the task's */
    set->nchunks = t->nchunks;
    set->chunks = t->chunk_subs;
    t->subs_set = set;
    subs_key_t k = {.set = t->cbs->set, .subtasks = t->desc.subtasks, .grain = t->grain, .nmem = t->desc.nmem,
                    .conf_bytes = t->desc.conf_bytes, .conf = conf};
    for (int m = 0; m < k.nmem; m++) {
        k.bytes[m] = t->mems[m]->bytes;
        k.access[m] = (int)t->desc.mem[m].access;
        k.reduce[m] = (int)t->desc.mem[m].reduce * 64 + (int)t->desc.mem[m].type;
    }
    if (conf != NULL)
        memcpy(conf, t->conf, k.conf_bytes);
    pthread_mutex_lock(&SC.lock);
    victim_t v = victim_locked(k.set);
    int slot = v.slot;
    pm__subs_set_t *old = SC.set[slot];
    unsigned char *old_conf = SC.key[slot].conf;
    SC.barren[slot] = v.barren;
    SC.key[slot] = k;
    SC.set[slot] = set;
    SC.used[slot] = ++SC.clock;
    SC.hits[slot] = 0;
    SC.skipped[slot] = 0;
    pthread_mutex_unlock(&SC.lock);
    free(old_conf);
    set_drop(old);
}

void pm__subs_release(pm__task_t *t)
{
    set_drop(t->subs_set);
    t->subs_set = NULL;
    t->chunk_subs = NULL;
}

void pm__subs_cache_clear(void)
{
    pthread_mutex_lock(&SC.lock);
    for (int i = 0; i < PM__SUBS_CACHE; i++) {
        set_drop(SC.set[i]);
        free(SC.key[i].conf);
        SC.set[i] = NULL;
        SC.key[i] = (subs_key_t){0};
        SC.used[i] = 0;
        SC.hits[i] = SC.barren[i] = SC.skipped[i] = 0;
    }
    SC.clock = 0;
    pthread_mutex_unlock(&SC.lock);
    tables_kept_clear();
}
