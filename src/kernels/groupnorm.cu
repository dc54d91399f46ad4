// GroupNormalization and InstanceNormalization (kern_groupnorm_dtype, declared in norm.h) on
// fp16, bf16 or fp32 storage with fp32 statistics: a block per (image, group), or, for few
// groups, a block per chunk of a group whose statistics meet in a small buffer.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

// util/status.h and util/half.h have no extern "C" guard of their own; cuda_check.h includes
// status.h after this
extern "C" {
#include "util/half.h"
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/norm.h"
#include "kernels/norm_util.cuh"

using namespace kern_util;
using namespace norm_util;

namespace {

// Element i of an image's group: dense (N, C, spatial) runs channel by channel, NHWC8
// (N, spatial, cp) position by position; returns the offset from the image's start and the
// channel in *ch.
__device__ __forceinline__ int64_t group_element(int64_t i, int64_t g, int64_t per,
                                                 int64_t spatial, int64_t cp, bool nhwc,
                                                 int64_t *ch) {
    if (nhwc) {
        *ch = g * per + i % per;
        return i / per * cp + *ch;
    }
    *ch = g * per + i / spatial;
    return *ch * spatial + i % spatial;
}

// One block per (image, group) over len = channels-per-group x spatial values. Two-pass
// statistics in fp32. In NHWC8 the last group's block also writes the padding channels' zeros.
template <typename T>
__global__ void groupnorm_kernel(const T *x, const T *gamma, const T *beta, T *y, int64_t n,
                                 int64_t c, int64_t cp, int64_t spatial, int64_t groups,
                                 float epsilon, bool per_group, bool nhwc) {
    __shared__ float shared[kWarp];
    const int64_t per = c / groups, len = per * spatial, image = cp * spatial;
    const float inv_len = 1.0f / (float)len;
    for (int64_t blk = blockIdx.x; blk < n * groups; blk += gridDim.x) {
        const int64_t g = blk % groups;
        const T *xi = x + blk / groups * image;
        T *yi = y + blk / groups * image;
        int64_t ch;
        float sum = 0.0f;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
            sum += to_float(xi[group_element(i, g, per, spatial, cp, nhwc, &ch)]);
        const float mean = block_sum(sum, shared) * inv_len;
        float sq = 0.0f;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            const float d = to_float(xi[group_element(i, g, per, spatial, cp, nhwc, &ch)]) - mean;
            sq += d * d;
        }
        const float inv_std = 1.0f / sqrtf(block_sum(sq, shared) * inv_len + epsilon);
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            const int64_t at = group_element(i, g, per, spatial, cp, nhwc, &ch);
            const int64_t k = per_group ? g : ch;
            yi[at] = from_float<T>((to_float(xi[at]) - mean) * inv_std * to_float(gamma[k]) +
                                   to_float(beta[k]));
        }
        if (g == groups - 1 && cp > c)
            for (int64_t i = threadIdx.x; i < spatial * (cp - c); i += blockDim.x)
                yi[i / (cp - c) * cp + c + i % (cp - c)] = from_float<T>(0.0f);
    }
}

// The chunked form, for few (image, group) pairs (one block each would leave most SMs idle):
// each group's len elements are cut into chunks of `cl` (a multiple of 8), a block per chunk.
// groupnorm_partials_kernel writes each chunk's mean and sum of squared deviations from it (two
// passes over the chunk, the second from L1); groupnorm_apply_kernel merges its group's partials
// (Chan's pairwise formula, exact in fp32 up to rounding) and normalises its chunk. A group is
// contiguous (contig) when stored dense, or NHWC8 with one group and no padding channels: there
// the accesses are 16-byte vectors (VEC 8) where the group length allows.
struct GroupChunks {
    int64_t n, c, cp, spatial, groups, per, len, cl, chunks;
    bool nhwc, contig;
    // One past the last element of chunk b.
    __device__ __forceinline__ int64_t end(int64_t b) const {
        return (b + 1) * cl < len ? (b + 1) * cl : len;
    }
    // Offset of element i of (image, group g) from the image's start; its channel in *ch.
    __device__ __forceinline__ int64_t at(int64_t i, int64_t g, int64_t *ch) const {
        if (contig) {
            *ch = nhwc ? i % c : g * per + i / spatial;
            return g * len + i;
        }
        return group_element(i, g, per, spatial, cp, nhwc, ch);
    }
};

