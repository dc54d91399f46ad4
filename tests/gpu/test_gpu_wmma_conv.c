/* GPU tests of the WMMA implicit-GEMM convolution: every config on every shape it supports against a
 * double-precision reference (tails of M, N and K, strides, dilations, asymmetric pads, groups,
 * residuals in place, every activation), the weight packer (bit-identical to the cuDNN wrapper's),
 * the argument checks, and with TCI_WMMA_CONV_BENCH=1 a timing of ResNet-50 / MobileNetV2 layers. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/conv_cudnn.h"
#include "kernels/wmma_conv.h"
#include "layers/op.h"

static int64_t round8(int64_t c) { return (c + 7) / 8 * 8; }

enum { NO_RESIDUAL = 0, RESIDUAL = 1, RESIDUAL_IN_PLACE = 2 };

typedef struct {
    int64_t n, desc_n, c, h, w, k, r, s, sh, sw, dh, dw, pt, pl, pb, pr, groups;
    bool bias;
    int residual;
    act_kind act;
    float act_alpha, act_beta, alpha;
    float shift; /* added to every bias: keeps sqrt / log / reciprocal away from 0 */
} wc_case;

static int64_t out_size(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t k, int64_t stride, int64_t dil) {
    return (in + pad_begin + pad_end - dil * (k - 1) - 1) / stride + 1;
}

static void wc_desc(const wc_case *t, kern_wmma_conv_desc *d) {
    memset(d, 0, sizeof *d);
    d->geom.n = t->desc_n, d->geom.c = t->c, d->geom.h = t->h, d->geom.w = t->w, d->geom.k = t->k, d->geom.kernel_h = t->r, d->geom.kernel_w = t->s;
    d->geom.out_h = out_size(t->h, t->pt, t->pb, t->r, t->sh, t->dh);
    d->geom.out_w = out_size(t->w, t->pl, t->pr, t->s, t->sw, t->dw);
    d->geom.pad_top = t->pt, d->geom.pad_left = t->pl;
    d->geom.stride_h = t->sh, d->geom.stride_w = t->sw, d->geom.dilation_h = t->dh, d->geom.dilation_w = t->dw;
    d->geom.groups = t->groups, d->alpha = t->alpha;
    d->act = t->act, d->act_alpha = t->act_alpha, d->act_beta = t->act_beta;
}

/* The bound |got - want| may reach, from what the GPU legitimately does differently:
 * - accumulation: products of fp16 values are exact in fp32; each of the kdim + 3 fp32 additions
 *   (taps, split-K partials, alpha, bias, residual) may lose one ulp (tensor cores truncate) of a
 *   partial sum no larger than sum_abs (sum of |terms|): e = (kdim + 3) * 2^-22 * sum_abs, twice
 *   the classic gamma_n bound. The activation then moves that by at most its swing over
 *   [v - e, v + e] (endpoints: the activations are monotone or locally convex there);
 * - the activation's own fp32 evaluation (__expf, tanhf, erff ...: a few ulp): 2^-16 relative plus
 *   2^-20 absolute, far above those errors and far below fp16's resolution;
 * - the single rounding to fp16: half an ulp, 2^-11 relative (2^-25 absolute in the subnormals,
 *   inside the 2^-20).
 * Nothing here scales with the data beyond these terms, so a wrong tap, channel or tile shows. */
static double tolerance(const kern_wmma_conv_desc *d, double v, double sum_abs, int64_t kdim) {
    const double e = (double)(kdim + 3) * 0x1p-22 * sum_abs;
    const double f = gpu_act_reference(d->act, v, d->act_alpha, d->act_beta);
    const double swing = fmax(fabs(gpu_act_reference(d->act, v + e, d->act_alpha, d->act_beta) - f),
                              fabs(gpu_act_reference(d->act, v - e, d->act_alpha, d->act_beta) - f));
    return (1 + 0x1p-11) * swing + (0x1p-11 + 0x1p-16) * fabs(f) + 0x1p-20;
}

/* Random NHWC8 fp16 tensor (padded channels zero) as fp16 bits and as their fp32 values. */
static void random_nhwc8(int64_t pixels, int64_t c, uint64_t seed, float lo, float hi, uint16_t **bits,
                         float **values) {
    const int64_t cp = round8(c);
    const size_t count = (size_t)(pixels * cp);
    *bits = calloc(count + 1, sizeof **bits);
    *values = calloc(count + 1, sizeof **values);
    float *r = malloc((count + 1) * sizeof *r);
    gpu_fill_random(r, count, seed, lo, hi);
    for (size_t i = 0; i < count; i++)
        if ((int64_t)(i % (size_t)cp) < c) {
            (*bits)[i] = float_to_half(r[i]);
            (*values)[i] = half_to_float((*bits)[i]);
        }
    free(r);
}

typedef struct {
    int64_t n, cp, kp, cg, kg, kdim, m;
    float *x, *w, *bias, *z; /* values; w in ONNX layout K x Cg x R x S */
    uint16_t *xb, *zb, *wp;
    float *bias_p;
    double *want, *tol; /* per output element (padded channels: want 0, tol 0) */
} wc_data;

