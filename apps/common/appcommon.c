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

void app_print_result(const char *app, uint64_t n, double serial_s,
                      double pmlib_s, const char *verify)
{
    printf("result app=%s n=%" PRIu64, app, n);
    if (serial_s >= 0)
        printf(" serial_s=%.4f pmlib_s=%.4f speedup=%.2f", serial_s, pmlib_s,
               serial_s / pmlib_s);
    else
        printf(" serial_s=- pmlib_s=%.4f speedup=-", pmlib_s);
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

void app_runs_record(struct app_runs *r, double seconds)
{
    if (r->done == 0 || seconds < r->best)
        r->best = seconds;
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
    app_print_result(app, n, serial_s, r->best, verify);
}
