/* GPU faults through the public API (docs/robustness.md): the device running out of memory at
 * build or context creation is TCI_ERR_OUT_OF_MEMORY with the bytes asked and available, frees
 * what it took, and the process goes on; NULL, host and too-small device buffers are errors;
 * the same input gives bit-identical outputs across runs and contexts; a sticky CUDA error puts
 * a context into TCI_ERR_DEVICE_LOST, returned at once by every later call (last: it breaks the
 * process's CUDA context). Runs the generated test models (TCI_TEST_MODELS_DIR). */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault_kernel.h"
#include "gpu_harness.h"
#include "tcinfer.h"

static const char *model_path(const char *name) {
    static char path[4096];
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    return path;
}

/* small_cnn (input N x 3 x 32 x 32) on the GPU at `batch`; the status of creating it. */
static tci_status small_cnn(int64_t batch, tci_engine **out) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    tci_shape_override shape = {"input", 4, {batch, 3, 32, 32}};
    o.shapes = &shape;
    o.num_shapes = 1;
    o.max_tensor_elements = INT64_MAX; /* the device's memory, not this limit, is what is tested */
    *out = NULL;
    return tci_engine_create_from_file(model_path("small_cnn"), &o, out);
}

static size_t free_bytes(void) {
    size_t avail = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&avail, &total), cudaSuccess);
    return avail;
}

static tci_tensor input_of(int64_t batch, float *data) {
    tci_tensor t = {.name = "input", .dtype = TCI_DTYPE_FLOAT, .rank = 4,
                    .dims = {batch, 3, 32, 32}, .data = data};
    gpu_fill_random(data, (size_t)(batch * 3 * 32 * 32), 7, -1.0f, 1.0f);
    return t;
}

/* Most of the GPU's memory taken, then an absurd batch: building (the tuning arena) or the
 * context (its arena) runs out; afterwards everything it took is back and batch 2 runs. */
START_TEST(test_out_of_memory_at_build_or_context) {
    /* a first engine and run load the libraries' kernels (lazily, into device memory), so that
     * the comparison below sees only what the failed build takes */
    tci_engine *e = NULL;
    tci_context *c = NULL;
    float *x = malloc(2 * 3 * 32 * 32 * sizeof(float));
    tci_tensor in = input_of(2, x);
    ck_assert_tci_ok(small_cnn(2, &e));
    ck_assert_tci_ok(tci_context_create(e, &c));
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    tci_context_destroy(c);
    tci_engine_destroy(e);
    e = NULL;
    c = NULL;
    size_t before = free_bytes();
    void *hog = NULL;
    size_t leave = (size_t)512 << 20;
    ck_assert_int_eq(cudaMalloc(&hog, before - leave), cudaSuccess);
    tci_status st = small_cnn(1 << 16, &e);
    if (st == TCI_OK) st = tci_context_create(e, &c);
    ck_assert_msg(st == TCI_ERR_OUT_OF_MEMORY, "expected out of memory, got %s: %s",
                  tci_status_string(st), tci_last_error());
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(tci_last_error(), "bytes asked") && strstr(tci_last_error(), "available"),
                  "the message names no sizes: %s", tci_last_error());
    tci_engine_destroy(e);
    ck_assert_int_eq(cudaFree(hog), cudaSuccess);
    size_t after = free_bytes();
    /* what the failed build took is back (the libraries' handles may keep a little) */
    ck_assert_msg(after + ((size_t)64 << 20) >= before, "free memory %zu before, %zu after", before,
                  after);
    ck_assert_tci_ok(small_cnn(2, &e));
    ck_assert_tci_ok(tci_context_create(e, &c));
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    tci_context_destroy(c);
    tci_engine_destroy(e);
    free(x);
}
END_TEST

