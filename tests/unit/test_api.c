/* The public API end to end on the CPU backend: engines, contexts, outputs, marked outputs, the
 * plan-only GPU report, and argument errors. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

#define DEMO_MODEL TCI_TEST_DATA "/../../models/demo/tiny_cnn.onnx"
#define DEMO_INPUT TCI_TEST_DATA "/../../models/demo/input.npy"

static tci_engine *demo_engine(int mark_all) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.mark_all_outputs = mark_all;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    return e;
}

START_TEST(test_run_demo) {
    tci_engine *e = demo_engine(0);
    ck_assert_uint_eq(tci_engine_input_count(e), 1);
    ck_assert_uint_eq(tci_engine_output_count(e), 1);
    tci_tensor_info info;
    ck_assert_tci_ok(tci_engine_input_info(e, 0, &info));
    ck_assert_int_eq(info.rank, 4);
    tci_tensor in;
    ck_assert_tci_ok(tci_tensor_read_file(DEMO_INPUT, &in));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    tci_tensor out;
    ck_assert_tci_error(tci_context_output(c, 0, &out), TCI_ERR_INVALID_ARGUMENT,
                        "no run has produced outputs yet");
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    ck_assert_tci_ok(tci_context_output(c, 0, &out));
    ck_assert_int_eq(out.rank, 2);
    ck_assert_int_eq(out.dims[1], 10);
    double sum = 0;
    for (int i = 0; i < 10; i++) sum += ((float *)out.data)[i];
    ck_assert_double_eq_tol(sum, 1.0, 1e-5); /* the demo ends in Softmax */
    tci_nonfinite_report nf;
    ck_assert_tci_ok(tci_context_nonfinite(c, &nf));
    ck_assert_uint_eq(nf.count, 0);
    /* a NaN in the input reaches all 10 outputs through the Softmax: reported, no layer named
     * (the CPU reference does not locate) */
    ((float *)in.data)[0] = NAN;
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    ck_assert_tci_ok(tci_context_nonfinite(c, &nf));
    ck_assert_uint_eq(nf.count, 10);
    ck_assert_uint_eq(nf.output_index, 0);
    ck_assert_int_eq(nf.found, 0);
    ck_assert_int_eq(nf.input_index, -1);
    ck_assert_tci_error(tci_context_nonfinite(NULL, &nf), TCI_ERR_INVALID_ARGUMENT, "NULL");
    /* the CPU benchmark re-runs the kept inputs, also after the caller freed them */
    tci_tensor_release(&in);
    float ms[3];
    ck_assert_tci_ok(tci_context_benchmark(c, 3, 1, ms));
    ck_assert(ms[0] >= 0);
    ck_assert_tci_error(tci_context_output(c, 5, &out), TCI_ERR_INVALID_ARGUMENT, "no output 5");
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

START_TEST(test_mark_all_outputs) {
    tci_engine *plain = demo_engine(0), *marked = demo_engine(1);
    ck_assert_uint_gt(tci_engine_output_count(marked), tci_engine_output_count(plain) + 2);
    tci_tensor_info first, own;
    ck_assert_tci_ok(tci_engine_output_info(marked, 0, &first));
    ck_assert_tci_ok(tci_engine_output_info(plain, 0, &own));
    ck_assert_str_eq(first.name, own.name); /* the model's own outputs come first */
    tci_tensor in;
    ck_assert_tci_ok(tci_tensor_read_file(DEMO_INPUT, &in));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(marked, &c));
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    for (size_t i = 0; i < tci_engine_output_count(marked); i++) {
        tci_tensor t;
        ck_assert_tci_ok(tci_context_output(c, i, &t));
        ck_assert_ptr_nonnull(t.data);
    }
    tci_tensor_release(&in);
    tci_context_destroy(c);
    tci_engine_destroy(plain);
    tci_engine_destroy(marked);
}
END_TEST

START_TEST(test_plan_only_report) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    tci_gpu_report r;
    ck_assert_tci_ok(tci_engine_gpu_report(e, &r));
    ck_assert_uint_gt(r.num_steps, 0);
    ck_assert_uint_gt(r.weight_bytes, 0);
    ck_assert_uint_le(r.arena_bytes, r.naive_activation_bytes);
    tci_context *c = NULL;
    ck_assert_tci_error(tci_context_create(e, &c), TCI_ERR_INVALID_ARGUMENT,
                        "built with plan_only");
    tci_engine_destroy(e);
    e = demo_engine(0);
    ck_assert_tci_error(tci_engine_gpu_report(e, &r), TCI_ERR_INVALID_ARGUMENT, "not a GPU engine");
    tci_engine_destroy(e);
}
END_TEST

START_TEST(test_argument_errors) {
    tci_engine *e = (tci_engine *)0x1;
    ck_assert_tci_error(tci_engine_create_from_file(NULL, NULL, &e), TCI_ERR_INVALID_ARGUMENT,
                        "path is NULL");
    ck_assert_ptr_null(e);
    ck_assert_tci_error(tci_engine_create_from_file("/nonexistent/model.onnx", NULL, &e),
                        TCI_ERR_IO, "/nonexistent/model.onnx");
    tci_engine_destroy(NULL);
    tci_context_destroy(NULL);
    e = demo_engine(0);
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    float data[3] = {0};
    tci_tensor wrong = {.dtype = TCI_DTYPE_FLOAT, .rank = 1, .dims = {3}, .data = data};
    ck_assert_tci_error(tci_context_run(c, &wrong, 1), TCI_ERR_INVALID_ARGUMENT, "has shape 3");
    ck_assert_tci_error(tci_context_run(c, &wrong, 2), TCI_ERR_INVALID_ARGUMENT,
                        "got 2 inputs, the model has 1");
    tci_shape_override bad = {.name = "nope", .rank = 1, .dims = {1}};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.shapes = &bad;
    o.num_shapes = 1;
    tci_engine *e2 = NULL;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e2),
                        TCI_ERR_INVALID_ARGUMENT, "'nope', which is not a model input");
    int jump, over;
    const double errors[4] = {1e-4, 2e-4, 5e-2, 6e-2};
    ck_assert_tci_ok(tci_find_error_jump(errors, 4, 1e-2, 10.0, &jump, &over));
    ck_assert_int_eq(jump, 2);
    ck_assert_int_eq(over, 2);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

int main(void) {
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_run_demo);
    tcase_add_test(tc, test_mark_all_outputs);
    tcase_add_test(tc, test_plan_only_report);
    tcase_add_test(tc, test_argument_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
