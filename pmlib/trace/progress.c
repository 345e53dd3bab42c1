/*
 * PMLIB_PROGRESS=1: one updating line on host 0's terminal with the
 * subtasks done across all hosts, the total and the elapsed time of the
 * oldest running task, once it has run PMLIB_PROGRESS_AFTER_MS
 * milliseconds (500 by default). Off a terminal it prints a plain line every 2 s.
 */
#include "core/internal.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    int on, stop, tty;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    uint64_t shown_seq; /* task on the line now, 0 when none */
    uint64_t shown_total;
    double shown_start, last_plain;
    double after; /* seconds a task runs before it is shown */
    long tick_ns; /* between looks */
} P;

static void show(uint64_t seq, uint64_t done, uint64_t total, double secs, int final)
{
    double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    if (P.tty)
        fprintf(stderr, "\rpmlib: task %llu  %llu/%llu subtasks  %5.1f%%  %.1f s%s",
                (unsigned long long)seq, (unsigned long long)done, (unsigned long long)total, pct, secs,
                final ? "\n" : "");
    else
        fprintf(stderr, "pmlib: task %llu  %llu/%llu subtasks  %5.1f%%  %.1f s\n",
                (unsigned long long)seq, (unsigned long long)done, (unsigned long long)total, pct, secs);
    fflush(stderr);
}

static void tick(void)
{
    double now = pm__now();
    pthread_mutex_lock(&pm__rt.lock);
    const pm__task_t *t = pm__rt.active.head;
    while (t != NULL && t->remote)
        t = t->alink.next;
    uint64_t seq = t ? t->seq : 0, total = t ? t->desc.subtasks : 0;
    uint64_t done = t ? atomic_load(&t->subtasks_done) : 0;
    double start = t ? t->t_submit : 0;
    pthread_mutex_unlock(&pm__rt.lock);
    if (P.shown_seq != 0 && P.shown_seq != seq) { /* the shown task finished */
        show(P.shown_seq, P.shown_total, P.shown_total, now - P.shown_start, 1);
        P.shown_seq = 0;
    }
    if (seq == 0 || now - start < P.after)
        return;
    if (!P.tty && P.shown_seq == seq && now - P.last_plain < 2.0)
        return;
    P.shown_seq = seq;
    P.shown_total = total;
    P.shown_start = start;
    P.last_plain = now;
    show(seq, done > total ? total : done, total, now - start, 0);
}

static void *progress_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&P.lock);
    while (!P.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += P.tick_ns;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&P.cv, &P.lock, &ts);
        pthread_mutex_unlock(&P.lock);
        tick();
        pthread_mutex_lock(&P.lock);
    }
    pthread_mutex_unlock(&P.lock);
    tick();
    return NULL;
}

void pm__progress_start(void)
{
    const char *v = getenv("PMLIB_PROGRESS");
    if (pm__rt.host != 0 || v == NULL || *v == '\0' || strcmp(v, "0") == 0)
        return;
    memset(&P, 0, sizeof P);
    P.tty = isatty(STDERR_FILENO);
    P.after = (double)pm__env_uint("PMLIB_PROGRESS_AFTER_MS", "milliseconds", 0, 3600000, 500) / 1e3;
    /* Look five times per shown delay, at most every 200 ms, at least every 5 ms. */
    P.tick_ns = (long)(P.after / 5 * 1e9);
    P.tick_ns = P.tick_ns > 200000000L ? 200000000L : P.tick_ns < 5000000L ? 5000000L : P.tick_ns;
    pthread_mutex_init(&P.lock, NULL);
    pthread_cond_init(&P.cv, NULL);
    if (pthread_create(&P.thread, NULL, progress_main, NULL) != 0) {
        pm__warn("PMLIB_PROGRESS: cannot start the progress thread; no progress line");
        return;
    }
    P.on = 1;
    pm__rt.list_all = true; /* before any task: pm_init calls this */
}

void pm__progress_stop(void)
{
    if (!P.on)
        return;
    pthread_mutex_lock(&P.lock);
    P.stop = 1;
    pthread_cond_signal(&P.cv);
    pthread_mutex_unlock(&P.lock);
    pthread_join(P.thread, NULL);
    pthread_cond_destroy(&P.cv);
    pthread_mutex_destroy(&P.lock);
    P.on = 0;
}
