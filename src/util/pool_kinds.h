/* The pooling vocabulary, defined once: each kind of pooling window (MaxPool and AveragePool,
 * and their global forms) with its enum value, the value it starts from and how it takes in one
 * more value. Plain C, included by host code and the CUDA kernels alike: the CPU reference
 * (src/layers/pool.c) parses into a pool_kind, the plan step carries it unchanged, and the
 * pooling kernels (src/kernels/pool.cu) expand the rows. */
#ifndef TCI_UTIL_POOL_KINDS_H
#define TCI_UTIL_POOL_KINDS_H

#include <math.h> /* INFINITY, fmaxf */

/* X(NAME, START, COMBINE, DIVIDES), one row per kind; the row order is the enum's numbering.
 * START: the fp32 accumulator before the first value.
 * COMBINE: the accumulator after taking in value v, an fp32 expression in the accumulator a and
 *   v. (The CPU reference's max keeps the first of equal values and its index, for Indices.)
 * DIVIDES: 1 when the result is the accumulator divided by the number of values counted. */
/* clang-format off */
#define POOL_KIND_LIST(X)                                                                          \
    X(MAX, -INFINITY, fmaxf(a, v), 0)                                                              \
    X(AVERAGE, 0.0f, a + v, 1)
/* clang-format on */

#define POOL_KIND_ENUM_ROW(NAME, START, COMBINE, DIVIDES) POOL_##NAME,
typedef enum pool_kind { POOL_KIND_LIST(POOL_KIND_ENUM_ROW) POOL_KIND_COUNT } pool_kind;
#undef POOL_KIND_ENUM_ROW

#endif
