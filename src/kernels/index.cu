// Index kernels (GatherElements, ScatterElements, ScatterND, OneHot, Trilu): see index.h for the
// contracts. Raw elements move as unsigned integers of their size; scatter reductions combine in
// fp32 (float storage) or int64 (integer storage).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/index.h"
// util/status.h has no extern "C" guard of its own; cuda_check.h includes it after this
extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"

using namespace kern_util;

namespace {

constexpr int kMaxRank = KERN_INDEX_MAX_RANK;
constexpr int kBlock = 256;

bool valid_elem_size(int s) { return s == 1 || s == 2 || s == 4 || s == 8; }

// Dims and row-major strides of the data and of the indices (and updates), by value.
struct IndexDesc {
    int rank;
    int axis;
    int64_t data_dims[kMaxRank], data_strides[kMaxRank];
    int64_t index_dims[kMaxRank], index_strides[kMaxRank];
};

void row_major(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

int64_t product(int rank, const int64_t *dims) {
    int64_t p = 1;
    for (int d = 0; d < rank; d++) p *= dims[d];
    return p;
}

template <typename Index>
__device__ __forceinline__ int64_t load_index(const void *indices, int64_t i) {
    return (int64_t)((const Index *)indices)[i];
}

// Wraps a negative index; false (and the flag raised) when it is still outside [0, dim).
__device__ __forceinline__ bool wrap(int64_t *v, int64_t dim, int *error_flag) {
    if (*v < 0) *v += dim;
    if (*v >= 0 && *v < dim) return true;
    if (error_flag) *error_flag = 1;
    return false;
}

// ---------------------------------------------------------------- combining an update

__device__ __forceinline__ float combine_f(float a, float b, int op) {
    switch (op) {
    case KERN_SCATTER_ADD: return a + b;
    case KERN_SCATTER_MUL: return a * b;
    case KERN_SCATTER_MAX: return (b > a || b != b) ? b : a;
    case KERN_SCATTER_MIN: return (b < a || b != b) ? b : a;
    default: return b;
    }
}

__device__ __forceinline__ int64_t combine_i(int64_t a, int64_t b, int op) {
    switch (op) {
    case KERN_SCATTER_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case KERN_SCATTER_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case KERN_SCATTER_MAX: return b > a ? b : a;
    case KERN_SCATTER_MIN: return b < a ? b : a;
    default: return b;
    }
}

// dst = combine(dst, v): the raw unsigned types only assign (reduce NONE).
template <typename T> struct Combine {
    __device__ static void apply(T *dst, T v, int) { *dst = v; }
};
template <> struct Combine<__half> {
    __device__ static void apply(__half *dst, __half v, int op) {
        *dst = __float2half_rn(combine_f(__half2float(*dst), __half2float(v), op));
    }
};
template <> struct Combine<__nv_bfloat16> {
    __device__ static void apply(__nv_bfloat16 *dst, __nv_bfloat16 v, int op) {
        *dst = __float2bfloat16_rn(combine_f(__bfloat162float(*dst), __bfloat162float(v), op));
    }
};
template <> struct Combine<float> {
    __device__ static void apply(float *dst, float v, int op) { *dst = combine_f(*dst, v, op); }
};
template <> struct Combine<int32_t> {
    __device__ static void apply(int32_t *dst, int32_t v, int op) {
        *dst = (int32_t)combine_i(*dst, v, op);
    }
};
template <> struct Combine<int64_t> {
    __device__ static void apply(int64_t *dst, int64_t v, int op) {
        *dst = combine_i(*dst, v, op);
    }
};

// ---------------------------------------------------------------- GatherElements

template <typename T, typename Index>
__global__ void gather_elements_kernel(T *__restrict__ out, const T *__restrict__ data,
                                       const void *__restrict__ indices, int64_t total,
                                       IndexDesc d, int *error_flag) {
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e, src = 0;
        for (int k = d.rank - 1; k >= 0; k--) {
            int64_t q = div_fast(r, d.index_dims[k]);
            if (k != d.axis) src += (r - q * d.index_dims[k]) * d.data_strides[k];
            r = q;
        }
        int64_t v = load_index<Index>(indices, e);
        int64_t dim = d.data_dims[d.axis];
        if (!wrap(&v, dim, error_flag)) {
            if (dim == 0) {
                out[e] = T{};
                continue;
            }
            v = v < 0 ? 0 : dim - 1;
        }
        out[e] = data[src + v * d.data_strides[d.axis]];
    }
}

template <typename T>
tci_status launch_gather_elements(void *out, const void *data, const void *indices, bool i32,
                                  int64_t total, const IndexDesc &d, int *error_flag,
                                  cudaStream_t stream) {
    unsigned grid = blocks_for(total, kBlock);
    if (i32)
        gather_elements_kernel<T, int32_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, (const T *)data, indices, total, d, error_flag);
    else
        gather_elements_kernel<T, int64_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, (const T *)data, indices, total, d, error_flag);
    KERN_LAUNCH_CHECK("gather_elements_kernel");
    return TCI_OK;
}

