/* tci_engine_options.device on the GPU, on the generated small_cnn (TCI_TEST_MODELS_DIR):
 * device 0 given explicitly runs as the default does (the same bits); a device past the last is
 * TCI_ERR_NO_DEVICE naming the count; every call gives the caller's current device back. With
 * two GPUs or more (skipped, visibly, with one): an engine on device 1 runs there (its weights,
 * its context's buffers and its device-buffer outputs report device 1 to
 * cudaPointerGetAttributes), gives device 0's outputs, refuses a stream or buffers of device 0,
 * and an engine file and a timing cache written on device 0 serve device 1 of the same model. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/internal.h"
#include "graph/gpu/gpu_internal.h"
#include "gpu_harness.h"
#include "tcinfer.h"

enum { B = 2, C = 3, H = 32, W = 32 };

static const char *model_path(void) {
    static char path[4096];
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    snprintf(path, sizeof path, "%s/small_cnn.onnx", dir);
    return path;
}

static const tci_shape_override shape = {"input", 4, {B, C, H, W}};

/* A GPU engine of small_cnn on device (-1: the option left at its default), its kernels from
 * (and recorded in) the timing cache at cache_path when that is not NULL. */
static tci_engine *engine_on(int device, const char *cache_path) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.shapes = &shape;
    o.num_shapes = 1;
    o.timing_cache = cache_path;
    if (device >= 0) o.device = device;
    tci_engine *e = NULL;
    ck_assert_msg(tci_engine_create_from_file(model_path(), &o, &e) == TCI_OK, "device %d: %s",
                  device, tci_last_error());
    return e;
}

static int current_device(void) {
    int d = -1;
    ck_assert_int_eq(cudaGetDevice(&d), cudaSuccess);
    return d;
}

static void set_device(int d) { ck_assert_int_eq(cudaSetDevice(d), cudaSuccess); }

/* The caller's device is still `want` after the call just made (what). */
static void expect_current(int want, const char *what) {
    int got = current_device();
    ck_assert_msg(got == want, "after %s the current device is %d; the caller's was %d", what, got,
                  want);
}

static float input[B * C * H * W];

/* Runs e once on the fixed input and returns a copy of output 0 (count in *n). */
static float *run_copy(const tci_engine *e, int caller, size_t *n) {
    tci_context *c = NULL;
    ck_assert_msg(tci_context_create(e, &c) == TCI_OK, "%s", tci_last_error());
    expect_current(caller, "tci_context_create");
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {B, C, H, W}, input};
    ck_assert_msg(tci_context_run(c, &in, 1) == TCI_OK, "%s", tci_last_error());
    expect_current(caller, "tci_context_run");
    tci_nonfinite_report r;
    tci_nonfinite_report_init(&r);
    ck_assert_msg(tci_context_nonfinite(c, &r) == TCI_OK, "%s", tci_last_error());
    ck_assert_uint_eq(r.count, 0);
    expect_current(caller, "tci_context_nonfinite");
    float ms[2];
    ck_assert_msg(tci_context_benchmark(c, 2, 1, ms) == TCI_OK, "%s", tci_last_error());
    expect_current(caller, "tci_context_benchmark");
    tci_tensor out;
    ck_assert_msg(tci_context_output(c, 0, &out) == TCI_OK, "%s", tci_last_error());
    *n = (size_t)tci_tensor_count(&out);
    float *copy = malloc(*n * sizeof(float));
    memcpy(copy, out.data, *n * sizeof(float));
    tci_context_destroy(c);
    expect_current(caller, "tci_context_destroy");
    return copy;
}

static void expect_same_bits(const float *a, const float *b, size_t n, const char *what) {
    ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s: the outputs differ", what);
}

static char *temp_path(void) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tci_device_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    remove(path); /* a missing timing cache is an empty one */
    return path;
}

/* Device 0 named explicitly is the default: the same kernels (from one timing cache) give the
 * same bits; the caller's device (0: the only one here) stays current throughout. */
