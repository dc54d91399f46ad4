/* One 2-D convolution layer through cuDNN's legacy API: a plan made once at engine build (algorithm
 * chosen by timing or heuristics), then run any number of times, also inside CUDA graph capture. */
#ifndef TCI_KERNELS_CONV_CUDNN_H
#define TCI_KERNELS_CONV_CUDNN_H

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stddef.h>

#include "tcinfer.h"
#include "util/conv_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    /* fp16 NHWC8 tensors (see GPU conventions), tensor-op math, fp32 accumulation. Channels are
     * padded: the input has Cp = round_up(C, 8) channels, the output Kp = round_up(K, 8). */
    KERN_CONV_FP16_NHWC8 = 0,
    /* fp32 tensors with exactly C / K channels, FMA math (no TF32): the GPU fp32 baseline. */
    KERN_CONV_FP32_NCHW = 1,
    KERN_CONV_FP32_NHWC = 2,
    /* fp32 tensors in the NHWC8 layout: channels padded exactly as KERN_CONV_FP16_NHWC8 (Cp / Kp,
     * the same weight layout and groupings) with 4-byte elements, fp32 bias (Kp values), FMA math
     * (no TF32): fp32 layers between fp16 NHWC8 ones without a layout change. */
    KERN_CONV_FP32_NHWC8 = 3,
    /* bfloat16 NHWC8 tensors, weights and bias, otherwise exactly KERN_CONV_FP16_NHWC8
     * (--precision bf16). */
    KERN_CONV_BF16_NHWC8 = 4,
} kern_conv_mode;

/* cuDNN's fused call offers only these two. */
typedef enum { KERN_CONV_ACT_NONE = 0, KERN_CONV_ACT_RELU = 1 } kern_conv_activation;

/* The algorithm a plan runs, as numbers that can be stored (a timing cache) and given back. */
typedef struct {
    int algo;  /* cudnnConvolutionFwdAlgo_t */
    int math;  /* cudnnMathType_t */
    int fused; /* 1: the fused call; 0: convolution then separate epilogue calls */
} kern_conv_choice;

typedef struct {
    /* logical sizes; n is the largest batch the plan will run; cuDNN needs pad_top ==
     * pad_bottom and pad_left == pad_right, and every value within int; out_h and out_w are
     * not read (kern_conv_info gives them) */
    conv_geom geom;
    kern_conv_activation activation;
    int has_bias;        /* bias input given to kern_conv_run */
    int has_residual;    /* z input given to kern_conv_run: y = act(conv(x) + bias + z) */
    int no_fusion;       /* 1: never the fused call (for tests and numerics comparisons) */
    kern_conv_mode mode;
    size_t workspace_limit; /* the largest workspace (bytes) the chosen algorithm may need */
    /* 1: run `choice` (from an earlier plan's kern_conv_info) without timing or heuristics;
     * TCI_ERR_UNSUPPORTED when cuDNN no longer accepts it within workspace_limit. */
    int use_choice;
    kern_conv_choice choice;
    /* fp32 modes: 1 lets cuDNN use TF32 tensor-op math (inputs rounded to a 10-bit mantissa,
     * fp32 accumulation: --precision tf32); 0 keeps FMA math. */
    int allow_tf32;
} kern_conv_desc;

/* Device buffers for timing algorithms at creation, sized for desc.n and laid out as for
 * kern_conv_run. Contents are overwritten (y) or only read; bias / z may be NULL when the
 * plan has none. workspace holds workspace_bytes (>= desc.workspace_limit to let every allowed
 * algorithm compete). Random-ish data gives honest times; zeros can be faster than real data. */
typedef struct {
    const void *x, *w, *bias, *z;
    void *y;
    void *workspace;
    size_t workspace_bytes;
} kern_conv_scratch;

/* What the plan chose and the shapes it expects; for --profile / --info and for sizing. */
typedef struct {
    const char *algorithm;  /* e.g. "IMPLICIT_PRECOMP_GEMM fused" (static string in the plan) */
    float time_ms;          /* measured at creation for desc.n; -1 when chosen by heuristics */
    size_t workspace_bytes; /* workspace kern_conv_run needs at desc.n */
    int fused;              /* 1: one cudnnConvolutionBiasActivationForward call (single rounding);
                             * 0: convolution then separate bias / residual / ReLU passes */
    int input_channels;     /* channels of x as stored: Cp (NHWC8 modes) or C (NCHW / NHWC) */
    int output_channels;    /* channels of y (and z) as stored: Kp (NHWC8 modes) or K */
    int out_h, out_w;
    int weight_k, weight_c; /* the filter cuDNN sees: weight_k x R x S x weight_c (NHWC8 modes,
                             * fp32 NHWC) or weight_k x weight_c x R x S (fp32 NCHW) */
    int cudnn_groups;       /* group count handed to cuDNN (Cp for padded depthwise) */
    size_t weight_elements; /* weight_k * R * S * weight_c */
    size_t bias_elements;   /* output_channels */
    kern_conv_choice choice; /* what was chosen (for kern_conv_desc.use_choice later) */
} kern_conv_info;