static void make_data(const wc_case *t, const kern_wmma_conv_desc *d, uint64_t seed, wc_data *o) {
    memset(o, 0, sizeof *o);
    o->n = t->n, o->cp = round8(t->c), o->kp = round8(t->k);
    o->cg = t->c / t->groups, o->kg = t->k / t->groups;
    o->kdim = t->r * t->s * (t->groups == 1 ? o->cp : o->cg);
    o->m = t->n * d->geom.out_h * d->geom.out_w;
    random_nhwc8(t->n * t->h * t->w, t->c, seed, -1, 1, &o->xb, &o->x);
    random_nhwc8(o->m, t->k, seed + 1, -1, 1, &o->zb, &o->z);
    /* weights of variance 1/fan_in keep the sums O(1), where the activations are not saturated */
    const size_t wcount = (size_t)(t->k * o->cg * t->r * t->s);
    const float a = sqrtf(3.0f / (float)(o->cg * t->r * t->s));
    o->w = malloc(wcount * sizeof *o->w);
    gpu_fill_random(o->w, wcount, seed + 2, -a, a);
    for (size_t i = 0; i < wcount; i++) o->w[i] = half_to_float(float_to_half(o->w[i]));
    o->bias = malloc((size_t)t->k * sizeof *o->bias);
    gpu_fill_random(o->bias, (size_t)t->k, seed + 3, -0.5f, 0.5f);
    for (int64_t i = 0; i < t->k; i++) o->bias[i] += t->shift;
    o->bias_p = calloc((size_t)o->kp, sizeof *o->bias_p);
    memcpy(o->bias_p, o->bias, (size_t)t->k * sizeof *o->bias);
    o->wp = malloc(kern_wmma_conv_weight_elements(d) * sizeof *o->wp);
    ck_assert_tci_ok(kern_wmma_conv_pack_weights(d, o->w, o->wp));

    const size_t out_count = (size_t)(o->m * o->kp);
    o->want = calloc(out_count, sizeof *o->want);
    o->tol = calloc(out_count, sizeof *o->tol);
    for (int64_t img = 0; img < t->n; img++)
        for (int64_t oh = 0; oh < d->geom.out_h; oh++)
            for (int64_t ow = 0; ow < d->geom.out_w; ow++) {
                const int64_t pix = (img * d->geom.out_h + oh) * d->geom.out_w + ow;
                for (int64_t k = 0; k < t->k; k++) {
                    const int64_t g = k / o->kg;
                    double acc = 0, sum_abs = 0;
                    for (int64_t r = 0; r < t->r; r++) {
                        const int64_t ih = oh * t->sh - t->pt + r * t->dh;
                        if (ih < 0 || ih >= t->h) continue;
                        for (int64_t s = 0; s < t->s; s++) {
                            const int64_t iw = ow * t->sw - t->pl + s * t->dw;
                            if (iw < 0 || iw >= t->w) continue;
                            const float *xp = o->x + ((img * t->h + ih) * t->w + iw) * o->cp + g * o->cg;
                            for (int64_t c = 0; c < o->cg; c++) {
                                const double p = (double)xp[c] * o->w[((k * o->cg + c) * t->r + r) * t->s + s];
                                acc += p;
                                sum_abs += fabs(p);
                            }
                        }
                    }
                    double v = (double)t->alpha * acc;
                    sum_abs *= fabs((double)t->alpha);
                    if (t->bias) v += o->bias[k], sum_abs += fabs(o->bias[k]);
                    const size_t at = (size_t)(pix * o->kp + k);
                    if (t->residual) v += o->z[at], sum_abs += fabs(o->z[at]);
                    o->want[at] = gpu_act_reference(t->act, v, t->act_alpha, t->act_beta);
                    o->tol[at] = tolerance(d, v, sum_abs, o->kdim);
                }
            }
}

static void free_data(wc_data *o) {
    free(o->x), free(o->w), free(o->bias), free(o->z), free(o->xb), free(o->zb), free(o->wp);
    free(o->bias_p), free(o->want), free(o->tol);
}

static void case_text(const wc_case *t, char *buf, size_t size) {
    snprintf(buf, size,
             "n%lld/%lld c%lld %lldx%lld k%lld %lldx%lld s%lldx%lld d%lldx%lld pads %lld,%lld,%lld,%lld g%lld "
             "bias %d res %d act %d alpha %g",
             (long long)t->n, (long long)t->desc_n, (long long)t->c, (long long)t->h, (long long)t->w,
             (long long)t->k, (long long)t->r, (long long)t->s, (long long)t->sh, (long long)t->sw,
             (long long)t->dh, (long long)t->dw, (long long)t->pt, (long long)t->pl, (long long)t->pb,
             (long long)t->pr, (long long)t->groups, (int)t->bias, t->residual, (int)t->act, (double)t->alpha);
}

/* Runs config on the case with a poisoned y (0xFFFF: NaN) and a poisoned workspace, then checks
 * every element: padded channels exactly +0, the rest within tolerance(). */
/* graph: the run is captured into a CUDA graph on a fresh stream and replayed (what the engine
 * does), which also proves kern_wmma_conv_run capturable. */
