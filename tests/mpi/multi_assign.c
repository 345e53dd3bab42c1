/*
 * Multi-assign of the tail (run with 3 hosts). Host 2 runs its subtasks
 * slowly (a sleep only there); host 1, done with its own share and with
 * nothing left to steal, runs copies of host 2's stragglers. The first
 * report of a chunk wins on host 0, so the result must equal the serial
 * loop whichever copy won, and stats.multi_assigned must count the copies.
 * Host 0 prints MULTI-OK and exits 0 when both hold.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "pmlib.h"

#define NSUB 24u

static int ma_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

static int ma_cpu(const pm_subtask_info_t *info)
{
    if (info->host == 2) { /* a straggling host */
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ((uint64_t *)info->mem[0])[info->id] = info->id * info->id + 7;
    return 0;
}

static int run(void)
{
    pm_memory_t m;
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;
    if (pm_memory_create(NSUB * 8, &m) != 0)
        return 1;
    pm_task_desc_init(&d);
    d.callbacks = "multi-assign";
    d.subtasks = NSUB;
    pm_task_desc_add(&d, m, PM_WRITE);
    if (pm_task_submit(&d, &t) != 0 || pm_task_wait(t) != 0 || pm_task_stats(t, &st) != 0)
        return 1;
    const uint64_t *v = pm_memory_data(m);
    int bad = 0;
    for (uint64_t i = 0; i < NSUB; i++)
        bad += v[i] != i * i + 7;
    printf("multi_assigned %llu, remote %llu, wrong %d\n", (unsigned long long)st.multi_assigned,
           (unsigned long long)st.subtasks_remote, bad);
    pm_task_release(t);
    pm_memory_release(m);
    return bad != 0 || st.multi_assigned == 0;
}

int main(int argc, char **argv)
{
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_t cb;
    pm_callbacks_init(&cb);
    cb.subscribe = ma_subscribe;
    cb.cpu = ma_cpu;
    pm_callbacks_register("multi-assign", &cb);
    if (pm_host_id() != 0)
        return pm_finalize() ? 1 : 0;
    if (pm_host_count() != 3) {
        printf("needs 3 hosts\n");
        pm_finalize();
        return 1;
    }
    int rc = run();
    if (rc == 0)
        printf("MULTI-OK\n");
    pm_finalize();
    return rc;
}
