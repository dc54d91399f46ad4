/* The WMMA GEMMs against a double-precision CPU reference: every fp16 tile configuration with
 * every transpose combination, tails, batches with broadcast, the fused epilogue with every
 * activation, every other WMMA type and fragment shape, graph capture and the error paths.
 * Timing against cuBLAS lives in bench/bench_gemm.c. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/wmma_gemm.h"
#include "layers/op.h"

/* Shared by the tests of one process (CK_FORK=no); made in the fixture. */
static cudaStream_t g_stream;

static void setup(void) {
    /* a blocking stream: ordered after the harness's uploads and memsets on the legacy stream */
    ck_assert_int_eq(cudaStreamCreate(&g_stream), cudaSuccess);
}

static void teardown(void) { cudaStreamDestroy(g_stream); }

/* ------------------------------------------------------------------ host helpers ---- */

typedef enum { IN_F16, IN_BF16, IN_F32, IN_S8, IN_U8, IN_F64 } in_type;

static size_t in_size(in_type t) {
    switch (t) {
    case IN_F16:
    case IN_BF16: return 2;
    case IN_F32: return 4;
    case IN_S8:
    case IN_U8: return 1;
    case IN_F64: return 8;
    }
    return 0;
}

static uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (no NaNs here) */
    return (uint16_t)(u >> 16);
}

static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double *random_doubles(size_t n, uint64_t seed, double lo, double hi) {
    float *f = malloc((n ? n : 1) * sizeof *f), *g = malloc((n ? n : 1) * sizeof *g);
    double *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert(f && g && v);
    gpu_fill_random(f, n, seed, 0.0f, 1.0f);
    gpu_fill_random(g, n, seed + 1000003u, 0.0f, 1.0f);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * ((double)f[i] + (double)g[i] * 0x1p-24);
    free(f), free(g);
    return v;
}

/* Values as the GPU will see them: rounded to the input type (tf32 is rounded on the GPU, so
 * fp32 inputs stay as they are: the tolerance covers that rounding). */
static void quantize(double *v, size_t n, in_type t) {
    for (size_t i = 0; i < n; i++) {
        switch (t) {
        case IN_F16: v[i] = half_to_float(float_to_half((float)v[i])); break;
        case IN_BF16: v[i] = bf16_to_float(float_to_bf16((float)v[i])); break;
        case IN_F32: v[i] = (float)v[i]; break;
        case IN_S8: v[i] = floor(v[i] * 256.0) - 128.0; break;  /* from U(0,1): -128..127 */
        case IN_U8: v[i] = floor(v[i] * 256.0); break;          /* 0..255 */
        case IN_F64: break;
        }
    }
}

static void *pack_inputs(const double *v, size_t n, in_type t) {
    unsigned char *out = malloc((n ? n : 1) * in_size(t));
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++) {
        switch (t) {
        case IN_F16: ((uint16_t *)out)[i] = float_to_half((float)v[i]); break;
        case IN_BF16: ((uint16_t *)out)[i] = float_to_bf16((float)v[i]); break;
        case IN_F32: ((float *)out)[i] = (float)v[i]; break;
        case IN_S8: ((signed char *)out)[i] = (signed char)v[i]; break;
        case IN_U8: out[i] = (unsigned char)v[i]; break;
        case IN_F64: ((double *)out)[i] = v[i]; break;
        }
    }
    return out;
}

static double out_value(const void *buf, size_t i, tci_dtype t) {
    switch (t) {
    case TCI_DTYPE_FLOAT16: return half_to_float(((const uint16_t *)buf)[i]);
    case TCI_DTYPE_FLOAT: return ((const float *)buf)[i];
    case TCI_DTYPE_INT32: return ((const int32_t *)buf)[i];
    case TCI_DTYPE_DOUBLE: return ((const double *)buf)[i];
    default: ck_abort_msg("bad out dtype"); return 0;
    }
}

/* How the kernel accumulates, for the error bound of the dot product. Products of fp16, bf16,
 * tf32 and fp64 inputs are exact in the accumulator's format; a tensor-core MMA of depth kd (16
 * for fp16/bf16/int8, 8 for tf32, 4 for fp64) adds its kd products to the accumulator and
 * rounds once, so an output sees ceil(K / kd) roundings, each at most one unit roundoff of a
 * partial sum no larger than S = sum |a_l b_l|. We allow twice the unit roundoff per rounding
 * (the tensor cores' internal adds are not IEEE round-to-nearest) and one rounding more:
 *   bound = (ceil(K / kd) + 1) * 2u * S. */
typedef enum {
    ACC_F32,  /* fp32 accumulator (u = 2^-24), kd 16 */
    ACC_F16,  /* fp16 accumulator (u = 2^-11), kd 16 */
    ACC_TF32, /* fp32 accumulator, kd 8, plus the rounding of both fp32 operands to tf32 on the
                 device (2^-11 relative each): 2^-10 * S more */
    ACC_F64,  /* fp64 accumulator (u = 2^-53), kd 4 */
    ACC_EXACT /* integers: exact */
} acc_model;

