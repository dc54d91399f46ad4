/* Shape and data-movement ops: values, opset differences, inference with unknowns, errors. */
#include <stdlib.h>

#include "harness.h"
#include "layers/op.h"
#include "layers/shape_util.h"

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define F32(...) ((const float[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define COUNT(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static tci_tensor tf(int rank, const int64_t *dims, const float *data) {
    return th_tensor(TCI_DTYPE_FLOAT, rank, dims, data);
}

/* A 1-D int64 tensor: shapes, axes, pads, starts ... */
static tci_tensor ti(int64_t n, const int64_t *data) {
    return th_tensor(TCI_DTYPE_INT64, 1, &n, data);
}

static tci_tensor omitted(void) {
    return th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL);
}

static void assert_shape(const tci_tensor *t, tci_dtype dtype, int rank, const int64_t *dims) {
    ck_assert_int_eq(t->dtype, dtype);
    ck_assert_int_eq(t->rank, rank);
    for (int i = 0; i < rank; i++)
        ck_assert_msg(t->dims[i] == dims[i], "dim %d: got %lld, want %lld", i,
                      (long long)t->dims[i], (long long)dims[i]);
}

static void assert_values(const tci_tensor *t, const double *want, int64_t n) {
    ck_assert_int_eq(tci_tensor_count(t), n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(op_read_number(t, i) == want[i], "element %lld: got %g, want %g",
                      (long long)i, op_read_number(t, i), want[i]);
}
#define VALUES(t, ...)                                                                             \
    assert_values((t), (const double[]){__VA_ARGS__},                                              \
                  (int64_t)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))

/* Runs parse and infer only, as the build does: inputs may have unknown rank, dims or data.
 * A NULL entry is an omitted optional input. */
static tci_status infer_only(ir_graph *g, ir_node *node, const tci_tensor *const *in,
                             tci_tensor *out) {
    tci_tensor *outs[8];
    for (int i = 0; i < node->num_inputs; i++)
        if (!in[i]) node->inputs[i] = NULL;
    for (int i = 0; i < node->num_outputs; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].rank = -1;
        outs[i] = &out[i];
    }
    TRY_STATUS(op_prepare_node(node, g->arena));
    return node->desc->infer(node, in, outs);
}

static tci_tensor unknown(tci_dtype dtype, int rank, const int64_t *dims) {
    tci_tensor t = th_tensor(dtype, rank < 0 ? 0 : rank, dims, NULL);
    t.rank = rank;
    return t;
}

/* ---- registry ---- */

static void check_versions(const op_desc *d, void *user) {
    (void)user;
    int prev = 0, n = 0;
    for (const int *v = d->versions; *v; v++, n++) {
        ck_assert_msg(*v > prev, "%s versions not ascending", d->op_type);
        prev = *v;
    }
    ck_assert_msg(n > 0 && prev <= IR_MAX_KNOWN_OPSET, "%s versions", d->op_type);
}

START_TEST(test_versions_resolve) {
    for (const op_desc *const *d = layer_shape_ops; *d; d++) check_versions(*d, NULL);
    for (const op_desc *const *d = layer_movement_ops; *d; d++) check_versions(*d, NULL);
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    struct {
        const char *op;
        int opset, since;
    } cases[] = {{"Concat", 7, 4},     {"Split", 17, 13},
                 {"Split", 28, 18},    {"Pad", 7, 2},
                 {"Pad", 19, 19},      {"Pad", 28, 25},
                 {"Reshape", 7, 5},    {"Reshape", 14, 14},
                 {"Slice", 9, 1},      {"Slice", 10, 10},
                 {"Expand", 8, 8},     {"Shape", 15, 15},
                 {"Dropout", 7, 7},    {"Dropout", 28, 22},
                 {"Constant", 12, 12}, {"ConstantOfShape", 21, 21},
                 {"Identity", 28, 25}, {"Squeeze", 13, 13},
                 {"Unsqueeze", 7, 1},  {"Gather", 7, 1},
                 {"Flatten", 28, 25},  {"Transpose", 28, 25}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_node *n = th_node(g, cases[i].op, cases[i].opset, 1, 1);
        const op_desc *d;
        int since;
        ck_assert_tci_ok(op_registry_resolve(n, &d, &since));
        ck_assert_msg(since == cases[i].since, "%s at opset %d selects %d", cases[i].op,
                      cases[i].opset, since);
    }
    ir_node *n = th_node(g, "Expand", 7, 2, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED, "older than");
    ir_graph_destroy(g);
}
END_TEST

/* ---- Concat ---- */

START_TEST(test_concat_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Concat", 13, 2, 1);
    th_attr_int(g, n, "axis", -1);
    tci_tensor in[2] = {tf(2, DIMS(2, 2), F32(1, 2, 3, 4)), tf(2, DIMS(2, 1), F32(5, 6))}, out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 3));
    VALUES(&out[0], 1, 2, 5, 3, 4, 6);
    th_free(out, 1);

    /* int64 along axis 0, with an empty input */
    n = th_node(g, "Concat", 4, 3, 1);
    th_attr_int(g, n, "axis", 0);
    tci_tensor in3[3] = {th_tensor(TCI_DTYPE_INT64, 2, DIMS(1, 2), I64(7, 8)),
                         th_tensor(TCI_DTYPE_INT64, 2, DIMS(0, 2), I64(0)),
                         th_tensor(TCI_DTYPE_INT64, 2, DIMS(1, 2), I64(9, 10))};
    ck_assert_tci_ok(th_run(g, n, in3, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 2, DIMS(2, 2));
    VALUES(&out[0], 7, 8, 9, 10);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_concat_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    ir_node *n = th_node(g, "Concat", 13, 2, 1);
    th_attr_int(g, n, "axis", 1);
    tci_tensor bad[2] = {tf(2, DIMS(2, 2), F32(1, 2, 3, 4)), tf(2, DIMS(3, 1), F32(5, 6, 7))};
    ck_assert_tci_error(th_run(g, n, bad, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dim 0 = 3, other inputs 2");

    n = th_node(g, "Concat", 13, 2, 1);
    th_attr_int(g, n, "axis", 0);
    tci_tensor mixed[2] = {tf(1, DIMS(1), F32(1)), th_tensor(TCI_DTYPE_INT64, 1, DIMS(1), I64(1))};
    ck_assert_tci_error(th_run(g, n, mixed, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype int64, other inputs float");

    n = th_node(g, "Concat", 13, 2, 1);
    th_attr_int(g, n, "axis", 0);
    tci_tensor ranks[2] = {tf(1, DIMS(1), F32(1)), tf(2, DIMS(1, 1), F32(1))};
    ck_assert_tci_error(th_run(g, n, ranks, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has rank 2, other inputs rank 1");

    n = th_node(g, "Concat", 13, 1, 1);
    tci_tensor one[1] = {tf(1, DIMS(1), F32(1))};
    ck_assert_tci_error(th_run(g, n, one, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'axis' is required");

    n = th_node(g, "Concat", 13, 1, 1);
    th_attr_int(g, n, "axis", 0);
    tci_tensor scalar[1] = {tf(0, NULL, F32(1))};
    ck_assert_tci_error(th_run(g, n, scalar, out), TCI_ERR_INVALID_MODEL,
                        "cannot concatenate scalars");

    n = th_node(g, "Concat", 13, 1, 1);
    th_attr_int(g, n, "axis", 2);
    ck_assert_tci_error(th_run(g, n, one, out), TCI_ERR_INVALID_MODEL,
                        "axis 2 out of range for rank 1");

    /* build-time: one input of unknown rank, one with a symbolic dim */
    n = th_node(g, "Concat", 13, 3, 1);
    th_attr_int(g, n, "axis", 1);
    tci_tensor a = unknown(TCI_DTYPE_FLOAT, -1, NULL), b = unknown(TCI_DTYPE_FLOAT, 2, DIMS(-1, 3)),
               c = unknown(TCI_DTYPE_FLOAT, 2, DIMS(5, 2));
    const tci_tensor *in[3] = {&a, &b, &c};
    ck_assert_tci_ok(infer_only(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(5, -1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Split ---- */

START_TEST(test_split_versions) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[3];
    const float x6[] = {0, 1, 2, 3, 4, 5};

    /* opset 11: sizes as attribute, axis 1 of 2x3 */
    ir_node *n = th_node(g, "Split", 11, 1, 2);
    th_attr_int(g, n, "axis", -1);
    th_attr_ints(g, n, "split", I64(1, 2), 2);
    tci_tensor in[1] = {tf(2, DIMS(2, 3), x6)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 1));
    assert_shape(&out[1], TCI_DTYPE_FLOAT, 2, DIMS(2, 2));
    VALUES(&out[0], 0, 3);
    VALUES(&out[1], 1, 2, 4, 5);
    th_free(out, 2);

    /* opset 13: sizes as input */
    n = th_node(g, "Split", 13, 2, 2);
    tci_tensor in13[2] = {
        th_tensor(TCI_DTYPE_UINT8, 1, DIMS(6), (const uint8_t[]){0, 1, 2, 3, 4, 5}),
        ti(2, I64(4, 2))};
    ck_assert_tci_ok(th_run(g, n, in13, out));
    VALUES(&out[0], 0, 1, 2, 3);
    VALUES(&out[1], 4, 5);
    ck_assert_int_eq(out[1].dtype, TCI_DTYPE_UINT8);
    th_free(out, 2);

    /* opset 13: equal parts */
    n = th_node(g, "Split", 13, 1, 3);
    tci_tensor in_eq[1] = {tf(1, DIMS(6), x6)};
    ck_assert_tci_ok(th_run(g, n, in_eq, out));
    VALUES(&out[2], 4, 5);
    th_free(out, 3);

    /* opset 18: num_outputs with an uneven last chunk: 7 -> 3, 3, 1 */
    n = th_node(g, "Split", 18, 1, 3);
    th_attr_int(g, n, "num_outputs", 3);
    tci_tensor in7[1] = {tf(1, DIMS(7), F32(0, 1, 2, 3, 4, 5, 6))};
    ck_assert_tci_ok(th_run(g, n, in7, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 1, DIMS(3));
    assert_shape(&out[2], TCI_DTYPE_FLOAT, 1, DIMS(1));
    VALUES(&out[1], 3, 4, 5);
    VALUES(&out[2], 6);
    th_free(out, 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_split_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[3];
    tci_tensor in7[1] = {tf(1, DIMS(7), F32(0, 1, 2, 3, 4, 5, 6))};

    ir_node *n = th_node(g, "Split", 13, 1, 3);
    ck_assert_tci_error(th_run(g, n, in7, out), TCI_ERR_INVALID_MODEL,
                        "cannot split an axis of size 7 evenly into 3 outputs");

    n = th_node(g, "Split", 13, 2, 2);
    tci_tensor sum[2] = {in7[0], ti(2, I64(3, 3))};
    ck_assert_tci_error(th_run(g, n, sum, out), TCI_ERR_INVALID_MODEL,
                        "split sizes add up to 6 but the axis has 7");

    n = th_node(g, "Split", 13, 2, 2);
    tci_tensor neg[2] = {in7[0], ti(2, I64(8, -1))};
    ck_assert_tci_error(th_run(g, n, neg, out), TCI_ERR_INVALID_MODEL, "split size 1 is negative");

    n = th_node(g, "Split", 13, 2, 2);
    tci_tensor len[2] = {in7[0], ti(3, I64(3, 3, 1))};
    ck_assert_tci_error(th_run(g, n, len, out), TCI_ERR_INVALID_MODEL,
                        "split (input 1) has 3 entries for 2 outputs");

    n = th_node(g, "Split", 11, 1, 2);
    th_attr_ints(g, n, "split", I64(7), 1);
    ck_assert_tci_error(th_run(g, n, in7, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'split' has 1 entries for 2 outputs");

    n = th_node(g, "Split", 18, 1, 2);
    th_attr_int(g, n, "num_outputs", 3);
    ck_assert_tci_error(th_run(g, n, in7, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'num_outputs' is 3 but the node has 2 outputs");

    n = th_node(g, "Split", 18, 2, 2);
    th_attr_int(g, n, "num_outputs", 2);
    tci_tensor both[2] = {in7[0], ti(2, I64(3, 4))};
    ck_assert_tci_error(th_run(g, n, both, out), TCI_ERR_INVALID_MODEL,
                        "input 'split' and attribute 'num_outputs' are both given");

    n = th_node(g, "Split", 13, 1, 2);
    th_attr_ints(g, n, "split", I64(3, 4), 2);
    ck_assert_tci_error(th_run(g, n, in7, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'split'");

    /* split sizes not known at build: the axis dim is unknown, others kept */
    n = th_node(g, "Split", 13, 2, 2);
    th_attr_int(g, n, "axis", 1);
    tci_tensor x = unknown(TCI_DTYPE_FLOAT, 2, DIMS(4, 7)),
               s = unknown(TCI_DTYPE_INT64, 1, DIMS(2));
    const tci_tensor *in[2] = {&x, &s};
    ck_assert_tci_ok(infer_only(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(4, -1));
    assert_shape(&out[1], TCI_DTYPE_FLOAT, 2, DIMS(4, -1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Flatten ---- */

START_TEST(test_flatten) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float x[24] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                         12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
    struct {
        int64_t axis;
        int64_t d0, d1;
    } cases[] = {{0, 1, 24}, {1, 2, 12}, {2, 6, 4}, {3, 24, 1}, {-1, 6, 4}, {-3, 1, 24}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_node *n = th_node(g, "Flatten", 13, 1, 1);
        th_attr_int(g, n, "axis", cases[i].axis);
        tci_tensor in[1] = {tf(3, DIMS(2, 3, 4), x)};
        ck_assert_tci_ok(th_run(g, n, in, out));
        assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(cases[i].d0, cases[i].d1));
        ck_assert_float_eq(((float *)out[0].data)[23], 23);
        th_free(out, 1);
    }
    ir_node *n = th_node(g, "Flatten", 13, 1, 1);
    th_attr_int(g, n, "axis", 4);
    tci_tensor in[1] = {tf(3, DIMS(2, 3, 4), x)};
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "axis 4 out of range for rank 3");

    n = th_node(g, "Flatten", 13, 1, 1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT16, 3, DIMS(-1, 3, 4));
    const tci_tensor *uin[1] = {&u};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT16, 2, DIMS(-1, 12));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Reshape ---- */

START_TEST(test_reshape_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const double x[] = {1, 2, 3, 4, 5, 6};

    ir_node *n = th_node(g, "Reshape", 13, 2, 1);
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_DOUBLE, 3, DIMS(1, 2, 3), x), ti(2, I64(0, -1))};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_DOUBLE, 2, DIMS(1, 6));
    VALUES(&out[0], 1, 2, 3, 4, 5, 6);
    th_free(out, 1);

    /* allowzero=1: a 0 is a real zero-sized dim */
    n = th_node(g, "Reshape", 14, 2, 1);
    th_attr_int(g, n, "allowzero", 1);
    tci_tensor empty[2] = {th_tensor(TCI_DTYPE_INT32, 2, DIMS(0, 3), I64(0)), ti(3, I64(3, 0, 5))};
    ck_assert_tci_ok(th_run(g, n, empty, out));
    assert_shape(&out[0], TCI_DTYPE_INT32, 3, DIMS(3, 0, 5));
    th_free(out, 1);

    /* allowzero did not exist before opset 14 */
    n = th_node(g, "Reshape", 13, 2, 1);
    th_attr_int(g, n, "allowzero", 1);
    ck_assert_tci_error(th_run(g, n, empty, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'allowzero'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reshape_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float x[] = {1, 2, 3, 4, 5, 6};
    struct {
        int64_t n;
        int64_t shape[4];
        int64_t allowzero;
        const char *text;
    } cases[] = {
        {2, {-1, -1}, 0, "shape has more than one -1"},
        {2, {-2, 3}, 0, "shape[0] is -2"},
        {2, {4, 2}, 0, "cannot reshape input of shape 2x3 (6 elements) to 4x2 (8 elements)"},
        {2, {4, -1}, 0, "no value for the -1 in shape 4x? fits"},
        {3, {2, 3, 0}, 0, "shape[2] is 0 (copy the input dim) but the input has rank 2"},
        {2, {0, -1}, 1, "with allowzero=1, shape may not hold both 0 and -1"},
        {1, {9}, 0, "to 9 (9 elements)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_node *n = th_node(g, "Reshape", 14, 2, 1);
        if (cases[i].allowzero) th_attr_int(g, n, "allowzero", 1);
        tci_tensor in[2] = {tf(2, DIMS(2, 3), x), ti(cases[i].n, cases[i].shape)};
        ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL, cases[i].text);
    }
    ir_node *n = th_node(g, "Reshape", 14, 2, 1);
    th_attr_int(g, n, "allowzero", 2);
    tci_tensor in[2] = {tf(2, DIMS(2, 3), x), ti(2, I64(3, 2))};
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'allowzero' is 2, not 0 or 1");

    n = th_node(g, "Reshape", 14, 2, 1);
    tci_tensor deep[2] = {tf(2, DIMS(2, 3), x), ti(9, I64(1, 1, 1, 1, 1, 1, 1, 2, 3))};
    ck_assert_tci_error(th_run(g, n, deep, out), TCI_ERR_UNSUPPORTED,
                        "shape (input 1) has 9 entries; at most 8 are supported");

    n = th_node(g, "Reshape", 14, 2, 1);
    tci_tensor fshape[2] = {tf(2, DIMS(2, 3), x), tf(1, DIMS(1), F32(6))};
    ck_assert_tci_error(th_run(g, n, fshape, out), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype float");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reshape_infer_unknowns) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* shape value unknown: rank from its length */
    ir_node *n = th_node(g, "Reshape", 14, 2, 1);
    tci_tensor x = unknown(TCI_DTYPE_FLOAT, 4, DIMS(-1, 3, 4, 4)),
               s = unknown(TCI_DTYPE_INT64, 1, DIMS(3));
    const tci_tensor *in[2] = {&x, &s};
    ck_assert_tci_ok(infer_only(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, -1, -1));

    /* shape known, batch symbolic: 0 copies it, -1 stays unknown */
    n = th_node(g, "Reshape", 14, 2, 1);
    tci_tensor known = ti(3, I64(0, 3, -1));
    const tci_tensor *in2[2] = {&x, &known};
    ck_assert_tci_ok(infer_only(g, n, in2, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, 3, -1));

    /* input fully known, -1 inferred */
    n = th_node(g, "Reshape", 14, 2, 1);
    tci_tensor xk = unknown(TCI_DTYPE_FLOAT, 4, DIMS(2, 3, 4, 4));
    tci_tensor flat = ti(2, I64(0, -1));
    const tci_tensor *in3[2] = {&xk, &flat};
    ck_assert_tci_ok(infer_only(g, n, in3, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 48));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Transpose ---- */

START_TEST(test_transpose) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    ir_node *n = th_node(g, "Transpose", 13, 1, 1);
    tci_tensor in[1] = {tf(2, DIMS(2, 3), F32(1, 2, 3, 4, 5, 6))};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(3, 2));
    VALUES(&out[0], 1, 4, 2, 5, 3, 6);
    th_free(out, 1);

    /* every dtype, perm 0 2 1 on 2x3x4 */
    const tci_dtype dtypes[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                TCI_DTYPE_INT8,  TCI_DTYPE_UINT8,  TCI_DTYPE_INT32,
                                TCI_DTYPE_INT64, TCI_DTYPE_BOOL};
    const double want[] = {0,  4,  8,  1,  5,  9,  2,  6,  10, 3,  7,  11,
                           12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        uint64_t buf[24];
        tci_tensor x = th_tensor(dtypes[k], 3, DIMS(2, 3, 4), buf);
        for (int i = 0; i < 24; i++)
            op_write_number(&x, i, dtypes[k] == TCI_DTYPE_BOOL ? i % 3 == 0 : i);
        n = th_node(g, "Transpose", 21, 1, 1);
        th_attr_ints(g, n, "perm", I64(0, 2, 1), 3);
        ck_assert_tci_ok(th_run(g, n, &x, out));
        assert_shape(&out[0], dtypes[k], 3, DIMS(2, 4, 3));
        for (int i = 0; i < 24; i++) {
            double w = dtypes[k] == TCI_DTYPE_BOOL ? (int)want[i] % 3 == 0 : want[i];
            ck_assert_msg(op_read_number(&out[0], i) == w, "%s element %d",
                          tci_dtype_name(dtypes[k]), i);
        }
        th_free(out, 1);
    }

    n = th_node(g, "Transpose", 13, 1, 1);
    th_attr_ints(g, n, "perm", I64(0, 0), 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'perm' is not a permutation (entry 1 is 0)");
    n = th_node(g, "Transpose", 13, 1, 1);
    th_attr_ints(g, n, "perm", I64(2, 0, 1), 3);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "perm has 3 entries for rank 2");

    n = th_node(g, "Transpose", 13, 1, 1);
    th_attr_ints(g, n, "perm", I64(1, 2, 0), 3);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, -1, NULL);
    const tci_tensor *uin[1] = {&u};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, -1, -1));
    n = th_node(g, "Transpose", 13, 1, 1);
    th_attr_ints(g, n, "perm", I64(1, 2, 0), 3);
    tci_tensor v = unknown(TCI_DTYPE_FLOAT, 3, DIMS(-1, 5, 7));
    const tci_tensor *vin[1] = {&v};
    ck_assert_tci_ok(infer_only(g, n, vin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(5, 7, -1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Squeeze / Unsqueeze ---- */

START_TEST(test_squeeze) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float x[] = {1, 2, 3};

    ir_node *n = th_node(g, "Squeeze", 11, 1, 1);
    th_attr_ints(g, n, "axes", I64(-1), 1);
    tci_tensor in[1] = {tf(3, DIMS(1, 3, 1), x)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(1, 3));
    VALUES(&out[0], 1, 2, 3);
    th_free(out, 1);

    n = th_node(g, "Squeeze", 13, 2, 1);
    tci_tensor in13[2] = {tf(3, DIMS(1, 3, 1), x), ti(1, I64(0))};
    ck_assert_tci_ok(th_run(g, n, in13, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(3, 1));
    th_free(out, 1);

    /* no axes: all size-1 dims go */
    n = th_node(g, "Squeeze", 13, 2, 1);
    tci_tensor all[2] = {tf(3, DIMS(1, 3, 1), x), omitted()};
    ck_assert_tci_ok(th_run(g, n, all, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 1, DIMS(3));
    th_free(out, 1);

    n = th_node(g, "Squeeze", 13, 2, 1);
    tci_tensor bad[2] = {tf(3, DIMS(1, 3, 1), x), ti(1, I64(1))};
    ck_assert_tci_error(th_run(g, n, bad, out), TCI_ERR_INVALID_MODEL,
                        "cannot squeeze axis 1 of size 3");
    n = th_node(g, "Squeeze", 13, 2, 1);
    tci_tensor rep[2] = {tf(3, DIMS(1, 3, 1), x), ti(2, I64(0, -3))};
    ck_assert_tci_error(th_run(g, n, rep, out), TCI_ERR_INVALID_MODEL, "axis -3 is repeated");
    n = th_node(g, "Squeeze", 13, 1, 1);
    th_attr_ints(g, n, "axes", I64(0), 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "unsupported attribute 'axes'");

    /* build time: symbolic dims without axes give an unknown rank; unknown axes keep the count */
    n = th_node(g, "Squeeze", 13, 1, 1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, 3, DIMS(-1, 3, 1));
    const tci_tensor *uin[1] = {&u};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    ck_assert_int_eq(out[0].rank, -1);
    n = th_node(g, "Squeeze", 13, 2, 1);
    tci_tensor ax = unknown(TCI_DTYPE_INT64, 1, DIMS(1));
    const tci_tensor *ain[2] = {&u, &ax};
    ck_assert_tci_ok(infer_only(g, n, ain, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(-1, -1));
    /* a symbolic dim named in axes is taken to be 1 */
    n = th_node(g, "Squeeze", 13, 2, 1);
    tci_tensor axk = ti(1, I64(0));
    const tci_tensor *kin[2] = {&u, &axk};
    ck_assert_tci_ok(infer_only(g, n, kin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(3, 1));
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_unsqueeze) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t x[] = {1, 2, 3, 4, 5, 6};

    ir_node *n = th_node(g, "Unsqueeze", 11, 1, 1);
    th_attr_ints(g, n, "axes", I64(0, -1), 2);
    tci_tensor in[1] = {th_tensor(TCI_DTYPE_INT64, 2, DIMS(2, 3), x)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 4, DIMS(1, 2, 3, 1));
    VALUES(&out[0], 1, 2, 3, 4, 5, 6);
    th_free(out, 1);

    n = th_node(g, "Unsqueeze", 13, 2, 1);
    tci_tensor in13[2] = {in[0], ti(2, I64(3, 1))};
    ck_assert_tci_ok(th_run(g, n, in13, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 4, DIMS(2, 1, 3, 1));
    th_free(out, 1);

    /* scalar to 1-D */
    n = th_node(g, "Unsqueeze", 13, 2, 1);
    tci_tensor sc[2] = {th_tensor(TCI_DTYPE_INT64, 0, NULL, x), ti(1, I64(0))};
    ck_assert_tci_ok(th_run(g, n, sc, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 1, DIMS(1));
    th_free(out, 1);

    n = th_node(g, "Unsqueeze", 13, 2, 1);
    tci_tensor dup[2] = {in[0], ti(2, I64(1, -3))};
    ck_assert_tci_error(th_run(g, n, dup, out), TCI_ERR_INVALID_MODEL, "axis -3 is repeated");
    n = th_node(g, "Unsqueeze", 13, 2, 1);
    tci_tensor far[2] = {in[0], ti(1, I64(3))};
    ck_assert_tci_error(th_run(g, n, far, out), TCI_ERR_INVALID_MODEL,
                        "axis 3 out of range for rank 3");
    n = th_node(g, "Unsqueeze", 11, 1, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'axes' is required");
    n = th_node(g, "Unsqueeze", 13, 1, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "has 1 inputs, expected 2 to 2");
    n = th_node(g, "Unsqueeze", 13, 2, 1);
    tci_tensor deep[2] = {in[0], ti(7, I64(0, 1, 2, 3, 4, 5, 6))};
    ck_assert_tci_error(th_run(g, n, deep, out), TCI_ERR_UNSUPPORTED,
                        "output rank 9 exceeds the supported maximum 8");

    n = th_node(g, "Unsqueeze", 13, 2, 1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, 2, DIMS(-1, 4)),
               ax = unknown(TCI_DTYPE_INT64, 1, DIMS(2));
    const tci_tensor *uin[2] = {&u, &ax};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 4, DIMS(-1, -1, -1, -1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Slice ---- */

START_TEST(test_slice_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i;

    /* opset 1: attributes */
    ir_node *n = th_node(g, "Slice", 9, 1, 1);
    th_attr_ints(g, n, "starts", I64(1, 0), 2);
    th_attr_ints(g, n, "ends", I64(1000, -1), 2);
    tci_tensor in[1] = {tf(2, DIMS(3, 4), x)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 3));
    VALUES(&out[0], 4, 5, 6, 8, 9, 10);
    th_free(out, 1);

    /* opset 10: inputs with negative steps: x[::-1, 3:0:-2] */
    n = th_node(g, "Slice", 13, 5, 1);
    tci_tensor in13[5] = {in[0], ti(2, I64(-1, 3)), ti(2, I64(INT64_MIN, 0)), ti(2, I64(0, 1)),
                          ti(2, I64(-1, -2))};
    ck_assert_tci_ok(th_run(g, n, in13, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(3, 2));
    VALUES(&out[0], 11, 9, 7, 5, 3, 1);
    th_free(out, 1);

    /* axes given, steps omitted; x[1:, ::2] via axes (1, 0) */
    n = th_node(g, "Slice", 11, 5, 1);
    tci_tensor ax[5] = {in[0], ti(2, I64(0, 1)), ti(2, I64(INT64_MAX, INT64_MAX)),
                        ti(2, I64(-1, 0)), ti(2, I64(2, 1))};
    ck_assert_tci_ok(th_run(g, n, ax, out));
    VALUES(&out[0], 4, 6, 8, 10);
    th_free(out, 1);

    /* start past the end: empty result */
    n = th_node(g, "Slice", 13, 3, 1);
    tci_tensor empty[3] = {in[0], ti(1, I64(5)), ti(1, I64(9))};
    ck_assert_tci_ok(th_run(g, n, empty, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(0, 4));
    th_free(out, 1);

    /* int32 starts/ends on int8 data */
    n = th_node(g, "Slice", 13, 3, 1);
    tci_tensor i8[3] = {th_tensor(TCI_DTYPE_INT8, 1, DIMS(5), (const int8_t[]){-1, -2, -3, -4, -5}),
                        th_tensor(TCI_DTYPE_INT32, 1, DIMS(1), (const int32_t[]){-3}),
                        th_tensor(TCI_DTYPE_INT32, 1, DIMS(1), (const int32_t[]){-1})};
    ck_assert_tci_ok(th_run(g, n, i8, out));
    VALUES(&out[0], -3, -4);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_slice_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    float x[12] = {0};
    tci_tensor x34 = tf(2, DIMS(3, 4), x);

    ir_node *n = th_node(g, "Slice", 13, 5, 1);
    tci_tensor zero[5] = {x34, ti(1, I64(0)), ti(1, I64(2)), ti(1, I64(0)), ti(1, I64(0))};
    ck_assert_tci_error(th_run(g, n, zero, out), TCI_ERR_INVALID_MODEL, "step for axis 0 is 0");
    n = th_node(g, "Slice", 13, 4, 1);
    tci_tensor rep[4] = {x34, ti(2, I64(0, 0)), ti(2, I64(2, 2)), ti(2, I64(1, -1))};
    ck_assert_tci_error(th_run(g, n, rep, out), TCI_ERR_INVALID_MODEL, "axis -1 is repeated");
    n = th_node(g, "Slice", 13, 3, 1);
    tci_tensor lens[3] = {x34, ti(2, I64(0, 0)), ti(1, I64(2))};
    ck_assert_tci_error(th_run(g, n, lens, out), TCI_ERR_INVALID_MODEL,
                        "starts, ends, axes and steps have different lengths");
    n = th_node(g, "Slice", 13, 4, 1);
    tci_tensor far[4] = {x34, ti(1, I64(0)), ti(1, I64(2)), ti(1, I64(2))};
    ck_assert_tci_error(th_run(g, n, far, out), TCI_ERR_INVALID_MODEL,
                        "axis 2 out of range for rank 2");
    n = th_node(g, "Slice", 9, 1, 1);
    th_attr_ints(g, n, "starts", I64(0), 1);
    ck_assert_tci_error(th_run(g, n, &x34, out), TCI_ERR_INVALID_MODEL,
                        "attributes 'starts' and 'ends' are required");
    n = th_node(g, "Slice", 9, 1, 1);
    th_attr_ints(g, n, "starts", I64(0), 1);
    th_attr_ints(g, n, "ends", I64(1, 2), 2);
    ck_assert_tci_error(th_run(g, n, &x34, out), TCI_ERR_INVALID_MODEL,
                        "starts, ends and axes have different lengths (1, 2, 1)");
    n = th_node(g, "Slice", 13, 1, 1);
    ck_assert_tci_error(th_run(g, n, &x34, out), TCI_ERR_INVALID_MODEL,
                        "has 1 inputs, expected 3 to 5");

    /* build time: starts unknown; the axes input says which dims it touches */
    n = th_node(g, "Slice", 13, 4, 1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, 3, DIMS(-1, 8, 9)),
               s = unknown(TCI_DTYPE_INT64, 1, DIMS(1)), e = ti(1, I64(4)), a = ti(1, I64(-1));
    const tci_tensor *in[4] = {&u, &s, &e, &a};
    ck_assert_tci_ok(infer_only(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, 8, -1));
    /* all known except the sliced dim itself */
    n = th_node(g, "Slice", 13, 4, 1);
    tci_tensor s2 = ti(1, I64(2)), a2 = ti(1, I64(1));
    const tci_tensor *in2[4] = {&u, &s2, &e, &a2};
    ck_assert_tci_ok(infer_only(g, n, in2, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, 2, 9));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Pad ---- */

START_TEST(test_pad_modes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float x[] = {1, 2, 3};
    struct {
        const char *mode;
        double want[8];
    } cases[] = {{"constant", {0, 0, 1, 2, 3, 0, 0, 0}},
                 {"reflect", {3, 2, 1, 2, 3, 2, 1, 2}},
                 {"edge", {1, 1, 1, 2, 3, 3, 3, 3}},
                 {"wrap", {2, 3, 1, 2, 3, 1, 2, 3}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_node *n = th_node(g, "Pad", 19, 2, 1);
        th_attr_string(g, n, "mode", cases[i].mode);
        tci_tensor in[2] = {tf(1, DIMS(3), x), ti(2, I64(2, 3))};
        ck_assert_tci_ok(th_run(g, n, in, out));
        assert_shape(&out[0], TCI_DTYPE_FLOAT, 1, DIMS(8));
        assert_values(&out[0], cases[i].want, 8);
        th_free(out, 1);
    }

    /* opset 2: attributes; the float value is converted to the data's dtype */
    ir_node *n = th_node(g, "Pad", 7, 1, 1);
    th_attr_ints(g, n, "pads", I64(0, 1, 1, 0), 4);
    th_attr_float(g, n, "value", 9.0f);
    tci_tensor i32[1] = {th_tensor(TCI_DTYPE_INT32, 2, DIMS(1, 2), (const int32_t[]){5, 6})};
    ck_assert_tci_ok(th_run(g, n, i32, out));
    assert_shape(&out[0], TCI_DTYPE_INT32, 2, DIMS(2, 3));
    VALUES(&out[0], 9, 5, 6, 9, 9, 9);
    th_free(out, 1);

    /* opset 11: constant_value input; negative pads crop */
    n = th_node(g, "Pad", 11, 3, 1);
    tci_tensor cv[3] = {th_tensor(TCI_DTYPE_INT64, 2, DIMS(2, 2), I64(1, 2, 3, 4)),
                        ti(4, I64(-1, 1, 0, 0)), th_tensor(TCI_DTYPE_INT64, 0, NULL, I64(7))};
    ck_assert_tci_ok(th_run(g, n, cv, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 2, DIMS(1, 3));
    VALUES(&out[0], 7, 3, 4);
    th_free(out, 1);

    /* opset 18: axes input, negative axis */
    n = th_node(g, "Pad", 18, 4, 1);
    th_attr_string(g, n, "mode", "edge");
    tci_tensor ax[4] = {tf(2, DIMS(2, 2), F32(1, 2, 3, 4)), ti(2, I64(1, 0)), omitted(),
                        ti(1, I64(-2))};
    ck_assert_tci_ok(th_run(g, n, ax, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(3, 2));
    VALUES(&out[0], 1, 2, 1, 2, 3, 4);
    th_free(out, 1);

    /* reflect beyond one period, as numpy does */
    n = th_node(g, "Pad", 13, 2, 1);
    th_attr_string(g, n, "mode", "reflect");
    tci_tensor big[2] = {tf(1, DIMS(2), F32(1, 2)), ti(2, I64(3, 0))};
    ck_assert_tci_ok(th_run(g, n, big, out));
    VALUES(&out[0], 2, 1, 2, 1, 2);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_pad_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    tci_tensor x = tf(1, DIMS(3), F32(1, 2, 3));

    ir_node *n = th_node(g, "Pad", 18, 2, 1);
    th_attr_string(g, n, "mode", "wrap");
    tci_tensor in[2] = {x, ti(2, I64(1, 1))};
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'mode' value 'wrap' is not supported before opset 19");
    n = th_node(g, "Pad", 19, 2, 1);
    th_attr_string(g, n, "mode", "mirror");
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'mode' value 'mirror' is not supported");
    n = th_node(g, "Pad", 19, 2, 1);
    tci_tensor len[2] = {x, ti(3, I64(1, 1, 1))};
    ck_assert_tci_error(th_run(g, n, len, out), TCI_ERR_INVALID_MODEL,
                        "pads has 3 entries, expected 2");
    n = th_node(g, "Pad", 19, 2, 1);
    tci_tensor crop[2] = {x, ti(2, I64(-4, 5))};
    ck_assert_tci_error(th_run(g, n, crop, out), TCI_ERR_INVALID_MODEL,
                        "pads -4, 5 crop more than axis 0 has (3)");
    n = th_node(g, "Pad", 19, 2, 1);
    th_attr_string(g, n, "mode", "edge");
    tci_tensor empty[2] = {tf(1, DIMS(0), F32(0)), ti(2, I64(1, 0))};
    ck_assert_tci_error(th_run(g, n, empty, out), TCI_ERR_INVALID_MODEL,
                        "cannot pad axis 0 of size 0 in edge mode");
    n = th_node(g, "Pad", 19, 3, 1);
    tci_tensor cvt[3] = {x, ti(2, I64(1, 1)), th_tensor(TCI_DTYPE_INT64, 0, NULL, I64(1))};
    ck_assert_tci_error(th_run(g, n, cvt, out), TCI_ERR_INVALID_MODEL,
                        "constant_value has dtype int64, data float");
    n = th_node(g, "Pad", 7, 1, 1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'pads' is required");
    n = th_node(g, "Pad", 11, 2, 1);
    th_attr_float(g, n, "value", 1.0f);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'value'");

    /* build time: pads unknown */
    n = th_node(g, "Pad", 19, 2, 1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, 2, DIMS(-1, 5)),
               p = unknown(TCI_DTYPE_INT64, 1, DIMS(4));
    const tci_tensor *uin[2] = {&u, &p};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(-1, -1));
    /* input rank unknown: the pads' length gives it */
    n = th_node(g, "Pad", 19, 2, 1);
    tci_tensor r = unknown(TCI_DTYPE_FLOAT, -1, NULL);
    const tci_tensor *rin[2] = {&r, &p};
    ck_assert_tci_ok(infer_only(g, n, rin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(-1, -1));
    /* pads known, a symbolic dim stays symbolic */
    n = th_node(g, "Pad", 19, 2, 1);
    tci_tensor pk = ti(4, I64(0, 1, 0, 2));
    const tci_tensor *kin[2] = {&u, &pk};
    ck_assert_tci_ok(infer_only(g, n, kin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(-1, 8));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Expand ---- */

START_TEST(test_expand) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    ir_node *n = th_node(g, "Expand", 13, 2, 1);
    tci_tensor in[2] = {
        th_tensor(TCI_DTYPE_FLOAT16, 2, DIMS(3, 1), (const uint16_t[]){0x3c00, 0x4000, 0x4200}),
        ti(3, I64(2, 1, 2))};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT16, 3, DIMS(2, 3, 2));
    VALUES(&out[0], 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
    th_free(out, 1);

    /* a shape shorter than the input keeps the input's dims */
    n = th_node(g, "Expand", 8, 2, 1);
    tci_tensor shorter[2] = {tf(2, DIMS(2, 2), F32(1, 2, 3, 4)), ti(1, I64(1))};
    ck_assert_tci_ok(th_run(g, n, shorter, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 2));
    VALUES(&out[0], 1, 2, 3, 4);
    th_free(out, 1);

    n = th_node(g, "Expand", 13, 2, 1);
    tci_tensor bad[2] = {tf(1, DIMS(2), F32(1, 2)), ti(1, I64(3))};
    ck_assert_tci_error(th_run(g, n, bad, out), TCI_ERR_INVALID_MODEL, "shapes do not broadcast");
    n = th_node(g, "Expand", 13, 2, 1);
    tci_tensor neg[2] = {tf(1, DIMS(2), F32(1, 2)), ti(1, I64(-2))};
    ck_assert_tci_error(th_run(g, n, neg, out), TCI_ERR_INVALID_MODEL, "shape[0] is negative (-2)");

    n = th_node(g, "Expand", 13, 2, 1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, 2, DIMS(1, 4)),
               s = unknown(TCI_DTYPE_INT64, 1, DIMS(3));
    const tci_tensor *uin[2] = {&u, &s};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, -1, -1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Gather ---- */

START_TEST(test_gather) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float x[] = {1, 2, 3, 4, 5, 6};

    ir_node *n = th_node(g, "Gather", 13, 2, 1);
    tci_tensor in[2] = {tf(2, DIMS(3, 2), x), ti(2, I64(-1, 0))};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 2));
    VALUES(&out[0], 5, 6, 1, 2);
    th_free(out, 1);

    /* axis 1, 2-D int32 indices */
    n = th_node(g, "Gather", 11, 2, 1);
    th_attr_int(g, n, "axis", 1);
    tci_tensor in2[2] = {tf(2, DIMS(2, 3), x),
                         th_tensor(TCI_DTYPE_INT32, 2, DIMS(2, 2), (const int32_t[]){2, 0, 1, 1})};
    ck_assert_tci_ok(th_run(g, n, in2, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(2, 2, 2));
    VALUES(&out[0], 3, 1, 2, 2, 6, 4, 5, 5);
    th_free(out, 1);

    /* scalar index drops the axis */
    n = th_node(g, "Gather", 1, 2, 1);
    tci_tensor sc[2] = {th_tensor(TCI_DTYPE_BOOL, 1, DIMS(3), (const uint8_t[]){0, 1, 0}),
                        th_tensor(TCI_DTYPE_INT64, 0, NULL, I64(1))};
    ck_assert_tci_ok(th_run(g, n, sc, out));
    assert_shape(&out[0], TCI_DTYPE_BOOL, 0, NULL);
    VALUES(&out[0], 1);
    th_free(out, 1);

    n = th_node(g, "Gather", 13, 2, 1);
    tci_tensor oob[2] = {tf(2, DIMS(3, 2), x), ti(1, I64(3))};
    ck_assert_tci_error(th_run(g, n, oob, out), TCI_ERR_INVALID_MODEL,
                        "index 3 out of range for axis 0 of size 3");
    n = th_node(g, "Gather", 13, 2, 1);
    tci_tensor fidx[2] = {tf(2, DIMS(3, 2), x), tf(1, DIMS(1), F32(0))};
    ck_assert_tci_error(th_run(g, n, fidx, out), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype float");

    n = th_node(g, "Gather", 13, 2, 1);
    th_attr_int(g, n, "axis", -1);
    tci_tensor u = unknown(TCI_DTYPE_FLOAT, 3, DIMS(-1, 4, 8)),
               idx = unknown(TCI_DTYPE_INT64, 2, DIMS(-1, 5));
    const tci_tensor *uin[2] = {&u, &idx};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 4, DIMS(-1, 4, -1, 5));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Shape ---- */

START_TEST(test_shape) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    float x[24] = {0};
    ir_node *n = th_node(g, "Shape", 13, 1, 1);
    tci_tensor in[1] = {tf(3, DIMS(2, 3, 4), x)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 1, DIMS(3));
    VALUES(&out[0], 2, 3, 4);
    th_free(out, 1);
    ck_assert(n->desc->flags & OP_FOLD_FROM_SHAPE);

    struct {
        bool has_start, has_end;
        int64_t start, end;
        int64_t len;
        double want[3];
    } cases[] = {{true, false, 1, 0, 2, {3, 4}},
                 {false, true, 0, -1, 2, {2, 3}},
                 {true, true, -2, -1, 1, {3}},
                 {true, true, -10, 10, 3, {2, 3, 4}},
                 {true, true, 2, 1, 0, {0}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = th_node(g, "Shape", 15, 1, 1);
        if (cases[i].has_start) th_attr_int(g, n, "start", cases[i].start);
        if (cases[i].has_end) th_attr_int(g, n, "end", cases[i].end);
        ck_assert_tci_ok(th_run(g, n, in, out));
        assert_shape(&out[0], TCI_DTYPE_INT64, 1, DIMS(cases[i].len));
        assert_values(&out[0], cases[i].want, cases[i].len);
        th_free(out, 1);
    }

    /* folding reads only dims: forward with no input data */
    n = th_node(g, "Shape", 15, 1, 1);
    th_attr_int(g, n, "start", 1);
    tci_tensor nodata = unknown(TCI_DTYPE_FLOAT, 3, DIMS(5, 6, 7));
    const tci_tensor *nin[1] = {&nodata};
    ck_assert_tci_ok(infer_only(g, n, nin, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 1, DIMS(2));
    int64_t got[2];
    out[0].data = got;
    tci_tensor *outs[1] = {&out[0]};
    ck_assert_tci_ok(n->desc->cpu_forward(n, nin, outs));
    ck_assert_int_eq(got[0], 6);
    ck_assert_int_eq(got[1], 7);

    n = th_node(g, "Shape", 13, 1, 1);
    th_attr_int(g, n, "start", 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'start'");

    n = th_node(g, "Shape", 15, 1, 1);
    tci_tensor r = unknown(TCI_DTYPE_FLOAT, -1, NULL);
    const tci_tensor *rin[1] = {&r};
    ck_assert_tci_ok(infer_only(g, n, rin, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 1, DIMS(-1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Constant / ConstantOfShape ---- */

START_TEST(test_constant) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];

    ir_node *n = th_node(g, "Constant", 9, 0, 1);
    tci_tensor v = th_tensor(TCI_DTYPE_INT8, 2, DIMS(2, 2), (const int8_t[]){1, -2, 3, -4});
    th_attr_tensor(g, n, "value", &v);
    ck_assert_tci_ok(th_run(g, n, NULL, out));
    assert_shape(&out[0], TCI_DTYPE_INT8, 2, DIMS(2, 2));
    VALUES(&out[0], 1, -2, 3, -4);
    th_free(out, 1);

    n = th_node(g, "Constant", 12, 0, 1);
    th_attr_float(g, n, "value_float", 2.5f);
    ck_assert_tci_ok(th_run(g, n, NULL, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 0, NULL);
    VALUES(&out[0], 2.5);
    th_free(out, 1);

    n = th_node(g, "Constant", 13, 0, 1);
    th_attr_floats(g, n, "value_floats", F32(1.5f, -1), 2);
    ck_assert_tci_ok(th_run(g, n, NULL, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 1, DIMS(2));
    VALUES(&out[0], 1.5, -1);
    th_free(out, 1);

    n = th_node(g, "Constant", 21, 0, 1);
    th_attr_int(g, n, "value_int", -7);
    ck_assert_tci_ok(th_run(g, n, NULL, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 0, NULL);
    VALUES(&out[0], -7);
    th_free(out, 1);

    n = th_node(g, "Constant", 25, 0, 1);
    th_attr_ints(g, n, "value_ints", I64(4, 5, 6), 3);
    ck_assert_tci_ok(th_run(g, n, NULL, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 1, DIMS(3));
    VALUES(&out[0], 4, 5, 6);
    th_free(out, 1);

    n = th_node(g, "Constant", 13, 0, 1);
    th_attr_string(g, n, "value_string", "hello");
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'value_string' (string constants) is not supported");
    n = th_node(g, "Constant", 13, 0, 1);
    th_attr_tensor(g, n, "sparse_value", &v);
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'sparse_value' (sparse constants) is not supported");
    n = th_node(g, "Constant", 13, 0, 1);
    th_attr_int(g, n, "value_int", 1);
    th_attr_float(g, n, "value_float", 1);
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_INVALID_MODEL,
                        "needs exactly one value attribute, has 2");
    n = th_node(g, "Constant", 13, 0, 1);
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_INVALID_MODEL,
                        "needs exactly one value attribute, has 0");
    n = th_node(g, "Constant", 11, 0, 1);
    th_attr_int(g, n, "value_int", 1);
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'value_int'");
    n = th_node(g, "Constant", 13, 0, 1);
    th_attr_float(g, n, "value_int", 1);
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'value_int' is float, expected int");
    n = th_node(g, "Constant", 13, 0, 1);
    th_attr_int(g, n, "value", 1);
    ck_assert_tci_error(th_run(g, n, NULL, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'value' is not a tensor");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_constant_of_shape) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];

    ir_node *n = th_node(g, "ConstantOfShape", 9, 1, 1);
    tci_tensor in[1] = {ti(2, I64(2, 3))};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(2, 3));
    VALUES(&out[0], 0, 0, 0, 0, 0, 0);
    th_free(out, 1);

    n = th_node(g, "ConstantOfShape", 20, 1, 1);
    tci_tensor v = th_tensor(TCI_DTYPE_INT64, 1, DIMS(1), I64(5));
    th_attr_tensor(g, n, "value", &v);
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 2, DIMS(2, 3));
    VALUES(&out[0], 5, 5, 5, 5, 5, 5);
    th_free(out, 1);

    /* empty shape: a scalar; a zero dim: an empty tensor */
    n = th_node(g, "ConstantOfShape", 21, 1, 1);
    th_attr_tensor(g, n, "value", &v);
    tci_tensor sc[1] = {ti(0, I64(0))};
    ck_assert_tci_ok(th_run(g, n, sc, out));
    assert_shape(&out[0], TCI_DTYPE_INT64, 0, NULL);
    VALUES(&out[0], 5);
    th_free(out, 1);
    n = th_node(g, "ConstantOfShape", 21, 1, 1);
    tci_tensor z[1] = {ti(2, I64(0, 4))};
    ck_assert_tci_ok(th_run(g, n, z, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(0, 4));
    th_free(out, 1);

    n = th_node(g, "ConstantOfShape", 21, 1, 1);
    tci_tensor neg[1] = {ti(2, I64(2, -1))};
    ck_assert_tci_error(th_run(g, n, neg, out), TCI_ERR_INVALID_MODEL, "shape[1] is negative (-1)");
    n = th_node(g, "ConstantOfShape", 21, 1, 1);
    tci_tensor two = th_tensor(TCI_DTYPE_FLOAT, 1, DIMS(2), F32(1, 2));
    th_attr_tensor(g, n, "value", &two);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'value' must hold one element, has 2");

    n = th_node(g, "ConstantOfShape", 21, 1, 1);
    tci_tensor u = unknown(TCI_DTYPE_INT64, 1, DIMS(3));
    const tci_tensor *uin[1] = {&u};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 3, DIMS(-1, -1, -1));
    ir_graph_destroy(g);
}
END_TEST

/* ---- Identity / Dropout ---- */

/* The index maps of the copies (Transpose, Slice, Pad, Expand, Tile, DepthToSpace,
 * SpaceToDepth): one block of a map per dim; none for an output without elements, however large
 * its other dims (a map of 2^40 indices would be 8 TB for nothing to copy). */
START_TEST(test_maps_alloc) {
    tci_tensor empty = th_tensor(TCI_DTYPE_FLOAT, 2, DIMS(0, (int64_t)1 << 40), NULL);
    int64_t *unset[1];
    int64_t **maps = unset; /* set to NULL by the call */
    ck_assert_tci_ok(shape_maps_alloc(NULL, &empty, &maps));
    ck_assert_ptr_null(maps);
    tci_tensor t = th_tensor(TCI_DTYPE_FLOAT, 3, DIMS(2, 3, 4), NULL);
    ck_assert_tci_ok(shape_maps_alloc(NULL, &t, &maps));
    ck_assert_ptr_nonnull(maps);
    ck_assert_int_eq(maps[1] - maps[0], 2);
    ck_assert_int_eq(maps[2] - maps[1], 3);
    for (int d = 0; d < 3; d++)
        for (int64_t i = 0; i < t.dims[d]; i++) maps[d][i] = -1; /* every index is writable */
    free(maps);
    tci_tensor scalar = th_tensor(TCI_DTYPE_FLOAT, 0, DIMS(0), NULL);
    ck_assert_tci_ok(shape_maps_alloc(NULL, &scalar, &maps));
    ck_assert_ptr_nonnull(maps); /* one element to copy, no map */
    free(maps);
}
END_TEST

START_TEST(test_identity_dropout) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[2];

    ir_node *n = th_node(g, "Identity", 16, 1, 1);
    tci_tensor in[1] = {th_tensor(TCI_DTYPE_INT32, 1, DIMS(3), (const int32_t[]){1, -2, 3})};
    ck_assert_tci_ok(th_run(g, n, in, out));
    assert_shape(&out[0], TCI_DTYPE_INT32, 1, DIMS(3));
    VALUES(&out[0], 1, -2, 3);
    th_free(out, 1);
    ck_assert(n->desc->flags & OP_PASSTHROUGH);

    /* opset 10: bool mask, all true */
    n = th_node(g, "Dropout", 10, 1, 2);
    th_attr_float(g, n, "ratio", 0.3f);
    tci_tensor x[1] = {tf(1, DIMS(2), F32(1.5f, -2))};
    ck_assert_tci_ok(th_run(g, n, x, out));
    VALUES(&out[0], 1.5, -2);
    assert_shape(&out[1], TCI_DTYPE_BOOL, 1, DIMS(2));
    VALUES(&out[1], 1, 1);
    th_free(out, 2);
    ck_assert(n->desc->flags & OP_PASSTHROUGH);

    /* opset 7: the mask has the data's dtype */
    n = th_node(g, "Dropout", 7, 1, 2);
    ck_assert_tci_ok(th_run(g, n, x, out));
    assert_shape(&out[1], TCI_DTYPE_FLOAT, 1, DIMS(2));
    VALUES(&out[1], 1, 1);
    th_free(out, 2);

    /* opset 12: ratio and training_mode inputs */
    n = th_node(g, "Dropout", 13, 3, 1);
    tci_tensor off[3] = {x[0], tf(0, NULL, F32(0.5f)),
                         th_tensor(TCI_DTYPE_BOOL, 0, NULL, (const uint8_t[]){0})};
    ck_assert_tci_ok(th_run(g, n, off, out));
    VALUES(&out[0], 1.5, -2);
    th_free(out, 1);
    n = th_node(g, "Dropout", 22, 3, 2);
    tci_tensor on[3] = {x[0], omitted(), th_tensor(TCI_DTYPE_BOOL, 0, NULL, (const uint8_t[]){1})};
    ck_assert_tci_error(th_run(g, n, on, out), TCI_ERR_UNSUPPORTED,
                        "training_mode=true is not supported (inference only)");
    /* training with ratio 0 is still the identity */
    n = th_node(g, "Dropout", 22, 3, 2);
    tci_tensor zero[3] = {x[0], tf(0, NULL, F32(0)), on[2]};
    ck_assert_tci_ok(th_run(g, n, zero, out));
    VALUES(&out[0], 1.5, -2);
    VALUES(&out[1], 1, 1);
    th_free(out, 2);
    n = th_node(g, "Dropout", 22, 3, 2);
    tci_tensor half[3] = {x[0], tf(0, NULL, F32(0.5f)), on[2]};
    ck_assert_tci_error(th_run(g, n, half, out), TCI_ERR_UNSUPPORTED, "unless ratio is 0");
    n = th_node(g, "Dropout", 13, 1, 1);
    th_attr_float(g, n, "ratio", 0.5f);
    ck_assert_tci_error(th_run(g, n, x, out), TCI_ERR_UNSUPPORTED, "unsupported attribute 'ratio'");
    /* training_mode not known at build time: accepted, checked at run time */
    n = th_node(g, "Dropout", 13, 3, 1);
    tci_tensor tm = unknown(TCI_DTYPE_BOOL, 0, NULL), xu = unknown(TCI_DTYPE_FLOAT, 2, DIMS(-1, 3));
    const tci_tensor *uin[3] = {&xu, NULL, &tm};
    ck_assert_tci_ok(infer_only(g, n, uin, out));
    assert_shape(&out[0], TCI_DTYPE_FLOAT, 2, DIMS(-1, 3));
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("shape_ops");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_versions_resolve);
    tcase_add_test(tc, test_concat_values);
    tcase_add_test(tc, test_concat_errors_and_infer);
    tcase_add_test(tc, test_split_versions);
    tcase_add_test(tc, test_split_errors_and_infer);
    tcase_add_test(tc, test_flatten);
    tcase_add_test(tc, test_reshape_values);
    tcase_add_test(tc, test_reshape_errors);
    tcase_add_test(tc, test_reshape_infer_unknowns);
    tcase_add_test(tc, test_transpose);
    tcase_add_test(tc, test_squeeze);
    tcase_add_test(tc, test_unsqueeze);
    tcase_add_test(tc, test_slice_values);
    tcase_add_test(tc, test_slice_errors_and_infer);
    tcase_add_test(tc, test_pad_modes);
    tcase_add_test(tc, test_pad_errors_and_infer);
    tcase_add_test(tc, test_expand);
    tcase_add_test(tc, test_gather);
    tcase_add_test(tc, test_shape);
    tcase_add_test(tc, test_constant);
    tcase_add_test(tc, test_constant_of_shape);
    tcase_add_test(tc, test_identity_dropout);
    tcase_add_test(tc, test_maps_alloc);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
