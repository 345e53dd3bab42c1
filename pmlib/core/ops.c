/*
 * Built-in reduce ops on the CPU. Each op/type pair maps to a small kernel
 * through a table indexed by [op][type], so the hot loops stay simple
 * enough for the compiler to vectorize.
 */
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>

#define OP_COUNT (PM_REDUCE_CUSTOM + 1)
#define TYPE_COUNT (PM_DOUBLE + 1)

/* Without OpenMP the pragma is unknown and -Wall would warn about it. */
#ifdef _OPENMP
#define PM__SIMD _Pragma("omp simd")
#else
#define PM__SIMD
#endif

typedef void (*apply_fn)(void *restrict into, const void *restrict from,
                         size_t n);
typedef void (*identity_fn)(pm_reduce_op_t op, void *restrict dst, size_t n);

#define DEFINE_APPLY(name, T, expr)                                          \
    static void name(void *restrict into_, const void *restrict from_,      \
                     size_t n)                                               \
    {                                                                        \
        T *restrict into = into_;                                            \
        const T *restrict from = from_;                                      \
        PM__SIMD                                                             \
        for (size_t i = 0; i < n; i++) {                                     \
            const T a = into[i];                                             \
            const T b = from[i];                                             \
            into[i] = (expr);                                                \
        }                                                                    \
    }

/*
 * Min/max keep `a` (the into side) on ties and unordered compares; for
 * floats that is what makes a NaN in `into` stick and one in `from` vanish.
 */
