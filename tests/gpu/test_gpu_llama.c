/* LLaMA's own ops on the GPU: RMSNormalization (LayerNormalization's kernel in its RMS mode,
 * src/kernels/norm.h) and RotaryEmbedding (src/kernels/rope.h). Each case builds a one-node graph,
 * takes the step its GPU plan holds, runs the kernel with that step's parameters (as
 * src/graph/gpu/run_step.c does) in fp16, bf16 or fp32 storage, and compares the result with the
 * CPU reference's run of the same graph on the same rounded inputs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "graph/cpu/exec_cpu.h"
#include "graph/gpu/gpu_internal.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "layers/op.h"

#define F16 TCI_DTYPE_FLOAT16
#define BF16 TCI_DTYPE_BFLOAT16
#define F32 TCI_DTYPE_FLOAT

static const plan_step *find_step(const plan *p, plan_step_kind kind) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind) return &p->steps[i];
    return NULL;
}

/* n values in [lo, hi) rounded to what dt holds */
static float *random_values(tci_dtype dt, size_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc(sizeof(float) * (n ? n : 1));
    ck_assert_ptr_nonnull(v);
    gpu_fill_random(v, n, seed, lo, hi);
    gpu_round_to(dt, v, n);
    return v;
}

static void *upload_as(tci_dtype dt, const float *v, size_t n) {
    void *bits = malloc(gpu_dtype_size(dt) * (n ? n : 1));
    ck_assert_ptr_nonnull(bits);
    gpu_encode(dt, v, bits, n);
    void *d = gpu_upload(bits, gpu_dtype_size(dt) * n);
    free(bits);
    return d;
}

static float *download_as(tci_dtype dt, const void *d, size_t n) {
    void *bits = malloc(gpu_dtype_size(dt) * (n ? n : 1));
    float *v = malloc(sizeof(float) * (n ? n : 1));
    ck_assert(bits && v);
    gpu_download(bits, d, gpu_dtype_size(dt) * n);
    gpu_decode(dt, bits, v, n);
    free(bits);
    return v;
}

/* |got - want| <= tol * max(1, |want|): fp16 rounds once (2^-11) after fp32 math, bf16 likewise
 * (GPU_BF16_TOL), fp32 only reorders sums. */
static void assert_close(tci_dtype dt, const float *got, const float *want, size_t n,
                         const char *what) {
    const double tol = dt == F32 ? 2e-5 : dt == BF16 ? GPU_BF16_TOL : 1.5e-3;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), scale = fmax(1.0, fabs(want[i]));
        ck_assert_msg(err <= tol * scale, "%s (%s): [%zu] = %.7g, want %.7g", what,
                      gpu_dtype_tag(dt), i, got[i], want[i]);
    }
}

/* ---- RMSNormalization ---- */

/* RMSNormalization of X (rank dims) over its dims from axis on, the scale one row of those; with
 * residual, X is the sum a + r of two graph inputs, which is also a graph output: the Add folds
 * into the step, which writes the sum as its second output. */
