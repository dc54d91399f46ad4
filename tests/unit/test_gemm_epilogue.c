/* The GEMM epilogues of the fusion pass (src/graph/passes/fuse.c) and their lowering
 * (src/layers/gemm.c): MatMul + Add(bias) + the erf-expanded Gelu (Div, Erf, Add 1, Mul, Mul 0.5),
 * the Gelu op (erf and tanh forms) and a residual Add fold into one GEMM step, whose formula
 * act(alpha A B + beta C + bias), evaluated here on the host from the plan step's own fields,
 * equals the CPU reference of the unfused nodes; what must not fold keeps its steps. No GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

enum { B = 2, S = 3, K = 8, N = 16, ROWS = B * S };

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static ir_tensor *scalar(ir_graph *g, const char *name, float v) {
    return th_named(g, name, TCI_DTYPE_FLOAT, 0, NULL, &v);
}

typedef struct fixture {
    ir_graph *g;
    ir_tensor *x, *r; /* inputs: x (B, S, K); r (B, S, N) the residual, or NULL */
    ir_node *mm;
    float w[K * N], bias[N];
} fixture;

typedef enum tail {
    TAIL_ERF_CHAIN, /* Div sqrt 2, Erf, Add 1, Mul x, Mul 0.5 */
    TAIL_GELU,      /* Gelu op, approximate none */
    TAIL_GELU_TANH, /* Gelu op, approximate tanh */
    TAIL_NONE,
} tail;

/* x -> MatMul(w) -> Add(bias) [-> Add(r)] -> tail -> y */
static void build(fixture *f, bool residual, tail t) {
    memset(f, 0, sizeof *f);
    ck_assert_tci_ok(ir_graph_create(&f->g));
    ir_graph *g = f->g;
    for (int i = 0; i < K * N; i++) f->w[i] = 0.25f * sinf(0.7f * (float)i);
    for (int i = 0; i < N; i++) f->bias[i] = 0.1f * (float)(i - N / 2);
    const int64_t xd[3] = {B, S, K}, rd[3] = {B, S, N}, wd[2] = {K, N}, bd[1] = {N};
    f->x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    f->r = residual ? th_named(g, "r", TCI_DTYPE_FLOAT, 3, rd, NULL) : NULL;
    ir_tensor *m = named(g, "m"), *mb = named(g, "mb"), *y = named(g, "y");
    ir_tensor *inputs[2] = {f->x, f->r};
    th_graph_io(g, inputs, residual ? 2 : 1, &y, 1);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 2, wd, f->w);
    ir_tensor *bt = th_named(g, "b", TCI_DTYPE_FLOAT, 1, bd, f->bias);
    f->mm = th_node_io(g, "mm", "MatMul", 13, (ir_tensor *[]){f->x, wt}, 2, &m, 1);
    ir_tensor *h = t == TAIL_NONE && !residual ? y : mb;
    th_node_io(g, "bias_add", "Add", 14, (ir_tensor *[]){m, bt}, 2, &h, 1);
    if (residual) {
        ir_tensor *sum = t == TAIL_NONE ? y : named(g, "sum");
        th_node_io(g, "residual_add", "Add", 14, (ir_tensor *[]){f->r, h}, 2, &sum, 1);
        h = sum;
    }
    if (t == TAIL_ERF_CHAIN) {
        ir_tensor *u = named(g, "u"), *e = named(g, "e"), *p = named(g, "p"), *q = named(g, "q");
        th_node_io(g, "div", "Div", 14, (ir_tensor *[]){h, scalar(g, "c", sqrtf(2.0f))}, 2, &u, 1);
        th_node_io(g, "erf", "Erf", 13, &u, 1, &e, 1);
        th_node_io(g, "one", "Add", 14, (ir_tensor *[]){e, scalar(g, "one_v", 1.0f)}, 2, &p, 1);
        th_node_io(g, "mul", "Mul", 14, (ir_tensor *[]){h, p}, 2, &q, 1);
        th_node_io(g, "half", "Mul", 14, (ir_tensor *[]){q, scalar(g, "half_v", 0.5f)}, 2, &y, 1);
    } else if (t != TAIL_NONE) {
        ir_node *gelu = th_node_io(g, "gelu", "Gelu", 20, &h, 1, &y, 1);
        if (t == TAIL_GELU_TANH) th_attr_string(g, gelu, "approximate", "tanh");
    }
    ck_assert_tci_ok(pass_optimize(g));
}

