/*
 * The program's threads inside public calls, counted so that pm_finalize
 * can refuse to tear the runtime down under one of them.
 *
 * Each thread counts its own calls on a line of its own, with plain
 * stores; pm_finalize sums the lines. Between a thread's count and its
 * look at the runtime's life, and between pm_finalize's change of the
 * life and its sum, each side needs a full fence, or both could miss the
 * other. The calling side would pay one at every call: a locked
 * instruction that waits for every store before it, a task's block and
 * the line of the stub it was handed to among them. So the rare side pays
 * for both where the system allows it: pm_finalize asks every running
 * thread of the process for a fence (membarrier), and a call needs only
 * to keep the compiler from moving its look before its count. One shared
 * count, added to and taken from by every call, cost the program thread
 * 4 locked instructions per empty task.
 */
#define _GNU_SOURCE
#include "core/internal.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct pm__caller {
    _Alignas(64) atomic_int n;  /* calls of its thread inside pmlib now */
    atomic_bool owned;          /* a live thread counts on it */
    struct pm__caller *next;    /* set before it is published, never changed */
} pm__caller_t;

/* Every line made so far: a thread's line is reused after the thread
 * exits, and none is freed (one for each thread the program ran at once,
 * reachable from here). */
static _Atomic(pm__caller_t *) callers;
static PM__TLS pm__caller_t *mine;
static pthread_key_t caller_key;
static pthread_once_t caller_once = PTHREAD_ONCE_INIT;
static bool caller_key_made;
/* Membarrier is registered for the process (once, never undone). */
static atomic_bool asym;

pm__calls_t pm__inside; /* calls of threads without a line of their own */

static void caller_gone(void *p)
{
    pm__caller_t *c = p;
    atomic_store_explicit(&c->owned, false, memory_order_release);
}

static void caller_key_make(void)
{
    caller_key_made = pthread_key_create(&caller_key, caller_gone) == 0;
}

/* The calling thread's line, taken the first time (NULL: none to be had;
 * the thread then counts on the shared count). */
static pm__caller_t *caller_take(void)
{
    pthread_once(&caller_once, caller_key_make);
    if (!caller_key_made)
        return NULL;
    pm__caller_t *c;
    for (c = atomic_load_explicit(&callers, memory_order_acquire); c != NULL; c = c->next) {
        bool free_line = false;
        if (!atomic_load_explicit(&c->owned, memory_order_relaxed) &&
            atomic_compare_exchange_strong(&c->owned, &free_line, true))
            break;
    }
    if (c == NULL) {
        c = pm__aligned_alloc(sizeof *c);
        if (c == NULL)
            return NULL;
        atomic_init(&c->n, 0);
        atomic_init(&c->owned, true);
        pm__caller_t *head = atomic_load_explicit(&callers, memory_order_relaxed);
        do
            c->next = head;
        while (!atomic_compare_exchange_weak_explicit(&callers, &head, c, memory_order_release,
                                                      memory_order_relaxed));
    }
    if (pthread_setspecific(caller_key, c) != 0) {
        atomic_store_explicit(&c->owned, false, memory_order_release);
        return NULL;
    }
    mine = c;
    return c;
}

/* Orders the caller's count before its look at the life. */
static inline void call_fence(void)
{
#if defined(__SANITIZE_THREAD__)
    atomic_thread_fence(memory_order_seq_cst);
#else
    if (atomic_load_explicit(&asym, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
#endif
}

void pm__calls_init(void)
{
#if !defined(__SANITIZE_THREAD__) && defined(SYS_membarrier)
    if (!atomic_load(&asym) && syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        atomic_store(&asym, true);
#endif
}

int pm__enter(void)
{
    if (pm__internal_thread) /* a callback: pm_finalize waits for it anyway */
        return atomic_load(&pm__life) == PM__LIFE_DOWN ? 0 : 2;
    pm__caller_t *c = mine != NULL ? mine : caller_take();
    if (c == NULL) {
        atomic_fetch_add(&pm__inside.n, 1);
        if (atomic_load(&pm__life) == PM__LIFE_UP)
            return 3;
        atomic_fetch_sub(&pm__inside.n, 1);
        return 0;
    }
    /* Only this thread writes its count: a load and a store, no lock. */
    int n = atomic_load_explicit(&c->n, memory_order_relaxed);
    atomic_store_explicit(&c->n, n + 1, memory_order_relaxed);
    call_fence();
    if (atomic_load_explicit(&pm__life, memory_order_acquire) == PM__LIFE_UP)
        return 1;
    atomic_store_explicit(&c->n, n, memory_order_relaxed);
    return 0;
}

void pm__leave(int *entered)
{
    if (*entered == 1) {
        pm__caller_t *c = mine;
        atomic_store_explicit(&c->n, atomic_load_explicit(&c->n, memory_order_relaxed) - 1,
                              memory_order_release);
    } else if (*entered == 3) {
        atomic_fetch_sub(&pm__inside.n, 1);
    }
}

int pm__calls_inside(void)
{
    bool fenced = false;
#if !defined(__SANITIZE_THREAD__) && defined(SYS_membarrier)
    if (atomic_load(&asym))
        fenced = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
    if (!fenced && atomic_load(&asym))
        usleep(1000); /* refused now: a core's stores leave its buffer within microseconds */
    atomic_thread_fence(memory_order_seq_cst);
    int n = atomic_load(&pm__inside.n);
    for (pm__caller_t *c = atomic_load_explicit(&callers, memory_order_acquire); c != NULL; c = c->next)
        n += atomic_load_explicit(&c->n, memory_order_acquire);
    return n;
}
