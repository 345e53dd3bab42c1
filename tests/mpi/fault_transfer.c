/*
 * A host killed while a large transfer is under way (run with 2 hosts).
 *
 * Three subtasks each read a 256 MiB slice of a 768 MiB input and write it,
 * xor a constant, into a second memory; a fourth subscribes nothing. Under
 * static shares host 1 runs the fourth and the third, one on each of its
 * two stubs. Host 1's small subtask kills its own process (SIGKILL):
 *
 * - by default 150 ms after it starts, while the other stub's 256 MiB
 *   input is being gathered on host 0, sent, or copied in;
 * - with --during-write 50 ms after the other stub's callback returned,
 *   while its 256 MiB output is being gathered or sent back.
 *
 * The moment is not synchronized with pmlib and nothing checked depends on
 * it: the job must end nonzero within the wrapper's limit and host 0 must
 * say why on stderr. The small subtask never returns, so the task cannot
 * complete: host 0 prints FAULT-OK only if its wait returned anyway, which
 * the wrapper checks is absent.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pmlib.h"

#define NAME "fault-transfer"
#define MiB (UINT64_C(1) << 20)
#define SLICE (256 * MiB)
#define BIG 3u      /* subtasks 0..2 move a slice each */
#define NSUB (BIG + 1) /* the last one is the killer */

/* Set on host 1 when a big subtask's callback is about to return. */
static atomic_int big_returned;
static int during_write;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int ft_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = 0;

    if (info->id < BIG) {
        rc = pm_subscribe(sub, 0, PM_READ, info->id * SLICE, SLICE);
        if (rc == 0)
            rc = pm_subscribe(sub, 1, PM_WRITE, info->id * SLICE, SLICE);
    }
    return rc;
}

/* Host 1's small subtask: waits for its moment, then dies. */
static void kill_host(void)
{
    if (during_write) {
        /* Bounded, in case the big subtask did not land on this host. */
        for (int i = 0; i < 2000 && !atomic_load(&big_returned); i++)
            sleep_ms(10);
        sleep_ms(50);
    } else {
        sleep_ms(150);
    }
    raise(SIGKILL);
}

static int ft_cpu(const pm_subtask_info_t *info)
{
    if (info->id == BIG) {
        if (info->host == 1)
            kill_host();
        return 0;
    }
    const uint64_t *in = info->mem[0];
    uint64_t *out = info->mem[1];

    for (uint64_t i = info->id * SLICE / 8; i < (info->id + 1) * SLICE / 8; i++)
        out[i] = in[i] ^ UINT64_C(0x5A5A5A5A5A5A5A5A);
    if (info->host == 1)
        atomic_store(&big_returned, 1);
    return 0;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    pm_memory_t in, out;
    pm_task_desc_t d;
    pm_task_t t;

    for (int i = 1; i < argc; i++)
        during_write |= strcmp(argv[i], "--during-write") == 0;
    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = ft_subscribe;
    cb.cpu = ft_cpu;
    if (pm_callbacks_register(NAME, &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    if (pm_host_count() < 2) {
        printf("fault_transfer needs at least 2 hosts\n");
        pm_finalize();
        return 77;
    }
    if (pm_memory_create(BIG * SLICE, &in) != 0 || pm_memory_create(BIG * SLICE, &out) != 0)
        return 1;
    uint64_t *w = pm_memory_data(in);
    for (uint64_t i = 0; i < BIG * SLICE / 8; i++)
        w[i] = i * UINT64_C(0x9E3779B97F4A7C15);
    pm_task_desc_init(&d);
    d.callbacks = NAME;
    d.subtasks = NSUB;
    d.grain = 1;
    /* Static shares: host 1 surely runs subtasks 2 and 3, one per stub. */
    d.sched = PM_SCHED_STATIC_EQUAL;
    if (pm_task_desc_add(&d, in, PM_READ) != 0 || pm_task_desc_add(&d, out, PM_WRITE) != 1 ||
        pm_task_submit(&d, &t) != 0)
        return 1;
    printf("host 0: waiting for the task (host 1 dies %s)\n",
           during_write ? "while its output goes back" : "while its input arrives");
    fflush(stdout);
    int rc = pm_task_wait(t);
    printf("host 0: pm_task_wait returned %s\n", pm_errname(rc));
    printf("FAULT-OK\n");
    fflush(stdout);
    pm_finalize();
    return 0;
}