/* Inputs x and r, deterministic. */
static void inputs_of(float *x, float *r) {
    for (int i = 0; i < ROWS * K; i++) x[i] = -2.0f + 4.0f * (float)((i * 7) % 23) / 22.0f;
    for (int i = 0; i < ROWS * N; i++) r[i] = 0.5f * cosf(0.3f * (float)i);
}

/* The CPU reference of the unfused graph. */
static void reference(const fixture *f, const float *x, const float *r, float *out) {
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(f->g, &ex));
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 3, f->x->dims, x),
                        th_tensor(TCI_DTYPE_FLOAT, 3, (int64_t[]){B, S, N}, r)};
    ck_assert_tci_ok(exec_cpu_run(ex, in, f->r ? 2 : 1));
    memcpy(out, exec_cpu_output(ex, 0)->data, sizeof(float) * ROWS * N);
    exec_cpu_destroy(ex);
}

/* The GEMM step's formula on the host, from the step's fields: act(alpha x w + beta r + bias),
 * with the bias the plan uploads. */
static void step_formula(const plan *p, const plan_step *s, const fixture *f, const float *x,
                         const float *r, float *out) {
    const plan_gemm *gm = &s->u.gemm;
    ck_assert_int_eq(gm->m, ROWS);
    ck_assert_int_eq(gm->n, N);
    ck_assert_int_eq(gm->k, K);
    const float *bias = gm->has_bias ? p->tensors[s->inputs[2]].host_data : NULL;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += x[i * K + k] * f->w[k * N + j];
            float v = gm->alpha * acc;
            if (gm->has_c) v += gm->beta * r[i * N + j];
            if (bias) v += bias[j];
            out[i * N + j] = act_apply_host(gm->act.kind, v, gm->act.alpha, gm->act.beta);
        }
}

/* Builds, fuses and plans; the single GEMM step's formula against the reference. */
static const plan_step *check_one_step(fixture *f, plan **out_plan) {
    ck_assert_tci_ok(pass_prepare_for_gpu(f->g));
    ck_assert_tci_ok(plan_build(f->g, NULL, out_plan));
    plan *p = *out_plan;
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = &p->steps[0];
    ck_assert_int_eq(s->kind, PLAN_STEP_GEMM);
    ck_assert_int_eq(s->outputs[0], p->output_tensors[0]);
    float x[ROWS * K], r[ROWS * N], want[ROWS * N], got[ROWS * N];
    inputs_of(x, r);
    reference(f, x, r, want);
    step_formula(p, s, f, x, r, got);
    th_assert_near(got, want, ROWS * N, 2e-6f);
    return s;
}

START_TEST(test_erf_chain_folds) {
    fixture f;
    build(&f, false, TAIL_ERF_CHAIN);
    plan *p;
    const plan_step *s = check_one_step(&f, &p);
    ck_assert_str_eq(s->label, "MatMul+Add+Div+Erf+Add+Mul+Mul (Gelu)");
    const plan_gemm *gm = &s->u.gemm;
    ck_assert_int_eq(gm->act.kind, ACT_GELU_OF_DIV);
    ck_assert_float_eq(gm->act.alpha, sqrtf(2.0f));
    /* the division by c moved into alpha and the bias */
    ck_assert_float_eq(gm->alpha, 1.0f / sqrtf(2.0f));
    ck_assert(gm->has_bias && !gm->has_c);
    const float *bias = p->tensors[s->inputs[2]].host_data;
    ck_assert_float_eq_tol(bias[0], f.bias[0] / sqrtf(2.0f), 1e-7f);
    for (size_t i = 0; i < f.g->num_nodes; i++)
        if (f.g->nodes[i] != f.mm) ck_assert_ptr_eq(f.g->nodes[i]->fused_into, f.mm);
    plan_destroy(p);
    ir_graph_destroy(f.g);
}
END_TEST

