/* The reduction vocabulary, defined once: each reduction's enum value, the value it starts from,
 * how it takes in one more value and how the result comes out of the accumulator. Plain C,
 * included by host code and the CUDA kernels alike: the CPU reference (src/layers/reduce.c) and
 * kern_reduce (src/kernels/norm.cu) expand the same rows, and the plan step carries a reduce_op
 * from the one to the other unchanged. */
#ifndef TCI_UTIL_REDUCE_OPS_H
#define TCI_UTIL_REDUCE_OPS_H

#include <math.h> /* INFINITY, sqrt, exp, log, log1p */

/* X(NAME, START, MAP, COMBINE, FINISH, DIVIDES), one row per reduction; the row order is the
 * enum's numbering.
 * START: the accumulator before the first value, a double constant; FINISH of it is also the
 *   result of an empty reduction (before a mean's division). -INFINITY / INFINITY stand for the
 *   lowest / highest value of an integer type.
 * MAP: what one input value v contributes (|v| for an L1 norm, v*v for a sum of squares).
 * COMBINE: two accumulators a and v merged; associative and commutative, so partial results
 *   (a run of values, a warp's lanes) merge in any order. Both are of the accumulator's type:
 *   fp32 in the kernels, double or int64 on the host.
 * FINISH: the result from the accumulator a (sqrt for an L2 norm).
 * DIVIDES: 1 when the result is the combined value divided by the number of values (a mean). */
/* clang-format off */
#define REDUCE_LIST(X)                                                                             \
    X(SUM, 0.0, v, a + v, a, 0)                                                                    \
    X(MEAN, 0.0, v, a + v, a, 1)                                                                   \
    X(MAX, -INFINITY, v, REDUCE_MAX_NAN(a, v), a, 0)                                               \
    X(MIN, INFINITY, v, REDUCE_MIN_NAN(a, v), a, 0)                                                \
    X(PROD, 1.0, v, a * v, a, 0)                                                                   \
    X(L1, 0.0, REDUCE_ABS(v), a + v, a, 0)                                                         \
    X(L2, 0.0, v * v, a + v, sqrt(a), 0)                                                           \
    X(LOG_SUM_EXP, -INFINITY, v, REDUCE_LOG_ADD_EXP(a, v), a, 0)                                   \
    X(SUM_SQUARE, 0.0, v * v, a + v, a, 0)                                                         \
    X(LOG_SUM, 0.0, v, a + v, log(a), 0)
/* clang-format on */

/* The larger of a and v, NaN when either is NaN: NaN propagates, as in numpy's maximum.reduce
 * (ONNX's reference for ReduceMax); fmaxf would drop it and return the other operand.
 * onnxruntime's CPU kernel (1.32) is not consistent there: it keeps a NaN only where it is the
 * first value reduced, so the two agree on inputs without NaN. Exact on fp32 values loaded from
 * fp16 or bf16. */
#define REDUCE_MAX_NAN(a, v) ((a) != (a) || (a) > (v) ? (a) : (v))
/* The smaller, NaN propagating likewise (numpy's minimum.reduce). */
#define REDUCE_MIN_NAN(a, v) ((a) != (a) || (a) < (v) ? (a) : (v))
/* |v| for floats and integers alike. */
#define REDUCE_ABS(v) ((v) < 0 ? -(v) : (v))
/* log(exp(a) + exp(v)) without overflow: the larger plus log1p of the smaller's exp relative to
 * it, so a log-sum-exp never leaves the range of its result (log(sum(exp)) would overflow fp32
 * from x = 89). -inf is the empty sum (log 0); equal infinities stay themselves instead of
 * giving inf - inf = NaN (a - a != 0 only for an infinity, and is valid on integer types, which
 * isinf is not); a NaN propagates. */
#define REDUCE_LOG_ADD_EXP(a, v)                                                                  \
    ((a) != (a) || (v) != (v)      ? (a) + (v)                                                    \
     : (a) == (v) && (a) - (a) != 0 ? (a)                                                         \
     : (a) > (v)                   ? (a) + log1p(exp((v) - (a)))                                  \
                                   : (v) + log1p(exp((a) - (v))))

#define REDUCE_ENUM_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES) REDUCE_##NAME,
typedef enum reduce_op { REDUCE_LIST(REDUCE_ENUM_ROW) REDUCE_COUNT } reduce_op;
#undef REDUCE_ENUM_ROW

#endif
