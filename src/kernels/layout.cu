// NCHW <-> NHWC8 conversions (tiled transposes through shared memory, chunks of 8 channels on the
// NHWC8 side: 16 bytes in fp16, 32 in fp32; either side fp16 or fp32) and dense fp32 <-> fp16
// casts.
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

// Vector part: 8 elements per thread (two float4 <-> one uint4); the count % 8 tail and
// misaligned buffers go element by element.
template <bool kVector> __global__ void f32_to_f16_kernel(const float *__restrict__ src,
                                                          __half *__restrict__ dst, int64_t count) {
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (kVector) {
        const int64_t vecs = count / 8;
        const float4 *s4 = reinterpret_cast<const float4 *>(src);
        uint4 *d4 = reinterpret_cast<uint4 *>(dst);
        for (int64_t i = tid; i < vecs; i += step) {
            const float4 a = s4[2 * i], b = s4[2 * i + 1];
            uint4 u;
            u.x = pack2(a.x, a.y);
            u.y = pack2(a.z, a.w);
            u.z = pack2(b.x, b.y);
            u.w = pack2(b.z, b.w);
            d4[i] = u;
        }
        done = vecs * 8;
    }
    for (int64_t i = done + tid; i < count; i += step)
        dst[i] = __float2half_rn(src[i]);
}

template <bool kVector> __global__ void f16_to_f32_kernel(const __half *__restrict__ src,
                                                          float *__restrict__ dst, int64_t count) {
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (kVector) {
        const int64_t vecs = count / 8;
        const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
        float4 *d4 = reinterpret_cast<float4 *>(dst);
        for (int64_t i = tid; i < vecs; i += step) {
            float v[8];
            unpack8(s4[i], v);
            d4[2 * i] = make_float4(v[0], v[1], v[2], v[3]);
            d4[2 * i + 1] = make_float4(v[4], v[5], v[6], v[7]);
        }
        done = vecs * 8;
    }
    for (int64_t i = done + tid; i < count; i += step)
        dst[i] = __half2float(src[i]);
}

// Validates the four dims and the buffers; *out_pixels = n*h*w and *out_chunks = Cp/8 for the
// launch, *out_empty when there is nothing to do.
tci_status check_nchw(const char *what, const void *src, const void *dst, const void *nhwc8,
                      int64_t n, int64_t c, int64_t h, int64_t w, int64_t *out_hw,
                      int64_t *out_chunks, bool *out_empty) {
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative dims (%lld, %lld, %lld, %lld)",
                         what, (long long)n, (long long)c, (long long)h, (long long)w);
    const int64_t limit = INT64_MAX / 16;
    int64_t hw = 0, total = 0;
    const int64_t cp = (c + 7) / 8 * 8;
    if (__builtin_mul_overflow(h, w, &hw) || __builtin_mul_overflow(hw, n, &total) ||
        __builtin_mul_overflow(total, cp, &total) || total > limit)
        return tci_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: tensor of (%lld, %lld, %lld, %lld) is too large", what, (long long)n,
                         (long long)c, (long long)h, (long long)w);
    *out_hw = hw;
    *out_chunks = cp / 8;
    *out_empty = total == 0;
    if (total == 0)
        return TCI_OK;
    if (!src || !dst)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (!aligned16(nhwc8))
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "%s: NHWC8 buffer %p is not 16-byte aligned",
                         what, nhwc8);
    return TCI_OK;
}

template <typename Tin, typename T8>
tci_status to_nhwc8(const char *what, const Tin *src, void *dst, int64_t n, int64_t c, int64_t h,
                    int64_t w, cudaStream_t stream) {
    using C = typename Chunk8<T8>::type;
    int64_t hw = 0, chunks = 0;
    bool empty = false;
    TCI_TRY(check_nchw(what, src, dst, dst, n, c, h, w, &hw, &chunks, &empty));
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
    TCI_TRY(check_nchw(what, src, dst, src, n, c, h, w, &hw, &chunks, &empty));
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
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative count %lld", what,
                         (long long)count);
    if (count > 0 && (!src || !dst))
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", what);
    return TCI_OK;
}

} // namespace

extern "C" tci_status kern_nchw_to_nhwc8(const void *src, tci_dtype src_dtype, void *dst,
                                         tci_dtype dst_dtype, int64_t n, int64_t c, int64_t h,
                                         int64_t w, cudaStream_t stream) {
    static const char who[] = "kern_nchw_to_nhwc8";
    bool src32 = false, dst32 = false;
    TCI_TRY(storage_dtype(who, src_dtype, &src32));
    TCI_TRY(storage_dtype(who, dst_dtype, &dst32));
    if (src32) {
        const float *s = static_cast<const float *>(src);
        return dst32 ? to_nhwc8<float, float>(who, s, dst, n, c, h, w, stream)
                     : to_nhwc8<float, __half>(who, s, dst, n, c, h, w, stream);
    }
    const __half *s = static_cast<const __half *>(src);
    return dst32 ? to_nhwc8<__half, float>(who, s, dst, n, c, h, w, stream)
                 : to_nhwc8<__half, __half>(who, s, dst, n, c, h, w, stream);
}

extern "C" tci_status kern_nhwc8_to_nchw(const void *src, tci_dtype src_dtype, void *dst,
                                         tci_dtype dst_dtype, int64_t n, int64_t c, int64_t h,
                                         int64_t w, cudaStream_t stream) {
    static const char who[] = "kern_nhwc8_to_nchw";
    bool src32 = false, dst32 = false;
    TCI_TRY(storage_dtype(who, src_dtype, &src32));
    TCI_TRY(storage_dtype(who, dst_dtype, &dst32));
    if (dst32) {
        float *d = static_cast<float *>(dst);
        return src32 ? from_nhwc8<float, float>(who, src, d, n, c, h, w, stream)
                     : from_nhwc8<float, __half>(who, src, d, n, c, h, w, stream);
    }
    __half *d = static_cast<__half *>(dst);
    return src32 ? from_nhwc8<__half, float>(who, src, d, n, c, h, w, stream)
                 : from_nhwc8<__half, __half>(who, src, d, n, c, h, w, stream);
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
    TCI_TRY(check_count("kern_f32_to_f16", src, dst_f16, count));
    if (count == 0)
        return TCI_OK;
    __half *d = static_cast<__half *>(dst_f16);
    if (aligned16(src) && aligned16(dst_f16) && count >= 8)
        f32_to_f16_kernel<true>
            <<<blocks_for(count / 8, kThreads), kThreads, 0, stream>>>(src, d, count);
    else
        f32_to_f16_kernel<false>
            <<<blocks_for(count, kThreads), kThreads, 0, stream>>>(src, d, count);
    KERN_LAUNCH_CHECK("kern_f32_to_f16");
    return TCI_OK;
}

extern "C" tci_status kern_f16_to_f32(const void *src_f16, float *dst, int64_t count,
                                      cudaStream_t stream) {
    TCI_TRY(check_count("kern_f16_to_f32", src_f16, dst, count));
    if (count == 0)
        return TCI_OK;
    const __half *s = static_cast<const __half *>(src_f16);
    if (aligned16(src_f16) && aligned16(dst) && count >= 8)
        f16_to_f32_kernel<true>
            <<<blocks_for(count / 8, kThreads), kThreads, 0, stream>>>(s, dst, count);
    else
        f16_to_f32_kernel<false>
            <<<blocks_for(count, kThreads), kThreads, 0, stream>>>(s, dst, count);
    KERN_LAUNCH_CHECK("kern_f16_to_f32");
    return TCI_OK;
}
