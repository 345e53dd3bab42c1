/* Helpers shared by the sample apps and benchmarks; see appcommon.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */

#include "appcommon.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double app_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int app_check(int rc, const char *call, const char *file, int line)
{
    if (rc >= 0)
        return rc;
    /* In an MPI job every rank prints to one terminal: say which one. */
    if (pm_host_id() >= 0)
        fprintf(stderr, "host %d: ", pm_host_id());
    fprintf(stderr, "%s failed: %s (%s) at %s:%d\n", call, pm_errname(rc),
            pm_strerror(rc), file, line);
    exit(1);
}

void app_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '%s --help')\n", prog);
    exit(2);
}

/* v = v * 10 + d, or -1 when that does not fit. */
static int push_digit(uint64_t *v, unsigned d)
{
    if (*v > (UINT64_MAX - d) / 10)
        return -1;
    *v = *v * 10 + d;
    return 0;
}

/*
 * Reads "123", "1.5" or ".5" into mantissa * 10^scale. Zeros at the end of a
 * fraction are skipped so that "1.0000000000000000000000" does not overflow.
 * Returns the digits read, or -1 on overflow.
 */
static int read_decimal(const char **p, uint64_t *mant, long *scale)
{
    int ndigits = 0;
    long zeros = 0;

    for (; isdigit((unsigned char)**p); (*p)++, ndigits++)
        if (push_digit(mant, (unsigned)(**p - '0')) != 0)
            return -1;
    if (**p != '.')
        return ndigits;
    for ((*p)++; isdigit((unsigned char)**p); (*p)++, ndigits++) {
        if (**p == '0') {
            zeros++;
            continue;
        }
        for (; zeros > 0; zeros--, (*scale)--)
            if (push_digit(mant, 0) != 0)
                return -1;
        if (push_digit(mant, (unsigned)(**p - '0')) != 0)
            return -1;
        (*scale)--;
    }
    return ndigits;
}

/* Reads an optional "e[+-]digits"; huge exponents are clamped, which is safe
 * because they can only give "too large" or "not a whole number" anyway. */
static int read_exponent(const char **p, long *scale)
{
    long e = 0, sign = 1;

    if (**p != 'e' && **p != 'E')
        return 0;
    (*p)++;
    if (**p == '+' || **p == '-')
        sign = *(*p)++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)**p))
        return -1;
    for (; isdigit((unsigned char)**p); (*p)++)
        if (e < 100000)
            e = e * 10 + (**p - '0');
    *scale += sign * e;
    return 0;
}

/* Decimal suffixes only; 'm' is refused because it reads as milli. */
static int suffix_exponent(char c)
{
    switch (c) {
    case 'k': case 'K': return 3;
    case 'M': return 6;
    case 'G': return 9;
    case 'T': return 12;
    default: return -1;
    }
}

int app_parse_size(const char *text, uint64_t *value, const char **why)
{
    const char *p = text;
    uint64_t mant = 0;
    long scale = 0;
    int ndigits;

    *why = NULL;
    if (*p == '-') {
        *why = "must not be negative";
        return -1;
    }
    ndigits = read_decimal(&p, &mant, &scale);
    if (ndigits < 0)
        goto too_large;
    if (ndigits == 0 || read_exponent(&p, &scale) != 0)
        goto not_a_number;
    if (*p != '\0' && suffix_exponent(*p) >= 0)
        scale += suffix_exponent(*p++);
    if (*p != '\0')
        goto not_a_number;
    for (; scale < 0 && mant != 0; scale++, mant /= 10)
        if (mant % 10 != 0) {
            *why = "not a whole number";
            return -1;
        }
    for (; scale > 0 && mant != 0; scale--)
        if (push_digit(&mant, 0) != 0)
            goto too_large;
    *value = mant;
    return 0;

too_large:
    *why = "too large";
    return -1;
not_a_number:
    *why = "not a number (write e.g. 1000000, 6e7, 60M or 1.5k)";
    return -1;
}

