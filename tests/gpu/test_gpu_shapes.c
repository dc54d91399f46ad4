/* GPU tests of shapes below the built ones (shape variants) through the public API, on the
 * generated bert_block and gpt2_block (TCI_TEST_MODELS_DIR): engines built for 2x128 run
 * 1x128, 2x64, 1x77 and 2x1 against the fp32 CPU reference built at each shape, a variant run
 * again replays the same bits, more shapes than a context keeps (EXEC_GPU_MAX_VARIANTS) still
 * run, and a model that fixes a dim refuses a smaller one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "tcinfer.h"

enum { E = 128, MAX_N = 2, MAX_S = 128 };

static const char *model_path(const char *name) {
    static char path[4096];
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    return path;
}

static tci_engine *engine_at(const char *model, tci_backend backend, int64_t n, int64_t s) {
    tci_shape_override shapes[] = {{"input", 3, {n, s, E}}, {"mask", 2, {n, s}}};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = backend;
    o.shapes = shapes;
    o.num_shapes = 2;
    tci_engine *e = NULL;
    tci_status st = tci_engine_create_from_file(model_path(model), &o, &e);
    ck_assert_msg(st == TCI_OK, "%s at %lldx%lld: %s", model, (long long)n, (long long)s,
                  tci_last_error());
    return e;
}

/* Inputs at n x s: x seeded, mask ones except the last 3 positions of sequence 0 (when s > 4). */
static void make_inputs(int64_t n, int64_t s, float *x, int64_t *mask, tci_tensor in[2]) {
    gpu_fill_random(x, (size_t)(n * s * E), (unsigned)(n * 1000 + s), -1.0f, 1.0f);
    for (int64_t i = 0; i < n * s; i++) mask[i] = !(i < s && s > 4 && i >= s - 3);
    in[0] = (tci_tensor){"input", TCI_DTYPE_FLOAT, 3, {n, s, E}, x};
    in[1] = (tci_tensor){"mask", TCI_DTYPE_INT64, 2, {n, s}, mask};
}

/* Runs ctx on in, checks the output's shape (n x s x E) and returns a copy of it. */
static float *run_copy(tci_context *ctx, const tci_tensor *in, int64_t n, int64_t s,
                       const char *what) {
    tci_status st = tci_context_run(ctx, in, 2);
    ck_assert_msg(st == TCI_OK, "%s: %s", what, tci_last_error());
    tci_tensor out;
    ck_assert(tci_context_output(ctx, 0, &out) == TCI_OK);
    ck_assert_int_eq(out.rank, 3);
    ck_assert_msg(out.dims[0] == n && out.dims[1] == s && out.dims[2] == E,
                  "%s: output %lldx%lldx%lld", what, (long long)out.dims[0],
                  (long long)out.dims[1], (long long)out.dims[2]);
    size_t bytes = (size_t)(n * s * E) * sizeof(float);
    float *copy = malloc(bytes);
    memcpy(copy, out.data, bytes);
    return copy;
}

/* The GPU result against the CPU reference at the same shape: relative L2 within the fp16
 * bound of the model tests (5e-3), every value finite. */
static void expect_close(const float *got, const float *want, int64_t count, const char *what) {
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < count; i++) {
        ck_assert_msg(isfinite(got[i]), "%s: element %lld is %g", what, (long long)i, got[i]);
        diff += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        norm += (double)want[i] * want[i];
    }
    double rel = sqrt(diff / (norm > 0 ? norm : 1));
    printf("%s: relative L2 %.3g against the CPU reference\n", what, rel);
    ck_assert_msg(rel <= 5e-3, "%s: relative L2 %g against the CPU reference", what, rel);
}

static float *reference(const char *model, const tci_tensor *in, int64_t n, int64_t s) {
    tci_engine *cpu = engine_at(model, TCI_BACKEND_CPU, n, s);
    tci_context *c = NULL;
    ck_assert(tci_context_create(cpu, &c) == TCI_OK);
    float *want = run_copy(c, in, n, s, "CPU reference");
    tci_context_destroy(c);
    tci_engine_destroy(cpu);
    return want;
}

