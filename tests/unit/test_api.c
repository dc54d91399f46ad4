/* The public API end to end on the CPU backend: engines, contexts, outputs, marked outputs, the
 * plan-only GPU report, argument errors; versioned structs, inputs and outputs by name, caller
 * buffers, the log callback, CPU threads, engines from memory. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DEMO_MODEL TCI_TEST_DATA "/../../models/demo/tiny_cnn.onnx"
#define DEMO_INPUT TCI_TEST_DATA "/../../models/demo/input.npy"
#define TWO_INPUTS TCI_TEST_DATA "/loader/two_inputs.onnx"
#define TWO_UNSUPPORTED TCI_TEST_DATA "/loader/two_unsupported.onnx"

#define ck_assert_str_contains(text, part)                                                      \
    ck_assert_msg(strstr((text), (part)) != NULL, "'%s' lacks '%s'", (text), (part))

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
    tci_tensor_info_init(&info);
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
    tci_nonfinite_report_init(&nf);
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
    tci_tensor_info_init(&first);
    tci_tensor_info_init(&own);
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
    tci_gpu_report_init(&r);
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

/* tci_engine_options.device: negative is refused on every backend, nonzero with the CPU
 * backend too (it would be ignored); plan_only uses no device and does not check it; an engine
 * file may be loaded on any device (the option passes the load's option check); device names
 * out of range name the count. */
START_TEST(test_device_option) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    ck_assert_int_eq(o.device, 0);
    tci_engine *e = (tci_engine *)0x1;
    o.device = -1;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.device is -1");
    ck_assert_ptr_null(e);
    o.backend = TCI_BACKEND_GPU;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "a CUDA device index (0 or more) expected");
    ck_assert_tci_error(tci_engine_load("/nonexistent/model.tci", &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "tci_engine_options.device is -1");
    o.backend = TCI_BACKEND_CPU;
    o.device = 1;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.device is 1, but the backend is TCI_BACKEND_CPU");
    ck_assert_ptr_null(e);
    /* an engine file's options may name a device: the next failure is the missing file */
    ck_assert_tci_error(tci_engine_load("/nonexistent/model.tci", &o, &e), TCI_ERR_IO,
                        "/nonexistent/model.tci");
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    o.device = 7;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    tci_gpu_report r;
    tci_gpu_report_init(&r);
    ck_assert_tci_ok(tci_engine_gpu_report(e, &r));
    ck_assert_uint_gt(r.num_steps, 0);
    tci_engine_destroy(e);
    e = NULL;

    int count = tci_gpu_count(NULL, 0);
    char name[64] = "unchanged", want[96];
    snprintf(want, sizeof want, "CUDA device %d does not exist", count);
    ck_assert_tci_error(tci_gpu_name(count, name, sizeof name), TCI_ERR_NO_DEVICE, want);
    ck_assert_str_eq(name, "");
    ck_assert_tci_error(tci_gpu_name(-1, name, sizeof name), TCI_ERR_NO_DEVICE,
                        "CUDA device -1 does not exist");
    ck_assert_tci_error(tci_gpu_name(0, NULL, 0), TCI_ERR_INVALID_ARGUMENT, "name is NULL");
    for (int i = 0; i < count; i++) {
        ck_assert_tci_ok(tci_gpu_name(i, name, sizeof name));
        ck_assert_uint_gt(strlen(name), 0);
    }
    if (count > 0) {
        /* a device past the last: refused before any work, naming the devices there are */
        o.plan_only = 0;
        o.device = count;
        ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_NO_DEVICE,
                            "tci_engine_options.device");
        ck_assert_str_contains(tci_last_error(), want);
        snprintf(want, sizeof want, "there %s %d", count == 1 ? "is" : "are", count);
        ck_assert_str_contains(tci_last_error(), want);
        ck_assert_ptr_null(e);
    }
}
END_TEST

/* A struct_size below the first versioned size is refused naming the struct; a larger one (a
 * caller built against a newer header) is accepted and nothing past the known fields is
 * written. */
/* tci_compare against a baseline 1 off in element 0: a caller built before the bound fields
 * gets none of them written (and exact equality is not imposed on it), a current one gets the
 * failures and the worst element. */
