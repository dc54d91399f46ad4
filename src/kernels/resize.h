/* ONNX Resize (and Upsample) of an NHWC8 fp16, bf16 or fp32 tensor over H and W, nearest,
 * bilinear or bicubic (exclude_outside too), with the coordinate formulas and tap weights of the
 * ONNX reference (and of the CPU reference, src/layers/resize.c).
 *
 * The launcher validates, enqueues on `stream` and returns without synchronising (it may be
 * captured into a CUDA graph); a launch failure is TCI_ERR_CUDA. Not covered here (the planner
 * keeps such nodes elsewhere): tf_crop_and_resize, antialias, and resizing N or C. */
#ifndef TCI_KERNELS_RESIZE_H
#define TCI_KERNELS_RESIZE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"
#include "util/resize_modes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_resize_desc {
    int64_t n, c; /* logical channels; the buffers hold Cp = round_up(c, 8) */
    int64_t in_h, in_w, out_h, out_w;
    /* The ONNX scale per axis: the `scales` input, or out / in where `sizes` was given. As in
     * the reference, align_corners, pytorch_half_pixel and half_pixel_symmetric measure the
     * output length as scale * in (fractional or not); an axis with out == in and scale 1 is an
     * identity. */
    double scale_h, scale_w;
    resize_mode mode;         /* RESIZE_NEAREST, RESIZE_LINEAR or RESIZE_CUBIC */
    float cubic_a;            /* RESIZE_CUBIC: cubic_coeff_a */
    int exclude_outside;      /* linear and cubic: taps past the edge weigh 0, the rest
                                 renormalised */
    resize_coord coord;       /* any but RESIZE_COORD_TF_CROP_AND_RESIZE */
    resize_rounding rounding; /* nearest only */
    /* of x and y: 0 or TCI_DTYPE_FLOAT16 (fp16), TCI_DTYPE_BFLOAT16 (bf16, the same layout),
     * TCI_DTYPE_FLOAT (fp32, the same NHWC8 layout with 4-byte elements); anything else is
     * TCI_ERR_UNSUPPORTED */
    tci_dtype dtype;
} kern_resize_desc;

/* y (n, out_h, out_w, Cp) from x (n, in_h, in_w, Cp), both NHWC8 of desc->dtype and 16-byte
 * aligned. Linear blends the (up to) four neighbours in fp32 (rounded once to fp16 or bf16),
 * neighbours beyond an edge repeating the edge; nearest copies the element unchanged.
 * Channels c..Cp-1 of y are written as zeros. */
tci_status kern_resize_nhwc8(const void *x, void *y, const kern_resize_desc *desc,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
