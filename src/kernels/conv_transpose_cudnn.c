/* ConvTranspose plans over cuDNN's legacy API: the layer is the backward-data pass of the matching
 * convolution (dy = X, dx = Y), then the bias as a second pass; algorithm timed or heuristic. */
#include "kernels/conv_transpose_cudnn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv_cudnn.h"
#include "kernels/cuda_check.h"
#include "util/half.h"
#include "util/status.h"

struct kern_convt_plan {
    kern_convt_desc desc;
    kern_convt_info info;
    cudnnTensorDescriptor_t x_desc, y_desc, bias_desc; /* x (dy) and y (dx) for desc.geom.n */
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnConvolutionBwdDataAlgo_t algo;
    char algorithm_name[64];
};

static const char *algo_name(cudnnConvolutionBwdDataAlgo_t algo) {
    switch (algo) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "BWD_DATA_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "BWD_DATA_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "BWD_DATA_FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "BWD_DATA_FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "BWD_DATA_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "BWD_DATA_WINOGRAD_NONFUSED";
    default: return "unknown";
    }
}

static tci_status validate(const kern_convt_desc *d) {
    return kern_cudnn_check_geom(&d->geom, "conv-transpose plan", 1);
}

/* The output extent along one axis must be what cuDNN's backward data can produce: the natural
 * size plus 0 .. stride - 1 trailing rows (see the header). */
static tci_status check_extent(const char *axis, int in, int kernel, int pad, int stride,
                               int dilation, int out) {
    int64_t natural = (int64_t)stride * (in - 1) + (int64_t)dilation * (kernel - 1) + 1 - 2 * pad;
    if (natural < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose plan: %s: input %d, kernel %d, stride %d, dilation %d "
                         "and pads %d + %d leave no output",
                         axis, in, kernel, stride, dilation, pad, pad);
    int64_t extra = out - natural;
    if (extra < 0 || extra >= stride)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "conv-transpose plan: %s: output size %d is not %lld plus an output "
                         "padding below the stride %d (cuDNN cannot produce it)",
                         axis, out, (long long)natural, stride);
    return TCI_OK;
}

/* Fills the shape part of info: stored channel counts, the filter cuDNN sees, output size. */
static tci_status plan_shapes(const kern_convt_desc *d, kern_convt_info *info) {
    TRY_STATUS(check_extent("height", d->geom.h, d->geom.kernel_h, d->geom.pad_top, d->geom.stride_h, d->geom.dilation_h,
                         d->geom.out_h));
    TRY_STATUS(check_extent("width", d->geom.w, d->geom.kernel_w, d->geom.pad_left, d->geom.stride_w, d->geom.dilation_w,
                         d->geom.out_w));
    info->out_h = d->geom.out_h;
    info->out_w = d->geom.out_w;
    TRY_STATUS(kern_cudnn_nhwc8_channels(&d->geom, "conv-transpose plan", &info->input_channels,
                                      &info->output_channels, &info->cudnn_groups));
    /* the filter of the forward convolution from Y-shaped to X-shaped tensors */
    info->weight_k = info->input_channels;
    info->weight_c = info->output_channels / info->cudnn_groups;
    info->weight_elements =
        (size_t)info->weight_k * (size_t)d->geom.kernel_h * (size_t)d->geom.kernel_w * (size_t)info->weight_c;
    info->bias_elements = (size_t)info->output_channels;
    return TCI_OK;
}

static cudnnDataType_t data_type(const kern_convt_desc *d) {
    return d->fp32 ? CUDNN_DATA_FLOAT : d->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

static tci_status set_tensor(const kern_convt_desc *d, cudnnTensorDescriptor_t t, int n, int c,
                             int h, int w) {
    KERN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NHWC, data_type(d), n, c, h, w));
    return TCI_OK;
}

