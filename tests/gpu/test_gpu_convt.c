/* cuDNN ConvTranspose plans against a plain C fp32 reference of ONNX ConvTranspose: padded
 * channels, strides, pads, output padding, bias, groups, smaller batches, CUDA graph capture and
 * the error paths. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/conv_transpose_cudnn.h"
#include "layers/op.h"

#define WORKSPACE_BYTES ((size_t)64 << 20)

/* Shared by the tests of one process (CK_FORK=no); made in the fixture. */
static cudnnHandle_t g_cudnn;
static cudaStream_t g_stream;
static void *g_workspace;

static void setup(void) {
    ck_assert_int_eq(cudnnCreate(&g_cudnn), CUDNN_STATUS_SUCCESS);
    /* a blocking stream: ordered after the harness's uploads and memsets on the legacy stream */
    ck_assert_int_eq(cudaStreamCreate(&g_stream), cudaSuccess);
    g_workspace = gpu_upload(NULL, WORKSPACE_BYTES);
}

static void teardown(void) {
    gpu_free(g_workspace);
    cudaStreamDestroy(g_stream);
    cudnnDestroy(g_cudnn);
}

static float *random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpu_fill_random(v, n, seed, lo, hi);
    return v;
}

/* What the GPU sees after the upload: fp16-rounded values. */
static void round_to_half(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = half_to_float(float_to_half(v[i]));
}

static int near(float got, double want, double rel) {
    return fabs((double)got - want) <= rel * fmax(1.0, fabs(want));
}

typedef struct {
    int n, c, h, w, k, r, s, pad, stride, dil, out_pad, groups;
    int bias;
    int untimed; /* heuristics instead of timing */
    int run_n;   /* batch at run time (0: n) */
    int graph;   /* run inside a captured CUDA graph */
} convt_case;

static int case_stride(const convt_case *cc) { return cc->stride ? cc->stride : 1; }
static int case_dil(const convt_case *cc) { return cc->dil ? cc->dil : 1; }
static int case_groups(const convt_case *cc) { return cc->groups ? cc->groups : 1; }

/* ONNX's output size with explicit pads and output_padding */
static int out_extent(const convt_case *cc, int in, int kernel) {
    return case_stride(cc) * (in - 1) + cc->out_pad + case_dil(cc) * (kernel - 1) + 1 - 2 * cc->pad;
}

static kern_convt_desc convt_desc_of(const convt_case *cc) {
    kern_convt_desc d;
    memset(&d, 0, sizeof d);
    d.geom.n = cc->n, d.geom.c = cc->c, d.geom.h = cc->h, d.geom.w = cc->w, d.geom.k = cc->k, d.geom.kernel_h = cc->r, d.geom.kernel_w = cc->s;
    d.geom.out_h = out_extent(cc, cc->h, cc->r);
    d.geom.out_w = out_extent(cc, cc->w, cc->s);
    d.geom.pad_top = d.geom.pad_left = d.geom.pad_bottom = d.geom.pad_right = cc->pad;
    d.geom.stride_h = d.geom.stride_w = case_stride(cc);
    d.geom.dilation_h = d.geom.dilation_w = case_dil(cc);
    d.geom.groups = case_groups(cc);
    d.has_bias = cc->bias;
    d.workspace_limit = WORKSPACE_BYTES;
    return d;
}

/* Logical NCHW fp32 -> NHWC8 fp16 with cs stored channels, zero-padded. */
static uint16_t *pack_nhwc8(const float *nchw, int n, int c, int h, int w, int cs,
                            size_t *out_bytes) {
    size_t count = (size_t)n * cs * h * w;
    uint16_t *out = calloc(count, sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int ni = 0; ni < n; ni++)
        for (int ci = 0; ci < c; ci++)
            for (int hi = 0; hi < h; hi++)
                for (int wi = 0; wi < w; wi++)
                    out[(((size_t)ni * h + hi) * w + wi) * cs + ci] =
                        float_to_half(nchw[(((size_t)ni * c + ci) * h + hi) * w + wi]);
    *out_bytes = count * sizeof *out;
    return out;
}

/* ONNX ConvTranspose: every input pixel scatters W[ci, co_local] into
 * y[g * K/g + co_local, ih * stride - pad + r * dil, iw * stride - pad + s * dil]. */
