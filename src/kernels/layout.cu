// NCHW <-> NHWC8 conversions (tiled transposes through shared memory, chunks of 8 channels on the
// NHWC8 side: 16 bytes in fp16 and bf16, 32 in fp32; either side fp16, bf16 or fp32) and dense
// fp32 <-> fp16 / bf16 casts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/layout.h"

using namespace kern_util;

namespace {

constexpr int kThreads = 256;
// A tile is 64 channels (8 chunks of 8) by 32 pixels: 256 threads move one 16-byte chunk each on
// the NHWC8 side and 8 rows of 32 consecutive pixels on the NCHW side, both coalesced.
constexpr int kTileC = 64;
constexpr int kTileS = 32;
constexpr int kChunksPerTile = kTileC / 8;
// Below this many padded channels most of a 64-channel tile would be idle: one thread per pixel
// chunk reads its 8 channel planes directly (consecutive threads = consecutive pixels, coalesced).
constexpr int64_t kDirectMaxCp = 16;

template <typename Tin, typename C>
__global__ void nchw_to_nhwc8_tiled(const Tin *__restrict__ src, C *__restrict__ dst, int64_t n,
                                    int64_t c, int64_t hw, int64_t chunks, int64_t c_tiles,
                                    int64_t s_tiles) {
    __shared__ float tile[kTileC][kTileS + 1];
    const int tid = threadIdx.x;
    const int64_t tiles = n * c_tiles * s_tiles;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int64_t s_tile = t % s_tiles;
        const int64_t rest = t / s_tiles;
        const int64_t c0 = (rest % c_tiles) * kTileC;
        const int64_t img = rest / c_tiles;
        const int64_t s0 = s_tile * kTileS;
        {
            const int tx = tid % kTileS, ty = tid / kTileS;
            const int64_t s = s0 + tx;
#pragma unroll
            for (int r = 0; r < kTileC; r += kThreads / kTileS) {
                const int64_t ch = c0 + ty + r;
                tile[ty + r][tx] =
                    (ch < c && s < hw) ? to_float(src[(img * c + ch) * hw + s]) : 0.0f;
            }
        }
        __syncthreads();
        {
            const int chunk = tid % kChunksPerTile, sl = tid / kChunksPerTile;
            const int64_t s = s0 + sl, gchunk = c0 / 8 + chunk;
            if (s < hw && gchunk < chunks) {
                float v[8];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[k] = tile[chunk * 8 + k][sl];
                store8(dst + ((img * hw + s) * chunks + gchunk), v);
            }
        }
        __syncthreads();
    }
}

template <typename Tin, typename C>
__global__ void nchw_to_nhwc8_direct(const Tin *__restrict__ src, C *__restrict__ dst,
                                     int64_t n, int64_t c, int64_t hw, int64_t chunks) {
    const int64_t total = n * hw * chunks;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t chunk = i % chunks, pixel = i / chunks;
        const int64_t s = pixel % hw, img = pixel / hw;
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int64_t ch = chunk * 8 + k;
            v[k] = ch < c ? to_float(src[(img * c + ch) * hw + s]) : 0.0f;
        }
        store8(dst + i, v);
    }
}

template <typename Tout, typename C>
__global__ void nhwc8_to_nchw_tiled(const C *__restrict__ src, Tout *__restrict__ dst, int64_t n,
                                    int64_t c, int64_t hw, int64_t chunks, int64_t c_tiles,
                                    int64_t s_tiles) {
    __shared__ float tile[kTileC][kTileS + 1];
    const int tid = threadIdx.x;
    const int64_t tiles = n * c_tiles * s_tiles;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int64_t s_tile = t % s_tiles;
        const int64_t rest = t / s_tiles;
        const int64_t c0 = (rest % c_tiles) * kTileC;
        const int64_t img = rest / c_tiles;
        const int64_t s0 = s_tile * kTileS;
        {
            const int chunk = tid % kChunksPerTile, sl = tid / kChunksPerTile;
            const int64_t s = s0 + sl, gchunk = c0 / 8 + chunk;
            // chunks entirely past c are never read back out of the tile: skip their loads
            if (s < hw && gchunk * 8 < c) {
                float v[8];
                load8(src + ((img * hw + s) * chunks + gchunk), v);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    tile[chunk * 8 + k][sl] = v[k];
            }
        }
        __syncthreads();
        {
            const int tx = tid % kTileS, ty = tid / kTileS;
            const int64_t s = s0 + tx;
#pragma unroll
            for (int r = 0; r < kTileC; r += kThreads / kTileS) {
                const int64_t ch = c0 + ty + r;
                if (ch < c && s < hw)
                    dst[(img * c + ch) * hw + s] = from_float<Tout>(tile[ty + r][tx]);
            }
        }
        __syncthreads();
    }
}

