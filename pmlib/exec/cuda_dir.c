/*
 * The GPU stub's device memory (exec/cuda_int.h): a pool of idle buffers,
 * the cache of read-only subscriptions, the mirrors of whole memories, and
 * how a subtask's memories are opened on the device from them.
 */
#include "exec/cuda_int.h"
#include "trace/trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- device memory: a pool of idle buffers and the read cache ----------- */

/* Sizes rounded up to 1/8 of their power of two, so buffers get reused. */
static size_t size_class(size_t n)
{
    if (n <= 4096)
        return 4096;
    int top = 63 - __builtin_clzll((unsigned long long)n);
    size_t step = (size_t)1 << (top - 3);
    return (n + step - 1) & ~(step - 1);
}

void pm__cu_dev_free(cuda_priv_t *p, dev_buf_t *b)
{
    if (b->ptr != NULL) {
        PM__CUDA(p->broken ? QUIET : PM__LOG_WARN, cudaFree(b->ptr));
        p->held -= b->bytes;
    }
    *b = (dev_buf_t){0};
}

static unsigned bucket_of(uint64_t handle, uint64_t lo, uint64_t hi)
{
    uint64_t h = handle * 0x9E3779B97F4A7C15ull ^ lo * 0xC2B2AE3D27D4EB4Full ^ hi;
    return (unsigned)(h ^ (h >> 29)) & (CACHE_BUCKETS - 1);
}

static void lru_unlink(cuda_priv_t *p, cache_entry_t *e)
{
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        p->newest = e->older;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        p->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(cuda_priv_t *p, cache_entry_t *e)
{
    e->older = p->newest;
    e->newer = NULL;
    if (p->newest != NULL)
        p->newest->newer = e;
    else
        p->oldest = e;
    p->newest = e;
}

void pm__cu_cache_drop(cuda_priv_t *p, cache_entry_t *e)
{
    cache_entry_t **pp = &p->bucket[bucket_of(e->handle, e->lo, e->hi)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(p, e);
    pm__cu_dev_free(p, &e->buf);
    if (e->ready != NULL)
        PM__CUDA(QUIET, cudaEventDestroy(e->ready));
    free(e->pat);
    free(e);
    p->ncache--;
}

/* The least recently used entry no subtask holds, or NULL. */
static cache_entry_t *cache_victim(cuda_priv_t *p)
{
    for (cache_entry_t *e = p->oldest; e != NULL; e = e->newer)
        if (e->refs == 0)
            return e;
    return NULL;
}

static bool mirror_evict(cuda_priv_t *p);

/* Frees one idle buffer: a pooled one first (it holds no data anyone wants),
 * else the LRU cache entry, else the LRU mirror. False when nothing is idle. */
static bool release_idle(cuda_priv_t *p)
{
    if (p->npool > 0) {
        pm__cu_dev_free(p, &p->pool[--p->npool]);
        return true;
    }
    cache_entry_t *e = cache_victim(p);
    if (e != NULL) {
        pm__cu_cache_drop(p, e);
        return true;
    }
    return mirror_evict(p);
}

/* cudaMalloc that makes room: idle buffers go while the stub holds more
 * than its cap, and on cudaErrorMemoryAllocation one by one between tries. */
int pm__cu_dev_alloc(cuda_priv_t *p, size_t bytes, dev_buf_t *out)
{
    while (p->held + bytes > p->cap && release_idle(p))
        ;
    for (;;) {
        void *ptr = NULL;
        int rc = PM__CUDA(QUIET, cudaMalloc(&ptr, bytes ? bytes : 1));
        if (rc == 0) {
            *out = (dev_buf_t){ptr, bytes};
            p->held += bytes;
            return 0;
        }
        if (rc != PM_ENOMEM || !release_idle(p))
            return rc;
    }
}

int pm__cu_pool_get(cuda_priv_t *p, size_t need, dev_buf_t *out)
{
    size_t want = size_class(need);
    int best = -1;
    for (int i = 0; i < p->npool; i++)
        if (p->pool[i].bytes >= want && p->pool[i].bytes <= 2 * want &&
            (best < 0 || p->pool[i].bytes < p->pool[best].bytes))
            best = i;
    if (best < 0)
        return pm__cu_dev_alloc(p, want, out);
    *out = p->pool[best];
    p->pool[best] = p->pool[--p->npool];
    return 0;
}

/* Only called once the streams that used the buffer are synchronized. */
void pm__cu_pool_put(cuda_priv_t *p, dev_buf_t *b)
{
    if (b->ptr == NULL)
        return;
    if (p->npool == POOL_MAX) {
        pm__cu_dev_free(p, &p->pool[0]);
        p->pool[0] = p->pool[--p->npool];
    }
    p->pool[p->npool++] = *b;
    *b = (dev_buf_t){0};
}

/* Whether e holds exactly the parts of memory m that v subscribes. The
 * memory's index may differ between tasks, so only the geometry counts. */
static bool same_parts(const cache_entry_t *e, pm__subs_view_t v, int m)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < v.n; i++) {
        const pm__sub_t *a = &v.r[i];
        if (a->mem != m)
            continue;
        if (k == e->npat)
            return false;
        const pm__sub_t *b = &e->pat[k++];
        if (a->offset != b->offset || a->block != b->block || a->stride != b->stride ||
            a->count != b->count)
            return false;
    }
    return k == e->npat;
}