// ---------------------------------------------------------------- ScatterElements

// One thread per line of the indices along the axis: its updates apply in order.
template <typename T, typename Index>
__global__ void scatter_elements_kernel(T *__restrict__ out, const void *__restrict__ indices,
                                        const T *__restrict__ updates, int64_t lines, IndexDesc d,
                                        int op, int *error_flag) {
    int64_t len = d.index_dims[d.axis], dim = d.data_dims[d.axis];
    for (int64_t line = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; line < lines;
         line += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = line, ioff = 0, doff = 0;
        for (int k = d.rank - 1; k >= 0; k--) {
            if (k == d.axis) continue;
            int64_t q = div_fast(r, d.index_dims[k]);
            int64_t c = r - q * d.index_dims[k];
            ioff += c * d.index_strides[k];
            doff += c * d.data_strides[k];
            r = q;
        }
        for (int64_t a = 0; a < len; a++) {
            int64_t i = ioff + a * d.index_strides[d.axis];
            int64_t v = load_index<Index>(indices, i);
            if (!wrap(&v, dim, error_flag)) continue;
            Combine<T>::apply(out + doff + v * d.data_strides[d.axis], updates[i], op);
        }
    }
}

template <typename T>
tci_status launch_scatter_elements(void *out, const void *indices, bool i32, const void *updates,
                                   int64_t lines, const IndexDesc &d, int op, int *error_flag,
                                   cudaStream_t stream) {
    unsigned grid = blocks_for(lines, kBlock);
    if (i32)
        scatter_elements_kernel<T, int32_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, indices, (const T *)updates, lines, d, op, error_flag);
    else
        scatter_elements_kernel<T, int64_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, indices, (const T *)updates, lines, d, op, error_flag);
    KERN_LAUNCH_CHECK("scatter_elements_kernel");
    return TCI_OK;
}

// ---------------------------------------------------------------- ScatterND

// One thread per element of a slice: it walks every index tuple in order.
template <typename T, typename Index>
__global__ void scatter_nd_kernel(T *__restrict__ out, const void *__restrict__ indices,
                                  const T *__restrict__ updates, int64_t slice,
                                  int64_t num_updates, int k, IndexDesc d, int op,
                                  int *error_flag) {
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < slice;
         j += (int64_t)gridDim.x * blockDim.x) {
        for (int64_t u = 0; u < num_updates; u++) {
            int64_t base = 0;
            bool ok = true;
            for (int t = 0; t < k && ok; t++) {
                int64_t v = load_index<Index>(indices, u * k + t);
                ok = wrap(&v, d.data_dims[t], error_flag);
                base += v * d.data_strides[t];
            }
            if (ok) Combine<T>::apply(out + base + j, updates[u * slice + j], op);
        }
    }
}

