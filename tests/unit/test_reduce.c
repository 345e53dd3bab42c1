/*
 * Proves reduced memories end to end on the CPU runtime:
 * - every valid built-in op x type (sum/prod/min/max on all six types,
 *   band/bor/bxor on the four integer types), with 37 subtasks each
 *   combining one value (or a vector of 64) into a private buffer that
 *   starts at the op's identity, equals the serial loop in subtask-id order:
 *   bit for bit for integers and for float data whose result does not
 *   depend on rounding; for float data that does, repeated runs give the
 *   same bits and stay within a rounding bound of the serial loop;
 * - the merged result replaces the memory's old content (PM_WRITE), or
 *   starts from it (PM_READ_WRITE);
 * - partially overlapping ranges (subtask i writes elements [i, i + 8))
 *   merge per element like the serial loop;
 * - a custom reduce that is associative but not commutative (2x2 matrix
 *   product mod 2^32) is applied in subtask-id order, also where the
 *   subtasks' ranges only partly overlap.
 */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#define NSUB 37     /* odd on purpose */
#define VEC_ELEMS 64
#define WINDOW 8

/* ------------------------------------------------------------------------ */
/* Test data and the serial reference                                        */
/* ------------------------------------------------------------------------ */

enum value_set {
    SET_EXACT, /* float results that do not depend on merge order */
    SET_HARD   /* float values of very different magnitudes */
};

typedef struct rconf {
    int op;          /* pm_reduce_op_t */
    int type;        /* pm_type_t */
    int set;         /* enum value_set */
    int read_write;  /* memory added with PM_READ_WRITE */
    uint64_t elems;  /* elements in the memory */
    uint64_t window; /* subtask i writes [i, i + window); 0: all elements */
} rconf_t;

static int is_float_type(int type)
{
    return type == PM_FLOAT || type == PM_DOUBLE;
}

static int type_bits(int type)
{
    return (int)pm_type_size((pm_type_t)type) * 8;
}

static uint64_t int_value(int op, int type, uint64_t r, uint64_t id,
                          uint64_t e)
{
    int bits = type_bits(type);
    int sgn = type == PM_INT32 || type == PM_INT64;

    switch (op) {
    case PM_REDUCE_SUM:
        if (!sgn)
            return r; /* unsigned sums wrap: well defined */
        return (uint64_t)(((int64_t)(r % 2001) - 1000) *
                          (bits == 64 ? (INT64_C(1) << 40) : 1));
    case PM_REDUCE_PROD:
        if (!sgn)
            return r | 1;
        /* +-1 and a few +-2: the product stays far from overflow */
        return (uint64_t)(((id + e) % 6 == 0 ? 2 : 1) * ((r & 1) ? -1 : 1));
    case PM_REDUCE_BAND:
        return ~(UINT64_C(1) << (r % (uint64_t)bits));
    case PM_REDUCE_BOR:
        return UINT64_C(1) << (r % (uint64_t)bits);
    default: /* min, max, bxor: the full range, negative values included */
        return r;
    }
}

static double float_value(int op, int type, int set, uint64_t r)
{
    double sign = (r >> 63) ? -1.0 : 1.0;
    double frac = (double)((r >> 20) & 0xFFFFF) / 1048576.0;
    int span = type == PM_FLOAT ? 20 : 60;

    if (op == PM_REDUCE_SUM && set == SET_EXACT)
        return ((int)(r % 9) - 4) * 0.25;
    if (op == PM_REDUCE_PROD && set == SET_EXACT)
        return sign * ldexp(1.0, (int)(r % 7) - 3);
    if (op == PM_REDUCE_PROD)
        return sign * (1.0 + (double)(r % 100000) * 1e-6);
    return sign * ldexp(1.0 + frac, (int)(r % (uint64_t)(2 * span + 1)) - span);
}

/* The value subtask `id` combines into element `e`, stored as `type`. */
static void make_value(const rconf_t *c, uint64_t id, uint64_t e, void *out)
{
    uint64_t r = tu_mix(id * 977 + (uint64_t)c->op * 31 + (uint64_t)c->type,
                        e);

    switch (c->type) {
    case PM_INT32:
        *(int32_t *)out = (int32_t)(uint32_t)int_value(c->op, c->type, r, id, e);
        break;
    case PM_UINT32:
        *(uint32_t *)out = (uint32_t)int_value(c->op, c->type, r, id, e);
        break;
    case PM_INT64:
        *(int64_t *)out = (int64_t)int_value(c->op, c->type, r, id, e);
        break;
    case PM_UINT64:
        *(uint64_t *)out = int_value(c->op, c->type, r, id, e);
        break;
    case PM_FLOAT:
        *(float *)out = (float)float_value(c->op, c->type, c->set, r);
        break;
    default:
        *(double *)out = float_value(c->op, c->type, c->set, r);
        break;
    }
}

