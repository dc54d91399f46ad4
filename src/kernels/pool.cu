// Pooling on NHWC8 fp16, bf16 or fp32: one thread per output pixel and 8-channel chunk for
// windowed pools; a block-per-channel-group tree reduction over h*w for the global ones. The kind
// (util/pool_kinds.h) is a compile-time constant of each kernel: its start value and combining
// step are the list's rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/pool.h"

using namespace kern_util;

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMax32 = (int64_t)1 << 30;
// What a max window that misses the input gives: the lowest finite value of the storage type.
template <typename T> constexpr float kLowest = -65504.0f;
template <> constexpr float kLowest<float> = -3.402823466e38f;
template <> constexpr float kLowest<__nv_bfloat16> = -3.38953139e38f; // -(2 - 2^-7) * 2^127

// false for every KIND: a static_assert on it fires only in the branch a missing row reaches.
template <int KIND> constexpr bool kNoPoolCase = false;

#define POOL_ROW_START(NAME, START, COMBINE, DIVIDES)                                              \
    if constexpr (KIND == POOL_##NAME)                                                             \
        return (START);                                                                            \
    else
#define POOL_ROW_COMBINE(NAME, START, COMBINE, DIVIDES)                                            \
    if constexpr (KIND == POOL_##NAME)                                                             \
        return (COMBINE);                                                                          \
    else
#define POOL_ROW_DIVIDES(NAME, START, COMBINE, DIVIDES)                                            \
    if constexpr (KIND == POOL_##NAME)                                                             \
        return (DIVIDES) != 0;                                                                     \
    else

template <int KIND> __device__ __forceinline__ float pool_start() {
    POOL_KIND_LIST(POOL_ROW_START) {
        static_assert(kNoPoolCase<KIND>, "a pooling kind without a row in POOL_KIND_LIST");
        return 0.0f;
    }
}
template <int KIND> __device__ __forceinline__ float pool_combine(float a, float v) {
    POOL_KIND_LIST(POOL_ROW_COMBINE) {
        static_assert(kNoPoolCase<KIND>, "a pooling kind without a row in POOL_KIND_LIST");
        return a;
    }
}
template <int KIND> __host__ __device__ constexpr bool pool_divides() {
    POOL_KIND_LIST(POOL_ROW_DIVIDES) {
        static_assert(kNoPoolCase<KIND>, "a pooling kind without a row in POOL_KIND_LIST");
        return false;
    }
}
#undef POOL_ROW_START
#undef POOL_ROW_COMBINE
#undef POOL_ROW_DIVIDES

// The kind as a compile-time constant for a host-side dispatch, one kernel per row:
//   with_pool_kind(who, kind, [&](auto k) { kernel<decltype(k)::value><<<...>>>(...); ... })
template <int KIND> struct PoolTag {
    static constexpr int value = KIND;
};

#define POOL_ROW_DISPATCH(NAME, START, COMBINE, DIVIDES)                                           \
    case POOL_##NAME: return f(PoolTag<POOL_##NAME>{});

template <typename F> tci_status with_pool_kind(const char *who, pool_kind kind, F &&f) {
    switch (kind) {
        POOL_KIND_LIST(POOL_ROW_DISPATCH)
    case POOL_KIND_COUNT: break;
    }
    return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown mode %d", who, (int)kind);
}
#undef POOL_ROW_DISPATCH

template <typename IdxT> struct Pool2d {
    IdxT total, c, chunks, in_h, in_w, out_h, out_w;
    IdxT kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
    IdxT pad_top, pad_left, pad_bottom, pad_right;
    int count_include_pad;
};

// Taps i < kernel with start + i*dilation < limit (start >= -pad, so the lower bound holds).
template <typename IdxT>
__device__ __forceinline__ IdxT taps_below(IdxT start, IdxT limit, IdxT dilation, IdxT kernel) {
    if (limit <= start)
        return 0;
    const IdxT t = (limit - start + dilation - 1) / dilation;
    return t < kernel ? t : kernel;
}

template <typename T, typename IdxT, int KIND>
__global__ void pool2d_kernel(const typename Chunk8<T>::type *__restrict__ src,
                              typename Chunk8<T>::type *__restrict__ dst, const Pool2d<IdxT> p) {
    using C = typename Chunk8<T>::type;
    const IdxT step = (IdxT)gridDim.x * (IdxT)blockDim.x;
    for (IdxT i = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x; i < p.total; i += step) {
        const IdxT chunk = i % p.chunks;
        IdxT rest = i / p.chunks;
        const IdxT ow = rest % p.out_w;
        rest /= p.out_w;
        const IdxT oh = rest % p.out_h;
        const IdxT img = rest / p.out_h;
        const IdxT hs = oh * p.stride_h - p.pad_top, ws = ow * p.stride_w - p.pad_left;
        float acc[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc[k] = pool_start<KIND>();
        // first/last taps inside the input along each axis
        const IdxT h_first = hs >= 0 ? 0 : (-hs + p.dilation_h - 1) / p.dilation_h;
        const IdxT h_last = taps_below(hs, p.in_h, p.dilation_h, p.kernel_h);
        const IdxT w_first = ws >= 0 ? 0 : (-ws + p.dilation_w - 1) / p.dilation_w;
        const IdxT w_last = taps_below(ws, p.in_w, p.dilation_w, p.kernel_w);
        IdxT taps = 0;
        if (chunk * 8 < p.c && h_first < h_last && w_first < w_last) {
            taps = (h_last - h_first) * (w_last - w_first);
            for (IdxT a = h_first; a < h_last; a++) {
                const IdxT ih = hs + a * p.dilation_h;
                const C *row = src + (img * p.in_h + ih) * p.in_w * p.chunks + chunk;
                for (IdxT b = w_first; b < w_last; b++) {
                    float v[8];
                    load8(row + (ws + b * p.dilation_w) * p.chunks, v);
#pragma unroll
                    for (int k = 0; k < 8; k++)
                        acc[k] = pool_combine<KIND>(acc[k], v[k]);
                }
            }
        }
        if constexpr (!pool_divides<KIND>()) {
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc[k] = taps ? acc[k] : kLowest<T>;
        } else {
            const IdxT divisor =
                p.count_include_pad
                    ? taps_below(hs, p.in_h + p.pad_bottom, p.dilation_h, p.kernel_h) *
                          taps_below(ws, p.in_w + p.pad_right, p.dilation_w, p.kernel_w)
                    : taps;
            const float inv = divisor ? 1.0f / (float)divisor : 0.0f;
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc[k] *= inv;
        }
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (chunk * 8 + k >= p.c)
                acc[k] = 0.0f;
        store8(dst + i, acc);
    }
}

// Block = cpb chunks (threadIdx.x) by rows (threadIdx.y) pixels; cpb is a power of two <= 32 so a
// warp's lanes with the same threadIdx.x meet under xor shuffles of distance >= cpb.
template <typename T, int KIND>
__global__ void global_pool_kernel(const typename Chunk8<T>::type *__restrict__ src,
                                   T *__restrict__ dst, int64_t n, int64_t c, int64_t hw,
                                   int64_t chunks, int64_t groups) {
    using C = typename Chunk8<T>::type;
    extern __shared__ float partial[]; // [warps][cpb][8]
    const int cpb = blockDim.x, rows = blockDim.y;
    const int tid = threadIdx.y * cpb + threadIdx.x;
    const int lane = tid % 32, warp = tid / 32, warps = (cpb * rows + 31) / 32;
    const float init = pool_start<KIND>();
    for (int64_t b = blockIdx.x; b < n * groups; b += gridDim.x) {
        const int64_t img = b / groups, group = b % groups;
        const int64_t chunk = group * cpb + threadIdx.x;
        float acc[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc[k] = init;
        if (chunk < chunks) {
            const C *plane = src + img * hw * chunks + chunk;
            for (int64_t s = threadIdx.y; s < hw; s += rows) {
                float v[8];
                load8(plane + s * chunks, v);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc[k] = pool_combine<KIND>(acc[k], v[k]);
            }
        }
        for (int off = 16; off >= cpb; off >>= 1) {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float o = __shfl_xor_sync(0xffffffffu, acc[k], off);
                acc[k] = pool_combine<KIND>(acc[k], o);
            }
        }
        if (lane < cpb) {
#pragma unroll
            for (int k = 0; k < 8; k++)
                partial[(warp * cpb + lane) * 8 + k] = acc[k];
        }
        __syncthreads();
        if (tid < cpb * 8) {
            const int local = tid / 8, k = tid % 8;
            float r = init;
            for (int w = 0; w < warps; w++) {
                const float o = partial[(w * cpb + local) * 8 + k];
                r = pool_combine<KIND>(r, o);
            }
            const int64_t ch = (group * cpb + local) * 8 + k;
            if (ch < chunks * 8) {
                const float out = ch < c ? (pool_divides<KIND>() ? r / (float)hw : r) : 0.0f;
                dst[img * chunks * 8 + ch] = from_float<T>(out);
            }
        }
        __syncthreads();
    }
}

int64_t next_pow2(int64_t v) {
    int64_t p = 1;
    while (p < v && p < ((int64_t)1 << 40))
        p <<= 1;
    return p;
}

template <typename T, typename IdxT, int KIND>
tci_status launch_pool2d(const kern_pool2d_desc *d, int64_t chunks, int64_t total, const void *src,
                         void *dst, cudaStream_t stream) {
    using C = typename Chunk8<T>::type;
    Pool2d<IdxT> p;
    p.total = (IdxT)total;
    p.c = (IdxT)d->geom.c;
    p.chunks = (IdxT)chunks;
    p.in_h = (IdxT)d->geom.h, p.in_w = (IdxT)d->geom.w, p.out_h = (IdxT)d->geom.out_h,
    p.out_w = (IdxT)d->geom.out_w;
    p.kernel_h = (IdxT)d->geom.kernel_h, p.kernel_w = (IdxT)d->geom.kernel_w;
    p.stride_h = (IdxT)d->geom.stride_h, p.stride_w = (IdxT)d->geom.stride_w;
    p.dilation_h = (IdxT)d->geom.dilation_h, p.dilation_w = (IdxT)d->geom.dilation_w;
    p.pad_top = (IdxT)d->geom.pad_top, p.pad_left = (IdxT)d->geom.pad_left;
    p.pad_bottom = (IdxT)d->geom.pad_bottom, p.pad_right = (IdxT)d->geom.pad_right;
    p.count_include_pad = d->count_include_pad != 0;
    pool2d_kernel<T, IdxT, KIND><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const C *>(src), static_cast<C *>(dst), p);
    KERN_LAUNCH_CHECK("kern_pool2d");
    return TCI_OK;
}

// a*b, or -1 on overflow past INT64_MAX / 16
int64_t checked_mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r) || r > INT64_MAX / 16)
        return -1;
    return r;
}

} // namespace

