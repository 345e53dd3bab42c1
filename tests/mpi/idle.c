/*
 * An idle pmlib uses (almost) no CPU (run with 1 and 2 hosts).
 *
 * Every host starts pmlib and registers a callback set; host 0 runs a few
 * tasks (on every host), so that all of pmlib's threads have worked, then
 * lets the polling spell pass (PMLIB_SPIN_US, 100 us by default; we wait
 * half a second) and measures the CPU time of the whole process
 * (CLOCK_PROCESS_CPUTIME_ID: every thread, user and system) over
 * IDLE_SECONDS of sleep before it calls pm_finalize. Every other host
 * measures the same from a thread of its own while its main thread serves
 * in pm_finalize: the window starts one second after it entered
 * pm_finalize, inside host 0's idle time.
 *
 * Each host prints "idle: host H used C s of CPU in S s" and fails when C
 * is not below the limit (0.25 s of CPU over 5 s: a thread that polled the
 * whole time would use 5 s; one waking every millisecond a few percent of
 * that). With several hosts the heartbeat (one message a second) and the
 * communication thread's naps are part of what is measured.
 *
 * Usage: idle [SECONDS [LIMIT]]   (defaults 5 and 0.25)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"
#include "pmlib.h"

static double idle_seconds = 5, limit = 0.25;
static int host; /* pm_host_id(), kept: it is -1 after pm_finalize */

static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* CPU seconds the process used over `seconds` of sleep. */
static double measure(double seconds)
{
    double c0 = cpu_now();

    sleep_s(seconds);
    return cpu_now() - c0;
}

static int report(double used)
{
    printf("idle: host %d used %.3f s of CPU in %.1f s (limit %.3f s)\n", host, used,
           idle_seconds, limit);
    fflush(stdout);
    if (used >= limit)
        return fail("host %d: pmlib used %.3f s of CPU while idle for %.1f s (limit %.3f s)",
                    host, used, idle_seconds, limit);
    return 0;
}

static int busy_cpu(const pm_subtask_info_t *info)
{
    volatile double x = 0;

    for (int i = 0; i < 20000; i++)
        x += (double)(info->id + (uint64_t)i);
    return 0;
}

static double remote_used = -1;

static void *remote_window(void *arg)
{
    (void)arg;
    sleep_s(1.0);
    remote_used = measure(idle_seconds);
    return NULL;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    int rc = 0;

    setenv("PMLIB_NCPU", "2", 0);
    if (argc > 1)
        idle_seconds = atof(argv[1]);
    if (argc > 2)
        limit = atof(argv[2]);
    if (!(idle_seconds > 0) || !(limit > 0)) {
        fprintf(stderr, "usage: idle [SECONDS [LIMIT]]\n");
        return 2;
    }
    if (pm_init(&argc, &argv) != 0)
        return 1;
    host = pm_host_id();
    pm_callbacks_init(&cb);
    cb.cpu = busy_cpu;
    if (pm_callbacks_register("idle-busy", &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (host != 0) {
        pthread_t th;

        if (pthread_create(&th, NULL, remote_window, NULL) != 0) {
            pm_finalize();
            return 1;
        }
        rc = pm_finalize() != 0;
        pthread_join(th, NULL);
        return report(remote_used) || rc;
    }

    /* A few tasks that reach every host, then nothing. */
    for (int i = 0; i < 20 && rc == 0; i++) {
        pm_task_desc_t d;
        pm_task_t t;

        pm_task_desc_init(&d);
        d.callbacks = "idle-busy";
        d.subtasks = 64;
        d.grain = 1;
        if (pm_task_submit(&d, &t) != 0 || pm_task_wait(t) != 0)
            rc = fail("task %d failed", i);
        pm_task_release(t);
    }
    sleep_s(0.5);
    if (rc == 0)
        rc = report(measure(idle_seconds));
    /* The other hosts measure from one second after they entered
     * pm_finalize; stay idle until their windows have closed. */
    if (pm_host_count() > 1)
        sleep_s(1.5);
    if (rc == 0)
        printf("IDLE-OK\n");
    fflush(stdout);
    if (pm_finalize() != 0)
        rc = 1;
    return rc;
}
