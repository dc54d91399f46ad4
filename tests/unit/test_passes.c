/* Graph passes: shape-chain folding, pass-through removal, dead nodes, inference of shapes. */
#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "harness.h"
#include "layers/op.h"

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static ir_tensor *const_i64(ir_graph *g, const char *name, const int64_t *v, int64_t n) {
    return th_named(g, name, TCI_DTYPE_INT64, 1, &n, v);
}

/* x[N,3,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat(.., [-1]) -> Reshape(x) -> Identity
 * -> Relu -> y, plus a dead Sigmoid: after the passes only Reshape and Relu remain, and the
 * Reshape's shape input is a folded constant [2, 12]. */
START_TEST(test_pytorch_shape_chain_folds) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xdims[3] = {2, 3, 4};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xdims, NULL);
    const int64_t zero = 0, minus_one = -1;
    ir_tensor *idx = const_i64(g, "idx", &zero, 1);
    idx->rank = 0; /* scalar index: Gather drops the axis */
    ir_tensor *axes = const_i64(g, "axes", &zero, 1);
    ir_tensor *rest = const_i64(g, "rest", &minus_one, 1);
    ir_tensor *s = named(g, "s"), *gathered = named(g, "g"), *u = named(g, "u"),
              *shape = named(g, "shape"), *r = named(g, "r"), *id = named(g, "id"),
              *y = named(g, "y"), *dead = named(g, "dead");
    th_graph_io(g, &x, 1, &y, 1);
    /* deliberately out of order: the sort must fix it */
    th_node_io(g, "relu", "Relu", 17, (ir_tensor *[]){id}, 1, (ir_tensor *[]){y}, 1);
    th_node_io(g, "shape", "Shape", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){s}, 1);
    th_node_io(g, "gather", "Gather", 17, (ir_tensor *[]){s, idx}, 2, (ir_tensor *[]){gathered}, 1);
    ir_node *unsq = th_node_io(g, "unsqueeze", "Unsqueeze", 17, (ir_tensor *[]){gathered, axes}, 2,
                         (ir_tensor *[]){u}, 1);
    (void)unsq;
    ir_node *concat = th_node_io(g, "concat", "Concat", 17, (ir_tensor *[]){u, rest}, 2,
                           (ir_tensor *[]){shape}, 1);
    th_attr_int(g, concat, "axis", 0);
    th_node_io(g, "reshape", "Reshape", 17, (ir_tensor *[]){x, shape}, 2, (ir_tensor *[]){r}, 1);
    th_node_io(g, "identity", "Identity", 17, (ir_tensor *[]){r}, 1, (ir_tensor *[]){id}, 1);
    th_node_io(g, "unused", "Sigmoid", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){dead}, 1);

    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_uint_eq(g->num_nodes, 2);
    ck_assert_str_eq(g->nodes[0]->op_type, "Reshape");
    ck_assert_str_eq(g->nodes[1]->op_type, "Relu");
    ck_assert_ptr_eq(g->nodes[1]->inputs[0], r); /* Identity bypassed */
    ck_assert_ptr_nonnull(shape->data);
    ck_assert_int_eq(((int64_t *)shape->data)[0], 2);
    ck_assert_int_eq(((int64_t *)shape->data)[1], -1);
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->dims[0], 2);
    ck_assert_int_eq(y->dims[1], 12);

    /* and it still computes: relu(reshape(x)) */
    exec_cpu *e;
    ck_assert_tci_ok(exec_cpu_create(g, &e));
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = (float)(i - 12);
    int64_t dims[3] = {2, 3, 4};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, dims, data);
    ck_assert_tci_ok(exec_cpu_run(e, &in, 1));
    const tci_tensor *out = exec_cpu_output(e, 0);
    ck_assert_int_eq(out->rank, 2);
    ck_assert_int_eq(out->dims[1], 12);
    for (int i = 0; i < 24; i++)
        ck_assert_float_eq(((float *)out->data)[i], data[i] > 0 ? data[i] : 0.0f);
    /* wrong input shape is refused with both shapes named */
    int64_t bad[3] = {2, 3, 5};
    tci_tensor wrong = th_tensor(TCI_DTYPE_FLOAT, 3, bad, data);
    ck_assert_tci_error(exec_cpu_run(e, &wrong, 1), TCI_ERR_INVALID_ARGUMENT,
                        "input 'x' has shape 2x3x5, the model expects 2x3x4");
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

/* An output produced by a graph-output Identity keeps its node. */
START_TEST(test_identity_to_graph_output_kept) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = named(g, "x"), *y = named(g, "y");
    x->is_graph_input = true;
    x->dtype = TCI_DTYPE_FLOAT;
    x->rank = 1;
    x->dims[0] = 3;
    y->is_graph_output = true;
    th_node_io(g, "id", "Identity", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){y}, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_uint_eq(g->num_nodes, 1);
    ck_assert_int_eq(y->dims[0], 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_duplicate_producer_rejected) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = named(g, "x"), *y = named(g, "y");
    x->is_graph_input = true;
    th_node_io(g, "a", "Relu", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){y}, 1);
    th_node_io(g, "b", "Relu", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){y}, 1);
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "output 'y' is also produced by node 'a'");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("passes");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_pytorch_shape_chain_folds);
    tcase_add_test(tc, test_identity_to_graph_output_kept);
    tcase_add_test(tc, test_duplicate_producer_rejected);
    suite_add_tcase(s, tc);
    return tci_test_run_suite(s);
}