static void check_config(const wc_case *t, const kern_wmma_conv_desc *d, const wc_data *o, int config, bool graph) {
    const size_t in_bytes = (size_t)(t->n * t->h * t->w * o->cp) * 2;
    const size_t out_count = (size_t)(o->m * o->kp), out_bytes = out_count * 2;
    const size_t w_bytes = kern_wmma_conv_weight_elements(d) * 2;
    const size_t ws_bytes = kern_wmma_conv_workspace(d, config);
    void *dx = gpu_upload(o->xb, in_bytes), *dw = gpu_upload(o->wp, w_bytes);
    void *db = gpu_upload(o->bias_p, (size_t)o->kp * 4);
    void *dy = gpu_upload(t->residual == RESIDUAL_IN_PLACE ? o->zb : NULL, out_bytes);
    void *dz = t->residual == RESIDUAL ? gpu_upload(o->zb, out_bytes) : t->residual ? dy : NULL;
    void *dws = ws_bytes ? gpu_upload(NULL, ws_bytes) : NULL;
    if (graph) {
        cudaStream_t stream;
        cudaGraph_t g;
        cudaGraphExec_t exec;
        ck_assert_int_eq(cudaStreamCreate(&stream), cudaSuccess);
        ck_assert_int_eq(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
        const tci_status st = kern_wmma_conv_run(d, config, t->n, dx, dw, t->bias ? db : NULL, dz, dy, dws, ws_bytes, stream);
        ck_assert_int_eq(cudaStreamEndCapture(stream, &g), cudaSuccess);
        ck_assert_tci_ok(st);
        ck_assert_int_eq(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
        ck_assert_int_eq(cudaGraphLaunch(exec, stream), cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize(stream), cudaSuccess);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
        cudaStreamDestroy(stream);
    } else {
        ck_assert_tci_ok(kern_wmma_conv_run(d, config, t->n, dx, dw, t->bias ? db : NULL, dz, dy, dws, ws_bytes, 0));
    }
    gpu_sync();
    uint16_t *yb = malloc(out_bytes);
    gpu_download(yb, dy, out_bytes);
    char text[256];
    for (size_t i = 0; i < out_count; i++) {
        const int64_t ch = (int64_t)(i % (size_t)o->kp);
        if (ch >= t->k) {
            if (yb[i] != 0) {
                case_text(t, text, sizeof text);
                ck_abort_msg("%s, %s: padded channel %lld of pixel %zu is 0x%04x, not +0", kern_wmma_conv_config_name(config),
                             text, (long long)ch, i / (size_t)o->kp, yb[i]);
            }
            continue;
        }
        const double got = half_to_float(yb[i]);
        if (!(fabs(got - o->want[i]) <= o->tol[i])) {
            case_text(t, text, sizeof text);
            ck_abort_msg("%s, %s: pixel %zu channel %lld: got %.8g want %.8g (tolerance %.3g)",
                         kern_wmma_conv_config_name(config), text, i / (size_t)o->kp, (long long)ch, got,
                         o->want[i], o->tol[i]);
        }
    }
    free(yb);
    gpu_free(dx), gpu_free(dw), gpu_free(db), gpu_free(dy);
    if (t->residual == RESIDUAL) gpu_free(dz);
    if (dws) gpu_free(dws);
}

#define A(act) ACT_##act
/* n, desc_n, c, h, w, k, r, s, stride h/w, dilation h/w, pads top/left/bottom/right, groups, bias, residual,
 * act, act_alpha, act_beta, alpha, shift */
static const wc_case cases[] = {
    /* 1x1 stride 1 unpadded: the plain-GEMM path; C and K tails, batch below desc.n */
    {2, 3, 13, 7, 9, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(NONE), 0, 0, 1, 0},
    {3, 3, 72, 5, 11, 37, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(RELU), 0, 0, 1, 0},
    {2, 2, 520, 5, 7, 70, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL_IN_PLACE, A(SILU), 0, 0, 0.5f, 0},
    {1, 1, 256, 7, 7, 520, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(RELU), 0, 0, 1, 0},
    {1, 1, 8, 1, 1, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(SOFTPLUS), 0, 0, 1, 0},
    /* 1x1 that are not plain GEMMs: stride 2, padding */
    {2, 2, 24, 9, 11, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(CLIP), 0, 6, 1, 0},
    {2, 2, 16, 6, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, RESIDUAL, A(LEAKY_RELU), 0.1f, 0, 1, 0},
    /* 3x3: C 3 (one 8-channel chunk per tap), stride 2 with TF-style asymmetric pads, dilation */
    {3, 4, 3, 11, 13, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, NO_RESIDUAL, A(RELU), 0, 0, 1, 0},
    {2, 2, 13, 9, 12, 29, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1, true, RESIDUAL, A(TANH), 0, 0, 1, 0},
    {1, 2, 32, 10, 7, 48, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, true, RESIDUAL_IN_PLACE, A(GELU), 0, 0, 1, 0},
    {2, 2, 64, 19, 17, 136, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, RESIDUAL, A(HARD_SIGMOID), 0.2f, 0.5f, 1, 0},
    /* 7x7: the stem shape (C 3, stride 2) and a long reduction (kdim 1960: every split-K config) */
    {2, 2, 3, 23, 19, 64, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 1, true, NO_RESIDUAL, A(RELU), 0, 0, 1, 0},
    {1, 1, 40, 9, 8, 20, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3, 1, true, RESIDUAL, A(SIGMOID), 0, 0, 1, 0},
    /* non-square kernel, unequal strides and dilations, asymmetric pads */
    {2, 3, 16, 11, 10, 8, 5, 3, 2, 1, 1, 2, 2, 1, 1, 2, 1, true, NO_RESIDUAL, A(SELU), 1.6732632f, 1.0507010f, 1, 0},
    /* windows that miss the input entirely: every tap padding, y = act(bias + z) */
    {1, 1, 8, 2, 3, 8, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3, 1, true, RESIDUAL, A(NONE), 0, 0, 1, 0},
    /* groups: 32 of 8 channels, 2 of 16 -> 24, 4 of 16 -> 8 with a long reduction */
    {2, 2, 256, 7, 6, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32, true, RESIDUAL, A(HARD_SWISH), 0, 0, 1, 0},
    {2, 2, 32, 9, 8, 48, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 2, true, NO_RESIDUAL, A(ELU), 0.7f, 0, 1, 0},
    {1, 2, 64, 8, 9, 32, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 4, false, RESIDUAL_IN_PLACE, A(NONE), 0, 0, 1, 0},
    /* 1-D convolutions as H = 1 (wav2vec2): the feature extractor's first layer (C 1, kernel 10,
     * stride 5) and the positional convolution (kernel 128, padding 64, 16 groups of 8) */
    {2, 2, 1, 1, 400, 32, 1, 10, 1, 5, 1, 1, 0, 0, 0, 0, 1, false, NO_RESIDUAL, A(GELU), 0, 0, 1, 0},
    {2, 2, 128, 1, 50, 128, 1, 128, 1, 1, 1, 1, 0, 64, 0, 64, 16, true, NO_RESIDUAL, A(NONE), 0, 0, 1, 0},
    /* the remaining activations */
    {1, 1, 16, 5, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, NO_RESIDUAL, A(SQRT), 0, 0, 1, 4},
    {1, 1, 24, 3, 5, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(LOG), 0, 0, 1, 4},
    {1, 1, 24, 3, 5, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, NO_RESIDUAL, A(RECIPROCAL), 0, 0, 1, 4},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(EXP), 0, 0, 1, 0},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, NO_RESIDUAL, A(ERF), 0, 0, 2, 0},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, RESIDUAL, A(GELU_TANH), 0, 0, 1, 0},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, NO_RESIDUAL, A(NEG), 0, 0, 1, 0},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, RESIDUAL, A(ABS), 0, 0, -1, 0},    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(FLOOR), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(CEIL), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(ROUND), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(SIGN), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(SOFTSIGN), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(MISH), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(CELU), 1.5f, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(THRESHOLDED_RELU), 0.5f, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(SIN), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(COS), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(NOT), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(IS_NAN), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(IS_INF), 1, 1, 1, 0},
    /* alpha 0.2 keeps |v| under 0.9: inside the domains of asin, acos, atanh, clear of tan's poles */
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, NO_RESIDUAL, A(TAN), 0, 0, 0.2f, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(ASIN), 0, 0, 0.2f, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(ACOS), 0, 0, 0.2f, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(ATAN), 0, 0, 1, 0},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, RESIDUAL, A(SINH), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(COSH), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(ASINH), 0, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(ACOSH), 0, 0, 1, 4},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, NO_RESIDUAL, A(ATANH), 0, 0, 0.2f, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, RESIDUAL, A(SHRINK), 0.5f, 0.25f, 1, 0},
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, RESIDUAL, A(SWISH), 1.3f, 0, 1, 0},
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, false, NO_RESIDUAL, A(SCALE), 1.7f, 0, 1, 0},
    /* the erf GELU of a division by sqrt(2) (the fused Div -> Erf -> Add -> Mul -> Mul chain) */
    {1, 1, 16, 5, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, RESIDUAL, A(GELU_OF_DIV), 1.41421356f, 0, 1, 0},
    /* the same Gelu with the division by sqrt(2) in the activation (alpha 1 / sqrt(2)) */
    {1, 1, 16, 4, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, true, NO_RESIDUAL, A(GELU_SCALED), 0.70710678f, 0, 1, 0},
};
#undef A

