/*
 * Data between hosts. A host other than 0 keeps a mirror of each memory it
 * has seen: a buffer the size of the memory (pages are only touched where
 * data lands) plus the ranges known to hold host 0's bytes at the mirror's
 * version. A stub asks host 0 for the read ranges of its next chunk the
 * mirror lacks while it runs the current one; host 0 sends them straight
 * from the memory and they land straight in the mirror (strided rows go
 * through one buffer). After a chunk runs, its written ranges go to host 0
 * the same way, beside its report. A new version of a memory empties the
 * mirror's ranges, so unchanged inputs are never sent twice. Payloads are
 * zlib-compressed when the task asks for it, or, in automatic mode, when a
 * sample shrinks.
 */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "reduce/acc.h"

typedef struct pm__mirror {
    pm__memory_t mem; /* first, so a task's mems[] entry leads back here */
    pthread_mutex_t lock;
    pm__acc_t valid;
    /* Strided reads that landed whole, kept as records: one per fetch, not
     * one interval per row (thousands of rows would make every lookup and
     * insert of `valid` crawl). */
    pm__sub_t *rows;
    uint32_t nrows, caprows;
    /* Contiguous ranges some stub has asked host 0 for and not yet received:
     * another stub needing them waits instead of asking again. */
    pm__range_t *inflight;
    uint32_t ninflight, capinflight;
    struct pm__mirror *next;
} pm__mirror_t;

static pthread_mutex_t mirrors_lock = PTHREAD_MUTEX_INITIALIZER;
static pm__mirror_t *mirrors;

static pm__mirror_t *mirror_of(pm__memory_t *m)
{
    return (pm__mirror_t *)m;
}

pm__memory_t *pm__data_mirror(uint64_t handle, size_t bytes, uint64_t version)
{
    pthread_mutex_lock(&mirrors_lock);
    pm__mirror_t *mr = mirrors;
    while (mr != NULL && mr->mem.handle != handle)
        mr = mr->next;
    if (mr == NULL) {
        mr = calloc(1, sizeof *mr);
        void *data = calloc(1, bytes ? bytes : 1);
        if (mr == NULL || data == NULL) {
            free(mr);
            free(data);
            pthread_mutex_unlock(&mirrors_lock);
            return NULL;
        }
        mr->mem = (pm__memory_t){.handle = handle, .data = data, .bytes = bytes, .version = version};
        pthread_mutex_init(&mr->lock, NULL);
        mr->next = mirrors;
        mirrors = mr;
    }
    pthread_mutex_unlock(&mirrors_lock);
    pthread_mutex_lock(&mr->lock);
    if (mr->mem.version != version) {
        mr->valid.ncov = 0;
        mr->nrows = 0;
        mr->mem.version = version;
    }
    pthread_mutex_unlock(&mr->lock);
    return &mr->mem;
}

static void mirror_free(pm__mirror_t *mr)
{
    pthread_mutex_destroy(&mr->lock);
    pm__acc_free(&mr->valid);
    free(mr->rows);
    free(mr->inflight);
    free(mr->mem.data);
    free(mr);
}

void pm__data_on_mem_release(int src, pm__rbuf_t *m)
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

void pm__data_free_mirrors(void)
{
    pthread_mutex_lock(&mirrors_lock);
    while (mirrors != NULL) {
        pm__mirror_t *mr = mirrors;
        mirrors = mr->next;
        mirror_free(mr);
    }
    pthread_mutex_unlock(&mirrors_lock);
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
 * and bytes on the wire. */
void pm__data_count(pm__task_t *t, uint64_t raw, uint64_t wire)
{
    atomic_fetch_add(&t->bytes_moved, raw);
    atomic_fetch_add(&t->bytes_sent, wire);
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
static const unsigned char *get_payload(pm__rbuf_t *m, pm__task_t *t, size_t *n, bool *owned)
{
    uint64_t raw = pm__rbuf_u64(m);
    int32_t z = pm__rbuf_i32(m);
    uint64_t sent = pm__rbuf_u64(m);
    const unsigned char *data = pm__rbuf_get(m, sent);
    *owned = false;
    *n = raw;
    if (data == NULL)
        return NULL;
    pm__data_count(t, raw, sent);
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
        uint64_t bytes = t->mems[r.m]->bytes;
        if (r.block > bytes || (r.count > 1 && r.stride > bytes / (r.count - 1)) ||
            r.offset + (r.count - 1) * r.stride + r.block > bytes || r.offset > bytes)
            return PM_ERANGE;
        if (recs_add(v, r.m, r.offset, r.block, r.stride, r.count) != 0)
            return PM_ENOMEM;
    }
    return m->bad ? PM_EINVAL : 0;
}

/* The bytes of records as segments of the task's memories (or mirrors),
 * in record order; NULL when out of memory or too many. */
static pm__seg_t *recs_segs(const pm__task_t *t, const recs_t *v, int *nseg)
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
        unsigned char *base = t->mems[r->m]->data;
        for (uint64_t q = 0; q < r->count; q++) {
            unsigned char *p = base + r->offset + q * r->stride;
            if (k > 0 && (unsigned char *)segs[k - 1].p + segs[k - 1].n == p)
                segs[k - 1].n += r->block; /* rows end to end: one segment */
            else
                segs[k++] = (pm__seg_t){p, r->block};
        }
    }
    *nseg = k;
    return segs;
}