template <typename Tout, typename C>
__global__ void nhwc8_to_nchw_direct(const C *__restrict__ src, Tout *__restrict__ dst,
                                     int64_t n, int64_t c, int64_t hw, int64_t chunks) {
    const int64_t total = n * hw * chunks;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t chunk = i % chunks, pixel = i / chunks;
        const int64_t s = pixel % hw, img = pixel / hw;
        float v[8];
        load8(src + i, v);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int64_t ch = chunk * 8 + k;
            if (ch < c)
                dst[(img * c + ch) * hw + s] = from_float<Tout>(v[k]);
        }
    }
}

// Vector part: 8 elements per thread (two float4 <-> one 16-byte chunk of T, fp16 or bf16); the
// count % 8 tail and misaligned buffers go element by element.
template <typename T, bool kVector>
__global__ void f32_to_narrow_kernel(const float *__restrict__ src, T *__restrict__ dst,
                                     int64_t count) {
    using C = typename Chunk8<T>::type;
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (kVector) {
        const int64_t vecs = count / 8;
        const float8 *s8 = reinterpret_cast<const float8 *>(src);
        C *d8 = reinterpret_cast<C *>(dst);
        for (int64_t i = tid; i < vecs; i += step) {
            float v[8];
            load8(s8 + i, v);
            store8(d8 + i, v);
        }
        done = vecs * 8;
    }
    for (int64_t i = done + tid; i < count; i += step)
        dst[i] = from_float<T>(src[i]);
}

template <typename T, bool kVector>
__global__ void narrow_to_f32_kernel(const T *__restrict__ src, float *__restrict__ dst,
                                     int64_t count) {
    using C = typename Chunk8<T>::type;
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (kVector) {
        const int64_t vecs = count / 8;
        const C *s8 = reinterpret_cast<const C *>(src);
        float8 *d8 = reinterpret_cast<float8 *>(dst);
        for (int64_t i = tid; i < vecs; i += step) {
            float v[8];
            load8(s8 + i, v);
            store8(d8 + i, v);
        }
        done = vecs * 8;
    }
    for (int64_t i = done + tid; i < count; i += step)
        dst[i] = to_float(src[i]);
}

// Validates the four dims and the buffers; *out_pixels = n*h*w and *out_chunks = Cp/8 for the
// launch, *out_empty when there is nothing to do.
tci_status check_nchw(const char *what, const void *src, const void *dst, const void *nhwc8,
                      int64_t n, int64_t c, int64_t h, int64_t w, int64_t *out_hw,
                      int64_t *out_chunks, bool *out_empty) {
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative dims (%lld, %lld, %lld, %lld)",
                         what, (long long)n, (long long)c, (long long)h, (long long)w);
    const int64_t limit = INT64_MAX / 16;
    int64_t hw = 0, total = 0;
    const int64_t cp = (c + 7) / 8 * 8;
    if (__builtin_mul_overflow(h, w, &hw) || __builtin_mul_overflow(hw, n, &total) ||
        __builtin_mul_overflow(total, cp, &total) || total > limit)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: tensor of (%lld, %lld, %lld, %lld) is too large", what, (long long)n,
                         (long long)c, (long long)h, (long long)w);
    *out_hw = hw;
    *out_chunks = cp / 8;
    *out_empty = total == 0;
    if (total == 0)
        return TCI_OK;
    if (!src || !dst)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (!aligned16(nhwc8))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NHWC8 buffer %p is not 16-byte aligned",
                         what, nhwc8);
    return TCI_OK;
}

