/*
 * The runtime across hosts: one MPI rank per host. Every rank starts pmlib
 * and registers the same callbacks; host 0 runs the Check suite and the
 * other ranks serve its tasks inside pm_finalize. The same program runs on
 * 1 to 4 hosts and each result is compared with a serial computation, so a
 * test means the same thing for every host count; tests about traffic
 * between hosts skip those assertions on one host.
 *
 * - slices written by formula plus an int64 sum reduce, for 1, 7 and 1000
 *   subtasks, equal the serial loop;
 * - a double sum over values of wild magnitudes gives the same bits twice
 *   and under static scheduling, and stays within a rounding bound of the
 *   serial sum;
 * - a custom, non-commutative reduce (2x2 matrix product mod 2^32) equals
 *   the serial left-to-right product over subtask ids;
 * - an unchanged read-only input is sent to a host once: a repeated task
 *   moves only its written slices, until pm_memory_touch;
 * - PM_TASK_COMPRESS and PM_TASK_COMPRESS_AUTO shrink a repetitive input,
 *   and automatic mode leaves random data alone;
 * - redistributed pieces are gathered on host 0 in key order;
 * - strided subscriptions (one matrix column per subtask) read and write
 *   the right elements;
 * - 20 dependent tasks submitted without waiting run in submit order.
 *
 * No test here makes a task fail: a failure would make every other host's
 * pm_finalize report it, and the job must exit 0 when the tests pass. The
 * failure paths have their own programs (fault_*.c).
 *
 * Callbacks run on stub threads, possibly on another host, where a Check
 * assertion cannot report; they return nonzero on anything unexpected, so
 * the task fails and the test asserting its status does.
 */
#include "../unit/testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

/* Submits a task, waits for it, copies its stats, releases it; its status. */
static int run_stats(const pm_task_desc_t *desc, pm_task_stats_t *st)
{
    pm_task_t t = PM_TASK_NULL;
    int rc;

    ck_assert_int_eq(pm_task_submit(desc, &t), PM_OK);
    rc = pm_task_wait(t);
    ck_assert_int_eq(pm_task_stats(t, st), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    return rc;
}

static int multi_host(void)
{
    return pm_host_count() > 1;
}

/* Whether memories cross between the hosts as bytes: several hosts and
 * PMLIB_SHM=0 (tests/mpi/mpi-common.sh sets it unless told otherwise).
 * Otherwise the hosts of this machine share large memories in place and
 * the byte counts below do not apply (tests/mpi/shared.c checks those). */
static int wire_moves(void)
{
    const char *v = getenv("PMLIB_SHM");
    return multi_host() && v != NULL && strcmp(v, "0") == 0;
}

/* ------------------------------------------------------------------------ */
/* (a) slices by formula + int64 sum reduce                                 */
/* ------------------------------------------------------------------------ */

#define SL_NAME "mpi-slices"
#define SL_ELEMS 13 /* int64 elements per subtask: not a power of two */

typedef struct sl_conf {
    uint64_t seed;
} sl_conf_t;

/* Within +-2^39, so that a thousand subtasks' sums cannot overflow. */
static int64_t sl_value(uint64_t seed, uint64_t id, uint64_t j)
{
    return (int64_t)(tu_mix(seed + id, j) & ((UINT64_C(1) << 40) - 1)) -
           (INT64_C(1) << 39);
}

static int sl_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = pm_subscribe(sub, 0, PM_WRITE, info->id * SL_ELEMS * 8,
                          SL_ELEMS * 8);

    return rc ? rc : pm_subscribe(sub, 1, PM_WRITE, 0, 8);
}

static int sl_cpu(const pm_subtask_info_t *info)
{
    const sl_conf_t *c = info->conf;
    int64_t *x = info->mem[0];
    int64_t *sum = info->mem[1];

    if (c == NULL || info->conf_bytes != sizeof *c || x == NULL || sum == NULL)
        return -1;
    for (uint64_t j = 0; j < SL_ELEMS; j++) {
        int64_t v = sl_value(c->seed, info->id, j);

        x[info->id * SL_ELEMS + j] = v;
        *sum += v;
    }
    return 0;
}

