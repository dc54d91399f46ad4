// The fused epilogue of tcinfer's GEMM kernels (wmma_gemm.cu, wgmma_gemm.cu): alpha * acc +
// beta * C + bias, the activation (precise fp32 functions), one rounding to the output type.
// Internal to src/kernels/*.cu (CUDA C++); host code never includes it.
#ifndef TCI_KERNELS_GEMM_EPILOGUE_CUH
#define TCI_KERNELS_GEMM_EPILOGUE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/act.cuh"
#include "kernels/kern_util.cuh"

namespace gemm_epilogue {

enum OutKind { kOutF16 = 0, kOutF32 = 1, kOutBf16 = 2 };

struct Epilogue {
    const float *bias;
    float alpha, beta, act_alpha, act_beta;
    int act, has_bias, has_c;
    int out; // OutKind: the type of C and D
};

// One element; off is its index in C and D (which share a layout and the output type).
__device__ __forceinline__ void epilogue_one(const Epilogue &e, const void *c, void *d,
                                             int64_t off, int col, float acc) {
    float v = e.alpha * acc;
    if (e.has_c)
        v += e.beta * (e.out == kOutF32    ? static_cast<const float *>(c)[off]
                       : e.out == kOutBf16 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(c)[off])
                                           : __half2float(static_cast<const __half *>(c)[off]));
    if (e.has_bias) v += e.bias[col];
    if (e.act != ACT_NONE) v = kern_util::act_apply_rt<false>(e.act, v, e.act_alpha, e.act_beta);
    if (e.out == kOutF32)
        static_cast<float *>(d)[off] = v;
    else if (e.out == kOutBf16)
        static_cast<__nv_bfloat16 *>(d)[off] = __float2bfloat16_rn(v);
    else
        static_cast<__half *>(d)[off] = __float2half_rn(v);
}

// Eight values of type T at element off of base, as fp32 (16- or 32-byte access).
template <typename T>
__device__ __forceinline__ void load_eight(const void *base, int64_t off, float v[8]) {
    using Chunk = typename kern_util::Chunk8<T>::type;
    kern_util::load8(reinterpret_cast<const Chunk *>(static_cast<const T *>(base) + off), v);
}

template <typename T>
__device__ __forceinline__ void store_eight(void *base, int64_t off, const float v[8]) {
    using Chunk = typename kern_util::Chunk8<T>::type;
    kern_util::store8(reinterpret_cast<Chunk *>(static_cast<T *>(base) + off), v);
}

// Eight consecutive columns starting at col, their fp32 sums staged in shared memory (16-byte
// aligned); 16-byte accesses when all eight are inside the matrix (off and col are multiples of 8
// and the buffers 16-byte aligned: checked on the host).
__device__ __forceinline__ void epilogue_eight(const Epilogue &e, const void *c, void *d,
                                               int64_t off, int col, int cols_left,
                                               const float *staged) {
    if (cols_left < 8) {
#pragma unroll 1
        for (int i = 0; i < cols_left; ++i) epilogue_one(e, c, d, off + i, col + i, staged[i]);
        return;
    }
    float v[8], add[8];
    load_eight<float>(staged, 0, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= e.alpha;
    if (e.has_c) {
        if (e.out == kOutF32)
            load_eight<float>(c, off, add);
        else if (e.out == kOutBf16)
            load_eight<__nv_bfloat16>(c, off, add);
        else
            load_eight<__half>(c, off, add);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += e.beta * add[i];
    }
    if (e.has_bias) {
        load_eight<float>(e.bias, col, add);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += add[i];
    }
    kern_util::act8<false>(e.act, v, e.act_alpha, e.act_beta);
    if (e.out == kOutF32)
        store_eight<float>(d, off, v);
    else if (e.out == kOutBf16)
        store_eight<__nv_bfloat16>(d, off, v);
    else
        store_eight<__half>(d, off, v);
}

} // namespace gemm_epilogue

#endif
