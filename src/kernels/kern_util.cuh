// Small helpers shared by the CUDA sources of src/kernels: launch sizing, alignment, fp16/bf16 <->
// fp32 conversion and the 8-channel chunk of an NHWC8 tensor in fp16 (one uint4), bf16 (one
// bf16x8) or fp32 (two float4).
// Internal to src/kernels/*.cu (CUDA C++); host code never includes it.
#ifndef TCI_KERNELS_KERN_UTIL_CUH
#define TCI_KERNELS_KERN_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

// util/status.h has no extern "C" guard of its own
extern "C" {
#include "util/status.h"
}

namespace kern_util {

// Grid-stride kernels loop beyond this many blocks; keeps launches cheap to size.
constexpr int64_t kMaxBlocks = 1 << 20;

// Blocks of per_block work items for `work` items: at least 1, at most kMaxBlocks.
inline unsigned blocks_for(int64_t work, int64_t per_block) {
    int64_t b = (work + per_block - 1) / per_block;
    if (b < 1)
        b = 1;
    if (b > kMaxBlocks)
        b = kMaxBlocks;
    return (unsigned)b;
}

// The storage type of a float tensor: what a kernel's dtype argument selects.
enum class Storage { kHalf, kFloat, kBf16 };

// 0 (a zeroed descriptor) and TCI_DTYPE_FLOAT16 are fp16, TCI_DTYPE_BFLOAT16 bf16, TCI_DTYPE_FLOAT
// fp32; anything else is TCI_ERR_UNSUPPORTED with `who` in the message.
inline tci_status storage_type(const char *who, tci_dtype dtype, Storage *out) {
    switch (dtype) {
    case TCI_DTYPE_UNDEFINED:
    case TCI_DTYPE_FLOAT16: *out = Storage::kHalf; return TCI_OK;
    case TCI_DTYPE_BFLOAT16: *out = Storage::kBf16; return TCI_OK;
    case TCI_DTYPE_FLOAT: *out = Storage::kFloat; return TCI_OK;
    default:
        *out = Storage::kHalf;
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: dtype %s (%d) is not supported (fp16, bf16 or fp32 only; 0 means "
                         "fp16)",
                         who, tci_dtype_name(dtype), (int)dtype);
    }
}

// Calls f(TypeTag<T>{}) with T the element type of s (__half, __nv_bfloat16 or float), so one
// generic lambda instantiates a launcher once per storage type:
//   with_storage(s, [&](auto tag) { return launch<typename decltype(tag)::type>(...); });
template <typename T> struct TypeTag {
    using type = T;
};
template <typename F> inline tci_status with_storage(Storage s, F &&f) {
    switch (s) {
    case Storage::kFloat: return f(TypeTag<float>{});
    case Storage::kBf16: return f(TypeTag<__nv_bfloat16>{});
    default: return f(TypeTag<__half>{});
    }
}

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Integer division dominates index math; most extents fit 32 bits.
__device__ __forceinline__ int64_t div_fast(int64_t a, int64_t b) {
    if (((uint64_t)a | (uint64_t)b) >> 32 == 0)
        return (int64_t)((uint32_t)a / (uint32_t)b);
    return a / b;
}

// ---- element conversion

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// Pairs convert in one instruction each way (cvt.rn.f16x2.f32 / the f16x2 -> f32 pair); eight
// single conversions per 16 bytes made the fp16 kernels conversion-bound.
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}
__device__ __forceinline__ float2 unpack2(uint32_t bits) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&bits));
}

// bf16 pairs: one cvt.rn.bf16x2.f32 to store; widening is a shift (bf16 is the top half of fp32).
__device__ __forceinline__ uint32_t pack2_bf16(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}
__device__ __forceinline__ float2 unpack2_bf16(uint32_t bits) {
    return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
}

__device__ __forceinline__ uint4 pack8(const float v[8]) {
    uint4 u;
    u.x = pack2(v[0], v[1]);
    u.y = pack2(v[2], v[3]);
    u.z = pack2(v[4], v[5]);
    u.w = pack2(v[6], v[7]);
    return u;
}