static void reference_convt(const convt_case *cc, int p, int q, const float *x, const float *w,
                            const float *bias, float *y, int n) {
    int g = case_groups(cc), cg = cc->c / g, kg = cc->k / g;
    int st = case_stride(cc), dl = case_dil(cc);
    size_t ny = (size_t)n * cc->k * p * q;
    double *acc = calloc(ny, sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    for (int ni = 0; ni < n; ni++)
        for (int ci = 0; ci < cc->c; ci++) {
            int grp = ci / cg;
            for (int ih = 0; ih < cc->h; ih++)
                for (int iw = 0; iw < cc->w; iw++) {
                    double xv = x[(((size_t)ni * cc->c + ci) * cc->h + ih) * cc->w + iw];
                    for (int col = 0; col < kg; col++)
                        for (int r = 0; r < cc->r; r++)
                            for (int s = 0; s < cc->s; s++) {
                                int oh = ih * st - cc->pad + r * dl;
                                int ow = iw * st - cc->pad + s * dl;
                                if (oh < 0 || oh >= p || ow < 0 || ow >= q) continue;
                                int co = grp * kg + col;
                                acc[(((size_t)ni * cc->k + co) * p + oh) * q + ow] +=
                                    xv * w[(((size_t)ci * kg + col) * cc->r + r) * cc->s + s];
                            }
                }
        }
    for (int ni = 0; ni < n; ni++)
        for (int co = 0; co < cc->k; co++)
            for (size_t i = 0; i < (size_t)p * q; i++) {
                size_t o = ((size_t)ni * cc->k + co) * p * q + i;
                y[o] = (float)(acc[o] + (cc->bias ? bias[co] : 0.0));
            }
    free(acc);
}

static void run_convt_graph(const kern_convt_plan *lib_plan, int n, const void *x, const void *w,
                            const void *bias, void *y) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ck_assert_int_eq(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal),
                     cudaSuccess);
    tci_status st = kern_convt_run(lib_plan, g_cudnn, g_stream, n, x, w, bias, y, g_workspace,
                                   WORKSPACE_BYTES);
    ck_assert_int_eq(cudaStreamEndCapture(g_stream, &graph), cudaSuccess);
    ck_assert_msg(st == TCI_OK, "captured conv-transpose run: %s", tci_last_error());
    ck_assert_int_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(exec, g_stream), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
}

/* may_refuse: cuDNN may lack an algorithm (grouped backward data in NHWC fp16); then creation
 * must fail cleanly with TCI_ERR_UNSUPPORTED, else the results must be right. */
