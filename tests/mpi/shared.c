/*
 * Memories shared in place by the hosts of one machine (run with 2 or 3
 * hosts and PMLIB_SHM=1; with --wire, PMLIB_SHM=0 and the same results
 * over the wire). Each task splits its subtasks equally over the hosts.
 *
 * - A map: 64 subtasks read slices of a 2 MiB input and write slices of a
 *   2 MiB output. Host 0 then rewrites a few words of the input, touches
 *   it and runs the map again, 4 times: every output equals the serial map
 *   of that version of the input (a host that kept a stale copy of an
 *   input it mapped, or wrote into its mirror behind host 0, fails here).
 * - In place: 8 tasks in a row, submitted without waiting, each updating
 *   every word of a 2 MiB memory read-write from its neighbour's old
 *   value in the slice: the serial chain.
 * - A sum reduce over the shared input, and a map whose subtasks also
 *   read a 4 KiB memory (too small to share; it travels): both exact.
 * - A lazy memory written on every host: pm_memory_data shows every word.
 *
 * Shared: every task ran subtasks on other hosts, and no byte of the
 * large memories moved (bytes_moved is 0 but for the small memory and the
 * reduce's partials). With --wire, bytes moved in every task but the lazy
 * one (its outputs stay where written, its input is cached).
 * Host 0 prints SHARED-OK and exits 0 when everything holds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pmlib.h"

#define WORDS (1u << 18) /* 2 MiB of words */
#define SUBTASKS 64u
#define PER (WORDS / SUBTASKS)
#define SMALL_WORDS 512u /* 4 KiB */
#define ROUNDS 4
#define CHAIN 8

typedef struct conf {
    uint64_t salt;
    uint64_t small; /* the map also reads memory 2 */
} conf_t;

static uint64_t map_word(uint64_t x, uint64_t i, uint64_t salt)
{
    return mix(x ^ salt) + i;
}

/* ---- map: in (read) -> out (write); an optional small memory (read) ----- */

static int map_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo = info->id * PER * 8;
    int rc = pm_subscribe(sub, 0, PM_READ, lo, PER * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, 1, PM_WRITE, lo, PER * 8);
    const conf_t *c = info->conf;
    if (rc == 0 && c->small)
        rc = pm_subscribe(sub, 2, PM_READ, 0, SMALL_WORDS * 8);
    return rc;
}

static int map_cpu(const pm_subtask_info_t *info)
{
    const conf_t *c = info->conf;
    const uint64_t *in = info->mem[0], *small = c->small ? info->mem[2] : NULL;
    uint64_t *out = info->mem[1];
    for (uint64_t i = info->id * PER; i < (info->id + 1) * PER; i++)
        out[i] = map_word(in[i], i, c->salt) + (small != NULL ? small[i % SMALL_WORDS] : 0);
    return 0;
}

/* ---- in place: word i from word i-1 of the slice (its old value) -------- */

static int chain_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_READ_WRITE, info->id * PER * 8, PER * 8);
}

static uint64_t chain_word(uint64_t prev, uint64_t i, uint64_t salt)
{
    return prev * UINT64_C(6364136223846793005) + (i ^ salt);
}

static void chain_slice(uint64_t *x, uint64_t id, uint64_t salt)
{
    uint64_t prev = x[id * PER];
    for (uint64_t i = id * PER; i < (id + 1) * PER; i++) {
        uint64_t old = x[i];
        x[i] = chain_word(prev, i, salt);
        prev = old;
    }
}

static int chain_cpu(const pm_subtask_info_t *info)
{
    const conf_t *c = info->conf;
    chain_slice(info->mem[0], info->id, c->salt);
    return 0;
}

/* ---- sum: a uint64 sum of the input's words ----------------------------- */

static int sum_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = pm_subscribe(sub, 0, PM_READ, info->id * PER * 8, PER * 8);
    return rc ? rc : pm_subscribe(sub, 1, PM_WRITE, 0, 8);
}

static int sum_cpu(const pm_subtask_info_t *info)
{
    const uint64_t *in = info->mem[0];
    uint64_t *sum = info->mem[1];
    for (uint64_t i = info->id * PER; i < (info->id + 1) * PER; i++)
        *sum += in[i];
    return 0;
}

/* ---- the checks ----------------------------------------------------------- */

static int wire; /* --wire: memories cross as bytes */

