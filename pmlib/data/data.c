/*
 * Data between hosts. A host other than 0 keeps a mirror of each memory it
 * has seen: a buffer the size of the memory (pages are only touched where
 * data lands) plus the ranges known to hold the memory's current bytes at
 * the mirror's version. A stub asks for the read ranges of its next chunk
 * the mirror lacks while it runs the current one: from host 0, or, for
 * ranges of a lazy memory another host holds, from that host (the directory
 * of copies: host 0 keeps, per lazy memory, which ranges other hosts hold,
 * and a task carries it to the hosts that run it). The bytes are sent
 * straight from the memory or mirror and land straight in the mirror
 * (strided rows go through one buffer). After a chunk runs, its written
 * ranges go to host 0 the same way, beside its report, unless the memory is
 * lazy: then they stay, and the report only tells host 0's directory that
 * this host holds them. Host 0's own chunks fetch the ranges of a lazy
 * memory other hosts hold before they run; once they have, later tasks
 * send that memory's written ranges home too, beside the report (the
 * writer still holds them, and other hosts still fetch them from it), so
 * host 0's chunks find them there instead of all waiting for one fetch as
 * the next task starts (PageRank on 2 hosts: 2 to 3 ms a timestep). A new
 * version of a memory empties the mirror's ranges but for those the
 * directory says this host holds, so unchanged inputs are never sent
 * twice. Payloads are
 * zlib-compressed when the task asks for it, or, in automatic mode, when a
 * sample shrinks. When every host runs on one machine, the mirror of a
 * large memory is host 0's memory file mapped here (comm/shm.c): it holds
 * host 0's bytes themselves, so nothing of it is fetched, pushed or sent
 * home.
 */
#include "data/data.h"
#include "data/copies.h"
#include "data/dir.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "reduce/acc.h"
#include "trace/trace.h"

/* Ranges some stub has asked for and not yet received: another stub
 * needing them waits instead of asking again. */
typedef struct spans {
    pm__range_t *r;
    uint32_t n, cap;
} spans_t;

typedef struct pm__mirror {
    pm__memory_t mem; /* first, so a task's mems[] entry leads back here */
    pthread_mutex_t lock;
    /* Its copy (copies.h): valid ranges at the memory's version (c.valid,
     * guarded by `lock`); found through the mirror, not listed. */
    pm__copy_t c;
    /* Strided reads that landed whole, kept as records: one per fetch, not
     * one interval per row (thousands of rows would make every lookup and
     * insert of `valid` crawl). */
    pm__sub_t *rows;
    uint32_t nrows, caprows;
    spans_t inflight;
    /* Host 0's directory of the memory as the last task brought it: which
     * host to ask for the ranges other hosts hold. */
    pm__holders_t away;
    /* A shared mirror is page-locked for the GPUs on a thread of its own
     * (mem.pinned says how that went once it has been joined). */
    pthread_t pinner;
    bool pinning;
    struct pm__mirror *next;
} pm__mirror_t;

/* Host 0: the directory of a lazy memory. */
struct pm__place {
    pthread_mutex_t lock;
    pm__holders_t away; /* ranges whose current bytes are on other hosts */
    /* Ranges of `away` whose current bytes came home too, with their
     * holder: host 0's chunks need not fetch them. */
    pm__holders_t also_home;
    spans_t inflight;   /* ranges on their way home */
    bool home_reads;    /* host 0's chunks read ranges held away */
};

static pthread_mutex_t mirrors_lock = PTHREAD_MUTEX_INITIALIZER;
static pm__mirror_t *mirrors;

static pm__mirror_t *mirror_of(pm__memory_t *m)
{
    return (pm__mirror_t *)m;
}

static pm__mirror_t *find_mirror_locked(uint64_t handle)
{
    pm__mirror_t *mr = mirrors;
    while (mr != NULL && mr->mem.handle != handle)
        mr = mr->next;
    return mr;
}

/* A new mirror's bytes: host 0's file of the memory mapped here (shared),
 * or a buffer of its own. Mapping may fail (the process's limit of
 * mappings): the mirror is then filled over the wire, as host 0 answers
 * either way. */
static void *mirror_bytes(int share, size_t bytes, bool *shared)
{
    void *data = share >= 0 ? pm__shm_map(share, bytes) : NULL;
    *shared = data != NULL;
    if (data == NULL) {
        if (share >= 0)
            pm__debug("memory of %zu bytes: cannot map host 0's file; its ranges come over the wire", bytes);
        return pm__big_calloc(bytes);
    }
    return data;
}

static void *pin_mirror(void *arg)
{
    pm__mirror_t *mr = arg;
    mr->mem.pinned = pm__hooks.pin(mr->mem.data, mr->mem.bytes) == 0;
    return NULL;
}

/* A shared mirror is page-locked as host 0's memories are, so that the
 * GPUs here copy it without staging. Locking takes long (200 ms for the 64
 * MB of nbody's 2^20 bodies on an H100 host), so it runs on a thread of
 * its own from when the mirror is made (host 0's memory_created message,
 * else the first task naming it): the GPUs stage their copies until it is
 * done (exec/cuda.c asks CUDA, chunk by chunk, whether a buffer is locked). */
static void pin_in_background(pm__mirror_t *mr)
{
    if (mr->mem.shared && pm__want_pinned())
        mr->pinning = pthread_create(&mr->pinner, NULL, pin_mirror, mr) == 0;
}

static void mirror_bytes_free(pm__mirror_t *mr)
{
    pm__memory_t *m = &mr->mem;
    if (mr->pinning)
        pthread_join(mr->pinner, NULL);
    if (!m->shared) {
        pm__big_free(m->data, m->bytes);
        return;
    }
    if (m->pinned)
        pm__hooks.unpin(m->data);
    pm__shm_free(m->data, m->bytes, -1);
}

pm__memory_t *pm__data_mirror(uint64_t handle, size_t bytes, uint64_t version, const pm__holders_t *away,
                              int share)
{
    pthread_mutex_lock(&mirrors_lock);
    pm__mirror_t *mr = find_mirror_locked(handle);
    if (mr == NULL) {
        bool shared;
        mr = calloc(1, sizeof *mr);
        void *data = mr != NULL ? mirror_bytes(share, bytes, &shared) : NULL;
        if (data == NULL) {
            free(mr);
            pthread_mutex_unlock(&mirrors_lock);
            return NULL;
        }
        mr->mem = (pm__memory_t){.handle = handle, .data = data, .bytes = bytes, .version = version,
                                 .shared = shared, .shm_fd = -1};
        mr->c = (pm__copy_t){.handle = handle, .bytes = bytes, .version = version, .place = PM__PLACE_HOST};
        pthread_mutex_init(&mr->lock, NULL);
        pin_in_background(mr);
        mr->next = mirrors;
        mirrors = mr;
    } else if (!mr->pinning) {
        pin_in_background(mr); /* made before the GPUs were set up */
    }
    pthread_mutex_unlock(&mirrors_lock);
    pthread_mutex_lock(&mr->lock);
    if (mr->mem.version != version) {
        pm__copy_sync(&mr->c, version); /* written elsewhere: nothing is known valid */
        mr->nrows = 0;
        mr->mem.version = version;
    }
    /* What the directory says this host holds is current here. */
    int rc = pm__holders_copy(&mr->away, away);
    for (uint32_t i = 0; i < mr->away.n && rc == 0; i++)
        if (mr->away.r[i].host == pm__rt.host)
            rc = pm__acc_cover(&mr->c.valid, mr->away.r[i].lo, mr->away.r[i].hi);
    pthread_mutex_unlock(&mr->lock);
    return rc == 0 ? &mr->mem : NULL;
}

static void mirror_free(pm__mirror_t *mr)
{
    pthread_mutex_destroy(&mr->lock);
    pm__copy_free(&mr->c);
    free(mr->rows);
    free(mr->inflight.r);
    pm__holders_free(&mr->away);
    mirror_bytes_free(mr);
    free(mr);
}

static void on_mem_release(int src, pm__rbuf_t *m)
{
    (void)src;
    uint64_t handle = pm__rbuf_u64(m);
    pthread_mutex_lock(&mirrors_lock);
    pm__mirror_t **pp = &mirrors;
    while (*pp != NULL && (*pp)->mem.handle != handle)
        pp = &(*pp)->next;
    pm__mirror_t *mr = *pp;
    if (mr != NULL)
        *pp = mr->next;
    pthread_mutex_unlock(&mirrors_lock);
    if (mr != NULL)
        mirror_free(mr);
}

/* Host 0: a shared memory is new; the other hosts map it now, and lock it
 * for their GPUs, as host 0 did, rather than during their first task of it
 * (a task message comes after this one: messages keep their order). */
static void created(pm__memory_t *m)
{
    if (!m->shared)
        return;
    for (int h = 1; h < pm__rt.nhosts; h++) {
        pm__wbuf_t b = {0};
        pm__wbuf_u64(&b, m->handle);
        pm__wbuf_u64(&b, m->bytes);
        pm__wbuf_u64(&b, m->version);
        pm__wbuf_i32(&b, m->shm_fd);
        pm__comm_send(h, PM__TAG_MEM_CREATED, &b);
    }
}

static void on_mem_created(int src, pm__rbuf_t *m)
{
    (void)src;
    uint64_t handle = pm__rbuf_u64(m), bytes = pm__rbuf_u64(m), version = pm__rbuf_u64(m);
    int32_t fd = pm__rbuf_i32(m);
    pm__holders_t none = {0};
    if (!m->bad && bytes > 0 && pm__data_mirror(handle, bytes, version, &none, fd) == NULL)
        pm__debug("memory %#llx: no mirror yet (out of memory); its first task makes one",
                  (unsigned long long)handle);
}

static void free_mirrors(void)
{
    pthread_mutex_lock(&mirrors_lock);
    while (mirrors != NULL) {
        pm__mirror_t *mr = mirrors;
        mirrors = mr->next;
        mirror_free(mr);
    }
    pthread_mutex_unlock(&mirrors_lock);
}

/* ---- host 0: the directory ---------------------------------------------- */

