// Softmax, LayerNormalization and RMSNormalization, LRN and the reductions of
// util/reduce_ops.h on fp16, bf16 or fp32 storage with fp32 arithmetic; see norm.h for the
// contracts. Rows up to 1024 elements get a warp each, longer rows a block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "kernels/copy.h"
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

// ---------------------------------------------------------------- softmax

template <typename T, int VEC, bool BLOCK, bool LOG>
__global__ void softmax_rows_kernel(const T *x, T *y, int64_t rows, int64_t len,
                                    int group) {
    __shared__ float shared_m[kWarp], shared_s[kWarp];
    const RowWalk<BLOCK> w(group);
    for (int64_t base = w.first; base < rows; base += w.step) {
        const int64_t row = base + w.sub;
        const bool valid = row < rows;
        const T *xr = x + row * len;
        T *yr = y + row * len;
        float m = -INFINITY, s = 0.0f;
        if (valid)
            for (int64_t i = (int64_t)w.tid * VEC; i < len; i += (int64_t)w.threads * VEC) {
                float f[VEC];
                load_vec<VEC>(xr + i, f);
#pragma unroll
                for (int k = 0; k < VEC; k++) online_add(m, s, f[k]);
            }
        if (BLOCK) block_combine(m, s, shared_m, shared_s);
        else group_combine(m, s, group);
        if (!valid) continue;
        const float shift = LOG ? m + logf(s) : m, inv = 1.0f / s;
        for (int64_t i = (int64_t)w.tid * VEC; i < len; i += (int64_t)w.threads * VEC) {
            float f[VEC];
            load_vec<VEC>(xr + i, f);
#pragma unroll
            for (int k = 0; k < VEC; k++) f[k] = LOG ? f[k] - shift : expf(f[k] - shift) * inv;
            store_vec<VEC>(yr + i, f);
        }
    }
}

template <typename T, bool LOG>
__global__ void softmax_strided_kernel(const T *x, T *y, int64_t outer, int64_t len,
                                       int64_t inner) {
    const int64_t columns = outer * inner;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < columns;
         c += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = div_fast(c, inner), k = c - o * inner;
        const T *xc = x + o * len * inner + k;
        T *yc = y + o * len * inner + k;
        float m = -INFINITY, s = 0.0f;
        for (int64_t i = 0; i < len; i++) online_add(m, s, to_float(xc[i * inner]));
        const float shift = LOG ? m + logf(s) : m, inv = 1.0f / s;
        for (int64_t i = 0; i < len; i++) {
            float f = to_float(xc[i * inner]);
            yc[i * inner] = from_float<T>(LOG ? f - shift : expf(f - shift) * inv);
        }
    }
}

// Grid for the group-per-row paths: 8 warps per block, 32 / group rows per warp.
unsigned group_grid(int64_t rows, int group) {
    return (unsigned)min64(ceil_div(rows, (int64_t)kRowsPerBlock * (kWarp / group)), kMaxGridX);
}

template <typename T, int VEC, bool LOG>
tci_status launch_softmax(const void *x, void *y, int64_t rows, int64_t len, cudaStream_t stream) {
    if (len <= kWarpRowsMax) {
        int group = row_group(ceil_div(len, VEC));
        softmax_rows_kernel<T, VEC, false, LOG><<<group_grid(rows, group), kRowsPerBlock * kWarp, 0,
                                               stream>>>((const T *)x, (T *)y, rows,
                                                         len, group);
    } else {
        unsigned grid = (unsigned)min64(rows, kMaxGridX);
        softmax_rows_kernel<T, VEC, true, LOG><<<grid, block_threads(len / VEC), 0, stream>>>(
            (const T *)x, (T *)y, rows, len, kWarp);
    }
    KERN_LAUNCH_CHECK("softmax_rows_kernel");
    return TCI_OK;
}

template <typename T>
tci_status softmax_rows_typed(const void *x, void *y, int64_t rows, int64_t len, bool log,
                              cudaStream_t stream) {
    bool vec = len % 8 == 0 && aligned16(x) && aligned16(y);
    if (vec)
        return log ? launch_softmax<T, 8, true>(x, y, rows, len, stream)
                   : launch_softmax<T, 8, false>(x, y, rows, len, stream);
    return log ? launch_softmax<T, 1, true>(x, y, rows, len, stream)
               : launch_softmax<T, 1, false>(x, y, rows, len, stream);
}

