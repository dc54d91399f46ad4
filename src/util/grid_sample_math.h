/* GridSample's arithmetic, defined once: the modes and paddings, and for one output position the
 * input positions it reads with their weights, as PyTorch's grid_sample computes them (onnxruntime
 * follows it). Plain C, included by host code and the CUDA kernel alike: the CPU reference
 * (src/layers/grid_sample.c) and kern_grid_sample (src/kernels/grid_sample.cu) call the same
 * functions, and each then reads its own storage at the taps (0 outside the input). */
#ifndef TCI_UTIL_GRID_SAMPLE_MATH_H
#define TCI_UTIL_GRID_SAMPLE_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum { GS_LINEAR, GS_NEAREST, GS_CUBIC } gs_mode;
typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_padding;

/* Spatial dims taken (linear and nearest; cubic takes 2), and taps per output at most (cubic's
 * 4 x 4; trilinear's 8). */
enum { GS_MAX_SPATIAL = 3, GS_MAX_TAPS = 16 };

#ifdef __CUDACC__
#define GS_HOST_DEVICE __host__ __device__
#else
#define GS_HOST_DEVICE
#endif

/* The normalised grid value g in pixels of an axis of size pixels. */
static inline GS_HOST_DEVICE float gs_unnormalize(float g, int64_t size, bool align) {
    return align ? (g + 1.0f) / 2.0f * (float)(size - 1)
                 : ((g + 1.0f) * (float)size - 1.0f) / 2.0f;
}

/* v reflected about the borders twice_low / 2 and twice_high / 2. */
static inline GS_HOST_DEVICE float gs_reflect(float v, float twice_low, float twice_high) {
    if (twice_low == twice_high) return 0.0f;
    float lo = twice_low / 2.0f, span = (twice_high - twice_low) / 2.0f;
    v = fabsf(v - lo);
    float extra = fmodf(v, span);
    int flips = (int)floorf(v / span);
    return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

static inline GS_HOST_DEVICE float gs_clip(float v, int64_t size) {
    return fminf(fmaxf(v, 0.0f), (float)(size - 1));
}

/* The padding applied to a pixel position. */
static inline GS_HOST_DEVICE float gs_pad_coord(float v, int64_t size, gs_padding padding,
                                                bool align) {
    if (padding == GS_BORDER) return gs_clip(v, size);
    if (padding == GS_REFLECTION) {
        v = align ? gs_reflect(v, 0.0f, 2.0f * (float)(size - 1))
                  : gs_reflect(v, -1.0f, 2.0f * (float)size - 1.0f);
        return gs_clip(v, size);
    }
    return v;
}

static inline GS_HOST_DEVICE float gs_cubic1(float x, float a) {
    return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
}

static inline GS_HOST_DEVICE float gs_cubic2(float x, float a) {
    return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
}

/* The taps of one output: grid holds its r normalised coordinates (x, the last spatial dim,
 * first, as in PyTorch); size the r input extents in X's order. Fills pos (r entries a tap, X's
 * order; a tap outside the input reads 0) and weight, and returns the tap count. */
static inline GS_HOST_DEVICE int gs_taps(gs_mode mode, gs_padding padding, bool align, int r,
                                         const int64_t *size, const float *grid,
                                         int64_t pos[][GS_MAX_SPATIAL], float *weight) {
    float c[GS_MAX_SPATIAL];
    for (int d = 0; d < r; d++) c[d] = gs_unnormalize(grid[r - 1 - d], size[d], align);
    if (mode == GS_NEAREST) {
        for (int d = 0; d < r; d++)
            pos[0][d] = (int64_t)nearbyintf(gs_pad_coord(c[d], size[d], padding, align));
        weight[0] = 1.0f;
        return 1;
    }
    if (mode == GS_LINEAR) {
        float frac[GS_MAX_SPATIAL];
        int64_t base[GS_MAX_SPATIAL];
        for (int d = 0; d < r; d++) {
            float pc = gs_pad_coord(c[d], size[d], padding, align);
            base[d] = (int64_t)floorf(pc);
            frac[d] = pc - (float)base[d];
        }
        for (int corner = 0; corner < (1 << r); corner++) {
            float w = 1.0f;
            for (int d = 0; d < r; d++) {
                int up = (corner >> (r - 1 - d)) & 1;
                pos[corner][d] = base[d] + up;
                w *= up ? frac[d] : 1.0f - frac[d];
            }
            weight[corner] = w;
        }
        return 1 << r;
    }
    /* cubic, two dims: 4x4 taps around the position, the padding applied to each tap */
    const float a = -0.75f;
    float coef[2][4];
    int64_t base[2];
    for (int d = 0; d < 2; d++) {
        float f = floorf(c[d]);
        float t = c[d] - f;
        base[d] = (int64_t)f - 1;
        coef[d][0] = gs_cubic2(t + 1.0f, a);
        coef[d][1] = gs_cubic1(t, a);
        coef[d][2] = gs_cubic1(1.0f - t, a);
        coef[d][3] = gs_cubic2(2.0f - t, a);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int64_t q[2] = {base[0] + i, base[1] + j};
            for (int d = 0; d < 2; d++)
                if (padding != GS_ZEROS)
                    q[d] = (int64_t)gs_pad_coord((float)q[d], size[d], padding, align);
            pos[i * 4 + j][0] = q[0];
            pos[i * 4 + j][1] = q[1];
            weight[i * 4 + j] = coef[0][i] * coef[1][j];
        }
    return 16;
}

/* The offset of pos (r dims) in a plane of extents size, or -1 outside it. */
static inline GS_HOST_DEVICE int64_t gs_offset(const int64_t *size, const int64_t *pos, int r) {
    int64_t off = 0;
    for (int d = 0; d < r; d++) {
        if (pos[d] < 0 || pos[d] >= size[d]) return -1;
        off = off * size[d] + pos[d];
    }
    return off;
}

#endif
