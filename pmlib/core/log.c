/* One-line log messages on stderr, filtered by PMLIB_LOG. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

atomic_int pm__log_threshold = PM__LOG_WARN;
/* The host in each line: set once pm_init knows it (atomic: a refused
 * pm_init on another thread may log meanwhile). */
static atomic_int log_host;

void pm__log_set_host(int host)
{
    atomic_store(&log_host, host);
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void pm__log_init(void)
{
    const char *v = getenv("PMLIB_LOG");
    pm__log_threshold = PM__LOG_WARN;
    if (v == NULL || *v == '\0')
        return;
    for (int i = 0; i < 4; i++) {
        if (strcmp(v, level_names[i]) == 0) {
            pm__log_threshold = i;
            return;
        }
    }
    pm__log(PM__LOG_WARN, "PMLIB_LOG=%s is not one of error, warn, info, debug; using warn", v);
}

void pm__log(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (level > pm__log_threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so lines of several threads do not interleave. */
    fprintf(stderr, "pmlib[%d]: %s: %s\n", atomic_load(&log_host),
            level_names[level], line);
}

static double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * The clock of every timing (chunks, tasks, waits): the processor's time
 * stamp counter, scaled by its rate against CLOCK_MONOTONIC measured once,
 * where the kernel keeps time by it too (invariant, the same on every
 * core). clock_gettime cost 38 ns on the 16-core GPU host and, reading
 * the counter in order, waited for the loads before it; every submit
 * reads the clock, and every batch of chunks and task's end (100,000
 * empty tasks there: 0.74 -> 0.60 us a task). Elsewhere, or with
 * PMLIB_CLOCK=monotonic, clock_gettime itself.
 */
static struct {
    double t0, s_per_tick;
    uint64_t tsc0;
} clk;
static atomic_int clk_state; /* 0: not set up, 1: the counter, 2: clock_gettime */

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <x86intrin.h>

static bool kernel_keeps_tsc(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8))) /* invariant */
        return false;
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f == NULL)
        return false;
    char name[32] = "";
    bool tsc = fgets(name, sizeof name, f) != NULL && strncmp(name, "tsc", 3) == 0 &&
               (name[3] == '\n' || name[3] == '\0');
    fclose(f);
    return tsc;
}

/* A reading of the clock and the counter at once, the tightest of a few
 * between two readings of the counter; returns their distance (ticks). */
static uint64_t clock_pair(double *m, uint64_t *c)
{
    uint64_t best = UINT64_MAX;
    *m = monotonic_now();
    *c = __rdtsc();
    for (int i = 0; i < 8; i++) {
        uint64_t a = __rdtsc();
        double t = monotonic_now();
        uint64_t b = __rdtsc();
        if (b >= a && b - a < best) {
            best = b - a;
            *m = t;
            *c = a + (b - a) / 2;
        }
    }
    return best;
}

void pm__clock_init(void)
{
    if (atomic_load(&clk_state) != 0)
        return; /* once per process: a later pm_init keeps it */
    const char *v = getenv("PMLIB_CLOCK");
    if (v != NULL && *v != '\0' && strcmp(v, "monotonic") != 0 && strcmp(v, "tsc") != 0)
        pm__log(PM__LOG_WARN, "PMLIB_CLOCK=%s is not tsc or monotonic; using the default", v);
    if ((v != NULL && strcmp(v, "monotonic") == 0) || !kernel_keeps_tsc()) {
        atomic_store(&clk_state, 2);
        return;
    }
    /* The rate over a millisecond, or longer until the uncertainty of
     * the two ends is under 1e-4 of it (50 ms at most): each end is the
     * tightest of a few readings of the clock between two of the counter,
     * so that a thread preempted while it reads does not skew the rate. */
    double m0, m1;
    uint64_t c0, c1, w1;
    uint64_t w0 = clock_pair(&m0, &c0);
    do
        w1 = clock_pair(&m1, &c1);
    while (m1 - m0 < 1e-3 || ((double)(w0 + w1) > 1e-4 * (double)(c1 - c0) && m1 - m0 < 5e-2));
    double rate = (double)(c1 - c0) / (m1 - m0); /* ticks per second */
    if (c1 <= c0 || rate < 1e8 || rate > 1e11 || (double)(w0 + w1) > 1e-3 * (double)(c1 - c0)) {
        atomic_store(&clk_state, 2);
        return;
    }
    clk.t0 = m0;
    clk.tsc0 = c0;
    clk.s_per_tick = 1 / rate;
    atomic_store_explicit(&clk_state, 1, memory_order_release);
}

double pm__now(void)
{
    if (atomic_load_explicit(&clk_state, memory_order_acquire) == 1)
        return clk.t0 + (double)(int64_t)(__rdtsc() - clk.tsc0) * clk.s_per_tick;
    return monotonic_now();
}
#else
void pm__clock_init(void)
{
}

double pm__now(void)
{
    return monotonic_now();
}
#endif

/* Zeroed buffers from this size come straight from the kernel, as huge
 * pages where it offers them: a mirror fills as bytes arrive from another
 * host, and each small page of fresh memory was a fault in the receive.
 * An MPI receive of 16 MB on cpu2 took 13 to 18 ms into fresh small
 * pages, 6 to 11 into fresh huge pages, 5 into touched memory; on 2 x H200
 * nbody's first positions came to host 1 in 6.1 ms instead of 14.6. Under
 * AddressSanitizer, calloc as any buffer. */
#define PM__BIG_BYTES ((size_t)4 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define BIG_FROM_KERNEL 0
#else
#define BIG_FROM_KERNEL 1
#endif

void *pm__big_calloc(size_t bytes)
{
    if (!BIG_FROM_KERNEL || bytes < PM__BIG_BYTES)
        return calloc(1, bytes ? bytes : 1);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void pm__big_free(void *p, size_t bytes)
{
    if (p == NULL)
        return;
    if (!BIG_FROM_KERNEL || bytes < PM__BIG_BYTES)
        free(p);
    else
        munmap(p, bytes);
}

void *pm__aligned_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    return p;
}
