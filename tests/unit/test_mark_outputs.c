/* tci_engine_options.mark_all_outputs on the generated models (TCI_TEST_MODELS_DIR), planned
 * without a GPU: TCI_MARK_OUTPUTS_AS_SHIPPED keeps the normal build's steps and marks each
 * step's output under its last fused node's tensor (tci_engine_output_nodes names the step's
 * nodes); TCI_MARK_OUTPUTS_UNFUSED plans more steps; on the CPU both mark every node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { MAX_STEPS = 256, MAX_NODES = 64 };

typedef struct step_row {
    char node[128], label[128], kernel[128], layout[32];
} step_row;

typedef struct steps {
    step_row rows[MAX_STEPS];
    size_t count;
} steps;

static void add_row(size_t index, const char *node, const char *fused_ops, const char *kernel,
                    const char *layout, void *user) {
    steps *s = user;
    ck_assert_uint_eq(index, s->count);
    ck_assert_uint_lt(s->count, MAX_STEPS);
    step_row *r = &s->rows[s->count++];
    snprintf(r->node, sizeof r->node, "%s", node);
    snprintf(r->label, sizeof r->label, "%s", fused_ops);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->layout, sizeof r->layout, "%s", layout);
}

typedef struct node_list {
    char names[MAX_NODES][128];
    char ops[512]; /* the op types joined by '+' */
    size_t count;
} node_list;

static void add_node(const char *node, const char *op_type, void *user) {
    node_list *l = user;
    ck_assert_uint_lt(l->count, MAX_NODES);
    snprintf(l->names[l->count++], sizeof l->names[0], "%s", node);
    size_t len = strlen(l->ops);
    snprintf(l->ops + len, sizeof l->ops - len, "%s%s", len ? "+" : "", op_type);
}

static tci_engine *build(const char *model, tci_backend backend, int mark,
                         const tci_shape_override *shape) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir != NULL, "TCI_TEST_MODELS_DIR is not set (ctest sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, model);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = backend;
    o.plan_only = backend == TCI_BACKEND_GPU;
    o.mark_all_outputs = mark;
    o.shapes = shape;
    o.num_shapes = shape ? 1 : 0;
    tci_engine *e = NULL;
    ck_assert_msg(tci_engine_create_from_file(path, &o, &e) == TCI_OK, "%s: %s", model,
                  tci_last_error());
    return e;
}

static void plan_steps(const tci_engine *e, steps *out) {
    memset(out, 0, sizeof *out);
    ck_assert_tci_ok(tci_engine_layers(e, add_row, out));
}

static const char *output_name(const tci_engine *e, size_t i) {
    static tci_tensor_info info;
    tci_tensor_info_init(&info);
    ck_assert_tci_ok(tci_engine_output_info(e, i, &info));
    return info.name;
}

/* The steps of the marked engine are those of the normal one: same count, nodes, fused chains,
 * kernels, output layouts and precision. */
static void assert_same_steps(const steps *a, const steps *b) {
    ck_assert_uint_eq(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        ck_assert_str_eq(a->rows[i].node, b->rows[i].node);
        ck_assert_str_eq(a->rows[i].label, b->rows[i].label);
        ck_assert_str_eq(a->rows[i].kernel, b->rows[i].kernel);
        ck_assert_str_eq(a->rows[i].layout, b->rows[i].layout);
    }
}

/* The engine outputs whose step begins at node `first` (-1: none; -2: several). */
static long output_of_step(const tci_engine *e, const char *first, node_list *nodes) {
    long found = -1;
    for (size_t i = 0; i < tci_engine_output_count(e); i++) {
        node_list l;
        memset(&l, 0, sizeof l);
        ck_assert_tci_ok(tci_engine_output_nodes(e, i, add_node, &l));
        if (l.count == 0 || strcmp(l.names[0], first) != 0) continue;
        if (found >= 0) return -2;
        found = (long)i;
        *nodes = l;
    }
    return found;
}

