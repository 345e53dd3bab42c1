/*
 * The GPU stub. A memory that fits is mirrored whole on the device: each
 * subtask's read parts are copied in where the mirror lacks them, the
 * task's cuda callback runs on the mirror in place on one of the stub's
 * streams, and its written parts go home right behind it, staying valid on
 * the device for the next task. Larger memories get a device buffer for
 * the hull of each subtask's subscriptions (read-only ones cached by
 * range). Subtasks go round-robin over SLOTS streams and retire in id
 * order one round later, so one's copy in, another's kernel and a third's
 * copy out overlap. Built-in reduces merge on the device into one
 * accumulator per chunk, which crosses PCIe once.
 *
 * Host copies go through two pinned staging halves per stream (gather into
 * one half while the other is in flight) rather than cudaHostRegister: the
 * stub is never told when a memory or a comm mirror is freed, and a
 * registration that outlived its buffer would send later copies of a
 * reused address to stale pinned pages. Buffers that are already page-
 * locked (cudaHostAlloc'd memories) are copied directly.
 */
#include "exec/cuda.h"

#include <assert.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/check.h"
#include "exec/subs.h"
#include "reduce/ops.h"

#define SLOTS 3                        /* subtasks in flight per GPU: copy in, run, copy out */
#define CHUNK_STATES (SLOTS + 1)       /* chunks with subtasks in flight, plus one starting */
#define STAGE_BYTES ((size_t)8 << 20)  /* each of a stream's two pinned staging halves */
#define POOL_MAX 64                    /* idle device buffers kept for reuse */
#define CACHE_BUCKETS 1024             /* power of two */
#define CACHE_MAX 4096                 /* cached ranges; the LRU ones go beyond */
#define MAX_PITCH ((uint64_t)1 << 30)  /* larger strides copy row by row */
#define NARROW_ROW ((uint64_t)32 << 10) /* default: narrower rows move through a kernel */
#define QUIET PM__LOG_DEBUG            /* failures a subtask's message reports */
#define NO_MIRROR 1                    /* not an error: use buffers of the hull instead */

/* In pmlib/cuda/ (reduce_kernels.cu, stub_kernels.cu); both return a cudaError_t. */
int pm__cuda_reduce_apply(pm_reduce_op_t op, pm_type_t type, void *into, const void *from,
                          size_t count, void *stream);
int pm__cuda_fill(void *dst, const void *elem, int elem_bytes, size_t count, void *stream);
int pm__cuda_copy_rows(void *dst, const void *src, size_t width, size_t pitch, size_t rows,
                       void *stream);

/* ---- checking CUDA calls ------------------------------------------------ */

/* The error behind the last failed check on this thread, for the message of
 * the subtask it fails; each subtask starts with it clear. */
static _Thread_local cudaError_t last_cuda_error;

/*
 * Every CUDA runtime call goes through PM__CUDA: a failure is logged at
 * `level` naming the call and CUDA's message, remembered for the subtask's
 * message and turned into a pmlib code (PM_ENOMEM for device memory).
 * Failures that fail a subtask log at debug level only, since the task
 * logs its failure once when it finishes.
 */
#define PM__CUDA(level, call) cuda_status((call), (level), #call, __LINE__)