uint64_t app_size_arg(const char *prog, const char *opt, const char *text)
{
    uint64_t value;
    const char *why;

    if (text == NULL)
        app_usage_error(prog, "%s needs a value", opt);
    if (app_parse_size(text, &value, &why) != 0)
        app_usage_error(prog, "%s '%s': %s", opt, text, why);
    return value;
}

/*
 * Bytes per second between hosts, or -1 when the tasks never ran. Run
 * seconds rather than submit-to-end ones: tasks submitted together (nbody's
 * steps) wait for one another, and those waits would be counted again and
 * again.
 */
static double moved_rate(const pm_task_stats_t *st)
{
    return st->run_seconds > 0 ? (double)st->bytes_moved / st->run_seconds
                               : -1;
}

/* Writes v with a decimal prefix: "512 B", "4.81 MB", "1.23 GB/s". */
static const char *with_prefix(char *buf, size_t size, double v,
                               const char *unit)
{
    static const char prefix[] = "kMGTPE";
    int p = -1;

    for (; v >= 1000 && prefix[p + 1] != '\0'; p++)
        v /= 1000;
    if (p < 0)
        snprintf(buf, size, "%.0f %s", v, unit);
    else
        snprintf(buf, size, "%.2f %c%s", v, prefix[p], unit);
    return buf;
}

void app_print_moved(const pm_task_stats_t *st)
{
    char moved[32], sent[32], rate[32];
    double r = moved_rate(st);

    if (pm_host_count() <= 1)
        return;
    printf("        hosts: %d, moved %s (sent %s)", pm_host_count(),
           with_prefix(moved, sizeof moved, (double)st->bytes_moved, "B"),
           with_prefix(sent, sizeof sent, (double)st->bytes_sent, "B"));
    if (r >= 0)
        printf(" at %s", with_prefix(rate, sizeof rate, r, "B/s"));
    printf("\n");
}

void app_print_result(const char *app, uint64_t n, double serial_s,
                      double pmlib_s, const pm_task_stats_t *moved,
                      const char *verify)
{
    printf("result app=%s n=%" PRIu64, app, n);
    if (serial_s >= 0)
        printf(" serial_s=%.4f pmlib_s=%.4f speedup=%.2f", serial_s, pmlib_s,
               serial_s / pmlib_s);
    else
        printf(" serial_s=- pmlib_s=%.4f speedup=-", pmlib_s);
    if (pm_host_count() > 1) {
        printf(" hosts=%d moved_mb=%.3f sent_mb=%.3f", pm_host_count(),
               (double)moved->bytes_moved / 1e6,
               (double)moved->bytes_sent / 1e6);
        if (moved_rate(moved) >= 0)
            printf(" moved_gbs=%.4f", moved_rate(moved) / 1e9);
        else
            printf(" moved_gbs=-");
    }
    printf(" verify=%s\n", verify);
    fflush(stdout);
}

unsigned app_runs_arg(const char *prog, const char *opt, const char *text)
{
    uint64_t runs = app_size_arg(prog, opt, text);

    if (runs == 0 || runs > APP_MAX_RUNS)
        app_usage_error(prog, "%s '%s': must be 1 to %u", opt, text,
                        APP_MAX_RUNS);
    return (unsigned)runs;
}

void app_runs_record(struct app_runs *r, double seconds,
                     const pm_task_stats_t *st)
{
    if (r->done == 0 || seconds < r->best) {
        r->best = seconds;
        r->best_stats = *st;
    }
    if (r->done++ == 0)
        r->first = seconds;
    if (r->runs > 1)
        printf("pmlib run %u/%u:  %.3f s", r->done, r->runs, seconds);
    else
        printf("pmlib:  %.3f s", seconds);
}

void app_print_result_runs(const char *app, uint64_t n, double serial_s,
                           const struct app_runs *r, const char *verify)
{
    if (r->done > 1)
        printf("pmlib:  %.3f s, best of %u runs (first %.3f s)\n", r->best,
               r->done, r->first);
    app_print_result(app, n, serial_s, r->best, &r->best_stats, verify);
}
