/* One 2-D ConvTranspose layer through cuDNN's legacy API, as the data gradient of the matching
 * convolution: a plan made once at engine build, then run any number of times (CUDA graph too). */
#ifndef TCI_KERNELS_CONV_TRANSPOSE_CUDNN_H
#define TCI_KERNELS_CONV_TRANSPOSE_CUDNN_H

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stddef.h>

#include "tcinfer.h"
#include "util/conv_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ONNX ConvTranspose Y = conv_transpose(X, W) + B is cuDNN's cudnnConvolutionBackwardData of the
 * convolution that maps Y-shaped tensors to X-shaped ones: dy = X, dx = Y, with the same pads,
 * strides, dilations and groups. ONNX's W (C_in, C_out / groups, R, S) is already that forward
 * convolution's filter (K = C_in, C = C_out / groups), so it needs no flipping or transposing.
 *
 * Tensors are fp16 NHWC8 (see GPU conventions): x has round_up(C_in, 8) channels, y
 * round_up(C_out, 8), padded channels zero; tensor-op math with fp32 accumulation. With
 * desc.fp32 the same layouts hold fp32 values (weights and bias packed as floats). */
typedef struct {
    /* input X, logical: n is the largest batch the plan will run, c = C_in, k = C_out; out_h,
     * out_w the output Y size, as ONNX computes it: stride * (in - 1) + output_padding +
     * dilation * (kernel - 1) + 1 - pad_begin - pad_end; cuDNN needs pad_top == pad_bottom and
     * pad_left == pad_right, and every value within int */
    conv_geom geom;
    int has_bias;         /* bias input given to kern_convt_run */
    int fp32;             /* 1: fp32 tensors, weights and bias in the same NHWC8 layouts, FMA math
                           * (no TF32): the fp32 layers and GPU fp32 baseline; 0: fp16 */
    int bf16;             /* with fp32 == 0: bfloat16 tensors, weights and bias instead of fp16
                           * (--precision bf16) */
    int allow_tf32;       /* with fp32: TF32 tensor-op math allowed (--precision tf32) */
    size_t workspace_limit; /* the largest workspace (bytes) the chosen algorithm may need */
} kern_convt_desc;

/* Device buffers for timing algorithms at creation, sized for desc.n and laid out as for
 * kern_convt_run. y is overwritten, the others only read; bias may be NULL when the plan has
 * none. workspace holds workspace_bytes (>= desc.workspace_limit to let every allowed algorithm
 * compete). */
typedef struct {
    const void *x, *w, *bias;
    void *y;
    void *workspace;
    size_t workspace_bytes;
} kern_convt_scratch;

/* What the plan chose and the shapes it expects. */
typedef struct {
    const char *algorithm;  /* e.g. "BWD_DATA_ALGO_1 tensor-op" (static string in the plan) */
    float time_ms;          /* cuDNN's timing at creation for desc.n; -1 by heuristics */
    size_t workspace_bytes; /* workspace kern_convt_run needs at desc.n */
    int input_channels;     /* channels of x as stored */
    int output_channels;    /* channels of y as stored */
    int out_h, out_w;
    int weight_k, weight_c; /* the filter cuDNN sees: weight_k x R x S x weight_c (fp16, KRSC),
                             * weight_k = stored input channels, weight_c = output channels of
                             * one group as stored */
    int cudnn_groups;       /* group count handed to cuDNN (Cp for padded depthwise) */
    size_t weight_elements; /* weight_k * R * S * weight_c */
    size_t bias_elements;   /* output_channels */
} kern_convt_info;

typedef struct kern_convt_plan kern_convt_plan;