static tci_status build_descriptors(kern_convt_plan *p) {
    const kern_convt_desc *d = &p->desc;
    const kern_convt_info *in = &p->info;
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x_desc));
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y_desc));
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias_desc));
    KERN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w_desc));
    KERN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv_desc));
    TRY_STATUS(set_tensor(d, p->x_desc, d->geom.n, in->input_channels, d->geom.h, d->geom.w));
    TRY_STATUS(set_tensor(d, p->y_desc, d->geom.n, in->output_channels, in->out_h, in->out_w));
    TRY_STATUS(set_tensor(d, p->bias_desc, 1, in->output_channels, 1, 1));
    /* filter dims are the forward convolution's (K = dy channels, C = dx channels per group);
     * NHWC format stores them K x R x S x C */
    KERN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w_desc, data_type(d), CUDNN_TENSOR_NHWC,
                                                in->weight_k, in->weight_c, d->geom.kernel_h, d->geom.kernel_w));
    KERN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        p->conv_desc, d->geom.pad_top, d->geom.pad_left, d->geom.stride_h, d->geom.stride_w, d->geom.dilation_h,
        d->geom.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KERN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv_desc, in->cudnn_groups));
    KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(
        p->conv_desc, d->fp32 && !d->allow_tf32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    /* the forward convolution of y must give x's shape, or cuDNN refuses the backward call */
    int on, oc, oh, ow;
    KERN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv_desc, p->y_desc, p->w_desc, &on,
                                                           &oc, &oh, &ow));
    if (on != d->geom.n || oc != in->input_channels || oh != d->geom.h || ow != d->geom.w)
        return status_error(TCI_ERR_INTERNAL,
                         "conv-transpose plan: cuDNN maps the output back to %dx%dx%dx%d, not the "
                         "input %dx%dx%dx%d",
                         on, oc, oh, ow, (int)d->geom.n, in->input_channels, (int)d->geom.h, (int)d->geom.w);
    return TCI_OK;
}

/* One run, returning cuDNN's status so that algorithm trials can tell "not supported here" from
 * real failures. Scale factors are float: cuDNN's rule for half data. */
static cudnnStatus_t execute(const kern_convt_plan *p, cudnnHandle_t h,
                             cudnnConvolutionBwdDataAlgo_t algo, cudnnTensorDescriptor_t x_desc,
                             cudnnTensorDescriptor_t y_desc, const void *x, const void *w,
                             const void *bias, void *y, void *ws, size_t ws_bytes) {
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st = cudnnConvolutionBackwardData(h, &one, p->w_desc, w, x_desc, x, p->conv_desc,
                                                    algo, ws, ws_bytes, &zero, y_desc, y);
    if (st == CUDNN_STATUS_SUCCESS && p->desc.has_bias)
        st = cudnnAddTensor(h, &one, p->bias_desc, bias, &one, y_desc, y);
    return st;
}

/* cuDNN saying "not this algorithm / combination" rather than failing */
static int is_refusal(cudnnStatus_t st) {
    int cat = CUDNN_STATUS_CATEGORY(st);
    return cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED;
}

typedef struct {
    cudnnConvolutionBwdDataAlgo_t algo;
    cudnnMathType_t math;
    size_t memory;
    float time_ms;
} candidate;

enum { MAX_PERF = 4 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT };

/* The algorithms cuDNN offers, fastest (timed) or most promising (heuristics) first, kept only
 * where they succeed and their workspace fits the limit. */
