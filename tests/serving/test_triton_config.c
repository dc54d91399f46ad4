/* The Triton backend's reading of a model configuration (serving/triton/model_config.c): the JSON
 * Triton hands out, each parameter and its refusals, the tensors, and the auto-completion from an
 * engine. Triton's four error functions are stood in for here, so that the parser runs under the
 * sanitizers of `make asan` without a server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_config.h"

struct TRITONSERVER_Error {
    TRITONSERVER_Error_Code code;
    char *message;
};

TRITONSERVER_Error *TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char *msg) {
    TRITONSERVER_Error *e = malloc(sizeof *e);
    ck_assert_ptr_nonnull(e);
    e->code = code;
    e->message = malloc(strlen(msg) + 1);
    ck_assert_ptr_nonnull(e->message);
    strcpy(e->message, msg);
    return e;
}

void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *e) {
    if (!e) return;
    free(e->message);
    free(e);
}

TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error *e) { return e->code; }
const char *TRITONSERVER_ErrorMessage(TRITONSERVER_Error *e) { return e->message; }

/* A configuration as Triton serializes it (int64 dims as strings), with extra members. */
static char *config(const char *extra) {
    static const char head[] =
        "{\"name\":\"m\",\"max_batch_size\":8,\"input\":[{\"name\":\"x\",\"data_type\":"
        "\"TYPE_FP32\",\"dims\":[\"3\",\"32\",\"-1\"]}],\"output\":[{\"name\":\"y\","
        "\"data_type\":\"TYPE_INT64\",\"dims\":[\"10\"]}]";
    size_t n = strlen(head) + strlen(extra) + 3;
    char *s = malloc(n);
    ck_assert_ptr_nonnull(s);
    snprintf(s, n, "%s%s%s}", head, extra[0] ? "," : "", extra);
    return s;
}

/* extra's parameters as Triton writes them: {"KEY":{"string_value":"VALUE"},...} from pairs */
static char *with_parameters(const char *const *pairs, size_t n) {
    char buf[2048] = "\"parameters\":{";
    for (size_t i = 0; i < n; i += 2) {
        char item[512];
        snprintf(item, sizeof item, "%s\"%s\":{\"string_value\":\"%s\"}", i ? "," : "",
                 pairs[i], pairs[i + 1]);
        strncat(buf, item, sizeof buf - strlen(buf) - 2);
    }
    strcat(buf, "}");
    return config(buf);
}

static void expect_error(const char *json, TRITONSERVER_Error_Code code, const char *fragment) {
    tct_model_config c;
    TRITONSERVER_Error *e = tct_config_parse(json, strlen(json), &c);
    ck_assert_msg(e != NULL, "accepted: %s", json);
    ck_assert_int_eq(TRITONSERVER_ErrorCode(e), code);
    ck_assert_msg(strstr(TRITONSERVER_ErrorMessage(e), fragment), "'%s' lacks '%s'",
                  TRITONSERVER_ErrorMessage(e), fragment);
    TRITONSERVER_ErrorDelete(e);
}

