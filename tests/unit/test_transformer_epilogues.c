/* The GEMM epilogues of GPT-2's and ViT's exports (src/graph/passes/fuse.c): the tanh-form Gelu
 * expanded into Mul/Pow/Add/Tanh nodes (transformers' NewGELUActivation, torch's own expansion,
 * other operand orders) becomes the GEMM step's GeluTanh, and a GEMM result reshaped with its
 * last dim kept (GPT-2's Conv1D, the dynamo exporter's Linear: Gemm then Reshape) fuses on
 * through the Reshape into its residual Add and activation. The step's formula, evaluated on the
 * host from the plan step's fields, equals the CPU reference of the unfused nodes; chains that
 * differ anywhere keep their steps. No GPU. */
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

#define SQRT_2_PI 0.79788456080286536f
#define KAPPA 0.044715f

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static ir_tensor *scalar(ir_graph *g, float v) {
    return th_named(g, NULL, TCI_DTYPE_FLOAT, 0, NULL, &v);
}

static ir_tensor *mul(ir_graph *g, ir_tensor *a, ir_tensor *b) {
    ir_tensor *y = named(g, NULL);
    th_node_io(g, NULL, "Mul", 14, (ir_tensor *[]){a, b}, 2, &y, 1);
    return y;
}

static ir_tensor *add(ir_graph *g, ir_tensor *a, ir_tensor *b) {
    ir_tensor *y = named(g, NULL);
    th_node_io(g, NULL, "Add", 14, (ir_tensor *[]){a, b}, 2, &y, 1);
    return y;
}

typedef enum tail {
    TAIL_NONE,
    TAIL_RESIDUAL,   /* Add(r, .) */
    TAIL_TANH_HF,    /* Pow(x, 3), Mul kappa, Add x, Mul beta, Tanh, Add 1, (0.5 x) p */
    TAIL_TANH_TORCH, /* x (x x), constants first, 0.5 (x p) */
    TAIL_TANH_MIX,   /* (x x) x, x (p 0.5) */
} tail;

typedef struct spec {
    tail tail;
    bool reshape;      /* Gemm [ROWS, N] -> Reshape [B, S, N] before the tail */
    bool wide_reshape; /* the Reshape to [B, S * N] instead (last dim changed) */
    float kappa, beta; /* the tanh chain's constants */
    bool extra_reader; /* the tail's input also a graph output through Neg */
} spec;

typedef struct fixture {
    ir_graph *g;
    ir_tensor *x, *r;
    ir_node *gemm, *reshape;
    float w[K * N], bias[N];
    int64_t out_dims[3];
    int out_rank;
} fixture;

/* The expanded tanh Gelu of t in one of its exported forms, the constants from s. */
static ir_tensor *tanh_gelu(ir_graph *g, ir_tensor *t, const spec *s) {
    ir_tensor *cube, *inner, *th, *p;
    switch (s->tail) {
    case TAIL_TANH_HF: {
        cube = named(g, NULL);
        th_node_io(g, NULL, "Pow", 15, (ir_tensor *[]){t, scalar(g, 3.0f)}, 2, &cube, 1);
        inner = mul(g, add(g, t, mul(g, cube, scalar(g, s->kappa))), scalar(g, s->beta));
        th = named(g, NULL);
        th_node_io(g, NULL, "Tanh", 13, &inner, 1, &th, 1);
        p = add(g, th, scalar(g, 1.0f));
        return mul(g, mul(g, t, scalar(g, 0.5f)), p);
    }
    case TAIL_TANH_TORCH:
        cube = mul(g, t, mul(g, t, t));
        inner = mul(g, scalar(g, s->beta), add(g, t, mul(g, scalar(g, s->kappa), cube)));
        th = named(g, NULL);
        th_node_io(g, NULL, "Tanh", 13, &inner, 1, &th, 1);
        p = add(g, scalar(g, 1.0f), th);
        return mul(g, scalar(g, 0.5f), mul(g, t, p));
    default:
        cube = mul(g, mul(g, t, t), t);
        inner = mul(g, add(g, mul(g, cube, scalar(g, s->kappa)), t), scalar(g, s->beta));
        th = named(g, NULL);
        th_node_io(g, NULL, "Tanh", 13, &inner, 1, &th, 1);
        p = add(g, th, scalar(g, 1.0f));
        return mul(g, t, mul(g, p, scalar(g, 0.5f)));
    }
}