/* The entry for memory `mem`'s parts in v, or NULL. Entries of an older
 * version of the same range found on the way are dropped: they never hit
 * again. */
static cache_entry_t *cache_find(cuda_priv_t *p, const pm__memory_t *mem, uint64_t lo,
                                 uint64_t hi, pm__subs_view_t v, int m)
{
    cache_entry_t *e = p->bucket[bucket_of(mem->handle, lo, hi)];
    while (e != NULL) {
        cache_entry_t *next = e->hnext;
        if (e->handle == mem->handle && e->lo == lo && e->hi == hi) {
            if (e->version == mem->version && same_parts(e, v, m))
                return e;
            if (e->version != mem->version && e->refs == 0)
                pm__cu_cache_drop(p, e);
        }
        e = next;
    }
    return NULL;
}

/* A new entry (not yet filled) for memory m's parts in v. */
static int cache_insert(cuda_priv_t *p, const pm__memory_t *mem, uint64_t lo, uint64_t hi,
                        pm__subs_view_t v, int m, cache_entry_t **out)
{
    cache_entry_t *victim = p->ncache >= CACHE_MAX ? cache_victim(p) : NULL;
    if (victim != NULL)
        pm__cu_cache_drop(p, victim);
    uint32_t n = 0;
    for (uint32_t i = 0; i < v.n; i++)
        n += v.r[i].mem == m;
    cache_entry_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return PM_ENOMEM;
    int rc = (e->pat = malloc((n ? n : 1) * sizeof *e->pat)) != NULL ? 0 : PM_ENOMEM;
    if (rc == 0)
        rc = pm__cu_dev_alloc(p, hi - lo, &e->buf);
    if (rc == 0)
        rc = PM__CUDA(QUIET, cudaEventCreateWithFlags(&e->ready, cudaEventDisableTiming));
    if (rc != 0) {
        pm__cu_dev_free(p, &e->buf);
        free(e->pat);
        free(e);
        return rc;
    }
    for (uint32_t i = 0; i < v.n; i++)
        if (v.r[i].mem == m)
            e->pat[e->npat++] = v.r[i];
    e->handle = mem->handle;
    e->version = mem->version;
    e->lo = lo;
    e->hi = hi;
    unsigned b = bucket_of(e->handle, lo, hi);
    e->hnext = p->bucket[b];
    p->bucket[b] = e;
    lru_push(p, e);
    p->ncache++;
    *out = e;
    return 0;
}

/* ---- mirrors: whole memories kept on the device ------------------------- */

void pm__cu_mirror_free(cuda_priv_t *p, mirror_t *mr)
{
    pm__cu_node_withdraw(p, mr, true);
    pm__copies_lock();
    pm__copies_remove(&mr->c);
    pm__copies_unlock();
    pm__cu_dev_free(p, &mr->buf);
    if (mr->filled != NULL)
        PM__CUDA(QUIET, cudaEventDestroy(mr->filled));
    pm__copy_free(&mr->c);
    free(mr);
}

/*
 * ---- peers: the mirrors of the other GPUs of this process -----------------
 * Each mirror is a copy in the host's directory of copies (data/copies.h),
 * whose lock guards every stub's mirror list too. A GPU that lacks part of
 * a memory copies it from the nearest copy that holds it at the memory's
 * version: another GPU's mirror it may copy from directly (by NVLink or
 * PCIe, where cudaDeviceCanAccessPeer says so), else the host's memory. A
 * mirror that other GPUs copy from (its copy's readers) is not evicted.
 * This table lists the GPU stubs that copy from each other.
 */