static double acc_bound(acc_model model, int64_t k, double s) {
    double steps16 = (double)((k + 15) / 16 + 1), steps8 = (double)((k + 7) / 8 + 1);
    double steps4 = (double)((k + 3) / 4 + 1);
    switch (model) {
    case ACC_F32: return steps16 * 0x1p-23 * s;
    case ACC_F16: return steps16 * 0x1p-10 * s;
    case ACC_TF32: return 0x1p-10 * s + steps8 * 0x1p-23 * s;
    case ACC_F64: return steps4 * 0x1p-52 * s;
    case ACC_EXACT: return 0.0;
    }
    return 0.0;
}

/* ------------------------------------------------------------------ one problem ---- */

typedef struct {
    char name[96];
    kern_wmma_gemm_desc desc; /* leading dimensions and strides explicit */
    in_type in;
    int inplace; /* c == d: D starts as C */
    size_t na, nb, nc, out_es;
    double *a, *b, *c;
    float *bias;
    void *da, *db, *dc, *dbias, *dd;
    void *d_init; /* host copy of D's bytes before a run (poison, or C when in place) */
    double *x;    /* reference before the activation */
    double *s;    /* sum |a_l b_l| */
    double *ac, *epi_mag; /* alpha*acc, |alpha acc| + |beta c| + |bias| */
} problem;

typedef struct {
    int64_t m, n, k;
    int ta, tb;
    int batch, bcast_a, bcast_b;
    int round8;     /* leading dimensions rounded up to multiples of 8 (the fp16 family) */
    int64_t ld_pad; /* extra elements per stored row */
    float alpha, beta;
    int bias;
    act_kind act;
    float act_alpha, act_beta;
    tci_dtype out;
    int inplace;
} shape;

static int64_t round_up8(int64_t v) { return (v + 7) / 8 * 8; }

static void problem_make(problem *p, const char *name, const shape *sh, in_type in,
                         uint64_t seed) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->in = in;
    p->inplace = sh->inplace;
    kern_wmma_gemm_desc *d = &p->desc;
    kern_wmma_gemm_desc_init(d, sh->m, sh->n, sh->k, sh->ta, sh->tb);
    int batch = sh->batch ? sh->batch : 1;
    d->batch = batch;
    int64_t a_rows = sh->ta ? sh->k : sh->m, a_cols = sh->ta ? sh->m : sh->k;
    int64_t b_rows = sh->tb ? sh->n : sh->k, b_cols = sh->tb ? sh->k : sh->n;
    d->lda = (sh->round8 ? round_up8(a_cols) : a_cols) + sh->ld_pad;
    d->ldb = (sh->round8 ? round_up8(b_cols) : b_cols) + sh->ld_pad;
    d->ldc = (sh->round8 ? round_up8(sh->n) : sh->n) + sh->ld_pad;
    /* a gap of 8 elements after each D matrix: checked to stay unwritten */
    d->stride_a = sh->bcast_a ? 0 : a_rows * d->lda;
    d->stride_b = sh->bcast_b ? 0 : b_rows * d->ldb;
    d->stride_c = sh->m * d->ldc + 8;
    d->alpha = sh->alpha, d->beta = sh->beta, d->has_bias = sh->bias;
    d->act = sh->act, d->act_alpha = sh->act_alpha, d->act_beta = sh->act_beta;
    d->out_dtype = sh->out;
    p->na = (size_t)(a_rows * d->lda * (sh->bcast_a ? 1 : batch));
    p->nb = (size_t)(b_rows * d->ldb * (sh->bcast_b ? 1 : batch));
    p->nc = (size_t)(d->stride_c * batch);
    p->out_es = tci_dtype_size(sh->out);
    int integer = in == IN_S8 || in == IN_U8;
    p->a = random_doubles(p->na, seed, integer ? 0.0 : -1.0, 1.0);
    p->b = random_doubles(p->nb, seed + 1, integer ? 0.0 : -1.0, 1.0);
    p->c = random_doubles(p->nc, seed + 2, -1.0, 1.0);
    quantize(p->a, p->na, in);
    quantize(p->b, p->nb, in);
    /* C holds the output type */
    if (sh->out == TCI_DTYPE_FLOAT16) quantize(p->c, p->nc, IN_F16);
    if (sh->out == TCI_DTYPE_FLOAT) quantize(p->c, p->nc, IN_F32);
    p->bias = malloc((size_t)sh->n * sizeof *p->bias);
    ck_assert_ptr_nonnull(p->bias);
    gpu_fill_random(p->bias, (size_t)sh->n, seed + 3, -1.0f, 1.0f);

    void *ha = pack_inputs(p->a, p->na, in), *hb = pack_inputs(p->b, p->nb, in);
    unsigned char *hc = malloc(p->nc * p->out_es);
    ck_assert_ptr_nonnull(hc);
    for (size_t i = 0; i < p->nc; i++) {
        switch (sh->out) {
        case TCI_DTYPE_FLOAT16: ((uint16_t *)hc)[i] = float_to_half((float)p->c[i]); break;
        case TCI_DTYPE_FLOAT: ((float *)hc)[i] = (float)p->c[i]; break;
        case TCI_DTYPE_DOUBLE: ((double *)hc)[i] = p->c[i]; break;
        default: ((int32_t *)hc)[i] = 0; break;
        }
    }
    p->da = gpu_upload(ha, p->na * in_size(in));
    p->db = gpu_upload(hb, p->nb * in_size(in));
    p->dc = gpu_upload(hc, p->nc * p->out_es);
    p->dbias = gpu_upload(p->bias, (size_t)sh->n * sizeof(float));
    p->dd = gpu_upload(NULL, p->nc * p->out_es);
    p->d_init = malloc(p->nc * p->out_es);
    ck_assert_ptr_nonnull(p->d_init);
    if (sh->inplace) {
        memcpy(p->d_init, hc, p->nc * p->out_es);
    } else {
        /* NaN for the float types; for int32 0x7f7f7f7f, far beyond any 8-bit product sum */
        memset(p->d_init, sh->out == TCI_DTYPE_INT32 ? 0x7f : 0xff, p->nc * p->out_es);
    }
    free(ha), free(hb), free(hc);

    size_t count = (size_t)batch * (size_t)(sh->m * sh->n);
    p->x = malloc(count * sizeof *p->x), p->s = malloc(count * sizeof *p->s);
    p->ac = malloc(count * sizeof *p->ac), p->epi_mag = malloc(count * sizeof *p->epi_mag);
    ck_assert(p->x && p->s && p->ac && p->epi_mag);
    for (int bi = 0; bi < batch; bi++) {
        const double *ab = p->a + (size_t)(bi * d->stride_a), *bb = p->b + (size_t)(bi * d->stride_b);
        for (int64_t i = 0; i < sh->m; i++)
            for (int64_t j = 0; j < sh->n; j++) {
                double acc = 0.0, s = 0.0;
                for (int64_t l = 0; l < sh->k; l++) {
                    double av = sh->ta ? ab[l * d->lda + i] : ab[i * d->lda + l];
                    double bv = sh->tb ? bb[j * d->ldb + l] : bb[l * d->ldb + j];
                    acc += av * bv;
                    s += fabs(av * bv);
                }
                size_t o = ((size_t)bi * (size_t)sh->m + (size_t)i) * (size_t)sh->n + (size_t)j;
                double cv = sh->beta != 0.0f ? p->c[(size_t)(bi * d->stride_c + i * d->ldc + j)] : 0;
                double bv = sh->bias ? p->bias[j] : 0.0;
                p->ac[o] = sh->alpha * acc;
                p->x[o] = sh->alpha * acc + sh->beta * cv + bv;
                p->s[o] = s;
                p->epi_mag[o] = fabs(sh->alpha * acc) + fabs(sh->beta * cv) + fabs(bv);
            }
    }
}