/* Validates desc, builds the cuDNN descriptors and chooses an algorithm whose workspace fits
 * desc.workspace_limit: with scratch, by cudnnFindConvolutionBackwardDataAlgorithmEx (then the
 * fastest one that cuDNN accepts for a real run on stream, which is set on handle and
 * synchronised); without scratch (NULL), by cudnnGetConvolutionBackwardDataAlgorithm_v7
 * heuristics. Not capturable: call at build.
 *
 * Layout rules (kern_convt_shapes tells them; kern_convt_pack_weights applies them):
 * - groups == 1: weights Cp_in x R x S x Kp_out, zero where ci >= C_in or co >= C_out.
 * - depthwise (groups == C_in == C_out): run as Cp groups of one channel; weights Cp x R x S x 1,
 *   zero for ci >= C. Padded channels of y stay zero because their weights and bias are zero.
 * - other groups: C_in and C_out must be multiples of 8 (nothing is padded); weights
 *   C_in x R x S x (C_out / groups). cuDNN may lack an algorithm for some groupings; that is
 *   refused as TCI_ERR_UNSUPPORTED at creation.
 * Output size: cuDNN derives the rows a backward-data call covers from dx's descriptor and only
 * checks that the forward convolution of dx gives dy's size, so out_h = natural + extra works for
 * 0 <= extra < stride (natural = stride * (h - 1) + dilation * (r - 1) + 1 - 2 * pad); the extra
 * rows / columns at the end get what ONNX gives them (contributions reaching them, else only
 * the bias). That covers ONNX output_padding < stride; anything else is refused.
 * Errors: TCI_ERR_INVALID_ARGUMENT for impossible shapes; TCI_ERR_UNSUPPORTED for asymmetric pads,
 * output sizes as above, other groupings, or no algorithm within the workspace limit;
 * TCI_ERR_CUDA for failing CUDA / cuDNN calls. *out_plan is NULL on failure. */
tci_status kern_convt_create(cudnnHandle_t handle, cudaStream_t stream, const kern_convt_desc *desc,
                             const kern_convt_scratch *scratch, kern_convt_plan **out_plan);

/* y = conv_transpose(x, w) + bias on stream, for batch n (1..desc.n; the algorithm chosen for
 * desc.n is reused). bias (output_channels fp16 elements, zero-padded) must be non-NULL exactly
 * when desc.has_bias. y must not alias x. workspace holds workspace_bytes, at least what
 * kern_convt_workspace_at(n) says (NULL when 0). The bias is a second pass (cudnnAddTensor),
 * so y is rounded to fp16 twice. Thread-safe for distinct handles; the plan is not modified. Sets stream on
 * handle. Capturable in a CUDA graph (no allocation, no synchronisation). */
tci_status kern_convt_run(const kern_convt_plan *plan, cudnnHandle_t handle, cudaStream_t stream,
                          int n, const void *x, const void *w, const void *bias, void *y,
                          void *workspace, size_t workspace_bytes);

/* The workspace kern_convt_run needs at batch n (1..desc.n) with the plan's algorithm: cuDNN
 * may ask more at a smaller batch than kern_convt_info's (desc.n) figure. */
tci_status kern_convt_workspace_at(const kern_convt_plan *plan, cudnnHandle_t handle, int n,
                                   size_t *out_bytes);

void kern_convt_get_info(const kern_convt_plan *plan, kern_convt_info *out_info);

/* The layout part of kern_convt_info for desc, without cuDNN: what the engine needs to size and
 * pack buffers before a plan exists. Same validation and errors as kern_convt_create's first
 * step; algorithm is NULL, time_ms -1, workspace_bytes 0. */
tci_status kern_convt_shapes(const kern_convt_desc *desc, kern_convt_info *out_info);

/* Host-side packing into the layout kern_convt_shapes describes. weights_onnx: ONNX layout
 * C_in x (C_out / groups) x R x S fp32; out: info.weight_elements fp16 (bf16 with desc.bf16) bits
 * (uint16_t), floats with desc.fp32. bias: C_out floats; out: info.bias_elements values of the
 * same type, zero-padded. Errors as
 * kern_convt_shapes. */
tci_status kern_convt_pack_weights(const kern_convt_desc *desc, const float *weights_onnx,
                                   void *out);
tci_status kern_convt_pack_bias(const kern_convt_desc *desc, const float *bias, void *out);

/* Releases the descriptors and the plan; NULL is a no-op. Not while a run that uses the plan may
 * still be executing. */
void kern_convt_destroy(kern_convt_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
