/* The Hopper wgmma GEMM against a double-precision CPU reference: every tile configuration with
 * every transpose on shapes with tails in M, N and K, batches with broadcast, the fused epilogue
 * (alpha, beta * C, bias, activations, fp32 output), in place and in a CUDA graph, and the error
 * paths. Timing against cuBLAS lives in bench/bench_gemm.c. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/wgmma_gemm.h"
#include "layers/op.h"

/* Shared by the tests of one process (CK_FORK=no); made in the fixture. */
static cudaStream_t g_stream;

static void setup(void) { ck_assert_int_eq(cudaStreamCreate(&g_stream), cudaSuccess); }

static void teardown(void) { cudaStreamDestroy(g_stream); }

/* ------------------------------------------------------------------ one problem ---- */

typedef struct {
    int64_t m, n, k;
    int ta, tb;
    int batch, bcast_a, bcast_b;
    int64_t ld_pad; /* extra elements per stored row, on top of rounding up to 8 */
    float alpha, beta;
    int bias;
    act_kind act;
    float act_alpha, act_beta;
    tci_dtype out;
    int inplace; /* C is D itself */
} shape;

typedef struct {
    char name[96];
    kern_wgmma_gemm_desc desc;
    int inplace;
    size_t na, nb, nc, out_es;
    double *a, *b, *c;
    float *bias;
    void *da, *db, *dc, *dbias, *dd;
    void *d_init; /* D's bytes before a run: poison, or C when in place */
    double *x;    /* reference before the activation */
    double *s;    /* sum |a_l b_l| */
    double *epi_mag; /* |alpha acc| + |beta c| + |bias| */
} problem;

static int64_t round_up8(int64_t v) { return (v + 7) / 8 * 8; }

static shape base_shape(int64_t m, int64_t n, int64_t k, int ta, int tb) {
    shape s;
    memset(&s, 0, sizeof s);
    s.m = m, s.n = n, s.k = k, s.ta = ta, s.tb = tb;
    s.alpha = 1.0f;
    s.act = ACT_NONE;
    s.out = TCI_DTYPE_FLOAT16;
    return s;
}

/* Uniform [-1, 1) values rounded to what the GPU sees (fp16, or the output type for C). */
static double *random_values(size_t n, uint64_t seed, tci_dtype as) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    double *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert(f && v);
    gpu_fill_random(f, n, seed, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        v[i] = as == TCI_DTYPE_FLOAT16 ? half_to_float(float_to_half(f[i])) : f[i];
    free(f);
    return v;
}

static void *pack(const double *v, size_t n, tci_dtype t) {
    size_t es = tci_dtype_size(t);
    unsigned char *out = malloc((n ? n : 1) * es);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++) {
        if (t == TCI_DTYPE_FLOAT16)
            ((uint16_t *)out)[i] = float_to_half((float)v[i]);
        else
            ((float *)out)[i] = (float)v[i];
    }
    return out;
}

