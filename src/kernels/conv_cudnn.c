/* Convolution plans over cuDNN's legacy API: descriptors, algorithm choice by timing or heuristics,
 * and the fused conv + bias + residual + activation call with a plain fallback. */
#include "kernels/conv_cudnn.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_check.h"
#include "util/half.h"
#include "util/status.h"

/* How one run is carried out. PLAIN: no epilogue. FUSED: one cudnnConvolutionBiasActivationForward.
 * UNFUSED: convolution, then cudnnAddTensor for bias and residual and cudnnActivationForward; this
 * rounds to fp16 more than once, so it is only kept when no fused call works or every fused call
 * is clearly slower (cuDNN's fused call with IDENTITY activation is documented for
 * IMPLICIT_PRECOMP_GEMM only). */
typedef enum { PATH_PLAIN, PATH_FUSED, PATH_UNFUSED } conv_path;

struct kern_conv_plan {
    kern_conv_desc desc;
    kern_conv_info info;
    cudnnDataType_t data_type;
    cudnnTensorFormat_t format;
    cudnnTensorDescriptor_t x_desc, y_desc, bias_desc; /* x and y for desc.geom.n */
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnActivationDescriptor_t act_desc;
    void *zero_bias; /* device; for the fused call when the layer has no bias */
    conv_path path;
    cudnnConvolutionFwdAlgo_t algo;
    char algorithm_name[64];
};

static const char *algo_name(cudnnConvolutionFwdAlgo_t algo) {
    switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown";
    }
}

static int round_up8(int v) { return (v + 7) / 8 * 8; }

tci_status kern_cudnn_check_geom(const conv_geom *g, const char *who, int with_output) {
    if (g->n < 1 || g->c < 1 || g->h < 1 || g->w < 1 || g->k < 1 || g->kernel_h < 1 ||
        g->kernel_w < 1 || (with_output && (g->out_h < 1 || g->out_w < 1)))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: sizes must be positive (n %lld c %lld h %lld w %lld k %lld r %lld "
                         "s %lld%s)",
                         who, (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w,
                         (long long)g->k, (long long)g->kernel_h, (long long)g->kernel_w,
                         with_output ? " and a positive output" : "");
    const int64_t pads[] = {g->pad_top, g->pad_left, g->pad_bottom, g->pad_right};
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: negative pad %lld", who,
                             (long long)pads[i]);
    if (g->stride_h < 1 || g->stride_w < 1 || g->dilation_h < 1 || g->dilation_w < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: strides (%lld, %lld) and dilations (%lld, %lld) must be >= 1", who,
                         (long long)g->stride_h, (long long)g->stride_w, (long long)g->dilation_h,
                         (long long)g->dilation_w);
    if (g->groups < 1 || g->c % g->groups != 0 || g->k % g->groups != 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: groups %lld must divide input channels %lld and output channels %lld",
                         who, (long long)g->groups, (long long)g->c, (long long)g->k);
    /* cuDNN's descriptors take int; channels are rounded up to a multiple of 8 */
    const int64_t values[] = {g->n, g->c + 7, g->h, g->w, g->k + 7, g->kernel_h, g->kernel_w,
                              g->out_h, g->out_w, g->stride_h, g->stride_w, g->dilation_h,
                              g->dilation_w, g->pad_top, g->pad_left, g->pad_bottom, g->pad_right};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (values[i] > INT_MAX)
            return status_error(TCI_ERR_UNSUPPORTED, "%s: a size of %lld is beyond cuDNN's int", who,
                             (long long)values[i]);
    if (g->pad_top != g->pad_bottom || g->pad_left != g->pad_right)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: asymmetric pads (top %lld, left %lld, bottom %lld, right %lld); cuDNN "
                         "needs top == bottom and left == right: pad the input explicitly",
                         who, (long long)g->pad_top, (long long)g->pad_left,
                         (long long)g->pad_bottom, (long long)g->pad_right);
    return TCI_OK;
}

tci_status kern_cudnn_nhwc8_channels(const conv_geom *g, const char *who, int *in_channels,
                                     int *out_channels, int *groups) {
    if (g->groups == 1) {
        *in_channels = round_up8((int)g->c);
        *out_channels = round_up8((int)g->k);
        *groups = 1;
    } else if (g->groups == g->c && g->k == g->c) {
        /* depthwise: the padded channels become extra groups with zero weights */
        *in_channels = *out_channels = *groups = round_up8((int)g->c);
    } else if (g->c % 8 == 0 && g->k % 8 == 0) {
        *in_channels = (int)g->c;
        *out_channels = (int)g->k;
        *groups = (int)g->groups;
    } else {
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: groups %lld with %lld input and %lld output channels: padding to "
                         "multiples of 8 would break the groups (NHWC8 needs groups == 1, depthwise "
                         "groups == C == K, or C and K multiples of 8)",
                         who, (long long)g->groups, (long long)g->c, (long long)g->k);
    }
    return TCI_OK;
}

