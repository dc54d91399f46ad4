// Depthwise convolution on NHWC8 fp16, bf16 or fp32. In the tiled kernels each thread owns 8 channels
// (4 for 5x5) of one output column and slides down several output rows, so each input row it loads feeds
// every output row that needs it and the fp32 weights stay in registers; neighbouring threads take
// neighbouring channels and columns, so loads coalesce and the horizontal overlap hits L1. Other
// shapes take a plain one-thread-per-output kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "util/status.h"
}
#include "kernels/act.cuh"
#include "kernels/cuda_check.h"
#include "kernels/depthwise.h"
#include "kernels/kern_util.cuh"

using namespace kern_util;

namespace {

constexpr int kMaxThreads = 256;
// Threads per tiled block: those kernels want ~120-175 registers; with blocks of <= 6 warps and
// launch bounds asking for 2 of them (<= 168 registers), an SM runs 12 warps where one 8-warp
// block would leave it at 8.
constexpr int kTiledThreads = 192;
constexpr int kShortRows = 2;
constexpr int kTallRows = 7;
// Below this many threads the tall tiles leave an H200 (132 SMs) mostly idle; the short ones make
// 3.5x more threads for about 1.6x the loads per output.
constexpr int64_t kTallMinThreads = 132 * 1024;
constexpr int64_t kMaxGrid = (int64_t)1 << 30;
// Spatial sizes and reaches are int in the kernels.
constexpr int64_t kMaxSpatial = (int64_t)1 << 28;

struct Params {
    const void *x, *w; // vectors of CH channels (fp16, bf16 or fp32)
    const float4 *bias;
    const void *z; // may equal y: read with plain loads, just before the same thread writes
    void *y;
    int64_t n;
    int c, vecs; // vecs: Cp / CH vectors per pixel
    int in_h, in_w, out_h, out_w;
    int kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
    int act;
    float alpha, beta;
    // tiled kernel: a block is vpb vectors x cols columns x tiles_per_block row tiles
    int vpb, cols, tiles_per_block, groups, col_tiles, row_groups;
    int64_t blocks;
};

// Four bf16 channels (8 bytes); eight are kern_util's bf16x8.
struct alignas(8) bf16x4 {
    uint2 bits;
};

// fp16: 8 channels travel as uint4, 4 as uint2; bf16 likewise as bf16x8 and bf16x4; fp32: 8 as
// float8 (two float4), 4 as float4
template <typename T, int CH> struct VecOf;
template <> struct VecOf<__half, 8> { using type = uint4; };
template <> struct VecOf<__half, 4> { using type = uint2; };
template <> struct VecOf<__nv_bfloat16, 8> { using type = bf16x8; };
template <> struct VecOf<__nv_bfloat16, 4> { using type = bf16x4; };
template <> struct VecOf<float, 8> { using type = float8; };
template <> struct VecOf<float, 4> { using type = float4; };

__device__ __forceinline__ uint4 ldg_vec(const uint4 *p) { return __ldg(p); }
__device__ __forceinline__ uint2 ldg_vec(const uint2 *p) { return __ldg(p); }
__device__ __forceinline__ float4 ldg_vec(const float4 *p) { return __ldg(p); }
__device__ __forceinline__ float8 ldg_vec(const float8 *p) { return ldg_chunk(p); }
__device__ __forceinline__ bf16x8 ldg_vec(const bf16x8 *p) { return ldg_chunk(p); }
__device__ __forceinline__ bf16x4 ldg_vec(const bf16x4 *p) {
    bf16x4 u;
    u.bits = __ldg(&p->bits);
    return u;
}

__device__ __forceinline__ void unpack(uint4 u, float (&v)[8]) {
    const float2 a = unpack2(u.x), b = unpack2(u.y), c = unpack2(u.z), d = unpack2(u.w);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y, v[4] = c.x, v[5] = c.y, v[6] = d.x, v[7] = d.y;
}
__device__ __forceinline__ void unpack(uint2 u, float (&v)[4]) {
    const float2 a = unpack2(u.x), b = unpack2(u.y);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ uint4 pack(const float (&v)[8]) {
    return make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
}
__device__ __forceinline__ uint2 pack(const float (&v)[4]) {
    return make_uint2(pack2(v[0], v[1]), pack2(v[2], v[3]));
}
__device__ __forceinline__ void unpack(const float8 &u, float (&v)[8]) { unpack8(u, v); }
__device__ __forceinline__ void unpack(const bf16x8 &u, float (&v)[8]) { unpack8(u, v); }
__device__ __forceinline__ void unpack(const bf16x4 &u, float (&v)[4]) {
    const float2 a = unpack2_bf16(u.bits.x), b = unpack2_bf16(u.bits.y);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void unpack(float4 u, float (&v)[4]) {
    v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w;
}
template <typename V, int CH> __device__ __forceinline__ V pack_as(const float (&v)[CH]);
template <> __device__ __forceinline__ uint4 pack_as<uint4, 8>(const float (&v)[8]) { return pack(v); }
template <> __device__ __forceinline__ uint2 pack_as<uint2, 4>(const float (&v)[4]) { return pack(v); }
template <> __device__ __forceinline__ float8 pack_as<float8, 8>(const float (&v)[8]) {
    float8 u;
    u.lo = make_float4(v[0], v[1], v[2], v[3]);
    u.hi = make_float4(v[4], v[5], v[6], v[7]);
    return u;
}
template <> __device__ __forceinline__ float4 pack_as<float4, 4>(const float (&v)[4]) {
    return make_float4(v[0], v[1], v[2], v[3]);
}
template <> __device__ __forceinline__ bf16x8 pack_as<bf16x8, 8>(const float (&v)[8]) {
    return pack8_bf16(v);
}
template <> __device__ __forceinline__ bf16x4 pack_as<bf16x4, 4>(const float (&v)[4]) {
    bf16x4 u;
    u.bits = make_uint2(pack2_bf16(v[0], v[1]), pack2_bf16(v[2], v[3]));
    return u;
}

template <int CH> struct Floats {
    float v[CH];
};

// The activations that need more than a few instructions and are rare after a depthwise layer:
// out of line, so that the tiled kernels' unrolled bodies (one epilogue per output row) stay
// small enough to unroll fully.
template <int CH>
__device__ __noinline__ Floats<CH> apply_act_rare(Floats<CH> f, int act, float alpha, float beta) {
#pragma unroll
    for (int k = 0; k < CH; k++) f.v[k] = act_apply_rt<false>(act, f.v[k], alpha, beta);
    return f;
}

// One uniform switch per output vector; the precise fp32 functions, as the fp32 elementwise
// kernel has them.
template <int CH> __device__ __forceinline__ void apply_act(float (&v)[CH], int act, float alpha, float beta) {
    switch (act) {
    case ACT_NONE: break;
    case ACT_RELU: act_each<ACT_RELU, false>(v, alpha, beta); break;
    case ACT_LEAKY_RELU: act_each<ACT_LEAKY_RELU, false>(v, alpha, beta); break;
    case ACT_CLIP: act_each<ACT_CLIP, false>(v, alpha, beta); break;
    case ACT_HARD_SIGMOID: act_each<ACT_HARD_SIGMOID, false>(v, alpha, beta); break;
    case ACT_HARD_SWISH: act_each<ACT_HARD_SWISH, false>(v, alpha, beta); break;
    case ACT_SIGMOID: act_each<ACT_SIGMOID, false>(v, alpha, beta); break;
    case ACT_SILU: act_each<ACT_SILU, false>(v, alpha, beta); break;
    default: {
        Floats<CH> f;
#pragma unroll
        for (int k = 0; k < CH; k++) f.v[k] = v[k];
        f = apply_act_rare<CH>(f, act, alpha, beta);
#pragma unroll
        for (int k = 0; k < CH; k++) v[k] = f.v[k];
        break;
    }
    }
}

// CH bias values of vector `vec` (fp32, Cp of them, 16-byte aligned); zeros without a bias.
template <int CH> __device__ __forceinline__ void load_bias(const Params &p, int vec, float (&b)[CH]) {
#pragma unroll
    for (int q = 0; q < CH / 4; q++) {
        const float4 f =
            p.bias ? __ldg(p.bias + (int64_t)vec * (CH / 4) + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        b[4 * q] = f.x, b[4 * q + 1] = f.y, b[4 * q + 2] = f.z, b[4 * q + 3] = f.w;
    }
}

// acc + bias + z, activation, zeros in the padded channels, one rounding, store vector out_index.
template <typename T, int CH>
__device__ __forceinline__ void finish(const Params &p, const float (&acc)[CH], const float (&b)[CH], int vec,
                                       int64_t out_index) {
    using Vec = typename VecOf<T, CH>::type;
    float v[CH];
#pragma unroll
    for (int k = 0; k < CH; k++) v[k] = acc[k] + b[k];
    if (p.z) {
        float r[CH];
        unpack(static_cast<const Vec *>(p.z)[out_index], r);
#pragma unroll
        for (int k = 0; k < CH; k++) v[k] += r[k];
    }
    apply_act<CH>(v, p.act, p.alpha, p.beta);
    const int real = p.c - vec * CH;
    if (real < CH) {
#pragma unroll
        for (int k = 0; k < CH; k++)
            if (k >= real) v[k] = 0.0f;
    }
    static_cast<Vec *>(p.y)[out_index] = pack_as<Vec, CH>(v);
}

// One input row of a thread's window: S vectors, zeros outside the input. Each load is
// unconditional at a clamped, always valid address (the host sends empty inputs elsewhere), so
// the loads are never branched around and can be in flight together.
template <int S, typename Vec>
__device__ __forceinline__ void load_row(const Vec *__restrict__ xi, int row_off, bool row_ok,
                                         const int (&col_off)[S], const bool (&col_ok)[S], Vec (&u)[S]) {
#pragma unroll
    for (int s = 0; s < S; s++) {
        const Vec v = ldg_vec(xi + (row_off + col_off[s]));
        u[s] = row_ok && col_ok[s] ? v : Vec{};
    }
}

// TH output rows per thread, R x S kernel, stride ST both ways, dilation 1, CH channels per
// thread (p.vecs vectors of CH per pixel). Weights widened to fp32 once, in registers: 3x3 takes
// 8 channels (72 values), 5x5 takes 4 (100 values) to stay clear of spills. The next input row
// is loaded before the current one is used, so a row of loads is in flight during the math and
// the stores; x and w are __restrict__ (y never overlaps them) so the compiler may move them
// further.
template <typename T, int R, int S, int ST, int TH, int CH>
__global__ void __launch_bounds__(kTiledThreads, 2)
    depthwise_tiled(const Params p, const typename VecOf<T, CH>::type *__restrict__ x,
                    const typename VecOf<T, CH>::type *__restrict__ w) {
    using Vec = typename VecOf<T, CH>::type;
    constexpr int kInRows = (TH - 1) * ST + R;
    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        int64_t rest = b;
        const int group = (int)(rest % p.groups);
        rest /= p.groups;
        const int col_tile = (int)(rest % p.col_tiles);
        rest /= p.col_tiles;
        const int row_group = (int)(rest % p.row_groups);
        const int64_t img = rest / p.row_groups;
        const int vec = group * p.vpb + tx;
        const int ow = col_tile * p.cols + ty;
        const int oh0 = (row_group * p.tiles_per_block + tz) * TH;
        if (vec >= p.vecs || ow >= p.out_w || oh0 >= p.out_h) continue;

        // offsets within one image fit in int (checked on the host)
        const int iw0 = ow * ST - p.pad_left;
        int col_off[S];
        bool col_ok[S];
#pragma unroll
        for (int s = 0; s < S; s++) {
            const int iw = iw0 + s;
            col_ok[s] = iw >= 0 && iw < p.in_w;
            col_off[s] = min(max(iw, 0), p.in_w - 1) * p.vecs;
        }
        const int rows_valid = min(TH, p.out_h - oh0);
        const int rows_needed = (rows_valid - 1) * ST + R; // input rows past these feed no valid output
        const int ih0 = oh0 * ST - p.pad_top;
        const int in_row = p.in_w * p.vecs;
        const Vec *xi = x + img * p.in_h * in_row + vec;
        const int out_row = p.out_w * p.vecs;
        const int64_t out_base = img * p.out_h * out_row + vec;
        const int out0 = (oh0 * p.out_w + ow) * p.vecs;
        // Rows past rows_needed reload the last needed row (a cache hit) and are zeroed.
        auto row_offset = [&](int i) { return min(max(ih0 + min(i, rows_needed - 1), 0), p.in_h - 1) * in_row; };
        auto row_ok = [&](int i) { return i < rows_needed && ih0 + i >= 0 && ih0 + i < p.in_h; };

        Vec u[2][S];
        load_row<S>(xi, row_offset(0), row_ok(0), col_off, col_ok, u[0]);
        float wf[R * S][CH];
#pragma unroll
        for (int k = 0; k < R * S; k++) unpack(ldg_vec(w + (k * p.vecs + vec)), wf[k]);
        float bias[CH];
        load_bias<CH>(p, vec, bias);

        float acc[TH][CH];
#pragma unroll
        for (int t = 0; t < TH; t++)
#pragma unroll
            for (int k = 0; k < CH; k++) acc[t][k] = 0.0f;

#pragma unroll
        for (int i = 0; i < kInRows; i++) {
            if (i + 1 < kInRows)
                load_row<S>(xi, row_offset(i + 1), row_ok(i + 1), col_off, col_ok, u[(i + 1) & 1]);
#pragma unroll
            for (int s = 0; s < S; s++) {
                float v[CH];
                unpack(u[i & 1][s], v);
#pragma unroll
                for (int t = 0; t < TH; t++) {
                    const int r = i - t * ST; // kernel row by which input row i reaches output row t
                    if (r < 0 || r >= R) continue;
#pragma unroll
                    for (int k = 0; k < CH; k++) acc[t][k] = fmaf(v[k], wf[r * S + s][k], acc[t][k]);
                }
            }
            // output rows whose last kernel row was input row i are complete: store them now so
            // their accumulators die
#pragma unroll
            for (int t = 0; t < TH; t++)
                if (i == t * ST + R - 1 && t < rows_valid)
                    finish<T, CH>(p, acc[t], bias, vec, out_base + (out0 + t * out_row));
        }
    }
}

// Any shape: one thread per output pixel and 8 channels, channels fastest.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads) depthwise_generic(const Params p, int64_t total) {
    using Vec = typename VecOf<T, 8>::type;
    const Vec *x = static_cast<const Vec *>(p.x), *w = static_cast<const Vec *>(p.w);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int vec = (int)(i % p.vecs);
        int64_t rest = i / p.vecs;
        const int ow = (int)(rest % p.out_w);
        rest /= p.out_w;
        const int oh = (int)(rest % p.out_h);
        const int64_t img = rest / p.out_h;
        const int ih0 = oh * p.stride_h - p.pad_top, iw0 = ow * p.stride_w - p.pad_left;
        const Vec *xi = x + img * p.in_h * p.in_w * p.vecs + vec;
        float acc[8];
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] = 0.0f;
        for (int r = 0; r < p.kernel_h; r++) {
            const int ih = ih0 + r * p.dilation_h;
            if (ih < 0 || ih >= p.in_h) continue;
            for (int s = 0; s < p.kernel_w; s++) {
                const int iw = iw0 + s * p.dilation_w;
                if (iw < 0 || iw >= p.in_w) continue;
                float v[8], wv[8];
                unpack(ldg_vec(xi + ((int64_t)ih * p.in_w + iw) * p.vecs), v);
                unpack(ldg_vec(w + ((int64_t)r * p.kernel_w + s) * p.vecs + vec), wv);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] = fmaf(v[k], wv[k], acc[k]);
            }
        }
        float bias[8];
        load_bias<8>(p, vec, bias);
        finish<T, 8>(p, acc, bias, vec, i);
    }
}