static cuda_priv_t *peers[MAX_PEERS];

/* PMLIB_CUDA_PEER=0: GPUs take what they lack from the host only. */
void pm__cu_peer_join(cuda_priv_t *p)
{
    p->peer_index = -1;
    if (pm__env_uint("PMLIB_CUDA_PEER", "0 (off) or 1 (on)", 0, 1, 1) == 0)
        return;
    pm__copies_lock();
    for (int i = 0; i < MAX_PEERS && p->peer_index < 0; i++)
        if (peers[i] == NULL) {
            peers[i] = p;
            p->peer_index = i;
        }
    pm__copies_unlock();
}

void pm__cu_peer_leave(cuda_priv_t *p)
{
    pm__copies_lock();
    if (p->peer_index >= 0)
        peers[p->peer_index] = NULL;
    p->peer_index = -1;
    pm__copies_unlock();
}

void pm__cu_peer_enable(cuda_priv_t *p)
{
    if (p->peer_index < 0)
        return;
    int ordinal[MAX_PEERS];
    pm__copies_lock();
    for (int i = 0; i < MAX_PEERS; i++)
        ordinal[i] = peers[i] != NULL && peers[i] != p ? peers[i]->gpu.ordinal : -1;
    pm__copies_unlock();
    for (int i = 0; i < MAX_PEERS; i++) {
        int can = 0;
        if (ordinal[i] < 0 || ordinal[i] == p->gpu.ordinal ||
            cudaDeviceCanAccessPeer(&can, p->gpu.ordinal, ordinal[i]) != cudaSuccess || !can) {
            cudaGetLastError();
            continue;
        }
        cudaError_t e = cudaDeviceEnablePeerAccess(ordinal[i], 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
            e = cudaSuccess;
        cudaGetLastError(); /* not sticky: clear it */
        p->peer_ok[i] = e == cudaSuccess;
        pm__debug("gpu %d copies from gpu %d %s", p->gpu.ordinal, ordinal[i],
                  e == cudaSuccess ? "directly" : cudaGetErrorString(e));
    }
}

/* Drops the least recently used mirror no subtask holds or copies from,
 * here or on another host of this machine; its bytes are all at home
 * already (written parts go home before their subtask retires). */
static bool mirror_evict(cuda_priv_t *p)
{
    mirror_t **victim = NULL;
    pm__copies_lock();
    for (mirror_t **pp = &p->mirrors; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->refs == 0 && (*pp)->c.readers == 0 &&
            (victim == NULL || (*pp)->used < (*victim)->used) &&
            !pm__node_read_now(p->node_row, (*pp)->node_rec))
            victim = pp;
    mirror_t *mr = victim != NULL ? *victim : NULL;
    if (mr != NULL)
        *victim = mr->next;
    pm__copies_unlock();
    if (mr == NULL)
        return false;
    pm__cu_mirror_free(p, mr);
    return true;
}

int pm__cu_mirror_pending(mirror_t *mr, const pm__sub_t *q)
{
    pm__copies_lock();
    int rc = pm__copy_mark(&mr->c.pending, q, true);
    pm__copies_unlock();
    return rc;
}

/* The mirror of `mem`, made if need be; NULL (no error) when the memory is
 * too large to mirror, or there is no room: the caller then uses buffers of
 * the subscribed hull instead. */
static mirror_t *mirror_of(cuda_priv_t *p, const pm__memory_t *mem)
{
    mirror_t *mr = p->mirrors;
    while (mr != NULL && mr->c.handle != mem->handle)
        mr = mr->next;
    if (mr == NULL) {
        if (mem->bytes == 0 || mem->bytes > p->cap / 2 || (mr = calloc(1, sizeof *mr)) == NULL)
            return NULL;
        if (pm__cu_dev_alloc(p, mem->bytes, &mr->buf) != 0 ||
            PM__CUDA(QUIET, cudaEventCreateWithFlags(&mr->filled, cudaEventDisableTiming)) != 0) {
            pm__cu_mirror_free(p, mr);
            pm__cuda_forget_error(); /* not the subtask's failure: it falls back */
            return NULL;
        }
        mr->c.handle = mem->handle;
        mr->c.bytes = mem->bytes;
        mr->c.version = mem->version;
        mr->c.place = p->gpu.ordinal;
        mr->node_rec = -1;
        pm__copies_lock();
        mr->next = p->mirrors;
        p->mirrors = mr;
        pm__copies_add(&mr->c);
        pm__copies_unlock();
    }
    if (mr->c.version != mem->version) {
        pm__copies_lock();
        pm__copy_sync(&mr->c, mem->version);
        pm__copies_unlock();
    }
    mr->used = ++p->tick;
    return mr;
}

/* What peer_holder asks of a copy that holds the piece: a GPU this one
 * copies from directly, and room in the use's list of peers. */
typedef struct peer_ask {
    const cuda_priv_t *p;
    const mem_use_t *u;
} peer_ask_t;

static bool peer_may(pm__copy_t *c, void *arg)
{
    const peer_ask_t *a = arg;
    int i = 0;
    while (i < MAX_PEERS && (peers[i] == NULL || peers[i]->gpu.ordinal != c->place))
        i++;
    if (i == MAX_PEERS || !a->p->peer_ok[i])
        return false;
    int k = 0;
    while (k < a->u->npeer && &a->u->peer[k]->c != c)
        k++;
    return k < a->u->npeer || a->u->npeer < PEER_USES;
}

/*
 * Another GPU's mirror holding all of piece q of `mem` at its current
 * version (pm__copy_holds), found in the directory of copies, or NULL. The
 * mirror is added to the use's peers (a reader that keeps it from
 * eviction until the subtask retires) and the slot's stream waits for the
 * copies made into it.
 */
static mirror_t *peer_holder(run_t *r, slot_t *sl, mem_use_t *u, const pm__memory_t *mem,
                             const pm__sub_t *q)
{
    if (r->p->peer_index < 0)
        return NULL;
    peer_ask_t ask = {r->p, u};
    pm__copies_lock();
    pm__copy_t *c = pm__copies_find(NULL, mem->handle, mem->bytes, mem->version, q, peer_may, &ask);
    mirror_t *found = (mirror_t *)c; /* the copy is a mirror's first member */
    if (found != NULL && PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, found->filled, 0)) != 0)
        found = NULL;
    if (found != NULL) {
        int k = 0;
        while (k < u->npeer && u->peer[k] != found)
            k++;
        if (k == u->npeer) {
            u->peer[u->npeer++] = found;
            found->c.readers++;
        }
    }
    pm__copies_unlock();
    return found;
}

