/*
 * Lazy memories (run with 1, 2 and 4 hosts): written ranges stay on the
 * hosts that wrote them, readers fetch them from there, and host 0 no
 * longer relays every byte.
 *
 * The workload is an iterative sweep over two memories A and B of WORDS
 * 64-bit words. Iteration k reads all of the previous vector and each of
 * SUBTASKS subtasks writes its own contiguous slice of the next one (A -> B
 * on even k, B -> A on odd k, double buffering):
 *
 *   next[i] = mix(prev[(7 i + k) % WORDS] ^ prev[(i + 1) % WORDS] ^ k)
 *
 * so every slice depends on slices other hosts wrote. The static equal
 * scheduler gives every host the same share of subtasks whatever their
 * costs, so the bytes each host sends and receives are known:
 *
 * - eager (the default): outputs go home after each task and every other
 *   host fetches the whole vector: from host 0 for the first two that ask,
 *   and from hosts that have it after that (a tree), so host 0 sends two
 *   vectors per iteration, still more than its share, and no host sends
 *   more than two; with PMLIB_RELAY=0 host 0 sends all H - 1;
 * - lazy: each host keeps the slices it wrote and sends them to the others,
 *   so every host, host 0 included, sends and receives about the average,
 *   bytes_moved / H.
 *
 * Each mode runs ITERS iterations, all submitted before waiting, and host 0
 * compares both memories bit for bit with a serial computation. In lazy
 * mode the last-written memory is gathered with pm_memory_gather and the
 * other one by pm_memory_data alone; then host 0 rewrites part of a
 * gathered memory through pm_memory_data (and pm_memory_touch), two more
 * iterations run, and making the memories not lazy must gather them again.
 * With 3 or more hosts the byte counts of the steady iterations (all but
 * the first three) are checked against the shapes above, when memories
 * cross the wire (PMLIB_SHM=0; shared in place, none of them moves; the
 * results are checked either way); with 2 or more the
 * per-host counts must agree with bytes_moved; on 1 host nothing may move
 * in either mode. It also checks pm_memory_set_lazy and pm_memory_gather on
 * released handles and on a memory that is not lazy.
 *
 * Host 0 prints one line of byte counts per mode, then LAZY-OK, and exits
 * 0 when everything holds; otherwise the first failed check is printed.
 *
 * Usage: lazy [WORDS [ITERS [SUBTASKS]]]
 *        (defaults 65536, 8, and 4 per host but at least 8; ITERS >= 4)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pmlib.h"

/* Iterations left out of the byte checks: the first reads the input host 0
 * wrote, the first two each write a memory no task has written yet, and in
 * the third host 0, whose chunks fetched the second memory's ranges from
 * their writers, has that memory's new writes sent home too while it still
 * fetches the first's (from then on only the writes travel to host 0). */
#define WARMUP 3
/* How far above the average one host may send or receive in lazy mode, and
 * how far above it host 0 must send in eager mode. */
#define SPREAD_LIMIT 1.5

/* One iteration's configuration: identical bytes on every host. */
typedef struct lazy_conf {
    uint64_t words;
    uint64_t k;
} lazy_conf_t;

/* Task memories: the previous vector (read) and the next one (written). */
enum { MEM_PREV, MEM_NEXT };

static uint64_t value(const uint64_t *prev, uint64_t n, uint64_t i, uint64_t k)
{
    return mix(prev[(i * 7 + k) % n] ^ prev[(i + 1) % n] ^ k);
}

static void slice_of(uint64_t id, uint64_t count, uint64_t n, uint64_t *lo, uint64_t *hi)
{
    *lo = id * n / count;
    *hi = (id + 1) * n / count;
}

static int lazy_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const lazy_conf_t *c = info->conf;
    uint64_t lo, hi;
    int rc;

    if (c == NULL || info->conf_bytes != sizeof *c || info->mem_bytes[MEM_PREV] != c->words * 8)
        return -1;
    slice_of(info->id, info->count, c->words, &lo, &hi);
    rc = pm_subscribe(sub, MEM_PREV, PM_READ, 0, c->words * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_NEXT, PM_WRITE, lo * 8, (hi - lo) * 8);
    return rc;
}