template <typename T, int R, int S, int ST, int TH, int CH>
tci_status launch_tiled(const Params &p, dim3 block, cudaStream_t stream) {
    const unsigned grid = (unsigned)(p.blocks < kMaxGrid ? p.blocks : kMaxGrid);
    using Vec = typename VecOf<T, CH>::type;
    depthwise_tiled<T, R, S, ST, TH, CH>
        <<<grid, block, 0, stream>>>(p, static_cast<const Vec *>(p.x), static_cast<const Vec *>(p.w));
    KERN_LAUNCH_CHECK("kern_depthwise_conv");
    return TCI_OK;
}

// Channels per thread of the tiled kernel for a kernel size (see depthwise_tiled); fp32 takes 4
// channels (one 16-byte vector, as fp16's 8) so that its registers stay within the same budget.
int tiled_channels(int64_t kernel, bool fp32) { return !fp32 && kernel == 3 ? 8 : 4; }

template <typename T, int TH> tci_status dispatch_tiled(const Params &p, dim3 block, cudaStream_t stream) {
    constexpr int kCh3 = sizeof(T) == 2 ? 8 : 4; // tiled_channels(3, ...)
    const int key = p.kernel_h * 100 + p.stride_h;
    switch (key) {
    case 301: return launch_tiled<T, 3, 3, 1, TH, kCh3>(p, block, stream);
    case 302: return launch_tiled<T, 3, 3, 2, TH, kCh3>(p, block, stream);
    case 501: return launch_tiled<T, 5, 5, 1, TH, 4>(p, block, stream);
    case 502: return launch_tiled<T, 5, 5, 2, TH, 4>(p, block, stream);
    default: return status_error(TCI_ERR_UNSUPPORTED, "kern_depthwise_conv: no tiled kernel for %dx%d stride %d",
                              p.kernel_h, p.kernel_w, p.stride_h);
    }
}