static tci_status compare_versions(const tci_tensor *out) {
    int64_t n = tci_tensor_count(out);
    ck_assert_int_gt(n, 1);
    float *shifted = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(shifted);
    memcpy(shifted, out->data, (size_t)n * sizeof(float));
    shifted[0] += 1.0f;
    tci_tensor base = *out;
    base.data = shifted;
    struct {
        tci_compare_result r;
        unsigned char later[8];
    } old;
    memset(&old, 0xcd, sizeof old);
    old.r.struct_size = offsetof(tci_compare_result, top5_agree) + sizeof(size_t);
    tci_status st = tci_compare(out, &base, &old.r);
    const unsigned char *tail = (const unsigned char *)&old.r.atol;
    for (size_t i = 0; st == TCI_OK && i < sizeof old - offsetof(tci_compare_result, atol); i++)
        ck_assert_uint_eq(tail[i], 0xcd);
    tci_compare_result cr;
    tci_compare_result_init(&cr);
    cr.atol = 0.5;
    cr.rtol = 0;
    if (st == TCI_OK) st = tci_compare(out, &base, &cr);
    ck_assert_uint_eq(cr.bound_failures, 1);
    ck_assert_uint_eq(cr.worst_index, 0);
    ck_assert_double_eq(cr.worst_baseline, (double)shifted[0]);
    ck_assert_double_eq(cr.worst_test, (double)((const float *)out->data)[0]);
    ck_assert_double_eq(cr.atol, 0.5);
    free(shifted);
    return st;
}

START_TEST(test_struct_size) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    ck_assert_uint_eq(o.struct_size, sizeof o);
    ck_assert_int_eq(o.log_level, TCI_LOG_WARNING);
    tci_engine *e = NULL;
    o.struct_size = 0;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.struct_size is 0");
    ck_assert_str_contains(tci_last_error(), "tci_engine_options_init");
    o.struct_size = offsetof(tci_engine_options, timing_cache);
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.struct_size");
    ck_assert_tci_error(tci_engine_load("x.tci", &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.struct_size");
    ck_assert_ptr_null(e);
    struct {
        tci_engine_options o;
        unsigned char later[32];
    } newer;
    memset(&newer, 0xab, sizeof newer);
    tci_engine_options_init(&newer.o);
    newer.o.struct_size = sizeof newer;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &newer.o, &e));

    tci_tensor_info info;
    memset(&info, 0, sizeof info);
    ck_assert_tci_error(tci_engine_input_info(e, 0, &info), TCI_ERR_INVALID_ARGUMENT,
                        "tci_tensor_info.struct_size is 0");
    ck_assert_tci_error(tci_engine_output_info(e, 0, &info), TCI_ERR_INVALID_ARGUMENT,
                        "tci_tensor_info_init");
    struct {
        tci_tensor_info info;
        unsigned char later[16];
    } big;
    memset(&big, 0xcd, sizeof big);
    tci_tensor_info_init(&big.info);
    big.info.struct_size = sizeof big;
    ck_assert_tci_ok(tci_engine_input_info(e, 0, &big.info));
    ck_assert_uint_eq(big.info.struct_size, sizeof big);
    ck_assert_int_eq(big.info.rank, 4);
    for (size_t i = 0; i < sizeof big.later; i++) ck_assert_uint_eq(big.later[i], 0xcd);

    tci_engine_stats stats;
    memset(&stats, 0, sizeof stats);
    ck_assert_tci_error(tci_engine_stats_get(e, &stats), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_stats.struct_size");
    tci_engine_stats_init(&stats);
    ck_assert_tci_ok(tci_engine_stats_get(e, &stats));
    ck_assert_uint_gt(stats.num_nodes, 0);
    ck_assert_uint_eq(stats.struct_size, sizeof stats);

    tci_gpu_report r;
    memset(&r, 0, sizeof r);
    ck_assert_tci_error(tci_engine_gpu_report(e, &r), TCI_ERR_INVALID_ARGUMENT,
                        "tci_gpu_report.struct_size");
    tci_device_format f;
    memset(&f, 0, sizeof f);
    ck_assert_tci_error(tci_engine_device_format(e, 0, 0, &f), TCI_ERR_INVALID_ARGUMENT,
                        "tci_device_format.struct_size");

    tci_tensor in;
    ck_assert_tci_ok(tci_tensor_read_file(DEMO_INPUT, &in));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    tci_nonfinite_report nf;
    memset(&nf, 0, sizeof nf);
    ck_assert_tci_error(tci_context_nonfinite(c, &nf), TCI_ERR_INVALID_ARGUMENT,
                        "tci_nonfinite_report.struct_size");
    tci_nonfinite_report_init(&nf);
    ck_assert_int_eq(nf.input_index, -1);
    ck_assert_tci_ok(tci_context_nonfinite(c, &nf));
    ck_assert_uint_eq(nf.count, 0);

    tci_tensor out;
    ck_assert_tci_ok(tci_context_output(c, 0, &out));
    tci_compare_result cr;
    memset(&cr, 0, sizeof cr);
    ck_assert_tci_error(tci_compare(&out, &out, &cr), TCI_ERR_INVALID_ARGUMENT,
                        "tci_compare_result.struct_size");
    tci_compare_result_init(&cr);
    ck_assert_tci_ok(tci_compare(&out, &out, &cr));
    ck_assert_double_eq(cr.max_abs, 0.0);
    ck_assert_uint_eq(cr.rows, 1);
    ck_assert_uint_eq(cr.bound_failures, 0);
    cr.atol = -1;
    ck_assert_tci_error(tci_compare(&out, &out, &cr), TCI_ERR_INVALID_ARGUMENT,
                        "tci_compare_result.atol");
    ck_assert_tci_ok(compare_versions(&out));
    tci_tensor_release(&in);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

static tci_engine *two_inputs_engine(void) {
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(TWO_INPUTS, NULL, &e));
    return e;
}