START_TEST(test_wmma_conv_cases) {
    const int configs = kern_wmma_conv_config_count();
    int ran[64] = {0};
    ck_assert_int_le(configs, 64);
    bool act_seen[ACT_COUNT] = {false};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const wc_case *t = &cases[i];
        act_seen[t->act] = true;
        kern_wmma_conv_desc d;
        wc_desc(t, &d);
        wc_data o;
        make_data(t, &d, 100 + 10 * i, &o);
        for (int cfg = 0; cfg < configs; cfg++) {
            const char *name = kern_wmma_conv_config_name(cfg);
            const tci_status st = kern_wmma_conv_supports(&d, cfg);
            /* the unsplit configs refuse only sizes past 32-bit indexing */
            if (!strstr(name, "splitk")) ck_assert_msg(st == TCI_OK, "%s refuses case %zu: %s", name, i, tci_last_error());
            if (st != TCI_OK) {
                ck_assert_msg(st == TCI_ERR_UNSUPPORTED, "%s: case %zu: %s", name, i, tci_last_error());
                ck_assert_uint_eq(kern_wmma_conv_workspace(&d, cfg), 0);
                continue;
            }
            check_config(t, &d, &o, cfg, false);
            ran[cfg]++;
        }
        free_data(&o);
    }
    for (int a = 0; a < ACT_COUNT; a++) ck_assert_msg(act_seen[a], "no case for activation %d", a);
    for (int cfg = 0; cfg < configs; cfg++) {
        ck_assert_msg(ran[cfg] > 0, "%s ran on no case", kern_wmma_conv_config_name(cfg));
        printf("wmma_conv %-40s checked on %d of %zu cases\n", kern_wmma_conv_config_name(cfg), ran[cfg],
               sizeof cases / sizeof cases[0]);
    }
}
END_TEST

/* Every config captured into a CUDA graph: > 48 KB shared memory (the attribute set during capture),
 * split-K (two kernels), residual in place. */
START_TEST(test_wmma_conv_graph) {
    static const size_t picks[] = {2, 12, 17};
    for (size_t p = 0; p < sizeof picks / sizeof picks[0]; p++) {
        const wc_case *t = &cases[picks[p]];
        kern_wmma_conv_desc d;
        wc_desc(t, &d);
        wc_data o;
        make_data(t, &d, 900 + p, &o);
        for (int cfg = 0; cfg < kern_wmma_conv_config_count(); cfg++)
            if (kern_wmma_conv_supports(&d, cfg) == TCI_OK) check_config(t, &d, &o, cfg, true);
        free_data(&o);
    }
}
END_TEST

START_TEST(test_wmma_conv_configs) {
    const int configs = kern_wmma_conv_config_count();
    ck_assert_int_ge(configs, 8);
    bool f16 = false, f32x8 = false, f8x32 = false, split = false;
    for (int i = 0; i < configs; i++) {
        const char *name = kern_wmma_conv_config_name(i);
        ck_assert_ptr_nonnull(name);
        ck_assert_msg(strncmp(name, "wmma ", 5) == 0, "config name '%s'", name);
        for (int j = 0; j < i; j++) ck_assert_str_ne(name, kern_wmma_conv_config_name(j));
        f16 |= strstr(name, " 16x16x16") != NULL;
        f32x8 |= strstr(name, " 32x8x16") != NULL;
        f8x32 |= strstr(name, " 8x32x16") != NULL;
        split |= strstr(name, "splitk") != NULL;
    }
    ck_assert(f16 && f32x8 && f8x32 && split);
    ck_assert_ptr_null(kern_wmma_conv_config_name(-1));
    ck_assert_ptr_null(kern_wmma_conv_config_name(configs));
}
END_TEST

