// Element type conversion: one thread per element, through double so int64 survives exactly.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cast.h"
#include "kernels/cuda_check.h"

namespace {

__device__ double load(const void *p, tci_dtype t, int64_t i) {
    switch (t) {
    case TCI_DTYPE_FLOAT16: return (double)__half2float(static_cast<const __half *>(p)[i]);
    case TCI_DTYPE_BFLOAT16:
        return (double)__bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    case TCI_DTYPE_FLOAT: return static_cast<const float *>(p)[i];
    case TCI_DTYPE_INT32: return static_cast<const int32_t *>(p)[i];
    case TCI_DTYPE_INT64: return (double)static_cast<const int64_t *>(p)[i];
    default: return static_cast<const uint8_t *>(p)[i] != 0;
    }
}

__device__ void store(void *p, tci_dtype t, int64_t i, double v, int64_t exact) {
    switch (t) {
    case TCI_DTYPE_FLOAT16: static_cast<__half *>(p)[i] = __float2half((float)v); break;
    case TCI_DTYPE_BFLOAT16:
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn((float)v);
        break;
    case TCI_DTYPE_FLOAT: static_cast<float *>(p)[i] = (float)v; break;
    case TCI_DTYPE_INT32: static_cast<int32_t *>(p)[i] = (int32_t)(exact ? exact : (int64_t)v); break;
    case TCI_DTYPE_INT64: static_cast<int64_t *>(p)[i] = exact ? exact : (int64_t)v; break;
    default: static_cast<uint8_t *>(p)[i] = v != 0.0; break;
    }
}

__global__ void cast_kernel(const void *src, tci_dtype from, void *dst, tci_dtype to,
                            int64_t count) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        /* int64 -> int: keep all 64 bits rather than going through double */
        int64_t exact = from == TCI_DTYPE_INT64 ? static_cast<const int64_t *>(src)[i] : 0;
        store(dst, to, i, load(src, from, i), exact);
    }
}

bool supported(tci_dtype t) {
    return t == TCI_DTYPE_FLOAT16 || t == TCI_DTYPE_BFLOAT16 || t == TCI_DTYPE_FLOAT ||
           t == TCI_DTYPE_INT32 || t == TCI_DTYPE_INT64 || t == TCI_DTYPE_BOOL;
}

}  // namespace

extern "C" tci_status kern_cast(const void *src, tci_dtype from, void *dst, tci_dtype to,
                                int64_t count, cudaStream_t stream) {
    if (!supported(from) || !supported(to) || count < 0 || (count && (!src || !dst)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_cast: bad arguments (%s -> %s, %lld)",
                         tci_dtype_name(from), tci_dtype_name(to), (long long)count);
    if (count == 0) return TCI_OK;
    int64_t blocks = (count + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    cast_kernel<<<(unsigned)blocks, 256, 0, stream>>>(src, from, dst, to, count);
    KERN_LAUNCH_CHECK("cast_kernel");
    return TCI_OK;
}