template <typename Tin, typename T8>
tci_status to_nhwc8(const char *what, const Tin *src, void *dst, int64_t n, int64_t c, int64_t h,
                    int64_t w, cudaStream_t stream) {
    using C = typename Chunk8<T8>::type;
    int64_t hw = 0, chunks = 0;
    bool empty = false;
    TRY_STATUS(check_nchw(what, src, dst, dst, n, c, h, w, &hw, &chunks, &empty));
    if (empty)
        return TCI_OK;
    C *d = static_cast<C *>(dst);
    if (chunks * 8 <= kDirectMaxCp) {
        nchw_to_nhwc8_direct<Tin, C>
            <<<blocks_for(n * hw * chunks, kThreads), kThreads, 0, stream>>>(src, d, n, c, hw,
                                                                              chunks);
    } else {
        const int64_t c_tiles = (chunks * 8 + kTileC - 1) / kTileC,
                      s_tiles = (hw + kTileS - 1) / kTileS;
        nchw_to_nhwc8_tiled<Tin, C><<<blocks_for(n * c_tiles * s_tiles, 1), kThreads, 0, stream>>>(
            src, d, n, c, hw, chunks, c_tiles, s_tiles);
    }
    KERN_LAUNCH_CHECK(what);
    return TCI_OK;
}

template <typename Tout, typename T8>
tci_status from_nhwc8(const char *what, const void *src, Tout *dst, int64_t n, int64_t c,
                      int64_t h, int64_t w, cudaStream_t stream) {
    using C = typename Chunk8<T8>::type;
    int64_t hw = 0, chunks = 0;
    bool empty = false;
    TRY_STATUS(check_nchw(what, src, dst, src, n, c, h, w, &hw, &chunks, &empty));
    if (empty || c == 0)
        return TCI_OK;
    const C *s = static_cast<const C *>(src);
    if (chunks * 8 <= kDirectMaxCp) {
        nhwc8_to_nchw_direct<Tout, C>
            <<<blocks_for(n * hw * chunks, kThreads), kThreads, 0, stream>>>(s, dst, n, c, hw,
                                                                              chunks);
    } else {
        const int64_t c_tiles = (chunks * 8 + kTileC - 1) / kTileC,
                      s_tiles = (hw + kTileS - 1) / kTileS;
        nhwc8_to_nchw_tiled<Tout, C><<<blocks_for(n * c_tiles * s_tiles, 1), kThreads, 0,
                                       stream>>>(s, dst, n, c, hw, chunks, c_tiles, s_tiles);
    }
    KERN_LAUNCH_CHECK(what);
    return TCI_OK;
}

tci_status check_count(const char *what, const void *src, const void *dst, int64_t count) {
    if (count < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative count %lld", what,
                         (long long)count);
    if (count > 0 && (!src || !dst))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", what);
    return TCI_OK;
}

template <typename T>
tci_status f32_to_narrow(const char *what, const float *src, void *dst, int64_t count,
                         cudaStream_t stream) {
    TRY_STATUS(check_count(what, src, dst, count));
    if (count == 0)
        return TCI_OK;
    T *d = static_cast<T *>(dst);
    if (aligned16(src) && aligned16(dst) && count >= 8)
        f32_to_narrow_kernel<T, true>
            <<<blocks_for(count / 8, kThreads), kThreads, 0, stream>>>(src, d, count);
    else
        f32_to_narrow_kernel<T, false>
            <<<blocks_for(count, kThreads), kThreads, 0, stream>>>(src, d, count);
    KERN_LAUNCH_CHECK(what);
    return TCI_OK;
}

template <typename T>
tci_status narrow_to_f32(const char *what, const void *src, float *dst, int64_t count,
                         cudaStream_t stream) {
    TRY_STATUS(check_count(what, src, dst, count));
    if (count == 0)
        return TCI_OK;
    const T *s = static_cast<const T *>(src);
    if (aligned16(src) && aligned16(dst) && count >= 8)
        narrow_to_f32_kernel<T, true>
            <<<blocks_for(count / 8, kThreads), kThreads, 0, stream>>>(s, dst, count);
    else
        narrow_to_f32_kernel<T, false>
            <<<blocks_for(count, kThreads), kThreads, 0, stream>>>(s, dst, count);
    KERN_LAUNCH_CHECK(what);
    return TCI_OK;
}

} // namespace

extern "C" tci_status kern_nchw_to_nhwc8(const void *src, tci_dtype src_dtype, void *dst,
                                         tci_dtype dst_dtype, int64_t n, int64_t c, int64_t h,
                                         int64_t w, cudaStream_t stream) {
    static const char who[] = "kern_nchw_to_nhwc8";
    Storage src_type = Storage::kHalf, dst_type = Storage::kHalf;
    TRY_STATUS(storage_type(who, src_dtype, &src_type));
    TRY_STATUS(storage_type(who, dst_dtype, &dst_type));
    return with_storage(src_type, [&](auto src_tag) {
        using Tin = typename decltype(src_tag)::type;
        return with_storage(dst_type, [&](auto dst_tag) {
            return to_nhwc8<Tin, typename decltype(dst_tag)::type>(
                who, static_cast<const Tin *>(src), dst, n, c, h, w, stream);
        });
    });
}