static int lazy_cpu(const pm_subtask_info_t *info)
{
    const lazy_conf_t *c = info->conf;
    const uint64_t *prev = info->mem[MEM_PREV];
    uint64_t *next = info->mem[MEM_NEXT], lo, hi;

    if (c == NULL || prev == NULL || next == NULL || info->mem_bytes[MEM_PREV] != c->words * 8)
        return -1;
    slice_of(info->id, info->count, c->words, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        next[i] = value(prev, c->words, i, c->k);
    return 0;
}

/* ---- host 0 ---- */

struct run {
    const char *name;    /* "lazy" or "eager" */
    int lazy;
    int hosts;
    uint64_t words, iters, subtasks;
    pm_memory_t mem[2];  /* A and B: iteration k reads mem[k % 2] */
    uint64_t *ref[2];    /* the serial computation's A and B */
    pm_task_stats_t *st; /* one per iteration of the first ITERS */
};

/* Submits iterations [k0, k1), all before waiting, advancing the serial
 * reference beside them; then waits for each and keeps its stats when
 * `keep` is set. */
static int iterate(struct run *r, uint64_t k0, uint64_t k1, int keep)
{
    size_t n = (size_t)(k1 - k0), done = 0;
    pm_task_t *tasks = calloc(n, sizeof *tasks);
    int rc = 0;

    if (tasks == NULL)
        return fail("%s: out of memory", r->name);
    for (uint64_t k = k0; k < k1 && rc == 0; k++) {
        lazy_conf_t c = {r->words, k};
        int from = (int)(k % 2), to = from ^ 1;
        pm_task_desc_t d;

        pm_task_desc_init(&d);
        d.callbacks = "lazy-sweep";
        d.subtasks = r->subtasks;
        d.conf = &c;
        d.conf_bytes = sizeof c;
        d.sched = PM_SCHED_STATIC_EQUAL; /* equal shares, whatever the costs */
        if (pm_task_desc_add(&d, r->mem[from], PM_READ) != MEM_PREV ||
            pm_task_desc_add(&d, r->mem[to], PM_WRITE) != MEM_NEXT) {
            rc = fail("%s: iteration %llu: pm_task_desc_add failed", r->name,
                      (unsigned long long)k);
            break;
        }
        int src = pm_task_submit(&d, &tasks[done]);
        if (src != 0) {
            rc = fail("%s: iteration %llu not submitted: %s", r->name, (unsigned long long)k,
                      pm_errname(src));
            break;
        }
        done++;
        for (uint64_t i = 0; i < r->words; i++)
            r->ref[to][i] = value(r->ref[from], r->words, i, k);
    }
    for (size_t j = 0; j < done; j++) {
        pm_task_stats_t st;
        int trc = pm_task_wait(tasks[j]);

        if (trc != 0 && rc == 0)
            rc = fail("%s: iteration %llu failed: %s", r->name, (unsigned long long)(k0 + j),
                      pm_errname(trc));
        memset(&st, 0, sizeof st);
        if (pm_task_stats(tasks[j], &st) != 0 && rc == 0)
            rc = fail("%s: no stats for iteration %llu", r->name, (unsigned long long)(k0 + j));
        if (keep)
            r->st[k0 + j] = st;
        pm_task_release(tasks[j]);
    }
    free(tasks);
    return rc;
}

/* Compares both memories, read through pm_memory_data, with the serial
 * computation. */
static int compare(struct run *r, const char *when)
{
    for (int b = 0; b < 2; b++) {
        const uint64_t *m = pm_memory_data(r->mem[b]);

        if (m == NULL)
            return fail("%s: %s: pm_memory_data of memory %c is NULL", r->name, when, "AB"[b]);
        for (uint64_t i = 0; i < r->words; i++)
            if (m[i] != r->ref[b][i])
                return fail("%s: %s: memory %c word %llu is %016llx, want %016llx", r->name, when,
                            "AB"[b], (unsigned long long)i, (unsigned long long)m[i],
                            (unsigned long long)r->ref[b][i]);
    }
    printf("ok: %s: %s: both memories equal the serial computation\n", r->name, when);
    return 0;
}

/* The per-host counts of one iteration must add up, whatever the mode:
 * every byte moved is sent by one host and received by another. */
static int check_consistent(const struct run *r, uint64_t k, const pm_task_stats_t *st)
{
    double avg = (double)st->bytes_moved / r->hosts;

    if (st->bytes_home_sent > st->bytes_host_sent_max ||
        st->bytes_home_received > st->bytes_host_received_max ||
        st->bytes_host_sent_max > st->bytes_moved ||
        st->bytes_host_received_max > st->bytes_moved ||
        (double)st->bytes_host_sent_max < avg || (double)st->bytes_host_received_max < avg)
        return fail("%s: iteration %llu: inconsistent byte counts: moved %llu, home sent %llu, "
                    "home received %llu, max host sent %llu, max host received %llu",
                    r->name, (unsigned long long)k, (unsigned long long)st->bytes_moved,
                    (unsigned long long)st->bytes_home_sent,
                    (unsigned long long)st->bytes_home_received,
                    (unsigned long long)st->bytes_host_sent_max,
                    (unsigned long long)st->bytes_host_received_max);
    return 0;
}

/* Checks one steady iteration's bytes against the shape of its mode. */
static int check_steady(const struct run *r, uint64_t k, const pm_task_stats_t *st)
{
    double avg = (double)st->bytes_moved / r->hosts, lim = SPREAD_LIMIT * avg;

    if (r->lazy) {
        if (st->bytes_moved == 0)
            return fail("lazy: iteration %llu moved no bytes between %d hosts",
                        (unsigned long long)k, r->hosts);
        if ((double)st->bytes_host_sent_max > lim)
            return fail("lazy: iteration %llu: the busiest host sent %llu bytes, over %.1f x the "
                        "average %.0f (bytes_moved %llu / %d hosts)",
                        (unsigned long long)k, (unsigned long long)st->bytes_host_sent_max,
                        SPREAD_LIMIT, avg, (unsigned long long)st->bytes_moved, r->hosts);
        if ((double)st->bytes_host_received_max > lim)
            return fail("lazy: iteration %llu: the busiest host received %llu bytes, over %.1f x "
                        "the average %.0f (bytes_moved %llu / %d hosts)",
                        (unsigned long long)k, (unsigned long long)st->bytes_host_received_max,
                        SPREAD_LIMIT, avg, (unsigned long long)st->bytes_moved, r->hosts);
        if ((double)st->bytes_home_sent > lim)
            return fail("lazy: iteration %llu: host 0 sent %llu bytes, over %.1f x the average "
                        "%.0f: written ranges still go through host 0",
                        (unsigned long long)k, (unsigned long long)st->bytes_home_sent,
                        SPREAD_LIMIT, avg);
    } else if (!((double)st->bytes_home_sent > lim)) {
        return fail("eager: iteration %llu: host 0 sent %llu bytes, not over %.1f x the average "
                    "%.0f; every other host should fetch the whole vector from host 0",
                    (unsigned long long)k, (unsigned long long)st->bytes_home_sent, SPREAD_LIMIT,
                    avg);
    } else {
        /* Each other host reads the whole vector: from host 0 twice at
         * most, relayed by the hosts that have it beyond that. */
        const char *relay = getenv("PMLIB_RELAY");
        uint64_t vec = r->words * sizeof(uint64_t), others = (uint64_t)(r->hosts - 1);
        uint64_t home = relay != NULL && strcmp(relay, "0") == 0 ? others : others < 2 ? others : 2;
        if (st->bytes_home_sent != home * vec || st->bytes_host_sent_max != home * vec)
            return fail("eager: iteration %llu: host 0 sent %llu bytes and the busiest host %llu, "
                        "expected %llu vectors of %llu bytes from each (PMLIB_RELAY=%s)",
                        (unsigned long long)k, (unsigned long long)st->bytes_home_sent,
                        (unsigned long long)st->bytes_host_sent_max, (unsigned long long)home,
                        (unsigned long long)vec, relay ? relay : "unset");
    }
    return 0;
}

/* Prints the steady iterations' means and checks every iteration's bytes. */
static int check_bytes(const struct run *r)
{
    double moved = 0, home_sent = 0, home_recv = 0, max_sent = 0, max_recv = 0;
    double steady = (double)(r->iters - WARMUP);
    int rc = 0;

    for (uint64_t k = 0; k < r->iters; k++) {
        const pm_task_stats_t *st = &r->st[k];

        if (r->hosts == 1 && rc == 0 && st->bytes_moved != 0)
            rc = fail("%s: iteration %llu moved %llu bytes on a single host", r->name,
                      (unsigned long long)k, (unsigned long long)st->bytes_moved);
        if (r->hosts > 1 && rc == 0)
            rc = check_consistent(r, k, st);
        if (k < WARMUP)
            continue;
        moved += (double)st->bytes_moved;
        home_sent += (double)st->bytes_home_sent;
        home_recv += (double)st->bytes_home_received;
        max_sent += (double)st->bytes_host_sent_max;
        max_recv += (double)st->bytes_host_received_max;
        if (r->hosts >= 3 && rc == 0 && wire_moves()) /* shared in place, nothing moves */
            rc = check_steady(r, k, st);
    }
    moved /= steady;
    printf("%s: %d hosts, %llu subtasks, mean of %llu steady iterations: bytes_moved %.0f, "
           "home sent %.0f, home received %.0f, max host sent %.0f, max host received %.0f "
           "(busiest sent / average %.2f)\n",
           r->name, r->hosts, (unsigned long long)r->subtasks,
           (unsigned long long)(r->iters - WARMUP), moved,
           home_sent / steady, home_recv / steady, max_sent / steady, max_recv / steady,
           moved > 0 ? max_sent / steady / (moved / r->hosts) : 0.0);
    return rc;
}

/* Lazy mode after the first check: host 0 rewrites part of the last-written
 * memory (gathered by now), two more iterations read it, and making both
 * memories not lazy brings their last ranges home. */
static int lazy_continue(struct run *r)
{
    int last = (int)(r->iters % 2), rc;
    uint64_t *m = pm_memory_data(r->mem[last]);

    if (m == NULL)
        return fail("lazy: pm_memory_data of the gathered memory is NULL");
    for (uint64_t i = 0; i < r->words; i += 3) {
        m[i] ^= mix(i + 0x5EED);
        r->ref[last][i] ^= mix(i + 0x5EED);
    }
    if ((rc = pm_memory_touch(r->mem[last])) != 0)
        return fail("lazy: pm_memory_touch after writing a gathered memory: %s", pm_errname(rc));
    if ((rc = iterate(r, r->iters, r->iters + 2, 0)) != 0)
        return rc;
    for (int b = 0; b < 2; b++)
        if ((rc = pm_memory_set_lazy(r->mem[b], 0)) != 0)
            return fail("lazy: pm_memory_set_lazy(%c, 0) after the tasks: %s", "AB"[b],
                        pm_errname(rc));
    return compare(r, "rewritten by host 0, two more iterations, then made not lazy");
}

static int run_mode(const char *name, int lazy, uint64_t words, uint64_t iters,
                    uint64_t subtasks)
{
    struct run r = {.name = name, .lazy = lazy, .hosts = pm_host_count(), .words = words,
                    .iters = iters, .subtasks = subtasks};
    int rc = 0;

    r.ref[0] = malloc(words * 8);
    r.ref[1] = calloc(words, 8);
    r.st = calloc(iters, sizeof *r.st);
    if (r.ref[0] == NULL || r.ref[1] == NULL || r.st == NULL) {
        rc = fail("%s: out of memory", name);
        goto out;
    }
    for (int b = 0; b < 2 && rc == 0; b++)
        if (pm_memory_create(words * 8, &r.mem[b]) != 0)
            rc = fail("%s: a memory of %llu words was not created", name,
                      (unsigned long long)words);
    if (rc != 0)
        goto out;
    uint64_t *a = pm_memory_data(r.mem[0]);
    if (a == NULL) {
        rc = fail("%s: pm_memory_data of a new memory is NULL", name);
        goto out;
    }
    for (uint64_t i = 0; i < words; i++)
        a[i] = r.ref[0][i] = mix(i * 0x10001 + 17);
    if ((rc = pm_memory_touch(r.mem[0])) != 0) {
        rc = fail("%s: pm_memory_touch: %s", name, pm_errname(rc));
        goto out;
    }
    for (int b = 0; b < 2; b++) {
        int lrc = pm_memory_set_lazy(r.mem[b], lazy);
        if (lrc != 0) {
            rc = fail("%s: pm_memory_set_lazy(%c, %d) before the first task: %s", name, "AB"[b],
                      lazy, pm_errname(lrc));
            goto out;
        }
    }

    if ((rc = iterate(&r, 0, iters, 1)) != 0)
        goto out;
    int last = (int)(iters % 2), grc = pm_memory_gather(r.mem[last]);
    if (grc != 0) {
        rc = fail("%s: pm_memory_gather(%c) after the tasks: %s", name, "AB"[last],
                  pm_errname(grc));
        goto out;
    }
    rc = compare(&r, lazy ? "memory A or B gathered, the other read at once"
                          : "after the tasks (not lazy; pm_memory_gather returned 0)");
    if (rc == 0)
        rc = check_bytes(&r);
    if (rc == 0 && lazy)
        rc = lazy_continue(&r);
out:
    for (int b = 0; b < 2; b++) {
        if (r.mem[b].id != 0)
            pm_memory_release(r.mem[b]);
        free(r.ref[b]);
    }
    free(r.st);
    return rc;
}

/* pm_memory_set_lazy and pm_memory_gather on handles they must refuse, and
 * pm_memory_gather on a memory that is not lazy. */
static int misuse(void)
{
    pm_memory_t m;
    int rc;

    if (pm_memory_create(4096, &m) != 0)
        return fail("misuse: a memory of 4096 bytes was not created");
    if ((rc = pm_memory_gather(m)) != 0)
        return fail("misuse: pm_memory_gather on a memory that is not lazy returned %s, want 0",
                    pm_errname(rc));
    if ((rc = pm_memory_set_lazy(m, 0)) != 0)
        return fail("misuse: pm_memory_set_lazy(m, 0) on a memory that is not lazy returned %s, "
                    "want 0", pm_errname(rc));
    if ((rc = pm_memory_set_lazy(m, 1)) != 0)
        return fail("misuse: pm_memory_set_lazy(m, 1) on an unused memory returned %s, want 0",
                    pm_errname(rc));
    if ((rc = pm_memory_gather(m)) != 0)
        return fail("misuse: pm_memory_gather on a lazy memory no task wrote returned %s, want 0",
                    pm_errname(rc));
    if ((rc = pm_memory_release(m)) != 0)
        return fail("misuse: releasing a lazy memory returned %s", pm_errname(rc));
    if ((rc = pm_memory_set_lazy(m, 1)) != PM_EBADHANDLE)
        return fail("misuse: pm_memory_set_lazy on a released memory returned %s, "
                    "want PM_EBADHANDLE", pm_errname(rc));
    if ((rc = pm_memory_gather(m)) != PM_EBADHANDLE)
        return fail("misuse: pm_memory_gather on a released memory returned %s, "
                    "want PM_EBADHANDLE", pm_errname(rc));
    if ((rc = pm_memory_set_lazy(PM_MEMORY_NULL, 1)) != PM_EBADHANDLE)
        return fail("misuse: pm_memory_set_lazy(PM_MEMORY_NULL) returned %s, want PM_EBADHANDLE",
                    pm_errname(rc));
    if ((rc = pm_memory_gather(PM_MEMORY_NULL)) != PM_EBADHANDLE)
        return fail("misuse: pm_memory_gather(PM_MEMORY_NULL) returned %s, want PM_EBADHANDLE",
                    pm_errname(rc));
    printf("ok: misuse: released handles give PM_EBADHANDLE, a memory that is not lazy "
           "gathers with 0\n");
    return 0;
}

static int parse(const char *text, uint64_t *value)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);

    if (end == text || *end != '\0' || text[0] == '-')
        return -1;
    *value = v;
    return 0;
}