static int cuda_status(cudaError_t e, int level, const char *call, int line)
{
    if (e == cudaSuccess)
        return 0;
    last_cuda_error = e;
    pm__log(level, "%s failed (exec/cuda.c:%d): %s: %s", call, line, cudaGetErrorName(e),
            cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? PM_ENOMEM : PM_ECUDA;
}

/* Pointers in the natural view (base minus first byte) may point outside
 * any object, so their offsets are computed as integers. */
static inline void *at(const void *natural, uint64_t off)
{
    return (void *)((uintptr_t)natural + (uintptr_t)off);
}

/* ---- state -------------------------------------------------------------- */

typedef struct dev_buf {
    unsigned char *ptr;
    size_t bytes;
} dev_buf_t;

/* A read-only subscription kept on the device. */
typedef struct cache_entry {
    uint64_t handle, version, lo, hi;
    pm__sub_t *pat;       /* the parts copied in, in subscription order */
    uint32_t npat;
    dev_buf_t buf;
    cudaEvent_t ready;    /* recorded after the copy in, on whichever stream made it */
    int refs;             /* subtasks in flight using it */
    struct cache_entry *hnext, *newer, *older;
} cache_entry_t;

/*
 * A whole memory kept on the device. Subtasks work on it in place: their
 * read parts are copied in only where `valid` lacks them, and what they
 * write is copied home (write-through) and becomes valid for the version
 * the task leaves behind, so the next task of an iterative program finds
 * the previous task's output on the GPU that made it.
 */
typedef struct mirror {
    uint64_t handle, bytes;
    uint64_t version;      /* what `valid` describes */
    pm__acc_t valid;       /* bytes equal to the host's at `version`, once `filled` is reached */
    pm__acc_t writing;     /* bytes this GPU's subtasks write in the running task */
    pm__acc_t pending;     /* of those, the ones copied home: valid at version + 1 */
    dev_buf_t buf;
    cudaEvent_t filled;    /* after the latest copy into it, on whichever stream made it */
    int refs;              /* subtasks in flight using it */
    uint64_t used;         /* LRU tick */
    struct mirror *next;
} mirror_t;

enum use_kind { USE_NONE, USE_CACHED, USE_PLAIN, USE_DIRECT, USE_MERGE, USE_CUSTOM, USE_MIRROR };

/* How a subtask in flight holds one memory. */
typedef struct mem_use {
    enum use_kind kind;
    uint64_t lo, hi;      /* hull of its subscriptions of the memory */
    dev_buf_t buf;        /* USE_PLAIN, USE_MERGE, USE_CUSTOM */
    cache_entry_t *entry; /* USE_CACHED */
    mirror_t *mirror;     /* USE_MIRROR */
    bool sent;            /* its written parts are already on their way home */
} mem_use_t;

/* Reduce state of one chunk: a device accumulator per memory with a built-in
 * reduce. The first subtask that writes a memory writes straight into it
 * (USE_DIRECT); later ones merge into it in id order (USE_MERGE). */
typedef struct chunk_state {
    bool busy;
    int setup_rc;
    uint64_t chunk, first, last;
    pm__accset_t *acc;                      /* what goes up the merge tree */
    dev_buf_t dacc[PM_MAX_TASK_MEMORIES];
    uint64_t dlo[PM_MAX_TASK_MEMORIES];     /* first byte of dacc */
    pm__acc_t dcov[PM_MAX_TASK_MEMORIES];   /* bytes of dacc written so far (no data) */
    bool direct_taken[PM_MAX_TASK_MEMORIES];
    cudaEvent_t merged;                     /* after the last write into the dacc so far */
    double since;                           /* when its first subtask was issued */
    bool closing;                           /* the daccs are on their way to `home` */
    int home_rc;
    unsigned char *home;                    /* pinned */
    size_t home_cap;
    cudaEvent_t home_done;
} chunk_state_t;

/* One subtask in flight, on its own stream. */
typedef struct slot {
    cudaStream_t stream;
    unsigned char *stage[2];                /* pinned */
    cudaEvent_t stage_done[2];              /* last copy through each half */
    int half;
    bool busy, failed;
    uint64_t id;
    chunk_state_t *cs;
    mem_use_t use[PM_MAX_TASK_MEMORIES];
} slot_t;

typedef struct cuda_priv {
    pm__gpu_info_t gpu;
    bool ready;           /* streams, staging and events made (at the first chunk) */
    bool broken;          /* a sticky error lost the context, or set-up failed */
    slot_t slot[SLOTS];
    int next_slot;
    chunk_state_t cstate[CHUNK_STATES];
    int next_cstate;
    dev_buf_t pool[POOL_MAX];
    int npool;
    cache_entry_t *bucket[CACHE_BUCKETS];
    cache_entry_t *newest, *oldest;
    int ncache;
    mirror_t *mirrors;
    uint64_t tick;
    size_t held, cap;     /* device bytes held; idle ones are trimmed above cap */
    uint64_t narrow_row;  /* strided rows narrower than this move through a kernel */
    unsigned char *scratch; /* host copy of a custom-reduced output */
    size_t scratch_cap;
    pm__host_run_t host;  /* PMLIB_CHECK: subtasks run one by one over host views */
    dev_buf_t view[PM_MAX_TASK_MEMORIES]; /* ... each copied whole to the device */
} cuda_priv_t;

/* What one pm__cuda_run_chunks call works with. */
typedef struct run {
    pm__stub_t *s;
    cuda_priv_t *p;
    pm__task_t *t;
    pm__stub_counts_t *cnt;
    pm_subtask_info_t info;
    bool pinned[PM_MAX_TASK_MEMORIES];
    void *mapped[PM_MAX_TASK_MEMORIES]; /* the device's view of pinned host memories */
    pm__chunk_feed_t *feed;
} run_t;

/* ---- failures ----------------------------------------------------------- */

static void fail(const run_t *r, uint64_t id, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails subtask id naming the GPU and, if one failed, the CUDA call's message. */
static void fail(const run_t *r, uint64_t id, int status, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cudaError_t e = last_cuda_error;
    pm__task_fail(r->t, status, id, "subtask %llu: %s on host %d, gpu %d (%s)%s%s",
                  (unsigned long long)id, what, pm__rt.host, r->p->gpu.ordinal, r->p->gpu.name,
                  e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "");
}

static const char *open_failure(int rc)
{
    if (rc == PM_ENOMEM)
        return "out of device memory for its buffers even after evicting the gpu cache, and "
               "it cannot run on a cpu instead (no cpu callback, cpus excluded, or a reduced memory)";
    return "setting up its device buffers failed";
}

/*
 * Out of device memory even after eviction: the subtask runs with its cpu
 * callback, on this thread, over the host copies. Only for tasks without
 * reduced memories (their accumulator for this chunk lives on the GPU).
 * Returns 0 when it ran (a failing callback is then recorded as usual).
 */
static int run_on_cpu(const run_t *r, uint64_t id)
{
    const pm__task_t *t = r->t;
    if (t->cbs.cb.cpu == NULL || t->nred > 0 || !(t->desc.devices & PM_DEVICE_CPU))
        return PM_ENOTSUP;
    pm_subtask_info_t info = r->info;
    info.id = id;
    info.device = PM_DEVICE_CPU;
    info.device_index = -1;
    for (int m = 0; m < t->desc.nmem; m++)
        info.mem[m] = t->mems[m]->data;
    pm__info("subtask %llu runs on the cpu: gpu %d is out of memory", (unsigned long long)id,
             r->p->gpu.ordinal);
    int rc = t->cbs.cb.cpu(&info);
    if (rc != 0)
        pm__task_fail(r->t, PM_ECALLBACK, id,
                      "subtask %llu: the cpu callback (run because gpu %d was out of memory) returned %d "
                      "on host %d", (unsigned long long)id, r->p->gpu.ordinal, rc, pm__rt.host);
    return 0;
}

static const char *close_failure(int rc)
{
    if (rc == PM_ECALLBACK)
        return "the reduce callback failed";
    if (rc == PM_ENOMEM)
        return "out of memory merging its reduce output";
    return "copying its outputs from the gpu failed";
}

/* After a failed sync: a sticky error (a kernel fault) loses the context
 * for the rest of the process; anything else leaves the GPU usable. */
static void check_device(run_t *r)
{
    cudaError_t e = last_cuda_error;
    PM__CUDA(QUIET, cudaGetLastError());
    if (PM__CUDA(QUIET, cudaDeviceSynchronize()) == 0) {
        last_cuda_error = e;
        return;
    }
    r->p->broken = true;
    pm__error("gpu %d (%s) of host %d is unusable after %s; its stub fails the rest of its "
              "subtasks", r->p->gpu.ordinal, r->p->gpu.name, pm__rt.host, cudaGetErrorName(e));
    last_cuda_error = e;
}

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

static void dev_free(cuda_priv_t *p, dev_buf_t *b)
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

static void cache_drop(cuda_priv_t *p, cache_entry_t *e)
{
    cache_entry_t **pp = &p->bucket[bucket_of(e->handle, e->lo, e->hi)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(p, e);
    dev_free(p, &e->buf);
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
        dev_free(p, &p->pool[--p->npool]);
        return true;
    }
    cache_entry_t *e = cache_victim(p);
    if (e != NULL) {
        cache_drop(p, e);
        return true;
    }
    return mirror_evict(p);
}

/* cudaMalloc that makes room: idle buffers go while the stub holds more
 * than its cap, and on cudaErrorMemoryAllocation one by one between tries. */
static int dev_alloc(cuda_priv_t *p, size_t bytes, dev_buf_t *out)
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

static int pool_get(cuda_priv_t *p, size_t need, dev_buf_t *out)
{
    size_t want = size_class(need);
    int best = -1;
    for (int i = 0; i < p->npool; i++)
        if (p->pool[i].bytes >= want && p->pool[i].bytes <= 2 * want &&
            (best < 0 || p->pool[i].bytes < p->pool[best].bytes))
            best = i;
    if (best < 0)
        return dev_alloc(p, want, out);
    *out = p->pool[best];
    p->pool[best] = p->pool[--p->npool];
    return 0;
}

/* Only called once the streams that used the buffer are synchronized. */
static void pool_put(cuda_priv_t *p, dev_buf_t *b)
{
    if (b->ptr == NULL)
        return;
    if (p->npool == POOL_MAX) {
        dev_free(p, &p->pool[0]);
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
                cache_drop(p, e);
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
        cache_drop(p, victim);
    uint32_t n = 0;
    for (uint32_t i = 0; i < v.n; i++)
        n += v.r[i].mem == m;
    cache_entry_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return PM_ENOMEM;
    int rc = (e->pat = malloc((n ? n : 1) * sizeof *e->pat)) != NULL ? 0 : PM_ENOMEM;
    if (rc == 0)
        rc = dev_alloc(p, hi - lo, &e->buf);
    if (rc == 0)
        rc = PM__CUDA(QUIET, cudaEventCreateWithFlags(&e->ready, cudaEventDisableTiming));
    if (rc != 0) {
        dev_free(p, &e->buf);
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

static void mirror_free(cuda_priv_t *p, mirror_t *mr)
{
    dev_free(p, &mr->buf);
    if (mr->filled != NULL)
        PM__CUDA(QUIET, cudaEventDestroy(mr->filled));
    pm__acc_free(&mr->valid);
    pm__acc_free(&mr->writing);
    pm__acc_free(&mr->pending);
    free(mr);
}

/* Drops the least recently used mirror no subtask holds; its bytes are all
 * at home already (written parts go home before their subtask retires). */
static bool mirror_evict(cuda_priv_t *p)
{
    mirror_t **victim = NULL;
    for (mirror_t **pp = &p->mirrors; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->refs == 0 && (victim == NULL || (*pp)->used < (*victim)->used))
            victim = pp;
    if (victim == NULL)
        return false;
    mirror_t *mr = *victim;
    *victim = mr->next;
    mirror_free(p, mr);
    return true;
}

/* Brings what the mirror knows up to the memory's version: the bytes this
 * GPU wrote and sent home in the task that made this version stay valid;
 * anything else may have changed. */
static void mirror_sync(mirror_t *mr, uint64_t version)
{
    if (mr->version == version)
        return;
    if (version == mr->version + 1 && mr->pending.ncov > 0) {
        pm__acc_t t = mr->valid;
        mr->valid = mr->pending;
        mr->pending = t;
    } else {
        mr->valid.ncov = 0;
    }
    mr->pending.ncov = 0;
    mr->writing.ncov = 0;
    mr->version = version;
}

/* The mirror of `mem`, made if need be; NULL (no error) when the memory is
 * too large to mirror, or there is no room: the caller then uses buffers of
 * the subscribed hull instead. */
static mirror_t *mirror_of(cuda_priv_t *p, const pm__memory_t *mem)
{
    mirror_t *mr = p->mirrors;
    while (mr != NULL && mr->handle != mem->handle)
        mr = mr->next;
    if (mr == NULL) {
        if (mem->bytes == 0 || mem->bytes > p->cap / 2 || (mr = calloc(1, sizeof *mr)) == NULL)
            return NULL;
        if (dev_alloc(p, mem->bytes, &mr->buf) != 0 ||
            PM__CUDA(QUIET, cudaEventCreateWithFlags(&mr->filled, cudaEventDisableTiming)) != 0) {
            mirror_free(p, mr);
            PM__CUDA(QUIET, cudaGetLastError());
            last_cuda_error = cudaSuccess; /* not the subtask's failure: it falls back */
            return NULL;
        }
        mr->handle = mem->handle;
        mr->bytes = mem->bytes;
        mr->version = mem->version;
        mr->next = p->mirrors;
        p->mirrors = mr;
    }
    mirror_sync(mr, mem->version);
    mr->used = ++p->tick;
    return mr;
}

/* Whether any row of part q touches `a`. */
static bool part_touches(const pm__acc_t *a, const pm__sub_t *q)
{
    for (uint64_t k = 0; k < q->count && a->ncov > 0; k++)
        if (pm__acc_touches(a, q->offset + k * q->stride, q->offset + k * q->stride + q->block))
            return true;
    return false;
}

static int part_apply(pm__acc_t *a, const pm__sub_t *q, bool add)
{
    return pm__acc_apply_rows(a, q->offset, q->block, q->stride, q->count, add);
}

/* ---- copies between host and device -------------------------------------- */

/* Which records of a subscription list a copy moves. */
typedef struct parts {
    const pm__sub_t *r;
    uint32_t n;
    int mem;
    unsigned access;
} parts_t;

/* A piece of a part: `rows` blocks of `block` bytes, `stride` apart. */
typedef struct piece {
    uint64_t off, block, stride, rows;
} piece_t;

/* Cuts part q into pieces of at most `limit` bytes, in order; *pos counts the
 * bytes already handed out. False when none are left. */
static bool next_piece(const pm__sub_t *q, uint64_t limit, uint64_t *pos, piece_t *pc)
{
    if (*pos >= q->block * q->count)
        return false;
    uint64_t row = *pos / q->block, col = *pos % q->block;
    if (q->block > limit) {
        uint64_t n = q->block - col < limit ? q->block - col : limit;
        *pc = (piece_t){q->offset + row * q->stride + col, n, n, 1};
        *pos += n;
        return true;
    }
    uint64_t rows = q->stride > MAX_PITCH ? 1 : limit / q->block;
    if (rows > q->count - row)
        rows = q->count - row;
    *pc = (piece_t){q->offset + row * q->stride, q->block, q->stride, rows};
    *pos += rows * q->block;
    return true;
}

static int copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t rows, enum cudaMemcpyKind kind, cudaStream_t st)
{
    if (rows == 1)
        return PM__CUDA(QUIET, cudaMemcpyAsync(dst, src, width, kind, st));
    return PM__CUDA(QUIET, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, st));
}

/* Gathers a piece into the next staging half (once the copy that used the
 * half last is done) and sends it on the slot's stream. */
static int stage_in(slot_t *sl, void *dev_nat, const void *host_nat, const piece_t *pc)
{
    int h = sl->half;
    sl->half ^= 1;
    int rc = PM__CUDA(QUIET, cudaEventSynchronize(sl->stage_done[h]));
    if (rc != 0)
        return rc;
    for (uint64_t i = 0; i < pc->rows; i++)
        memcpy(sl->stage[h] + i * pc->block, at(host_nat, pc->off + i * pc->stride), pc->block);
    rc = copy_rows(at(dev_nat, pc->off), pc->stride, sl->stage[h], pc->block, pc->block, pc->rows,
                   cudaMemcpyHostToDevice, sl->stream);
    return rc ? rc : PM__CUDA(QUIET, cudaEventRecord(sl->stage_done[h], sl->stream));
}

/* The device's view of host_nat when it is memory m's own page-locked
 * buffer, which is mapped; else NULL. */
static void *mapped_view(const run_t *r, const void *host_nat, bool pinned, int m)
{
    return pinned && host_nat == r->t->mems[m]->data ? r->mapped[m] : NULL;
}

/* Whether a piece moves through the copy kernel: narrow rows, mapped host. */
static bool by_kernel(const run_t *r, const void *mapped_nat, const piece_t *pc)
{
    return mapped_nat != NULL && pc->rows > 1 && pc->block < r->p->narrow_row;
}

/* Copies the parts host -> device (both natural views) on the slot's stream;
 * returns once the host bytes may change. */
static int copy_in(run_t *r, slot_t *sl, void *dev_nat, const void *host_nat, bool pinned,
                   parts_t ps)
{
    const void *mapped_nat = mapped_view(r, host_nat, pinned, ps.mem);
    int rc = 0;
    for (uint32_t i = 0; i < ps.n && rc == 0; i++) {
        const pm__sub_t *q = &ps.r[i];
        if (q->mem != ps.mem || !(q->access & ps.access))
            continue;
        uint64_t pos = 0;
        piece_t pc;
        while (rc == 0 && next_piece(q, pinned ? UINT64_MAX : STAGE_BYTES, &pos, &pc)) {
            if (by_kernel(r, mapped_nat, &pc))
                rc = PM__CUDA(QUIET, (cudaError_t)pm__cuda_copy_rows(
                                         at(dev_nat, pc.off), at(mapped_nat, pc.off), pc.block,
                                         pc.stride, pc.rows, sl->stream));
            else if (pinned)
                rc = copy_rows(at(dev_nat, pc.off), pc.stride, at(host_nat, pc.off), pc.stride,
                               pc.block, pc.rows, cudaMemcpyHostToDevice, sl->stream);
            else
                rc = stage_in(sl, dev_nat, host_nat, &pc);
            r->cnt->bytes_to_gpu += pc.block * pc.rows;
        }
    }
    return rc;
}

/* A piece sent to a staging half, still to be scattered to the host. */
typedef struct pending {
    bool any;
    int h;
    piece_t pc;
} pending_t;

static int unstage(slot_t *sl, pending_t *pd, void *host_nat)
{
    if (!pd->any)
        return 0;
    pd->any = false;
    int rc = PM__CUDA(QUIET, cudaEventSynchronize(sl->stage_done[pd->h]));
    for (uint64_t i = 0; i < pd->pc.rows && rc == 0; i++)
        memcpy(at(host_nat, pd->pc.off + i * pd->pc.stride), sl->stage[pd->h] + i * pd->pc.block,
               pd->pc.block);
    return rc;
}

/* Sends one piece device -> host; a staged one is scattered one step later,
 * so each piece's copy overlaps the scatter of the one before. */
static int out_piece(slot_t *sl, const void *dev_nat, void *host_nat, bool pinned,
                     void *mapped_nat, bool kernel, const piece_t *pc, pending_t *pd)
{
    if (kernel)
        return PM__CUDA(QUIET, (cudaError_t)pm__cuda_copy_rows(
                                   at(mapped_nat, pc->off), at(dev_nat, pc->off), pc->block,
                                   pc->stride, pc->rows, sl->stream));
    if (pinned)
        return copy_rows(at(host_nat, pc->off), pc->stride, at(dev_nat, pc->off), pc->stride,
                         pc->block, pc->rows, cudaMemcpyDeviceToHost, sl->stream);
    int h = sl->half;
    sl->half ^= 1;
    int rc = copy_rows(sl->stage[h], pc->block, at(dev_nat, pc->off), pc->stride, pc->block,
                       pc->rows, cudaMemcpyDeviceToHost, sl->stream);
    if (rc == 0)
        rc = PM__CUDA(QUIET, cudaEventRecord(sl->stage_done[h], sl->stream));
    int urc = unstage(sl, pd, host_nat);
    *pd = (pending_t){rc == 0, h, *pc};
    return rc ? rc : urc;
}

/* Copies the parts device -> host and waits until they are there; page-
 * locked ones with `wait` false are only enqueued on the slot's stream. */
static int copy_out(run_t *r, slot_t *sl, const void *dev_nat, void *host_nat, bool pinned,
                    parts_t ps, bool wait)
{
    void *mapped_nat = mapped_view(r, host_nat, pinned, ps.mem);
    pending_t pd = {0};
    int rc = 0;
    for (uint32_t i = 0; i < ps.n && rc == 0; i++) {
        const pm__sub_t *q = &ps.r[i];
        if (q->mem != ps.mem || !(q->access & ps.access))
            continue;
        uint64_t pos = 0;
        piece_t pc;
        while (rc == 0 && next_piece(q, pinned ? UINT64_MAX : STAGE_BYTES, &pos, &pc)) {
            rc = out_piece(sl, dev_nat, host_nat, pinned, mapped_nat,
                           by_kernel(r, mapped_nat, &pc), &pc, &pd);
            r->cnt->bytes_from_gpu += pc.block * pc.rows;
        }
    }
    int urc = unstage(sl, &pd, host_nat);
    if (rc == 0)
        rc = urc;
    if (rc == 0 && pinned && wait)
        rc = PM__CUDA(QUIET, cudaStreamSynchronize(sl->stream));
    return rc;
}

/* One contiguous range [lo, hi) of memory m as a parts list. */
static parts_t range_parts(pm__sub_t *q, int m, uint64_t lo, uint64_t hi)
{
    *q = (pm__sub_t){.offset = lo, .block = hi - lo, .stride = hi - lo, .count = 1,
                     .mem = (uint8_t)m, .access = PM_READ_WRITE};
    return (parts_t){q, 1, m, PM_READ_WRITE};
}

/* Whether a host buffer is page-locked already, so copies skip the staging;
 * *mapped is then its address for kernels (NULL if it has none). */
static bool host_pinned(const void *ptr, void **mapped)
{
    struct cudaPointerAttributes a;
    *mapped = NULL;
    if (ptr == NULL || PM__CUDA(QUIET, cudaPointerGetAttributes(&a, ptr)) != 0)
        return false;
    if (a.type == cudaMemoryTypeHost)
        *mapped = a.devicePointer;
    return a.type == cudaMemoryTypeHost;
}

/* ---- a subtask's memories ------------------------------------------------ */

/* Fills [lo, hi) of a device buffer (natural view) as a fresh private output
 * of memory m, as pm__acc_fill does on the host: the memory's bytes when
 * the task reads it, else the op's identity (zeros for a custom reduce). */
static int fresh_fill(run_t *r, slot_t *sl, int m, void *nat, uint64_t lo, uint64_t hi)
{
    static const unsigned char zero[8];
    const pm_task_memory_t *tm = &r->t->desc.mem[m];
    pm__sub_t q;
    if (tm->access & PM_READ)
        return copy_in(r, sl, nat, r->t->mems[m]->data, r->pinned[m], range_parts(&q, m, lo, hi));
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
    int rc = pool_get(r->p, u->hi - u->lo, &u->buf);
    if (rc != 0)
        return rc;
    u->kind = USE_PLAIN;
    *nat = pm__natural(u->buf.ptr, u->lo);
    return copy_in(r, sl, *nat, r->t->mems[m]->data, r->pinned[m], (parts_t){v.r, v.n, m, PM_READ});
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
        rc = copy_in(r, sl, pm__natural(e->buf.ptr, u->lo), mem->data, r->pinned[m],
                     (parts_t){v.r, v.n, m, PM_READ});
        if (rc == 0)
            rc = PM__CUDA(QUIET, cudaEventRecord(e->ready, sl->stream));
        if (rc != 0) {
            cache_drop(r->p, e);
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

/*
 * The pieces of read part q the mirror lacks, into out[] (at most
 * MISSING_PIECES): the gaps of a contiguous part, or the runs of rows of a
 * strided one not wholly valid. Where another host or device wrote a few
 * rows of what this GPU holds (a column pass after a row pass of which
 * another host ran some chunks), only those rows come in instead of every
 * row of the part. Returns the count, or 0 when the part goes whole.
 */
static uint32_t missing_pieces(const pm__acc_t *valid, const pm__sub_t *q, pm__sub_t *out)
{
    uint32_t n = 0;
    if (q->count == 1 || q->stride == q->block) {
        uint64_t lo = q->offset, hi = q->offset + q->count * q->block, glo, ghi;
        while (pm__acc_gap(valid, lo, hi, &glo, &ghi)) {
            if (n == MISSING_PIECES)
                return 0;
            out[n++] = (pm__sub_t){.offset = glo, .block = ghi - glo, .stride = ghi - glo,
                                   .count = 1, .mem = q->mem, .access = q->access};
            lo = ghi;
        }
        return n;
    }
    for (uint64_t k = 0; k < q->count;) {
        uint64_t at = q->offset + k * q->stride;
        if (pm__acc_covers(valid, at, at + q->block)) {
            k++;
            continue;
        }
        uint64_t first = k;
        while (k < q->count &&
               !pm__acc_covers(valid, q->offset + k * q->stride, q->offset + k * q->stride + q->block))
            k++;
        if (n == MISSING_PIECES)
            return 0;
        out[n++] = (pm__sub_t){.offset = at, .block = q->block, .stride = q->stride,
                               .count = k - first, .mem = q->mem, .access = q->access};
    }
    return n;
}

/*
 * A non-reduced memory on its mirror: read parts the mirror lacks come in
 * (behind copies other streams made into it), written parts stop being
 * valid until they are home. A subtask whose reads meet bytes another
 * subtask of the task writes here gets buffers of its own instead (returns
 * NO_MIRROR): a copy in must never overwrite an output on its way home.
 */
static int open_mirror(run_t *r, slot_t *sl, pm__subs_view_t v, int m, void **nat)
{
    const pm__memory_t *mem = r->t->mems[m];
    mirror_t *mr = mirror_of(r->p, mem);
    if (mr == NULL)
        return NO_MIRROR;
    for (uint32_t i = 0; i < v.n; i++)
        if (v.r[i].mem == m && (v.r[i].access & PM_READ) && part_touches(&mr->writing, &v.r[i]))
            return NO_MIRROR;
    int rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, mr->filled, 0));
    bool copied = false, read = false;
    for (uint32_t i = 0; i < v.n && rc == 0; i++) {
        const pm__sub_t *q = &v.r[i];
        if (q->mem != m || !(q->access & PM_READ))
            continue;
        read = true;
        if (pm__acc_covers_rows(&mr->valid, q->offset, q->block, q->stride, q->count))
            continue;
        pm__sub_t miss[MISSING_PIECES];
        uint32_t nmiss = missing_pieces(&mr->valid, q, miss);
        rc = nmiss > 0 ? copy_in(r, sl, mr->buf.ptr, mem->data, r->pinned[m], (parts_t){miss, nmiss, m, PM_READ})
                       : copy_in(r, sl, mr->buf.ptr, mem->data, r->pinned[m], (parts_t){q, 1, m, PM_READ});
        if (rc == 0)
            rc = part_apply(&mr->valid, q, true);
        copied = true;
    }
    if (rc == 0 && copied)
        rc = PM__CUDA(QUIET, cudaEventRecord(mr->filled, sl->stream));
    else if (rc == 0 && read)
        r->cnt->gpu_cache_hits++;
    for (uint32_t i = 0; i < v.n && rc == 0; i++) {
        const pm__sub_t *q = &v.r[i];
        if (q->mem == m && (q->access & PM_WRITE)) {
            rc = part_apply(&mr->valid, q, false);
            if (rc == 0)
                rc = part_apply(&mr->writing, q, true);
        }
    }
    if (rc != 0) {
        mr->valid.ncov = 0; /* what it holds is unknown now */
        return rc;
    }
    mr->refs++;
    sl->use[m].kind = USE_MIRROR;
    sl->use[m].mirror = mr;
    *nat = mr->buf.ptr;
    return 0;
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
    int rc = pool_get(r->p, u->hi - u->lo, &u->buf);
    if (rc != 0)
        return rc;
    u->kind = custom ? USE_CUSTOM : USE_MERGE;
    *nat = pm__natural(u->buf.ptr, u->lo);
    return fresh_fill(r, sl, m, *nat, u->lo, u->hi);
}

/* Gives every subscribed memory a device buffer; unsubscribed ones are NULL. */
static int open_all(run_t *r, slot_t *sl, chunk_state_t *cs, pm__subs_view_t v,
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
static void release_all(cuda_priv_t *p, slot_t *sl)
{
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        mem_use_t *u = &sl->use[m];
        if (u->kind == USE_CACHED)
            u->entry->refs--;
        if (u->kind == USE_MIRROR)
            u->mirror->refs--;
        pool_put(p, &u->buf);
        *u = (mem_use_t){0};
    }
}

/* ---- merging reduce outputs ---------------------------------------------- */

/* Merges [lo, hi) of a private output into the chunk's accumulator as
 * pm__acc_merge_range does on the host: reduced where the accumulator holds
 * output already, copied elsewhere; so CPU and GPU give the same bits. */
static int merge_range(run_t *r, slot_t *sl, chunk_state_t *cs, int m, uint64_t lo, uint64_t hi)
{
    const pm_task_memory_t *tm = &r->t->desc.mem[m];
    void *acc = pm__natural(cs->dacc[m].ptr, cs->dlo[m]);
    void *out = pm__natural(sl->use[m].buf.ptr, sl->use[m].lo);
    const pm__acc_t *a = &cs->dcov[m];
    uint64_t pos = lo;
    int rc = 0;
    for (uint32_t i = 0; i < a->ncov && pos < hi && rc == 0; i++) {
        const pm__range_t iv = a->cov[i];
        if (iv.hi <= pos)
            continue;
        if (iv.lo >= hi)
            break;
        if (iv.lo > pos)
            rc = PM__CUDA(QUIET, cudaMemcpyAsync(at(acc, pos), at(out, pos), iv.lo - pos,
                                                 cudaMemcpyDeviceToDevice, sl->stream));
        uint64_t olo = iv.lo > pos ? iv.lo : pos, ohi = iv.hi < hi ? iv.hi : hi;
        if (rc == 0)
            rc = PM__CUDA(QUIET, (cudaError_t)pm__cuda_reduce_apply(
                                     tm->reduce, tm->type, at(acc, olo), at(out, olo),
                                     (ohi - olo) / pm_type_size(tm->type), sl->stream));
        pos = ohi;
    }
    if (rc == 0 && pos < hi)
        rc = PM__CUDA(QUIET, cudaMemcpyAsync(at(acc, pos), at(out, pos), hi - pos,
                                             cudaMemcpyDeviceToDevice, sl->stream));
    return rc ? rc : pm__acc_cover(&cs->dcov[m], lo, hi);
}

/* Enqueues the subtask's built-in reduce merges behind those of lower ids
 * (the chunk's `merged` event orders them across streams). */
static int after_callback(run_t *r, slot_t *sl, chunk_state_t *cs, pm__subs_view_t v)
{
    int rc = 0;
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        enum use_kind k = sl->use[m].kind;
        if (k != USE_DIRECT && k != USE_MERGE)
            continue;
        pm__acc_t w = {0};
        rc = pm__subs_written(v, m, &w);
        if (rc == 0 && k == USE_MERGE)
            rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, cs->merged, 0));
        for (uint32_t i = 0; i < w.ncov && rc == 0; i++)
            rc = k == USE_MERGE ? merge_range(r, sl, cs, m, w.cov[i].lo, w.cov[i].hi)
                                : pm__acc_cover(&cs->dcov[m], w.cov[i].lo, w.cov[i].hi);
        if (rc == 0)
            rc = PM__CUDA(QUIET, cudaEventRecord(cs->merged, sl->stream));
        pm__acc_free(&w);
    }
    return rc;
}

