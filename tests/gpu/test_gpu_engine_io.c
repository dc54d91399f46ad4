/* GPU tests of the engine's run-time flexibility through the public API, on the generated test
 * models (TCI_TEST_MODELS_DIR): batches below the built one without rebuilding (CNN and
 * transformer, switching back and forth), device-buffer runs in the engine's device formats on
 * a caller's stream (zero-copy), re-capture when the buffers change, model-format inputs in
 * device memory (tci_context_run_device_inputs), the timing cache, and the
 * refusals; engine files (saved, loaded, bit-identical; what TCI_PRECISION_AUTO chose;
 * refusals). */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/engine_file.h"
#include "gpu_harness.h"
#include "tcinfer.h"

static const char *model_path(const char *name) {
    static char path[4096];
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    return path;
}

static tci_engine *gpu_engine(const char *model, const tci_shape_override *shapes, size_t n) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.shapes = shapes;
    o.num_shapes = n;
    tci_engine *e = NULL;
    tci_status st = tci_engine_create_from_file(model_path(model), &o, &e);
    ck_assert_msg(st == TCI_OK, "%s: %s", model, tci_last_error());
    return e;
}

/* Output `index` of the last run, copied (fp32 or int64 as the engine gives it). */
static float *output_copy(tci_context *c, size_t index, int64_t *count) {
    tci_tensor t;
    ck_assert_msg(tci_context_output(c, index, &t) == TCI_OK, "%s", tci_last_error());
    ck_assert_int_eq(t.dtype, TCI_DTYPE_FLOAT);
    *count = tci_tensor_count(&t);
    float *copy = malloc((size_t)*count * sizeof(float) + 1);
    memcpy(copy, t.data, (size_t)*count * sizeof(float));
    return copy;
}

/* got (a batch of rows) against the same rows of want: fp16 engines may pick other kernels
 * for another batch only in the way the rounding falls, so the bound is fp16-sized relative to
 * the output's scale */
static void expect_rows(const float *got, const float *want, int64_t count, const char *what) {
    double scale = 0.0, worst = 0.0;
    for (int64_t i = 0; i < count; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < count; i++) {
        ck_assert_msg(isfinite(got[i]), "%s: element %lld is %g", what, (long long)i, got[i]);
        worst = fmax(worst, fabs((double)got[i] - want[i]));
    }
    ck_assert_msg(worst <= 2e-3 * (scale > 0 ? scale : 1.0),
                  "%s: max abs difference %g against an output scale of %g", what, worst, scale);
}

START_TEST(test_smaller_batches_cnn) {
    enum { B = 4, C = 3, H = 32, W = 32 };
    tci_shape_override shape = {"input", 4, {B, C, H, W}};
    tci_engine *e = gpu_engine("small_cnn", &shape, 1);
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    size_t image = (size_t)C * H * W;
    float *x = malloc(B * image * sizeof(float));
    gpu_fill_random(x, B * image, 11, -1.0f, 1.0f);
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {B, C, H, W}, x};
    ck_assert_msg(tci_context_run(c, &in, 1) == TCI_OK, "%s", tci_last_error());
    int64_t full_count;
    float *full = output_copy(c, 0, &full_count);
    int64_t row = full_count / B;

    /* batch 1 (image 0), batch 3 (images 1..3), then the built batch again, then 3 again */
    const int64_t starts[] = {0, 1, 0, 1}, sizes[] = {1, 3, B, 3};
    for (int r = 0; r < 4; r++) {
        tci_tensor part = {"input", TCI_DTYPE_FLOAT, 4, {sizes[r], C, H, W}, x + starts[r] * image};
        ck_assert_msg(tci_context_run(c, &part, 1) == TCI_OK, "batch %lld: %s",
                      (long long)sizes[r], tci_last_error());
        tci_tensor out;
        ck_assert(tci_context_output(c, 0, &out) == TCI_OK);
        ck_assert_int_eq(out.dims[0], sizes[r]);
        ck_assert_int_eq(tci_tensor_count(&out), sizes[r] * row);
        char what[64];
        snprintf(what, sizeof what, "small_cnn batch %lld", (long long)sizes[r]);
        expect_rows(out.data, full + starts[r] * row, sizes[r] * row, what);
    }

    /* a larger batch, and other dims, are still refused */
    tci_tensor big = {"input", TCI_DTYPE_FLOAT, 4, {B + 1, C, H, W}, x};
    ck_assert_int_eq(tci_context_run(c, &big, 1), TCI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(tci_last_error(), "built for"));
    tci_tensor wide = {"input", TCI_DTYPE_FLOAT, 4, {1, C, H, W - 8}, x};
    ck_assert_int_eq(tci_context_run(c, &wide, 1), TCI_ERR_INVALID_ARGUMENT);
    free(full);
    free(x);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