int main(int argc, char **argv)
{
    pm_callbacks_t cb;
    uint64_t words = 64 * 1024, iters = 8, subtasks = 0;
    int rc;

    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = lazy_subscribe;
    cb.cpu = lazy_cpu;
    if (pm_callbacks_register("lazy-sweep", &cb) != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    subtasks = 4 * (uint64_t)pm_host_count();
    if (subtasks < 8)
        subtasks = 8;
    if ((argc > 1 && parse(argv[1], &words) != 0) || (argc > 2 && parse(argv[2], &iters) != 0) ||
        (argc > 3 && parse(argv[3], &subtasks) != 0) || argc > 4 || iters < WARMUP + 1 ||
        subtasks < 1 || words < subtasks || words > (UINT64_C(1) << 32)) {
        fprintf(stderr, "usage: lazy [WORDS [ITERS [SUBTASKS]]], ITERS >= %d, "
                        "SUBTASKS <= WORDS <= 2^32\n", WARMUP + 1);
        pm_finalize();
        return 2;
    }
    printf("lazy: %d hosts, %llu words per memory, %llu iterations of %llu subtasks\n",
           pm_host_count(), (unsigned long long)words, (unsigned long long)iters,
           (unsigned long long)subtasks);
    rc = misuse();
    if (rc == 0)
        rc = run_mode("lazy", 1, words, iters, subtasks);
    if (rc == 0)
        rc = run_mode("eager", 0, words, iters, subtasks);
    if (rc == 0)
        printf("LAZY-OK\n");
    fflush(stdout);
    if (pm_finalize() != 0)
        rc = 1;
    return rc;
}