static void check_convt_maybe(const char *name, const convt_case *cc, int may_refuse) {
    kern_convt_desc desc = convt_desc_of(cc);
    kern_convt_info shape;
    ck_assert_tci_ok(kern_convt_shapes(&desc, &shape));
    int g = desc.geom.groups, p = shape.out_h, q = shape.out_w;
    ck_assert_int_eq(p, desc.geom.out_h);
    ck_assert_int_eq(q, desc.geom.out_w);
    size_t nx = (size_t)cc->n * cc->c * cc->h * cc->w;
    size_t nw = (size_t)cc->c * (cc->k / g) * cc->r * cc->s;
    size_t ny = (size_t)cc->n * cc->k * p * q;
    float *x = random_floats(nx, 13 + (uint64_t)cc->c, -1.0f, 1.0f);
    float *w = random_floats(nw, 29 + (uint64_t)cc->k, -0.5f, 0.5f);
    float *bias = random_floats((size_t)cc->k, 43, -1.0f, 1.0f);
    round_to_half(x, nx);
    round_to_half(w, nw);
    round_to_half(bias, (size_t)cc->k);
    size_t x_bytes, w_bytes = shape.weight_elements * 2, b_bytes = shape.bias_elements * 2;
    size_t y_bytes = (size_t)cc->n * shape.output_channels * p * q * 2;
    uint16_t *hx = pack_nhwc8(x, cc->n, cc->c, cc->h, cc->w, shape.input_channels, &x_bytes);
    uint16_t *hw = malloc(w_bytes), *hb = malloc(b_bytes);
    ck_assert_ptr_nonnull(hw);
    ck_assert_ptr_nonnull(hb);
    ck_assert_tci_ok(kern_convt_pack_weights(&desc, w, hw));
    ck_assert_tci_ok(kern_convt_pack_bias(&desc, bias, hb));
    void *dx = gpu_upload(hx, x_bytes), *dw = gpu_upload(hw, w_bytes);
    void *db = gpu_upload(hb, b_bytes), *dy = gpu_upload(NULL, y_bytes);

    gpu_sync();
    kern_convt_scratch scratch = {dx, dw, cc->bias ? db : NULL, dy, g_workspace,
                                  WORKSPACE_BYTES};
    kern_convt_plan *lib_plan = NULL;
    tci_status created =
        kern_convt_create(g_cudnn, g_stream, &desc, cc->untimed ? NULL : &scratch, &lib_plan);
    if (may_refuse && created == TCI_ERR_UNSUPPORTED) {
        printf("  convt %s: refused (%s)\n", name, tci_last_error());
        ck_assert_ptr_null(lib_plan);
        gpu_free(dx), gpu_free(dw), gpu_free(db), gpu_free(dy);
        free(x), free(w), free(bias), free(hx), free(hw), free(hb);
        return;
    }
    ck_assert_msg(created == TCI_OK, "%s: create: %s", name, tci_last_error());
    kern_convt_info info;
    kern_convt_get_info(lib_plan, &info);
    printf("  convt %-34s %-32s %8.4f ms  ws %zu\n", name, info.algorithm, (double)info.time_ms,
           info.workspace_bytes);
    ck_assert(info.workspace_bytes <= WORKSPACE_BYTES);
    ck_assert(cc->untimed ? info.time_ms < 0 : info.time_ms >= 0);
    ck_assert_int_eq(info.output_channels, shape.output_channels);

    int n = cc->run_n ? cc->run_n : cc->n;
    /* poison y again: the algorithm trials wrote it */
    ck_assert_int_eq(cudaMemset(dy, 0xff, y_bytes), cudaSuccess);
    gpu_sync();
    if (cc->graph)
        run_convt_graph(lib_plan, n, dx, dw, cc->bias ? db : NULL, dy);
    else
        ck_assert_msg(kern_convt_run(lib_plan, g_cudnn, g_stream, n, dx, dw, cc->bias ? db : NULL, dy,
                                     g_workspace, WORKSPACE_BYTES) == TCI_OK,
                      "%s: run: %s", name, tci_last_error());
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    uint16_t *hy = malloc(y_bytes);
    ck_assert_ptr_nonnull(hy);
    gpu_download(hy, dy, y_bytes);

    float *want = malloc(ny * sizeof *want);
    ck_assert_ptr_nonnull(want);
    reference_convt(cc, p, q, x, w, bias, want, n);
    int cs = shape.output_channels;
    for (int ni = 0; ni < n; ni++)
        for (int pi = 0; pi < p; pi++)
            for (int qi = 0; qi < q; qi++)
                for (int k = 0; k < cs; k++) {
                    float got = half_to_float(hy[(((size_t)ni * p + pi) * q + qi) * cs + k]);
                    if (k >= cc->k) {
                        ck_assert_msg(got == 0.0f, "%s: padded channel %d at (%d,%d,%d) is %g",
                                      name, k, ni, pi, qi, (double)got);
                        continue;
                    }
                    double ref = want[(((size_t)ni * cc->k + k) * p + pi) * q + qi];
                    ck_assert_msg(near(got, ref, 1e-2), "%s: y(%d,%d,%d,%d) = %g, want %g", name,
                                  ni, k, pi, qi, (double)got, ref);
                }
    if (n < cc->n) {
        /* batches past n stay untouched (still the poison) */
        size_t per = y_bytes / (size_t)cc->n;
        const unsigned char *rest = (const unsigned char *)hy + per * (size_t)n;
        ck_assert_msg(rest[0] == 0xff && rest[per * (size_t)(cc->n - n) - 1] == 0xff,
                      "%s: run at batch %d wrote past it", name, n);
    }
    kern_convt_destroy(lib_plan);
    gpu_free(dx), gpu_free(dw), gpu_free(db), gpu_free(dy);
    free(x), free(w), free(bias), free(hx), free(hw), free(hb), free(hy), free(want);
}

