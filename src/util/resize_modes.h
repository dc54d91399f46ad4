/* The Resize vocabulary, defined once: the interpolation modes, coordinate transformations and
 * nearest roundings of ONNX Resize (and Upsample), each with its enum value, its attribute name
 * and its formula. Plain C, included by host code and the CUDA kernels alike: the CPU reference
 * (src/layers/resize.c) and kern_resize_nhwc8 (src/kernels/resize.cu) call the same functions
 * below, which expand the rows, and the plan step carries the enums from the one to the other
 * unchanged. */
#ifndef TCI_UTIL_RESIZE_MODES_H
#define TCI_UTIL_RESIZE_MODES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* X(NAME, "attribute name", TAPS): `mode`; TAPS input samples per output along each resized
 * axis. Row order is the enum's numbering. */
/* clang-format off */
#define RESIZE_MODE_LIST(X)                                                                        \
    X(NEAREST, "nearest", 1)                                                                       \
    X(LINEAR, "linear", 2)                                                                         \
    X(CUBIC, "cubic", 4)
/* clang-format on */

/* X(NAME, "attribute name", FORMULA): `coordinate_transformation_mode`. FORMULA is the source
 * coordinate (double) of output index x along one axis, an expression in
 *   x (double), scale (double, the ONNX scale of the axis), in and out (int64_t, the axis's
 *   input and output extents), length (double: scale * in, which the reference uses as the
 *   output length, fractional or not), single (length is 1), roi_start and roi_span (float:
 *   tf_crop_and_resize's region of the axis, start and end - start).
 * It calls MUL_(a, b) for a product of doubles: a plain product on the host, a product rounded
 * on its own on the device (nvcc would otherwise fuse it into an FMA, and ties at .5 would round
 * to other pixels than the CPU's). The roi arithmetic is in float as the reference does, so
 * coordinates that land on a pixel there land on it here. */
/* clang-format off */
#define RESIZE_COORD_LIST(X)                                                                       \
    X(HALF_PIXEL, "half_pixel", (x + 0.5) / scale - 0.5)                                           \
    X(HALF_PIXEL_SYMMETRIC, "half_pixel_symmetric",                                                \
      MUL_((double)in / 2.0, 1.0 - (double)out / length) + (x + 0.5) / scale - 0.5)               \
    X(PYTORCH_HALF_PIXEL, "pytorch_half_pixel", single ? 0.0 : (x + 0.5) / scale - 0.5)           \
    X(ALIGN_CORNERS, "align_corners",                                                              \
      single ? 0.0 : MUL_(x, (double)(in - 1)) / (length - 1.0))                                   \
    X(ASYMMETRIC, "asymmetric", x / scale)                                                         \
    /* Resize-11 only */                                                                           \
    X(TF_HALF_PIXEL_FOR_NN, "tf_half_pixel_for_nn", (x + 0.5) / scale)                             \
    X(TF_CROP_AND_RESIZE, "tf_crop_and_resize",                                                    \
      (single ? (double)(roi_span * (float)(in - 1) / 2.0f)                                        \
              : MUL_(MUL_(x, (double)roi_span), (double)(in - 1)) / (length - 1.0)) +              \
          (double)(roi_start * (float)(in - 1)))
/* clang-format on */

/* X(NAME, "attribute name", FORMULA): `nearest_mode`, the input index of a source coordinate
 * that is not a whole number. FORMULA is an int64_t expression in i (the coordinate's floor),
 * frac (double, the coordinate minus i, in (0, 1)) and scale (double). */
/* clang-format off */
#define RESIZE_ROUNDING_LIST(X)                                                                    \
    X(PREFER_FLOOR, "round_prefer_floor", frac <= 0.5 ? i : i + 1)                           \
    X(PREFER_CEIL, "round_prefer_ceil", frac < 0.5 ? i : i + 1)                              \
    X(FLOOR, "floor", i)                                                                           \
    X(CEIL, "ceil", i + 1)                                                                         \
    /* Upsample and Resize-10 have no nearest_mode: onnxruntime truncates when upsampling and      \
     * takes the ceiling when downsampling, which is what models of that era were checked         \
     * against. No attribute names it. */                                                          \
    X(LEGACY, "", scale < 1.0 ? i + 1 : i)
