/* Pooling family: MaxPool (and its Indices), AveragePool, LpPool, global pools and LRN on hand-computed
 * cases, shape inference with unknown dims, version differences and every error path. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

static const float iota16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const float iota9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

/* Runs a one-input, one-output pool node on x and checks y's dims and values. */
static void expect_pool(ir_graph *g, ir_node *n, tci_tensor x, int rank, const int64_t *dims,
                        const float *want, size_t count) {
    tci_tensor out[2];
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(out[0].rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(out[0].dims[i], dims[i]);
    th_assert_near(out[0].data, want, count, 1e-5f);
    th_free(out, n->num_outputs);
}

/* Prepares the node for inputs shaped like in[] and runs only shape inference. */
static tci_status infer_only(ir_graph *g, ir_node *n, const tci_tensor *in, tci_tensor *out) {
    const tci_tensor *ins[4] = {0};
    tci_tensor *outs[4] = {0};
    for (int i = 0; i < n->num_inputs; i++) {
        ir_tensor_copy_shape(n->inputs[i], &in[i]);
        ins[i] = &in[i];
    }
    for (int i = 0; i < n->num_outputs; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].rank = -1;
        outs[i] = &out[i];
    }
    tci_status st = op_prepare_node(n, g->arena);
    if (st != TCI_OK) return st;
    return n->desc->infer(n, ins, outs);
}

static ir_node *pool_node(ir_graph *g, const char *op, int opset, int outputs, int k,
                          int64_t kernel) {
    ir_node *n = th_node(g, op, opset, 1, outputs);
    int64_t ks[8];
    for (int i = 0; i < k; i++) ks[i] = kernel;
    th_attr_ints(g, n, "kernel_shape", ks, (size_t)k);
    return n;
}