#define ARITH(op, a, v)                                                        \
    ((op) == PM_REDUCE_SUM    ? (a) + (v)                                      \
     : (op) == PM_REDUCE_PROD ? (a) * (v)                                      \
     : (op) == PM_REDUCE_MIN  ? ((v) < (a) ? (v) : (a))                        \
                              : ((v) > (a) ? (v) : (a)))
#define BITS_OR_ARITH(op, a, v)                                                \
    ((op) == PM_REDUCE_BAND   ? ((a) & (v))                                    \
     : (op) == PM_REDUCE_BOR  ? ((a) | (v))                                    \
     : (op) == PM_REDUCE_BXOR ? ((a) ^ (v))                                    \
                              : ARITH(op, a, v))

#define COMBINE_AS(T, EXPR)                                                    \
    do {                                                                       \
        T a_, v_;                                                              \
        memcpy(&a_, acc, sizeof(T));                                           \
        memcpy(&v_, val, sizeof(T));                                           \
        a_ = (T)EXPR(op, a_, v_);                                              \
        memcpy(acc, &a_, sizeof(T));                                           \
    } while (0)

/* *acc = *acc OP *val: the serial loop body, also run by the subtasks. */
static void combine(int op, int type, void *acc, const void *val)
{
    switch (type) {
    case PM_INT32:
        COMBINE_AS(int32_t, BITS_OR_ARITH);
        break;
    case PM_INT64:
        COMBINE_AS(int64_t, BITS_OR_ARITH);
        break;
    case PM_UINT32:
        COMBINE_AS(uint32_t, BITS_OR_ARITH);
        break;
    case PM_UINT64:
        COMBINE_AS(uint64_t, BITS_OR_ARITH);
        break;
    case PM_FLOAT:
        COMBINE_AS(float, ARITH);
        break;
    default:
        COMBINE_AS(double, ARITH);
        break;
    }
}

/* The op's identity, written independently of pmlib's table. */
#define IDENTITY_AS(T, ONE, LARGEST, SMALLEST)                                 \
    do {                                                                       \
        T v_ = op == PM_REDUCE_PROD  ? (T)(ONE)                                \
               : op == PM_REDUCE_MIN ? (T)(LARGEST)                            \
               : op == PM_REDUCE_MAX ? (T)(SMALLEST)                           \
                                     : (T)0;                                   \
        memcpy(out, &v_, sizeof(T));                                           \
    } while (0)

static void identity(int op, int type, void *out)
{
    if (op == PM_REDUCE_BAND) {
        memset(out, 0xFF, pm_type_size((pm_type_t)type)); /* all ones */
        return;
    }
    switch (type) {
    case PM_INT32:
        IDENTITY_AS(int32_t, 1, INT32_MAX, INT32_MIN);
        break;
    case PM_INT64:
        IDENTITY_AS(int64_t, 1, INT64_MAX, INT64_MIN);
        break;
    case PM_UINT32:
        IDENTITY_AS(uint32_t, 1, UINT32_MAX, 0);
        break;
    case PM_UINT64:
        IDENTITY_AS(uint64_t, 1, UINT64_MAX, 0);
        break;
    case PM_FLOAT:
        IDENTITY_AS(float, 1, INFINITY, -INFINITY);
        break;
    default:
        IDENTITY_AS(double, 1, INFINITY, -INFINITY);
        break;
    }
}

/* Subtask `id` writes elements [lo, hi). */
static void write_range(const rconf_t *c, uint64_t id, uint64_t *lo,
                        uint64_t *hi)
{
    *lo = c->window ? id : 0;
    *hi = c->window ? id + c->window : c->elems;
    if (*hi > c->elems)
        *hi = c->elems;
}

/* The value memory element e holds before the task (PM_READ_WRITE runs). */
static void old_value(const rconf_t *c, uint64_t e, void *out)
{
    make_value(c, 100000, e, out);
}

