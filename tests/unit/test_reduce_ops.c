/*
 * Proves that the built-in CPU reduce ops are right for every valid op/type:
 * - pm__reduce_apply agrees bit for bit with a plain serial loop, also at
 *   odd starts and lengths that exercise the vector loops' edges;
 * - the identity fill is neutral (identity OP x == x) and has the documented
 *   values;
 * - pm__reduce_check accepts exactly the valid pairs, answering PM_ETYPE for
 *   bitwise ops on floats and PM_EINVAL for NONE, CUSTOM and unknown values;
 * - signed sum/prod wrap in two's complement (run under UBSan to prove there
 *   is no undefined behaviour on the way);
 * - float min/max treat NaN as documented in ops.h.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmlib.h"
#include "core/ops.h"

#define N 1000

typedef struct combo {
    pm_reduce_op_t op;
    pm_type_t type;
} combo_t;

static const pm_reduce_op_t all_ops[] = {
    PM_REDUCE_SUM, PM_REDUCE_PROD, PM_REDUCE_MIN, PM_REDUCE_MAX,
    PM_REDUCE_BAND, PM_REDUCE_BOR, PM_REDUCE_BXOR,
};
static const pm_type_t all_types[] = {
    PM_INT32, PM_INT64, PM_UINT32, PM_UINT64, PM_FLOAT, PM_DOUBLE,
};
#define NOPS (sizeof(all_ops) / sizeof(all_ops[0]))
#define NTYPES (sizeof(all_types) / sizeof(all_types[0]))

static int is_float(pm_type_t t)
{
    return t == PM_FLOAT || t == PM_DOUBLE;
}

static int is_bitwise(pm_reduce_op_t op)
{
    return op == PM_REDUCE_BAND || op == PM_REDUCE_BOR ||
           op == PM_REDUCE_BXOR;
}

/* The valid pairs, listed independently of the library's own table. */
static combo_t combos[NOPS * NTYPES];
static int ncombos;

static void list_combos(void)
{
    ncombos = 0;
    for (size_t o = 0; o < NOPS; o++)
        for (size_t t = 0; t < NTYPES; t++)
            if (!(is_bitwise(all_ops[o]) && is_float(all_types[t])))
                combos[ncombos++] = (combo_t){all_ops[o], all_types[t]};
}

static size_t size_of(pm_type_t t)
{
    return (t == PM_INT32 || t == PM_UINT32 || t == PM_FLOAT) ? 4 : 8;
}

/* splitmix64: tiny, seedable and good enough to scatter test values. */
static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Small signed values so that the serial reference never overflows. */
static int64_t small_int(uint64_t *s)
{
    return (int64_t)(next_rand(s) % 2001) - 1000;
}

/* Near +-1 so products stay well inside the float range. */
static double near_one(uint64_t *s)
{
    const double mag = 0.5 + (double)(next_rand(s) >> 11) * 0x1p-53;

    return (next_rand(s) & 1) ? -mag : mag;
}

static void fill_random(pm_reduce_op_t op, pm_type_t type, void *buf,
                        size_t n, uint64_t *s)
{
    /* Full-range signed values only where the serial op cannot overflow. */
    const int wide = !(op == PM_REDUCE_SUM || op == PM_REDUCE_PROD);

    for (size_t i = 0; i < n; i++) {
        const uint64_t r = next_rand(s);
        switch (type) {
        case PM_INT32:
            ((int32_t *)buf)[i] =
                wide ? (int32_t)(r >> 32) : (int32_t)small_int(s);
            break;
        case PM_INT64:
            ((int64_t *)buf)[i] = wide ? (int64_t)r : small_int(s);
            break;
        case PM_UINT32: ((uint32_t *)buf)[i] = (uint32_t)(r >> 32); break;
        case PM_UINT64: ((uint64_t *)buf)[i] = r; break;
        case PM_FLOAT: ((float *)buf)[i] = (float)near_one(s); break;
        case PM_DOUBLE: ((double *)buf)[i] = near_one(s); break;
        default: ck_abort_msg("bad type %d", (int)type);
        }
    }
}