/* The packed layout is the cuDNN wrapper's, bit for bit, so one device copy serves both. */
START_TEST(test_wmma_conv_pack) {
    kern_wmma_conv_desc d;
    memset(&d, 0, sizeof d);
    d.geom.c = 3, d.geom.k = 2, d.geom.kernel_h = 1, d.geom.kernel_w = 2, d.geom.groups = 1;
    const float w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; /* (K 2, C 3, R 1, S 2) */
    ck_assert_uint_eq(kern_wmma_conv_weight_elements(&d), 8 * 2 * 8);
    uint16_t out[128];
    memset(out, 0xff, sizeof out);
    ck_assert_tci_ok(kern_wmma_conv_pack_weights(&d, w, out));
    for (int k = 0; k < 8; k++)
        for (int s = 0; s < 2; s++)
            for (int c = 0; c < 8; c++)
                ck_assert_uint_eq(out[(k * 2 + s) * 8 + c], k < 2 && c < 3 ? float_to_half(w[(k * 3 + c) * 2 + s]) : 0);

    static const struct { int c, k, r, s, groups; } shapes[] = {
        {13, 29, 3, 3, 1}, {3, 64, 7, 7, 1}, {256, 256, 3, 3, 32}, {32, 48, 3, 2, 2}, {64, 32, 5, 5, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        memset(&d, 0, sizeof d);
        d.geom.c = shapes[i].c, d.geom.k = shapes[i].k, d.geom.kernel_h = shapes[i].r, d.geom.kernel_w = shapes[i].s, d.geom.groups = shapes[i].groups;
        kern_conv_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.geom.n = 1, cd.geom.c = shapes[i].c, cd.geom.h = 16, cd.geom.w = 16, cd.geom.k = shapes[i].k, cd.geom.kernel_h = shapes[i].r, cd.geom.kernel_w = shapes[i].s;
        cd.geom.stride_h = cd.geom.stride_w = cd.geom.dilation_h = cd.geom.dilation_w = 1;
        cd.geom.groups = shapes[i].groups, cd.mode = KERN_CONV_FP16_NHWC8;
        kern_conv_info info;
        ck_assert_tci_ok(kern_conv_shapes(&cd, &info));
        const size_t count = kern_wmma_conv_weight_elements(&d);
        ck_assert_uint_eq(count, info.weight_elements);
        const size_t onnx = (size_t)(d.geom.k * (d.geom.c / d.geom.groups) * d.geom.kernel_h * d.geom.kernel_w);
        float *src = malloc(onnx * sizeof *src);
        gpu_fill_random(src, onnx, 7 + i, -2, 2);
        uint16_t *a = malloc(count * 2), *b = malloc(count * 2);
        memset(a, 0xff, count * 2);
        memset(b, 0x55, count * 2);
        ck_assert_tci_ok(kern_wmma_conv_pack_weights(&d, src, a));
        ck_assert_tci_ok(kern_conv_pack_weights(&cd, src, b));
        ck_assert_msg(memcmp(a, b, count * 2) == 0, "packing differs from kern_conv_pack_weights for shape %zu", i);
        free(src), free(a), free(b);
    }
    d.geom.groups = 3;
    ck_assert_uint_eq(kern_wmma_conv_weight_elements(&d), 0);
    ck_assert_tci_error(kern_wmma_conv_pack_weights(&d, w, out), TCI_ERR_INVALID_ARGUMENT, "bad sizes");
    d.geom.groups = 1;
    ck_assert_tci_error(kern_wmma_conv_pack_weights(&d, NULL, out), TCI_ERR_INVALID_ARGUMENT, "NULL pointer");
    ck_assert_tci_error(kern_wmma_conv_pack_weights(NULL, w, out), TCI_ERR_INVALID_ARGUMENT, "NULL desc");
}
END_TEST

static int config_named(const char *name) {
    for (int i = 0; i < kern_wmma_conv_config_count(); i++)
        if (strcmp(kern_wmma_conv_config_name(i), name) == 0) return i;
    ck_abort_msg("no config '%s'", name);
    return -1;
}

START_TEST(test_wmma_conv_errors) {
    static const unsigned char zeros[1 << 16];
    char *buf = gpu_upload(zeros, sizeof zeros);
    kern_wmma_conv_desc d;
    const wc_case t = {1, 2, 8, 4, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, NO_RESIDUAL, ACT_NONE, 0, 0, 1, 0};
    wc_desc(&t, &d); /* x, y: 4*4*8 halves = 256 bytes at n 1; w: 8*9*8 halves = 1152 bytes */
    char *x = buf, *y = buf + 4096, *w = buf + 8192, *ws = buf + 16384;
    const int plain = config_named("wmma 64x64x32 w4 16x16x16 s4");
    const int split = config_named("wmma 64x64x32 w4 16x16x16 s4 splitk2");
    ck_assert_tci_ok(kern_wmma_conv_run(&d, plain, 1, x, w, NULL, NULL, y, NULL, 0, 0));
    const size_t need = kern_wmma_conv_workspace(&d, split);
    ck_assert_uint_gt(need, 0);
    ck_assert_uint_le(need, 49152); /* ws .. end of buf */
    ck_assert_tci_ok(kern_wmma_conv_run(&d, split, 1, x, w, NULL, NULL, y, ws, need, 0));
    gpu_sync();
    ck_assert_tci_error(kern_wmma_conv_run(&d, split, 1, x, w, NULL, NULL, y, ws, need - 1, 0),
                        TCI_ERR_INVALID_ARGUMENT, "workspace bytes");
    ck_assert_tci_error(kern_wmma_conv_run(&d, split, 1, x, w, NULL, NULL, y, w, need, 0), TCI_ERR_INVALID_ARGUMENT,
                        "workspace overlaps");
    ck_assert_tci_error(kern_wmma_conv_run(NULL, plain, 1, x, w, NULL, NULL, y, NULL, 0, 0), TCI_ERR_INVALID_ARGUMENT,
                        "NULL desc");
    ck_assert_tci_error(kern_wmma_conv_run(&d, -1, 1, x, w, NULL, NULL, y, NULL, 0, 0), TCI_ERR_INVALID_ARGUMENT,
                        "unknown config -1");
    ck_assert_tci_error(kern_wmma_conv_supports(&d, kern_wmma_conv_config_count()), TCI_ERR_INVALID_ARGUMENT,
                        "unknown config");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 3, x, w, NULL, NULL, y, NULL, 0, 0), TCI_ERR_INVALID_ARGUMENT,
                        "batch 3 outside 1..2");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 1, x, w, NULL, NULL, NULL, NULL, 0, 0),
                        TCI_ERR_INVALID_ARGUMENT, "NULL buffer");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 1, x + 2, w, NULL, NULL, y, NULL, 0, 0),
                        TCI_ERR_INVALID_ARGUMENT, "16-byte aligned");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 1, x, w, buf + 40004, NULL, y, NULL, 0, 0),
                        TCI_ERR_INVALID_ARGUMENT, "16-byte aligned");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 1, x, w, NULL, NULL, x + 128, NULL, 0, 0),
                        TCI_ERR_INVALID_ARGUMENT, "y overlaps x");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 1, x, y + 64, NULL, NULL, y, NULL, 0, 0),
                        TCI_ERR_INVALID_ARGUMENT, "y overlaps w");
    ck_assert_tci_error(kern_wmma_conv_run(&d, plain, 1, x, w, NULL, y + 16, y, NULL, 0, 0), TCI_ERR_INVALID_ARGUMENT,
                        "partly overlaps");
    /* split-K where the reduction is shorter than the splits */
    ck_assert_tci_error(kern_wmma_conv_supports(&d, config_named("wmma 64x64x32 w4 16x16x16 s4 splitk8")),
                        TCI_ERR_UNSUPPORTED, "fewer than 8 splits");
    ck_assert_uint_eq(kern_wmma_conv_workspace(&d, config_named("wmma 64x64x32 w4 16x16x16 s4 splitk8")), 0);
    /* split-K where the grid is already large */
    kern_wmma_conv_desc big = d;
    big.geom.n = 64, big.geom.h = big.geom.w = big.geom.out_h = big.geom.out_w = 56, big.geom.c = big.geom.k = 256;
    ck_assert_tci_error(kern_wmma_conv_supports(&big, split), TCI_ERR_UNSUPPORTED, "already fill the GPU");
    ck_assert_tci_ok(kern_wmma_conv_supports(&big, plain));
    big.geom.n = 1 << 20; /* x of 2^40 elements */
    ck_assert_tci_error(kern_wmma_conv_supports(&big, plain), TCI_ERR_UNSUPPORTED, "32-bit indexing");

    kern_wmma_conv_desc bad = d;
    bad.act = (act_kind)99;
    ck_assert_tci_error(kern_wmma_conv_supports(&bad, plain), TCI_ERR_INVALID_ARGUMENT, "unknown activation 99");
    bad = d, bad.geom.groups = 2; /* c 8 / 2 groups = 4 channels a group */
    ck_assert_tci_error(kern_wmma_conv_supports(&bad, plain), TCI_ERR_INVALID_ARGUMENT, "multiples of 8");
    bad = d, bad.geom.groups = 3;
    ck_assert_tci_error(kern_wmma_conv_supports(&bad, plain), TCI_ERR_INVALID_ARGUMENT, "must divide");
    bad = d, bad.geom.pad_left = -1;
    ck_assert_tci_error(kern_wmma_conv_supports(&bad, plain), TCI_ERR_INVALID_ARGUMENT, "negative pads");
    bad = d, bad.geom.dilation_h = 0;
    ck_assert_tci_error(kern_wmma_conv_supports(&bad, plain), TCI_ERR_INVALID_ARGUMENT, "must be >= 1");
    bad = d, bad.geom.out_w = 0;
    ck_assert_tci_error(kern_wmma_conv_supports(&bad, plain), TCI_ERR_INVALID_ARGUMENT, "sizes must be >= 1");
    ck_assert_uint_eq(kern_wmma_conv_workspace(&bad, split), 0);
    ck_assert_uint_eq(kern_wmma_conv_workspace(NULL, split), 0);
    gpu_free(buf);
}
END_TEST

