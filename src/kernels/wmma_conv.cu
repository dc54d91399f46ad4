// Implicit-GEMM convolution on tensor cores through WMMA: GEMM rows are output pixels, columns output
// channels, the reduction runs over (tap, channel). The A tile is gathered straight from the NHWC
// input while it is staged (one 16-byte cp.async per 8 channels of a tap, zero-filled for padding
// taps and tails), so no im2col buffer exists; a multi-stage cp.async pipeline keeps loads in flight
// while the warps run mma_sync. Every config is one instantiation of one kernel template; split-K
// configs write fp32 partials and a small kernel sums them and runs the epilogue.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <mma.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "util/status.h"
}
#include "kernels/act.cuh"
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/wmma_conv.h"

namespace {

using namespace nvcuda;

// Halves of padding after each shared-memory tile row: rows then start 16 bytes apart modulo 128,
// so the eight 16-byte rows a fragment load reads at once hit distinct banks.
constexpr int kSkew = 8;
// Split-K partials start at this alignment (WMMA stores want 32 bytes; 256 keeps rows tidy).
constexpr size_t kWorkspaceAlign = 256;
// Split-K only pays where the unsplit grid is too small to fill the GPU (132 SMs on the H200, a
// few blocks each); past this many output tiles it only adds partial traffic.
constexpr int64_t kMaxSplitTiles = 512;
constexpr int kReduceThreads = 256;
constexpr int64_t kMaxReduceBlocks = 1 << 20;
constexpr int kDefaultSmem = 48 * 1024;

// Every index the kernels form in int is bounded by one of these (checked on the host). x, w, z
// and y hold the kernel's element type E (__half or __nv_bfloat16).
struct Params {
    const void *x, *w;
    const float *bias;
    const void *z; // may equal y: read by the thread that then writes the same element
    void *y;
    float *ws;       // split-K partials: (splits, groups, mpad, npad) fp32
    int m;           // GEMM rows: n * out_h * out_w
    int h, w_in;     // input plane
    int cp;          // channel stride of x
    int cg;          // input channels per group (Cp when groups == 1)
    int kdim;        // r * s * cg
    int ng;          // GEMM columns per group: Kp (groups == 1) or K / groups
    int k_real;      // logical output channels: y channels >= k_real are written as 0
    int kp;          // channel stride of y
    int r, s, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, out_h, out_w;
    int groups, splits, ktiles;
    int mpad, npad;
    float alpha;
    int act;
    float act_alpha, act_beta;
};

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int bytes = valid ? 16 : 0; // 0: nothing is read, the 16 bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Two elements of type E in 32 bits (the lower address in the low half), rounded to nearest even.
template <class E> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | ((uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
template <class E> __device__ __forceinline__ float2 unpack2(uint32_t bits);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t bits) {
    __half2 h;
    memcpy(&h, &bits, sizeof h);
    return __half22float2(h);
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t bits) {
    return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
}

// Output channels ch .. ch+7 of GEMM row m from their fp32 sums: the one place y is written.
template <class E> __device__ __forceinline__ void epilogue8(const Params &p, float (&v)[8], int m, int ch) {
    if (p.bias) {
        const float4 b0 = *reinterpret_cast<const float4 *>(p.bias + ch);
        const float4 b1 = *reinterpret_cast<const float4 *>(p.bias + ch + 4);
        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = p.alpha * v[j] + b[j];
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] *= p.alpha;
    }
    const size_t off = (size_t)m * (size_t)p.kp + (size_t)ch;
    if (p.z) {
        const uint4 zz = *reinterpret_cast<const uint4 *>(static_cast<const E *>(p.z) + off);
        const float2 a = unpack2<E>(zz.x), b = unpack2<E>(zz.y), c = unpack2<E>(zz.z), d = unpack2<E>(zz.w);
        v[0] += a.x, v[1] += a.y, v[2] += b.x, v[3] += b.y, v[4] += c.x, v[5] += c.y, v[6] += d.x, v[7] += d.y;
    }
    // FAST: the fp16 elementwise kernel's forms, so that a fused activation gives what the separate
    // elementwise kernel would
    kern_util::act8<true>(p.act, v, p.act_alpha, p.act_beta);
    if (ch + 8 > p.k_real) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (ch + j >= p.k_real) v[j] = 0.0f;
    }
    *reinterpret_cast<uint4 *>(static_cast<E *>(p.y) + off) = make_uint4(
        pack2<E>(v[0], v[1]), pack2<E>(v[2], v[3]), pack2<E>(v[4], v[5]), pack2<E>(v[6], v[7]));
}