START_TEST(test_bad_buffers_are_errors) {
    tci_engine *e = NULL;
    ck_assert_tci_ok(small_cnn(2, &e));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    tci_tensor in = {.dtype = TCI_DTYPE_FLOAT, .rank = 4, .dims = {2, 3, 32, 32}, .data = NULL};
    ck_assert_tci_error(tci_context_run(c, &in, 1), TCI_ERR_INVALID_ARGUMENT, "has no data");
    tci_device_format fin, fout;
    tci_device_format_init(&fin);
    tci_device_format_init(&fout);
    ck_assert_tci_ok(tci_engine_device_format(e, 0, 0, &fin));
    ck_assert_tci_ok(tci_engine_device_format(e, 1, 0, &fout));
    void *din = gpu_upload(NULL, fin.bytes), *dout = gpu_upload(NULL, fout.bytes);
    const void *ins[1] = {din};
    void *outs[1] = {NULL};
    ck_assert_tci_error(tci_context_run_device(c, ins, 1, outs, 1, NULL, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "is NULL");
    void *host = aligned_alloc(64, fout.bytes + 64);
    outs[0] = host;
    ck_assert_tci_error(tci_context_run_device(c, ins, 1, outs, 1, NULL, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "not memory the GPU can address");
    void *small = gpu_upload(NULL, 64);
    const void *small_in[1] = {small};
    outs[0] = dout;
    ck_assert_tci_error(tci_context_run_device(c, small_in, 1, outs, 1, NULL, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "to the end of its allocation; it needs");
    ck_assert_tci_ok(tci_context_run_device(c, ins, 1, outs, 1, NULL, NULL));
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    gpu_free(small);
    gpu_free(din);
    gpu_free(dout);
    free(host);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

static void *output_bytes(tci_context *c, size_t *bytes) {
    tci_tensor t;
    ck_assert_tci_ok(tci_context_output(c, 0, &t));
    *bytes = (size_t)tci_tensor_count(&t) * tci_dtype_size(t.dtype);
    void *copy = malloc(*bytes);
    memcpy(copy, t.data, *bytes);
    return copy;
}

/* Same input: bit-identical outputs across runs of a context and across contexts. */
START_TEST(test_bit_identical_runs) {
    tci_engine *e = NULL;
    ck_assert_tci_ok(small_cnn(2, &e));
    tci_context *c1 = NULL, *c2 = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c1));
    ck_assert_tci_ok(tci_context_create(e, &c2));
    float *x = malloc(2 * 3 * 32 * 32 * sizeof(float));
    tci_tensor in = input_of(2, x);
    size_t n1, n2, n3;
    ck_assert_tci_ok(tci_context_run(c1, &in, 1));
    void *a = output_bytes(c1, &n1);
    ck_assert_tci_ok(tci_context_run(c1, &in, 1));
    void *b = output_bytes(c1, &n2);
    ck_assert_tci_ok(tci_context_run(c2, &in, 1));
    void *d = output_bytes(c2, &n3);
    ck_assert(n1 == n2 && n1 == n3);
    ck_assert_msg(memcmp(a, b, n1) == 0, "two runs of one context differ");
    ck_assert_msg(memcmp(a, d, n1) == 0, "two contexts differ");
    free(a);
    free(b);
    free(d);
    free(x);
    tci_context_destroy(c1);
    tci_context_destroy(c2);
    tci_engine_destroy(e);
}
END_TEST

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Must run last: the fault breaks the process's CUDA context for good. */
START_TEST(test_sticky_error_loses_the_context) {
    tci_engine *e = NULL;
    ck_assert_tci_ok(small_cnn(2, &e));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    float *x = malloc(2 * 3 * 32 * 32 * sizeof(float));
    tci_tensor in = input_of(2, x);
    ck_assert_tci_ok(tci_context_run(c, &in, 1));
    ck_assert_int_ne(gpu_test_fault(), cudaSuccess);
    ck_assert_tci_error(tci_context_run(c, &in, 1), TCI_ERR_DEVICE_LOST, "restart the process");
    double t0 = now_ms();
    ck_assert_tci_error(tci_context_run(c, &in, 1), TCI_ERR_DEVICE_LOST, "the GPU context is lost");
    ck_assert_msg(now_ms() - t0 < 5.0, "a lost context took %.1f ms to answer", now_ms() - t0);
    tci_tensor out;
    ck_assert_tci_error(tci_context_output(c, 0, &out), TCI_ERR_DEVICE_LOST, "lost");
    tci_nonfinite_report r;
    tci_nonfinite_report_init(&r);
    ck_assert_tci_error(tci_context_nonfinite(c, &r), TCI_ERR_DEVICE_LOST, "lost");
    float ms[2];
    ck_assert_tci_error(tci_context_benchmark(c, 2, 0, ms), TCI_ERR_DEVICE_LOST, "lost");
    tci_context *c2 = NULL;
    ck_assert_tci_error(tci_context_create(e, &c2), TCI_ERR_DEVICE_LOST, "restart the process");
    ck_assert_ptr_null(c2);
    tci_context_destroy(c);
    tci_engine_destroy(e);
    free(x);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_faults");
    Suite *s = suite_create("gpu_faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_out_of_memory_at_build_or_context);
    tcase_add_test(tc, test_bad_buffers_are_errors);
    tcase_add_test(tc, test_bit_identical_runs);
    tcase_add_test(tc, test_sticky_error_loses_the_context);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