START_TEST(test_index_by_name) {
    tci_engine *e = two_inputs_engine();
    size_t i = 99;
    ck_assert_tci_ok(tci_engine_input_index(e, "a", &i));
    ck_assert_uint_eq(i, 0);
    ck_assert_tci_ok(tci_engine_input_index(e, "b", &i));
    ck_assert_uint_eq(i, 1);
    ck_assert_tci_ok(tci_engine_output_index(e, "sum", &i));
    ck_assert_uint_eq(i, 1);
    ck_assert_tci_error(tci_engine_input_index(e, "c", &i), TCI_ERR_INVALID_ARGUMENT,
                        "the engine has no input named 'c'; its inputs: 'a', 'b'");
    ck_assert_tci_error(tci_engine_output_index(e, "a", &i), TCI_ERR_INVALID_ARGUMENT,
                        "its outputs: 'diff', 'sum'");
    ck_assert_tci_error(tci_engine_input_index(e, NULL, &i), TCI_ERR_INVALID_ARGUMENT, "'a'");
    ck_assert_tci_error(tci_engine_input_index(e, "a", NULL), TCI_ERR_INVALID_ARGUMENT,
                        "out_index is NULL");
    ck_assert_tci_error(tci_engine_input_index(NULL, "a", &i), TCI_ERR_INVALID_ARGUMENT,
                        "engine is NULL");
    tci_engine_destroy(e);
}
END_TEST

/* Inputs bound by name in any order give what the positional run gives; wrong, repeated and
 * missing names are errors that say which. */