/* Plain serial reference; deliberately written differently from ops.c. */
#define REF_ORDERED(T)                                                       \
    static void ref_##T(pm_reduce_op_t op, T *x, const T *y, size_t n)      \
    {                                                                        \
        for (size_t i = 0; i < n; i++) {                                     \
            if (op == PM_REDUCE_SUM)                                         \
                x[i] = x[i] + y[i];                                          \
            else if (op == PM_REDUCE_PROD)                                   \
                x[i] = x[i] * y[i];                                          \
            else if (op == PM_REDUCE_MIN) {                                  \
                if (y[i] < x[i])                                             \
                    x[i] = y[i];                                             \
            } else if (op == PM_REDUCE_MAX) {                                \
                if (y[i] > x[i])                                             \
                    x[i] = y[i];                                             \
            } else                                                           \
                ref_bits_##T(op, &x[i], y[i]);                               \
        }                                                                    \
    }

#define REF_BITS(T)                                                          \
    static void ref_bits_##T(pm_reduce_op_t op, T *x, T y)                   \
    {                                                                        \
        if (op == PM_REDUCE_BAND)                                            \
            *x &= y;                                                         \
        else if (op == PM_REDUCE_BOR)                                        \
            *x |= y;                                                         \
        else if (op == PM_REDUCE_BXOR)                                       \
            *x ^= y;                                                         \
        else                                                                 \
            ck_abort_msg("no reference for op %d", (int)op);                 \
    }

#define REF_NO_BITS(T)                                                       \
    static void ref_bits_##T(pm_reduce_op_t op, T *x, T y)                   \
    {                                                                        \
        (void)x;                                                             \
        (void)y;                                                             \
        ck_abort_msg("op %d is not defined on floats", (int)op);            \
    }

REF_BITS(int32_t)
REF_BITS(int64_t)
REF_BITS(uint32_t)
REF_BITS(uint64_t)
REF_NO_BITS(float)
REF_NO_BITS(double)
REF_ORDERED(int32_t)
REF_ORDERED(int64_t)
REF_ORDERED(uint32_t)
REF_ORDERED(uint64_t)
REF_ORDERED(float)
REF_ORDERED(double)

static void reference(pm_reduce_op_t op, pm_type_t type, void *x,
                      const void *y, size_t n)
{
    switch (type) {
    case PM_INT32: ref_int32_t(op, x, y, n); break;
    case PM_INT64: ref_int64_t(op, x, y, n); break;
    case PM_UINT32: ref_uint32_t(op, x, y, n); break;
    case PM_UINT64: ref_uint64_t(op, x, y, n); break;
    case PM_FLOAT: ref_float(op, x, y, n); break;
    case PM_DOUBLE: ref_double(op, x, y, n); break;
    default: ck_abort_msg("bad type %d", (int)type);
    }
}

/* Element-wise byte compare so a failure names the first bad index. */
static void expect_same(const combo_t *c, const void *got, const void *want,
                        size_t n, const char *what)
{
    const size_t sz = size_of(c->type);

    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * sz, (const char *)want + i * sz,
                   sz) != 0)
            ck_abort_msg("%s: op %d type %d differs at element %zu", what,
                         (int)c->op, (int)c->type, i);
}

/*
 * Heap buffers: they have no declared type, so the library may store any
 * element type in them, and calloc aligns them for all of those types.
 */
#define BUF_BYTES (N * sizeof(uint64_t))
static void *into_buf, *from_buf, *want_buf;

static void alloc_buffers(void)
{
    into_buf = calloc(N, sizeof(uint64_t));
    from_buf = calloc(N, sizeof(uint64_t));
    want_buf = calloc(N, sizeof(uint64_t));
    if (into_buf == NULL || from_buf == NULL || want_buf == NULL) {
        fputs("test_reduce_ops: out of memory\n", stderr);
        exit(EXIT_FAILURE);
    }
}

