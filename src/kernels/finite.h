/* Counting NaN and +-Inf values on the device: how a GPU run notices fp16 overflow. */
#ifndef TCI_KERNELS_FINITE_H
#define TCI_KERNELS_FINITE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds to *counter (device memory) the number of NaN and +-Inf values among the count elements
 * of x, a FLOAT16, BFLOAT16 or FLOAT array; other dtypes hold no such values and add nothing.
 * Enqueued on stream (capturable in a CUDA graph). */
tci_status kern_count_nonfinite(const void *x, tci_dtype dtype, int64_t count,
                                unsigned int *counter, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
