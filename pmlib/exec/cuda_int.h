/*
 * The GPU stub's own header, shared by its files: exec/cuda.c (the stub:
 * set-up, the pipeline of subtasks, chunks, discovery), exec/cuda_dir.c
 * (the device side of the memories: buffers, the read cache, mirrors),
 * exec/cuda_copy.c (copies between host and device),
 * exec/cuda_reduce.c (reduce outputs merged on the device) and
 * exec/cuda_node.c (copies from the GPUs of other hosts of this machine). Internal;
 * only these files include CUDA headers.
 */
#ifndef PMLIB_EXEC_CUDA_INT_H
#define PMLIB_EXEC_CUDA_INT_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "exec/check.h"
#include "exec/cuda.h"
#include "exec/subs.h"
#include "reduce/acc.h"
#include "core/ops.h"
#include "data/copies.h"
#include "data/node.h"

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
#define MAX_PEERS 16                   /* GPU stubs of one process that copy from each other */
#define PEER_USES 4                    /* peer mirrors one subtask copies a memory from */
#define NODE_USES 4                    /* mirrors of other hosts' GPUs it copies a memory from */
#define NODE_MAPS 16                   /* other hosts' mirrors a GPU keeps opened */

/* In pmlib/cuda/ (reduce_kernels.cu, stub_kernels.cu); both return a cudaError_t. */
int pm__cuda_reduce_apply(pm_reduce_op_t op, pm_type_t type, void *into, const void *from,
                          size_t count, void *stream);
int pm__cuda_fill(void *dst, const void *elem, int elem_bytes, size_t count, void *stream);
int pm__cuda_copy_rows(void *dst, const void *src, size_t width, size_t pitch, size_t rows,
                       void *stream);

/* ---- checking CUDA calls ------------------------------------------------ */

/* The error behind the last failed check on this thread, for the message of
 * the subtask it fails; each subtask starts with it clear. */
extern PM__TLS cudaError_t pm__cuda_last_error;

/*
 * Every CUDA runtime call goes through PM__CUDA: a failure is logged at
 * `level` naming the call and CUDA's message, remembered for the subtask's
 * message and turned into a pmlib code (PM_ENOMEM for device memory).
 * Failures that fail a subtask log at debug level only, since the task
 * logs its failure once when it finishes.
 */
#define PM__CUDA(level, call) pm__cuda_status((call), (level), #call, __FILE__, __LINE__)

int pm__cuda_status(cudaError_t e, int level, const char *call, const char *file, int line);

/* Forgets a failure that is not the subtask's (a fallback takes over, or
 * it was already returned): CUDA's last error and the one kept for the
 * subtask's message. */