/* A traced peer copy, ended when its stream reaches the host function. */
typedef struct copy_span {
    int from, to;
    uint64_t task, bytes;
    double t0;
} copy_span_t;

static void CUDART_CB copy_span_end(void *arg)
{
    copy_span_t *c = arg;
    pm__trace_gpu_copy(c->from, c->to, c->task, c->bytes, c->t0, pm__now());
    free(c);
}

/* With PMLIB_TRACE: a span from now until the stream has done the copy. */
void pm__cu_trace_copy(run_t *r, slot_t *sl, int from, int to, uint64_t bytes, double t0)
{
    copy_span_t *c = malloc(sizeof *c);
    if (c == NULL)
        return; /* a span lost, not the copy */
    *c = (copy_span_t){from, to, r->t->seq, bytes, t0};
    if (PM__CUDA(QUIET, cudaLaunchHostFunc(sl->stream, copy_span_end, c)) != 0)
        free(c);
}

/* Copies piece q from a peer GPU's mirror into this GPU's, on the slot's stream. */
static int peer_copy(run_t *r, slot_t *sl, mirror_t *to, const mirror_t *from, const pm__sub_t *q)
{
    double t0 = pm__trace_on() ? pm__now() : 0;
    int dst = r->p->gpu.ordinal, src = from->c.place;
    int rc = 0;
    if (q->count == 1 || q->stride == q->block) {
        rc = PM__CUDA(QUIET, cudaMemcpyPeerAsync(at(to->buf.ptr, q->offset), dst,
                                                 at(from->buf.ptr, q->offset), src,
                                                 q->block * q->count, sl->stream));
    } else if (q->stride <= MAX_PITCH) {
        struct cudaMemcpy3DPeerParms c = {0};
        c.srcPtr = make_cudaPitchedPtr(at(from->buf.ptr, q->offset), q->stride, q->block, q->count);
        c.srcDevice = src;
        c.dstPtr = make_cudaPitchedPtr(at(to->buf.ptr, q->offset), q->stride, q->block, q->count);
        c.dstDevice = dst;
        c.extent = make_cudaExtent(q->block, q->count, 1);
        rc = PM__CUDA(QUIET, cudaMemcpy3DPeerAsync(&c, sl->stream));
    } else {
        for (uint64_t k = 0; k < q->count && rc == 0; k++)
            rc = PM__CUDA(QUIET, cudaMemcpyPeerAsync(at(to->buf.ptr, q->offset + k * q->stride), dst,
                                                     at(from->buf.ptr, q->offset + k * q->stride),
                                                     src, q->block, sl->stream));
    }
    if (rc == 0) {
        r->cnt->bytes_gpu_peer += q->block * q->count;
        if (t0 > 0)
            pm__cu_trace_copy(r, sl, src, dst, q->block * q->count, t0);
    }
    return rc;
}

