/*
 * handoff: the floor under pmlib's cost per task on a machine, without
 * pmlib. One thread hands items to C others that poll for them, as
 * pm_task_submit hands a task of one chunk to a polling stub, and each
 * consumer marks its item done, as a stub ends a task; the producer then
 * reads every item back under a lock, as pm_task_release does. Per item
 * the producer takes a lock and fills 448 bytes (a submit's own work).
 *
 *   poke   a word of idle consumers, one bit each; the producer clears
 *          one bit and stores the item and a flag on that consumer's line
 *          (pmlib's hand-off to a polling stub)
 *   ring   one ring for all: the producer stores the slot and the tail,
 *          consumers take with a compare-exchange on the head
 *   mbox   a ring per consumer, filled round robin; an idle consumer
 *          takes from the others after 64 empty looks
 *   none   the producer runs each item itself (no other thread)
 *
 * --lock early|late|none: the producer's lock around its fill (early: the
 * hand-off is followed by the next item's locked instruction at once, as
 * in a submit; late: after the fill; none: no locked instruction).
 * Prints, per hand-off, microseconds per item (median of the rounds) for
 * the hand-off phase, the read-back and both.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 4096
#define MBOX 256

typedef struct item {
    _Alignas(64) atomic_int done;
    int seen;
    char body[7 * 64 - 2 * sizeof(int)];
} item_t;

typedef struct consumer {
    _Alignas(64) atomic_int poke;
    item_t *handed;
    _Alignas(64) atomic_long tail; /* mbox: the producer's */
    _Alignas(64) atomic_long head; /* mbox: the consumer's and thieves' */
    _Alignas(64) item_t *slot[MBOX];
    pthread_t thread;
    int index;
} consumer_t;

enum proto { POKE, RING_ONE, MBOX_EACH, NONE };
enum lockat { EARLY, LATE, NOLOCK };

static struct {
    enum proto proto;
    enum lockat lockat;
    int ncons;
    long nitems;
    item_t *items;
    consumer_t *cons;
    pthread_mutex_t lock;
    _Alignas(64) atomic_uint_fast64_t pollers;
    _Alignas(64) atomic_long rtail;
    _Alignas(64) atomic_long rhead;
    _Alignas(64) item_t *_Atomic ring[RING];
    _Alignas(64) atomic_long done;
    _Alignas(64) atomic_bool stop;
    long ring_head_seen, mbox_head_seen[64]; /* the producer's last looks at the heads */
    char scratch[4096];
} H;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int core)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core % CPU_SETSIZE, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_item(item_t *it)
{
    it->seen++;
    atomic_store_explicit(&it->done, 1, memory_order_release);
    atomic_fetch_add_explicit(&H.done, 1, memory_order_relaxed);
}

static bool take_from(consumer_t *c)
{
    long h = atomic_load_explicit(&c->head, memory_order_relaxed);
    if (h >= atomic_load_explicit(&c->tail, memory_order_acquire))
        return false;
    item_t *it = c->slot[h % MBOX];
    if (!atomic_compare_exchange_strong(&c->head, &h, h + 1))
        return false;
    run_item(it);
    return true;
}

static void *consume(void *arg)
{
    consumer_t *c = arg;
    pin(c->index + 1);
    int empty = 0;
    while (!atomic_load_explicit(&H.stop, memory_order_relaxed)) {
        if (H.proto == POKE) {
            atomic_store_explicit(&c->poke, 0, memory_order_relaxed);
            atomic_fetch_or(&H.pollers, 1ull << c->index);
            while (!atomic_load_explicit(&c->poke, memory_order_acquire)) {
                if (atomic_load_explicit(&H.stop, memory_order_relaxed))
                    return NULL;
                relax();
            }
            run_item(c->handed);
        } else if (H.proto == RING_ONE) {
            long h = atomic_load_explicit(&H.rhead, memory_order_relaxed);
            if (h < atomic_load_explicit(&H.rtail, memory_order_acquire)) {
                item_t *it = atomic_load_explicit(&H.ring[h % RING], memory_order_relaxed);
                if (atomic_compare_exchange_strong(&H.rhead, &h, h + 1))
                    run_item(it);
            } else {
                relax();
            }
        } else {
            if (take_from(c)) {
                empty = 0;
                continue;
            }
            relax();
            if (++empty < 64)
                continue;
            empty = 0;
            for (int k = 1; k < H.ncons && !take_from(&H.cons[(c->index + k) % H.ncons]); k++)
                ;
        }
    }
    return NULL;
}

static void fill(item_t *it)
{
    if (H.lockat == EARLY)
        pthread_mutex_lock(&H.lock);
    for (int i = 0; i < 64; i++)
        H.scratch[(i * 67) % sizeof H.scratch] += (char)i;
    memset(it->body, 1, 200);
    atomic_store_explicit(&it->done, 0, memory_order_relaxed);
    if (H.lockat == LATE)
        pthread_mutex_lock(&H.lock);
    if (H.lockat != NOLOCK)
        pthread_mutex_unlock(&H.lock);
}