START_TEST(test_smaller_batches_transformer) {
    enum { B = 3, S = 16, D = 64 };
    tci_shape_override shapes[] = {{"input", 3, {B, S, D}}, {"mask", 2, {B, S}}};
    tci_engine *e = gpu_engine("transformer_block", shapes, 2);
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    float *x = malloc(sizeof(float) * B * S * D);
    int64_t mask[B * S];
    gpu_fill_random(x, (size_t)B * S * D, 5, -1.0f, 1.0f);
    for (int i = 0; i < B * S; i++) mask[i] = (i % S) < S - 1 - (i / S) * 3; /* ragged lengths */
    tci_tensor in[2] = {{"input", TCI_DTYPE_FLOAT, 3, {B, S, D}, x},
                        {"mask", TCI_DTYPE_INT64, 2, {B, S}, mask}};
    ck_assert_msg(tci_context_run(c, in, 2) == TCI_OK, "%s", tci_last_error());
    int64_t n_hidden, n_attn;
    float *hidden = output_copy(c, 0, &n_hidden);
    float *attn = output_copy(c, 1, &n_attn);

    /* batch 2 = sequences 1 and 2 */
    tci_tensor part[2] = {{"input", TCI_DTYPE_FLOAT, 3, {2, S, D}, x + S * D},
                          {"mask", TCI_DTYPE_INT64, 2, {2, S}, mask + S}};
    ck_assert_msg(tci_context_run(c, part, 2) == TCI_OK, "%s", tci_last_error());
    tci_tensor out;
    ck_assert(tci_context_output(c, 0, &out) == TCI_OK);
    ck_assert_int_eq(out.dims[0], 2);
    expect_rows(out.data, hidden + n_hidden / B, 2 * n_hidden / B, "transformer hidden, batch 2");
    ck_assert(tci_context_output(c, 1, &out) == TCI_OK);
    ck_assert_int_eq(out.dims[0], 2);
    expect_rows(out.data, attn + n_attn / B, 2 * n_attn / B, "transformer attention, batch 2");
    free(hidden);
    free(attn);
    free(x);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

/* small_cnn built for batch 64 on cuDNN alone runs every batch 1..64 in one context, each
 * row as at 64: the variants take cuDNN's workspace at their own batch (an algorithm chosen for
 * 64 may need more at a smaller one: Triton's dynamic batches of ResNet-50 failed at 24). */
START_TEST(test_every_smaller_batch_library) {
    enum { B = 64, C = 3, H = 32, W = 32 };
    tci_shape_override shape = {"input", 4, {B, C, H, W}};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.kernels = TCI_KERNELS_LIBRARY;
    o.shapes = &shape;
    o.num_shapes = 1;
    tci_engine *e = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path("small_cnn"), &o, &e) == TCI_OK, "%s",
                  tci_last_error());
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    size_t image = (size_t)C * H * W;
    float *x = malloc(B * image * sizeof(float));
    gpu_fill_random(x, B * image, 13, -1.0f, 1.0f);
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {B, C, H, W}, x};
    ck_assert_msg(tci_context_run(c, &in, 1) == TCI_OK, "%s", tci_last_error());
    int64_t full_count;
    float *full = output_copy(c, 0, &full_count);
    int64_t row = full_count / B;
    for (int64_t n = 1; n <= B; n++) {
        tci_tensor part = {"input", TCI_DTYPE_FLOAT, 4, {n, C, H, W}, x};
        ck_assert_msg(tci_context_run(c, &part, 1) == TCI_OK, "batch %lld: %s", (long long)n,
                      tci_last_error());
        tci_tensor out;
        ck_assert(tci_context_output(c, 0, &out) == TCI_OK);
        ck_assert_int_eq(out.dims[0], n);
        char what[64];
        snprintf(what, sizeof what, "small_cnn batch %lld of 64", (long long)n);
        expect_rows(out.data, full, n * row, what);
    }
    free(full);
    free(x);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

/* The packed-QKV attention model built for batch 3 runs batch 1 and batch 2: the attention
 * fusion folds its movement nodes at batch 1 further than at 3 unless the variant plans like the
 * built graph (ir_graph.like, ir_tensor.variant_dims), which the engine requires (same steps). */
START_TEST(test_smaller_batches_packed_attention) {
    enum { B = 3, S = 16, D = 128 };
    tci_shape_override shapes[] = {{"input", 3, {B, S, D}}, {"mask", 2, {B, S}}};
    tci_engine *e = gpu_engine("packed_attention_block", shapes, 2);
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    float *x = malloc(sizeof(float) * B * S * D);
    int64_t mask[B * S];
    gpu_fill_random(x, (size_t)B * S * D, 6, -1.0f, 1.0f);
    for (int i = 0; i < B * S; i++) mask[i] = (i % S) < S - 1 - (i / S) * 3; /* ragged lengths */
    tci_tensor in[2] = {{"input", TCI_DTYPE_FLOAT, 3, {B, S, D}, x},
                        {"mask", TCI_DTYPE_INT64, 2, {B, S}, mask}};
    ck_assert_msg(tci_context_run(c, in, 2) == TCI_OK, "%s", tci_last_error());
    int64_t n_hidden;
    float *hidden = output_copy(c, 0, &n_hidden);
    for (int64_t n = 1; n <= 2; n++) { /* sequences 1.. n */
        tci_tensor part[2] = {{"input", TCI_DTYPE_FLOAT, 3, {n, S, D}, x + S * D},
                              {"mask", TCI_DTYPE_INT64, 2, {n, S}, mask + S}};
        ck_assert_msg(tci_context_run(c, part, 2) == TCI_OK, "batch %lld: %s", (long long)n,
                      tci_last_error());
        tci_tensor out;
        ck_assert(tci_context_output(c, 0, &out) == TCI_OK);
        ck_assert_int_eq(out.dims[0], n);
        char what[64];
        snprintf(what, sizeof what, "packed attention hidden, batch %lld", (long long)n);
        expect_rows(out.data, hidden + n_hidden / B, n * n_hidden / B, what);
    }
    free(hidden);
    free(x);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

/* NCHW fp32 -> NHWC8 fp16 bits on the host, as a caller's pipeline would produce it */
static void to_nhwc8(const float *x, uint16_t *y, int64_t n, int64_t c, int64_t h, int64_t w) {
    int64_t cp = (c + 7) / 8 * 8;
    memset(y, 0, (size_t)(n * h * w * cp) * 2);
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < h * w; i++) {
                float v = x[(b * c + ch) * h * w + i];
                gpu_to_half(&v, &y[(b * h * w + i) * cp + ch], 1);
            }
}

