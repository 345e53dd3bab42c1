/*
 * Helpers shared by the sample apps and benchmarks: a wall clock, a checked
 * pmlib call, size arguments, the one-line result every app prints, the
 * bytes a run moved between hosts and the times of repeated runs (--runs).
 * They are here so that each app file shows only its own computation.
 */
#ifndef APPCOMMON_H
#define APPCOMMON_H

#include <stdint.h>

#include "pmlib.h"

/** Seconds on a monotonic clock; only differences mean anything. */
double app_now(void);

/**
 * Runs a pmlib call; when it returns an error (a negative PM_E* code) prints
 * the error and the call's text and exits 1. Otherwise its value is the
 * call's, so `int i = APP_CHECK(pm_task_desc_add(...));` keeps the index.
 */
#define APP_CHECK(call) app_check((call), #call, __FILE__, __LINE__)

/** What APP_CHECK expands to. */
int app_check(int rc, const char *call, const char *file, int line);

/**
 * Parses a size such as "10000000", "1e7", "6e7", "60M" or "1.5k" (k, M,
 * G, T are powers of 10) that must be a whole number. Returns 0, or -1 with
 * *why set to a short reason ("not a number", "too large"...).
 */
int app_parse_size(const char *text, uint64_t *value, const char **why);

/**
 * app_parse_size for command-line option `opt`; on a bad value prints one
 * line naming the option and exits 2 (see app_usage_error).
 */
uint64_t app_size_arg(const char *prog, const char *opt, const char *text);

#ifdef __GNUC__
#define APP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define APP_PRINTF(f, a)
#endif

/** Prints "prog: <message> (see 'prog --help')" to stderr and exits 2. */
_Noreturn void app_usage_error(const char *prog, const char *fmt, ...)
    APP_PRINTF(2, 3);

/**
 * Prints the standard result line, key=value so scripts can read it:
 *   result app=arraysum n=10000000 serial_s=9.81 pmlib_s=1.26 speedup=7.79 verify=OK
 * serial_s < 0 means the serial version did not run (no speedup); verify is
 * "OK", "MISMATCH" or "skipped". `moved` is the reported run's tasks, summed
 * by app_add_stats (appdevice.h); with more than one host the line also
 * says what they moved between hosts (see app_print_moved), before verify:
 *   hosts=2 moved_mb=480.000 sent_mb=212.345 moved_gbs=1.2340
 */
void app_print_result(const char *app, uint64_t n, double serial_s,
                      double pmlib_s, const pm_task_stats_t *moved,
                      const char *verify);

/* ------------------------------------------------------------------------ */
/* Bytes between hosts                                                       */
/* ------------------------------------------------------------------------ */

/**
 * With more than one host, prints what the tasks in `st` (summed by
 * app_add_stats, appdevice.h) moved between hosts: bytes_moved (before
 * compression), bytes_sent (as sent) and the rate, bytes_moved over their
 * summed run_seconds:
 *           hosts: 2, moved 1.23 GB (sent 0.98 GB) at 4.56 GB/s
 * On one host prints nothing.
 */
void app_print_moved(const pm_task_stats_t *st);

/* ------------------------------------------------------------------------ */
/* --runs: the pmlib part run several times on the same memories            */
/* ------------------------------------------------------------------------ */

/*
 * The first run in a process pays one-time costs (CUDA context, cuBLAS
 * handles, cuFFT plans, page-locking) that a program repeating the work pays
 * once; the apps report the best run and show the first beside it.
 */

/** The most runs --runs accepts. */
#define APP_MAX_RUNS 1000u

/**
 * The value of --runs (`opt`), 1 to APP_MAX_RUNS; anything else prints one
 * line naming the option and exits 2.
 */
unsigned app_runs_arg(const char *prog, const char *opt, const char *text);

/** The times of a series of runs; start with {.runs = N}. */
struct app_runs {
    unsigned runs; /* runs asked for */
    unsigned done; /* runs recorded so far */
    double first, best;
    pm_task_stats_t best_stats; /* the best run's tasks, summed */
};

/**
 * Records one run's seconds and its tasks' stats (summed by app_add_stats)
 * and starts its line on stdout: "pmlib:  0.412 s" for a single run,
 * "pmlib run 2/3:  0.398 s" in a series. The caller adds its own figures
 * and the newline.
 */
void app_runs_record(struct app_runs *r, double seconds,
                     const pm_task_stats_t *st);

/**
 * app_print_result with the best run as the pmlib time and its bytes between
 * hosts. After more than one run, the line before it says so:
 *   pmlib:  0.398 s, best of 3 runs (first 0.412 s)
 */
void app_print_result_runs(const char *app, uint64_t n, double serial_s,
                           const struct app_runs *r, const char *verify);

#endif /* APPCOMMON_H */
