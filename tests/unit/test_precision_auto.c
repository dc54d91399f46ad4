/* TCI_PRECISION_AUTO without a GPU: the decision each round makes, driven over synthetic models
 * (which layers overflow fp16, which would still overflow in fp32) to convergence or to its
 * errors; the accuracy target's choice on synthetic per-layer errors; the options it refuses;
 * tci_engine_fp32_layers and tci_engine_auto_error. The search on real engines runs on
 * the GPU (tests/models/test_cli.py, the "cli overflow" part of scripts/gpu_suite.sh). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/precision_auto.h"
#include "harness.h"

#define DEMO_MODEL TCI_TEST_DATA "/../../models/demo/tiny_cnn.onnx"

static tci_nonfinite_report overflow_at(const char *layer, const char *op_type) {
    tci_nonfinite_report r;
    tci_nonfinite_report_init(&r);
    r.count = 12;
    r.found = 1;
    snprintf(r.layer, sizeof r.layer, "%s", layer);
    snprintf(r.op_type, sizeof r.op_type, "%s", op_type);
    return r;
}

START_TEST(test_clean_round) {
    const char *layer = "unchanged";
    auto_round r = {1, 0, NULL, false, 0, NULL};
    ck_assert_tci_ok(api_auto_next_layer(&r, &layer));
    ck_assert_ptr_null(layer);
}
END_TEST

START_TEST(test_moves_the_first_layer) {
    tci_nonfinite_report report = overflow_at("mm", "MatMul");
    auto_round r = {1, 12, &report, false, 0, NULL};
    const char *layer = NULL;
    ck_assert_tci_ok(api_auto_next_layer(&r, &layer));
    ck_assert_str_eq(layer, "mm");
}
END_TEST

START_TEST(test_cannot_move) {
    const char *layer = NULL;
    tci_nonfinite_report report = overflow_at("mm", "MatMul");
    auto_round r = {3, 12, &report, true, 0, NULL};
    ck_assert_tci_error(api_auto_next_layer(&r, &layer), TCI_ERR_UNSUPPORTED,
                        "layer 'mm' (MatMul) is kept in fp32, and so are the layers producing");
    ck_assert_ptr_null(layer);
    /* layers upstream of it still in fp16: it names the layer, whose inputs join fp32 */
    r.upstream = 2;
    ck_assert_tci_ok(api_auto_next_layer(&r, &layer));
    ck_assert_str_eq(layer, "mm");
    r.upstream = 0;
    layer = NULL;
    /* the message names the precision the layer is kept in */
    r.kept = "bf16";
    ck_assert_tci_error(api_auto_next_layer(&r, &layer), TCI_ERR_UNSUPPORTED,
                        "is kept in bf16, and so are the layers producing");
    ck_assert_ptr_nonnull(strstr(tci_last_error(), "bf16 does not fix it"));
    r.kept = NULL;
    r.layer_in_fp32 = false;
    r.round = TCI_PRECISION_AUTO_MAX_ROUNDS;
    ck_assert_tci_error(api_auto_next_layer(&r, &layer), TCI_ERR_UNSUPPORTED, "after 16 rounds");
    ck_assert_ptr_nonnull(strstr(tci_last_error(), "next: layer 'mm'"));
    r.round = 2;
    report.input_index = 1;
    ck_assert_tci_error(api_auto_next_layer(&r, &layer), TCI_ERR_UNSUPPORTED,
                        "engine input 1 holds NaN/Inf in fp16");
    report.input_index = -1;
    report.found = 0;
    ck_assert_tci_error(api_auto_next_layer(&r, &layer), TCI_ERR_UNSUPPORTED,
                        "no layer of the re-run produced them");
    ck_assert_ptr_null(layer);
}
END_TEST

/* A synthetic model: its layers in execution order, which produce NaN/Inf in fp16 and which
 * still would in fp32 (values past fp32's range: the model's, not the storage's). */
typedef struct synthetic {
    const char *const *layers;
    const bool *fp16_overflows, *fp32_overflows;
    size_t count;
} synthetic;

/* The search's rounds over m, as the library runs them on engines: each round "runs" the fp16
 * engine with the layers moved so far in fp32, and the first layer whose output overflows is
 * reported. Returns the status; *moved and *rounds what it did. */