/* x [ROWS, K] -> Gemm(w [K, N], bias) [-> Reshape] -> tail -> y [-> Neg -> y2] */
static void build(fixture *f, const spec *s) {
    memset(f, 0, sizeof *f);
    ck_assert_tci_ok(ir_graph_create(&f->g));
    ir_graph *g = f->g;
    for (int i = 0; i < K * N; i++) f->w[i] = 0.25f * sinf(0.7f * (float)i);
    for (int i = 0; i < N; i++) f->bias[i] = 0.1f * (float)(i - N / 2);
    const int64_t xd[2] = {ROWS, K}, wd[2] = {K, N}, bd[1] = {N};
    if (s->reshape) {
        f->out_rank = s->wide_reshape ? 2 : 3;
        memcpy(f->out_dims, s->wide_reshape ? (int64_t[]){B, S * N, 0} : (int64_t[]){B, S, N},
               sizeof f->out_dims);
    } else {
        f->out_rank = 2;
        memcpy(f->out_dims, (int64_t[]){ROWS, N, 0}, sizeof f->out_dims);
    }
    f->x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    f->r = s->tail == TAIL_RESIDUAL ? th_named(g, "r", TCI_DTYPE_FLOAT, f->out_rank, f->out_dims,
                                               NULL)
                                    : NULL;
    ir_tensor *m = named(g, "m");
    f->gemm = th_node_io(g, "gemm", "Gemm", 13,
                         (ir_tensor *[]){f->x, th_named(g, "w", TCI_DTYPE_FLOAT, 2, wd, f->w),
                                         th_named(g, "b", TCI_DTYPE_FLOAT, 1, bd, f->bias)},
                         3, &m, 1);
    ir_tensor *h = m;
    if (s->reshape) {
        h = named(g, "mr");
        const int64_t sd[1] = {f->out_rank};
        f->reshape = th_node_io(
            g, "reshape", "Reshape", 14,
            (ir_tensor *[]){m, th_named(g, "shape", TCI_DTYPE_INT64, 1, sd, f->out_dims)}, 2, &h,
            1);
    }
    ir_tensor *y;
    if (s->tail == TAIL_NONE) y = h;
    else if (s->tail == TAIL_RESIDUAL) y = add(g, f->r, h);
    else y = tanh_gelu(g, h, s);
    ir_tensor *outs[2] = {y, named(g, "y2")};
    if (s->extra_reader) th_node_io(g, "neg", "Neg", 13, &h, 1, &outs[1], 1);
    th_graph_io(g, (ir_tensor *[]){f->x, f->r}, f->r ? 2 : 1, outs, s->extra_reader ? 2 : 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
}

static void inputs_of(float *x, float *r) {
    for (int i = 0; i < ROWS * K; i++) x[i] = -2.0f + 4.0f * (float)((i * 7) % 23) / 22.0f;
    for (int i = 0; i < ROWS * N; i++) r[i] = 0.5f * cosf(0.3f * (float)i);
}

/* The CPU reference of the unfused graph: output 0. */
static void reference(const fixture *f, const float *x, const float *r, float *out) {
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(f->g, &ex));
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, f->x->dims, x),
                        th_tensor(TCI_DTYPE_FLOAT, f->out_rank, f->out_dims, r)};
    ck_assert_tci_ok(exec_cpu_run(ex, in, f->r ? 2 : 1));
    memcpy(out, exec_cpu_output(ex, 0)->data, sizeof(float) * ROWS * N);
    exec_cpu_destroy(ex);
}

/* The plan's single GEMM step, its formula act(alpha x w + beta r + bias) on the host against
 * the reference; the step returned (p owns it). */
static const plan_step *check_one_step(fixture *f, plan **out_plan) {
    ck_assert_tci_ok(plan_build(f->g, NULL, out_plan));
    plan *p = *out_plan;
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = &p->steps[0];
    ck_assert_int_eq(s->kind, PLAN_STEP_GEMM);
    ck_assert_int_eq(s->outputs[0], p->output_tensors[0]);
    const plan_gemm *gm = &s->u.gemm;
    ck_assert_int_eq(gm->m, ROWS);
    ck_assert_int_eq(gm->n, N);
    ck_assert_int_eq(gm->k, K);
    ck_assert_int_eq(gm->batch, 1);
    ck_assert(!gm->trans_a && !gm->trans_b && gm->has_bias);
    /* the step writes the reshaped tensor: the graph's output, of its dims */
    ck_assert_int_eq(p->tensors[s->outputs[0]].rank, f->out_rank);
    float x[ROWS * K], r[ROWS * N], want[ROWS * N], got[ROWS * N];
    inputs_of(x, r);
    reference(f, x, r, want);
    const float *bias = p->tensors[s->inputs[2]].host_data;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += x[i * K + k] * f->w[k * N + j];
            float v = gm->alpha * acc + bias[j];
            if (gm->has_c) v += gm->beta * r[i * N + j];
            got[i * N + j] = act_apply_host(gm->act.kind, v, gm->act.alpha, gm->act.beta);
        }
    th_assert_near(got, want, ROWS * N, 1e-5f);
    return s;
}

/* every node but the Gemm is computed by its step */
static void assert_all_fused(const fixture *f) {
    for (size_t i = 0; i < f->g->num_nodes; i++)
        if (f->g->nodes[i] != f->gemm) ck_assert_ptr_eq(f->g->nodes[i]->fused_into, f->gemm);
}