static void problem_free(problem *p) {
    gpu_free(p->da), gpu_free(p->db), gpu_free(p->dc), gpu_free(p->dbias), gpu_free(p->dd);
    free(p->a), free(p->b), free(p->c), free(p->bias), free(p->d_init);
    free(p->x), free(p->s), free(p->ac), free(p->epi_mag);
}

/* Which kernel: config >= 0 of the fp16 family, or a variant. */
typedef struct {
    int config;
    int variant; /* used when config < 0 */
} kernel_id;

static tci_status problem_launch(problem *p, kernel_id kid) {
    const void *c = p->desc.beta != 0.0f ? (p->inplace ? p->dd : p->dc) : NULL;
    const float *bias = p->desc.has_bias ? p->dbias : NULL;
    if (kid.config >= 0)
        return kern_wmma_gemm_run(&p->desc, kid.config, p->da, p->db, bias, c, p->dd, g_stream);
    return kern_wmma_variant_run(&p->desc, (kern_wmma_variant)kid.variant, p->da, p->db, bias, c,
                                 p->dd, g_stream);
}

/* Runs the kernel on freshly poisoned D and checks every element of D, the padding and gaps
 * included, against the reference and its error bound. */
static void problem_check(problem *p, kernel_id kid, acc_model model) {
    const kern_wmma_gemm_desc *d = &p->desc;
    size_t bytes = p->nc * p->out_es;
    ck_assert_int_eq(cudaMemcpy(p->dd, p->d_init, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    tci_status st = problem_launch(p, kid);
    const char *kname = kid.config >= 0 ? kern_wmma_gemm_config_name(kid.config)
                                        : kern_wmma_variant_name((kern_wmma_variant)kid.variant);
    ck_assert_msg(st == TCI_OK, "%s [%s]: run: %s", p->name, kname, tci_last_error());
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    unsigned char *got = malloc(bytes);
    ck_assert_ptr_nonnull(got);
    gpu_download(got, p->dd, bytes);

    /* Error bound of one element (see acc_model for the dot product):
     * - the epilogue's fp32 multiply-adds (alpha*acc, +beta*C, +bias): 4 roundings of 2^-24
     *   relative to the largest term (2^-53 for fp64);
     * - the activation: the reference function's change over that input error, plus 8 ulp of
     *   fp32 (relative to the larger of input and output) for the device's math functions;
     * - the output rounding: half an ulp, 2^-11 relative for fp16 (2^-25 absolute in the
     *   subnormal range), 2^-24 for fp32, 2^-53 for fp64; integers exact. */
    double out_rel = d->out_dtype == TCI_DTYPE_FLOAT16 ? 0x1p-11
                     : d->out_dtype == TCI_DTYPE_FLOAT ? 0x1p-24
                     : d->out_dtype == TCI_DTYPE_DOUBLE ? 0x1p-53 : 0.0;
    double out_abs = d->out_dtype == TCI_DTYPE_FLOAT16 ? 0x1p-25 : 0.0;
    double epi_rel = d->out_dtype == TCI_DTYPE_DOUBLE ? 0x1p-51
                     : d->out_dtype == TCI_DTYPE_INT32  ? 0.0 : 0x1p-22;
    int64_t m = d->m, n = d->n;
    for (int bi = 0; bi < d->batch; bi++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < d->stride_c - i * d->ldc && j < d->ldc + 8; j++) {
                size_t o = (size_t)(bi * d->stride_c + i * d->ldc + j);
                if (j >= n) {
                    /* padding columns and the gap after the matrix keep their bytes */
                    if (i < m - 1 && j >= d->ldc) break;
                    ck_assert_msg(memcmp(got + o * p->out_es,
                                         (unsigned char *)p->d_init + o * p->out_es,
                                         p->out_es) == 0,
                                  "%s [%s]: D[%d][%lld][%lld] written outside the matrix", p->name,
                                  kname, bi, (long long)i, (long long)j);
                    continue;
                }
                size_t r = ((size_t)bi * (size_t)m + (size_t)i) * (size_t)n + (size_t)j;
                double g = out_value(got, o, d->out_dtype);
                double x = p->x[r];
                double ex = fabs(d->alpha) * acc_bound(model, d->k, p->s[r]) +
                            epi_rel * p->epi_mag[r];
                double y = gpu_act_reference(d->act, x, d->act_alpha, d->act_beta);
                double y_lo = gpu_act_reference(d->act, x - ex, d->act_alpha, d->act_beta);
                double y_hi = gpu_act_reference(d->act, x + ex, d->act_alpha, d->act_beta);
                if (!isfinite(y) || !isfinite(y_lo) || !isfinite(y_hi)) {
                    /* outside a function's domain (sqrt, log of negatives): NaN on both sides;
                     * within the error bound of the domain's edge the outcome is open */
                    if (isnan(y) && isnan(y_lo) && isnan(y_hi))
                        ck_assert_msg(isnan(g), "%s [%s]: D[%d][%lld][%lld] = %g, want NaN",
                                      p->name, kname, bi, (long long)i, (long long)j, g);
                    continue;
                }
                double ey = fmax(fabs(y_hi - y), fabs(y - y_lo));
                if (d->act != ACT_NONE) ey += 8 * 0x1p-24 * fmax(fabs(x), fabs(y));
                double tol = ey * (1.0 + out_rel) + out_rel * fabs(y) + out_abs;
                /* beyond fp16's range (65504 and half an ulp) the rounding gives infinity */
                if (d->out_dtype == TCI_DTYPE_FLOAT16 && isinf(g) && fabs(y) + tol >= 65504.0 &&
                    (g > 0) == (y > 0))
                    continue;
                ck_assert_msg(fabs(g - y) <= tol,
                              "%s [%s]: D[%d][%lld][%lld] = %.9g, want %.9g (tolerance %.3g)",
                              p->name, kname, bi, (long long)i, (long long)j, g, y, tol);
            }
    free(got);
}

static shape base_shape(int64_t m, int64_t n, int64_t k, int ta, int tb) {
    shape s;
    memset(&s, 0, sizeof s);
    s.m = m, s.n = n, s.k = k, s.ta = ta, s.tb = tb;
    s.alpha = 1.0f;
    s.round8 = 1;
    s.act = ACT_NONE;
    s.out = TCI_DTYPE_FLOAT16;
    return s;
}

/* Every configuration of the fp16 family on one problem (its reference computed once). */
static void check_all_configs(const char *name, const shape *sh, uint64_t seed) {
    problem p;
    problem_make(&p, name, sh, IN_F16, seed);
    for (int cfg = 0; cfg < kern_wmma_gemm_config_count(); cfg++) {
        kernel_id kid = {cfg, 0};
        problem_check(&p, kid, ACC_F32);
    }
    problem_free(&p);
}

/* ------------------------------------------------------------------ the fp16 family ---- */

START_TEST(family_configs_listed) {
    int count = kern_wmma_gemm_config_count();
    ck_assert_int_ge(count, 4); /* a family: several tile shapes from one template */
    for (int i = 0; i < count; i++) {
        ck_assert_ptr_nonnull(kern_wmma_gemm_config_name(i));
        ck_assert_int_gt(kern_wmma_gemm_config_smem_bytes(i, i & 1, 0), 0);
        printf("  config %d: %-26s smem %6d B\n", i, kern_wmma_gemm_config_name(i),
               kern_wmma_gemm_config_smem_bytes(i, 0, 0));
    }
    ck_assert_ptr_null(kern_wmma_gemm_config_name(count));
    ck_assert_ptr_null(kern_wmma_gemm_config_name(-1));
    ck_assert_int_eq(kern_wmma_gemm_config_smem_bytes(count, 0, 0), 0);
    kern_wmma_gemm_desc d;
    kern_wmma_gemm_desc_init(&d, 4096, 4096, 4096, 0, 0);
    int pick = kern_wmma_gemm_pick_config(&d, 132);
    ck_assert(pick >= 0 && pick < count);
    kern_wmma_gemm_desc_init(&d, 1, 8, 8, 0, 0);
    ck_assert_int_eq(kern_wmma_gemm_pick_config(&d, 132), count - 1);
}
END_TEST

/* 77x45x72: tails in M and N of every block tile, K across several fragment steps */
START_TEST(family_every_config_every_transpose) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            shape s = base_shape(77, 45, 72, ta, tb);
            char name[64];
            snprintf(name, sizeof name, "77x45x72 tA %d tB %d", ta, tb);
            check_all_configs(name, &s, 100 + (uint64_t)(ta * 2 + tb));
        }
}
END_TEST

