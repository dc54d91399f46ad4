// ArgMax / ArgMin, CumSum and TopK along one axis, a thread per (outer, inner) run; see
// argreduce.h for the contracts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/argreduce.h"
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"

using namespace kern_util;

namespace {

constexpr int kThreads = 256;

// The value compared or summed: fp32 for float storage, the integer itself otherwise.
__device__ __forceinline__ float value_of(float v) { return v; }
__device__ __forceinline__ float value_of(__half v) { return __half2float(v); }
__device__ __forceinline__ float value_of(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ int64_t value_of(int32_t v) { return v; }
__device__ __forceinline__ int64_t value_of(int64_t v) { return v; }

// What a running sum accumulates in, and how it is stored back.
template <typename T> struct Accumulator {
    using type = float;
};
template <> struct Accumulator<int32_t> {
    using type = int64_t;
};
template <> struct Accumulator<int64_t> {
    using type = int64_t;
};
template <typename T> __device__ __forceinline__ T store_as(typename Accumulator<T>::type v) {
    return from_float<T>(v);
}
template <> __device__ __forceinline__ int32_t store_as<int32_t>(int64_t v) { return (int32_t)v; }
template <> __device__ __forceinline__ int64_t store_as<int64_t>(int64_t v) { return v; }

// Whether a ranks above b in TopK: NaN above every number (numpy's sort order), NaNs equal.
template <typename V> __device__ __forceinline__ bool above(V a, V b) {
    if (b != b) return false;
    return a != a || a > b;
}

// Calls f(TypeTag<T>{}) for the element type of dtype: the float storages, int32 and int64.
template <typename F> tci_status with_element(const char *who, tci_dtype dtype, F &&f) {
    if (dtype == TCI_DTYPE_INT32) return f(TypeTag<int32_t>{});
    if (dtype == TCI_DTYPE_INT64) return f(TypeTag<int64_t>{});
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type(who, dtype, &st));
    return with_storage(st, f);
}

template <typename T, bool MIN, bool LAST>
__global__ void arg_reduce_kernel(const T *x, int64_t *y, int64_t outer, int64_t len,
                                  int64_t inner) {
    const int64_t runs = outer * inner;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < runs;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = div_fast(i, inner), k = i - o * inner;
        const T *p = x + o * len * inner + k;
        auto best = value_of(p[0]);
        int64_t at = 0;
        for (int64_t j = 1; j < len; j++) {
            const auto v = value_of(p[j * inner]);
            // a later value wins when it is strictly better, or equal with LAST; a NaN beats
            // every number in both directions (numpy's argmax and argmin return it)
            const bool v_nan = v != v, best_nan = best != best;
            const bool better = !best_nan && (v_nan || (MIN ? v < best : v > best));
            const bool equal = v_nan ? best_nan : v == best;
            if (better || (LAST && equal)) best = v, at = j;
        }
        y[i] = at;
    }
}

template <typename T, bool EXCLUSIVE, bool REVERSE>
__global__ void cumsum_kernel(const T *x, T *y, int64_t outer, int64_t len, int64_t inner) {
    const int64_t runs = outer * inner;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < runs;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = div_fast(i, inner), k = i - o * inner;
        const int64_t base = o * len * inner + k;
        typename Accumulator<T>::type acc = 0;
        for (int64_t j = 0; j < len; j++) {
            const int64_t at = base + (REVERSE ? len - 1 - j : j) * inner;
            const auto v = value_of(x[at]); // read before the same thread overwrites it
            if (!EXCLUSIVE) acc += v;
            y[at] = store_as<T>(acc);
            if (EXCLUSIVE) acc += v;
        }
    }
}

// Keeps the k best values seen so far in order, best first, in local arrays: an insertion per
// value that beats the k-th. Equal values never displace earlier ones (positions ascend).
template <typename T, bool LARGEST>
__global__ void topk_kernel(const T *x, T *values, int64_t *indices, int64_t outer, int64_t len,
                            int64_t inner, int k) {
    typename Accumulator<T>::type best[KERN_TOPK_MAX_K]; // fp32, or the integer itself
    int64_t pos[KERN_TOPK_MAX_K];
    const int64_t runs = outer * inner;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < runs;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = div_fast(i, inner), kk = i - o * inner;
        const T *p = x + o * len * inner + kk;
        int n = 0;
        for (int64_t j = 0; j < len; j++) {
            const auto v = value_of(p[j * inner]);
            if (n == k && !(LARGEST ? above(v, best[k - 1]) : above(best[k - 1], v))) continue;
            int at = n < k ? n++ : k - 1;
            while (at > 0 && (LARGEST ? above(v, best[at - 1]) : above(best[at - 1], v))) {
                best[at] = best[at - 1];
                pos[at] = pos[at - 1];
                at--;
            }
            best[at] = v;
            pos[at] = j;
        }
        const int64_t out = o * (int64_t)k * inner + kk;
        for (int r = 0; r < k; r++) {
            values[out + r * inner] = store_as<T>(best[r]);
            indices[out + r * inner] = pos[r];
        }
    }
}

