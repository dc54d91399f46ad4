// Generic strided elementwise kernels: a vectorised path for contiguous / scalar / last-dim-vector
// inputs and a general strided path (rank <= 6, collapsed on the host first) for the rest.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

extern "C" {
#include "util/status.h"
}
#include "kernels/act.cuh"
#include "kernels/cuda_check.h"
#include "kernels/eltwise.h"
#include "kernels/kern_util.cuh"

using namespace kern_util;

namespace {

constexpr int kThreads = 256;
constexpr int kMaxRank = KERN_ELTWISE_MAX_RANK;
constexpr int kMaxInputs = KERN_ELTWISE_MAX_INPUTS;
// 32-bit index math when every index fits with room for a grid-stride step (at most
// kMaxBlocks * kThreads * kUnroll = 2^30) on top.
constexpr int64_t kMax32 = (int64_t)1 << 30;

enum InputKind { kFull = 0, kScalar = 1, kLastVec = 2 };

// ------------------------------------------------------------------------------------------------
// Element math (fp32; the integer types separately)

// Mod and Fmod (fmodf is exact: no fast variant needed). Out of line: fmodf's loop inlined into
// the runtime op switch cost every other binary op's kernel registers (seen: EfficientNet-B0's
// broadcast Mul steps 10% slower on the H200).
__device__ __noinline__ float mod_apply(int op, float a, float b) {
    const float r = fmodf(a, b);
    if (op == BINARY_FMOD) return r;
    // numpy.mod (Mod-28's fmod=0): the divisor's sign, a zero result's too
    return r != 0.0f ? ((r < 0.0f) != (b < 0.0f) ? r + b : r) : copysignf(0.0f, b);
}

template <bool FAST> __device__ __forceinline__ float binary_apply(int op, float a, float b) {
    switch (op) {
    case BINARY_ADD: return a + b;
    case BINARY_SUB: return a - b;
    case BINARY_MUL: return a * b;
    case BINARY_DIV: return FAST ? __fdividef(a, b) : a / b;
    case BINARY_POW: return powf(a, b);
    case BINARY_MAX: return (a != a || a > b) ? a : b;
    case BINARY_MIN: return (a != a || a < b) ? a : b;
    case BINARY_PRELU: return a < 0.0f ? b * a : a;
    case BINARY_FMOD:
    case BINARY_MOD: return mod_apply(op, a, b);
    // BINARY_BOOL_RESULT ops: 1 or 0 (NaN compares false); logical ops read nonzero as true
    case BINARY_EQUAL: return a == b ? 1.0f : 0.0f;
    case BINARY_LESS: return a < b ? 1.0f : 0.0f;
    case BINARY_LESS_EQUAL: return a <= b ? 1.0f : 0.0f;
    case BINARY_GREATER: return a > b ? 1.0f : 0.0f;
    case BINARY_GREATER_EQUAL: return a >= b ? 1.0f : 0.0f;
    case BINARY_AND: return (a != 0.0f) && (b != 0.0f) ? 1.0f : 0.0f;
    case BINARY_OR: return (a != 0.0f) || (b != 0.0f) ? 1.0f : 0.0f;
    case BINARY_XOR: return (a != 0.0f) != (b != 0.0f) ? 1.0f : 0.0f;
    default: return a;
    }
}

// The op switch outside the element loop: one uniform branch per vector.
template <int N, bool FAST>
__device__ __forceinline__ void binary_vec(int op, float *a, const float *b) {
    switch (op) {
    case BINARY_ADD:
#pragma unroll
        for (int j = 0; j < N; j++)
            a[j] = a[j] + b[j];
        break;
    case BINARY_SUB:
#pragma unroll
        for (int j = 0; j < N; j++)
            a[j] = a[j] - b[j];
        break;
    case BINARY_MUL:
#pragma unroll
        for (int j = 0; j < N; j++)
            a[j] = a[j] * b[j];
        break;
    default:
#pragma unroll
        for (int j = 0; j < N; j++)
            a[j] = binary_apply<FAST>(op, a[j], b[j]);
        break;
    }
}

// Wrapping arithmetic through the unsigned type (signed overflow is undefined in C++); I is
// int32_t or int64_t.
template <typename I> __device__ __forceinline__ I binary_int(int op, I a, I b) {
    using U = typename std::make_unsigned<I>::type;
    const U ua = (U)a, ub = (U)b;
    switch (op) {
    case BINARY_ADD: return (I)(ua + ub);
    case BINARY_SUB: return (I)(ua - ub);
    case BINARY_MUL: return (I)(ua * ub);
    case BINARY_DIV:
        if (b == 0)
            return 0;
        if (b == -1)
            return (I)(0 - ua);
        return a / b;
    case BINARY_MAX: return a > b ? a : b;
    case BINARY_MIN: return a < b ? a : b;
    case BINARY_MOD:
    case BINARY_FMOD: {
        // x % 0 gives 0 as Div does (the host reference reports it); x % -1 is 0, answered
        // without dividing: INT_MIN % -1 is undefined behaviour
        if (b == 0 || b == -1)
            return 0;
        const I r = a % b;
        // Python's sign (the divisor's); r and b differ in sign and |r| < |b|: r + b fits
        return op == BINARY_MOD && r != 0 && (r < 0) != (b < 0) ? (I)(r + b) : r;
    }
    case BINARY_EQUAL: return a == b;
    case BINARY_LESS: return a < b;
    case BINARY_LESS_EQUAL: return a <= b;
    case BINARY_GREATER: return a > b;
    case BINARY_GREATER_EQUAL: return a >= b;
    default: return a;
    }
}

// The activations the integer types (int32, int64) have (validate() rejects the others);
// act_int of any other fails to compile.
template <int ACT>
constexpr bool kIntAct =
    ACT == ACT_NONE || ACT == ACT_NEG || ACT == ACT_ABS || ACT == ACT_RELU || ACT == ACT_SIGN;
bool int_act(int act) {
    return act == ACT_NONE || act == ACT_NEG || act == ACT_ABS || act == ACT_RELU ||
           act == ACT_SIGN;
}

template <int ACT, typename I> __device__ __forceinline__ I act_int(I x) {
    using U = typename std::make_unsigned<I>::type;
    if constexpr (ACT == ACT_NONE)
        return x;
    else if constexpr (ACT == ACT_NEG)
        return (I)(0 - (U)x);
    else if constexpr (ACT == ACT_ABS)
        return x < 0 ? (I)(0 - (U)x) : x;
    else if constexpr (ACT == ACT_RELU)
        return x < 0 ? 0 : x;
    else if constexpr (ACT == ACT_SIGN)
        return x > 0 ? 1 : (x < 0 ? -1 : 0);
    else {
        static_assert(kNoCase<ACT>, "an activation the integer types do not have");
        return x;
    }
}

// The activations of bool values (ONNX bool is one byte, 0 or 1; nonzero reads as true): the
// kernel computes them on 0.0f / 1.0f through act_apply. Others are rejected by validate().
template <int ACT> constexpr bool kBoolAct = ACT == ACT_NONE || ACT == ACT_NOT;

// ------------------------------------------------------------------------------------------------
// Loads and stores

template <typename T> __device__ __forceinline__ float ld(const void *p, int64_t i);
template <> __device__ __forceinline__ float ld<float>(const void *p, int64_t i) {
    return static_cast<const float *>(p)[i];
}
template <> __device__ __forceinline__ float ld<__half>(const void *p, int64_t i) {
    return __half2float(static_cast<const __half *>(p)[i]);
}
template <> __device__ __forceinline__ float ld<__nv_bfloat16>(const void *p, int64_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
}
template <> __device__ __forceinline__ float ld<uint8_t>(const void *p, int64_t i) {
    return static_cast<const uint8_t *>(p)[i] != 0 ? 1.0f : 0.0f;
}

template <typename T> __device__ __forceinline__ void st(void *p, int64_t i, float v);
template <> __device__ __forceinline__ void st<float>(void *p, int64_t i, float v) {
    static_cast<float *>(p)[i] = v;
}
template <> __device__ __forceinline__ void st<__half>(void *p, int64_t i, float v) {
    static_cast<__half *>(p)[i] = __float2half_rn(v);
}
template <> __device__ __forceinline__ void st<__nv_bfloat16>(void *p, int64_t i, float v) {
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ void st<uint8_t>(void *p, int64_t i, float v) {
    static_cast<uint8_t *>(p)[i] = v != 0.0f;
}

template <typename T> constexpr bool kFastMath = false;
template <> constexpr bool kFastMath<__half> = true;
template <> constexpr bool kFastMath<__nv_bfloat16> = true;

// 16 bytes per vector: 8 halves, 8 bfloat16s or 4 floats.
template <typename T> struct Vec;
template <> struct Vec<__half> { static constexpr int n = 8; };
template <> struct Vec<__nv_bfloat16> { static constexpr int n = 8; };
template <> struct Vec<float> { static constexpr int n = 4; };

// element_index must be a multiple of Vec<T>::n and the buffer 16-byte aligned
template <typename T>
__device__ __forceinline__ void ld_vec(const void *p, int64_t element_index, float *v);
template <>
__device__ __forceinline__ void ld_vec<__half>(const void *p, int64_t element_index, float *v) {
    const uint4 u = static_cast<const uint4 *>(p)[element_index / 8];
    const float2 f0 = unpack2(u.x), f1 = unpack2(u.y), f2 = unpack2(u.z), f3 = unpack2(u.w);
    v[0] = f0.x, v[1] = f0.y, v[2] = f1.x, v[3] = f1.y, v[4] = f2.x, v[5] = f2.y, v[6] = f3.x,
    v[7] = f3.y;
}
template <>
__device__ __forceinline__ void ld_vec<__nv_bfloat16>(const void *p, int64_t element_index,
                                                      float *v) {
    unpack8(static_cast<const bf16x8 *>(p)[element_index / 8], v);
}
template <>
__device__ __forceinline__ void ld_vec<float>(const void *p, int64_t element_index, float *v) {
    const float4 f = static_cast<const float4 *>(p)[element_index / 4];
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
}

template <typename T>
__device__ __forceinline__ void st_vec(void *p, int64_t element_index, const float *v);
template <>
__device__ __forceinline__ void st_vec<__half>(void *p, int64_t element_index, const float *v) {
    uint4 u;
    u.x = pack2(v[0], v[1]);
    u.y = pack2(v[2], v[3]);
    u.z = pack2(v[4], v[5]);
    u.w = pack2(v[6], v[7]);
    static_cast<uint4 *>(p)[element_index / 8] = u;
}
template <>
__device__ __forceinline__ void st_vec<__nv_bfloat16>(void *p, int64_t element_index,
                                                      const float *v) {
    static_cast<bf16x8 *>(p)[element_index / 8] = pack8_bf16(v);
}
template <>
__device__ __forceinline__ void st_vec<float>(void *p, int64_t element_index, const float *v) {
    static_cast<float4 *>(p)[element_index / 4] = make_float4(v[0], v[1], v[2], v[3]);
}

// ------------------------------------------------------------------------------------------------
// General strided path

// n / d for 0 <= n < 2^31 by a multiply-high and a shift (the 32-bit path's index math would
// otherwise be dominated by integer divisions); plain division in the 64-bit path.
template <typename IdxT> struct Divider;
template <> struct Divider<int32_t> {
    int32_t d;
    uint32_t mul, shift;
    __device__ __forceinline__ int32_t div(int32_t n) const {
        const uint32_t t = __umulhi((uint32_t)n, mul);
        return (int32_t)((t + (uint32_t)n) >> shift);
    }
};
template <> struct Divider<int64_t> {
    int64_t d;
    __device__ __forceinline__ int64_t div(int64_t n) const { return n / d; }
};

Divider<int64_t> make_divider64(int64_t d) { return Divider<int64_t>{d}; }
Divider<int32_t> make_divider32(int64_t d) {
    uint32_t shift = 0;
    while (shift < 31 && ((uint64_t)1 << shift) < (uint64_t)d)
        shift++;
    const uint64_t magic =
        ((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - (uint64_t)d)) / (uint64_t)d) + 1;
    return Divider<int32_t>{(int32_t)d, (uint32_t)magic, shift};
}
template <typename IdxT> Divider<IdxT> make_divider(int64_t d);
template <> Divider<int32_t> make_divider<int32_t>(int64_t d) { return make_divider32(d); }
template <> Divider<int64_t> make_divider<int64_t>(int64_t d) { return make_divider64(d); }

template <typename IdxT> struct General {
    int op, rank, pad_dim;
    int out_bool; // the output is bool bytes: r != 0 (kern_eltwise_writes_bool)
    float alpha, beta;
    float scale[kMaxInputs];
    IdxT total, real_c;
    Divider<IdxT> dims[kMaxRank];
    IdxT strides[kMaxInputs][kMaxRank];
    const void *in[kMaxInputs];
    void *out;
};

// Input offsets of output element i; false when i lies in the channel padding.
template <typename IdxT> __device__ __forceinline__ bool
general_offsets(const General<IdxT> &p, IdxT i, IdxT off[kMaxInputs]) {
    bool valid = true;
#pragma unroll
    for (int k = 0; k < kMaxInputs; k++)
        off[k] = 0;
    IdxT rem = i;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; d--) {
        if (d >= p.rank)
            continue;
        const IdxT q = p.dims[d].div(rem);
        const IdxT coord = rem - q * p.dims[d].d;
        rem = q;
        if (d == p.pad_dim && coord >= p.real_c)
            valid = false;
#pragma unroll
        for (int k = 0; k < kMaxInputs; k++)
            off[k] += coord * p.strides[k][d];
    }
    return valid;
}

