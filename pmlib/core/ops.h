/*
 * Built-in reduce ops on the CPU: validation, identity fill and the
 * element-wise merge that the reduce engine runs on whole output buffers.
 * In core because a task descriptor's check needs them (even before
 * pm_init), and they depend on nothing but the public types. Internal
 * header; never installed.
 */
#ifndef PMLIB_CORE_OPS_H
#define PMLIB_CORE_OPS_H

#include <stddef.h>

#include "pmlib.h"

/*
 * 0 if op/type is a valid built-in combination; PM_ETYPE for bitwise ops on
 * float/double; PM_EINVAL for PM_REDUCE_NONE/PM_REDUCE_CUSTOM or unknown
 * values of either argument. Does not log: the caller knows which task and
 * memory to name in the message.
 */
int pm__reduce_check(pm_reduce_op_t op, pm_type_t type);

/*
 * Fills count elements at dst with the identity of op for type: 0 for
 * sum/bor/bxor, 1 for prod, the largest value for min (+INFINITY for
 * float/double), the smallest for max (-INFINITY), all bits set for band.
 * dst is aligned to the element size. op/type must pass pm__reduce_check.
 */
void pm__reduce_identity(pm_reduce_op_t op, pm_type_t type, void *dst,
                         size_t count);

/*
 * into[i] = into[i] OP from[i] for i < count. Both pointers are aligned to
 * the element size and the two ranges do not overlap (debug builds assert
 * both). Signed sum/prod wrap in two's complement. op/type must pass
 * pm__reduce_check.
 *
 * Float/double min and max keep `into` unless `from` compares strictly
 * better, so a NaN already in `into` stays and a NaN in `from` is ignored;
 * the result is deterministic because pmlib merges in a fixed order.
 */
void pm__reduce_apply(pm_reduce_op_t op, pm_type_t type, void *into,
                      const void *from, size_t count);

#endif /* PMLIB_CORE_OPS_H */