static const spec PLAIN = {.kappa = KAPPA, .beta = SQRT_2_PI};

START_TEST(test_tanh_gelu_forms_fold) {
    const tail tails[3] = {TAIL_TANH_HF, TAIL_TANH_TORCH, TAIL_TANH_MIX};
    const char *labels[3] = {"Gemm+Pow+Mul+Add+Mul+Tanh+Add+Mul+Mul (GeluTanh)",
                             "Gemm+Mul+Mul+Mul+Add+Mul+Tanh+Add+Mul+Mul (GeluTanh)",
                             "Gemm+Mul+Mul+Mul+Add+Mul+Tanh+Add+Mul+Mul (GeluTanh)"};
    for (int t = 0; t < 3; t++)
        for (int reshape = 0; reshape < 2; reshape++) {
            spec s = PLAIN;
            s.tail = tails[t];
            s.reshape = reshape;
            fixture f;
            build(&f, &s);
            plan *p;
            const plan_step *st = check_one_step(&f, &p);
            ck_assert_int_eq(st->u.gemm.act.kind, ACT_GELU_TANH);
            ck_assert(!st->u.gemm.has_c);
            ck_assert_float_eq(st->u.gemm.alpha, 1.0f);
            char want[160];
            snprintf(want, sizeof want, "Gemm%s%s", reshape ? "+Reshape" : "", labels[t] + 4);
            ck_assert_str_eq(st->label, want);
            assert_all_fused(&f);
            plan_destroy(p);
            ir_graph_destroy(f.g);
        }
}
END_TEST

/* a constant off by more than fp32 rounding, or x read by another node: the chain stays steps */
START_TEST(test_other_tanh_chains_keep_steps) {
    for (int c = 0; c < 3; c++) {
        spec s = PLAIN;
        s.tail = TAIL_TANH_HF;
        s.reshape = true;
        if (c == 0) s.kappa = 0.0447f;
        else if (c == 1) s.beta = SQRT_2_PI * (1.0f + 1e-4f);
        else s.extra_reader = true;
        fixture f;
        build(&f, &s);
        ck_assert_ptr_null(f.reshape->fused_into);
        plan *p;
        ck_assert_tci_ok(plan_build(f.g, NULL, &p));
        ck_assert_str_eq(p->steps[0].label, "Gemm");
        ck_assert_int_eq(p->steps[0].u.gemm.act.kind, ACT_NONE);
        /* Gemm, then the chain's Pow (the Mul 0.5 of x takes nothing) ... each a step */
        ck_assert_int_ge(p->num_steps, 7);
        plan_destroy(p);
        ir_graph_destroy(f.g);
    }
}
END_TEST

/* Gemm -> Reshape [B, S, N] -> Add(r): r is the GEMM's C, the Reshape a view */
START_TEST(test_residual_through_reshape) {
    spec s = PLAIN;
    s.tail = TAIL_RESIDUAL;
    s.reshape = true;
    fixture f;
    build(&f, &s);
    plan *p;
    const plan_step *st = check_one_step(&f, &p);
    ck_assert_str_eq(st->label, "Gemm+Reshape+Add");
    ck_assert(st->u.gemm.has_c);
    ck_assert_float_eq(st->u.gemm.beta, 1.0f);
    ck_assert_int_eq(st->inputs[3], p->input_tensors[1]);
    ck_assert_int_eq(st->u.gemm.act.kind, ACT_NONE);
    assert_all_fused(&f);
    plan_destroy(p);
    ir_graph_destroy(f.g);
}
END_TEST

/* a Reshape that changes the last dim ([B, S * N]: the rows are no longer the GEMM's), and a
 * Reshape with nothing to fuse after it, stay apart */
START_TEST(test_reshapes_that_stay) {
    for (int c = 0; c < 2; c++) {
        spec s = PLAIN;
        s.tail = c == 0 ? TAIL_RESIDUAL : TAIL_NONE;
        s.reshape = true;
        s.wide_reshape = c == 0;
        fixture f;
        build(&f, &s);
        ck_assert_ptr_null(f.reshape->fused_into);
        ck_assert_ptr_null(f.gemm->epilogue);
        plan *p;
        ck_assert_tci_ok(plan_build(f.g, NULL, &p));
        ck_assert_str_eq(p->steps[0].label, "Gemm");
        ck_assert(!p->steps[0].u.gemm.has_c);
        /* the Reshape is no step; the residual Add is one */
        ck_assert_int_eq(p->num_steps, c == 0 ? 2 : 1);
        if (c == 0) ck_assert_int_eq(p->steps[1].kind, PLAN_STEP_ELTWISE);
        plan_destroy(p);
        ir_graph_destroy(f.g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("transformer_epilogues");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_tanh_gelu_forms_fold);
    tcase_add_test(tc, test_other_tanh_chains_keep_steps);
    tcase_add_test(tc, test_residual_through_reshape);
    tcase_add_test(tc, test_reshapes_that_stay);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