static int set_lazy(pm__memory_t *m, bool lazy)
{
    if (lazy && m->place == NULL) {
        struct pm__place *p = calloc(1, sizeof *p);
        if (p == NULL)
            return PM_ENOMEM;
        pthread_mutex_init(&p->lock, NULL);
        m->place = p;
    }
    m->lazy = lazy;
    return 0;
}

static void place_free(pm__memory_t *m)
{
    if (m->pushed != NULL) {
        for (int h = 0; h < pm__rt.nhosts; h++)
            pm__acc_free(&m->pushed[h]);
        free(m->pushed);
        m->pushed = NULL;
    }
    struct pm__place *p = m->place;
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->lock);
    pm__holders_free(&p->away);
    pm__holders_free(&p->also_home);
    free(p->inflight.r);
    free(p);
    m->place = NULL;
}

bool pm__data_is_away(pm__memory_t *m)
{
    struct pm__place *p = m->place;
    if (p == NULL)
        return false;
    pthread_mutex_lock(&p->lock);
    bool away = p->away.n > 0;
    pthread_mutex_unlock(&p->lock);
    return away;
}

static void forget_away(pm__memory_t *m)
{
    struct pm__place *p = m->place;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->away.n = 0;
    p->also_home.n = 0;
    pthread_mutex_unlock(&p->lock);
}

bool pm__data_home_reads(pm__memory_t *m)
{
    struct pm__place *p = m->place;
    if (p == NULL)
        return false;
    pthread_mutex_lock(&p->lock);
    bool reads = p->home_reads;
    pthread_mutex_unlock(&p->lock);
    return reads;
}

static void home_rows(pm__memory_t *m, uint64_t off, uint64_t block, uint64_t stride, uint64_t count)
{
    struct pm__place *p = m->place;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    for (uint64_t q = 0; q < count && p->away.n > 0; q++) {
        uint64_t lo = off + q * stride;
        if (pm__holders_touch(&p->away, lo, lo + block) &&
            (pm__holders_set(&p->away, lo, lo + block, 0) != 0 ||
             pm__holders_set(&p->also_home, lo, lo + block, 0) != 0))
            pm__error("out of memory updating the directory of copies; results may be stale");
    }
    pthread_mutex_unlock(&p->lock);
}

static void home_range(pm__memory_t *m, uint64_t lo, uint64_t hi)
{
    if (hi > lo)
        home_rows(m, lo, hi - lo, 0, 1);
}

void pm__data_home_wrote(pm__task_t *t, uint64_t chunk)
{
    const pm__chunk_subs_t *cs = t->chunk_subs ? &t->chunk_subs[chunk] : NULL;
    for (uint32_t i = 0; cs != NULL && i < cs->n; i++) {
        const pm__sub_t *r = &cs->recs[i];
        if ((r->access & PM_WRITE) && t->desc.mem[r->mem].reduce == PM_REDUCE_NONE)
            home_rows(t->mems[r->mem], r->offset, r->block, r->stride, r->count);
    }
}

/* Host 0, starting a task: its directory entries, for the other hosts. */
void pm__data_put_away(pm__wbuf_t *b, pm__memory_t *m)
{
    struct pm__place *p = m->place;
    pm__wbuf_i32(b, m->shared ? m->shm_fd : -1);
    if (p == NULL) {
        pm__wbuf_u64(b, 0);
        return;
    }
    pthread_mutex_lock(&p->lock);
    pm__wbuf_u64(b, p->away.n);
    for (uint32_t i = 0; i < p->away.n; i++) {
        pm__wbuf_u64(b, p->away.r[i].lo);
        pm__wbuf_u64(b, p->away.r[i].hi);
        pm__wbuf_i32(b, p->away.r[i].host);
    }
    pthread_mutex_unlock(&p->lock);
}

int pm__data_get_away(pm__rbuf_t *m, uint64_t bytes, pm__holders_t *away, int *share)
{
    *share = pm__rbuf_i32(m);
    uint64_t n = pm__rbuf_u64(m), prev = 0;
    away->n = 0;
    for (uint64_t i = 0; i < n && !m->bad; i++) {
        uint64_t lo = pm__rbuf_u64(m), hi = pm__rbuf_u64(m);
        int32_t host = pm__rbuf_i32(m);
        if (m->bad || lo < prev || lo >= hi || hi > bytes || host <= 0 || host >= pm__rt.nhosts)
            return PM_EINVAL;
        if (pm__holders_set(away, lo, hi, host) != 0)
            return PM_ENOMEM;
        prev = hi;
    }
    return m->bad ? PM_EINVAL : 0;
}

/* ---- payloads ------------------------------------------------------------ */

/* Inline payloads (reduce partials inside a message) below this size are
 * not worth compressing. */
#define PM__COMPRESS_MIN 4096
/* The automatic mode compresses when a sample shrinks below this fraction. */
#define PM__COMPRESS_GAIN 0.85
#define PM__COMPRESS_SAMPLE (256 * 1024)

static bool want_compress(const pm__task_t *t, const unsigned char *raw, size_t n)
{
    if (n < PM__COMPRESS_MIN || !(t->desc.flags & (PM_TASK_COMPRESS | PM_TASK_COMPRESS_AUTO)))
        return false;
    if (t->desc.flags & PM_TASK_COMPRESS)
        return true;
    size_t sn = n < PM__COMPRESS_SAMPLE ? n : PM__COMPRESS_SAMPLE;
    uLongf zn = compressBound(sn);
    unsigned char *z = malloc(zn);
    bool pays = z != NULL && compress2(z, &zn, raw, sn, 1) == Z_OK && zn < PM__COMPRESS_GAIN * sn;
    free(z);
    return pays;
}

/* The transport's compression flags for a task's payloads. */
static unsigned bulk_flags(const pm__task_t *t)
{
    if (t->desc.flags & PM_TASK_COMPRESS)
        return PM__BULK_ZLIB;
    return t->desc.flags & PM_TASK_COMPRESS_AUTO ? PM__BULK_ZLIB_AUTO : 0;
}

/* Each host counts the payloads it receives from another host: raw bytes
 * and bytes on the wire, and the raw bytes by the host they came from. */
void pm__data_count(pm__task_t *t, int src, uint64_t raw, uint64_t wire)
{
    atomic_fetch_add(&t->bytes_moved, raw);
    atomic_fetch_add(&t->bytes_sent, wire);
    if (t->xbytes != NULL && src >= 0 && src < pm__rt.nhosts)
        atomic_fetch_add(&t->xbytes[src], raw);
}

static void put_payload(pm__wbuf_t *b, pm__task_t *t, const unsigned char *raw, size_t n)
{
    unsigned char *z = NULL;
    uLongf zn = 0;
    if (want_compress(t, raw, n)) {
        zn = compressBound(n);
        z = malloc(zn);
        if (z != NULL && (compress2(z, &zn, raw, n, 1) != Z_OK || zn >= n)) {
            free(z);
            z = NULL;
        }
    }
    pm__wbuf_u64(b, n);
    pm__wbuf_i32(b, z != NULL);
    pm__wbuf_u64(b, z ? zn : n);
    pm__wbuf_put(b, z ? z : raw, z ? zn : n);
    free(z);
}

/* The raw bytes of a payload; *owned says whether the caller frees them. */
static const unsigned char *get_payload(pm__rbuf_t *m, pm__task_t *t, int src, size_t *n, bool *owned)
{
    uint64_t raw = pm__rbuf_u64(m);
    int32_t z = pm__rbuf_i32(m);
    uint64_t sent = pm__rbuf_u64(m);
    const unsigned char *data = pm__rbuf_get(m, sent);
    *owned = false;
    *n = raw;
    if (data == NULL)
        return NULL;
    pm__data_count(t, src, raw, sent);
    if (!z)
        return raw == sent ? data : NULL;
    unsigned char *out = malloc(raw ? raw : 1);
    uLongf on = raw;
    if (out == NULL || uncompress(out, &on, data, sent) != Z_OK || on != raw) {
        free(out);
        m->bad = true;
        return NULL;
    }
    *owned = true;
    return out;
}

/* ---- records: (memory, offset, block, stride, count) ---------------------- */

typedef struct rec {
    int32_t m;
    uint64_t offset, block, stride, count;
} rec_t;

typedef struct recs {
    rec_t *r;
    size_t n, cap;
    uint64_t bytes;
} recs_t;

static int recs_add(recs_t *v, int m, uint64_t off, uint64_t block, uint64_t stride, uint64_t count)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        rec_t *r = realloc(v->r, cap * sizeof *r);
        if (r == NULL)
            return PM_ENOMEM;
        v->r = r;
        v->cap = cap;
    }
    v->r[v->n++] = (rec_t){m, off, block, stride, count};
    v->bytes += block * count;
    return 0;
}

static void recs_put(pm__wbuf_t *b, const recs_t *v)
{
    pm__wbuf_u64(b, v->n);
    for (size_t i = 0; i < v->n; i++) {
        pm__wbuf_i32(b, v->r[i].m);
        pm__wbuf_u64(b, v->r[i].offset);
        pm__wbuf_u64(b, v->r[i].block);
        pm__wbuf_u64(b, v->r[i].stride);
        pm__wbuf_u64(b, v->r[i].count);
    }
}

/* Reads records, checking each against the task's memories. */
/* Whether every row of a record lies inside a memory of `bytes` bytes. */
static bool rec_fits(const rec_t *r, uint64_t bytes)
{
    return r->block <= bytes && (r->count <= 1 || r->stride <= bytes / (r->count - 1)) &&
           r->offset <= bytes && r->offset + (r->count - 1) * r->stride + r->block <= bytes;
}

static int recs_get(pm__rbuf_t *m, const pm__task_t *t, recs_t *v)
{
    uint64_t n = pm__rbuf_u64(m);
    for (uint64_t i = 0; i < n && !m->bad; i++) {
        rec_t r;
        r.m = pm__rbuf_i32(m);
        r.offset = pm__rbuf_u64(m);
        r.block = pm__rbuf_u64(m);
        r.stride = pm__rbuf_u64(m);
        r.count = pm__rbuf_u64(m);
        if (m->bad || r.m < 0 || r.m >= t->desc.nmem || r.count == 0)
            return PM_EINVAL;
        if (!rec_fits(&r, t->mems[r.m]->bytes))
            return PM_ERANGE;
        if (recs_add(v, r.m, r.offset, r.block, r.stride, r.count) != 0)
            return PM_ENOMEM;
    }
    return m->bad ? PM_EINVAL : 0;
}