tci_status softmax_rows(const char *who, const void *x, void *y, int64_t rows, int64_t len,
                        bool log, tci_dtype dtype, cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type(who, dtype, &st));
    if (rows < 0 || len < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative extent (rows %lld, len %lld)",
                         who, (long long)rows, (long long)len);
    if (rows == 0 || len == 0) return TCI_OK;
    if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", who);
    return with_storage(st, [&](auto tag) {
        return softmax_rows_typed<typename decltype(tag)::type>(x, y, rows, len, log, stream);
    });
}

// ---------------------------------------------------------------- layer normalisation

// VEC values of row offset i: x, or x + residual rounded to T once (the value an Add step would
// have stored, so the fused step normalises what the unfused pair does).
template <typename T, int VEC>
__device__ __forceinline__ void load_input(const T *x, const T *residual, int64_t i, float *f) {
    load_vec<VEC>(x + i, f);
    if (!residual) return;
    float r[VEC];
    load_vec<VEC>(residual + i, r);
#pragma unroll
    for (int k = 0; k < VEC; k++) f[k] = to_float(from_float<T>(f[k] + r[k]));
}

// The row's 1 / sqrt(variance + epsilon) from its sum of squared deviations; the row's first
// thread writes the statistics asked for.
__device__ __forceinline__ float row_inv_std(float sq, float inv_len, float epsilon, float mean,
                                             int tid, int64_t row, float *mean_out,
                                             float *inv_std_out) {
    const float inv_std = 1.0f / sqrtf(sq * inv_len + epsilon);
    if (tid == 0) {
        if (mean_out) mean_out[row] = mean;
        if (inv_std_out) inv_std_out[row] = inv_std;
    }
    return inv_std;
}

// y[i .. i + VEC) = (f - mean) * inv_std * gamma + beta (beta may be NULL), f overwritten.
template <typename T, int VEC>
__device__ __forceinline__ void store_normalized(T *yr, const T *gamma, const T *beta, int64_t i,
                                                 float *f, float mean, float inv_std) {
    float g[VEC], b[VEC];
    load_vec<VEC>(gamma + i, g);
    if (beta) load_vec<VEC>(beta + i, b);
#pragma unroll
    for (int k = 0; k < VEC; k++) f[k] = (f[k] - mean) * inv_std * g[k] + (beta ? b[k] : 0.0f);
    store_vec<VEC>(yr + i, f);
}

// rms: RMSNormalization, the same rows without the mean: the first pass sums the squares, the
// second is skipped, and each value is scaled by 1 / sqrt(mean(x^2) + epsilon).
template <typename T, int VEC, bool BLOCK>
__global__ void layernorm_rows_kernel(const T *x, const T *residual, const T *gamma, const T *beta,
                                      T *y, T *sum_out, float *mean_out, float *inv_std_out,
                                      int64_t rows, int64_t len, float epsilon, int group,
                                      bool rms) {
    __shared__ float shared[kWarp];
    const RowWalk<BLOCK> w(group);
    const float inv_len = 1.0f / (float)len;
    for (int64_t base = w.first; base < rows; base += w.step) {
        const int64_t row = base + w.sub;
        const bool valid = row < rows;
        const T *xr = x + row * len;
        const T *rr = residual ? residual + row * len : nullptr;
        T *yr = y + row * len;
        float sum = 0.0f;
        if (valid)
            for (int64_t i = (int64_t)w.tid * VEC; i < len; i += (int64_t)w.threads * VEC) {
                float f[VEC];
                load_input<T, VEC>(xr, rr, i, f);
                if (sum_out) store_vec<VEC>(sum_out + row * len + i, f);
#pragma unroll
                for (int k = 0; k < VEC; k++) sum += rms ? f[k] * f[k] : f[k];
            }
        sum = BLOCK ? block_sum(sum, shared) : group_sum(sum, group);
        // rms is the same for every thread: the second pass's reduction is skipped by all
        const float mean = rms ? 0.0f : sum * inv_len;
        float sq = rms ? sum : 0.0f;
        if (!rms) {
            if (valid)
                for (int64_t i = (int64_t)w.tid * VEC; i < len; i += (int64_t)w.threads * VEC) {
                    float f[VEC];
                    load_input<T, VEC>(xr, rr, i, f);
#pragma unroll
                    for (int k = 0; k < VEC; k++) sq += (f[k] - mean) * (f[k] - mean);
                }
            sq = BLOCK ? block_sum(sq, shared) : group_sum(sq, group);
        }
        if (!valid) continue;
        const float inv_std =
            row_inv_std(sq, inv_len, epsilon, mean, w.tid, row, mean_out, inv_std_out);
        for (int64_t i = (int64_t)w.tid * VEC; i < len; i += (int64_t)w.threads * VEC) {
            float f[VEC];
            load_input<T, VEC>(xr, rr, i, f);
            store_normalized<T, VEC>(yr, gamma, beta, i, f, mean, inv_std);
        }
    }
}