/* Copies a custom-reduced output home and merges it into the chunk's host
 * accumulator with the task's reduce callback, in id order. */
static int merge_custom(run_t *r, slot_t *sl, pm__subs_view_t v, int m)
{
    cuda_priv_t *p = r->p;
    const mem_use_t *u = &sl->use[m];
    if (p->scratch_cap < u->hi - u->lo) {
        free(p->scratch);
        p->scratch_cap = 0;
        if ((p->scratch = malloc(u->hi - u->lo)) == NULL)
            return PM_ENOMEM;
        p->scratch_cap = u->hi - u->lo;
    }
    pm__acc_t w = {0};
    pm__sub_t q;
    int rc = pm__subs_written(v, m, &w);
    for (uint32_t i = 0; i < w.ncov && rc == 0; i++)
        rc = copy_out(r, sl, pm__natural(u->buf.ptr, u->lo), pm__natural(p->scratch, u->lo), false,
                      range_parts(&q, m, w.cov[i].lo, w.cov[i].hi), true);
    for (uint32_t i = 0; i < w.ncov && rc == 0; i++)
        rc = pm__acc_merge_range(r->t, m, &sl->cs->acc->acc[m], p->scratch, u->lo, w.cov[i].lo,
                                 w.cov[i].hi);
    pm__acc_free(&w);
    return rc;
}