/* The bytes of records as segments, record r's rows counted from
 * base[r.m], in record order; NULL when out of memory or too many. */
static pm__seg_t *segs_of(unsigned char *const *base, const recs_t *v, int *nseg)
{
    uint64_t n = 0;
    for (size_t i = 0; i < v->n; i++)
        n += v->r[i].count;
    if (n > INT32_MAX)
        return NULL;
    pm__seg_t *segs = malloc((size_t)(n ? n : 1) * sizeof *segs);
    if (segs == NULL)
        return NULL;
    int k = 0;
    for (size_t i = 0; i < v->n; i++) {
        const rec_t *r = &v->r[i];
        for (uint64_t q = 0; q < r->count; q++) {
            unsigned char *p = base[r->m] + r->offset + q * r->stride;
            if (k > 0 && (unsigned char *)segs[k - 1].p + segs[k - 1].n == p)
                segs[k - 1].n += r->block; /* rows end to end: one segment */
            else
                segs[k++] = (pm__seg_t){p, r->block};
        }
    }
    *nseg = k;
    return segs;
}

/* The same in the task's memories (or mirrors). */
static pm__seg_t *recs_segs(const pm__task_t *t, const recs_t *v, int *nseg)
{
    unsigned char *base[PM_MAX_TASK_MEMORIES];
    for (int m = 0; m < t->desc.nmem; m++)
        base[m] = t->mems[m]->data;
    return segs_of(base, v, nseg);
}

/* ---- fetching a chunk's inputs ------------------------------------------- */

/* One request to one host; a chunk's inputs may need several. */
struct pm__fetch {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int done, status;
    int src;
    pm__task_t *t; /* NULL: gathering a memory home */
    pm__memory_t *mems[PM_MAX_TASK_MEMORIES];
    recs_t recs;
    /* Strided records land here, then go into the mirrors row by row where
     * the rows are still missing (others may be reading the valid ones). */
    unsigned char *strided;
    double t0; /* asked */
    unsigned flags; /* PM__BULK_* of the reply, PM__REQ_* of the request */
    struct pm__fetch *next;
};

/* Request flags beside the PM__BULK_* ones: the request goes to a host
 * that received the ranges itself (a relay), which waits for any still on
 * their way there; or it goes to host 0, which must not send it on. */
enum { PM__REQ_RELAY = 1 << 8, PM__REQ_DIRECT = 1 << 9 };
/* A relay's reply when it holds some of the ranges neither in its mirror
 * nor on their way: ask host 0 (PM__REQ_DIRECT). */
#define PM__REPLY_NOT_HERE 1

static void relay_retry(void);

/* Ranges in flight that finished: a stub waiting for another's fetch
 * looks again whenever the generation moves. */
static pthread_mutex_t fill_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fill_cv = PTHREAD_COND_INITIALIZER;
static uint64_t fill_gen;

static bool overlaps_inflight(const spans_t *s, uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].lo < hi && lo < s->r[i].hi)
            return true;
    return false;
}

static int add_inflight(spans_t *s, uint64_t lo, uint64_t hi)
{
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        pm__range_t *n = realloc(s->r, cap * sizeof *n);
        if (n == NULL)
            return PM_ENOMEM;
        s->r = n;
        s->cap = cap;
    }
    s->r[s->n++] = (pm__range_t){lo, hi};
    return 0;
}

static void drop_inflight(spans_t *s, uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].lo == lo && s->r[i].hi == hi) {
            s->r[i] = s->r[--s->n];
            return;
        }
}

/* Asks host h for [lo, hi) of memory m, marking it on its way. */
static int ask(recs_t *by, int h, int m, spans_t *inflight, uint64_t lo, uint64_t hi)
{
    int rc = add_inflight(inflight, lo, hi);
    return rc ? rc : recs_add(&by[h], m, lo, hi - lo, 0, 1);
}

/* A missing part [lo, hi): asked for already (then *wait), or asked for
 * now, of the holders `away` lists and of host 0 for the rest. */
static int want_part(recs_t *by, int m, pm__mirror_t *mr, uint64_t lo, uint64_t hi, bool *wait)
{
    if (overlaps_inflight(&mr->inflight, lo, hi)) {
        *wait = true;
        return 0;
    }
    const pm__holders_t *away = &mr->away;
    uint64_t pos = lo;
    int rc = 0;
    for (uint32_t i = pm__holders_find(away, lo); i < away->n && away->r[i].lo < hi && rc == 0; i++) {
        const pm__held_t *e = &away->r[i];
        if (e->lo > pos)
            rc = ask(by, 0, m, &mr->inflight, pos, e->lo);
        uint64_t a = e->lo > pos ? e->lo : pos, b = e->hi < hi ? e->hi : hi;
        if (rc == 0)
            rc = ask(by, e->host, m, &mr->inflight, a, b);
        pos = b;
    }
    if (pos < hi && rc == 0)
        rc = ask(by, 0, m, &mr->inflight, pos, hi);
    return rc;
}

/* Adds the parts of [lo, hi) of memory m that the mirror lacks (mirror locked). */
static int add_missing(recs_t *by, int m, pm__mirror_t *mr, uint64_t lo, uint64_t hi, bool *wait)
{
    uint64_t glo, ghi;
    int rc = 0;
    while (rc == 0 && pm__acc_gap(&mr->c.valid, lo, hi, &glo, &ghi)) {
        rc = want_part(by, m, mr, glo, ghi, wait);
        lo = ghi;
    }
    return rc;
}

/* Host 0: asks `host` for the parts of [a, b) that did not come home too
 * (place locked). */
static int ask_unless_home(recs_t *by, int m, struct pm__place *p, int host, uint64_t a, uint64_t b,
                           bool *wait)
{
    const pm__holders_t *h = &p->also_home;
    int rc = 0;
    for (uint32_t i = pm__holders_find(h, a); a < b && rc == 0; i++) {
        uint64_t z = i < h->n && h->r[i].lo < b ? h->r[i].lo : b; /* [a, z) is not home */
        if (z > a) {
            if (overlaps_inflight(&p->inflight, a, z))
                *wait = true;
            else
                rc = ask(by, host, m, &p->inflight, a, z);
        }
        if (i >= h->n || h->r[i].lo >= b)
            break;
        a = h->r[i].hi;
    }
    return rc;
}

/* Host 0: adds the parts of [lo, hi) of memory m that other hosts hold
 * (place locked). */
static int add_away(recs_t *by, int m, struct pm__place *p, uint64_t lo, uint64_t hi, bool *wait)
{
    int rc = 0;
    for (uint32_t i = pm__holders_find(&p->away, lo); i < p->away.n && p->away.r[i].lo < hi && rc == 0; i++) {
        const pm__held_t *e = &p->away.r[i];
        uint64_t a = e->lo > lo ? e->lo : lo, b = e->hi < hi ? e->hi : hi;
        p->home_reads = true;
        rc = ask_unless_home(by, m, p, e->host, a, b, wait);
    }
    return rc;
}

/* Whether the mirror holds these strided rows (mirror locked). */
static bool have_rows(const pm__mirror_t *mr, uint64_t offset, uint64_t block, uint64_t stride,
                      uint64_t count)
{
    for (uint32_t i = 0; i < mr->nrows; i++) {
        const pm__sub_t *r = &mr->rows[i];
        if (r->offset == offset && r->block == block && r->stride == stride && r->count == count)
            return true;
    }
    return pm__acc_covers_rows(&mr->c.valid, offset, block, stride, count);
}

static void add_rows(pm__mirror_t *mr, const rec_t *r)
{
    if (mr->nrows == mr->caprows) {
        uint32_t cap = mr->caprows ? mr->caprows * 2 : 16;
        pm__sub_t *n = realloc(mr->rows, cap * sizeof *n);
        if (n == NULL)
            return; /* only a lost shortcut: the rows are fetched again */
        mr->rows = n;
        mr->caprows = cap;
    }
    mr->rows[mr->nrows++] = (pm__sub_t){.offset = r->offset, .block = r->block, .stride = r->stride,
                                        .count = r->count};
}

/* A strided read: on another host, one record from host 0 unless some of
 * it is held elsewhere; then, and on host 0, row by row into `want`. */
static int strided_read(pm__task_t *t, const pm__sub_t *r, recs_t *by, pm__acc_t *want)
{
    uint64_t hi = r->offset + (r->count - 1) * r->stride + r->block;
    bool rows = false, have = false;
    if (t->remote) {
        pm__mirror_t *mr = mirror_of(t->mems[r->mem]);
        pthread_mutex_lock(&mr->lock);
        have = have_rows(mr, r->offset, r->block, r->stride, r->count);
        rows = !have && pm__holders_touch(&mr->away, r->offset, hi);
        pthread_mutex_unlock(&mr->lock);
        if (!have && !rows)
            return recs_add(&by[0], r->mem, r->offset, r->block, r->stride, r->count);
    } else {
        rows = pm__data_is_away(t->mems[r->mem]);
    }
    return rows ? pm__acc_apply_rows(want, r->offset, r->block, r->stride, r->count, true) : 0;
}

/* What chunk `chunk` reads and this host lacks, by the host to ask; *wait
 * when some of it is on its way for another stub. */