static tci_status validate(const kern_conv_desc *d) {
    if (d->activation != KERN_CONV_ACT_NONE && d->activation != KERN_CONV_ACT_RELU)
        return status_error(TCI_ERR_UNSUPPORTED, "conv plan: activation %d (cuDNN fuses ReLU only)",
                         (int)d->activation);
    if (d->mode != KERN_CONV_FP16_NHWC8 && d->mode != KERN_CONV_FP32_NCHW &&
        d->mode != KERN_CONV_FP32_NHWC && d->mode != KERN_CONV_FP32_NHWC8 &&
        d->mode != KERN_CONV_BF16_NHWC8)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv plan: unknown mode %d", (int)d->mode);
    return kern_cudnn_check_geom(&d->geom, "conv plan", 0);
}

/* Fills the shape part of info: stored channel counts, the filter cuDNN sees, output size. */
static tci_status plan_shapes(const kern_conv_desc *d, kern_conv_info *info) {
    int64_t eh = (int64_t)d->geom.dilation_h * (d->geom.kernel_h - 1) + 1;
    int64_t ew = (int64_t)d->geom.dilation_w * (d->geom.kernel_w - 1) + 1;
    int64_t ph = (int64_t)d->geom.h + d->geom.pad_top + d->geom.pad_bottom;
    int64_t pw = (int64_t)d->geom.w + d->geom.pad_left + d->geom.pad_right;
    if (eh > ph || ew > pw)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv plan: dilated kernel %lldx%lld larger than padded input %lldx%lld",
                         (long long)eh, (long long)ew, (long long)ph, (long long)pw);
    info->out_h = (int)((ph - eh) / d->geom.stride_h + 1);
    info->out_w = (int)((pw - ew) / d->geom.stride_w + 1);
    /* the NHWC8 modes pad channels the same way; only the element type differs */
    int padded = d->mode == KERN_CONV_FP16_NHWC8 || d->mode == KERN_CONV_FP32_NHWC8 ||
                 d->mode == KERN_CONV_BF16_NHWC8;
    if (!padded) {
        info->input_channels = (int)d->geom.c;
        info->output_channels = (int)d->geom.k;
        info->cudnn_groups = (int)d->geom.groups;
    } else {
        TRY_STATUS(kern_cudnn_nhwc8_channels(&d->geom, "conv plan", &info->input_channels,
                                          &info->output_channels, &info->cudnn_groups));
    }
    info->weight_k = info->output_channels;
    info->weight_c = info->input_channels / info->cudnn_groups;
    info->weight_elements =
        (size_t)info->weight_k * (size_t)d->geom.kernel_h * (size_t)d->geom.kernel_w * (size_t)info->weight_c;
    info->bias_elements = (size_t)info->output_channels;
    return TCI_OK;
}

static tci_status set_tensor(const kern_conv_plan *p, cudnnTensorDescriptor_t t, int n, int c,
                             int h, int w) {
    KERN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, p->format, p->data_type, n, c, h, w));
    return TCI_OK;
}