START_TEST(test_run_named) {
    tci_engine *e = two_inputs_engine();
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {10, 20, 30, 40, 50, 60};
    tci_tensor a = {"a", TCI_DTYPE_FLOAT, 2, {2, 3}, av}, b = {"b", TCI_DTYPE_FLOAT, 2, {2, 3}, bv};
    tci_tensor reversed[2] = {b, a};
    const char *names[2] = {"b", "a"};
    ck_assert_tci_ok(tci_context_run_named(c, names, reversed, 2));
    float diff[6], sum[6];
    ck_assert_tci_ok(tci_context_output_into(c, 0, diff, sizeof diff));
    ck_assert_tci_ok(tci_context_output_into(c, 1, sum, sizeof sum));
    for (int i = 0; i < 6; i++) {
        ck_assert_float_eq(diff[i], av[i] - bv[i]);
        ck_assert_float_eq(sum[i], av[i] + bv[i]);
    }
    /* names NULL: the tensors' own names */
    reversed[0].name = "b";
    reversed[1].name = "a";
    memset(diff, 0, sizeof diff);
    ck_assert_tci_ok(tci_context_run_named(c, NULL, reversed, 2));
    ck_assert_tci_ok(tci_context_output_into(c, 0, diff, sizeof diff));
    ck_assert_float_eq(diff[5], -54);
    /* positional: the same numbers */
    tci_tensor ordered[2] = {a, b};
    ck_assert_tci_ok(tci_context_run(c, ordered, 2));
    tci_tensor view;
    ck_assert_tci_ok(tci_context_output(c, 0, &view));
    ck_assert_int_eq(memcmp(view.data, diff, sizeof diff), 0);

    const char *wrong[2] = {"b", "x"};
    ck_assert_tci_error(tci_context_run_named(c, wrong, reversed, 2), TCI_ERR_INVALID_ARGUMENT,
                        "no input named 'x'; its inputs: 'a', 'b'");
    const char *twice[2] = {"a", "a"};
    ck_assert_tci_error(tci_context_run_named(c, twice, reversed, 2), TCI_ERR_INVALID_ARGUMENT,
                        "input 'a' is given twice");
    ck_assert_tci_error(tci_context_run_named(c, names, reversed, 1), TCI_ERR_INVALID_ARGUMENT,
                        "no tensor given for input 'a' (1 of the engine's 2 inputs given)");
    ck_assert_tci_error(tci_context_run_named(c, names, NULL, 2), TCI_ERR_INVALID_ARGUMENT,
                        "inputs is NULL");
    /* inputs in device memory: GPU engines only (nothing is read) */
    ck_assert_tci_error(tci_context_run_device_inputs(c, ordered, 2), TCI_ERR_INVALID_ARGUMENT,
                        "inputs in device memory need a GPU engine; this context runs on the CPU");
    ck_assert_tci_error(tci_context_run_device_inputs(NULL, ordered, 2), TCI_ERR_INVALID_ARGUMENT,
                        "context is NULL");
    ck_assert_tci_error(tci_context_run_device_inputs(c, NULL, 2), TCI_ERR_INVALID_ARGUMENT,
                        "inputs is NULL");
    /* outputs on the device: GPU engines only */
    ck_assert_tci_error(tci_context_output_device(c, 0, &view), TCI_ERR_INVALID_ARGUMENT,
                        "outputs on the device belong to GPU engines; this context runs on the "
                        "CPU");
    ck_assert_tci_error(tci_context_output_device(c, 2, &view), TCI_ERR_INVALID_ARGUMENT,
                        "no output 2");
    ck_assert_tci_error(tci_context_output_device(c, 0, NULL), TCI_ERR_INVALID_ARGUMENT,
                        "NULL argument");
    /* the outputs of the last good run are still there */
    ck_assert_tci_ok(tci_context_output(c, 0, &view));
    ck_assert_int_eq(memcmp(view.data, diff, sizeof diff), 0);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

START_TEST(test_output_into) {
    tci_engine *e = demo_engine(0);
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    float probs[12];
    ck_assert_tci_error(tci_context_output_into(c, 0, probs, sizeof probs),
                        TCI_ERR_INVALID_ARGUMENT, "no run has produced outputs yet");
    tci_tensor in;
    ck_assert_tci_ok(tci_tensor_read_file(DEMO_INPUT, &in));
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    for (int i = 0; i < 12; i++) probs[i] = -1;
    ck_assert_tci_ok(tci_context_output_into(c, 0, probs, sizeof probs)); /* larger: fine */
    tci_tensor out;
    ck_assert_tci_ok(tci_context_output(c, 0, &out));
    ck_assert_int_eq(memcmp(probs, out.data, 10 * sizeof(float)), 0);
    ck_assert_float_eq(probs[10], -1); /* nothing past the output */
    ck_assert_tci_error(tci_context_output_into(c, 0, probs, 39), TCI_ERR_INVALID_ARGUMENT,
                        "(float, 10 elements) needs 40 bytes; the buffer has 39");
    ck_assert_tci_error(tci_context_output_into(c, 0, NULL, 40), TCI_ERR_INVALID_ARGUMENT,
                        "host_buffer is NULL");
    ck_assert_tci_error(tci_context_output_into(c, 1, probs, 40), TCI_ERR_INVALID_ARGUMENT,
                        "no output 1");
    tci_tensor_release(&in);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

typedef struct log_record {
    int count[4];
    char last[4][512];
} log_record;

static void record_log(tci_log_level level, const char *message, void *user) {
    log_record *r = user;
    ck_assert_int_ge(level, TCI_LOG_ERROR);
    ck_assert_int_le(level, TCI_LOG_DEBUG);
    r->count[level]++;
    snprintf(r->last[level], sizeof r->last[level], "%s", message);
}

typedef struct progress_record {
    int calls, stages, finished;
    char stage[64];
    size_t done, total;
} progress_record;

/* Asserts the contract of tci_progress_fn: a stage starts at 0, done never decreases and never
 * passes total, a new stage starts only once the previous one reached its total. */
static void record_progress(const char *stage, size_t done, size_t total, void *user) {
    progress_record *r = user;
    ck_assert_ptr_nonnull(stage);
    ck_assert_uint_le(done, total);
    ck_assert_uint_gt(total, 0);
    if (r->calls == 0 || strcmp(stage, r->stage) != 0) {
        ck_assert_int_eq(r->finished, r->stages);
        ck_assert_uint_eq(done, 0);
        snprintf(r->stage, sizeof r->stage, "%s", stage);
        r->stages++;
    } else {
        ck_assert_uint_ge(done, r->done);
        ck_assert_uint_eq(total, r->total);
    }
    if (done == total) r->finished++;
    r->done = done;
    r->total = total;
    r->calls++;
}

/* A CPU build reports its progress through the options' callback, and nothing without one. */
START_TEST(test_progress_callback) {
    progress_record r;
    memset(&r, 0, sizeof r);
    tci_engine_options o;
    tci_engine_options_init(&o);
    ck_assert_ptr_null(o.progress_fn);
    o.progress_fn = record_progress;
    o.progress_user = &r;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    ck_assert_int_ge(r.calls, 2);
    ck_assert_int_ge(r.stages, 1);
    ck_assert_int_eq(r.finished, r.stages); /* every stage reached its total */
    ck_assert_str_eq(r.stage, "optimizing graph");
    tci_engine_destroy(e);
    /* an older caller's options end before the progress fields: they are not read */
    struct {
        tci_engine_options o;
        unsigned char later[16];
    } old;
    memset(&old, 0, sizeof old);
    tci_engine_options_init(&old.o);
    old.o.progress_fn = record_progress;
    old.o.progress_user = &r;
    old.o.struct_size = offsetof(tci_engine_options, progress_fn);
    int calls = r.calls;
    e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &old.o, &e));
    ck_assert_int_eq(r.calls, calls);
    tci_engine_destroy(e);
}
END_TEST