static int missing_reads(pm__task_t *t, uint64_t chunk, recs_t *by, bool *wait)
{
    const pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
    pm__acc_t want[PM_MAX_TASK_MEMORIES] = {{0}};
    int rc = 0;
    for (uint32_t i = 0; i < cs->n && rc == 0; i++) {
        const pm__sub_t *r = &cs->recs[i];
        if (!(r->access & PM_READ) || (!t->remote && t->mems[r->mem]->place == NULL) ||
            (t->remote && t->mems[r->mem]->shared))
            continue; /* a shared mirror holds host 0's bytes themselves */
        if (r->count == 1)
            rc = pm__acc_cover(&want[r->mem], r->offset, r->offset + r->block);
        else
            rc = strided_read(t, r, by, &want[r->mem]);
    }
    for (int m = 0; m < t->desc.nmem; m++) {
        if (want[m].ncov == 0)
            continue;
        if (t->remote) {
            pm__mirror_t *mr = mirror_of(t->mems[m]);
            pthread_mutex_lock(&mr->lock);
            for (uint32_t i = 0; i < want[m].ncov && rc == 0; i++)
                rc = add_missing(by, m, mr, want[m].cov[i].lo, want[m].cov[i].hi, wait);
            pthread_mutex_unlock(&mr->lock);
        } else {
            struct pm__place *p = t->mems[m]->place;
            pthread_mutex_lock(&p->lock);
            for (uint32_t i = 0; i < want[m].ncov && rc == 0; i++)
                rc = add_away(by, m, p, want[m].cov[i].lo, want[m].cov[i].hi, wait);
            pthread_mutex_unlock(&p->lock);
        }
    }
    for (int m = 0; m < t->desc.nmem; m++)
        pm__acc_free(&want[m]);
    return rc;
}

/* The contiguous records of a fetch are no longer on their way. */
static void drop_recs(pm__memory_t *const *mems, const recs_t *v)
{
    for (size_t i = 0; i < v->n; i++) {
        const rec_t *r = &v->r[i];
        if (r->count != 1)
            continue;
        pthread_mutex_t *lock;
        spans_t *s;
        if (pm__rt.host == 0) {
            lock = &mems[r->m]->place->lock;
            s = &mems[r->m]->place->inflight;
        } else {
            lock = &mirror_of(mems[r->m])->lock;
            s = &mirror_of(mems[r->m])->inflight;
        }
        pthread_mutex_lock(lock);
        drop_inflight(s, r->offset, r->offset + r->block);
        pthread_mutex_unlock(lock);
    }
}

static void fill_moved(void)
{
    pthread_mutex_lock(&fill_lock);
    fill_gen++;
    pthread_cond_broadcast(&fill_cv);
    pthread_mutex_unlock(&fill_lock);
}

static void fetch_free(pm__fetch_t *f)
{
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->lock);
    free(f->recs.r);
    free(f->strided);
    free(f);
}

/* Sends f's request to f->src (the reply is expected already). */
static void send_request(const pm__fetch_t *f)
{
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, (uint64_t)(uintptr_t)f);
    pm__wbuf_i32(&b, (int32_t)f->flags);
    pm__wbuf_u64(&b, f->recs.n);
    for (size_t i = 0; i < f->recs.n; i++) {
        const rec_t *r = &f->recs.r[i];
        pm__wbuf_u64(&b, f->mems[r->m]->handle);
        pm__wbuf_u64(&b, r->offset);
        pm__wbuf_u64(&b, r->block);
        pm__wbuf_u64(&b, r->stride);
        pm__wbuf_u64(&b, r->count);
    }
    pm__comm_send(f->src, PM__TAG_DATA_REQ, &b);
}

/* Reads record i of a request as send_request wrote it, into *r (its
 * memory index is i); returns the memory's handle. */
static uint64_t get_request_rec(pm__rbuf_t *m, uint64_t i, rec_t *r)
{
    uint64_t handle = pm__rbuf_u64(m);
    *r = (rec_t){.m = (int32_t)i};
    r->offset = pm__rbuf_u64(m);
    r->block = pm__rbuf_u64(m);
    r->stride = pm__rbuf_u64(m);
    r->count = pm__rbuf_u64(m);
    return handle;
}

/* Sends one request per host that by[] names (taking its records); *out
 * lists the requests. Nothing is sent when one cannot be made. */
static int send_fetches(pm__task_t *t, pm__memory_t *const *mems, int nmem, recs_t *by,
                        unsigned flags, pm__fetch_t **out)
{
    pm__fetch_t *list = NULL;
    *out = NULL;
    for (int h = 0; h < pm__rt.nhosts; h++) {
        if (by[h].n == 0)
            continue;
        pm__fetch_t *f = calloc(1, sizeof *f);
        if (f == NULL) {
            while (list != NULL) {
                pm__fetch_t *next = list->next;
                by[list->src] = list->recs;
                list->recs = (recs_t){0};
                fetch_free(list);
                list = next;
            }
            return PM_ENOMEM;
        }
        f->t = t;
        f->src = h;
        memcpy(f->mems, mems, sizeof mems[0] * (size_t)nmem);
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->cv, NULL);
        f->next = list;
        list = f;
    }
    for (pm__fetch_t *f = list, *next; f != NULL; f = next) {
        next = f->next; /* once f's request is out, its reply may add redirects after f */
        f->recs = by[f->src];
        by[f->src] = (recs_t){0};
        f->flags = flags;
        f->t0 = pm__now();
        pm__comm_expect(1);
        send_request(f);
    }
    *out = list;
    return 0;
}

static void free_by(pm__memory_t *const *mems, recs_t *by)
{
    for (int h = 0; h < pm__rt.nhosts; h++) {
        drop_recs(mems, &by[h]);
        free(by[h].r);
    }
    free(by);
}

/* Asks for what the chunk reads and this host lacks, without waiting;
 * *out is NULL when nothing needs asking for. */
static int fetch_begin(pm__task_t *t, uint64_t chunk, pm__fetch_t **out, bool *wait)
{
    *out = NULL;
    recs_t *by = calloc((size_t)pm__rt.nhosts, sizeof *by);
    int rc = by == NULL ? PM_ENOMEM : missing_reads(t, chunk, by, wait);
    if (rc == 0)
        rc = send_fetches(t, t->mems, t->desc.nmem, by, bulk_flags(t), out);
    if (rc == 0 && *out != NULL && !__atomic_load_n(&t->fetched, __ATOMIC_RELAXED))
        __atomic_store_n(&t->fetched, true, __ATOMIC_RELAXED);
    if (by != NULL)
        free_by(t->mems, by);
    if (rc != 0) {
        fill_moved();
        pm__task_fail(t, rc, chunk * t->grain, "out of memory asking for the inputs of chunk %llu",
                      (unsigned long long)chunk);
    }
    return rc;
}

static bool fetch_done(const void *arg)
{
    if (__atomic_load_n(&((const pm__fetch_t *)arg)->done, __ATOMIC_ACQUIRE))
        return true;
    pm__comm_poll(); /* where the stub may receive the reply itself */
    return __atomic_load_n(&((const pm__fetch_t *)arg)->done, __ATOMIC_ACQUIRE);
}

/* Waits for every request of a fetch and frees them; the first failure.
 * Polls a short spell first (PMLIB_SPIN_US): a reply is often microseconds
 * away, and waking from the condition variable takes longer. */
static int fetch_wait(pm__fetch_t *f)
{
    int status = 0;
    while (f != NULL) {
        pm__comm_spin(fetch_done, f, pm__rt.spin_ns);
        pthread_mutex_lock(&f->lock);
        while (!f->done)
            pthread_cond_wait(&f->cv, &f->lock);
        pthread_mutex_unlock(&f->lock);
        if (status == 0)
            status = f->status;
        drop_recs(f->mems, &f->recs);
        pm__fetch_t *next = f->next;
        fetch_free(f);
        f = next;
    }
    fill_moved();
    relay_retry(); /* a request parked for ranges that failed to come */
    return status;
}

static int fetch_end(pm__task_t *t, uint64_t chunk, pm__fetch_t *f)
{
    int status = fetch_wait(f);
    if (status != 0)
        pm__task_fail(t, status, chunk * t->grain, "host %d could not fetch the inputs of chunk %llu (%s)",
                      pm__rt.host, (unsigned long long)chunk, pm_strerror(status));
    return status;
}

bool pm__data_fetched(pm__fetch_t *f)
{
    bool done = true;
    while (f != NULL && done) {
        pthread_mutex_lock(&f->lock);
        done = f->done;
        pm__fetch_t *next = f->next; /* a redirect may add requests after f */
        pthread_mutex_unlock(&f->lock);
        f = next;
    }
    return done;
}

int pm__data_prefetch(pm__task_t *t, uint64_t chunk, pm__fetch_t **f)
{
    bool wait = false;
    *f = NULL;
    return t->chunk_subs == NULL ? 0 : fetch_begin(t, chunk, f, &wait);
}

int pm__data_fetch(pm__task_t *t, uint64_t chunk, pm__fetch_t *started)
{
    if (t->chunk_subs == NULL)
        return 0;
    if (started != NULL) {
        int rc = fetch_end(t, chunk, started);
        if (rc != 0)
            return rc;
    }
    /* What is still missing: ranges another stub is fetching are waited
     * for, then looked at again (a fetch that failed leaves them missing,
     * and this stub asks itself). */
    for (;;) {
        bool wait = false;
        pthread_mutex_lock(&fill_lock);
        uint64_t gen = fill_gen;
        pthread_mutex_unlock(&fill_lock);
        pm__fetch_t *f;
        int rc = fetch_begin(t, chunk, &f, &wait);
        if (rc == 0 && f != NULL)
            rc = fetch_end(t, chunk, f);
        if (rc != 0 || !wait)
            return rc;
        pthread_mutex_lock(&fill_lock);
        while (fill_gen == gen)
            pthread_cond_wait(&fill_cv, &fill_lock);
        pthread_mutex_unlock(&fill_lock);
    }
}

