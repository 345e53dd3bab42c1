/*
 * A host dies holding the only copy of ranges (run with 3 hosts, under a
 * launcher that keeps the others going: --enable-recovery).
 *
 * A first task writes a lazy memory with static shares, so the slice each
 * host wrote stays there; host 2's slice exists nowhere else. In a second
 * task, on another memory, host 2 kills itself. Host 0's heartbeat finds it
 * dead, and before the job ends it must name what was lost: the bytes of
 * the lazy memory host 2 held (the wrapper checks the message). Host 0
 * prints FAULT-OK only if it went on, which must not happen.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "pmlib.h"

#define NSUB 12u

static int fl_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

static int fl_write(const pm_subtask_info_t *info)
{
    ((uint64_t *)info->mem[0])[info->id] = info->id + 1;
    return 0;
}

static int fl_die(const pm_subtask_info_t *info)
{
    if (info->host == 2) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        raise(SIGKILL);
    }
    ((uint64_t *)info->mem[0])[info->id] = info->id;
    return 0;
}

static int run(const char *name, pm_memory_t m)
{
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_desc_init(&d);
    d.callbacks = name;
    d.subtasks = NSUB;
    d.sched = PM_SCHED_STATIC_EQUAL; /* host 2 surely runs subtasks 8 to 11 */
    if (pm_task_desc_add(&d, m, PM_WRITE) != 0 || pm_task_submit(&d, &t) != 0)
        return 1;
    int rc = pm_task_wait(t);
    printf("host 0: task '%s' ended: %s\n", name, pm_errname(rc));
    fflush(stdout);
    pm_task_release(t);
    return rc != 0;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    pm_memory_t lazy, other;
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = fl_subscribe;
    cb.cpu = fl_write;
    int rc = pm_callbacks_register("fault-lazy-write", &cb);
    cb.cpu = fl_die;
    if (rc != 0 || pm_callbacks_register("fault-lazy-die", &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    if (pm_host_count() < 3) {
        printf("fault_lazy needs at least 3 hosts\n");
        pm_finalize();
        return 77;
    }
    if (pm_memory_create(NSUB * 8, &lazy) != 0 || pm_memory_create(NSUB * 8, &other) != 0 ||
        pm_memory_set_lazy(lazy, 1) != 0)
        return 1;
    if (run("fault-lazy-write", lazy) != 0 || run("fault-lazy-die", other) != 0)
        return 1;
    printf("FAULT-OK\n");
    fflush(stdout);
    pm_finalize();
    return 0;
}