// Each thread takes kUnroll elements a block apart (coalesced) and issues all their loads
// before using any: one 2-byte load in flight per thread left this path latency-bound.
constexpr int kUnroll = 4;

template <typename T, typename IdxT, int ACT>
__global__ void eltwise_general_float(const General<IdxT> p) {
    const IdxT tile = (IdxT)blockDim.x * kUnroll;
    for (IdxT start = (IdxT)blockIdx.x * tile; start < p.total; start += (IdxT)gridDim.x * tile) {
        float a[kUnroll], b[kUnroll];
        bool valid[kUnroll], cond[kUnroll];
#pragma unroll
        for (int j = 0; j < kUnroll; j++) {
            const IdxT i = start + (IdxT)(j * blockDim.x + threadIdx.x);
            a[j] = b[j] = 0.0f;
            valid[j] = cond[j] = false;
            if (i >= p.total)
                continue;
            IdxT off[kMaxInputs];
            valid[j] = general_offsets(p, i, off);
            if (!valid[j])
                continue;
            if (p.op == BINARY_WHERE) {
                cond[j] = static_cast<const uint8_t *>(p.in[0])[off[0]] != 0;
                a[j] = p.scale[1] * ld<T>(p.in[1], off[1]);
                b[j] = p.scale[2] * ld<T>(p.in[2], off[2]);
            } else {
                a[j] = p.scale[0] * ld<T>(p.in[0], off[0]);
                if (p.op != BINARY_NONE)
                    b[j] = p.scale[1] * ld<T>(p.in[1], off[1]);
            }
        }
#pragma unroll
        for (int j = 0; j < kUnroll; j++) {
            const IdxT i = start + (IdxT)(j * blockDim.x + threadIdx.x);
            if (i >= p.total)
                continue;
            float r = 0.0f;
            if (valid[j]) {
                if (p.op == BINARY_WHERE)
                    r = cond[j] ? a[j] : b[j];
                else
                    r = p.op == BINARY_NONE ? a[j]
                                                   : binary_apply<kFastMath<T>>(p.op, a[j], b[j]);
                r = act_apply<ACT, kFastMath<T>>(r, p.alpha, p.beta);
            }
            if (p.out_bool)
                st<uint8_t>(p.out, i, r);
            else
                st<T>(p.out, i, r);
        }
    }
}

