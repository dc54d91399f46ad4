/* Control flow: subgraphs in the IR (outer-scope reads, nesting), If on the CPU reference, the
 * inlining of an If whose condition is known at build, and the GPU planner's refusal of the
 * others. Models: tests/data/make_fixtures.py (control_flow). */
#include <stdio.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"
#include "onnx/loader.h"

#define FIXTURE(name) TCI_TEST_DATA "/loader/" name

static ir_graph *load_ok(const char *path) {
    ir_graph *g = NULL;
    ck_assert_tci_ok(onnx_load_file(path, &g));
    return g;
}

static ir_node *find_node(const ir_graph *g, const char *name) {
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

static const ir_graph *branch(const ir_node *n, const char *attr) {
    const ir_attr *a = ir_node_attr(n, attr);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->type, IR_ATTR_GRAPH);
    return a->graph;
}

/* Runs g (optimised) on the CPU reference with x (3 floats) and the bool inputs after it. */
static void run3(const ir_graph *g, const float *x, const uint8_t *conds, int num_conds,
                 float *got) {
    int64_t three = 3;
    tci_tensor in[3];
    in[0] = th_tensor(TCI_DTYPE_FLOAT, 1, &three, x);
    for (int k = 0; k < num_conds; k++) in[1 + k] = th_tensor(TCI_DTYPE_BOOL, 0, NULL, &conds[k]);
    exec_cpu *e;
    ck_assert_tci_ok(exec_cpu_create(g, &e));
    ck_assert_tci_ok(exec_cpu_run(e, in, (size_t)(1 + num_conds)));
    const tci_tensor *y = exec_cpu_output(e, 0);
    ck_assert_int_eq(y->dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(y->rank, 1);
    ck_assert_int_eq(y->dims[0], 3);
    memcpy(got, y->data, 3 * sizeof(float));
    exec_cpu_destroy(e);
}

START_TEST(test_outer_read_is_an_implicit_input) {
    ir_graph *g = load_ok(FIXTURE("if_outer.onnx"));
    ir_node *n = find_node(g, "if");
    ck_assert_ptr_nonnull(n);
    /* the condition, then t (read by both branches, bound once) */
    ck_assert_int_eq(n->num_inputs, 2);
    ck_assert_int_eq(n->num_implicit_inputs, 1);
    ck_assert_str_eq(n->inputs[1]->name, "t");
    const ir_graph *then_g = branch(n, "then_branch"), *else_g = branch(n, "else_branch");
    ck_assert_ptr_eq(then_g->parent, g);
    ck_assert_uint_eq(then_g->num_outer, 1);
    ck_assert(then_g->outer[0]->is_outer);
    ck_assert_str_eq(then_g->outer[0]->name, "t");
    ck_assert_int_eq(then_g->outer_slot[0], 1);
    ck_assert_int_eq(else_g->outer_slot[0], 1);
    /* the branch's initializer is its own, not an outer read */
    ck_assert_ptr_nonnull(ir_graph_find_tensor(then_g, "two")->data);
    ck_assert_tci_ok(pass_optimize(g));
    /* Relu's output is read by the branches only: it must not be removed as dead */
    ck_assert_ptr_nonnull(find_node(g, "relu"));
    ck_assert_ptr_nonnull(find_node(g, "if"));
    const float x[3] = {-1.f, 2.f, 3.f};
    float got[3];
    run3(g, x, (const uint8_t[]){1}, 1, got);
    th_assert_near(got, (const float[]){0.f, 4.f, 6.f}, 3, 0.f);
    run3(g, x, (const uint8_t[]){0}, 1, got);
    th_assert_near(got, (const float[]){-0.f, -2.f, -3.f}, 3, 0.f);
    /* both branches give float [3] */
    const ir_tensor *y = ir_graph_find_tensor(g, "y");
    ck_assert_int_eq(y->dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(y->rank, 1);
    ck_assert_int_eq(y->dims[0], 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_nested_subgraphs) {
    ir_graph *g = load_ok(FIXTURE("if_nested.onnx"));
    ir_node *outer = find_node(g, "outer");
    /* c, then what the branches read from here: t (then), x (the inner If's, and else's output),
     * c2 (the inner If's condition) */
    ck_assert_int_eq(outer->num_implicit_inputs, 3);
    const ir_graph *then_g = branch(outer, "then_branch");
    ir_node *inner = find_node(then_g, "inner");
    ck_assert_ptr_nonnull(inner);
    const ir_graph *inner_then = branch(inner, "then_branch");
    ck_assert_ptr_eq(inner_then->parent, then_g);
    ck_assert_ptr_eq(ir_graph_root(inner_then), g);
    /* x is read two levels down: an outer value of the inner branch, of the outer branch, and an
     * implicit input of both Ifs */
    const ir_tensor *x_inner = ir_graph_find_tensor(inner_then, "x");
    ck_assert(x_inner->is_outer);
    ck_assert(ir_graph_find_tensor(then_g, "x")->is_outer);
    const ir_graph *else_g = branch(outer, "else_branch");
    ck_assert_uint_eq(else_g->num_nodes, 0);
    ck_assert(else_g->outputs[0]->is_outer);
    ck_assert_tci_ok(pass_optimize(g));
    const float x[3] = {1.f, -2.f, 3.f};
    float got[3];
    /* then/then: x + relu(-x) */
    run3(g, x, (const uint8_t[]){1, 1}, 2, got);
    th_assert_near(got, (const float[]){1.f, 0.f, 3.f}, 3, 0.f);
    /* then/else: x - relu(-x) */
    run3(g, x, (const uint8_t[]){1, 0}, 2, got);
    th_assert_near(got, (const float[]){1.f, -4.f, 3.f}, 3, 0.f);
    /* else: x itself, an outer value forwarded */
    run3(g, x, (const uint8_t[]){0, 1}, 2, got);
    th_assert_near(got, x, 3, 0.f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_known_condition_is_inlined) {
    ir_graph *g = load_ok(FIXTURE("if_known.onnx"));
    ck_assert_tci_ok(pass_optimize(g));
    /* Shape(x)[0] == 3 folded: the If is gone, its then branch in its place */
    ck_assert_ptr_null(find_node(g, "if"));
    ir_node *mul = find_node(g, "if/double");
    ck_assert_ptr_nonnull(mul);
    ck_assert_ptr_nonnull(find_node(g, "relu"));
    ck_assert_str_eq(mul->outputs[0]->name, "y");
    ck_assert_ptr_nonnull(mul->inputs[1]->data); /* the branch's initializer, now a constant */
    for (size_t i = 0; i < g->num_nodes; i++)
        ck_assert(!(g->nodes[i]->desc->flags & OP_CONTROL_FLOW));
    float got[3];
    run3(g, (const float[]){-1.f, 2.f, 3.f}, NULL, 0, got);
    th_assert_near(got, (const float[]){-1.f, 6.f, 9.f}, 3, 0.f);
    ir_graph_destroy(g);
    /* and it plans for the GPU: plain nodes only */
    g = load_ok(FIXTURE("if_known.onnx"));
    plan *p = NULL;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    ck_assert_ptr_nonnull(p);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_inlining_a_copy_keeps_the_source) {
    /* engines re-plan copies of the loaded graph: inlining in a copy leaves the source's If */
    ir_graph *g = load_ok(FIXTURE("if_known.onnx")), *copy = NULL;
    ck_assert_tci_ok(ir_graph_clone(g, &copy));
    ck_assert_tci_ok(pass_optimize(copy));
    ck_assert_ptr_null(find_node(copy, "if"));
    ir_graph_destroy(copy);
    ck_assert_ptr_nonnull(find_node(g, "if"));
    ck_assert_tci_ok(pass_optimize(g));
    float got[3];
    run3(g, (const float[]){1.f, 1.f, -1.f}, NULL, 0, got);
    th_assert_near(got, (const float[]){3.f, 3.f, -1.f}, 3, 0.f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gpu_planner_refuses_data_dependent_if) {
    ir_graph *g = load_ok(FIXTURE("if_outer.onnx"));
    plan *p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                        "node 'if' (If): data-dependent control flow runs on the CPU reference: "
                        "TCI_BACKEND_CPU, tci_engine_options.backend");
    ck_assert_ptr_null(p);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_branch_shapes_merge) {
    /* then gives [3], else [-1]... here: both [3] but the condition unknown, so the If's output
     * keeps what both agree on; a dtype they disagree on is an error */
    ir_graph *g = load_ok(FIXTURE("if_outer.onnx"));
    ck_assert_tci_ok(pass_optimize(g));
    ir_node *n = find_node(g, "if");
    int64_t three = 3, four = 4;
    tci_tensor c = th_shape_only(TCI_DTYPE_BOOL, 0, NULL);
    tci_tensor t3 = th_shape_only(TCI_DTYPE_FLOAT, 1, &three);
    tci_tensor t4 = th_shape_only(TCI_DTYPE_FLOAT, 1, &four);
    tci_tensor out;
    const tci_tensor *in[2] = {&c, &t3};
    tci_tensor *outs[1] = {&out};
    memset(&out, 0, sizeof out);
    ck_assert_tci_ok(n->desc->infer(n, in, outs));
    th_assert_dims(&out, 1, &three);
    in[1] = &t4;
    ck_assert_tci_ok(n->desc->infer(n, in, outs));
    th_assert_dims(&out, 1, &four);
    /* a condition of two elements */
    int64_t two = 2;
    tci_tensor c2 = th_shape_only(TCI_DTYPE_BOOL, 1, &two);
    in[0] = &c2;
    ck_assert_tci_error(n->desc->infer(n, in, outs), TCI_ERR_INVALID_MODEL,
                        "node 'if' (If): the condition has 2 elements; it must have one");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_subgraph_errors) {
    ir_graph *g = load_ok(FIXTURE("if_unbound.onnx"));
    /* the unknown name becomes the If's input, which nothing in the model produces */
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "node 'if' (If): input 'nowhere' is not produced by any node");
    ir_graph_destroy(g);
    ir_graph *bad = (ir_graph *)1;
    ck_assert_tci_error(onnx_load_file(FIXTURE("if_bad_branch.onnx"), &bad),
                        TCI_ERR_INVALID_MODEL,
                        "node 'if' (If), subgraph 'then_branch': node 'r' (Relu): attribute "
                        "'alpha' is given twice");
    ck_assert_ptr_null(bad);
    ck_assert_tci_error(onnx_load_file(FIXTURE("if_no_graph.onnx"), &bad), TCI_ERR_INVALID_MODEL,
                        "node 'if' (If): attribute 'then_branch' is a graph attribute without "
                        "a graph");
}
END_TEST

/* Runs g (optimised) on the CPU reference; the executor is returned for its outputs. */
static exec_cpu *run_graph(const ir_graph *g, const tci_tensor *in, size_t n) {
    exec_cpu *e;
    ck_assert_tci_ok(exec_cpu_create(g, &e));
    ck_assert_tci_ok(exec_cpu_run(e, in, n));
    return e;
}

START_TEST(test_loop_trip_count_and_condition) {
    /* x + 1 per iteration while i < limit (an outer value the body reads), at most M times */
    ir_graph *g = load_ok(FIXTURE("loop_while.onnx"));
    ck_assert_tci_ok(pass_optimize(g));
    int64_t three = 3, trips[3] = {5, 2, 0}, want_iters[3] = {4, 2, 0};
    const float x[3] = {1.f, 2.f, 3.f}, limit = 2.5f;
    const uint8_t yes = 1;
    /* inferred: the carried value keeps its [3], the scan output [?, 3] */
    const ir_tensor *ys_t = ir_graph_find_tensor(g, "ys");
    th_assert_dims(&(tci_tensor){.rank = ys_t->rank, .dims = {ys_t->dims[0], ys_t->dims[1]}}, 2,
                   (const int64_t[]){-1, 3});
    for (int r = 0; r < 3; r++) {
        tci_tensor in[4] = {th_tensor(TCI_DTYPE_INT64, 0, NULL, &trips[r]),
                            th_tensor(TCI_DTYPE_BOOL, 0, NULL, &yes),
                            th_tensor(TCI_DTYPE_FLOAT, 1, &three, x),
                            th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &limit)};
        exec_cpu *e = run_graph(g, in, 4);
        const tci_tensor *xf = exec_cpu_output(e, 0), *ys = exec_cpu_output(e, 1);
        float n = (float)want_iters[r];
        th_assert_near(xf->data, (const float[]){1.f + n, 2.f + n, 3.f + n}, 3, 0.f);
        th_assert_dims(ys, 2, (const int64_t[]){want_iters[r], 3});
        for (int64_t i = 0; i < want_iters[r]; i++)
            th_assert_near((const float *)ys->data + 3 * i,
                           (const float[]){2.f + (float)i, 3.f + (float)i, 4.f + (float)i}, 3,
                           0.f);
        exec_cpu_destroy(e);
    }
    ir_graph_destroy(g);
}
END_TEST

/* max_loop_iterations: a run needing more iterations is refused naming the Loop, never left
 * running; one within it runs (loop_while needs 4 iterations for M = 5, 2 for M = 2). */
START_TEST(test_loop_iteration_limit) {
    ir_limits limits;
    ir_limits_default(&limits);
    ck_assert_uint_eq(limits.max_loop_iterations, (uint64_t)1 << 20);
    limits.max_loop_iterations = 3;
    ir_graph *g;
    ck_assert_tci_ok(onnx_load_file_limits(FIXTURE("loop_while.onnx"), &limits, &g));
    ck_assert_tci_ok(pass_optimize(g));
    int64_t three = 3, five = 5, two = 2;
    const float x[3] = {1.f, 2.f, 3.f}, limit = 2.5f;
    const uint8_t yes = 1;
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_INT64, 0, NULL, &five),
                        th_tensor(TCI_DTYPE_BOOL, 0, NULL, &yes),
                        th_tensor(TCI_DTYPE_FLOAT, 1, &three, x),
                        th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &limit)};
    exec_cpu *e;
    ck_assert_tci_ok(exec_cpu_create(g, &e));
    ck_assert_tci_error(exec_cpu_run(e, in, 4), TCI_ERR_UNSUPPORTED,
                        "node 'loop' (Loop): the Loop is still running after 3 iterations, the "
                        "limit (max_loop_iterations)");
    /* the node named once: only the body's errors get its name put before theirs */
    ck_assert_ptr_eq(strstr(tci_last_error(), "node 'loop' (Loop)"), tci_last_error());
    ck_assert_ptr_null(strstr(tci_last_error() + 1, "node 'loop' (Loop)"));
    in[0] = th_tensor(TCI_DTYPE_INT64, 0, NULL, &two);
    ck_assert_tci_ok(exec_cpu_run(e, in, 4));
    th_assert_dims(exec_cpu_output(e, 1), 2, (const int64_t[]){2, 3});
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_loop_refusals) {
    ir_graph *g = load_ok(FIXTURE("loop_forever.onnx"));
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_UNSUPPORTED,
                        "node 'loop' (Loop): neither a trip count M nor a condition is given");
    ir_graph_destroy(g);
    /* a carried value that grows: its inferred dims are unknown; a scan output that changes
     * shape between iterations is an error naming them */
    g = load_ok(FIXTURE("loop_grow.onnx"));
    ck_assert_tci_ok(pass_optimize(g));
    const ir_tensor *xf = ir_graph_find_tensor(g, "x_final");
    ck_assert_int_eq(xf->rank, 1);
    ck_assert_int_eq(xf->dims[0], -1);
    int64_t three = 3, one = 1, two = 2;
    const float x[3] = {1.f, 2.f, 3.f};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_INT64, 0, NULL, &one),
                        th_tensor(TCI_DTYPE_FLOAT, 1, &three, x)};
    exec_cpu *e = run_graph(g, in, 2);
    th_assert_dims(exec_cpu_output(e, 0), 1, (const int64_t[]){4});
    th_assert_dims(exec_cpu_output(e, 1), 2, (const int64_t[]){1, 4});
    in[0] = th_tensor(TCI_DTYPE_INT64, 0, NULL, &two);
    ck_assert_tci_error(exec_cpu_run(e, in, 2), TCI_ERR_INVALID_ARGUMENT,
                        "node 'loop' (Loop): scan output 0 is 5 at iteration 1, 4 at the first");
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_scan_axes_and_directions) {
    /* s += column t of xs, the columns taken last first (scan_input_axes [1], directions [1]);
     * each s stacked along the last axis, last iteration first (scan_output_axes [-1],
     * directions [1]) */
    ir_graph *g = load_ok(FIXTURE("scan_axes.onnx"));
    ck_assert_tci_ok(pass_optimize(g));
    const ir_tensor *y = ir_graph_find_tensor(g, "y");
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->dims[0], 2);
    ck_assert_int_eq(y->dims[1], 3);
    int64_t two = 2, dims[2] = {2, 3};
    const float s[2] = {0.f, 0.f}, xs[6] = {1.f, 2.f, 3.f, 10.f, 20.f, 30.f};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, &two, s),
                        th_tensor(TCI_DTYPE_FLOAT, 2, dims, xs)};
    exec_cpu *e = run_graph(g, in, 2);
    th_assert_near(exec_cpu_output(e, 0)->data, (const float[]){6.f, 60.f}, 2, 0.f);
    th_assert_dims(exec_cpu_output(e, 1), 2, dims);
    th_assert_near(exec_cpu_output(e, 1)->data,
                   (const float[]){6.f, 5.f, 3.f, 60.f, 50.f, 30.f}, 6, 0.f);
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_scan_attribute_errors) {
    ir_graph *g = load_ok(FIXTURE("scan_bad_direction.onnx"));
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "node 'scan' (Scan): scan_input_directions[0] is 2; a direction is 0 "
                        "(forward) or 1 (reverse)");
    ir_graph_destroy(g);
    g = load_ok(FIXTURE("scan_bad_count.onnx"));
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "node 'scan' (Scan): num_scan_inputs is 3; it must be in [1, 2] (the "
                        "inputs)");
    ir_graph_destroy(g);
}
END_TEST