static const uint64_t sl_counts[] = {1, 7, 1000};

START_TEST(test_slices_sum)
{
    uint64_t n = sl_counts[_i];
    sl_conf_t conf = {.seed = 1000 + n};
    pm_memory_t x = tu_memory(n * SL_ELEMS * 8), s = tu_memory(8);
    pm_task_desc_t d;
    pm_task_stats_t st;
    int64_t want_sum = 0;

    tu_desc(&d, SL_NAME, n);
    tu_add(&d, x, PM_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&d, tu_add(&d, s, PM_WRITE),
                                         PM_REDUCE_SUM, PM_INT64), PM_OK);
    d.conf = &conf;
    d.conf_bytes = sizeof conf;
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    ck_assert_uint_eq(st.subtasks, n);

    const int64_t *xv = pm_memory_data(x);
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t j = 0; j < SL_ELEMS; j++) {
            int64_t v = sl_value(conf.seed, i, j);

            ck_assert_msg(xv[i * SL_ELEMS + j] == v,
                          "x[%llu] wrong (subtasks %llu)",
                          (unsigned long long)(i * SL_ELEMS + j),
                          (unsigned long long)n);
            want_sum += v;
        }
    }
    ck_assert_int_eq(*(const int64_t *)pm_memory_data(s), want_sum);
    ck_assert_int_eq(pm_memory_release(x), PM_OK);
    ck_assert_int_eq(pm_memory_release(s), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (b) double sum reduce: repeatable bits                                     */
/* ------------------------------------------------------------------------ */

#define DS_NAME "mpi-dsum"
#define DS_ELEMS 16
#define DS_NSUB 999

/* Magnitudes from 2^-60 to 2^61 and both signs: the rounding of the sum
 * depends on the merge order, so equal bits prove a fixed order. */
static double ds_value(uint64_t id, uint64_t e)
{
    uint64_t r = tu_mix(id, e + 77);
    double frac = (double)((r >> 20) & 0xFFFFF) / 1048576.0;
    double v = ldexp(1.0 + frac, (int)(r % 121) - 60);

    return (r >> 63) ? -v : v;
}

static int ds_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    (void)info;
    return pm_subscribe(sub, 0, PM_WRITE, 0, DS_ELEMS * sizeof(double));
}

static int ds_cpu(const pm_subtask_info_t *info)
{
    double *acc = info->mem[0];

    if (acc == NULL)
        return -1;
    for (uint64_t e = 0; e < DS_ELEMS; e++)
        acc[e] += ds_value(info->id, e);
    return 0;
}

static void ds_run(pm_sched_t sched, double *out)
{
    pm_memory_t m = tu_memory(DS_ELEMS * sizeof(double));
    pm_task_desc_t d;
    pm_task_stats_t st;

    tu_desc(&d, DS_NAME, DS_NSUB);
    ck_assert_int_eq(pm_task_desc_reduce(&d, tu_add(&d, m, PM_WRITE),
                                         PM_REDUCE_SUM, PM_DOUBLE), PM_OK);
    d.sched = sched;
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    ck_assert_uint_eq(st.subtasks, DS_NSUB);
    memcpy(out, pm_memory_data(m), DS_ELEMS * sizeof(double));
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}

