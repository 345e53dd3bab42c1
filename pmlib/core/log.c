/* One-line log messages on stderr, filtered by PMLIB_LOG. */
#include "core/internal.h"

#include <stdarg.h>
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

double pm__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
