/*
 * Large memories between hosts (run with 2 hosts).
 *
 * - A 384 MiB input, filled on host 0 with a hash of each 8-byte word's
 *   index, is read in 10 slices of about 40 MiB (the last one shorter).
 *   Each subtask writes a position-weighted checksum of its slice into its
 *   own slot and its slice xor a constant into a second 384 MiB memory.
 *   Host 0 checks every word and every checksum against the serial loop,
 *   that host 1 ran slices, and that bytes_moved is exactly host 1's slices
 *   in and out (nothing sent twice), all sent uncompressed.
 * - The same on 48 MiB of runs of equal words with PM_TASK_COMPRESS: the
 *   same exact results, with far fewer bytes sent than moved.
 * - With --huge instead: one 2.25 GiB memory read and written in place by
 *   one subtask that runs on host 1, so that payloads over 2 GiB cross
 *   between hosts in both directions.
 *
 * Host 0 prints TRANSFER-OK (TRANSFER-HUGE-OK with --huge) and exits 0 when
 * everything holds. A callback that sees something unexpected returns
 * nonzero, which fails the task and so the job.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pmlib.h"

#define MiB (UINT64_C(1) << 20)
#define XOR_KEY UINT64_C(0xA5C3F00F5A3C0FF0)

/* What the slice callbacks need; the fill pattern is host 0's business. */
typedef struct xf_conf {
    uint64_t words; /* 8-byte words in the input */
    uint64_t slice; /* words per subtask; the last subtask gets the rest */
} xf_conf_t;

/* One case of the slice test: sizes, pattern and flags. */
typedef struct xf_case {
    const char *name;
    uint64_t bytes;
    uint64_t slice;  /* words per subtask */
    unsigned shift;  /* word i holds hash(i >> shift): runs of 2^shift */
    unsigned flags;  /* PM_TASK_* */
} xf_case_t;

/* The checksum of words [lo, hi): position-weighted, so a word copied to
 * the wrong place changes it. */
static uint64_t checksum(const uint64_t *w, uint64_t lo, uint64_t hi)
{
    uint64_t sum = 0;

    for (uint64_t i = lo; i < hi; i++)
        sum += w[i] * (2 * i + 1);
    return sum;
}

/* ---- the slice test -------------------------------------------------------- */

/* Memories: 0 input (read), 1 copy (write), 2 checksums, 3 hosts. */
enum { XF_IN, XF_OUT, XF_SUMS, XF_HOSTS, XF_NMEM };

static void slice_of(const xf_conf_t *c, uint64_t id, uint64_t *lo, uint64_t *hi)
{
    *lo = id * c->slice;
    *hi = *lo + c->slice < c->words ? *lo + c->slice : c->words;
}

static int xf_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const xf_conf_t *c = info->conf;
    uint64_t lo, hi;
    int rc;

    if (c == NULL || info->conf_bytes != sizeof *c)
        return -1;
    slice_of(c, info->id, &lo, &hi);
    rc = pm_subscribe(sub, XF_IN, PM_READ, lo * 8, (hi - lo) * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, XF_OUT, PM_WRITE, lo * 8, (hi - lo) * 8);
    if (rc == 0)
        rc = pm_subscribe(sub, XF_SUMS, PM_WRITE, info->id * 8, 8);
    if (rc == 0)
        rc = pm_subscribe(sub, XF_HOSTS, PM_WRITE, info->id * 8, 8);
    return rc;
}