/* Runs a task; small_bytes: what may move when shared (the small memory);
 * must_move: over the wire, the task moves bytes (a lazy memory's outputs
 * stay where written, and an unchanged input is cached). */
static int run(pm_task_desc_t *d, const char *what, uint64_t small_bytes, int must_move)
{
    pm_task_t t;
    pm_task_stats_t st;
    int rc = pm_task_submit(d, &t);
    if (rc == 0)
        rc = pm_task_wait(t);
    if (rc == 0)
        rc = pm_task_stats(t, &st);
    if (rc == 0)
        pm_task_release(t);
    if (rc != 0)
        return fail("%s: %s", what, pm_strerror(rc));
    if (pm_host_count() > 1 && st.subtasks_remote == 0)
        return fail("%s: no subtask ran on another host under equal shares", what);
    /* Reduce partials are a few dozen bytes a host. */
    uint64_t allowed = small_bytes * (uint64_t)(pm_host_count() - 1) + 256u * (uint64_t)pm_host_count();
    if (pm_host_count() > 1 && !wire && st.bytes_moved > allowed)
        return fail("%s: %llu bytes moved between hosts sharing the memories (at most %llu)", what,
                    (unsigned long long)st.bytes_moved, (unsigned long long)allowed);
    if (pm_host_count() > 1 && wire && must_move && st.bytes_moved == 0)
        return fail("%s: nothing moved with PMLIB_SHM=0", what);
    return 0;
}

static void desc_for(pm_task_desc_t *d, const char *cbs, const conf_t *c)
{
    pm_task_desc_init(d);
    d->callbacks = cbs;
    d->subtasks = SUBTASKS;
    d->conf = c;
    d->conf_bytes = sizeof *c;
    d->sched = PM_SCHED_STATIC_EQUAL;
}

static int test_map(pm_memory_t in, pm_memory_t out, pm_memory_t small)
{
    uint64_t *iv = pm_memory_data(in), *ov = pm_memory_data(out), *sv = pm_memory_data(small);
    for (uint64_t i = 0; i < SMALL_WORDS; i++)
        sv[i] = mix(i ^ 77);
    for (int r = 0; r < 2 * ROUNDS; r++) {
        int with_small = r >= ROUNDS;
        conf_t c = {mix((uint64_t)r), (uint64_t)with_small};
        if (r > 0) { /* a few words change: the hosts must see them */
            for (uint64_t k = 0; k < 16; k++)
                iv[mix((uint64_t)r * 100 + k) % WORDS] ^= mix(k + 1);
            if (pm_memory_touch(in) != 0)
                return fail("pm_memory_touch failed");
        }
        pm_task_desc_t d;
        desc_for(&d, "shared-map", &c);
        pm_task_desc_add(&d, in, PM_READ);
        pm_task_desc_add(&d, out, PM_WRITE);
        if (with_small)
            pm_task_desc_add(&d, small, PM_READ);
        char what[64];
        snprintf(what, sizeof what, "map, round %d%s", r, with_small ? " (with a small memory)" : "");
        if (run(&d, what, with_small ? SMALL_WORDS * 8 : 0, 1) != 0)
            return 1;
        for (uint64_t i = 0; i < WORDS; i++) {
            uint64_t want = map_word(iv[i], i, c.salt) + (with_small ? sv[i % SMALL_WORDS] : 0);
            if (ov[i] != want)
                return fail("%s: word %llu is %#llx, the serial map gives %#llx", what, (unsigned long long)i,
                            (unsigned long long)ov[i], (unsigned long long)want);
        }
    }
    return 0;
}

static int test_chain(pm_memory_t x)
{
    uint64_t *xv = pm_memory_data(x), *ref = malloc(WORDS * 8);
    pm_task_t t[CHAIN];
    conf_t c[CHAIN];
    int rc = 0, n = 0;
    if (ref == NULL)
        return fail("out of memory");
    for (uint64_t i = 0; i < WORDS; i++)
        xv[i] = ref[i] = mix(i + 5);
    if (pm_memory_touch(x) != 0)
        rc = fail("pm_memory_touch failed");
    for (; n < CHAIN && rc == 0; n++) {
        pm_task_desc_t d;
        c[n] = (conf_t){mix((uint64_t)n + 1000), 0};
        desc_for(&d, "shared-chain", &c[n]);
        pm_task_desc_add(&d, x, PM_READ_WRITE);
        if (pm_task_submit(&d, &t[n]) != 0) {
            rc = fail("chain: submit %d failed", n);
            break;
        }
    }
    for (int k = 0; k < n; k++) {
        if (pm_task_wait(t[k]) != 0 && rc == 0)
            rc = fail("chain: task %d failed", k);
        pm_task_release(t[k]);
    }
    for (int k = 0; k < CHAIN && rc == 0; k++)
        for (uint64_t id = 0; id < SUBTASKS; id++)
            chain_slice(ref, id, c[k].salt);
    for (uint64_t i = 0; i < WORDS && rc == 0; i++)
        if (xv[i] != ref[i])
            rc = fail("chain: word %llu is %#llx, the serial chain gives %#llx", (unsigned long long)i,
                      (unsigned long long)xv[i], (unsigned long long)ref[i]);
    free(ref);
    return rc;
}