/* The serial loop: element by element, subtasks in id order. */
static void serial_reference(const rconf_t *c, uint64_t n, void *out)
{
    size_t ts = pm_type_size((pm_type_t)c->type);
    unsigned char v[8];

    for (uint64_t e = 0; e < c->elems; e++) {
        unsigned char *acc = (unsigned char *)out + e * ts;

        if (c->read_write)
            old_value(c, e, acc);
        else
            identity(c->op, c->type, acc);
        for (uint64_t id = 0; id < n; id++) {
            uint64_t lo, hi;

            write_range(c, id, &lo, &hi);
            if (e < lo || e >= hi)
                continue;
            make_value(c, id, e, v);
            combine(c->op, c->type, acc, v);
        }
    }
}

/* Rounding bound of |pmlib - serial| for one element of a SET_HARD run. */
static double hard_tolerance(const rconf_t *c, uint64_t n, uint64_t e,
                             double ref)
{
    double eps = c->type == PM_FLOAT ? FLT_EPSILON : DBL_EPSILON;
    double abs_sum = 0.0;
    unsigned char v[8];

    if (c->op == PM_REDUCE_PROD)
        return 2.0 * (double)n * eps * fabs(ref);
    for (uint64_t id = 0; id < n; id++) {
        make_value(c, id, e, v);
        abs_sum += c->type == PM_FLOAT ? fabs((double)*(float *)v)
                                       : fabs(*(double *)v);
    }
    return 2.0 * (double)n * eps * abs_sum;
}

/* ------------------------------------------------------------------------ */
/* Built-in ops: callbacks and runner                                        */
/* ------------------------------------------------------------------------ */

static rconf_t get_rconf(const pm_subtask_info_t *info)
{
    rconf_t c;

    memcpy(&c, info->conf, sizeof(c));
    return c;
}

static int builtin_subscribe(pm_subscription_t *sub,
                             const pm_subtask_info_t *info)
{
    rconf_t c = get_rconf(info);
    size_t ts = pm_type_size((pm_type_t)c.type);
    uint64_t lo, hi;

    write_range(&c, info->id, &lo, &hi);
    return pm_subscribe(sub, 0, c.read_write ? PM_READ_WRITE : PM_WRITE,
                        lo * ts, (hi - lo) * ts);
}

static int builtin_cpu(const pm_subtask_info_t *info)
{
    rconf_t c = get_rconf(info);
    size_t ts = pm_type_size((pm_type_t)c.type);
    unsigned char v[8];
    uint64_t lo, hi;

    write_range(&c, info->id, &lo, &hi);
    for (uint64_t e = lo; e < hi; e++) {
        make_value(&c, info->id, e, v);
        combine(c.op, c.type, (char *)info->mem[0] + e * ts, v);
    }
    return 0;
}

/*
 * Runs one reduce task of `n` subtasks over a memory filled with old
 * content; returns a malloc'd copy of the result.
 */
static void *run_builtin(const rconf_t *c, uint64_t n)
{
    size_t ts = pm_type_size((pm_type_t)c->type), bytes = c->elems * ts;
    pm_memory_t m = tu_memory(bytes);
    unsigned char *p = pm_memory_data(m);
    unsigned char *copy = malloc(bytes);
    pm_task_desc_t desc;
    int idx;

    ck_assert_ptr_nonnull(copy);
    for (uint64_t e = 0; e < c->elems; e++)
        old_value(c, e, p + e * ts);
    ck_assert_int_eq(pm_memory_touch(m), PM_OK);

    tu_desc(&desc, "builtin", n);
    desc.conf = c;
    desc.conf_bytes = sizeof(*c);
    idx = tu_add(&desc, m, c->read_write ? PM_READ_WRITE : PM_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, (pm_reduce_op_t)c->op,
                                         (pm_type_t)c->type),
                     PM_OK);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    memcpy(copy, p, bytes);
    ck_assert_int_eq(pm_memory_release(m), PM_OK);
    return copy;
}

static const char *op_name(int op)
{
    static const char *names[] = {"none", "sum", "prod", "min", "max",
                                  "band", "bor", "bxor", "custom"};

    return names[op];
}

static const char *type_name(int type)
{
    static const char *names[] = {"none", "int32", "int64", "uint32",
                                  "uint64", "float", "double"};

    return names[type];
}