tci_status check_extents(const char *who, int64_t outer, int64_t len, int64_t inner) {
    if (outer < 0 || len < 0 || inner < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: negative extent (outer %lld, len %lld, inner %lld)", who,
                         (long long)outer, (long long)len, (long long)inner);
    return TCI_OK;
}

} // namespace

extern "C" tci_status kern_arg_reduce(const void *x, int64_t *y, int64_t outer, int64_t len,
                                      int64_t inner, int is_min, int select_last, tci_dtype dtype,
                                      cudaStream_t stream) {
    TRY_STATUS(check_extents("kern_arg_reduce", outer, len, inner));
    return with_element("kern_arg_reduce", dtype, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        if (outer == 0 || inner == 0) return TCI_OK;
        if (len == 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_arg_reduce: the axis is empty");
        if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_arg_reduce: NULL buffer");
        const unsigned grid = blocks_for(outer * inner, kThreads);
        const T *xt = (const T *)x;
        if (is_min && select_last)
            arg_reduce_kernel<T, true, true><<<grid, kThreads, 0, stream>>>(xt, y, outer, len,
                                                                            inner);
        else if (is_min)
            arg_reduce_kernel<T, true, false><<<grid, kThreads, 0, stream>>>(xt, y, outer, len,
                                                                             inner);
        else if (select_last)
            arg_reduce_kernel<T, false, true><<<grid, kThreads, 0, stream>>>(xt, y, outer, len,
                                                                             inner);
        else
            arg_reduce_kernel<T, false, false><<<grid, kThreads, 0, stream>>>(xt, y, outer, len,
                                                                              inner);
        KERN_LAUNCH_CHECK("arg_reduce_kernel");
        return TCI_OK;
    });
}

extern "C" tci_status kern_cumsum(const void *x, void *y, int64_t outer, int64_t len,
                                  int64_t inner, int exclusive, int reverse, tci_dtype dtype,
                                  cudaStream_t stream) {
    TRY_STATUS(check_extents("kern_cumsum", outer, len, inner));
    return with_element("kern_cumsum", dtype, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        if (outer == 0 || len == 0 || inner == 0) return TCI_OK;
        if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_cumsum: NULL buffer");
        const unsigned grid = blocks_for(outer * inner, kThreads);
        const T *xt = (const T *)x;
        T *yt = (T *)y;
        if (exclusive && reverse)
            cumsum_kernel<T, true, true><<<grid, kThreads, 0, stream>>>(xt, yt, outer, len, inner);
        else if (exclusive)
            cumsum_kernel<T, true, false><<<grid, kThreads, 0, stream>>>(xt, yt, outer, len,
                                                                         inner);
        else if (reverse)
            cumsum_kernel<T, false, true><<<grid, kThreads, 0, stream>>>(xt, yt, outer, len,
                                                                         inner);
        else
            cumsum_kernel<T, false, false><<<grid, kThreads, 0, stream>>>(xt, yt, outer, len,
                                                                          inner);
        KERN_LAUNCH_CHECK("cumsum_kernel");
        return TCI_OK;
    });
}

extern "C" tci_status kern_topk(const void *x, void *values, int64_t *indices, int64_t outer,
                                int64_t len, int64_t inner, int64_t k, int largest,
                                tci_dtype dtype, cudaStream_t stream) {
    TRY_STATUS(check_extents("kern_topk", outer, len, inner));
    return with_element("kern_topk", dtype, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        if (k < 0 || k > len || k > KERN_TOPK_MAX_K)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "kern_topk: k %lld is outside 0..min(len %lld, %d)", (long long)k,
                             (long long)len, KERN_TOPK_MAX_K);
        if (outer == 0 || inner == 0 || k == 0) return TCI_OK;
        if (!x || !values || !indices)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_topk: NULL buffer");
        const unsigned grid = blocks_for(outer * inner, kThreads);
        if (largest)
            topk_kernel<T, true><<<grid, kThreads, 0, stream>>>(
                (const T *)x, (T *)values, indices, outer, len, inner, (int)k);
        else
            topk_kernel<T, false><<<grid, kThreads, 0, stream>>>(
                (const T *)x, (T *)values, indices, outer, len, inner, (int)k);
        KERN_LAUNCH_CHECK("topk_kernel");
        return TCI_OK;
    });
}