static int gather(pm__memory_t *m)
{
    struct pm__place *p = m->place;
    if (p == NULL)
        return 0;
    recs_t *by = calloc((size_t)pm__rt.nhosts, sizeof *by);
    if (by == NULL)
        return PM_ENOMEM;
    pm__memory_t *mems[1] = {m};
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    /* What came home too is home. */
    for (uint32_t i = 0; i < p->also_home.n && rc == 0; i++)
        rc = pm__holders_set(&p->away, p->also_home.r[i].lo, p->also_home.r[i].hi, 0);
    if (rc == 0)
        p->also_home.n = 0;
    for (uint32_t i = 0; i < p->away.n && rc == 0; i++) {
        const pm__held_t *e = &p->away.r[i];
        rc = ask(by, e->host, 0, &p->inflight, e->lo, e->hi);
    }
    pthread_mutex_unlock(&p->lock);
    pm__fetch_t *f = NULL;
    if (rc == 0)
        rc = send_fetches(NULL, mems, 1, by, 0, &f);
    free_by(mems, by);
    int status = fetch_wait(f);
    return rc ? rc : status;
}

/* The base and size of the memory (host 0) or mirror (other hosts) a
 * request names; NULL when this host has none. */
static unsigned char *resolve_version(uint64_t handle, uint64_t *bytes, uint64_t *version,
                                      pm__memory_t **mem)
{
    unsigned char *base = NULL;
    if (pm__rt.host == 0) {
        pthread_mutex_lock(&pm__rt.lock);
        pm__memory_t *m = pm__memory_lookup_locked((pm_memory_t){handle});
        if (m != NULL) {
            base = m->data;
            *bytes = m->bytes;
            *version = m->version;
            *mem = m;
        }
        pthread_mutex_unlock(&pm__rt.lock);
    } else {
        pthread_mutex_lock(&mirrors_lock);
        pm__mirror_t *mr = find_mirror_locked(handle);
        if (mr != NULL) {
            base = mr->mem.data;
            *bytes = mr->mem.bytes;
            *version = mr->mem.version;
        }
        pthread_mutex_unlock(&mirrors_lock);
    }
    return base;
}

static unsigned char *resolve(uint64_t handle, uint64_t *bytes)
{
    uint64_t version;
    pm__memory_t *m;
    return resolve_version(handle, bytes, &version, &m);
}

/* ---- a range every host reads: spread as a tree ---------------------------
 * Host 0 remembers, per record of a memory's current version it served,
 * which hosts asked for it. A later request for the same record goes to one
 * of them instead (a redirect), breadth first, each host (host 0 too)
 * serving at most PM__RELAY_FANOUT others: H hosts that read one vector get
 * it from host 0 twice and from each other after that, instead of H - 1
 * times from host 0. The relay serves the record from its mirror, after
 * its own copy lands if that is still on its way, or answers
 * PM__REPLY_NOT_HERE when it does not hold it (then the asker goes to host
 * 0). Records under PM__RELAY_MIN bytes are not worth the extra hop.
 * PMLIB_RELAY=0 turns it off.
 */
#define PM__RELAY_FANOUT 2
#define PM__RELAY_MIN ((uint64_t)64 << 10)
#define PM__RELAY_HOLDERS 64
#define PM__SERVED_BUCKETS 256
#define PM__SERVED_MAX 4096

typedef struct served {
    uint64_t handle, version, offset, block, stride, count;
    int home_given;                    /* hosts host 0 sent it to */
    int n;                             /* hosts that asked for it */
    int32_t host[PM__RELAY_HOLDERS];
    uint8_t given[PM__RELAY_HOLDERS];  /* hosts sent to each */
    struct served *next;
} served_t;

/* A request parked at a relay until the ranges it asks for land here. */
typedef struct parked {
    int src;
    uint64_t cookie;
    unsigned flags;
    recs_t recs;
    uint64_t handle[1]; /* per record; allocated with the struct */
} parked_t;

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static parked_t **parked;
static size_t nparked, capparked;
static atomic_int any_parked;

static pthread_mutex_t served_lock = PTHREAD_MUTEX_INITIALIZER;
static served_t *served[PM__SERVED_BUCKETS];
static int nserved;
static int relay_on = -1;

static bool relay_enabled(void)
{
    int on = __atomic_load_n(&relay_on, __ATOMIC_RELAXED);
    if (on < 0) {
        on = (int)pm__env_uint("PMLIB_RELAY", "0 (off) or 1 (on)", 0, 1, 1);
        __atomic_store_n(&relay_on, on, __ATOMIC_RELAXED);
    }
    return on == 1;
}

static void served_clear_locked(void)
{
    for (int b = 0; b < PM__SERVED_BUCKETS; b++)
        while (served[b] != NULL) {
            served_t *e = served[b];
            served[b] = e->next;
            free(e);
        }
    nserved = 0;
}

void pm__data_relay_forget(uint64_t handle)
{
    pthread_mutex_lock(&served_lock);
    if (handle == 0) {
        served_clear_locked();
        __atomic_store_n(&relay_on, -1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&park_lock); /* none is left once every task ended */
        for (size_t i = 0; i < nparked; i++) {
            free(parked[i]->recs.r);
            free(parked[i]);
        }
        free(parked);
        parked = NULL;
        nparked = capparked = 0;
        atomic_store(&any_parked, 0);
        pthread_mutex_unlock(&park_lock);
    }
    for (int b = 0; b < PM__SERVED_BUCKETS && handle != 0; b++)
        for (served_t **pp = &served[b]; *pp != NULL;) {
            served_t *e = *pp;
            if (e->handle == handle) {
                *pp = e->next;
                free(e);
                nserved--;
            } else {
                pp = &e->next;
            }
        }
    pthread_mutex_unlock(&served_lock);
}

/* Host 0: whether every host reads m from host 0: a memory that is not
 * lazy, or a lazy one no other host holds a range of yet (its first
 * task). Once the hosts hold what they wrote, each serves its own ranges
 * and host 0 is not the hub: relaying its ranges would only load others. */
static bool hub(pm__memory_t *m)
{
    return m != NULL && !pm__data_is_away(m);
}

/* Host 0: whom `src` should ask for record r of memory `handle` at
 * `version` (0: host 0 itself), and `src` is noted as a holder. */
static int relay_for(int src, uint64_t handle, uint64_t version, const rec_t *r)
{
    if (r->block * r->count < PM__RELAY_MIN)
        return 0;
    uint64_t h = handle * 0x9E3779B97F4A7C15ull ^ r->offset * 0xC2B2AE3D27D4EB4Full ^
                 r->block ^ (r->count << 17);
    unsigned b = (unsigned)(h ^ (h >> 31)) % PM__SERVED_BUCKETS;
    pthread_mutex_lock(&served_lock);
    served_t *e = served[b];
    while (e != NULL && !(e->handle == handle && e->offset == r->offset && e->block == r->block &&
                          e->stride == r->stride && e->count == r->count))
        e = e->next;
    if (e == NULL) {
        if (nserved >= PM__SERVED_MAX)
            served_clear_locked();
        e = calloc(1, sizeof *e);
        if (e == NULL) {
            pthread_mutex_unlock(&served_lock);
            return 0;
        }
        *e = (served_t){.handle = handle, .version = version, .offset = r->offset, .block = r->block,
                        .stride = r->stride, .count = r->count, .next = served[b]};
        served[b] = e;
        nserved++;
    }
    if (e->version != version) { /* a new version: nobody holds it yet */
        e->version = version;
        e->home_given = e->n = 0;
    }
    int to = 0;
    if (e->home_given < PM__RELAY_FANOUT) {
        e->home_given++;
    } else {
        for (int i = 0; i < e->n; i++)
            if (e->host[i] != src && e->given[i] < PM__RELAY_FANOUT) {
                e->given[i]++;
                to = e->host[i];
                break;
            }
        if (to == 0)
            e->home_given++;
    }
    int i = 0;
    while (i < e->n && e->host[i] != src)
        i++;
    if (i == e->n && e->n < PM__RELAY_HOLDERS) {
        e->host[e->n] = src;
        e->given[e->n++] = 0;
    }
    pthread_mutex_unlock(&served_lock);
    return to;
}


enum relay_state { HAVE, COMING, MISSING };

/* Whether this host's mirror holds record r of memory `handle`, or will
 * once a fetch of its own lands. */
static enum relay_state relay_state(uint64_t handle, const rec_t *r)
{
    pthread_mutex_lock(&mirrors_lock);
    pm__mirror_t *mr = find_mirror_locked(handle);
    pthread_mutex_unlock(&mirrors_lock);
    if (mr == NULL)
        return MISSING;
    enum relay_state st;
    pthread_mutex_lock(&mr->lock);
    if (r->count == 1)
        st = pm__acc_covers(&mr->c.valid, r->offset, r->offset + r->block) ? HAVE
           : overlaps_inflight(&mr->inflight, r->offset, r->offset + r->block) ? COMING
                                                                              : MISSING;
    else
        st = have_rows(mr, r->offset, r->block, r->stride, r->count) ? HAVE : MISSING;
    pthread_mutex_unlock(&mr->lock);
    return st;
}

static enum relay_state request_state(const parked_t *p)
{
    enum relay_state st = HAVE;
    for (size_t i = 0; i < p->recs.n && st != MISSING; i++) {
        enum relay_state s = relay_state(p->handle[i], &p->recs.r[i]);
        if (s > st)
            st = s;
    }
    return st;
}

/* Replies to a relayed request: the bytes, or PM__REPLY_NOT_HERE. */
static void relay_reply(const parked_t *p, enum relay_state st)
{
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, p->cookie);
    pm__seg_t *segs = NULL;
    int nseg = 0;
    if (st == HAVE) {
        unsigned char **base = malloc((p->recs.n ? p->recs.n : 1) * sizeof *base);
        for (size_t i = 0; base != NULL && i < p->recs.n; i++) {
            uint64_t bytes = 0;
            base[i] = resolve(p->handle[i], &bytes);
            if (base[i] == NULL)
                st = MISSING;
        }
        if (base != NULL && st == HAVE)
            segs = segs_of(base, &p->recs, &nseg);
        free(base);
        if (segs == NULL)
            st = MISSING;
    }
    pm__wbuf_i32(&b, st == HAVE ? 0 : PM__REPLY_NOT_HERE);
    if (st == HAVE)
        pm__wbuf_u64(&b, 0); /* no redirects */
    pm__comm_send_bulk(p->src, PM__TAG_DATA_REPLY, &b, segs, st == HAVE ? nseg : 0,
                       p->flags & (PM__BULK_ZLIB | PM__BULK_ZLIB_AUTO), NULL, NULL);
    free(segs);
}

