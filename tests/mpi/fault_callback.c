/*
 * A callback that fails on another host (run with 3 or more hosts).
 *
 * The cpu callback returns -7 on the last host and succeeds elsewhere.
 * Host 0 checks that the task fails with PM_ECALLBACK naming that host and
 * one of its subtasks, and that every other subtask's slice was written;
 * it then prints FAULT-OK and exits 0. Every other host's pm_finalize
 * reports the failure, so those ranks exit 1: the wrapper expects a
 * nonzero job status together with FAULT-OK.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmlib.h"

#define NAME "fault-callback"
#define NSUB 24u
#define WORDS 16u /* uint64 per slice: value words, then the host */
#define SENTINEL UINT64_C(0xDEADBEEFDEADBEEF)

static uint64_t value(uint64_t id, uint64_t j)
{
    return id * 1000003u + j * 7u + 1u;
}

static int fc_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    /* Read-write: a failed subtask's slice goes back as it came (the
     * sentinel), so host 0 can tell which subtasks failed. */
    return pm_subscribe(sub, 0, PM_READ_WRITE, info->id * WORDS * 8, WORDS * 8);
}

static int fc_cpu(const pm_subtask_info_t *info)
{
    uint64_t *s = (uint64_t *)info->mem[0] + info->id * WORDS;
    int n = pm_host_count();

    if (n >= 2 && info->host == n - 1)
        return -7;
    for (uint64_t j = 0; j + 1 < WORDS; j++)
        s[j] = value(info->id, j);
    s[WORDS - 1] = (uint64_t)info->host;
    return 0;
}

/* Host 0's checks; 0 when everything holds. */
static int check(void)
{
    int n = pm_host_count(), bad = 0;
    pm_memory_t m;
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;

    if (pm_memory_create(NSUB * WORDS * 8, &m) != 0)
        return 1;
    uint64_t *v = pm_memory_data(m);
    for (uint64_t k = 0; k < NSUB * WORDS; k++)
        v[k] = SENTINEL;
    pm_task_desc_init(&d);
    d.callbacks = NAME;
    d.subtasks = NSUB;
    /* Static shares: the last host surely runs (and fails) its own share. */
    d.sched = PM_SCHED_STATIC_EQUAL;
    if (pm_task_desc_add(&d, m, PM_READ_WRITE) != 0 || pm_task_submit(&d, &t) != 0)
        return 1;
    int rc = pm_task_wait(t);
    if (pm_task_stats(t, &st) != 0)
        return 1;
    printf("wait: %s; stats: status %s, failed_host %d, failed_subtask %llu, "
           "subtasks_remote %llu\n", pm_errname(rc), pm_errname(st.status),
           st.failed_host, (unsigned long long)st.failed_subtask,
           (unsigned long long)st.subtasks_remote);
    if (rc != PM_ECALLBACK || st.status != PM_ECALLBACK) {
        printf("expected PM_ECALLBACK\n");
        bad = 1;
    }
    if (st.failed_host != n - 1) {
        printf("expected failed_host %d\n", n - 1);
        bad = 1;
    }
    uint64_t failed = 0, ok = 0;
    for (uint64_t i = 0; i < NSUB; i++) {
        const uint64_t *s = v + i * WORDS;
        int untouched = 1, right = s[WORDS - 1] < (uint64_t)n - 1;
        for (uint64_t j = 0; j < WORDS; j++)
            untouched &= s[j] == SENTINEL;
        for (uint64_t j = 0; j + 1 < WORDS; j++)
            right &= s[j] == value(i, j);
        if (untouched)
            failed++;
        else if (right)
            ok++;
        else {
            printf("slice %llu is neither the sentinel nor right\n", (unsigned long long)i);
            bad = 1;
        }
    }
    printf("slices: %llu written right, %llu left by failed subtasks\n",
           (unsigned long long)ok, (unsigned long long)failed);
    if (failed == 0 || ok == 0) {
        printf("expected both written and failed slices\n");
        bad = 1;
    }
    if (st.failed_subtask >= NSUB) {
        printf("failed_subtask is out of range\n");
        bad = 1;
    } else if (v[st.failed_subtask * WORDS] != SENTINEL) {
        printf("failed_subtask %llu did not fail: it was not run by host %d\n",
               (unsigned long long)st.failed_subtask, n - 1);
        bad = 1;
    }
    pm_task_release(t);
    pm_memory_release(m);
    return bad;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;

    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = fc_subscribe;
    cb.cpu = fc_cpu;
    if (pm_callbacks_register(NAME, &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    if (pm_host_count() < 2) {
        printf("fault_callback needs at least 2 hosts\n");
        pm_finalize();
        return 77;
    }
    int bad = check();
    if (!bad)
        printf("FAULT-OK\n");
    fflush(stdout);
    pm_finalize();
    return bad;
}