typedef struct kern_conv_plan kern_conv_plan;

/* Validates desc, builds the cuDNN descriptors and chooses an algorithm whose workspace fits
 * desc.workspace_limit: with scratch, by cudnnFindConvolutionForwardAlgorithmEx and then by
 * timing the actual call on stream (which is set on handle, and synchronised); without scratch
 * (NULL), by cudnnGetConvolutionForwardAlgorithm_v7 heuristics. Not capturable: call at build.
 *
 * Layout rules, NHWC8 modes (fp16 and fp32 alike; kern_conv_shapes tells them;
 * kern_conv_pack_weights applies them):
 * - groups == 1: weights Kp x R x S x Cp, zero where k >= K or c >= C.
 * - depthwise (groups == C == K): run as Cp groups of one channel; weights Cp x R x S x 1, zero
 *   for k >= C. Padded channels stay zero in y because their weights and bias are zero.
 * - other groups: C and K must be multiples of 8 (so nothing is padded); weights
 *   K x R x S x (C / groups). cuDNN may still lack an algorithm for per-group counts that are not
 *   multiples of 8; that is refused as TCI_ERR_UNSUPPORTED at creation.
 * Errors: TCI_ERR_INVALID_ARGUMENT for impossible shapes; TCI_ERR_UNSUPPORTED for asymmetric
 * pads (pad explicitly first), other groupings, or no algorithm within the workspace limit;
 * TCI_ERR_CUDA for failing CUDA / cuDNN calls. *out_plan is NULL on failure. */
tci_status kern_conv_create(cudnnHandle_t handle, cudaStream_t stream, const kern_conv_desc *desc,
                            const kern_conv_scratch *scratch, kern_conv_plan **out_plan);

/* y = act(conv(x, w) + bias + z) on stream, for batch n (1..desc.n; the algorithm chosen for
 * desc.n is reused). bias (output_channels elements, same dtype as the tensors: fp16 in fp16
 * mode, zero-padded) must be non-NULL exactly when desc.has_bias, z (shaped as y) exactly when
 * desc.has_residual. y must not alias x or z. workspace holds workspace_bytes, at least what
 * kern_conv_workspace_at(n) says (NULL when 0; a smaller n may need more than desc.n).
 * Thread-safe for distinct handles; the plan is not modified. Sets stream on handle. Capturable
 * in a CUDA graph (no allocation, no synchronisation). */
tci_status kern_conv_run(const kern_conv_plan *plan, cudnnHandle_t handle, cudaStream_t stream,
                         int n, const void *x, const void *w, const void *bias, const void *z,
                         void *y, void *workspace, size_t workspace_bytes);

/* The workspace kern_conv_run needs at batch n (1..desc.n) with the plan's algorithm: cuDNN
 * may ask more at a smaller batch than kern_conv_info's (desc.n) figure. */
tci_status kern_conv_workspace_at(const kern_conv_plan *plan, cudnnHandle_t handle, int n,
                                  size_t *out_bytes);

void kern_conv_get_info(const kern_conv_plan *plan, kern_conv_info *out_info);

/* The layout part of kern_conv_info (stored channels, output size, filter shape, element
 * counts) for desc, without cuDNN: what the engine needs to size and pack buffers, and the scratch
 * for kern_conv_create, before a plan exists. Same validation and errors as kern_conv_create's
 * first step; algorithm is NULL, time_ms -1, workspace_bytes 0. */
tci_status kern_conv_shapes(const kern_conv_desc *desc, kern_conv_info *out_info);

/* Host-side packing into the layout kern_conv_shapes describes. weights_oihw: ONNX layout
 * K x (C/groups) x R x S fp32; out: info.weight_elements elements, fp16 bits (uint16_t) in fp16
 * mode, else float. bias: K floats; out: info.bias_elements elements, zero-padded. Errors as
 * kern_conv_shapes. */
tci_status kern_conv_pack_weights(const kern_conv_desc *desc, const float *weights_oihw, void *out);
tci_status kern_conv_pack_bias(const kern_conv_desc *desc, const float *bias, void *out);

/* The geometry checks kern_conv_create and kern_convt_create share, `who` starting the message:
 * positive sizes (with_output: out_h and out_w too), pads >= 0, strides and dilations >= 1,
 * groups dividing c and k (TCI_ERR_INVALID_ARGUMENT); values beyond int, asymmetric pads
 * (TCI_ERR_UNSUPPORTED). */
tci_status kern_cudnn_check_geom(const conv_geom *g, const char *who, int with_output);

/* The NHWC8 channel layout cuDNN sees for g (see kern_conv_create): the stored input and output
 * channel counts and cuDNN's group count; TCI_ERR_UNSUPPORTED, `who` starting the message, for
 * groupings the channel padding would break. g as kern_cudnn_check_geom accepts it. */
tci_status kern_cudnn_nhwc8_channels(const conv_geom *g, const char *who, int *in_channels,
                                     int *out_channels, int *groups);

/* Releases the descriptors and the plan's device memory; NULL is a no-op. Not while a run that
 * uses the plan may still be executing. */
void kern_conv_destroy(kern_conv_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