static int xf_cpu(const pm_subtask_info_t *info)
{
    const xf_conf_t *c = info->conf;
    const uint64_t *in = info->mem[XF_IN];
    uint64_t *out = info->mem[XF_OUT], lo, hi;

    if (c == NULL || in == NULL || out == NULL || info->mem_bytes[XF_IN] != c->words * 8)
        return -1;
    slice_of(c, info->id, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        out[i] = in[i] ^ XOR_KEY;
    ((uint64_t *)info->mem[XF_SUMS])[info->id] = checksum(in, lo, hi);
    ((uint64_t *)info->mem[XF_HOSTS])[info->id] = (uint64_t)info->host;
    return 0;
}

/* Checks the copy, the input and every checksum against the serial loop. */
static int check_slices(const xf_case_t *k, const xf_conf_t *c, const uint64_t *in,
                        const uint64_t *out, const uint64_t *sums, uint64_t n)
{
    for (uint64_t id = 0; id < n; id++) {
        uint64_t lo, hi, want = 0;

        slice_of(c, id, &lo, &hi);
        for (uint64_t i = lo; i < hi; i++) {
            uint64_t w = mix(i >> k->shift);

            if (in[i] != w)
                return fail("%s: input word %llu changed", k->name, (unsigned long long)i);
            if (out[i] != (w ^ XOR_KEY))
                return fail("%s: copied word %llu (byte %llu, subtask %llu) is %016llx, want %016llx",
                            k->name, (unsigned long long)i, (unsigned long long)i * 8,
                            (unsigned long long)id, (unsigned long long)out[i],
                            (unsigned long long)(w ^ XOR_KEY));
            want += w * (2 * i + 1);
        }
        if (sums[id] != want)
            return fail("%s: checksum of subtask %llu is %016llx, want %016llx", k->name,
                        (unsigned long long)id, (unsigned long long)sums[id],
                        (unsigned long long)want);
    }
    return 0;
}

/* Checks where the subtasks ran and what crossed between hosts. */
static int check_traffic(const xf_case_t *k, const xf_conf_t *c, const uint64_t *hosts,
                         uint64_t n, const pm_task_stats_t *st)
{
    uint64_t remote = 0, moved = 0;

    for (uint64_t id = 0; id < n; id++) {
        uint64_t lo, hi;

        if (hosts[id] >= (uint64_t)pm_host_count())
            return fail("%s: subtask %llu reports host %llu", k->name, (unsigned long long)id,
                        (unsigned long long)hosts[id]);
        if (hosts[id] == 0)
            continue;
        slice_of(c, id, &lo, &hi);
        remote++;
        moved += 2 * (hi - lo) * 8 + 16; /* slice in, copy out, two slots out */
    }
    printf("%s: %llu subtasks, %llu on other hosts; %llu bytes moved, %llu sent\n", k->name,
           (unsigned long long)st->subtasks, (unsigned long long)st->subtasks_remote,
           (unsigned long long)st->bytes_moved, (unsigned long long)st->bytes_sent);
    if (st->subtasks != n || st->subtasks_remote != remote)
        return fail("%s: stats count %llu subtasks, %llu remote; the slots say %llu, %llu", k->name,
                    (unsigned long long)st->subtasks, (unsigned long long)st->subtasks_remote,
                    (unsigned long long)n, (unsigned long long)remote);
    if (pm_host_count() < 2)
        return 0;
    if (remote == 0)
        return fail("%s: no subtask ran on another host", k->name);
    if (st->bytes_moved != moved)
        return fail("%s: bytes_moved is %llu, want %llu (remote slices in and out once)", k->name,
                    (unsigned long long)st->bytes_moved, (unsigned long long)moved);
    if (k->flags & PM_TASK_COMPRESS) {
        if (st->bytes_sent * 4 >= st->bytes_moved)
            return fail("%s: compression sent %llu of %llu bytes; runs of equal words should "
                        "shrink to well under a quarter", k->name,
                        (unsigned long long)st->bytes_sent, (unsigned long long)st->bytes_moved);
    } else if (st->bytes_sent != st->bytes_moved) {
        return fail("%s: %llu bytes sent for %llu moved without compression", k->name,
                    (unsigned long long)st->bytes_sent, (unsigned long long)st->bytes_moved);
    }
    return 0;
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

static int run_slices(const xf_case_t *k)
{
    xf_conf_t c = {.words = k->bytes / 8, .slice = k->slice};
    uint64_t n = (c.words + c.slice - 1) / c.slice;
    pm_memory_t m[XF_NMEM] = {PM_MEMORY_NULL};
    const uint64_t sizes[XF_NMEM] = {k->bytes, k->bytes, n * 8, n * 8};
    const pm_access_t modes[XF_NMEM] = {PM_READ, PM_WRITE, PM_WRITE, PM_WRITE};
    pm_task_desc_t d;
    pm_task_stats_t st;
    int rc = 1;

    pm_task_desc_init(&d);
    d.callbacks = "transfer-slices";
    d.subtasks = n;
    d.conf = &c;
    d.conf_bytes = sizeof c;
    d.flags = k->flags;
    d.sched = PM_SCHED_STATIC_EQUAL; /* host 1 surely gets half the slices */
    for (int i = 0; i < XF_NMEM; i++)
        if (pm_memory_create(sizes[i], &m[i]) != 0 || pm_task_desc_add(&d, m[i], modes[i]) != i) {
            rc = fail("%s: cannot create memory %d of %llu bytes", k->name, i,
                      (unsigned long long)sizes[i]);
            goto out;
        }
    uint64_t *in = pm_memory_data(m[XF_IN]);
    for (uint64_t i = 0; i < c.words; i++)
        in[i] = mix(i >> k->shift);
    rc = run_task(&d, &st);
    if (rc != 0) {
        rc = fail("%s: the task failed: %s", k->name, pm_errname(rc));
        goto out;
    }
    rc = check_slices(k, &c, in, pm_memory_data(m[XF_OUT]), pm_memory_data(m[XF_SUMS]), n);
    if (rc == 0)
        rc = check_traffic(k, &c, pm_memory_data(m[XF_HOSTS]), n, &st);
    if (rc == 0)
        printf("ok: %s: every word and checksum equals the serial loop\n", k->name);
out:
    for (int i = 0; i < XF_NMEM; i++)
        if (m[i].id != 0)
            pm_memory_release(m[i]);
    return rc;
}

/* ---- the huge test ---------------------------------------------------------- */

/* Memories: 0 the big one (read-write), 1 checksums, 2 hosts. Subtask 1
 * takes all of memory 0; subtask 0 only reports where it ran. */
enum { XH_BIG, XH_SUMS, XH_HOSTS, XH_NMEM };
#define XH_SUBTASKS 2u
#define XH_TOUCHED 1u /* the subtask that reads and writes the big memory */

static int xh_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = 0;

    if (info->id == XH_TOUCHED)
        rc = pm_subscribe(sub, XH_BIG, PM_READ_WRITE, 0, info->mem_bytes[XH_BIG]);
    if (rc == 0)
        rc = pm_subscribe(sub, XH_SUMS, PM_WRITE, info->id * 8, 8);
    if (rc == 0)
        rc = pm_subscribe(sub, XH_HOSTS, PM_WRITE, info->id * 8, 8);
    return rc;
}

static int xh_cpu(const pm_subtask_info_t *info)
{
    uint64_t sum = 0;

    if (info->id == XH_TOUCHED) {
        uint64_t *w = info->mem[XH_BIG], n = info->mem_bytes[XH_BIG] / 8;

        if (w == NULL)
            return -1;
        sum = checksum(w, 0, n);
        for (uint64_t i = 0; i < n; i++)
            w[i] ^= XOR_KEY;
    }
    ((uint64_t *)info->mem[XH_SUMS])[info->id] = sum;
    ((uint64_t *)info->mem[XH_HOSTS])[info->id] = (uint64_t)info->host;
    return 0;
}

static int check_huge(const uint64_t *w, uint64_t n, const uint64_t *sums,
                      const uint64_t *hosts, const pm_task_stats_t *st)
{
    uint64_t want = 0;

    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = mix(i);

        if (w[i] != (v ^ XOR_KEY))
            return fail("huge: word %llu (byte %llu) is %016llx, want %016llx",
                        (unsigned long long)i, (unsigned long long)i * 8,
                        (unsigned long long)w[i], (unsigned long long)(v ^ XOR_KEY));
        want += v * (2 * i + 1);
    }
    if (sums[XH_TOUCHED] != want)
        return fail("huge: checksum %016llx, want %016llx", (unsigned long long)sums[XH_TOUCHED],
                    (unsigned long long)want);
    printf("huge: subtask %u ran on host %llu; %llu bytes moved\n", XH_TOUCHED,
           (unsigned long long)hosts[XH_TOUCHED], (unsigned long long)st->bytes_moved);
    if (pm_host_count() < 2)
        return 0;
    if (hosts[XH_TOUCHED] != 1)
        return fail("huge: the big subtask ran on host %llu, not host 1",
                    (unsigned long long)hosts[XH_TOUCHED]);
    if (st->bytes_moved != 2 * n * 8 + 16)
        return fail("huge: bytes_moved is %llu, want %llu", (unsigned long long)st->bytes_moved,
                    (unsigned long long)(2 * n * 8 + 16));
    return 0;
}

