/* cuDNN convolution and cuBLASLt GEMM plans against plain C fp32 references: layouts, padding,
 * groups, epilogues, smaller batches at run time, CUDA graph capture and the error paths. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/conv_cudnn.h"
#include "kernels/gemm_cublas.h"
#include "layers/op.h"

#define WORKSPACE_BYTES ((size_t)64 << 20)

/* Shared by the tests of one process (CK_FORK=no); made in the fixture. */
static cudnnHandle_t g_cudnn;
static cublasLtHandle_t g_lt;
static cudaStream_t g_stream;
static void *g_workspace;

static void setup(void) {
    ck_assert_int_eq(cudnnCreate(&g_cudnn), CUDNN_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtCreate(&g_lt), CUBLAS_STATUS_SUCCESS);
    /* a blocking stream: ordered after the harness's uploads and memsets on the legacy stream */
    ck_assert_int_eq(cudaStreamCreate(&g_stream), cudaSuccess);
    g_workspace = gpu_upload(NULL, WORKSPACE_BYTES);
}

static void teardown(void) {
    gpu_free(g_workspace);
    cudaStreamDestroy(g_stream);
    cublasLtDestroy(g_lt);
    cudnnDestroy(g_cudnn);
}

static float *random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpu_fill_random(v, n, seed, lo, hi);
    return v;
}

/* What the GPU sees after the upload: fp16-rounded values in fp16 mode. */
static void round_to_half(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = half_to_float(float_to_half(v[i]));
}

static int near(float got, double want, double rel) {
    return fabs((double)got - want) <= rel * fmax(1.0, fabs(want));
}

/* ---------------------------------------------------------------- convolution ---- */

typedef struct {
    int n, c, h, w, k, r, s, pad, stride, dil, groups;
    kern_conv_activation act;
    int bias, residual;
    kern_conv_mode mode;
    int untimed;  /* heuristics instead of timing */
    int run_n;    /* batch at run time (0: n) */
    int inplace;  /* z == y */
    int graph;    /* run inside a captured CUDA graph */
    int unfused;  /* desc.no_fusion */
    int one_d;    /* h 1, r 1: pad, stride and dilation along W only (a 1-D convolution) */
} conv_case;

static int pad_h(const conv_case *cc) { return cc->one_d ? 0 : cc->pad; }
static int stride_h(const conv_case *cc) { return cc->one_d || !cc->stride ? 1 : cc->stride; }
static int dil_h(const conv_case *cc) { return cc->one_d || !cc->dil ? 1 : cc->dil; }

static kern_conv_desc conv_desc_of(const conv_case *cc) {
    kern_conv_desc d;
    memset(&d, 0, sizeof d);
    d.geom.n = cc->n, d.geom.c = cc->c, d.geom.h = cc->h, d.geom.w = cc->w, d.geom.k = cc->k, d.geom.kernel_h = cc->r, d.geom.kernel_w = cc->s;
    d.geom.pad_top = d.geom.pad_bottom = pad_h(cc);
    d.geom.pad_left = d.geom.pad_right = cc->pad;
    d.geom.stride_h = stride_h(cc);
    d.geom.stride_w = cc->stride ? cc->stride : 1;
    d.geom.dilation_h = dil_h(cc);
    d.geom.dilation_w = cc->dil ? cc->dil : 1;
    d.geom.groups = cc->groups ? cc->groups : 1;
    d.activation = cc->act;
    d.has_bias = cc->bias;
    d.has_residual = cc->residual;
    d.mode = cc->mode;
    d.no_fusion = cc->unfused;
    d.workspace_limit = WORKSPACE_BYTES;
    return d;
}

/* Logical NCHW fp32 -> the plan's stored layout (channels cs, zero-padded). */
static void *pack_activation(const float *nchw, int n, int c, int h, int w, int cs,
                             kern_conv_mode mode, size_t *out_bytes) {
    size_t count = (size_t)n * cs * h * w;
    size_t es = mode == KERN_CONV_FP16_NHWC8 ? 2 : 4;
    void *out = calloc(count, es);
    ck_assert_ptr_nonnull(out);
    for (int ni = 0; ni < n; ni++)
        for (int ci = 0; ci < c; ci++)
            for (int hi = 0; hi < h; hi++)
                for (int wi = 0; wi < w; wi++) {
                    float v = nchw[(((size_t)ni * c + ci) * h + hi) * w + wi];
                    size_t o = mode == KERN_CONV_FP32_NCHW
                                   ? (((size_t)ni * cs + ci) * h + hi) * w + wi
                                   : (((size_t)ni * h + hi) * w + wi) * cs + ci;
                    if (es == 2)
                        ((uint16_t *)out)[o] = float_to_half(v);
                    else
                        ((float *)out)[o] = v;
                }
    *out_bytes = count * es;
    return out;
}

static float stored_value(const void *buf, size_t i, kern_conv_mode mode) {
    return mode == KERN_CONV_FP16_NHWC8 ? half_to_float(((const uint16_t *)buf)[i])
                                        : ((const float *)buf)[i];
}

static void reference_conv(const conv_case *cc, int p, int q, const float *x, const float *w,
                           const float *bias, const float *z, float *y, int n) {
    int g = cc->groups ? cc->groups : 1, cg = cc->c / g, kg = cc->k / g;
    int st = cc->stride ? cc->stride : 1, dl = cc->dil ? cc->dil : 1;
    for (int ni = 0; ni < n; ni++)
        for (int k = 0; k < cc->k; k++)
            for (int pi = 0; pi < p; pi++)
                for (int qi = 0; qi < q; qi++) {
                    double acc = cc->bias ? bias[k] : 0.0;
                    int grp = k / kg;
                    for (int c = 0; c < cg; c++)
                        for (int r = 0; r < cc->r; r++)
                            for (int s = 0; s < cc->s; s++) {
                                int hi = pi * stride_h(cc) - pad_h(cc) + r * dil_h(cc);
                                int wi = qi * st - cc->pad + s * dl;
                                if (hi < 0 || hi >= cc->h || wi < 0 || wi >= cc->w) continue;
                                size_t xo = (((size_t)ni * cc->c + grp * cg + c) * cc->h + hi);
                                acc += (double)x[xo * cc->w + wi] *
                                       w[(((size_t)k * cg + c) * cc->r + r) * cc->s + s];
                            }
                    size_t o = (((size_t)ni * cc->k + k) * p + pi) * q + qi;
                    if (cc->residual) acc += z[o];
                    if (cc->act == KERN_CONV_ACT_RELU && acc < 0) acc = 0;
                    y[o] = (float)acc;
                }
}