/* Serves the parked requests whose ranges have landed (or will not). */
static void relay_retry(void)
{
    if (atomic_load_explicit(&any_parked, memory_order_acquire) == 0)
        return;
    size_t nready = 0; /* replied to outside the lock */
    parked_t **out = NULL;
    enum relay_state *outst = NULL;
    pthread_mutex_lock(&park_lock);
    out = malloc((nparked ? nparked : 1) * sizeof *out);
    outst = malloc((nparked ? nparked : 1) * sizeof *outst);
    size_t k = 0;
    for (size_t i = 0; i < nparked; i++) {
        enum relay_state st = out == NULL || outst == NULL ? COMING : request_state(parked[i]);
        if (st == COMING) {
            parked[k++] = parked[i];
            continue;
        }
        outst[nready] = st;
        out[nready++] = parked[i];
    }
    nparked = k;
    atomic_store_explicit(&any_parked, k > 0, memory_order_release);
    pthread_mutex_unlock(&park_lock);
    for (size_t i = 0; i < nready; i++) {
        relay_reply(out[i], outst[i]);
        free(out[i]->recs.r);
        free(out[i]);
    }
    free(out);
    free(outst);
}

/* A relay: a request for ranges this host fetched itself. */
static void relay_serve(int src, uint64_t cookie, unsigned flags, pm__rbuf_t *m)
{
    uint64_t n = pm__rbuf_u64(m);
    parked_t *p = m->bad || n == 0 || n > (1u << 20) ? NULL
                : calloc(1, sizeof *p + (size_t)n * sizeof p->handle[0]);
    for (uint64_t i = 0; p != NULL && i < n && !m->bad; i++) {
        rec_t r;
        p->handle[i] = get_request_rec(m, i, &r);
        uint64_t bytes = 0;
        if (m->bad || r.count == 0 || resolve(p->handle[i], &bytes) == NULL || !rec_fits(&r, bytes) ||
            recs_add(&p->recs, r.m, r.offset, r.block, r.stride, r.count) != 0)
            m->bad = true;
    }
    parked_t none = {.src = src, .cookie = cookie, .flags = flags};
    if (p == NULL || m->bad) {
        if (p != NULL)
            free(p->recs.r);
        free(p);
        relay_reply(&none, MISSING);
        return;
    }
    p->src = src;
    p->cookie = cookie;
    p->flags = flags;
    pthread_mutex_lock(&park_lock);
    enum relay_state st = request_state(p);
    if (st == COMING && nparked == capparked) {
        size_t cap = capparked ? 2 * capparked : 16;
        parked_t **np = realloc(parked, cap * sizeof *np);
        if (np != NULL) {
            parked = np;
            capparked = cap;
        } else {
            st = MISSING;
        }
    }
    if (st == COMING) {
        parked[nparked++] = p;
        atomic_store_explicit(&any_parked, 1, memory_order_release);
        p = NULL;
    }
    pthread_mutex_unlock(&park_lock);
    if (p != NULL) {
        relay_reply(p, st);
        free(p->recs.r);
        free(p);
    }
}

/*
 * The asker: host 0 named other hosts for some records of f's request.
 * Each such host gets a request of its own for them, linked after f (so
 * whoever waits for f waits for them too), and f keeps the rest, whose
 * bytes follow. Returns a status for f.
 */
static int take_redirects(pm__fetch_t *f, pm__rbuf_t *m)
{
    uint64_t n = pm__rbuf_u64(m);
    if (n == 0 || m->bad)
        return m->bad ? PM_EHOST : 0;
    if (n > f->recs.n)
        return PM_EHOST;
    int32_t *to = calloc(f->recs.n, sizeof *to);
    if (to == NULL)
        return PM_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = pm__rbuf_u64(m);
        int32_t h = pm__rbuf_i32(m);
        if (m->bad || k >= f->recs.n || h <= 0 || h >= pm__rt.nhosts || h == pm__rt.host) {
            free(to);
            return PM_EHOST;
        }
        to[k] = h;
    }
    int rc = 0;
    pm__fetch_t *added = NULL;
    for (size_t i = 0; i < f->recs.n && rc == 0; i++) {
        if (to[i] == 0)
            continue;
        pm__fetch_t *g = added;
        while (g != NULL && g->src != to[i])
            g = g->next;
        if (g == NULL) {
            if ((g = calloc(1, sizeof *g)) == NULL) {
                rc = PM_ENOMEM;
                break;
            }
            g->t = f->t;
            g->src = to[i];
            memcpy(g->mems, f->mems, sizeof g->mems);
            g->flags = (f->flags & (PM__BULK_ZLIB | PM__BULK_ZLIB_AUTO)) | PM__REQ_RELAY;
            g->t0 = pm__now();
            pthread_mutex_init(&g->lock, NULL);
            pthread_cond_init(&g->cv, NULL);
            g->next = added;
            added = g;
        }
        const rec_t *r = &f->recs.r[i];
        rc = recs_add(&g->recs, r->m, r->offset, r->block, r->stride, r->count);
    }
    if (rc != 0) { /* nothing moved: the redirected records stay f's, and f fails */
        while (added != NULL) {
            pm__fetch_t *next = added->next;
            fetch_free(added);
            added = next;
        }
        free(to);
        return rc;
    }
    size_t k = 0;
    f->recs.bytes = 0;
    for (size_t i = 0; i < f->recs.n; i++)
        if (to[i] == 0) {
            f->recs.bytes += f->recs.r[i].block * f->recs.r[i].count;
            f->recs.r[k++] = f->recs.r[i];
        }
    f->recs.n = k;
    free(to);
    pm__fetch_t *last = added;
    while (last->next != NULL)
        last = last->next;
    pm__fetch_t *after = f->next;
    pthread_mutex_lock(&f->lock);
    last->next = after;
    f->next = added;
    pthread_mutex_unlock(&f->lock);
    for (pm__fetch_t *g = added, *next; g != after; g = next) {
        next = g->next;
        pm__comm_expect(1);
        send_request(g);
    }
    return 0;
}

/* The requested records as segments of this host's memories or mirrors
 * (record i's rows counted from base[i]). With `redirect` (host 0), records
 * another host should serve go there instead: (index, host) pairs. */
static int req_segs(pm__rbuf_t *m, int src, pm__seg_t **out, int *nseg, recs_t *redirect)
{
    uint64_t n = pm__rbuf_u64(m);
    if (m->bad || n > INT32_MAX)
        return PM_EINVAL;
    recs_t v = {0};
    unsigned char **base = malloc((size_t)(n ? n : 1) * sizeof *base);
    int rc = base == NULL ? PM_ENOMEM : 0;
    uint64_t rows = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        rec_t r;
        uint64_t handle = get_request_rec(m, i, &r), bytes = 0, version = 0;
        pm__memory_t *mem = NULL;
        base[i] = m->bad ? NULL : resolve_version(handle, &bytes, &version, &mem);
        rows += r.count;
        int to = 0;
        if (m->bad || r.count == 0)
            rc = PM_EINVAL;
        else if (base[i] == NULL)
            rc = PM_EBADHANDLE;
        else if (!rec_fits(&r, bytes) || rows > INT32_MAX)
            rc = PM_ERANGE;
        else if (redirect != NULL && hub(mem) && (to = relay_for(src, handle, version, &r)) != 0)
            rc = recs_add(redirect, to, i, 0, 0, 1); /* record i: ask host `to` */
        else
            rc = recs_add(&v, r.m, r.offset, r.block, r.stride, r.count);
    }
    *out = rc == 0 ? segs_of(base, &v, nseg) : NULL;
    if (rc == 0 && *out == NULL)
        rc = PM_ENOMEM;
    free(base);
    free(v.r);
    return rc;
}

/* ---- inputs pushed with a task ------------------------------------------ */

/* Host 0 sends a host the bytes its share of a task reads with the task
 * itself when they come to at most this much: a request and its reply
 * cost two messages on the chunk's critical path (tens of microseconds
 * where threads outnumber cores), sending a few KiB a host already holds
 * costs a microsecond or two. Larger inputs are asked for, and kept while
 * unchanged. */
#define PM__PUSH_MAX (16u << 10)

/* The contiguous read ranges of chunks [lo, hi) of t, per memory, that
 * host 0 holds (memories with ranges on other hosts are left out); false
 * when they come to more than PM__PUSH_MAX bytes. */
static bool push_ranges(const pm__task_t *t, uint64_t lo, uint64_t hi, pm__acc_t *want)
{
    bool away[PM_MAX_TASK_MEMORIES];
    for (int m = 0; m < t->desc.nmem; m++)
        away[m] = !(t->desc.mem[m].access & PM_READ) || t->mems[m]->shared || pm__data_is_away(t->mems[m]);
    for (uint64_t c = lo; c < hi; c++) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[c];
        for (uint32_t i = 0; i < cs->n; i++) {
            const pm__sub_t *r = &cs->recs[i];
            if (!(r->access & PM_READ) || away[r->mem] || r->count != 1)
                continue;
            if (r->block > PM__PUSH_MAX || pm__acc_cover(&want[r->mem], r->offset, r->offset + r->block) != 0)
                return false;
        }
    }
    uint64_t bytes = 0;
    for (int m = 0; m < t->desc.nmem; m++)
        for (uint32_t i = 0; i < want[m].ncov; i++)
            bytes += want[m].cov[i].hi - want[m].cov[i].lo;
    return bytes <= PM__PUSH_MAX;
}

/* Host 0's record of what host h was pushed of m at m's version (runtime
 * lock); NULL when out of memory (then nothing is pushed). */
static pm__acc_t *pushed_to(pm__memory_t *m, int h)
{
    if (m->pushed == NULL) {
        m->pushed = calloc((size_t)pm__rt.nhosts, sizeof *m->pushed);
        if (m->pushed == NULL)
            return NULL;
        m->pushed_version = m->version;
    }
    if (m->pushed_version != m->version) {
        for (int k = 0; k < pm__rt.nhosts; k++)
            m->pushed[k].ncov = 0;
        m->pushed_version = m->version;
    }
    return &m->pushed[h];
}