static tci_status list_candidates(kern_convt_plan *p, cudnnHandle_t h,
                                  const kern_convt_scratch *sc, candidate *out, int *out_count) {
    int max_count = 0;
    *out_count = 0;
    KERN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    if (max_count < 1) max_count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    if (max_count > MAX_PERF) max_count = MAX_PERF;
    cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_PERF];
    int returned = 0;
    if (sc) {
        KERN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            h, p->w_desc, sc->w, p->x_desc, sc->x, p->conv_desc, p->y_desc, sc->y, max_count,
            &returned, perf, sc->workspace, sc->workspace_bytes));
    } else {
        KERN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            h, p->w_desc, p->x_desc, p->conv_desc, p->y_desc, max_count, &returned, perf));
    }
    if (returned > max_count) returned = max_count;
    for (int i = 0; i < returned; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        /* fp32: DEFAULT math would allow TF32 on Ampere and later; the baseline stays FMA */
        cudnnMathType_t math = p->desc.fp32 && !p->desc.allow_tf32 ? CUDNN_FMA_MATH : perf[i].mathType;
        /* the workspace size is asked for with the math type the candidate runs with */
        if (cudnnSetConvolutionMathType(p->conv_desc, math) != CUDNN_STATUS_SUCCESS) continue;
        size_t need = 0;
        /* the heuristics' memory field is not a promise; ask for the exact size */
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w_desc, p->x_desc, p->conv_desc,
                                                         p->y_desc, perf[i].algo,
                                                         &need) != CUDNN_STATUS_SUCCESS)
            continue;
        if (perf[i].memory > need) need = perf[i].memory;
        if (need > p->desc.workspace_limit) continue;
        if (sc && need > sc->workspace_bytes) continue;
        int dup = 0;
        for (int j = 0; j < *out_count; j++)
            dup |= out[j].algo == perf[i].algo && out[j].math == math;
        if (dup) continue;
        out[*out_count] = (candidate){perf[i].algo, math, need, perf[i].time};
        (*out_count)++;
    }
    return TCI_OK;
}

static tci_status use_candidate(kern_convt_plan *p, const candidate *c, float time_ms) {
    KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, c->math));
    p->algo = c->algo;
    p->info.workspace_bytes = c->memory;
    p->info.time_ms = time_ms;
    snprintf(p->algorithm_name, sizeof p->algorithm_name, "%s%s", algo_name(c->algo),
             c->math == CUDNN_TENSOR_OP_MATH || c->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                 ? " tensor-op"
                 : "");
    p->info.algorithm = p->algorithm_name;
    return TCI_OK;
}

static tci_status choose_algorithm(kern_convt_plan *p, cudnnHandle_t h, cudaStream_t stream,
                                   const kern_convt_scratch *sc) {
    const kern_convt_desc *d = &p->desc;
    candidate cands[MAX_PERF];
    int count = 0;
    TRY_STATUS(list_candidates(p, h, sc, cands, &count));
    if (count == 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "conv-transpose plan: cuDNN has no backward-data algorithm for "
                         "%dx%dx%dx%d -> %dx%dx%dx%d (filter %dx%dx%dx%d, groups %d) within a "
                         "workspace of %zu bytes",
                         (int)d->geom.n, p->info.input_channels, (int)d->geom.h, (int)d->geom.w, (int)d->geom.n, p->info.output_channels,
                         (int)d->geom.out_h, (int)d->geom.out_w, p->info.weight_k, (int)d->geom.kernel_h, (int)d->geom.kernel_w, p->info.weight_c,
                         p->info.cudnn_groups, d->workspace_limit);
    if (!sc) return use_candidate(p, &cands[0], -1.0f);
    /* Find's order is by its own timing of the backward-data call; the first one that also
     * accepts the real call (with the bias pass) wins */
    for (int i = 0; i < count; i++) {
        KERN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, cands[i].math));
        cudnnStatus_t st = execute(p, h, cands[i].algo, p->x_desc, p->y_desc, sc->x, sc->w,
                                   sc->bias, sc->y, sc->workspace, sc->workspace_bytes);
        if (st != CUDNN_STATUS_SUCCESS && !is_refusal(st))
            return status_error(TCI_ERR_CUDA, "conv-transpose plan: trial of %s failed: %s",
                             algo_name(cands[i].algo), cudnnGetErrorString(st));
        KERN_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (st == CUDNN_STATUS_SUCCESS) return use_candidate(p, &cands[i], cands[i].time_ms);
    }
    return status_error(TCI_ERR_UNSUPPORTED,
                     "conv-transpose plan: cuDNN refuses every algorithm it listed");
}