// Block tile BM x BN x BK, warp tile WM x WN, fragments FM x FN x 16, STAGES-deep pipeline.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int FM_, int FN_, int STAGES_> struct Tile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, FM = FM_, FN = FN_, FK = 16;
    static constexpr int STAGES = STAGES_;
    static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN, kWarps = kWarpsM * kWarpsN;
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kLds = BK + kSkew;    // shared row stride, halves
    static constexpr int kChunks = BK / 8;     // 16-byte chunks per tile row
    static constexpr int kRowStep = kThreads / kChunks;
    static constexpr int kAIters = BM / kRowStep, kBIters = BN / kRowStep;
    static constexpr int kFragsM = WM / FM, kFragsN = WN / FN;
    static constexpr int kStageHalves = (BM + BN) * kLds;
    static constexpr int kSmemBytes = STAGES * kStageHalves * 2;
    static constexpr int kEpiLd = FN + 4;      // fp32 staging row stride (a multiple of 4)
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % FM == 0 && WN % FN == 0, "tile shapes");
    static_assert(FM * FN == 256, "a fragment is 256 values: 32 lanes x 8 channels in the epilogue");
    static_assert(BK % FK == 0 && kThreads % kChunks == 0, "BK");
    static_assert(BM % kRowStep == 0 && BN % kRowStep == 0 && kAIters >= 1 && kBIters >= 1, "loader");
    static_assert(STAGES >= 2, "pipeline");
    static_assert(kWarps * FM * kEpiLd * 4 <= kSmemBytes, "epilogue staging fits the pipeline buffers");
    static_assert((BM * kLds * 2) % 32 == 0 && (kStageHalves * 2) % 32 == 0 && (8 * kLds * 2) % 32 == 0,
                  "fragment pointers 32-byte aligned");
};

