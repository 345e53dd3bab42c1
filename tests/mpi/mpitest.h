/*
 * Helpers shared by the MPI test programs (which do not use Check): the
 * FAIL line they print, and the value mixer behind their test data.
 */
#ifndef PMLIB_MPITEST_H
#define PMLIB_MPITEST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints "FAIL: ..." on a line of its own; returns 1 (a failed check). */
static inline int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    return 1;
}

/* splitmix64: a word that depends on every bit of its position. */
static inline uint64_t mix(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

/* Whether the hosts' memories cross between them as bytes (PMLIB_SHM=0,
 * which mpi-common.sh sets unless told otherwise): the byte counts the
 * tests expect. Otherwise the hosts of this machine share large memories
 * in place, and shared.c checks that nothing of them moves. */
static inline int wire_moves(void)
{
    const char *v = getenv("PMLIB_SHM");
    return v != NULL && strcmp(v, "0") == 0;
}

#endif /* PMLIB_MPITEST_H */
