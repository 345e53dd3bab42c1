/*
 * Helpers shared by the sample apps and benchmarks: a wall clock, a checked
 * pmlib call, size arguments and the one-line result every app prints.
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
 * "OK", "MISMATCH" or "skipped".
 */
void app_print_result(const char *app, uint64_t n, double serial_s,
                      double pmlib_s, const char *verify);

#endif /* APPCOMMON_H */