START_TEST(test_device_buffers) {
    enum { B = 4, C = 3, H = 32, W = 32 };
    tci_shape_override shape = {"input", 4, {B, C, H, W}};
    tci_engine *e = gpu_engine("small_cnn", &shape, 1);
    tci_device_format fin, fout;
    tci_device_format_init(&fin);
    tci_device_format_init(&fout);
    ck_assert_msg(tci_engine_device_format(e, 0, 0, &fin) == TCI_OK, "%s", tci_last_error());
    ck_assert_msg(tci_engine_device_format(e, 1, 0, &fout) == TCI_OK, "%s", tci_last_error());
    ck_assert_int_eq(fin.dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(fin.layout, TCI_DEVICE_NHWC8);
    ck_assert_int_eq(fin.padded_channels, 8);
    ck_assert_uint_eq(fin.bytes, (size_t)B * H * W * 8 * 2);
    ck_assert_int_eq(fout.dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(fout.layout, TCI_DEVICE_DENSE);
    ck_assert_int_eq(fout.rank, 2);
    int64_t classes = fout.dims[1];
    tci_device_format none;
    tci_device_format_init(&none);
    ck_assert_int_eq(tci_engine_device_format(e, 1, 1, &none), TCI_ERR_INVALID_ARGUMENT);

    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    size_t image = (size_t)C * H * W;
    float *x = malloc(B * image * sizeof(float));
    gpu_fill_random(x, B * image, 3, -1.0f, 1.0f);
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {B, C, H, W}, x};
    ck_assert(tci_context_run(c, &in, 1) == TCI_OK);
    int64_t count;
    float *want = output_copy(c, 0, &count);
    ck_assert_int_eq(count, B * classes);

    uint16_t *host_in = malloc(fin.bytes);
    to_nhwc8(x, host_in, B, C, H, W);
    void *d_in = gpu_upload(host_in, fin.bytes);
    void *d_out[2] = {gpu_upload(NULL, fout.bytes), gpu_upload(NULL, fout.bytes)};
    cudaStream_t stream;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    uint16_t *bits = malloc(fout.bytes);
    float *got = malloc((size_t)count * sizeof(float));
    /* the same buffers twice (captured once, replayed), then another output buffer (re-capture),
     * then batch 2 into the first buffer */
    for (int r = 0; r < 4; r++) {
        const void *ins[1] = {d_in};
        void *outs[1] = {d_out[r == 2]};
        int64_t lead[1] = {r == 3 ? 2 : B};
        ck_assert_msg(tci_context_run_device(c, ins, 1, outs, 1, r == 3 ? lead : NULL, stream) ==
                          TCI_OK,
                      "run %d: %s", r, tci_last_error());
        ck_assert_int_eq(cudaStreamSynchronize(stream), cudaSuccess);
        int64_t rows = lead[0];
        ck_assert_int_eq(cudaMemcpy(bits, outs[0], (size_t)(rows * classes) * 2,
                                    cudaMemcpyDeviceToHost),
                         cudaSuccess);
        gpu_from_half(bits, got, (size_t)(rows * classes));
        expect_rows(got, want, rows * classes, "device-buffer run");
    }
    /* a device run's outputs are the caller's buffers: none in the context's memory */
    tci_tensor staged;
    ck_assert_int_eq(tci_context_output_device(c, 0, &staged), TCI_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(tci_last_error(), "no output on the device"), "%s", tci_last_error());

    /* refusals: misaligned or NULL buffers, too large a batch, wrong counts */
    const void *bad_in[1] = {(const char *)d_in + 2};
    void *outs[1] = {d_out[0]};
    ck_assert_int_eq(tci_context_run_device(c, bad_in, 1, outs, 1, NULL, stream),
                     TCI_ERR_INVALID_ARGUMENT);
    const void *ins[1] = {d_in};
    int64_t too_many[1] = {B + 1};
    ck_assert_int_eq(tci_context_run_device(c, ins, 1, outs, 1, too_many, stream),
                     TCI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(tci_context_run_device(c, ins, 1, outs, 0, NULL, stream),
                     TCI_ERR_INVALID_ARGUMENT);
    /* host runs still work after device runs */
    ck_assert(tci_context_run(c, &in, 1) == TCI_OK);
    float *again = output_copy(c, 0, &count);
    expect_rows(again, want, count, "host run after device runs");

    cudaStreamDestroy(stream);
    free(again);
    free(bits);
    free(got);
    free(host_in);
    free(want);
    free(x);
    gpu_free(d_in);
    gpu_free(d_out[0]);
    gpu_free(d_out[1]);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

/* tci_context_run_device_inputs: the host run's dense fp32 input in device memory gives the
 * host run's output bits, at the built batch and at a smaller one; host pointers, allocations
 * smaller than the tensor and dims past the built ones are refused naming what is wrong (a CPU
 * engine's refusal: test_api's test_run_named). */
START_TEST(test_device_inputs) {
    enum { B = 4, C = 3, H = 32, W = 32 };
    tci_shape_override shape = {"input", 4, {B, C, H, W}};
    tci_engine *e = gpu_engine("small_cnn", &shape, 1);
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    size_t bytes = (size_t)B * C * H * W * sizeof(float);
    float *x = malloc(bytes);
    gpu_fill_random(x, bytes / sizeof(float), 5, -1.0f, 1.0f);
    void *d_x = gpu_upload(x, bytes);
    for (int64_t rows = B; rows >= 2; rows -= 2) {
        tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {rows, C, H, W}, x};
        ck_assert(tci_context_run(c, &in, 1) == TCI_OK);
        int64_t count, dcount;
        float *want = output_copy(c, 0, &count);
        in.data = d_x;
        ck_assert_msg(tci_context_run_device_inputs(c, &in, 1) == TCI_OK, "batch %lld: %s",
                      (long long)rows, tci_last_error());
        float *got = output_copy(c, 0, &dcount);
        ck_assert_int_eq(dcount, count);
        ck_assert_msg(memcmp(got, want, (size_t)count * sizeof(float)) == 0,
                      "batch %lld: the device inputs' output differs from the host run's",
                      (long long)rows);
        /* the same output in the device's memory (tci_context_output_device) */
        tci_tensor on_device, on_host;
        ck_assert_msg(tci_context_output_device(c, 0, &on_device) == TCI_OK, "%s",
                      tci_last_error());
        ck_assert(tci_context_output(c, 0, &on_host) == TCI_OK);
        ck_assert_str_eq(on_device.name, on_host.name);
        ck_assert_int_eq(on_device.dtype, on_host.dtype);
        ck_assert_int_eq(on_device.rank, on_host.rank);
        ck_assert_int_eq(on_device.dims[0], rows);
        ck_assert(memcmp(on_device.dims, on_host.dims, sizeof on_host.dims) == 0);
        ck_assert(on_device.data != on_host.data);
        float *copied = malloc((size_t)count * sizeof(float));
        gpu_download(copied, on_device.data, (size_t)count * sizeof(float));
        ck_assert_msg(memcmp(copied, want, (size_t)count * sizeof(float)) == 0,
                      "batch %lld: tci_context_output_device differs from tci_context_output",
                      (long long)rows);
        free(copied);
        tci_nonfinite_report r;
        tci_nonfinite_report_init(&r);
        ck_assert_msg(tci_context_nonfinite(c, &r) == TCI_OK, "%s", tci_last_error());
        ck_assert_uint_eq(r.count, 0);
        free(got);
        free(want);
    }
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {B, C, H, W}, x};
    ck_assert_int_eq(tci_context_run_device_inputs(c, &in, 1), TCI_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(tci_last_error(), "input 'input'") &&
                      strstr(tci_last_error(), "not memory the GPU can address"),
                  "%s", tci_last_error());
    void *half = gpu_upload(NULL, bytes / 2);
    in.data = half;
    ck_assert_int_eq(tci_context_run_device_inputs(c, &in, 1), TCI_ERR_INVALID_ARGUMENT);
    /* a refused run leaves the last outputs on the device; a device run's are the caller's */
    tci_tensor last;
    ck_assert_msg(tci_context_output_device(c, 0, &last) == TCI_OK, "%s", tci_last_error());
    ck_assert_int_eq(last.dims[0], 2);
    ck_assert_msg(strstr(tci_last_error(), "it needs"), "%s", tci_last_error());
    in.data = d_x;
    in.dims[2] = H + 1;
    ck_assert_int_eq(tci_context_run_device_inputs(c, &in, 1), TCI_ERR_INVALID_ARGUMENT);
    gpu_free(half);
    gpu_free(d_x);
    free(x);
    tci_context_destroy(c);
    tci_engine_destroy(e);
}
END_TEST

static tci_engine *cached_engine(const char *cache, tci_gpu_report *report) {
    tci_shape_override shape = {"input", 4, {2, 3, 32, 32}};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.shapes = &shape;
    o.num_shapes = 1;
    o.timing_cache = cache;
    tci_engine *e = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path("small_cnn"), &o, &e) == TCI_OK, "%s",
                  tci_last_error());
    ck_assert(tci_engine_gpu_report(e, report) == TCI_OK);
    return e;
}