static void run_conv_graph(const kern_conv_plan *lib_plan, int n, const void *x, const void *w,
                           const void *bias, const void *z, void *y, size_t ws) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ck_assert_int_eq(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal),
                     cudaSuccess);
    tci_status st = kern_conv_run(lib_plan, g_cudnn, g_stream, n, x, w, bias, z, y, g_workspace, ws);
    ck_assert_int_eq(cudaStreamEndCapture(g_stream, &graph), cudaSuccess);
    ck_assert_msg(st == TCI_OK, "captured conv run: %s", tci_last_error());
    ck_assert_int_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(exec, g_stream), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
}

static void check_conv(const char *name, const conv_case *cc) {
    kern_conv_desc desc = conv_desc_of(cc);
    kern_conv_info shape;
    ck_assert_tci_ok(kern_conv_shapes(&desc, &shape));
    int fp16 = cc->mode == KERN_CONV_FP16_NHWC8;
    int g = desc.geom.groups, p = shape.out_h, q = shape.out_w;
    size_t nx = (size_t)cc->n * cc->c * cc->h * cc->w;
    size_t nw = (size_t)cc->k * (cc->c / g) * cc->r * cc->s;
    size_t ny = (size_t)cc->n * cc->k * p * q;
    float *x = random_floats(nx, 11 + (uint64_t)cc->c, -1.0f, 1.0f);
    float *w = random_floats(nw, 23 + (uint64_t)cc->k, -0.5f, 0.5f);
    float *bias = random_floats((size_t)cc->k, 37, -1.0f, 1.0f);
    float *z = random_floats(ny, 41, -1.0f, 1.0f);
    if (fp16) {
        round_to_half(x, nx);
        round_to_half(w, nw);
        round_to_half(bias, (size_t)cc->k);
        round_to_half(z, ny);
    }
    size_t es = fp16 ? 2 : 4, x_bytes, z_bytes;
    void *hx = pack_activation(x, cc->n, cc->c, cc->h, cc->w, shape.input_channels, cc->mode,
                               &x_bytes);
    void *hz = pack_activation(z, cc->n, cc->k, p, q, shape.output_channels, cc->mode, &z_bytes);
    void *hw = malloc(shape.weight_elements * es), *hb = malloc(shape.bias_elements * es);
    ck_assert_tci_ok(kern_conv_pack_weights(&desc, w, hw));
    ck_assert_tci_ok(kern_conv_pack_bias(&desc, bias, hb));
    void *dx = gpu_upload(hx, x_bytes), *dw = gpu_upload(hw, shape.weight_elements * es);
    void *db = gpu_upload(hb, shape.bias_elements * es), *dz = gpu_upload(hz, z_bytes);
    void *dy = gpu_upload(NULL, z_bytes);

    gpu_sync();
    kern_conv_scratch scratch = {dx, dw, cc->bias ? db : NULL, cc->residual ? dz : NULL, dy,
                                 g_workspace, WORKSPACE_BYTES};
    kern_conv_plan *lib_plan = NULL;
    ck_assert_msg(kern_conv_create(g_cudnn, g_stream, &desc, cc->untimed ? NULL : &scratch,
                                   &lib_plan) == TCI_OK,
                  "%s: create: %s", name, tci_last_error());
    kern_conv_info info;
    kern_conv_get_info(lib_plan, &info);
    printf("  conv %-28s %-40s %8.4f ms  ws %zu\n", name, info.algorithm, (double)info.time_ms,
           info.workspace_bytes);
    ck_assert(info.workspace_bytes <= WORKSPACE_BYTES);
    ck_assert(cc->untimed ? info.time_ms < 0 : info.time_ms >= 0);
    if (cc->unfused && (cc->bias || cc->residual || cc->act != KERN_CONV_ACT_NONE))
        ck_assert(!info.fused);

    int n = cc->run_n ? cc->run_n : cc->n;
    /* poison y again: timing wrote it; in place, y starts as z */
    if (cc->inplace)
        ck_assert_int_eq(cudaMemcpy(dy, hz, z_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    else
        ck_assert_int_eq(cudaMemset(dy, 0xff, z_bytes), cudaSuccess);
    gpu_sync();
    const void *zarg = cc->residual ? (cc->inplace ? dy : dz) : NULL;
    size_t ws = 0; /* exactly what the plan says it needs at n */
    ck_assert_tci_ok(kern_conv_workspace_at(lib_plan, g_cudnn, n, &ws));
    ck_assert(ws <= WORKSPACE_BYTES);
    if (cc->graph)
        run_conv_graph(lib_plan, n, dx, dw, cc->bias ? db : NULL, zarg, dy, ws);
    else
        ck_assert_msg(kern_conv_run(lib_plan, g_cudnn, g_stream, n, dx, dw, cc->bias ? db : NULL, zarg,
                                    dy, g_workspace, ws) == TCI_OK,
                      "%s: run: %s", name, tci_last_error());
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    void *hy = malloc(z_bytes);
    gpu_download(hy, dy, z_bytes);

    float *want = malloc(ny * sizeof *want);
    reference_conv(cc, p, q, x, w, bias, z, want, n);
    double rel = fp16 ? 1e-2 : 1e-4;
    int cs = shape.output_channels;
    for (int ni = 0; ni < n; ni++)
        for (int pi = 0; pi < p; pi++)
            for (int qi = 0; qi < q; qi++)
                for (int k = 0; k < cs; k++) {
                    size_t o = cc->mode == KERN_CONV_FP32_NCHW
                                   ? (((size_t)ni * cs + k) * p + pi) * q + qi
                                   : (((size_t)ni * p + pi) * q + qi) * cs + k;
                    float got = stored_value(hy, o, cc->mode);
                    if (k >= cc->k) {
                        ck_assert_msg(got == 0.0f, "%s: padded channel %d at (%d,%d,%d) is %g",
                                      name, k, ni, pi, qi, (double)got);
                        continue;
                    }
                    double ref = want[(((size_t)ni * cc->k + k) * p + pi) * q + qi];
                    ck_assert_msg(near(got, ref, rel), "%s: y(%d,%d,%d,%d) = %g, want %g", name, ni,
                                  k, pi, qi, (double)got, ref);
                }
    if (n < cc->n) {
        /* batches past n stay untouched (still the poison) */
        size_t per = z_bytes / (size_t)cc->n;
        const unsigned char *rest = (const unsigned char *)hy + per * (size_t)n;
        ck_assert_msg(rest[0] == 0xff && rest[per * (size_t)(cc->n - n) - 1] == 0xff,
                      "%s: run at batch %d wrote past it", name, n);
    }
    kern_conv_destroy(lib_plan);
    gpu_free(dx), gpu_free(dw), gpu_free(db), gpu_free(dz), gpu_free(dy);
    free(x), free(w), free(bias), free(z), free(hx), free(hz), free(hw), free(hb), free(hy),
        free(want);
}

#define H KERN_CONV_FP16_NHWC8
#define RELU KERN_CONV_ACT_RELU
#define NONE KERN_CONV_ACT_NONE

START_TEST(conv_3x3_pad1_bias_relu) {
    conv_case cc = {.n = 2, .c = 16, .h = 13, .w = 13, .k = 24, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .mode = H};
    check_conv("3x3 pad 1 bias relu", &cc);
}
END_TEST

START_TEST(conv_1x1_odd_channels_bias) {
    conv_case cc = {.n = 3, .c = 20, .h = 7, .w = 9, .k = 12, .r = 1, .s = 1, .act = NONE,
                    .bias = 1, .mode = H};
    check_conv("1x1 C20 K12 bias", &cc);
}
END_TEST

START_TEST(conv_7x7_stride2_first_layer) {
    conv_case cc = {.n = 2, .c = 3, .h = 29, .w = 31, .k = 16, .r = 7, .s = 7, .pad = 3,
                    .stride = 2, .act = RELU, .bias = 1, .mode = H};
    check_conv("7x7 s2 p3 C3 (padded to 8)", &cc);
}
END_TEST

START_TEST(conv_strided_3x3_plain) {
    conv_case cc = {.n = 2, .c = 8, .h = 15, .w = 15, .k = 8, .r = 3, .s = 3, .pad = 1,
                    .stride = 2, .mode = H};
    check_conv("3x3 s2 plain", &cc);
}
END_TEST

START_TEST(conv_dilated) {
    conv_case cc = {.n = 1, .c = 12, .h = 17, .w = 19, .k = 10, .r = 3, .s = 3, .pad = 2,
                    .dil = 2, .bias = 1, .mode = H};
    check_conv("3x3 dilation 2 bias", &cc);
}
END_TEST

START_TEST(conv_depthwise) {
    conv_case cc = {.n = 2, .c = 13, .h = 11, .w = 11, .k = 13, .r = 3, .s = 3, .pad = 1,
                    .groups = 13, .act = RELU, .bias = 1, .mode = H};
    check_conv("depthwise C13 bias relu", &cc);
    conv_case cs = {.n = 2, .c = 32, .h = 14, .w = 14, .k = 32, .r = 3, .s = 3, .pad = 1,
                    .stride = 2, .groups = 32, .bias = 1, .mode = H};
    check_conv("depthwise C32 s2 bias", &cs);
    conv_case c5 = {.n = 1, .c = 20, .h = 9, .w = 9, .k = 20, .r = 5, .s = 5, .pad = 2,
                    .groups = 20, .mode = H};
    check_conv("depthwise 5x5 C20 plain", &c5);
}
END_TEST

START_TEST(conv_grouped) {
    conv_case cc = {.n = 2, .c = 16, .h = 10, .w = 10, .k = 32, .r = 3, .s = 3, .pad = 1,
                    .groups = 2, .act = RELU, .bias = 1, .mode = H};
    check_conv("groups 2 (8 in, 16 out each)", &cc);
}
END_TEST

START_TEST(conv_grouped_small_groups) {
    /* per-group counts of 4: cuDNN may or may not have an NHWC fp16 algorithm; either it is
     * refused cleanly or it is right */
    conv_case cc = {.n = 2, .c = 16, .h = 8, .w = 8, .k = 16, .r = 3, .s = 3, .pad = 1,
                    .groups = 4, .bias = 1, .mode = H};
    kern_conv_desc desc = conv_desc_of(&cc);
    kern_conv_plan *lib_plan = NULL;
    tci_status st = kern_conv_create(g_cudnn, g_stream, &desc, NULL, &lib_plan);
    kern_conv_destroy(lib_plan);
    if (st == TCI_ERR_UNSUPPORTED) {
        printf("  conv groups 4 x 4 channels: refused (%s)\n", tci_last_error());
        return;
    }
    ck_assert_tci_ok(st);
    check_conv("groups 4 (4 channels each)", &cc);
}
END_TEST

/* 1-D convolutions as the GPU engine runs them (H = 1, a 1 x S kernel): wav2vec2's first
 * feature layer (C 1, kernel 10, stride 5), its positional convolution (kernel 128, padding 64,
 * 16 groups of 8 channels) and a dilated, strided one with bias, residual and ReLU. */
START_TEST(conv_1d) {
    conv_case first = {.n = 2, .c = 1, .h = 1, .w = 400, .k = 32, .r = 1, .s = 10, .stride = 5,
                       .mode = H, .one_d = 1};
    check_conv("1-D k10 s5 C1", &first);
    conv_case pos = {.n = 2, .c = 128, .h = 1, .w = 50, .k = 128, .r = 1, .s = 128, .pad = 64,
                     .groups = 16, .bias = 1, .mode = H, .one_d = 1};
    check_conv("1-D k128 p64 16 groups", &pos);
    conv_case dil = {.n = 3, .c = 24, .h = 1, .w = 37, .k = 16, .r = 1, .s = 3, .pad = 2,
                     .stride = 2, .dil = 2, .act = RELU, .bias = 1, .residual = 1, .mode = H,
                     .one_d = 1};
    check_conv("1-D k3 s2 d2 bias residual relu", &dil);
}
END_TEST

START_TEST(conv_bias_relu_residual) {
    conv_case cc = {.n = 2, .c = 16, .h = 9, .w = 9, .k = 16, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = H};
    check_conv("3x3 bias relu residual", &cc);
    conv_case c1 = {.n = 2, .c = 24, .h = 7, .w = 7, .k = 20, .r = 1, .s = 1, .act = NONE,
                    .bias = 1, .residual = 1, .mode = H};
    check_conv("1x1 bias residual, no act", &c1);
}
END_TEST

START_TEST(conv_epilogue_without_bias) {
    conv_case cr = {.n = 2, .c = 8, .h = 6, .w = 6, .k = 12, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .mode = H};
    check_conv("relu without bias", &cr);
    conv_case cz = {.n = 2, .c = 8, .h = 6, .w = 6, .k = 12, .r = 3, .s = 3, .pad = 1,
                    .residual = 1, .mode = H};
    check_conv("residual without bias", &cz);
}
END_TEST

START_TEST(conv_inplace_residual) {
    conv_case cc = {.n = 2, .c = 16, .h = 9, .w = 9, .k = 16, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .inplace = 1, .mode = H};
    check_conv("residual in place (z == y)", &cc);
}
END_TEST

/* the fallback when cuDNN refuses every fused combination: conv, add bias, add z, ReLU */
START_TEST(conv_unfused_fallback) {
    conv_case ca = {.n = 2, .c = 16, .h = 9, .w = 9, .k = 20, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = H, .unfused = 1};
    check_conv("unfused bias relu residual", &ca);
    conv_case ci = {.n = 2, .c = 16, .h = 9, .w = 9, .k = 16, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .inplace = 1, .mode = H, .unfused = 1};
    check_conv("unfused, residual in place", &ci);
    conv_case cr = {.n = 3, .c = 8, .h = 7, .w = 7, .k = 12, .r = 1, .s = 1, .act = RELU,
                    .mode = H, .unfused = 1, .untimed = 1, .run_n = 2};
    check_conv("unfused relu only, untimed, n 2", &cr);
    conv_case cd = {.n = 2, .c = 13, .h = 8, .w = 8, .k = 13, .r = 3, .s = 3, .pad = 1,
                    .groups = 13, .bias = 1, .mode = H, .unfused = 1, .graph = 1};
    check_conv("unfused depthwise bias, graph", &cd);
    conv_case cf = {.n = 2, .c = 5, .h = 9, .w = 9, .k = 7, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = KERN_CONV_FP32_NCHW,
                    .unfused = 1};
    check_conv("unfused fp32 NCHW", &cf);
}
END_TEST

START_TEST(conv_fp32_modes) {
    conv_case cn = {.n = 2, .c = 5, .h = 11, .w = 10, .k = 7, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = KERN_CONV_FP32_NCHW};
    check_conv("fp32 NCHW bias relu residual", &cn);
    conv_case ch = {.n = 2, .c = 5, .h = 11, .w = 10, .k = 7, .r = 3, .s = 3, .pad = 1,
                    .stride = 2, .act = RELU, .bias = 1, .mode = KERN_CONV_FP32_NHWC};
    check_conv("fp32 NHWC s2 bias relu", &ch);
    conv_case cd = {.n = 2, .c = 6, .h = 9, .w = 9, .k = 6, .r = 3, .s = 3, .pad = 1,
                    .groups = 6, .bias = 1, .mode = KERN_CONV_FP32_NCHW};
    check_conv("fp32 NCHW depthwise bias", &cd);
}
END_TEST

/* fp32 in the NHWC8 layout: channel tails padded as in fp16 mode, FMA math, fp32 bias. The bound
 * is the other fp32 modes' (cuDNN may pick a Winograd-style algorithm). */
START_TEST(conv_fp32_nhwc8) {
    const kern_conv_mode F8 = KERN_CONV_FP32_NHWC8;
    conv_case c1 = {.n = 2, .c = 3, .h = 11, .w = 10, .k = 13, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = F8};
    check_conv("fp32 NHWC8 3->13 bias relu residual", &c1);
    conv_case c2 = {.n = 2, .c = 13, .h = 9, .w = 9, .k = 5, .r = 1, .s = 1, .stride = 2,
                    .bias = 1, .mode = F8, .untimed = 1};
    check_conv("fp32 NHWC8 1x1 s2 13->5 untimed", &c2);
    conv_case c3 = {.n = 2, .c = 13, .h = 8, .w = 8, .k = 13, .r = 3, .s = 3, .pad = 1,
                    .groups = 13, .bias = 1, .mode = F8, .graph = 1};
    check_conv("fp32 NHWC8 depthwise 13, graph", &c3);
    conv_case c4 = {.n = 2, .c = 16, .h = 7, .w = 7, .k = 24, .r = 3, .s = 3, .pad = 1,
                    .groups = 2, .act = RELU, .bias = 1, .mode = F8};
    check_conv("fp32 NHWC8 groups 2", &c4);
    conv_case c5 = {.n = 3, .c = 3, .h = 9, .w = 9, .k = 13, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .inplace = 1, .mode = F8};
    check_conv("fp32 NHWC8 residual in place", &c5);
    conv_case c6 = {.n = 2, .c = 3, .h = 9, .w = 9, .k = 13, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = F8, .unfused = 1};
    check_conv("fp32 NHWC8 unfused", &c6);

    /* the same shapes and weight layout as fp16 NHWC8, 4-byte values */
    kern_conv_desc d16 = conv_desc_of(&c1), d32 = conv_desc_of(&c1);
    d16.mode = KERN_CONV_FP16_NHWC8;
    kern_conv_info i16, i32;
    ck_assert_tci_ok(kern_conv_shapes(&d16, &i16));
    ck_assert_tci_ok(kern_conv_shapes(&d32, &i32));
    ck_assert_int_eq(i32.input_channels, 8);
    ck_assert_int_eq(i32.output_channels, 16);
    ck_assert_int_eq(i32.weight_k, i16.weight_k);
    ck_assert_int_eq(i32.weight_c, i16.weight_c);
    ck_assert_uint_eq(i32.weight_elements, i16.weight_elements);
    ck_assert_uint_eq(i32.bias_elements, 16);
    size_t nw = (size_t)c1.k * c1.c * c1.r * c1.s;
    float *w = random_floats(nw, 5, -1.0f, 1.0f), *bias = random_floats(13, 6, -1.0f, 1.0f);
    uint16_t *w16 = malloc(i16.weight_elements * 2);
    float *w32 = malloc(i32.weight_elements * 4), *b32 = malloc(i32.bias_elements * 4);
    ck_assert_tci_ok(kern_conv_pack_weights(&d16, w, w16));
    ck_assert_tci_ok(kern_conv_pack_weights(&d32, w, w32));
    ck_assert_tci_ok(kern_conv_pack_bias(&d32, bias, b32));
    for (size_t i = 0; i < i32.weight_elements; i++)
        ck_assert_msg(float_to_half(w32[i]) == w16[i], "weight %zu: fp32 %g, fp16 0x%04x", i,
                      (double)w32[i], w16[i]);
    for (int k = 0; k < 16; k++) ck_assert(b32[k] == (k < 13 ? bias[k] : 0.0f));
    free(w), free(bias), free(w16), free(w32), free(b32);
}
END_TEST

START_TEST(conv_heuristics_smaller_batch_graph) {
    conv_case ch = {.n = 4, .c = 16, .h = 12, .w = 12, .k = 16, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = H, .untimed = 1};
    check_conv("heuristics bias relu residual", &ch);
    conv_case cs = {.n = 5, .c = 16, .h = 12, .w = 12, .k = 24, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .mode = H, .run_n = 2};
    check_conv("created n 5, run n 2", &cs);
    conv_case cg = {.n = 3, .c = 16, .h = 12, .w = 12, .k = 16, .r = 3, .s = 3, .pad = 1,
                    .act = RELU, .bias = 1, .residual = 1, .mode = H, .run_n = 2, .graph = 1};
    check_conv("CUDA graph, run n 2", &cg);
    conv_case cn = {.n = 2, .c = 16, .h = 12, .w = 12, .k = 16, .r = 1, .s = 1, .act = NONE,
                    .bias = 1, .mode = H, .graph = 1};
    check_conv("CUDA graph, bias no act", &cn);
}
END_TEST

/* A plan made for batch 64 runs every batch 1..64 with the workspace kern_conv_workspace_at
 * gives for it, and refuses one byte less: cuDNN's algorithms may need more at a smaller batch
 * than at the planned one (ResNet-50's layers built for 64 asked 6.3 MB at 24 against 8 KB). */
START_TEST(conv_workspace_every_smaller_batch) {
    static const conv_case layers[] = {
        {.n = 64, .c = 64, .h = 56, .w = 56, .k = 64, .r = 3, .s = 3, .pad = 1, .act = RELU,
         .bias = 1, .mode = H},
        {.n = 64, .c = 256, .h = 14, .w = 14, .k = 256, .r = 3, .s = 3, .pad = 1, .act = RELU,
         .bias = 1, .mode = H},
        {.n = 64, .c = 1024, .h = 14, .w = 14, .k = 256, .r = 1, .s = 1, .act = RELU, .bias = 1,
         .mode = H},
        {.n = 64, .c = 512, .h = 7, .w = 7, .k = 2048, .r = 1, .s = 1, .act = NONE, .bias = 1,
         .residual = 1, .mode = H},
    };
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        const conv_case *cc = &layers[l];
        kern_conv_desc desc = conv_desc_of(cc);
        kern_conv_info shape;
        ck_assert_tci_ok(kern_conv_shapes(&desc, &shape));
        size_t x_bytes = (size_t)cc->n * shape.input_channels * cc->h * cc->w * 2;
        size_t y_bytes = (size_t)cc->n * shape.output_channels * shape.out_h * shape.out_w * 2;
        void *dx = gpu_upload(NULL, x_bytes), *dy = gpu_upload(NULL, y_bytes);
        void *dz = gpu_upload(NULL, y_bytes);
        void *dw = gpu_upload(NULL, shape.weight_elements * 2);
        void *db = gpu_upload(NULL, shape.bias_elements * 2);
        ck_assert_int_eq(cudaMemset(dx, 0, x_bytes), cudaSuccess);
        ck_assert_int_eq(cudaMemset(dz, 0, y_bytes), cudaSuccess);
        ck_assert_int_eq(cudaMemset(dw, 0, shape.weight_elements * 2), cudaSuccess);
        ck_assert_int_eq(cudaMemset(db, 0, shape.bias_elements * 2), cudaSuccess);
        gpu_sync();
        kern_conv_scratch scratch = {dx, dw, db, cc->residual ? dz : NULL, dy, g_workspace,
                                     WORKSPACE_BYTES};
        kern_conv_plan *lp = NULL;
        ck_assert_msg(kern_conv_create(g_cudnn, g_stream, &desc, &scratch, &lp) == TCI_OK,
                      "layer %zu: %s", l, tci_last_error());
        kern_conv_info info;
        kern_conv_get_info(lp, &info);
        size_t most = 0;
        int most_n = cc->n;
        for (int n = 1; n <= cc->n; n++) {
            size_t ws = 0;
            ck_assert_tci_ok(kern_conv_workspace_at(lp, g_cudnn, n, &ws));
            ck_assert(ws <= WORKSPACE_BYTES);
            if (ws > most) most = ws, most_n = n;
            const void *z = cc->residual ? dz : NULL;
            ck_assert_msg(kern_conv_run(lp, g_cudnn, g_stream, n, dx, dw, db, z, dy,
                                        ws ? g_workspace : NULL, ws) == TCI_OK,
                          "layer %zu, batch %d with %zu bytes: %s", l, n, ws, tci_last_error());
            if (ws)
                ck_assert_int_eq(kern_conv_run(lp, g_cudnn, g_stream, n, dx, dw, db, z, dy,
                                               g_workspace, ws - 1),
                                 TCI_ERR_INVALID_ARGUMENT);
        }
        ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
        printf("  conv workspace %dx%dx%d k%d %s: %zu bytes at the planned 64, most %zu at %d\n",
               cc->c, cc->h, cc->w, cc->k, info.algorithm, info.workspace_bytes, most, most_n);
        kern_conv_destroy(lp);
        gpu_free(dx), gpu_free(dy), gpu_free(dz), gpu_free(dw), gpu_free(db);
    }
}
END_TEST

START_TEST(conv_errors) {
    conv_case cc = {.n = 2, .c = 8, .h = 8, .w = 8, .k = 8, .r = 3, .s = 3, .pad = 1, .mode = H};
    kern_conv_desc d = conv_desc_of(&cc);
    kern_conv_plan *lib_plan = (kern_conv_plan *)&d;
    d.geom.pad_bottom = 2;
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan), TCI_ERR_UNSUPPORTED,
                        "asymmetric pads");
    ck_assert_ptr_null(lib_plan);
    d = conv_desc_of(&cc);
    d.geom.c = 12, d.geom.k = 12, d.geom.groups = 3;
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan), TCI_ERR_UNSUPPORTED,
                        "would break the groups");
    d = conv_desc_of(&cc);
    d.geom.groups = 3;
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "groups 3 must divide");
    d = conv_desc_of(&cc);
    d.geom.kernel_h = 12;
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "larger than padded input");
    d = conv_desc_of(&cc);
    d.geom.stride_h = 0;
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "strides");
    d = conv_desc_of(&cc);
    d.activation = (kern_conv_activation)7;
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan), TCI_ERR_UNSUPPORTED,
                        "activation 7");
    d = conv_desc_of(&cc);
    d.has_bias = 1;
    kern_conv_scratch missing = {NULL, NULL, NULL, NULL, NULL, NULL, 0};
    ck_assert_tci_error(kern_conv_create(g_cudnn, g_stream, &d, &missing, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "scratch buffers missing");

    ck_assert_tci_ok(kern_conv_create(g_cudnn, g_stream, &d, NULL, &lib_plan));
    void *buf = gpu_upload(NULL, 4096);
    ck_assert_tci_error(kern_conv_run(lib_plan, g_cudnn, g_stream, 3, buf, buf, buf, NULL, buf,
                                      g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "batch 3 outside 1..2");
    ck_assert_tci_error(kern_conv_run(lib_plan, g_cudnn, g_stream, 2, buf, buf, NULL, NULL,
                                      g_workspace, g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "bias absent");
    ck_assert_tci_error(kern_conv_run(lib_plan, g_cudnn, g_stream, 2, buf, buf, buf, NULL, buf,
                                      g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "must not alias x");
    kern_conv_info info;
    kern_conv_get_info(lib_plan, &info);
    if (info.workspace_bytes > 0)
        ck_assert_tci_error(kern_conv_run(lib_plan, g_cudnn, g_stream, 2, buf, buf, buf, NULL,
                                          g_workspace, NULL, 0),
                            TCI_ERR_INVALID_ARGUMENT, "workspace bytes");
    kern_conv_destroy(lib_plan);
    kern_conv_destroy(NULL);
    gpu_free(buf);
}
END_TEST

/* ------------------------------------------------------------------------ GEMM ---- */

typedef struct {
    int64_t m, n, k;
    int ta, tb;
    int batch;       /* 0: 1 */
    int bcast_b;     /* stride_b = 0 */
    int64_t ld_pad;  /* extra elements per stored row of A, B, C/D */
    float alpha, beta;
    kern_gemm_epilogue epi;
    kern_gemm_dtype dtype;
    int candidates;  /* 0: heuristics' first, untimed */
    int64_t run_m;   /* 0: m */
    int run_batch;   /* 0: batch */
    int graph;
    int offset;      /* elements every device pointer is moved by (0: cudaMalloc's alignment) */
} gemm_case;

static double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static void check_gemm(const char *name, const gemm_case *gc) {
    int batch = gc->batch ? gc->batch : 1;
    int fp16 = gc->dtype == KERN_GEMM_FP16;
    size_t es = fp16 ? 2 : 4;
    int64_t a_rows = gc->ta ? gc->k : gc->m, a_cols = gc->ta ? gc->m : gc->k;
    int64_t b_rows = gc->tb ? gc->n : gc->k, b_cols = gc->tb ? gc->k : gc->n;
    int64_t lda = a_cols + gc->ld_pad, ldb = b_cols + gc->ld_pad, ldc = gc->n + gc->ld_pad;
    int64_t sa = a_rows * lda, sb = gc->bcast_b ? 0 : b_rows * ldb, sc = gc->m * ldc;
    size_t na = (size_t)(sa * batch), nb = (size_t)(gc->bcast_b ? b_rows * ldb : sb * batch);
    size_t nc = (size_t)(sc * batch);
    float *a = random_floats(na, 5, -1.0f, 1.0f), *b = random_floats(nb, 6, -1.0f, 1.0f);
    float *c = random_floats(nc, 7, -1.0f, 1.0f), *bias = random_floats((size_t)gc->n, 8, -1, 1);
    if (fp16) {
        round_to_half(a, na), round_to_half(b, nb), round_to_half(c, nc);
        round_to_half(bias, (size_t)gc->n);
    }
    void *ha = malloc(na * es), *hb = malloc(nb * es), *hc = malloc(nc * es),
         *hbias = malloc((size_t)gc->n * es);
#define TO_DEVICE_TYPE(src, dst, count)                                                           \
    do {                                                                                          \
        if (fp16)                                                                                 \
            gpu_to_half(src, dst, count);                                                         \
        else                                                                                      \
            memcpy(dst, src, (count) * 4);                                                        \
    } while (0)
    TO_DEVICE_TYPE(a, ha, na);
    TO_DEVICE_TYPE(b, hb, nb);
    TO_DEVICE_TYPE(c, hc, nc);
    TO_DEVICE_TYPE(bias, hbias, (size_t)gc->n);
    /* each buffer is allocated offset elements larger and used from there */
    size_t off = (size_t)gc->offset * es;
    char *ra = gpu_upload(NULL, na * es + off), *rbuf_b = gpu_upload(NULL, nb * es + off);
    char *rc = gpu_upload(NULL, nc * es + off), *rbias = gpu_upload(NULL, (size_t)gc->n * es + off);
    char *rd = gpu_upload(NULL, nc * es + off);
    void *da = ra + off, *db = rbuf_b + off, *dc = rc + off, *dbias = rbias + off, *dd = rd + off;
    ck_assert_int_eq(cudaMemcpy(da, ha, na * es, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(db, hb, nb * es, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dc, hc, nc * es, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dbias, hbias, (size_t)gc->n * es, cudaMemcpyHostToDevice),
                     cudaSuccess);

    kern_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.m = gc->m, desc.n = gc->n, desc.k = gc->k, desc.trans_a = gc->ta, desc.trans_b = gc->tb;
    desc.lda = lda, desc.ldb = ldb, desc.ldc = ldc, desc.batch_count = batch;
    desc.stride_a = sa, desc.stride_b = sb, desc.stride_c = sc;
    desc.alpha = gc->alpha, desc.beta = gc->beta, desc.epilogue = gc->epi, desc.dtype = gc->dtype;
    desc.workspace_limit = WORKSPACE_BYTES;
    desc.candidates = gc->candidates;
    desc.alignment = gc->offset ? (int)es : 0;
    int with_bias = gc->epi == KERN_GEMM_EPILOGUE_BIAS || gc->epi == KERN_GEMM_EPILOGUE_RELU_BIAS ||
                    gc->epi == KERN_GEMM_EPILOGUE_GELU_BIAS;
    gpu_sync();
    kern_gemm_scratch scratch = {da, db, gc->beta != 0.0f ? dc : NULL, with_bias ? dbias : NULL,
                                 dd, g_workspace, WORKSPACE_BYTES};
    kern_gemm_plan *lib_plan = NULL;
    ck_assert_msg(kern_gemm_create(g_lt, g_stream, &desc, gc->candidates ? &scratch : NULL,
                                   &lib_plan) == TCI_OK,
                  "%s: create: %s", name, tci_last_error());
    kern_gemm_info info;
    kern_gemm_get_info(lib_plan, &info);
    printf("  gemm %-30s %-58s %8.4f ms (%d timed)\n", name, info.algorithm, (double)info.time_ms,
           info.candidates_timed);

    int64_t m = gc->run_m ? gc->run_m : gc->m;
    int rb = gc->run_batch ? gc->run_batch : batch;
    ck_assert_int_eq(cudaMemset(dd, 0xff, nc * es), cudaSuccess);
    gpu_sync();
    const void *carg = gc->beta != 0.0f ? dc : NULL;
    const void *barg = with_bias ? dbias : NULL;
    if (gc->graph) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        ck_assert_int_eq(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal),
                         cudaSuccess);
        tci_status st = kern_gemm_run(lib_plan, g_lt, g_stream, m, rb, da, db, carg, dd, barg,
                                      g_workspace, WORKSPACE_BYTES);
        ck_assert_int_eq(cudaStreamEndCapture(g_stream, &graph), cudaSuccess);
        ck_assert_msg(st == TCI_OK, "%s: captured run: %s", name, tci_last_error());
        ck_assert_int_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
        ck_assert_int_eq(cudaGraphLaunch(exec, g_stream), cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    } else {
        ck_assert_msg(kern_gemm_run(lib_plan, g_lt, g_stream, m, rb, da, db, carg, dd, barg,
                                    g_workspace, WORKSPACE_BYTES) == TCI_OK,
                      "%s: run: %s", name, tci_last_error());
    }
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    void *hd = malloc(nc * es);
    gpu_download(hd, dd, nc * es);
    double rel = fp16 ? 1e-2 : 1e-4;
    for (int bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < gc->m; i++)
            for (int64_t j = 0; j < ldc; j++) {
                size_t o = (size_t)(bi * sc + i * ldc + j);
                float got = fp16 ? half_to_float(((uint16_t *)hd)[o]) : ((float *)hd)[o];
                if (bi >= rb || i >= m || j >= gc->n) {
                    /* outside the problem nothing is written: still the NaN poison */
                    ck_assert_msg(isnan(got), "%s: D[%d][%lld][%lld] written outside", name, bi,
                                  (long long)i, (long long)j);
                    continue;
                }
                double acc = 0.0;
                const float *ab = a + bi * sa, *bb = b + bi * sb;
                for (int64_t l = 0; l < gc->k; l++) {
                    double av = gc->ta ? ab[l * lda + i] : ab[i * lda + l];
                    double bv = gc->tb ? bb[j * ldb + l] : bb[l * ldb + j];
                    acc += av * bv;
                }
                acc = gc->alpha * acc + (gc->beta != 0.0f ? gc->beta * c[o] : 0.0);
                if (with_bias) acc += bias[j];
                if (gc->epi == KERN_GEMM_EPILOGUE_RELU || gc->epi == KERN_GEMM_EPILOGUE_RELU_BIAS)
                    acc = acc < 0 ? 0 : acc;
                if (gc->epi == KERN_GEMM_EPILOGUE_GELU || gc->epi == KERN_GEMM_EPILOGUE_GELU_BIAS)
                    acc = gelu_tanh(acc);
                ck_assert_msg(near(got, acc, rel), "%s: D[%d][%lld][%lld] = %g, want %g", name, bi,
                              (long long)i, (long long)j, (double)got, acc);
            }
    kern_gemm_destroy(lib_plan);
    gpu_free(ra), gpu_free(rbuf_b), gpu_free(rc), gpu_free(rbias), gpu_free(rd);
    free(a), free(b), free(c), free(bias), free(ha), free(hb), free(hc), free(hbias), free(hd);
}

START_TEST(gemm_odd_sizes) {
    gemm_case g = {.m = 37, .n = 29, .k = 45, .alpha = 1.0f, .candidates = 4};
    check_gemm("37x29x45 packed", &g);
    gemm_case g1 = {.m = 1, .n = 1000, .k = 2048, .alpha = 1.0f, .candidates = 4,
                    .epi = KERN_GEMM_EPILOGUE_BIAS};
    check_gemm("1x1000x2048 bias (classifier)", &g1);
    gemm_case g2 = {.m = 21, .n = 27, .k = 35, .alpha = 1.0f, .candidates = 4, .offset = 1,
                    .epi = KERN_GEMM_EPILOGUE_RELU_BIAS};
    check_gemm("21x27x35, 2-byte aligned pointers", &g2);
    gemm_case g3 = {.m = 21, .n = 27, .k = 35, .alpha = 1.0f, .offset = 1, .beta = 1.0f,
                    .dtype = KERN_GEMM_FP32, .epi = KERN_GEMM_EPILOGUE_BIAS};
    check_gemm("fp32 4-byte aligned pointers", &g3);
}
END_TEST

START_TEST(gemm_transposes) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case g = {.m = 33, .n = 40, .k = 24, .ta = ta, .tb = tb, .alpha = 1.0f,
                           .candidates = 3};
            char name[32];
            snprintf(name, sizeof name, "33x40x24 tA %d tB %d", ta, tb);
            check_gemm(name, &g);
        }
    gemm_case go = {.m = 19, .n = 13, .k = 11, .ta = 1, .tb = 1, .alpha = 1.0f, .candidates = 2};
    check_gemm("19x13x11 tA tB", &go);
}
END_TEST

START_TEST(gemm_epilogues) {
    const kern_gemm_epilogue e[] = {KERN_GEMM_EPILOGUE_NONE, KERN_GEMM_EPILOGUE_BIAS,
                                    KERN_GEMM_EPILOGUE_RELU, KERN_GEMM_EPILOGUE_RELU_BIAS,
                                    KERN_GEMM_EPILOGUE_GELU, KERN_GEMM_EPILOGUE_GELU_BIAS};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        gemm_case g = {.m = 48, .n = 40, .k = 32, .tb = 1, .alpha = 0.5f, .beta = 1.0f,
                       .epi = e[i], .candidates = 4};
        char name[32];
        snprintf(name, sizeof name, "epilogue %d, beta 1", (int)e[i]);
        check_gemm(name, &g);
        gemm_case o = {.m = 21, .n = 27, .k = 35, .alpha = 1.0f, .epi = e[i]};
        snprintf(name, sizeof name, "epilogue %d, odd, untimed", (int)e[i]);
        check_gemm(name, &o);
    }
}
END_TEST