template <typename I, typename IdxT, int ACT>
__global__ void eltwise_general_int(const General<IdxT> p) {
    const IdxT step = (IdxT)gridDim.x * (IdxT)blockDim.x;
    for (IdxT i = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x; i < p.total; i += step) {
        IdxT off[kMaxInputs];
        const bool valid = general_offsets(p, i, off);
        const I *a = static_cast<const I *>(p.in[0]);
        const I *b = static_cast<const I *>(p.in[1]);
        I r = 0;
        if (valid) {
            if (p.op == BINARY_WHERE) {
                const bool cond = static_cast<const uint8_t *>(p.in[0])[off[0]] != 0;
                r = cond ? static_cast<const I *>(p.in[1])[off[1]]
                         : static_cast<const I *>(p.in[2])[off[2]];
            } else {
                r = a[off[0]];
                if (p.op != BINARY_NONE)
                    r = binary_int<I>(p.op, r, b[off[1]]);
            }
            r = act_int<ACT, I>(r);
        }
        if (p.out_bool)
            static_cast<uint8_t *>(p.out)[i] = r != 0;
        else
            static_cast<I *>(p.out)[i] = r;
    }
}

// ------------------------------------------------------------------------------------------------
// Vectorised path: the output and each full / last-dim-vector input move 16 bytes at a time.

