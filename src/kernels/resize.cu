// Resize of NHWC8 fp16, bf16 or fp32 tensors over H and W: one thread per output pixel and 8-channel
// vector; nearest reads one pixel, linear and cubic weigh 2x2 and 4x4 taps (the CPU reference's
// taps and weights, exclude_outside included).
// Source coordinates are computed in double as the ONNX reference does, so that coordinates
// landing exactly on .5 round the same way here and on the CPU: both call util/resize_modes.h's
// functions, which expand its formulas.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

// util/status.h has no extern "C" guard of its own; cuda_check.h includes it after this
extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/resize.h"

using namespace kern_util;

namespace {

constexpr int64_t kMaxGrid = 1 << 20;

struct Axis {
    int64_t in, out;
    double scale;
    bool identity;
};

struct ResizeParams {
    int64_t n, chunks; // chunks: Cp / 8 vectors per pixel
    int64_t last_chunk_channels; // live channels in the last chunk (1..8)
    Axis h, w;
    resize_mode mode;
    resize_coord coord;
    resize_rounding rounding;
    double cubic_a;
    bool exclude_outside;
};

// The taps of one output index along one axis: clamped input indices and their weights.
struct Taps {
    int n;
    int64_t idx[4];
    float w[4];
};

__device__ __forceinline__ int64_t clamp_index(int64_t i, int64_t n) {
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

// The taps along one axis as the CPU reference builds them (src/layers/resize.c build_axis):
// nearest one, linear two, cubic four from floor(x) - 1; with exclude_outside the taps past the
// edge weigh 0 and the rest are renormalised; indices past the edge repeat the edge.
__device__ void axis_taps(const ResizeParams &p, const Axis &a, int64_t o, Taps &t) {
    if (a.identity) {
        t.n = 1;
        t.idx[0] = o;
        t.w[0] = 1.0f;
        return;
    }
    // tf_crop_and_resize's region (the whole axis here) is not used: the launcher refuses it
    const double x = resize_source_coordinate(p.coord, o, a.scale, a.in, a.out, 0.0f, 1.0f);
    if (p.mode == RESIZE_NEAREST) {
        t.n = 1;
        t.idx[0] = clamp_index(resize_nearest_index(p.rounding, x, a.scale), a.in);
        t.w[0] = 1.0f;
        return;
    }
    const double base = floor(x), r = x - base;
    double w[4];
    int64_t first;
    if (p.mode == RESIZE_LINEAR) {
        t.n = 2;
        first = (int64_t)base;
        w[0] = 1.0 - r;
        w[1] = r;
    } else {
        t.n = 4;
        first = (int64_t)base - 1;
        resize_cubic_weights(p.cubic_a, r, w);
    }
    double sum = 0.0;
    for (int k = 0; k < t.n; k++) {
        const int64_t i = first + k;
        if (p.exclude_outside && (i < 0 || i >= a.in)) w[k] = 0.0;
        sum += w[k];
        t.idx[k] = clamp_index(i, a.in);
    }
    for (int k = 0; k < t.n; k++)
        t.w[k] = (float)(p.exclude_outside && sum != 0.0 ? w[k] / sum : w[k]);
}

// Zeroes the lanes of a chunk from `live` on (the padded channels of the last chunk).
__device__ __forceinline__ void zero_lanes_from(uint4 &u, int64_t live) {
    uint16_t *lanes = reinterpret_cast<uint16_t *>(&u);
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (k >= live) lanes[k] = 0;
}
__device__ __forceinline__ void zero_lanes_from(bf16x8 &u, int64_t live) {
    zero_lanes_from(u.bits, live);
}
__device__ __forceinline__ void zero_lanes_from(float8 &u, int64_t live) {
    float *lanes = reinterpret_cast<float *>(&u);
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (k >= live) lanes[k] = 0.0f;
}

template <typename C>
__global__ void resize_nhwc8_kernel(const C *__restrict__ x, C *__restrict__ y, ResizeParams p) {
    const int64_t total = p.n * p.h.out * p.w.out * p.chunks;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t pix = div_fast(e, p.chunks), chunk = e - pix * p.chunks;
        int64_t t = div_fast(pix, p.w.out), ow = pix - t * p.w.out;
        int64_t n = div_fast(t, p.h.out), oh = t - n * p.h.out;
        Taps th, tw;
        axis_taps(p, p.h, oh, th);
        axis_taps(p, p.w, ow, tw);
        const C *plane = x + n * p.h.in * p.w.in * p.chunks + chunk;
        C out;
        if (th.n == 1 && tw.n == 1) {
            out = plane[(th.idx[0] * p.w.in + tw.idx[0]) * p.chunks];
        } else {
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, v[8];
            for (int i = 0; i < th.n; i++)
                for (int j = 0; j < tw.n; j++) {
                    const float wgt = th.w[i] * tw.w[j];
                    load8(plane + (th.idx[i] * p.w.in + tw.idx[j]) * p.chunks, v);
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[k] += wgt * v[k];
                }
            store8(&out, acc);
        }
        if (chunk == p.chunks - 1 && p.last_chunk_channels < 8) // keep padded channels zero
            zero_lanes_from(out, p.last_chunk_channels);
        y[e] = out;
    }
}

} // namespace