static void check_sequences(const char *model) {
    tci_engine *e = engine_at(model, TCI_BACKEND_GPU, MAX_N, MAX_S);
    tci_context *ctx = NULL;
    ck_assert(tci_context_create(e, &ctx) == TCI_OK);
    float *x = malloc(sizeof(float) * MAX_N * MAX_S * E);
    int64_t *mask = malloc(sizeof(int64_t) * MAX_N * MAX_S);
    static const int64_t sizes[][2] = {{1, 128}, {2, 64}, {1, 77}, {2, 1}, {2, 128}};
    float *first_77 = NULL;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k][0], s = sizes[k][1];
        char what[128];
        snprintf(what, sizeof what, "%s built 2x128, run %lldx%lld", model, (long long)n,
                 (long long)s);
        tci_tensor in[2];
        make_inputs(n, s, x, mask, in);
        float *got = run_copy(ctx, in, n, s, what);
        float *want = reference(model, in, n, s);
        expect_close(got, want, n * s * E, what);
        if (n == 1 && s == 77) first_77 = got;
        else free(got);
        free(want);
    }
    /* the 1x77 variant again: its CUDA graph replays the same bits */
    tci_tensor in[2];
    make_inputs(1, 77, x, mask, in);
    float *again = run_copy(ctx, in, 1, 77, "1x77 again");
    ck_assert_msg(memcmp(again, first_77, sizeof(float) * 77 * E) == 0,
                  "%s: the 1x77 variant's second run differs from its first", model);
    /* larger than built, in the sequence and in the batch */
    make_inputs(1, 77, x, mask, in);
    in[0].dims[1] = in[1].dims[1] = MAX_S + 1;
    float *big = calloc((MAX_S + 1) * E, sizeof(float));
    int64_t big_mask[MAX_S + 1] = {0};
    in[0].data = big;
    in[1].data = big_mask;
    ck_assert_int_eq(tci_context_run(ctx, in, 2), TCI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(tci_last_error(), "axis 1 is 129, more than the 128 the engine "
                                                   "was built for"));
    free(big);
    free(again);
    free(first_77);
    free(x);
    free(mask);
    tci_context_destroy(ctx);
    tci_engine_destroy(e);
}

START_TEST(test_bert_block_sequences) { check_sequences("bert_block"); }
END_TEST

START_TEST(test_gpt2_block_sequences) { check_sequences("gpt2_block"); }
END_TEST

/* More shapes than a context keeps: sequences 1..20 at batch 1 of an engine built for 1x32,
 * then sequence 1 (its variant freed by then, planned again) and 20 (kept), each against the
 * CPU reference. */
START_TEST(test_more_variants_than_kept) {
    enum { S = 32, RUNS = 20 };
    tci_engine *e = engine_at("bert_block", TCI_BACKEND_GPU, 1, S);
    tci_context *ctx = NULL;
    ck_assert(tci_context_create(e, &ctx) == TCI_OK);
    float x[S * E];
    int64_t mask[S];
    const int64_t order[] = {1, RUNS};
    for (int64_t s = 1; s <= RUNS + 2; s++) {
        int64_t len = s <= RUNS ? s : order[s - RUNS - 1];
        tci_tensor in[2];
        make_inputs(1, len, x, mask, in);
        char what[96];
        snprintf(what, sizeof what, "bert_block built 1x32, run 1x%lld (run %lld)",
                 (long long)len, (long long)s);
        float *got = run_copy(ctx, in, 1, len, what);
        float *want = reference("bert_block", in, 1, len);
        expect_close(got, want, len * E, what);
        free(got);
        free(want);
    }
    tci_context_destroy(ctx);
    tci_engine_destroy(e);
}
END_TEST

/* small_cnn (N x 3 x 32 x 32) fixes every dim but the batch: a narrower image is refused before
 * any planning, a smaller batch runs. */
START_TEST(test_fixed_dims_refused) {
    tci_shape_override shape = {"input", 4, {2, 3, 32, 32}};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.shapes = &shape;
    o.num_shapes = 1;
    tci_engine *e = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path("small_cnn"), &o, &e) == TCI_OK, "%s",
                  tci_last_error());
    tci_context *ctx = NULL;
    ck_assert(tci_context_create(e, &ctx) == TCI_OK);
    float *x = calloc(2 * 3 * 32 * 32, sizeof(float));
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {2, 3, 32, 24}, x};
    ck_assert_int_eq(tci_context_run(ctx, &in, 1), TCI_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(tci_last_error(), "input 'input' is 2x3x32x24: axis 3 is 24, but the "
                                           "model fixes it at 32") != NULL,
                  "%s", tci_last_error());
    in.dims[3] = 32;
    in.dims[0] = 1;
    ck_assert_msg(tci_context_run(ctx, &in, 1) == TCI_OK, "%s", tci_last_error());
    free(x);
    tci_context_destroy(ctx);
    tci_engine_destroy(e);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_shapes");
    Suite *s = suite_create("gpu_shapes");
    TCase *tc = tcase_create("shapes");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bert_block_sequences);
    tcase_add_test(tc, test_gpt2_block_sequences);
    tcase_add_test(tc, test_more_variants_than_kept);
    tcase_add_test(tc, test_fixed_dims_refused);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