bool tiled_shape(const kern_depthwise_desc *d) {
    return d->geom.kernel_h == d->geom.kernel_w && (d->geom.kernel_h == 3 || d->geom.kernel_h == 5) && d->geom.stride_h == d->geom.stride_w &&
           (d->geom.stride_h == 1 || d->geom.stride_h == 2) && d->geom.dilation_h == 1 && d->geom.dilation_w == 1;
}

// a*b, or -1 on overflow past INT64_MAX / 16 (room for byte counts)
int64_t checked_mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > INT64_MAX / 16) return -1;
    return r;
}

// Byte ranges [a, a+an) and [b, b+bn) share a byte.
bool overlaps(const void *a, int64_t an, const void *b, int64_t bn) {
    const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return an > 0 && bn > 0 && pa < pb + (uintptr_t)bn && pb < pa + (uintptr_t)an;
}

// The tiled kernels index within one image in int (check_desc has bounded every term) and clamp
// their loads into a non-empty input.
bool tiled_fits(const kern_depthwise_desc *d, bool fp32) {
    const int64_t vecs = (d->geom.c + 7) / 8 * 8 / tiled_channels(d->geom.kernel_h, fp32);
    const int64_t reach_h = d->geom.h + d->geom.pad_top + (d->geom.out_h + kTallRows) * d->geom.stride_h + d->geom.kernel_h;
    const int64_t reach_w = d->geom.w + d->geom.pad_left + d->geom.out_w * d->geom.stride_w + d->geom.kernel_w;
    const int64_t limit = (int64_t)1 << 30;
    const int64_t in = checked_mul(checked_mul(reach_h, d->geom.w + 1), vecs);
    const int64_t col = checked_mul(reach_w, vecs);
    const int64_t out = checked_mul(checked_mul(d->geom.out_h + kTallRows, d->geom.out_w + 1), vecs);
    const int64_t weights = checked_mul(checked_mul(d->geom.kernel_h, d->geom.kernel_w), vecs);
    return d->geom.h > 0 && d->geom.w > 0 && in >= 0 && in <= limit && col >= 0 && col <= limit && out >= 0 &&
           out <= limit && weights >= 0 && weights <= limit;
}

