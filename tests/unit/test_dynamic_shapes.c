/* Shapes below the built ones, without a GPU: which dims of an input may run smaller (the
 * leading one and the model's symbolic ones), the errors naming the input, axis and sizes, and
 * the re-plan of a GPU engine (plan_only) at a smaller batch and sequence length: the generated
 * bert_block and gpt2_block built for 2x128 plan at 1x128, 2x64, 1x77 and 2x1 with the same
 * steps, the attention still fused (at the new length), and their GEMMs differing from the
 * built ones only in rows and batch (what a cuBLASLt plan made at the built shape runs). The
 * models come from the models.generate fixture (TCI_TEST_MODELS_DIR). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "graph/plan.h"
#include "harness.h"

enum { E = 128 };

static const char *model_path(const char *name) {
    static char path[1024];
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir != NULL, "TCI_TEST_MODELS_DIR is not set (ctest sets it)");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    return path;
}

/* A plan_only GPU engine of the model with the given shapes. */
static tci_engine *plan_engine(const char *name, const tci_shape_override *shapes, size_t n) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    o.shapes = shapes;
    o.num_shapes = n;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(model_path(name), &o, &e));
    return e;
}

static tci_engine *block_engine(const char *name) {
    static const tci_shape_override shapes[] = {{"input", 3, {2, 128, E}}, {"mask", 2, {2, 128}}};
    return plan_engine(name, shapes, 2);
}

START_TEST(test_dynamic_dims_of_the_model) {
    tci_engine *e = block_engine("bert_block");
    /* input N x S x 128: N and S symbolic; mask N x S */
    ck_assert_uint_eq(e->dynamic_dims[0], 0x3u);
    ck_assert_uint_eq(e->dynamic_dims[1], 0x3u);
    tci_engine_destroy(e);
    tci_shape_override shape = {"input", 4, {2, 3, 32, 32}};
    e = plan_engine("small_cnn", &shape, 1); /* N x 3 x 32 x 32 */
    ck_assert_uint_eq(e->dynamic_dims[0], 0x1u);
    tci_engine_destroy(e);
}
END_TEST

START_TEST(test_run_shape_checks) {
    tci_engine *e = block_engine("bert_block");
    static float x[1];
    static int64_t m[1];
    tci_tensor in[2] = {{"input", TCI_DTYPE_FLOAT, 3, {1, 77, E}, x},
                        {"mask", TCI_DTYPE_INT64, 2, {1, 77}, m}};
    ck_assert_tci_ok(api_check_run_shapes(e, in, 2));
    in[0].dims[0] = in[1].dims[0] = 2;
    in[0].dims[1] = in[1].dims[1] = 128;
    ck_assert_tci_ok(api_check_run_shapes(e, in, 2)); /* as built */
    in[0].dims[1] = 129;
    ck_assert_tci_error(api_check_run_shapes(e, in, 2), TCI_ERR_INVALID_ARGUMENT,
                        "input 'input' is 2x129x128: axis 1 is 129, more than the 128 the engine "
                        "was built for (built 2x128x128; build for the largest shape to run with "
                        "tci_engine_options.shapes)");
    in[0].dims[1] = 128;
    in[1].dims[0] = 3;
    ck_assert_tci_error(api_check_run_shapes(e, in, 2), TCI_ERR_INVALID_ARGUMENT,
                        "input 'mask' is 3x128: axis 0 is 3, more than the 2");
    in[1].dims[0] = 2;
    in[0].dims[2] = 64;
    ck_assert_tci_error(api_check_run_shapes(e, in, 2), TCI_ERR_INVALID_ARGUMENT,
                        "input 'input' is 2x128x64: axis 2 is 64, but the model fixes it at 128 "
                        "(only the leading dim and the model's symbolic dims may be smaller than "
                        "built)");
    in[0].dims[2] = E;
    in[1].dims[1] = 0;
    ck_assert_tci_error(api_check_run_shapes(e, in, 2), TCI_ERR_INVALID_ARGUMENT,
                        "input 'mask' is 2x0: axis 1 is 0; a dim below the built 128 must be at "
                        "least 1");
    in[1].rank = 3;
    in[1].dims[1] = 128;
    in[1].dims[2] = 1;
    ck_assert_tci_error(api_check_run_shapes(e, in, 2), TCI_ERR_INVALID_ARGUMENT,
                        "input 'mask' has rank 3 (shape 2x128x1); the engine was built for rank 2 "
                        "(2x128)");
    tci_engine_destroy(e);

    /* a model that fixes every dim but the batch: a smaller image is refused, a batch runs */
    tci_shape_override shape = {"input", 4, {2, 3, 32, 32}};
    e = plan_engine("small_cnn", &shape, 1);
    tci_tensor img = {"input", TCI_DTYPE_FLOAT, 4, {2, 3, 32, 24}, x};
    ck_assert_tci_error(api_check_run_shapes(e, &img, 1), TCI_ERR_INVALID_ARGUMENT,
                        "input 'input' is 2x3x32x24: axis 3 is 24, but the model fixes it at 32");
    img.dims[3] = 32;
    img.dims[0] = 1;
    ck_assert_tci_ok(api_check_run_shapes(e, &img, 1));
    tci_engine_destroy(e);
}
END_TEST

