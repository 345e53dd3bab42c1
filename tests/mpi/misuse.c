/*
 * Misuse that must be caught, not left to corrupt results (run on 1 host or
 * under mpiexec on 2).
 *
 * `misuse check`: with PMLIB_CHECK=1, the last subtask of each task
 * misbehaves (under static shares it runs on the last host):
 *   read     reads a neighbour's input, which it did not subscribe: it sees
 *            PM_CHECK_POISON and the task still succeeds;
 *   write    writes a neighbour's output: PM_ESTRAY naming the subtask,
 *            memory 1 and its bytes, and the neighbour's output is intact;
 *   readonly writes its slice of a memory the task added as PM_READ:
 *            PM_EACCESS, and the memory is unchanged;
 *   reduce   writes past its subscription of a reduced memory: PM_ESTRAY
 *            instead of a corrupted heap.
 * Host 0 checks each task's code, failed subtask and host, and the line
 * pmlib logged for it, then prints MISUSE-OK.
 *
 * `misuse reinit`: pm_init after pm_finalize returns PM_EINIT (under
 * mpiexec MPI cannot start again) and the process exits cleanly.
 *
 * `misuse tasks N`: runs N small tasks and prints how much this process's
 * resident memory grew over them ("rss-growth-kb K"), so that the runs
 * with and without PMLIB_TRACE can be compared.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmlib.h"

#define NAME "misuse"
#define NSUB 8u
#define NRED 4u /* int64 elements of the reduced memory */

enum which { READ_STRAY, WRITE_STRAY, WRITE_READONLY, REDUCE_PAST, PLAIN };

static int ms_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int w = *(const int *)info->conf;
    size_t at = info->id * 8;

    if (w == REDUCE_PAST) /* elements 0 and 1 of the reduced memory */
        return pm_subscribe(sub, 0, PM_WRITE, 0, 16);
    int rc = pm_subscribe(sub, 0, PM_READ, at, 8);
    return rc != 0 ? rc : pm_subscribe(sub, 1, PM_WRITE, at, 8);
}

static int ms_cpu(const pm_subtask_info_t *info)
{
    int w = *(const int *)info->conf;
    uint64_t id = info->id;
    int culprit = id == info->count - 1;
    const uint64_t *in = info->mem[0];
    uint64_t *out = info->mem[1];

    if (w == REDUCE_PAST) {
        int64_t *acc = info->mem[0];
        acc[0] += 1;
        acc[1] += (int64_t)id;
        if (culprit)
            acc[2] = acc[3] = 99; /* bytes 16..31: not subscribed */
        return 0;
    }
    out[id] = in[id] * 2;
    if (culprit && w == READ_STRAY)
        out[id] = in[id - 1]; /* not subscribed: poison */
    if (culprit && w == WRITE_STRAY)
        out[id - 1] = 12345;
    if (culprit && w == WRITE_READONLY)
        ((uint64_t *)info->mem[0])[id] = ~in[id]; /* every byte changes */
    return 0;
}

/* Runs task `w` with stderr sent to a file; returns its status, fills the
 * stats and what pmlib logged. */
static int run(int w, pm_memory_t m0, pm_memory_t m1, pm_task_stats_t *st, char *log, size_t cap)
{
    pm_task_desc_t d;
    pm_task_t t;
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);

    if (tmp == NULL || saved < 0)
        return PM_EINTERNAL;
    fflush(stderr);
    dup2(fileno(tmp), STDERR_FILENO);
    pm_task_desc_init(&d);
    d.callbacks = NAME;
    d.subtasks = NSUB;
    d.conf = &w;
    d.conf_bytes = sizeof w;
    d.sched = PM_SCHED_STATIC_EQUAL; /* the last subtask runs on the last host */
    int rc;
    if (w == REDUCE_PAST) {
        rc = pm_task_desc_add(&d, m0, PM_WRITE);
        if (rc >= 0)
            rc = pm_task_desc_reduce(&d, 0, PM_REDUCE_SUM, PM_INT64);
    } else {
        rc = pm_task_desc_add(&d, m0, w == WRITE_READONLY ? PM_READ : PM_READ_WRITE);
        if (rc >= 0)
            rc = pm_task_desc_add(&d, m1, PM_WRITE);
    }
    if (rc >= 0)
        rc = pm_task_submit(&d, &t);
    if (rc == 0) {
        rc = pm_task_wait(t);
        pm_task_stats(t, st);
        pm_task_release(t);
    }
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(log, 1, cap - 1, tmp);
    log[n] = '\0';
    fclose(tmp);
    fputs(log, stderr); /* keep it in the test's log */
    return rc;
}

static int expect(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    return ok ? 0 : 1;
}