/* Runs e once on the single input in (a fresh context) and returns a copy of output 0. */
static float *run_once(const tci_engine *e, const tci_tensor *in, int64_t *count) {
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    ck_assert_msg(tci_context_run(c, in, 1) == TCI_OK, "%s", tci_last_error());
    float *y = output_copy(c, 0, count);
    tci_context_destroy(c);
    return y;
}

static float *run_small_cnn(tci_engine *e, int64_t *count) {
    float x[2 * 3 * 32 * 32];
    gpu_fill_random(x, sizeof x / sizeof x[0], 21, -1.0f, 1.0f);
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {2, 3, 32, 32}, x};
    return run_once(e, &in, count);
}

static int count_lines(const char *path, char *first, size_t size) {
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (n++ == 0) snprintf(first, size, "%s", line);
    fclose(f);
    return n;
}

/* The first build times every conv / GEMM layer and writes the cache; the second takes every
 * choice from it and computes the same outputs; a cache from another machine (another header)
 * is not used and is replaced. */
START_TEST(test_timing_cache) {
    char path[] = "/tmp/tci_timing_cache_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    remove(path); /* a missing file is an empty cache */
    tci_gpu_report r1, r2, r3;
    tci_gpu_report_init(&r1);
    tci_gpu_report_init(&r2);
    tci_gpu_report_init(&r3);
    tci_engine *e1 = cached_engine(path, &r1);
    ck_assert_uint_gt(r1.layers_timed, 0);
    ck_assert_uint_eq(r1.layers_cached, 0);
    char first[1024];
    ck_assert_int_eq(count_lines(path, first, sizeof first), (int)r1.layers_timed + 1);
    ck_assert_msg(strncmp(first, "tcinfer timing cache 1\t", 23) == 0, "header '%s'", first);
    int64_t n1, n2;
    float *y1 = run_small_cnn(e1, &n1);

    tci_engine *e2 = cached_engine(path, &r2);
    ck_assert_uint_eq(r2.layers_timed, 0);
    ck_assert_uint_eq(r2.layers_cached, r1.layers_timed);
    float *y2 = run_small_cnn(e2, &n2);
    ck_assert_int_eq(n1, n2);
    expect_rows(y2, y1, n1, "outputs with the cached choices");

    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "tcinfer timing cache 1\tsome other GPU\tsm_00\tcudart 0\tcudnn 0\tcublasLt 0\n");
    fprintf(f, "whatever\twmma 0\t1\t1\n");
    fclose(f);
    tci_engine *e3 = cached_engine(path, &r3);
    ck_assert_uint_eq(r3.layers_cached, 0);
    ck_assert_uint_eq(r3.layers_timed, r1.layers_timed);
    char again[1024];
    ck_assert_int_eq(count_lines(path, again, sizeof again), (int)r1.layers_timed + 1);
    ck_assert_str_eq(again, first);

    free(y1);
    free(y2);
    tci_engine_destroy(e1);
    tci_engine_destroy(e2);
    tci_engine_destroy(e3);
    remove(path);
}
END_TEST