/* ---- a subtask's memories ------------------------------------------------ */

/* Fills [lo, hi) of a device buffer (natural view) as a fresh private output
 * of memory m, as pm__acc_fill does on the host: the memory's bytes when
 * the task reads it, else the op's identity (zeros for a custom reduce). */
int pm__cu_fresh_fill(run_t *r, slot_t *sl, int m, void *nat, uint64_t lo, uint64_t hi)
{
    static const unsigned char zero[8];
    const pm_task_memory_t *tm = &r->t->desc.mem[m];
    pm__sub_t q;
    if (tm->access & PM_READ)
        return pm__cu_copy_in(r, sl, nat, r->t->mems[m]->data, r->pinned[m],
                              pm__cu_range_parts(&q, m, lo, hi));
    unsigned char elem[8] = {0};
    size_t es = tm->reduce == PM_REDUCE_CUSTOM ? 1 : pm_type_size(tm->type);
    if (tm->reduce != PM_REDUCE_CUSTOM)
        pm__reduce_identity(tm->reduce, tm->type, elem, 1);
    if (memcmp(elem, zero, sizeof elem) == 0)
        return PM__CUDA(QUIET, cudaMemsetAsync(at(nat, lo), 0, hi - lo, sl->stream));
    return PM__CUDA(QUIET, (cudaError_t)pm__cuda_fill(at(nat, lo), elem, (int)es, (hi - lo) / es,
                                                      sl->stream));
}

/* A non-reduced memory the task may write: a pooled buffer, read parts in. */
static int open_plain(run_t *r, slot_t *sl, pm__subs_view_t v, int m, void **nat)
{
    mem_use_t *u = &sl->use[m];
    int rc = pm__cu_pool_get(r->p, u->hi - u->lo, &u->buf);
    if (rc != 0)
        return rc;
    u->kind = USE_PLAIN;
    *nat = pm__natural(u->buf.ptr, u->lo);
    return pm__cu_copy_in(r, sl, *nat, r->t->mems[m]->data, r->pinned[m], (parts_t){v.r, v.n, m, PM_READ});
}

/* A read-only memory: the cached copy of its parts, or a new one. */
static int open_cached(run_t *r, slot_t *sl, pm__subs_view_t v, int m, void **nat)
{
    mem_use_t *u = &sl->use[m];
    const pm__memory_t *mem = r->t->mems[m];
    cache_entry_t *e = cache_find(r->p, mem, u->lo, u->hi, v, m);
    int rc;
    if (e != NULL) {
        r->cnt->gpu_cache_hits++;
        /* Its copy in may still be in flight on another stream. */
        rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, e->ready, 0));
    } else {
        rc = cache_insert(r->p, mem, u->lo, u->hi, v, m, &e);
        if (rc != 0)
            return rc;
        rc = pm__cu_copy_in(r, sl, pm__natural(e->buf.ptr, u->lo), mem->data, r->pinned[m],
                     (parts_t){v.r, v.n, m, PM_READ});
        if (rc == 0)
            rc = PM__CUDA(QUIET, cudaEventRecord(e->ready, sl->stream));
        if (rc != 0) {
            pm__cu_cache_drop(r->p, e);
            return rc;
        }
    }
    e->refs++;
    lru_unlink(r->p, e);
    lru_push(r->p, e);
    u->kind = USE_CACHED;
    u->entry = e;
    *nat = pm__natural(e->buf.ptr, u->lo);
    return rc;
}

/* A part is copied in as at most this many pieces of what the mirror
 * lacks; beyond that, whole (each piece is a copy call of its own). */