static int run_huge(void)
{
    const uint64_t bytes = 2304 * MiB, n = bytes / 8; /* 2.25 GiB */
    pm_memory_t m[XH_NMEM] = {PM_MEMORY_NULL};
    const uint64_t sizes[XH_NMEM] = {bytes, XH_SUBTASKS * 8, XH_SUBTASKS * 8};
    const pm_access_t modes[XH_NMEM] = {PM_READ_WRITE, PM_WRITE, PM_WRITE};
    pm_task_desc_t d;
    pm_task_stats_t st;
    int rc = 1;

    pm_task_desc_init(&d);
    d.callbacks = "transfer-huge";
    d.subtasks = XH_SUBTASKS;
    d.grain = 1;
    d.sched = PM_SCHED_STATIC_EQUAL; /* subtask 1 is host 1's share */
    for (int i = 0; i < XH_NMEM; i++)
        if (pm_memory_create(sizes[i], &m[i]) != 0 || pm_task_desc_add(&d, m[i], modes[i]) != i) {
            rc = fail("huge: cannot create memory %d of %llu bytes", i,
                      (unsigned long long)sizes[i]);
            goto out;
        }
    uint64_t *w = pm_memory_data(m[XH_BIG]);
    for (uint64_t i = 0; i < n; i++)
        w[i] = mix(i);
    rc = run_task(&d, &st);
    if (rc != 0) {
        rc = fail("huge: the task failed: %s", pm_errname(rc));
        goto out;
    }
    rc = check_huge(w, n, pm_memory_data(m[XH_SUMS]), pm_memory_data(m[XH_HOSTS]), &st);
    if (rc == 0)
        printf("ok: huge: 2.25 GiB went to host 1 and back, every word as the serial loop\n");
out:
    for (int i = 0; i < XH_NMEM; i++)
        if (m[i].id != 0)
            pm_memory_release(m[i]);
    return rc;
}