template <typename IdxT> struct Fast {
    int op;
    float alpha, beta;
    float scale[2];
    int kind[2];
    // pad_mode 1: a whole vector shares one index along the padded dim (inner % n == 0);
    // 2: the padded dim is the last one and a vector spans n consecutive channels
    int pad_mode;
    IdxT total, real_c;
    Divider<IdxT> last, pad_inner, pad_size;
    const void *in[2];
    void *out;
};

template <typename IdxT> __device__ __forceinline__ IdxT mod(IdxT n, const Divider<IdxT> &d) {
    return n - d.div(n) * d.d;
}

template <typename IdxT> __device__ __forceinline__ IdxT pad_index(const Fast<IdxT> &p, IdxT i) {
    return mod(p.pad_inner.div(i), p.pad_size);
}

template <typename IdxT>
__device__ __forceinline__ IdxT fast_offset(const Fast<IdxT> &p, int k, IdxT i) {
    return p.kind[k] == kFull ? i : (p.kind[k] == kScalar ? 0 : mod(i, p.last));
}

template <typename T, typename IdxT, int ACT>
__device__ float fast_element(const Fast<IdxT> &p, IdxT i) {
    if (p.pad_mode != 0 && pad_index(p, i) >= p.real_c)
        return 0.0f;
    float r = p.scale[0] * ld<T>(p.in[0], fast_offset(p, 0, i));
    if (p.op != BINARY_NONE)
        r = binary_apply<kFastMath<T>>(p.op, r, p.scale[1] * ld<T>(p.in[1], fast_offset(p, 1, i)));
    return act_apply<ACT, kFastMath<T>>(r, p.alpha, p.beta);
}

// Loads elements [base, base + n) of input k; only the first `valid` are needed. A full input
// spans the padding physically, so it is read whole; a last-dim vector may hold only the real
// channels, so a partial vector of it is read element by element.
template <typename T, typename IdxT> __device__ __forceinline__ void
fast_load(const Fast<IdxT> &p, int k, IdxT base, int valid, float *v) {
    constexpr int n = Vec<T>::n;
    if (p.kind[k] == kScalar) {
        const float s = ld<T>(p.in[k], 0);
#pragma unroll
        for (int j = 0; j < n; j++)
            v[j] = s;
    } else if (p.kind[k] == kFull) {
        ld_vec<T>(p.in[k], base, v);
    } else if (valid == n) {
        ld_vec<T>(p.in[k], mod(base, p.last), v);
    } else {
        const IdxT at = mod(base, p.last);
#pragma unroll
        for (int j = 0; j < n; j++)
            v[j] = j < valid ? ld<T>(p.in[k], at + j) : 0.0f;
    }
}

