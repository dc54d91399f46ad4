/* pass_token_image_views (tokens.c): CoaT's convolutional position encoding, tokens (B, H W, C)
 * -> Transpose(0, 2, 1) -> Reshape(B, C, H, W) -> depthwise Conv + the image -> Reshape(B, C,
 * H W) -> Transpose(0, 2, 1): the rewritten graph computes the same on the CPU reference, and
 * its GPU plan at C = 16 is the convolution alone (both ends NHWC8 views, no copy); at C = 12
 * the views do not apply but the values still match. */
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"

enum { B = 2, H = 3, W = 5 };

static void check(int64_t c, int want_steps) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t n = H * W, td[3] = {B, n, c}, img[4] = {B, c, H, W}, flat[3] = {B, c, n},
                  wd[4] = {c, 1, 3, 3}, four = 4, three = 3;
    float *w = malloc(sizeof(float) * (size_t)(c * 9)), *b = malloc(sizeof(float) * (size_t)c);
    float *x0 = malloc(sizeof(float) * (size_t)(B * n * c));
    th_fill(w, c * 9, 1);
    th_fill(b, c, 2);
    th_fill(x0, B * n * c, 3);
    const int64_t swap[3] = {0, 2, 1};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, td, NULL);
    ir_tensor *img_shape = th_named(g, "img_shape", TCI_DTYPE_INT64, 1, &four, img);
    ir_tensor *flat_shape = th_named(g, "flat_shape", TCI_DTYPE_INT64, 1, &three, flat);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    ir_tensor *bt = th_named(g, "b", TCI_DTYPE_FLOAT, 1, &c, b);
    ir_tensor *t1 = th_act(g, "t1"), *feat = th_act(g, "feat"), *conv = th_act(g, "conv"),
              *sum = th_act(g, "sum"), *f2 = th_act(g, "f2"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *n1 = th_node_io(g, "cpe/Transpose", "Transpose", 17, &x, 1, &t1, 1);
    th_attr_ints(g, n1, "perm", swap, 3);
    th_node_io(g, "cpe/Reshape", "Reshape", 17, (ir_tensor *[]){t1, img_shape}, 2, &feat, 1);
    ir_node *cv = th_node_io(g, "cpe/proj/Conv", "Conv", 17, (ir_tensor *[]){feat, wt, bt}, 3,
                             &conv, 1);
    th_attr_int(g, cv, "group", c);
    th_attr_ints(g, cv, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    th_node_io(g, "cpe/Add", "Add", 17, (ir_tensor *[]){conv, feat}, 2, &sum, 1);
    th_node_io(g, "cpe/Reshape_1", "Reshape", 17, (ir_tensor *[]){sum, flat_shape}, 2, &f2, 1);
    ir_node *n2 = th_node_io(g, "cpe/Transpose_1", "Transpose", 17, &f2, 1, &y, 1);
    th_attr_ints(g, n2, "perm", swap, 3);
    ck_assert_tci_ok(pass_optimize(g));
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, td, x0);
    float *want = th_cpu_output(g, &in, 1, 0);
    ck_assert_tci_ok(pass_token_image_views(g));
    float *got = th_cpu_output(g, &in, 1, 0);
    th_assert_near(got, want, (size_t)(B * n * c), 0.0f); /* the same arithmetic, bit for bit */
    int transposes = 0;
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->op_type, "Transpose") == 0) {
            transposes++;
            const int64_t *perm;
            size_t count;
            ck_assert_tci_ok(ir_attr_ints(g->nodes[i], "perm", &perm, &count));
            ck_assert_uint_eq(count, 4);
        }
    ck_assert_int_eq(transposes, 2); /* (0, 3, 1, 2) and (0, 2, 3, 1) now */
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, want_steps);
    plan_destroy(p);
    free(w), free(b), free(x0), free(want), free(got);
    ir_graph_destroy(g);
}

START_TEST(test_views_at_16_channels) { check(16, 1); }
END_TEST

START_TEST(test_values_at_12_channels) {
    /* 12 channels pad to 16 in NHWC8: the Transposes stay copies (with layout conversions) */
    check(12, 5);
}
END_TEST

int main(void) {
    Suite *s = suite_create("token_views");
    TCase *t = tcase_create("token_views");
    tcase_add_test(t, test_views_at_16_channels);
    tcase_add_test(t, test_values_at_12_channels);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
