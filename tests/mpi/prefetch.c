/*
 * Inputs that change between tasks, read in many small chunks (run with 2
 * hosts). A stub that fetched a chunk's inputs ahead of time, or kept them,
 * across a version change would compute with stale words here.
 *
 * - 50 iterations of one task: host 0 rewrites a read-only input through
 *   pm_memory_data() and calls pm_memory_touch (every word on even
 *   iterations, about 1% of them on odd ones, nothing on every fifth).
 *   2048 one-subtask chunks each read a 16-word window plus a halo that
 *   reaches into the neighbours' windows, and write a stencil of it. The
 *   output must equal the serial stencil of that iteration's input (and the
 *   iteration number). Static and pull scheduling alternate. Under static
 *   shares the traffic is exact too: after a touch the other host fetches
 *   the union of its windows once; with the input unchanged only outputs
 *   move.
 * - The same with 16 subtasks: the other host's inputs (about 1 KiB) are
 *   small enough to travel with the task instead of being asked for, and
 *   must still move once per version: the bytes are the same.
 * - Read after write through hosts: chains of tasks submitted without
 *   waiting, each reading what the one before wrote, in one-subtask chunks
 *   whose halos cross the boundary between the hosts' shares: ping-pong
 *   between two memories, then in place with PM_READ_WRITE. Host 0 then
 *   rewrites the first memory, touches it and runs the chains again. The
 *   results equal the serial chains.
 *
 * Host 0 prints PREFETCH-OK and exits 0 when everything holds.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pmlib.h"

#define ITERATIONS 50
#define SUBTASKS 2048u
#define SMALL_SUBTASKS 16u /* inputs small enough to go with the task itself */
#define PER 16u     /* words per subtask in the iterative test */
#define RADIUS 2u   /* stencil reach in words, so the halo */
#define CHAIN_TASKS 16
#define INPLACE_TASKS 12

static uint64_t rotl(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64 - r));
}

/* ---- the stencil: callbacks and the serial loop share it -------------------- */

typedef struct st_conf {
    uint64_t words;  /* words in the input and the output */
    uint64_t per;    /* words each subtask writes */
    uint64_t radius; /* words read on each side */
    uint64_t salt;   /* differs per task, so every task's output differs */
} st_conf_t;

/* Memories: 0 input (read), 1 output (write), 2 hosts (a word per subtask). */
enum { ST_IN, ST_OUT, ST_HOSTS, ST_NMEM };

/* Word i of the output from words i-r..i+r of x; outside x counts as salt. */
static uint64_t stencil(const st_conf_t *c, const uint64_t *x, uint64_t i)
{
    uint64_t acc = c->salt;

    for (uint64_t d = 0; d <= 2 * c->radius; d++) {
        uint64_t v = i + d >= c->radius && i + d - c->radius < c->words ? x[i + d - c->radius]
                                                                         : c->salt;

        acc = rotl(acc, 11) ^ (v * (2 * d + 1));
    }
    return acc + c->salt;
}

static void window(const st_conf_t *c, uint64_t id, uint64_t *lo, uint64_t *hi)
{
    *lo = id * c->per > c->radius ? id * c->per - c->radius : 0;
    *hi = (id + 1) * c->per + c->radius < c->words ? (id + 1) * c->per + c->radius : c->words;
}

static int st_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const st_conf_t *c = info->conf;
    uint64_t lo, hi;
    int rc;

    if (c == NULL || info->conf_bytes != sizeof *c || info->mem_bytes[ST_IN] != c->words * 8)
        return -1;
    window(c, info->id, &lo, &hi);
    rc = pm_subscribe(sub, ST_IN, PM_READ, lo * 8, (hi - lo) * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, ST_OUT, PM_WRITE, info->id * c->per * 8, c->per * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, ST_HOSTS, PM_WRITE, info->id * 8, 8);
    return rc;
}

static int st_cpu(const pm_subtask_info_t *info)
{
    const st_conf_t *c = info->conf;
    const uint64_t *in = info->mem[ST_IN];
    uint64_t *out = info->mem[ST_OUT];

    if (c == NULL || in == NULL || out == NULL)
        return -1;
    for (uint64_t i = info->id * c->per; i < (info->id + 1) * c->per; i++)
        out[i] = stencil(c, in, i);
    ((uint64_t *)info->mem[ST_HOSTS])[info->id] = (uint64_t)info->host;
    return 0;
}

/* ---- in place: each subtask updates its own slice ------------------------- */

static uint64_t inplace_step(uint64_t x, uint64_t i, uint64_t salt)
{
    return x * UINT64_C(6364136223846793005) + mix(salt ^ i);
}

static int ip_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const st_conf_t *c = info->conf;

    if (c == NULL || info->conf_bytes != sizeof *c)
        return -1;
    return pm_subscribe(sub, 0, PM_READ_WRITE, info->id * c->per * 8, c->per * 8);
}