#define MISSING_PIECES 64
#define MISSING_WHOLE (MISSING_PIECES + 1) /* missing_pieces: copy the part whole */

/* Whether row k of part q lies wholly in `valid`. */
static bool row_valid(const pm__acc_t *valid, const pm__sub_t *q, uint64_t k)
{
    uint64_t at = q->offset + k * q->stride;
    return pm__acc_covers(valid, at, at + q->block);
}

/*
 * The pieces of read part q the mirror lacks, into out[] (at most
 * MISSING_PIECES): the gaps of a contiguous part, or the runs of rows of a
 * strided one not wholly valid. Where another host or device wrote a few
 * rows of what this GPU holds (a column pass after a row pass of which
 * another host ran some chunks), only those rows come in instead of every
 * row of the part. Returns the count (0: the mirror holds all of q), or
 * MISSING_WHOLE when there are more pieces than that.
 */
static uint32_t missing_pieces(const pm__acc_t *valid, const pm__sub_t *q, pm__sub_t *out)
{
    uint32_t n = 0;
    if (q->count == 1 || q->stride == q->block) {
        uint64_t lo = q->offset, hi = q->offset + q->count * q->block, glo, ghi;
        for (; pm__acc_gap(valid, lo, hi, &glo, &ghi); lo = ghi) {
            if (n == MISSING_PIECES)
                return MISSING_WHOLE;
            out[n++] = (pm__sub_t){.offset = glo, .block = ghi - glo, .stride = ghi - glo,
                                   .count = 1, .mem = q->mem, .access = q->access};
        }
        return n;
    }
    for (uint64_t k = 0; k < q->count; k++) {
        if (row_valid(valid, q, k))
            continue;
        uint64_t first = k;
        while (k + 1 < q->count && !row_valid(valid, q, k + 1))
            k++;
        if (n == MISSING_PIECES)
            return MISSING_WHOLE;
        out[n++] = (pm__sub_t){.offset = q->offset + first * q->stride, .block = q->block,
                               .stride = q->stride, .count = k + 1 - first, .mem = q->mem,
                               .access = q->access};
    }
    return n;
}

/* Copies the pieces of read part q the mirror lacks, each from a peer
 * GPU's mirror that holds it, else (a task that only reads the memory)
 * from a GPU of another host of this machine that holds it, else from the
 * host; *copied says whether any was missing. */
static int mirror_fill(run_t *r, slot_t *sl, mirror_t *mr, const pm__memory_t *mem, int m,
                       const pm__sub_t *q, bool *copied)
{
    pm__sub_t miss[MISSING_PIECES];
    uint32_t n = missing_pieces(&mr->c.valid, q, miss);
    if (n == MISSING_WHOLE) {
        miss[0] = *q;
        n = 1;
    }
    int rc = 0;
    bool only_read = r->t->desc.mem[m].access == PM_READ;
    for (uint32_t j = 0; j < n && rc == 0; j++) {
        const mirror_t *from = peer_holder(r, sl, &sl->use[m], mem, &miss[j]);
        if (from != NULL)
            rc = peer_copy(r, sl, mr, from, &miss[j]);
        else if (!only_read ||
                 (rc = pm__cu_node_copy(r, sl, &sl->use[m], mr, mem, &miss[j])) == NO_MIRROR)
            rc = pm__cu_copy_in(r, sl, mr->buf.ptr, mem->data, r->pinned[m],
                                (parts_t){&miss[j], 1, m, PM_READ});
    }
    *copied = n > 0;
    return rc;
}

/*
 * A non-reduced memory on its mirror: read parts the mirror lacks come in
 * (behind copies other streams made into it), written parts stop being
 * valid until they are home. A subtask whose reads meet bytes another
 * subtask of the task writes here gets buffers of its own instead (returns
 * NO_MIRROR): a copy in must never overwrite an output on its way home.
 * A part becomes valid only once `filled` is recorded after its copies, so
 * a peer that copies it waits for them.
 */