template <class T, class E, bool FAST>
__global__ void __launch_bounds__(T::kThreads) wmma_conv_kernel(const Params p) {
    constexpr int BM = T::BM, BN = T::BN, BK = T::BK, LDS = T::kLds;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    E *const smem = reinterpret_cast<E *>(smem_raw);
    const E *const px = static_cast<const E *>(p.x), *const pw = static_cast<const E *>(p.w);

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warp_m = warp % T::kWarpsM, warp_n = warp / T::kWarpsM;
    const int g = (int)blockIdx.z % p.groups, split = (int)blockIdx.z / p.groups;
    const int bm0 = (int)blockIdx.x * BM, bn0 = (int)blockIdx.y * BN;
    const int kt_begin = (int)((int64_t)split * p.ktiles / p.splits);
    const int kt_end = (int)((int64_t)(split + 1) * p.ktiles / p.splits);
    const int kc = tid % T::kChunks, row0 = tid / T::kChunks;
    const int cgoff = g * p.cg;

    // Each thread loads one fixed 8-channel column of the tile for a few fixed rows: what the
    // rows need (pixel base, window origin) is worked out once here.
    int a_base[T::kAIters], a_ih[T::kAIters], a_iw[T::kAIters];
#pragma unroll
    for (int i = 0; i < T::kAIters; i++) {
        const int m = bm0 + row0 + i * T::kRowStep;
        if (FAST) {
            a_base[i] = m < p.m ? m * p.cp + cgoff : -1;
            a_ih[i] = a_iw[i] = 0;
        } else if (m < p.m) {
            const int plane = p.out_h * p.out_w;
            const int img = m / plane, rem = m - img * plane;
            const int oh = rem / p.out_w, ow = rem - oh * p.out_w;
            a_base[i] = img * p.h;
            a_ih[i] = oh * p.stride_h - p.pad_top;
            a_iw[i] = ow * p.stride_w - p.pad_left;
        } else {
            a_base[i] = 0;
            a_ih[i] = INT_MIN / 2; // every tap of a row past M is out of the input
            a_iw[i] = 0;
        }
    }
    int b_off[T::kBIters];
#pragma unroll
    for (int i = 0; i < T::kBIters; i++) {
        const int n = bn0 + row0 + i * T::kRowStep;
        b_off[i] = n < p.ng ? (g * p.ng + n) * p.kdim : -1;
    }

    // Reduction position of this thread's chunk: kpos = tap * cg + tc, tap = tr * s + ts.
    int kpos = kt_begin * BK + kc * 8;
    int tr = 0, ts = 0, tc = 0;
    if (!FAST) {
        const int tap = kpos / p.cg;
        tc = kpos - tap * p.cg;
        tr = tap / p.s;
        ts = tap - tr * p.s;
    }

    auto load_tile = [&](int stage) {
        E *const as = smem + stage * T::kStageHalves;
        E *const bs = as + BM * LDS;
        const bool kvalid = kpos < p.kdim;
#pragma unroll
        for (int i = 0; i < T::kAIters; i++) {
            const E *src = px;
            bool ok = false;
            if (kvalid) {
                if (FAST) {
                    ok = a_base[i] >= 0;
                    if (ok) src = px + a_base[i] + kpos;
                } else {
                    const int ih = a_ih[i] + tr * p.dil_h, iw = a_iw[i] + ts * p.dil_w;
                    ok = (unsigned)ih < (unsigned)p.h && (unsigned)iw < (unsigned)p.w_in;
                    if (ok) src = px + ((a_base[i] + ih) * p.w_in + iw) * p.cp + cgoff + tc;
                }
            }
            cp_async16(as + (row0 + i * T::kRowStep) * LDS + kc * 8, src, ok);
        }
#pragma unroll
        for (int i = 0; i < T::kBIters; i++) {
            const bool ok = kvalid && b_off[i] >= 0;
            cp_async16(bs + (row0 + i * T::kRowStep) * LDS + kc * 8, ok ? pw + b_off[i] + kpos : pw, ok);
        }
        kpos += BK;
        if (!FAST) {
            tc += BK;
            while (tc >= p.cg) {
                tc -= p.cg;
                if (++ts == p.s) {
                    ts = 0;
                    ++tr;
                }
            }
        }
    };

    wmma::fragment<wmma::accumulator, T::FM, T::FN, T::FK, float> acc[T::kFragsM][T::kFragsN];
#pragma unroll
    for (int i = 0; i < T::kFragsM; i++)
#pragma unroll
        for (int j = 0; j < T::kFragsN; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    const int nkt = kt_end - kt_begin;
#pragma unroll
    for (int st = 0; st < T::STAGES - 1; st++) {
        if (st < nkt) load_tile(st);
        cp_async_commit();
    }
    for (int it = 0; it < nkt; it++) {
        // tile `it` has landed (for this thread's copies; the barrier makes it everyone's), and
        // every warp is done with the stage the next prefetch overwrites (read at it - 1)
        cp_async_wait<T::STAGES - 2>();
        __syncthreads();
        const int pf = it + T::STAGES - 1;
        if (pf < nkt) load_tile(pf % T::STAGES);
        cp_async_commit();

        const E *const as = smem + (it % T::STAGES) * T::kStageHalves;
        const E *const bs = as + BM * LDS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += T::FK) {
            wmma::fragment<wmma::matrix_a, T::FM, T::FN, T::FK, E, wmma::row_major> a[T::kFragsM];
            wmma::fragment<wmma::matrix_b, T::FM, T::FN, T::FK, E, wmma::col_major> b[T::kFragsN];
#pragma unroll
            for (int i = 0; i < T::kFragsM; i++)
                wmma::load_matrix_sync(a[i], as + (warp_m * T::WM + i * T::FM) * LDS + kk, LDS);
#pragma unroll
            for (int j = 0; j < T::kFragsN; j++)
                wmma::load_matrix_sync(b[j], bs + (warp_n * T::WN + j * T::FN) * LDS + kk, LDS);
#pragma unroll
            for (int i = 0; i < T::kFragsM; i++)
#pragma unroll
                for (int j = 0; j < T::kFragsN; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
    }
    cp_async_wait<0>();
    __syncthreads(); // the pipeline buffers become the epilogue's staging area

    if (p.splits > 1) {
        // partials are padded to whole tiles, so fragments go out unguarded
        float *const ws = p.ws +
                          ((size_t)(split * p.groups + g) * (size_t)p.mpad + (size_t)(bm0 + warp_m * T::WM)) *
                              (size_t)p.npad +
                          (size_t)(bn0 + warp_n * T::WN);
#pragma unroll
        for (int i = 0; i < T::kFragsM; i++)
#pragma unroll
            for (int j = 0; j < T::kFragsN; j++)
                wmma::store_matrix_sync(ws + (size_t)(i * T::FM) * (size_t)p.npad + j * T::FN, acc[i][j],
                                        (unsigned)p.npad, wmma::mem_row_major);
        return;
    }

    // The element layout of a fragment is unspecified: each warp stages one fragment at a time as
    // fp32 in shared memory, then each lane takes 8 consecutive channels of one row.
    // A loop over the fragments, not unrolled: the epilogue's code then exists once per kernel
    // rather than once per fragment (unrolled, a kernel was 30K instructions and the file took
    // minutes to compile). Only the fragment store is unrolled, so that the accumulators keep
    // constant indices (and stay in registers).
    float *const buf = reinterpret_cast<float *>(smem_raw) + warp * T::FM * T::kEpiLd;
    const int er = lane / (T::FN / 8), ec = (lane % (T::FN / 8)) * 8;
#pragma unroll 1
    for (int i = 0; i < T::kFragsM; i++)
#pragma unroll 1
        for (int j = 0; j < T::kFragsN; j++) {
#pragma unroll
            for (int fi = 0; fi < T::kFragsM; fi++)
#pragma unroll
                for (int fj = 0; fj < T::kFragsN; fj++)
                    if (fi == i && fj == j)
                        wmma::store_matrix_sync(buf, acc[fi][fj], T::kEpiLd, wmma::mem_row_major);
            __syncwarp();
            const int m = bm0 + warp_m * T::WM + i * T::FM + er;
            const int n = bn0 + warp_n * T::WN + j * T::FN + ec;
            if (m < p.m && n < p.ng) {
                const float4 lo = *reinterpret_cast<const float4 *>(buf + er * T::kEpiLd + ec);
                const float4 hi = *reinterpret_cast<const float4 *>(buf + er * T::kEpiLd + ec + 4);
                float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
                epilogue8<E>(p, v, m, g * p.ng + n);
            }
            __syncwarp();
        }
}

// Sums the split-K partials of 8 channels of one row per thread, then the epilogue.
template <class E> __global__ void __launch_bounds__(kReduceThreads) splitk_reduce_kernel(const Params p) {
    const int chunks = p.ng / 8;
    const int64_t total = (int64_t)p.groups * p.m * chunks;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx % chunks);
        const int64_t t = idx / chunks;
        const int m = (int)(t % p.m), g = (int)(t / p.m);
        float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int sp = 0; sp < p.splits; sp++) {
            const float *src =
                p.ws + ((size_t)(sp * p.groups + g) * (size_t)p.mpad + (size_t)m) * (size_t)p.npad + (size_t)c * 8;
            const float4 lo = *reinterpret_cast<const float4 *>(src);
            const float4 hi = *reinterpret_cast<const float4 *>(src + 4);
            v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w;
            v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
        }
        epilogue8<E>(p, v, m, g * p.ng + c * 8);
    }
}