template <typename T>
tci_status launch_scatter_nd(void *out, const void *indices, bool i32, const void *updates,
                             int64_t slice, int64_t num_updates, int k, const IndexDesc &d,
                             int op, int *error_flag, cudaStream_t stream) {
    unsigned grid = blocks_for(slice, kBlock);
    if (i32)
        scatter_nd_kernel<T, int32_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, indices, (const T *)updates, slice, num_updates, k, d, op, error_flag);
    else
        scatter_nd_kernel<T, int64_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, indices, (const T *)updates, slice, num_updates, k, d, op, error_flag);
    KERN_LAUNCH_CHECK("scatter_nd_kernel");
    return TCI_OK;
}

// Calls f(TypeTag<T>{}) with the type a scatter of dtype and reduce works on: the raw unsigned
// type of the element size for NONE, the arithmetic type otherwise.
template <typename F>
tci_status with_scatter_type(const char *who, tci_dtype dtype, kern_scatter_reduce reduce, F &&f) {
    if (reduce == KERN_SCATTER_NONE) {
        switch (tci_dtype_size(dtype)) {
        case 1: return f(TypeTag<uint8_t>{});
        case 2: return f(TypeTag<uint16_t>{});
        case 4: return f(TypeTag<uint32_t>{});
        case 8: return f(TypeTag<unsigned long long>{});
        default: break;
        }
    } else {
        switch (dtype) {
        case TCI_DTYPE_FLOAT16: return f(TypeTag<__half>{});
        case TCI_DTYPE_BFLOAT16: return f(TypeTag<__nv_bfloat16>{});
        case TCI_DTYPE_FLOAT: return f(TypeTag<float>{});
        case TCI_DTYPE_INT32: return f(TypeTag<int32_t>{});
        case TCI_DTYPE_INT64: return f(TypeTag<int64_t>{});
        default: break;
        }
    }
    return status_error(TCI_ERR_UNSUPPORTED, "%s: dtype %s with reduction %d is not supported", who,
                     tci_dtype_name(dtype), (int)reduce);
}

// Checks shared by the scatters; fills the data part of d.
tci_status check_scatter(const char *who, void *out, const void *data, int rank,
                         const int64_t *data_dims, kern_scatter_reduce reduce, IndexDesc *d) {
    if (rank < 1 || rank > kMaxRank || !data_dims)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: rank %d is outside 1..%d", who, rank,
                         kMaxRank);
    if ((int)reduce < KERN_SCATTER_NONE || (int)reduce > KERN_SCATTER_MIN)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown reduction %d", who, (int)reduce);
    for (int i = 0; i < rank; i++)
        if (data_dims[i] < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: data dim %d is %lld", who, i,
                             (long long)data_dims[i]);
    memset(d, 0, sizeof *d);
    d->rank = rank;
    for (int i = 0; i < rank; i++) d->data_dims[i] = data_dims[i];
    row_major(rank, d->data_dims, d->data_strides);
    if (product(rank, data_dims) > 0 && (!out || !data))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL data or output buffer", who);
    return TCI_OK;
}

tci_status copy_data(void *out, const void *data, int64_t count, tci_dtype dtype,
                     cudaStream_t stream) {
    size_t bytes = (size_t)count * tci_dtype_size(dtype);
    if (bytes && out != data)
        KERN_CUDA_CHECK(cudaMemcpyAsync(out, data, bytes, cudaMemcpyDeviceToDevice, stream));
    return TCI_OK;
}

// ---------------------------------------------------------------- Trilu and OneHot

template <typename T>
__global__ void trilu_kernel(T *__restrict__ out, const T *__restrict__ in, int64_t total,
                             int64_t rows, int64_t cols, int64_t k, const int64_t *k_device,
                             int upper) {
    if (k_device) k = *k_device;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = div_fast(e, cols);
        int64_t c = e - t * cols;
        int64_t r = t - div_fast(t, rows) * rows;
        bool keep = upper ? c - r >= k : c - r <= k;
        out[e] = keep ? in[e] : T{};
    }
}