tci_status check_desc(const kern_depthwise_desc *d, const char *who) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL desc", who);
    if (d->geom.n < 0 || d->geom.c < 0 || d->geom.h < 0 || d->geom.w < 0 || d->geom.out_h < 0 || d->geom.out_w < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: negative size (n %lld, c %lld, in %lldx%lld, out %lldx%lld)", who, (long long)d->geom.n,
                         (long long)d->geom.c, (long long)d->geom.h, (long long)d->geom.w, (long long)d->geom.out_h,
                         (long long)d->geom.out_w);
    if (d->geom.kernel_h < 1 || d->geom.kernel_w < 1 || d->geom.stride_h < 1 || d->geom.stride_w < 1 || d->geom.dilation_h < 1 ||
        d->geom.dilation_w < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: kernel %lldx%lld, strides %lldx%lld and dilations %lldx%lld must be >= 1", who,
                         (long long)d->geom.kernel_h, (long long)d->geom.kernel_w, (long long)d->geom.stride_h,
                         (long long)d->geom.stride_w, (long long)d->geom.dilation_h, (long long)d->geom.dilation_w);
    if (d->geom.pad_top < 0 || d->geom.pad_left < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative pads (top %lld, left %lld)", who,
                         (long long)d->geom.pad_top, (long long)d->geom.pad_left);
    // every coordinate and index the generic kernel forms in int stays below 2 * kMaxSpatial
    const int64_t parts[] = {d->geom.c, d->geom.h, d->geom.w, d->geom.pad_top, d->geom.pad_left,
                             checked_mul(d->geom.out_h, d->geom.stride_h), checked_mul(d->geom.out_w, d->geom.stride_w),
                             checked_mul(d->geom.kernel_h, d->geom.dilation_h), checked_mul(d->geom.kernel_w, d->geom.dilation_w),
                             checked_mul(d->geom.kernel_h, d->geom.kernel_w)};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i] < 0 || parts[i] > kMaxSpatial)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: sizes too large", who);
    return TCI_OK;
}

} // namespace