/* the residual's beta is divided too */
START_TEST(test_residual_then_erf_chain) {
    fixture f;
    build(&f, true, TAIL_ERF_CHAIN);
    plan *p;
    const plan_step *s = check_one_step(&f, &p);
    ck_assert_str_eq(s->label, "MatMul+Add+Add+Div+Erf+Add+Mul+Mul (Gelu)");
    ck_assert(s->u.gemm.has_c);
    ck_assert_float_eq(s->u.gemm.beta, 1.0f / sqrtf(2.0f));
    ck_assert_int_eq(s->inputs[3], p->input_tensors[1]);
    plan_destroy(p);
    ir_graph_destroy(f.g);
}
END_TEST

START_TEST(test_residual_folds) {
    fixture f;
    build(&f, true, TAIL_NONE);
    plan *p;
    const plan_step *s = check_one_step(&f, &p);
    ck_assert_str_eq(s->label, "MatMul+Add+Add");
    ck_assert(s->u.gemm.has_c && s->u.gemm.has_bias);
    ck_assert_float_eq(s->u.gemm.beta, 1.0f);
    ck_assert_float_eq(s->u.gemm.alpha, 1.0f);
    ck_assert_int_eq(s->u.gemm.act.kind, ACT_NONE);
    ck_assert_int_eq(s->inputs[3], p->input_tensors[1]);
    plan_destroy(p);
    ir_graph_destroy(f.g);
}
END_TEST

/* the Gelu op, both forms, after the residual */
START_TEST(test_gelu_op_folds) {
    const tail tails[2] = {TAIL_GELU, TAIL_GELU_TANH};
    const act_kind kinds[2] = {ACT_GELU, ACT_GELU_TANH};
    for (int i = 0; i < 2; i++)
        for (int res = 0; res < 2; res++) {
            fixture f;
            build(&f, res, tails[i]);
            plan *p;
            const plan_step *s = check_one_step(&f, &p);
            ck_assert_str_eq(s->label, res ? "MatMul+Add+Add+Gelu" : "MatMul+Add+Gelu");
            ck_assert_int_eq(s->u.gemm.act.kind, kinds[i]);
            ck_assert_int_eq(s->u.gemm.has_c, res);
            ck_assert_float_eq(s->u.gemm.alpha, 1.0f);
            plan_destroy(p);
            ir_graph_destroy(f.g);
        }
}
END_TEST

/* 2-D Gemm (transB) + Add(residual) + Tanh: Gemm takes a residual and any activation too */
START_TEST(test_gemm_op_residual_activation) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[2] = {ROWS, K}, rd[2] = {ROWS, N}, wd[2] = {N, K}, bd[1] = {N};
    float w[N * K], bias[N];
    for (int i = 0; i < N * K; i++) w[i] = 0.2f * cosf(0.9f * (float)i);
    for (int i = 0; i < N; i++) bias[i] = 0.05f * (float)i;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    ir_tensor *r = th_named(g, "r", TCI_DTYPE_FLOAT, 2, rd, NULL);
    ir_tensor *gm = named(g, "gm"), *sum = named(g, "sum"), *y = named(g, "y");
    th_graph_io(g, (ir_tensor *[]){x, r}, 2, &y, 1);
    ir_node *gemm = th_node_io(g, "gemm", "Gemm", 13,
                               (ir_tensor *[]){x, th_named(g, "w", TCI_DTYPE_FLOAT, 2, wd, w),
                                               th_named(g, "b", TCI_DTYPE_FLOAT, 1, bd, bias)},
                               3, &gm, 1);
    th_attr_int(g, gemm, "transB", 1);
    th_attr_float(g, gemm, "alpha", 0.5f);
    th_node_io(g, "add", "Add", 14, (ir_tensor *[]){gm, r}, 2, &sum, 1);
    th_node_io(g, "tanh", "Tanh", 13, &sum, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = &p->steps[0];
    ck_assert_str_eq(s->label, "Gemm+Add+Tanh");
    const plan_gemm *pg = &s->u.gemm;
    ck_assert(pg->has_c && pg->has_bias && pg->trans_b);
    ck_assert_int_eq(pg->act.kind, ACT_TANH);
    ck_assert_float_eq(pg->alpha, 0.5f);
    float xv[ROWS * K], rv[ROWS * N], want[ROWS * N], got[ROWS * N];
    inputs_of(xv, rv);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(g, &ex));
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, xd, xv), th_tensor(TCI_DTYPE_FLOAT, 2, rd, rv)};
    ck_assert_tci_ok(exec_cpu_run(ex, in, 2));
    memcpy(want, exec_cpu_output(ex, 0)->data, sizeof want);
    exec_cpu_destroy(ex);
    const float *pb = p->tensors[s->inputs[2]].host_data;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += xv[i * K + k] * w[j * K + k];
            float v = pg->alpha * acc + pg->beta * rv[i * N + j] + pb[j];
            got[i * N + j] = act_apply_host(pg->act.kind, v, pg->act.alpha, pg->act.beta);
        }
    th_assert_near(got, want, ROWS * N, 2e-6f);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* What must stay apart: a residual computed after the MatMul (its step would run later), a
 * residual that broadcasts, and an erf chain whose input has a third reader. */