extern "C" tci_status kern_nhwc8_to_nchw(const void *src, tci_dtype src_dtype, void *dst,
                                         tci_dtype dst_dtype, int64_t n, int64_t c, int64_t h,
                                         int64_t w, cudaStream_t stream) {
    static const char who[] = "kern_nhwc8_to_nchw";
    Storage src_type = Storage::kHalf, dst_type = Storage::kHalf;
    TRY_STATUS(storage_type(who, src_dtype, &src_type));
    TRY_STATUS(storage_type(who, dst_dtype, &dst_type));
    return with_storage(dst_type, [&](auto dst_tag) {
        using Tout = typename decltype(dst_tag)::type;
        return with_storage(src_type, [&](auto src_tag) {
            return from_nhwc8<Tout, typename decltype(src_tag)::type>(
                who, src, static_cast<Tout *>(dst), n, c, h, w, stream);
        });
    });
}

extern "C" tci_status kern_nchw_f32_to_nhwc8(const float *src, void *dst_f16, int64_t n, int64_t c,
                                             int64_t h, int64_t w, cudaStream_t stream) {
    return to_nhwc8<float, __half>("kern_nchw_f32_to_nhwc8", src, dst_f16, n, c, h, w, stream);
}

extern "C" tci_status kern_nchw_f16_to_nhwc8(const void *src_f16, void *dst_f16, int64_t n,
                                             int64_t c, int64_t h, int64_t w, cudaStream_t stream) {
    return to_nhwc8<__half, __half>("kern_nchw_f16_to_nhwc8",
                                    static_cast<const __half *>(src_f16), dst_f16, n, c, h, w,
                                    stream);
}

extern "C" tci_status kern_nhwc8_to_nchw_f32(const void *src_f16, float *dst, int64_t n, int64_t c,
                                             int64_t h, int64_t w, cudaStream_t stream) {
    return from_nhwc8<float, __half>("kern_nhwc8_to_nchw_f32", src_f16, dst, n, c, h, w, stream);
}

extern "C" tci_status kern_nhwc8_to_nchw_f16(const void *src_f16, void *dst_f16, int64_t n,
                                             int64_t c, int64_t h, int64_t w, cudaStream_t stream) {
    return from_nhwc8<__half, __half>("kern_nhwc8_to_nchw_f16", src_f16,
                                      static_cast<__half *>(dst_f16), n, c, h, w, stream);
}

extern "C" tci_status kern_nchw_f32_to_nhwc8_f32(const float *src, float *dst, int64_t n, int64_t c,
                                                 int64_t h, int64_t w, cudaStream_t stream) {
    return to_nhwc8<float, float>("kern_nchw_f32_to_nhwc8_f32", src, dst, n, c, h, w, stream);
}

extern "C" tci_status kern_nhwc8_f32_to_nchw_f32(const float *src, float *dst, int64_t n, int64_t c,
                                                 int64_t h, int64_t w, cudaStream_t stream) {
    return from_nhwc8<float, float>("kern_nhwc8_f32_to_nchw_f32", src, dst, n, c, h, w, stream);
}

extern "C" tci_status kern_f32_to_f16(const float *src, void *dst_f16, int64_t count,
                                      cudaStream_t stream) {
    return f32_to_narrow<__half>("kern_f32_to_f16", src, dst_f16, count, stream);
}

extern "C" tci_status kern_f16_to_f32(const void *src_f16, float *dst, int64_t count,
                                      cudaStream_t stream) {
    return narrow_to_f32<__half>("kern_f16_to_f32", src_f16, dst, count, stream);
}

extern "C" tci_status kern_f32_to_bf16(const float *src, void *dst_bf16, int64_t count,
                                       cudaStream_t stream) {
    return f32_to_narrow<__nv_bfloat16>("kern_f32_to_bf16", src, dst_bf16, count, stream);
}

extern "C" tci_status kern_bf16_to_f32(const void *src_bf16, float *dst, int64_t count,
                                       cudaStream_t stream) {
    return narrow_to_f32<__nv_bfloat16>("kern_bf16_to_f32", src_bf16, dst, count, stream);
}