static int test_sum(pm_memory_t in, pm_memory_t sum)
{
    const uint64_t *iv = pm_memory_data(in);
    uint64_t want = 0;
    for (uint64_t i = 0; i < WORDS; i++)
        want += iv[i];
    conf_t c = {0, 0};
    pm_task_desc_t d;
    desc_for(&d, "shared-sum", &c);
    pm_task_desc_add(&d, in, PM_READ);
    pm_task_desc_add(&d, sum, PM_WRITE);
    pm_task_desc_reduce(&d, 1, PM_REDUCE_SUM, PM_UINT64);
    if (run(&d, "sum", 0, 1) != 0)
        return 1;
    uint64_t got = *(uint64_t *)pm_memory_data(sum);
    return got == want ? 0
                       : fail("sum: %#llx, the serial sum is %#llx", (unsigned long long)got,
                              (unsigned long long)want);
}

static int test_lazy(pm_memory_t in, pm_memory_t out)
{
    if (pm_memory_set_lazy(out, 1) != 0)
        return fail("pm_memory_set_lazy failed");
    conf_t c = {42, 0};
    pm_task_desc_t d;
    desc_for(&d, "shared-map", &c);
    pm_task_desc_add(&d, in, PM_READ);
    pm_task_desc_add(&d, out, PM_WRITE);
    if (run(&d, "lazy map", 0, 0) != 0)
        return 1;
    const uint64_t *iv = pm_memory_data(in), *ov = pm_memory_data(out);
    if (ov == NULL)
        return fail("lazy map: pm_memory_data returned NULL");
    for (uint64_t i = 0; i < WORDS; i++)
        if (ov[i] != map_word(iv[i], i, c.salt))
            return fail("lazy map: word %llu is wrong", (unsigned long long)i);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = pm_init(&argc, &argv);
    if (rc != 0)
        return 1;
    wire = argc > 1 && strcmp(argv[1], "--wire") == 0;
    pm_callbacks_t cb;
    pm_callbacks_init(&cb);
    cb.subscribe = map_subscribe;
    cb.cpu = map_cpu;
    rc |= pm_callbacks_register("shared-map", &cb);
    cb.subscribe = chain_subscribe;
    cb.cpu = chain_cpu;
    rc |= pm_callbacks_register("shared-chain", &cb);
    cb.subscribe = sum_subscribe;
    cb.cpu = sum_cpu;
    rc |= pm_callbacks_register("shared-sum", &cb);
    if (rc != 0 || pm_host_id() != 0) {
        pm_finalize();
        return rc != 0;
    }
    pm_memory_t in, out, small, x, sum;
    if (pm_memory_create(WORDS * 8, &in) != 0 || pm_memory_create(WORDS * 8, &out) != 0 ||
        pm_memory_create(SMALL_WORDS * 8, &small) != 0 || pm_memory_create(WORDS * 8, &x) != 0 ||
        pm_memory_create(8, &sum) != 0) {
        pm_finalize();
        return fail("pm_memory_create failed");
    }
    uint64_t *iv = pm_memory_data(in);
    for (uint64_t i = 0; i < WORDS; i++)
        iv[i] = mix(i);
    rc = test_map(in, out, small);
    if (rc == 0)
        rc = test_chain(x);
    if (rc == 0)
        rc = test_sum(in, sum);
    if (rc == 0)
        rc = test_lazy(in, out);
    int hosts = pm_host_count();
    pm_finalize();
    if (rc == 0)
        printf("SHARED-OK (%d hosts, %s)\n", hosts, wire ? "over the wire" : "shared in place");
    return rc;
}
