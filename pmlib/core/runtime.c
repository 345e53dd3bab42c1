/* The process-wide runtime state, the calls that read it, and what every
 * layer uses to wait (spins, short locks). pm_init is in init/init.c. */
#define _GNU_SOURCE
#include "core/internal.h"

#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pm__runtime_t pm__rt;
pm__hooks_t pm__hooks;
int pm__check_mode;
pm__host_info_t *pm__hosts;
PM__TLS int pm__internal_thread;
PM__TLS pm__stub_t *pm__self_stub;
PM__TLS bool pm__own_core;

atomic_int pm__life;
bool pm__spin_until(bool (*done)(const void *arg), const void *arg)
{
    return pm__spin_for(done, arg, pm__rt.spin_ns);
}

/* A yield that comes back PM__YIELD_SLOW late (seconds) gave the core
 * away for a time slice: to another program, or to a thread of this job
 * with work (a stub's chunk). Which one, the process's CPU time tells:
 * over at least PM__RATE_SPAN of polling, a process that got less than
 * PM__STARVED of its share of the cores while its yields came back late
 * was kept off them by others, and is contended for PM__CONTENDED_FOR.
 * 2 ranks on 2 cores: alone, each used about a core (a few slow yields a
 * run of tests/mpi/prefetch, its own stubs' chunks); beside two busy
 * loops, 1% of one, its yields taking 1 to 5 ms. The rate is measured
 * only while the process polls by yielding, not in the naps of a
 * contended spell. */
#define PM__YIELD_SLOW 2e-3
#define PM__RATE_SPAN 5e-3
#define PM__STARVED 0.5
#define PM__CONTENDED_FOR 0.05

static atomic_uint_fast64_t contended_until_ns;
static pm__lock_t rate_lock;
/* Where the rate is measured from: rate_at (ns; written under rate_lock)
 * and rate_cpu (under it). */
static atomic_uint_fast64_t rate_at_ns;
static double rate_cpu;

static double process_cpu(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool pm__yield_took(double at, double took, double (*cpu)(void))
{
    const bool slow = took >= PM__YIELD_SLOW;
    const double until = (double)atomic_load_explicit(&contended_until_ns, memory_order_relaxed) * 1e-9;
    double from = (double)atomic_load_explicit(&rate_at_ns, memory_order_relaxed) * 1e-9;
    if (!slow && from != 0 && !(from < until && at >= until))
        return false;
    pm__lock(&rate_lock);
    from = (double)atomic_load_explicit(&rate_at_ns, memory_order_relaxed) * 1e-9;
    bool rebase = from == 0 || (from < until && at >= until); /* first, or a contended spell ended */
    if (!rebase && slow && at - from >= PM__RATE_SPAN) {
        double c = cpu();
        double share = pm__rt.core_share > 0 ? pm__rt.core_share : 1;
        if (c - rate_cpu < PM__STARVED * share * (at - from))
            atomic_store_explicit(&contended_until_ns, (uint64_t)((at + PM__CONTENDED_FOR) * 1e9),
                                  memory_order_relaxed);
        rate_cpu = c;
        atomic_store_explicit(&rate_at_ns, (uint64_t)(at * 1e9), memory_order_relaxed);
    } else if (rebase) {
        rate_cpu = cpu();
        atomic_store_explicit(&rate_at_ns, (uint64_t)(at * 1e9), memory_order_relaxed);
    }
    pm__unlock(&rate_lock);
    return slow;
}

bool pm__yield(void)
{
    double t0 = pm__now();
    sched_yield();
    double t1 = pm__now();
    return pm__yield_took(t1, t1 - t0, process_cpu);
}

bool pm__contended(double now)
{
    return (double)atomic_load_explicit(&contended_until_ns, memory_order_relaxed) * 1e-9 > now;
}

/* A poller that makes the transport's progress itself (pm__comm_spin)
 * yields at most this often (seconds): each yield handed the core to this
 * rank's comm thread, which ran a round of its own before it yielded back,
 * and a reply that came meanwhile waited for that turn (bench/transport,
 * 2 ranks on 2 cores: a round trip of 2 x MPI + 5.4 to 5.8 us with a yield
 * at every look, 2 x MPI + 2.3 to 2.4 with one every 20 us). A thread of
 * the job with work on this core waits at most that long for it. */
#define PM__SELF_POLL_YIELD 20e-6

static bool spin(bool (*done)(const void *arg), const void *arg, uint64_t ns, bool self_polls)
{
    if (done(arg))
        return true;
    if (ns == 0)
        return false;
    double now = pm__now(), until = now + (double)ns * 1e-9, yielded = now;
    /* A yield may hand the core to a thread with work for a whole time
     * slice (milliseconds): the clock is read after every one, or a spell
     * meant to last microseconds lasts 16 slices. On one host it is
     * needed only while more threads are awake than there are cores (the
     * program's thread asleep in a wait lends its core): a yield costs a
     * system call, and the poll reacts later (submit then wait of one
     * task, 2 cores: 1.75-2.1 us with a yield always, 1.3-1.65 without
     * it while the program waits). On several hosts it is needed too
     * while no core of the rank is spare for the comm thread, which has
     * none of its own (2 ranks on 32 cores, idle stubs: a round trip of 2
     * x MPI + 4.3 to 4.8 us yielding at every look, 2.4 to 3.6 without).
     * Contended, the caller sleeps at once: a yield that takes a slice is
     * no poll. */
    for (unsigned i = 1;; i++) {
        bool yield = pm__rt.crowded &&
                     (pm__rt.nhosts > 1 ? pm__stubs_spare() < 1 : pm__stubs_poll_room() < 0);
        if (yield && i == 1 && pm__contended(now))
            return false;
        if (yield && self_polls) {
            now = pm__now();
            if (now - yielded < PM__SELF_POLL_YIELD)
                yield = false;
            else
                yielded = now;
        }
        bool slow = false;
        if (yield)
            slow = pm__yield(); /* a thread with work may need this core */
        else
            pm__cpu_relax();
        if (done(arg))
            return true;
        if (slow && pm__contended(pm__now()))
            return false;
        if ((yield || self_polls || (i & 15) == 0) && pm__now() > until)
            return false;
    }
}

bool pm__spin_for(bool (*done)(const void *arg), const void *arg, uint64_t ns)
{
    return spin(done, arg, ns, false);
}

bool pm__spin_self(bool (*done)(const void *arg), const void *arg, uint64_t ns)
{
    return spin(done, arg, ns, true);
}

void pm__lock_wait(pm__lock_t *l)
{
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
            atomic_exchange_explicit(&l->held, 1, memory_order_acquire) == 0)
            return;
        if (i % 64 == 0)
            sched_yield(); /* the holder may be waiting for this core */
        else
            pm__cpu_relax();
    }
}

