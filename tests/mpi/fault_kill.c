/*
 * A host that dies in the middle of a task (run with 3 hosts).
 *
 * Host 2's first subtask kills its own process. The job must then end
 * nonzero within a bounded time instead of hanging: the launcher stops the
 * other ranks (pmlib says so on stderr) or pmlib's heartbeat notices the
 * silent host. Host 0 prints FAULT-OK only if its wait returned and it
 * reached the end, which must not happen under a launcher that ends the
 * job; the wrapper checks its absence.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pmlib.h"

#define NAME "fault-kill"
#define NSUB 60u

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int fk_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

static int fk_cpu(const pm_subtask_info_t *info)
{
    if (info->host == 2) {
        /* Let the other hosts get going so the death lands mid-task. */
        sleep_ms(200);
        raise(SIGKILL);
    }
    /* Slow enough that the task is still running when host 2 dies. */
    sleep_ms(50);
    ((uint64_t *)info->mem[0])[info->id] = info->id + 1;
    return 0;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    pm_memory_t m;
    pm_task_desc_t d;
    pm_task_t t;

    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = fk_subscribe;
    cb.cpu = fk_cpu;
    if (pm_callbacks_register(NAME, &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    if (pm_host_count() < 3) {
        printf("fault_kill needs at least 3 hosts\n");
        pm_finalize();
        return 77;
    }
    if (pm_memory_create(NSUB * 8, &m) != 0)
        return 1;
    pm_task_desc_init(&d);
    d.callbacks = NAME;
    d.subtasks = NSUB;
    /* Static shares: host 2 surely runs a subtask. */
    d.sched = PM_SCHED_STATIC_EQUAL;
    if (pm_task_desc_add(&d, m, PM_WRITE) != 0 || pm_task_submit(&d, &t) != 0)
        return 1;
    printf("host 0: waiting for the task\n");
    fflush(stdout);
    int rc = pm_task_wait(t);
    printf("host 0: pm_task_wait returned %s\n", pm_errname(rc));
    printf("FAULT-OK\n");
    fflush(stdout);
    pm_finalize();
    return 0;
}
