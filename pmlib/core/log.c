/* One-line log messages on stderr, filtered by PMLIB_LOG. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void *pm__aligned_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    return p;
}