static int open_mirror(run_t *r, slot_t *sl, pm__subs_view_t v, int m, void **nat)
{
    const pm__memory_t *mem = r->t->mems[m];
    mirror_t *mr = mirror_of(r->p, mem);
    if (mr == NULL)
        return NO_MIRROR;
    for (uint32_t i = 0; i < v.n; i++)
        if (v.r[i].mem == m && (v.r[i].access & PM_READ) && pm__copy_touches(&mr->c.writing, &v.r[i]))
            return NO_MIRROR;
    sl->use[m].kind = USE_MIRROR;
    sl->use[m].mirror = mr;
    mr->refs++;
    int rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, mr->filled, 0));
    bool copied = false, read = false;
    for (uint32_t i = 0; i < v.n && rc == 0; i++) {
        const pm__sub_t *q = &v.r[i];
        if (q->mem != m || !(q->access & PM_READ))
            continue;
        read = true;
        bool some = false;
        rc = mirror_fill(r, sl, mr, mem, m, q, &some);
        if (!some)
            continue;
        copied = true;
        if (rc == 0)
            rc = PM__CUDA(QUIET, cudaEventRecord(mr->filled, sl->stream));
        pm__copies_lock();
        if (rc == 0)
            rc = pm__copy_mark(&mr->c.valid, q, true);
        pm__copies_unlock();
    }
    if (rc == 0 && read && !copied)
        r->cnt->gpu_cache_hits++;
    bool writes = false;
    pm__copies_lock();
    for (uint32_t i = 0; i < v.n && rc == 0; i++) {
        const pm__sub_t *q = &v.r[i];
        if (q->mem == m && (q->access & PM_WRITE)) {
            writes = true;
            rc = pm__copy_mark(&mr->c.valid, q, false);
            if (rc == 0)
                rc = pm__copy_mark(&mr->c.writing, q, true);
        }
    }
    if (rc != 0)
        mr->c.valid.ncov = 0; /* what it holds is unknown now */
    pm__copies_unlock();
    if (writes) /* other hosts no longer take what it held at the version read */
        pm__cu_node_publish(r->p, mr, false);
    *nat = mr->buf.ptr;
    return rc;
}

/* A reduced memory. Built-in ops: the chunk's first writer writes straight
 * into the chunk's accumulator, later ones into a fresh private output that
 * is merged after their callback. Custom: always a private output, merged
 * on the host when the subtask retires. */
static int open_reduced(run_t *r, slot_t *sl, chunk_state_t *cs, int m, void **nat)
{
    mem_use_t *u = &sl->use[m];
    bool custom = r->t->desc.mem[m].reduce == PM_REDUCE_CUSTOM;
    if (!custom && !cs->direct_taken[m]) {
        cs->direct_taken[m] = true;
        u->kind = USE_DIRECT;
        *nat = pm__natural(cs->dacc[m].ptr, cs->dlo[m]);
        return 0;
    }
    int rc = pm__cu_pool_get(r->p, u->hi - u->lo, &u->buf);
    if (rc != 0)
        return rc;
    u->kind = custom ? USE_CUSTOM : USE_MERGE;
    *nat = pm__natural(u->buf.ptr, u->lo);
    return pm__cu_fresh_fill(r, sl, m, *nat, u->lo, u->hi);
}

/* Gives every subscribed memory a device buffer; unsubscribed ones are NULL. */
int pm__cu_open_all(run_t *r, slot_t *sl, chunk_state_t *cs, pm__subs_view_t v,
                    pm_subtask_info_t *info)
{
    for (int m = 0; m < r->t->desc.nmem; m++) {
        mem_use_t *u = &sl->use[m];
        void *nat = NULL;
        int rc = 0;
        if (pm__subs_hull(v, m, &u->lo, &u->hi)) {
            if (r->t->desc.mem[m].reduce != PM_REDUCE_NONE)
                rc = open_reduced(r, sl, cs, m, &nat);
            else if ((rc = open_mirror(r, sl, v, m, &nat)) != NO_MIRROR)
                ;
            else if (r->t->desc.mem[m].access == PM_READ)
                rc = open_cached(r, sl, v, m, &nat);
            else
                rc = open_plain(r, sl, v, m, &nat);
        }
        info->mem[m] = nat;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Only called once the slot's stream is synchronized. */
void pm__cu_release_all(cuda_priv_t *p, slot_t *sl)
{
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        mem_use_t *u = &sl->use[m];
        if (u->kind == USE_CACHED)
            u->entry->refs--;
        if (u->kind == USE_MIRROR)
            u->mirror->refs--;
        if (u->npeer > 0) {
            pm__copies_lock();
            for (int k = 0; k < u->npeer; k++)
                u->peer[k]->c.readers--;
            pm__copies_unlock();
        }
        if (u->nnode > 0)
            pm__cu_node_release(p, u);
        pm__cu_pool_put(p, &u->buf);
        *u = (mem_use_t){0};
    }
}