__device__ __forceinline__ void unpack8(uint4 u, float v[8]) {
    const float2 f0 = unpack2(u.x), f1 = unpack2(u.y), f2 = unpack2(u.z), f3 = unpack2(u.w);
    v[0] = f0.x, v[1] = f0.y, v[2] = f1.x, v[3] = f1.y, v[4] = f2.x, v[5] = f2.y, v[6] = f3.x,
    v[7] = f3.y;
}

// Eight bf16 values in 16 bytes: a type of its own so that overloads (load8, store8, ...) tell it
// from fp16's uint4.
struct alignas(16) bf16x8 {
    uint4 bits;
};

__device__ __forceinline__ bf16x8 pack8_bf16(const float v[8]) {
    bf16x8 u;
    u.bits.x = pack2_bf16(v[0], v[1]);
    u.bits.y = pack2_bf16(v[2], v[3]);
    u.bits.z = pack2_bf16(v[4], v[5]);
    u.bits.w = pack2_bf16(v[6], v[7]);
    return u;
}

__device__ __forceinline__ void unpack8(const bf16x8 &u, float v[8]) {
    const float2 f0 = unpack2_bf16(u.bits.x), f1 = unpack2_bf16(u.bits.y),
                 f2 = unpack2_bf16(u.bits.z), f3 = unpack2_bf16(u.bits.w);
    v[0] = f0.x, v[1] = f0.y, v[2] = f1.x, v[3] = f1.y, v[4] = f2.x, v[5] = f2.y, v[6] = f3.x,
    v[7] = f3.y;
}

// ---- 8-channel chunks of NHWC8 tensors

// Eight fp32 channels: 32 bytes, loaded and stored as two 16-byte vectors.
struct alignas(16) float8 {
    float4 lo, hi;
};

// The storage of one chunk of 8 channels for element type T (__half, __nv_bfloat16 or float).
// Kernels index tensors in chunks, so 32-bit chunk indices reach as far for fp32 as for fp16.
template <typename T> struct Chunk8;
template <> struct Chunk8<__half> {
    using type = uint4;
};
template <> struct Chunk8<__nv_bfloat16> {
    using type = bf16x8;
};
template <> struct Chunk8<float> {
    using type = float8;
};

__device__ __forceinline__ void unpack8(const float8 &u, float v[8]) {
    v[0] = u.lo.x, v[1] = u.lo.y, v[2] = u.lo.z, v[3] = u.lo.w;
    v[4] = u.hi.x, v[5] = u.hi.y, v[6] = u.hi.z, v[7] = u.hi.w;
}

__device__ __forceinline__ void load8(const uint4 *p, float v[8]) { unpack8(*p, v); }
__device__ __forceinline__ void load8(const float8 *p, float v[8]) { unpack8(*p, v); }
__device__ __forceinline__ void load8(const bf16x8 *p, float v[8]) { unpack8(*p, v); }

__device__ __forceinline__ void store8(uint4 *p, const float v[8]) { *p = pack8(v); }
__device__ __forceinline__ void store8(bf16x8 *p, const float v[8]) { *p = pack8_bf16(v); }
__device__ __forceinline__ void store8(float8 *p, const float v[8]) {
    float8 u;
    u.lo = make_float4(v[0], v[1], v[2], v[3]);
    u.hi = make_float4(v[4], v[5], v[6], v[7]);
    *p = u;
}

// Read-only-cache loads of a chunk.
__device__ __forceinline__ uint4 ldg_chunk(const uint4 *p) { return __ldg(p); }
__device__ __forceinline__ bf16x8 ldg_chunk(const bf16x8 *p) {
    bf16x8 u;
    u.bits = __ldg(&p->bits);
    return u;
}
__device__ __forceinline__ float8 ldg_chunk(const float8 *p) {
    float8 u;
    u.lo = __ldg(&p->lo);
    u.hi = __ldg(&p->hi);
    return u;
}

} // namespace kern_util

#endif