static void problem_make(problem *p, const char *name, const shape *sh, uint64_t seed) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->inplace = sh->inplace;
    kern_wgmma_gemm_desc *d = &p->desc;
    kern_wmma_gemm_desc_init(d, sh->m, sh->n, sh->k, sh->ta, sh->tb);
    int batch = sh->batch ? sh->batch : 1;
    d->batch = batch;
    int64_t a_rows = sh->ta ? sh->k : sh->m, a_cols = sh->ta ? sh->m : sh->k;
    int64_t b_rows = sh->tb ? sh->n : sh->k, b_cols = sh->tb ? sh->k : sh->n;
    d->lda = round_up8(a_cols) + sh->ld_pad;
    d->ldb = round_up8(b_cols) + sh->ld_pad;
    d->ldc = round_up8(sh->n) + sh->ld_pad;
    d->stride_a = sh->bcast_a ? 0 : a_rows * d->lda;
    d->stride_b = sh->bcast_b ? 0 : b_rows * d->ldb;
    d->stride_c = sh->m * d->ldc + 8; /* a gap after each D matrix: checked to stay unwritten */
    d->alpha = sh->alpha, d->beta = sh->beta, d->has_bias = sh->bias;
    d->act = sh->act, d->act_alpha = sh->act_alpha, d->act_beta = sh->act_beta;
    d->out_dtype = sh->out;
    p->na = (size_t)(a_rows * d->lda * (sh->bcast_a ? 1 : batch));
    p->nb = (size_t)(b_rows * d->ldb * (sh->bcast_b ? 1 : batch));
    p->nc = (size_t)(d->stride_c * batch);
    p->out_es = tci_dtype_size(sh->out);
    p->a = random_values(p->na, seed, TCI_DTYPE_FLOAT16);
    p->b = random_values(p->nb, seed + 1, TCI_DTYPE_FLOAT16);
    p->c = random_values(p->nc, seed + 2, sh->out);
    p->bias = malloc((size_t)sh->n * sizeof *p->bias);
    ck_assert_ptr_nonnull(p->bias);
    gpu_fill_random(p->bias, (size_t)sh->n, seed + 3, -1.0f, 1.0f);

    void *ha = pack(p->a, p->na, TCI_DTYPE_FLOAT16), *hb = pack(p->b, p->nb, TCI_DTYPE_FLOAT16);
    void *hc = pack(p->c, p->nc, sh->out);
    p->da = gpu_upload(ha, p->na * 2);
    p->db = gpu_upload(hb, p->nb * 2);
    p->dc = gpu_upload(hc, p->nc * p->out_es);
    p->dbias = gpu_upload(p->bias, (size_t)sh->n * sizeof(float));
    p->dd = gpu_upload(NULL, p->nc * p->out_es);
    p->d_init = malloc(p->nc * p->out_es);
    ck_assert_ptr_nonnull(p->d_init);
    if (sh->inplace)
        memcpy(p->d_init, hc, p->nc * p->out_es);
    else
        memset(p->d_init, 0xff, p->nc * p->out_es); /* NaN in fp16 and fp32 */
    free(ha), free(hb), free(hc);

    size_t count = (size_t)batch * (size_t)(sh->m * sh->n);
    p->x = malloc(count * sizeof *p->x), p->s = malloc(count * sizeof *p->s);
    p->epi_mag = malloc(count * sizeof *p->epi_mag);
    ck_assert(p->x && p->s && p->epi_mag);
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
                p->x[o] = sh->alpha * acc + sh->beta * cv + bv;
                p->s[o] = s;
                p->epi_mag[o] = fabs(sh->alpha * acc) + fabs(sh->beta * cv) + fabs(bv);
            }
    }
}

static void problem_free(problem *p) {
    gpu_free(p->da), gpu_free(p->db), gpu_free(p->dc), gpu_free(p->dbias), gpu_free(p->dd);
    free(p->a), free(p->b), free(p->c), free(p->bias), free(p->d_init);
    free(p->x), free(p->s), free(p->epi_mag);
}

static tci_status problem_launch(problem *p, int config) {
    const void *c = p->desc.beta != 0.0f ? (p->inplace ? p->dd : p->dc) : NULL;
    const float *bias = p->desc.has_bias ? p->dbias : NULL;
    return kern_wgmma_gemm_run(&p->desc, config, p->da, p->db, bias, c, p->dd, g_stream);
}

/* Checks every element of D (padding columns and gaps included) against the reference. The
 * bound of one element:
 * - the dot product: fp16 products are exact in fp32; each m64nNk16 step adds 16 of them to the
 *   fp32 accumulator with one rounding, so an output sees ceil(K/16) roundings of at most one
 *   unit roundoff (doubled: the tensor cores' adds are not IEEE round-to-nearest) of a partial
 *   sum no larger than S = sum |a_l b_l|, plus one: (ceil(K/16) + 1) * 2^-23 * S, times |alpha|;
 * - the epilogue's fp32 multiply-adds: 4 roundings of 2^-24 relative to the largest term;
 * - the activation: the reference function's change over that input error, plus 8 fp32 ulps
 *   for the device's math functions;
 * - the one output rounding: half an ulp, 2^-11 relative for fp16 (2^-25 absolute among the
 *   subnormals), 2^-24 for fp32. */