/* ---- engine files ---- */

typedef struct saved_case {
    const char *model;
    tci_shape_override shapes[2];
    size_t num_shapes;
    tci_precision precision;
    const char *fp32_layers[3];
} saved_case;

static const saved_case saved_cases[] = {
    {"resnet_mini", {{0}}, 0, TCI_PRECISION_FP16, {NULL}},
    {"mobilenetv2_mini", {{0}}, 0, TCI_PRECISION_FP16, {NULL}},
    {"transformer_block", {{"input", 3, {2, 8, 64}}, {"mask", 2, {2, 8}}}, 2, TCI_PRECISION_FP16,
     {"Softmax", NULL}},
    {"small_cnn", {{"input", 4, {2, 3, 32, 32}}}, 1, TCI_PRECISION_TF32, {NULL}},
    {"mobilenetv2_mini", {{0}}, 0, TCI_PRECISION_BF16, {NULL}},
};

/* Runs e on inputs made from its input infos (floats in [-1, 1), masks of ones with the last
 * position masked) and returns every output's bytes, concatenated. */
static unsigned char *run_all(const tci_engine *e, size_t *bytes) {
    size_t ni = tci_engine_input_count(e), no = tci_engine_output_count(e);
    tci_tensor in[4];
    ck_assert_uint_le(ni, 4);
    for (size_t i = 0; i < ni; i++) {
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        ck_assert(tci_engine_input_info(e, i, &info) == TCI_OK);
        int64_t count = 1;
        for (int d = 0; d < info.rank; d++) count *= info.dims[d];
        in[i] = (tci_tensor){info.name, info.dtype, info.rank, {0}, NULL};
        memcpy(in[i].dims, info.dims, sizeof info.dims);
        in[i].data = malloc((size_t)count * 8);
        if (info.dtype == TCI_DTYPE_FLOAT) {
            gpu_fill_random(in[i].data, (size_t)count, 31 + i, -1.0f, 1.0f);
        } else {
            ck_assert_int_eq(info.dtype, TCI_DTYPE_INT64);
            for (int64_t k = 0; k < count; k++)
                ((int64_t *)in[i].data)[k] = (k + 1) % info.dims[info.rank - 1] != 0;
        }
    }
    tci_context *c = NULL;
    ck_assert(tci_context_create(e, &c) == TCI_OK);
    ck_assert_msg(tci_context_run(c, in, ni) == TCI_OK, "%s", tci_last_error());
    unsigned char *all = NULL;
    *bytes = 0;
    for (size_t o = 0; o < no; o++) {
        tci_tensor t;
        ck_assert(tci_context_output(c, o, &t) == TCI_OK);
        size_t n = (size_t)tci_tensor_count(&t) * tci_dtype_size(t.dtype);
        all = realloc(all, *bytes + n);
        memcpy(all + *bytes, t.data, n);
        *bytes += n;
    }
    tci_context_destroy(c);
    for (size_t i = 0; i < ni; i++) free(in[i].data);
    return all;
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* Built, saved, loaded: the loaded engine times nothing, runs the same kernels, and gives
 * bit-identical outputs (the stored fp16 weights are the values the GPU computed with); its
 * file is smaller than the fp32 parameters wherever the weights are fp16 convolutions. */
START_TEST(test_engine_file) {
    const saved_case *k = &saved_cases[_i];
    char path[] = "/tmp/tci_engine_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.shapes = k->shapes;
    o.num_shapes = k->num_shapes;
    o.precision = k->precision;
    o.fp32_layers = k->fp32_layers[0] ? k->fp32_layers : NULL;
    tci_engine *built = NULL, *loaded = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path(k->model), &o, &built) == TCI_OK, "%s: %s",
                  k->model, tci_last_error());
    ck_assert_msg(tci_engine_save(built, path) == TCI_OK, "%s: %s", k->model, tci_last_error());
    ck_assert_msg(tci_engine_load(path, NULL, &loaded) == TCI_OK, "%s: %s", k->model,
                  tci_last_error());
    tci_gpu_report rb, rl;
    tci_gpu_report_init(&rb);
    tci_gpu_report_init(&rl);
    ck_assert(tci_engine_gpu_report(built, &rb) == TCI_OK);
    ck_assert(tci_engine_gpu_report(loaded, &rl) == TCI_OK);
    ck_assert_uint_gt(rb.layers_timed, 0);
    ck_assert_uint_eq(rl.layers_timed, 0);
    ck_assert_uint_eq(rl.layers_cached, rb.layers_timed);
    ck_assert_uint_eq(rl.num_steps, rb.num_steps);
    ck_assert_uint_eq(rl.arena_bytes, rb.arena_bytes);
    ck_assert_uint_eq(rl.weight_bytes, rb.weight_bytes);
    size_t nb, nl;
    unsigned char *yb = run_all(built, &nb), *yl = run_all(loaded, &nl);
    ck_assert_uint_eq(nl, nb);
    ck_assert_msg(memcmp(yb, yl, nb) == 0, "%s: the loaded engine's outputs differ", k->model);
    if (strcmp(k->model, "small_cnn") == 0) { /* built for batch 2: batch 1 re-plans alike */
        float x[3 * 32 * 32];
        gpu_fill_random(x, sizeof x / sizeof x[0], 41, -1.0f, 1.0f);
        tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {1, 3, 32, 32}, x};
        int64_t c1[2];
        float *y1[2] = {run_once(built, &in, &c1[0]), run_once(loaded, &in, &c1[1])};
        ck_assert_int_eq(c1[1], c1[0]);
        ck_assert_msg(memcmp(y1[0], y1[1], (size_t)c1[0] * sizeof(float)) == 0,
                      "batch 1 of the loaded engine differs");
        free(y1[0]);
        free(y1[1]);
    }
    tci_engine_stats stats;
    tci_engine_stats_init(&stats);
    ck_assert(tci_engine_stats_get(built, &stats) == TCI_OK);
    long size = file_size(path);
    printf("%s: engine file %ld bytes, fp32 parameters %lld bytes\n", k->model, size,
           (long long)stats.parameter_bytes);
    if (k->precision == TCI_PRECISION_FP16 && strcmp(k->model, "transformer_block") != 0)
        ck_assert_msg(size < stats.parameter_bytes * 3 / 4, "%s: %ld bytes", k->model, size);
    free(yb);
    free(yl);
    tci_engine_destroy(loaded);
    tci_engine_destroy(built);
    remove(path);
}
END_TEST