START_TEST(test_max_pool_2d_with_indices) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 22, 2, 2, 2);
    int64_t strides[2] = {2, 2}, dims[4] = {1, 1, 4, 4};
    th_attr_ints(g, n, "strides", strides, 2);
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), out[2];
    ck_assert_tci_ok(th_run(g, n, &x, out));
    const float want[4] = {6, 8, 14, 16};
    th_assert_near(out[0].data, want, 4, 0);
    ck_assert_int_eq(out[1].dtype, TCI_DTYPE_INT64);
    const int64_t *idx = out[1].data;
    ck_assert_int_eq(idx[0], 5);
    ck_assert_int_eq(idx[1], 7);
    ck_assert_int_eq(idx[2], 13);
    ck_assert_int_eq(idx[3], 15);
    th_free(out, 2);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_indices_column_major_and_channels) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 12, 2, 2, 2);
    int64_t strides[2] = {2, 2}, dims[4] = {1, 2, 4, 2};
    th_attr_ints(g, n, "strides", strides, 2);
    th_attr_int(g, n, "storage_order", 1);
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), out[2];
    ck_assert_tci_ok(th_run(g, n, &x, out));
    const float want[4] = {4, 8, 12, 16};
    th_assert_near(out[0].data, want, 4, 0);
    /* column-major within the plane (h + w * H), planes still row-major (c * H * W) */
    const int64_t *idx = out[1].data;
    ck_assert_int_eq(idx[0], 0 + 1 + 1 * 4);
    ck_assert_int_eq(idx[1], 0 + 3 + 1 * 4);
    ck_assert_int_eq(idx[2], 8 + 1 + 1 * 4);
    ck_assert_int_eq(idx[3], 8 + 3 + 1 * 4);
    th_free(out, 2);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_1d_pads_dilation) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 11, 1, 1, 2);
    int64_t pads[2] = {1, 1}, dil[1] = {2}, dims[3] = {1, 1, 5}, ydims[3] = {1, 1, 5};
    th_attr_ints(g, n, "pads", pads, 2);
    th_attr_ints(g, n, "dilations", dil, 1);
    const float xs[5] = {1, 5, 2, 4, 3}, want[5] = {5, 2, 5, 3, 4};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, ydims, want, 5);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_3d) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 22, 1, 3, 2);
    int64_t dims[5] = {1, 2, 2, 2, 2}, ydims[5] = {1, 2, 1, 1, 1};
    const float xs[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}, want[2] = {9, 9};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 5, dims, xs), 5, ydims, want, 2);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_ceil_mode) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 10, 1, 2, 3);
    int64_t strides[2] = {2, 2}, dims[4] = {1, 1, 4, 4}, ydims[4] = {1, 1, 2, 2};
    th_attr_ints(g, n, "strides", strides, 2);
    th_attr_int(g, n, "ceil_mode", 1);
    const float want[4] = {11, 12, 15, 16};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), 4, ydims, want, 4);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_ceil_mode_last_window_starts_inside) {
    /* ceil((2 - 1) / 2) + 1 = 2 windows, but the second would start past the input */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 22, 1, 2, 1);
    int64_t strides[2] = {2, 2}, dims[4] = {1, 1, 2, 2}, ydims[4] = {1, 1, 1, 1};
    th_attr_ints(g, n, "strides", strides, 2);
    th_attr_int(g, n, "ceil_mode", 1);
    const float xs[4] = {1, 2, 3, 4}, want[1] = {1};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs), 4, ydims, want, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_same_upper_and_lower) {
    int64_t dims[4] = {1, 1, 3, 3}, ydims[4] = {1, 1, 3, 3};
    const float upper[9] = {5, 6, 6, 8, 9, 9, 8, 9, 9}, lower[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 8, 1, 2, 2);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota9), 4, ydims, upper, 9);
    n = pool_node(g, "MaxPool", 8, 1, 2, 2);
    th_attr_string(g, n, "auto_pad", "SAME_LOWER");
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota9), 4, ydims, lower, 9);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_valid_ignores_pads) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    int64_t pads[4] = {1, 1, 1, 1}, dims[4] = {1, 1, 3, 3}, ydims[4] = {1, 1, 2, 2};
    th_attr_ints(g, n, "pads", pads, 4);
    th_attr_string(g, n, "auto_pad", "VALID");
    const float want[4] = {5, 6, 8, 9};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota9), 4, ydims, want, 4);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_max_pool_int8) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 12, 1, 1, 2);
    int64_t dims[3] = {1, 1, 4};
    const int8_t xs[4] = {-100, -7, 3, -128};
    tci_tensor x = th_tensor(TCI_DTYPE_INT8, 3, dims, xs), out[1];
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT8);
    ck_assert_int_eq(out[0].dims[2], 3);
    const int8_t *y = out[0].data;
    ck_assert_int_eq(y[0], -7);
    ck_assert_int_eq(y[1], 3);
    ck_assert_int_eq(y[2], 3);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_average_pool_count_include_pad) {
    int64_t pads[4] = {1, 1, 1, 1}, dims[4] = {1, 1, 3, 3}, ydims[4] = {1, 1, 3, 3};
    const float exclude[9] = {3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7};
    const float include[9] = {12 / 9.f, 21 / 9.f, 16 / 9.f, 27 / 9.f, 45 / 9.f,
                              33 / 9.f, 24 / 9.f, 39 / 9.f, 28 / 9.f};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "AveragePool", 7, 1, 2, 3);
    th_attr_ints(g, n, "pads", pads, 4);
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota9), 4, ydims, exclude, 9);
    n = pool_node(g, "AveragePool", 7, 1, 2, 3);
    th_attr_ints(g, n, "pads", pads, 4);
    th_attr_int(g, n, "count_include_pad", 1);
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota9), 4, ydims, include, 9);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_average_pool_ceil_window_past_padding) {
    /* the last window covers input 3, right pad 4 and position 5 beyond both: that one is never
     * counted, padded or not */
    int64_t strides[1] = {2}, pads[2] = {1, 1}, dims[3] = {1, 1, 4}, ydims[3] = {1, 1, 3};
    const float xs[4] = {1, 2, 3, 4}, include[3] = {1, 3, 2}, exclude[3] = {1.5f, 3, 4};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    for (int count_pad = 0; count_pad < 2; count_pad++) {
        ir_node *n = pool_node(g, "AveragePool", 11, 1, 1, 3);
        th_attr_ints(g, n, "strides", strides, 1);
        th_attr_ints(g, n, "pads", pads, 2);
        th_attr_int(g, n, "ceil_mode", 1);
        th_attr_int(g, n, "count_include_pad", count_pad);
        expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, ydims,
                    count_pad ? include : exclude, 3);
    }
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_average_pool_dilations_from_19) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "AveragePool", 19, 1, 1, 2);
    int64_t dil[1] = {2}, dims[3] = {1, 1, 6}, ydims[3] = {1, 1, 4};
    th_attr_ints(g, n, "dilations", dil, 1);
    const float xs[6] = {1, 2, 3, 4, 5, 6}, want[4] = {2, 3, 4, 5};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, ydims, want, 4);

    n = pool_node(g, "AveragePool", 18, 1, 1, 2);
    th_attr_ints(g, n, "dilations", dil, 1);
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), out[1];
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'dilations'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_lp_pool_versions) {
    /* x = {1, -2, 3, -4}: the window takes (sum |x|^p)^(1/p) of the taps inside the input */
    int64_t dims[3] = {1, 1, 4}, y3[3] = {1, 1, 3}, y2[3] = {1, 1, 2}, pads[2] = {1, 1},
            two[1] = {2};
    const float xs[4] = {1, -2, 3, -4};
    const float l1[3] = {3, 5, 7}, l3_padded[3] = {1, 3.2710663f, 4},
                l2[3] = {2.2360680f, 3.6055513f, 5}, l2_dilated[2] = {3.1622777f, 4.4721360f};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* LpPool-1's p is a float */
    ir_node *n = pool_node(g, "LpPool", 1, 1, 1, 2);
    th_attr_float(g, n, "p", 1.0f);
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, y3, l1, 3);
    ck_assert_int_eq(n->since_version, 1);
    /* from 2 an int; padding adds nothing to the sum */
    n = pool_node(g, "LpPool", 2, 1, 1, 2);
    th_attr_int(g, n, "p", 3);
    th_attr_ints(g, n, "pads", pads, 2);
    th_attr_ints(g, n, "strides", two, 1);
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, y3, l3_padded, 3);
    ck_assert_int_eq(n->since_version, 2);
    n = pool_node(g, "LpPool", 17, 1, 1, 2);
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, y3, l2, 3);
    ck_assert_int_eq(n->since_version, 11);
    /* dilations and ceil_mode from 18 */
    const int opsets[2] = {18, 22};
    for (int i = 0; i < 2; i++) {
        n = pool_node(g, "LpPool", opsets[i], 1, 1, 2);
        th_attr_ints(g, n, "dilations", two, 1);
        th_attr_int(g, n, "ceil_mode", 1);
        expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 3, dims, xs), 3, y2, l2_dilated, 2);
        ck_assert_int_eq(n->since_version, opsets[i]);
    }
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_lp_pool_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "LpPool", 11, 1, 1, 2);
    th_attr_int(g, n, "ceil_mode", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'ceil_mode'");
    n = pool_node(g, "LpPool", 22, 1, 1, 2);
    th_attr_int(g, n, "count_include_pad", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'count_include_pad'");
    n = pool_node(g, "LpPool", 22, 1, 1, 2);
    th_attr_int(g, n, "p", 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "p is 0; must be positive");
    n = pool_node(g, "LpPool", 1, 1, 1, 2);
    th_attr_int(g, n, "p", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "attribute 'p' is");
    n = pool_node(g, "LpPool", 1, 1, 1, 2);
    th_attr_float(g, n, "p", -1.5f);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "p is -1.5; must be positive");
    /* MaxPool and AveragePool have no p */
    n = pool_node(g, "AveragePool", 22, 1, 1, 2);
    th_attr_int(g, n, "p", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'p'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_global_pools) {
    int64_t dims[4] = {1, 2, 2, 2}, ydims[4] = {1, 2, 1, 1};
    const float xs[8] = {1, 2, 3, 6, -1, -5, -2, -4};
    const float avg[2] = {3, -3}, max[2] = {6, -1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor x4 = th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs);
    expect_pool(g, th_node(g, "GlobalAveragePool", 7, 1, 1), x4, 4, ydims, avg, 2);
    expect_pool(g, th_node(g, "GlobalMaxPool", 22, 1, 1), x4, 4, ydims, max, 2);
    int64_t dims1[3] = {1, 1, 3}, ydims1[3] = {1, 1, 1};
    const float avg1[1] = {2};
    expect_pool(g, th_node(g, "GlobalAveragePool", 22, 1, 1),
                th_tensor(TCI_DTYPE_FLOAT, 3, dims1, xs), 3, ydims1, avg1, 1);

    ir_node *n = th_node(g, "GlobalMaxPool", 22, 1, 1);
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 1, dims, xs), out[1];
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL, "input has rank 1");
    n = th_node(g, "GlobalAveragePool", 22, 1, 1);
    th_attr_int(g, n, "axis", 1);
    x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED, "unsupported attribute 'axis'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_lrn) {
    int64_t dims[4] = {1, 3, 1, 1};
    const float xs[3] = {1, 2, 3};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* alpha / size = 1, beta = 1, bias = 1: y = x / (1 + sum of squares in the window) */
    ir_node *n = th_node(g, "LRN", 13, 1, 1);
    th_attr_int(g, n, "size", 3);
    th_attr_float(g, n, "alpha", 3.0f);
    th_attr_float(g, n, "beta", 1.0f);
    const float want3[3] = {1.f / 6, 2.f / 15, 3.f / 14};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs), 4, dims, want3, 3);
    /* even size: the window reaches one channel further up than down */
    n = th_node(g, "LRN", 1, 1, 1);
    th_attr_int(g, n, "size", 2);
    th_attr_float(g, n, "alpha", 2.0f);
    th_attr_float(g, n, "beta", 1.0f);
    const float want2[3] = {1.f / 6, 2.f / 14, 3.f / 10};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs), 4, dims, want2, 3);
    /* defaults: alpha 1e-4, beta 0.75, bias 1 */
    n = th_node(g, "LRN", 13, 1, 1);
    th_attr_int(g, n, "size", 1);
    const float want1[3] = {1.f / powf(1 + 1e-4f, 0.75f), 2.f / powf(1 + 4e-4f, 0.75f),
                            3.f / powf(1 + 9e-4f, 0.75f)};
    expect_pool(g, n, th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs), 4, dims, want1, 3);

    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, xs), out[1];
    n = th_node(g, "LRN", 13, 1, 1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'size' is required");
    n = th_node(g, "LRN", 13, 1, 1);
    th_attr_int(g, n, "size", 0);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "size is 0; must be positive");
    n = th_node(g, "LRN", 13, 1, 1);
    th_attr_int(g, n, "size", 3);
    x = th_tensor(TCI_DTYPE_FLOAT, 1, dims, xs);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL, "input has rank 1");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_infer_unknown_dims) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = pool_node(g, "MaxPool", 22, 2, 2, 2);
    int64_t strides[2] = {2, 2};
    th_attr_ints(g, n, "strides", strides, 2);
    tci_tensor in[1], out[2];
    memset(in, 0, sizeof in);
    in[0].dtype = TCI_DTYPE_FLOAT;
    in[0].rank = -1;
    ck_assert_tci_ok(infer_only(g, n, in, out));
    ck_assert_int_eq(out[0].rank, 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out[0].dims[i], -1);
    ck_assert_int_eq(out[1].dtype, TCI_DTYPE_INT64);
    ck_assert_int_eq(out[1].rank, 4);

    n = pool_node(g, "AveragePool", 22, 1, 2, 2);
    th_attr_ints(g, n, "strides", strides, 2);
    int64_t dims[4] = {-1, 3, 8, -1};
    in[0] = th_tensor(TCI_DTYPE_FLOAT, 4, dims, NULL);
    ck_assert_tci_ok(infer_only(g, n, in, out));
    ck_assert_int_eq(out[0].dims[0], -1);
    ck_assert_int_eq(out[0].dims[1], 3);
    ck_assert_int_eq(out[0].dims[2], 4);
    ck_assert_int_eq(out[0].dims[3], -1);

    n = th_node(g, "GlobalAveragePool", 22, 1, 1);
    ck_assert_tci_ok(infer_only(g, n, in, out));
    ck_assert_int_eq(out[0].rank, 4);
    ck_assert_int_eq(out[0].dims[0], -1);
    ck_assert_int_eq(out[0].dims[2], 1);
    ck_assert_int_eq(out[0].dims[3], 1);

    /* the kernel check needs only the known axis */
    n = pool_node(g, "MaxPool", 22, 1, 2, 9);
    ck_assert_tci_error(infer_only(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "kernel extent 9 (kernel_shape 9, dilation 1) is larger than the padded "
                        "input 8 on spatial axis 0");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_version_differences) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t dims[4] = {1, 1, 4, 4};
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), out[2];
    ir_node *n = pool_node(g, "MaxPool", 7, 2, 2, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "has 2 outputs, expected 1 to 1");
    n = pool_node(g, "MaxPool", 7, 1, 2, 2);
    th_attr_int(g, n, "storage_order", 0);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'storage_order'");
    n = pool_node(g, "MaxPool", 9, 1, 2, 2);
    th_attr_int(g, n, "ceil_mode", 1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'ceil_mode'");
    n = pool_node(g, "MaxPool", 9, 1, 2, 2);
    int64_t dil[2] = {1, 1};
    th_attr_ints(g, n, "dilations", dil, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'dilations'");
    n = pool_node(g, "AveragePool", 6, 1, 2, 2);
    th_attr_int(g, n, "count_include_pad", 1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'count_include_pad'");
    /* opset 1 and 28 both resolve */
    n = pool_node(g, "MaxPool", 1, 1, 2, 4);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(n->since_version, 1);
    ck_assert_float_eq(((float *)out[0].data)[0], 16);
    th_free(out, 1);
    n = pool_node(g, "AveragePool", 28, 1, 2, 4);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(n->since_version, 22);
    ck_assert_float_eq(((float *)out[0].data)[0], 8.5f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_attribute_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t dims[4] = {1, 1, 4, 4};
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), out[1];

    ir_node *n = th_node(g, "MaxPool", 22, 1, 1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'kernel_shape' is required");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    int64_t three[3] = {1, 1, 1};
    th_attr_ints(g, n, "strides", three, 3);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "strides has 3 entries, expected 2");
    n = pool_node(g, "AveragePool", 22, 1, 2, 2);
    int64_t zero_stride[2] = {1, 0};
    th_attr_ints(g, n, "strides", zero_stride, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "strides[1] is 0; must be positive");
    n = pool_node(g, "AveragePool", 22, 1, 2, 2);
    int64_t neg_stride[2] = {-2, 1};
    th_attr_ints(g, n, "strides", neg_stride, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "strides[0] is -2; must be positive");
    n = pool_node(g, "MaxPool", 22, 1, 2, 0);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "kernel_shape[0] is 0; must be positive");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    th_attr_ints(g, n, "pads", three, 3);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "pads has 3 entries, expected 4");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    int64_t neg_pads[4] = {0, 0, -1, 0};
    th_attr_ints(g, n, "pads", neg_pads, 4);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "pads[2] is -1; must be non-negative");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    int64_t zero_dil[2] = {0, 1};
    th_attr_ints(g, n, "dilations", zero_dil, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "dilations[0] is 0; must be positive");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    th_attr_string(g, n, "auto_pad", "SAME");
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    th_attr_int(g, n, "ceil_mode", 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "ceil_mode is 2; must be 0 or 1");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    th_attr_int(g, n, "storage_order", 3);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "storage_order is 3; must be 0 or 1");
    n = pool_node(g, "AveragePool", 22, 1, 2, 2);
    th_attr_int(g, n, "count_include_pad", -1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "count_include_pad is -1; must be 0 or 1");
    n = pool_node(g, "MaxPool", 22, 1, 7, 1);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "kernel_shape has 7 axes; at most 6 spatial axes are supported");
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    th_attr_float(g, n, "alpha", 1.0f);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'alpha'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_shape_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t dims[4] = {1, 1, 4, 4};
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), out[1];

    ir_node *n = pool_node(g, "MaxPool", 22, 1, 1, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "input has rank 4; kernel_shape has 1 spatial axes, so rank 3 is expected");
    n = pool_node(g, "AveragePool", 22, 1, 2, 5);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "kernel extent 5 (kernel_shape 5, dilation 1) is larger than the padded "
                        "input 4 on spatial axis 0");
    /* pads make it fit; dilation makes it not fit again */
    n = pool_node(g, "AveragePool", 22, 1, 2, 5);
    int64_t pads[4] = {1, 0, 0, 1};
    th_attr_ints(g, n, "pads", pads, 4);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(out[0].dims[2], 1);
    ck_assert_int_eq(out[0].dims[3], 1);
    th_free(out, 1);
    n = pool_node(g, "MaxPool", 22, 1, 2, 3);
    int64_t dil[2] = {1, 2};
    th_attr_ints(g, n, "dilations", dil, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL,
                        "kernel extent 5 (kernel_shape 3, dilation 2) is larger than the padded "
                        "input 4 on spatial axis 1");
    n = pool_node(g, "MaxPool", 22, 1, 2, 5);
    th_attr_string(g, n, "auto_pad", "VALID");
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL, "is larger than the padded");

    const double xd[16] = {0};
    x = th_tensor(TCI_DTYPE_DOUBLE, 4, dims, xd);
    n = pool_node(g, "MaxPool", 22, 1, 2, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype double");
    const int8_t xi[16] = {0};
    x = th_tensor(TCI_DTYPE_INT8, 4, dims, xi);
    n = pool_node(g, "AveragePool", 22, 1, 2, 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int8");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_empty_batch) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t dims[4] = {0, 3, 4, 4};
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, dims, iota16), out[2];
    ir_node *n = pool_node(g, "MaxPool", 22, 2, 2, 2);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(out[0].dims[0], 0);
    ck_assert_int_eq(out[0].dims[2], 3);
    th_free(out, 2);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_max_pool_2d_with_indices);
    tcase_add_test(tc, test_max_pool_indices_column_major_and_channels);
    tcase_add_test(tc, test_max_pool_1d_pads_dilation);
    tcase_add_test(tc, test_max_pool_3d);
    tcase_add_test(tc, test_max_pool_ceil_mode);
    tcase_add_test(tc, test_ceil_mode_last_window_starts_inside);
    tcase_add_test(tc, test_max_pool_same_upper_and_lower);
    tcase_add_test(tc, test_max_pool_valid_ignores_pads);
    tcase_add_test(tc, test_max_pool_int8);
    tcase_add_test(tc, test_average_pool_count_include_pad);
    tcase_add_test(tc, test_average_pool_ceil_window_past_padding);
    tcase_add_test(tc, test_average_pool_dilations_from_19);
    tcase_add_test(tc, test_lp_pool_versions);
    tcase_add_test(tc, test_lp_pool_errors);
    tcase_add_test(tc, test_global_pools);
    tcase_add_test(tc, test_lrn);
    tcase_add_test(tc, test_infer_unknown_dims);
    tcase_add_test(tc, test_version_differences);
    tcase_add_test(tc, test_attribute_errors);
    tcase_add_test(tc, test_shape_errors);
    tcase_add_test(tc, test_empty_batch);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
