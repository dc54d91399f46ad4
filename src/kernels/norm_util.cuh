// Device helpers of norm.cu (its only includer): vector loads and stores in fp16, bf16 and
// fp32, the reductions of util/reduce_ops.h, warp / block sums and the online softmax
// combination, and the row-walking geometry of the warp- and block-per-row paths.
#ifndef TCI_KERNELS_NORM_UTIL_CUH
#define TCI_KERNELS_NORM_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/kern_util.cuh"
#include "tcinfer.h"
// util/status.h has no extern "C" guard of its own
extern "C" {
#include "util/status.h"
}
#include "util/reduce_ops.h"

namespace norm_util {

using namespace kern_util;

constexpr int kWarp = 32;
constexpr int kWarpRowsMax = 1024; // longest row given to one warp
constexpr int kRowsPerBlock = 8;   // warps (rows) per 256-thread block in the warp-per-row paths
constexpr int64_t kMaxGridX = kMaxBlocks;
constexpr int64_t kMaxGridY = 65535;
constexpr int kMaxRank = 6;

// VEC consecutive fp16, bf16 or fp32 values as fp32; VEC is 8 (one 16-byte access in fp16 and
// bf16, two in fp32) or 1.
template <int VEC> __device__ __forceinline__ void load_vec(const __half *p, float *f) {
    if constexpr (VEC == 8) unpack8(*reinterpret_cast<const uint4 *>(p), f);
    else f[0] = __half2float(*p);
}
template <int VEC> __device__ __forceinline__ void load_vec(const __nv_bfloat16 *p, float *f) {
    if constexpr (VEC == 8) load8(reinterpret_cast<const bf16x8 *>(p), f);
    else f[0] = __bfloat162float(*p);
}
template <int VEC> __device__ __forceinline__ void load_vec(const float *p, float *f) {
    if constexpr (VEC == 8) load8(reinterpret_cast<const float8 *>(p), f);
    else f[0] = *p;
}

template <int VEC> __device__ __forceinline__ void store_vec(__half *p, const float *f) {
    if constexpr (VEC == 8) store8(reinterpret_cast<uint4 *>(p), f);
    else *p = __float2half_rn(f[0]);
}
template <int VEC> __device__ __forceinline__ void store_vec(__nv_bfloat16 *p, const float *f) {
    if constexpr (VEC == 8) store8(reinterpret_cast<bf16x8 *>(p), f);
    else *p = __float2bfloat16_rn(f[0]);
}
template <int VEC> __device__ __forceinline__ void store_vec(float *p, const float *f) {
    if constexpr (VEC == 8) store8(reinterpret_cast<float8 *>(p), f);
    else *p = f[0];
}

// The reductions of util/reduce_ops.h on the fp32 accumulator, one specialisation per row: map
// takes in one input value, combine merges two accumulators (values, lanes, partial results).
template <reduce_op OP> struct Reduction;
#define REDUCTION_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                                 \
    template <> struct Reduction<REDUCE_##NAME> {                                                 \
        static constexpr bool kDivides = (DIVIDES);                                               \
        __host__ __device__ static float start() { return (float)(START); }                       \
        __device__ static float map(float v) { return (MAP); }                                    \
        __device__ static float combine(float a, float v) { return (COMBINE); }                   \
        __host__ __device__ static float finish(float a) { return (FINISH); }                     \
    };
REDUCE_LIST(REDUCTION_ROW)
#undef REDUCTION_ROW

// The result from the combined value: a mean multiplies by scale (1 / count).
template <reduce_op OP> __device__ __forceinline__ float reduce_finish(float acc, float scale) {
    return Reduction<OP>::finish(Reduction<OP>::kDivides ? acc * scale : acc);
}

// Calls f(std::integral_constant<reduce_op, OP>{}) with op as a compile-time value.
template <typename F> tci_status with_reduce_op(reduce_op op, F &&f) {
    switch (op) {
#define REDUCE_CASE_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                                            \
    case REDUCE_##NAME: return f(std::integral_constant<reduce_op, REDUCE_##NAME>{});
        REDUCE_LIST(REDUCE_CASE_ROW)
#undef REDUCE_CASE_ROW
    case REDUCE_COUNT: break;
    }
    return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_reduce: unknown op %d", (int)op);
}