using LaunchFn = tci_status (*)(const Params &p, bool fast, dim3 grid, cudaStream_t stream);

template <class T, class E> tci_status launch_tile(const Params &p, bool fast, dim3 grid, cudaStream_t stream) {
    void (*kernel)(Params) = fast ? wmma_conv_kernel<T, E, true> : wmma_conv_kernel<T, E, false>;
    // a per-function attribute, not stream work: legal while capturing, cheap, and leaves no state
    // that another caller depends on
    if (T::kSmemBytes > kDefaultSmem)
        KERN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
    kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(p);
    KERN_LAUNCH_CHECK("wmma_conv_kernel");
    return TCI_OK;
}

//                 BM   BN  BK  WM  WN  FM  FN stages
using T128x128 = Tile<128, 128, 32, 64, 32, 16, 16, 4>;
using T128x64 = Tile<128, 64, 32, 64, 32, 16, 16, 4>;
using T64x128 = Tile<64, 128, 32, 32, 64, 16, 16, 4>;
using T64x64 = Tile<64, 64, 32, 32, 32, 16, 16, 4>;
using T64x64k64 = Tile<64, 64, 64, 32, 32, 16, 16, 3>;
using T128x64f32x8 = Tile<128, 64, 32, 64, 32, 32, 8, 4>;
using T64x128f8x32 = Tile<64, 128, 32, 32, 64, 8, 32, 4>;
using T32x64k64 = Tile<32, 64, 64, 16, 32, 16, 16, 3>;
using T32x32k64 = Tile<32, 32, 64, 16, 32, 16, 16, 3>;
using T32x64k64f8x32 = Tile<32, 64, 64, 16, 32, 8, 32, 3>;

struct Config {
    const char *name;
    int bm, bn, bk, splits;
    LaunchFn launch;      // fp16 tensors
    LaunchFn launch_bf16; // bf16 tensors; NULL: this config has no bf16 instantiation
};