/* several block tiles each way and more K tiles than pipeline stages, with the full epilogue */
START_TEST(family_multi_tile_epilogue) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            shape s = base_shape(300, 260, 200, ta, tb);
            s.alpha = 0.5f, s.beta = 0.75f, s.bias = 1, s.act = ACT_GELU_TANH;
            s.ld_pad = 8;
            char name[80];
            snprintf(name, sizeof name, "300x260x200 tA %d tB %d bias beta gelu", ta, tb);
            check_all_configs(name, &s, 200 + (uint64_t)(ta * 2 + tb));
        }
}
END_TEST

/* every block tile inside the matrix and K a whole number of tiles: only the copies without
 * bounds tests run (the shapes above mix them with the bounded ones) */
START_TEST(family_whole_tiles) {
    for (int t = 0; t < 4; t++) {
        shape s = base_shape(512, 512, 256, t >> 1, t & 1);
        s.bias = 1, s.act = ACT_RELU;
        char name[64];
        snprintf(name, sizeof name, "512x512x256 tA %d tB %d bias relu", t >> 1, t & 1);
        check_all_configs(name, &s, 250 + (uint64_t)t);
    }
}
END_TEST

/* K not a multiple of 8 (or of 16): the copies zero-fill inside a 16-byte chunk */
START_TEST(family_odd_k_fp32_out) {
    const int64_t ks[] = {1, 13, 45};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (int t = 0; t < 4; t++) {
            shape s = base_shape(67, 70, ks[i], t >> 1, t & 1);
            s.out = TCI_DTYPE_FLOAT;
            s.beta = -1.0f, s.bias = 1;
            char name[64];
            snprintf(name, sizeof name, "67x70x%lld tA %d tB %d fp32 out", (long long)ks[i], t >> 1,
                     t & 1);
            check_all_configs(name, &s, 300 + (uint64_t)t);
        }
}
END_TEST