/* ---- chunks --------------------------------------------------------------- */

/* A device accumulator over the hull of each built-in reduced memory's
 * subscriptions in the chunk, filled fresh. Merging per chunk rather than
 * per task keeps the result independent of which device ran which chunk:
 * the chunk outputs then meet in the task's fixed merge tree. */
static int setup_accumulators(run_t *r, slot_t *sl, chunk_state_t *cs)
{
    const pm__task_t *t = r->t;
    pm__subs_view_t all = {NULL, 0};
    if (t->chunk_subs != NULL)
        all = (pm__subs_view_t){t->chunk_subs[cs->chunk].recs, t->chunk_subs[cs->chunk].n};
    int rc = 0;
    for (int m = 0; m < t->desc.nmem && rc == 0; m++) {
        pm_reduce_op_t op = t->desc.mem[m].reduce;
        uint64_t lo = 0, hi = 0;
        if (op == PM_REDUCE_NONE || op == PM_REDUCE_CUSTOM || !pm__subs_hull(all, m, &lo, &hi))
            continue;
        cs->dlo[m] = lo;
        rc = pool_get(r->p, hi - lo, &cs->dacc[m]);
        if (rc == 0)
            rc = fresh_fill(r, sl, m, pm__natural(cs->dacc[m].ptr, lo), lo, hi);
    }
    return rc ? rc : PM__CUDA(QUIET, cudaEventRecord(cs->merged, sl->stream));
}