// layernorm_rows_kernel with the row held in registers: each thread's CHUNKS vectors of VEC
// values (chunk c at (c * threads + tid) * VEC, the three-pass kernel's order, so the sums and
// the results are the same bits) are read from global memory once instead of three times.
template <typename T, int VEC, bool BLOCK, int CHUNKS>
__global__ void layernorm_cached_kernel(const T *x, const T *residual, const T *gamma,
                                        const T *beta, T *y, T *sum_out, float *mean_out,
                                        float *inv_std_out, int64_t rows, int64_t len,
                                        float epsilon, int group, bool rms) {
    __shared__ float shared[kWarp];
    const RowWalk<BLOCK> w(group);
    const float inv_len = 1.0f / (float)len;
    for (int64_t base = w.first; base < rows; base += w.step) {
        const int64_t row = base + w.sub;
        const bool valid = row < rows;
        const T *xr = x + row * len;
        const T *rr = residual ? residual + row * len : nullptr;
        float v[CHUNKS][VEC];
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t i = ((int64_t)c * w.threads + w.tid) * VEC;
            if (!valid || i >= len) continue;
            load_input<T, VEC>(xr, rr, i, v[c]);
            if (sum_out) store_vec<VEC>(sum_out + row * len + i, v[c]);
#pragma unroll
            for (int k = 0; k < VEC; k++) sum += rms ? v[c][k] * v[c][k] : v[c][k];
        }
        sum = BLOCK ? block_sum(sum, shared) : group_sum(sum, group);
        const float mean = rms ? 0.0f : sum * inv_len;
        float sq = rms ? sum : 0.0f;
        if (!rms) {
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
                const int64_t i = ((int64_t)c * w.threads + w.tid) * VEC;
                if (!valid || i >= len) continue;
#pragma unroll
                for (int k = 0; k < VEC; k++) sq += (v[c][k] - mean) * (v[c][k] - mean);
            }
            sq = BLOCK ? block_sum(sq, shared) : group_sum(sq, group);
        }
        if (!valid) continue;
        const float inv_std =
            row_inv_std(sq, inv_len, epsilon, mean, w.tid, row, mean_out, inv_std_out);
        T *yr = y + row * len;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t i = ((int64_t)c * w.threads + w.tid) * VEC;
            if (i < len) store_normalized<T, VEC>(yr, gamma, beta, i, v[c], mean, inv_std);
        }
    }
}

// Calls f(std::integral_constant<int, C>{}) for the fewest chunks C of 1, 2, 4, 8 that hold
// `accesses` vectors over `threads` threads; false (f not called) where a row needs more.
template <typename F> bool with_chunks(int64_t accesses, int64_t threads, F &&f) {
    const int64_t need = ceil_div(accesses, threads);
    if (need <= 1) return f(std::integral_constant<int, 1>{}), true;
    if (need <= 2) return f(std::integral_constant<int, 2>{}), true;
    if (need <= 4) return f(std::integral_constant<int, 4>{}), true;
    if (need <= 8) return f(std::integral_constant<int, 8>{}), true;
    return false;
}

template <typename T, int VEC>
tci_status launch_layernorm(const void *x, const void *residual, const void *gamma,
                            const void *beta, void *y, void *sum_out, float *mean_out,
                            float *inv_std_out, int64_t rows, int64_t len, float epsilon,
                            bool rms, cudaStream_t stream) {
    const T *xt = (const T *)x, *rt = (const T *)residual, *gt = (const T *)gamma,
            *bt = (const T *)beta;
    T *yt = (T *)y, *st = (T *)sum_out;
    if constexpr (VEC == 8) {
        bool launched;
        if (len <= kWarpRowsMax) {
            /* a warp (or less) per row, in blocks of 2 warps where the rows are few, so that a
             * transformer's 197 or 128 rows spread over the SMs (8 warps a block leave most of
             * them idle) */
            const int group = row_group(ceil_div(len, VEC));
            const int warps = rows * group >= (int64_t)8 * 1024 * kWarp ? kRowsPerBlock : 2;
            const unsigned grid = (unsigned)min64(
                ceil_div(rows, (int64_t)warps * (kWarp / group)), kMaxGridX);
            launched = with_chunks(ceil_div(len, VEC), group, [&](auto chunks) {
                layernorm_cached_kernel<T, VEC, false, decltype(chunks)::value>
                    <<<grid, warps * kWarp, 0, stream>>>(xt, rt, gt, bt, yt, st, mean_out,
                                                         inv_std_out, rows, len, epsilon, group,
                                                         rms);
            });
        } else {
            const unsigned grid = (unsigned)min64(rows, kMaxGridX);
            const int threads = block_threads(len / VEC);
            launched = with_chunks(ceil_div(len, VEC), threads, [&](auto chunks) {
                layernorm_cached_kernel<T, VEC, true, decltype(chunks)::value>
                    <<<grid, threads, 0, stream>>>(xt, rt, gt, bt, yt, st, mean_out,
                                                   inv_std_out, rows, len, epsilon, kWarp, rms);
            });
        }
        if (launched) {
            KERN_LAUNCH_CHECK("layernorm_cached_kernel");
            return TCI_OK;
        }
    }
    if (len <= kWarpRowsMax) {
        int group = row_group(ceil_div(len, VEC));
        layernorm_rows_kernel<T, VEC, false><<<group_grid(rows, group), kRowsPerBlock * kWarp, 0,
                                            stream>>>(xt, rt, gt, bt, yt, st, mean_out,
                                                      inv_std_out, rows, len, epsilon, group, rms);
    } else {
        unsigned grid = (unsigned)min64(rows, kMaxGridX);
        layernorm_rows_kernel<T, VEC, true><<<grid, block_threads(len / VEC), 0, stream>>>(
            xt, rt, gt, bt, yt, st, mean_out, inv_std_out, rows, len, epsilon, kWarp, rms);
    }
    KERN_LAUNCH_CHECK("layernorm_rows_kernel");
    return TCI_OK;
}