/* Cores this process may run on (its affinity mask, as taskset sets it). */
uint64_t pm__env_uint(const char *name, const char *what, uint64_t min, uint64_t max,
                      uint64_t def)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return def;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || strchr(v, '-') != NULL || n < min || n > max) {
        /* Where `what` names the values themselves ("0 or 1"), the range
         * would only repeat it; the default may be a value no setting
         * can name (PMLIB_BIND's "not set"). */
        if (max - min <= 1)
            pm__warn("%s=%s is not %s; ignored (unset it for the default)", name, v, what);
        else
            pm__warn("%s=%s is not %s from %llu to %llu; using %llu", name, v, what,
                     (unsigned long long)min, (unsigned long long)max, (unsigned long long)def);
        return def;
    }
    return n;
}

int pm_host_id(void)
{
    return pm__rt.initialized ? pm__rt.host : -1;
}

int pm_host_count(void)
{
    return pm__rt.initialized ? pm__rt.nhosts : 0;
}

int pm_device_info(int host, int index, pm_device_info_t *out)
{
    PM__CHECK_INIT("pm_device_info");
    if (out == NULL || host < 0 || host >= pm__rt.nhosts)
        return PM__FAIL(PM_EINVAL, "pm_device_info: host %d is not 0..%d, or out is NULL", host,
                        pm__rt.nhosts - 1);
    const pm__host_info_t *h = &pm__hosts[host];
    if (index < 0 || index >= h->ncpu + h->ngpu)
        return PM_ERANGE; /* the end of the list, not a mistake: no message */
    memset(out, 0, sizeof *out);
    out->host = host;
    if (index < h->ncpu) {
        out->kind = PM_DEVICE_CPU;
        snprintf(out->name, sizeof out->name, "cpu core");
        return 0;
    }
    const pm__gpu_desc_t *g = &h->gpu[index - h->ncpu];
    out->kind = PM_DEVICE_GPU;
    snprintf(out->name, sizeof out->name, "%s", g->name);
    out->major = g->major;
    out->minor = g->minor;
    out->mem_bytes = g->mem_bytes;
    return 0;
}

int pm_device_count(int kinds, int *count)
{
    PM__CHECK_INIT("pm_device_count");
    if (count == NULL || kinds <= 0 || (kinds & ~PM_DEVICE_ANY))
        return PM__FAIL(PM_EINVAL, "pm_device_count: pass a mask of PM_DEVICE_CPU/PM_DEVICE_GPU and a count pointer");
    int n = 0;
    for (int i = 0; i < pm__rt.nstubs; i++)
        n += (pm__rt.stubs[i].ops->kind & kinds) != 0;
    *count = n;
    return 0;
}