/* ---- fetching a chunk's inputs (other hosts) ------------------------------ */

struct pm__fetch {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int done, status;
    pm__task_t *t;
    recs_t recs;
    /* Strided records land here, then go into the mirrors row by row where
     * the rows are still missing (others may be reading the valid ones). */
    unsigned char *strided;
};

/* Ranges in flight that finished: a stub waiting for another's fetch
 * looks again whenever the generation moves. */
static pthread_mutex_t fill_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fill_cv = PTHREAD_COND_INITIALIZER;
static uint64_t fill_gen;

static bool overlaps_inflight(const pm__mirror_t *mr, uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < mr->ninflight; i++)
        if (mr->inflight[i].lo < hi && lo < mr->inflight[i].hi)
            return true;
    return false;
}

static int add_inflight(pm__mirror_t *mr, uint64_t lo, uint64_t hi)
{
    if (mr->ninflight == mr->capinflight) {
        uint32_t cap = mr->capinflight ? mr->capinflight * 2 : 8;
        pm__range_t *n = realloc(mr->inflight, cap * sizeof *n);
        if (n == NULL)
            return PM_ENOMEM;
        mr->inflight = n;
        mr->capinflight = cap;
    }
    mr->inflight[mr->ninflight++] = (pm__range_t){lo, hi};
    return 0;
}

static void drop_inflight(pm__mirror_t *mr, uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < mr->ninflight; i++)
        if (mr->inflight[i].lo == lo && mr->inflight[i].hi == hi) {
            mr->inflight[i] = mr->inflight[--mr->ninflight];
            return;
        }
}

/* A missing part [lo, hi): asked for already (then *wait), or asked for now. */
static int want_part(recs_t *v, int m, pm__mirror_t *mr, uint64_t lo, uint64_t hi, bool *wait)
{
    if (overlaps_inflight(mr, lo, hi)) {
        *wait = true;
        return 0;
    }
    int rc = add_inflight(mr, lo, hi);
    return rc ? rc : recs_add(v, m, lo, hi - lo, 0, 1);
}