static inline void pm__cuda_forget_error(void)
{
    PM__CUDA(QUIET, cudaGetLastError());
    pm__cuda_last_error = cudaSuccess;
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
    /* Its copy in the directory of copies (data/copies.h), first: what it
     * holds valid (once `filled` is reached), writes and has sent home;
     * `c.readers` counts other GPUs' subtasks in flight copying from it. */
    pm__copy_t c;
    dev_buf_t buf;
    cudaEvent_t filled;    /* after the latest copy into it, on whichever stream made it */
    int refs;              /* subtasks in flight using it */
    uint64_t used;         /* LRU tick */
    /* Published to the other hosts of this machine (exec/cuda_node.c):
     * its record in the machine's table (-1: none), the version it names,
     * and the mirror's CUDA IPC handle (ipc_state 1; -1: none to be had). */
    int node_rec;
    uint64_t node_version, node_gen;
    int ipc_state;
    cudaIpcMemHandle_t ipc;
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
    mirror_t *peer[PEER_USES]; /* USE_MIRROR: other GPUs' mirrors it copies from */
    int npeer;
    pm__node_hold_t node[NODE_USES]; /* ... and other hosts' GPUs' mirrors */
    int node_map[NODE_USES];         /* their openings in the stub's node_maps */
    int nnode;
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
    bool faulted;         /* the former: a kernel fault (a callback's) lost it */
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
    int peer_index;       /* in the process's table of GPU stubs (-1: not in it) */
    bool peer_ok[MAX_PEERS]; /* this GPU copies directly from that stub's GPU */
    /* The other hosts of this machine (exec/cuda_node.c): this GPU's row in
     * the machine's table (-1: none), the ordinal here of each row's GPU
     * (-2: not looked up; -1: not reachable directly), and the other hosts'
     * mirrors opened here. */
    int node_row;
    int node_dev[PM__NODE_ROWS];
    uint64_t node_gens;
    uint64_t node_news; /* the table's count of mirrors when nothing was left to open */
    struct node_map {
        int row, rec, refs;
        uint64_t gen;
        unsigned char *base;
    } node_maps[NODE_MAPS];
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

/* ---- between the files of the GPU stub -------------------------------------- */

/* exec/cuda_dir.c: device memory (a pool of idle buffers), the read cache,
 * the mirrors of whole memories, and a subtask's memories on the device. */
int pm__cu_dev_alloc(cuda_priv_t *p, size_t bytes, dev_buf_t *out);
void pm__cu_dev_free(cuda_priv_t *p, dev_buf_t *b);
int pm__cu_pool_get(cuda_priv_t *p, size_t need, dev_buf_t *out);
void pm__cu_pool_put(cuda_priv_t *p, dev_buf_t *b);
void pm__cu_cache_drop(cuda_priv_t *p, cache_entry_t *e);
void pm__cu_mirror_free(cuda_priv_t *p, mirror_t *mr);
int pm__cu_fresh_fill(run_t *r, slot_t *sl, int m, void *nat, uint64_t lo, uint64_t hi);
int pm__cu_open_all(run_t *r, slot_t *sl, chunk_state_t *cs, pm__subs_view_t v, pm_subtask_info_t *info);
void pm__cu_release_all(cuda_priv_t *p, slot_t *sl);
/* Marks part q of a mirror's written bytes as home: valid at the next version. */
int pm__cu_mirror_pending(mirror_t *mr, const pm__sub_t *q);
/* The process's GPU stubs, whose mirrors are read by each other under one
 * lock: joined at init (main thread), peer access enabled at set-up (the
 * stub's thread, its GPU current), left at fini. */
void pm__cu_peer_join(cuda_priv_t *p);
void pm__cu_peer_enable(cuda_priv_t *p);
void pm__cu_peer_leave(cuda_priv_t *p);

/* exec/cuda_node.c: mirrors shared with the GPUs of the other hosts of
 * this machine. Join at set-up, leave at fini (the stub's thread). The
 * owner publishes a mirror's written parts once home, and that it is
 * about to write it (stale parts dropped), and withdraws it before it
 * frees it (false: it is being read and must stay). A reader copies piece
 * q from another host's GPU that holds it (0), or returns NO_MIRROR when
 * none does or the copy cannot be issued (the host's memory serves it);
 * release_all drops what a use held. */
void pm__cu_node_join(cuda_priv_t *p);
void pm__cu_node_leave(cuda_priv_t *p);
void pm__cu_node_publish(cuda_priv_t *p, mirror_t *mr, bool written);
bool pm__cu_node_withdraw(cuda_priv_t *p, mirror_t *mr, bool wait);
int pm__cu_node_copy(run_t *r, slot_t *sl, mem_use_t *u, mirror_t *to, const pm__memory_t *mem,
                     const pm__sub_t *q);
void pm__cu_node_release(cuda_priv_t *p, mem_use_t *u);
/* While the slot's stream still computes: opens one mirror another host's
 * GPU published that is not opened here yet, ahead of its first use. */
void pm__cu_node_warm(run_t *r, const slot_t *sl);
/* With PMLIB_TRACE: a span of a GPU to GPU copy, until its stream has done it. */
void pm__cu_trace_copy(run_t *r, slot_t *sl, int from, int to, uint64_t bytes, double t0);

/* exec/cuda_copy.c: copies between host and device memory. */
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

int pm__cu_copy_in(run_t *r, slot_t *sl, void *dev_nat, const void *host_nat, bool pinned, parts_t ps);
int pm__cu_copy_out(run_t *r, slot_t *sl, const void *dev_nat, void *host_nat, bool pinned, parts_t ps,
                    bool wait);
parts_t pm__cu_range_parts(pm__sub_t *q, int m, uint64_t lo, uint64_t hi);
bool pm__cu_host_pinned(const void *ptr, void **mapped);

/* exec/cuda_reduce.c: reduce outputs merged on the device. */
int pm__cu_after_callback(run_t *r, slot_t *sl, chunk_state_t *cs, pm__subs_view_t v);
int pm__cu_merge_custom(run_t *r, slot_t *sl, pm__subs_view_t v, int m);

#endif /* PMLIB_EXEC_CUDA_INT_H */
