/*
 * The CUDA device kind: GPU discovery and the GPU stub's ops table.
 * Internal header, never installed. It includes no CUDA header, so core
 * files may include it in every build; without CUDA support discovery
 * finds no GPU.
 */
#ifndef PMLIB_EXEC_CUDA_H
#define PMLIB_EXEC_CUDA_H

#include "core/internal.h"

/* What discovery learns about one GPU. */
typedef struct pm__gpu_info {
    int ordinal;       /* CUDA ordinal, as CUDA_VISIBLE_DEVICES numbers them */
    char name[96];
    int major, minor;  /* compute capability */
    size_t mem_bytes;  /* total device memory */
    int sm_count;
} pm__gpu_info_t;

#if PMLIB_HAVE_CUDA

/*
 * Lists the GPUs this process drives; *gpus (free() it) gets *ngpu entries.
 * No driver or no device is not an error: 0 GPUs and return 0.
 *
 * Which GPUs: the visible ones, or those PMLIB_CUDA_DEVICES lists (comma-
 * separated ordinals, in that order). When `local_size` ranks share the
 * node, the i-th GPU of that list (0-based) goes to the rank with
 * i % local_size == local_rank, so no GPU has two owners. PMLIB_NGPU then
 * caps this rank's count (0 disables the GPUs without touching CUDA).
 */
int pm__cuda_discover(pm__gpu_info_t **gpus, int *ngpu, int local_rank, int local_size);

/*
 * GPU stubs: set s->device_index to the GPU's ordinal before init. run_chunk
 * follows the contract of the CPU stub's. PMLIB_CUDA_MEMORY_MB caps the
 * device memory a stub keeps for buffers and its read cache (default 3/4
 * of the GPU); above it, and whenever cudaMalloc runs out, idle buffers and
 * the least recently used cached ranges are freed.
 */
extern const pm__device_ops_t pm__cuda_ops;

/* pm__chunk_feed_t.ready: the chunk's inputs are still on their way. */
#define PM__FEED_LATER 1

/* Where a GPU stub streaming a task's chunks gets more and reports them. */
typedef struct pm__chunk_feed {
    /* Takes another chunk of the task for the stub; false when none is left
     * here (other hosts are asked then, and a later call may find chunks
     * they gave). */
    bool (*next)(struct pm__chunk_feed *f, uint64_t *chunk);
    /* Whether to take the next chunk before a slot is free for it: taking
     * it starts its inputs coming from another host. NULL or false: once
     * a slot is free, so that the chunk stays where a host that runs dry
     * may take it meanwhile. */
    bool (*ahead)(struct pm__chunk_feed *f);
    /* Before the chunk's first subtask is issued: whether its inputs are on
     * this host (those another host holds). 0: they are; PM__FEED_LATER:
     * still on their way (only when !wait; with wait it waits for them);
     * negative: they cannot come (the task has failed), and the chunk is
     * not run, only reported done. NULL: nothing to wait for. */
    int (*ready)(struct pm__chunk_feed *f, uint64_t chunk, bool wait);
    /* The chunk is complete (outputs home, reduce output pushed); it was
     * started at `since` (pm__now). Called once per chunk, the last call
     * may finish the task. */
    void (*done)(struct pm__chunk_feed *f, uint64_t chunk, double since);
} pm__chunk_feed_t;

/*
 * Runs chunk `chunk` of the task and then, with a feed, every chunk the
 * feed hands out, as one stream: the pipeline of subtasks in flight (one's
 * copy in, another's kernel, a third's copy out) never drains between
 * chunks, and each chunk is reported done as soon as it is complete.
 * Without a feed the chunk completes before the call returns and the
 * caller reports it.
 */
void pm__cuda_run_chunks(pm__stub_t *s, pm__task_t *t, uint64_t chunk, pm__chunk_feed_t *feed);

/* Page-locked host memory (DMA at full speed, no staging); NULL on failure. */
void *pm__cuda_host_alloc(size_t bytes);
void pm__cuda_host_free(void *p);
/* Page-locks memory made elsewhere (a shared memory's file), and undoes it. */
int pm__cuda_host_pin(void *p, size_t bytes);
void pm__cuda_host_unpin(void *p);

#else /* !PMLIB_HAVE_CUDA */

static inline int pm__cuda_discover(pm__gpu_info_t **gpus, int *ngpu, int local_rank,
                                    int local_size)
{
    (void)local_rank;
    (void)local_size;
    *gpus = NULL;
    *ngpu = 0;
    return 0;
}

#endif /* PMLIB_HAVE_CUDA */

#endif /* PMLIB_EXEC_CUDA_H */