static int check_mode(void)
{
    int bad = 0, last = pm_host_count() - 1;
    pm_memory_t m0, m1, mr;
    pm_task_stats_t st;
    char log[4096], want[256];

    if (pm_memory_create(NSUB * 8, &m0) != 0 || pm_memory_create(NSUB * 8, &m1) != 0 ||
        pm_memory_create(NRED * 8, &mr) != 0)
        return 1;
    uint64_t *in = pm_memory_data(m0), *out = pm_memory_data(m1);
    for (uint64_t i = 0; i < NSUB; i++)
        in[i] = i + 1;

    /* A stray read sees the poison; nothing to fail. */
    int rc = run(READ_STRAY, m0, m1, &st, log, sizeof log);
    unsigned char poison[8];
    memset(poison, PM_CHECK_POISON, sizeof poison);
    bad |= expect(rc == 0, "stray read: the task succeeds");
    bad |= expect(memcmp(&out[NSUB - 1], poison, 8) == 0, "stray read: the subtask read the poison pattern");
    bad |= expect(out[NSUB - 2] == 2 * (NSUB - 1), "stray read: the other subtasks read their inputs");

    /* A stray write fails the task and does not land. */
    rc = run(WRITE_STRAY, m0, m1, &st, log, sizeof log);
    snprintf(want, sizeof want, "subtask %u wrote bytes %u..%u of memory 1 outside its subscriptions "
             "(host %d,", NSUB - 1, (NSUB - 2) * 8, (NSUB - 1) * 8 - 1, last);
    bad |= expect(rc == PM_ESTRAY && st.status == PM_ESTRAY, "stray write: PM_ESTRAY");
    bad |= expect(st.failed_subtask == NSUB - 1 && st.failed_host == last,
                  "stray write: failed_subtask and failed_host name the culprit");
    bad |= expect(strstr(log, want) != NULL, want);
    bad |= expect(out[NSUB - 2] == 2 * (NSUB - 1), "stray write: the neighbour's output is intact");

    /* A write into a memory added as PM_READ. */
    rc = run(WRITE_READONLY, m0, m1, &st, log, sizeof log);
    snprintf(want, sizeof want, "subtask %u wrote bytes %u..%u of memory 0, which the task added as PM_READ",
             NSUB - 1, (NSUB - 1) * 8, NSUB * 8 - 1);
    bad |= expect(rc == PM_EACCESS && st.failed_subtask == NSUB - 1 && st.failed_host == last,
                  "write into a PM_READ memory: PM_EACCESS naming the culprit");
    bad |= expect(strstr(log, want) != NULL, want);
    bad |= expect(in[NSUB - 1] == NSUB, "write into a PM_READ memory: the memory is unchanged");

    /* A write past the subscription of a reduced memory. */
    rc = run(REDUCE_PAST, mr, PM_MEMORY_NULL, &st, log, sizeof log);
    snprintf(want, sizeof want, "subtask %u wrote bytes 16..31 of memory 0 outside its subscriptions",
             NSUB - 1);
    bad |= expect(rc == PM_ESTRAY && st.failed_subtask == NSUB - 1 && st.failed_host == last,
                  "reduced memory: PM_ESTRAY naming the culprit");
    bad |= expect(strstr(log, want) != NULL, want);

    pm_memory_release(m0);
    pm_memory_release(m1);
    pm_memory_release(mr);
    return bad;
}

static long rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb;
}

static int many_tasks(long n)
{
    pm_memory_t m0, m1;
    int w = PLAIN;
    long before = 0;

    if (pm_memory_create(NSUB * 8, &m0) != 0 || pm_memory_create(NSUB * 8, &m1) != 0)
        return 1;
    for (long k = 0; k < n; k++) {
        pm_task_desc_t d;
        pm_task_t t;
        if (k == n / 10) /* after the warm-up: pools and caches are grown */
            before = rss_kb();
        pm_task_desc_init(&d);
        d.callbacks = NAME;
        d.subtasks = NSUB;
        d.conf = &w;
        d.conf_bytes = sizeof w;
        if (pm_task_desc_add(&d, m0, PM_READ_WRITE) < 0 || pm_task_desc_add(&d, m1, PM_WRITE) < 0 ||
            pm_task_submit(&d, &t) != 0 || pm_task_wait(t) != 0 || pm_task_release(t) != 0)
            return 1;
    }
    printf("rss-growth-kb %ld\n", rss_kb() - before);
    pm_memory_release(m0);
    pm_memory_release(m1);
    return 0;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    const char *mode = argc > 1 ? argv[1] : "check";

    if (strcmp(mode, "check") == 0)
        setenv("PMLIB_CHECK", "1", 1);
    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = ms_subscribe;
    cb.cpu = ms_cpu;
    if (pm_callbacks_register(NAME, &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (strcmp(mode, "reinit") == 0) {
        /* Every host: pm_init again after pm_finalize is refused, not an
         * MPI abort, and leaves the process able to exit cleanly. */
        if (pm_finalize() != 0)
            return 1;
        int rc = pm_init(&argc, &argv);
        printf("host reinit: %s\n", pm_errname(rc));
        return rc == PM_EINIT && pm_finalize() == PM_ENOTINIT ? 0 : 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    int bad;
    if (strcmp(mode, "tasks") == 0)
        bad = many_tasks(argc > 2 ? atol(argv[2]) : 20000);
    else
        bad = check_mode();
    if (!bad)
        printf("MISUSE-OK\n");
    fflush(stdout);
    pm_finalize();
    return bad;
}