static tci_status simulate(const synthetic *m, const char **moved, size_t *num_moved,
                           int *rounds) {
    *num_moved = 0;
    for (int round = 1;; round++) {
        *rounds = round;
        tci_nonfinite_report report;
        tci_nonfinite_report_init(&report);
        auto_round r = {round, 0, &report, false, 0, NULL};
        for (size_t i = 0; i < m->count && !r.mismatches; i++) {
            bool fp32 = false;
            for (size_t k = 0; k < *num_moved; k++) fp32 |= strcmp(moved[k], m->layers[i]) == 0;
            if (fp32 ? m->fp32_overflows[i] : m->fp16_overflows[i]) {
                report = overflow_at(m->layers[i], "Conv");
                r.mismatches = 100;
                r.layer_in_fp32 = fp32;
            }
        }
        const char *layer = NULL;
        tci_status st = api_auto_next_layer(&r, &layer);
        if (st != TCI_OK || !layer) return st;
        static char names[TCI_PRECISION_AUTO_MAX_ROUNDS][256];
        snprintf(names[*num_moved], sizeof names[0], "%s", layer); /* layer is the report's */
        moved[*num_moved] = names[*num_moved];
        ++*num_moved;
    }
}

START_TEST(test_converges_on_synthetic_models) {
    static const char *const layers[] = {"stem", "block1/conv", "block1/add", "head/mm"};
    bool fp16[] = {false, true, false, true}, fp32[] = {false, false, false, false};
    synthetic m = {layers, fp16, fp32, 4};
    const char *moved[TCI_PRECISION_AUTO_MAX_ROUNDS];
    size_t n = 0;
    int rounds = 0;
    ck_assert_tci_ok(simulate(&m, moved, &n, &rounds));
    ck_assert_uint_eq(n, 2); /* only the overflowing layers, in execution order */
    ck_assert_str_eq(moved[0], "block1/conv");
    ck_assert_str_eq(moved[1], "head/mm");
    ck_assert_int_eq(rounds, 3);
    /* nothing overflows: one round, nothing moved */
    bool none[] = {false, false, false, false};
    m.fp16_overflows = none;
    ck_assert_tci_ok(simulate(&m, moved, &n, &rounds));
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(rounds, 1);
    /* the head overflows in fp32 too: the search stops there, naming it */
    m.fp16_overflows = fp16;
    fp32[3] = true;
    ck_assert_tci_error(simulate(&m, moved, &n, &rounds), TCI_ERR_UNSUPPORTED,
                        "layer 'head/mm' (Conv) is kept in fp32, and so are the layers");
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(rounds, 3);
}
END_TEST

START_TEST(test_bounded_rounds) {
    enum { N = TCI_PRECISION_AUTO_MAX_ROUNDS + 4 };
    static char names[N][16];
    const char *layers[N];
    bool fp16[N], fp32[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "conv%d", i);
        layers[i] = names[i];
        fp16[i] = true;
        fp32[i] = false;
    }
    synthetic m = {layers, fp16, fp32, N};
    const char *moved[TCI_PRECISION_AUTO_MAX_ROUNDS];
    size_t n = 0;
    int rounds = 0;
    ck_assert_tci_error(simulate(&m, moved, &n, &rounds), TCI_ERR_UNSUPPORTED, "after 16 rounds");
    ck_assert_int_eq(rounds, TCI_PRECISION_AUTO_MAX_ROUNDS);
    ck_assert_uint_eq(n, TCI_PRECISION_AUTO_MAX_ROUNDS - 1);
    ck_assert_ptr_nonnull(strstr(tci_last_error(), "next: layer 'conv15'"));
    /* exactly as many overflowing layers as the rounds allow moves: it still converges */
    for (int i = TCI_PRECISION_AUTO_MAX_ROUNDS - 1; i < N; i++) fp16[i] = false;
    ck_assert_tci_ok(simulate(&m, moved, &n, &rounds));
    ck_assert_uint_eq(n, TCI_PRECISION_AUTO_MAX_ROUNDS - 1);
    ck_assert_int_eq(rounds, TCI_PRECISION_AUTO_MAX_ROUNDS);
}
END_TEST