START_TEST(test_full_configuration) {
    const char *const pairs[] = {"precision",   "fp16",         "fp32_layers",    " a ,b/c* ",
                                 "keep_precision", "tf32",      "batch_buckets",  "1, 4,8",
                                 "pipeline_depth", "1",         "cpu_threads",    "3",
                                 "timing_cache",   "t.cache"};
    char *json = with_parameters(pairs, sizeof pairs / sizeof pairs[0]);
    tct_model_config c;
    TRITONSERVER_Error *e = tct_config_parse(json, strlen(json), &c);
    ck_assert_msg(!e, "%s", e ? TRITONSERVER_ErrorMessage(e) : "");
    ck_assert_int_eq(c.max_batch, 8);
    ck_assert_int_eq(c.precision, TCI_PRECISION_FP16);
    ck_assert_int_eq(c.kept_precision, TCI_PRECISION_TF32);
    ck_assert_str_eq(c.fp32_layers[0], "a");
    ck_assert_str_eq(c.fp32_layers[1], "b/c*");
    ck_assert_ptr_null(c.fp32_layers[2]);
    ck_assert_uint_eq(c.num_batch_buckets, 3);
    ck_assert_int_eq(c.batch_buckets[2], 8);
    ck_assert_int_eq(c.pipeline_depth, 1);
    ck_assert_int_eq(c.cpu_threads, 3);
    ck_assert_str_eq(c.timing_cache, "t.cache");
    ck_assert_uint_eq(c.num_inputs, 1);
    ck_assert_str_eq(c.inputs[0].name, "x");
    ck_assert_int_eq(c.inputs[0].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(c.inputs[0].rank, 3);
    ck_assert_int_eq(c.inputs[0].dims[2], -1);
    ck_assert_int_eq(c.outputs[0].dtype, TCI_DTYPE_INT64);
    tct_config_free(&c);
    free(json);
    /* nothing given: the defaults (pipeline_depth 0: the instance's kind decides) */
    json = config("");
    ck_assert_ptr_null(tct_config_parse(json, strlen(json), &c));
    ck_assert_int_eq(c.pipeline_depth, 0);
    ck_assert_int_eq(c.buckets_set, 0);
    ck_assert_int_eq(c.kept_precision, TCI_PRECISION_FP32);
    tct_config_free(&c);
    free(json);
}
END_TEST

START_TEST(test_refusals) {
    static const struct {
        const char *key, *value, *fragment;
    } bad[] = {
        {"precison", "fp16", "unknown parameter 'precison'"},
        {"precision", "fast", "expected fp16, bf16, tf32, fp32 or auto"},
        {"pipeline_depth", "4", "parameter pipeline_depth '4': expected 1"},
        {"pipeline_depth", "0", "parameter pipeline_depth '0'"},
        {"batch_buckets", "4,2", "expected 'none' or increasing batch sizes"},
        {"batch_buckets", "1,,2", "has an empty entry"},
        {"batch_buckets", "99999999999999999999", "increasing batch sizes"},
        {"cpu_threads", "-1", "expected a count 0..1024"},
        {"accuracy_target", "1e-3", "steer the search of precision 'auto'"},
        {"keep_precision", "fp64", "expected fp32, tf32 or bf16"},
        {"keep_precision", "bf16", "give parameter fp32_layers or precision 'auto'"},
        {"timing_cache", "", "parameter timing_cache is empty"},
        {"fp32_layers", "a,", "has an empty entry"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *pair[] = {bad[i].key, bad[i].value};
        char *json = with_parameters(pair, 2);
        expect_error(json, TRITONSERVER_ERROR_INVALID_ARG, bad[i].fragment);
        free(json);
    }
    const char *const auto_bf16[] = {"precision", "auto", "keep_precision", "bf16",
                                     "accuracy_target", "1e-3"};
    char *json = with_parameters(auto_bf16, 6);
    expect_error(json, TRITONSERVER_ERROR_INVALID_ARG, "it fixes overflow, not accuracy");
    free(json);
    /* the document and its members */
    expect_error("{\"max_batch_size\":", TRITONSERVER_ERROR_INTERNAL, "is not JSON");
    expect_error("{\"max_batch_size\":-1}", TRITONSERVER_ERROR_INVALID_ARG, "not a count");
    expect_error("{\"max_batch_size\":1e300}", TRITONSERVER_ERROR_INVALID_ARG, "not a count");
    expect_error("{\"max_batch_size\":2.5}", TRITONSERVER_ERROR_INVALID_ARG, "not a count");
    expect_error("{\"default_model_filename\":\"../m.onnx\"}", TRITONSERVER_ERROR_INVALID_ARG,
                 "is not a file name");
    expect_error("{\"parameters\":{\"precision\":{\"int_value\":1}}}",
                 TRITONSERVER_ERROR_INVALID_ARG, "has no string_value");
    expect_error("{\"input\":{}}", TRITONSERVER_ERROR_INVALID_ARG, "'input' is not a list");
    expect_error("{\"input\":[{\"data_type\":\"TYPE_FP32\",\"dims\":[]}]}",
                 TRITONSERVER_ERROR_INVALID_ARG, "input 0 has no name");
    expect_error("{\"input\":[{\"name\":\"x\",\"data_type\":\"TYPE_STRING\",\"dims\":[]}]}",
                 TRITONSERVER_ERROR_UNSUPPORTED, "data_type TYPE_STRING is not one tcinfer runs");
    expect_error("{\"output\":[{\"name\":\"y\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"x\"]}]}",
                 TRITONSERVER_ERROR_INVALID_ARG, "dim 0 is not an integer >= -1");
    expect_error("{\"output\":[{\"name\":\"y\",\"data_type\":\"TYPE_FP32\",\"dims\":[-2]}]}",
                 TRITONSERVER_ERROR_INVALID_ARG, "dim 0 is not an integer >= -1");
    expect_error("{\"output\":[{\"name\":\"y\",\"data_type\":\"TYPE_FP32\",\"dims\":[1e300]}]}",
                 TRITONSERVER_ERROR_INVALID_ARG, "dim 0 is not an integer >= -1");
    expect_error("{\"output\":[{\"name\":\"y\",\"data_type\":\"TYPE_FP32\","
                 "\"dims\":[1,1,1,1,1,1,1,1,1]}]}",
                 TRITONSERVER_ERROR_INVALID_ARG, "dims missing or over 8");
    expect_error("{\"input\":[{\"name\":\"x\",\"data_type\":\"TYPE_FP32\",\"dims\":[1],"
                 "\"reshape\":{\"shape\":[1]}}]}",
                 TRITONSERVER_ERROR_UNSUPPORTED, "reshape is not supported");
}
END_TEST

/* Inputs, outputs and max_batch_size filled from a CPU engine of the generated small_cnn
 * (input [N, 3, 32, 32], output [N, 10]); what the configuration gives is kept. */
/* tct_default_buckets: fine steps for the usual maximum batches, never more than the cap */
static void check_buckets(int64_t max_batch, const int64_t *want, size_t n) {
    int64_t got[64];
    ck_assert_uint_eq(tct_default_buckets(max_batch, NULL), n);
    ck_assert_uint_eq(tct_default_buckets(max_batch, got), n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "max %lld: bucket %zu is %lld, want %lld",
                      (long long)max_batch, i, (long long)got[i], (long long)want[i]);
}

START_TEST(test_default_buckets) {
    check_buckets(64, (int64_t[]){1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}, 11);
    check_buckets(128, (int64_t[]){1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128}, 12);
    check_buckets(8, (int64_t[]){1, 2, 4, 8}, 4);
    check_buckets(6, (int64_t[]){1, 2, 4, 6}, 4);
    check_buckets(2, (int64_t[]){1, 2}, 2);
    check_buckets(20, (int64_t[]){1, 2, 4, 8, 16, 20}, 6);
    for (int64_t m = 2; m <= 100000; m = m * 3 / 2 + 1) {
        int64_t got[64];
        size_t n = tct_default_buckets(m, got);
        size_t powers = 1; /* the powers of two below m, and m */
        for (int64_t b = 1; b < m; b *= 2) powers++;
        ck_assert_uint_le(n, m <= 2048 ? TCT_DEFAULT_BUCKETS_MAX : powers);
        ck_assert_int_eq(got[0], 1);
        ck_assert_int_eq(got[n - 1], m);
        for (size_t i = 1; i < n; i++) ck_assert_int_gt(got[i], got[i - 1]);
    }
}
END_TEST

START_TEST(test_autocomplete) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir != NULL, "TCI_TEST_MODELS_DIR is not set");
    char path[1024];
    snprintf(path, sizeof path, "%s/small_cnn.onnx", dir);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_CPU;
    tci_engine *engine;
    ck_assert_tci_ok(tci_engine_create_from_file(path, &o, &engine));
    char *out = NULL;
    const char empty[] = "{\"name\":\"small\"}";
    ck_assert_ptr_null(tct_config_autocomplete(empty, strlen(empty), engine, &out));
    ck_assert_ptr_nonnull(out);
    tct_model_config c;
    ck_assert_ptr_null(tct_config_parse(out, strlen(out), &c));
    ck_assert_int_eq(c.max_batch, TCT_DEFAULT_MAX_BATCH);
    ck_assert_uint_eq(c.num_inputs, 1);
    ck_assert_str_eq(c.inputs[0].name, "input");
    ck_assert_int_eq(c.inputs[0].rank, 3); /* the batch dim left out */
    ck_assert_int_eq(c.inputs[0].dims[0], 3);
    ck_assert_int_eq(c.inputs[0].dims[2], 32);
    ck_assert_uint_eq(c.num_outputs, 1);
    ck_assert_int_eq(c.outputs[0].rank, 1);
    ck_assert_int_eq(c.outputs[0].dims[0], 10);
    tct_config_free(&c);
    free(out);
    /* a complete configuration is left as it is */
    char *full = config("");
    ck_assert_ptr_null(tct_config_autocomplete(full, strlen(full), engine, &out));
    ck_assert_ptr_null(out);
    free(full);
    /* no batch dim: every dim written, max_batch_size stays 0 */
    const char unbatched[] = "{\"max_batch_size\":\"0\",\"output\":[{\"name\":\"logits_out\","
                             "\"data_type\":\"TYPE_FP32\",\"dims\":[\"-1\",\"10\"]}]}";
    ck_assert_ptr_null(tct_config_autocomplete(unbatched, strlen(unbatched), engine, &out));
    ck_assert_ptr_null(tct_config_parse(out, strlen(out), &c));
    ck_assert_int_eq(c.max_batch, 0);
    ck_assert_int_eq(c.inputs[0].rank, 4);
    ck_assert_int_eq(c.inputs[0].dims[0], -1);
    tct_config_free(&c);
    free(out);
    tci_engine_destroy(engine);
}
END_TEST

int main(void) {
    Suite *s = suite_create("triton_config");
    TCase *tc = tcase_create("triton_config");
    tcase_add_test(tc, test_full_configuration);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_autocomplete);
    tcase_add_test(tc, test_default_buckets);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
