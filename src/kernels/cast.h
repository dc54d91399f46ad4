/* Element type conversion on the device (Cast on the GPU path). */
#ifndef TCI_KERNELS_CAST_H
#define TCI_KERNELS_CAST_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = (to) src[i] for count elements; dtypes among FLOAT16, BFLOAT16, FLOAT, INT32, INT64,
 * BOOL (one byte, 0/1). Float to integer truncates toward zero; anything to BOOL is (x != 0).
 * Values go through double and then float: to FLOAT16 / BFLOAT16 they are rounded to fp32 first
 * (exact for the float types, a double rounding only for integers beyond 2^24), then to nearest
 * even. Other dtypes are TCI_ERR_INVALID_ARGUMENT. */
tci_status kern_cast(const void *src, tci_dtype from, void *dst, tci_dtype to, int64_t count,
                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
