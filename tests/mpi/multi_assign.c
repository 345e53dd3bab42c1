/*
 * Multi-assign of the tail (run with 3 hosts). Host 2 runs its subtasks
 * slowly (a sleep only there); host 1, done with its own share and with
 * nothing left to steal, runs copies of host 2's stragglers. The first
 * report of a chunk wins on host 0, so the result must equal the serial
 * loop whichever copy won, and stats.multi_assigned must count the copies.
 * Host 0 prints MULTI-OK and exits 0 when both hold.
 *
 * Whether host 2 gets a chunk at all is the scheduler's choice: on a busy
 * machine host 0 has been seen to run the whole task before host 2 took
 * part, so nothing straggled (1 run in 4 of `make -j32 check`). The task
 * therefore runs up to TRIES times, each under a callback set of its own
 * (nothing learned carries over): every result must be right, and at
 * least one run must have run copies.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "pmlib.h"

#define NSUB 24u
#define TRIES 5

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

/* One run under callback set `name`: 0 right, 1 wrong; *copies gets the
 * run's multi_assigned. */
static int run(const char *name, uint64_t *copies)
{
    pm_memory_t m;
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;
    if (pm_memory_create(NSUB * 8, &m) != 0)
        return 1;
    pm_task_desc_init(&d);
    d.callbacks = name;
    d.subtasks = NSUB;
    pm_task_desc_add(&d, m, PM_WRITE);
    if (pm_task_submit(&d, &t) != 0 || pm_task_wait(t) != 0 || pm_task_stats(t, &st) != 0)
        return 1;
    const uint64_t *v = pm_memory_data(m);
    int bad = 0;
    for (uint64_t i = 0; i < NSUB; i++)
        bad += v[i] != i * i + 7;
    printf("%s: multi_assigned %llu, remote %llu, wrong %d\n", name, (unsigned long long)st.multi_assigned,
           (unsigned long long)st.subtasks_remote, bad);
    *copies = st.multi_assigned;
    pm_task_release(t);
    pm_memory_release(m);
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_t cb;
    pm_callbacks_init(&cb);
    cb.subscribe = ma_subscribe;
    cb.cpu = ma_cpu;
    char names[TRIES][32];
    for (int i = 0; i < TRIES; i++) {
        snprintf(names[i], sizeof names[i], "multi-assign-%d", i);
        pm_callbacks_register(names[i], &cb);
    }
    if (pm_host_id() != 0)
        return pm_finalize() ? 1 : 0;
    if (pm_host_count() != 3) {
        printf("needs 3 hosts\n");
        pm_finalize();
        return 1;
    }
    int rc = 0;
    uint64_t copies = 0;
    for (int i = 0; i < TRIES && rc == 0 && copies == 0; i++)
        rc = run(names[i], &copies);
    if (rc == 0 && copies == 0) {
        printf("no copies in %d runs\n", TRIES);
        rc = 1;
    }
    if (rc == 0)
        printf("MULTI-OK\n");
    pm_finalize();
    return rc;
}
