/* Row-wise normalisations and reductions on dense fp16 tensors: softmax, log-softmax,
 * GroupNormalization / InstanceNormalization, LRN, LayerNormalization and RMSNormalization, the
 * reductions of util/reduce_ops.h. Storage is fp16 (passed as void *);
 * every sum, maximum and statistic is kept in fp32 and rounded to fp16 once on output.
 *
 * Each launcher has a *_dtype twin taking the storage type of its tensors (x, y, and gamma /
 * beta): 0 or TCI_DTYPE_FLOAT16 is exactly the fp16 launcher, TCI_DTYPE_BFLOAT16 reads and writes
 * bf16 with the same fp32 arithmetic and one rounding to bf16 on output, TCI_DTYPE_FLOAT reads
 * and writes fp32 with the same arithmetic (fp32 throughout, no rounding on output); any other
 * dtype is TCI_ERR_UNSUPPORTED. Layouts, paths and alignment rules are the same in all three
 * (the 16-byte vector path takes 8 values in fp16 and bf16, two 16-byte accesses in fp32).
 *
 * Launchers validate their arguments, enqueue on `stream` and return without synchronising (they
 * may be captured into a CUDA graph); a launch failure is TCI_ERR_CUDA with the call in
 * tci_last_error(). Empty work enqueues nothing. Unless said otherwise, y may equal x (each
 * element is read before the same thread overwrites it) but must not partly overlap it. */
#ifndef TCI_KERNELS_NORM_H
#define TCI_KERNELS_NORM_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"
#include "util/reduce_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax over each of `rows` contiguous rows of `len` elements, max-subtracted, one pass for
 * (max, sum) and one for the output. Up to len 1024 a row gets 1..32 lanes of a warp (several
 * short rows share a warp), above that a block (any len; tested to 32768). A row holding +inf or only -inf gives NaN, as
 * exp(inf - inf) does. */
tci_status kern_softmax_rows(const void *x, void *y, int64_t rows, int64_t len,
                             cudaStream_t stream);
/* log_softmax: x - max - log(sum(exp(x - max))), same layout and paths. */
tci_status kern_log_softmax_rows(const void *x, void *y, int64_t rows, int64_t len,
                                 cudaStream_t stream);
tci_status kern_softmax_rows_dtype(const void *x, void *y, int64_t rows, int64_t len,
                                   tci_dtype dtype, cudaStream_t stream);
tci_status kern_log_softmax_rows_dtype(const void *x, void *y, int64_t rows, int64_t len,
                                       tci_dtype dtype, cudaStream_t stream);

/* Softmax (log_softmax when log != 0) along the middle axis of x viewed as (outer, len, inner),
 * row-major: for a non-innermost axis, without a transpose. One thread per (outer, inner) column,
 * reads coalesced across inner; efficient when outer * inner is in the thousands or more. */
tci_status kern_softmax_strided(const void *x, void *y, int64_t outer, int64_t len,
                                int64_t inner, int log, cudaStream_t stream);
tci_status kern_softmax_strided_dtype(const void *x, void *y, int64_t outer, int64_t len,
                                      int64_t inner, int log, tci_dtype dtype,
                                      cudaStream_t stream);

/* LayerNormalization over each of `rows` contiguous rows of `len` elements:
 *   y = (x - mean) / sqrt(var + epsilon) * gamma + beta,   var = mean((x - mean)^2)
 * (two-pass statistics in fp32, as ONNX's function body computes them). gamma (len fp16
 * values) is required; beta (len fp16) may be NULL. mean_out and inv_std_out (rows fp32 values
 * each, 1/sqrt(var + epsilon)) may be NULL. */
tci_status kern_layernorm_rows(const void *x, const void *gamma, const void *beta, void *y,
                               float *mean_out, float *inv_std_out, int64_t rows, int64_t len,
                               float epsilon, cudaStream_t stream);
/* gamma and beta have the dtype of x and y; mean_out / inv_std_out are fp32 either way. */
tci_status kern_layernorm_rows_dtype(const void *x, const void *gamma, const void *beta, void *y,
                                     float *mean_out, float *inv_std_out, int64_t rows,
                                     int64_t len, float epsilon, tci_dtype dtype,
                                     cudaStream_t stream);

/* LayerNormalization of x + residual, the residual Add of a transformer block fused in: each sum
 * is rounded to the storage type once (what an Add step stores) and normalised as above;
 * sum_out (may be NULL; needs residual) receives those sums when the Add's result is read
 * elsewhere. residual and sum_out have x's layout and dtype; neither may overlap y, nor sum_out
 * x or residual. */