/* ---- timing (TCI_WMMA_CONV_BENCH=1): information only, never a pass/fail criterion ---- */

typedef struct {
    const char *what;
    int64_t c, h, w, k, r, stride, pad;
} wc_layer;

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

enum { BENCH_RUNS = 21, GRAPH_BATCH = 20, GRAPH_RUNS = 11 };

static void bench_run(kern_wmma_conv_desc *d, int cfg, int64_t n, void *x, void *w, void *b, void *y, void *ws,
                      size_t ws_bytes, const kern_conv_plan *lib_plan, cudnnHandle_t handle, cudaStream_t stream) {
    if (lib_plan)
        ck_assert_tci_ok(kern_conv_run(lib_plan, handle, stream, (int)n, x, w, b, NULL, y, ws, ws_bytes));
    else
        ck_assert_tci_ok(kern_wmma_conv_run(d, cfg, n, x, w, b, NULL, y, ws, ws_bytes, stream));
}

/* GPU time per run as the engine sees it: GRAPH_BATCH runs captured in one CUDA graph, the median of
 * GRAPH_RUNS replays divided by GRAPH_BATCH (no launch overhead from the host). */
static float graph_ms(kern_wmma_conv_desc *d, int cfg, int64_t n, void *x, void *w, void *b, void *y, void *ws,
                      size_t ws_bytes, const kern_conv_plan *lib_plan, cudnnHandle_t handle) {
    cudaStream_t stream;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    ck_assert_int_eq(cudaStreamCreate(&stream), cudaSuccess);
    ck_assert_int_eq(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (int i = 0; i < GRAPH_BATCH; i++) bench_run(d, cfg, n, x, w, b, y, ws, ws_bytes, lib_plan, handle, stream);
    ck_assert_int_eq(cudaStreamEndCapture(stream, &g), cudaSuccess);
    ck_assert_int_eq(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    cudaEvent_t ev[GRAPH_RUNS + 1];
    for (int i = 0; i <= GRAPH_RUNS; i++) ck_assert_int_eq(cudaEventCreate(&ev[i]), cudaSuccess);
    for (int i = 0; i < 2 + GRAPH_RUNS; i++) {
        if (i >= 2) ck_assert_int_eq(cudaEventRecord(ev[i - 2], stream), cudaSuccess);
        ck_assert_int_eq(cudaGraphLaunch(exec, stream), cudaSuccess);
    }
    ck_assert_int_eq(cudaEventRecord(ev[GRAPH_RUNS], stream), cudaSuccess);
    ck_assert_int_eq(cudaEventSynchronize(ev[GRAPH_RUNS]), cudaSuccess);
    float t[GRAPH_RUNS];
    for (int i = 0; i < GRAPH_RUNS; i++) ck_assert_int_eq(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]), cudaSuccess);
    for (int i = 0; i <= GRAPH_RUNS; i++) cudaEventDestroy(ev[i]);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(stream);
    qsort(t, GRAPH_RUNS, sizeof t[0], cmp_float);
    return t[GRAPH_RUNS / 2] / GRAPH_BATCH;
}