START_TEST(family_classifier_row) {
    shape s = base_shape(1, 1000, 2048, 0, 0);
    s.bias = 1;
    check_all_configs("1x1000x2048 bias", &s, 400);
    shape t = base_shape(1, 1000, 2048, 0, 1);
    t.bias = 1, t.act = ACT_RELU;
    check_all_configs("1x1000x2048 tB bias relu", &t, 401);
}
END_TEST

START_TEST(family_batched_broadcast) {
    shape s = base_shape(40, 56, 72, 0, 1);
    s.batch = 3, s.bcast_b = 1, s.bias = 1, s.beta = 1.0f;
    check_all_configs("batch 3, B broadcast, beta 1", &s, 500);
    shape t = base_shape(33, 24, 64, 1, 0);
    t.batch = 4, t.bcast_a = 1, t.act = ACT_SILU, t.out = TCI_DTYPE_FLOAT;
    check_all_configs("batch 4, A broadcast, tA, silu fp32", &t, 501);
    shape u = base_shape(128, 128, 64, 0, 1);
    u.batch = 5, u.ld_pad = 16;
    check_all_configs("batch 5 128x128x64 padded ld (attention)", &u, 502);
}
END_TEST

/* every activation on the fp32 accumulator, parameters as eltwise.h documents them */
START_TEST(family_every_activation) {
    for (int act = 0; act < ACT_COUNT; act++) {
        shape s = base_shape(45, 40, 24, act & 1, 0);
        s.act = (act_kind)act, s.bias = 1, s.beta = 0.5f, s.alpha = 0.25f;
        switch (s.act) {
        case ACT_LEAKY_RELU: s.act_alpha = 0.1f; break;
        case ACT_CLIP: s.act_alpha = -0.5f, s.act_beta = 0.75f; break;
        case ACT_HARD_SIGMOID: s.act_alpha = 0.2f, s.act_beta = 0.5f; break;
        case ACT_ELU: s.act_alpha = 1.0f; break;
        case ACT_SELU: s.act_alpha = 1.6732632f, s.act_beta = 1.0507010f; break;
        case ACT_CELU: s.act_alpha = 1.5f; break;
        case ACT_THRESHOLDED_RELU: s.act_alpha = 0.25f; break;
        case ACT_IS_INF: s.act_alpha = 1.0f, s.act_beta = 1.0f; break;
        case ACT_SHRINK: s.act_alpha = 0.5f, s.act_beta = 0.25f; break;
        case ACT_SWISH: s.act_alpha = 1.3f; break;
        case ACT_SCALE: s.act_alpha = 1.7f; break;
        case ACT_GELU_OF_DIV: s.act_alpha = 1.41421356f; break;
        case ACT_GELU_SCALED: s.act_alpha = 0.70710678f; break;
        default: break;
        }
        s.out = act % 3 == 0 ? TCI_DTYPE_FLOAT : TCI_DTYPE_FLOAT16;
        problem p;
        char name[48];
        snprintf(name, sizeof name, "act %d", act);
        problem_make(&p, name, &s, IN_F16, 600 + (uint64_t)act);
        kernel_id kid = {act % kern_wmma_gemm_config_count(), 0};
        problem_check(&p, kid, ACC_F32);
        problem_free(&p);
    }
}
END_TEST