extern "C" int kern_depthwise_is_tiled(const kern_depthwise_desc *d) { return d && tiled_shape(d) ? 1 : 0; }

extern "C" tci_status kern_depthwise_conv(const kern_depthwise_desc *d, const void *x, const void *w,
                                          const void *bias, const void *z, void *y, cudaStream_t stream) {
    static const char who[] = "kern_depthwise_conv";
    tci_status st = check_desc(d, who);
    if (st != TCI_OK) return st;
    Storage storage = Storage::kHalf;
    TRY_STATUS(storage_type(who, d->dtype, &storage));
    const bool fp32 = storage == Storage::kFloat;
    const int64_t esize = fp32 ? 4 : 2;
    if ((int)d->act < 0 || d->act >= ACT_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown activation %d", who, (int)d->act);
    if ((int)d->path < 0 || d->path >= KERN_DEPTHWISE_PATH_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown path %d", who, (int)d->path);
    const bool forced = d->path == KERN_DEPTHWISE_TILED_SHORT || d->path == KERN_DEPTHWISE_TILED_TALL;
    if (forced && !tiled_shape(d))
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: no tiled kernel for kernel %lldx%lld, strides %lldx%lld, dilations %lldx%lld "
                         "(tiled: 3x3 or 5x5, equal strides 1 or 2, dilation 1)",
                         who, (long long)d->geom.kernel_h, (long long)d->geom.kernel_w, (long long)d->geom.stride_h,
                         (long long)d->geom.stride_w, (long long)d->geom.dilation_h, (long long)d->geom.dilation_w);
    const bool tiled = tiled_shape(d) && tiled_fits(d, fp32);
    if (forced && !tiled)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: the tiled kernel needs a non-empty, not huge input (%lldx%lld, c %lld)", who,
                         (long long)d->geom.h, (long long)d->geom.w, (long long)d->geom.c);
    const int64_t chunks = (d->geom.c + 7) / 8;
    const int64_t in_elems = checked_mul(checked_mul(checked_mul(d->geom.n, d->geom.h), d->geom.w), chunks * 8);
    const int64_t out_elems = checked_mul(checked_mul(checked_mul(d->geom.n, d->geom.out_h), d->geom.out_w), chunks * 8);
    if (in_elems < 0 || out_elems < 0) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: sizes too large", who);
    if (out_elems == 0) return TCI_OK;
    if (!w || !y || (!x && in_elems > 0)) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", who);
    if (!aligned16(x) || !aligned16(w) || !aligned16(y) || !aligned16(bias) || !aligned16(z))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", who);
    if (overlaps(x, in_elems * esize, y, out_elems * esize))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: y overlaps x", who);
    if (overlaps(w, d->geom.kernel_h * d->geom.kernel_w * chunks * 8 * esize, y, out_elems * esize))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: y overlaps w", who);
    if (z && z != y && overlaps(z, out_elems * esize, y, out_elems * esize))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: z partly overlaps y (only z == y is allowed)", who);

    Params p;
    memset(&p, 0, sizeof p);
    p.x = x, p.w = w, p.z = z, p.y = y;
    p.bias = static_cast<const float4 *>(bias);
    p.n = d->geom.n;
    p.c = (int)d->geom.c;
    p.in_h = (int)d->geom.h, p.in_w = (int)d->geom.w, p.out_h = (int)d->geom.out_h, p.out_w = (int)d->geom.out_w;
    p.kernel_h = (int)d->geom.kernel_h, p.kernel_w = (int)d->geom.kernel_w;
    p.stride_h = (int)d->geom.stride_h, p.stride_w = (int)d->geom.stride_w;
    p.dilation_h = (int)d->geom.dilation_h, p.dilation_w = (int)d->geom.dilation_w;
    p.pad_top = (int)d->geom.pad_top, p.pad_left = (int)d->geom.pad_left;
    p.act = (int)d->act;
    p.alpha = d->act_alpha, p.beta = d->act_beta;

    if (!tiled || d->path == KERN_DEPTHWISE_GENERIC) {
        p.vecs = (int)chunks;
        const int64_t total = out_elems / 8;
        const int64_t blocks = ceil_div(total, kMaxThreads);
        const unsigned grid = (unsigned)(blocks < kMaxGrid ? blocks : kMaxGrid);
        return with_storage(storage, [&](auto tag) {
            depthwise_generic<typename decltype(tag)::type>
                <<<grid, kMaxThreads, 0, stream>>>(p, total);
            KERN_LAUNCH_CHECK(who);
            return TCI_OK;
        });
    }

    const int64_t vecs = chunks * 8 / tiled_channels(d->geom.kernel_h, fp32);
    int rows = d->path == KERN_DEPTHWISE_TILED_SHORT ? kShortRows : kTallRows;
    if (d->path == KERN_DEPTHWISE_AUTO &&
        checked_mul(checked_mul(d->geom.n, ceil_div(d->geom.out_h, kTallRows)), d->geom.out_w * vecs) < kTallMinThreads)
        rows = kShortRows;
    // vectors split evenly into groups of <= 32 (a warp spans at most two pixels' channels), then
    // as many columns as fit, split evenly too, then row tiles stacked while threads remain
    const int64_t groups = ceil_div(vecs, 32);
    const int64_t vpb = ceil_div(vecs, groups);
    const int64_t col_tiles = ceil_div(d->geom.out_w, kTiledThreads / vpb);
    const int64_t cols = ceil_div(d->geom.out_w, col_tiles);
    const int64_t row_tiles = ceil_div(d->geom.out_h, rows);
    int64_t stack = kTiledThreads / (vpb * cols);
    if (stack > 64) stack = 64; // blockDim.z limit
    if (stack > row_tiles) stack = row_tiles;
    if (stack < 1) stack = 1;
    const int64_t row_groups = ceil_div(row_tiles, stack);
    p.vecs = (int)vecs;
    p.vpb = (int)vpb, p.cols = (int)cols, p.tiles_per_block = (int)stack;
    p.groups = (int)groups, p.col_tiles = (int)col_tiles, p.row_groups = (int)row_groups;
    p.blocks = checked_mul(checked_mul(checked_mul(d->geom.n, row_groups), col_tiles), groups);
    if (p.blocks < 0) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: sizes too large", who);
    const dim3 block((unsigned)vpb, (unsigned)cols, (unsigned)stack);
    return with_storage(storage, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return rows == kTallRows ? dispatch_tiled<T, kTallRows>(p, block, stream)
                                 : dispatch_tiled<T, kShortRows>(p, block, stream);
    });
}

