/*
 * A host that did not register a task's callbacks (run with 3 hosts).
 *
 * Host 1 skips the registration that every other host makes. Host 0's task
 * must fail with PM_ENOCALLBACK naming host 1 (the runtime also logs why on
 * stderr, which the wrapper checks); host 0 then prints FAULT-OK and exits
 * 0, and the other hosts exit 1 because their pm_finalize reports the
 * failed task.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pmlib.h"

#define NAME "fault-missing"
#define NSUB 12u

static int fm_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

static int fm_cpu(const pm_subtask_info_t *info)
{
    ((uint64_t *)info->mem[0])[info->id] = info->id + 1;
    return 0;
}

static int check(void)
{
    pm_memory_t m;
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;
    int bad = 0;

    if (pm_memory_create(NSUB * 8, &m) != 0)
        return 1;
    pm_task_desc_init(&d);
    d.callbacks = NAME;
    d.subtasks = NSUB;
    if (pm_task_desc_add(&d, m, PM_WRITE) != 0 || pm_task_submit(&d, &t) != 0)
        return 1;
    int rc = pm_task_wait(t);
    if (pm_task_stats(t, &st) != 0)
        return 1;
    printf("wait: %s; stats: status %s, failed_host %d\n", pm_errname(rc),
           pm_errname(st.status), st.failed_host);
    if (rc != PM_ENOCALLBACK || st.status != PM_ENOCALLBACK) {
        printf("expected PM_ENOCALLBACK\n");
        bad = 1;
    }
    if (st.failed_host != 1) {
        printf("expected failed_host 1\n");
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
    if (pm_host_id() != 1) {
        pm_callbacks_init(&cb);
        cb.subscribe = fm_subscribe;
        cb.cpu = fm_cpu;
        if (pm_callbacks_register(NAME, &cb) != 0) {
            pm_finalize();
            return 1;
        }
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    if (pm_host_count() < 2) {
        printf("fault_missing needs at least 2 hosts\n");
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