// ---------------------------------------------------------------- local response normalisation

// One thread per stored element of (n, c, spatial): dense strides (c*spatial, spatial, 1) or
// NHWC8 (spatial*cp, 1, cp). NHWC8's padding channels are written as zeros.
template <typename T>
__global__ void lrn_kernel(const T *x, T *y, int64_t n, int64_t c, int64_t cp, int64_t spatial,
                           bool nhwc, int64_t before, int64_t after, float scale, float beta,
                           float bias) {
    const int64_t total = n * cp * spatial;
    const int64_t cs = nhwc ? 1 : spatial, ss = nhwc ? cp : 1;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t img, ch, pos;
        if (nhwc) {
            ch = e % cp;
            pos = (e / cp) % spatial;
            img = e / (cp * spatial);
        } else {
            pos = e % spatial;
            ch = (e / spatial) % cp;
            img = e / (cp * spatial);
        }
        if (ch >= c) {
            y[e] = from_float<T>(0.0f);
            continue;
        }
        const T *base = x + img * cp * spatial + pos * ss;
        const int64_t lo = ch - before < 0 ? 0 : ch - before;
        const int64_t hi = ch + after > c - 1 ? c - 1 : ch + after;
        float sq = 0.0f;
        for (int64_t j = lo; j <= hi; j++) {
            const float v = to_float(base[j * cs]);
            sq += v * v;
        }
        y[e] = from_float<T>(to_float(base[ch * cs]) / powf(bias + scale * sq, beta));
    }
}

// ---------------------------------------------------------------- reductions

template <typename T, int VEC, bool BLOCK, reduce_op OP>
__global__ void reduce_rows_kernel(const T *x, T *y, int64_t rows, int64_t len,
                                   float scale, int group) {
    __shared__ float shared[kWarp];
    const RowWalk<BLOCK> w(group);
    for (int64_t base = w.first; base < rows; base += w.step) {
        const int64_t row = base + w.sub;
        const bool valid = row < rows;
        const T *xr = x + row * len;
        float acc = Reduction<OP>::start();
        if (valid)
            for (int64_t i = (int64_t)w.tid * VEC; i < len; i += (int64_t)w.threads * VEC) {
                float f[VEC];
                load_vec<VEC>(xr + i, f);
#pragma unroll
                for (int k = 0; k < VEC; k++) acc = Reduction<OP>::combine(acc, Reduction<OP>::map(f[k]));
            }
        acc = BLOCK ? block_reduce<OP>(acc, shared) : group_reduce<OP>(acc, group);
        if (valid && w.tid == 0) y[row] = from_float<T>(reduce_finish<OP>(acc, scale));
    }
}

// x viewed as (outer, len, inner), reduced over len. threadIdx.x walks inner in VEC-wide vectors
// (coalesced), threadIdx.y splits len; partial results meet in shared memory, laid out [k][ty][tx]
// so that neighbouring lanes hit neighbouring banks. Block sizes are powers of two, at most
// kColumnThreads threads.
constexpr int kColumnThreads = 1024;