// The bf16 family (--precision bf16) instantiates only the 16x16x16-fragment tiles: each tile is
// two more kernels to compile, and the 32x8 / 8x32 shapes rarely win a layer.
#define WMMA_CONFIG(name, T, splits) {name, T::BM, T::BN, T::BK, splits, launch_tile<T, __half>, launch_tile<T, __nv_bfloat16>}
#define WMMA_CONFIG_F16(name, T, splits) {name, T::BM, T::BN, T::BK, splits, launch_tile<T, __half>, nullptr}
const Config kConfigs[] = {
    WMMA_CONFIG("wmma 128x128x32 w8 16x16x16 s4", T128x128, 1),
    WMMA_CONFIG("wmma 128x64x32 w4 16x16x16 s4", T128x64, 1),
    WMMA_CONFIG("wmma 64x128x32 w4 16x16x16 s4", T64x128, 1),
    WMMA_CONFIG("wmma 64x64x32 w4 16x16x16 s4", T64x64, 1),
    WMMA_CONFIG("wmma 64x64x64 w4 16x16x16 s3", T64x64k64, 1),
    WMMA_CONFIG_F16("wmma 128x64x32 w4 32x8x16 s4", T128x64f32x8, 1),
    WMMA_CONFIG_F16("wmma 64x128x32 w4 8x32x16 s4", T64x128f8x32, 1),
    WMMA_CONFIG("wmma 32x64x64 w4 16x16x16 s3", T32x64k64, 1),
    WMMA_CONFIG("wmma 32x32x64 w2 16x16x16 s3", T32x32k64, 1),
    WMMA_CONFIG_F16("wmma 32x64x64 w4 8x32x16 s3", T32x64k64f8x32, 1),
    WMMA_CONFIG("wmma 64x64x32 w4 16x16x16 s4 splitk2", T64x64, 2),
    WMMA_CONFIG("wmma 64x64x32 w4 16x16x16 s4 splitk4", T64x64, 4),
    WMMA_CONFIG("wmma 64x64x32 w4 16x16x16 s4 splitk8", T64x64, 8),
    WMMA_CONFIG("wmma 64x64x32 w4 16x16x16 s4 splitk16", T64x64, 16),
    WMMA_CONFIG("wmma 32x64x64 w4 16x16x16 s3 splitk4", T32x64k64, 4),
    WMMA_CONFIG("wmma 32x64x64 w4 16x16x16 s3 splitk8", T32x64k64, 8),
    WMMA_CONFIG("wmma 32x64x64 w4 16x16x16 s3 splitk16", T32x64k64, 16),
    WMMA_CONFIG_F16("wmma 32x64x64 w4 8x32x16 s3 splitk8", T32x64k64f8x32, 8),
    WMMA_CONFIG("wmma 32x32x64 w2 16x16x16 s3 splitk4", T32x32k64, 4),
};
#undef WMMA_CONFIG
#undef WMMA_CONFIG_F16
constexpr int kConfigCount = (int)(sizeof kConfigs / sizeof kConfigs[0]);

int64_t checked_mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > INT64_MAX / 16) return -1;
    return r;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round8(int64_t v) { return (v + 7) / 8 * 8; }
bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
// Byte ranges [a, a+an) and [b, b+bn) share a byte.
bool overlaps(const void *a, int64_t an, const void *b, int64_t bn) {
    const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return a && b && an > 0 && bn > 0 && pa < pb + (uintptr_t)bn && pb < pa + (uintptr_t)an;
}

// The GEMM a desc becomes at batch n, with every size the kernels index in int.
struct Shape {
    int64_t cp, kp, cg, kg, kdim, ng, m, x_elems, y_elems, w_elems;
};

Shape shape_of(const kern_wmma_conv_desc *d, int64_t n) {
    Shape s;
    s.cp = round8(d->geom.c);
    s.kp = round8(d->geom.k);
    s.cg = d->geom.groups == 1 ? s.cp : d->geom.c / d->geom.groups;
    s.kg = d->geom.k / d->geom.groups;
    s.ng = d->geom.groups == 1 ? s.kp : s.kg;
    s.kdim = checked_mul(checked_mul(d->geom.kernel_h, d->geom.kernel_w), s.cg);
    s.m = checked_mul(checked_mul(n, d->geom.out_h), d->geom.out_w);
    s.x_elems = checked_mul(checked_mul(checked_mul(n, d->geom.h), d->geom.w), s.cp);
    s.y_elems = checked_mul(s.m, s.kp);
    s.w_elems = checked_mul(d->geom.groups == 1 ? s.kp : d->geom.k, s.kdim);
    return s;
}

tci_status check_desc(const kern_wmma_conv_desc *d, const char *who) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL desc", who);
    if (d->geom.n < 1 || d->geom.c < 1 || d->geom.h < 1 || d->geom.w < 1 || d->geom.k < 1 || d->geom.out_h < 1 || d->geom.out_w < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: sizes must be >= 1 (n %lld, c %lld, in %lldx%lld, k %lld, out %lldx%lld)", who,
                         (long long)d->geom.n, (long long)d->geom.c, (long long)d->geom.h, (long long)d->geom.w, (long long)d->geom.k,
                         (long long)d->geom.out_h, (long long)d->geom.out_w);
    if (d->geom.kernel_h < 1 || d->geom.kernel_w < 1 || d->geom.stride_h < 1 || d->geom.stride_w < 1 || d->geom.dilation_h < 1 || d->geom.dilation_w < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: kernel %lldx%lld, strides %lldx%lld and dilations %lldx%lld must be >= 1", who,
                         (long long)d->geom.kernel_h, (long long)d->geom.kernel_w, (long long)d->geom.stride_h, (long long)d->geom.stride_w,
                         (long long)d->geom.dilation_h, (long long)d->geom.dilation_w);
    if (d->geom.pad_top < 0 || d->geom.pad_left < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative pads (top %lld, left %lld)", who,
                         (long long)d->geom.pad_top, (long long)d->geom.pad_left);
    if (d->geom.groups < 1 || d->geom.c % d->geom.groups != 0 || d->geom.k % d->geom.groups != 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: groups %lld must divide c %lld and k %lld", who,
                         (long long)d->geom.groups, (long long)d->geom.c, (long long)d->geom.k);
    if (d->geom.groups > 1 && ((d->geom.c / d->geom.groups) % 8 != 0 || (d->geom.k / d->geom.groups) % 8 != 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: with %lld groups, c/groups (%lld) and k/groups (%lld) must be multiples of 8", who,
                         (long long)d->geom.groups, (long long)(d->geom.c / d->geom.groups), (long long)(d->geom.k / d->geom.groups));
    if ((int)d->act < 0 || d->act >= ACT_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown activation %d", who, (int)d->act);
    if (d->dtype != TCI_DTYPE_UNDEFINED && d->dtype != TCI_DTYPE_FLOAT16 && d->dtype != TCI_DTYPE_BFLOAT16)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: dtype %s (float16 or bfloat16 only)", who,
                         tci_dtype_name(d->dtype));
    return TCI_OK;
}