/* A file from another machine, a damaged one, and options the file fixes are refused. */
START_TEST(test_engine_file_refusals) {
    char path[] = "/tmp/tci_engine_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    tci_engine *e = gpu_engine("small_cnn", (tci_shape_override[]){{"input", 4, {1, 3, 32, 32}}}, 1);
    ck_assert_msg(tci_engine_save(e, path) == TCI_OK, "%s", tci_last_error());
    tci_engine_destroy(e);
    e = NULL;
    engine_file f;
    ck_assert(engine_file_read(path, &f) == TCI_OK);
    free(f.machine);
    f.machine = strdup("NVIDIA A100-SXM4-80GB\tsm_80\tcudart 12040\tcudnn 90100\tcublasLt 120402");
    ck_assert(engine_file_write(path, &f) == TCI_OK);
    engine_file_free(&f);
    ck_assert_int_eq(tci_engine_load(path, NULL, &e), TCI_ERR_UNSUPPORTED);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(tci_last_error(), "was built for NVIDIA A100") &&
                      strstr(tci_last_error(), "rebuild it"),
                  "%s", tci_last_error());
    FILE *fp = fopen(path, "r+b");
    fseek(fp, 200, SEEK_SET);
    fputc('!', fp);
    fclose(fp);
    ck_assert_int_eq(tci_engine_load(path, NULL, &e), TCI_ERR_PARSE);
    ck_assert_msg(strstr(tci_last_error(), "checksum"), "%s", tci_last_error());
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.no_cuda_graph = 1;
    o.kernels = TCI_KERNELS_WMMA;
    ck_assert_int_eq(tci_engine_load(path, &o, &e), TCI_ERR_INVALID_ARGUMENT);
    remove(path);
}
END_TEST

typedef struct fp32_seen {
    char text[512];
} fp32_seen;

static void see_fp32_layer(const char *layer, int automatic, void *user) {
    fp32_seen *s = user;
    size_t at = strlen(s->text);
    snprintf(s->text + at, sizeof s->text - at, "%s%s;", layer, automatic ? "(auto)" : "");
}

/* A TCI_PRECISION_AUTO engine saved and loaded still says what the search chose: its fp32
 * layers with the same automatic flags, the error it reached (the same bits) and its target; a
 * file of format 1 (written without that record) loads as an engine the search did not build. */
START_TEST(test_engine_file_auto) {
    char path[] = "/tmp/tci_engine_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    tci_shape_override shape = {"input", 4, {2, 3, 32, 32}};
    o.shapes = &shape;
    o.num_shapes = 1;
    o.precision = TCI_PRECISION_AUTO;
    o.accuracy_target = 0.5; /* met by the fp16 engine as it is: the search ends at round 1 */
    tci_engine *built = NULL, *loaded = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path("small_cnn"), &o, &built) == TCI_OK,
                  "%s", tci_last_error());
    ck_assert_msg(tci_engine_save(built, path) == TCI_OK, "%s", tci_last_error());
    ck_assert_msg(tci_engine_load(path, NULL, &loaded) == TCI_OK, "%s", tci_last_error());
    double eb = -1, el = -2, tb = -1, tl = -2;
    ck_assert(tci_engine_auto_error(built, &eb) == TCI_OK);
    ck_assert(tci_engine_auto_target(built, &tb) == TCI_OK);
    ck_assert_msg(tci_engine_auto_error(loaded, &el) == TCI_OK, "%s", tci_last_error());
    ck_assert_msg(tci_engine_auto_target(loaded, &tl) == TCI_OK, "%s", tci_last_error());
    ck_assert_mem_eq(&el, &eb, sizeof eb);
    ck_assert_double_eq(tb, 0.5);
    ck_assert_double_eq(tl, 0.5);
    fp32_seen sb = {""}, sl = {""};
    ck_assert(tci_engine_fp32_layers(built, see_fp32_layer, &sb) == TCI_OK);
    ck_assert(tci_engine_fp32_layers(loaded, see_fp32_layer, &sl) == TCI_OK);
    ck_assert_str_eq(sl.text, sb.text);
    tci_engine_destroy(loaded);
    loaded = NULL;
    /* the same file without the auto record: format 1, as files written before it */
    engine_file f;
    ck_assert(engine_file_read(path, &f) == TCI_OK);
    ck_assert_int_eq(f.has_auto, 1);
    f.has_auto = 0;
    ck_assert(engine_file_write(path, &f) == TCI_OK);
    engine_file_free(&f);
    ck_assert_msg(tci_engine_load(path, NULL, &loaded) == TCI_OK, "%s", tci_last_error());
    ck_assert_int_eq(tci_engine_auto_error(loaded, &el), TCI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(tci_engine_auto_target(loaded, &tl), TCI_ERR_INVALID_ARGUMENT);
    tci_engine_destroy(loaded);
    tci_engine_destroy(built);
    remove(path);
}
END_TEST