/* Appends [lo, hi) of memory m less what host h was pushed already. */
static void put_unsent(pm__wbuf_t *b, const pm__task_t *t, int m, const pm__acc_t *sent, uint64_t lo,
                       uint64_t hi, uint32_t *n)
{
    for (uint64_t a, z; pm__acc_gap(sent, lo, hi, &a, &z); lo = z) {
        pm__wbuf_i32(b, m);
        pm__wbuf_u64(b, a);
        pm__wbuf_u64(b, z);
        pm__wbuf_put(b, (const unsigned char *)t->mems[m]->data + a, z - a);
        (*n)++;
    }
}

void pm__data_put_push(pm__wbuf_t *b, const pm__task_t *t, int h)
{
    pm__acc_t want[PM_MAX_TASK_MEMORIES] = {{0}};
    bool push = t->chunk_subs != NULL && t->host_lo != NULL && push_ranges(t, t->host_lo[h], t->host_hi[h], want);
    size_t count_at = b->n;
    uint32_t n = 0;
    pm__wbuf_i32(b, 0); /* the count, written below */
    for (int m = 0; m < t->desc.nmem && push; m++) {
        pm__acc_t *sent = want[m].ncov ? pushed_to(t->mems[m], h) : NULL;
        for (uint32_t i = 0; sent != NULL && i < want[m].ncov; i++)
            put_unsent(b, t, m, sent, want[m].cov[i].lo, want[m].cov[i].hi, &n);
        for (uint32_t i = 0; sent != NULL && i < want[m].ncov; i++)
            if (pm__acc_cover(sent, want[m].cov[i].lo, want[m].cov[i].hi) != 0)
                sent->ncov = 0; /* forget: later tasks push again */
    }
    if (!b->oom && b->p != NULL && b->n >= count_at + sizeof(int32_t)) {
        int32_t v = (int32_t)n;
        memcpy(b->p + count_at, &v, sizeof v);
    }
    for (int m = 0; m < t->desc.nmem; m++)
        pm__acc_free(&want[m]);
}

/* Copies [lo, hi) of a pushed range into the mirror where it is neither
 * valid (a running subtask may read those bytes) nor on its way (mirror
 * locked). */
static void push_in(pm__mirror_t *mr, uint64_t lo, uint64_t hi, const unsigned char *bytes)
{
    for (uint64_t pos = lo, a, z; pm__acc_gap(&mr->c.valid, pos, hi, &a, &z); pos = z)
        if (!overlaps_inflight(&mr->inflight, a, z) && pm__acc_cover(&mr->c.valid, a, z) == 0)
            memcpy((unsigned char *)mr->mem.data + a, bytes + (a - lo), z - a);
}

int pm__data_take_push(pm__rbuf_t *m, pm__task_t *t)
{
    int32_t n = pm__rbuf_i32(m);
    uint64_t bytes = 0;
    for (int32_t k = 0; k < n && !m->bad; k++) {
        int32_t mem = pm__rbuf_i32(m);
        uint64_t lo = pm__rbuf_u64(m), hi = pm__rbuf_u64(m);
        if (m->bad || mem < 0 || mem >= t->desc.nmem || lo >= hi || hi > t->mems[mem]->bytes)
            return PM_EINVAL;
        const unsigned char *at = pm__rbuf_get(m, hi - lo);
        if (at == NULL)
            return PM_EINVAL;
        pm__mirror_t *mr = mirror_of(t->mems[mem]);
        if (mr->mem.shared)
            return PM_EINVAL; /* host 0 never pushes these: they are its own bytes */
        pthread_mutex_lock(&mr->lock);
        push_in(mr, lo, hi, at);
        pthread_mutex_unlock(&mr->lock);
        bytes += hi - lo;
    }
    if (m->bad)
        return PM_EINVAL;
    if (bytes > 0)
        pm__data_count(t, 0, bytes, bytes);
    return 0;
}

/* Any host: sends the requested ranges straight from its memories or
 * mirrors. Host 0's memories live while the asking task runs; a mirror
 * lives until its memory is released, which waits for every task using it,
 * and no task writes a range in it while another host may ask for it. */
static void on_req(int src, pm__rbuf_t *m)
{
    uint64_t cookie = pm__rbuf_u64(m);
    unsigned asked = (unsigned)pm__rbuf_i32(m);
    unsigned flags = asked & (PM__BULK_ZLIB | PM__BULK_ZLIB_AUTO);
    if ((asked & PM__REQ_RELAY) && pm__rt.host != 0 && !m->bad) {
        relay_serve(src, cookie, flags, m);
        return;
    }
    bool may_redirect = pm__rt.host == 0 && !(asked & PM__REQ_DIRECT) && pm__rt.nhosts > 2 &&
                        relay_enabled();
    recs_t redirect = {0};
    pm__seg_t *segs = NULL;
    int nseg = 0;
    int rc = m->bad ? PM_EINVAL : req_segs(m, src, &segs, &nseg, may_redirect ? &redirect : NULL);
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, cookie);
    pm__wbuf_i32(&b, rc);
    if (rc == 0) {
        pm__wbuf_u64(&b, redirect.n);
        for (size_t i = 0; i < redirect.n; i++) {
            pm__wbuf_u64(&b, redirect.r[i].offset); /* the record's index */
            pm__wbuf_i32(&b, redirect.r[i].m);      /* the host to ask */
        }
    }
    pm__comm_send_bulk(src, PM__TAG_DATA_REPLY, &b, segs, nseg, flags, NULL, NULL);
    free(segs);
    free(redirect.r);
}

/* Strided rows that landed in f->strided go into the mirrors where they
 * are still missing; contiguous ranges, received in place, become valid
 * (on host 0: home again). */
static void fill_mirrors(pm__fetch_t *f)
{
    const unsigned char *in = f->strided;
    for (size_t i = 0; i < f->recs.n; i++) {
        const rec_t *r = &f->recs.r[i];
        if (pm__rt.host == 0) {
            home_range(f->mems[r->m], r->offset, r->offset + r->block);
            continue;
        }
        pm__mirror_t *mr = mirror_of(f->mems[r->m]);
        unsigned char *base = mr->mem.data;
        pthread_mutex_lock(&mr->lock);
        if (r->count == 1) {
            pm__acc_cover(&mr->c.valid, r->offset, r->offset + r->block);
            pthread_mutex_unlock(&mr->lock);
            continue;
        }
        /* Rows already valid may be in use by a running subtask: leave them. */
        if (!have_rows(mr, r->offset, r->block, r->stride, r->count)) {
            for (uint64_t q = 0; q < r->count; q++) {
                uint64_t lo = r->offset + q * r->stride;
                if (!pm__acc_covers(&mr->c.valid, lo, lo + r->block))
                    memcpy(base + lo, in + q * r->block, r->block);
            }
            add_rows(mr, r);
        }
        in += r->block * r->count;
        pthread_mutex_unlock(&mr->lock);
    }
}

static void fetch_complete(pm__fetch_t *f, int status)
{
    pm__comm_expect(-1);
    pthread_mutex_lock(&f->lock);
    f->status = status;
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE); /* fetch_done polls it */
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->lock);
}

static void reply_landed(void *arg, int status, uint64_t raw, uint64_t wire)
{
    pm__fetch_t *f = arg;
    if (status == 0) {
        fill_mirrors(f);
        relay_retry();
        if (f->t != NULL)
            pm__data_count(f->t, f->src, raw, wire);
        pm__trace_move(f->src, pm__rt.host, f->t ? f->t->seq : 0, raw, f->t0, pm__now());
    }
    fetch_complete(f, status ? PM_EHOST : 0);
}

/* The payload's segments: contiguous ranges straight into the mirrors,
 * strided ones into f->strided. */
static pm__seg_t *reply_segs(pm__fetch_t *f, int *nseg)
{
    uint64_t strided = 0;
    for (size_t i = 0; i < f->recs.n; i++)
        if (f->recs.r[i].count != 1)
            strided += f->recs.r[i].block * f->recs.r[i].count;
    pm__seg_t *segs = malloc((f->recs.n ? f->recs.n : 1) * sizeof *segs);
    f->strided = strided ? malloc(strided) : NULL;
    if (segs == NULL || (strided && f->strided == NULL)) {
        free(segs);
        return NULL;
    }
    unsigned char *at = f->strided;
    for (size_t i = 0; i < f->recs.n; i++) {
        const rec_t *r = &f->recs.r[i];
        if (r->count == 1) {
            segs[i] = (pm__seg_t){(unsigned char *)f->mems[r->m]->data + r->offset, r->block};
        } else {
            segs[i] = (pm__seg_t){at, r->block * r->count};
            at += r->block * r->count;
        }
    }
    *nseg = (int)f->recs.n;
    return segs;
}

static void on_reply(int src, pm__rbuf_t *m)
{
    (void)src;
    pm__fetch_t *f = (pm__fetch_t *)(uintptr_t)pm__rbuf_u64(m);
    int32_t status = pm__rbuf_i32(m);
    if (f == NULL)
        return;
    if (status == PM__REPLY_NOT_HERE && !m->bad) { /* the relay lacks some: ask host 0 */
        f->src = 0;
        f->flags = (f->flags & ~(unsigned)PM__REQ_RELAY) | PM__REQ_DIRECT;
        send_request(f);
        return;
    }
    if (status == 0 && !m->bad)
        status = take_redirects(f, m);
    if (m->bad && status == 0)
        status = PM_EHOST;
    int nseg = 0;
    pm__seg_t *segs = status == 0 ? reply_segs(f, &nseg) : NULL;
    if (status == 0 && segs == NULL)
        status = PM_ENOMEM;
    if (status != 0) {
        fetch_complete(f, status);
        return;
    }
    pm__comm_recv_bulk(m, segs, nseg, reply_landed, f);
    free(segs);
}

/* ---- a chunk's writes (other hosts -> host 0) ----------------------------- */

