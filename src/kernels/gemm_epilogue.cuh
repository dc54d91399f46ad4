// The fused epilogue of tcinfer's GEMM kernels (wmma_gemm.cu, wgmma_gemm.cu): alpha * acc +
// beta * C + bias, the activation, one rounding to the output type.
// Internal to src/kernels/*.cu (CUDA C++); host code never includes it.
#ifndef TCI_KERNELS_GEMM_EPILOGUE_CUH
#define TCI_KERNELS_GEMM_EPILOGUE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/eltwise.h"
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
    if (e.act != KERN_ACT_NONE) v = kern_util::act_precise(e.act, v, e.act_alpha, e.act_beta);
    if (e.out == kOutF32)
        static_cast<float *>(d)[off] = v;
    else if (e.out == kOutBf16)
        static_cast<__nv_bfloat16 *>(d)[off] = __float2bfloat16_rn(v);
    else
        static_cast<__half *>(d)[off] = __float2half_rn(v);
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
    const float4 s0 = reinterpret_cast<const float4 *>(staged)[0];
    const float4 s1 = reinterpret_cast<const float4 *>(staged)[1];
    float v[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= e.alpha;
    if (e.has_c) {
        float cv[8];
        if (e.out == kOutF32) {
            const float4 *p = reinterpret_cast<const float4 *>(static_cast<const float *>(c) + off);
            const float4 x = p[0], y = p[1];
            cv[0] = x.x, cv[1] = x.y, cv[2] = x.z, cv[3] = x.w;
            cv[4] = y.x, cv[5] = y.y, cv[6] = y.z, cv[7] = y.w;
        } else if (e.out == kOutBf16) {
            const uint4 raw = *reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(c) + off);
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 f = __bfloat1622float2(h[i]);
                cv[2 * i] = f.x, cv[2 * i + 1] = f.y;
            }
        } else {
            const uint4 raw = *reinterpret_cast<const uint4 *>(static_cast<const __half *>(c) + off);
            const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 f = __half22float2(h[i]);
                cv[2 * i] = f.x, cv[2 * i + 1] = f.y;
            }
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += e.beta * cv[i];
    }
    if (e.has_bias) {
        const float4 *p = reinterpret_cast<const float4 *>(e.bias + col);
        const float4 x = p[0], y = p[1];
        v[0] += x.x, v[1] += x.y, v[2] += x.z, v[3] += x.w;
        v[4] += y.x, v[5] += y.y, v[6] += y.z, v[7] += y.w;
    }
    kern_util::act8<kern_util::ActPrecise>(e.act, v, e.act_alpha, e.act_beta);
    if (e.out == kOutF32) {
        float4 *p = reinterpret_cast<float4 *>(static_cast<float *>(d) + off);
        p[0] = make_float4(v[0], v[1], v[2], v[3]);
        p[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else if (e.out == kOutBf16) {
        uint4 raw;
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        *reinterpret_cast<uint4 *>(static_cast<__nv_bfloat16 *>(d) + off) = raw;
    } else {
        uint4 raw;
        __half2 *h = reinterpret_cast<__half2 *>(&raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        *reinterpret_cast<uint4 *>(static_cast<__half *>(d) + off) = raw;
    }
}

} // namespace gemm_epilogue

#endif