static void check_convt(const char *name, const convt_case *cc) {
    check_convt_maybe(name, cc, 0);
}

START_TEST(convt_2x2_stride2_bias) {
    convt_case cc = {.n = 2, .c = 5, .h = 7, .w = 9, .k = 3, .r = 2, .s = 2, .stride = 2,
                     .bias = 1};
    check_convt("2x2 s2 C5->3 bias", &cc);
}
END_TEST

START_TEST(convt_3x3_stride2_pad1_outpad1_bias) {
    convt_case cc = {.n = 2, .c = 5, .h = 6, .w = 5, .k = 3, .r = 3, .s = 3, .pad = 1,
                     .stride = 2, .out_pad = 1, .bias = 1};
    check_convt("3x3 s2 p1 output_padding 1 bias", &cc);
    convt_case c0 = {.n = 1, .c = 5, .h = 6, .w = 5, .k = 3, .r = 3, .s = 3, .pad = 1,
                     .stride = 2, .bias = 1};
    check_convt("3x3 s2 p1 output_padding 0 bias", &c0);
}
END_TEST

START_TEST(convt_4x4_stride2_pad1_bias) {
    convt_case cc = {.n = 2, .c = 5, .h = 5, .w = 7, .k = 3, .r = 4, .s = 4, .pad = 1,
                     .stride = 2, .bias = 1};
    check_convt("4x4 s2 p1 C5->3 bias", &cc);
    convt_case cw = {.n = 1, .c = 32, .h = 8, .w = 8, .k = 16, .r = 4, .s = 4, .pad = 1,
                     .stride = 2, .bias = 1};
    check_convt("4x4 s2 p1 C32->16 bias", &cw);
}
END_TEST

START_TEST(convt_plain_dilated_outpad) {
    convt_case cd = {.n = 2, .c = 12, .h = 7, .w = 6, .k = 10, .r = 3, .s = 3, .pad = 2,
                     .dil = 2};
    check_convt("3x3 dilation 2 pad 2 plain", &cd);
    /* stride 3, pad 0, output_padding 2: the last two rows and columns get no contribution */
    convt_case co = {.n = 2, .c = 8, .h = 4, .w = 5, .k = 13, .r = 3, .s = 3, .stride = 3,
                     .out_pad = 2, .bias = 1};
    check_convt("3x3 s3 output_padding 2 bias", &co);
    convt_case c1 = {.n = 1, .c = 3, .h = 9, .w = 9, .k = 5, .r = 1, .s = 1};
    check_convt("1x1 s1 C3->5 plain", &c1);
}
END_TEST

START_TEST(convt_heuristics_smaller_batch_graph) {
    convt_case ch = {.n = 4, .c = 5, .h = 6, .w = 7, .k = 3, .r = 3, .s = 3, .pad = 1,
                     .stride = 2, .out_pad = 1, .bias = 1, .untimed = 1, .run_n = 3};
    check_convt("heuristics, created n 4, run n 3", &ch);
    convt_case cs = {.n = 3, .c = 16, .h = 5, .w = 5, .k = 8, .r = 2, .s = 2, .stride = 2,
                     .bias = 1, .run_n = 1};
    check_convt("timed, created n 3, run n 1", &cs);
    convt_case cg = {.n = 2, .c = 16, .h = 6, .w = 6, .k = 8, .r = 3, .s = 3, .pad = 1,
                     .stride = 2, .out_pad = 1, .bias = 1, .graph = 1};
    check_convt("CUDA graph 3x3 s2 p1 op1 bias", &cg);
}
END_TEST

START_TEST(convt_grouped) {
    convt_case cd = {.n = 2, .c = 13, .h = 6, .w = 7, .k = 13, .r = 4, .s = 4, .pad = 1,
                     .stride = 2, .groups = 13, .bias = 1};
    check_convt_maybe("depthwise C13 4x4 s2 p1 bias", &cd, 1);
    convt_case cg = {.n = 2, .c = 16, .h = 5, .w = 5, .k = 32, .r = 3, .s = 3, .pad = 1,
                     .stride = 2, .out_pad = 1, .groups = 2, .bias = 1};
    check_convt_maybe("groups 2 (8 in, 16 out each)", &cg, 1);
}
END_TEST