static void free_buffers(void)
{
    free(into_buf);
    free(from_buf);
    free(want_buf);
}

/* Start offsets and lengths that hit the vector loops' peel and tail. */
static const size_t shapes[][2] = {
    {0, N}, {1, N - 1}, {3, N - 10}, {0, 1}, {5, 7}, {2, 0},
};

START_TEST(test_apply_matches_serial)
{
    const combo_t *c = &combos[_i];
    const size_t sz = size_of(c->type);
    uint64_t seed = 0x5eed0000u + (uint64_t)_i;

    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        const size_t off = shapes[k][0] * sz, n = shapes[k][1];
        char *into = (char *)into_buf + off, *want = (char *)want_buf + off;
        const char *from = (const char *)from_buf + off;

        fill_random(c->op, c->type, into_buf, N, &seed);
        fill_random(c->op, c->type, from_buf, N, &seed);
        /* Equal pairs pin down which side min/max keep on ties. */
        memcpy(into_buf, from_buf, 16 * sz);
        memcpy(want_buf, into_buf, BUF_BYTES);

        pm__reduce_apply(c->op, c->type, into, from, n);
        reference(c->op, c->type, want, from, n);
        expect_same(c, into_buf, want_buf, N, "apply vs serial");
    }
}
END_TEST

START_TEST(test_identity_is_neutral)
{
    const combo_t *c = &combos[_i];
    uint64_t seed = 0x1de0000u + (uint64_t)_i;

    fill_random(c->op, c->type, from_buf, N, &seed);
    memset(into_buf, 0xa5, BUF_BYTES);
    pm__reduce_identity(c->op, c->type, into_buf, N);
    pm__reduce_apply(c->op, c->type, into_buf, from_buf, N);
    expect_same(c, into_buf, from_buf, N, "identity OP x");
}
END_TEST

/* The documented identities, spelled out per op for each kind of type. */
static int64_t signed_identity(pm_reduce_op_t op, int64_t lowest,
                               int64_t highest)
{
    switch (op) {
    case PM_REDUCE_PROD: return 1;
    case PM_REDUCE_MIN: return highest;
    case PM_REDUCE_MAX: return lowest;
    case PM_REDUCE_BAND: return -1;
    default: return 0;
    }
}

static uint64_t unsigned_identity(pm_reduce_op_t op, uint64_t highest)
{
    switch (op) {
    case PM_REDUCE_PROD: return 1;
    case PM_REDUCE_MIN: return highest;
    case PM_REDUCE_BAND: return highest;
    default: return 0;
    }
}

static double float_identity(pm_reduce_op_t op)
{
    switch (op) {
    case PM_REDUCE_PROD: return 1.0;
    case PM_REDUCE_MIN: return INFINITY;
    case PM_REDUCE_MAX: return -INFINITY;
    default: return 0.0;
    }
}