/* A state or loop-carried value the body gives another dtype is an error naming the value. */
START_TEST(test_carried_dtype_errors) {
    ir_graph *g = load_ok(FIXTURE("scan_state_dtype.onnx"));
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "node 'scan' (Scan): state 0 is float, the body makes it int64");
    ir_graph_destroy(g);
    g = load_ok(FIXTURE("loop_carried_dtype.onnx"));
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "node 'loop' (Loop): loop-carried value 0 is float, the body makes it "
                        "int64");
    ir_graph_destroy(g);
}
END_TEST

/* Scan inputs of length 0 along their axis: the states stay as given, each scan output is
 * empty along its axis with the other dims the body's inference gives; a run whose stacked
 * scan output is over max_tensor_elements is refused naming the output. */
START_TEST(test_scan_empty_and_limit) {
    ir_limits limits;
    ir_limits_default(&limits);
    limits.max_tensor_elements = 6;
    ir_graph *g;
    ck_assert_tci_ok(onnx_load_file_limits(FIXTURE("scan_any_length.onnx"), &limits, &g));
    ck_assert_tci_ok(pass_optimize(g));
    int64_t two = 2, len = 0;
    const float s[2] = {1.f, 2.f}, xs[4] = {1.f, 2.f, 3.f, 4.f};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, &two, s),
                        th_tensor(TCI_DTYPE_FLOAT, 1, &len, xs)};
    exec_cpu *e = run_graph(g, in, 2);
    th_assert_near(exec_cpu_output(e, 0)->data, s, 2, 0.f);
    th_assert_dims(exec_cpu_output(e, 1), 2, (const int64_t[]){2, 0});
    len = 3; /* y is 2 x 3 */
    in[1] = th_tensor(TCI_DTYPE_FLOAT, 1, &len, xs);
    ck_assert_tci_ok(exec_cpu_run(e, in, 2));
    th_assert_near(exec_cpu_output(e, 0)->data, (const float[]){7.f, 8.f}, 2, 0.f);
    th_assert_dims(exec_cpu_output(e, 1), 2, (const int64_t[]){2, 3});
    th_assert_near(exec_cpu_output(e, 1)->data,
                   (const float[]){2.f, 4.f, 7.f, 3.f, 5.f, 8.f}, 6, 0.f);
    len = 4; /* y would be 2 x 4 */
    in[1] = th_tensor(TCI_DTYPE_FLOAT, 1, &len, xs);
    ck_assert_tci_error(exec_cpu_run(e, in, 2), TCI_ERR_UNSUPPORTED,
                        "node 'scan' (Scan): scan output 0 would have 8 elements, over the limit "
                        "of 6 (max_tensor_elements)");
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