START_TEST(gemm_batched) {
    gemm_case g = {.m = 24, .n = 16, .k = 40, .batch = 3, .alpha = 1.0f, .candidates = 4,
                   .epi = KERN_GEMM_EPILOGUE_BIAS};
    check_gemm("batch 3", &g);
    gemm_case gb = {.m = 17, .n = 24, .k = 32, .batch = 4, .bcast_b = 1, .tb = 1, .alpha = 1.0f,
                    .candidates = 4, .epi = KERN_GEMM_EPILOGUE_GELU_BIAS};
    check_gemm("batch 4, B broadcast", &gb);
    gemm_case gp = {.m = 16, .n = 24, .k = 16, .batch = 2, .ld_pad = 8, .alpha = 1.0f,
                    .beta = 1.0f, .candidates = 2};
    check_gemm("batch 2, padded ld", &gp);
    gemm_case gs = {.m = 40, .n = 32, .k = 64, .batch = 5, .alpha = 1.0f, .candidates = 3,
                    .epi = KERN_GEMM_EPILOGUE_RELU_BIAS, .run_m = 13, .run_batch = 2};
    check_gemm("created 40 x 5, run 13 x 2", &gs);
    gemm_case gg = {.m = 64, .n = 48, .k = 56, .batch = 2, .alpha = 1.0f, .candidates = 3,
                    .epi = KERN_GEMM_EPILOGUE_BIAS, .run_m = 30, .graph = 1};
    check_gemm("CUDA graph, run m 30", &gg);
    gemm_case go = {.m = 7, .n = 9, .k = 13, .batch = 3, .tb = 1, .alpha = 1.0f, .beta = 1.0f,
                    .candidates = 3, .epi = KERN_GEMM_EPILOGUE_BIAS};
    check_gemm("batch 3 of 7x9x13 (odd strides)", &go);
}
END_TEST