static void check_rms(tci_dtype dt, int rank, const int64_t *dims, int64_t axis, int residual,
                      uint64_t seed) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int norm_axis = (int)(axis < 0 ? axis + rank : axis);
    int64_t n = 1, len = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    for (int i = norm_axis; i < rank; i++) len *= dims[i];
    float *a = random_values(dt, (size_t)n, seed, -3.0f, 4.0f);
    float *r = random_values(dt, (size_t)n, seed + 1, -2.0f, 2.0f);
    float *scale = random_values(dt, (size_t)len, seed + 2, 0.5f, 1.5f);
    ir_tensor *sc = th_named(g, "scale", F32, rank - norm_axis, dims + norm_axis, scale);
    ir_tensor *ta = th_named(g, "a", F32, rank, dims, NULL), *tr = NULL, *x = ta;
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    if (residual) {
        tr = th_named(g, "r", F32, rank, dims, NULL);
        x = th_named(g, "h", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        th_node_io(g, "add", "Add", 17, (ir_tensor *[]){ta, tr}, 2, &x, 1);
    }
    ir_node *node = th_node_io(g, "rms", "RMSNormalization", 23, (ir_tensor *[]){x, sc}, 2, &y, 1);
    th_attr_int(g, node, "axis", axis);
    th_attr_float(g, node, "epsilon", 1e-4f);
    th_graph_io(g, (ir_tensor *[]){ta, tr}, residual ? 2 : 1, (ir_tensor *[]){y, x},
                residual ? 2 : 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    const plan_step *s = find_step(p, PLAN_STEP_LAYERNORM);
    ck_assert_ptr_nonnull(s);
    ck_assert(s->u.layernorm.rms);
    ck_assert_int_eq(s->u.layernorm.has_residual, residual);
    ck_assert_int_eq(s->u.layernorm.length, len);
    ck_assert_int_eq(s->u.layernorm.rows, n / len);
    /* the CPU reference sums in fp32; the step rounds the sum to dt, so the reference runs on
     * that rounded sum */
    tci_tensor tin[2] = {th_tensor(F32, rank, dims, a), th_tensor(F32, rank, dims, r)};
    float *sum = residual ? th_cpu_output(g, tin, 2, 1) : NULL;
    if (sum) gpu_round_to(dt, sum, (size_t)n);
    ir_graph *ref;
    ck_assert_tci_ok(ir_graph_create(&ref));
    {
        ir_tensor *rx = th_named(ref, "x", F32, rank, dims, NULL);
        ir_tensor *rs = th_named(ref, "scale", F32, rank - norm_axis, dims + norm_axis, scale);
        ir_tensor *ry = th_named(ref, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *rn = th_node_io(ref, "rms", "RMSNormalization", 23, (ir_tensor *[]){rx, rs}, 2,
                                 &ry, 1);
        th_attr_int(ref, rn, "axis", axis);
        th_attr_float(ref, rn, "epsilon", 1e-4f);
        th_graph_io(ref, &rx, 1, &ry, 1);
        ck_assert_tci_ok(pass_optimize(ref)); /* binds the node to its op, infers y */
    }
    tci_tensor rin = th_tensor(F32, rank, dims, sum ? sum : a);
    float *want = th_cpu_output(ref, &rin, 1, 0);
    void *da = upload_as(dt, a, (size_t)n), *dr = upload_as(dt, r, (size_t)n);
    void *dsc = upload_as(dt, scale, (size_t)len);
    void *dy = gpu_upload(NULL, gpu_dtype_size(dt) * (size_t)n);
    void *dsum = gpu_upload(NULL, gpu_dtype_size(dt) * (size_t)n);
    ck_assert_tci_ok(kern_rmsnorm_residual_rows_dtype(
        da, residual ? dr : NULL, dsc, dy, s->num_outputs > 1 ? dsum : NULL, NULL,
        s->u.layernorm.rows, s->u.layernorm.length, s->u.layernorm.epsilon, dt, 0));
    gpu_sync();
    float *got = download_as(dt, dy, (size_t)n);
    char what[96];
    snprintf(what, sizeof what, "rmsnorm rank %d axis %lld%s", rank, (long long)axis,
             residual ? " of a + r" : "");
    assert_close(dt, got, want, (size_t)n, what);
    if (residual) {
        ck_assert_int_eq(s->num_outputs, 2);
        float *got_sum = download_as(dt, dsum, (size_t)n);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(got_sum[i] == sum[i], "sum[%lld] = %g, want %g", (long long)i,
                          got_sum[i], sum[i]);
        free(got_sum);
    }
    gpu_free(da), gpu_free(dr), gpu_free(dsc), gpu_free(dy), gpu_free(dsum);
    free(a), free(r), free(scale), free(sum), free(want), free(got);
    plan_destroy(p);
    ir_graph_destroy(ref);
    ir_graph_destroy(g);
}

START_TEST(test_rmsnorm) {
    static const tci_dtype types[] = {F16, BF16, F32};
    const int64_t llama[3] = {2, 13, 64}, odd[3] = {3, 7, 37}, wide[2] = {5, 4099};
    const int64_t small[4] = {2, 3, 5, 3};
    for (int t = 0; t < 3; t++) {
        tci_dtype dt = types[t];
        check_rms(dt, 3, llama, -1, 0, 10 + t); /* a warp's lanes per row, vectors */
        check_rms(dt, 3, odd, -1, 0, 20 + t);   /* odd rows: scalar */
        check_rms(dt, 3, odd, 1, 0, 30 + t);    /* an earlier axis: rows of 7 x 37 */
        check_rms(dt, 2, wide, -1, 0, 40 + t);  /* a block per row */
        check_rms(dt, 4, small, 1, 0, 50 + t);  /* rows of 45 */
        check_rms(dt, 3, llama, -1, 1, 60 + t); /* the residual Add folded in, the sum written */
        check_rms(dt, 3, odd, -2, 1, 70 + t);
    }
}
END_TEST

START_TEST(test_rmsnorm_errors) {
    ck_assert_tci_error(kern_rmsnorm_residual_rows_dtype((void *)16, NULL, NULL, (void *)16, NULL,
                                                         NULL, 2, 8, 1e-5f, F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_rmsnorm_rows: NULL gamma");
    ck_assert_tci_error(kern_rmsnorm_residual_rows_dtype((void *)16, NULL, (void *)16, (void *)16,
                                                         (void *)16, NULL, 2, 8, 1e-5f, F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_rmsnorm_rows: a sum output without");
    ck_assert_tci_error(kern_rmsnorm_residual_rows_dtype(NULL, NULL, NULL, NULL, NULL, NULL, 2, 8,
                                                         1e-5f, TCI_DTYPE_INT64, 0),
                        TCI_ERR_UNSUPPORTED, "kern_rmsnorm_rows: dtype int64");
    ck_assert_tci_ok(kern_rmsnorm_residual_rows_dtype(NULL, NULL, NULL, NULL, NULL, NULL, 0, 8,
                                                      1e-5f, F16, 0));
}
END_TEST

/* ---- RotaryEmbedding ---- */

enum { RB = 2, RS = 13, RH = 3, RD = 20, RPOS = 40 };

typedef struct rope_case {
    int rank;       /* 3: (B, S, H * D) with num_heads; 4: (B, H, S, D) */
    int interleaved;
    int64_t rot;    /* rotary_embedding_dim, 0: the head */
    int with_ids;   /* position_ids; caches (RPOS, rot / 2) */
    int batch1;     /* ids, or the caches without them, of batch 1 */
} rope_case;

/* The ROTARY step's kernel on x; *flag receives the error flag. ids may be NULL. */
static float *run_rope(tci_dtype dt, const plan_step *s, const float *x, size_t n,
                       const float *cosv, const float *sinv, size_t cache_n, const int64_t *ids,
                       size_t num_ids, int *flag) {
    kern_rope_desc d;
    gpu_rope_desc(s, false, dt, &d); /* ids, where given, are int64 */
    void *dx = upload_as(dt, x, n), *dy = gpu_upload(NULL, gpu_dtype_size(dt) * n);
    void *dc = upload_as(dt, cosv, cache_n), *ds = upload_as(dt, sinv, cache_n);
    void *di = ids ? gpu_upload(ids, sizeof(int64_t) * num_ids) : NULL;
    int zero = 0;
    int *dflag = gpu_upload(&zero, sizeof zero);
    ck_assert_tci_ok(kern_rotary_embedding(&d, dx, dc, ds, di, dy, dflag, 0));
    gpu_sync();
    float *got = download_as(dt, dy, n);
    gpu_download(flag, dflag, sizeof *flag);
    gpu_free(dx), gpu_free(dy), gpu_free(dc), gpu_free(ds), gpu_free(dflag);
    if (di) gpu_free(di);
    return got;
}

static void check_rope(tci_dtype dt, const rope_case *k, uint64_t seed) {
    const int64_t rot = k->rot ? k->rot : RD, half = rot / 2;
    const int64_t x4[4] = {RB, RH, RS, RD}, x3[3] = {RB, RS, RH * RD};
    const int64_t cache_b = k->batch1 ? 1 : RB;
    const int64_t c2[2] = {RPOS, half}, c3[3] = {cache_b, RS, half};
    const int64_t idd[2] = {k->batch1 ? 1 : RB, RS};
    const size_t n = (size_t)RB * RS * RH * RD;
    const size_t cache_n = (size_t)(k->with_ids ? RPOS * half : cache_b * RS * half);
    float *x = random_values(dt, n, seed, -2.0f, 2.0f);
    float *cosv = malloc(sizeof(float) * cache_n), *sinv = malloc(sizeof(float) * cache_n);
    ck_assert(cosv && sinv);
    for (size_t i = 0; i < cache_n; i++) {
        double angle = (double)(i / (size_t)half) * pow(10000.0, -2.0 * (double)(i % half) / rot);
        cosv[i] = (float)cos(angle);
        sinv[i] = (float)sin(angle);
    }
    gpu_round_to(dt, cosv, cache_n);
    gpu_round_to(dt, sinv, cache_n);
    int64_t ids[RB * RS];
    for (int i = 0; i < RB * RS; i++) ids[i] = (5 * i + 2) % RPOS;
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *in[4];
    in[0] = th_named(g, "x", F32, k->rank, k->rank == 4 ? x4 : x3, NULL);
    in[1] = th_named(g, "cos", F32, k->with_ids ? 2 : 3, k->with_ids ? c2 : c3, cosv);
    in[2] = th_named(g, "sin", F32, k->with_ids ? 2 : 3, k->with_ids ? c2 : c3, sinv);
    in[3] = k->with_ids ? th_named(g, "ids", TCI_DTYPE_INT64, 2, idd, NULL) : NULL;
    ir_tensor *out = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_node *node = th_node_io(g, "rope", "RotaryEmbedding", 23, in, k->with_ids ? 4 : 3, &out, 1);
    if (k->rank == 3) th_attr_int(g, node, "num_heads", RH);
    if (k->interleaved) th_attr_int(g, node, "interleaved", 1);
    if (k->rot) th_attr_int(g, node, "rotary_embedding_dim", k->rot);
    th_graph_io(g, (ir_tensor *[]){in[0], in[3]}, k->with_ids ? 2 : 1, &out, 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    const plan_step *s = find_step(p, PLAN_STEP_ROTARY);
    ck_assert_ptr_nonnull(s);
    tci_tensor tin[2] = {th_tensor(F32, k->rank, k->rank == 4 ? x4 : x3, x),
                         th_tensor(TCI_DTYPE_INT64, 2, idd, ids)};
    float *want = th_cpu_output(g, tin, k->with_ids ? 2 : 1, 0);
    int flag = -1;
    float *got = run_rope(dt, s, x, n, cosv, sinv, cache_n, k->with_ids ? ids : NULL,
                          (size_t)(idd[0] * RS), &flag);
    ck_assert_int_eq(flag, 0);
    char what[96];
    snprintf(what, sizeof what, "rope %d-D%s rot %lld%s%s", k->rank,
             k->interleaved ? " interleaved" : "", (long long)rot,
             k->with_ids ? " ids" : "", k->batch1 ? " batch 1" : "");
    assert_close(dt, got, want, n, what);
    /* an id outside the caches raises the flag (the CPU reference refuses the run) */
    if (k->with_ids) {
        int64_t bad[RB * RS];
        memcpy(bad, ids, sizeof bad);
        bad[RS - 1] = k->batch1 ? -1 : RPOS;
        free(got);
        got = run_rope(dt, s, x, n, cosv, sinv, cache_n, bad, (size_t)(idd[0] * RS), &flag);
        ck_assert_int_eq(flag, 1);
        tci_tensor bin[2] = {tin[0], th_tensor(TCI_DTYPE_INT64, 2, idd, bad)};
        exec_cpu *ex;
        ck_assert_tci_ok(exec_cpu_create(g, &ex));
        ck_assert_tci_error(exec_cpu_run(ex, bin, 2), TCI_ERR_INVALID_ARGUMENT,
                            "outside the caches");
        exec_cpu_destroy(ex);
    }
    free(x), free(cosv), free(sinv), free(want), free(got);
    plan_destroy(p);
    ir_graph_destroy(g);
}

START_TEST(test_rope) {
    static const rope_case cases[] = {
        {3, 0, 0, 1, 0},  /* LLaMA's first layer: 3-D, position ids */
        {4, 0, 0, 1, 1},  /* its second: 4-D, ids of batch 1 */
        {4, 0, 0, 0, 0},  /* 4-D, caches per sequence */
        {4, 1, 0, 0, 1},  /* interleaved, caches of batch 1 */
        {3, 1, 8, 1, 0},  /* 3-D interleaved, partial (8 of 20), ids */
        {4, 0, 12, 1, 0}, /* halves, partial, ids */
        {3, 0, 6, 0, 0},  /* 3-D halves, partial (odd half), no ids */
    };
    static const tci_dtype types[] = {F16, BF16, F32};
    for (int t = 0; t < 3; t++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            check_rope(types[t], &cases[c], 100 + 10 * (uint64_t)t + c);
}
END_TEST

START_TEST(test_rope_errors) {
    kern_rope_desc d;
    memset(&d, 0, sizeof d);
    d.batch = 1, d.heads = 2, d.seq = 3, d.head_size = 8, d.rotary_dim = 5, d.cache_batch = 1;
    ck_assert_tci_error(kern_rotary_embedding(&d, (void *)16, (void *)16, (void *)16, NULL,
                                              (void *)16, NULL, 0),
                        TCI_ERR_INVALID_ARGUMENT, "rotary_dim 5 must be even");
    d.rotary_dim = 8;
    d.cache_batch = 2;
    ck_assert_tci_error(kern_rotary_embedding(&d, (void *)16, (void *)16, (void *)16, NULL,
                                              (void *)16, NULL, 0),
                        TCI_ERR_INVALID_ARGUMENT, "the caches' batch 2 is neither 1 nor 1");
    d.cache_batch = 1;
    d.ids_batch = 1;
    ck_assert_tci_error(kern_rotary_embedding(&d, (void *)16, (void *)16, (void *)16, (void *)16,
                                              (void *)16, NULL, 0),
                        TCI_ERR_INVALID_ARGUMENT, "the caches hold 0 positions");
    d.dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_rotary_embedding(&d, NULL, NULL, NULL, NULL, NULL, NULL, 0),
                        TCI_ERR_UNSUPPORTED, "kern_rotary_embedding: dtype int32");
    d.dtype = F16;
    d.seq = 0;
    ck_assert_tci_ok(kern_rotary_embedding(&d, NULL, NULL, NULL, NULL, NULL, NULL, 0));
}
END_TEST

int main(void) {
    gpu_require_device("gpu_llama");
    Suite *s = suite_create("gpu_llama");
    TCase *tc = tcase_create("llama");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rmsnorm);
    tcase_add_test(tc, test_rmsnorm_errors);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_rope_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