START_TEST(convt_errors) {
    convt_case cc = {.n = 2, .c = 5, .h = 6, .w = 6, .k = 3, .r = 3, .s = 3, .pad = 1,
                     .stride = 2, .out_pad = 1};
    kern_convt_desc d = convt_desc_of(&cc);
    kern_convt_plan *lib_plan = (kern_convt_plan *)&d;
    d.geom.pad_bottom = 2;
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_UNSUPPORTED, "asymmetric pads");
    ck_assert_ptr_null(lib_plan);
    d = convt_desc_of(&cc);
    d.geom.out_h += 1; /* output_padding 2 with stride 2 */
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_UNSUPPORTED, "height: output size 13 is not 11 plus");
    d = convt_desc_of(&cc);
    d.geom.out_w -= 2;
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_UNSUPPORTED, "width: output size 10 is not 11 plus");
    d = convt_desc_of(&cc);
    d.geom.groups = 2;
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "groups 2 must divide");
    d = convt_desc_of(&cc);
    d.geom.c = 6, d.geom.k = 4, d.geom.groups = 2;
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_UNSUPPORTED, "would break the groups");
    d = convt_desc_of(&cc);
    d.geom.h = 1, d.geom.kernel_h = 1, d.geom.pad_top = d.geom.pad_bottom = 1;
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "leave no output");
    d = convt_desc_of(&cc);
    d.geom.dilation_w = 0;
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "dilations");
    d = convt_desc_of(&cc);
    d.geom.out_w = 0;
    ck_assert_tci_error(kern_convt_shapes(&d, &(kern_convt_info){0}), TCI_ERR_INVALID_ARGUMENT,
                        "sizes must be positive");
    d = convt_desc_of(&cc);
    d.has_bias = 1;
    kern_convt_scratch missing = {NULL, NULL, NULL, NULL, NULL, 0};
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, &missing, &lib_plan),
                        TCI_ERR_INVALID_ARGUMENT, "scratch buffers missing");
    ck_assert_tci_error(kern_convt_create(g_cudnn, g_stream, &d, NULL, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "out_plan is NULL");

    ck_assert_tci_ok(kern_convt_create(g_cudnn, g_stream, &d, NULL, &lib_plan));
    void *buf = gpu_upload(NULL, 4096);
    ck_assert_tci_error(kern_convt_run(lib_plan, g_cudnn, g_stream, 3, buf, buf, buf, g_workspace,
                                       g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "batch 3 outside 1..2");
    ck_assert_tci_error(kern_convt_run(lib_plan, g_cudnn, g_stream, 2, buf, buf, NULL, g_workspace,
                                       g_workspace, WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "bias absent");
    ck_assert_tci_error(kern_convt_run(lib_plan, g_cudnn, g_stream, 2, buf, buf, buf, buf, g_workspace,
                                       WORKSPACE_BYTES),
                        TCI_ERR_INVALID_ARGUMENT, "must not alias x");
    kern_convt_info info;
    kern_convt_get_info(lib_plan, &info);
    ck_assert_int_eq(info.input_channels, 8);
    ck_assert_int_eq(info.output_channels, 8);
    ck_assert_int_eq(info.out_h, 12);
    if (info.workspace_bytes > 0)
        ck_assert_tci_error(kern_convt_run(lib_plan, g_cudnn, g_stream, 2, buf, buf, buf, g_workspace,
                                           NULL, 0),
                            TCI_ERR_INVALID_ARGUMENT, "workspace bytes");
    kern_convt_destroy(lib_plan);
    kern_convt_destroy(NULL);
    gpu_free(buf);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_convt");
    Suite *s = suite_create("gpu_convt");
    TCase *tc = tcase_create("convt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, convt_2x2_stride2_bias);
    tcase_add_test(tc, convt_3x3_stride2_pad1_outpad1_bias);
    tcase_add_test(tc, convt_4x4_stride2_pad1_bias);
    tcase_add_test(tc, convt_plain_dilated_outpad);
    tcase_add_test(tc, convt_heuristics_smaller_batch_graph);
    tcase_add_test(tc, convt_grouped);
    tcase_add_test(tc, convt_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
