// Non-finite counting: a grid-stride loop, one atomic per warp that found any.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda_check.h"
#include "kernels/finite.h"

namespace {

template <typename T> __device__ float to_float(T v);
template <> __device__ float to_float(__half v) { return __half2float(v); }
template <> __device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ float to_float(float v) { return v; }

template <typename T>
__global__ void count_nonfinite(const T *x, int64_t count, unsigned int *counter) {
    unsigned int found = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        found += !isfinite(to_float(x[i]));
    for (int offset = 16; offset > 0; offset /= 2)
        found += __shfl_down_sync(0xffffffffu, found, offset);
    if ((threadIdx.x & 31) == 0 && found) atomicAdd(counter, found);
}

template <typename T>
tci_status launch(const void *x, int64_t count, unsigned int *counter, cudaStream_t stream) {
    int64_t blocks = (count + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    count_nonfinite<T><<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const T *>(x), count,
                                                             counter);
    KERN_LAUNCH_CHECK("count_nonfinite");
    return TCI_OK;
}

}  // namespace

extern "C" tci_status kern_count_nonfinite(const void *x, tci_dtype dtype, int64_t count,
                                           unsigned int *counter, cudaStream_t stream) {
    if (count < 0 || !counter || (count && !x))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_count_nonfinite: bad arguments");
    if (count == 0) return TCI_OK;
    switch (dtype) {
    case TCI_DTYPE_FLOAT16: return launch<__half>(x, count, counter, stream);
    case TCI_DTYPE_BFLOAT16: return launch<__nv_bfloat16>(x, count, counter, stream);
    case TCI_DTYPE_FLOAT: return launch<float>(x, count, counter, stream);
    default: return TCI_OK;
    }
}