typedef struct kernel_count {
    int gemm, tf32;
} kernel_count;

static void count_tf32(size_t index, const char *node, const char *fused, const char *kernel,
                       const char *layout, void *user) {
    (void)index, (void)node, (void)layout;
    kernel_count *k = user;
    k->gemm += strncmp(fused, "Gemm", 4) == 0 || strncmp(fused, "MatMul", 6) == 0;
    k->tf32 += strstr(kernel, "wmma gemm tf32 16x16x8") != NULL;
}

/* --precision tf32 with --kernels wmma: every GEMM runs on the WMMA tf32 16x16x8 kernel, within
 * TF32's error of the fp32 engine; in auto mode the kernel is a timed candidate. */
START_TEST(test_tf32_wmma_gemm) {
    tci_shape_override shapes[2] = {{"input", 3, {2, 8, 64}}, {"mask", 2, {2, 8}}};
    tci_engine *e[3] = {NULL, NULL, NULL};
    const tci_precision precision[3] = {TCI_PRECISION_FP32, TCI_PRECISION_TF32, TCI_PRECISION_TF32};
    const tci_kernels kernels[3] = {TCI_KERNELS_AUTO, TCI_KERNELS_WMMA, TCI_KERNELS_AUTO};
    unsigned char *y[3];
    size_t n[3];
    for (int i = 0; i < 3; i++) {
        tci_engine_options o;
        tci_engine_options_init(&o);
        o.backend = TCI_BACKEND_GPU;
        o.shapes = shapes;
        o.num_shapes = 2;
        o.precision = precision[i];
        o.kernels = kernels[i];
        ck_assert_msg(tci_engine_create_from_file(model_path("transformer_block"), &o, &e[i]) == TCI_OK,
                      "%s", tci_last_error());
        y[i] = run_all(e[i], &n[i]);
        ck_assert_uint_eq(n[i], n[0]);
    }
    kernel_count k = {0, 0};
    ck_assert(tci_engine_layers(e[1], count_tf32, &k) == TCI_OK);
    ck_assert_int_gt(k.gemm, 0);
    ck_assert_int_eq(k.tf32, k.gemm);
    /* the first output (hidden, fp32) against the fp32 engine */
    tci_tensor_info info;
    tci_tensor_info_init(&info);
    ck_assert(tci_engine_output_info(e[0], 0, &info) == TCI_OK);
    for (int i = 1; i < 3; i++) {
        tci_tensor got = {info.name, TCI_DTYPE_FLOAT, info.rank, {0}, y[i]},
                   want = {info.name, TCI_DTYPE_FLOAT, info.rank, {0}, y[0]};
        memcpy(got.dims, info.dims, sizeof info.dims);
        memcpy(want.dims, info.dims, sizeof info.dims);
        tci_compare_result r;
        tci_compare_result_init(&r);
        ck_assert(tci_compare(&got, &want, &r) == TCI_OK);
        ck_assert_msg(r.relative_l2 > 0 && r.relative_l2 < 5e-4, "tf32 %s: rel L2 %g",
                      i == 1 ? "wmma" : "auto", r.relative_l2);
    }
    for (int i = 0; i < 3; i++) {
        free(y[i]);
        tci_engine_destroy(e[i]);
    }
}
END_TEST

typedef struct bf16_count {
    int tuned, wmma, bf16, plain;
} bf16_count;

static void count_bf16(size_t index, const char *node, const char *fused, const char *kernel,
                       const char *layout, void *user) {
    (void)index, (void)node;
    bf16_count *k = user;
    bool tuned = (strncmp(fused, "Conv", 4) == 0 && strncmp(fused, "ConvTranspose", 13) != 0) ||
                 strncmp(fused, "Gemm", 4) == 0 || strncmp(fused, "MatMul", 6) == 0;
    /* depthwise convolutions run on their own kernel in every mode, ConvTranspose on cuDNN */
    if (tuned && !strstr(kernel, "depthwise")) {
        k->tuned++;
        k->wmma += strncmp(kernel, "wmma", 4) == 0 || strncmp(kernel, "wgmma", 5) == 0;
    }
    k->bf16 += strstr(layout, "bf16") != NULL;
    /* fp16, or not a float (int64 masks, bool): an fp32 engine has only the latter */
    k->plain += strcmp(layout, "NHWC8") == 0 || strcmp(layout, "dense") == 0;
}

/* --precision bf16 in each kernel mode, against the fp32 engine: every float tensor bf16, the
 * forced families really run (WMMA's bf16 kernels on every layer the fp16 ones take, cuDNN /
 * cuBLASLt alone), and the error is bf16's: 8 mantissa bits against fp16's 11, so the fp16
 * bound of 5e-3 times 2^3. */