static void chunk_close(run_t *r, chunk_state_t *cs);

/* Enqueues the written bytes of every device accumulator, back to back,
 * into the chunk's pinned `home` buffer behind the chunk's last merge. */
static int send_home(run_t *r, slot_t *sl, chunk_state_t *cs)
{
    size_t need = 0, pos = 0;
    for (int m = 0; m < r->t->desc.nmem; m++)
        for (uint32_t i = 0; i < cs->dcov[m].ncov; i++)
            need += cs->dcov[m].cov[i].hi - cs->dcov[m].cov[i].lo;
    if (need > cs->home_cap) {
        if (cs->home != NULL)
            PM__CUDA(PM__LOG_WARN, cudaFreeHost(cs->home));
        cs->home = NULL;
        cs->home_cap = 0;
        int rc = PM__CUDA(QUIET, cudaHostAlloc((void **)&cs->home, need, cudaHostAllocDefault));
        if (rc != 0)
            return rc;
        cs->home_cap = need;
    }
    int rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, cs->merged, 0));
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        const void *dev = pm__natural(cs->dacc[m].ptr, cs->dlo[m]);
        for (uint32_t i = 0; i < cs->dcov[m].ncov && rc == 0; i++) {
            uint64_t lo = cs->dcov[m].cov[i].lo, n = cs->dcov[m].cov[i].hi - lo;
            rc = PM__CUDA(QUIET, cudaMemcpyAsync(cs->home + pos, at(dev, lo), n,
                                                 cudaMemcpyDeviceToHost, sl->stream));
            pos += n;
            r->cnt->bytes_from_gpu += n;
        }
    }
    return rc ? rc : PM__CUDA(QUIET, cudaEventRecord(cs->home_done, sl->stream));
}

/* After the chunk's last subtask retired: its accumulators start home. The
 * chunk closes later (chunk_close), when its state is next needed or the
 * run ends, so the pipeline never stops to wait for them. */
static void chunk_end(run_t *r, slot_t *sl, chunk_state_t *cs)
{
    bool send = cs->acc != NULL && cs->setup_rc == 0 && !r->p->broken;
    cs->home_rc = send ? send_home(r, sl, cs) : 0;
    if (cs->home_rc != 0)
        fail(r, cs->first, cs->home_rc, "copying its chunk's reduce output from the gpu failed");
    cs->closing = true;
    if (!send)
        chunk_close(r, cs);
}

/* The chunk's accumulators are home: their outputs go up the merge tree. */
static void chunk_close(run_t *r, chunk_state_t *cs)
{
    int rc = cs->home_rc;
    bool sent = rc == 0 && cs->acc != NULL && cs->setup_rc == 0 && !r->p->broken;
    if (sent)
        rc = PM__CUDA(QUIET, cudaEventSynchronize(cs->home_done));
    size_t pos = 0;
    for (int m = 0; m < r->t->desc.nmem && sent && rc == 0; m++) {
        const pm__acc_t *d = &cs->dcov[m];
        pm__acc_t *a = &cs->acc->acc[m];
        if (d->ncov == 0)
            continue;
        rc = pm__acc_reserve(r->t, m, a, d->cov[0].lo, d->cov[d->ncov - 1].hi);
        for (uint32_t i = 0; i < d->ncov && rc == 0; i++) {
            uint64_t lo = d->cov[i].lo, n = d->cov[i].hi - lo;
            memcpy(a->data + (lo - a->lo), cs->home + pos, n);
            pos += n;
            rc = pm__acc_cover(a, lo, lo + n);
        }
    }
    if (rc != 0 && cs->home_rc == 0)
        fail(r, cs->first, rc, "copying its chunk's reduce output from the gpu failed");
    if (cs->acc != NULL) {
        rc = pm__reduce_tree_push(r->t, 0, cs->chunk, cs->acc);
        if (rc != 0)
            fail(r, cs->first, rc, "%s", close_failure(rc));
    }
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        pool_put(r->p, &cs->dacc[m]);
        pm__acc_free(&cs->dcov[m]);
    }
    cs->acc = NULL;
    cs->closing = false;
    cs->busy = false;
    if (r->feed != NULL) /* the last thing done with the task: it may end here */
        r->feed->done(r->feed, cs->chunk, cs->since);
}