template <typename T, int VEC>
__global__ void groupnorm_partials_kernel(const T *x, float *partials, GroupChunks d) {
    __shared__ float shared[kWarp];
    for (int64_t blk = blockIdx.x; blk < d.n * d.groups * d.chunks; blk += gridDim.x) {
        const int64_t chunk = blk % d.chunks, ig = blk / d.chunks, g = ig % d.groups;
        const T *xi = x + ig / d.groups * d.cp * d.spatial;
        const int64_t lo = chunk * d.cl, hi = d.end(chunk);
        int64_t ch;
        float sum = 0.0f;
        for (int64_t i = lo + (int64_t)threadIdx.x * VEC; i < hi; i += (int64_t)blockDim.x * VEC) {
            float f[VEC];
            load_vec<VEC>(xi + d.at(i, g, &ch), f);
#pragma unroll
            for (int k = 0; k < VEC; k++) sum += f[k];
        }
        const float mean = block_sum(sum, shared) / (float)(hi - lo);
        float sq = 0.0f;
        for (int64_t i = lo + (int64_t)threadIdx.x * VEC; i < hi; i += (int64_t)blockDim.x * VEC) {
            float f[VEC];
            load_vec<VEC>(xi + d.at(i, g, &ch), f);
#pragma unroll
            for (int k = 0; k < VEC; k++) sq += (f[k] - mean) * (f[k] - mean);
        }
        sq = block_sum(sq, shared);
        if (threadIdx.x == 0) {
            partials[2 * blk] = mean;
            partials[2 * blk + 1] = sq;
        }
    }
}

template <typename T, int VEC>
__global__ void groupnorm_apply_kernel(const T *x, const T *gamma, const T *beta, T *y,
                                       const float *partials, GroupChunks d, float epsilon,
                                       bool per_group) {
    __shared__ float shared[kWarp];
    const float inv_len = 1.0f / (float)d.len;
    for (int64_t blk = blockIdx.x; blk < d.n * d.groups * d.chunks; blk += gridDim.x) {
        const int64_t chunk = blk % d.chunks, ig = blk / d.chunks, g = ig % d.groups;
        const float *part = partials + 2 * ig * d.chunks;
        float s = 0.0f;
        for (int64_t b = threadIdx.x; b < d.chunks; b += blockDim.x)
            s += part[2 * b] * (float)(d.end(b) - b * d.cl);
        const float mean = block_sum(s, shared) * inv_len;
        float m2 = 0.0f;
        for (int64_t b = threadIdx.x; b < d.chunks; b += blockDim.x) {
            const float dm = part[2 * b] - mean;
            m2 += part[2 * b + 1] + dm * dm * (float)(d.end(b) - b * d.cl);
        }
        const float inv_std = 1.0f / sqrtf(block_sum(m2, shared) * inv_len + epsilon);
        const int64_t image = ig / d.groups * d.cp * d.spatial;
        const T *xi = x + image;
        T *yi = y + image;
        const int64_t lo = chunk * d.cl, hi = d.end(chunk);
        for (int64_t i = lo + (int64_t)threadIdx.x * VEC; i < hi; i += (int64_t)blockDim.x * VEC) {
            int64_t ch;
            const int64_t off = d.at(i, g, &ch);
            float f[VEC];
            load_vec<VEC>(xi + off, f);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                int64_t kc = ch;
                if (k && d.contig) kc = d.nhwc ? (i + k) % d.c : g * d.per + (i + k) / d.spatial;
                const int64_t w = per_group ? g : kc;
                f[k] = (f[k] - mean) * inv_std * to_float(gamma[w]) + to_float(beta[w]);
            }
            store_vec<VEC>(yi + off, f);
        }
        if (g == d.groups - 1 && chunk == 0 && d.cp > d.c)
            for (int64_t i = threadIdx.x; i < d.spatial * (d.cp - d.c); i += blockDim.x)
                yi[i / (d.cp - d.c) * d.cp + d.c + i % (d.cp - d.c)] = from_float<T>(0.0f);
    }
}

} // namespace

