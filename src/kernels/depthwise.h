/* Depthwise 2-D convolution (ONNX Conv with group == C == K) on NHWC8 fp16, bf16 or fp32 tensors
 * with a fused epilogue y = act(conv(x, w) + bias + z); cuDNN's NHWC fp16 depthwise path is far from memory
 * bandwidth. C API over src/kernels/depthwise.cu. */
#ifndef TCI_KERNELS_DEPTHWISE_H
#define TCI_KERNELS_DEPTHWISE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"
#include "util/conv_geom.h"
#include "util/elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which kernel runs. AUTO picks the tiled kernel where it applies (rows per thread chosen by the
 * amount of work) and the generic one elsewhere; the others force a path (for tests and timing)
 * and are TCI_ERR_UNSUPPORTED where the tiled kernel does not apply. */
typedef enum kern_depthwise_path {
    KERN_DEPTHWISE_AUTO = 0,
    KERN_DEPTHWISE_GENERIC,     /* any shape: one thread per output pixel and 8 channels */
    KERN_DEPTHWISE_TILED_SHORT, /* kernel 3x3 or 5x5, equal strides 1 or 2, dilation 1: each
                                   thread slides down 2 output rows, reusing input rows */
    KERN_DEPTHWISE_TILED_TALL,  /* same shapes, 7 output rows per thread (7 divides the usual
                                   112/56/28/14/7 planes) */
    KERN_DEPTHWISE_PATH_COUNT
} kern_depthwise_path;

/* Taps outside the input are zero (the bottom/right padding is whatever out_h/out_w imply). */
typedef struct kern_depthwise_desc {
    /* n, c (logical channels; tensors have Cp = round_up(c, 8)), h, w, out_h, out_w, kernel_h
     * and kernel_w (any size >= 1; 3x3 and 5x5 are the fast ones), strides, dilations, pad_top
     * and pad_left (>= 0) are read; k, groups, pad_bottom and pad_right are not (k = groups = c) */
    conv_geom geom;
    act_kind act;               /* any, with act_alpha / act_beta as in util/elementwise.h
                                   (ReLU6: ACT_CLIP, alpha 0, beta 6); precise fp32 functions */
    float act_alpha, act_beta;
    kern_depthwise_path path;   /* 0 (AUTO) for the engine */
    /* of x, w, z and y: 0 or TCI_DTYPE_FLOAT16 (fp16), TCI_DTYPE_BFLOAT16 (bf16: the fp16
     * layouts and paths, weights from kern_depthwise_pack_weights_bf16), TCI_DTYPE_FLOAT (fp32:
     * the same NHWC8 layouts with 4-byte elements, weights from
     * kern_depthwise_pack_weights_f32); anything else is TCI_ERR_UNSUPPORTED. */
    tci_dtype dtype;
} kern_depthwise_desc;

/* x (n, in_h, in_w, Cp) -> y (n, out_h, out_w, Cp), NHWC8 of desc->dtype.
 * w: kernel_h * kernel_w * Cp values of desc->dtype, layout (R, S, Cp), zero where c >= C
 * (kern_depthwise_pack_weights for fp16, kern_depthwise_pack_weights_bf16 for bf16,
 * kern_depthwise_pack_weights_f32 for fp32).
 * bias: NULL or Cp fp32 values, zero-padded (kern_depthwise_pack_bias), in both dtypes.
 * z: NULL or a residual shaped as y (NHWC8, desc->dtype); it may be y itself (exactly); nothing
 * else may overlap y. x may be NULL when it has no elements (every tap is padding:
 * y = act(bias + z)). y = act(sum of taps + bias + z) in fp32, rounded once to fp16 (bf16) in fp16 (bf16);
 * padded channels of y are written as zero whatever act gives for 0. Every buffer 16-byte
 * aligned. No synchronisation, capturable. The fp32 tiled kernels take 4 channels per thread for
 * 3x3 too (fp16 and bf16: 8). Errors: TCI_ERR_INVALID_ARGUMENT (bad sizes, unknown act or path, NULL /
 * misaligned / overlapping buffer), TCI_ERR_UNSUPPORTED (a forced tiled path where it does not
 * apply, a dtype other than fp16 / bf16 / fp32), TCI_ERR_CUDA. */
tci_status kern_depthwise_conv(const kern_depthwise_desc *desc, const void *x, const void *w,
                               const void *bias, const void *z, void *y, cudaStream_t stream);

/* Host packing. w_c1rs: ONNX weights (C, 1, R, S) fp32; out: kernel_h * kernel_w * Cp fp16 bits
 * (round to nearest even). bias_c: C fp32 (NULL: zeros); out: Cp floats. Only c, kernel_h and
 * kernel_w of desc are read. TCI_ERR_INVALID_ARGUMENT for NULL pointers or bad sizes. */
tci_status kern_depthwise_pack_weights(const kern_depthwise_desc *desc, const float *w_c1rs,
                                       uint16_t *out);
/* The bf16 weights: the same (R, S, Cp) layout as kern_depthwise_pack_weights with bf16 bits
 * (round to nearest even) in place of fp16 bits. */
tci_status kern_depthwise_pack_weights_bf16(const kern_depthwise_desc *desc, const float *w_c1rs,
                                            uint16_t *out);
/* The fp32 weights: the same (R, S, Cp) layout as kern_depthwise_pack_weights with the fp32 values
 * unchanged (zero where c >= C); out holds kernel_h * kernel_w * Cp floats. */
tci_status kern_depthwise_pack_weights_f32(const kern_depthwise_desc *desc, const float *w_c1rs,
                                           float *out);
tci_status kern_depthwise_pack_bias(const kern_depthwise_desc *desc, const float *bias_c, float *out);

/* Whether desc (sizes and path aside) takes a tiled kernel under KERN_DEPTHWISE_AUTO: 1 or 0. */
int kern_depthwise_is_tiled(const kern_depthwise_desc *desc);

#ifdef __cplusplus
}
#endif

#endif