static void problem_verify(problem *p, int config) {
    const kern_wgmma_gemm_desc *d = &p->desc;
    const char *kname = kern_wgmma_gemm_config_name(config);
    size_t bytes = p->nc * p->out_es;
    unsigned char *got = malloc(bytes);
    ck_assert_ptr_nonnull(got);
    gpu_download(got, p->dd, bytes);
    double out_rel = d->out_dtype == TCI_DTYPE_FLOAT16 ? 0x1p-11 : 0x1p-24;
    double out_abs = d->out_dtype == TCI_DTYPE_FLOAT16 ? 0x1p-25 : 0.0;
    double max_err = 0.0;
    for (size_t o = 0; o < p->nc; o++) {
        int64_t bi = (int64_t)o / d->stride_c, rem = (int64_t)o % d->stride_c;
        int64_t i = rem / d->ldc, j = rem % d->ldc;
        if (i >= d->m || j >= d->n) {
            ck_assert_msg(memcmp(got + o * p->out_es, (unsigned char *)p->d_init + o * p->out_es,
                                 p->out_es) == 0,
                          "%s [%s]: element %zu (batch %lld, row %lld, column %lld) written "
                          "outside D",
                          p->name, kname, o, (long long)bi, (long long)i, (long long)j);
            continue;
        }
        size_t r = ((size_t)bi * (size_t)d->m + (size_t)i) * (size_t)d->n + (size_t)j;
        double g = d->out_dtype == TCI_DTYPE_FLOAT16 ? half_to_float(((uint16_t *)got)[o])
                                                     : ((float *)got)[o];
        double x = p->x[r];
        double ex = fabs(d->alpha) * (double)((d->k + 15) / 16 + 1) * 0x1p-23 * p->s[r] +
                    0x1p-22 * p->epi_mag[r];
        double y = gpu_act_reference(d->act, x, d->act_alpha, d->act_beta);
        double y_lo = gpu_act_reference(d->act, x - ex, d->act_alpha, d->act_beta);
        double y_hi = gpu_act_reference(d->act, x + ex, d->act_alpha, d->act_beta);
        double ey = fmax(fabs(y_hi - y), fabs(y - y_lo));
        if (d->act != ACT_NONE) ey += 8 * 0x1p-24 * fmax(fabs(x), fabs(y));
        double tol = ey * (1.0 + out_rel) + out_rel * fabs(y) + out_abs;
        ck_assert_msg(fabs(g - y) <= tol,
                      "%s [%s]: D[%lld][%lld][%lld] = %.9g, want %.9g (tolerance %.3g)", p->name,
                      kname, (long long)bi, (long long)i, (long long)j, g, y, tol);
        if (fabs(g - y) / tol > max_err) max_err = fabs(g - y) / tol;
    }
    free(got);
    printf("  %-44s %-14s ok (worst error %.2f of its bound)\n", p->name, kname, max_err);
}

/* Runs the configuration on freshly poisoned D and verifies. */
static void problem_check(problem *p, int config) {
    size_t bytes = p->nc * p->out_es;
    ck_assert_int_eq(cudaMemcpy(p->dd, p->d_init, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    tci_status st = problem_launch(p, config);
    ck_assert_msg(st == TCI_OK, "%s [%s]: run: %s", p->name, kern_wgmma_gemm_config_name(config),
                  tci_last_error());
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    problem_verify(p, config);
}

static void check_all_configs(const char *name, const shape *sh, uint64_t seed) {
    problem p;
    problem_make(&p, name, sh, seed);
    for (int cfg = 0; cfg < kern_wgmma_gemm_config_count(); cfg++) problem_check(&p, cfg);
    problem_free(&p);
}

/* ------------------------------------------------------------------ tests ---- */

START_TEST(configs_listed) {
    int count = kern_wgmma_gemm_config_count();
    ck_assert_int_ge(count, 2);
    for (int i = 0; i < count; i++) {
        ck_assert_ptr_nonnull(kern_wgmma_gemm_config_name(i));
        ck_assert_int_gt(kern_wgmma_gemm_config_smem_bytes(i), 0);
        ck_assert_int_le(kern_wgmma_gemm_config_smem_bytes(i), 227 * 1024);
        printf("  config %d: %-16s smem %6d B\n", i, kern_wgmma_gemm_config_name(i),
               kern_wgmma_gemm_config_smem_bytes(i));
    }
    ck_assert_ptr_null(kern_wgmma_gemm_config_name(count));
    ck_assert_ptr_null(kern_wgmma_gemm_config_name(-1));
    ck_assert_int_eq(kern_wgmma_gemm_config_smem_bytes(count), 0);
    kern_wgmma_gemm_desc d;
    kern_wmma_gemm_desc_init(&d, 4096, 768, 768, 0, 0);
    int pick = kern_wgmma_gemm_pick_config(&d, 132);
    ck_assert(pick >= 0 && pick < count);
    /* BERT's 4096x768: 128x192 tiles make 128 blocks, one wave of 132 multiprocessors */
    ck_assert_str_eq(kern_wgmma_gemm_config_name(pick), "128x192x64 s4 persistent");
    kern_wmma_gemm_desc_init(&d, 1, 8, 8, 0, 0);
    pick = kern_wgmma_gemm_pick_config(&d, 132);
    ck_assert(pick >= 0 && pick < count);
}
END_TEST

/* tails in M, N and K of every tile: 200 = 128 + 72, 333 = 256 + 77, K 100 = 64 + 36 (and K 7,
 * less than one 16-deep step, with single-column and single-row tails) */
START_TEST(every_config_every_transpose) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            char name[80];
            shape s = base_shape(200, 333, 100, ta, tb);
            snprintf(name, sizeof name, "200x333x100 tA %d tB %d", ta, tb);
            check_all_configs(name, &s, 100 + (uint64_t)(ta * 2 + tb));
            s = base_shape(129, 65, 7, ta, tb);
            snprintf(name, sizeof name, "129x65x7 tA %d tB %d", ta, tb);
            check_all_configs(name, &s, 200 + (uint64_t)(ta * 2 + tb));
        }
}
END_TEST