template <typename T, int VEC, reduce_op OP>
__global__ void reduce_columns_kernel(const T *x, T *y, int64_t outer, int64_t len,
                                      int64_t inner, float scale) {
    __shared__ float part[kColumnThreads * VEC];
    const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
        for (int64_t kb = (int64_t)blockIdx.x * bx * VEC; kb < inner;
             kb += (int64_t)gridDim.x * bx * VEC) {
            const int64_t k = kb + (int64_t)tx * VEC;
            float acc[VEC];
#pragma unroll
            for (int v = 0; v < VEC; v++) acc[v] = Reduction<OP>::start();
            if (k < inner) {
                const T *col = x + o * len * inner + k;
#pragma unroll 4
                for (int64_t r = ty; r < len; r += by) {
                    float f[VEC];
                    load_vec<VEC>(col + r * inner, f);
#pragma unroll
                    for (int v = 0; v < VEC; v++)
                        acc[v] = Reduction<OP>::combine(acc[v], Reduction<OP>::map(f[v]));
                }
            }
#pragma unroll
            for (int v = 0; v < VEC; v++) part[(v * by + ty) * bx + tx] = acc[v];
            __syncthreads();
            for (int h = by / 2; h > 0; h /= 2) {
                if (ty < h) {
#pragma unroll
                    for (int v = 0; v < VEC; v++) {
                        float *p = &part[(v * by + ty) * bx + tx];
                        *p = Reduction<OP>::combine(*p, part[(v * by + ty + h) * bx + tx]);
                    }
                }
                __syncthreads();
            }
            if (ty == 0 && k < inner) {
                float r[VEC];
#pragma unroll
                for (int v = 0; v < VEC; v++)
                    r[v] = reduce_finish<OP>(part[v * by * bx + tx], scale);
                store_vec<VEC>(y + o * inner + k, r);
            }
            __syncthreads();
        }
    }
}

template <typename T, int VEC, reduce_op OP>
tci_status launch_reduce_columns(const void *x, void *y, int64_t outer, int64_t len,
                                 int64_t inner, float scale, cudaStream_t stream) {
    const int64_t vectors = inner / VEC;
    int bx = 1;
    while (bx < kWarp && bx < vectors) bx *= 2;
    const int64_t column_blocks = ceil_div(vectors, bx);
    // few blocks: make each one deep, so that enough loads are in flight
    const int threads = column_blocks * outer < 4 * 132 ? kColumnThreads : 256;
    int by = threads / bx;
    while (by > 1 && by / 2 >= len) by /= 2;
    dim3 block((unsigned)bx, (unsigned)by);
    dim3 grid((unsigned)min64(column_blocks, kMaxGridX), (unsigned)min64(outer, kMaxGridY));
    reduce_columns_kernel<T, VEC, OP><<<grid, block, 0, stream>>>((const T *)x, (T *)y, outer,
                                                              len, inner, scale);
    KERN_LAUNCH_CHECK("reduce_columns_kernel");
    return TCI_OK;
}

struct ReduceGeneric {
    int kept_rank, reduced_rank;
    int64_t kept_shape[kMaxRank], kept_stride[kMaxRank];
    int64_t reduced_shape[kMaxRank], reduced_stride[kMaxRank];
    int64_t outputs, count;
    float scale;
};

__device__ __forceinline__ int64_t unravel(int64_t i, int rank, const int64_t *shape,
                                           const int64_t *stride) {
    int64_t off = 0;
#pragma unroll
    for (int k = kMaxRank - 1; k >= 0; k--) {
        if (k >= rank) continue;
        int64_t q = div_fast(i, shape[k]);
        off += (i - q * shape[k]) * stride[k];
        i = q;
    }
    return off;
}

// Any other pattern (e.g. reducing dims 0 and 2 of three): a warp per output element.
template <typename T, reduce_op OP>
__global__ void reduce_generic_kernel(const T *x, T *y, ReduceGeneric d) {
    const int lane = threadIdx.x % kWarp, warps = blockDim.x / kWarp;
    for (int64_t out = (int64_t)blockIdx.x * warps + threadIdx.x / kWarp; out < d.outputs;
         out += (int64_t)gridDim.x * warps) {
        const int64_t base = unravel(out, d.kept_rank, d.kept_shape, d.kept_stride);
        float acc = Reduction<OP>::start();
        for (int64_t j = lane; j < d.count; j += kWarp)
            acc = Reduction<OP>::combine(
                acc, Reduction<OP>::map(to_float(
                         x[base + unravel(j, d.reduced_rank, d.reduced_shape, d.reduced_stride)])));
        acc = group_reduce<OP>(acc, kWarp);
        if (lane == 0) y[out] = from_float<T>(reduce_finish<OP>(acc, d.scale));
    }
}