static chunk_state_t *chunk_begin(run_t *r, slot_t *sl, uint64_t chunk)
{
    cuda_priv_t *p = r->p;
    chunk_state_t *cs = &p->cstate[p->next_cstate];
    p->next_cstate = (p->next_cstate + 1) % CHUNK_STATES;
    if (cs->closing) /* a chunk CHUNK_STATES ago: its copies are long done */
        chunk_close(r, cs);
    assert(!cs->busy); /* CHUNK_STATES covers every chunk that can be in flight */
    cs->busy = true;
    cs->setup_rc = 0;
    cs->chunk = chunk;
    cs->since = pm__now();
    pm__chunk_span(r->t, chunk, &cs->first, &cs->last);
    memset(cs->direct_taken, 0, sizeof cs->direct_taken);
    if (r->t->nred == 0 || p->broken)
        return cs;
    last_cuda_error = cudaSuccess;
    cs->acc = pm__accset_new();
    cs->setup_rc = cs->acc != NULL ? setup_accumulators(r, sl, cs) : PM_ENOMEM;
    return cs;
}

/* Whether the subtask's use of memory m sends written parts home, and
 * from which device buffer (natural view). */
static const void *written_home(const run_t *r, const mem_use_t *u, int m)
{
    if (!(r->t->desc.mem[m].access & PM_WRITE))
        return NULL;
    if (u->kind == USE_PLAIN)
        return pm__natural(u->buf.ptr, u->lo);
    return u->kind == USE_MIRROR ? u->mirror->buf.ptr : NULL;
}

/* Right behind the callback, on its stream: the written parts of page-
 * locked memories start home while the next subtasks copy in and run. */
static int send_early(run_t *r, slot_t *sl, pm__subs_view_t v)
{
    int rc = 0;
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        mem_use_t *u = &sl->use[m];
        const void *dev = written_home(r, u, m);
        if (dev == NULL || !r->pinned[m])
            continue;
        rc = copy_out(r, sl, dev, r->t->mems[m]->data, true, (parts_t){v.r, v.n, m, PM_WRITE},
                      false);
        u->sent = rc == 0;
    }
    return rc;
}

/* ---- the pipeline ----------------------------------------------------------- */

/* Runs the cuda callback; a failed launch counts as its failure. Launch
 * errors are per CUDA runtime, and a program linked with its own static
 * runtime has one apart from pmlib's: its callbacks must report failed
 * launches by returning nonzero, the check here only sees pmlib's. */
static int invoke_cuda(const run_t *r, const pm_subtask_info_t *info, cudaStream_t stream)
{
    PM__CUDA(QUIET, cudaGetLastError()); /* forget errors already returned */
    last_cuda_error = cudaSuccess;
    int ret = r->t->cbs.cb.cuda(info, (void *)stream);
    int lrc = PM__CUDA(QUIET, cudaGetLastError());
    if (ret == 0 && lrc == 0)
        return 0;
    if (ret != 0)
        fail(r, info->id, PM_ECALLBACK, "the cuda callback returned %d", ret);
    else
        fail(r, info->id, PM_ECALLBACK, "a launch in the cuda callback failed");
    return PM_ECALLBACK;
}

/* The cuda callback on the slot's stream, once its chunk's accumulator is filled. */
static int call_cuda(run_t *r, slot_t *sl, chunk_state_t *cs, const pm_subtask_info_t *info)
{
    int rc = 0;
    for (int m = 0; m < info->nmem && rc == 0; m++)
        if (sl->use[m].kind == USE_DIRECT) /* the accumulator's fill comes first */
            rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, cs->merged, 0));
    if (rc != 0) {
        fail(r, info->id, rc, "waiting for its chunk's reduce accumulator failed");
        return rc;
    }
    return invoke_cuda(r, info, sl->stream);
}

/* Starts subtask id on a free slot: buffers, copies in, callback, merges. */
static void issue(run_t *r, slot_t *sl, chunk_state_t *cs, uint64_t id)
{
    sl->busy = true;
    sl->failed = true; /* until the callback and its merges are enqueued */
    sl->id = id;
    sl->cs = cs;
    last_cuda_error = cudaSuccess;
    if (r->p->broken) {
        fail(r, id, PM_ECUDA, "the gpu is unusable after an earlier error");
        return;
    }
    if (cs->setup_rc != 0) {
        fail(r, id, cs->setup_rc, "%s", open_failure(cs->setup_rc));
        return;
    }
    pm__subs_view_t v = pm__subs_of(r->t, cs->chunk, id);
    pm_subtask_info_t info = r->info;
    info.id = id;
    int rc = open_all(r, sl, cs, v, &info);
    if (rc == PM_ENOMEM && run_on_cpu(r, id) == 0)
        return; /* the slot stays marked failed: nothing to bring home from the gpu */
    if (rc != 0) {
        fail(r, id, rc == PM_ENOMEM ? PM_ENOMEM : PM_ECUDA, "%s", open_failure(rc));
        return;
    }
    if (call_cuda(r, sl, cs, &info) != 0)
        return;
    rc = after_callback(r, sl, cs, v);
    if (rc != 0) {
        fail(r, id, rc, "merging its reduce output on the gpu failed");
        return;
    }
    rc = send_early(r, sl, v);
    if (rc != 0) {
        fail(r, id, rc, "%s", close_failure(rc));
        return;
    }
    sl->failed = false;
}

/* Brings a subtask's outputs home (once its stream is synchronized): the
 * written parts of plain and mirrored memories that are not home yet, and
 * custom-reduced outputs (built-in ones stay in the chunk's accumulator).
 * A mirror's written parts, home now, are valid for the next version. */
static int close_all(run_t *r, slot_t *sl, pm__subs_view_t v)
{
    int rc = 0;
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        const mem_use_t *u = &sl->use[m];
        const void *dev = written_home(r, u, m);
        if (dev != NULL && !u->sent)
            rc = copy_out(r, sl, dev, r->t->mems[m]->data, r->pinned[m],
                          (parts_t){v.r, v.n, m, PM_WRITE}, true);
        if (dev != NULL && u->kind == USE_MIRROR)
            for (uint32_t i = 0; i < v.n && rc == 0; i++)
                if (v.r[i].mem == m && (v.r[i].access & PM_WRITE))
                    rc = part_apply(&u->mirror->pending, &v.r[i], true);
        if (u->kind == USE_CUSTOM)
            rc = merge_custom(r, sl, v, m);
    }
    return rc;
}

/* Finishes the subtask on a slot: waits for its stream, brings its outputs
 * home, frees its buffers; ends its chunk after the chunk's last subtask. */
static void retire(run_t *r, slot_t *sl)
{
    chunk_state_t *cs = sl->cs;
    last_cuda_error = cudaSuccess;
    if (PM__CUDA(QUIET, cudaStreamSynchronize(sl->stream)) != 0) {
        check_device(r);
        /* A lost context fails every stream, so the fault may be another's. */
        if (!sl->failed)
            fail(r, sl->id, PM_ECALLBACK, "%s",
                 r->p->broken ? "the gpu failed while its cuda callback's work (or that of "
                                "another subtask in flight there) ran"
                              : "the work of its cuda callback failed");
        sl->failed = true;
    }
    if (!sl->failed) {
        int rc = close_all(r, sl, pm__subs_of(r->t, cs->chunk, sl->id));
        if (rc != 0)
            fail(r, sl->id, rc, "%s", close_failure(rc));
    }
    release_all(r->p, sl);
    sl->busy = false;
    if (sl->id + 1 == cs->last)
        chunk_end(r, sl, cs);
}

static slot_t *next_slot(cuda_priv_t *p)
{
    slot_t *sl = &p->slot[p->next_slot];
    p->next_slot = (p->next_slot + 1) % SLOTS;
    return sl;
}

static int gpu_setup(cuda_priv_t *p);

/* Stubs are described on the main thread; this one selects its GPU and,
 * the first time, makes what it runs with. */
static void cuda_ready(pm__stub_t *s)
{
    cuda_priv_t *p = s->priv;
    last_cuda_error = cudaSuccess;
    if (!p->broken && PM__CUDA(PM__LOG_ERROR, cudaSetDevice(p->gpu.ordinal)) != 0)
        p->broken = true;
    if (!p->broken && !p->ready && gpu_setup(p) != 0) {
        p->broken = true;
        pm__error("gpu %d (%s) of host %d cannot be set up; its subtasks of this task fail and "
                  "later tasks run without it (PMLIB_NGPU or PMLIB_CUDA_DEVICES leave it out)",
                  p->gpu.ordinal, p->gpu.name, pm__rt.host);
    }
}

