/* pm_init / pm_finalize and the process-wide runtime state. */
#define _GNU_SOURCE
#include "core/internal.h"

#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pm__runtime_t pm__rt;
_Thread_local int pm__internal_thread;
_Thread_local pm__stub_t *pm__self_stub;

/* The runtime's life: down, starting (pm_init runs), up, stopping
 * (pm_finalize runs). Only `up` admits calls. */
enum { LIFE_DOWN, LIFE_STARTING, LIFE_UP, LIFE_STOPPING };
static atomic_int life;
static atomic_int inside; /* public calls running now */

int pm__enter(void)
{
    if (pm__internal_thread) /* a callback: pm_finalize waits for it anyway */
        return atomic_load(&life) == LIFE_DOWN ? 0 : 2;
    atomic_fetch_add(&inside, 1);
    if (atomic_load(&life) == LIFE_UP)
        return 1;
    atomic_fetch_sub(&inside, 1);
    return 0;
}

void pm__leave(int *entered)
{
    if (*entered == 1)
        atomic_fetch_sub(&inside, 1);
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
         * spell meant to last microseconds lasts 16 slices. */
        const bool yield = pm__rt.crowded;
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
static int online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

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

static pm_sched_t env_sched(void)
{
    const char *v = getenv("PMLIB_SCHED");
    if (v == NULL || *v == '\0')
        return PM_SCHED_PULL;
    pm_sched_t s = pm__sched_parse(v);
    if (s == PM_SCHED_DEFAULT) {
        pm__warn("PMLIB_SCHED=%s is not one of pull, static, proportional; using pull", v);
        return PM_SCHED_PULL;
    }
    return s;
}

/* mpirun binds small jobs to one core per rank; with one rank per host that
 * hides the other cores from pmlib, so say how to give them back. */
static void warn_if_bound(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (pm__rt.nhosts > 1 && pm__rt.local_size == 1 && getenv("PMLIB_NCPU") == NULL &&
        online > 0 && online_cpus() < online)
        pm__warn("this host may use %d of its %ld cores (the launcher bound the process); "
                 "start with mpirun --bind-to none, or set PMLIB_NCPU", online_cpus(), online);
}

/* This host's line of the cluster's device table. */
static int start_comm(void)
{
    pm__host_info_t me;
    memset(&me, 0, sizeof me);
    for (int i = 0; i < pm__rt.nstubs; i++) {
        const pm__stub_t *s = &pm__rt.stubs[i];
        me.speed += s->speed;
        if (s->ops->kind == PM_DEVICE_CPU) {
            me.ncpu++;
        } else if (me.ngpu < PM__MAX_GPUS) {
            pm__gpu_desc_t *g = &me.gpu[me.ngpu++];
            snprintf(g->name, sizeof g->name, "%s", s->name);
            g->major = s->major;
            g->minor = s->minor;
            g->mem_bytes = s->mem_bytes;
        }
    }
    return pm__comm_start(&me);
}

int pm_init(int *argc, char ***argv)
{
    int expect = LIFE_DOWN;
    if (!atomic_compare_exchange_strong(&life, &expect, LIFE_STARTING)) {
        if (expect == LIFE_STARTING)
            return PM__FAIL(PM_EINIT, "pm_init called while another thread runs pm_init; call it once, from one thread");
        return PM__FAIL(PM_EINIT, "pm_init called twice; call it once per process (pm_finalize ends it)");
    }
    pm__log_init();
    memset(&pm__rt, 0, sizeof pm__rt);
    int rc = pm__comm_init(argc, argv, &pm__rt.host, &pm__rt.nhosts, &pm__rt.local_rank,
                           &pm__rt.local_size);
    if (rc != 0) {
        atomic_store(&life, LIFE_DOWN);
        return rc;
    }
    pm__log_set_host(pm__rt.host);
    pm__rt.ncpu = (int)pm__env_uint("PMLIB_NCPU", "a count", 1, 4096, (uint64_t)online_cpus());
    pm__rt.ncpu_set = getenv("PMLIB_NCPU") != NULL;
    warn_if_bound();
    pm__rt.default_sched = env_sched();
    pm__rt.spin_ns = pm__env_uint("PMLIB_SPIN_US", "microseconds", 0, 10000000, 100) * 1000;
    /* Held briefly by many threads: a waiter spins a little before it
     * sleeps, which spares most lock hand-overs a system call. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&pm__rt.lock, &attr);
    pthread_mutex_init(&pm__rt.ready_lock, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(&pm__rt.work_cv[0], NULL);
    pthread_cond_init(&pm__rt.work_cv[1], NULL);
    pthread_cond_init(&pm__rt.done_cv, NULL);
    rc = pm__stubs_start();
    /* More busy threads than cores (stubs, the program's thread, other
     * ranks here): pollers yield their core while they wait. */
    pm__rt.crowded = (long)pm__rt.local_size * (pm__rt.nstubs + 1) > online_cpus();
    /* The cores of this rank, less one for the program's thread: stubs up
     * to that many may poll for work at once (stubs.c). */
    atomic_store(&pm__rt.spin_room, online_cpus() / (pm__rt.local_size > 0 ? pm__rt.local_size : 1) - 1);
    if (rc == 0 && (rc = start_comm()) != 0)
        pm__stubs_stop();
    if (rc != 0) {
        pthread_cond_destroy(&pm__rt.done_cv);
        pthread_cond_destroy(&pm__rt.work_cv[0]);
        pthread_cond_destroy(&pm__rt.work_cv[1]);
        pthread_mutex_destroy(&pm__rt.ready_lock);
        pthread_mutex_destroy(&pm__rt.lock);
        pm__comm_finalize();
        atomic_store(&life, LIFE_DOWN);
        return rc;
    }
    pm__rt.initialized = 1;
    atomic_store(&life, LIFE_UP);
    pm__trace_init();
    pm__check_init();
    pm__progress_start();
    pm__info("pmlib %s: host %d of %d, %d cpu and %d gpu stubs, %s scheduling", pm_version(),
             pm__rt.host, pm__rt.nhosts, pm__rt.ncpu, pm__rt.nstubs - pm__rt.ncpu,
             pm__sched_name(pm__rt.default_sched));
    return 0;
}

int pm_finalize(void)
{
    if (pm__internal_thread)
        return PM__FAIL(PM_EDEADLK, "pm_finalize called from a callback; call it from the program's own thread "
                        "after its tasks end");
    int expect = LIFE_UP;
    if (!atomic_compare_exchange_strong(&life, &expect, LIFE_STOPPING))
        return PM__FAIL(PM_ENOTINIT, "pm_finalize called %s; call it once, after pm_init",
                        expect == LIFE_STOPPING ? "while another thread runs pm_finalize"
                        : expect == LIFE_STARTING ? "while pm_init runs" : "before pm_init (or twice)");
    int others = atomic_load(&inside);
    if (others > 0) {
        atomic_store(&life, LIFE_UP);
        return PM__FAIL(PM_EBUSY, "pm_finalize called while %d other call(s) run in other threads "
                        "(pm_task_wait, pm_task_submit, ...); join those threads first", others);
    }
    /* From here the program's threads are refused; callbacks of the tasks
     * still running (and, on other hosts, of host 0's tasks) are not. */
    if (pm__rt.host != 0)
        pm__proto_serve(); /* run host 0's tasks until it finalizes */
    pthread_mutex_lock(&pm__rt.lock);
    if (pm__rt.host == 0)
        pm__task_wait_none_locked();
    pthread_mutex_unlock(&pm__rt.lock);
    pm__progress_stop();
    pm__comm_shutdown();
    pm__stubs_stop();
    pm__trace_finish();
    pm__comm_finalize();
    int rc = pm__rt.host != 0 ? pm__rt.first_failure : 0;
    pm__task_free_all();
    pm__subs_cache_clear();
    pm__memory_free_all();
    pm__registry_clear();
    pthread_cond_destroy(&pm__rt.done_cv);
    pthread_cond_destroy(&pm__rt.work_cv[0]);
    pthread_cond_destroy(&pm__rt.work_cv[1]);
    pthread_mutex_destroy(&pm__rt.ready_lock);
    pthread_mutex_destroy(&pm__rt.lock);
    memset(&pm__rt, 0, sizeof pm__rt);
    pm__log_set_host(0);
    atomic_store(&life, LIFE_DOWN);
    return rc;
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
