/*
 * Tasks: descriptor checks, submission, dependencies between tasks that
 * share memories, completion, waiting and statistics.
 */
#include "core/internal.h"
#include "core/ops.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it, and pages come by faults */
#endif

/* Chunks per task when the descriptor leaves the grain to pmlib: enough for
 * load balance on many stubs, few enough that hand-out costs nothing. */
#define PM__AUTO_CHUNKS 4096
/* Subtask ids and sums of counts stay far from wrapping. */
#define PM__MAX_SUBTASKS (UINT64_C(1) << 62)

size_t pm_type_size(pm_type_t type)
{
    switch (type) {
    case PM_INT32: case PM_UINT32: case PM_FLOAT: return 4;
    case PM_INT64: case PM_UINT64: case PM_DOUBLE: return 8;
    default: return 0;
    }
}

int pm_task_desc_init(pm_task_desc_t *desc)
{
    if (desc == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_init: desc is NULL");
    memset(desc, 0, sizeof *desc);
    desc->sched = PM_SCHED_DEFAULT;
    desc->devices = PM_DEVICE_ANY;
    return 0;
}

int pm_task_desc_add(pm_task_desc_t *desc, pm_memory_t memory, pm_access_t access)
{
    if (desc == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_add: desc is NULL");
    if (access != PM_READ && access != PM_WRITE && access != PM_READ_WRITE)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_add: access %d is not PM_READ, PM_WRITE or PM_READ_WRITE", (int)access);
    if (desc->nmem < 0 || desc->nmem >= PM_MAX_TASK_MEMORIES)
        return PM__FAIL(PM_ETOOMANY, "pm_task_desc_add: a task uses at most %d memories; "
                        "merge memories or split the task", PM_MAX_TASK_MEMORIES);
    int i = desc->nmem++;
    desc->mem[i] = (pm_task_memory_t){.memory = memory, .access = access,
                                      .reduce = PM_REDUCE_NONE, .type = PM_TYPE_NONE};
    return i;
}

static int check_reduce(int index, pm_reduce_op_t op, pm_type_t type)
{
    if (op == PM_REDUCE_NONE || op == PM_REDUCE_CUSTOM)
        return 0;
    int rc = pm__reduce_check(op, type);
    if (rc == PM_ETYPE)
        return PM__FAIL(rc, "memory %d: bitwise reduce ops need an integer type, not float or double", index);
    if (rc != 0)
        return PM__FAIL(rc, "memory %d: reduce op %d / type %d is not a built-in reduce; "
                        "use PM_REDUCE_SUM..PM_REDUCE_BXOR with PM_INT32..PM_DOUBLE", index, (int)op, (int)type);
    return 0;
}

int pm_task_desc_reduce(pm_task_desc_t *desc, int index, pm_reduce_op_t op, pm_type_t type)
{
    if (desc == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_reduce: desc is NULL");
    if (index < 0 || index >= desc->nmem)
        return PM__FAIL(PM_EINVAL, "pm_task_desc_reduce: memory index %d, but the descriptor has %d memories",
                        index, desc->nmem);
    int rc = check_reduce(index, op, type);
    if (rc != 0)
        return rc;
    desc->mem[index].reduce = op;
    desc->mem[index].type = op == PM_REDUCE_CUSTOM ? PM_TYPE_NONE : type;
    return 0;
}

/* ---- checks at submit -------------------------------------------------- */

static int check_desc(const pm_task_desc_t *d, const pm__callbacks_t **set)
{
    const pm__callbacks_t *cbs;
    if (d == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc is NULL; fill one with pm_task_desc_init");
    if (d->callbacks == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->callbacks is NULL; set it to a name given to pm_callbacks_register");
    if ((*set = cbs = pm__registry_get(d->callbacks)) == NULL)
        return PM__FAIL(PM_ENOCALLBACK, "pm_task_submit: no callbacks named '%.64s' on host %d; "
                        "call pm_callbacks_register on every host before submitting", d->callbacks, pm__rt.host);
    if (d->subtasks == 0)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: a task needs at least one subtask (desc->subtasks is 0)");
    if (d->subtasks > PM__MAX_SUBTASKS)
        return PM__FAIL(PM_ERANGE, "pm_task_submit: desc->subtasks is %llu; a task has at most 2^62 subtasks, "
                        "split the work into several tasks", (unsigned long long)d->subtasks);
    if (d->nmem < 0 || d->nmem > PM_MAX_TASK_MEMORIES)
        return PM__FAIL(PM_ETOOMANY, "pm_task_submit: desc->nmem is %d; a task uses 0 to %d memories",
                        d->nmem, PM_MAX_TASK_MEMORIES);
    if (d->conf_bytes > 0 && d->conf == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->conf is NULL but conf_bytes is %zu", d->conf_bytes);
    if (d->devices & ~PM_DEVICE_ANY || d->devices == 0)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->devices must be PM_DEVICE_CPU, PM_DEVICE_GPU or both");
    if (d->sched != PM_SCHED_DEFAULT && pm__hooks.policy(d->sched) == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: desc->sched %d is not a pm_sched_t value", (int)d->sched);
    for (int i = 0; i < d->nmem; i++) {
        const pm_task_memory_t *m = &d->mem[i];
        if (m->access != PM_READ && m->access != PM_WRITE && m->access != PM_READ_WRITE)
            return PM__FAIL(PM_EINVAL, "pm_task_submit: memory %d has access %d; use PM_READ, PM_WRITE or PM_READ_WRITE",
                            i, (int)m->access);
        int rc = check_reduce(i, m->reduce, m->type);
        if (rc != 0)
            return rc;
        if (m->reduce != PM_REDUCE_NONE && m->access == PM_READ)
            return PM__FAIL(PM_EINVAL, "pm_task_submit: memory %d is reduced but added as PM_READ; add it with PM_WRITE",
                            i);
        if (m->reduce == PM_REDUCE_CUSTOM && cbs->cb.reduce == NULL)
            return PM__FAIL(PM_EINVAL, "pm_task_submit: memory %d uses PM_REDUCE_CUSTOM but callbacks '%s' have no reduce callback",
                            i, cbs->name);
        for (int j = 0; j < i; j++)
            if (d->mem[j].memory.id == m->memory.id)
                return PM__FAIL(PM_EINVAL, "pm_task_submit: the same memory is task memory %d and %d; name each memory once",
                                j, i);
    }
    return 0;
}

/* The device filter's answer for a kind of device, asked once per task and
 * device model (so a filter that changes its mind cannot strand a task). */
static bool filter_says(pm__task_t *t, pm_device_kind_t kind, int major, int minor)
{
    const pm_callbacks_t *cb = &t->cbs->cb;
    if (cb->device_filter == NULL)
        return true;
    if (kind == PM_DEVICE_CPU) {
        if (t->filter_cpu < 0)
            t->filter_cpu = cb->device_filter(PM_DEVICE_CPU, 0, 0, t->conf, t->desc.conf_bytes) != 0;
        return t->filter_cpu;
    }
    for (int i = 0; i < t->nfilter_gpu; i++)
        if (t->filter_gpu[i].major == major && t->filter_gpu[i].minor == minor)
            return t->filter_gpu[i].ok;
    bool ok = cb->device_filter(PM_DEVICE_GPU, major, minor, t->conf, t->desc.conf_bytes) != 0;
    if (t->nfilter_gpu < sizeof t->filter_gpu / sizeof t->filter_gpu[0])
        t->filter_gpu[t->nfilter_gpu++] = (typeof(t->filter_gpu[0])){(short)major, (short)minor, ok};
    return ok;
}

int pm__gpu_eligible(const pm__task_t *t, int major, int minor)
{
    const pm_callbacks_t *cb = &t->cbs->cb;
    if (cb->cuda == NULL || !(t->desc.devices & PM_DEVICE_GPU) || major * 10 + minor < t->desc.min_cc)
        return 0;
    /* The answers are filled in while the task is created, before any other
     * thread sees it; a GPU model not asked then is asked now, once. */
    return filter_says((pm__task_t *)t, PM_DEVICE_GPU, major, minor);
}

bool pm__cpu_eligible(pm__task_t *t)
{
    return t->cbs->cb.cpu != NULL && (t->desc.devices & PM_DEVICE_CPU) &&
           filter_says(t, PM_DEVICE_CPU, 0, 0);
}

/* How much of a task host h should get first: its stubs that can run it
 * (all hosts alike under static-equal). */
double pm__host_weight(pm__task_t *t, int h)
{
    double w = 0;
    if (pm__cpu_eligible(t))
        w += pm__hosts[h].ncpu;
    for (int g = 0; g < pm__hosts[h].ngpu && g < PM__MAX_GPUS; g++)
        w += pm__gpu_eligible(t, pm__hosts[h].gpu[g].major, pm__hosts[h].gpu[g].minor);
    if (t->desc.sched == PM_SCHED_STATIC_EQUAL && w > 0)
        w = 1;
    return w;
}

static int check_devices(pm__task_t *t)
{
    if (t->run_kinds != 0) /* a stub of this host may run it */
        return 0;
    for (int h = 0; h < pm__rt.nhosts; h++)
        if (pm__host_weight(t, h) > 0)
            return 0;
    const pm_callbacks_t *cb = &t->cbs->cb;
    int gpus = 0;
    for (int h = 0; h < pm__rt.nhosts; h++)
        gpus += pm__hosts[h].ngpu;
    if (cb->cpu == NULL && gpus == 0)
        return PM__FAIL(PM_ENODEVICE, "callbacks '%s' have no cpu callback and no host has GPU stubs; "
                        "add a cpu callback or run on hosts with GPUs", t->cbs->name);
    if (t->desc.devices == PM_DEVICE_GPU && gpus == 0)
        return PM__FAIL(PM_ENODEVICE, "the task may run only on GPUs (desc->devices) and no host has one; "
                        "allow PM_DEVICE_CPU or run on hosts with GPUs (pmlib-info lists them)");
    return PM__FAIL(PM_ENODEVICE, "no stub may run callbacks '%s' (device mask %d, device filter); "
                    "widen desc->devices or the filter", t->cbs->name, t->desc.devices);
}

/* ---- creation ---------------------------------------------------------- */

/*
 * Freed task blocks are kept, by the number of memories they have room
 * for, for later tasks: a program that submits tasks over and over takes
 * warm blocks from here, not from malloc and fresh pages (on one host a
 * task without memories costs 1.6 to 3.5 KB, by the stubs). At most
 * PMLIB_TASK_CACHE_MB are kept (by default room for 2^17 such tasks and
 * as many on one memory, cache_default_mb; 0: none) until pm_finalize; the rest go
 * back to malloc. Under AddressSanitizer nothing is kept, so a stale
 * pointer into a freed task is still caught.
 *
 * New blocks are cut from slabs of PM__SLAB_BYTES, as long as the slabs
 * stay within that bound: a slab is asked for as a huge page where the
 * kernel offers them and filled in one call, where blocks from malloc
 * took a page fault every few tasks (on a virtual machine, most of a
 * first burst's time: 3.4 us of CPU per empty task against 0.6 once
 * the blocks were warm). A block of a slab is never given back to malloc:
 * it waits in the cache; the slabs go at pm_finalize.
 */
#if defined(__SANITIZE_ADDRESS__)
#define BLOCK_CACHE_ON 0
#else
#define BLOCK_CACHE_ON 1
#endif
#define PM__SLAB_BYTES ((size_t)2 << 20)
#define PM__SLAB_SLOW_S 1e-3
/* Blocks by class: the task's memories, and whether the block is lean
 * (block_class). */
#define BLOCK_CLASSES (2 * (PM_MAX_TASK_MEMORIES + 1))
static struct {
    pm__lock_t lock;
    void *head[BLOCK_CLASSES];      /* blocks of malloc */
    void *slab_head[BLOCK_CLASSES]; /* blocks of slabs */
    size_t bytes, max; /* bytes: of malloc blocks kept; max: read at the first use after pm_init */
    bool max_read;
    char *cut, *end; /* the rest of the newest slab */
    void **slabs;    /* every slab, for pm_finalize */
    size_t nslabs, cap_slabs;
    bool small_pages; /* no more huge pages: one came slowly */
} block_cache;

static size_t block_bytes(int nmem, bool lean);

/* Without PMLIB_TASK_CACHE_MB: room for a burst of PM__CACHE_TASKS tasks
 * without memories and as many on one memory (the two usual kinds: the
 * blocks of one kind wait on lists of their own, unused by the other),
 * at least 256 MiB and at most a sixteenth of the machine's memory. A
 * block grows with the stubs (their counters and scheduling slots, a
 * line each): 1.7 KB with 2 stubs, 3.5 KB with 16. Where a bound held
 * fewer, the rest of a burst came from malloc, each block out of every
 * cache and on small pages: on 16 cores, room for 2^17 tasks without
 * memories alone (440 MiB) left a third of 100,000 tasks on one memory
 * to malloc after a burst of empty tasks, and they cost 1.3x what 1,000
 * did (1.05x with room for both). */
#define PM__CACHE_TASKS ((size_t)1 << 17)

__attribute__((cold, noinline)) static size_t cache_default_mb(void);

static size_t cache_max(void)
{
    if (!block_cache.max_read) {
        block_cache.max = (size_t)pm__env_uint("PMLIB_TASK_CACHE_MB", "megabytes", 0, 1u << 20, cache_default_mb())
                          << 20;
        block_cache.max_read = true;
    }
    return block_cache.max;
}

/* A new slab, aligned to its size so that it may be one huge page, and its
 * pages in place (cache lock held). False when the bound or the kernel
 * says no: the block then comes from malloc. */
static bool slab_new(void)
{
    if ((block_cache.nslabs + 1) * PM__SLAB_BYTES > cache_max())
        return false;
    if (block_cache.nslabs == block_cache.cap_slabs) {
        size_t cap = block_cache.cap_slabs ? 2 * block_cache.cap_slabs : 16;
        void **s = realloc(block_cache.slabs, cap * sizeof *s);
        if (s == NULL)
            return false;
        block_cache.slabs = s;
        block_cache.cap_slabs = cap;
    }
    /* Twice the size, then the unaligned ends given back. */
    char *p = mmap(NULL, 2 * PM__SLAB_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    char *a = (char *)(((uintptr_t)p + PM__SLAB_BYTES - 1) & ~(uintptr_t)(PM__SLAB_BYTES - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (a + PM__SLAB_BYTES < p + 2 * PM__SLAB_BYTES)
        munmap(a + PM__SLAB_BYTES, (size_t)(p + 2 * PM__SLAB_BYTES - (a + PM__SLAB_BYTES)));
#ifdef MADV_HUGEPAGE
    bool huge = !block_cache.small_pages && madvise(a, PM__SLAB_BYTES, MADV_HUGEPAGE) == 0;
#else
    bool huge = false;
#endif
    double t0 = pm__now();
    (void)madvise(a, PM__SLAB_BYTES, MADV_POPULATE_WRITE);
    /* A huge page is zeroed in a fraction of a millisecond; far longer
     * means the kernel compacted memory to find one (9 ms seen), which it
     * may do for every slab: the later ones take small pages. */
    if (huge && pm__now() - t0 > PM__SLAB_SLOW_S)
        block_cache.small_pages = true;
    block_cache.slabs[block_cache.nslabs++] = a;
    block_cache.cut = a;
    block_cache.end = a + PM__SLAB_BYTES;
    return true;
}

/* A new block of `bytes` from a slab, zeroed (fresh pages); NULL: none
 * left within the bound (cache lock held). */
static void *slab_cut(size_t bytes)
{
    if (bytes > PM__SLAB_BYTES)
        return NULL;
    if ((size_t)(block_cache.end - block_cache.cut) < bytes && !slab_new())
        return NULL;
    void *b = block_cache.cut;
    block_cache.cut += bytes;
    return b;
}

static size_t round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Where the task's per-memory arrays end: its readers, its memories as
 * given, their objects (pm__task_create); a byte per stub follows. */
static size_t memories_end(int nmem)
{
    return sizeof(pm__task_t) +
           (size_t)nmem * (sizeof(pm__reader_t) + sizeof(pm_task_memory_t) + sizeof(pm__memory_t *));
}

/* A task, its readers, its stubs' counters and its policy's state are one
 * block: one allocation per task, and nothing else to free. Of the head
 * (the task, its memories and a byte per stub) only what block_get says
 * is zeroed for every task; the per-stub lines after it are not
 * (pm__counts_own, pm__ranges_init): with
 * 16 stubs they are two thirds of a 3.4 KB block, and with many tasks in
 * flight a reused block is out of every cache, so each line written at
 * submit was a miss (on 16 cores, zeroing the block was half of submit). */
static size_t head_bytes(int nmem)
{
    return round64(memories_end(nmem) + (size_t)pm__rt.nstubs);
}

static size_t counts_bytes(void)
{
    return round64((size_t)pm__rt.nstubs * sizeof(pm__stub_counts_t));
}

static int block_nmem(int nmem)
{
    return nmem > 0 && nmem <= PM_MAX_TASK_MEMORIES ? nmem : 0;
}

/*
 * A block holds its task's memories and, unless it is lean, room for a
 * scheduling state at its end. A task of one chunk that only this host's
 * CPU stubs may run has no such state under pull (its chunk is a flag,
 * sched/pull.c): on 16 cores the room was 1.3 KB of a 3.5 KB block,
 * memory every pending task held and a first burst of tasks had the
 * kernel zero. The cache keeps each kind of block on lists of its own
 * (block_class).
 */
static size_t block_bytes(int nmem, bool lean)
{
    return head_bytes(nmem) + counts_bytes() + (lean ? 0 : round64(pm__rt.ranges_bytes));
}

static int block_class(int nmem, bool lean)
{
    return nmem + (lean ? PM_MAX_TASK_MEMORIES + 1 : 0);
}

/* Whether a task of this descriptor gets a lean block: one host, pull,
 * one chunk, CPU stubs alone (as pm__task_create and pull_init find). */
static bool lean_task(const pm_task_desc_t *d, const pm__callbacks_t *cbs)
{
    pm_sched_t sched = d->sched == PM_SCHED_DEFAULT ? pm__rt.default_sched : d->sched;
    bool one_chunk = d->subtasks == 1 || (d->grain != 0 && d->grain >= d->subtasks);
    bool cpu = cbs->cb.cpu != NULL && (d->devices & PM_DEVICE_CPU) && pm__rt.ncpu > 0;
    bool gpu = cbs->cb.cuda != NULL && (d->devices & PM_DEVICE_GPU) && pm__rt.nstubs > pm__rt.ncpu;
    return pm__rt.nhosts == 1 && sched == PM_SCHED_PULL && one_chunk && cpu && !gpu &&
           cbs->cb.device_filter == NULL && d->min_cc == 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Whether the processor has PREFETCHW: without it (as GCC assumes for a
 * plain x86-64 build) a prefetch for writing became a read prefetch that
 * bypasses the caches, which fetched a line written on another core as
 * shared, and the write then waited for that core all the same. */
static bool cpu_prefetchw(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
}
static void prefetch_lines_w(const void *p, size_t bytes)
{
    const char *c = p, *end = c + bytes;
    for (; c + 256 <= end; c += 256) /* a block's head is 18 lines and more */
        __asm__ volatile("prefetchw %0\n\tprefetchw %1\n\tprefetchw %2\n\tprefetchw %3"
                         : : "m"(c[0]), "m"(c[64]), "m"(c[128]), "m"(c[192]));
    for (; c < end; c += 64)
        __asm__ volatile("prefetchw %0" : : "m"(*c));
}
#else
static bool cpu_prefetchw(void)
{
    return false;
}
static void prefetch_lines_w(const void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
}
#endif

/* With many tasks in flight the next cached block is far out of every
 * cache; asking for it now, while the program goes on to its next submit,
 * turns the misses of setting it up into hits (a prefetch of a block taken
 * meanwhile by another thread is only wasted). */
void pm__prefetch_lines(const void *p, size_t bytes)
{
    static int w = -1; /* PREFETCHW: -1 not asked yet (a race only asks twice) */
    int have = __atomic_load_n(&w, __ATOMIC_RELAXED);
    if (have < 0)
        __atomic_store_n(&w, have = cpu_prefetchw(), __ATOMIC_RELAXED);
    if (have) {
        prefetch_lines_w(p, bytes);
        return;
    }
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch((const char *)p + o, 1, 3);
}

/* A block off a free list (cache lock held): its successor in *next. */
static void *list_pop(void **head, void **next)
{
    void *b = *head;
    if (b != NULL)
        *next = *head = *(void **)b;
    return b;
}

static pm__task_t *block_get(int nmem, bool lean)
{
    void *b = NULL, *next = NULL;
    size_t bytes = block_bytes(nmem, lean);
    const int cls = block_class(nmem, lean);
    bool slab = false, fresh = false;
    if (BLOCK_CACHE_ON) {
        pm__lock(&block_cache.lock);
        b = list_pop(&block_cache.slab_head[cls], &next);
        slab = b != NULL;
        if (b == NULL && (b = list_pop(&block_cache.head[cls], &next)) != NULL)
            block_cache.bytes -= bytes;
        if (b == NULL && (b = slab_cut(bytes)) != NULL)
            slab = fresh = true;
        pm__unlock(&block_cache.lock);
    }
    /* The block's own count of its uses, not a count shared by all (a
     * locked add per task, where the stores of the head before it were
     * waited for): its per-stub lines only ever compare with its own. A
     * fresh block's lines hold gen 0. */
    uint64_t gen = 1;
    if (b != NULL && !fresh) { /* its per-stub lines hold an older gen: they read as empty */
        size_t head = head_bytes(nmem);
        gen = ((pm__task_t *)b)->gen + 1;
        /* Not the configuration's room, and on one host not what only
         * several hosts write (pm__task_t); after the task, its memories'
         * readers but not what create fills in (the memories, the stubs
         * that may run it); nor the stubs' counters nor their slots of the
         * plan: stubs write them (a pooled task's plan writes no slot, and
         * on 31 stubs the slots were 31 of the 36 lines asked for). */
        const size_t from = pm__rt.nhosts > 1 ? PM__TASK_HOSTS : sizeof(pm__task_t);
        const size_t readers = sizeof(pm__task_t) + (size_t)nmem * sizeof(pm__reader_t);
        memset(b, 0, PM__TASK_ZEROED);
        memset((char *)b + from, 0, readers - from);
        if (next != NULL) {
            const size_t plan = head + counts_bytes() + pm__rt.ranges_slots;
            pm__prefetch_lines(next, PM__TASK_ZEROED);
            pm__prefetch_lines((char *)next + from, memories_end(nmem) - from);
            if (!lean)
                pm__prefetch_lines((char *)next + plan, round64(pm__rt.ranges_bytes - pm__rt.ranges_slots));
        }
    }
    if (b == NULL && (b = pm__aligned_alloc(bytes)) != NULL)
        memset(b, 0, bytes); /* gen 0: no task's */
    if (b != NULL) {
        ((pm__task_t *)b)->in_slab = slab;
        ((pm__task_t *)b)->lean = lean;
        ((pm__task_t *)b)->gen = gen;
    }
    return b;
}

static void block_put(pm__task_t *t)
{
    int cls = block_class(t->desc.nmem, t->lean);
    if (BLOCK_CACHE_ON) {
        size_t bytes = t->in_slab ? 0 : block_bytes(t->desc.nmem, t->lean); /* a slab's block is not counted alone */
        pm__lock(&block_cache.lock);
        bool keep = t->in_slab || block_cache.nslabs * PM__SLAB_BYTES + block_cache.bytes + bytes <= cache_max();
        if (t->in_slab) {
            *(void **)t = block_cache.slab_head[cls];
            block_cache.slab_head[cls] = t;
        } else if (keep) {
            *(void **)t = block_cache.head[cls];
            block_cache.head[cls] = t;
            block_cache.bytes += bytes;
        }
        pm__unlock(&block_cache.lock);
        if (keep)
            return;
    }
    free(t);
}

/* At pm_finalize: the next pm_init may have another number of stubs. */
static void block_cache_clear(void)
{
    for (int i = 0; i < BLOCK_CLASSES; i++)
        while (block_cache.head[i] != NULL) {
            void *b = block_cache.head[i];
            block_cache.head[i] = *(void **)b;
            free(b);
        }
    for (size_t i = 0; i < block_cache.nslabs; i++)
        munmap(block_cache.slabs[i], PM__SLAB_BYTES);
    free(block_cache.slabs);
    memset(&block_cache, 0, sizeof block_cache); /* empty, unlocked, the bound read again */
}

#if defined(__SANITIZE_ADDRESS__)
/* On one host what only several hosts write is never zeroed (block_get):
 * a write there would reach the next task of the block. */
static void hosts_part_check(const pm__task_t *t)
{
    const unsigned char *p = (const unsigned char *)t;
    for (size_t i = PM__TASK_HOSTS; pm__rt.nhosts == 1 && i < sizeof *t; i++)
        if (p[i] != 0) {
            pm__error("internal: task %llu wrote byte %zu of its block, which one host never writes",
                      (unsigned long long)t->seq, i);
            abort();
        }
}
#else
static void hosts_part_check(const pm__task_t *t)
{
    (void)t;
}
#endif

static void task_free(pm__task_t *t)
{
    hosts_part_check(t);
    if (t->pieces != NULL)
        pm__task_free_pieces(t);
    if (pm__rt.nhosts > 1) { /* only tasks of several hosts have these */
        free(t->running);
        free(t->running_since);
        free(t->copied);
        free(t->done_map);
        free(t->host_lo);
        free(t->host_hi);
        free(t->host_fed);
        free(t->host_busy);
        free(t->host_run);
        free(t->xbytes);
    }
    if (t->subs_set != NULL) {
        pm__subs_release(t);
    } else if (t->chunk_subs != NULL) {
        for (uint64_t c = 0; c < t->nchunks; c++)
            pm__chunk_subs_free(&t->chunk_subs[c]);
        pm__subs_table_free(t->chunk_subs);
    }
    if (t->policy != NULL)
        t->policy->fini(t);
    if (t->tree != NULL)
        pm__hooks.tree_free(t);
    if (t->message != NULL)
        free(t->message);
    if (t->dependents != t->dep_room)
        free(t->dependents);
    if (t->conf != t->conf_room)
        free(t->conf);
    block_put(t);
}

int pm__task_create(const pm_task_desc_t *d, const pm__callbacks_t *cbs, pm__task_t **out)
{
    int nmem = block_nmem(d->nmem);
    size_t head = head_bytes(nmem);
    pm__task_t *t = block_get(nmem, lean_task(d, cbs));
    if (t == NULL)
        return PM_ENOMEM;
    t->readers = (pm__reader_t *)(t + 1);
    t->desc = (pm__task_desc_t){
        .callbacks = d->callbacks, .subtasks = d->subtasks, .nmem = nmem,
        .mem = (pm_task_memory_t *)(t->readers + nmem), .conf = d->conf,
        .conf_bytes = d->conf_bytes, .flags = d->flags, .sched = d->sched,
        .grain = d->grain, .devices = d->devices, .min_cc = d->min_cc};
    memcpy(t->desc.mem, d->mem, (size_t)nmem * sizeof *d->mem);
    t->mems = (pm__memory_t **)(t->desc.mem + nmem);
    t->dependents = t->dep_room; /* most tasks have one or two */
    t->cap_dependents = 2;
    t->counts = (pm__stub_counts_t *)((char *)t + head);
    t->sched_space = t->lean ? NULL : (char *)t + head + counts_bytes();
    t->failed_host = -1;
    atomic_init(&t->holds, 1);
    t->cbs = cbs;
    t->failed_subtask = UINT64_MAX;
    t->t_submit = pm__now();
    if (d->conf_bytes > 0) {
        t->conf = d->conf_bytes <= sizeof t->conf_room ? t->conf_room : malloc(d->conf_bytes);
        if (t->conf == NULL)
            goto nomem;
        memcpy(t->conf, d->conf, d->conf_bytes);
    }
    t->desc.conf = t->conf;
    t->desc.callbacks = t->cbs->name;
    if (pm__rt.nhosts > 1) {
        t->xbytes = calloc(3 * (size_t)pm__rt.nhosts, sizeof *t->xbytes);
        if (t->xbytes == NULL)
            goto nomem;
    }
    if (t->desc.sched == PM_SCHED_DEFAULT)
        t->desc.sched = pm__rt.default_sched;
    /* No sum here may wrap: subtasks may be near 2^64 (checked at submit). */
    t->grain = d->grain ? d->grain : d->subtasks / PM__AUTO_CHUNKS + (d->subtasks % PM__AUTO_CHUNKS != 0);
    if (t->grain > d->subtasks)
        t->grain = d->subtasks;
    t->nchunks = d->subtasks / t->grain + (d->subtasks % t->grain != 0);
    t->lo = 0;
    t->hi = t->nchunks;
    atomic_init(&t->outstanding, t->nchunks + (uint64_t)(pm__rt.nhosts - 1));
    for (int i = 0; i < d->nmem; i++)
        t->nred += d->mem[i].reduce != PM_REDUCE_NONE;
    t->filter_cpu = -1;
    bool cpu_ok = pm__cpu_eligible(t);
    t->every_kind = t->desc.sched == PM_SCHED_PULL ? 3u : 0u;
    if (t->cbs->cb.device_filter == NULL && t->desc.min_cc == 0) {
        /* Every stub of a kind alike, CPU stubs first: no stub need be
         * read (a line each, 16 of them per task on 16 cores). */
        const int ncpu = pm__rt.ncpu, ngpu = pm__rt.nstubs - pm__rt.ncpu;
        unsigned ok = (cpu_ok ? 1u : 0u) | (pm__gpu_eligible(t, 0, 0) ? 2u : 0u);
        t->runnable = NULL; /* run_kinds says it for each kind (pm__task_runnable_on) */
        t->all_kinds = (unsigned char)((ncpu > 0 ? 1u : 0u) | (ngpu > 0 ? 2u : 0u));
        t->run_kinds = (unsigned char)(t->all_kinds & ok);
        t->every_kind &= (unsigned char)~(t->all_kinds & ~ok);
    } else {
        t->runnable = (unsigned char *)(t->mems + nmem);
        for (int i = 0; i < pm__rt.nstubs; i++) { /* every stub will look at the task */
            const pm__stub_t *s = &pm__rt.stubs[i];
            unsigned kind = s->ops->kind == PM_DEVICE_GPU ? 2u : 1u;
            t->runnable[i] = kind == 2u ? pm__gpu_eligible(t, s->major, s->minor) : cpu_ok;
            t->all_kinds |= kind;
            t->run_kinds |= t->runnable[i] ? kind : 0u;
            if (!t->runnable[i])
                t->every_kind &= (unsigned char)~kind;
        }
    }
    if (pm__rt.nhosts > 1 && pm__rt.host == 0) {
        t->done_map = calloc(t->nchunks, sizeof *t->done_map);
        if (t->done_map == NULL)
            goto nomem;
    } else if (pm__rt.nhosts > 1) {
        /* Only other hosts are asked for copies of their stragglers; host
         * 0's GPUs keep running chunks as one pipelined stream. */
        int n = pm__rt.nstubs;
        t->running = calloc((size_t)n, sizeof *t->running);
        t->running_since = calloc((size_t)n, sizeof *t->running_since);
        t->copied = calloc((size_t)n, sizeof *t->copied);
        if (t->running == NULL || t->running_since == NULL || t->copied == NULL)
            goto nomem;
        for (int i = 0; i < n; i++)
            atomic_init(&t->running[i], UINT64_MAX);
    }
    if (cbs->cb.subscribe != NULL && pm__subs_alloc(t) != 0)
        goto nomem;
    if (t->nred > 0 && pm__hooks.tree_create(t) != 0)
        goto nomem;
    *out = t;
    return 0;
nomem:
    task_free(t);
    return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory for a task of %llu subtasks",
                    (unsigned long long)d->subtasks);
}

/* ---- the sequence number table ---------------------------------------- */

static size_t seq_bucket(uint64_t seq, size_t cap)
{
    return (size_t)((seq * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static int seq_add_locked(pm__task_t *t)
{
    if (pm__rt.nhosts == 1)
        return 0; /* only messages between hosts name tasks by number */
    if (pm__rt.nbyseq + 1 > pm__rt.byseq_cap / 2) {
        size_t cap = pm__rt.byseq_cap ? pm__rt.byseq_cap * 2 : 256;
        pm__task_t **n = calloc(cap, sizeof *n);
        if (n == NULL)
            return PM_ENOMEM;
        for (size_t b = 0; b < pm__rt.byseq_cap; b++)
            for (pm__task_t *e = pm__rt.byseq[b], *next; e != NULL; e = next) {
                next = e->hnext;
                size_t k = seq_bucket(e->seq, cap);
                e->hnext = n[k];
                n[k] = e;
            }
        free(pm__rt.byseq);
        pm__rt.byseq = n;
        pm__rt.byseq_cap = cap;
    }
    size_t k = seq_bucket(t->seq, pm__rt.byseq_cap);
    t->hnext = pm__rt.byseq[k];
    pm__rt.byseq[k] = t;
    pm__rt.nbyseq++;
    return 0;
}

static void seq_remove_locked(pm__task_t *t)
{
    if (pm__rt.byseq_cap == 0)
        return;
    pm__task_t **pp = &pm__rt.byseq[seq_bucket(t->seq, pm__rt.byseq_cap)];
    while (*pp != NULL && *pp != t)
        pp = &(*pp)->hnext;
    if (*pp == t) {
        *pp = t->hnext;
        t->hnext = NULL;
        pm__rt.nbyseq--;
    }
}

pm__task_t *pm__task_find_locked(uint64_t seq)
{
    if (pm__rt.byseq_cap == 0)
        return NULL;
    for (pm__task_t *t = pm__rt.byseq[seq_bucket(seq, pm__rt.byseq_cap)]; t != NULL; t = t->hnext)
        if (t->seq == seq)
            return t;
    return NULL;
}

/* ---- unfinished tasks and ready lists ----------------------------------- */

static pm__tlink_t *link_at(pm__task_t *t, size_t off)
{
    return (pm__tlink_t *)((char *)t + off);
}

/* Appends t to list l through its link at offset `off`, unless it is on. */
static void tlist_append(pm__tlist_t *l, pm__task_t *t, size_t off)
{
    pm__tlink_t *k = link_at(t, off);
    if (k->on)
        return;
    *k = (pm__tlink_t){.prev = l->tail, .next = NULL, .on = true};
    if (l->tail != NULL)
        link_at(l->tail, off)->next = t;
    else
        l->head = t;
    l->tail = t;
}

/* At the front: for a task older than most on the list. */
static void tlist_prepend(pm__tlist_t *l, pm__task_t *t, size_t off)
{
    pm__tlink_t *k = link_at(t, off);
    if (k->on)
        return;
    *k = (pm__tlink_t){.prev = NULL, .next = l->head, .on = true};
    if (l->head != NULL)
        link_at(l->head, off)->prev = t;
    else
        l->tail = t;
    l->head = t;
}

static void tlist_remove(pm__tlist_t *l, pm__task_t *t, size_t off)
{
    pm__tlink_t *k = link_at(t, off);
    if (!k->on)
        return;
    if (k->prev != NULL)
        link_at(k->prev, off)->next = k->next;
    else
        l->head = k->next;
    if (k->next != NULL)
        link_at(k->next, off)->prev = k->prev;
    else
        l->tail = k->prev;
    *k = (pm__tlink_t){0};
}

#define ACTIVE_LINK offsetof(pm__task_t, alink)
#define READY_LINK(k) (offsetof(pm__task_t, rlink) + (size_t)(k) * sizeof(pm__tlink_t))

void pm__stubs_woken(int k)
{
    for (int i = 0; i < pm__rt.nstubs; i++)
        if ((pm__rt.stubs[i].ops->kind == PM_DEVICE_GPU) == (k == 1))
            atomic_store_explicit(&pm__rt.stubs[i].parked, false, memory_order_relaxed);
}

/* Wake-ups decided under the ready lock and sent after it is dropped, so
 * that the lock is not held across the system call (stubs spin on it). A
 * stub that parks in between sees the new work first: work is added, and
 * the work generation moved, under the same lock. */
typedef struct wake {
    uint64_t n[2]; /* signals per kind */
    bool all[2];   /* or a broadcast */
} wake_t;

static void wake_send(const wake_t *w)
{
    for (int k = 0; k < 2; k++) {
        if (w->all[k])
            pthread_cond_broadcast(&pm__rt.work_cv[k]);
        else
            for (uint64_t i = 0; i < w->n[k]; i++)
                pthread_cond_signal(&pm__rt.work_cv[k]);
    }
}

/* Pokes stub s, taken off the pollers, handing it t (held) or nothing. */
static void poke_stub(pm__stub_t *s, pm__task_t *t)
{
    /* Relaxed: a hint for others_left (sched/pull.c), ordered for the
     * stub by the poke's release. Sequentially consistent, it was a
     * locked exchange that waited for every store before it, the new
     * task's block among them, and for the stub's line (16 cores: 70% of
     * the time in wake_stubs_locked). */
    atomic_store_explicit(&s->parked, false, memory_order_relaxed);
    s->handed = t;
    atomic_store_explicit(&s->poke, PM__POKE_DONE, memory_order_release);
}

/*
 * A program thread's stash of polling CPU stubs (one host), taken off the
 * pollers' word up to PM__STASH_MAX at a time (the protocol: the poke
 * word's, core/internal.h). The word is a line every stub writes as it
 * goes idle, once per task when each task goes to a poller; taken for
 * each submit, it was a quarter of an empty task's cost on 16 cores
 * (0.67 -> 0.50 us a task with the stash). A stash lasts at most a
 * polling spell: its stubs take themselves back when their spell ends.
 * Unseen by other threads meanwhile, they get this thread's tasks first
 * (hand_whole, poke_pollers).
 */
#define PM__STASH_MAX 8

static PM__TLS struct {
    pm__task_t *submitting; /* in pm_task_submit, runtime lock held: that task, no other thread's yet */
    pm__stub_t *s[PM__STASH_MAX];
    uint64_t word[PM__STASH_MAX]; /* each one's poke word when taken */
    int n;
    uint64_t life; /* stash_life when filled: stubs of an earlier pm_init are gone */
} stash;

static atomic_uint_fast64_t stash_life; /* one more at each pm_finalize */

/* The `max` highest bits of v. */
static uint64_t top_bits(uint64_t v, int max)
{
    uint64_t m = 0;
    for (int i = 0; i < max && v != 0; i++) {
        uint64_t b = 1ull << (63 - __builtin_clzll(v));
        m |= b;
        v &= ~b;
    }
    return m;
}

/* Takes up to PM__STASH_MAX polling CPU stubs into this thread's stash;
 * false when none polls. */
static bool stash_fill(void)
{
    stash.n = 0;
    for (int w = pm__rt.poll_words - 1; w >= 0; w--) {
        atomic_uint_fast64_t *word = &pm__rt.pollers[0][w];
        pm__prefetch_lines(word, sizeof *word); /* owned before it is read, as in pm__pollers_pop */
        uint64_t v = atomic_load_explicit(word, memory_order_relaxed);
        if (v == 0)
            continue;
        uint64_t mask = top_bits(v, PM__STASH_MAX);
        uint64_t got = atomic_fetch_and(word, ~mask) & mask;
        if (got == 0)
            continue;
        stash.life = atomic_load_explicit(&stash_life, memory_order_relaxed);
        for (uint64_t b = got; b != 0; b &= b - 1) { /* lowest first: handed out highest first */
            pm__stub_t *s = &pm__rt.stubs[w * 64 + __builtin_ctzll(b)];
            /* WAIT, as it joined: unmarked, it waits for a poke */
            stash.word[stash.n] = atomic_load_explicit(&s->poke, memory_order_relaxed);
            stash.s[stash.n++] = s;
        }
        atomic_fetch_or(&pm__rt.stashed[w], got);
        return true;
    }
    return false;
}

/* The next stub of this thread's stash (filled when empty if `fill`),
 * its poke word when taken in *word; NULL: none. */
pm__stub_t *pm__stash_next(bool fill, uint64_t *word)
{
    if (stash.n > 0 && stash.life != atomic_load_explicit(&stash_life, memory_order_relaxed))
        stash.n = 0;
    if (stash.n == 0 && (!fill || !stash_fill()))
        return NULL;
    stash.n--;
    *word = stash.word[stash.n];
    return stash.s[stash.n];
}

/* Hands t (held for s, or NULL) to stash stub s, whose poke word was
 * `word` when taken: false when s took itself back first (its spell
 * ended), whether or not it joined the pollers again since. */
bool pm__stash_poke(pm__stub_t *s, uint64_t word, pm__task_t *t)
{
    const uint64_t joined = word & ~(uint64_t)0xff;
    if (!atomic_compare_exchange_strong(&s->poke, &word, joined | PM__POKE_CLAIMED))
        return false;
    atomic_store_explicit(&s->parked, false, memory_order_relaxed);
    s->handed = t;
    atomic_store_explicit(&s->poke, joined | PM__POKE_DONE, memory_order_release);
    return true;
}

/* Gives t (or NULL) to the next stub of this thread's stash that still
 * waits, with a hold for it (plain where no other thread knows t yet):
 * false when the stash runs out (filled once more first if `fill`).
 * Inlined: called out of line from hand_whole, empty tasks cost 1.07x
 * on 16 cores (two calls, 7 and 14 rounds). */
static inline __attribute__((always_inline)) bool stash_give(pm__task_t *t, bool fill, bool plain)
{
    uint64_t word;
    plain = plain && t != NULL;
    const int holds = plain ? atomic_load_explicit(&t->holds, memory_order_relaxed) : 0;
    for (pm__stub_t *s; (s = pm__stash_next(fill, &word)) != NULL;) {
        if (plain)
            atomic_store_explicit(&t->holds, holds + 1, memory_order_relaxed);
        else if (t != NULL)
            atomic_fetch_add_explicit(&t->holds, 1, memory_order_relaxed);
        if (pm__stash_poke(s, word, t))
            return true;
        if (plain)
            atomic_store_explicit(&t->holds, holds, memory_order_relaxed);
        else if (t != NULL)
            atomic_fetch_sub_explicit(&t->holds, 1, memory_order_relaxed);
    }
    return false;
}

/* Pokes up to `n` polling stubs of kind k, handing each t (NULL: nothing),
 * and returns how many; no lock needed. The holds of a round of pokes are
 * in place before its first poke: a poked stub may run the whole of a
 * short task before the last poke is sent. */
static uint64_t poke_pollers(int k, uint64_t n, pm__task_t *t)
{
    uint64_t poked = 0;
    /* In pm_task_submit: this thread's stash first (its stubs are off
     * the word); t is held by the program, so a hold given back here
     * never frees it. */
    while (k == 0 && stash.submitting != NULL && poked < n && stash_give(t, false, false))
        poked++;
    while (poked < n) {
        pm__stub_t *got[64];
        int m = 0;
        while (m < 64 && poked + (uint64_t)m < n && (got[m] = pm__pollers_pop(k)) != NULL)
            m++;
        if (t != NULL && m > 0)
            atomic_fetch_add_explicit(&t->holds, m, memory_order_relaxed);
        for (int i = 0; i < m; i++)
            poke_stub(got[i], t);
        poked += (uint64_t)m;
        if (m < 64)
            break;
    }
    return poked;
}

/*
 * Hands new work to idle stubs of kind k (ready lock held; wake_send()
 * after it is dropped): pokes up to `poke` polling stubs, then wakes
 * parked stubs until `wake` stubs in all are on their way. A poke costs a
 * store to a line the poller watches; a wake-up costs a system call and
 * the sleeper's way back, hence the two counts.
 */
static void wake_stubs_locked(wake_t *w, int k, uint64_t poke, uint64_t wake, pm__task_t *t)
{
    /* On one host a poke hands the task itself, held (its block stays,
     * pm__task_hold) until the stub has tried to take a chunk: the stub
     * takes its chunk without the ready lock, which many stubs poked at
     * once would otherwise queue for. A hold, not a count the task's end
     * waits for: on a crowded machine a poked stub may not run for a
     * scheduler's time slice, and the task and all that depends on it
     * would wait as long. The task cannot end while a chunk is
     * untaken, so a late stub finds none and lets go. */
    bool hand = t != NULL && pm__rt.nhosts == 1 && __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == PM__TASK_RUN;
    uint64_t poked = poke_pollers(k, poke, hand ? t : NULL);
    uint64_t chunks = wake > poked ? wake - poked : 0;
    /* Too few pollers for the work: wake sleepers for it as well while
     * the stubs awake leave them room to poll afterwards, so that work
     * that keeps coming (timesteps) finds them polling next time. */
    if (poke > poked && pm__rt.spin_ns > 0) {
        int room = pm__stubs_poll_room();
        if (room > 0 && chunks < poke - poked)
            chunks = poke - poked < (uint64_t)room ? poke - poked : (uint64_t)room;
    }
    uint64_t parked = (uint64_t)atomic_load(&pm__rt.parked[k]);
    if (parked == 0 || chunks == 0)
        return;
    if (chunks >= parked || k == 1) { /* GPU stubs are few: all of them */
        w->all[k] = true;
        pm__stubs_woken(k);
        chunks = parked;
    } else {
        w->n[k] += chunks;
    }
    atomic_fetch_add_explicit(&pm__rt.woken, chunks, memory_order_relaxed);
}

/* A CPU stub is worth waking for a task when it gets at least this much
 * work: below it, the wake-up and the trips through the runtime lock cost
 * more than the stub adds. */
#define PM__WAKE_WORTH_NS 20000.0

/*
 * CPU stubs to engage for a running task: one per chunk, but when the
 * model knows the callbacks' time per subtask on a CPU, no more than the
 * task's work fills at worth_ns each (at least one). A task of a few
 * microseconds then runs on the stubs already awake instead of sending
 * every stub through the ready lock. Should the model be wrong, a stub
 * whose chunk ran long engages the rest (pm__task_wake_more).
 */
static uint64_t cpu_stubs_worth(const pm__task_t *t, double ns, double worth_ns)
{
    if (t->nchunks <= 1 || ns <= 0)
        return t->nchunks;
    double stubs = ns * (double)t->desc.subtasks / worth_ns;
    if (stubs < 1)
        return 1;
    return stubs < (double)t->nchunks ? (uint64_t)stubs : t->nchunks;
}

/* The CPU stubs a running task of every CPU stub is worth: pollers to
 * poke, and stubs in all to wake (cpu_stubs_worth at the two measures,
 * with the model's time per subtask on a CPU). */
typedef struct engage {
    uint64_t poke, wake;
} engage_t;

static engage_t cpu_engage(const pm__task_t *t)
{
    double ns = t->nchunks > 1 ? pm__hooks.model_ns(t->cbs->model, PM_DEVICE_CPU, NULL) : 0;
    return (engage_t){cpu_stubs_worth(t, ns, pm__poke_worth_ns()), cpu_stubs_worth(t, ns, PM__WAKE_WORTH_NS)};
}

/* Stubs besides the caller worth engaging for `left` chunks of chunk_ns
 * each: one per chunk once a chunk alone is worth a stub, else one per
 * worth_ns of the work left, less the caller, which runs its share. */
static uint64_t more_stubs(uint64_t left, uint64_t chunk_ns, double worth_ns)
{
    if ((double)chunk_ns >= worth_ns)
        return left;
    double n = (double)left * (double)chunk_ns / worth_ns;
    return n >= 2 ? (uint64_t)n - 1 : 0;
}

bool pm__task_worth_more(uint64_t n, uint64_t chunk_ns)
{
    return more_stubs(n, chunk_ns, pm__poke_worth_ns()) > 0 || more_stubs(n, chunk_ns, PM__WAKE_WORTH_NS) > 0;
}

void pm__task_wake_more(pm__task_t *t, pm_device_kind_t kind, uint64_t chunk_ns)
{
    const int k = kind == PM_DEVICE_GPU;
    int parked = atomic_load_explicit(&pm__rt.parked[k], memory_order_relaxed);
    bool may_poke = pm__pollers_count(k) > 0 ||
                    (parked > 0 && pm__rt.spin_ns > 0 && pm__stubs_poll_room() > 0);
    if (!may_poke && parked == 0)
        return;
    uint64_t left = t->policy->left(t);
    uint64_t poke = may_poke ? more_stubs(left, chunk_ns, pm__poke_worth_ns()) : 0;
    uint64_t wake = parked > 0 ? more_stubs(left, chunk_ns, PM__WAKE_WORTH_NS) : 0;
    if (poke == 0 && wake == 0)
        return;
    wake_t w = {0};
    pthread_mutex_lock(&pm__rt.ready_lock);
    wake_stubs_locked(&w, k, poke, wake, t);
    pthread_mutex_unlock(&pm__rt.ready_lock);
    wake_send(&w);
}

/*
 * A running task of one chunk that only CPU stubs run, on one host, goes
 * to a polling CPU stub alone, never onto the ready lists, and without
 * the ready lock: the poked stub takes its chunk, and no other stub
 * could. Listed, it would cost that stub one more trip through the ready
 * lock to take it off, and the task's list links two more shared lines.
 * Not when a stub made it ready: that stub looks for work next and takes
 * it itself. False when no CPU stub polls: then the task is listed, and
 * a stub that starts polling meanwhile either finds it listed or is
 * poked there (pm__task_ready_locked reads the pollers after listing).
 */
static bool hand_whole(pm__task_t *t)
{
    if (t->nchunks != 1 || t->run_kinds != 1u || !(t->every_kind & 1u) || pm__rt.nhosts != 1 ||
        __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != PM__TASK_RUN)
        return false;
    const pm__stub_t *me = pm__self_stub;
    if (me != NULL && me->ops->kind == PM_DEVICE_CPU && pm__task_runnable_on(t, me))
        return false;
    /* A program thread's submit: its stash (the task it submits is no
     * other thread's yet). */
    if (stash.submitting != NULL)
        return stash_give(t, true, t == stash.submitting);
    return poke_pollers(0, 1, t) == 1;
}

/* Keeps ready_any[k] true while ready[k] holds a task (ready lock
 * held); true when it went from false to true. Written only when it
 * changes: stubs read it as they go idle. */
static bool ready_note(int k)
{
    bool any = pm__rt.ready[k].head != NULL;
    if (atomic_load_explicit(&pm__rt.ready_any[k], memory_order_relaxed) == any)
        return false;
    atomic_store(&pm__rt.ready_any[k], any);
    return any;
}

/*
 * A running task that the calling CPU stub made ready (it finished what t
 * waited for) and that is worth no other stub: kept for that stub, which
 * runs it next (pm__stub_t.mine), neither listed nor poked. A chain of
 * short tasks then goes from one to the next without the ready lock, the
 * list or the work generation; listed, each task took the ready lock
 * twice and turned ready_any on and off. The stub takes its chunks as a
 * poked stub takes a handed task's; should one run long, pm__task_wake_more
 * engages others as for any task. Only while nothing is listed for CPU
 * stubs: a kept task would run before older listed ones.
 */
static bool keep_for_self(pm__task_t *t, engage_t cpu)
{
    pm__stub_t *me = pm__self_stub;
    /* Not a task a callback submits: its stub runs the rest of its own
     * chunks first. */
    if (me == NULL || stash.submitting != NULL || me->ops->kind != PM_DEVICE_CPU || me->mine != NULL || pm__rt.nhosts != 1 ||
        t->run_kinds != 1u || !(t->every_kind & 1u) ||
        __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != PM__TASK_RUN || !pm__task_runnable_on(t, me))
        return false;
    if (cpu.poke > 1 || cpu.wake > 1)
        return false;
    /* Not past tasks already listed for CPU stubs: they were ready first,
     * and with every stub busy on chains they would wait until the chains
     * end (1 stub: an independent task behind a chain of 200). Listed, t
     * queues behind them. */
    if (atomic_load_explicit(&pm__rt.ready_any[0], memory_order_relaxed))
        return false;
    pm__task_hold(t);
    me->mine = t;
    return true;
}

/*
 * The keeping stub saw chunks left, but a stub it poked for them
 * (pm__task_wake_more) may have taken and run them since, and ended the
 * task: its end found the task unlisted and left the lists alone, and the
 * program may free the block once this stub's hold goes. So the listing
 * is undone when the task has ended: the listing, then a fence, then a
 * read of the chunks outstanding, against the ending stub's drop of the
 * last one, then its read of `listed` (pm__task_unready): one of the two
 * sees the other. Listed for good, a finished task stayed on the ready
 * list after its block was reused, and the stubs stopped (16 cores, 4
 * processes of 27 running 100,000 tasks on one memory).
 */
void pm__task_unkeep(pm__task_t *t)
{
    wake_t w = {0};
    engage_t cpu = cpu_engage(t);
    pthread_mutex_lock(&pm__rt.ready_lock);
    if (!__atomic_load_n(&t->listed, __ATOMIC_RELAXED))
        pm__task_relist_locked(t);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&t->outstanding) == 0)
        pm__task_unready_locked(t);
    else
        wake_stubs_locked(&w, 0, cpu.poke, cpu.wake, t);
    pthread_mutex_unlock(&pm__rt.ready_lock);
    wake_send(&w);
}

void pm__task_ready_locked(pm__task_t *t)
{
    bool prepare = t->state == PM__TASK_PREPARE;
    unsigned kinds = prepare ? t->all_kinds : t->run_kinds;
    if (!prepare && hand_whole(t))
        return;
    /* Asked once: for keeping t, else for engaging CPU stubs below. */
    const engage_t cpu = !prepare && (t->every_kind & 1u) ? cpu_engage(t) : (engage_t){0};
    if (!prepare && keep_for_self(t, cpu))
        return;
    wake_t w = {0};
    pthread_mutex_lock(&pm__rt.ready_lock);
    bool noted = false;
    for (int k = 0; k < 2; k++)
        if (kinds & (1u << k)) {
            tlist_append(&pm__rt.ready[k], t, READY_LINK(k));
            noted |= ready_note(k);
        }
    __atomic_store_n(&t->listed, t->rlink[0].on || t->rlink[1].on, __ATOMIC_RELAXED);
    atomic_fetch_add_explicit(&pm__rt.work_gen, 1, memory_order_release);
    /* A stub that joins the pollers without the ready lock reads
     * ready_any after it joined; the pollers are read below after
     * ready_any was written: one of the two sees the other. */
    if (noted)
        atomic_thread_fence(memory_order_seq_cst);
    /* Only stubs of the kinds that may take part are woken (a CPU task on a
     * GPU host leaves the GPU stub asleep), one per chunk when any of them
     * may take any chunk; a static share belongs to one stub and some
     * stubs of the kind may be excluded: then all of the kind. Any stub
     * subscribes any task's chunks. */
    for (int k = 0; k < 2; k++) {
        if (!(kinds & (1u << k)))
            continue;
        uint64_t poke = UINT64_MAX, wake = UINT64_MAX;
        if (prepare) {
            poke = wake = t->nchunks;
        } else if ((t->every_kind >> k) & 1u) {
            poke = k == 0 ? cpu.poke : t->nchunks;
            wake = k == 0 ? cpu.wake : t->nchunks;
            /* A stub that made t ready (it finished what t waited for)
             * looks for work next and finds t: one stub fewer to engage,
             * so a short task is not split between it and a poked one. */
            const pm__stub_t *me = pm__self_stub;
            if (k == 0 && me != NULL && me->ops->kind == PM_DEVICE_CPU && pm__task_runnable_on(t, me)) {
                poke = poke > 0 ? poke - 1 : 0;
                wake = wake > 0 ? wake - 1 : 0;
            }
        }
        wake_stubs_locked(&w, k, poke, wake, t);
    }
    pthread_mutex_unlock(&pm__rt.ready_lock);
    wake_send(&w);
}

void pm__task_unready_locked(pm__task_t *t)
{
    for (int k = 0; k < 2; k++) {
        tlist_remove(&pm__rt.ready[k], t, READY_LINK(k));
        ready_note(k);
    }
    /* The last touch: once another thread sees 0, this one is done with t. */
    __atomic_store_n(&t->listed, 0, __ATOMIC_RELEASE);
}

void pm__task_relist_locked(pm__task_t *t)
{
    bool noted = false;
    for (int k = 0; k < 2; k++)
        if (t->run_kinds & (1u << k)) {
            tlist_prepend(&pm__rt.ready[k], t, READY_LINK(k));
            noted |= ready_note(k);
        }
    __atomic_store_n(&t->listed, t->rlink[0].on || t->rlink[1].on, __ATOMIC_RELAXED);
    atomic_fetch_add_explicit(&pm__rt.work_gen, 1, memory_order_release);
    if (noted) /* as in pm__task_ready_locked */
        atomic_thread_fence(memory_order_seq_cst);
}

/* Takes t off the ready lists: by a caller holding the runtime lock, by
 * a stub that took its last chunk on one host, or once t has finished.
 * Tasks go on the lists under the runtime lock while they have work, or
 * back on them when a stub gives chunks of a batch back (one host, t
 * running: pm__stub_give_back); so a finished task, or one of another
 * host, found off them stays off, and the ready lock is not taken. */
void pm__task_unready(pm__task_t *t)
{
    /* Sequentially consistent: after the drop of the last chunk
     * outstanding, against a kept task's listing (pm__task_unkeep). */
    if (!__atomic_load_n(&t->listed, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&pm__rt.ready_lock);
    pm__task_unready_locked(t);
    pthread_mutex_unlock(&pm__rt.ready_lock);
}

void pm__task_unready_drained(pm__task_t *t)
{
    if (!__atomic_load_n(&t->listed, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&pm__rt.ready_lock);
    if (t->policy->left(t) == 0)
        pm__task_unready_locked(t);
    pthread_mutex_unlock(&pm__rt.ready_lock);
}

int pm__task_add_remote_locked(pm__task_t *t)
{
    if (seq_add_locked(t) != 0)
        return PM_ENOMEM;
    tlist_append(&pm__rt.active, t, ACTIVE_LINK);
    pm__task_ready_locked(t);
    return 0;
}

void pm__task_drop_remote_locked(pm__task_t *t)
{
    pm__task_unready(t);
    tlist_remove(&pm__rt.active, t, ACTIVE_LINK);
}

void pm__task_forget_remote_locked(pm__task_t *t)
{
    pm__task_drop_remote_locked(t);
    seq_remove_locked(t);
}

/* ---- dependencies -------------------------------------------------------- */

/* Room for `more` dependents, so that linking cannot fail half-way. */
static int reserve_dependents(pm__task_t *e, int more)
{
    if (e->ndependents + more <= e->cap_dependents)
        return 0;
    int cap = e->cap_dependents ? e->cap_dependents * 2 : 4;
    while (cap < e->ndependents + more)
        cap *= 2;
    bool room = e->dependents == e->dep_room;
    pm__task_t **n = realloc(room ? NULL : e->dependents, (size_t)cap * sizeof *n);
    if (n == NULL)
        return PM_ENOMEM;
    if (room)
        memcpy(n, e->dep_room, (size_t)e->ndependents * sizeof *n);
    e->dependents = n;
    e->cap_dependents = cap;
    return 0;
}

static void add_dependent(pm__task_t *earlier, pm__task_t *later)
{
    earlier->dependents[earlier->ndependents++] = later;
    atomic_fetch_add_explicit(&later->ndeps, 1, memory_order_relaxed);
}

static void reader_unlink(pm__memory_t *m, pm__reader_t *r)
{
    if (!r->linked)
        return;
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        m->readers = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->linked = false;
}

/* Everything a task will wait for gets room for its edges first. */
static int reserve_edges_locked(pm__task_t *t)
{
    int more = t->desc.nmem; /* at most one edge per shared memory */
    for (int i = 0; i < t->desc.nmem; i++) {
        pm__memory_t *m = t->mems[i];
        int rc = 0;
        if ((t->desc.mem[i].access & PM_WRITE) && m->readers != NULL) {
            for (pm__reader_t *r = m->readers; r != NULL && rc == 0; r = r->next)
                rc = reserve_dependents(r->task, more);
        } else if (m->last_writer != NULL) {
            rc = reserve_dependents(m->last_writer, more);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Links a task after the unfinished tasks it conflicts with: per memory,
 * a reader after the last writer, a writer after the readers since (or the
 * last writer). Touches only the task's own memories. */
static void link_locked(pm__task_t *t)
{
    for (int i = 0; i < t->desc.nmem; i++) {
        pm__memory_t *m = t->mems[i];
        if (t->desc.mem[i].access & PM_WRITE) {
            if (m->readers != NULL) {
                while (m->readers != NULL) {
                    pm__reader_t *r = m->readers;
                    add_dependent(r->task, t);
                    reader_unlink(m, r);
                }
            } else if (m->last_writer != NULL) {
                add_dependent(m->last_writer, t);
            }
            m->last_writer = t;
        } else {
            if (m->last_writer != NULL)
                add_dependent(m->last_writer, t);
            pm__reader_t *r = &t->readers[i];
            r->task = t;
            r->prev = NULL;
            r->next = m->readers;
            if (m->readers != NULL)
                m->readers->prev = r;
            m->readers = r;
            r->linked = true;
        }
    }
}

/* Makes a task whose dependencies are done runnable (runtime lock held). */
/* From here on subtasks may write; versions will move. */
static void start_running_locked(pm__task_t *t, bool at_submit)
{
    if (pm__rt.nhosts > 1 && t->desc.sched == PM_SCHED_PULL && t->host_lo != NULL)
        pm__hooks.task_place(t);
    __atomic_store_n(&t->state, PM__TASK_RUN, __ATOMIC_RELEASE);
    /* A task that runs as it is submitted starts at its submit time. */
    t->t_start = at_submit ? t->t_submit : pm__now();
    /* Read under the runtime lock or after the task's end: no fence (a
     * locked exchange, which waited for the block's stores). */
    atomic_store_explicit(&t->started, 1, memory_order_relaxed);
    if (pm__rt.nhosts > 1)
        pm__hooks.task_started(t);
    pm__task_ready_locked(t);
    /* Tasks that wait for it are made ready at its end, and with many
     * tasks in flight their blocks are out of every cache: asked for now,
     * while it runs, they are in by then. */
    for (int i = 0; i < t->ndependents && i < 2; i++)
        pm__prefetch_lines(t->dependents[i], PM__TASK_ZEROED);
}

static void make_ready_locked(pm__task_t *t, bool at_submit)
{
    if (t->chunk_subs != NULL && !t->prepared) {
        __atomic_store_n(&t->state, PM__TASK_PREPARE, __ATOMIC_RELEASE);
        pm__task_ready_locked(t);
    } else {
        start_running_locked(t, at_submit);
    }
}

/*
 * A task of at most this many subtasks gets its subscriptions from the
 * submitting thread, outside the runtime lock and while the tasks before it
 * still run, instead of a subscribe pass by the stubs once it is ready:
 * that pass costs a round of wake-ups and hand-outs per task, far more than
 * a few callbacks. On several hosts it also lets host 0 place the task
 * among the hosts as soon as it is ready: after a pass by host 0's stubs
 * the placement would run only when one of them is free, and so would
 * always find host 0 idle and keep independent tasks there. Not for
 * PM_TASK_FRESH_SUBSCRIPTIONS: such a callback may answer from what
 * earlier tasks leave behind.
 */
#define PM__SUBSCRIBE_AT_SUBMIT 64

static bool subscribe_at_submit(const pm__task_t *t)
{
    return t->chunk_subs != NULL && !t->prepared &&
           t->desc.subtasks <= PM__SUBSCRIBE_AT_SUBMIT && !(t->desc.flags & PM_TASK_FRESH_SUBSCRIPTIONS);
}

/* After the subscribe callbacks of every chunk: the overlap check, then the
 * subscriptions are kept for later tasks. Whether the task has not failed. */
static bool subscriptions_checked(pm__task_t *t)
{
    if (t->status == 0)
        pm__subscribe_check_overlap(t);
    if (t->status == 0)
        pm__subs_keep(t);
    return t->status == 0;
}

/* The subscriptions of a task held back from running (subscribe_at_submit).
 * Should they fail, they are forgotten: the task fails in the subscribe
 * pass once it is ready, in its turn, as any other. */
static void subscribe_now(pm__task_t *t)
{
    for (uint64_t k = 0; k < t->nchunks && t->status == 0; k++)
        pm__subscribe_chunk(t, k);
    if (subscriptions_checked(t)) {
        t->prepared = true;
        return;
    }
    for (uint64_t k = 0; k < t->nchunks; k++)
        pm__chunk_subs_free(&t->chunk_subs[k]);
    t->status = 0; /* no other thread has seen the task fail */
    t->nfailed = 0;
    t->failed_subtask = UINT64_MAX;
    t->failed_host = -1;
}

/* Resolves memories, dependencies and the handle; runtime lock held. Either
 * everything is done or nothing. *held: the task waits for subscribe_now()
 * as for one more dependency. *id: the handle, read before a stub may run
 * the task (its line is the one that stub writes as the task ends). */
static int enqueue_locked(pm__task_t *t, bool *held, uint64_t *id)
{
    for (int i = 0; i < t->desc.nmem; i++) {
        t->mems[i] = pm__memory_lookup_locked(t->desc.mem[i].memory);
        if (t->mems[i] == NULL)
            return PM__FAIL(PM_EBADHANDLE, "pm_task_submit: memory %d of the task was released or never created", i);
    }
    if (reserve_edges_locked(t) != 0)
        return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory");
    t->prepared = pm__subs_reuse(t);
    t->seq = pm__rt.next_seq + 1;
    if (seq_add_locked(t) != 0)
        return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory");
    t->handle = pm__handle_add(&pm__rt.tasks, t);
    if (t->handle == 0) {
        seq_remove_locked(t);
        return PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory for handles");
    }
    *id = t->handle;
    pm__rt.next_seq++;
    link_locked(t);
    for (int i = 0; i < t->desc.nmem; i++)
        t->mems[i]->users++;
    if (pm__rt.list_all || t->desc.nmem > 0 || pm__rt.nhosts > 1)
        tlist_append(&pm__rt.active, t, ACTIVE_LINK);
    /* Under the runtime lock: a plain store, no locked add. */
    atomic_store_explicit(&pm__rt.submitted, atomic_load_explicit(&pm__rt.submitted, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    t->state = PM__TASK_WAITING;
    *held = subscribe_at_submit(t);
    if (*held) /* a locked add of nothing waited for every store before it */
        atomic_fetch_add_explicit(&t->ndeps, 1, memory_order_relaxed);
    if (atomic_load_explicit(&t->ndeps, memory_order_relaxed) == 0)
        make_ready_locked(t, true);
    return 0;
}

int pm_task_submit(const pm_task_desc_t *desc, pm_task_t *task)
{
    PM__CHECK_INIT("pm_task_submit");
    if (pm__rt.host != 0)
        return PM__FAIL(PM_EINVAL, "pm_task_submit on host %d: only host 0 submits tasks; "
                        "the other hosts run their share inside pm_finalize", pm__rt.host);
    if (task == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_submit: task is NULL; pass the address of a pm_task_t");
    *task = PM_TASK_NULL;
    const pm__callbacks_t *cbs;
    int rc = check_desc(desc, &cbs);
    if (rc != 0)
        return rc;
    pm__task_t *t;
    rc = pm__task_create(desc, cbs, &t);
    if (rc != 0)
        return rc;
    rc = check_devices(t);
    if (rc == 0 && pm__rt.nhosts > 1 && pm__hooks.task_split(t) != 0)
        rc = PM__FAIL(PM_ENOMEM, "pm_task_submit: out of memory");
    if (rc == 0) {
        t->policy = pm__hooks.policy(t->desc.sched);
        rc = t->policy->init(t, pm__rt.nstubs);
        if (rc != 0)
            t->policy = NULL;
    }
    if (rc != 0) {
        task_free(t);
        return rc;
    }
    bool held = false;
    uint64_t id = 0;
    pthread_mutex_lock(&pm__rt.lock);
    stash.submitting = t;
    rc = enqueue_locked(t, &held, &id);
    stash.submitting = NULL;
    pthread_mutex_unlock(&pm__rt.lock);
    if (rc != 0) {
        task_free(t);
        return rc;
    }
    /* The last of t's dependencies to go makes it ready: mostly a task it
     * waits for, which ends under the runtime lock; the lock is taken here
     * only when subscribing was the last. */
    if (held) {
        subscribe_now(t);
        if (atomic_fetch_sub(&t->ndeps, 1) == 1) {
            pthread_mutex_lock(&pm__rt.lock);
            make_ready_locked(t, false);
            pthread_mutex_unlock(&pm__rt.lock);
        }
    }
    task->id = id;
    pm__debug("task %llu submitted: %llu subtasks in %llu chunks, callbacks '%s', %s",
              (unsigned long long)t->seq, (unsigned long long)desc->subtasks,
              (unsigned long long)t->nchunks, t->cbs->name, t->policy->name);
    return 0;
}

/* ---- failure and completion -------------------------------------------- */

static void task_finish(pm__task_t *t);

void pm__task_fail(pm__task_t *t, int status, uint64_t id, const char *fmt, ...)
{
    char msg[PM__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pm__task_fail_remote(t, status, id, pm__rt.host, msg);
}

void pm__task_fail_remote(pm__task_t *t, int status, uint64_t id, int host, const char *msg)
{
    pm__lock(&t->err_lock);
    t->nfailed++;
    if (t->status == 0 || id < t->failed_subtask) {
        t->status = status;
        t->failed_subtask = id;
        t->failed_host = host;
        if (t->message == NULL)
            t->message = malloc(PM__MESSAGE_MAX); /* NULL: the message is lost, not the status */
        if (t->message != NULL)
            snprintf(t->message, PM__MESSAGE_MAX, "%s", msg);
    }
    pm__unlock(&t->err_lock);
}

void pm__task_prepared(pm__task_t *t)
{
    if (!subscriptions_checked(t)) {
        /* Nothing ran and no other host has seen the task: finish it now. */
        atomic_store(&t->outstanding, 0);
        task_finish(t);
        return;
    }
    pthread_mutex_lock(&pm__rt.lock);
    start_running_locked(t, false);
    pthread_mutex_unlock(&pm__rt.lock);
}

void pm__task_done(pm__task_t *t, uint64_t n)
{
    if (atomic_fetch_sub(&t->outstanding, n) == n)
        task_finish(t);
}

/* A finished task's figures, gathered when the program asks for them. */
static void fill_stats(const pm__task_t *t, pm_task_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->status = t->status;
    s->failed_subtask = t->failed_subtask;
    s->failed_host = t->status != 0 ? t->failed_host : -1;
    s->seconds = t->t_end - t->t_submit;
    s->run_seconds = atomic_load(&t->started) ? t->t_end - t->t_start : 0;
    for (int i = 0; i < pm__rt.nstubs; i++) {
        const pm__stub_counts_t *c = pm__counts_peek(t, i);
        if (c == NULL)
            continue;
        s->subtasks += c->subtasks;
        s->steals += c->steals;
        s->bytes_to_gpu += c->bytes_to_gpu;
        s->bytes_from_gpu += c->bytes_from_gpu;
        s->gpu_cache_hits += c->gpu_cache_hits;
        s->bytes_gpu_peer += c->bytes_gpu_peer;
        if (pm__rt.stubs[i].ops->kind == PM_DEVICE_GPU)
            s->subtasks_gpu += c->subtasks;
        else
            s->subtasks_cpu += c->subtasks;
        s->stubs += c->subtasks > 0;
    }
    s->subtasks_remote = atomic_load(&t->subtasks_remote);
    s->subtasks += s->subtasks_remote;
    s->subtasks_cpu += s->subtasks_remote - atomic_load(&t->subtasks_remote_gpu);
    s->steals += atomic_load(&t->remote_counts[PM__RC_STEALS]);
    s->steals_remote = atomic_load(&t->steals_remote) + atomic_load(&t->remote_counts[PM__RC_STEALS_REMOTE]);
    s->bytes_to_gpu += atomic_load(&t->remote_counts[PM__RC_TO_GPU]);
    s->bytes_from_gpu += atomic_load(&t->remote_counts[PM__RC_FROM_GPU]);
    s->gpu_cache_hits += atomic_load(&t->remote_counts[PM__RC_HITS]);
    s->bytes_gpu_peer += atomic_load(&t->remote_counts[PM__RC_GPU_PEER]);
    s->multi_assigned = atomic_load(&t->remote_counts[PM__RC_COPIES]) + atomic_load(&t->copies_local);
    s->subtasks_gpu += atomic_load(&t->subtasks_remote_gpu);
    /* Each host counts the bytes it received from another. */
    s->bytes_moved = atomic_load(&t->bytes_moved) + atomic_load(&t->remote_counts[PM__RC_BYTES_MOVED]);
    s->bytes_sent = atomic_load(&t->bytes_sent) + atomic_load(&t->remote_counts[PM__RC_BYTES_SENT]);
    /* By host: host 0's own receipts by sender, and the other hosts'
     * reports of theirs (sent by each host, received by each host). */
    int n = pm__rt.nhosts;
    uint64_t home_in = 0;
    for (int h = 0; t->xbytes != NULL && h < n; h++)
        home_in += atomic_load(&t->xbytes[h]);
    for (int h = 0; t->xbytes != NULL && h < n; h++) {
        uint64_t sent = atomic_load(&t->xbytes[n + h]) + atomic_load(&t->xbytes[h]);
        uint64_t got = atomic_load(&t->xbytes[2 * n + h]) + (h == 0 ? home_in : 0);
        if (h == 0) {
            s->bytes_home_sent = sent;
            s->bytes_home_received = got;
        }
        if (sent > s->bytes_host_sent_max)
            s->bytes_host_sent_max = sent;
        if (got > s->bytes_host_received_max)
            s->bytes_host_received_max = got;
    }
}

/* Host 0, a task placed by cost ending well: how long each other host took
 * for what it ran, against what the costs expected (runtime lock). The
 * devices' time per chunk is the model's scaled by how host 0's own stubs
 * ran in this task, so that what slows every host (a first pass over fresh
 * pages, plans made on the first call) is not taken for a cost of moving. */
static void release_locked(pm__task_t *t)
{
    /* A task that failed before any subtask ran changed nothing. */
    int ran = atomic_load(&t->started);
    for (int i = 0; i < t->desc.nmem; i++) {
        pm__memory_t *m = t->mems[i];
        m->users--;
        if ((t->desc.mem[i].access & PM_WRITE) && ran)
            m->version++;
        if (m->last_writer == t)
            m->last_writer = NULL;
        reader_unlink(m, &t->readers[i]);
    }
    pm__task_unready(t);
    tlist_remove(&pm__rt.active, t, ACTIVE_LINK);
    seq_remove_locked(t);
    if (pm__rt.nhosts > 1 && t->host_busy != NULL)
        pm__hooks.task_released(t);
    atomic_fetch_add_explicit(&pm__rt.finished, 1, memory_order_release);
    for (int i = 0; i < t->ndependents; i++)
        if (atomic_fetch_sub(&t->dependents[i]->ndeps, 1) == 1)
            make_ready_locked(t->dependents[i], false);
    t->ndependents = 0;
    if (t->status != 0 && pm__rt.first_failure == 0)
        pm__rt.first_failure = t->status;
}

int64_t pm__tasks_unfinished(void)
{
    /* Finished first: a task counted there was submitted before, so the
     * difference never misses one submitted before the look. */
    uint64_t f = atomic_load(&pm__rt.finished);
    return (int64_t)(atomic_load(&pm__rt.submitted) - f);
}

/*
 * A task without memories on one host that did not fail (and is not on the
 * active list) has nothing under the runtime lock to undo: no memory
 * state, no dependents, no task waiting for it. It ends without the lock;
 * waiters are found through counters, in this order: the task is done,
 * then the count of finished tasks rises, then the waiter counts are
 * read (a waiter raises its count before it looks, so one of the two sees
 * the other). The task is not read once it is done: the program may free it.
 */
static bool quick_finish(pm__task_t *t)
{
    if (t->desc.nmem > 0 || pm__rt.nhosts > 1 || t->status != 0 || t->alink.on)
        return false;
    pm__task_unready(t);
    __atomic_store_n(&t->state, PM__TASK_DONE, __ATOMIC_SEQ_CST);
    atomic_fetch_add(&pm__rt.finished, 1);
    /* The submitted count only where a thread waits for all: while the
     * program submits, its line stays the program thread's. */
    if (__atomic_load_n(&pm__rt.task_waiters, __ATOMIC_SEQ_CST) > 0 ||
        (__atomic_load_n(&pm__rt.all_waiters, __ATOMIC_SEQ_CST) > 0 && pm__tasks_unfinished() <= 0)) {
        pthread_mutex_lock(&pm__rt.lock);
        pthread_cond_broadcast(&pm__rt.done_cv);
        pthread_mutex_unlock(&pm__rt.lock);
    }
    return true;
}

static void task_finish(pm__task_t *t)
{
    if (t->status == 0 && t->tree != NULL)
        pm__hooks.tree_apply(t);
    pm__task_gather_pieces(t);
    if (pm__rt.nhosts > 1)
        pm__hooks.task_finished(t);
    t->t_end = pm__now();
    pm__hooks.trace_span(-1, PM__TRACE_TASK, t->seq, t->nchunks, t->t_submit, t->t_end);
    if (t->status != 0) {
        if (t->nfailed > 1)
            pm__error("task %llu ('%s') failed: %s (%s); %llu subtasks failed in all",
                      (unsigned long long)t->seq, t->cbs->name, pm__task_message(t), pm_errname(t->status),
                      (unsigned long long)t->nfailed);
        else
            pm__error("task %llu ('%s') failed: %s (%s)", (unsigned long long)t->seq,
                      t->cbs->name, pm__task_message(t), pm_errname(t->status));
    }
    if (quick_finish(t))
        return;
    pthread_mutex_lock(&pm__rt.lock);
    release_locked(t);
    /* Wake only those waiting for this task, or for all when none is left. */
    bool wake = t->waiters > 0 ||
                (__atomic_load_n(&pm__rt.all_waiters, __ATOMIC_SEQ_CST) > 0 && pm__tasks_unfinished() <= 0);
    __atomic_store_n(&t->state, PM__TASK_DONE, __ATOMIC_RELEASE);
    if (wake)
        pthread_cond_broadcast(&pm__rt.done_cv);
    pthread_mutex_unlock(&pm__rt.lock);
}

/* ---- waiting ----------------------------------------------------------- */

static int lookup_locked(const char *fn, pm_task_t task, pm__task_t **t)
{
    *t = pm__handle_get(&pm__rt.tasks, task.id);
    if (*t == NULL)
        return PM__FAIL(PM_EBADHANDLE, "%s: task handle %#llx was released or never submitted",
                        fn, (unsigned long long)task.id);
    return 0;
}

int pm_task_test(pm_task_t task, int *done)
{
    PM__CHECK_INIT("pm_task_test");
    if (done == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_test: done is NULL");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_test", task, &t);
    if (rc == 0) {
        *done = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == PM__TASK_DONE;
        rc = *done ? t->status : 0;
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

/* A blocking call made on one of pmlib's own threads would wait for work
 * that thread should do. */
static int check_blocking(const char *fn)
{
    if (pm__internal_thread)
        return PM__FAIL(PM_EDEADLK, "%s called from a callback: it would wait for the stub that runs it; "
                        "wait for tasks from the program's own threads", fn);
    return 0;
}

/* A program thread past its polling spell sleeps until its tasks are done:
 * meanwhile its core is free, so one more stub may poll (stubs.c), and a
 * short task with more chunks than pollers wakes a parked stub for them
 * rather than leave them all to the stubs awake. */
static void program_sleeps(int n)
{
    atomic_fetch_add_explicit(&pm__rt.program_asleep, n, memory_order_relaxed);
}

static bool task_is_done(const void *arg)
{
    return __atomic_load_n(&((const pm__task_t *)arg)->state, __ATOMIC_ACQUIRE) == PM__TASK_DONE;
}

int pm_task_wait(pm_task_t task)
{
    PM__CHECK_INIT("pm_task_wait");
    int rc = check_blocking("pm_task_wait");
    if (rc != 0)
        return rc;
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    rc = lookup_locked("pm_task_wait", task, &t);
    if (rc == 0) {
        /* While it counts as waited on, pm_task_release refuses to free it. */
        t->waiters++;
        __atomic_add_fetch(&pm__rt.task_waiters, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&t->state, __ATOMIC_SEQ_CST) != PM__TASK_DONE) {
            pthread_mutex_unlock(&pm__rt.lock);
            pm__spin_until(task_is_done, t);
            pthread_mutex_lock(&pm__rt.lock);
        }
        program_sleeps(+1);
        while (__atomic_load_n(&t->state, __ATOMIC_SEQ_CST) != PM__TASK_DONE)
            pthread_cond_wait(&pm__rt.done_cv, &pm__rt.lock);
        program_sleeps(-1);
        __atomic_sub_fetch(&pm__rt.task_waiters, 1, __ATOMIC_SEQ_CST);
        t->waiters--;
        rc = t->status;
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

static bool none_left(const void *arg)
{
    (void)arg;
    return pm__tasks_unfinished() <= 0;
}

/* Waits until no submitted task is unfinished; runtime lock held. */
void pm__task_wait_none_locked(void)
{
    __atomic_add_fetch(&pm__rt.all_waiters, 1, __ATOMIC_SEQ_CST);
    if (pm__tasks_unfinished() > 0) {
        pthread_mutex_unlock(&pm__rt.lock);
        pm__spin_until(none_left, NULL);
        pthread_mutex_lock(&pm__rt.lock);
    }
    program_sleeps(+1);
    while (pm__tasks_unfinished() > 0)
        pthread_cond_wait(&pm__rt.done_cv, &pm__rt.lock);
    program_sleeps(-1);
    __atomic_sub_fetch(&pm__rt.all_waiters, 1, __ATOMIC_SEQ_CST);
}

int pm_task_wait_all(void)
{
    PM__CHECK_INIT("pm_task_wait_all");
    int rc = check_blocking("pm_task_wait_all");
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&pm__rt.lock);
    pm__task_wait_none_locked();
    rc = pm__rt.first_failure;
    pm__rt.first_failure = 0;
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_stats(pm_task_t task, pm_task_stats_t *stats)
{
    PM__CHECK_INIT("pm_task_stats");
    if (stats == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_stats: stats is NULL");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_stats", task, &t);
    if (rc == 0 && __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != PM__TASK_DONE)
        rc = PM__FAIL(PM_EBUSY, "pm_task_stats: the task is still running; pm_task_wait for it first");
    if (rc == 0)
        fill_stats(t, stats);
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_redistributed(pm_task_t task, pm_memory_t *memory)
{
    PM__CHECK_INIT("pm_task_redistributed");
    if (memory == NULL)
        return PM__FAIL(PM_EINVAL, "pm_task_redistributed: memory is NULL");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_redistributed", task, &t);
    if (rc == 0 && __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != PM__TASK_DONE)
        rc = PM__FAIL(PM_EBUSY, "pm_task_redistributed: the task is still running; pm_task_wait for it first");
    if (rc == 0) {
        *memory = t->redistributed;
        t->redistributed = PM_MEMORY_NULL; /* the program owns it now */
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_task_release(pm_task_t task)
{
    PM__CHECK_INIT("pm_task_release");
    pm__task_t *t;
    pthread_mutex_lock(&pm__rt.lock);
    int rc = lookup_locked("pm_task_release", task, &t);
    /* Its first line comes owned: read shared, the stub that ended the
     * task kept a copy and the hold's locked sub below sent for it again. */
    if (rc == 0)
        pm__prefetch_lines(t, 64);
    if (rc == 0 && __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != PM__TASK_DONE)
        rc = PM__FAIL(PM_EBUSY, "pm_task_release: the task is still running; pm_task_wait for it first");
    if (rc == 0 && t->waiters > 0)
        rc = PM__FAIL(PM_EBUSY, "pm_task_release: %d other thread(s) are in pm_task_wait on this task; "
                      "release it after they return", t->waiters);
    if (rc == 0)
        pm__handle_remove(&pm__rt.tasks, t->handle);
    pthread_mutex_unlock(&pm__rt.lock);
    if (rc == 0)
        pm__task_unhold(t);
    return rc;
}

void pm__task_hold(pm__task_t *t)
{
    atomic_fetch_add_explicit(&t->holds, 1, memory_order_relaxed);
}

void pm__task_unhold(pm__task_t *t)
{
    if (atomic_fetch_sub_explicit(&t->holds, 1, memory_order_acq_rel) == 1)
        task_free(t);
}

void pm__task_destroy(pm__task_t *t)
{
    task_free(t);
}

void pm__task_free_all(void)
{
    /* Other hosts' tasks are known only by sequence number. */
    for (size_t b = 0; b < pm__rt.byseq_cap; b++)
        for (pm__task_t *t = pm__rt.byseq[b], *next; t != NULL; t = next) {
            next = t->hnext;
            if (t->remote)
                task_free(t);
        }
    free(pm__rt.byseq);
    pm__rt.byseq = NULL;
    pm__rt.byseq_cap = pm__rt.nbyseq = 0;
    pm__handle_table_t *h = &pm__rt.tasks;
    for (uint32_t i = 0; i < h->cap; i++)
        if (h->obj[i] != NULL)
            task_free(h->obj[i]);
    pm__handle_table_free(h);
    block_cache_clear();
    atomic_fetch_add(&stash_life, 1); /* the stubs in any thread's stash are gone */
}

/* Out of the way of the hot code above: read once (cache_max). */
static size_t cache_default_mb(void)
{
    size_t mb = PM__CACHE_TASKS * (block_bytes(0, false) + block_bytes(1, false)) >> 20;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t sixteenth = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 16 >> 20 : SIZE_MAX;
    if (mb > sixteenth)
        mb = sixteenth;
    return mb > 256 ? mb : 256;
}