static void run_init(run_t *r, pm__stub_t *s, pm__task_t *t)
{
    cuda_priv_t *p = s->priv;
    *r = (run_t){.s = s, .p = p, .t = t, .cnt = pm__counts_own(t, s->index)};
    r->info = (pm_subtask_info_t){.count = t->desc.subtasks, .nmem = t->desc.nmem,
                                  .conf = t->conf, .conf_bytes = t->desc.conf_bytes,
                                  .host = pm__rt.host, .stub = s->index,
                                  .device = PM_DEVICE_GPU, .device_index = p->gpu.ordinal,
                                  .internal = t};
    cuda_ready(s);
    for (int m = 0; m < t->desc.nmem; m++) {
        r->info.mem_bytes[m] = t->mems[m]->bytes;
        r->pinned[m] = !p->broken && host_pinned(t->mems[m]->data, &r->mapped[m]);
    }
}

/*
 * PMLIB_CHECK=1: one subtask over device copies of the checking mode's
 * views (exec/check.c). Each whole view goes to the device, the cuda
 * callback runs on the copies, and they come back to be checked like a
 * CPU subtask's: stray writes anywhere in a memory are found, and stray
 * reads see the poison. Slow (whole memories cross PCIe per subtask), and
 * meant for finding such bugs.
 */
static int checked_call(pm__stub_t *s, pm__task_t *t, pm_subtask_info_t *info)
{
    cuda_priv_t *p = s->priv;
    run_t r = {.s = s, .p = p, .t = t, .cnt = pm__counts_own(t, s->index), .info = *info};
    if (p->broken) {
        fail(&r, info->id, PM_ECUDA, "the gpu is unusable after an earlier error");
        return PM__CALL_FAILED;
    }
    cudaStream_t st = p->slot[0].stream;
    pm_subtask_info_t d = *info;
    last_cuda_error = cudaSuccess;
    for (int m = 0; m < info->nmem; m++) {
        size_t n = info->mem_bytes[m];
        if (p->view[m].ptr != NULL && p->view[m].bytes < n)
            dev_free(p, &p->view[m]);
        if (p->view[m].ptr == NULL && dev_alloc(p, n, &p->view[m]) != 0) {
            fail(&r, info->id, PM_ENOMEM, "out of device memory for the checking mode's views");
            return PM__CALL_FAILED;
        }
        d.mem[m] = info->mem[m] == NULL ? NULL : p->view[m].ptr;
        if (d.mem[m] != NULL && n > 0 &&
            PM__CUDA(QUIET, cudaMemcpyAsync(d.mem[m], info->mem[m], n, cudaMemcpyHostToDevice, st)) != 0) {
            fail(&r, info->id, PM_ECUDA, "copying its checking view to the gpu failed");
            return PM__CALL_FAILED;
        }
    }
    int crc = invoke_cuda(&r, &d, st);
    if (PM__CUDA(QUIET, cudaStreamSynchronize(st)) != 0) {
        if (crc == 0) /* else already failed: once per subtask */
            fail(&r, info->id, PM_ECUDA, "its kernels failed");
        check_device(&r);
        return PM__CALL_FAILED;
    }
    for (int m = 0; m < info->nmem; m++) {
        if (d.mem[m] != NULL && info->mem_bytes[m] > 0 &&
            PM__CUDA(QUIET, cudaMemcpy(info->mem[m], d.mem[m], info->mem_bytes[m],
                                       cudaMemcpyDeviceToHost)) != 0) {
            fail(&r, info->id, PM_ECUDA, "copying its checking view from the gpu failed");
            return PM__CALL_FAILED;
        }
    }
    return crc != 0 ? PM__CALL_FAILED : 0;
}

/* Waits for the chunk's inputs from other hosts; meanwhile the subtasks in
 * flight retire, oldest first, so finished chunks are reported (and their
 * outputs sent) instead of waiting behind the transfer. */
static int inputs_here(run_t *r, uint64_t chunk)
{
    int rc = r->feed->ready(r->feed, chunk, false);
    for (int k = 0; rc == PM__FEED_LATER && k < SLOTS; k++) {
        slot_t *sl = &r->p->slot[(r->p->next_slot + k) % SLOTS];
        if (sl->busy) {
            retire(r, sl);
            rc = r->feed->ready(r->feed, chunk, false);
        }
    }
    return rc == PM__FEED_LATER ? r->feed->ready(r->feed, chunk, true) : rc;
}

void pm__cuda_run_chunks(pm__stub_t *s, pm__task_t *t, uint64_t chunk, pm__chunk_feed_t *feed)
{
    run_t r;
    run_init(&r, s, t);
    r.feed = feed;
    if (pm__check_mode) {
        for (bool more = true; more;) {
            double since = pm__now();
            uint64_t next = 0;
            if (feed == NULL || feed->ready == NULL || feed->ready(feed, chunk, true) == 0)
                pm__host_run_chunk(&r.p->host, s, t, chunk, checked_call);
            /* The next chunk is taken before this one is reported: the last
             * report may end the task, and the program may free it. */
            more = feed != NULL && feed->next(feed, &next);
            if (feed != NULL)
                feed->done(feed, chunk, since);
            chunk = next;
        }
        return;
    }
    /* The next chunk is taken once this one's subtasks are issued: with at
     * most SLOTS in flight, the stub holds only a few chunks ahead. */
    for (bool more = true; more; more = feed != NULL && feed->next(feed, &chunk)) {
        uint64_t first, last;
        if (feed != NULL && feed->ready != NULL && inputs_here(&r, chunk) != 0) {
            feed->done(feed, chunk, pm__now()); /* its inputs never came: the task failed */
            continue;
        }
        pm__chunk_span(t, chunk, &first, &last);
        r.cnt->subtasks += last - first;
        chunk_state_t *cs = NULL;
        for (uint64_t id = first; id < last; id++) {
            slot_t *sl = next_slot(r.p);
            if (sl->busy)
                retire(&r, sl);
            if (cs == NULL)
                cs = chunk_begin(&r, sl, chunk);
            issue(&r, sl, cs, id);
        }
    }
    for (int k = 0; k < SLOTS; k++) {
        slot_t *sl = next_slot(r.p);
        if (sl->busy)
            retire(&r, sl);
    }
    for (int k = 0; k < CHUNK_STATES; k++)
        if (r.p->cstate[k].closing)
            chunk_close(&r, &r.p->cstate[k]);
}

static void cuda_run_chunk(pm__stub_t *s, pm__task_t *t, uint64_t chunk)
{
    pm__cuda_run_chunks(s, t, chunk, NULL);
}

/* ---- set-up and tear-down -------------------------------------------------- */

static int gpu_query(int ordinal, pm__gpu_info_t *g)
{
    struct cudaDeviceProp prop;
    int rc = PM__CUDA(PM__LOG_WARN, cudaGetDeviceProperties(&prop, ordinal));
    if (rc != 0)
        return rc;
    *g = (pm__gpu_info_t){.ordinal = ordinal, .major = prop.major, .minor = prop.minor,
                          .mem_bytes = prop.totalGlobalMem, .sm_count = prop.multiProcessorCount};
    size_t n = strnlen(prop.name, sizeof prop.name);
    if (n >= sizeof g->name)
        n = sizeof g->name - 1;
    memcpy(g->name, prop.name, n);
    g->name[n] = '\0';
    return 0;
}

static int slot_init(slot_t *sl)
{
    int rc = PM__CUDA(PM__LOG_ERROR, cudaStreamCreateWithFlags(&sl->stream, cudaStreamNonBlocking));
    for (int h = 0; h < 2 && rc == 0; h++) {
        rc = PM__CUDA(PM__LOG_ERROR, cudaHostAlloc((void **)&sl->stage[h], STAGE_BYTES,
                                                   cudaHostAllocDefault));
        if (rc == 0)
            rc = PM__CUDA(PM__LOG_ERROR, cudaEventCreateWithFlags(&sl->stage_done[h],
                                                                  cudaEventDisableTiming));
    }
    return rc;
}

static void slot_fini(slot_t *sl, int level)
{
    for (int h = 0; h < 2; h++) {
        if (sl->stage_done[h] != NULL)
            PM__CUDA(level, cudaEventDestroy(sl->stage_done[h]));
        if (sl->stage[h] != NULL)
            PM__CUDA(level, cudaFreeHost(sl->stage[h]));
    }
    if (sl->stream != NULL)
        PM__CUDA(level, cudaStreamDestroy(sl->stream));
    *sl = (slot_t){0};
}