extern "C" tci_status kern_groupnorm_dtype(const void *x, const void *gamma, const void *beta,
                                           void *y, int64_t n, int64_t c, int64_t spatial,
                                           int nhwc8, int64_t groups, int scale_per_group,
                                           float epsilon, int64_t chunks, float *partials,
                                           tci_dtype dtype, cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_groupnorm", dtype, &st));
    if (n < 0 || c < 0 || spatial < 0 || groups < 1 || c % groups)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_groupnorm: bad extents (n %lld, c %lld, spatial %lld, groups %lld)",
                         (long long)n, (long long)c, (long long)spatial, (long long)groups);
    if (!(epsilon >= 0.0f))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_groupnorm: epsilon %g is not >= 0",
                         (double)epsilon);
    if (n == 0 || c == 0 || spatial == 0) return TCI_OK;
    if (!x || !y || !gamma || !beta)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_groupnorm: NULL buffer");
    const int64_t len = c / groups * spatial, cp = nhwc8 ? (c + 7) / 8 * 8 : c;
    if (chunks > 1) {
        if (!partials)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_groupnorm: %lld chunks need the "
                                "partials buffer", (long long)chunks);
        GroupChunks d = {n, c, cp, spatial, groups, c / groups, len, 0, chunks,
                         nhwc8 != 0, !nhwc8 || (groups == 1 && cp == c)};
        d.cl = (len + chunks - 1) / chunks;
        d.cl = (d.cl + 7) / 8 * 8;
        d.chunks = (len + d.cl - 1) / d.cl; /* the rounding may leave fewer */
        const bool vec = d.contig && len % 8 == 0; /* 16-byte aligned vectors within a chunk */
        const unsigned grid = (unsigned)min64(n * groups * d.chunks, kMaxGridX);
        const int threads = block_threads(d.cl / (vec ? 8 : 1));
        return with_storage(st, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if (vec) {
                groupnorm_partials_kernel<T, 8><<<grid, threads, 0, stream>>>((const T *)x,
                                                                              partials, d);
                KERN_LAUNCH_CHECK("groupnorm_partials_kernel");
                groupnorm_apply_kernel<T, 8><<<grid, threads, 0, stream>>>(
                    (const T *)x, (const T *)gamma, (const T *)beta, (T *)y, partials, d,
                    epsilon, scale_per_group != 0);
            } else {
                groupnorm_partials_kernel<T, 1><<<grid, threads, 0, stream>>>((const T *)x,
                                                                              partials, d);
                KERN_LAUNCH_CHECK("groupnorm_partials_kernel");
                groupnorm_apply_kernel<T, 1><<<grid, threads, 0, stream>>>(
                    (const T *)x, (const T *)gamma, (const T *)beta, (T *)y, partials, d,
                    epsilon, scale_per_group != 0);
            }
            KERN_LAUNCH_CHECK("groupnorm_apply_kernel");
            return TCI_OK;
        });
    }
    unsigned grid = (unsigned)min64(n * groups, kMaxGridX);
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        groupnorm_kernel<T><<<grid, block_threads(len), 0, stream>>>(
            (const T *)x, (const T *)gamma, (const T *)beta, (T *)y, n, c, cp, spatial, groups,
            epsilon, scale_per_group != 0, nhwc8 != 0);
        KERN_LAUNCH_CHECK("groupnorm_kernel");
        return TCI_OK;
    });
}