/* several tiles each way, more K steps than pipeline stages (K 700: 11 steps, the last one
 * partial), padded rows and the whole epilogue */
START_TEST(multi_tile_epilogue) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            shape s = base_shape(300, 520, 700, ta, tb);
            s.alpha = 0.5f, s.beta = 0.75f, s.bias = 1, s.act = ACT_GELU;
            s.ld_pad = 8;
            char name[80];
            snprintf(name, sizeof name, "300x520x700 a.5 b.75 bias gelu tA %d tB %d", ta, tb);
            check_all_configs(name, &s, 300 + (uint64_t)(ta * 2 + tb));
        }
}
END_TEST

/* batch in grid z, A or B broadcast (stride 0), fp32 output with C */
START_TEST(batched_broadcast_fp32) {
    for (int tb = 0; tb < 2; tb++)
        for (int bc = 0; bc < 3; bc++) {
            shape s = base_shape(150, 90, 136, 0, tb);
            s.batch = 3, s.bcast_a = bc == 1, s.bcast_b = bc == 2;
            s.beta = -0.5f, s.bias = 1, s.out = TCI_DTYPE_FLOAT;
            char name[80];
            snprintf(name, sizeof name, "3x150x90x136 bcast %s fp32 tB %d",
                     bc == 0 ? "none" : bc == 1 ? "A" : "B", tb);
            check_all_configs(name, &s, 400 + (uint64_t)(tb * 3 + bc));
        }
}
END_TEST

START_TEST(activations) {
    static const struct {
        act_kind act;
        float a, b;
    } acts[] = {
        {ACT_RELU, 0, 0},           {ACT_LEAKY_RELU, 0.1f, 0}, {ACT_CLIP, -0.5f, 0.5f},
        {ACT_SIGMOID, 0, 0},        {ACT_TANH, 0, 0},          {ACT_GELU, 0, 0},
        {ACT_GELU_TANH, 0, 0},      {ACT_SILU, 0, 0},          {ACT_HARD_SWISH, 0, 0},
        {ACT_GELU_OF_DIV, 1.41421356f, 0},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        shape s = base_shape(130, 200, 72, 0, (int)(i & 1));
        s.bias = 1, s.act = acts[i].act, s.act_alpha = acts[i].a, s.act_beta = acts[i].b;
        /* GeluOfDiv as a fused erf-expanded Gelu runs it: the sum, residual included, divided
         * by alpha first */
        if (s.act == ACT_GELU_OF_DIV) s.alpha = s.beta = 1.0f / acts[i].a;
        char name[80];
        snprintf(name, sizeof name, "130x200x72 act %d", (int)acts[i].act);
        problem p;
        problem_make(&p, name, &s, 500 + i);
        problem_check(&p, (int)(i % (size_t)kern_wgmma_gemm_config_count()));
        problem_free(&p);
    }
}
END_TEST