/* Adds the parts of [lo, hi) of memory m that the mirror lacks (mirror locked). */
static int add_missing(recs_t *v, int m, pm__mirror_t *mr, uint64_t lo, uint64_t hi, bool *wait)
{
    const pm__acc_t *valid = &mr->valid;
    uint64_t pos = lo;
    int rc = 0;
    for (uint32_t i = 0; i < valid->ncov && pos < hi && rc == 0; i++) {
        if (valid->cov[i].hi <= pos)
            continue;
        if (valid->cov[i].lo >= hi)
            break;
        if (valid->cov[i].lo > pos)
            rc = want_part(v, m, mr, pos, valid->cov[i].lo, wait);
        pos = valid->cov[i].hi;
    }
    if (pos < hi && rc == 0)
        rc = want_part(v, m, mr, pos, hi, wait);
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
    return pm__acc_covers_rows(&mr->valid, offset, block, stride, count);
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

/* What chunk `chunk` reads and this host's mirrors lack; *wait when some of
 * it is on its way for another stub. */
static int missing_reads(pm__task_t *t, uint64_t chunk, recs_t *out, bool *wait)
{
    const pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
    pm__acc_t want[PM_MAX_TASK_MEMORIES] = {{0}};
    int rc = 0;
    for (uint32_t i = 0; i < cs->n && rc == 0; i++) {
        const pm__sub_t *r = &cs->recs[i];
        if (!(r->access & PM_READ))
            continue;
        if (r->count == 1) {
            rc = pm__acc_cover(&want[r->mem], r->offset, r->offset + r->block);
            continue;
        }
        pm__mirror_t *mr = mirror_of(t->mems[r->mem]);
        pthread_mutex_lock(&mr->lock);
        bool have = have_rows(mr, r->offset, r->block, r->stride, r->count);
        pthread_mutex_unlock(&mr->lock);
        if (!have)
            rc = recs_add(out, r->mem, r->offset, r->block, r->stride, r->count);
    }
    for (int m = 0; m < t->desc.nmem; m++) {
        pm__mirror_t *mr = mirror_of(t->mems[m]);
        pthread_mutex_lock(&mr->lock);
        for (uint32_t i = 0; i < want[m].ncov && rc == 0; i++)
            rc = add_missing(out, m, mr, want[m].cov[i].lo, want[m].cov[i].hi, wait);
        pthread_mutex_unlock(&mr->lock);
        pm__acc_free(&want[m]);
    }
    return rc;
}

static void done_inflight(const pm__fetch_t *f)
{
    for (size_t i = 0; i < f->recs.n; i++) {
        const rec_t *r = &f->recs.r[i];
        if (r->count != 1)
            continue;
        pm__mirror_t *mr = mirror_of(f->t->mems[r->m]);
        pthread_mutex_lock(&mr->lock);
        drop_inflight(mr, r->offset, r->offset + r->block);
        pthread_mutex_unlock(&mr->lock);
    }
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

/* Asks host 0 for what the chunk reads and the mirrors lack, without
 * waiting; *out is NULL when nothing needs asking for. */
static int fetch_begin(pm__task_t *t, uint64_t chunk, pm__fetch_t **out, bool *wait)
{
    *out = NULL;
    pm__fetch_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return PM__FAIL(PM_ENOMEM, "out of memory fetching inputs");
    f->t = t;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cv, NULL);
    int rc = missing_reads(t, chunk, &f->recs, wait);
    if (rc != 0 || f->recs.n == 0) {
        done_inflight(f);
        fetch_free(f);
        if (rc != 0)
            pm__task_fail(t, rc, chunk * t->grain, "out of memory listing the inputs of chunk %llu",
                          (unsigned long long)chunk);
        return rc;
    }
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, t->seq);
    pm__wbuf_u64(&b, (uint64_t)(uintptr_t)f);
    recs_put(&b, &f->recs);
    pm__comm_expect(1);
    pm__comm_send(0, PM__TAG_DATA_REQ, &b);
    *out = f;
    return 0;
}