tci_status kern_layernorm_residual_rows_dtype(const void *x, const void *residual,
                                              const void *gamma, const void *beta, void *y,
                                              void *sum_out, float *mean_out, float *inv_std_out,
                                              int64_t rows, int64_t len, float epsilon,
                                              tci_dtype dtype, cudaStream_t stream);

/* RMSNormalization over each of `rows` contiguous rows of `len` elements, LayerNormalization's
 * kernel without the mean:
 *   y = x / sqrt(mean(x^2) + epsilon) * gamma
 * (the mean of squares in fp32). With residual, x + residual rounded to the storage type once is
 * normalised and sum_out (may be NULL) receives those sums, as kern_layernorm_residual_rows_dtype
 * does; inv_rms_out (rows fp32 values, may be NULL) receives 1 / sqrt(mean(x^2) + epsilon). */
tci_status kern_rmsnorm_residual_rows_dtype(const void *x, const void *residual,
                                            const void *gamma, void *y, void *sum_out,
                                            float *inv_rms_out, int64_t rows, int64_t len,
                                            float epsilon, tci_dtype dtype, cudaStream_t stream);

/* The reduction op (a row of util/reduce_ops.h: sum, mean, max, min, prod, L1, L2, log-sum-exp,
 * sum of squares) of a row-major fp16 tensor of `rank` (0..6) dims over the dims whose bit is set
 * in reduce_mask (bit d = dim d), accumulated in fp32 from the op's start value (max and min
 * compare the fp32 values, exact, and propagate NaN). y is row-major over the kept dims (the
 * keepdims layout; without keepdims the bytes are the same). With nothing reduced each value
 * still goes through the row's map and finish (|x| for L1). Reducing over an empty dim gives the
 * finished start value (0 for a sum, -inf for a max, +inf for a min, 1 for a product), NaN for a
 * mean (0/0). Paths: rows when the reduced dims are the innermost, columns when they sit
 * outside a kept innermost run (e.g. NHWC over H and W), a warp per output otherwise.
 * y must not overlap x. */
tci_status kern_reduce(const void *x, void *y, int rank, const int64_t *dims,
                       unsigned reduce_mask, reduce_op op, cudaStream_t stream);
tci_status kern_reduce_dtype(const void *x, void *y, int rank, const int64_t *dims,
                             unsigned reduce_mask, reduce_op op, tci_dtype dtype,
                             cudaStream_t stream);

/* GroupNormalization (and InstanceNormalization, groups == c) of n images of c channels and
 * `spatial` positions, stored dense (n, c, spatial) or, with nhwc8 != 0, NHWC8 (n, spatial,
 * round_up(c, 8)), where the padding channels of y are written as zeros. Each image's c / groups
 * consecutive channels share mean and variance (fp32; two-pass within a block):
 *   y = (x - mean) / sqrt(var + epsilon) * gamma[k] + beta[k]
 * k is the group (scale_per_group != 0: gamma and beta hold `groups` values) or the channel (c
 * values). gamma and beta have the dtype of x and y. groups must divide c.
 * chunks <= 1: one block per (image, group). chunks > 1 (for few groups, e.g. GroupNorm(1) at
 * batch 1): each group is cut into up to `chunks` pieces, a block each, whose statistics meet in
 * `partials` (float, 2 * n * groups * chunks values, device memory the call may overwrite);
 * two launches. */
tci_status kern_groupnorm_dtype(const void *x, const void *gamma, const void *beta, void *y,
                                int64_t n, int64_t c, int64_t spatial, int nhwc8, int64_t groups,
                                int scale_per_group, float epsilon, int64_t chunks,
                                float *partials, tci_dtype dtype, cudaStream_t stream);

/* LRN across channels (ONNX's formula, as the CPU reference computes it, sum in fp32):
 *   y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta
 * over x of n images, c channels and `spatial` positions, stored dense (n, c, spatial) or, with
 * nhwc8 != 0, NHWC8 (n, spatial, round_up(c, 8)); there the padding channels of y are written as
 * zeros. y must not overlap x. */
tci_status kern_lrn_dtype(const void *x, void *y, int64_t n, int64_t c, int64_t spatial,
                          int nhwc8, int64_t size, float alpha, float beta, float bias,
                          tci_dtype dtype, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