/* D = A B + D, and the launch captured in a CUDA graph and replayed */
START_TEST(in_place_and_graph) {
    shape s = base_shape(257, 264, 320, 0, 0);
    s.beta = 1.0f, s.inplace = 1, s.bias = 1;
    problem p;
    problem_make(&p, "257x264x320 in place, graph", &s, 600);
    problem_check(&p, 0);
    ck_assert_int_eq(cudaMemcpy(p.dd, p.d_init, p.nc * p.out_es, cudaMemcpyHostToDevice),
                     cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ck_assert_int_eq(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal),
                     cudaSuccess);
    ck_assert_tci_ok(problem_launch(&p, 1));
    ck_assert_int_eq(cudaStreamEndCapture(g_stream, &graph), cudaSuccess);
    ck_assert_int_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(exec, g_stream), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(g_stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    problem_verify(&p, 1);
    problem_free(&p);
}
END_TEST

START_TEST(errors) {
    kern_wgmma_gemm_desc d;
    kern_wmma_gemm_desc_init(&d, 64, 64, 64, 0, 0);
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, -1), TCI_ERR_INVALID_ARGUMENT, "config -1");
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, kern_wgmma_gemm_config_count()),
                        TCI_ERR_INVALID_ARGUMENT, "outside");
    ck_assert_tci_error(kern_wgmma_gemm_supports(NULL, 0), TCI_ERR_INVALID_ARGUMENT, "NULL");
    d.lda = 68;
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_UNSUPPORTED, "multiple of 8");
    kern_wmma_gemm_desc_init(&d, 64, 60, 64, 0, 0); /* packed ldb = ldc = 60 */
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_UNSUPPORTED, "ldc 60");
    kern_wmma_gemm_desc_init(&d, 64, 64, 64, 0, 0);
    d.batch = 2, d.stride_a = 64 * 64 + 4, d.stride_b = 0, d.stride_c = 64 * 64;
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_UNSUPPORTED, "batch strides");
    d.stride_c = 64 * 64 - 8;
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_INVALID_ARGUMENT, "overlap");
    kern_wmma_gemm_desc_init(&d, 64, 64, 64, 0, 0);
    d.out_dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_INVALID_ARGUMENT, "out_dtype");
    d.out_dtype = TCI_DTYPE_FLOAT16;
    d.act = ACT_COUNT;
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_INVALID_ARGUMENT, "unknown act");
    d.act = ACT_NONE;
    d.trans_a = 2;
    ck_assert_tci_error(kern_wgmma_gemm_supports(&d, 0), TCI_ERR_INVALID_ARGUMENT, "trans_a");
    d.trans_a = 1;
    ck_assert_tci_ok(kern_wgmma_gemm_supports(&d, 0));
    /* pointers: checked before anything is launched */
    void *buf = gpu_upload(NULL, 64 * 64 * 2);
    ck_assert_tci_error(kern_wgmma_gemm_run(&d, 0, NULL, buf, NULL, NULL, buf, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "must not be NULL");
    ck_assert_tci_error(
        kern_wgmma_gemm_run(&d, 0, (char *)buf + 8, buf, NULL, NULL, buf, g_stream),
        TCI_ERR_INVALID_ARGUMENT, "16-byte aligned");
    d.has_bias = 1;
    ck_assert_tci_error(kern_wgmma_gemm_run(&d, 0, buf, buf, NULL, NULL, buf, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "bias is NULL");
    d.has_bias = 0, d.beta = 1.0f;
    ck_assert_tci_error(kern_wgmma_gemm_run(&d, 0, buf, buf, NULL, NULL, buf, g_stream),
                        TCI_ERR_INVALID_ARGUMENT, "needs C");
    gpu_free(buf);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_wgmma_gemm");
    if (kern_wgmma_gemm_device_supported() != TCI_OK) {
        printf("SKIP: gpu_wgmma_gemm: %s\n", tci_last_error());
        return GPU_SKIP_CODE;
    }
    Suite *s = suite_create("gpu_wgmma_gemm");
    TCase *tc = tcase_create("wgmma");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, configs_listed);
    tcase_add_test(tc, every_config_every_transpose);
    tcase_add_test(tc, multi_tile_epilogue);
    tcase_add_test(tc, batched_broadcast_fp32);
    tcase_add_test(tc, activations);
    tcase_add_test(tc, in_place_and_graph);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
