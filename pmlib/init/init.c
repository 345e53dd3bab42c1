/*
 * pm_init and pm_finalize: the top of pmlib, the one place that knows every
 * layer. It starts them from the bottom up (the transport, the stubs, the
 * data layer and the task protocol, which register their handlers and
 * hooks), and takes them down in the opposite order.
 */
#define _GNU_SOURCE
#include "core/internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "data/data.h"
#include "exec/check.h"
#include "exec/cuda.h"
#include "exec/guard.h"
#include "exec/stubs.h"
#include "reduce/tree.h"
#include "sched/model.h"
#include "sched/policy.h"
#include "sched/proto.h"
#include "sched/ranges.h"
#include "trace/trace.h"

static int online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The layers above core listen to its memory and task events (core/internal.h,
 * pm__hooks), and the data layer and the task protocol take their messages
 * from the transport, before it starts. */
static void set_hooks(void)
{
    memset(&pm__hooks, 0, sizeof pm__hooks);
    pm__hooks.policy = pm__sched_policy;
    pm__hooks.model_create = pm__model_create;
    pm__hooks.model_destroy = pm__model_destroy;
    pm__hooks.model_ns = pm__model_ns_named;
    pm__hooks.tree_create = pm__reduce_tree_create;
    pm__hooks.tree_apply = pm__reduce_tree_apply;
    pm__hooks.tree_free = pm__reduce_tree_free;
    pm__hooks.cuda_registered = pm__stubs_warm;
    pm__hooks.keep_piece = pm__guard_keep_piece;
    pm__hooks.trace_span = pm__trace_span;
#if PMLIB_HAVE_CUDA
    pm__hooks.pinned_alloc = pm__cuda_host_alloc;
    pm__hooks.pinned_free = pm__cuda_host_free;
    pm__hooks.pin = pm__cuda_host_pin;
    pm__hooks.unpin = pm__cuda_host_unpin;
#endif
    pm__data_init();
    pm__proto_init();
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
    int expect = PM__LIFE_DOWN;
    if (!atomic_compare_exchange_strong(&pm__life, &expect, PM__LIFE_STARTING)) {
        if (expect == PM__LIFE_STARTING)
            return PM__FAIL(PM_EINIT, "pm_init called while another thread runs pm_init; call it once, from one thread");
        return PM__FAIL(PM_EINIT, "pm_init called twice; call it once per process (pm_finalize ends it)");
    }
    pm__log_init();
    pm__clock_init();
    pm__calls_init();
    memset(&pm__rt, 0, sizeof pm__rt);
    int rc = pm__comm_init(argc, argv, &pm__rt.host, &pm__rt.nhosts, &pm__rt.local_rank,
                           &pm__rt.local_size);
    if (rc != 0) {
        atomic_store(&pm__life, PM__LIFE_DOWN);
        return rc;
    }
    pm__log_set_host(pm__rt.host);
    set_hooks();
    /* Ranks of one machine left unbound share its cores: each takes its
     * share, so that 2 ranks on 2 cores run 2 stubs, not 4. */
    int share = online_cpus() / pm__comm_core_sharers();
    pm__rt.ncpu = (int)pm__env_uint("PMLIB_NCPU", "a count", 1, 4096, (uint64_t)(share > 0 ? share : 1));
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
    /* Before any thread that may yield starts (core/runtime.c). */
    pm__rt.core_share = (double)online_cpus() / (pm__rt.local_size > 0 ? pm__rt.local_size : 1);
    rc = pm__stubs_start();
    pm__rt.ranges_bytes = pm__ranges_space(pm__rt.nstubs);
    pm__rt.ranges_slots = (size_t)pm__rt.nstubs * sizeof(pm__range_slot_t);
    /* More busy threads than cores (stubs, the program's thread, other
     * ranks here): pollers yield their core while they wait. */
    pm__rt.crowded = (long)pm__rt.local_size * (pm__rt.nstubs + 1) > online_cpus();
    /* The cores of this rank, less one for the program's thread: stubs up
     * to that many may poll for work at once (stubs.c). */
    atomic_store(&pm__rt.spin_room, online_cpus() / (pm__rt.local_size > 0 ? pm__rt.local_size : 1) - 1);
    if (rc == 0 && (rc = start_comm()) != 0)
        pm__stubs_stop();
    if (rc == 0)
        pm__proto_start();
    if (rc != 0) {
        pthread_cond_destroy(&pm__rt.done_cv);
        pthread_cond_destroy(&pm__rt.work_cv[0]);
        pthread_cond_destroy(&pm__rt.work_cv[1]);
        pthread_mutex_destroy(&pm__rt.ready_lock);
        pthread_mutex_destroy(&pm__rt.lock);
        pm__comm_finalize();
        pm__proto_fini();
        pm__data_fini();
        memset(&pm__hooks, 0, sizeof pm__hooks);
        atomic_store(&pm__life, PM__LIFE_DOWN);
        return rc;
    }
    pm__rt.initialized = 1;
    atomic_store(&pm__life, PM__LIFE_UP);
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
    int expect = PM__LIFE_UP;
    if (!atomic_compare_exchange_strong(&pm__life, &expect, PM__LIFE_STOPPING))
        return PM__FAIL(PM_ENOTINIT, "pm_finalize called %s; call it once, after pm_init",
                        expect == PM__LIFE_STOPPING ? "while another thread runs pm_finalize"
                        : expect == PM__LIFE_STARTING ? "while pm_init runs" : "before pm_init (or twice)");
    int others = pm__calls_inside();
    if (others > 0) {
        atomic_store(&pm__life, PM__LIFE_UP);
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
    pm__comm_stop();
    pm__proto_fini();
    pm__data_fini();
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
    memset(&pm__hooks, 0, sizeof pm__hooks);
    pm__log_set_host(0);
    atomic_store(&pm__life, PM__LIFE_DOWN);
    return rc;
}