extern "C" tci_status kern_resize_nhwc8(const void *x, void *y, const kern_resize_desc *d,
                                        cudaStream_t stream) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_resize_nhwc8: desc is NULL");
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_resize_nhwc8", d->dtype, &st));
    if (d->n < 0 || d->c < 0 || d->in_h < 0 || d->in_w < 0 || d->out_h < 0 || d->out_w < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_resize_nhwc8: negative extent (n %lld, c %lld, %lldx%lld -> "
                         "%lldx%lld)",
                         (long long)d->n, (long long)d->c, (long long)d->in_h, (long long)d->in_w,
                         (long long)d->out_h, (long long)d->out_w);
    if (d->mode != RESIZE_NEAREST && d->mode != RESIZE_LINEAR && d->mode != RESIZE_CUBIC)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_resize_nhwc8: unknown mode %d", (int)d->mode);
    // tf_crop_and_resize (a region and an extrapolation value) is not covered here
    if ((int)d->coord < 0 || d->coord >= RESIZE_COORD_TF_CROP_AND_RESIZE)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_resize_nhwc8: unknown coordinate transformation %d", (int)d->coord);
    if ((int)d->rounding < 0 || d->rounding >= RESIZE_ROUNDING_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_resize_nhwc8: unknown nearest mode %d",
                         (int)d->rounding);
    if (!(d->scale_h > 0.0 && d->scale_w > 0.0 && isfinite(d->scale_h) && isfinite(d->scale_w)))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_resize_nhwc8: scales %g and %g must be positive and finite",
                         d->scale_h, d->scale_w);
    if (d->n == 0 || d->c == 0 || d->out_h == 0 || d->out_w == 0) return TCI_OK;
    if (d->in_h == 0 || d->in_w == 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_resize_nhwc8: empty input %lldx%lld for a non-empty output",
                         (long long)d->in_h, (long long)d->in_w);
    if (!x || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_resize_nhwc8: NULL buffer");
    if ((uintptr_t)x % 16 || (uintptr_t)y % 16)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_resize_nhwc8: buffers must be 16-byte aligned");
    ResizeParams p;
    p.n = d->n;
    p.chunks = (d->c + 7) / 8;
    p.last_chunk_channels = d->c - (p.chunks - 1) * 8;
    p.h = Axis{d->in_h, d->out_h, d->scale_h, d->in_h == d->out_h && fabs(d->scale_h - 1.0) <= 1e-9};
    p.w = Axis{d->in_w, d->out_w, d->scale_w, d->in_w == d->out_w && fabs(d->scale_w - 1.0) <= 1e-9};
    p.mode = d->mode, p.coord = d->coord, p.rounding = d->rounding;
    p.cubic_a = d->cubic_a;
    p.exclude_outside = d->exclude_outside != 0;
    const int64_t total = p.n * p.h.out * p.w.out * p.chunks;
    const int block = 256;
    int64_t blocks = (total + block - 1) / block;
    unsigned grid = (unsigned)(blocks < kMaxGrid ? blocks : kMaxGrid);
    return with_storage(st, [&](auto tag) {
        using C = typename Chunk8<typename decltype(tag)::type>::type;
        resize_nhwc8_kernel<C><<<grid, block, 0, stream>>>((const C *)x, (C *)y, p);
        KERN_LAUNCH_CHECK("resize_nhwc8_kernel");
        return TCI_OK;
    });
}