/* The epilogues the fusion pass gives a transformer's linear layers, on every configuration:
 * FC1 + bias + the erf-expanded Gelu (the sum divided by c = sqrt 2 through alpha and the bias,
 * then GeluOfDiv), FC2 + bias + residual (C, beta 1), and bias + residual + Gelu (erf). */
START_TEST(family_transformer_epilogues) {
    const float c = 1.41421356f;
    shape s = base_shape(197, 512, 256, 0, 0);
    s.alpha = 1.0f / c, s.bias = 1, s.act = ACT_GELU_OF_DIV, s.act_alpha = c;
    check_all_configs("197x512x256 bias GeluOfDiv", &s, 650);
    shape r = base_shape(197, 256, 512, 0, 0);
    r.beta = 1.0f, r.bias = 1;
    check_all_configs("197x256x512 bias residual", &r, 651);
    r.act = ACT_GELU, r.out = TCI_DTYPE_FLOAT;
    check_all_configs("197x256x512 bias residual Gelu fp32 out", &r, 652);
    shape d = base_shape(64, 128, 64, 0, 0);
    d.alpha = 1.0f / c, d.beta = 1.0f / c, d.bias = 1, d.act = ACT_GELU_OF_DIV, d.act_alpha = c;
    check_all_configs("64x128x64 bias residual GeluOfDiv", &d, 653);
}
END_TEST