extern "C" tci_status kern_pool2d(const kern_pool2d_desc *d, const void *src, void *dst,
                                  cudaStream_t stream) {
    if (!d)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pool2d: NULL desc");
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_pool2d", d->dtype, &st));
    if ((int)d->mode < 0 || d->mode >= POOL_KIND_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pool2d: unknown mode %d", (int)d->mode);
    if (d->geom.n < 0 || d->geom.c < 0 || d->geom.h < 0 || d->geom.w < 0 || d->geom.out_h < 0 || d->geom.out_w < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_pool2d: negative size (n %lld, c %lld, in %lldx%lld, out %lldx%lld)",
                         (long long)d->geom.n, (long long)d->geom.c, (long long)d->geom.h, (long long)d->geom.w,
                         (long long)d->geom.out_h, (long long)d->geom.out_w);
    if (d->geom.kernel_h < 1 || d->geom.kernel_w < 1 || d->geom.stride_h < 1 || d->geom.stride_w < 1 ||
        d->geom.dilation_h < 1 || d->geom.dilation_w < 1)
        return status_error(
            TCI_ERR_INVALID_ARGUMENT,
            "kern_pool2d: kernel %lldx%lld, strides %lldx%lld and dilations %lldx%lld must be >= 1",
            (long long)d->geom.kernel_h, (long long)d->geom.kernel_w, (long long)d->geom.stride_h,
            (long long)d->geom.stride_w, (long long)d->geom.dilation_h, (long long)d->geom.dilation_w);
    if (d->geom.pad_top < 0 || d->geom.pad_left < 0 || d->geom.pad_bottom < 0 || d->geom.pad_right < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_pool2d: negative pads (%lld, %lld, %lld, %lld)",
                         (long long)d->geom.pad_top, (long long)d->geom.pad_left, (long long)d->geom.pad_bottom,
                         (long long)d->geom.pad_right);
    const int64_t chunks = (d->geom.c + 7) / 8;
    const int64_t in_total = checked_mul(checked_mul(checked_mul(d->geom.n, d->geom.h), d->geom.w), chunks);
    const int64_t total = checked_mul(checked_mul(checked_mul(d->geom.n, d->geom.out_h), d->geom.out_w), chunks);
    // every index the kernel forms along an axis is bounded by in + pads + out*stride +
    // kernel*dilation
    const int64_t parts[] = {checked_mul(d->geom.out_h, d->geom.stride_h),
                             checked_mul(d->geom.kernel_h, d->geom.dilation_h),
                             checked_mul(d->geom.out_w, d->geom.stride_w),
                             checked_mul(d->geom.kernel_w, d->geom.dilation_w),
                             d->geom.h,
                             d->geom.w,
                             d->geom.pad_top,
                             d->geom.pad_bottom,
                             d->geom.pad_left,
                             d->geom.pad_right};
    bool too_large = in_total < 0 || total < 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i] < 0 || parts[i] > INT64_MAX / 64)
            too_large = true;
    if (too_large)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pool2d: sizes too large");
    const int64_t reach_h = parts[0] + parts[1] + d->geom.h + d->geom.pad_top + d->geom.pad_bottom;
    const int64_t reach_w = parts[2] + parts[3] + d->geom.w + d->geom.pad_left + d->geom.pad_right;
    if (total == 0)
        return TCI_OK;
    if (!src || !dst)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pool2d: NULL buffer");
    if (!aligned16(src) || !aligned16(dst))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pool2d: buffers must be 16-byte aligned");
    const int64_t big = in_total > total ? in_total : total;
    const bool small = big <= kMax32 && reach_h <= kMax32 && reach_w <= kMax32;
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return with_pool_kind("kern_pool2d", d->mode, [&](auto kind) {
            constexpr int K = decltype(kind)::value;
            return small ? launch_pool2d<T, int32_t, K>(d, chunks, total, src, dst, stream)
                         : launch_pool2d<T, int64_t, K>(d, chunks, total, src, dst, stream);
        });
    });
}

