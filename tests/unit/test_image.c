/* CenterCropPad, Col2Im (image.c) and Det (linalg.c): odd crops and pads, other element types,
 * 1-D blocks, pivoting, singular and empty matrices, shape inference before values, and the
 * errors the conformance cases never reach. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT
#define I64 TCI_DTYPE_INT64

START_TEST(test_center_crop_pad) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* 1-D int64: odd crops start at floor(d / 2), odd pads put the extra zero at the end */
    const int64_t x[5] = {10, 11, 12, 13, 14}, d5[] = {5}, d1[] = {1};
    tci_tensor in[2] = {th_tensor(I64, 1, d5, x), th_tensor(I64, 1, d1, (const int64_t[]){2})},
               out[1];
    ir_node *n = th_node(g, "CenterCropPad", 18, 2, 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(out[0].dtype, I64);
    th_assert_dims(&out[0], 1, (const int64_t[]){2});
    ck_assert(((int64_t *)out[0].data)[0] == 11 && ((int64_t *)out[0].data)[1] == 12);
    th_free(out, 1);
    in[1] = th_tensor(TCI_DTYPE_INT32, 1, d1, (const int32_t[]){8});
    n = th_node(g, "CenterCropPad", 28, 2, 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const int64_t padded[8] = {0, 10, 11, 12, 13, 14, 0, 0};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], padded[i]);
    th_free(out, 1);
    /* 2-D, axes given: crop rows, pad columns */
    const float x2[6] = {1, 2, 3, 4, 5, 6};
    const int64_t d32[] = {3, 2}, d2[] = {2};
    in[0] = th_tensor(F, 2, d32, x2);
    in[1] = th_tensor(I64, 1, d2, (const int64_t[]){4, 1});
    n = th_node(g, "CenterCropPad", 18, 2, 1);
    th_attr_ints(g, n, "axes", (const int64_t[]){-1, 0}, 2);
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_dims(&out[0], 2, (const int64_t[]){1, 4});
    th_assert_near(out[0].data, (const float[]){0, 3, 4, 0}, 4, 0);
    th_free(out, 1);
    /* errors */
    in[1] = th_tensor(I64, 1, d1, (const int64_t[]){2});
    n = th_node(g, "CenterCropPad", 18, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input shape has 1 entries; expected 2 (one per input axis)");
    in[1] = th_tensor(I64, 1, d2, (const int64_t[]){1, 1});
    n = th_node(g, "CenterCropPad", 18, 2, 1);
    th_attr_ints(g, n, "axes", (const int64_t[]){1, -1}, 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL, "axes names axis 1 twice");
    in[1] = th_tensor(I64, 1, d2, (const int64_t[]){1, -1});
    n = th_node(g, "CenterCropPad", 18, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input shape[1] is -1; negative");
    n = th_node(g, "CenterCropPad", 17, 2, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED, "from opset 18");
    /* before the shape's values: the chosen axes unknown, the others kept */
    tci_tensor xs = th_shape_only(F, 2, d32), ss = th_shape_only(I64, 1, d1), o[1];
    const tci_tensor *ins[2] = {&xs, &ss};
    n = th_node(g, "CenterCropPad", 18, 2, 1);
    th_attr_ints(g, n, "axes", (const int64_t[]){1}, 1);
    ck_assert_tci_ok(th_infer(g, n, ins, o));
    th_assert_dims(&o[0], 2, (const int64_t[]){3, -1});
    ir_graph_destroy(g);
}
END_TEST

/* Col2Im of x into out with a 1-D image of `image` and blocks of `block`. */
static tci_status run_col2im(ir_graph *g, ir_node *n, const tci_tensor *x, int64_t image,
                             int64_t block, tci_tensor *out) {
    const int64_t d1[] = {1};
    tci_tensor in[3] = {*x, th_tensor(I64, 1, d1, &image), th_tensor(I64, 1, d1, &block)};
    return th_run(g, n, in, out);
}

START_TEST(test_col2im) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* one spatial axis: image 4, block 2, stride 1: position p, offset o lands on p + o */
    const float col[6] = {1, 2, 3, 10, 20, 30};
    const int64_t xd[] = {1, 2, 3};
    tci_tensor x = th_tensor(F, 3, xd, col), out[1];
    ir_node *n = th_node(g, "Col2Im", 18, 3, 1);
    ck_assert_tci_ok(run_col2im(g, n, &x, 4, 2, out));
    th_assert_dims(&out[0], 3, (const int64_t[]){1, 1, 4});
    th_assert_near(out[0].data, (const float[]){1, 12, 23, 30}, 4, 0);
    th_free(out, 1);
    /* two channels of block 1, stride 2, pads (1, 1): image 3 from positions at -1, 1, 3 */
    const int64_t xd2[] = {1, 2, 3};
    x = th_tensor(F, 3, xd2, col);
    n = th_node(g, "Col2Im", 18, 3, 1);
    th_attr_ints(g, n, "strides", (const int64_t[]){2}, 1);
    th_attr_ints(g, n, "pads", (const int64_t[]){1, 1}, 2);
    ck_assert_tci_ok(run_col2im(g, n, &x, 3, 1, out));
    th_assert_dims(&out[0], 3, (const int64_t[]){1, 2, 3});
    th_assert_near(out[0].data, (const float[]){0, 2, 0, 0, 20, 0}, 6, 0);
    th_free(out, 1);
    /* errors */
    n = th_node(g, "Col2Im", 18, 3, 1);
    ck_assert_tci_error(run_col2im(g, n, &x, 5, 2, out), TCI_ERR_INVALID_MODEL,
                        "input dim 2 is 3; the blocks fit at 4 positions");
    const int64_t xd3[] = {1, 3, 3};
    const float col9[9] = {0};
    tci_tensor x3 = th_tensor(F, 3, xd3, col9);
    n = th_node(g, "Col2Im", 18, 3, 1);
    ck_assert_tci_error(run_col2im(g, n, &x3, 4, 2, out), TCI_ERR_INVALID_MODEL,
                        "input dim 1 (3) is not a multiple of the block size 2");
    n = th_node(g, "Col2Im", 18, 3, 1);
    th_attr_ints(g, n, "dilations", (const int64_t[]){1, 1}, 2);
    ck_assert_tci_error(run_col2im(g, n, &x, 4, 2, out), TCI_ERR_INVALID_MODEL,
                        "dilations has 2 entries; expected 1 for 1 spatial axes");
    n = th_node(g, "Col2Im", 18, 3, 1);
    th_attr_ints(g, n, "strides", (const int64_t[]){0}, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "strides[0] is 0; must be positive");
    n = th_node(g, "Col2Im", 18, 3, 1);
    ck_assert_tci_error(run_col2im(g, n, &x, 1, 2, out), TCI_ERR_INVALID_MODEL,
                        "block extent 2 is larger than the padded image 1");
    const int64_t d2[] = {2}, d1[] = {1};
    tci_tensor in[3] = {x, th_tensor(I64, 1, d2, (const int64_t[]){4, 4}),
                        th_tensor(I64, 1, d1, (const int64_t[]){2})};
    n = th_node(g, "Col2Im", 18, 3, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "image_shape has 2 entries but block_shape 1");
    /* before the values: the rank from image_shape's length */
    tci_tensor xs = th_shape_only(F, 3, xd), is = th_shape_only(I64, 1, d2),
               bs = th_shape_only(I64, 1, d2), o[1];
    const tci_tensor *ins[3] = {&xs, &is, &bs};
    n = th_node(g, "Col2Im", 18, 3, 1);
    ck_assert_tci_ok(th_infer(g, n, ins, o));
    th_assert_dims(&o[0], 4, (const int64_t[]){1, -1, -1, -1});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_det) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* a zero first pivot (rows swap), a singular matrix, a NaN, batched as (2, 2, 3, 3) */
    const float x[36] = {0, 1, 2, 1, 0, 3, 4, -3, 8,   /* -2 */
                         1, 2, 3, 2, 4, 6, 7, 8, 9,    /* 0: row 2 = 2 row 1 */
                         0, 0, 1, 0, NAN, 0, 1, 0, 0,  /* NaN */
                         2, 0, 0, 0, 3, 0, 0, 0, -1};  /* -6 */
    const int64_t xd[] = {2, 2, 3, 3};
    tci_tensor in = th_tensor(F, 4, xd, x), out[1];
    ir_node *n = th_node(g, "Det", 11, 1, 1);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(n->since_version, 11);
    th_assert_dims(&out[0], 2, (const int64_t[]){2, 2});
    const float *y = out[0].data;
    ck_assert(fabsf(y[0] + 2) < 1e-6f && y[1] == 0 && isnan(y[2]) && fabsf(y[3] + 6) < 1e-6f);
    th_free(out, 1);
    /* an empty matrix's determinant is 1 */
    const int64_t ed[] = {0, 0};
    in = th_tensor(F, 2, ed, x);
    n = th_node(g, "Det", 22, 1, 1);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(n->since_version, 22);
    ck_assert_int_eq(out[0].rank, 0);
    ck_assert(((float *)out[0].data)[0] == 1.0f);
    th_free(out, 1);
    /* errors */
    const int64_t d23[] = {2, 3}, d3[] = {3};
    in = th_tensor(F, 2, d23, x);
    n = th_node(g, "Det", 22, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL,
                        "matrices must be square, got 2x3");
    in = th_tensor(F, 1, d3, x);
    n = th_node(g, "Det", 22, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL, "rank >= 2");
    n = th_node(g, "Det", 22, 1, 1);
    th_attr_int(g, n, "axis", 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'axis'");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("image");
    TCase *t = tcase_create("image");
    tcase_add_test(t, test_center_crop_pad);
    tcase_add_test(t, test_col2im);
    tcase_add_test(t, test_det);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