START_TEST(test_double_sum_bits)
{
    double a[DS_ELEMS], b[DS_ELEMS], c[DS_ELEMS];

    ds_run(PM_SCHED_DEFAULT, a);
    ds_run(PM_SCHED_DEFAULT, b);
    ds_run(PM_SCHED_STATIC_EQUAL, c);
    ck_assert_msg(memcmp(a, b, sizeof a) == 0,
                  "two runs of one double sum gave different bits");
    ck_assert_msg(memcmp(a, c, sizeof a) == 0,
                  "pull and static-equal runs gave different bits");
    for (uint64_t e = 0; e < DS_ELEMS; e++) {
        double serial = 0, mag = 0;

        for (uint64_t i = 0; i < DS_NSUB; i++) {
            serial += ds_value(i, e);
            mag += fabs(ds_value(i, e));
        }
        /* Any summation order stays within (n - 1) eps sum|v| of the
         * exact sum, and so does the serial loop: twice that apart. */
        ck_assert_msg(fabs(a[e] - serial) <= 2.0 * DS_NSUB * DBL_EPSILON * mag,
                      "element %llu: %.17g vs serial %.17g",
                      (unsigned long long)e, a[e], serial);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (c) custom non-commutative reduce: 2x2 matrix product mod 2^32            */
/* ------------------------------------------------------------------------ */

#define MP_NAME "mpi-matprod"
#define MP_MATS 4 /* matrices per memory: merges see ranges, not one value */
#define MP_NSUB 301
#define MP_BYTES (MP_MATS * 4 * sizeof(uint32_t))

static void mp_value(uint64_t id, uint64_t k, uint32_t m[4])
{
    for (int e = 0; e < 4; e++)
        m[e] = (uint32_t)tu_mix(id, k * 4 + (uint64_t)e);
}

/* r = a * b for row-major 2x2 matrices; r may alias a. */
static void mp_mul(uint32_t r[4], const uint32_t a[4], const uint32_t b[4])
{
    uint32_t t[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};

    memcpy(r, t, sizeof t);
}

static int mp_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    (void)info;
    return pm_subscribe(sub, 0, PM_WRITE, 0, MP_BYTES);
}

static int mp_cpu(const pm_subtask_info_t *info)
{
    unsigned char *base = info->mem[0];

    if (base == NULL)
        return -1;
    for (uint64_t k = 0; k < MP_MATS; k++) {
        uint32_t m[4];

        mp_value(info->id, k, m);
        memcpy(base + k * 16, m, sizeof m);
    }
    return 0;
}

/* into = into * from: lower subtask ids are on the `into` side. */
static int mp_reduce(const pm_reduce_info_t *ri, void *into, const void *from)
{
    if (ri->offset % 16 != 0 || ri->length % 16 != 0 ||
        ri->offset + ri->length > MP_BYTES)
        return -1;
    for (size_t off = ri->offset; off < ri->offset + ri->length; off += 16) {
        uint32_t a[4], b[4];

        memcpy(a, (unsigned char *)into + off, sizeof a);
        memcpy(b, (const unsigned char *)from + off, sizeof b);
        mp_mul(a, a, b);
        memcpy((unsigned char *)into + off, a, sizeof a);
    }
    return 0;
}

START_TEST(test_custom_matrix_product)
{
    pm_memory_t m = tu_memory(MP_BYTES);
    pm_task_desc_t d;
    pm_task_stats_t st;

    tu_desc(&d, MP_NAME, MP_NSUB);
    ck_assert_int_eq(pm_task_desc_reduce(&d, tu_add(&d, m, PM_WRITE),
                                         PM_REDUCE_CUSTOM, PM_TYPE_NONE),
                     PM_OK);
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);
    ck_assert_uint_eq(st.subtasks, MP_NSUB);

    const unsigned char *got = pm_memory_data(m);
    for (uint64_t k = 0; k < MP_MATS; k++) {
        uint32_t want[4], v[4], g[4];

        mp_value(0, k, want);
        for (uint64_t i = 1; i < MP_NSUB; i++) {
            mp_value(i, k, v);
            mp_mul(want, want, v);
        }
        memcpy(g, got + k * 16, sizeof g);
        ck_assert_msg(memcmp(g, want, sizeof g) == 0,
                      "matrix %llu: {%u %u %u %u}, serial {%u %u %u %u}",
                      (unsigned long long)k, g[0], g[1], g[2], g[3], want[0],
                      want[1], want[2], want[3]);
    }
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (d) the version cache: an unchanged input is not sent again                */
/* ------------------------------------------------------------------------ */

#define CA_NAME "mpi-cache"
#define CA_IN_BYTES (1u << 20)
#define CA_SLICE 4096u
#define CA_NSUB 32u
#define CA_IN_WORDS (CA_IN_BYTES / 8)
#define CA_SLICE_WORDS (CA_SLICE / 8)

/* A digest of the whole input, so every subtask must read all of it. */
static uint64_t ca_digest(const uint64_t *a)
{
    uint64_t h = 0;

    for (uint64_t k = 0; k < CA_IN_WORDS; k++)
        h = h * 0x100000001B3ull + (a[k] ^ k);
    return h;
}

static void ca_slice(const uint64_t *a, uint64_t digest, uint64_t id,
                     uint64_t *out)
{
    for (uint64_t j = 0; j < CA_SLICE_WORDS; j++)
        out[j] = digest + a[(id * CA_SLICE_WORDS + j * 7) % CA_IN_WORDS] * (id + 1);
}

static int ca_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = pm_subscribe(sub, 0, PM_READ, 0, CA_IN_BYTES);

    return rc ? rc : pm_subscribe(sub, 1, PM_WRITE, info->id * CA_SLICE, CA_SLICE);
}