static tci_status build_descriptors(kern_conv_plan *p) {
    const kern_conv_desc *d = &p->desc;
    const kern_conv_info *in = &p->info;
    int fp16 = d->mode == KERN_CONV_FP16_NHWC8 || d->mode == KERN_CONV_BF16_NHWC8;
    p->data_type = d->mode == KERN_CONV_BF16_NHWC8 ? CUDNN_DATA_BFLOAT16
                   : fp16                          ? CUDNN_DATA_HALF
                                                   : CUDNN_DATA_FLOAT;
    p->format = d->mode == KERN_CONV_FP32_NCHW ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x_desc));
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y_desc));
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias_desc));
    KERN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w_desc));
    KERN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv_desc));
    KERN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&p->act_desc));
    TRY_STATUS(set_tensor(p, p->x_desc, d->geom.n, in->input_channels, d->geom.h, d->geom.w));
    TRY_STATUS(set_tensor(p, p->y_desc, d->geom.n, in->output_channels, in->out_h, in->out_w));
    TRY_STATUS(set_tensor(p, p->bias_desc, 1, in->output_channels, 1, 1));
    KERN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w_desc, p->data_type, p->format, in->weight_k,
                                                in->weight_c, d->geom.kernel_h, d->geom.kernel_w));
    KERN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        p->conv_desc, d->geom.pad_top, d->geom.pad_left, d->geom.stride_h, d->geom.stride_w, d->geom.dilation_h,
        d->geom.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KERN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv_desc, in->cudnn_groups));
    /* FMA math keeps the fp32 baseline free of TF32 */
    KERN_CUDNN_CHECK(
        cudnnSetConvolutionMathType(p->conv_desc, fp16 || p->desc.allow_tf32 ? CUDNN_TENSOR_OP_MATH
                                                                              : CUDNN_FMA_MATH));
    KERN_CUDNN_CHECK(cudnnSetActivationDescriptor(
        p->act_desc,
        d->activation == KERN_CONV_ACT_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
        CUDNN_PROPAGATE_NAN, 0.0));
    int on, oc, oh, ow;
    KERN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv_desc, p->x_desc, p->w_desc, &on,
                                                           &oc, &oh, &ow));
    if (on != d->geom.n || oc != in->output_channels || oh != in->out_h || ow != in->out_w)
        return status_error(
            TCI_ERR_INTERNAL,
            "conv plan: cuDNN output %dx%dx%dx%d differs from the expected %dx%dx%dx%d", on, oc, oh,
            ow, (int)d->geom.n, in->output_channels, in->out_h, in->out_w);
    return TCI_OK;
}

/* One run along a path, returning cuDNN's status so that algorithm trials can tell "not supported
 * here" from real failures. Every scale factor is float: cuDNN's rule for half and float data. */
static cudnnStatus_t execute(const kern_conv_plan *p, cudnnHandle_t h, conv_path path,
                             cudnnConvolutionFwdAlgo_t algo, cudnnTensorDescriptor_t x_desc,
                             cudnnTensorDescriptor_t y_desc, const void *x, const void *w,
                             const void *bias, const void *z, void *y, void *ws, size_t ws_bytes) {
    const float one = 1.0f, zero = 0.0f;
    const kern_conv_desc *d = &p->desc;
    if (path == PATH_PLAIN)
        return cudnnConvolutionForward(h, &one, x_desc, x, p->w_desc, w, p->conv_desc, algo, ws,
                                       ws_bytes, &zero, y_desc, y);
    if (path == PATH_FUSED) {
        /* alpha2 = 0 with z = y when there is no residual: cuDNN reads nothing useful from it */
        const float alpha2 = d->has_residual ? 1.0f : 0.0f;
        return cudnnConvolutionBiasActivationForward(
            h, &one, x_desc, x, p->w_desc, w, p->conv_desc, algo, ws, ws_bytes, &alpha2, y_desc,
            d->has_residual ? z : y, p->bias_desc, d->has_bias ? bias : p->zero_bias, p->act_desc,
            y_desc, y);
    }
    /* z == y (in-place residual) accumulates through beta instead of being overwritten first */
    int z_in_y = d->has_residual && z == y;
    cudnnStatus_t st = cudnnConvolutionForward(h, &one, x_desc, x, p->w_desc, w, p->conv_desc, algo,
                                               ws, ws_bytes, z_in_y ? &one : &zero, y_desc, y);
    if (st == CUDNN_STATUS_SUCCESS && d->has_bias)
        st = cudnnAddTensor(h, &one, p->bias_desc, bias, &one, y_desc, y);
    if (st == CUDNN_STATUS_SUCCESS && d->has_residual && !z_in_y)
        st = cudnnAddTensor(h, &one, y_desc, z, &one, y_desc, y);
    if (st == CUDNN_STATUS_SUCCESS && d->activation == KERN_CONV_ACT_RELU)
        st = cudnnActivationForward(h, p->act_desc, &one, y_desc, y, &zero, y_desc, y);
    return st;
}

/* cuDNN saying "not this algorithm / combination" rather than failing */
static int is_refusal(cudnnStatus_t st) {
    int cat = CUDNN_STATUS_CATEGORY(st);
    return cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED;
}

/* Runs a candidate once (to see whether cuDNN accepts it), then times it: the best of three
 * rounds of five back-to-back runs. *out_ms < 0 when cuDNN refuses the combination. */
