/* Index-producing and running reductions along one axis of a dense tensor: ArgMax / ArgMin,
 * CumSum and TopK. x is viewed as (outer, len, inner), row-major, the axis in the middle.
 *
 * `dtype` is the storage type of x (and of the values written): TCI_DTYPE_FLOAT16 (or 0),
 * TCI_DTYPE_BFLOAT16 and TCI_DTYPE_FLOAT are compared and summed in fp32; TCI_DTYPE_INT32 and
 * TCI_DTYPE_INT64 are compared exactly and summed in int64. Other dtypes are
 * TCI_ERR_UNSUPPORTED. Indices are int64.
 *
 * NaN orders as numpy's sort has it: above every number. An ArgMax or ArgMin therefore returns
 * the first NaN of its run (the last with select_last), a TopK with largest puts NaN first.
 *
 * Launchers validate their arguments, enqueue on `stream` and return without synchronising (they
 * may be captured into a CUDA graph); a launch failure is TCI_ERR_CUDA with the call in
 * tci_last_error(). Empty work enqueues nothing. One thread walks each (outer, inner) run, so
 * these suit the short axes of detection and classification heads rather than long scans. */
#ifndef TCI_KERNELS_ARGREDUCE_H
#define TCI_KERNELS_ARGREDUCE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[o, k] (int64, outer x inner) = the position along len of the largest (is_min: smallest)
 * x[o, :, k]; ties go to the first position, or the last with select_last. len must be >= 1. */
tci_status kern_arg_reduce(const void *x, int64_t *y, int64_t outer, int64_t len, int64_t inner,
                           int is_min, int select_last, tci_dtype dtype, cudaStream_t stream);

/* y[o, j, k] = the sum of x[o, i, k] over i <= j (exclusive: i < j; reverse: i >= j, or i > j
 * exclusive), accumulated in fp32 (int64 for integers) and stored in dtype. y may equal x. */
tci_status kern_cumsum(const void *x, void *y, int64_t outer, int64_t len, int64_t inner,
                       int exclusive, int reverse, tci_dtype dtype, cudaStream_t stream);

/* The k largest (largest == 0: smallest) values of each x[o, :, k'] and their positions, best
 * first; equal values keep their order along the axis (the lower position first). values is
 * (outer, k, inner) in dtype, indices (outer, k, inner) int64;
 * 0 <= k <= min(len, KERN_TOPK_MAX_K). */
#define KERN_TOPK_MAX_K 64
tci_status kern_topk(const void *x, void *values, int64_t *indices, int64_t outer, int64_t len,
                     int64_t inner, int64_t k, int largest, tci_dtype dtype, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