template <typename T, int VEC, reduce_op OP>
tci_status launch_reduce_rows(const void *x, void *y, int64_t rows, int64_t len, float scale,
                              cudaStream_t stream) {
    if (len <= kWarpRowsMax) {
        int group = row_group(ceil_div(len, VEC));
        reduce_rows_kernel<T, VEC, false, OP><<<group_grid(rows, group), kRowsPerBlock * kWarp, 0,
                                             stream>>>((const T *)x, (T *)y, rows, len,
                                                       scale, group);
    } else {
        unsigned grid = (unsigned)min64(rows, kMaxGridX);
        reduce_rows_kernel<T, VEC, true, OP><<<grid, block_threads(len / VEC), 0, stream>>>(
            (const T *)x, (T *)y, rows, len, scale, kWarp);
    }
    KERN_LAUNCH_CHECK("reduce_rows_kernel");
    return TCI_OK;
}

// The bits of a quiet NaN in each storage type.
template <typename T> constexpr uint32_t kQuietNan = 0x7fc00000u;
template <> constexpr uint32_t kQuietNan<__half> = 0x7e00u;
template <> constexpr uint32_t kQuietNan<__nv_bfloat16> = 0x7fc0u;

// The bits of v in storage type T, on the host.
template <typename T> uint32_t storage_bits(float v);
template <> uint32_t storage_bits<float>(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}
template <> uint32_t storage_bits<__half>(float v) { return float_to_half(v); }
template <> uint32_t storage_bits<__nv_bfloat16>(float v) { return float_to_bfloat16(v); }

// kern_reduce_dtype after validation: outputs > 0 values of count inputs each.
template <typename T, reduce_op OP>
tci_status reduce_typed(const void *x, void *y, int rank, const int64_t *dims, unsigned reduce_mask,
                        int64_t outputs, int64_t count, cudaStream_t stream) {
    if (count == 0) // an empty reduction: the finished start value, 0/0 for a mean
        return kern_fill(y, outputs, (int)sizeof(T),
                         Reduction<OP>::kDivides
                             ? kQuietNan<T>
                             : storage_bits<T>(Reduction<OP>::finish(Reduction<OP>::start())),
                         stream);
    const float scale = Reduction<OP>::kDivides ? 1.0f / (float)count : 1.0f;

    // groups of adjacent dims of one kind, size-1 dims dropped
    int groups = 0;
    int64_t size[kMaxRank];
    bool reduced[kMaxRank];
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1) continue;
        bool r = reduce_mask >> d & 1;
        if (groups > 0 && reduced[groups - 1] == r) {
            size[groups - 1] *= dims[d];
            continue;
        }
        size[groups] = dims[d];
        reduced[groups] = r;
        groups++;
    }
    int reduced_groups = 0, where = -1;
    for (int g = 0; g < groups; g++)
        if (reduced[g]) reduced_groups++, where = g;
    if (reduced_groups == 0) // each value on its own, through the row's map and finish (|x|, x*x)
        return launch_reduce_rows<T, 1, OP>(x, y, outputs, 1, scale, stream);
    if (reduced_groups == 1 && where == groups - 1) {
        if (count % 8 == 0 && aligned16(x))
            return launch_reduce_rows<T, 8, OP>(x, y, outputs, count, scale, stream);
        return launch_reduce_rows<T, 1, OP>(x, y, outputs, count, scale, stream);
    }
    if (reduced_groups == 1) {
        int64_t inner = 1;
        for (int g = where + 1; g < groups; g++) inner *= size[g];
        int64_t outer = outputs / inner;
        if (inner % 8 == 0 && aligned16(x) && aligned16(y))
            return launch_reduce_columns<T, 8, OP>(x, y, outer, count, inner, scale, stream);
        return launch_reduce_columns<T, 1, OP>(x, y, outer, count, inner, scale, stream);
    }
    ReduceGeneric rg;
    memset(&rg, 0, sizeof rg);
    int64_t stride = 1;
    int64_t strides[kMaxRank];
    for (int g = groups - 1; g >= 0; g--) strides[g] = stride, stride *= size[g];
    for (int g = 0; g < groups; g++) {
        if (reduced[g]) {
            rg.reduced_shape[rg.reduced_rank] = size[g];
            rg.reduced_stride[rg.reduced_rank++] = strides[g];
        } else {
            rg.kept_shape[rg.kept_rank] = size[g];
            rg.kept_stride[rg.kept_rank++] = strides[g];
        }
    }
    rg.outputs = outputs, rg.count = count, rg.scale = scale;
    unsigned grid = (unsigned)min64(ceil_div(outputs, kRowsPerBlock), kMaxGridX);
    reduce_generic_kernel<T, OP><<<grid, kRowsPerBlock * kWarp, 0, stream>>>((const T *)x,
                                                                             (T *)y, rg);
    KERN_LAUNCH_CHECK("reduce_generic_kernel");
    return TCI_OK;
}

} // namespace