START_TEST(test_device0_explicit) {
    char cache[64];
    snprintf(cache, sizeof cache, "%s", temp_path());
    tci_engine *d = engine_on(-1, cache), *e = engine_on(0, cache);
    expect_current(0, "tci_engine_create_from_file");
    tci_gpu_report rd, re;
    tci_gpu_report_init(&rd);
    tci_gpu_report_init(&re);
    ck_assert(tci_engine_gpu_report(d, &rd) == TCI_OK && tci_engine_gpu_report(e, &re) == TCI_OK);
    ck_assert_uint_gt(rd.layers_timed, 0);
    ck_assert_uint_eq(re.layers_timed, 0);
    ck_assert_uint_eq(re.layers_cached, rd.layers_timed);
    size_t nd, ne;
    float *yd = run_copy(d, 0, &nd), *ye = run_copy(e, 0, &ne);
    ck_assert_uint_eq(nd, ne);
    expect_same_bits(yd, ye, nd, "device 0 against the default");
    free(yd);
    free(ye);
    tci_engine_destroy(e);
    tci_engine_destroy(d);
    expect_current(0, "tci_engine_destroy");
    remove(cache);
}
END_TEST

/* A device past the last: TCI_ERR_NO_DEVICE from a build and from a load, naming the count. */
START_TEST(test_device_out_of_range) {
    int n = tci_gpu_count(NULL, 0);
    char want[96];
    snprintf(want, sizeof want, "CUDA device %d does not exist: there %s %d", n,
             n == 1 ? "is" : "are", n);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.shapes = &shape;
    o.num_shapes = 1;
    o.device = n;
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_file(model_path(), &o, &e), TCI_ERR_NO_DEVICE,
                        want);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(tci_last_error(), "tci_engine_options.device"), "%s", tci_last_error());
    char path[64];
    snprintf(path, sizeof path, "%s", temp_path());
    tci_engine *built = engine_on(0, NULL);
    ck_assert_msg(tci_engine_save(built, path) == TCI_OK, "%s", tci_last_error());
    tci_engine_options lo;
    tci_engine_options_init(&lo);
    lo.device = n;
    ck_assert_tci_error(tci_engine_load(path, &lo, &e), TCI_ERR_NO_DEVICE, want);
    ck_assert_ptr_null(e);
    char name[8];
    ck_assert_tci_error(tci_gpu_name(n, name, sizeof name), TCI_ERR_NO_DEVICE, want);
    tci_engine_destroy(built);
    remove(path);
}
END_TEST

/* cudaPointerGetAttributes of a device pointer: its device (NULL: skipped, -1 on failure). */
static void expect_on(const void *ptr, int device, const char *what) {
    if (!ptr) return;
    struct cudaPointerAttributes a;
    ck_assert_int_eq(cudaPointerGetAttributes(&a, ptr), cudaSuccess);
    ck_assert_msg(a.type == cudaMemoryTypeDevice && a.device == device,
                  "%s (%p) is memory of type %d on device %d; device %d expected", what, ptr,
                  (int)a.type, a.device, device);
}

/* Every device allocation of a GPU context and of its engine lies on `device`. */
static void expect_context_on(const tci_context *c, int device) {
    const exec_gpu_context *g = c->gpu;
    const exec_gpu_engine *e = c->engine->gpu;
    const plan *p = e->plan;
    expect_on(g->arena, device, "the activation arena");
    expect_on(g->workspace, device, "the workspace");
    expect_on(g->gather_error, device, "the gather-error flag");
    expect_on(g->nonfinite, device, "the NaN/Inf counters");
    for (int i = 0; i < p->num_inputs; i++) expect_on(g->input_staging[i], device, "an input");
    for (int i = 0; i < p->num_outputs; i++) expect_on(g->output_staging[i], device, "an output");
    for (int t = 0; t < p->num_tensors; t++) expect_on(e->constants[t], device, "a constant");
    for (int s = 0; s < p->num_steps; s++) {
        expect_on(e->impl[s].weights, device, "packed weights");
        expect_on(e->impl[s].bias, device, "a packed bias");
    }
}