// The reduction over aligned groups of `group` lanes (a power of two <= 32); every lane of the
// warp must take part, including lanes whose row is past the end.
template <reduce_op OP> __device__ __forceinline__ float group_reduce(float v, int group) {
#pragma unroll
    for (int o = group / 2; o > 0; o /= 2)
        v = Reduction<OP>::combine(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Every thread gets the block's result. Starts with a barrier so `shared` may be reused call
// after call.
template <reduce_op OP> __device__ __forceinline__ float block_reduce(float v, float *shared) {
    v = group_reduce<OP>(v, kWarp);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int warps = (blockDim.x + kWarp - 1) / kWarp;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = Reduction<OP>::start();
    for (int w = 0; w < warps; w++) t = Reduction<OP>::combine(t, shared[w]);
    return t;
}

__device__ __forceinline__ float group_sum(float v, int group) {
    return group_reduce<REDUCE_SUM>(v, group);
}

__device__ __forceinline__ float block_sum(float v, float *shared) {
    return block_reduce<REDUCE_SUM>(v, shared);
}

// Running (max, sum of exp(x - max)). A -inf max means "nothing seen yet" and adds nothing, so
// -inf inputs and idle lanes never make exp(-inf - -inf) = NaN.
__device__ __forceinline__ void online_add(float &m, float &s, float x) {
    if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
    } else if (m != -INFINITY) {
        s += expf(x - m);
    }
}

__device__ __forceinline__ void online_combine(float &m, float &s, float m2, float s2) {
    float mx = fmaxf(m, m2);
    float a = m == -INFINITY ? 0.0f : s * expf(m - mx);
    float b = m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mx);
    m = mx;
    s = a + b;
}

__device__ __forceinline__ void group_combine(float &m, float &s, int group) {
    for (int o = group / 2; o > 0; o /= 2) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        online_combine(m, s, m2, s2);
    }
}

__device__ __forceinline__ void block_combine(float &m, float &s, float *shared_m, float *shared_s) {
    group_combine(m, s, kWarp);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int warps = (blockDim.x + kWarp - 1) / kWarp;
    __syncthreads();
    if (lane == 0) shared_m[warp] = m, shared_s[warp] = s;
    __syncthreads();
    m = -INFINITY, s = 0.0f;
    for (int w = 0; w < warps; w++) online_combine(m, s, shared_m[w], shared_s[w]);
}

// Row-walking geometry: `group` lanes per row (a power of two <= 32, several rows per warp) or a
// whole block per row (BLOCK). Iterations run over whole warps (or blocks), so shuffles and
// barriers see every thread; `valid` marks the threads whose row exists.
template <bool BLOCK>
struct RowWalk {
    int tid, threads, sub;
    int64_t first, step;
    __device__ explicit RowWalk(int group) {
        if (BLOCK) {
            tid = threadIdx.x, threads = blockDim.x, sub = 0;
            first = blockIdx.x, step = gridDim.x;
        } else {
            const int warps = blockDim.x / kWarp, lane = threadIdx.x % kWarp;
            const int per_warp = kWarp / group;
            tid = lane % group, threads = group, sub = lane / group;
            first = ((int64_t)blockIdx.x * warps + threadIdx.x / kWarp) * per_warp;
            step = (int64_t)gridDim.x * warps * per_warp;
        }
    }
};

// Threads for a block-per-row kernel: about four accesses each, 128..1024.
inline int block_threads(int64_t accesses) {
    int t = 128;
    while (t < 1024 && (int64_t)t * 4 < accesses) t *= 2;
    return t;
}

// Lanes per row for the warp paths: enough for one access each, up to a warp.
inline int row_group(int64_t accesses) {
    int g = 1;
    while (g < kWarp && g < accesses) g *= 2;
    return g;
}

} // namespace norm_util

#endif