bool is_bf16(const kern_wmma_conv_desc *d) { return d->dtype == TCI_DTYPE_BFLOAT16; }

// Past the 32-bit indexing of the kernels, or the grid's limits: TCI_ERR_UNSUPPORTED.
tci_status check_limits(const kern_wmma_conv_desc *d, const Config &cfg, const char *who) {
    const Shape s = shape_of(d, d->geom.n);
    // window origins and reaches, formed in int: (out-1)*stride - pad + (kernel-1)*dilation
    const int64_t reach[] = {checked_mul(d->geom.out_h, d->geom.stride_h), checked_mul(d->geom.out_w, d->geom.stride_w),
                             checked_mul(d->geom.kernel_h, d->geom.dilation_h), checked_mul(d->geom.kernel_w, d->geom.dilation_w),
                             d->geom.pad_top, d->geom.pad_left, d->geom.h, d->geom.w};
    for (size_t i = 0; i < sizeof reach / sizeof reach[0]; i++)
        if (reach[i] < 0 || reach[i] > ((int64_t)1 << 29))
            return status_error(TCI_ERR_UNSUPPORTED, "%s: spatial sizes, strides, dilations or pads too large", who);
    const int64_t limit = INT32_MAX - 1024; // kernels add a tile's worth past the last index
    if (s.kdim < 0 || s.m < 0 || s.x_elems < 0 || s.y_elems < 0 || s.w_elems < 0 || s.kdim > limit ||
        s.m > limit || s.x_elems > limit || s.y_elems > limit || s.w_elems > limit)
        return status_error(TCI_ERR_UNSUPPORTED, "%s: tensors of 2^31 elements or more (32-bit indexing)", who);
    if (ceil_div(s.ng, cfg.bn) > 65535 || d->geom.groups * cfg.splits > 65535)
        return status_error(TCI_ERR_UNSUPPORTED, "%s: too many output channels or groups for the grid", who);
    if (cfg.splits > 1) {
        const int64_t ktiles = ceil_div(s.kdim, cfg.bk);
        if (ktiles < cfg.splits)
            return status_error(TCI_ERR_UNSUPPORTED, "%s: %s: %lld K tiles of %d, fewer than %d splits", who,
                             cfg.name, (long long)ktiles, cfg.bk, cfg.splits);
        const int64_t tiles = ceil_div(s.m, cfg.bm) * ceil_div(s.ng, cfg.bn) * d->geom.groups;
        if (tiles > kMaxSplitTiles)
            return status_error(TCI_ERR_UNSUPPORTED,
                             "%s: %s: %lld output tiles already fill the GPU (split-K only up to %lld)", who,
                             cfg.name, (long long)tiles, (long long)kMaxSplitTiles);
    }
    return TCI_OK;
}

tci_status check_config(const kern_wmma_conv_desc *d, int config, const char *who) {
    if (config < 0 || config >= kConfigCount)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown config %d (there are %d)", who, config,
                         kConfigCount);
    if (is_bf16(d) && !kConfigs[config].launch_bf16)
        return status_error(TCI_ERR_UNSUPPORTED, "%s: %s has no bfloat16 kernel", who, kConfigs[config].name);
    return TCI_OK;
}

size_t workspace_bytes(const kern_wmma_conv_desc *d, const Config &cfg, int64_t n) {
    if (cfg.splits == 1) return 0;
    const Shape s = shape_of(d, n);
    const int64_t mpad = ceil_div(s.m, cfg.bm) * cfg.bm, npad = ceil_div(s.ng, cfg.bn) * cfg.bn;
    return (size_t)cfg.splits * (size_t)d->geom.groups * (size_t)mpad * (size_t)npad * sizeof(float) + kWorkspaceAlign;
}