extern "C" tci_status kern_global_pool_dtype(pool_kind mode, const void *src, void *dst,
                                             int64_t n, int64_t c, int64_t h, int64_t w,
                                             tci_dtype dtype, cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_global_pool", dtype, &st));
    if ((int)mode < 0 || mode >= POOL_KIND_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_global_pool: unknown mode %d", (int)mode);
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_global_pool: negative dims (%lld, %lld, %lld, %lld)", (long long)n,
                         (long long)c, (long long)h, (long long)w);
    const int64_t chunks = (c + 7) / 8;
    const int64_t hw = checked_mul(h, w);
    const int64_t total = checked_mul(checked_mul(n, hw), chunks);
    if (hw < 0 || total < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_global_pool: sizes too large");
    if (n == 0 || c == 0)
        return TCI_OK;
    if (hw == 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_global_pool: empty plane (%lld x %lld)",
                         (long long)h, (long long)w);
    if (!src || !dst)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_global_pool: NULL buffer");
    if (!aligned16(src) || !aligned16(dst))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_global_pool: buffers must be 16-byte aligned");
    // Enough rows per block to cover small planes in one pass; large planes get 1024 threads so
    // a few channel groups still keep many loads in flight. At least 2 chunks (32 bytes, a full
    // sector) per pixel row when there are 2.
    const int threads = hw >= 1024 ? 1024 : kThreads;
    const int64_t rows_wanted = next_pow2(hw);
    int64_t cpb = rows_wanted >= threads ? 1 : threads / rows_wanted;
    if (cpb > 32)
        cpb = 32;
    const int64_t cap = next_pow2(chunks) < 32 ? next_pow2(chunks) : 32;
    if (cpb > cap)
        cpb = cap;
    if (cpb < 2 && chunks >= 2)
        cpb = 2;
    const int rows = (int)(threads / cpb);
    const int64_t groups = (chunks + cpb - 1) / cpb;
    const size_t smem = (size_t)(threads / 32) * (size_t)cpb * 8 * sizeof(float);
    const dim3 grid(blocks_for(n * groups, 1)), block((unsigned)cpb, (unsigned)rows);
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return with_pool_kind("kern_global_pool", mode, [&](auto kind) {
            global_pool_kernel<T, decltype(kind)::value><<<grid, block, smem, stream>>>(
                static_cast<const typename Chunk8<T>::type *>(src), static_cast<T *>(dst), n, c,
                hw, chunks, groups);
            KERN_LAUNCH_CHECK("kern_global_pool");
            return TCI_OK;
        });
    });
}

extern "C" tci_status kern_global_pool(pool_kind mode, const void *src, void *dst, int64_t n,
                                       int64_t c, int64_t h, int64_t w, cudaStream_t stream) {
    return kern_global_pool_dtype(mode, src, dst, n, c, h, w, TCI_DTYPE_FLOAT16, stream);
}