#define DEFINE_ORDER_OPS(S, T)                                               \
    DEFINE_APPLY(min_##S, T, (b < a) ? b : a)                                \
    DEFINE_APPLY(max_##S, T, (b > a) ? b : a)

#define DEFINE_ARITH_OPS(S, T)                                               \
    DEFINE_APPLY(sum_##S, T, a + b)                                          \
    DEFINE_APPLY(prod_##S, T, a * b)

#define DEFINE_BIT_OPS(S, T)                                                 \
    DEFINE_APPLY(band_##S, T, a & b)                                         \
    DEFINE_APPLY(bor_##S, T, a | b)                                          \
    DEFINE_APPLY(bxor_##S, T, a ^ b)

/*
 * Signed types get only min/max kernels: two's complement sum, prod and the
 * bitwise ops give the same bits as the unsigned ones, and running them in
 * the unsigned type makes overflow wrap instead of being undefined. Access
 * through the unsigned variant of the type is allowed by the aliasing rules.
 */
DEFINE_ORDER_OPS(i32, int32_t)
DEFINE_ORDER_OPS(i64, int64_t)
DEFINE_ARITH_OPS(u32, uint32_t)
DEFINE_ORDER_OPS(u32, uint32_t)
DEFINE_BIT_OPS(u32, uint32_t)
DEFINE_ARITH_OPS(u64, uint64_t)
DEFINE_ORDER_OPS(u64, uint64_t)
DEFINE_BIT_OPS(u64, uint64_t)
DEFINE_ARITH_OPS(f32, float)
DEFINE_ORDER_OPS(f32, float)
DEFINE_ARITH_OPS(f64, double)
DEFINE_ORDER_OPS(f64, double)

/* Rows for NONE and CUSTOM stay empty; an empty cell is a type mismatch. */
static const apply_fn apply_table[OP_COUNT][TYPE_COUNT] = {
    [PM_REDUCE_SUM] = {[PM_INT32] = sum_u32, [PM_INT64] = sum_u64,
                       [PM_UINT32] = sum_u32, [PM_UINT64] = sum_u64,
                       [PM_FLOAT] = sum_f32, [PM_DOUBLE] = sum_f64},
    [PM_REDUCE_PROD] = {[PM_INT32] = prod_u32, [PM_INT64] = prod_u64,
                        [PM_UINT32] = prod_u32, [PM_UINT64] = prod_u64,
                        [PM_FLOAT] = prod_f32, [PM_DOUBLE] = prod_f64},
    [PM_REDUCE_MIN] = {[PM_INT32] = min_i32, [PM_INT64] = min_i64,
                       [PM_UINT32] = min_u32, [PM_UINT64] = min_u64,
                       [PM_FLOAT] = min_f32, [PM_DOUBLE] = min_f64},
    [PM_REDUCE_MAX] = {[PM_INT32] = max_i32, [PM_INT64] = max_i64,
                       [PM_UINT32] = max_u32, [PM_UINT64] = max_u64,
                       [PM_FLOAT] = max_f32, [PM_DOUBLE] = max_f64},
    [PM_REDUCE_BAND] = {[PM_INT32] = band_u32, [PM_INT64] = band_u64,
                        [PM_UINT32] = band_u32, [PM_UINT64] = band_u64},
    [PM_REDUCE_BOR] = {[PM_INT32] = bor_u32, [PM_INT64] = bor_u64,
                       [PM_UINT32] = bor_u32, [PM_UINT64] = bor_u64},
    [PM_REDUCE_BXOR] = {[PM_INT32] = bxor_u32, [PM_INT64] = bxor_u64,
                        [PM_UINT32] = bxor_u32, [PM_UINT64] = bxor_u64},
};

/*
 * The fill is typed (not a byte pattern) so that the buffer's elements are
 * written as the type they are later read as. `all_bits` is only reached for
 * band, which pm__reduce_check rejects for floats.
 */
#define DEFINE_IDENTITY(S, T, lowest, highest, all_bits)                     \
    static void identity_##S(pm_reduce_op_t op, void *restrict dst_,        \
                             size_t n)                                       \
    {                                                                        \
        T *restrict dst = dst_;                                              \
        T v = 0; /* sum, bor, bxor */                                        \
        switch (op) {                                                        \
        case PM_REDUCE_PROD: v = 1; break;                                   \
        case PM_REDUCE_MIN: v = (highest); break;                            \
        case PM_REDUCE_MAX: v = (lowest); break;                             \
        case PM_REDUCE_BAND: v = (all_bits); break;                          \
        default: break;                                                      \
        }                                                                    \
        PM__SIMD                                                             \
        for (size_t i = 0; i < n; i++)                                       \
            dst[i] = v;                                                      \
    }

DEFINE_IDENTITY(i32, int32_t, INT32_MIN, INT32_MAX, -1)
DEFINE_IDENTITY(i64, int64_t, INT64_MIN, INT64_MAX, -1)
DEFINE_IDENTITY(u32, uint32_t, 0, UINT32_MAX, UINT32_MAX)
DEFINE_IDENTITY(u64, uint64_t, 0, UINT64_MAX, UINT64_MAX)
DEFINE_IDENTITY(f32, float, -INFINITY, INFINITY, 0)
DEFINE_IDENTITY(f64, double, -INFINITY, INFINITY, 0)

static const identity_fn identity_table[TYPE_COUNT] = {
    [PM_INT32] = identity_i32, [PM_INT64] = identity_i64,
    [PM_UINT32] = identity_u32, [PM_UINT64] = identity_u64,
    [PM_FLOAT] = identity_f32, [PM_DOUBLE] = identity_f64,
};

int pm__reduce_check(pm_reduce_op_t op, pm_type_t type)
{
    /* Through int so that out-of-range values, negative ones included, are
       caught whichever underlying type the compiler picked for the enums. */
    const int o = (int)op;
    const int t = (int)type;

    if (o <= PM_REDUCE_NONE || o >= PM_REDUCE_CUSTOM || t <= PM_TYPE_NONE ||
        t >= TYPE_COUNT)
        return PM_EINVAL;
    return apply_table[o][t] != NULL ? 0 : PM_ETYPE;
}

/* Only the debug checks need sizes and ranges. */
#ifndef NDEBUG
static const size_t elem_size[TYPE_COUNT] = {
    [PM_INT32] = sizeof(int32_t), [PM_INT64] = sizeof(int64_t),
    [PM_UINT32] = sizeof(uint32_t), [PM_UINT64] = sizeof(uint64_t),
    [PM_FLOAT] = sizeof(float), [PM_DOUBLE] = sizeof(double),
};

/* The kernels' restrict promise needs the byte ranges to be disjoint. */
static int disjoint(const void *a, const void *b, size_t bytes)
{
    const uintptr_t pa = (uintptr_t)a;
    const uintptr_t pb = (uintptr_t)b;

    return bytes == 0 || pa + bytes <= pb || pb + bytes <= pa;
}
#endif /* NDEBUG */

void pm__reduce_identity(pm_reduce_op_t op, pm_type_t type, void *dst,
                         size_t count)
{
    const int err = pm__reduce_check(op, type);

    assert(err == 0);
    if (err != 0)
        return;
    assert((uintptr_t)dst % elem_size[type] == 0);
    identity_table[type](op, dst, count);
}

void pm__reduce_apply(pm_reduce_op_t op, pm_type_t type, void *into,
                      const void *from, size_t count)
{
    const int err = pm__reduce_check(op, type);

    assert(err == 0);
    if (err != 0)
        return;
    assert((uintptr_t)into % elem_size[type] == 0);
    assert((uintptr_t)from % elem_size[type] == 0);
    assert(disjoint(into, from, count * elem_size[type]));
    apply_table[op][type](into, from, count);
}