/* Median of BENCH_RUNS back-to-back runs after 3 warm-ups, each run between its own events (ms). */
static float median_ms(kern_wmma_conv_desc *d, int cfg, int64_t n, void *x, void *w, void *b, void *y, void *ws,
                       size_t ws_bytes, const kern_conv_plan *lib_plan, cudnnHandle_t handle) {
    cudaEvent_t ev[BENCH_RUNS + 1];
    for (int i = 0; i <= BENCH_RUNS; i++) ck_assert_int_eq(cudaEventCreate(&ev[i]), cudaSuccess);
    for (int i = 0; i < 3 + BENCH_RUNS; i++) {
        if (i >= 3) ck_assert_int_eq(cudaEventRecord(ev[i - 3], 0), cudaSuccess);
        bench_run(d, cfg, n, x, w, b, y, ws, ws_bytes, lib_plan, handle, 0);
    }
    ck_assert_int_eq(cudaEventRecord(ev[BENCH_RUNS], 0), cudaSuccess);
    ck_assert_int_eq(cudaEventSynchronize(ev[BENCH_RUNS]), cudaSuccess);
    float t[BENCH_RUNS];
    for (int i = 0; i < BENCH_RUNS; i++) ck_assert_int_eq(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]), cudaSuccess);
    for (int i = 0; i <= BENCH_RUNS; i++) cudaEventDestroy(ev[i]);
    qsort(t, BENCH_RUNS, sizeof t[0], cmp_float);
    return t[BENCH_RUNS / 2];
}

