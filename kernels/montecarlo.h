/*
 * What apps/montecarlo shares with its GPU code (kernels/montecarlo.cu):
 * the layout of an option and of a price, and the launcher. Plain C, no
 * CUDA header: `stream` is the cudaStream_t pmlib hands a cuda callback.
 */
#ifndef PMLIB_KERNELS_MONTECARLO_H
#define PMLIB_KERNELS_MONTECARLO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A European option on a stock following geometric Brownian motion. */
struct mc_option {
    double s;     /**< spot price */
    double k;     /**< strike */
    double t;     /**< years to expiry */
    double r;     /**< risk-free rate, continuously compounded */
    double sigma; /**< volatility */
};

/** Monte Carlo prices (discounted mean payoffs) and their standard errors. */
struct mc_price {
    double call, put;
    double call_se, put_se;
};

/**
 * Prices options [first, first + count) with `paths` paths each, one block
 * per option; opt and price are natural-view device pointers. The random
 * numbers depend only on (seed, option index), not on which GPU or subtask
 * runs it. Enqueues on `stream` and returns 0, or prints one line and
 * returns a nonzero CUDA status.
 */
int montecarlo_gpu(const struct mc_option *opt, struct mc_price *price,
                   uint64_t first, uint64_t count, uint64_t paths,
                   uint64_t seed, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_KERNELS_MONTECARLO_H */