static tci_status check_scratch(const kern_convt_plan *p, const kern_convt_scratch *sc) {
    if (!sc) return TCI_OK;
    if (!sc->x || !sc->w || !sc->y || (p->desc.has_bias && !sc->bias) ||
        (sc->workspace_bytes && !sc->workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose plan: scratch buffers missing (x, w, y, and bias / "
                         "workspace where the plan has them)");
    return TCI_OK;
}

static tci_status create_steps(kern_convt_plan *p, cudnnHandle_t handle, cudaStream_t stream,
                               const kern_convt_scratch *scratch) {
    TRY_STATUS(validate(&p->desc));
    TRY_STATUS(plan_shapes(&p->desc, &p->info));
    TRY_STATUS(check_scratch(p, scratch));
    TRY_STATUS(build_descriptors(p));
    KERN_CUDNN_CHECK(cudnnSetStream(handle, stream));
    return choose_algorithm(p, handle, stream, scratch);
}

tci_status kern_convt_create(cudnnHandle_t handle, cudaStream_t stream, const kern_convt_desc *desc,
                             const kern_convt_scratch *scratch, kern_convt_plan **out_plan) {
    if (!out_plan)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv-transpose plan: out_plan is NULL");
    *out_plan = NULL;
    if (!handle || !desc)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose plan: handle and desc are required");
    kern_convt_plan *p = calloc(1, sizeof *p);
    if (!p) return status_error(TCI_ERR_OUT_OF_MEMORY, "conv-transpose plan: out of host memory");
    p->desc = *desc;
    p->info.time_ms = -1.0f;
    tci_status st = create_steps(p, handle, stream, scratch);
    if (st != TCI_OK) {
        kern_convt_destroy(p);
        return st;
    }
    *out_plan = p;
    return TCI_OK;
}

static tci_status run_error(cudnnStatus_t st, const char *what) {
    return status_error(TCI_ERR_CUDA, "conv-transpose run: %s failed: %s", what,
                     cudnnGetErrorString(st));
}

/* The workspace the plan's algorithm needs at batch n, with xd / yd set for n when n is not
 * desc.n (cuDNN may ask more at a smaller batch than at desc.n). */
static tci_status need_at(const kern_convt_plan *p, cudnnHandle_t handle, cudnnTensorDescriptor_t xd,
                          cudnnTensorDescriptor_t yd, int n, size_t *need) {
    *need = p->info.workspace_bytes;
    if (n == p->desc.geom.n) return TCI_OK;
    TRY_STATUS(set_tensor(&p->desc, xd, n, p->info.input_channels, p->desc.geom.h, p->desc.geom.w));
    TRY_STATUS(set_tensor(&p->desc, yd, n, p->info.output_channels, p->info.out_h, p->info.out_w));
    KERN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p->w_desc, xd,
                                                                  p->conv_desc, yd, p->algo, need));
    return TCI_OK;
}

/* Executes with x / y descriptors for batch n. Split from kern_convt_run so that temporary
 * descriptors are destroyed on every exit. */
static tci_status run_with(const kern_convt_plan *p, cudnnHandle_t handle,
                           cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd, int n,
                           const void *x, const void *w, const void *bias, void *y,
                           void *workspace, size_t workspace_bytes) {
    size_t need;
    TRY_STATUS(need_at(p, handle, xd, yd, n, &need));
    if (need > workspace_bytes || (need && !workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose run: %s needs %zu workspace bytes at batch %d, got %zu",
                         p->algorithm_name, need, n, workspace ? workspace_bytes : 0);
    cudnnStatus_t st = execute(p, handle, p->algo, xd, yd, x, w, bias, y, workspace,
                               workspace_bytes);
    if (st != CUDNN_STATUS_SUCCESS) return run_error(st, p->algorithm_name);
    KERN_LAUNCH_CHECK("conv-transpose run");
    return TCI_OK;
}

tci_status kern_convt_run(const kern_convt_plan *p, cudnnHandle_t handle, cudaStream_t stream,
                          int n, const void *x, const void *w, const void *bias, void *y,
                          void *workspace, size_t workspace_bytes) {
    if (!p || !handle || !x || !w || !y)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose run: plan, handle, x, w and y are required");
    if (n < 1 || n > p->desc.geom.n)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv-transpose run: batch %d outside 1..%d",
                         n, (int)p->desc.geom.n);
    if ((bias != NULL) != (p->desc.has_bias != 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose run: bias %s, but the plan has %s",
                         bias ? "given" : "absent", p->desc.has_bias ? "one" : "none");
    if (y == x)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "conv-transpose run: y must not alias x");
    KERN_CUDNN_CHECK(cudnnSetStream(handle, stream));
    if (n == p->desc.geom.n)
        return run_with(p, handle, p->x_desc, p->y_desc, n, x, w, bias, y, workspace,
                        workspace_bytes);
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    tci_status st = TCI_OK;
    cudnnStatus_t cs = cudnnCreateTensorDescriptor(&xd);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&yd);
    if (cs != CUDNN_STATUS_SUCCESS)
        st = run_error(cs, "cudnnCreateTensorDescriptor");
    else
        st = run_with(p, handle, xd, yd, n, x, w, bias, y, workspace, workspace_bytes);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    return st;
}