static tci_status time_candidate(const kern_conv_plan *p, cudnnHandle_t h, cudaStream_t stream,
                                 conv_path path, cudnnConvolutionFwdAlgo_t algo,
                                 const kern_conv_scratch *sc, float *out_ms) {
    *out_ms = -1.0f;
    cudnnStatus_t st = execute(p, h, path, algo, p->x_desc, p->y_desc, sc->x, sc->w, sc->bias,
                               sc->z, sc->y, sc->workspace, sc->workspace_bytes);
    if (st != CUDNN_STATUS_SUCCESS && !is_refusal(st))
        return status_error(TCI_ERR_CUDA, "conv plan: %s trial of %s failed: %s",
                         path == PATH_FUSED     ? "fused"
                         : path == PATH_UNFUSED ? "unfused"
                                                : "plain",
                         algo_name(algo), cudnnGetErrorString(st));
    KERN_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (st != CUDNN_STATUS_SUCCESS) return TCI_OK;
    /* back-to-back runs, as in a CUDA graph replay: timing single runs would count launch
     * latency that a replay hides */
    enum { ROUNDS = 3, ITERS = 5 };
    float ms[ROUNDS];
    cudaEvent_t start = NULL, stop = NULL;
    tci_status status = TCI_OK;
    cudaError_t ce = cudaEventCreate(&start);
    if (ce == cudaSuccess) ce = cudaEventCreate(&stop);
    for (int i = 0; i < ROUNDS && ce == cudaSuccess && st == CUDNN_STATUS_SUCCESS; i++) {
        ce = cudaEventRecord(start, stream);
        for (int j = 0; j < ITERS && ce == cudaSuccess && st == CUDNN_STATUS_SUCCESS; j++)
            st = execute(p, h, path, algo, p->x_desc, p->y_desc, sc->x, sc->w, sc->bias, sc->z,
                         sc->y, sc->workspace, sc->workspace_bytes);
        if (ce != cudaSuccess || st != CUDNN_STATUS_SUCCESS) break;
        ce = cudaEventRecord(stop, stream);
        if (ce == cudaSuccess) ce = cudaEventSynchronize(stop);
        if (ce == cudaSuccess) ce = cudaEventElapsedTime(&ms[i], start, stop);
        ms[i] /= ITERS;
    }
    if (ce != cudaSuccess)
        status = status_error(TCI_ERR_CUDA, "conv plan: timing %s: %s", algo_name(algo),
                           cudaGetErrorString(ce));
    else if (st != CUDNN_STATUS_SUCCESS)
        status = status_error(TCI_ERR_CUDA, "conv plan: timing %s: %s", algo_name(algo),
                           cudnnGetErrorString(st));
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (status != TCI_OK) return status;
    *out_ms = ms[0];
    for (int i = 1; i < ROUNDS; i++)
        if (ms[i] < *out_ms) *out_ms = ms[i];
    return TCI_OK;
}

typedef struct {
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t math;
    size_t memory;
    float time_ms;
} candidate;

/* The algorithms cuDNN offers, fastest (timed) or most promising (heuristics) first, kept only
 * where they succeed and their workspace fits the limit. */
static tci_status list_candidates(kern_conv_plan *p, cudnnHandle_t h, const kern_conv_scratch *sc,
                                  candidate *out, int *out_count) {
    int max_count = 0;
    *out_count = 0;
    KERN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    if (max_count < 1) max_count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    if (max_count > 4 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
        max_count = 4 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    cudnnConvolutionFwdAlgoPerf_t perf[4 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    if (sc) {
        KERN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            h, p->x_desc, sc->x, p->w_desc, sc->w, p->conv_desc, p->y_desc, sc->y, max_count,
            &returned, perf, sc->workspace, sc->workspace_bytes));
    } else {
        KERN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
            h, p->x_desc, p->w_desc, p->conv_desc, p->y_desc, max_count, &returned, perf));
    }
    for (int i = 0; i < returned; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        size_t need = 0;
        /* the heuristics' memory field is not a promise; ask for the exact size */
        if (cudnnGetConvolutionForwardWorkspaceSize(h, p->x_desc, p->w_desc, p->conv_desc,
                                                    p->y_desc, perf[i].algo,
                                                    &need) != CUDNN_STATUS_SUCCESS)
            continue;
        if (perf[i].memory > need) need = perf[i].memory;
        if (need > p->desc.workspace_limit) continue;
        if (sc && need > sc->workspace_bytes) continue;
        /* fp32: DEFAULT math would allow TF32 on Ampere and later; the baseline stays FMA */
        cudnnMathType_t math = p->data_type == CUDNN_DATA_FLOAT && !p->desc.allow_tf32
                                   ? CUDNN_FMA_MATH
                                   : perf[i].mathType;
        int dup = 0;
        for (int j = 0; j < *out_count; j++)
            dup |= out[j].algo == perf[i].algo && out[j].math == math;
        if (dup) continue;
        out[*out_count] = (candidate){perf[i].algo, math, need, perf[i].time};
        (*out_count)++;
    }
    return TCI_OK;
}