// ---------------------------------------------------------------- launchers

extern "C" tci_status kern_softmax_rows(const void *x, void *y, int64_t rows, int64_t len,
                                        cudaStream_t stream) {
    return softmax_rows("kern_softmax_rows", x, y, rows, len, false, TCI_DTYPE_FLOAT16, stream);
}

extern "C" tci_status kern_log_softmax_rows(const void *x, void *y, int64_t rows, int64_t len,
                                            cudaStream_t stream) {
    return softmax_rows("kern_log_softmax_rows", x, y, rows, len, true, TCI_DTYPE_FLOAT16,
                        stream);
}

extern "C" tci_status kern_softmax_rows_dtype(const void *x, void *y, int64_t rows, int64_t len,
                                              tci_dtype dtype, cudaStream_t stream) {
    return softmax_rows("kern_softmax_rows", x, y, rows, len, false, dtype, stream);
}

extern "C" tci_status kern_log_softmax_rows_dtype(const void *x, void *y, int64_t rows,
                                                  int64_t len, tci_dtype dtype,
                                                  cudaStream_t stream) {
    return softmax_rows("kern_log_softmax_rows", x, y, rows, len, true, dtype, stream);
}

extern "C" tci_status kern_softmax_strided(const void *x, void *y, int64_t outer, int64_t len,
                                           int64_t inner, int log, cudaStream_t stream) {
    return kern_softmax_strided_dtype(x, y, outer, len, inner, log, TCI_DTYPE_FLOAT16, stream);
}

extern "C" tci_status kern_softmax_strided_dtype(const void *x, void *y, int64_t outer,
                                                 int64_t len, int64_t inner, int log,
                                                 tci_dtype dtype, cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_softmax_strided", dtype, &st));
    if (outer < 0 || len < 0 || inner < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_softmax_strided: negative extent (outer %lld, len %lld, inner %lld)",
                         (long long)outer, (long long)len, (long long)inner);
    if (outer == 0 || len == 0 || inner == 0) return TCI_OK;
    if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_softmax_strided: NULL buffer");
    if (inner == 1)
        return softmax_rows("kern_softmax_strided", x, y, outer, len, log != 0, dtype, stream);
    const int block = 256;
    unsigned grid = (unsigned)min64(ceil_div(outer * inner, block), kMaxGridX);
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (log)
            softmax_strided_kernel<T, true>
                <<<grid, block, 0, stream>>>((const T *)x, (T *)y, outer, len, inner);
        else
            softmax_strided_kernel<T, false>
                <<<grid, block, 0, stream>>>((const T *)x, (T *)y, outer, len, inner);
        KERN_LAUNCH_CHECK("softmax_strided_kernel");
        return TCI_OK;
    });
}

extern "C" tci_status kern_layernorm_rows(const void *x, const void *gamma, const void *beta,
                                          void *y, float *mean_out, float *inv_std_out,
                                          int64_t rows, int64_t len, float epsilon,
                                          cudaStream_t stream) {
    return kern_layernorm_rows_dtype(x, gamma, beta, y, mean_out, inv_std_out, rows, len, epsilon,
                                     TCI_DTYPE_FLOAT16, stream);
}

extern "C" tci_status kern_layernorm_rows_dtype(const void *x, const void *gamma,
                                                const void *beta, void *y, float *mean_out,
                                                float *inv_std_out, int64_t rows, int64_t len,
                                                float epsilon, tci_dtype dtype,
                                                cudaStream_t stream) {
    return kern_layernorm_residual_rows_dtype(x, NULL, gamma, beta, y, NULL, mean_out,
                                              inv_std_out, rows, len, epsilon, dtype, stream);
}

// LayerNormalization (rms false) or RMSNormalization (rms true) of rows of x (+ residual).
static tci_status norm_rows(const char *who, const void *x, const void *residual,
                            const void *gamma, const void *beta, void *y, void *sum_out,
                            float *mean_out, float *inv_std_out, int64_t rows, int64_t len,
                            float epsilon, bool rms, tci_dtype dtype, cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type(who, dtype, &st));
    if (rows < 0 || len < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative extent (rows %lld, len %lld)",
                            who, (long long)rows, (long long)len);
    if (!(epsilon >= 0.0f))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: epsilon %g is not >= 0", who,
                            (double)epsilon);
    if (rows == 0 || len == 0) return TCI_OK;
    if (!x || !y || !gamma)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL %s", who,
                            !gamma ? "gamma" : "buffer");
    if (!residual && sum_out)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: a sum output without a residual", who);
    bool vec = len % 8 == 0 && aligned16(x) && aligned16(y) && aligned16(gamma) &&
               (!beta || aligned16(beta)) && (!residual || aligned16(residual)) &&
               (!sum_out || aligned16(sum_out));
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return vec ? launch_layernorm<T, 8>(x, residual, gamma, beta, y, sum_out, mean_out,
                                            inv_std_out, rows, len, epsilon, rms, stream)
                   : launch_layernorm<T, 1>(x, residual, gamma, beta, y, sum_out, mean_out,
                                            inv_std_out, rows, len, epsilon, rms, stream);
    });
}

