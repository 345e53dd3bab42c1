/*
 * The GPU side of apps/pagerank (kernels/pagerank.cu). Plain C, no CUDA
 * header: `stream` is the cudaStream_t pmlib hands a cuda callback.
 */
#ifndef PMLIB_KERNELS_PAGERANK_H
#define PMLIB_KERNELS_PAGERANK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * One pull step for pages [first, last) (a group of lanes per page), all
 * pointers device pointers in the natural view (page v's in-edges are
 * src[off[v] .. off[v + 1])):
 *   next_rank[v] = base + damping * sum of share[u] over in-edges u
 *   next_share[v] = next_rank[v] * inv_deg[v]
 * and adds to stats[0] the next ranks of dangling pages (inv_deg 0), to
 * stats[1] the sum of |next_rank[v] - rank[v]|. Enqueues on `stream` and
 * returns 0, or prints one line and returns nonzero.
 */
int pagerank_gpu_pull(const uint64_t *off, const uint32_t *src,
                      const double *inv_deg, const double *rank,
                      const double *share, double *next_rank,
                      double *next_share, double *stats, uint64_t first,
                      uint64_t last, double base, double damping,
                      void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_KERNELS_PAGERANK_H */