/* Find lists an algorithm with the math type it chose for the plain convolution, so the
 * tensor-op IMPLICIT_PRECOMP_GEMM, the one algorithm cuDNN documents for the fused call with an
 * identity activation, can be missing from the list. Appends it where tensor-op math applies. */
static tci_status add_precomp_tensor_op(kern_conv_plan *p, cudnnHandle_t h,
                                        const kern_conv_scratch *sc, candidate *cands,
                                        int *count, int capacity) {
    const cudnnConvolutionFwdAlgo_t precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    if ((p->data_type == CUDNN_DATA_FLOAT && !p->desc.allow_tf32) || *count >= capacity)
        return TCI_OK;
    for (int i = 0; i < *count; i++)
        if (cands[i].algo == precomp && cands[i].math == CUDNN_TENSOR_OP_MATH) return TCI_OK;
    size_t need = 0;
    KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, CUDNN_TENSOR_OP_MATH));
    if (cudnnGetConvolutionForwardWorkspaceSize(h, p->x_desc, p->w_desc, p->conv_desc, p->y_desc,
                                                precomp, &need) != CUDNN_STATUS_SUCCESS ||
        need > p->desc.workspace_limit || need > sc->workspace_bytes)
        return TCI_OK;
    cands[(*count)++] = (candidate){precomp, CUDNN_TENSOR_OP_MATH, need, -1.0f};
    return TCI_OK;
}

static tci_status use_candidate(kern_conv_plan *p, conv_path path, const candidate *c,
                                float time_ms) {
    KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, c->math));
    p->path = path;
    p->algo = c->algo;
    p->info.choice = (kern_conv_choice){(int)c->algo, (int)c->math, path != PATH_UNFUSED};
    p->info.workspace_bytes = c->memory;
    p->info.time_ms = time_ms;
    p->info.fused = path != PATH_UNFUSED;
    snprintf(p->algorithm_name, sizeof p->algorithm_name, "%s%s%s", algo_name(c->algo),
             path == PATH_FUSED     ? " fused"
             : path == PATH_UNFUSED ? " unfused"
                                    : "",
             c->math == CUDNN_TENSOR_OP_MATH || c->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                 ? " tensor-op"
                 : "");
    p->info.algorithm = p->algorithm_name;
    return TCI_OK;
}