/* Exact equality with the serial loop, naming the first differing element. */
static void assert_equal_serial(const rconf_t *c, uint64_t n, const void *got)
{
    size_t ts = pm_type_size((pm_type_t)c->type);
    unsigned char *ref = malloc(c->elems * ts);

    ck_assert_ptr_nonnull(ref);
    serial_reference(c, n, ref);
    for (uint64_t e = 0; e < c->elems; e++)
        ck_assert_msg(memcmp((const char *)got + e * ts, ref + e * ts, ts) == 0,
                      "%s/%s: element %llu differs from the serial loop",
                      op_name(c->op), type_name(c->type),
                      (unsigned long long)e);
    free(ref);
}

/* Within the rounding bound of the serial loop. */
static void assert_close_serial(const rconf_t *c, uint64_t n, const void *got)
{
    size_t ts = pm_type_size((pm_type_t)c->type);
    unsigned char *ref = malloc(c->elems * ts);

    ck_assert_ptr_nonnull(ref);
    serial_reference(c, n, ref);
    for (uint64_t e = 0; e < c->elems; e++) {
        double g, r;

        if (c->type == PM_FLOAT) {
            g = ((const float *)got)[e];
            r = ((const float *)ref)[e];
        } else {
            g = ((const double *)got)[e];
            r = ((const double *)ref)[e];
        }
        ck_assert_msg(fabs(g - r) <= hard_tolerance(c, n, e, r),
                      "%s/%s: element %llu is %.17g, serial %.17g",
                      op_name(c->op), type_name(c->type),
                      (unsigned long long)e, g, r);
    }
    free(ref);
}

/* Runs `c` and checks it against the serial loop as its data allows. */
static void check_builtin(rconf_t c, uint64_t n)
{
    size_t bytes = c.elems * pm_type_size((pm_type_t)c.type);
    int rounding = is_float_type(c.type) &&
                   (c.op == PM_REDUCE_SUM || c.op == PM_REDUCE_PROD);
    void *got;

    c.set = SET_EXACT;
    got = run_builtin(&c, n);
    assert_equal_serial(&c, n, got);
    free(got);

    if (rounding) {
        void *again;

        c.set = SET_HARD;
        got = run_builtin(&c, n);
        again = run_builtin(&c, n);
        ck_assert_msg(memcmp(got, again, bytes) == 0,
                      "%s/%s: two runs gave different bits", op_name(c.op),
                      type_name(c.type));
        assert_close_serial(&c, n, got);
        free(got);
        free(again);
    }
}

/* ------------------------------------------------------------------------ */
/* Built-in ops: tests                                                       */
/* ------------------------------------------------------------------------ */

typedef struct combo {
    int op;
    int type;
} combo_t;

static combo_t combos[64];
static int ncombos;

/* Every valid op x type pair: bitwise ops only on integers. */
static void list_combos(void)
{
    for (int op = PM_REDUCE_SUM; op <= PM_REDUCE_BXOR; op++)
        for (int type = PM_INT32; type <= PM_DOUBLE; type++)
            if (op < PM_REDUCE_BAND || !is_float_type(type))
                combos[ncombos++] = (combo_t){op, type};
}

/* _i: combo index times 2, plus 1 for the vector form. */
START_TEST(test_builtin_op)
{
    rconf_t c = {0};

    c.op = combos[_i / 2].op;
    c.type = combos[_i / 2].type;
    c.elems = (_i % 2) ? VEC_ELEMS : 1;
    check_builtin(c, NSUB);
}
END_TEST

/* Partly overlapping ranges: subtask i writes elements [i, i + 8). */
static const combo_t window_combos[] = {
    {PM_REDUCE_SUM, PM_INT64},  {PM_REDUCE_SUM, PM_DOUBLE},
    {PM_REDUCE_MAX, PM_INT32},  {PM_REDUCE_BXOR, PM_UINT64},
    {PM_REDUCE_PROD, PM_FLOAT}, {PM_REDUCE_MIN, PM_UINT32},
};

START_TEST(test_overlapping_ranges)
{
    rconf_t c = {0};

    c.op = window_combos[_i].op;
    c.type = window_combos[_i].type;
    c.window = WINDOW;
    c.elems = NSUB + WINDOW - 1;
    check_builtin(c, NSUB);
}
END_TEST