static int ip_cpu(const pm_subtask_info_t *info)
{
    const st_conf_t *c = info->conf;
    uint64_t *x = info->mem[0];

    if (c == NULL || x == NULL)
        return -1;
    for (uint64_t i = info->id * c->per; i < (info->id + 1) * c->per; i++)
        x[i] = inplace_step(x[i], i, c->salt);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

/* Fills a stencil task: in -> out, one subtask per chunk under static
 * shares, two under pull (so the chunk layout changes too). */
static void stencil_desc(pm_task_desc_t *d, const st_conf_t *c, pm_memory_t in, pm_memory_t out,
                         pm_memory_t hosts, int pull)
{
    pm_task_desc_init(d);
    d->callbacks = "prefetch-stencil";
    d->subtasks = c->words / c->per;
    d->conf = c;
    d->conf_bytes = sizeof *c;
    d->sched = pull ? PM_SCHED_PULL : PM_SCHED_STATIC_EQUAL;
    d->grain = pull ? 2 : 1;
    pm_task_desc_add(d, in, PM_READ);
    pm_task_desc_add(d, out, PM_WRITE);
    pm_task_desc_add(d, hosts, PM_WRITE);
}

static int run_task(const pm_task_desc_t *d, pm_task_stats_t *st)
{
    pm_task_t t;
    int rc = pm_task_submit(d, &t);

    if (rc != 0)
        return rc;
    rc = pm_task_wait(t);
    if (pm_task_stats(t, st) != 0)
        rc = rc ? rc : PM_EINTERNAL;
    pm_task_release(t);
    return rc;
}

static int create(uint64_t bytes, pm_memory_t *m, uint64_t **data)
{
    if (pm_memory_create(bytes, m) != 0)
        return 1;
    *data = pm_memory_data(*m);
    return *data == NULL;
}

/* ---- iterations with host-side writes ---------------------------------------- */

/* Host 0's write before iteration `it`, applied to the memory and to the
 * reference alike; 1 when it changed anything (and so touched). */
static int change_input(int it, uint64_t *in, uint64_t *ref, uint64_t n)
{
    if (it > 0 && it % 5 == 4)
        return 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t h = mix(((uint64_t)it << 32) ^ i);

        if (it % 2 == 0 || h % 97 == 0)
            in[i] = ref[i] = mix(h);
    }
    return 1;
}

/* The bytes an iteration under static shares must move, from where its
 * subtasks ran: the union of the remote windows when the other host's copy
 * is stale (else nothing), plus each remote subtask's output and host word. */
static uint64_t expected_bytes(const st_conf_t *c, const uint64_t *hosts, int stale,
                               unsigned char *seen)
{
    uint64_t bytes = 0;

    memset(seen, 0, c->words);
    for (uint64_t id = 0; id < c->words / c->per; id++) {
        uint64_t lo, hi;

        if (hosts[id] == 0)
            continue;
        bytes += c->per * 8 + 8;
        window(c, id, &lo, &hi);
        for (uint64_t i = lo; stale && i < hi; i++) {
            bytes += seen[i] ? 0 : 8;
            seen[i] = 1;
        }
    }
    return bytes;
}

static int check_iteration(int it, const st_conf_t *c, const uint64_t *in, const uint64_t *ref,
                           const uint64_t *out)
{
    for (uint64_t i = 0; i < c->words; i++) {
        if (in[i] != ref[i])
            return fail("iteration %d: input word %llu changed", it, (unsigned long long)i);
        if (out[i] != stencil(c, ref, i))
            return fail("iteration %d: output word %llu (subtask %llu) is %016llx, want %016llx "
                        "(computed from stale input?)", it, (unsigned long long)i,
                        (unsigned long long)(i / c->per), (unsigned long long)out[i],
                        (unsigned long long)stencil(c, ref, i));
    }
    return 0;
}

/* Where the subtasks ran, and under `exact` (static shares, and the other
 * host's copy either stale or filled by the same layout) the bytes moved. */
static int check_traffic(int it, const st_conf_t *c, const uint64_t *hosts, int stale, int exact,
                         const pm_task_stats_t *st, unsigned char *seen)
{
    uint64_t remote = 0, want;

    for (uint64_t id = 0; id < c->words / c->per; id++)
        remote += hosts[id] != 0;
    if (st->subtasks != c->words / c->per || st->subtasks_remote != remote)
        return fail("iteration %d: stats count %llu subtasks, %llu remote; the host words say "
                    "%llu remote", it, (unsigned long long)st->subtasks,
                    (unsigned long long)st->subtasks_remote, (unsigned long long)remote);
    if (pm_host_count() < 2 || !exact)
        return 0;
    if (remote == 0)
        return fail("iteration %d: no subtask ran on another host under static shares", it);
    if (!wire_moves())
        return 0; /* the input is shared in place: none of it moves */
    want = expected_bytes(c, hosts, stale, seen);
    if (st->bytes_moved != want)
        return fail("iteration %d: bytes_moved is %llu, want %llu (%s)", it,
                    (unsigned long long)st->bytes_moved, (unsigned long long)want,
                    stale ? "the remote windows once after a touch, and the outputs"
                          : "only the outputs: the input did not change");
    return 0;
}