static tci_status choose_algorithm(kern_conv_plan *p, cudnnHandle_t h, cudaStream_t stream,
                                   const kern_conv_scratch *sc) {
    const kern_conv_desc *d = &p->desc;
    int epilogue = d->has_bias || d->has_residual || d->activation != KERN_CONV_ACT_NONE;
    conv_path path = !epilogue ? PATH_PLAIN : d->no_fusion ? PATH_UNFUSED : PATH_FUSED;
    if (d->use_choice) {
        /* a choice made before: only check that cuDNN still takes it */
        candidate c = {(cudnnConvolutionFwdAlgo_t)d->choice.algo, (cudnnMathType_t)d->choice.math,
                       0, -1.0f};
        KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, c.math));
        if (cudnnGetConvolutionForwardWorkspaceSize(h, p->x_desc, p->w_desc, p->conv_desc,
                                                    p->y_desc, c.algo, &c.memory) !=
                CUDNN_STATUS_SUCCESS ||
            c.memory > d->workspace_limit)
            return status_error(TCI_ERR_UNSUPPORTED,
                             "conv plan: the given algorithm %s is not available here",
                             algo_name(c.algo));
        return use_candidate(p, epilogue && !d->choice.fused ? PATH_UNFUSED : path, &c, -1.0f);
    }
    candidate cands[4 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    TRY_STATUS(list_candidates(p, h, sc, cands, &count));
    if (count == 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "conv plan: cuDNN has no algorithm for %dx%dx%dx%d * %dx%dx%dx%d (groups "
                         "%d) within a workspace of %zu bytes",
                         (int)d->geom.n, p->info.input_channels, (int)d->geom.h, (int)d->geom.w, p->info.weight_k, (int)d->geom.kernel_h, (int)d->geom.kernel_w,
                         p->info.weight_c, p->info.cudnn_groups, d->workspace_limit);
    if (!sc) {
        /* untimed: trust the heuristics' order, minding the documented IDENTITY restriction */
        for (int i = 0; i < count; i++)
            if (path != PATH_FUSED || d->activation == KERN_CONV_ACT_RELU ||
                cands[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
                return use_candidate(p, path, &cands[i], -1.0f);
        return use_candidate(p, PATH_UNFUSED, &cands[0], -1.0f);
    }

    /* Only the few fastest (by cuDNN's own timing of the plain convolution) are timed again as
     * the real call, back to back: timing every algorithm (slow FFT variants at batch 256 take
     * tens of ms a run) makes an engine build crawl. The fused call refuses some algorithms, so
     * for it every IMPLICIT_PRECOMP_GEMM entry is timed too, wherever Find ranked it: without
     * that, a slow algorithm the fused call accepts could win (MobileNetV2's 1x1 layers at batch
     * 256 ran non-tensor-op IMPLICIT_GEMM at 117-224 us where tensor-op PRECOMP took 7-43 us in
     * another build). */
    if (path == PATH_FUSED)
        TRY_STATUS(add_precomp_tensor_op(p, h, sc, cands, &count,
                                      (int)(sizeof cands / sizeof cands[0])));
    enum { MAX_TIMED = 4 };
    int best = -1, timed = 0;
    float best_ms = 0.0f;
    for (int i = 0; i < count; i++) {
        float ms;
        int must = path == PATH_FUSED &&
                   cands[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
        if (!must && best >= 0 &&
            (timed >= MAX_TIMED || cands[i].time_ms > 2.0f * cands[0].time_ms))
            continue;
        timed++;
        KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, cands[i].math));
        TRY_STATUS(time_candidate(p, h, stream, path, cands[i].algo, sc, &ms));
        if (ms >= 0.0f && (best < 0 || ms < best_ms)) {
            best = i;
            best_ms = ms;
        }
    }
    if (path != PATH_FUSED) {
        if (best >= 0) return use_candidate(p, path, &cands[best], best_ms);
        return status_error(TCI_ERR_UNSUPPORTED, "conv plan: cuDNN refuses every algorithm it listed");
    }
    /* The unfused sequence (the fastest plain algorithm, then bias, residual and activation as
     * separate passes) rounds to fp16 more often and reads y again, so it is kept only where
     * cuDNN refuses every fused candidate or the fused call is slower by more than a quarter. */
    float unfused_ms;
    KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, cands[0].math));
    TRY_STATUS(time_candidate(p, h, stream, PATH_UNFUSED, cands[0].algo, sc, &unfused_ms));
    if (best >= 0 && (unfused_ms < 0.0f || best_ms <= 1.25f * unfused_ms))
        return use_candidate(p, path, &cands[best], best_ms);
    if (unfused_ms < 0.0f)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "conv plan: cuDNN refuses both the fused and the unfused epilogue with %s",
                         algo_name(cands[0].algo));
    return use_candidate(p, PATH_UNFUSED, &cands[0], unfused_ms);
}