namespace {
uint16_t host_half_bits(float v) {
    const __half_raw raw = static_cast<__half_raw>(__float2half_rn(v));
    return raw.x;
}

uint16_t host_bf16_bits(float v) {
    const __nv_bfloat16_raw raw = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(v));
    return raw.x;
}

tci_status check_pack_desc(const kern_depthwise_desc *d, const char *who) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL desc", who);
    if (d->geom.c < 0 || d->geom.kernel_h < 1 || d->geom.kernel_w < 1 || d->geom.c > kMaxSpatial || d->geom.kernel_h > kMaxSpatial ||
        d->geom.kernel_w > kMaxSpatial || checked_mul(checked_mul(d->geom.kernel_h, d->geom.kernel_w), d->geom.c + 8) < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: bad sizes (c %lld, kernel %lldx%lld)", who,
                         (long long)d->geom.c, (long long)d->geom.kernel_h, (long long)d->geom.kernel_w);
    return TCI_OK;
}

// The (R, S, Cp) packing of both 16-bit types, each value rounded by bits().
tci_status pack_16bit(const kern_depthwise_desc *d, const float *w_c1rs, uint16_t *out, const char *who,
                      uint16_t (*bits)(float)) {
    tci_status st = check_pack_desc(d, who);
    if (st != TCI_OK) return st;
    if ((!w_c1rs && d->geom.c > 0) || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL pointer", who);
    const int64_t cp = (d->geom.c + 7) / 8 * 8, taps = d->geom.kernel_h * d->geom.kernel_w;
    for (int64_t t = 0; t < taps; t++)
        for (int64_t ch = 0; ch < cp; ch++)
            out[t * cp + ch] = ch < d->geom.c ? bits(w_c1rs[ch * taps + t]) : 0;
    return TCI_OK;
}
} // namespace