static void hand(item_t *it, long i)
{
    if (H.proto == POKE) {
        for (;;) {
            uint64_t v = atomic_load_explicit(&H.pollers, memory_order_relaxed);
            if (v == 0) {
                relax();
                continue;
            }
            int b = 63 - __builtin_clzll(v);
            if (atomic_fetch_and(&H.pollers, ~(1ull << b)) & (1ull << b)) {
                H.cons[b].handed = it;
                atomic_store_explicit(&H.cons[b].poke, 1, memory_order_release);
                return;
            }
        }
    } else if (H.proto == RING_ONE) {
        long t = atomic_load_explicit(&H.rtail, memory_order_relaxed);
        while (t - H.ring_head_seen >= RING) {
            H.ring_head_seen = atomic_load_explicit(&H.rhead, memory_order_relaxed);
            relax();
        }
        atomic_store_explicit(&H.ring[t % RING], it, memory_order_relaxed);
        atomic_store_explicit(&H.rtail, t + 1, memory_order_release);
    } else if (H.proto == MBOX_EACH) {
        consumer_t *c = &H.cons[i % H.ncons];
        long t = atomic_load_explicit(&c->tail, memory_order_relaxed);
        while (t - H.mbox_head_seen[c->index] >= MBOX) {
            H.mbox_head_seen[c->index] = atomic_load_explicit(&c->head, memory_order_relaxed);
            relax();
        }
        c->slot[t % MBOX] = it;
        atomic_store_explicit(&c->tail, t + 1, memory_order_release);
    } else {
        run_item(it);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One hand-off, one lock placement: median us per item of each phase. */
static void measure(enum proto proto, enum lockat lockat, int rounds, double out[3])
{
    H.proto = proto;
    H.lockat = lockat;
    atomic_store(&H.stop, false);
    atomic_store(&H.pollers, 0);
    atomic_store(&H.rtail, 0);
    atomic_store(&H.rhead, 0);
    H.ring_head_seen = 0;
    memset(H.mbox_head_seen, 0, sizeof H.mbox_head_seen);
    int ncons = proto == NONE ? 0 : H.ncons;
    for (int i = 0; i < ncons; i++) {
        memset(&H.cons[i], 0, sizeof H.cons[i]);
        H.cons[i].index = i;
        pthread_create(&H.cons[i].thread, NULL, consume, &H.cons[i]);
    }
    double *f = calloc(3 * (size_t)rounds, sizeof *f);
    for (int r = 0; r < rounds; r++) {
        atomic_store(&H.done, 0);
        double t0 = now();
        for (long i = 0; i < H.nitems; i++) {
            fill(&H.items[i]);
            hand(&H.items[i], i);
        }
        while (atomic_load(&H.done) < H.nitems)
            relax();
        double t1 = now();
        long done = 0;
        for (long i = 0; i < H.nitems; i++) {
            pthread_mutex_lock(&H.lock);
            done += atomic_load_explicit(&H.items[i].done, memory_order_acquire);
            H.items[i].seen--;
            pthread_mutex_unlock(&H.lock);
        }
        double t2 = now();
        if (done != H.nitems) {
            fprintf(stderr, "handoff: %ld of %ld items done\n", done, H.nitems);
            exit(1);
        }
        f[r] = (t1 - t0) * 1e6 / (double)H.nitems;
        f[rounds + r] = (t2 - t1) * 1e6 / (double)H.nitems;
        f[2 * rounds + r] = (t2 - t0) * 1e6 / (double)H.nitems;
    }
    atomic_store(&H.stop, true);
    for (int i = 0; i < ncons; i++)
        pthread_join(H.cons[i].thread, NULL);
    for (int k = 0; k < 3; k++) {
        qsort(f + k * rounds, (size_t)rounds, sizeof *f, cmp_double);
        out[k] = f[k * rounds + rounds / 2];
    }
    free(f);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: handoff [-n ITEMS] [-c CONSUMERS] [--rounds R]\n"
                "  hands ITEMS (default 300000) from one thread to CONSUMERS polling threads\n"
                "  (default: the cores less one, at most 63) by each hand-off and lock placement;\n"
                "  prints microseconds per item, the median of R rounds (default 5).\n");
}

int main(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    H.nitems = 300000;
    H.ncons = ncpu > 1 ? (int)(ncpu - 1) : 1;
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            H.nitems = atol(argv[++i]);
        } else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            H.ncons = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "handoff: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (H.nitems < 1 || H.ncons < 1 || H.ncons > 63 || rounds < 1) {
        fprintf(stderr, "handoff: give ITEMS >= 1, CONSUMERS from 1 to 63 and R >= 1\n");
        return 2;
    }
    H.items = aligned_alloc(64, sizeof(item_t) * (size_t)H.nitems);
    H.cons = aligned_alloc(64, sizeof(consumer_t) * (size_t)H.ncons);
    if (H.items == NULL || H.cons == NULL) {
        fprintf(stderr, "handoff: out of memory for %ld items\n", H.nitems);
        return 1;
    }
    memset(H.items, 0, sizeof(item_t) * (size_t)H.nitems);
    pthread_mutex_init(&H.lock, NULL);
    pin(0);
    printf("handoff: %ld items, %d consumers, %ld cores, median of %d rounds, us per item\n", H.nitems,
           H.ncons, ncpu, rounds);
    printf("%-6s %-6s %10s %10s %10s\n", "handoff", "lock", "hand", "read back", "total");
    static const char *pname[] = {"poke", "ring", "mbox", "none"}, *lname[] = {"early", "late", "none"};
    for (int p = NONE; p >= POKE; p--)
        for (int l = EARLY; l <= NOLOCK; l++) {
            double f[3];
            measure((enum proto)p, (enum lockat)l, rounds, f);
            printf("%-7s %-6s %10.3f %10.3f %10.3f\n", pname[p], lname[l], f[0], f[1], f[2]);
            printf("result app=handoff proto=%s lock=%s consumers=%d hand_us=%.4f back_us=%.4f total_us=%.4f\n",
                   pname[p], lname[l], p == NONE ? 0 : H.ncons, f[0], f[1], f[2]);
        }
    free(H.items);
    free(H.cons);
    return 0;
}