int pm__data_put_writes(pm__wbuf_t *b, pm__task_t *t, uint64_t chunk, pm__seg_t **segs, int *nseg)
{
    recs_t v = {0}, kept = {0};
    *segs = NULL;
    *nseg = 0;
    if (t->chunk_subs != NULL && t->chunk_subs[chunk].start != NULL) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
        for (uint32_t i = 0; i < cs->n; i++) {
            const pm__sub_t *r = &cs->recs[i];
            if (!(r->access & PM_WRITE) || t->desc.mem[r->mem].reduce != PM_REDUCE_NONE ||
                t->mems[r->mem]->shared)
                continue; /* a shared mirror's writes are home already */
            /* A lazy memory's written ranges stay here: where they are goes
             * home, for the directory, and the bytes too where host 0's
             * chunks read them. */
            bool lazy = (t->lazy_mask >> r->mem) & 1, home = (t->home_mask >> r->mem) & 1;
            if (lazy && recs_add(&kept, r->mem, r->offset, r->block, r->stride, r->count) != 0)
                b->oom = true;
            if ((!lazy || home) && recs_add(&v, r->mem, r->offset, r->block, r->stride, r->count) != 0)
                b->oom = true;
        }
    }
    recs_put(b, &v);
    recs_put(b, &kept);
    *segs = recs_segs(t, &v, nseg);
    if (*segs == NULL)
        b->oom = true;
    free(v.r);
    free(kept.r);
    return bulk_flags(t);
}

/* Host 0: host `src` holds these written ranges of lazy memories now;
 * those of memories in the task's home_mask come home too (their bytes
 * land before the task can end, and no subtask of this task may read what
 * another writes). */
static int note_kept(pm__task_t *t, const recs_t *kept, int src)
{
    for (size_t i = 0; i < kept->n; i++) {
        const rec_t *r = &kept->r[i];
        struct pm__place *p = t->mems[r->m]->place;
        if (p == NULL)
            return PM_EINVAL; /* the memory was never lazy */
        int32_t home = (t->home_mask >> r->m) & 1 ? src : 0;
        int rc = 0;
        pthread_mutex_lock(&p->lock);
        for (uint64_t q = 0; q < r->count && rc == 0; q++) {
            uint64_t lo = r->offset + q * r->stride, hi = lo + r->block;
            rc = pm__holders_set(&p->away, lo, hi, src);
            if (rc == 0)
                rc = pm__holders_set(&p->also_home, lo, hi, home);
        }
        pthread_mutex_unlock(&p->lock);
        if (rc != 0)
            return rc;
    }
    return 0;
}

pm__seg_t *pm__data_get_writes(pm__rbuf_t *m, pm__task_t *t, int src, int *nseg)
{
    recs_t v = {0}, kept = {0};
    int rc = recs_get(m, t, &v);
    if (rc == 0)
        rc = recs_get(m, t, &kept);
    if (rc == 0)
        rc = note_kept(t, &kept, src);
    pm__seg_t *segs = rc == 0 ? recs_segs(t, &v, nseg) : NULL;
    if (rc == 0 && segs == NULL)
        rc = PM_ENOMEM;
    if (rc != 0)
        pm__task_fail(t, PM_EHOST, UINT64_MAX, "host %d sent a chunk's output host 0 could not read (%s)",
                      src, pm_strerror(rc));
    free(v.r);
    free(kept.r);
    return segs;
}

/* ---- reduce partials ------------------------------------------------------- */

void pm__data_put_accset(pm__wbuf_t *b, pm__task_t *t, const pm__accset_t *acc)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        if (t->desc.mem[m].reduce == PM_REDUCE_NONE)
            continue;
        const pm__acc_t *a = &acc->acc[m];
        uint64_t bytes = 0;
        pm__wbuf_u64(b, a->ncov);
        for (uint32_t i = 0; i < a->ncov; i++) {
            pm__wbuf_u64(b, a->cov[i].lo);
            pm__wbuf_u64(b, a->cov[i].hi);
            bytes += a->cov[i].hi - a->cov[i].lo;
        }
        unsigned char *raw = malloc(bytes ? bytes : 1), *p = raw;
        if (raw == NULL) {
            b->oom = true;
            return;
        }
        for (uint32_t i = 0; i < a->ncov; i++) {
            memcpy(p, a->data + (a->cov[i].lo - a->lo), a->cov[i].hi - a->cov[i].lo);
            p += a->cov[i].hi - a->cov[i].lo;
        }
        put_payload(b, t, raw, bytes);
        free(raw);
    }
}

static int get_acc(pm__rbuf_t *m, pm__task_t *t, int src, int mem, pm__acc_t *a)
{
    uint64_t n = pm__rbuf_u64(m), bytes = 0, prev = 0;
    const unsigned char *ranges = pm__rbuf_get(m, n * 16);
    if (ranges == NULL || n > UINT32_MAX)
        return PM_EINVAL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t lo, hi;
        memcpy(&lo, ranges + 16 * i, 8);
        memcpy(&hi, ranges + 16 * i + 8, 8);
        if (lo >= hi || lo < prev || hi > t->mems[mem]->bytes)
            return PM_EINVAL;
        prev = hi;
        bytes += hi - lo;
        if (pm__acc_cover(a, lo, hi) != 0)
            return PM_ENOMEM;
    }
    size_t rn;
    bool owned;
    const unsigned char *raw = get_payload(m, t, src, &rn, &owned);
    if (raw == NULL || rn != bytes) {
        if (owned)
            free((void *)raw);
        return PM_EINVAL;
    }
    if (n > 0) {
        a->lo = a->cov[0].lo;
        a->hi = a->cov[a->ncov - 1].hi;
        a->data = malloc(a->hi - a->lo);
        const unsigned char *p = raw;
        for (uint32_t i = 0; a->data != NULL && i < a->ncov; i++) {
            memcpy(a->data + (a->cov[i].lo - a->lo), p, a->cov[i].hi - a->cov[i].lo);
            p += a->cov[i].hi - a->cov[i].lo;
        }
    }
    if (owned)
        free((void *)raw);
    return n > 0 && a->data == NULL ? PM_ENOMEM : 0;
}

pm__accset_t *pm__data_get_accset(pm__rbuf_t *m, pm__task_t *t, int src)
{
    pm__accset_t *acc = pm__accset_new();
    if (acc == NULL)
        return NULL;
    for (int mem = 0; mem < t->desc.nmem; mem++) {
        if (t->desc.mem[mem].reduce == PM_REDUCE_NONE)
            continue;
        if (get_acc(m, t, src, mem, &acc->acc[mem]) != 0) {
            pm__accset_free(t, acc);
            return NULL;
        }
    }
    return acc;
}

/* ---- a host lost ------------------------------------------------------------ */

/* Whether host 0 has every byte of [lo, hi) too (p->lock held). */
static bool all_home_too(const struct pm__place *p, uint64_t lo, uint64_t hi)
{
    const pm__holders_t *h = &p->also_home;
    for (uint32_t i = pm__holders_find(h, lo); i < h->n && lo < hi; i++) {
        if (h->r[i].lo > lo)
            return false;
        lo = h->r[i].hi;
    }
    return lo >= hi;
}

/* Host 0 found host `dead` dead, and the job ends: names the ranges of lazy
 * memories whose only current copy that host held. On the comm thread, so
 * it takes no lock it would wait for. */
static void host_lost(int dead)
{
    if (pthread_mutex_trylock(&pm__rt.lock) != 0) {
        pm__error("host %d may have held the only copy of ranges of lazy memories; they are lost", dead);
        return;
    }
    const pm__handle_table_t *t = &pm__rt.memories;
    uint64_t nlost = 0, bytes = 0, said = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        pm__memory_t *m = t->obj[i];
        struct pm__place *p = m != NULL ? m->place : NULL;
        if (p == NULL || pthread_mutex_trylock(&p->lock) != 0)
            continue;
        for (uint32_t k = 0; k < p->away.n; k++) {
            const pm__held_t *r = &p->away.r[k];
            if (r->host != dead || all_home_too(p, r->lo, r->hi))
                continue;
            nlost++;
            bytes += r->hi - r->lo;
            if (said++ < 4)
                pm__error("host %d held the only copy of bytes %llu..%llu of memory %#llx (written there "
                          "by a task, the memory lazy, not yet home); they are lost", dead,
                          (unsigned long long)r->lo, (unsigned long long)r->hi - 1,
                          (unsigned long long)m->handle);
        }
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&pm__rt.lock);
    if (nlost > 4)
        pm__error("host %d held the only copy of %llu ranges in all (%llu bytes)", dead,
                  (unsigned long long)nlost, (unsigned long long)bytes);
}

/* ---- set-up ---------------------------------------------------------------- */

/* Host 0: a memory's handle is gone; the other hosts drop their mirrors. */
static void released(pm__memory_t *m)
{
    pm__data_relay_forget(m->handle);
    for (int h = 1; h < pm__rt.nhosts; h++) {
        pm__wbuf_t b = {0};
        pm__wbuf_u64(&b, m->handle);
        pm__comm_send(h, PM__TAG_MEM_RELEASE, &b);
    }
}

void pm__data_init(void)
{
    pm__comm_handle(PM__TAG_DATA_REQ, on_req);
    pm__comm_handle(PM__TAG_DATA_REPLY, on_reply);
    pm__comm_handle(PM__TAG_MEM_RELEASE, on_mem_release);
    pm__comm_handle(PM__TAG_MEM_CREATED, on_mem_created);
    pm__comm_on_host_lost(host_lost);
    pm__hooks.away = pm__data_is_away;
    pm__hooks.gather = gather;
    pm__hooks.set_lazy = set_lazy;
    pm__hooks.touched = forget_away;
    pm__hooks.wrote_home = home_range;
    pm__hooks.released = pm__rt.nhosts > 1 ? released : NULL;
    pm__hooks.created = pm__rt.nhosts > 1 ? created : NULL;
    pm__hooks.freed = place_free;
    pm__hooks.shared_alloc = pm__shm_create;
    pm__hooks.shared_free = pm__shm_free;
}

void pm__data_fini(void)
{
    free_mirrors();
    pm__data_relay_forget(0);
}