/* One device-buffer run of e's context c on zeros (uploaded to `device`, on a stream there);
 * returns the output's bytes. */
static unsigned char *device_run(const tci_engine *e, tci_context *c, int device, int caller,
                                 size_t *bytes) {
    tci_device_format fin, fout;
    tci_device_format_init(&fin);
    tci_device_format_init(&fout);
    ck_assert(tci_engine_device_format(e, 0, 0, &fin) == TCI_OK);
    ck_assert(tci_engine_device_format(e, 1, 0, &fout) == TCI_OK);
    set_device(device);
    void *zeros = calloc(1, fin.bytes);
    void *d_in = gpu_upload(zeros, fin.bytes), *d_out = gpu_upload(NULL, fout.bytes);
    cudaStream_t stream;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    set_device(caller);
    const void *ins[1] = {d_in};
    void *outs[1] = {d_out};
    ck_assert_msg(tci_context_run_device(c, ins, 1, outs, 1, NULL, stream) == TCI_OK, "%s",
                  tci_last_error());
    expect_current(caller, "tci_context_run_device");
    ck_assert_int_eq(cudaStreamSynchronize(stream), cudaSuccess);
    expect_on(d_out, device, "the device-buffer output");
    unsigned char *host = malloc(fout.bytes);
    ck_assert_int_eq(cudaMemcpy(host, d_out, fout.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    *bytes = fout.bytes;
    set_device(device);
    ck_assert_int_eq(cudaStreamDestroy(stream), cudaSuccess);
    gpu_free(d_in);
    gpu_free(d_out);
    set_device(caller);
    free(zeros);
    return host;
}

/* Two GPUs: an engine on device 1, called from a thread whose current device is 0 (and the
 * other way round), runs there and gives device 0's bits; a stream or buffers of device 0 are
 * refused; an engine file and the timing cache from device 0 serve device 1. */
START_TEST(test_second_device) {
    int n = tci_gpu_count(NULL, 0);
    if (n < 2) {
        printf("SKIP: gpu_device: test_second_device needs two GPUs; this machine has %d\n", n);
        return;
    }
    char name0[256], name1[256];
    ck_assert(tci_gpu_name(0, name0, sizeof name0) == TCI_OK);
    ck_assert(tci_gpu_name(1, name1, sizeof name1) == TCI_OK);
    bool same_model = strcmp(name0, name1) == 0;
    char cache[64], file[64];
    snprintf(cache, sizeof cache, "%s", temp_path());
    snprintf(file, sizeof file, "%s", temp_path());

    set_device(1); /* the caller on device 1, the engine on device 0 */
    tci_engine *e0 = engine_on(0, cache);
    expect_current(1, "tci_engine_create_from_file on device 0");
    size_t n0, n1;
    float *y0 = run_copy(e0, 1, &n0);
    ck_assert_msg(tci_engine_save(e0, file) == TCI_OK, "%s", tci_last_error());
    expect_current(1, "tci_engine_save");

    set_device(0); /* the caller on device 0, the engine on device 1 */
    tci_engine *e1 = engine_on(1, cache);
    expect_current(0, "tci_engine_create_from_file on device 1");
    tci_gpu_report r;
    tci_gpu_report_init(&r);
    ck_assert(tci_engine_gpu_report(e1, &r) == TCI_OK);
    if (same_model) ck_assert_msg(r.layers_timed == 0 && r.layers_cached > 0,
                                  "device 1 timed %zu layers despite device 0's timing cache",
                                  r.layers_timed);
    float *y1 = run_copy(e1, 0, &n1);
    ck_assert_uint_eq(n0, n1);
    if (same_model) expect_same_bits(y0, y1, n0, "device 1 against device 0");

    tci_context *c1 = NULL, *c0 = NULL;
    ck_assert(tci_context_create(e1, &c1) == TCI_OK);
    ck_assert(tci_context_create(e0, &c0) == TCI_OK);
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {B, C, H, W}, input};
    ck_assert_msg(tci_context_run(c1, &in, 1) == TCI_OK, "%s", tci_last_error());
    expect_context_on(c1, 1);
    expect_context_on(c0, 0);
    size_t b0, b1;
    unsigned char *o1 = device_run(e1, c1, 1, 0, &b1), *o0 = device_run(e0, c0, 0, 0, &b0);
    ck_assert_uint_eq(b0, b1);
    if (same_model)
        ck_assert_msg(memcmp(o0, o1, b0) == 0, "the device-buffer outputs of devices 0, 1 differ");
    free(o0);
    free(o1);

    /* a stream of device 0, then buffers of device 0, for the context on device 1 */
    tci_device_format fin, fout;
    tci_device_format_init(&fin);
    tci_device_format_init(&fout);
    ck_assert(tci_engine_device_format(e1, 0, 0, &fin) == TCI_OK);
    ck_assert(tci_engine_device_format(e1, 1, 0, &fout) == TCI_OK);
    void *in0 = gpu_upload(NULL, fin.bytes), *out0 = gpu_upload(NULL, fout.bytes);
    set_device(1);
    void *in1 = gpu_upload(NULL, fin.bytes), *out1 = gpu_upload(NULL, fout.bytes);
    set_device(0);
    cudaStream_t s0;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), cudaSuccess);
    const void *ins1[1] = {in1}, *ins0[1] = {in0};
    void *outs1[1] = {out1}, *outs0[1] = {out0};
    ck_assert_tci_error(tci_context_run_device(c1, ins1, 1, outs1, 1, NULL, s0),
                        TCI_ERR_INVALID_ARGUMENT,
                        "the stream belongs to CUDA device 0; the engine runs on device 1");
    ck_assert_tci_error(tci_context_run_device(c1, ins0, 1, outs0, 1, NULL, NULL),
                        TCI_ERR_INVALID_ARGUMENT, "is memory of CUDA device 0");
    expect_current(0, "a refused tci_context_run_device");
    ck_assert_int_eq(cudaStreamDestroy(s0), cudaSuccess);
    gpu_free(in0);
    gpu_free(out0);
    gpu_free(in1);
    gpu_free(out1);
    tci_context_destroy(c0);
    tci_context_destroy(c1);

    /* the engine file written on device 0, loaded on device 1 */
    tci_engine_options lo;
    tci_engine_options_init(&lo);
    lo.device = 1;
    tci_engine *loaded = NULL;
    tci_status st = tci_engine_load(file, &lo, &loaded);
    if (same_model) {
        ck_assert_msg(st == TCI_OK, "%s", tci_last_error());
        expect_current(0, "tci_engine_load on device 1");
        size_t nl;
        float *yl = run_copy(loaded, 0, &nl);
        ck_assert_uint_eq(nl, n0);
        expect_same_bits(y0, yl, n0, "the engine file from device 0, on device 1");
        tci_context *cl = NULL;
        ck_assert(tci_context_create(loaded, &cl) == TCI_OK);
        expect_context_on(cl, 1);
        tci_context_destroy(cl);
        free(yl);
    } else {
        ck_assert_tci_error(st, TCI_ERR_UNSUPPORTED, name0);
        printf("gpu_device: devices 0 and 1 differ (%s, %s): the engine file was refused\n",
               name0, name1);
    }
    tci_engine_destroy(loaded);
    tci_engine_destroy(e1);
    tci_engine_destroy(e0);
    expect_current(0, "tci_engine_destroy");
    free(y0);
    free(y1);
    remove(cache);
    remove(file);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_device");
    gpu_fill_random(input, sizeof input / sizeof input[0], 5, -1.0f, 1.0f);
    Suite *s = suite_create("gpu_device");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_device0_explicit);
    tcase_add_test(tc, test_device_out_of_range);
    tcase_add_test(tc, test_second_device);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