static void cuda_fini(pm__stub_t *s)
{
    cuda_priv_t *p = s->priv;
    if (p == NULL)
        return;
    pm__host_run_free(&p->host);
    if (!p->ready) { /* never ran a chunk: nothing made, no CUDA call now either */
        free(p);
        s->priv = NULL;
        return;
    }
    int level = p->broken ? QUIET : PM__LOG_WARN;
    PM__CUDA(level, cudaSetDevice(s->device_index));
    PM__CUDA(level, cudaDeviceSynchronize());
    while (p->oldest != NULL)
        cache_drop(p, p->oldest);
    while (p->mirrors != NULL) {
        mirror_t *mr = p->mirrors;
        p->mirrors = mr->next;
        mirror_free(p, mr);
    }
    for (int i = 0; i < CHUNK_STATES; i++) {
        for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
            dev_free(p, &p->cstate[i].dacc[m]);
            pm__acc_free(&p->cstate[i].dcov[m]);
        }
        if (p->cstate[i].merged != NULL)
            PM__CUDA(level, cudaEventDestroy(p->cstate[i].merged));
        if (p->cstate[i].home_done != NULL)
            PM__CUDA(level, cudaEventDestroy(p->cstate[i].home_done));
        if (p->cstate[i].home != NULL)
            PM__CUDA(level, cudaFreeHost(p->cstate[i].home));
    }
    while (p->npool > 0)
        dev_free(p, &p->pool[--p->npool]);
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++)
        dev_free(p, &p->view[m]);
    for (int i = 0; i < SLOTS; i++)
        slot_fini(&p->slot[i], level);
    free(p->scratch);
    free(p);
    s->priv = NULL;
}

/* PMLIB_CUDA_MEMORY_MB: device memory a stub keeps for its buffers and read
 * cache before it evicts idle ones. The default, three quarters of the GPU,
 * leaves the rest to the callbacks' own allocations. */
static size_t memory_cap(size_t total)
{
    return (size_t)pm__env_uint("PMLIB_CUDA_MEMORY_MB", "a size in MiB", 1, total >> 20,
                                total / 4 * 3 >> 20) << 20;
}

/*
 * PMLIB_CUDA_NARROW_ROW: rows of a strided part narrower than this many
 * bytes move between the GPU and a memory's page-locked buffer through a
 * copy kernel; wider ones, and all rows when it is 0, by 2-D copies. A 2-D
 * copy pays per row: on an H200 it ran at 60 to 90% of a contiguous copy
 * for rows under 32 KiB and at full speed from there (bench/copybw.cu).
 * The kernel runs at about 93% at any width but takes SMs from the
 * callbacks' kernels running beside it, so it only pays for narrow rows.
 */
static uint64_t narrow_row(void)
{
    return pm__env_uint("PMLIB_CUDA_NARROW_ROW", "a byte count", 0, (uint64_t)1 << 30,
                        NARROW_ROW);
}

/* On the stub's thread, its GPU current, before its first chunk: streams,
 * page-locked staging and events. Nothing of it at pm_init, so that a
 * process that never runs a cuda callback never makes a CUDA context (each
 * costs time and device memory, and many processes starting at once, as
 * a test suite does, queue for the driver). */
static int gpu_setup(cuda_priv_t *p)
{
    int rc = 0;
    for (int i = 0; i < SLOTS && rc == 0; i++)
        rc = slot_init(&p->slot[i]);
    for (int i = 0; i < CHUNK_STATES && rc == 0; i++) {
        rc = PM__CUDA(PM__LOG_ERROR, cudaEventCreateWithFlags(&p->cstate[i].merged,
                                                              cudaEventDisableTiming));
        if (rc == 0)
            rc = PM__CUDA(PM__LOG_ERROR, cudaEventCreateWithFlags(&p->cstate[i].home_done,
                                                                  cudaEventDisableTiming));
    }
    p->ready = true; /* also when it failed: cuda_fini frees what was made */
    return rc;
}

static int cuda_init(pm__stub_t *s)
{
    cuda_priv_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory for gpu stub %d", s->index);
    s->priv = p;
    p->gpu.ordinal = s->device_index;
    int rc = gpu_query(s->device_index, &p->gpu);
    p->cap = memory_cap(p->gpu.mem_bytes);
    p->narrow_row = narrow_row();
    if (rc != 0)
        cuda_fini(s);
    return rc;
}

/* False once a sticky CUDA error has made the stub's GPU unusable for the
 * rest of the process: the stub takes no more work. */
static bool cuda_usable(const pm__stub_t *s)
{
    const cuda_priv_t *p = s->priv;
    return p != NULL && !p->broken;
}

const pm__device_ops_t pm__cuda_ops = {
    .name = "cuda",
    .kind = PM_DEVICE_GPU,
    .init = cuda_init,
    .ready = cuda_ready,
    .run_chunk = cuda_run_chunk,
    .usable = cuda_usable,
    .fini = cuda_fini,
};

/* ---- discovery ----------------------------------------------------------------- */

/* PMLIB_NGPU: the most GPUs this process drives (default: all, up to 4096). */
static int env_max_gpus(void)
{
    return (int)pm__env_uint("PMLIB_NGPU", "a count", 0, 4096, 4096);
}

static bool listed(const int *list, int n, long d)
{
    for (int i = 0; i < n; i++)
        if (list[i] == d)
            return true;
    return false;
}

/* The ordinals to consider, in order: PMLIB_CUDA_DEVICES, else 0..n-1. */
static int device_list(int n, int *list)
{
    const char *v = getenv("PMLIB_CUDA_DEVICES");
    int k = 0;
    if (v == NULL || *v == '\0') {
        for (k = 0; k < n; k++)
            list[k] = k;
        return n;
    }
    for (const char *s = v; s != NULL; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        char *end;
        errno = 0;
        long d = strtol(s, &end, 10);
        if (end != s && errno == 0 && (*end == ',' || *end == '\0') && d >= 0 && d < n &&
            !listed(list, k, d))
            list[k++] = (int)d;
        else
            pm__warn("PMLIB_CUDA_DEVICES=%s: '%.*s' is not a new GPU ordinal of this host "
                     "(0..%d); skipping it", v, (int)strcspn(s, ","), s, n - 1);
    }
    return k;
}

/* Visible GPUs; 0 where there is no driver or device, which is no error. */
static int visible_count(void)
{
    int n = 0;
    if (PM__CUDA(QUIET, cudaGetDeviceCount(&n)) == 0)
        return n;
    cudaError_t e = last_cuda_error;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
        pm__info("no usable CUDA driver or GPU on host %d (%s); running without GPUs",
                 pm__rt.host, cudaGetErrorString(e));
    else
        pm__warn("CUDA cannot list the GPUs of host %d (%s: %s); running without GPUs",
                 pm__rt.host, cudaGetErrorName(e), cudaGetErrorString(e));
    PM__CUDA(QUIET, cudaGetLastError());
    return 0;
}

int pm__cuda_discover(pm__gpu_info_t **gpus, int *ngpu, int local_rank, int local_size)
{
    *gpus = NULL;
    *ngpu = 0;
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return PM__FAIL(PM_EINTERNAL, "pm__cuda_discover: local rank %d of %d", local_rank,
                        local_size);
    int max = env_max_gpus();
    int n = max == 0 ? 0 : visible_count();
    if (n <= 0)
        return 0;
    int *list = malloc((size_t)n * sizeof *list);
    pm__gpu_info_t *g = calloc((size_t)n, sizeof *g);
    if (list == NULL || g == NULL) {
        free(list);
        free(g);
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory listing %d GPUs", n);
    }
    int nlist = device_list(n, list), k = 0;
    /* PMLIB_GPU_SHARE=1: every rank of the machine drives every listed GPU
     * (ranks sharing GPUs, e.g. under MPS); by default they are dealt out. */
    if (pm__env_uint("PMLIB_GPU_SHARE", "0 or 1", 0, 1, 0) == 1) {
        local_rank = 0;
        local_size = 1;
    }
    for (int i = local_rank; i < nlist && k < max; i += local_size)
        k += gpu_query(list[i], &g[k]) == 0;
    free(list);
    pm__info("host %d, local rank %d of %d: %d of %d visible GPUs", pm__rt.host, local_rank,
             local_size, k, n);
    if (k == 0) {
        free(g);
        g = NULL;
    }
    *gpus = g;
    *ngpu = k;
    return 0;
}

/* ---- page-locked memories -------------------------------------------------------- */

void *pm__cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    /* Portable: every GPU of the process may copy from it at full speed. */
    if (PM__CUDA(QUIET, cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable)) != 0)
        return NULL;
    return p;
}

void pm__cuda_host_free(void *p)
{
    if (p != NULL)
        PM__CUDA(PM__LOG_WARN, cudaFreeHost(p));
}
