/* GridSample on the GPU: y (n, c, out...) interpolates x (n, c, in...) at the normalised
 * positions grid (n, out..., r), all dense, with the arithmetic of util/grid_sample_math.h (the
 * CPU reference's): linear and nearest over 1 to 3 spatial dims, cubic over 2; zeros, border
 * and reflection padding; align_corners. Sums in fp32, rounded once to y's dtype.
 *
 * The launcher validates, enqueues on `stream` and returns without synchronising (it may be
 * captured into a CUDA graph); a launch failure is TCI_ERR_CUDA. */
#ifndef TCI_KERNELS_GRID_SAMPLE_H
#define TCI_KERNELS_GRID_SAMPLE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"
#include "util/grid_sample_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_grid_sample_desc {
    int64_t n, c;
    int r;                                       /* spatial dims */
    int64_t in[GS_MAX_SPATIAL], out[GS_MAX_SPATIAL]; /* x's and y's spatial extents */
    gs_mode mode;
    gs_padding padding;
    int align_corners;
    /* x and y: 0 or TCI_DTYPE_FLOAT16, TCI_DTYPE_BFLOAT16 or TCI_DTYPE_FLOAT; grid: the same
     * choice, independently; anything else is TCI_ERR_UNSUPPORTED */
    tci_dtype dtype, grid_dtype;
} kern_grid_sample_desc;

tci_status kern_grid_sample(const void *x, const void *grid, void *y,
                            const kern_grid_sample_desc *desc, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