START_TEST(family_in_place_and_graph) {
    shape s = base_shape(70, 90, 40, 0, 0);
    s.beta = 1.0f, s.bias = 1, s.act = ACT_RELU, s.inplace = 1;
    problem p;
    problem_make(&p, "in place c == d", &s, IN_F16, 700);
    kernel_id kid = {0, 0};
    problem_check(&p, kid, ACC_F32);
    problem_free(&p);

    /* captured into a CUDA graph (global capture mode: nothing unsafe may be called) */
    shape g = base_shape(130, 70, 96, 1, 1);
    g.batch = 2, g.bias = 1;
    problem q;
    problem_make(&q, "graph", &g, IN_F16, 701);
    ck_assert_int_eq(cudaMemcpy(q.dd, q.d_init, q.nc * q.out_es, cudaMemcpyHostToDevice),
                     cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ck_assert_int_eq(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    tci_status st = kern_wmma_gemm_run(&q.desc, 1, q.da, q.db, q.dbias, NULL, q.dd, g_stream);
    ck_assert_int_eq(cudaStreamEndCapture(g_stream, &graph), cudaSuccess);
    ck_assert_msg(st == TCI_OK, "captured run: %s", tci_last_error());
    ck_assert_int_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(exec, g_stream), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    /* the replay's D against the reference: reuse the checker by running once more uncaptured
     * after verifying the graph's output equals it */
    unsigned char *graph_out = malloc(q.nc * q.out_es), *plain_out = malloc(q.nc * q.out_es);
    ck_assert(graph_out && plain_out);
    gpu_download(graph_out, q.dd, q.nc * q.out_es);
    kernel_id k1 = {1, 0};
    problem_check(&q, k1, ACC_F32);
    gpu_download(plain_out, q.dd, q.nc * q.out_es);
    ck_assert_msg(memcmp(graph_out, plain_out, q.nc * q.out_es) == 0,
                  "graph replay differs from a plain run");
    free(graph_out), free(plain_out);
    problem_free(&q);
}
END_TEST

START_TEST(family_errors) {
    kern_wmma_gemm_desc d;
    kern_wmma_gemm_desc_init(&d, 64, 64, 64, 0, 0);
    ck_assert_tci_ok(kern_wmma_gemm_supports(&d, 0));
    kern_wmma_gemm_desc e = d;
    e.lda = 68;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_UNSUPPORTED, "multiple of 8");
    e = d, e.n = 45; /* packed ldc 45 */
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_UNSUPPORTED, "ldc 45");
    e = d, e.batch = 2, e.stride_a = 4100, e.stride_b = 4096, e.stride_c = 4096;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_UNSUPPORTED, "batch strides");
    e = d, e.batch = 2, e.stride_a = 4096, e.stride_b = 4096, e.stride_c = 1000;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_INVALID_ARGUMENT, "overlap");
    e = d, e.k = 0;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_INVALID_ARGUMENT, "k 0");
    e = d, e.lda = 32;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_INVALID_ARGUMENT,
                        "smaller than the stored columns");
    e = d, e.act = (act_kind)99;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_INVALID_ARGUMENT, "unknown act 99");
    e = d, e.out_dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_INVALID_ARGUMENT, "out_dtype");
    e = d, e.batch = 0;
    ck_assert_tci_error(kern_wmma_gemm_supports(&e, 0), TCI_ERR_INVALID_ARGUMENT, "batch 0");
    ck_assert_tci_error(kern_wmma_gemm_supports(&d, kern_wmma_gemm_config_count()),
                        TCI_ERR_INVALID_ARGUMENT, "outside");
    ck_assert_tci_error(kern_wmma_gemm_supports(NULL, 0), TCI_ERR_INVALID_ARGUMENT, "NULL");

    char *buf = gpu_upload(NULL, 65536);
    ck_assert_tci_error(kern_wmma_gemm_run(&d, 0, buf + 2, buf, NULL, NULL, buf + 16384, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "16-byte aligned");
    ck_assert_tci_error(kern_wmma_gemm_run(&d, 0, buf, NULL, NULL, NULL, buf + 16384, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "must not be NULL");
    e = d, e.has_bias = 1;
    ck_assert_tci_error(kern_wmma_gemm_run(&e, 0, buf, buf, NULL, NULL, buf + 16384, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "bias is NULL");
    e = d, e.beta = 1.0f;
    ck_assert_tci_error(kern_wmma_gemm_run(&e, 0, buf, buf, NULL, NULL, buf + 16384, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "needs C");
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    gpu_free(buf);
}
END_TEST

/* ------------------------------------------------------------------ the variants ---- */

typedef struct {
    kern_wmma_variant v;
    in_type in;
    acc_model model;
    tci_dtype out;
} variant_case;

static const variant_case k_variants[] = {
    {KERN_WMMA_F16_F32ACC_16X16X16, IN_F16, ACC_F32, TCI_DTYPE_FLOAT16},
    {KERN_WMMA_F16_F32ACC_32X8X16, IN_F16, ACC_F32, TCI_DTYPE_FLOAT},
    {KERN_WMMA_F16_F32ACC_8X32X16, IN_F16, ACC_F32, TCI_DTYPE_FLOAT16},
    {KERN_WMMA_F16_F16ACC_16X16X16, IN_F16, ACC_F16, TCI_DTYPE_FLOAT16},
    {KERN_WMMA_F16_F16ACC_32X8X16, IN_F16, ACC_F16, TCI_DTYPE_FLOAT},
    {KERN_WMMA_F16_F16ACC_8X32X16, IN_F16, ACC_F16, TCI_DTYPE_FLOAT16},
    {KERN_WMMA_BF16_16X16X16, IN_BF16, ACC_F32, TCI_DTYPE_FLOAT},
    {KERN_WMMA_BF16_32X8X16, IN_BF16, ACC_F32, TCI_DTYPE_FLOAT},
    {KERN_WMMA_BF16_8X32X16, IN_BF16, ACC_F32, TCI_DTYPE_FLOAT},
    {KERN_WMMA_TF32_16X16X8, IN_F32, ACC_TF32, TCI_DTYPE_FLOAT},
    {KERN_WMMA_S8_16X16X16, IN_S8, ACC_EXACT, TCI_DTYPE_INT32},
    {KERN_WMMA_S8_32X8X16, IN_S8, ACC_EXACT, TCI_DTYPE_INT32},
    {KERN_WMMA_S8_8X32X16, IN_S8, ACC_EXACT, TCI_DTYPE_INT32},
    {KERN_WMMA_U8_16X16X16, IN_U8, ACC_EXACT, TCI_DTYPE_INT32},
    {KERN_WMMA_U8_32X8X16, IN_U8, ACC_EXACT, TCI_DTYPE_INT32},
    {KERN_WMMA_U8_8X32X16, IN_U8, ACC_EXACT, TCI_DTYPE_INT32},
    {KERN_WMMA_F64_8X8X4, IN_F64, ACC_F64, TCI_DTYPE_DOUBLE},
};
#define NUM_VARIANT_CASES (sizeof k_variants / sizeof k_variants[0])

static int variant_is_float(const variant_case *vc) {
    return vc->out == TCI_DTYPE_FLOAT16 || vc->out == TCI_DTYPE_FLOAT;
}

static void check_variant(const variant_case *vc, const char *what, const shape *sh,
                          uint64_t seed) {
    problem p;
    char name[128];
    snprintf(name, sizeof name, "%s: %s", kern_wmma_variant_name(vc->v), what);
    problem_make(&p, name, sh, vc->in, seed);
    kernel_id kid = {-1, (int)vc->v};
    problem_check(&p, kid, vc->model);
    problem_free(&p);
}

START_TEST(variants_every_type_and_shape) {
    ck_assert_int_eq((int)NUM_VARIANT_CASES, KERN_WMMA_VARIANT_COUNT);
    for (size_t i = 0; i < NUM_VARIANT_CASES; i++) {
        const variant_case *vc = &k_variants[i];
        ck_assert_int_eq((int)vc->v, (int)i);
        ck_assert_int_eq(kern_wmma_variant_input_size(vc->v), (int)in_size(vc->in));
        for (int t = 0; t < 4; t++) {
            /* odd leading dimensions: these kernels load element by element */
            shape s = base_shape(77, 45, 72, t >> 1, t & 1);
            s.round8 = 0, s.ld_pad = 3, s.out = vc->out;
            if (vc->out == TCI_DTYPE_DOUBLE) s.alpha = 1.5f, s.beta = -0.5f;
            char what[48];
            snprintf(what, sizeof what, "77x45x72 tA %d tB %d", t >> 1, t & 1);
            check_variant(vc, what, &s, 800 + i * 4 + (uint64_t)t);
        }
        /* batched, A broadcast, K tail within a fragment step */
        shape b = base_shape(33, 50, 21, 0, 1);
        b.round8 = 0, b.batch = 3, b.bcast_a = 1, b.out = vc->out;
        check_variant(vc, "batch 3 A broadcast 33x50x21", &b, 900 + i);
        if (variant_is_float(vc)) {
            shape e = base_shape(50, 37, 40, 1, 0);
            e.round8 = 0, e.out = vc->out;
            e.alpha = 0.5f, e.beta = 1.0f, e.bias = 1, e.act = ACT_SILU;
            check_variant(vc, "bias beta silu", &e, 950 + i);
        }
    }
}
END_TEST

START_TEST(variants_errors) {
    kern_wmma_gemm_desc d;
    kern_wmma_gemm_desc_init(&d, 16, 16, 16, 0, 0);
    d.out_dtype = TCI_DTYPE_INT32;
    ck_assert_tci_ok(kern_wmma_variant_supports(&d, KERN_WMMA_S8_16X16X16));
    kern_wmma_gemm_desc e = d;
    e.alpha = 2.0f;
    ck_assert_tci_error(kern_wmma_variant_supports(&e, KERN_WMMA_U8_8X32X16), TCI_ERR_UNSUPPORTED,
                        "alpha 1, beta 0");
    e = d, e.out_dtype = TCI_DTYPE_FLOAT;
    ck_assert_tci_error(kern_wmma_variant_supports(&e, KERN_WMMA_S8_32X8X16),
                        TCI_ERR_INVALID_ARGUMENT, "writes int32");
    e = d, e.out_dtype = TCI_DTYPE_FLOAT16;
    ck_assert_tci_error(kern_wmma_variant_supports(&e, KERN_WMMA_BF16_16X16X16),
                        TCI_ERR_INVALID_ARGUMENT, "writes float");
    e = d, e.out_dtype = TCI_DTYPE_DOUBLE, e.has_bias = 1;
    ck_assert_tci_error(kern_wmma_variant_supports(&e, KERN_WMMA_F64_8X8X4), TCI_ERR_UNSUPPORTED,
                        "no bias");
    ck_assert_tci_error(kern_wmma_variant_supports(&d, KERN_WMMA_VARIANT_COUNT),
                        TCI_ERR_INVALID_ARGUMENT, "outside");
    ck_assert_ptr_null(kern_wmma_variant_name(KERN_WMMA_VARIANT_COUNT));
    char *buf = gpu_upload(NULL, 4096);
    e = d, e.out_dtype = TCI_DTYPE_DOUBLE;
    ck_assert_tci_error(kern_wmma_variant_run(&e, KERN_WMMA_F64_8X8X4, buf + 4, buf, NULL, NULL,
                                              buf + 2048, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "8-byte aligned");
    gpu_free(buf);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_wmma_gemm");
    Suite *s = suite_create("gpu_wmma_gemm");
    TCase *tf = tcase_create("fp16 family");
    tcase_add_checked_fixture(tf, setup, teardown);
    tcase_set_timeout(tf, 600);
    tcase_add_test(tf, family_configs_listed);
    tcase_add_test(tf, family_every_config_every_transpose);
    tcase_add_test(tf, family_multi_tile_epilogue);
    tcase_add_test(tf, family_whole_tiles);
    tcase_add_test(tf, family_odd_k_fp32_out);
    tcase_add_test(tf, family_classifier_row);
    tcase_add_test(tf, family_batched_broadcast);
    tcase_add_test(tf, family_every_activation);
    tcase_add_test(tf, family_transformer_epilogues);
    tcase_add_test(tf, family_in_place_and_graph);
    tcase_add_test(tf, family_errors);
    suite_add_tcase(s, tf);
    TCase *tv = tcase_create("variants");
    tcase_add_checked_fixture(tv, setup, teardown);
    tcase_set_timeout(tv, 600);
    tcase_add_test(tv, variants_every_type_and_shape);
    tcase_add_test(tv, variants_errors);
    suite_add_tcase(s, tv);
    return test_run_suite(s);
}