START_TEST(test_what_does_not_fold) {
    const int64_t xd[3] = {B, S, K}, wd[2] = {K, N}, bd[1] = {N}, rowd[3] = {1, 1, N};
    float w[K * N] = {0}, bias[N] = {0};
    for (int c = 0; c < 3; c++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
        ir_tensor *in2 = th_named(g, "z", TCI_DTYPE_FLOAT, 3, c == 1 ? rowd : (int64_t[]){B, S, N},
                                  NULL);
        ir_tensor *m = named(g, "m"), *mb = named(g, "mb"), *y = named(g, "y"), *y2 = named(g, "y2");
        th_graph_io(g, (ir_tensor *[]){x, in2}, 2, (ir_tensor *[]){y, y2}, c == 2 ? 2 : 1);
        ir_node *mm = th_node_io(g, "mm", "MatMul", 13,
                                 (ir_tensor *[]){x, th_named(g, "w", TCI_DTYPE_FLOAT, 2, wd, w)}, 2,
                                 &m, 1);
        ir_node *badd = th_node_io(g, "badd", "Add", 14,
                                   (ir_tensor *[]){m, th_named(g, "b", TCI_DTYPE_FLOAT, 1, bd, bias)},
                                   2, &mb, 1);
        ir_node *last = NULL;
        if (c == 0) { /* Add(mb, Relu(z)), the Relu after the MatMul */
            ir_tensor *rz = named(g, "rz");
            th_node_io(g, "relu", "Relu", 14, &in2, 1, &rz, 1);
            last = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){mb, rz}, 2, &y, 1);
        } else if (c == 1) { /* Add(mb, z of shape 1x1xN) */
            last = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){mb, in2}, 2, &y, 1);
        } else { /* the erf chain on mb, and mb also an output of its own through Neg */
            ir_tensor *u = named(g, "u"), *e = named(g, "e"), *p = named(g, "p"), *q = named(g, "q");
            last = th_node_io(g, "div", "Div", 14, (ir_tensor *[]){mb, scalar(g, "c", sqrtf(2.0f))},
                              2, &u, 1);
            th_node_io(g, "erf", "Erf", 13, &u, 1, &e, 1);
            th_node_io(g, "one", "Add", 14, (ir_tensor *[]){e, scalar(g, "one_v", 1.0f)}, 2, &p, 1);
            th_node_io(g, "mul", "Mul", 14, (ir_tensor *[]){mb, p}, 2, &q, 1);
            th_node_io(g, "half", "Mul", 14, (ir_tensor *[]){q, scalar(g, "half_v", 0.5f)}, 2, &y, 1);
            th_node_io(g, "neg", "Neg", 13, &mb, 1, &y2, 1);
        }
        ck_assert_tci_ok(pass_optimize(g));
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
        ck_assert_ptr_eq(badd->fused_into, mm);
        ck_assert_ptr_null(last->fused_into);
        ck_assert_str_eq(mm->epilogue->label, "MatMul+Add");
        ck_assert_int_eq(mm->epilogue->act.kind, ACT_NONE);
        ck_assert_float_eq(mm->epilogue->divisor, 0.0f);
        plan *p;
        ck_assert_tci_ok(plan_build(g, NULL, &p));
        ck_assert(!p->steps[0].u.gemm.has_c);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("gemm_epilogue");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_erf_chain_folds);
    tcase_add_test(tc, test_residual_then_erf_chain);
    tcase_add_test(tc, test_residual_folds);
    tcase_add_test(tc, test_gelu_op_folds);
    tcase_add_test(tc, test_gemm_op_residual_activation);
    tcase_add_test(tc, test_what_does_not_fold);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