/* PM_READ_WRITE: every private buffer starts with the memory's content. */
static const combo_t rw_combos[] = {
    {PM_REDUCE_MIN, PM_INT32},
    {PM_REDUCE_MAX, PM_DOUBLE},
    {PM_REDUCE_BOR, PM_UINT32},
    {PM_REDUCE_BAND, PM_INT64},
};

START_TEST(test_read_write_starts_from_content)
{
    rconf_t c = {0};

    c.op = rw_combos[_i].op;
    c.type = rw_combos[_i].type;
    c.read_write = 1;
    c.elems = VEC_ELEMS;
    check_builtin(c, NSUB);
}
END_TEST

/* A single subtask: its output is the result, nothing to merge. */
START_TEST(test_single_subtask)
{
    rconf_t c = {0};

    c.op = PM_REDUCE_SUM;
    c.type = PM_DOUBLE;
    c.elems = VEC_ELEMS;
    check_builtin(c, 1);
}
END_TEST

/* Many subtasks over many stubs. */
START_TEST(test_many_subtasks)
{
    rconf_t c = {0};

    c.op = PM_REDUCE_SUM;
    c.type = PM_UINT64;
    c.elems = VEC_ELEMS;
    check_builtin(c, 1000);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Custom reduce: 2x2 matrix product mod 2^32, not commutative               */
/* ------------------------------------------------------------------------ */

#define MAT_BYTES (4 * sizeof(uint32_t))

typedef struct mat_conf {
    uint64_t slots;  /* matrices in the memory */
    uint64_t window; /* subtask i writes slots [i, i + window); 0: all */
    uint64_t magic;  /* checks that reduce callbacks see the conf */
} mat_conf_t;

#define MAT_MAGIC UINT64_C(0x6D61747269636573)

static void mat_value(uint64_t id, uint64_t slot, uint32_t m[4])
{
    for (int k = 0; k < 4; k++)
        m[k] = (uint32_t)tu_mix(id * 4 + (uint64_t)k, slot + 7);
}

/* a = a * b, row-major 2x2, mod 2^32. */
static void mat_mul(uint32_t a[4], const uint32_t b[4])
{
    uint32_t r[4];

    r[0] = a[0] * b[0] + a[1] * b[2];
    r[1] = a[0] * b[1] + a[1] * b[3];
    r[2] = a[2] * b[0] + a[3] * b[2];
    r[3] = a[2] * b[1] + a[3] * b[3];
    memcpy(a, r, sizeof(r));
}

static void mat_range(const mat_conf_t *c, uint64_t id, uint64_t *lo,
                      uint64_t *hi)
{
    *lo = c->window ? id : 0;
    *hi = c->window ? id + c->window : c->slots;
    if (*hi > c->slots)
        *hi = c->slots;
}

static atomic_int reduce_calls;

static int mat_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    mat_conf_t c;
    uint64_t lo, hi;

    memcpy(&c, info->conf, sizeof(c));
    mat_range(&c, info->id, &lo, &hi);
    return pm_subscribe(sub, 0, PM_WRITE, lo * MAT_BYTES,
                        (hi - lo) * MAT_BYTES);
}

static int mat_cpu(const pm_subtask_info_t *info)
{
    mat_conf_t c;
    uint64_t lo, hi;

    memcpy(&c, info->conf, sizeof(c));
    mat_range(&c, info->id, &lo, &hi);
    for (uint64_t s = lo; s < hi; s++) {
        uint32_t m[4];

        mat_value(info->id, s, m);
        memcpy((char *)info->mem[0] + s * MAT_BYTES, m, MAT_BYTES);
    }
    return 0;
}

static int mat_reduce(const pm_reduce_info_t *info, void *into,
                      const void *from)
{
    mat_conf_t c;

    atomic_fetch_add(&reduce_calls, 1);
    tu_note(info->mem != 0);
    tu_note(info->conf_bytes != sizeof(c));
    memcpy(&c, info->conf, sizeof(c));
    tu_note(c.magic != MAT_MAGIC);
    /* subscriptions cover whole matrices, so merges do too */
    tu_note(info->offset % MAT_BYTES != 0 || info->length % MAT_BYTES != 0);
    tu_note(info->offset + info->length > c.slots * MAT_BYTES);
    for (size_t off = info->offset; off + MAT_BYTES <= info->offset + info->length;
         off += MAT_BYTES) {
        uint32_t a[4], b[4];

        memcpy(a, (char *)into + off, MAT_BYTES);
        memcpy(b, (const char *)from + off, MAT_BYTES);
        mat_mul(a, b);
        memcpy((char *)into + off, a, MAT_BYTES);
    }
    return 0;
}

