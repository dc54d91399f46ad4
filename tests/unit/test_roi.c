/* RoiAlign (roi.c): hand-computed values in both modes and coordinate transformations, opset 10's
 * attributes, and the errors ONNX's cases do not reach. */
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

/* X = 3y + x on a 3 x 3 map, one roi, output 1 x 1: bilinear interpolation of a linear map is
 * exact, so the avg is the value at the box's centre. */
static const float map3[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const int64_t x_dims[] = {1, 1, 3, 3}, roi_dims[] = {1, 4}, bi_dims[] = {1};

static tci_status run_roi(ir_graph *g, ir_node *n, const float *box, int64_t batch_index,
                          tci_tensor *out) {
    tci_tensor in[3] = {th_tensor(F, 4, x_dims, map3), th_tensor(F, 2, roi_dims, box),
                        th_tensor(TCI_DTYPE_INT64, 1, bi_dims, &batch_index)};
    return th_run(g, n, in, out);
}

START_TEST(test_roi_align_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float box[4] = {0, 0, 2, 2};
    /* opset 10 (no offset), 2 x 2 samples at 0.5 and 1.5: (2 + 3 + 5 + 6) / 4 */
    ir_node *n = th_node(g, "RoiAlign", 10, 3, 1);
    th_attr_int(g, n, "sampling_ratio", 2);
    ck_assert_tci_ok(run_roi(g, n, box, 0, out));
    ck_assert_int_eq(n->since_version, 10);
    th_assert_dims(&out[0], 4, (const int64_t[]){1, 1, 1, 1});
    th_assert_near(out[0].data, (const float[]){4.0f}, 1, 1e-6f);
    th_free(out, 1);
    /* adaptive (sampling_ratio 0): ceil(2 / 1) = 2 samples a side, the same points */
    n = th_node(g, "RoiAlign", 16, 3, 1);
    th_attr_string(g, n, "coordinate_transformation_mode", "output_half_pixel");
    ck_assert_tci_ok(run_roi(g, n, box, 0, out));
    th_assert_near(out[0].data, (const float[]){4.0f}, 1, 1e-6f);
    th_free(out, 1);
    /* max: ONNX's max of the weighted corners w_i * v_i, at the four samples 1, 1.25, 1.75, 2 */
    n = th_node(g, "RoiAlign", 22, 3, 1);
    th_attr_string(g, n, "coordinate_transformation_mode", "output_half_pixel");
    th_attr_string(g, n, "mode", "max");
    th_attr_int(g, n, "sampling_ratio", 2);
    ck_assert_tci_ok(run_roi(g, n, box, 0, out));
    th_assert_near(out[0].data, (const float[]){2.0f}, 1, 1e-6f);
    th_free(out, 1);
    /* half_pixel (16's default) shifts by half a pixel: this box at scale 0.5 is (0, 0, 2, 2);
     * 2 x 2 output bins, one sample each at their centres 0.5 and 1.5 */
    n = th_node(g, "RoiAlign", 16, 3, 1);
    th_attr_float(g, n, "spatial_scale", 0.5f);
    th_attr_int(g, n, "output_height", 2);
    th_attr_int(g, n, "output_width", 2);
    ck_assert_tci_ok(run_roi(g, n, (const float[]){1, 1, 5, 5}, 0, out));
    th_assert_dims(&out[0], 4, (const int64_t[]){1, 1, 2, 2});
    th_assert_near(out[0].data, (const float[]){2, 3, 5, 6}, 4, 1e-6f);
    th_free(out, 1);
    /* a box far outside the map samples nothing but zeros */
    n = th_node(g, "RoiAlign", 22, 3, 1);
    ck_assert_tci_ok(run_roi(g, n, (const float[]){10, 10, 12, 12}, 0, out));
    th_assert_near(out[0].data, (const float[]){0}, 1, 0);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_roi_align_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float box[4] = {0, 0, 2, 2};
    ir_node *n = th_node(g, "RoiAlign", 22, 3, 1);
    ck_assert_tci_error(run_roi(g, n, box, 1, out), TCI_ERR_INVALID_ARGUMENT,
                        "batch_indices[0] is 1; X has 1 images");
    n = th_node(g, "RoiAlign", 22, 3, 1);
    ck_assert_tci_error(run_roi(g, n, box, -1, out), TCI_ERR_INVALID_ARGUMENT,
                        "batch_indices[0] is -1");
    /* opset 10 has no coordinate_transformation_mode */
    n = th_node(g, "RoiAlign", 10, 3, 1);
    th_attr_string(g, n, "coordinate_transformation_mode", "half_pixel");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'coordinate_transformation_mode'");
    n = th_node(g, "RoiAlign", 16, 3, 1);
    th_attr_string(g, n, "coordinate_transformation_mode", "align_corners");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "'coordinate_transformation_mode' is 'align_corners'");
    n = th_node(g, "RoiAlign", 16, 3, 1);
    th_attr_string(g, n, "mode", "min");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'mode' is 'min'; expected 'avg' or 'max'");
    n = th_node(g, "RoiAlign", 16, 3, 1);
    th_attr_int(g, n, "sampling_ratio", -1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "'sampling_ratio' is -1");
    n = th_node(g, "RoiAlign", 16, 3, 1);
    th_attr_int(g, n, "output_width", 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "'output_height' and 'output_width' must be >= 1");
    /* shapes and types */
    const int64_t r5[] = {1, 5};
    const float box5[5] = {0};
    int64_t zero = 0;
    tci_tensor in[3] = {th_tensor(F, 4, x_dims, map3), th_tensor(F, 2, r5, box5),
                        th_tensor(TCI_DTYPE_INT64, 1, bi_dims, &zero)};
    n = th_node(g, "RoiAlign", 16, 3, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "rois must be (num_rois, 4)");
    in[1] = th_tensor(F, 2, roi_dims, box);
    const int64_t bi2[] = {2};
    const int64_t two[2] = {0, 0};
    in[2] = th_tensor(TCI_DTYPE_INT64, 1, bi2, two);
    n = th_node(g, "RoiAlign", 16, 3, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "batch_indices has 2 entries but rois 1 rows");
    int32_t zero32 = 0;
    in[2] = th_tensor(TCI_DTYPE_INT32, 1, bi_dims, &zero32);
    n = th_node(g, "RoiAlign", 16, 3, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "input 2");
    in[2] = th_tensor(TCI_DTYPE_INT64, 1, bi_dims, &zero);
    const float nan_box[4] = {0, 0, 2, __builtin_nanf("")};
    in[1] = th_tensor(F, 2, roi_dims, nan_box);
    n = th_node(g, "RoiAlign", 16, 3, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "a box coordinate not finite");
    ir_graph_destroy(g);
}
END_TEST

/* The GPU planner refuses it naming the node (no GPU path: CPU reference only). */
START_TEST(test_roi_align_gpu_plan) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = th_named(g, "x", F, 4, (const int64_t[]){1, 8, 6, 6}, NULL);
    ir_tensor *r = th_named(g, "r", F, 2, (const int64_t[]){3, 4}, NULL);
    ir_tensor *b = th_named(g, "b", TCI_DTYPE_INT64, 1, (const int64_t[]){3}, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, (ir_tensor *[]){x, r, b}, 3, &y, 1);
    th_node_io(g, "roi", "RoiAlign", 16, (ir_tensor *[]){x, r, b}, 3, (ir_tensor *[]){y}, 1);
    plan *p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                        "node 'roi' (RoiAlign): op RoiAlign has no GPU path yet");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("roi");
    TCase *t = tcase_create("roi");
    tcase_add_test(t, test_roi_align_values);
    tcase_add_test(t, test_roi_align_errors);
    tcase_add_test(t, test_roi_align_gpu_plan);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
