/* The reduction vocabulary, defined once: each reduction's enum value, the value it starts from
 * and how it takes in one more value. Plain C, included by host code and the CUDA kernels alike:
 * the CPU reference (src/layers/reduce.c) and kern_reduce (src/kernels/norm.cu) expand the same
 * rows, and the plan step carries a reduce_op from the one to the other unchanged. */
#ifndef TCI_UTIL_REDUCE_OPS_H
#define TCI_UTIL_REDUCE_OPS_H

#include <math.h> /* INFINITY */

/* X(NAME, START, COMBINE, DIVIDES), one row per reduction; the row order is the enum's
 * numbering.
 * START: the accumulator before the first value, a double constant; it is also the result of
 *   an empty reduction (before a mean's division). -INFINITY stands for the lowest value of an
 *   integer type.
 * COMBINE: the accumulator after taking in value v, an expression in the accumulator a and v
 *   (both of the accumulator's type: fp32 in the kernels, double or int64 on the host).
 * DIVIDES: 1 when the result is the combined value divided by the number of values (a mean). */
/* clang-format off */
#define REDUCE_LIST(X)                                                                             \
    X(SUM, 0.0, a + v, 0)                                                                          \
    X(MEAN, 0.0, a + v, 1)                                                                         \
    X(MAX, -INFINITY, REDUCE_MAX_NAN(a, v), 0)
/* clang-format on */

/* The larger of a and v, NaN when either is NaN: NaN propagates, as in numpy's maximum.reduce
 * (ONNX's reference for ReduceMax); fmaxf would drop it and return the other operand.
 * onnxruntime's CPU kernel (1.32) is not consistent there: it keeps a NaN only where it is the
 * first value reduced, so the two agree on inputs without NaN. Exact on fp32 values loaded from
 * fp16 or bf16. */
#define REDUCE_MAX_NAN(a, v) ((a) != (a) || (a) > (v) ? (a) : (v))

#define REDUCE_ENUM_ROW(NAME, START, COMBINE, DIVIDES) REDUCE_##NAME,
typedef enum reduce_op { REDUCE_LIST(REDUCE_ENUM_ROW) REDUCE_COUNT } reduce_op;
#undef REDUCE_ENUM_ROW

#endif