/* ---- main ------------------------------------------------------------------- */

static int register_callbacks(void)
{
    pm_callbacks_t cb;

    pm_callbacks_init(&cb);
    cb.subscribe = xf_subscribe;
    cb.cpu = xf_cpu;
    if (pm_callbacks_register("transfer-slices", &cb) != 0)
        return 1;
    pm_callbacks_init(&cb);
    cb.subscribe = xh_subscribe;
    cb.cpu = xh_cpu;
    return pm_callbacks_register("transfer-huge", &cb) != 0;
}

static int run_all(void)
{
    /* Slices of 40 MiB + 24 bytes: not a power of two, and a short last one. */
    static const xf_case_t plain = {"slices", 384 * MiB, 5 * MiB + 3, 0, 0};
    static const xf_case_t packed = {"compressed", 48 * MiB, 768 * 1024 + 5, 10,
                                     PM_TASK_COMPRESS};

    return run_slices(&plain) || run_slices(&packed);
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
    int huge = argc > 1 && strcmp(argv[1], "--huge") == 0;
    int rc = huge ? run_huge() : run_all();
    if (rc == 0)
        printf(huge ? "TRANSFER-HUGE-OK\n" : "TRANSFER-OK\n");
    fflush(stdout);
    if (pm_finalize() != 0)
        rc = 1;
    return rc;
}
