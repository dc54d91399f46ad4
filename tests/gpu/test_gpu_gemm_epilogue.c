/* GPU test of the GEMM epilogues the fusion pass gives a transformer (bias + the erf-expanded
 * Gelu as GeluOfDiv, bias + the Gelu op, bias + residual Add) on every kernel family: the
 * generated transformer_block (TCI_TEST_MODELS_DIR) built with tcinfer's kernels only, with
 * cuBLASLt only (which runs the activations its epilogues lack, and every activation after a
 * residual, as a step of their own), in fp16, bf16 and the fp32 baseline, against the CPU
 * backend, which runs the unfused nodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "tcinfer.h"

enum { B = 2, S = 16, D = 64 };

static const char *model_path(const char *name) {
    static char path[4096];
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    return path;
}

static const tci_shape_override shapes[2] = {{"input", 3, {B, S, D}}, {"mask", 2, {B, S}}};

static tci_engine *engine(tci_backend backend, tci_precision precision, tci_kernels kernels) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = backend;
    o.shapes = shapes;
    o.num_shapes = 2;
    o.precision = precision;
    o.kernels = kernels;
    tci_engine *e = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path("transformer_block"), &o, &e) == TCI_OK,
                  "%s", tci_last_error());
    return e;
}

/* Output 0 (hidden, fp32) of a run on fixed inputs, copied. */
static float *run_hidden(const tci_engine *e) {
    static float x[B * S * D];
    static int64_t mask[B * S];
    gpu_fill_random(x, B * S * D, 77, -1.0f, 1.0f);
    for (int i = 0; i < B * S; i++) mask[i] = (i + 1) % S != 0; /* the last key masked */
    tci_tensor in[2] = {{"input", TCI_DTYPE_FLOAT, 3, {B, S, D}, x},
                        {"mask", TCI_DTYPE_INT64, 2, {B, S}, mask}};
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    ck_assert_msg(tci_context_run(c, in, 2) == TCI_OK, "%s", tci_last_error());
    tci_tensor y;
    ck_assert(tci_context_output(c, 0, &y) == TCI_OK);
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(tci_tensor_count(&y), B * S * D);
    float *copy = malloc(sizeof(float) * B * S * D);
    memcpy(copy, y.data, sizeof(float) * B * S * D);
    tci_context_destroy(c);
    return copy;
}

typedef struct epilogue_count {
    int gelu_of_div, gelu_op, residual; /* fused GEMM steps of each kind */
    int ours, library;                  /* of those, run by tcinfer's kernels / by cuBLASLt */
} epilogue_count;

static void count_epilogues(size_t index, const char *node, const char *fused, const char *kernel,
                            const char *layout, void *user) {
    (void)index, (void)node, (void)layout;
    epilogue_count *k = user;
    if (strncmp(fused, "MatMul", 6) != 0) return;
    bool of_div = strstr(fused, "+Div+Erf+Add+Mul+Mul (Gelu)") != NULL;
    bool gelu = strstr(fused, "+Gelu") != NULL;
    bool residual = strstr(fused, "MatMul+Add+Add") != NULL;
    if (!of_div && !gelu && !residual) return;
    k->gelu_of_div += of_div;
    k->gelu_op += gelu;
    k->residual += residual;
    k->ours += strncmp(kernel, "wmma", 4) == 0 || strncmp(kernel, "wgmma", 5) == 0;
    k->library += strncmp(kernel, "cublasLt", 8) == 0;
}

static double relative_l2(const float *got, const float *want) {
    tci_tensor g = {"hidden", TCI_DTYPE_FLOAT, 3, {B, S, D}, (void *)got},
               w = {"hidden", TCI_DTYPE_FLOAT, 3, {B, S, D}, (void *)want};
    tci_compare_result r;
    tci_compare_result_init(&r);
    ck_assert(tci_compare(&g, &w, &r) == TCI_OK);
    return r.relative_l2;
}

typedef struct family_case {
    const char *what;
    tci_precision precision;
    tci_kernels kernels;
    bool library; /* the fused steps must run on cuBLASLt, else on tcinfer's kernels */
    double bound; /* relative L2 against the CPU backend */
} family_case;

static const family_case cases[] = {
    {"fp16 tcinfer kernels", TCI_PRECISION_FP16, TCI_KERNELS_WMMA, false, 5e-3},
    {"fp16 cuBLASLt", TCI_PRECISION_FP16, TCI_KERNELS_LIBRARY, true, 5e-3},
    /* bf16: the fp16 bound times 2^3 (8 mantissa bits against 11), as test_gpu_engine_io */
    {"bf16 tcinfer kernels", TCI_PRECISION_BF16, TCI_KERNELS_WMMA, false, 4e-2},
    {"bf16 cuBLASLt", TCI_PRECISION_BF16, TCI_KERNELS_LIBRARY, true, 4e-2},
    {"fp32 baseline (cuBLASLt)", TCI_PRECISION_FP32, TCI_KERNELS_AUTO, true, 1e-4},
};

/* The transformer's fused epilogues against the unfused CPU reference, on one kernel family. */
START_TEST(test_transformer_epilogues) {
    const family_case *k = &cases[_i];
    tci_engine *cpu = engine(TCI_BACKEND_CPU, TCI_PRECISION_FP32, TCI_KERNELS_AUTO);
    float *want = run_hidden(cpu);
    tci_engine *gpu = engine(TCI_BACKEND_GPU, k->precision, k->kernels);
    epilogue_count n = {0, 0, 0, 0, 0};
    ck_assert(tci_engine_layers(gpu, count_epilogues, &n) == TCI_OK);
    /* two blocks: FC1 with the erf chain, FC1 with the Gelu op, four residual projections */
    ck_assert_int_eq(n.gelu_of_div, 1);
    ck_assert_int_eq(n.gelu_op, 1);
    ck_assert_int_eq(n.residual, 4);
    ck_assert_int_eq(k->library ? n.library : n.ours, 6);
    float *got = run_hidden(gpu);
    double rel = relative_l2(got, want);
    printf("%s: relative L2 %.3g against the CPU backend\n", k->what, rel);
    ck_assert_msg(rel > 0 && rel < k->bound, "%s: relative L2 %g (bound %g)", k->what, rel,
                  k->bound);
    free(got);
    free(want);
    tci_engine_destroy(gpu);
    tci_engine_destroy(cpu);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_gemm_epilogue");
    Suite *s = suite_create("gpu_gemm_epilogue");
    TCase *tc = tcase_create("families");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_transformer_epilogues, 0, (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
