/* The erf-expanded Gelu (src/graph/passes/fuse.c): Div(x, c) -> Erf -> Add 1 -> Mul x -> Mul 0.5
 * fuses into the Div's element-wise step as ACT_GELU_SCALED (alpha 1 / c) over the dividend;
 * the host formula of that step equals the CPU reference of the unfused chain; a chain that
 * differs anywhere keeps its steps. No GPU needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

enum { N = 64 };

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static ir_tensor *scalar(ir_graph *g, const char *name, float v) {
    return th_named(g, name, TCI_DTYPE_FLOAT, 0, NULL, &v);
}

typedef struct gelu_graph {
    ir_graph *g;
    ir_tensor *x;
    ir_node *div, *nodes[4];
} gelu_graph;

/* x (2, 32) -> Div(x, divisor) -> Erf -> Add(one) -> Mul(x, .) -> Mul(., half) -> y */
static void build(gelu_graph *t, float divisor, float one, float half) {
    memset(t, 0, sizeof *t);
    ck_assert_tci_ok(ir_graph_create(&t->g));
    ir_graph *g = t->g;
    const int64_t xd[2] = {2, N / 2};
    t->x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    ir_tensor *u = named(g, "u"), *e = named(g, "e"), *p = named(g, "p"), *m = named(g, "m");
    ir_tensor *y = named(g, "y");
    th_graph_io(g, &t->x, 1, &y, 1);
    t->div = th_node_io(g, "div", "Div", 14, (ir_tensor *[]){t->x, scalar(g, "c", divisor)}, 2,
                        &u, 1);
    t->nodes[0] = th_node_io(g, "erf", "Erf", 13, &u, 1, &e, 1);
    t->nodes[1] = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){e, scalar(g, "one", one)}, 2,
                             &p, 1);
    t->nodes[2] = th_node_io(g, "mul", "Mul", 14, (ir_tensor *[]){t->x, p}, 2, &m, 1);
    t->nodes[3] = th_node_io(g, "half", "Mul", 14, (ir_tensor *[]){scalar(g, "h", half), m}, 2,
                             &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
}

START_TEST(test_gelu_fuses) {
    const float c = sqrtf(2.0f);
    gelu_graph t;
    build(&t, c, 1.0f, 0.5f);
    ck_assert_ptr_nonnull(t.div->epilogue);
    ck_assert_int_eq(t.div->epilogue->act.kind, ACT_GELU_SCALED);
    ck_assert_float_eq(t.div->epilogue->act.alpha, 1.0f / c);
    for (int i = 0; i < 4; i++) ck_assert_ptr_eq(t.nodes[i]->fused_into, t.div);
    ck_assert_ptr_nonnull(strstr(t.div->epilogue->label, "(Gelu)"));
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = &p->steps[0];
    ck_assert_int_eq(s->kind, PLAN_STEP_ELTWISE);
    /* the step reads the dividend alone and divides in fp32: no constant c in the storage type */
    ck_assert_int_eq(s->u.eltwise.op, BINARY_NONE);
    ck_assert_int_eq(s->num_inputs, 1);
    ck_assert_int_eq(s->u.eltwise.act.kind, ACT_GELU_SCALED);
    ck_assert_int_eq(s->outputs[0], p->output_tensors[0]);
    /* the step's formula, act(x), against the CPU reference of the five nodes */
    float x[N], want[N];
    for (int i = 0; i < N; i++) x[i] = -4.0f + 8.0f * (float)i / (N - 1);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(t.g, &ex));
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 2, t.x->dims, x);
    ck_assert_tci_ok(exec_cpu_run(ex, &in, 1));
    const float *ref = exec_cpu_output(ex, 0)->data;
    for (int i = 0; i < N; i++) {
        want[i] = act_apply_host(ACT_GELU_SCALED, x[i], 1.0f / c, 0.0f);
        ck_assert_float_eq_tol(want[i], 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0))), 1e-6);
    }
    th_assert_near(want, ref, N, 1e-6f);
    exec_cpu_destroy(ex);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* Add 2, Mul 0.25: not the Gelu; the Div takes the Erf as before and the rest stay steps */
START_TEST(test_other_chains_keep_steps) {
    const float chains[2][2] = {{2.0f, 0.5f}, {1.0f, 0.25f}};
    for (int k = 0; k < 2; k++) {
        gelu_graph t;
        build(&t, sqrtf(2.0f), chains[k][0], chains[k][1]);
        ck_assert_ptr_nonnull(t.div->epilogue);
        ck_assert_int_eq(t.div->epilogue->act.kind, ACT_ERF);
        ck_assert_ptr_null(t.nodes[3]->fused_into);
        plan *p;
        ck_assert_tci_ok(plan_build(t.g, NULL, &p));
        ck_assert_int_eq(p->num_steps, 4);
        plan_destroy(p);
        ir_graph_destroy(t.g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("gelu_fusion");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_gelu_fuses);
    tcase_add_test(tc, test_other_chains_keep_steps);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