static tci_status check_scratch(const kern_conv_plan *p, const kern_conv_scratch *sc) {
    if (!sc) return TCI_OK;
    if (!sc->x || !sc->w || !sc->y || (p->desc.has_bias && !sc->bias) ||
        (p->desc.has_residual && !sc->z) || (sc->workspace_bytes && !sc->workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv plan: scratch buffers missing (x, w, y, and bias / z / workspace "
                         "where the plan has them)");
    return TCI_OK;
}

static tci_status create_steps(kern_conv_plan *p, cudnnHandle_t handle, cudaStream_t stream,
                               const kern_conv_scratch *scratch) {
    TRY_STATUS(validate(&p->desc));
    TRY_STATUS(plan_shapes(&p->desc, &p->info));
    TRY_STATUS(check_scratch(p, scratch));
    TRY_STATUS(build_descriptors(p));
    if (!p->desc.has_bias) {
        size_t bytes = p->info.bias_elements * (p->data_type == CUDNN_DATA_FLOAT ? 4 : 2);
        KERN_CUDA_CHECK(cudaMalloc(&p->zero_bias, bytes));
        KERN_CUDA_CHECK(cudaMemset(p->zero_bias, 0, bytes));
    }
    KERN_CUDNN_CHECK(cudnnSetStream(handle, stream));
    return choose_algorithm(p, handle, stream, scratch);
}

tci_status kern_conv_create(cudnnHandle_t handle, cudaStream_t stream, const kern_conv_desc *desc,
                            const kern_conv_scratch *scratch, kern_conv_plan **out_plan) {
    if (!out_plan) return status_error(TCI_ERR_INVALID_ARGUMENT, "conv plan: out_plan is NULL");
    *out_plan = NULL;
    if (!handle || !desc)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv plan: handle and desc are required");
    kern_conv_plan *p = calloc(1, sizeof *p);
    if (!p) return status_error(TCI_ERR_OUT_OF_MEMORY, "conv plan: out of host memory");
    p->desc = *desc;
    p->info.time_ms = -1.0f;
    tci_status st = create_steps(p, handle, stream, scratch);
    if (st != TCI_OK) {
        kern_conv_destroy(p);
        return st;
    }
    *out_plan = p;
    return TCI_OK;
}

static tci_status run_error(cudnnStatus_t st, const char *what) {
    return status_error(TCI_ERR_CUDA, "conv run: %s failed: %s", what, cudnnGetErrorString(st));
}

/* The workspace the plan's algorithm needs at batch n, with xd / yd set for n when n is not
 * desc.n. cuDNN may ask more at a smaller batch than at desc.n (IMPLICIT_PRECOMP_GEMM does). */
static tci_status need_at(const kern_conv_plan *p, cudnnHandle_t handle, cudnnTensorDescriptor_t xd,
                          cudnnTensorDescriptor_t yd, int n, size_t *need) {
    *need = p->info.workspace_bytes;
    if (n == p->desc.geom.n) return TCI_OK;
    TRY_STATUS(set_tensor(p, xd, n, p->info.input_channels, p->desc.geom.h, p->desc.geom.w));
    TRY_STATUS(set_tensor(p, yd, n, p->info.output_channels, p->info.out_h, p->info.out_w));
    KERN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, p->w_desc, p->conv_desc,
                                                             yd, p->algo, need));
    return TCI_OK;
}

/* Executes with x / y descriptors for batch n. Split from kern_conv_run so that temporary
 * descriptors are destroyed on every exit. */
static tci_status run_with(const kern_conv_plan *p, cudnnHandle_t handle,
                           cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd, int n,
                           const void *x, const void *w, const void *bias, const void *z, void *y,
                           void *workspace, size_t workspace_bytes) {
    size_t need;
    TRY_STATUS(need_at(p, handle, xd, yd, n, &need));
    if (need > workspace_bytes || (need && !workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv run: %s needs %zu workspace bytes at batch %d, got %zu",
                         p->algorithm_name, need, n, workspace ? workspace_bytes : 0);
    cudnnStatus_t st =
        execute(p, handle, p->path, p->algo, xd, yd, x, w, bias, z, y, workspace, workspace_bytes);
    if (st != CUDNN_STATUS_SUCCESS) return run_error(st, p->algorithm_name);
    KERN_LAUNCH_CHECK("conv run");
    return TCI_OK;
}

tci_status kern_conv_run(const kern_conv_plan *p, cudnnHandle_t handle, cudaStream_t stream, int n,
                         const void *x, const void *w, const void *bias, const void *z, void *y,
                         void *workspace, size_t workspace_bytes) {
    if (!p || !handle || !x || !w || !y)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv run: plan, handle, x, w and y are required");
    if (n < 1 || n > p->desc.geom.n)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv run: batch %d outside 1..%d", n,
                         (int)p->desc.geom.n);
    if ((bias != NULL) != (p->desc.has_bias != 0) || (z != NULL) != (p->desc.has_residual != 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv run: bias %s and residual %s do not match the plan (bias %s, "
                         "residual %s)",
                         bias ? "given" : "absent", z ? "given" : "absent",
                         p->desc.has_bias ? "yes" : "no", p->desc.has_residual ? "yes" : "no");
    if (y == x) return status_error(TCI_ERR_INVALID_ARGUMENT, "conv run: y must not alias x");
    KERN_CUDNN_CHECK(cudnnSetStream(handle, stream));
    if (n == p->desc.geom.n)
        return run_with(p, handle, p->x_desc, p->y_desc, n, x, w, bias, z, y, workspace,
                        workspace_bytes);
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    tci_status st = TCI_OK;
    cudnnStatus_t cs = cudnnCreateTensorDescriptor(&xd);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&yd);
    if (cs != CUDNN_STATUS_SUCCESS)
        st = run_error(cs, "cudnnCreateTensorDescriptor");
    else
        st = run_with(p, handle, xd, yd, n, x, w, bias, z, y, workspace, workspace_bytes);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    return st;
}

tci_status kern_conv_workspace_at(const kern_conv_plan *p, cudnnHandle_t handle, int n,
                                  size_t *out_bytes) {
    if (!p || !handle || !out_bytes)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv workspace: plan, handle and out_bytes are required");
    if (n < 1 || n > p->desc.geom.n)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv workspace: batch %d outside 1..%d", n,
                         (int)p->desc.geom.n);
    if (n == p->desc.geom.n) return need_at(p, handle, p->x_desc, p->y_desc, n, out_bytes);
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    tci_status st = TCI_OK;
    cudnnStatus_t cs = cudnnCreateTensorDescriptor(&xd);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&yd);
    if (cs != CUDNN_STATUS_SUCCESS)
        st = run_error(cs, "cudnnCreateTensorDescriptor");
    else
        st = need_at(p, handle, xd, yd, n, out_bytes);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    return st;
}