extern "C" tci_status kern_layernorm_residual_rows_dtype(const void *x, const void *residual,
                                                         const void *gamma, const void *beta,
                                                         void *y, void *sum_out, float *mean_out,
                                                         float *inv_std_out, int64_t rows,
                                                         int64_t len, float epsilon,
                                                         tci_dtype dtype, cudaStream_t stream) {
    return norm_rows("kern_layernorm_rows", x, residual, gamma, beta, y, sum_out, mean_out,
                     inv_std_out, rows, len, epsilon, false, dtype, stream);
}

extern "C" tci_status kern_rmsnorm_residual_rows_dtype(const void *x, const void *residual,
                                                       const void *gamma, void *y, void *sum_out,
                                                       float *inv_rms_out, int64_t rows,
                                                       int64_t len, float epsilon, tci_dtype dtype,
                                                       cudaStream_t stream) {
    return norm_rows("kern_rmsnorm_rows", x, residual, gamma, NULL, y, sum_out, NULL, inv_rms_out,
                     rows, len, epsilon, true, dtype, stream);
}

extern "C" tci_status kern_reduce_dtype(const void *x, void *y, int rank, const int64_t *dims,
                                        unsigned reduce_mask, reduce_op op, tci_dtype dtype,
                                        cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_reduce", dtype, &st));
    if (rank < 0 || rank > kMaxRank)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_reduce: rank %d is outside 0..%d", rank,
                         kMaxRank);
    if (reduce_mask >> rank)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_reduce: reduce mask 0x%x names dims beyond rank %d", reduce_mask,
                         rank);
    if ((unsigned)op >= REDUCE_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_reduce: unknown op %d", (int)op);
    if (rank > 0 && !dims) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_reduce: dims is NULL");
    int64_t outputs = 1, count = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_reduce: dims[%d] is %lld", d,
                             (long long)dims[d]);
        if (reduce_mask >> d & 1) count *= dims[d];
        else outputs *= dims[d];
    }
    if (outputs == 0) return TCI_OK;
    if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_reduce: NULL buffer");
    return with_storage(st, [&](auto tag) {
        return with_reduce_op(op, [&](auto op_tag) {
            return reduce_typed<typename decltype(tag)::type, decltype(op_tag)::value>(
                x, y, rank, dims, reduce_mask, outputs, count, stream);
        });
    });
}

extern "C" tci_status kern_reduce(const void *x, void *y, int rank, const int64_t *dims,
                                  unsigned reduce_mask, reduce_op op, cudaStream_t stream) {
    return kern_reduce_dtype(x, y, rank, dims, reduce_mask, op, TCI_DTYPE_FLOAT16, stream);
}

extern "C" tci_status kern_lrn_dtype(const void *x, void *y, int64_t n, int64_t c,
                                     int64_t spatial, int nhwc8, int64_t size, float alpha,
                                     float beta, float bias, tci_dtype dtype,
                                     cudaStream_t stream) {
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_lrn", dtype, &st));
    if (n < 0 || c < 0 || spatial < 0 || size < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_lrn: bad extents (n %lld, c %lld, spatial %lld, size %lld)",
                         (long long)n, (long long)c, (long long)spatial, (long long)size);
    const int64_t cp = nhwc8 ? (c + 7) / 8 * 8 : c;
    const int64_t total = n * cp * spatial;
    if (total == 0) return TCI_OK;
    if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_lrn: NULL buffer");
    if (x == y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_lrn: y must not alias x");
    const int64_t before = (size - 1) / 2, after = size - 1 - before;
    const float scale = alpha / (float)size;
    const int block = 256;
    unsigned grid = (unsigned)min64(ceil_div(total, block), kMaxGridX);
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        lrn_kernel<T><<<grid, block, 0, stream>>>((const T *)x, (T *)y, n, c, cp, spatial,
                                                  nhwc8 != 0, before, after, scale, beta, bias);
        KERN_LAUNCH_CHECK("lrn_kernel");
        return TCI_OK;
    });
}