extern "C" tci_status kern_depthwise_pack_weights(const kern_depthwise_desc *d, const float *w_c1rs,
                                                  uint16_t *out) {
    return pack_16bit(d, w_c1rs, out, "kern_depthwise_pack_weights", host_half_bits);
}

extern "C" tci_status kern_depthwise_pack_weights_bf16(const kern_depthwise_desc *d,
                                                       const float *w_c1rs, uint16_t *out) {
    return pack_16bit(d, w_c1rs, out, "kern_depthwise_pack_weights_bf16", host_bf16_bits);
}

extern "C" tci_status kern_depthwise_pack_weights_f32(const kern_depthwise_desc *d, const float *w_c1rs,
                                                      float *out) {
    static const char who[] = "kern_depthwise_pack_weights_f32";
    tci_status st = check_pack_desc(d, who);
    if (st != TCI_OK) return st;
    if ((!w_c1rs && d->geom.c > 0) || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL pointer", who);
    const int64_t cp = (d->geom.c + 7) / 8 * 8, taps = d->geom.kernel_h * d->geom.kernel_w;
    for (int64_t t = 0; t < taps; t++)
        for (int64_t ch = 0; ch < cp; ch++) out[t * cp + ch] = ch < d->geom.c ? w_c1rs[ch * taps + t] : 0.0f;
    return TCI_OK;
}

extern "C" tci_status kern_depthwise_pack_bias(const kern_depthwise_desc *d, const float *bias_c, float *out) {
    static const char who[] = "kern_depthwise_pack_bias";
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL desc", who);
    if (d->geom.c < 0 || d->geom.c > kMaxSpatial)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: bad channel count %lld", who, (long long)d->geom.c);
    if (!out) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL pointer", who);
    const int64_t cp = (d->geom.c + 7) / 8 * 8;
    for (int64_t ch = 0; ch < cp; ch++) out[ch] = bias_c && ch < d->geom.c ? bias_c[ch] : 0.0f;
    return TCI_OK;
}