START_TEST(test_bf16_engine) {
    static const struct {
        const char *model;
        tci_shape_override shapes[2];
        size_t num_shapes;
    } models[] = {
        {"resnet_mini", {{0}}, 0},
        {"mobilenetv2_mini", {{0}}, 0},
        {"transformer_block", {{"input", 3, {2, 8, 64}}, {"mask", 2, {2, 8}}}, 2},
        {"segmentation_decoder", {{0}}, 0},
    };
    const tci_kernels kernels[3] = {TCI_KERNELS_AUTO, TCI_KERNELS_WMMA, TCI_KERNELS_LIBRARY};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        /* the layers the fp16 WMMA kernels take (a GEMM with rows not a multiple of 8 is not
         * one: cuBLASLt keeps it) */
        tci_engine_options o16;
        tci_engine_options_init(&o16);
        o16.backend = TCI_BACKEND_GPU;
        o16.shapes = models[m].shapes;
        o16.num_shapes = models[m].num_shapes;
        o16.kernels = TCI_KERNELS_WMMA;
        tci_engine *fp16 = NULL;
        ck_assert_msg(tci_engine_create_from_file(model_path(models[m].model), &o16, &fp16) == TCI_OK,
                      "%s: %s", models[m].model, tci_last_error());
        bf16_count k16 = {0, 0, 0, 0};
        ck_assert(tci_engine_layers(fp16, count_bf16, &k16) == TCI_OK);
        tci_engine_destroy(fp16);
        tci_engine *e[4] = {NULL, NULL, NULL, NULL};
        unsigned char *y[4];
        size_t n[4];
        for (int i = 0; i < 4; i++) {
            tci_engine_options o;
            tci_engine_options_init(&o);
            o.backend = TCI_BACKEND_GPU;
            o.shapes = models[m].shapes;
            o.num_shapes = models[m].num_shapes;
            o.precision = i == 0 ? TCI_PRECISION_FP32 : TCI_PRECISION_BF16;
            o.kernels = i == 0 ? TCI_KERNELS_AUTO : kernels[i - 1];
            ck_assert_msg(tci_engine_create_from_file(model_path(models[m].model), &o, &e[i]) ==
                              TCI_OK,
                          "%s: %s", models[m].model, tci_last_error());
            y[i] = run_all(e[i], &n[i]);
            ck_assert_uint_eq(n[i], n[0]);
        }
        bf16_count k32 = {0, 0, 0, 0};
        ck_assert(tci_engine_layers(e[0], count_bf16, &k32) == TCI_OK);
        for (int i = 1; i < 4; i++) {
            bf16_count k = {0, 0, 0, 0};
            ck_assert(tci_engine_layers(e[i], count_bf16, &k) == TCI_OK);
            ck_assert_msg(k.bf16 > 0 && k.plain == k32.plain,
                          "%s: %d bf16 steps, %d fp16 or non-float ones (fp32 engine: %d)",
                          models[m].model, k.bf16, k.plain, k32.plain);
            ck_assert_int_gt(k.tuned, 0);
            if (kernels[i - 1] == TCI_KERNELS_WMMA) ck_assert_int_eq(k.wmma, k16.wmma);
            if (kernels[i - 1] == TCI_KERNELS_LIBRARY) ck_assert_int_eq(k.wmma, 0);
            /* the first output, fp32 on the host */
            tci_tensor_info info;
            tci_tensor_info_init(&info);
            ck_assert(tci_engine_output_info(e[0], 0, &info) == TCI_OK);
            tci_tensor got = {info.name, TCI_DTYPE_FLOAT, info.rank, {0}, y[i]},
                       want = {info.name, TCI_DTYPE_FLOAT, info.rank, {0}, y[0]};
            memcpy(got.dims, info.dims, sizeof info.dims);
            memcpy(want.dims, info.dims, sizeof info.dims);
            tci_compare_result r;
            tci_compare_result_init(&r);
            ck_assert(tci_compare(&got, &want, &r) == TCI_OK);
            printf("%s bf16 %s: rel L2 %.3g against fp32 (%d of %d tuned layers on WMMA)\n",
                   models[m].model, i == 1 ? "auto" : i == 2 ? "wmma" : "library", r.relative_l2,
                   k.wmma, k.tuned);
            ck_assert_msg(r.relative_l2 > 0 && r.relative_l2 < 4e-2, "%s bf16: rel L2 %g",
                          models[m].model, r.relative_l2);
        }
        for (int i = 0; i < 4; i++) {
            free(y[i]);
            tci_engine_destroy(e[i]);
        }
    }
}
END_TEST

START_TEST(test_device_format_needs_gpu_engine) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    tci_shape_override shape = {"input", 4, {1, 3, 32, 32}};
    o.shapes = &shape;
    o.num_shapes = 1;
    tci_engine *e = NULL;
    ck_assert(tci_engine_create_from_file(model_path("small_cnn"), &o, &e) == TCI_OK);
    tci_device_format f;
    tci_device_format_init(&f);
    ck_assert_int_eq(tci_engine_device_format(e, 0, 0, &f), TCI_ERR_INVALID_ARGUMENT);
    tci_engine_destroy(e);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_engine_io");
    Suite *s = suite_create("gpu_engine_io");
    TCase *tc = tcase_create("engine_io");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_smaller_batches_cnn);
    tcase_add_test(tc, test_smaller_batches_transformer);
    tcase_add_test(tc, test_smaller_batches_packed_attention);
    tcase_add_test(tc, test_every_smaller_batch_library);
    tcase_add_test(tc, test_device_buffers);
    tcase_add_test(tc, test_device_inputs);
    tcase_add_test(tc, test_timing_cache);
    tcase_add_loop_test(tc, test_engine_file, 0, (int)(sizeof saved_cases / sizeof saved_cases[0]));
    tcase_add_test(tc, test_engine_file_refusals);
    tcase_add_test(tc, test_engine_file_auto);
    tcase_add_test(tc, test_tf32_wmma_gemm);
    tcase_add_test(tc, test_bf16_engine);
    tcase_add_test(tc, test_device_format_needs_gpu_engine);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