uint16_t host_bits(float v, bool bf16) {
    if (bf16) return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(v)).x;
    return static_cast<__half_raw>(__float2half_rn(v)).x;
}

} // namespace

extern "C" int kern_wmma_conv_config_count(void) { return kConfigCount; }

extern "C" const char *kern_wmma_conv_config_name(int config) {
    return config >= 0 && config < kConfigCount ? kConfigs[config].name : NULL;
}

extern "C" tci_status kern_wmma_conv_supports(const kern_wmma_conv_desc *d, int config) {
    static const char who[] = "kern_wmma_conv_supports";
    TRY_STATUS(check_desc(d, who));
    TRY_STATUS(check_config(d, config, who));
    return check_limits(d, kConfigs[config], who);
}

extern "C" size_t kern_wmma_conv_workspace(const kern_wmma_conv_desc *d, int config) {
    if (!d || check_desc(d, "kern_wmma_conv_workspace") != TCI_OK ||
        check_config(d, config, "kern_wmma_conv_workspace") != TCI_OK ||
        check_limits(d, kConfigs[config], "kern_wmma_conv_workspace") != TCI_OK) {
        status_error_clear();
        return 0;
    }
    return workspace_bytes(d, kConfigs[config], d->geom.n);
}

extern "C" tci_status kern_wmma_conv_run(const kern_wmma_conv_desc *d, int config, int64_t n, const void *x,
                                         const void *w, const void *bias, const void *z, void *y, void *workspace,
                                         size_t workspace_size, cudaStream_t stream) {
    static const char who[] = "kern_wmma_conv_run";
    TRY_STATUS(check_desc(d, who));
    TRY_STATUS(check_config(d, config, who));
    const Config &cfg = kConfigs[config];
    TRY_STATUS(check_limits(d, cfg, who));
    if (n < 1 || n > d->geom.n)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: batch %lld outside 1..%lld", who, (long long)n,
                         (long long)d->geom.n);
    const Shape s = shape_of(d, n);
    if (!x || !w || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL buffer", who);
    if (!aligned16(x) || !aligned16(w) || !aligned16(y) || !aligned16(bias) || !aligned16(z) ||
        !aligned16(workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", who);
    const size_t need = workspace_bytes(d, cfg, n);
    if (need > 0 && (!workspace || workspace_size < need))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: %s needs %zu workspace bytes at batch %lld, got %zu", who,
                         cfg.name, need, (long long)n, workspace ? workspace_size : (size_t)0);
    const int64_t x_bytes = s.x_elems * 2, y_bytes = s.y_elems * 2, w_bytes = s.w_elems * 2;
    if (overlaps(x, x_bytes, y, y_bytes)) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: y overlaps x", who);
    if (overlaps(w, w_bytes, y, y_bytes)) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: y overlaps w", who);
    if (overlaps(bias, s.kp * 4, y, y_bytes))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: y overlaps bias", who);
    if (z && z != y && overlaps(z, y_bytes, y, y_bytes))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: z partly overlaps y (only z == y is allowed)", who);
    if (need > 0) {
        const int64_t ws = (int64_t)need;
        if (overlaps(workspace, ws, x, x_bytes) || overlaps(workspace, ws, w, w_bytes) ||
            overlaps(workspace, ws, y, y_bytes) || overlaps(workspace, ws, z, y_bytes) ||
            overlaps(workspace, ws, bias, s.kp * 4))
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: workspace overlaps a tensor", who);
    }

    Params p;
    memset(&p, 0, sizeof p);
    p.x = x;
    p.w = w;
    p.bias = static_cast<const float *>(bias);
    p.z = z;
    p.y = y;
    p.m = (int)s.m;
    p.h = (int)d->geom.h, p.w_in = (int)d->geom.w;
    p.cp = (int)s.cp, p.cg = (int)s.cg, p.kdim = (int)s.kdim, p.ng = (int)s.ng;
    p.k_real = (int)d->geom.k, p.kp = (int)s.kp;
    p.r = (int)d->geom.kernel_h, p.s = (int)d->geom.kernel_w;
    p.stride_h = (int)d->geom.stride_h, p.stride_w = (int)d->geom.stride_w;
    p.dil_h = (int)d->geom.dilation_h, p.dil_w = (int)d->geom.dilation_w;
    p.pad_top = (int)d->geom.pad_top, p.pad_left = (int)d->geom.pad_left;
    p.out_h = (int)d->geom.out_h, p.out_w = (int)d->geom.out_w;
    p.groups = (int)d->geom.groups, p.splits = cfg.splits;
    p.ktiles = (int)ceil_div(s.kdim, cfg.bk);
    p.mpad = (int)(ceil_div(s.m, cfg.bm) * cfg.bm);
    p.npad = (int)(ceil_div(s.ng, cfg.bn) * cfg.bn);
    p.alpha = d->alpha;
    p.act = (int)d->act, p.act_alpha = d->act_alpha, p.act_beta = d->act_beta;
    if (need > 0) {
        const uintptr_t a = ((uintptr_t)workspace + kWorkspaceAlign - 1) & ~(uintptr_t)(kWorkspaceAlign - 1);
        p.ws = reinterpret_cast<float *>(a);
    }
    // x is the A matrix itself: (M, Cp), no window arithmetic
    const bool fast = d->geom.kernel_h == 1 && d->geom.kernel_w == 1 && d->geom.stride_h == 1 && d->geom.stride_w == 1 && d->geom.pad_top == 0 &&
                      d->geom.pad_left == 0 && d->geom.out_h == d->geom.h && d->geom.out_w == d->geom.w;
    const dim3 grid((unsigned)ceil_div(s.m, cfg.bm), (unsigned)ceil_div(s.ng, cfg.bn),
                    (unsigned)(d->geom.groups * cfg.splits));
    TRY_STATUS((is_bf16(d) ? cfg.launch_bf16 : cfg.launch)(p, fast, grid, stream));
    if (cfg.splits > 1) {
        const int64_t total = d->geom.groups * s.m * (s.ng / 8);
        int64_t blocks = ceil_div(total, kReduceThreads);
        if (blocks > kMaxReduceBlocks) blocks = kMaxReduceBlocks;
        void (*reduce)(Params) = is_bf16(d) ? splitk_reduce_kernel<__nv_bfloat16> : splitk_reduce_kernel<__half>;
        reduce<<<(unsigned)blocks, kReduceThreads, 0, stream>>>(p);
        KERN_LAUNCH_CHECK("splitk_reduce_kernel");
    }
    return TCI_OK;
}

namespace {
tci_status check_pack_desc(const kern_wmma_conv_desc *d, const char *who) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL desc", who);
    if (d->geom.c < 1 || d->geom.k < 1 || d->geom.kernel_h < 1 || d->geom.kernel_w < 1 || d->geom.groups < 1 || d->geom.c % d->geom.groups != 0 ||
        d->geom.k % d->geom.groups != 0 || (d->geom.groups > 1 && ((d->geom.c / d->geom.groups) % 8 != 0 || (d->geom.k / d->geom.groups) % 8 != 0)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: bad sizes (c %lld, k %lld, kernel %lldx%lld, groups %lld)",
                         who, (long long)d->geom.c, (long long)d->geom.k, (long long)d->geom.kernel_h, (long long)d->geom.kernel_w,
                         (long long)d->geom.groups);
    const int64_t cg = d->geom.groups == 1 ? round8(d->geom.c) : d->geom.c / d->geom.groups;
    const int64_t rows = d->geom.groups == 1 ? round8(d->geom.k) : d->geom.k;
    if (checked_mul(checked_mul(checked_mul(rows, d->geom.kernel_h), d->geom.kernel_w), cg) < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: sizes too large", who);
    return TCI_OK;
}
} // namespace

extern "C" size_t kern_wmma_conv_weight_elements(const kern_wmma_conv_desc *d) {
    if (check_pack_desc(d, "kern_wmma_conv_weight_elements") != TCI_OK) {
        status_error_clear();
        return 0;
    }
    const int64_t cg = d->geom.groups == 1 ? round8(d->geom.c) : d->geom.c / d->geom.groups;
    const int64_t rows = d->geom.groups == 1 ? round8(d->geom.k) : d->geom.k;
    return (size_t)(rows * d->geom.kernel_h * d->geom.kernel_w * cg);
}

extern "C" tci_status kern_wmma_conv_pack_weights(const kern_wmma_conv_desc *d, const float *w_oihw,
                                                  uint16_t *out) {
    static const char who[] = "kern_wmma_conv_pack_weights";
    TRY_STATUS(check_pack_desc(d, who));
    if (!w_oihw || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: NULL pointer", who);
    const int64_t c_in = d->geom.c / d->geom.groups;                      // ONNX's input channels per output channel
    const int64_t cg = d->geom.groups == 1 ? round8(d->geom.c) : c_in;    // stored
    const int64_t rows = d->geom.groups == 1 ? round8(d->geom.k) : d->geom.k;
    const int64_t taps = d->geom.kernel_h * d->geom.kernel_w;
    for (int64_t k = 0; k < rows; k++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t c = 0; c < cg; c++)
                out[(k * taps + t) * cg + c] =
                    k < d->geom.k && c < c_in ? host_bits(w_oihw[(k * c_in + c) * taps + t], is_bf16(d)) : 0;
    return TCI_OK;
}