/* The steps of variant v against the built plan b: the same kinds, nodes and labels; GEMMs
 * differ in m and batch only; the attention steps at (n, s), fused. */
static void check_variant(const char *name, const plan *b, const plan *v, int64_t n, int64_t s) {
    ck_assert_int_eq(v->num_steps, b->num_steps);
    ck_assert_int_eq(v->num_inputs, b->num_inputs);
    ck_assert_int_eq(v->num_outputs, b->num_outputs);
    int attention = 0;
    for (int i = 0; i < b->num_steps; i++) {
        const plan_step *x = &b->steps[i], *y = &v->steps[i];
        ck_assert_msg(x->kind == y->kind && strcmp(x->node->name, y->node->name) == 0 &&
                          strcmp(x->label, y->label) == 0,
                      "%s at %lldx%lld: step %d is %s ('%s'), built %s ('%s')", name,
                      (long long)n, (long long)s, i, y->node->name, y->label, x->node->name,
                      x->label);
        ck_assert_int_ne(y->kind, PLAN_STEP_SOFTMAX);
        if (y->kind == PLAN_STEP_GEMM) {
            const plan_gemm *gx = &x->u.gemm, *gy = &y->u.gemm;
            ck_assert_int_eq(gy->n, gx->n);
            ck_assert_int_eq(gy->k, gx->k);
            ck_assert_int_le(gy->m, gx->m);
            ck_assert_int_le(gy->batch, gx->batch);
            ck_assert_int_eq(gy->m * (gy->batch > 0 ? gy->batch : 1),
                             gx->m * (gx->batch > 0 ? gx->batch : 1) * n * s / (2 * 128));
        }
        if (y->kind == PLAN_STEP_ATTENTION) {
            attention++;
            ck_assert_int_eq(y->u.attention.batch, n);
            ck_assert_int_eq(y->u.attention.q_len, s);
            ck_assert_int_eq(y->u.attention.kv_len, s);
            ck_assert(y->u.attention.has_keep);
            ck_assert_int_eq(y->u.attention.causal, x->u.attention.causal);
        }
    }
    ck_assert_int_eq(attention, 2);
    const plan_tensor *out = &v->tensors[v->output_tensors[0]];
    ck_assert_int_eq(out->rank, 3);
    ck_assert_int_eq(out->dims[0], n);
    ck_assert_int_eq(out->dims[1], s);
    ck_assert_int_eq(out->dims[2], E);
}

static void check_replans(const char *name) {
    tci_engine *e = block_engine(name);
    const plan *built = e->plan_only;
    ck_assert_ptr_nonnull(e->pristine);
    static const int64_t sizes[][2] = {{1, 128}, {2, 64}, {1, 77}, {2, 1}, {2, 128}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k][0], s = sizes[k][1];
        int64_t dims[2 * TCI_MAX_RANK] = {0};
        for (int i = 0; i < built->num_inputs; i++) {
            const plan_tensor *t = &built->tensors[built->input_tensors[i]];
            int64_t *row = &dims[i * TCI_MAX_RANK];
            row[0] = n;
            row[1] = s;
            if (t->rank == 3) row[2] = E;
        }
        ir_graph *g = NULL;
        plan *p = NULL;
        tci_status st = api_replan(e, built, dims, &g, &p);
        ck_assert_msg(st == TCI_OK, "%s at %lldx%lld: %s", name, (long long)n, (long long)s,
                      tci_last_error());
        check_variant(name, built, p, n, s);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
    tci_engine_destroy(e);
}

START_TEST(test_bert_block_replans) { check_replans("bert_block"); }
END_TEST

START_TEST(test_gpt2_block_replans) { check_replans("gpt2_block"); }
END_TEST

int main(void) {
    Suite *s = suite_create("dynamic_shapes");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dynamic_dims_of_the_model);
    tcase_add_test(tc, test_run_shape_checks);
    tcase_add_test(tc, test_bert_block_replans);
    tcase_add_test(tc, test_gpt2_block_replans);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