START_TEST(gemm_fp32) {
    gemm_case g = {.m = 37, .n = 29, .k = 45, .ta = 1, .alpha = 1.0f, .beta = 0.5f,
                   .epi = KERN_GEMM_EPILOGUE_RELU_BIAS, .dtype = KERN_GEMM_FP32, .candidates = 4};
    check_gemm("fp32 37x29x45 relu bias", &g);
    gemm_case gb = {.m = 20, .n = 12, .k = 70, .batch = 3, .bcast_b = 1, .alpha = 1.0f,
                    .epi = KERN_GEMM_EPILOGUE_GELU_BIAS, .dtype = KERN_GEMM_FP32};
    check_gemm("fp32 batch 3 broadcast B gelu", &gb);
}
END_TEST

START_TEST(gemm_errors) {
    kern_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = 16, d.n = 16, d.k = 16, d.batch_count = 1, d.alpha = 1.0f;
    d.workspace_limit = WORKSPACE_BYTES;
    kern_gemm_plan *lib_plan = (kern_gemm_plan *)&d;
    kern_gemm_desc e = d;
    e.lda = 8;
    ck_assert_tci_error(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan), TCI_ERR_INVALID_ARGUMENT,
                        "leading dimensions lda 8");
    ck_assert_ptr_null(lib_plan);
    e = d, e.k = 0;
    ck_assert_tci_error(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan), TCI_ERR_INVALID_ARGUMENT,
                        "k 0");
    e = d, e.batch_count = 2, e.stride_a = 256, e.stride_b = 256, e.stride_c = 100;
    ck_assert_tci_error(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan), TCI_ERR_INVALID_ARGUMENT,
                        "must not overlap");
    e = d, e.alignment = 3;
    ck_assert_tci_error(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan), TCI_ERR_INVALID_ARGUMENT,
                        "alignment 3");
    e = d, e.epilogue = (kern_gemm_epilogue)42;
    ck_assert_tci_error(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan), TCI_ERR_INVALID_ARGUMENT,
                        "unknown epilogue 42");

    e = d, e.epilogue = KERN_GEMM_EPILOGUE_BIAS, e.alignment = 16;
    ck_assert_tci_ok(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan));
    char *buf = gpu_upload(NULL, 4096);
    ck_assert_tci_error(kern_gemm_run(lib_plan, g_lt, g_stream, 0, 0, buf, buf, NULL, buf, NULL,
                                      g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "bias missing");
    ck_assert_tci_error(kern_gemm_run(lib_plan, g_lt, g_stream, 0, 0, buf + 2, buf, NULL, buf, buf,
                                      g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "not aligned to the plan's 16 bytes");
    ck_assert_tci_error(kern_gemm_run(lib_plan, g_lt, g_stream, 17, 0, buf, buf, NULL, buf, buf,
                                      g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "m 17 / batch 1 outside");
    kern_gemm_destroy(lib_plan);
    e = d, e.beta = 1.0f;
    ck_assert_tci_ok(kern_gemm_create(g_lt, g_stream, &e, NULL, &lib_plan));
    ck_assert_tci_error(kern_gemm_run(lib_plan, g_lt, g_stream, 0, 0, buf, buf, NULL, buf, NULL,
                                      g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "needs C");
    kern_gemm_destroy(lib_plan);
    kern_gemm_destroy(NULL);
    gpu_free(buf);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_conv_gemm");
    Suite *s = suite_create("gpu_conv_gemm");
    TCase *tc = tcase_create("conv");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, conv_3x3_pad1_bias_relu);
    tcase_add_test(tc, conv_1x1_odd_channels_bias);
    tcase_add_test(tc, conv_7x7_stride2_first_layer);
    tcase_add_test(tc, conv_strided_3x3_plain);
    tcase_add_test(tc, conv_dilated);
    tcase_add_test(tc, conv_depthwise);
    tcase_add_test(tc, conv_grouped);
    tcase_add_test(tc, conv_grouped_small_groups);
    tcase_add_test(tc, conv_1d);
    tcase_add_test(tc, conv_bias_relu_residual);
    tcase_add_test(tc, conv_epilogue_without_bias);
    tcase_add_test(tc, conv_inplace_residual);
    tcase_add_test(tc, conv_unfused_fallback);
    tcase_add_test(tc, conv_fp32_modes);
    tcase_add_test(tc, conv_fp32_nhwc8);
    tcase_add_test(tc, conv_heuristics_smaller_batch_graph);
    tcase_add_test(tc, conv_workspace_every_smaller_batch);
    tcase_add_test(tc, conv_errors);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("gemm");
    tcase_add_checked_fixture(tg, setup, teardown);
    tcase_set_timeout(tg, 300);
    tcase_add_test(tg, gemm_odd_sizes);
    tcase_add_test(tg, gemm_transposes);
    tcase_add_test(tg, gemm_epilogues);
    tcase_add_test(tg, gemm_batched);
    tcase_add_test(tg, gemm_fp32);
    tcase_add_test(tg, gemm_errors);
    suite_add_tcase(s, tg);
    return test_run_suite(s);
}