static int run_iterations(uint64_t subtasks)
{
    const uint64_t n = subtasks * PER;
    pm_memory_t in_m = PM_MEMORY_NULL, out_m = PM_MEMORY_NULL, hosts_m = PM_MEMORY_NULL;
    uint64_t *in, *out, *hosts, *ref = calloc(n, 8);
    unsigned char *seen = malloc(n);
    uint64_t remote_total = 0;
    int rc = 1, prev_static = 0, exact = 0;

    if (ref == NULL || seen == NULL || create(n * 8, &in_m, &in) || create(n * 8, &out_m, &out) ||
        create(subtasks * 8, &hosts_m, &hosts)) {
        rc = fail("iterations: out of memory");
        goto out;
    }
    for (int it = 0; it < ITERATIONS; it++) {
        st_conf_t c = {n, PER, RADIUS, mix((uint64_t)it + 1000)};
        int pull = it % 3 == 2, touched = change_input(it, in, ref, n);
        int known = !pull && (touched || prev_static); /* the other host's copy */
        pm_task_desc_t d;
        pm_task_stats_t st;

        if (touched && pm_memory_touch(in_m) != 0) {
            rc = fail("iteration %d: pm_memory_touch failed", it);
            goto out;
        }
        stencil_desc(&d, &c, in_m, out_m, hosts_m, pull);
        rc = run_task(&d, &st);
        if (rc != 0) {
            rc = fail("iteration %d: the task failed: %s", it, pm_errname(rc));
            goto out;
        }
        rc = check_iteration(it, &c, in, ref, out);
        if (rc == 0)
            rc = check_traffic(it, &c, hosts, touched, known, &st, seen);
        if (rc != 0)
            goto out;
        remote_total += st.subtasks_remote;
        exact += known && pm_host_count() > 1;
        prev_static = !pull;
    }
    printf("ok: %d iterations of %llu subtasks equal the serial stencil; %llu subtasks ran on "
           "other hosts; bytes moved exact in %d of them\n", ITERATIONS,
           (unsigned long long)subtasks, (unsigned long long)remote_total, exact);
    rc = pm_host_count() > 1 && remote_total == 0 ? fail("no subtask ran on another host") : 0;
out:
    free(ref);
    free(seen);
    if (in_m.id)
        pm_memory_release(in_m);
    if (out_m.id)
        pm_memory_release(out_m);
    if (hosts_m.id)
        pm_memory_release(hosts_m);
    return rc;
}

/* ---- chains of tasks, submitted without waiting -------------------------------- */

#define CHAIN_PER 8u

/* Submits the chain of one round: ping-pong p -> q -> p ..., then in place
 * on p; waits for every task in submit order. Runs the same on the refs. */
static int run_chain_round(int round, pm_memory_t p_m, pm_memory_t q_m, pm_memory_t hosts_m,
                           uint64_t *ref[2], uint64_t *remote)
{
    const uint64_t n = SUBTASKS * CHAIN_PER;
    pm_task_t tasks[CHAIN_TASKS + INPLACE_TASKS];
    int ntasks = 0, rc = 0;

    for (int k = 0; k < CHAIN_TASKS && rc == 0; k++) {
        st_conf_t c = {n, CHAIN_PER, 1, mix((uint64_t)round * 1000 + (uint64_t)k)};
        pm_task_desc_t d;

        stencil_desc(&d, &c, k % 2 ? q_m : p_m, k % 2 ? p_m : q_m, hosts_m, k % 3 == 1);
        if (pm_task_submit(&d, &tasks[ntasks]) != 0) {
            rc = fail("round %d: chain task %d not submitted", round, k);
            break;
        }
        ntasks++;
        for (uint64_t i = 0; i < n; i++)
            ref[(k + 1) % 2][i] = stencil(&c, ref[k % 2], i);
    }
    for (int k = 0; k < INPLACE_TASKS && rc == 0; k++) {
        st_conf_t c = {n, CHAIN_PER, 0, mix((uint64_t)round * 1000 + 500 + (uint64_t)k)};
        pm_task_desc_t d;

        pm_task_desc_init(&d);
        d.callbacks = "prefetch-inplace";
        d.subtasks = SUBTASKS;
        d.conf = &c;
        d.conf_bytes = sizeof c;
        d.sched = k % 2 ? PM_SCHED_PULL : PM_SCHED_STATIC_EQUAL;
        d.grain = 1;
        pm_task_desc_add(&d, p_m, PM_READ_WRITE);
        if (pm_task_submit(&d, &tasks[ntasks]) != 0) {
            rc = fail("round %d: in-place task %d not submitted", round, k);
            break;
        }
        ntasks++;
        for (uint64_t i = 0; i < n; i++)
            ref[0][i] = inplace_step(ref[0][i], i, c.salt);
    }
    for (int k = 0; k < ntasks; k++) {
        pm_task_stats_t st;
        int trc = pm_task_wait(tasks[k]);

        if (trc != 0 && rc == 0)
            rc = fail("round %d: task %d of the chain failed: %s", round, k, pm_errname(trc));
        if (pm_task_stats(tasks[k], &st) == 0)
            *remote += st.subtasks_remote;
        pm_task_release(tasks[k]);
    }
    return rc;
}