START_TEST(test_identity_values)
{
    const combo_t *c = &combos[_i];
    const size_t sz = size_of(c->type);
    const pm_reduce_op_t op = c->op;

    memset(into_buf, 0xa5, BUF_BYTES);
    pm__reduce_identity(op, c->type, into_buf, N);
    /* Every element, not only the first, holds the identity. */
    for (size_t i = 1; i < N; i++)
        ck_assert(memcmp((char *)into_buf + i * sz, into_buf, sz) == 0);

    switch (c->type) {
    case PM_INT32: {
        int32_t v;
        memcpy(&v, into_buf, sizeof(v));
        ck_assert_int_eq(v, signed_identity(op, INT32_MIN, INT32_MAX));
        break;
    }
    case PM_INT64: {
        int64_t v;
        memcpy(&v, into_buf, sizeof(v));
        ck_assert_int_eq(v, signed_identity(op, INT64_MIN, INT64_MAX));
        break;
    }
    case PM_UINT32: {
        uint32_t v;
        memcpy(&v, into_buf, sizeof(v));
        ck_assert_uint_eq(v, unsigned_identity(op, UINT32_MAX));
        break;
    }
    case PM_UINT64: {
        uint64_t v;
        memcpy(&v, into_buf, sizeof(v));
        ck_assert_uint_eq(v, unsigned_identity(op, UINT64_MAX));
        break;
    }
    case PM_FLOAT: {
        float v;
        memcpy(&v, into_buf, sizeof(v));
        /* Exact compare: the identities are 0, 1 and the infinities. */
        ck_assert((double)v == float_identity(op) &&
                  !signbit(v) == !signbit(float_identity(op)));
        break;
    }
    case PM_DOUBLE: {
        double v;
        memcpy(&v, into_buf, sizeof(v));
        ck_assert(v == float_identity(op) &&
                  !signbit(v) == !signbit(float_identity(op)));
        break;
    }
    default: ck_abort_msg("bad type %d", (int)c->type);
    }
}
END_TEST

START_TEST(test_check_valid)
{
    ck_assert_int_eq(pm__reduce_check(combos[_i].op, combos[_i].type), 0);
}
END_TEST

START_TEST(test_check_bitwise_on_floats)
{
    static const pm_reduce_op_t bits[] = {PM_REDUCE_BAND, PM_REDUCE_BOR,
                                          PM_REDUCE_BXOR};

    for (size_t k = 0; k < 3; k++) {
        ck_assert_int_eq(pm__reduce_check(bits[k], PM_FLOAT), PM_ETYPE);
        ck_assert_int_eq(pm__reduce_check(bits[k], PM_DOUBLE), PM_ETYPE);
    }
}
END_TEST

START_TEST(test_check_invalid)
{
    for (size_t t = 0; t < NTYPES; t++) {
        ck_assert_int_eq(pm__reduce_check(PM_REDUCE_NONE, all_types[t]),
                         PM_EINVAL);
        ck_assert_int_eq(pm__reduce_check(PM_REDUCE_CUSTOM, all_types[t]),
                         PM_EINVAL);
        ck_assert_int_eq(pm__reduce_check((pm_reduce_op_t)99, all_types[t]),
                         PM_EINVAL);
        ck_assert_int_eq(pm__reduce_check((pm_reduce_op_t)-1, all_types[t]),
                         PM_EINVAL);
    }
    for (size_t o = 0; o < NOPS; o++) {
        ck_assert_int_eq(pm__reduce_check(all_ops[o], PM_TYPE_NONE),
                         PM_EINVAL);
        ck_assert_int_eq(pm__reduce_check(all_ops[o], (pm_type_t)7),
                         PM_EINVAL);
        ck_assert_int_eq(pm__reduce_check(all_ops[o], (pm_type_t)-1),
                         PM_EINVAL);
    }
}
END_TEST

/* Long enough that the vector body, not only the scalar tail, wraps. */
#define WRAP_N 37

START_TEST(test_signed_wrap32)
{
    int32_t a[WRAP_N], b[WRAP_N];

    for (int i = 0; i < WRAP_N; i++) {
        a[i] = INT32_MAX;
        b[i] = 1;
    }
    pm__reduce_apply(PM_REDUCE_SUM, PM_INT32, a, b, WRAP_N);
    for (int i = 0; i < WRAP_N; i++)
        ck_assert_int_eq(a[i], INT32_MIN);

    for (int i = 0; i < WRAP_N; i++) {
        a[i] = INT32_MIN;
        b[i] = -1;
    }
    pm__reduce_apply(PM_REDUCE_PROD, PM_INT32, a, b, WRAP_N);
    for (int i = 0; i < WRAP_N; i++)
        ck_assert_int_eq(a[i], INT32_MIN);

    for (int i = 0; i < WRAP_N; i++) {
        a[i] = INT32_MAX;
        b[i] = 2;
    }
    pm__reduce_apply(PM_REDUCE_PROD, PM_INT32, a, b, WRAP_N);
    for (int i = 0; i < WRAP_N; i++)
        ck_assert_int_eq(a[i], -2);
}
END_TEST