/* Waits for a fetch's bytes and frees it. */
static int fetch_end(pm__task_t *t, uint64_t chunk, pm__fetch_t *f)
{
    pthread_mutex_lock(&f->lock);
    while (!f->done)
        pthread_cond_wait(&f->cv, &f->lock);
    pthread_mutex_unlock(&f->lock);
    int status = f->status;
    done_inflight(f);
    fetch_free(f);
    if (status != 0)
        pm__task_fail(t, status, chunk * t->grain, "host %d could not fetch the inputs of chunk %llu (%s)",
                      pm__rt.host, (unsigned long long)chunk, pm_strerror(status));
    return status;
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

/* Host 0: sends the requested ranges straight from the memories. */
void pm__data_on_req(int src, pm__rbuf_t *m)
{
    uint64_t seq = pm__rbuf_u64(m), cookie = pm__rbuf_u64(m);
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_t *t = m->bad ? NULL : pm__task_find_locked(seq);
    pthread_mutex_unlock(&pm__rt.lock);
    recs_t v = {0};
    int rc = t ? recs_get(m, t, &v) : PM_EINVAL;
    int nseg = 0;
    pm__seg_t *segs = rc == 0 ? recs_segs(t, &v, &nseg) : NULL;
    if (rc == 0 && segs == NULL)
        rc = PM_ENOMEM;
    pm__wbuf_t b = {0};
    pm__wbuf_u64(&b, cookie);
    pm__wbuf_i32(&b, rc);
    /* The task lives until this host has the chunk's report, which comes
     * after these bytes landed: they may be sent from the memory itself. */
    pm__comm_send_bulk(src, PM__TAG_DATA_REPLY, &b, segs, nseg, t ? bulk_flags(t) : 0, NULL, NULL);
    free(segs);
    free(v.r);
}

/* Strided rows that landed in f->strided go into the mirrors where they
 * are still missing; contiguous ranges, received in place, become valid. */
static void fill_mirrors(pm__fetch_t *f)
{
    const unsigned char *in = f->strided;
    for (size_t i = 0; i < f->recs.n; i++) {
        const rec_t *r = &f->recs.r[i];
        pm__mirror_t *mr = mirror_of(f->t->mems[r->m]);
        unsigned char *base = mr->mem.data;
        pthread_mutex_lock(&mr->lock);
        if (r->count == 1) {
            pm__acc_cover(&mr->valid, r->offset, r->offset + r->block);
            pthread_mutex_unlock(&mr->lock);
            continue;
        }
        /* Rows already valid may be in use by a running subtask: leave them. */
        if (!have_rows(mr, r->offset, r->block, r->stride, r->count)) {
            for (uint64_t q = 0; q < r->count; q++) {
                uint64_t lo = r->offset + q * r->stride;
                if (!pm__acc_covers(&mr->valid, lo, lo + r->block))
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
    f->done = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->lock);
}

static void reply_landed(void *arg, int status, uint64_t raw, uint64_t wire)
{
    pm__fetch_t *f = arg;
    if (status == 0) {
        fill_mirrors(f);
        pm__data_count(f->t, raw, wire);
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
            segs[i] = (pm__seg_t){(unsigned char *)f->t->mems[r->m]->data + r->offset, r->block};
        } else {
            segs[i] = (pm__seg_t){at, r->block * r->count};
            at += r->block * r->count;
        }
    }
    *nseg = (int)f->recs.n;
    return segs;
}

void pm__data_on_reply(int src, pm__rbuf_t *m)
{
    (void)src;
    pm__fetch_t *f = (pm__fetch_t *)(uintptr_t)pm__rbuf_u64(m);
    int32_t status = pm__rbuf_i32(m);
    if (f == NULL)
        return;
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
    recs_t v = {0};
    *segs = NULL;
    *nseg = 0;
    if (t->chunk_subs != NULL && t->chunk_subs[chunk].start != NULL) {
        const pm__chunk_subs_t *cs = &t->chunk_subs[chunk];
        for (uint32_t i = 0; i < cs->n; i++) {
            const pm__sub_t *r = &cs->recs[i];
            if ((r->access & PM_WRITE) && t->desc.mem[r->mem].reduce == PM_REDUCE_NONE &&
                recs_add(&v, r->mem, r->offset, r->block, r->stride, r->count) != 0)
                b->oom = true;
        }
    }
    recs_put(b, &v);
    *segs = recs_segs(t, &v, nseg);
    if (*segs == NULL)
        b->oom = true;
    free(v.r);
    return bulk_flags(t);
}

pm__seg_t *pm__data_get_writes(pm__rbuf_t *m, pm__task_t *t, int src, int *nseg)
{
    recs_t v = {0};
    int rc = recs_get(m, t, &v);
    pm__seg_t *segs = rc == 0 ? recs_segs(t, &v, nseg) : NULL;
    if (rc == 0 && segs == NULL)
        rc = PM_ENOMEM;
    if (rc != 0)
        pm__task_fail(t, PM_EHOST, UINT64_MAX, "host %d sent a chunk's output host 0 could not read (%s)",
                      src, pm_strerror(rc));
    free(v.r);
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

static int get_acc(pm__rbuf_t *m, pm__task_t *t, int mem, pm__acc_t *a)
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
    const unsigned char *raw = get_payload(m, t, &rn, &owned);
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

pm__accset_t *pm__data_get_accset(pm__rbuf_t *m, pm__task_t *t)
{
    pm__accset_t *acc = pm__accset_new();
    if (acc == NULL)
        return NULL;
    for (int mem = 0; mem < t->desc.nmem; mem++) {
        if (t->desc.mem[mem].reduce == PM_REDUCE_NONE)
            continue;
        if (get_acc(m, t, mem, &acc->acc[mem]) != 0) {
            pm__accset_free(t, acc);
            return NULL;
        }
    }
    return acc;
}