START_TEST(test_resnet_as_shipped) {
    tci_engine *plain = build("resnet_mini", TCI_BACKEND_GPU, TCI_MARK_OUTPUTS_NONE, NULL);
    tci_engine *shipped = build("resnet_mini", TCI_BACKEND_GPU, TCI_MARK_OUTPUTS_AS_SHIPPED, NULL);
    tci_engine *unfused = build("resnet_mini", TCI_BACKEND_GPU, TCI_MARK_OUTPUTS_UNFUSED, NULL);
    static steps a, b, c;
    plan_steps(plain, &a);
    plan_steps(shipped, &b);
    plan_steps(unfused, &c);
    assert_same_steps(&a, &b);
    ck_assert_uint_eq(a.count, 19);
    /* unfused, each of the 51 nodes after optimisation is a step of its own (BatchNormalization,
     * Relu and Add too; a BatchNormalization is one depthwise step) */
    ck_assert_uint_eq(c.count, 51);
    /* the model's output first; then every step's output, each step's once, under the tensor
     * of the last node it fuses (the generated model names a node's output NODE_out) */
    ck_assert_uint_eq(tci_engine_output_count(plain), 1);
    ck_assert_uint_eq(tci_engine_output_count(shipped), a.count);
    ck_assert_str_eq(output_name(shipped, 0), "fc_out");
    int residual = 0;
    for (size_t s = 0; s < a.count; s++) {
        node_list nodes;
        long at = output_of_step(shipped, a.rows[s].node, &nodes);
        ck_assert_msg(at >= 0, "step %zu (%s, %s): %s", s, a.rows[s].node, a.rows[s].label,
                      at == -1 ? "no output" : "several outputs");
        char want[160];
        snprintf(want, sizeof want, "%s_out", nodes.names[nodes.count - 1]);
        ck_assert_str_eq(output_name(shipped, (size_t)at), want);
        if (strchr(a.rows[s].label, '+')) ck_assert_str_eq(nodes.ops, a.rows[s].label);
        else ck_assert_uint_eq(nodes.count, 1);
        if (strcmp(a.rows[s].label, "Conv+BatchNormalization+Add+Relu") == 0) {
            residual++;
            ck_assert_uint_eq(nodes.count, 4);
            ck_assert_ptr_nonnull(strstr(want, "relu_"));
        }
    }
    ck_assert_int_eq(residual, 4);
    /* unfused: every node's output, the Conv's among them */
    ck_assert_uint_gt(tci_engine_output_count(unfused), 45);
    node_list conv;
    memset(&conv, 0, sizeof conv);
    ck_assert_tci_ok(tci_engine_output_nodes(unfused, 1, add_node, &conv));
    ck_assert_uint_eq(conv.count, 1);
    ck_assert_str_eq(conv.ops, "Conv");
    ck_assert_str_eq(output_name(unfused, 1), "conv_0_out");
    tci_engine_destroy(plain);
    tci_engine_destroy(shipped);
    tci_engine_destroy(unfused);
}
END_TEST

/* The CPU reference does not fuse: as shipped, it marks every node, as unfused does, and each
 * output's node is its producer alone. */
START_TEST(test_cpu_marks_every_node) {
    tci_engine *shipped = build("resnet_mini", TCI_BACKEND_CPU, TCI_MARK_OUTPUTS_AS_SHIPPED, NULL);
    tci_engine *unfused = build("resnet_mini", TCI_BACKEND_CPU, TCI_MARK_OUTPUTS_UNFUSED, NULL);
    size_t n = tci_engine_output_count(unfused);
    ck_assert_uint_eq(tci_engine_output_count(shipped), n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(output_name(shipped, i), output_name(unfused, i));
        node_list l;
        memset(&l, 0, sizeof l);
        ck_assert_tci_ok(tci_engine_output_nodes(shipped, i, add_node, &l));
        ck_assert_uint_eq(l.count, 1);
        char want[160];
        snprintf(want, sizeof want, "%s_out", l.names[0]);
        ck_assert_str_eq(output_name(shipped, i), want);
    }
    ck_assert_tci_error(tci_engine_output_nodes(shipped, n, add_node, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "no output");
    ck_assert_tci_error(tci_engine_output_nodes(NULL, 0, add_node, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "NULL");
    tci_engine_destroy(shipped);
    tci_engine_destroy(unfused);
}
END_TEST

/* ConvNeXt's last block (20 channels) folds its layer scale into the second Linear, whose
 * result and its Transpose then hold gamma times the model's values: not marked, so they are
 * never compared with the CPU reference's unscaled tensors of those names. The other steps'
 * outputs are, the residual Add after them among them. */
START_TEST(test_rescaled_not_marked) {
    tci_shape_override shape = {.name = "input", .rank = 4, .dims = {2, 3, 32, 32}};
    tci_engine *plain = build("convnext_blocks", TCI_BACKEND_GPU, TCI_MARK_OUTPUTS_NONE, &shape);
    tci_engine *shipped =
        build("convnext_blocks", TCI_BACKEND_GPU, TCI_MARK_OUTPUTS_AS_SHIPPED, &shape);
    static steps a, b;
    plan_steps(plain, &a);
    plan_steps(shipped, &b);
    assert_same_steps(&a, &b);
    int unmarked = 0;
    for (size_t s = 0; s < a.count; s++) {
        if (strncmp(a.rows[s].label, "layout ", 7) == 0) continue; /* the node's other step */
        node_list nodes;
        long at = output_of_step(shipped, a.rows[s].node, &nodes);
        ck_assert_int_ne(at, -2);
        if (at >= 0) continue;
        unmarked++;
        ck_assert_msg(strcmp(a.rows[s].node, "matmul_7") == 0 ||
                          strcmp(a.rows[s].node, "transpose_12") == 0,
                      "step %zu (%s, %s) has no output", s, a.rows[s].node, a.rows[s].label);
    }
    ck_assert_int_eq(unmarked, 2);
    ck_assert_uint_gt(tci_engine_output_count(shipped), 30);
    tci_engine_destroy(plain);
    tci_engine_destroy(shipped);
}
END_TEST

START_TEST(test_unknown_mode_refused) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_ptr_nonnull(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/resnet_mini.onnx", dir);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.mark_all_outputs = 3;
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_file(path, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "mark_all_outputs is 3");
    ck_assert_ptr_null(e);
}
END_TEST

int main(void) {
    Suite *s = suite_create("mark_outputs");
    TCase *tc = tcase_create("mark_outputs");
    tcase_add_test(tc, test_resnet_as_shipped);
    tcase_add_test(tc, test_cpu_marks_every_node);
    tcase_add_test(tc, test_rescaled_not_marked);
    tcase_add_test(tc, test_unknown_mode_refused);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