tci_status kern_convt_workspace_at(const kern_convt_plan *p, cudnnHandle_t handle, int n,
                                   size_t *out_bytes) {
    if (!p || !handle || !out_bytes)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose workspace: plan, handle and out_bytes are required");
    if (n < 1 || n > p->desc.geom.n)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "conv-transpose workspace: batch %d outside 1..%d", n, (int)p->desc.geom.n);
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

void kern_convt_get_info(const kern_convt_plan *p, kern_convt_info *out_info) {
    *out_info = p->info;
}

tci_status kern_convt_shapes(const kern_convt_desc *desc, kern_convt_info *out_info) {
    memset(out_info, 0, sizeof *out_info);
    out_info->time_ms = -1.0f;
    if (!desc) return status_error(TCI_ERR_INVALID_ARGUMENT, "conv-transpose plan: desc is NULL");
    TRY_STATUS(validate(desc));
    return plan_shapes(desc, out_info);
}

tci_status kern_convt_pack_weights(const kern_convt_desc *d, const float *weights_onnx,
                                   void *out) {
    kern_convt_info in;
    TRY_STATUS(kern_convt_shapes(d, &in));
    /* ONNX W[ci][co_local][r][s] -> cuDNN filter[ci][r][s][co_local] */
    int kg = d->geom.k / d->geom.groups, rs = d->geom.kernel_h * d->geom.kernel_w;
    uint16_t *o16 = out;
    for (int ci = 0; ci < in.weight_k; ci++)
        for (int r = 0; r < d->geom.kernel_h; r++)
            for (int s = 0; s < d->geom.kernel_w; s++)
                for (int co = 0; co < in.weight_c; co++) {
                    float v = ci < d->geom.c && co < kg
                                  ? weights_onnx[((size_t)ci * kg + co) * rs + (size_t)r * d->geom.kernel_w + s]
                                  : 0.0f;
                    size_t at = (((size_t)ci * d->geom.kernel_h + r) * d->geom.kernel_w + s) * in.weight_c + co;
                    if (d->fp32) ((float *)out)[at] = v;
                    else o16[at] = d->bf16 ? float_to_bfloat16(v) : float_to_half(v);
                }
    return TCI_OK;
}

tci_status kern_convt_pack_bias(const kern_convt_desc *d, const float *bias, void *out) {
    kern_convt_info in;
    TRY_STATUS(kern_convt_shapes(d, &in));
    uint16_t *o16 = out;
    for (int k = 0; k < in.output_channels; k++) {
        float v = k < d->geom.k ? bias[k] : 0.0f;
        if (d->fp32) ((float *)out)[k] = v;
        else o16[k] = d->bf16 ? float_to_bfloat16(v) : float_to_half(v);
    }
    return TCI_OK;
}

void kern_convt_destroy(kern_convt_plan *p) {
    if (!p) return;
    if (p->x_desc) cudnnDestroyTensorDescriptor(p->x_desc);
    if (p->y_desc) cudnnDestroyTensorDescriptor(p->y_desc);
    if (p->bias_desc) cudnnDestroyTensorDescriptor(p->bias_desc);
    if (p->w_desc) cudnnDestroyFilterDescriptor(p->w_desc);
    if (p->conv_desc) cudnnDestroyConvolutionDescriptor(p->conv_desc);
    free(p);
}