/* The log callback gets the engine's messages at and above its level; nothing else is written
 * (the library prints nothing: scripts/check_layers.py). */
START_TEST(test_log_callback) {
    log_record r;
    memset(&r, 0, sizeof r);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.log_fn = record_log;
    o.log_user = &r;
    o.log_level = TCI_LOG_INFO;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    ck_assert_int_ge(r.count[TCI_LOG_INFO], 2);
    ck_assert_str_contains(r.last[TCI_LOG_INFO], "after optimisation; CPU reference backend");
    ck_assert_int_eq(r.count[TCI_LOG_DEBUG], 0);
    ck_assert_int_eq(r.count[TCI_LOG_WARNING] + r.count[TCI_LOG_ERROR], 0);
    /* failures are logged at TCI_LOG_ERROR with tci_last_error()'s text */
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    float data[3] = {0};
    tci_tensor wrong = {.dtype = TCI_DTYPE_FLOAT, .rank = 1, .dims = {3}, .data = data};
    ck_assert_tci_error(tci_context_run(c, &wrong, 1), TCI_ERR_INVALID_ARGUMENT, "has shape 3");
    ck_assert_int_eq(r.count[TCI_LOG_ERROR], 1);
    ck_assert_str_eq(r.last[TCI_LOG_ERROR], tci_last_error());
    /* NaN in the outputs: a warning naming the output */
    tci_tensor in;
    ck_assert_tci_ok(tci_tensor_read_file(DEMO_INPUT, &in));
    ((float *)in.data)[0] = NAN;
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    tci_nonfinite_report nf;
    tci_nonfinite_report_init(&nf);
    ck_assert_tci_ok(tci_context_nonfinite(c, &nf));
    ck_assert_int_eq(r.count[TCI_LOG_WARNING], 1);
    ck_assert_str_contains(r.last[TCI_LOG_WARNING], "the outputs hold 10 NaN/Inf values");
    tci_tensor_release(&in);
    tci_context_destroy(c);
    tci_engine_destroy(e);

    /* at TCI_LOG_ERROR only failures come; a failed build is logged too */
    memset(&r, 0, sizeof r);
    o.log_level = TCI_LOG_ERROR;
    ck_assert_tci_error(tci_engine_create_from_file("/nonexistent/m.onnx", &o, &e), TCI_ERR_IO,
                        "/nonexistent/m.onnx");
    ck_assert_int_eq(r.count[TCI_LOG_ERROR], 1);
    ck_assert_str_eq(r.last[TCI_LOG_ERROR], tci_last_error());
    ck_assert_int_eq(r.count[TCI_LOG_INFO], 0);
    o.log_level = (tci_log_level)7;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.log_level is 7");
}
END_TEST