START_TEST(test_options_refused) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    tci_engine *e = (tci_engine *)0x1;
    o.precision = TCI_PRECISION_AUTO;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "TCI_PRECISION_AUTO compares the fp16 GPU engine with the fp32 one: it "
                        "needs TCI_BACKEND_GPU (tci_engine_options.backend)");
    ck_assert_ptr_null(e);
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "not with tci_engine_options.plan_only");
    o.plan_only = 0;
    o.num_calibration_inputs = 1;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "num_calibration_inputs is 1 but calibration_inputs is NULL");
    /* calibration inputs are the search's: with another precision they are an error */
    float x[1] = {0};
    int64_t d[1] = {1};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, d, x);
    o.precision = TCI_PRECISION_FP16;
    o.backend = TCI_BACKEND_CPU;
    o.calibration_inputs = &in;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "calibration_inputs and accuracy_target are for TCI_PRECISION_AUTO");
    o.calibration_inputs = NULL;
    o.accuracy_target = 1e-3;
    ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "accuracy_target are for TCI_PRECISION_AUTO");
    o.precision = TCI_PRECISION_AUTO;
    o.backend = TCI_BACKEND_GPU;
    const double bad[] = {-1e-3, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        o.accuracy_target = bad[i];
        ck_assert_tci_error(tci_engine_create_from_file(DEMO_MODEL, &o, &e),
                            TCI_ERR_INVALID_ARGUMENT, "tci_engine_options.accuracy_target is ");
    }
    ck_assert_tci_error(tci_engine_load("/nonexistent.tci", &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "fixes the shapes, precision");
    o.accuracy_target = 0;
    o.precision = TCI_PRECISION_FP16;
    o.backend = TCI_BACKEND_CPU;
    o.calibration_inputs = &in;
    /* an engine file holds its fp32 layers: no search, no calibration inputs */
    o.num_calibration_inputs = 0;
    ck_assert_tci_error(tci_engine_load("/nonexistent.tci", &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "no timing cache or calibration inputs");
    o.calibration_inputs = NULL;
    o.precision = TCI_PRECISION_AUTO;
    ck_assert_tci_error(tci_engine_load("/nonexistent.tci", &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "fixes the shapes, precision");
    if (tci_gpu_count(NULL, 0) == 0) {
        o.backend = TCI_BACKEND_GPU;
        ck_assert_int_eq(tci_engine_create_from_file(DEMO_MODEL, &o, &e), TCI_ERR_NO_DEVICE);
        ck_assert_ptr_null(e);
    }
}
END_TEST

/* accuracy_target's ranking on synthetic per-layer errors: by the error each layer adds to
 * what it reads, not by its own error (errors accumulate downstream). */
START_TEST(test_rank) {
    /* stem -> conv1 -> conv2 -> head: conv1 adds 4e-3, head 3e-4, conv2 2e-4, stem 1e-4 */
    double errors[] = {1e-4, 4.1e-3, 4.3e-3, 4.6e-3}, inputs[] = {0, 1e-4, 4.1e-3, 4.3e-3};
    bool fp32[] = {false, false, false, false};
    int order[4] = {-1, -1, -1, -1};
    ck_assert_uint_eq(api_auto_rank(4, errors, inputs, fp32, order), 4);
    ck_assert_int_eq(order[0], 1);
    ck_assert_int_eq(order[1], 3);
    ck_assert_int_eq(order[2], 2);
    ck_assert_int_eq(order[3], 0);
    fp32[1] = true; /* in fp32 already: not ranked */
    ck_assert_uint_eq(api_auto_rank(4, errors, inputs, fp32, order), 3);
    ck_assert_int_eq(order[0], 3);
    /* ties keep the node order */
    double tie[] = {2e-3, 1e-3, 2e-3}, tie_in[] = {0, 0, 0};
    bool none[] = {false, false, false};
    ck_assert_uint_eq(api_auto_rank(3, tie, tie_in, none, order), 3);
    ck_assert_int_eq(order[0], 0);
    ck_assert_int_eq(order[1], 2);
    ck_assert_int_eq(order[2], 1);
    /* layers that add no error (or reduce it) come last, in node order; a layer whose error was
     * not measured (NaN) not at all */
    double flat[] = {0, NAN, 1e-3, 3e-3}, flat_in[] = {0, 0, 2e-3, 1e-3};
    bool four[] = {false, false, false, false};
    ck_assert_uint_eq(api_auto_rank(4, flat, flat_in, four, order), 3);
    ck_assert_int_eq(order[0], 3);
    ck_assert_int_eq(order[1], 0);
    ck_assert_int_eq(order[2], 2);
    ck_assert_uint_eq(api_auto_rank(0, flat, flat_in, none, order), 0);
}
END_TEST

/* An overflow round keeps every layer that produces NaN/Inf from finite inputs: two parallel
 * branches at once, not the layers downstream of them, not those in fp32 already. */
START_TEST(test_overflow_layers) {
    /* stem -> {branch_a, branch_b} -> concat -> head; both branches overflow */
    uint64_t nonfinite[] = {0, 40, 8, 48, 1000}, input_nonfinite[] = {0, 0, 0, 40, 48};
    double small[] = {1, 2, 3, 4, 5};
    bool fp32[] = {false, false, false, false, false}, pick[5];
    api_auto_overflow_layers(5, nonfinite, input_nonfinite, small, small, fp32, pick);
    ck_assert(!pick[0] && pick[1] && pick[2] && !pick[3] && !pick[4]);
    fp32[2] = true;
    api_auto_overflow_layers(5, nonfinite, input_nonfinite, small, small, fp32, pick);
    ck_assert(!pick[0] && pick[1] && !pick[2] && !pick[3] && !pick[4]);
    uint64_t clean[] = {0, 0, 0, 0, 0};
    api_auto_overflow_layers(5, clean, clean, small, small, fp32, pick);
    for (int i = 0; i < 5; i++) ck_assert(!pick[i]);
    /* past fp16's range in the fp32 run: the layer (its output) and its reader (the cast of its
     * input) both, though nothing overflowed yet */
    double range[] = {1, 7e4, 3, 9, 5}, input_range[] = {0, 1, 1, 7e4, 9};
    api_auto_overflow_layers(5, clean, clean, range, input_range, fp32, pick);
    ck_assert(!pick[0] && pick[1] && !pick[2] && pick[3] && !pick[4]);
    double edge[] = {65504, 65504, 0, 0, 0}; /* fp16's largest finite value still fits */
    api_auto_overflow_layers(5, clean, clean, edge, edge, fp32, pick);
    for (int i = 0; i < 5; i++) ck_assert(!pick[i]);
}
END_TEST

typedef struct seen_layers {
    char names[8][64];
    int automatic[8];
    int count;
} seen_layers;

static void see_layer(const char *layer, int automatic, void *user) {
    seen_layers *s = user;
    ck_assert_int_lt(s->count, 8);
    snprintf(s->names[s->count], sizeof s->names[0], "%s", layer);
    s->automatic[s->count++] = automatic;
}

START_TEST(test_fp32_layers_listed) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    const char *fp32[] = {"Conv", "Gemm", NULL};
    o.fp32_layers = fp32;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    seen_layers s = {0};
    ck_assert_tci_ok(tci_engine_fp32_layers(e, see_layer, &s));
    ck_assert_int_eq(s.count, 2); /* the user's, none automatic */
    ck_assert_str_eq(s.names[0], "Conv");
    ck_assert_str_eq(s.names[1], "Gemm");
    ck_assert_int_eq(s.automatic[0] + s.automatic[1], 0);
    ck_assert_tci_error(tci_engine_fp32_layers(e, NULL, NULL), TCI_ERR_INVALID_ARGUMENT, "NULL");
    tci_engine_destroy(e);
    o.backend = TCI_BACKEND_CPU; /* runs fp32 throughout: no fp32 layers to list */
    o.plan_only = 0;
    o.fp32_layers = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &o, &e));
    s.count = 0;
    ck_assert_tci_ok(tci_engine_fp32_layers(e, see_layer, &s));
    ck_assert_int_eq(s.count, 0);
    double error = 1;
    ck_assert_tci_error(tci_engine_auto_error(e, &error), TCI_ERR_INVALID_ARGUMENT,
                        "not built with TCI_PRECISION_AUTO");
    ck_assert_double_eq(error, 1);
    ck_assert_tci_error(tci_engine_auto_target(e, &error), TCI_ERR_INVALID_ARGUMENT,
                        "not built with TCI_PRECISION_AUTO: it has no accuracy target");
    ck_assert_double_eq(error, 1);
    ck_assert_tci_error(tci_engine_auto_target(e, NULL), TCI_ERR_INVALID_ARGUMENT, "NULL");
    tci_engine_destroy(e);
}
END_TEST

int main(void) {
    Suite *s = suite_create("precision_auto");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_clean_round);
    tcase_add_test(tc, test_moves_the_first_layer);
    tcase_add_test(tc, test_cannot_move);
    tcase_add_test(tc, test_converges_on_synthetic_models);
    tcase_add_test(tc, test_bounded_rounds);
    tcase_add_test(tc, test_rank);
    tcase_add_test(tc, test_overflow_layers);
    tcase_add_test(tc, test_options_refused);
    tcase_add_test(tc, test_fp32_layers_listed);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
