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
_Thread_local int pm__internal_thread;
_Thread_local pm__stub_t *pm__self_stub;

atomic_int pm__life;
pm__calls_t pm__inside; /* public calls running now */

int pm__enter(void)
{
    if (pm__internal_thread) /* a callback: pm_finalize waits for it anyway */
        return atomic_load(&pm__life) == PM__LIFE_DOWN ? 0 : 2;
    atomic_fetch_add(&pm__inside.n, 1);
    if (atomic_load(&pm__life) == PM__LIFE_UP)
        return 1;
    atomic_fetch_sub(&pm__inside.n, 1);
    return 0;
}

void pm__leave(int *entered)
{
    if (*entered == 1)
        atomic_fetch_sub(&pm__inside.n, 1);
}

static inline void pm__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

bool pm__spin_until(bool (*done)(const void *arg), const void *arg)
{
    return pm__spin_for(done, arg, pm__rt.spin_ns);
}

bool pm__spin_for(bool (*done)(const void *arg), const void *arg, uint64_t ns)
{
    if (done(arg))
        return true;
    if (ns == 0)
        return false;
    double until = pm__now() + (double)ns * 1e-9;
    for (unsigned i = 1;; i++) {
        /* A yield may hand the core to a thread with work for a whole time
         * slice (milliseconds): the clock is read after every one, or a
         * spell meant to last microseconds lasts 16 slices. On one host it
         * is needed only while more threads are awake than there are cores
         * (the program's thread asleep in a wait lends its core): a yield
         * costs a system call, and the poll reacts later (submit then wait
         * of one task, 2 cores: 1.75-2.1 us with a yield always, 1.3-1.65
         * without it while the program waits). */
        const bool yield = pm__rt.crowded && (pm__rt.nhosts > 1 || pm__stubs_poll_room() < 0);
        if (yield)
            sched_yield(); /* a thread with work may need this core */
        else
            pm__cpu_relax();
        if (done(arg))
            return true;
        if ((yield || (i & 15) == 0) && pm__now() > until)
            return false;
    }
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
