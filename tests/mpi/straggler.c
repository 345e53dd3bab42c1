/*
 * Straggler copies on host 0 of a 2-host job (run with 2 hosts, 2 CPU stubs
 * each). Host 0's stub 1 blocks in its callback until host 0 has waited for
 * the task, so the task can end only if another stub of host 0 runs a copy
 * of that chunk. Results must equal the serial loop, with and without a
 * reduced memory, and nothing the blocked run does afterwards may show.
 * On a loaded machine stub 1 may not get a chunk before the other stubs
 * (host 1's included) have taken them all: such a task proves nothing, and
 * another is run, up to ATTEMPTS. Each task uses callbacks registered under
 * a name of its own: a chunk runs guarded (so that it can be copied) while
 * its time is unknown, and a task after one that ran would find the
 * chunks known to be short, which are not guarded by design.
 * Host 0 prints STRAGGLER-OK and exits 0 when all holds.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "pmlib.h"

#define NSUB 16u
#define ATTEMPTS 5
#define NOT_HELD 2 /* run(): stub 1 took no chunk; the results were right */

static atomic_int gate_open, slow_entered, slow_left;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
}

static int st_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
    if (info->nmem > 1)
        rc |= pm_subscribe(sub, 1, PM_WRITE, 0, 8);
    return rc;
}

static int st_cpu(const pm_subtask_info_t *info)
{
    if (info->host == 0 && info->stub == 1) {
        atomic_store(&slow_entered, 1);
        double end = now() + 30;
        while (!atomic_load(&gate_open) && now() < end)
            nap();
        atomic_store(&slow_left, 1);
    } else if (info->host == 0) { /* until stub 1 holds a chunk to copy */
        double end = now() + 5;
        while (!atomic_load(&slow_entered) && now() < end)
            nap();
    }
    ((uint64_t *)info->mem[0])[info->id] = info->id * info->id + 7;
    if (info->nmem > 1)
        ((uint64_t *)info->mem[1])[0] = info->id + 1;
    return 0;
}

static int run(int reduce)
{
    pm_memory_t m, sum;
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;
    static int tasks;
    char name[32];
    snprintf(name, sizeof name, "straggler-%d", tasks++ % (2 * ATTEMPTS));
    if (pm_memory_create(NSUB * 8, &m) != 0 || pm_memory_create(8, &sum) != 0)
        return 1;
    *(uint64_t *)pm_memory_data(sum) = 0;
    pm_task_desc_init(&d);
    d.callbacks = name;
    d.subtasks = NSUB;
    d.grain = 1;
    pm_task_desc_add(&d, m, PM_WRITE);
    if (reduce) {
        int i = pm_task_desc_add(&d, sum, PM_WRITE);
        if (pm_task_desc_reduce(&d, i, PM_REDUCE_SUM, PM_UINT64) != 0)
            return 1;
    }
    atomic_store(&gate_open, 0);
    atomic_store(&slow_entered, 0);
    atomic_store(&slow_left, 0);
    if (pm_task_submit(&d, &t) != 0 || pm_task_wait(t) != 0 || pm_task_stats(t, &st) != 0)
        return 1;
    int bad = 0;
    const int held = atomic_load(&slow_entered);
    if (held && atomic_load(&slow_left)) {
        fprintf(stderr, "straggler: the task did not end while host 0's stub 1 was held\n");
        bad = 1;
    }
    if (st.subtasks != NSUB || (held && st.multi_assigned < 1)) {
        fprintf(stderr, "straggler: %llu subtasks, %llu copies\n", (unsigned long long)st.subtasks,
                (unsigned long long)st.multi_assigned);
        bad = 1;
    }
    atomic_store(&gate_open, 1);
    double end = now() + 10;
    while (held && !atomic_load(&slow_left) && now() < end)
        nap();
    const uint64_t *y = pm_memory_data(m);
    uint64_t want = 0;
    for (uint64_t i = 0; i < NSUB; i++) {
        bad |= y[i] != i * i + 7;
        want += i + 1;
    }
    if (reduce && *(uint64_t *)pm_memory_data(sum) != want) {
        fprintf(stderr, "straggler: sum %llu, want %llu\n",
                (unsigned long long)*(uint64_t *)pm_memory_data(sum), (unsigned long long)want);
        bad = 1;
    }
    pm_task_release(t);
    pm_memory_release(m);
    pm_memory_release(sum);
    return bad ? 1 : held ? 0 : NOT_HELD;
}

/* Runs tasks until one held stub 1 (or ATTEMPTS did not). */
static int run_held(int reduce)
{
    int rc = NOT_HELD;
    for (int k = 0; k < ATTEMPTS && rc == NOT_HELD; k++)
        rc = run(reduce);
    if (rc == NOT_HELD)
        fprintf(stderr, "straggler: host 0's stub 1 took no chunk in %d tasks\n", ATTEMPTS);
    return rc;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = st_subscribe;
    cb.cpu = st_cpu;
    for (int k = 0; k < 2 * ATTEMPTS; k++) {
        char name[32];
        snprintf(name, sizeof name, "straggler-%d", k);
        if (pm_callbacks_register(name, &cb) != 0) {
            pm_finalize();
            return 1;
        }
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    int rc = run_held(0);
    if (rc == 0)
        rc = run_held(1);
    if (rc == 0)
        printf("STRAGGLER-OK\n");
    fflush(stdout);
    return (pm_finalize() != 0 || rc != 0) ? 1 : 0;
}