/* Scan-8: the body runs per batch entry for its sequence_lens steps (none: the initial state);
 * the scan output is zeros past them, and a length past the scan inputs' is an error naming the
 * entry. */
START_TEST(test_scan8_batch_and_lengths) {
    ir_graph *g = load_ok(FIXTURE("scan8_lens.onnx"));
    ck_assert_tci_ok(pass_optimize(g));
    const ir_tensor *y = ir_graph_find_tensor(g, "y");
    th_assert_dims(&(tci_tensor){.rank = y->rank, .dims = {y->dims[0], y->dims[1], y->dims[2]}},
                   3, (const int64_t[]){2, 3, 2});
    int64_t two = 2, sd[2] = {2, 2}, xd[3] = {2, 3, 2}, lens[2] = {3, 1};
    const float s[4] = {0.f, 1.f, 10.f, 20.f};
    const float xs[12] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 9.f, 9.f, 9.f};
    tci_tensor in[3] = {th_tensor(TCI_DTYPE_INT64, 1, &two, lens),
                        th_tensor(TCI_DTYPE_FLOAT, 2, sd, s),
                        th_tensor(TCI_DTYPE_FLOAT, 3, xd, xs)};
    exec_cpu *e = run_graph(g, in, 3);
    th_assert_near(exec_cpu_output(e, 0)->data, (const float[]){9.f, 13.f, 17.f, 28.f}, 4, 0.f);
    th_assert_dims(exec_cpu_output(e, 1), 3, xd);
    th_assert_near(exec_cpu_output(e, 1)->data,
                   (const float[]){1.f, 3.f, 4.f, 7.f, 9.f, 13.f, 17.f, 28.f, 0.f, 0.f, 0.f, 0.f},
                   12, 0.f);
    /* an entry of length 0 keeps its initial state */
    lens[1] = 0;
    ck_assert_tci_ok(exec_cpu_run(e, in, 3));
    th_assert_near(exec_cpu_output(e, 0)->data, (const float[]){9.f, 13.f, 10.f, 20.f}, 4, 0.f);
    th_assert_near((const float *)exec_cpu_output(e, 1)->data + 6,
                   (const float[]){0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, 6, 0.f);
    lens[1] = 4;
    ck_assert_tci_error(exec_cpu_run(e, in, 3), TCI_ERR_INVALID_ARGUMENT,
                        "node 'scan' (Scan): sequence_lens[1] is 4; the scan inputs hold 3 steps");
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("control");
    TCase *tc = tcase_create("if");
    tcase_add_test(tc, test_outer_read_is_an_implicit_input);
    tcase_add_test(tc, test_nested_subgraphs);
    tcase_add_test(tc, test_known_condition_is_inlined);
    tcase_add_test(tc, test_inlining_a_copy_keeps_the_source);
    tcase_add_test(tc, test_gpu_planner_refuses_data_dependent_if);
    tcase_add_test(tc, test_branch_shapes_merge);
    tcase_add_test(tc, test_subgraph_errors);
    suite_add_tcase(s, tc);
    TCase *loops = tcase_create("loop_scan");
    tcase_add_test(loops, test_loop_trip_count_and_condition);
    tcase_add_test(loops, test_loop_refusals);
    tcase_add_test(loops, test_loop_iteration_limit);
    tcase_add_test(loops, test_scan_axes_and_directions);
    tcase_add_test(loops, test_scan_attribute_errors);
    tcase_add_test(loops, test_scan8_batch_and_lengths);
    tcase_add_test(loops, test_carried_dtype_errors);
    tcase_add_test(loops, test_scan_empty_and_limit);
    suite_add_tcase(s, loops);
    return test_run_suite(s);
}