template <typename T, typename Index>
__global__ void one_hot_kernel(T *__restrict__ out, const Index *__restrict__ indices,
                               int64_t total, int64_t depth, int64_t inner, T off, T on) {
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = div_fast(e, inner);
        int64_t i = e - t * inner;
        int64_t o = div_fast(t, depth);
        int64_t c = t - o * depth;
        int64_t v = (int64_t)indices[o * inner + i];
        if (v < 0) v += depth;
        out[e] = v == c ? on : off;
    }
}

template <typename T>
tci_status launch_one_hot(void *out, const void *indices, bool i32, int64_t total, int64_t depth,
                          int64_t inner, uint64_t off_bits, uint64_t on_bits,
                          cudaStream_t stream) {
    T off, on;
    memcpy(&off, &off_bits, sizeof(T)); // little endian: the low bytes
    memcpy(&on, &on_bits, sizeof(T));
    unsigned grid = blocks_for(total, kBlock);
    if (i32)
        one_hot_kernel<T, int32_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, (const int32_t *)indices, total, depth, inner, off, on);
    else
        one_hot_kernel<T, int64_t><<<grid, kBlock, 0, stream>>>(
            (T *)out, (const int64_t *)indices, total, depth, inner, off, on);
    KERN_LAUNCH_CHECK("one_hot_kernel");
    return TCI_OK;
}

// Calls f(TypeTag<T>{}) with the unsigned type of elem_size bytes (checked beforehand).
template <typename F> tci_status with_raw_type(int elem_size, F &&f) {
    switch (elem_size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    default: return f(TypeTag<unsigned long long>{});
    }
}

} // namespace

// ---------------------------------------------------------------- launchers

extern "C" tci_status kern_gather_elements(void *out, const void *data, const void *indices,
                                           int index_is_int32, int rank,
                                           const int64_t *data_dims, const int64_t *index_dims,
                                           int axis, int elem_size, int *error_flag,
                                           cudaStream_t stream) {
    if (rank < 1 || rank > kMaxRank || !data_dims || !index_dims)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_gather_elements: rank %d is outside 1..%d",
                         rank, kMaxRank);
    if (axis < 0 || axis >= rank)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_gather_elements: axis %d of rank %d",
                         axis, rank);
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_gather_elements: element size %d is not 1, 2, 4 or 8", elem_size);
    IndexDesc d;
    memset(&d, 0, sizeof d);
    d.rank = rank;
    d.axis = axis;
    for (int i = 0; i < rank; i++) {
        if (index_dims[i] < 0 || data_dims[i] < 0 || (i != axis && index_dims[i] > data_dims[i]))
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "kern_gather_elements: indices dim %d (%lld) does not fit data "
                             "(%lld)",
                             i, (long long)index_dims[i], (long long)data_dims[i]);
        d.data_dims[i] = data_dims[i];
        d.index_dims[i] = index_dims[i];
    }
    row_major(rank, d.data_dims, d.data_strides);
    row_major(rank, d.index_dims, d.index_strides);
    int64_t total = product(rank, index_dims);
    if (total == 0) return TCI_OK;
    if (!out || !indices || (!data && data_dims[axis] > 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_gather_elements: NULL buffer");
    bool i32 = index_is_int32 != 0;
    return with_raw_type(elem_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return launch_gather_elements<T>(out, data, indices, i32, total, d, error_flag, stream);
    });
}