void kern_conv_get_info(const kern_conv_plan *p, kern_conv_info *out_info) { *out_info = p->info; }

tci_status kern_conv_shapes(const kern_conv_desc *desc, kern_conv_info *out_info) {
    memset(out_info, 0, sizeof *out_info);
    out_info->time_ms = -1.0f;
    if (!desc) return status_error(TCI_ERR_INVALID_ARGUMENT, "conv plan: desc is NULL");
    TRY_STATUS(validate(desc));
    return plan_shapes(desc, out_info);
}

tci_status kern_conv_pack_weights(const kern_conv_desc *d, const float *weights_oihw, void *out) {
    kern_conv_info in;
    TRY_STATUS(kern_conv_shapes(d, &in));
    int cg = d->geom.c / d->geom.groups, rs = d->geom.kernel_h * d->geom.kernel_w;
    int fp16 = d->mode == KERN_CONV_FP16_NHWC8, bf16 = d->mode == KERN_CONV_BF16_NHWC8;
    int nchw = d->mode == KERN_CONV_FP32_NCHW;
    for (int k = 0; k < in.weight_k; k++)
        for (int r = 0; r < d->geom.kernel_h; r++)
            for (int s = 0; s < d->geom.kernel_w; s++)
                for (int c = 0; c < in.weight_c; c++) {
                    float v = k < d->geom.k && c < cg
                                  ? weights_oihw[((size_t)k * cg + c) * rs + (size_t)r * d->geom.kernel_w + s]
                                  : 0.0f;
                    size_t o = nchw ? (((size_t)k * in.weight_c + c) * d->geom.kernel_h + r) * d->geom.kernel_w + s
                                    : (((size_t)k * d->geom.kernel_h + r) * d->geom.kernel_w + s) * in.weight_c + c;
                    if (fp16)
                        ((uint16_t *)out)[o] = float_to_half(v);
                    else if (bf16)
                        ((uint16_t *)out)[o] = float_to_bfloat16(v);
                    else
                        ((float *)out)[o] = v;
                }
    return TCI_OK;
}

tci_status kern_conv_pack_bias(const kern_conv_desc *d, const float *bias, void *out) {
    kern_conv_info in;
    TRY_STATUS(kern_conv_shapes(d, &in));
    int fp16 = d->mode == KERN_CONV_FP16_NHWC8, bf16 = d->mode == KERN_CONV_BF16_NHWC8;
    for (int k = 0; k < in.output_channels; k++) {
        float v = k < d->geom.k ? bias[k] : 0.0f;
        if (fp16)
            ((uint16_t *)out)[k] = float_to_half(v);
        else if (bf16)
            ((uint16_t *)out)[k] = float_to_bfloat16(v);
        else
            ((float *)out)[k] = v;
    }
    return TCI_OK;
}

void kern_conv_destroy(kern_conv_plan *p) {
    if (!p) return;
    if (p->x_desc) cudnnDestroyTensorDescriptor(p->x_desc);
    if (p->y_desc) cudnnDestroyTensorDescriptor(p->y_desc);
    if (p->bias_desc) cudnnDestroyTensorDescriptor(p->bias_desc);
    if (p->w_desc) cudnnDestroyFilterDescriptor(p->w_desc);
    if (p->conv_desc) cudnnDestroyConvolutionDescriptor(p->conv_desc);
    if (p->act_desc) cudnnDestroyActivationDescriptor(p->act_desc);
    if (p->zero_bias) cudaFree(p->zero_bias);
    free(p);
}