static void check_custom(uint64_t n, uint64_t slots, uint64_t window)
{
    mat_conf_t c = {slots, window, MAT_MAGIC};
    pm_memory_t m = tu_memory(slots * MAT_BYTES);
    const uint32_t *p = pm_memory_data(m);
    pm_task_desc_t desc;
    int idx;

    tu_desc(&desc, "matrix", n);
    desc.conf = &c;
    desc.conf_bytes = sizeof(c);
    idx = tu_add(&desc, m, PM_WRITE);
    ck_assert_int_eq(pm_task_desc_reduce(&desc, idx, PM_REDUCE_CUSTOM,
                                         PM_TYPE_NONE),
                     PM_OK);
    ck_assert_int_eq(tu_run(&desc), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    ck_assert_int_gt(atomic_load(&reduce_calls), 0);

    for (uint64_t s = 0; s < slots; s++) {
        uint32_t prod[4] = {1, 0, 0, 1};

        for (uint64_t id = 0; id < n; id++) {
            uint64_t lo, hi;
            uint32_t v[4];

            mat_range(&c, id, &lo, &hi);
            if (s < lo || s >= hi)
                continue;
            mat_value(id, s, v);
            mat_mul(prod, v);
        }
        for (int k = 0; k < 4; k++)
            ck_assert_msg(p[s * 4 + k] == prod[k],
                          "slot %llu entry %d: %u, serial product %u",
                          (unsigned long long)s, k, p[s * 4 + k], prod[k]);
    }
}

START_TEST(test_custom_noncommutative)
{
    check_custom(NSUB, 1, 0);
}
END_TEST

START_TEST(test_custom_noncommutative_many)
{
    check_custom(300, 4, 0);
}
END_TEST

/* Subtask i writes matrices [i, i + 4): each slot has 1 to 4 writers. */
START_TEST(test_custom_overlapping_ranges)
{
    check_custom(NSUB, NSUB + 3, 4);
}
END_TEST

/* The product really depends on the order: reversing it changes it. */
START_TEST(test_custom_data_is_noncommutative)
{
    uint32_t fwd[4] = {1, 0, 0, 1}, rev[4] = {1, 0, 0, 1}, v[4];

    for (uint64_t id = 0; id < NSUB; id++) {
        mat_value(id, 0, v);
        mat_mul(fwd, v);
        mat_value(NSUB - 1 - id, 0, v);
        mat_mul(rev, v);
    }
    ck_assert(memcmp(fwd, rev, sizeof(fwd)) != 0);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void setup(void)
{
    pm_callbacks_t cb;

    tu_setup_ncpu4();
    atomic_store(&reduce_calls, 0);
    tu_register("builtin", builtin_subscribe, builtin_cpu);
    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.subscribe = mat_subscribe;
    cb.cpu = mat_cpu;
    cb.reduce = mat_reduce;
    ck_assert_int_eq(pm_callbacks_register("matrix", &cb), PM_OK);
}

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *builtin = tcase_create("builtin");
    TCase *ranges = tcase_create("ranges");
    TCase *custom = tcase_create("custom");

    list_combos();
    tcase_add_checked_fixture(builtin, setup, tu_teardown);
    tcase_add_checked_fixture(ranges, setup, tu_teardown);
    tcase_add_checked_fixture(custom, setup, tu_teardown);

    tcase_add_loop_test(builtin, test_builtin_op, 0, 2 * ncombos);
    tcase_add_test(builtin, test_single_subtask);
    tcase_add_test(builtin, test_many_subtasks);
    tcase_add_loop_test(ranges, test_overlapping_ranges, 0,
                        COUNT(window_combos));
    tcase_add_loop_test(ranges, test_read_write_starts_from_content, 0,
                        COUNT(rw_combos));
    tcase_add_test(custom, test_custom_data_is_noncommutative);
    tcase_add_test(custom, test_custom_noncommutative);
    tcase_add_test(custom, test_custom_noncommutative_many);
    tcase_add_test(custom, test_custom_overlapping_ranges);

    suite_add_tcase(s, builtin);
    suite_add_tcase(s, ranges);
    suite_add_tcase(s, custom);
    return s;
}

int main(void)
{
    return tu_run_suite(reduce_suite());
}