static void demo_output(tci_engine *e, float *out10) {
    tci_tensor in;
    ck_assert_tci_ok(tci_tensor_read_file(DEMO_INPUT, &in));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    ck_assert_tci_ok(tci_context_output_into(c, 0, out10, 10 * sizeof(float)));
    tci_tensor_release(&in);
    tci_context_destroy(c);
}

/* cpu_threads: a count gives the same bits every time, another count the same result within
 * rounding, and 0 goes back to OpenBLAS's default after an engine set one; an engine from memory
 * is the one from the file. */
START_TEST(test_cpu_threads_and_memory) {
    float ref[10], got[10], first[10];
    tci_engine *e = demo_engine(0);
    demo_output(e, ref);
    tci_engine_destroy(e);
    tci_engine_options o;
    tci_engine_options_init(&o);
    for (int threads = 1; threads <= 3; threads++) {
        o.cpu_threads = threads;
        ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
        demo_output(e, first);
        demo_output(e, got);
        ck_assert_int_eq(memcmp(first, got, sizeof got), 0);
        for (int i = 0; i < 10; i++) ck_assert_float_eq_tol(got[i], ref[i], 1e-6f);
        tci_engine_destroy(e);
    }
    e = demo_engine(0);
    demo_output(e, got);
    ck_assert_int_eq(memcmp(ref, got, sizeof ref), 0);
    tci_engine_destroy(e);
    o.cpu_threads = -1;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "tci_engine_options.cpu_threads is -1");

    FILE *f = fopen(DEMO_MODEL, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *bytes = malloc((size_t)size);
    ck_assert_int_eq(fread(bytes, 1, (size_t)size, f), size);
    fclose(f);
    o.cpu_threads = 0;
    ck_assert_tci_ok(tci_engine_create_from_memory(bytes, (size_t)size, NULL, &o, &e));
    free(bytes); /* not needed after the call */
    demo_output(e, got);
    ck_assert_int_eq(memcmp(ref, got, sizeof ref), 0);
    tci_engine_destroy(e);
}
END_TEST

/* Every unsupported node is named at once; messages speak of API options, not CLI flags. */
START_TEST(test_messages) {
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_file(TWO_UNSUPPORTED, NULL, &e),
                        TCI_ERR_UNSUPPORTED, "2 nodes use what is not supported");
    ck_assert_str_contains(tci_last_error(), "node 'first' (NoSuchOpA)");
    ck_assert_str_contains(tci_last_error(), "node 'second' (NoSuchOpB)");
    ck_assert_str_contains(tci_last_error(), "tci_list_ops lists the supported ops");
    ck_assert_ptr_null(strstr(tci_last_error(), "--"));
    if (tci_gpu_count(NULL, 0) == 0) {
        tci_engine_options o;
        tci_engine_options_init(&o);
        o.backend = TCI_BACKEND_GPU;
        ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_NO_DEVICE,
                            "TCI_BACKEND_CPU");
        ck_assert_str_contains(tci_last_error(), "tci_engine_options.backend");
        ck_assert_ptr_null(strstr(tci_last_error(), "--"));
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_run_demo);
    tcase_add_test(tc, test_mark_all_outputs);
    tcase_add_test(tc, test_plan_only_report);
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_struct_size);
    tcase_add_test(tc, test_index_by_name);
    tcase_add_test(tc, test_run_named);
    tcase_add_test(tc, test_output_into);
    tcase_add_test(tc, test_log_callback);
    tcase_add_test(tc, test_progress_callback);
    tcase_add_test(tc, test_cpu_threads_and_memory);
    tcase_add_test(tc, test_messages);
    tcase_add_test(tc, test_device_option);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