static void bench_layer(const wc_layer *l, int64_t n, cudnnHandle_t handle) {
    kern_wmma_conv_desc d;
    memset(&d, 0, sizeof d);
    d.geom.n = n, d.geom.c = l->c, d.geom.h = l->h, d.geom.w = l->w, d.geom.k = l->k, d.geom.kernel_h = d.geom.kernel_w = l->r;
    d.geom.out_h = out_size(l->h, l->pad, l->pad, l->r, l->stride, 1), d.geom.out_w = out_size(l->w, l->pad, l->pad, l->r, l->stride, 1);
    d.geom.pad_top = d.geom.pad_left = l->pad, d.geom.stride_h = d.geom.stride_w = l->stride, d.geom.dilation_h = d.geom.dilation_w = 1;
    d.geom.groups = 1, d.alpha = 1, d.act = ACT_RELU;
    const int64_t cp = round8(l->c), kp = round8(l->k);
    const size_t x_count = (size_t)(n * l->h * l->w * cp), y_count = (size_t)(n * d.geom.out_h * d.geom.out_w * kp);
    const size_t w_count = kern_wmma_conv_weight_elements(&d);
    const double flops = 2.0 * (double)(n * d.geom.out_h * d.geom.out_w) * (double)l->k * (double)(l->c * l->r * l->r);
    uint16_t *xb, *wb = malloc(w_count * 2);
    float *xv;
    random_nhwc8(n * l->h * l->w, l->c, 5, -1, 1, &xb, &xv);
    float *wf = malloc((size_t)(l->k * l->c * l->r * l->r) * sizeof *wf);
    gpu_fill_random(wf, (size_t)(l->k * l->c * l->r * l->r), 6, -0.1f, 0.1f);
    ck_assert_tci_ok(kern_wmma_conv_pack_weights(&d, wf, wb));
    float *bias = calloc((size_t)kp, sizeof *bias);
    gpu_fill_random(bias, (size_t)l->k, 8, -0.5f, 0.5f);
    void *dx = gpu_upload(xb, x_count * 2), *dw = gpu_upload(wb, w_count * 2), *dy = gpu_upload(NULL, y_count * 2);
    void *db = gpu_upload(bias, (size_t)kp * 4);

    printf("bench %-26s n%-3lld %8.2f GFLOP:", l->what, (long long)n, flops * 1e-9);
    float best = INFINITY, best_eager = INFINITY;
    int best_cfg = -1;
    for (int cfg = 0; cfg < kern_wmma_conv_config_count(); cfg++) {
        if (kern_wmma_conv_supports(&d, cfg) != TCI_OK) {
            printf(" %d:-", cfg);
            continue;
        }
        const size_t ws_bytes = kern_wmma_conv_workspace(&d, cfg);
        void *ws = ws_bytes ? gpu_upload(NULL, ws_bytes) : NULL;
        const float ms = graph_ms(&d, cfg, n, dx, dw, db, dy, ws, ws_bytes, NULL, NULL);
        const float eager = median_ms(&d, cfg, n, dx, dw, db, dy, ws, ws_bytes, NULL, NULL);
        if (ws) gpu_free(ws);
        printf(" %d:%.1f", cfg, ms * 1e3);
        if (ms < best) best = ms, best_cfg = cfg, best_eager = eager;
    }
    printf(" us\n");

    /* cuDNN through tcinfer's wrapper on the same data (fp16 bias, fused ReLU), for comparison */
    char cudnn_text[128] = "cuDNN: n/a";
    kern_conv_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.geom.n = (int)n, cd.geom.c = (int)l->c, cd.geom.h = (int)l->h, cd.geom.w = (int)l->w, cd.geom.k = (int)l->k, cd.geom.kernel_h = cd.geom.kernel_w = (int)l->r;
    cd.geom.pad_top = cd.geom.pad_left = cd.geom.pad_bottom = cd.geom.pad_right = (int)l->pad;
    cd.geom.stride_h = cd.geom.stride_w = (int)l->stride, cd.geom.dilation_h = cd.geom.dilation_w = 1, cd.geom.groups = 1;
    cd.activation = KERN_CONV_ACT_RELU, cd.has_bias = 1, cd.mode = KERN_CONV_FP16_NHWC8;
    cd.workspace_limit = (size_t)256 << 20;
    uint16_t *bias_h = malloc((size_t)kp * 2);
    gpu_to_half(bias, bias_h, (size_t)kp);
    void *dbh = gpu_upload(bias_h, (size_t)kp * 2), *cws = gpu_upload(NULL, cd.workspace_limit);
    kern_conv_scratch scratch = {dx, dw, dbh, NULL, dy, cws, cd.workspace_limit};
    kern_conv_plan *lib_plan = NULL;
    if (kern_conv_create(handle, 0, &cd, &scratch, &lib_plan) == TCI_OK) {
        kern_conv_info info;
        kern_conv_get_info(lib_plan, &info);
        const float ms = graph_ms(NULL, 0, n, dx, dw, dbh, dy, cws, cd.workspace_limit, lib_plan, handle);
        const float eager = median_ms(NULL, 0, n, dx, dw, dbh, dy, cws, cd.workspace_limit, lib_plan, handle);
        snprintf(cudnn_text, sizeof cudnn_text, "cuDNN %.1f us graph, %.1f eager (%s)", ms * 1e3, eager * 1e3,
                 info.algorithm);
        kern_conv_destroy(lib_plan);
    }
    printf("bench %-26s n%-3lld best %s: %.1f us graph (%.1f eager), %.1f TFLOP/s; %s\n", l->what, (long long)n,
           best_cfg >= 0 ? kern_wmma_conv_config_name(best_cfg) : "none", best * 1e3, best_eager * 1e3,
           flops / (best * 1e-3) * 1e-12, cudnn_text);
    free(xb), free(xv), free(wb), free(wf), free(bias), free(bias_h);
    gpu_free(dx), gpu_free(dw), gpu_free(dy), gpu_free(db), gpu_free(dbh), gpu_free(cws);
}

START_TEST(test_wmma_conv_timing) {
    const char *env = getenv("TCI_WMMA_CONV_BENCH");
    if (!env || strcmp(env, "1") != 0) return;
    static const wc_layer layers[] = {
        {"r50 1x1 56x56 64->256", 64, 56, 56, 256, 1, 1, 0},
        {"r50 3x3 56x56 64->64", 64, 56, 56, 64, 3, 1, 1},
        {"r50 1x1 14x14 1024->256", 1024, 14, 14, 256, 1, 1, 0},
        {"r50 1x1 7x7 2048->512", 2048, 7, 7, 512, 1, 1, 0},
        {"r50 3x3 7x7 512->512", 512, 7, 7, 512, 3, 1, 1},
        {"r50 3x3/2 28x28 128->128", 128, 28, 28, 128, 3, 2, 1},
        {"r50 stem 7x7/2 224 3->64", 3, 224, 224, 64, 7, 2, 3},
        {"mbv2 1x1 56x56 24->144", 24, 56, 56, 144, 1, 1, 0},
        {"mbv2 1x1 14x14 384->64", 384, 14, 14, 64, 1, 1, 0},
        {"mbv2 1x1 7x7 320->1280", 320, 7, 7, 1280, 1, 1, 0},
    };
    cudnnHandle_t handle;
    ck_assert_int_eq(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
    printf("bench configs:");
    for (int i = 0; i < kern_wmma_conv_config_count(); i++) printf(" %d=\"%s\"", i, kern_wmma_conv_config_name(i));
    printf("\nbench per layer: us per run of each config inside a CUDA graph (- where unsupported), fused bias + "
           "ReLU; eager: median of single runs between events, host launch included\n");
    for (int b = 0; b < 2; b++)
        for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) bench_layer(&layers[i], b ? 256 : 1, handle);
    cudnnDestroy(handle);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_wmma_conv");
    Suite *s = suite_create("gpu_wmma_conv");
    TCase *tc = tcase_create("wmma_conv");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_wmma_conv_configs);
    tcase_add_test(tc, test_wmma_conv_pack);
    tcase_add_test(tc, test_wmma_conv_errors);
    tcase_add_test(tc, test_wmma_conv_cases);
    tcase_add_test(tc, test_wmma_conv_graph);
    tcase_add_test(tc, test_wmma_conv_timing);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