extern "C" tci_status kern_scatter_elements(void *out, const void *data, const void *indices,
                                            int index_is_int32, const void *updates, int rank,
                                            const int64_t *data_dims, const int64_t *index_dims,
                                            int axis, kern_scatter_reduce reduce, tci_dtype dtype,
                                            int *error_flag, cudaStream_t stream) {
    static const char *who = "kern_scatter_elements";
    IndexDesc d;
    TRY_STATUS(check_scatter(who, out, data, rank, data_dims, reduce, &d));
    if (axis < 0 || axis >= rank || !index_dims)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: axis %d of rank %d", who, axis, rank);
    d.axis = axis;
    for (int i = 0; i < rank; i++) {
        if (index_dims[i] < 0 || (i != axis && index_dims[i] > data_dims[i]))
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "%s: indices dim %d (%lld) does not fit data (%lld)", who, i,
                             (long long)index_dims[i], (long long)data_dims[i]);
        d.index_dims[i] = index_dims[i];
    }
    row_major(rank, d.index_dims, d.index_strides);
    int64_t count = product(rank, index_dims);
    TRY_STATUS(with_scatter_type(who, dtype, reduce, [&](auto) { return TCI_OK; }));
    TRY_STATUS(copy_data(out, data, product(rank, data_dims), dtype, stream));
    if (count == 0) return TCI_OK;
    if (!indices || !updates) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", who);
    int64_t lines = count / index_dims[axis];
    bool i32 = index_is_int32 != 0;
    return with_scatter_type(who, dtype, reduce, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return launch_scatter_elements<T>(out, indices, i32, updates, lines, d, (int)reduce,
                                          error_flag, stream);
    });
}

extern "C" tci_status kern_scatter_nd(void *out, const void *data, const void *indices,
                                      int index_is_int32, const void *updates, int rank,
                                      const int64_t *data_dims, int k, int64_t num_updates,
                                      kern_scatter_reduce reduce, tci_dtype dtype,
                                      int *error_flag, cudaStream_t stream) {
    static const char *who = "kern_scatter_nd";
    IndexDesc d;
    TRY_STATUS(check_scatter(who, out, data, rank, data_dims, reduce, &d));
    if (k < 0 || k > rank || num_updates < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: tuples of %d for rank %d, %lld updates",
                         who, k, rank, (long long)num_updates);
    TRY_STATUS(with_scatter_type(who, dtype, reduce, [&](auto) { return TCI_OK; }));
    TRY_STATUS(copy_data(out, data, product(rank, data_dims), dtype, stream));
    int64_t slice = product(rank - k, data_dims + k);
    if (slice == 0 || num_updates == 0) return TCI_OK;
    if (!indices || !updates) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", who);
    bool i32 = index_is_int32 != 0;
    return with_scatter_type(who, dtype, reduce, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return launch_scatter_nd<T>(out, indices, i32, updates, slice, num_updates, k, d,
                                    (int)reduce, error_flag, stream);
    });
}

extern "C" tci_status kern_trilu(void *out, const void *in, int64_t batch, int64_t rows,
                                 int64_t cols, int64_t k, const int64_t *k_device, int upper,
                                 int elem_size, cudaStream_t stream) {
    if (batch < 0 || rows < 0 || cols < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_trilu: negative extent (%lld, %lld, %lld)",
                         (long long)batch, (long long)rows, (long long)cols);
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_trilu: element size %d is not 1, 2, 4 or 8",
                         elem_size);
    int64_t total = batch * rows * cols;
    if (total == 0) return TCI_OK;
    if (!out || !in) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_trilu: NULL buffer");
    return with_raw_type(elem_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        trilu_kernel<T><<<blocks_for(total, kBlock), kBlock, 0, stream>>>(
            (T *)out, (const T *)in, total, rows, cols, k, k_device, upper);
        KERN_LAUNCH_CHECK("trilu_kernel");
        return TCI_OK;
    });
}

extern "C" tci_status kern_one_hot(void *out, const void *indices, int index_is_int32,
                                   int64_t outer, int64_t depth, int64_t inner, uint64_t off_bits,
                                   uint64_t on_bits, int elem_size, cudaStream_t stream) {
    if (outer < 0 || depth < 0 || inner < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_one_hot: negative extent (%lld, %lld, %lld)", (long long)outer,
                         (long long)depth, (long long)inner);
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_one_hot: element size %d is not 1, 2, 4 or 8", elem_size);
    int64_t total = outer * depth * inner;
    if (total == 0) return TCI_OK;
    if (!out || !indices) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_one_hot: NULL buffer");
    bool i32 = index_is_int32 != 0;
    return with_raw_type(elem_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return launch_one_hot<T>(out, indices, i32, total, depth, inner, off_bits, on_bits,
                                 stream);
    });
}