START_TEST(test_signed_wrap64)
{
    int64_t a[WRAP_N], b[WRAP_N];

    for (int i = 0; i < WRAP_N; i++) {
        a[i] = INT64_MAX;
        b[i] = 1;
    }
    pm__reduce_apply(PM_REDUCE_SUM, PM_INT64, a, b, WRAP_N);
    for (int i = 0; i < WRAP_N; i++)
        ck_assert_int_eq(a[i], INT64_MIN);

    for (int i = 0; i < WRAP_N; i++) {
        a[i] = INT64_MIN;
        b[i] = -1;
    }
    pm__reduce_apply(PM_REDUCE_SUM, PM_INT64, a, b, WRAP_N);
    for (int i = 0; i < WRAP_N; i++)
        ck_assert_int_eq(a[i], INT64_MAX);

    for (int i = 0; i < WRAP_N; i++) {
        a[i] = INT64_MIN;
        b[i] = -1;
    }
    pm__reduce_apply(PM_REDUCE_PROD, PM_INT64, a, b, WRAP_N);
    for (int i = 0; i < WRAP_N; i++)
        ck_assert_int_eq(a[i], INT64_MIN);
}
END_TEST

START_TEST(test_float_nan)
{
    float a[2] = {NAN, 1.0f}, b[2] = {1.0f, NAN};
    double c[2] = {NAN, 1.0}, d[2] = {1.0, NAN};

    /* A NaN on the into side is kept, one on the from side is ignored. */
    pm__reduce_apply(PM_REDUCE_MIN, PM_FLOAT, a, b, 2);
    ck_assert(isnan(a[0]));
    ck_assert(a[1] == 1.0f);
    pm__reduce_apply(PM_REDUCE_MAX, PM_DOUBLE, c, d, 2);
    ck_assert(isnan(c[0]));
    ck_assert(c[1] == 1.0);
}
END_TEST

START_TEST(test_zero_count)
{
    int32_t a = 5, b = 7;

    pm__reduce_apply(PM_REDUCE_SUM, PM_INT32, &a, &b, 0);
    pm__reduce_identity(PM_REDUCE_PROD, PM_INT32, &a, 0);
    ck_assert_int_eq(a, 5);
}
END_TEST

static Suite *reduce_ops_suite(void)
{
    Suite *s = suite_create("reduce_ops");
    TCase *apply = tcase_create("apply");
    TCase *identity = tcase_create("identity");
    TCase *check = tcase_create("check");
    TCase *edges = tcase_create("edges");

    list_combos();
    tcase_add_loop_test(apply, test_apply_matches_serial, 0, ncombos);
    tcase_add_loop_test(identity, test_identity_is_neutral, 0, ncombos);
    tcase_add_loop_test(identity, test_identity_values, 0, ncombos);
    tcase_add_loop_test(check, test_check_valid, 0, ncombos);
    tcase_add_test(check, test_check_bitwise_on_floats);
    tcase_add_test(check, test_check_invalid);
    tcase_add_test(edges, test_signed_wrap32);
    tcase_add_test(edges, test_signed_wrap64);
    tcase_add_test(edges, test_float_nan);
    tcase_add_test(edges, test_zero_count);
    suite_add_tcase(s, apply);
    suite_add_tcase(s, identity);
    suite_add_tcase(s, check);
    suite_add_tcase(s, edges);
    return s;
}

int main(void)
{
    SRunner *sr;
    int failed;

    alloc_buffers();
    sr = srunner_create(reduce_ops_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    free_buffers();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