static int check_chain(int round, const uint64_t *p, const uint64_t *q, uint64_t *ref[2])
{
    for (uint64_t i = 0; i < SUBTASKS * CHAIN_PER; i++) {
        if (p[i] != ref[0][i])
            return fail("round %d: word %llu of the first memory is %016llx, want %016llx", round,
                        (unsigned long long)i, (unsigned long long)p[i],
                        (unsigned long long)ref[0][i]);
        if (q[i] != ref[1][i])
            return fail("round %d: word %llu of the second memory is %016llx, want %016llx",
                        round, (unsigned long long)i, (unsigned long long)q[i],
                        (unsigned long long)ref[1][i]);
    }
    return 0;
}

static int run_chains(void)
{
    const uint64_t n = SUBTASKS * CHAIN_PER;
    pm_memory_t p_m = PM_MEMORY_NULL, q_m = PM_MEMORY_NULL, hosts_m = PM_MEMORY_NULL;
    uint64_t *p, *q, *hosts, *ref[2] = {calloc(n, 8), calloc(n, 8)}, remote = 0;
    int rc = 1;

    if (ref[0] == NULL || ref[1] == NULL || create(n * 8, &p_m, &p) || create(n * 8, &q_m, &q) ||
        create(SUBTASKS * 8, &hosts_m, &hosts)) {
        rc = fail("chains: out of memory");
        goto out;
    }
    for (int round = 0; round < 2; round++) {
        /* Host 0's own write before each round: every word of p. */
        for (uint64_t i = 0; i < n; i++)
            p[i] = ref[0][i] = ref[0][i] ^ mix((uint64_t)round << 40 | i);
        if (pm_memory_touch(p_m) != 0) {
            rc = fail("round %d: pm_memory_touch failed", round);
            goto out;
        }
        rc = run_chain_round(round, p_m, q_m, hosts_m, ref, &remote);
        if (rc == 0)
            rc = check_chain(round, p, q, ref);
        if (rc != 0)
            goto out;
    }
    printf("ok: 2 rounds of %d dependent tasks equal the serial chain; %llu subtasks ran on other "
           "hosts\n", CHAIN_TASKS + INPLACE_TASKS, (unsigned long long)remote);
    rc = pm_host_count() > 1 && remote == 0 ? fail("no chain subtask ran on another host") : 0;
out:
    free(ref[0]);
    free(ref[1]);
    if (p_m.id)
        pm_memory_release(p_m);
    if (q_m.id)
        pm_memory_release(q_m);
    if (hosts_m.id)
        pm_memory_release(hosts_m);
    return rc;
}

/* ---- main ------------------------------------------------------------------- */

static int register_callbacks(void)
{
    pm_callbacks_t cb;

    pm_callbacks_init(&cb);
    cb.subscribe = st_subscribe;
    cb.cpu = st_cpu;
    if (pm_callbacks_register("prefetch-stencil", &cb) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = ip_subscribe;
    cb.cpu = ip_cpu;
    return pm_callbacks_register("prefetch-inplace", &cb) != 0;
}

int main(int argc, char **argv)
{
    setenv("PMLIB_NCPU", "2", 0);
    if (pm_init(&argc, &argv) != 0)
        return 1;
    if (register_callbacks() != 0) {
        pm_finalize();
        return 1;
    }
    if (pm_host_id() != 0)
        return pm_finalize() != 0 ? 1 : 0;
    int rc = run_iterations(SUBTASKS);
    if (rc == 0)
        rc = run_iterations(SMALL_SUBTASKS);
    if (rc == 0)
        rc = run_chains();
    if (rc == 0)
        printf("PREFETCH-OK\n");
    fflush(stdout);
    if (pm_finalize() != 0)
        rc = 1;
    return rc;
}