/* clang-format on */

/* RESIZE_NEAREST, RESIZE_COORD_HALF_PIXEL, RESIZE_ROUND_PREFER_FLOOR, ... */
#define RESIZE_MODE_ENUM_ROW(NAME, ATTR, TAPS) RESIZE_##NAME,
#define RESIZE_COORD_ENUM_ROW(NAME, ATTR, FORMULA) RESIZE_COORD_##NAME,
#define RESIZE_ROUNDING_ENUM_ROW(NAME, ATTR, FORMULA) RESIZE_ROUND_##NAME,
typedef enum resize_mode { RESIZE_MODE_LIST(RESIZE_MODE_ENUM_ROW) RESIZE_MODE_COUNT } resize_mode;
typedef enum resize_coord {
    RESIZE_COORD_LIST(RESIZE_COORD_ENUM_ROW) RESIZE_COORD_COUNT
} resize_coord;
typedef enum resize_rounding {
    RESIZE_ROUNDING_LIST(RESIZE_ROUNDING_ENUM_ROW) RESIZE_ROUNDING_COUNT
} resize_rounding;
#undef RESIZE_MODE_ENUM_ROW
#undef RESIZE_COORD_ENUM_ROW
#undef RESIZE_ROUNDING_ENUM_ROW

#ifdef __CUDACC__
#define RESIZE_HOST_DEVICE __host__ __device__
#else
#define RESIZE_HOST_DEVICE
#endif
#ifdef __CUDA_ARCH__
#define MUL_(a, b) __dmul_rn((a), (b))
#else
#define MUL_(a, b) ((a) * (b))
#endif
#define RESIZE_COORD_CASE(NAME, ATTR, FORMULA)                                                     \
    case RESIZE_COORD_##NAME: return (FORMULA);
#define RESIZE_ROUNDING_CASE(NAME, ATTR, FORMULA)                                                  \
    case RESIZE_ROUND_##NAME: return (FORMULA);

/* The source coordinate of output index o along an axis (RESIZE_COORD_LIST's formulas);
 * roi_start and roi_span matter to tf_crop_and_resize only. */
static inline RESIZE_HOST_DEVICE double resize_source_coordinate(resize_coord coord, int64_t o,
                                                                 double scale, int64_t in,
                                                                 int64_t out, float roi_start,
                                                                 float roi_span) {
    const double x = (double)o;
    const double length = MUL_(scale, (double)in); /* fractional where the scale does not divide */
    const bool single = fabs(length - 1.0) < 1e-9;
    switch (coord) {
        RESIZE_COORD_LIST(RESIZE_COORD_CASE)
    case RESIZE_COORD_COUNT: break;
    }
    return x;
}

/* The input index of a source coordinate x in nearest mode (RESIZE_ROUNDING_LIST's formulas
 * where x is not a whole number). */
static inline RESIZE_HOST_DEVICE int64_t resize_nearest_index(resize_rounding rounding, double x,
                                                              double scale) {
    const double base = floor(x), frac = x - base;
    const int64_t i = (int64_t)base;
    if (frac == 0.0) return i;
    switch (rounding) {
        RESIZE_ROUNDING_LIST(RESIZE_ROUNDING_CASE)
    case RESIZE_ROUNDING_COUNT: break;
    }
    return i;
}

/* The four weights of cubic interpolation (coefficient a, ONNX's cubic_coeff_a) for the taps
 * at floor(x) - 1 .. floor(x) + 2, r = x - floor(x). */
static inline RESIZE_HOST_DEVICE void resize_cubic_weights(double a, double r, double *w) {
    const double s = r + 1.0, u = 1.0 - r, v = u + 1.0;
    w[0] = ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a;
    w[1] = ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0;
    w[2] = ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0;
    w[3] = ((a * v - 5.0 * a) * v + 8.0 * a) * v - 4.0 * a;
}

#undef RESIZE_HOST_DEVICE
#undef MUL_
#undef RESIZE_COORD_CASE
#undef RESIZE_ROUNDING_CASE

#endif