static int ca_cpu(const pm_subtask_info_t *info)
{
    const uint64_t *a = info->mem[0];
    uint64_t *b = info->mem[1];

    if (a == NULL || b == NULL)
        return -1;
    ca_slice(a, ca_digest(a), info->id, b + info->id * CA_SLICE_WORDS);
    return 0;
}

static void ca_check(pm_memory_t a, pm_memory_t b, int run)
{
    const uint64_t *av = pm_memory_data(a), *bv = pm_memory_data(b);
    uint64_t digest = ca_digest(av), want[CA_SLICE_WORDS];

    for (uint64_t i = 0; i < CA_NSUB; i++) {
        ca_slice(av, digest, i, want);
        ck_assert_msg(memcmp(bv + i * CA_SLICE_WORDS, want, CA_SLICE) == 0,
                      "run %d: slice %llu of the output is wrong", run,
                      (unsigned long long)i);
    }
}

START_TEST(test_cache_by_version)
{
    pm_memory_t a = tu_memory(CA_IN_BYTES), b = tu_memory(CA_NSUB * CA_SLICE);
    uint64_t *av = pm_memory_data(a);
    pm_task_desc_t d;
    pm_task_stats_t st1, st2, st3;
    uint64_t hosts = (uint64_t)pm_host_count();

    for (uint64_t k = 0; k < CA_IN_WORDS; k++)
        av[k] = tu_mix(k, 5);
    tu_desc(&d, CA_NAME, CA_NSUB);
    tu_add(&d, a, PM_READ);
    tu_add(&d, b, PM_WRITE);
    /* Static shares: a host runs the same subtasks every time, so a host
     * that runs the repeated task is one that already holds the input. */
    d.sched = PM_SCHED_STATIC_EQUAL;

    ck_assert_int_eq(run_stats(&d, &st1), PM_OK);
    ca_check(a, b, 1);
    memset(pm_memory_data(b), 0, CA_NSUB * CA_SLICE);
    ck_assert_int_eq(pm_memory_touch(b), PM_OK);
    ck_assert_int_eq(run_stats(&d, &st2), PM_OK);
    ca_check(a, b, 2);

    for (uint64_t k = 0; k < CA_IN_WORDS; k++)
        av[k] ^= tu_mix(k, 6);
    ck_assert_int_eq(pm_memory_touch(a), PM_OK);
    ck_assert_int_eq(run_stats(&d, &st3), PM_OK);
    ca_check(a, b, 3);

    printf("cache: bytes moved %llu, %llu, %llu; remote subtasks %llu, "
           "%llu, %llu\n", (unsigned long long)st1.bytes_moved,
           (unsigned long long)st2.bytes_moved,
           (unsigned long long)st3.bytes_moved,
           (unsigned long long)st1.subtasks_remote,
           (unsigned long long)st2.subtasks_remote,
           (unsigned long long)st3.subtasks_remote);
    if (multi_host())
        ck_assert_uint_gt(st1.subtasks_remote, 0);
    if (wire_moves()) {
        /* Each other host holds a share and fetches the input once. */
        uint64_t min_in = (hosts - 1) * CA_IN_BYTES;

        ck_assert_uint_ge(st1.bytes_moved,
                          st1.subtasks_remote * CA_SLICE + min_in);
        ck_assert_uint_eq(st2.subtasks_remote, st1.subtasks_remote);
        ck_assert_msg(st2.bytes_moved == st2.subtasks_remote * CA_SLICE,
                      "repeated task moved %llu bytes, only its %llu remote "
                      "slices (%llu bytes) should move",
                      (unsigned long long)st2.bytes_moved,
                      (unsigned long long)st2.subtasks_remote,
                      (unsigned long long)(st2.subtasks_remote * CA_SLICE));
        ck_assert_uint_ge(st3.bytes_moved,
                          st3.subtasks_remote * CA_SLICE + min_in);
    } else if (!multi_host()) {
        ck_assert_uint_eq(st1.bytes_moved + st2.bytes_moved + st3.bytes_moved, 0);
    }
    ck_assert_int_eq(pm_memory_release(a), PM_OK);
    ck_assert_int_eq(pm_memory_release(b), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (e) compression                                                            */
/* ------------------------------------------------------------------------ */

#define CO_NAME "mpi-compress"
#define CO_IN_BYTES (4u << 20)
#define CO_IN_WORDS (CO_IN_BYTES / 8)
#define CO_NSUB 12u

/* Each subtask writes one word: far below the compression threshold, so
 * only the input can be compressed. */
static uint64_t co_digest(const uint64_t *a, uint64_t id)
{
    uint64_t h = id;

    for (uint64_t k = 0; k < CO_IN_WORDS; k++)
        h = h * 0x100000001B3ull + a[k];
    return h;
}

static int co_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    int rc = pm_subscribe(sub, 0, PM_READ, 0, CO_IN_BYTES);

    return rc ? rc : pm_subscribe(sub, 1, PM_WRITE, info->id * 8, 8);
}

static int co_cpu(const pm_subtask_info_t *info)
{
    const uint64_t *a = info->mem[0];
    uint64_t *out = info->mem[1];

    if (a == NULL || out == NULL)
        return -1;
    out[info->id] = co_digest(a, info->id);
    return 0;
}

enum co_data { CO_PATTERN, CO_RANDOM };

static void co_fill(uint64_t *a, enum co_data kind)
{
    if (kind == CO_PATTERN) {
        /* A 1000-byte block of mixed bytes, repeated: zlib finds it. */
        unsigned char block[1000], *p = (unsigned char *)a;

        for (size_t i = 0; i < sizeof block; i++)
            block[i] = (unsigned char)tu_mix(i, 9);
        for (size_t i = 0; i < CO_IN_BYTES; i++)
            p[i] = block[i % sizeof block];
        return;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull; /* xorshift64: incompressible */

    for (size_t k = 0; k < CO_IN_WORDS; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        a[k] = x;
    }
}

/* Runs one task on a fresh input (nothing cached anywhere); its stats. */
static void co_run(enum co_data kind, unsigned flags, pm_task_stats_t *st)
{
    pm_memory_t a = tu_memory(CO_IN_BYTES), out = tu_memory(CO_NSUB * 8);
    pm_task_desc_t d;

    co_fill(pm_memory_data(a), kind);
    tu_desc(&d, CO_NAME, CO_NSUB);
    tu_add(&d, a, PM_READ);
    tu_add(&d, out, PM_WRITE);
    d.flags = flags;
    /* Static shares: every other host runs subtasks, so the input moves. */
    d.sched = PM_SCHED_STATIC_EQUAL;
    ck_assert_int_eq(run_stats(&d, st), PM_OK);

    const uint64_t *av = pm_memory_data(a), *ov = pm_memory_data(out);
    for (uint64_t i = 0; i < CO_NSUB; i++)
        ck_assert_msg(ov[i] == co_digest(av, i),
                      "subtask %llu's digest is wrong (flags %u, data %d)",
                      (unsigned long long)i, flags, (int)kind);
    printf("compress (%s data, flags %u): %llu bytes moved, %llu sent, "
           "%llu remote subtasks\n", kind == CO_PATTERN ? "pattern" : "random",
           flags, (unsigned long long)st->bytes_moved,
           (unsigned long long)st->bytes_sent,
           (unsigned long long)st->subtasks_remote);
    if (multi_host())
        ck_assert_uint_gt(st->subtasks_remote, 0);
    if (wire_moves()) {
        ck_assert_uint_ge(st->bytes_moved,
                          (uint64_t)(pm_host_count() - 1) * CO_IN_BYTES);
    }
    ck_assert_int_eq(pm_memory_release(a), PM_OK);
    ck_assert_int_eq(pm_memory_release(out), PM_OK);
}

START_TEST(test_compress_pattern)
{
    pm_task_stats_t st;

    co_run(CO_PATTERN, PM_TASK_COMPRESS, &st);
    if (wire_moves())
        ck_assert_msg(st.bytes_sent < st.bytes_moved / 4,
                      "PM_TASK_COMPRESS: sent %llu of %llu bytes",
                      (unsigned long long)st.bytes_sent,
                      (unsigned long long)st.bytes_moved);
    co_run(CO_PATTERN, PM_TASK_COMPRESS_AUTO, &st);
    if (wire_moves())
        ck_assert_msg(st.bytes_sent < st.bytes_moved / 4,
                      "PM_TASK_COMPRESS_AUTO: sent %llu of %llu bytes",
                      (unsigned long long)st.bytes_sent,
                      (unsigned long long)st.bytes_moved);
}
END_TEST

START_TEST(test_compress_auto_random)
{
    pm_task_stats_t st;

    co_run(CO_RANDOM, PM_TASK_COMPRESS_AUTO, &st);
    ck_assert_msg(st.bytes_sent == st.bytes_moved,
                  "random data: sent %llu of %llu bytes; automatic mode "
                  "should not compress it",
                  (unsigned long long)st.bytes_sent,
                  (unsigned long long)st.bytes_moved);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (f) redistribution across hosts                                            */
/* ------------------------------------------------------------------------ */

#define RD_NAME "mpi-redist"
#define RD_NSUB 500u

static size_t rd_len(uint64_t id)
{
    return (size_t)(id % 5 + 1);
}

static int rd_cpu(const pm_subtask_info_t *info)
{
    unsigned char piece[5];

    memset(piece, (int)(info->id & 0xFF), sizeof piece);
    return pm_redistribute(info, info->count - info->id, piece, rd_len(info->id));
}

START_TEST(test_redistribute_key_order)
{
    pm_task_desc_t d;
    pm_task_t t = PM_TASK_NULL;
    pm_memory_t m = PM_MEMORY_NULL;
    size_t bytes = 0, total = 0;

    tu_desc(&d, RD_NAME, RD_NSUB);
    ck_assert_int_eq(pm_task_submit(&d, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_redistributed(t, &m), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_uint_ne(m.id, 0);

    /* Keys count - i: the serial concatenation runs over i downwards. */
    unsigned char *want = malloc(5 * RD_NSUB);
    ck_assert_ptr_nonnull(want);
    for (uint64_t i = RD_NSUB; i-- > 0;) {
        memset(want + total, (int)(i & 0xFF), rd_len(i));
        total += rd_len(i);
    }
    ck_assert_int_eq(pm_memory_size(m, &bytes), PM_OK);
    ck_assert_uint_eq(bytes, total);
    int same = memcmp(pm_memory_data(m), want, total) == 0;
    free(want);
    ck_assert_msg(same, "gathered pieces are not in key order");
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (g) strided subscriptions: one column per subtask                         */
/* ------------------------------------------------------------------------ */

#define ST_NAME "mpi-strided"
#define ST_ROWS 200u
#define ST_COLS 37u

static int32_t st_in(uint64_t r, uint64_t c)
{
    return (int32_t)(tu_mix(r, c) % 2000001u) - 1000000;
}

static int st_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    size_t row = ST_COLS * sizeof(int32_t);
    int rc = pm_subscribe_strided(sub, 0, PM_READ, info->id * sizeof(int32_t),
                                  sizeof(int32_t), row, ST_ROWS);

    return rc ? rc
              : pm_subscribe_strided(sub, 1, PM_WRITE,
                                     info->id * sizeof(int32_t),
                                     sizeof(int32_t), row, ST_ROWS);
}

static int st_cpu(const pm_subtask_info_t *info)
{
    const int32_t *in = info->mem[0];
    int32_t *out = info->mem[1];
    uint64_t c = info->id;

    if (in == NULL || out == NULL)
        return -1;
    for (uint64_t r = 0; r < ST_ROWS; r++)
        out[r * ST_COLS + c] = 2 * in[r * ST_COLS + c] + (int32_t)c;
    return 0;
}

START_TEST(test_strided_columns)
{
    size_t bytes = ST_ROWS * ST_COLS * sizeof(int32_t);
    pm_memory_t in = tu_memory(bytes), out = tu_memory(bytes);
    int32_t *iv = pm_memory_data(in);
    pm_task_desc_t d;
    pm_task_stats_t st;

    for (uint64_t r = 0; r < ST_ROWS; r++)
        for (uint64_t c = 0; c < ST_COLS; c++)
            iv[r * ST_COLS + c] = st_in(r, c);
    tu_desc(&d, ST_NAME, ST_COLS);
    tu_add(&d, in, PM_READ);
    tu_add(&d, out, PM_WRITE);
    ck_assert_int_eq(run_stats(&d, &st), PM_OK);

    const int32_t *ov = pm_memory_data(out);
    for (uint64_t r = 0; r < ST_ROWS; r++)
        for (uint64_t c = 0; c < ST_COLS; c++)
            ck_assert_msg(ov[r * ST_COLS + c] == 2 * st_in(r, c) + (int32_t)c,
                          "out[%llu][%llu] = %d", (unsigned long long)r,
                          (unsigned long long)c, ov[r * ST_COLS + c]);
    ck_assert_int_eq(pm_memory_release(in), PM_OK);
    ck_assert_int_eq(pm_memory_release(out), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (h) chained tasks in flight                                                */
/* ------------------------------------------------------------------------ */

#define CH_NAME "mpi-chain"
#define CH_ELEMS 4096u
#define CH_TASKS 20

typedef struct ch_conf {
    uint32_t k;
    uint32_t per; /* elements per subtask; the last subtask may get fewer */
} ch_conf_t;

static int ch_range(const pm_subtask_info_t *info, uint64_t *lo, uint64_t *hi)
{
    const ch_conf_t *c = info->conf;

    if (c == NULL || info->conf_bytes != sizeof *c || c->per == 0)
        return -1;
    *lo = info->id * c->per;
    *hi = *lo + c->per < CH_ELEMS ? *lo + c->per : CH_ELEMS;
    return *lo < *hi ? 0 : -1;
}

static int ch_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi;

    if (ch_range(info, &lo, &hi) != 0)
        return -1;
    return pm_subscribe(sub, 0, PM_READ_WRITE, lo * 4, (hi - lo) * 4);
}

static int ch_cpu(const pm_subtask_info_t *info)
{
    const ch_conf_t *c = info->conf;
    uint32_t *x = info->mem[0];
    uint64_t lo, hi;

    if (x == NULL || ch_range(info, &lo, &hi) != 0)
        return -1;
    for (uint64_t e = lo; e < hi; e++)
        x[e] = 3u * x[e] + c->k;
    return 0;
}

START_TEST(test_chained_tasks)
{
    pm_memory_t m = tu_memory(CH_ELEMS * 4);
    uint32_t *xv = pm_memory_data(m), *want = malloc(CH_ELEMS * 4);
    pm_task_t t[CH_TASKS];
    static const uint32_t nsub[] = {16, 13, 7}; /* slices change per task */

    ck_assert_ptr_nonnull(want);
    for (uint32_t e = 0; e < CH_ELEMS; e++)
        xv[e] = want[e] = (uint32_t)tu_mix(e, 11);
    for (int k = 0; k < CH_TASKS; k++) {
        uint32_t n = nsub[k % 3];
        ch_conf_t conf = {.k = 7u * (uint32_t)k + 1u,
                          .per = (CH_ELEMS + n - 1) / n};
        pm_task_desc_t d;

        tu_desc(&d, CH_NAME, n);
        tu_add(&d, m, PM_READ_WRITE);
        d.conf = &conf;
        d.conf_bytes = sizeof conf;
        ck_assert_int_eq(pm_task_submit(&d, &t[k]), PM_OK);
        for (uint32_t e = 0; e < CH_ELEMS; e++)
            want[e] = 3u * want[e] + conf.k;
    }
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);
    for (int k = 0; k < CH_TASKS; k++) {
        int done = 0;

        ck_assert_int_eq(pm_task_test(t[k], &done), PM_OK);
        ck_assert_int_eq(done, 1);
        ck_assert_int_eq(pm_task_release(t[k]), PM_OK);
    }
    int same = memcmp(xv, want, CH_ELEMS * 4) == 0;
    free(want);
    ck_assert_msg(same, "20 chained tasks differ from the serial loop");
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

static int register_one(const char *name, pm_subscribe_fn subscribe,
                        pm_cpu_fn cpu, pm_reduce_fn reduce)
{
    pm_callbacks_t cb;
    int rc = pm_callbacks_init(&cb);

    cb.subscribe = subscribe;
    cb.cpu = cpu;
    cb.reduce = reduce;
    if (rc == 0)
        rc = pm_callbacks_register(name, &cb);
    if (rc != 0)
        fprintf(stderr, "host %d: registering '%s' failed: %s\n", pm_host_id(),
                name, pm_errname(rc));
    return rc;
}

/* Every host registers every set under the same names. */
static int register_all(void)
{
    int rc = 0;

    rc |= register_one(SL_NAME, sl_subscribe, sl_cpu, NULL);
    rc |= register_one(DS_NAME, ds_subscribe, ds_cpu, NULL);
    rc |= register_one(MP_NAME, mp_subscribe, mp_cpu, mp_reduce);
    rc |= register_one(CA_NAME, ca_subscribe, ca_cpu, NULL);
    rc |= register_one(CO_NAME, co_subscribe, co_cpu, NULL);
    rc |= register_one(RD_NAME, NULL, rd_cpu, NULL);
    rc |= register_one(ST_NAME, st_subscribe, st_cpu, NULL);
    rc |= register_one(CH_NAME, ch_subscribe, ch_cpu, NULL);
    return rc;
}

static Suite *mpi_suite(void)
{
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("hosts");

    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_slices_sum, 0,
                        (int)(sizeof sl_counts / sizeof sl_counts[0]));
    tcase_add_test(tc, test_double_sum_bits);
    tcase_add_test(tc, test_custom_matrix_product);
    tcase_add_test(tc, test_cache_by_version);
    tcase_add_test(tc, test_compress_pattern);
    tcase_add_test(tc, test_compress_auto_random);
    tcase_add_test(tc, test_redistribute_key_order);
    tcase_add_test(tc, test_strided_columns);
    tcase_add_test(tc, test_chained_tasks);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    /* Two stubs per host unless the caller chose: several stubs per host
     * without oversubscribing a small machine too much. */
    setenv("PMLIB_NCPU", "2", 0);
    int rc = pm_init(&argc, &argv);
    if (rc != PM_OK) {
        fprintf(stderr, "pm_init failed: %s\n", pm_errname(rc));
        return 1;
    }
    int reg = register_all();
    if (pm_host_id() != 0) {
        /* Serve host 0's tasks; nonzero if any of them failed. */
        rc = pm_finalize();
        return rc != 0 || reg != 0 ? 1 : 0;
    }

    int failed = 1;
    if (reg == 0) {
        SRunner *sr = srunner_create(mpi_suite());

        /* MPI processes must not fork. */
        srunner_set_fork_status(sr, CK_NOFORK);
        printf("test_mpi: %d hosts\n", pm_host_count());
        fflush(stdout);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
    }
    rc = pm_finalize();
    return failed != 0 || rc != 0 ? 1 : 0;
}