template <typename T, typename IdxT, int ACT> __global__ void eltwise_fast(const Fast<IdxT> p) {
    constexpr int n = Vec<T>::n;
    const IdxT vecs = (p.total + n - 1) / n;
    const IdxT step = (IdxT)gridDim.x * (IdxT)blockDim.x;
    for (IdxT v = (IdxT)blockIdx.x * (IdxT)blockDim.x + (IdxT)threadIdx.x; v < vecs; v += step) {
        const IdxT base = v * n;
        int valid = n; // the valid elements of a vector are always a prefix
        if (base + n > p.total) {
            valid = -1; // tail
        } else if (p.pad_mode == 1) {
            if (pad_index(p, base) >= p.real_c)
                valid = 0;
        } else if (p.pad_mode == 2) {
            const IdxT left = p.real_c - mod(base, p.pad_size);
            valid = left <= 0 ? 0 : (left >= n ? n : (int)left);
        }
        float a[n];
        if (valid > 0) {
            fast_load<T>(p, 0, base, valid, a);
            if (p.scale[0] != 1.0f) {
#pragma unroll
                for (int j = 0; j < n; j++)
                    a[j] *= p.scale[0];
            }
            if (p.op != BINARY_NONE) {
                float b[n];
                fast_load<T>(p, 1, base, valid, b);
                if (p.scale[1] != 1.0f) {
#pragma unroll
                    for (int j = 0; j < n; j++)
                        b[j] *= p.scale[1];
                }
                binary_vec<n, kFastMath<T>>(p.op, a, b);
            }
#pragma unroll
            for (int j = 0; j < n; j++) {
                a[j] = act_apply<ACT, kFastMath<T>>(a[j], p.alpha, p.beta);
                if (j >= valid)
                    a[j] = 0.0f;
            }
            st_vec<T>(p.out, base, a);
        } else if (valid == 0) {
#pragma unroll
            for (int j = 0; j < n; j++)
                a[j] = 0.0f;
            st_vec<T>(p.out, base, a);
        } else {
            for (int j = 0; j < n; j++) {
                const IdxT i = base + j;
                if (i < p.total)
                    st<T>(p.out, i, fast_element<T, IdxT, ACT>(p, i));
            }
        }
    }
}

// A Gelu (or Erf) step on a dense tensor, e.g. the erf Gelu after a cuBLASLt GEMM, whose
// epilogue has only the tanh form: kDenseVecs vectors a thread, all loaded before any is
// computed, so that a thread has several 16-byte loads in flight where eltwise_fast has one.
// On the H200 (fp16, --profile): 64x197x3072 62.0 -> 50.5 us, 64x3136x384 115 -> 91 us, batch-1
// sizes the same; a Relu of 64x197x3072 ran 2-5 % slower this way (43.0 against 43.7-45.2 us),
// so the cheap activations keep eltwise_fast. In place (out == in) is safe: each thread reads
// and writes its own vectors.
constexpr int kDenseVecs = 4;

bool dense_act(int act) {
    return act == ACT_GELU || act == ACT_GELU_TANH || act == ACT_GELU_OF_DIV ||
           act == ACT_GELU_SCALED || act == ACT_ERF;
}

