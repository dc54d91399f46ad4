// GridSample (grid_sample.h): one thread per output position of an image, its taps found once
// (util/grid_sample_math.h) and applied to every channel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// util/status.h has no extern "C" guard of its own; cuda_check.h includes it after this
extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/grid_sample.h"
#include "kernels/kern_util.cuh"

using namespace kern_util;

namespace {

struct GridShape {
    int64_t n, c, in_plane, out_plane;
    int64_t in[GS_MAX_SPATIAL];
    int r;
    gs_mode mode;
    gs_padding padding;
    bool align;
};

template <typename T, typename G>
__global__ void grid_sample_kernel(const T *x, const G *grid, T *y, GridShape s) {
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < s.n * s.out_plane;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / s.out_plane, o = e % s.out_plane;
        float g[GS_MAX_SPATIAL];
        for (int d = 0; d < s.r; d++) g[d] = to_float(grid[e * s.r + d]);
        int64_t pos[GS_MAX_TAPS][GS_MAX_SPATIAL], at[GS_MAX_TAPS];
        float w[GS_MAX_TAPS];
        const int taps = gs_taps(s.mode, s.padding, s.align, s.r, s.in, g, pos, w);
        for (int t = 0; t < taps; t++) at[t] = gs_offset(s.in, pos[t], s.r);
        for (int64_t ch = 0; ch < s.c; ch++) {
            const T *plane = x + (b * s.c + ch) * s.in_plane;
            float acc = 0.0f;
            for (int t = 0; t < taps; t++)
                acc += w[t] * (at[t] < 0 ? 0.0f : to_float(plane[at[t]]));
            y[(b * s.c + ch) * s.out_plane + o] = from_float<T>(acc);
        }
    }
}

} // namespace

extern "C" tci_status kern_grid_sample(const void *x, const void *grid, void *y,
                                       const kern_grid_sample_desc *d, cudaStream_t stream) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_grid_sample: NULL descriptor");
    Storage st = Storage::kHalf, gt = Storage::kHalf;
    TRY_STATUS(storage_type("kern_grid_sample", d->dtype, &st));
    TRY_STATUS(storage_type("kern_grid_sample (grid)", d->grid_dtype, &gt));
    if (d->r < 1 || d->r > GS_MAX_SPATIAL || (d->mode == GS_CUBIC && d->r != 2))
        return status_error(TCI_ERR_UNSUPPORTED,
                            "kern_grid_sample: %d spatial dims (1 to %d; cubic 2)", d->r,
                            GS_MAX_SPATIAL);
    GridShape s = {d->n, d->c, 1, 1, {1, 1, 1}, d->r, d->mode, d->padding, d->align_corners != 0};
    bool bad = d->n < 0 || d->c < 0;
    for (int k = 0; k < d->r; k++) {
        bad = bad || d->in[k] < 1 || d->out[k] < 0;
        s.in[k] = d->in[k];
        s.in_plane *= d->in[k];
        s.out_plane *= d->out[k];
    }
    if (bad)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_grid_sample: bad extents (n %lld, c %lld; every input extent "
                            "must be at least 1)",
                            (long long)d->n, (long long)d->c);
    if (s.n * s.out_plane == 0 || s.c == 0) return TCI_OK;
    if (!x || !grid || !y) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_grid_sample: NULL buffer");
    const unsigned blocks = blocks_for(s.n * s.out_plane, 256);
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return with_storage(gt, [&](auto gtag) {
            using G = typename decltype(gtag)::type;
            grid_sample_kernel<T, G><<<blocks, 256, 0, stream>>>((const T *)x, (const G *)grid,
                                                                 (T *)y, s);
            KERN_LAUNCH_CHECK("grid_sample_kernel");
            return TCI_OK;
        });
    });
}