template <typename T, typename IdxT, int ACT> __global__ void eltwise_unary_dense(const Fast<IdxT> p) {
    constexpr int n = Vec<T>::n;
    const IdxT vecs = p.total / n;
    const IdxT first = (IdxT)blockIdx.x * (IdxT)blockDim.x * kDenseVecs + (IdxT)threadIdx.x;
    float a[kDenseVecs][n];
#pragma unroll
    for (int u = 0; u < kDenseVecs; u++) {
        const IdxT v = first + (IdxT)u * (IdxT)blockDim.x;
        if (v < vecs)
            ld_vec<T>(p.in[0], v * n, a[u]);
    }
#pragma unroll
    for (int u = 0; u < kDenseVecs; u++) {
        const IdxT v = first + (IdxT)u * (IdxT)blockDim.x;
        if (v < vecs) {
#pragma unroll
            for (int j = 0; j < n; j++)
                a[u][j] = act_apply<ACT, kFastMath<T>>(a[u][j] * p.scale[0], p.alpha, p.beta);
            st_vec<T>(p.out, v * n, a[u]);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Host side

// The desc's shape with size-1 dims dropped and neighbouring dims merged where every input walks
// them as one; the padded dim is never merged, so its index stays one coordinate.
struct Shape {
    int rank, pad_dim;
    int64_t real_c, total;
    int64_t dims[kMaxRank];
    int64_t strides[kMaxInputs][kMaxRank];
};

void collapse(const kern_eltwise_desc *d, int num_inputs, Shape *s) {
    int pad = d->pad_dim;
    if (pad >= 0 && d->real_c >= d->dims[pad])
        pad = -1;
    int r = 0;
    s->pad_dim = -1;
    for (int i = 0; i < d->rank; i++) {
        if (d->dims[i] == 1 && i != pad)
            continue;
        const bool merge_ok = r > 0 && i != pad && r - 1 != s->pad_dim;
        bool merge = merge_ok;
        for (int k = 0; k < num_inputs && merge; k++)
            if (s->strides[k][r - 1] != d->strides[k][i] * d->dims[i])
                merge = false;
        if (merge) {
            s->dims[r - 1] *= d->dims[i];
            for (int k = 0; k < num_inputs; k++)
                s->strides[k][r - 1] = d->strides[k][i];
            continue;
        }
        if (i == pad)
            s->pad_dim = r;
        s->dims[r] = d->dims[i];
        for (int k = 0; k < kMaxInputs; k++)
            s->strides[k][r] = k < num_inputs ? d->strides[k][i] : 0;
        r++;
    }
    s->rank = r;
    s->real_c = d->real_c;
    s->total = 1;
    for (int i = 0; i < r; i++)
        s->total *= s->dims[i];
}

bool fits_32(const Shape &s, int num_inputs) {
    if (s.total > kMax32)
        return false;
    for (int k = 0; k < num_inputs; k++) {
        int64_t span = 0;
        for (int i = 0; i < s.rank; i++) {
            const int64_t st = s.strides[k][i] < 0 ? -s.strides[k][i] : s.strides[k][i];
            if (st > kMax32)
                return false;
            span += st * (s.dims[i] - 1);
            if (span > kMax32)
                return false;
        }
    }
    return true;
}

// Calls f(TypeTag<T>{}, ActTag<ACT>{}) for d's float dtype and activation: one kernel per pair.
template <typename F> tci_status with_float_kernel(const kern_eltwise_desc *d, F &&f) {
    Storage storage;
    TRY_STATUS(storage_type("kern_eltwise", d->dtype, &storage));
    return with_storage(storage, [&](auto type) {
        return with_act("kern_eltwise", d->act, [&](auto act) { return f(type, act); });
    });
}

template <typename IdxT> tci_status launch_general(const kern_eltwise_desc *d, const Shape &s,
                                                   const void *const *inputs, int num_inputs,
                                                   void *out, cudaStream_t stream) {
    General<IdxT> p;
    memset(&p, 0, sizeof p);
    p.op = d->op;
    p.out_bool = kern_eltwise_writes_bool(d);
    p.rank = s.rank;
    p.pad_dim = s.pad_dim;
    p.alpha = d->act_alpha;
    p.beta = d->act_beta;
    p.total = (IdxT)s.total;
    p.real_c = (IdxT)s.real_c;
    for (int i = 0; i < s.rank; i++)
        p.dims[i] = make_divider<IdxT>(s.dims[i]);
    for (int k = 0; k < kMaxInputs; k++) {
        p.scale[k] = d->input_scale[k];
        p.in[k] = k < num_inputs ? inputs[k] : NULL;
        for (int i = 0; i < s.rank; i++)
            p.strides[k][i] = (IdxT)s.strides[k][i];
    }
    p.out = out;
    const unsigned blocks = blocks_for((s.total + kUnroll - 1) / kUnroll, kThreads);
    if (d->dtype == TCI_DTYPE_INT64 || d->dtype == TCI_DTYPE_INT32) {
        const bool i32 = d->dtype == TCI_DTYPE_INT32;
        TRY_STATUS(with_act("kern_eltwise", d->act, [&](auto act) {
            constexpr int A = decltype(act)::value;
            if constexpr (kIntAct<A>) {
                if (i32)
                    eltwise_general_int<int32_t, IdxT, A>
                        <<<blocks_for(s.total, kThreads), kThreads, 0, stream>>>(p);
                else
                    eltwise_general_int<int64_t, IdxT, A>
                        <<<blocks_for(s.total, kThreads), kThreads, 0, stream>>>(p);
                return TCI_OK;
            } else {
                return status_error(TCI_ERR_UNSUPPORTED,
                                 "kern_eltwise: activation %d is not provided for integers", A);
            }
        }));
    } else if (d->dtype == TCI_DTYPE_BOOL) {
        TRY_STATUS(with_act("kern_eltwise", d->act, [&](auto act) {
            constexpr int A = decltype(act)::value;
            if constexpr (kBoolAct<A>) {
                eltwise_general_float<uint8_t, IdxT, A><<<blocks, kThreads, 0, stream>>>(p);
                return TCI_OK;
            } else {
                return status_error(TCI_ERR_UNSUPPORTED,
                                 "kern_eltwise: activation %d is not provided for bool", A);
            }
        }));
    } else {
        TRY_STATUS(with_float_kernel(d, [&](auto type, auto act) {
            using T = typename decltype(type)::type;
            eltwise_general_float<T, IdxT, decltype(act)::value><<<blocks, kThreads, 0, stream>>>(p);
            return TCI_OK;
        }));
    }
    KERN_LAUNCH_CHECK("kern_eltwise");
    return TCI_OK;
}

// Fills the vectorised path's parameters when the shape, op and buffers allow it.
bool float_dtype(tci_dtype t) {
    return t == TCI_DTYPE_FLOAT16 || t == TCI_DTYPE_BFLOAT16 || t == TCI_DTYPE_FLOAT;
}

template <typename IdxT> bool plan_fast(const kern_eltwise_desc *d, const Shape &s,
                                        const void *const *inputs, int num_inputs, void *out,
                                        Fast<IdxT> *p) {
    if (d->op == BINARY_WHERE || kern_eltwise_writes_bool(d))
        return false;
    if (!float_dtype(d->dtype))
        return false;
    const int n = d->dtype == TCI_DTYPE_FLOAT ? 4 : 8;
    if (!aligned16(out))
        return false;
    memset(p, 0, sizeof *p);
    const int64_t last = s.rank > 0 ? s.dims[s.rank - 1] : 1;
    int64_t contiguous[kMaxRank];
    int64_t acc = 1;
    for (int i = s.rank - 1; i >= 0; i--) {
        contiguous[i] = acc;
        acc *= s.dims[i];
    }
    for (int k = 0; k < num_inputs; k++) {
        bool full = true, scalar = true, last_vec = s.rank > 0 && last % n == 0;
        for (int i = 0; i < s.rank; i++) {
            const int64_t st = s.strides[k][i];
            if (st != contiguous[i])
                full = false;
            if (st != 0)
                scalar = false;
            if (i < s.rank - 1 ? st != 0 : st != 1)
                last_vec = false;
        }
        if (full)
            p->kind[k] = kFull;
        else if (scalar)
            p->kind[k] = kScalar;
        else if (last_vec)
            p->kind[k] = kLastVec;
        else
            return false;
        if (p->kind[k] != kScalar && !aligned16(inputs[k]))
            return false;
        p->in[k] = inputs[k];
        p->scale[k] = d->input_scale[k];
    }
    if (s.pad_dim >= 0) {
        int64_t inner = 1;
        for (int i = s.pad_dim + 1; i < s.rank; i++)
            inner *= s.dims[i];
        if (inner % n == 0)
            p->pad_mode = 1;
        else if (inner == 1 && s.dims[s.pad_dim] % n == 0)
            p->pad_mode = 2;
        else
            return false;
        p->pad_inner = make_divider<IdxT>(inner);
        p->pad_size = make_divider<IdxT>(s.dims[s.pad_dim]);
        p->real_c = (IdxT)s.real_c;
    }
    p->op = d->op;
    p->alpha = d->act_alpha;
    p->beta = d->act_beta;
    p->total = (IdxT)s.total;
    p->last = make_divider<IdxT>(last);
    p->out = out;
    return true;
}

template <typename IdxT> tci_status launch(const kern_eltwise_desc *d, const Shape &s,
                                           const void *const *inputs, int num_inputs, void *out,
                                           cudaStream_t stream) {
    Fast<IdxT> f;
    if (plan_fast<IdxT>(d, s, inputs, num_inputs, out, &f)) {
        const bool half = d->dtype == TCI_DTYPE_FLOAT16, bf16 = d->dtype == TCI_DTYPE_BFLOAT16;
        const int64_t n = half || bf16 ? 8 : 4, per_block = (int64_t)kThreads * kDenseVecs;
        const int64_t dense_blocks = (s.total / n + per_block - 1) / per_block;
        if (f.op == BINARY_NONE && dense_act(d->act) && f.pad_mode == 0 && f.kind[0] == kFull &&
            s.total % n == 0 && dense_blocks >= 1 && dense_blocks <= kMaxBlocks) {
            TRY_STATUS(with_float_kernel(d, [&](auto type, auto act) {
                using T = typename decltype(type)::type;
                eltwise_unary_dense<T, IdxT, decltype(act)::value>
                    <<<(unsigned)dense_blocks, kThreads, 0, stream>>>(f);
                return TCI_OK;
            }));
            KERN_LAUNCH_CHECK("kern_eltwise");
            return TCI_OK;
        }
        const unsigned blocks =
            blocks_for(half || bf16 ? (s.total + 7) / 8 : (s.total + 3) / 4, kThreads);
        TRY_STATUS(with_float_kernel(d, [&](auto type, auto act) {
            using T = typename decltype(type)::type;
            eltwise_fast<T, IdxT, decltype(act)::value><<<blocks, kThreads, 0, stream>>>(f);
            return TCI_OK;
        }));
        KERN_LAUNCH_CHECK("kern_eltwise");
        return TCI_OK;
    }
    return launch_general<IdxT>(d, s, inputs, num_inputs, out, stream);
}

tci_status validate(const kern_eltwise_desc *d, const void *const *inputs, void *out,
                    int64_t *total) {
    if (!d || !inputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: NULL desc or inputs");
    if ((int)d->op < 0 || d->op >= BINARY_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: unknown op %d", (int)d->op);
    if ((int)d->act < 0 || d->act >= ACT_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: unknown activation %d",
                         (int)d->act);
    if (d->rank < 0 || d->rank > kMaxRank)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: rank %d is outside 0..%d",
                         d->rank, kMaxRank);
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++) {
        if (d->dims[i] < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: dim %d is negative (%lld)", i,
                             (long long)d->dims[i]);
        if (__builtin_mul_overflow(n, d->dims[i], &n) || n > INT64_MAX / 16)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: output too large");
    }
    if (d->pad_dim < -1 || d->pad_dim >= (d->rank > 0 ? d->rank : 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: pad_dim %d is outside -1..%d",
                         d->pad_dim, d->rank - 1);
    if (d->pad_dim >= 0 && d->real_c < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: real_c %lld is negative",
                         (long long)d->real_c);
    const bool is_int = d->dtype == TCI_DTYPE_INT64 || d->dtype == TCI_DTYPE_INT32;
    const bool is_bool = d->dtype == TCI_DTYPE_BOOL;
    if (!float_dtype(d->dtype) && !is_int && !is_bool)
        return status_error(
            TCI_ERR_UNSUPPORTED,
            "kern_eltwise: dtype %s is not supported (float16, bfloat16, float, int32, int64, "
            "bool)",
            tci_dtype_name(d->dtype));
    const unsigned op_flags = binary_flags(d->op);
    if ((op_flags & BINARY_BOOL_RESULT) && d->act != ACT_NONE)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "kern_eltwise: %s writes bool and takes no activation",
                         binary_name(d->op));
    if ((act_flags(d->act) & ACT_BOOL_RESULT) && d->op != BINARY_NONE)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "kern_eltwise: activation %s writes bool and follows no binary op (%s)",
                         act_name(d->act), binary_name(d->op));
    if ((op_flags & BINARY_BOOL_INPUTS) && !is_bool)
        return status_error(TCI_ERR_UNSUPPORTED, "kern_eltwise: %s takes bool inputs, not %s",
                         binary_name(d->op), tci_dtype_name(d->dtype));
    const int num_inputs = kern_eltwise_num_inputs(d->op);
    if (is_int) {
        if (d->op == BINARY_POW || d->op == BINARY_PRELU)
            return status_error(TCI_ERR_UNSUPPORTED, "kern_eltwise: %s is not provided for %s",
                             binary_name(d->op), tci_dtype_name(d->dtype));
        if (!int_act(d->act))
            return status_error(TCI_ERR_UNSUPPORTED,
                             "kern_eltwise: activation %s is not provided for %s",
                             act_name(d->act), tci_dtype_name(d->dtype));
    }
    if (is_bool) {
        const bool op_ok = d->op == BINARY_NONE || d->op == BINARY_EQUAL ||
                           d->op == BINARY_WHERE || (op_flags & BINARY_BOOL_INPUTS);
        if (!op_ok)
            return status_error(TCI_ERR_UNSUPPORTED, "kern_eltwise: %s is not provided for bool",
                             binary_name(d->op));
        if (d->act != ACT_NONE && d->act != ACT_NOT)
            return status_error(TCI_ERR_UNSUPPORTED,
                             "kern_eltwise: activation %s is not provided for bool",
                             act_name(d->act));
    }
    if (is_int || is_bool)
        for (int k = 0; k < num_inputs; k++)
            if (d->input_scale[k] != 1.0f && !(d->op == BINARY_WHERE && k == 0))
                return status_error(TCI_ERR_UNSUPPORTED,
                                 "kern_eltwise: %s inputs take no scale (input %d: %g)",
                                 tci_dtype_name(d->dtype), k, (double)d->input_scale[k]);
    *total = d->rank > 0 ? n : 1;
    if (*total == 0)
        return TCI_OK;
    for (int k = 0; k < num_inputs; k++)
        if (!inputs[k])
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: input %d is NULL", k);
    if (!out)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_eltwise: output is NULL");
    return TCI_OK;
}

} // namespace

extern "C" bool kern_eltwise_writes_bool(const kern_eltwise_desc *desc) {
    return desc->dtype == TCI_DTYPE_BOOL || (binary_flags(desc->op) & BINARY_BOOL_RESULT) ||
           (act_flags(desc->act) & ACT_BOOL_RESULT);
}

extern "C" int kern_eltwise_num_inputs(binary_op op) {
    if (op == BINARY_NONE)
        return 1;
    if (op == BINARY_WHERE)
        return 3;
    return 2;
}

extern "C" void kern_eltwise_desc_init(kern_eltwise_desc *desc, binary_op op, tci_dtype dtype,
                                       int rank, const int64_t *dims) {
    memset(desc, 0, sizeof *desc);
    desc->op = op;
    desc->act = ACT_NONE;
    desc->dtype = dtype;
    if (rank < 0)
        rank = 0;
    if (rank > kMaxRank)
        rank = kMaxRank;
    desc->rank = rank;
    for (int i = 0; i < rank; i++)
        desc->dims[i] = dims[i];
    int64_t acc = 1;
    for (int i = rank - 1; i >= 0; i--) {
        for (int k = 0; k < kMaxInputs; k++)
            desc->strides[k][i] = acc;
        acc *= dims[i];
    }
    for (int k = 0; k < kMaxInputs; k++)
        desc->input_scale[k] = 1.0f;
    desc->pad_dim = -1;
}

extern "C" tci_status kern_eltwise_broadcast_strides(kern_eltwise_desc *desc, int input, int rank,
                                                     const int64_t *dims) {
    if (input < 0 || input >= kMaxInputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_eltwise_broadcast_strides: input %d is outside 0..%d", input,
                         kMaxInputs - 1);
    if (rank < 0 || rank > desc->rank)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_eltwise_broadcast_strides: input rank %d exceeds the output's %d",
                         rank, desc->rank);
    int64_t acc = 1;
    for (int i = desc->rank - 1; i >= 0; i--) {
        const int j = i - (desc->rank - rank);
        if (j < 0) {
            desc->strides[input][i] = 0;
            continue;
        }
        if (dims[j] != 1 && dims[j] != desc->dims[i])
            return status_error(
                TCI_ERR_INVALID_ARGUMENT,
                "kern_eltwise_broadcast_strides: input dim %d (%lld) does not broadcast to %lld", j,
                (long long)dims[j], (long long)desc->dims[i]);
        desc->strides[input][i] = dims[j] == 1 ? 0 : acc;
        acc *= dims[j];
    }
    return TCI_OK;
}

extern "C" tci_status kern_eltwise(const kern_eltwise_desc *desc, const void *const *inputs,
                                   void *out, cudaStream_t stream) {
    int64_t total = 0;
    TRY_STATUS(validate(desc, inputs, out, &total));
    if (total == 0)
        return TCI_OK;
    const int num_inputs = kern_eltwise_num_inputs(desc->op);
    Shape s;
    memset(&s, 0, sizeof s);
    collapse(desc, num_inputs, &s);
    if (fits_32(s, num_inputs))
        return launch<int32_t>(desc, s, inputs, num_inputs, out, stream);
    return launch<int64_t>(desc, s, inputs, num_inputs, out, stream);
}
