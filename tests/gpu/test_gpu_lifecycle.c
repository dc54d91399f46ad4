/* The GPU engine's lifetime: cycles (TCI_LIFECYCLE_CYCLES, 1,000 by default) of engine builds,
 * of context create/run/destroy on one engine, and of both, against the device's free memory
 * (cudaMemGetInfo), the C heap in use (mallinfo2) and the resident set (after malloc_trim),
 * sampled after the first tenth of the cycles and at the end.
 *
 * The CUDA libraries themselves do not give everything back: on the H200 (cuDNN 9.14,
 * cuBLASLt 13.1) 1,000 create/destroy cycles of a stream + cuDNN + cuBLASLt handle set left
 * 35 MB more heap in use. Every engine build (for its tuning) and every context holds one such
 * set, so the test first measures that baseline with the same number of cycles, and holds each
 * kind of cycle to its sets' share of it: what tcinfer itself keeps must be nothing, within one
 * 2 MiB device page (the granularity of cudaMemGetInfo, which moved by a page either way in
 * runs without any allocation left behind) and 1 MiB of host memory.
 *
 * The builds after the first take their kernel choices from a timing cache, as a server
 * reloading a model would. The device must not be shared with other processes while this runs
 * (their allocations would move the counts). */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_harness.h"
#include "tcinfer.h"

/* The resident set after malloc_trim (freed heap memory handed back, so that only memory still
 * held counts). */
static long long rss_bytes(void) {
    malloc_trim(0);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kib = strtoll(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib * 1024;
}

/* Bytes of the C heap in use (malloc'd and not freed, by tcinfer or the libraries under it). */
static long long heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return (long long)(m.uordblks + m.hblkhd);
}

static long long device_free(void) {
    size_t free_bytes = 0, total = 0;
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
    return (long long)free_bytes;
}

typedef enum { HANDLES, ENGINES, CONTEXTS, BOTH } cycle_kind;

/* What stayed over the cycles after the first tenth: device bytes taken, heap and resident set
 * grown (negative: given back). */
typedef struct {
    long long device, heap, rss;
} growth;

/* Library handle sets each kind of cycle creates and destroys: the tuning of a build, a
 * context. */
static const int handle_sets[] = {1, 1, 1, 2};
static const char *const cycle_names[] = {
    "stream + cuDNN + cuBLASLt handle set (the libraries' baseline)",
    "GPU engine build + destroy",
    "context create + run + destroy on one GPU engine",
    "GPU engine + context create + run + destroy",
};

static void handle_cycle(void) {
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasLtHandle_t lt;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudnnCreate(&dnn), CUDNN_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cudnnDestroy(dnn), CUDNN_STATUS_SUCCESS);
    ck_assert_int_eq(cudaStreamDestroy(stream), cudaSuccess);
}

static growth cycles_of(cycle_kind kind, int cycles) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    char model[4096];
    snprintf(model, sizeof model, "%s/resnet_mini.onnx", dir);
    char cache[] = "/tmp/tci_lifecycle_XXXXXX";
    int fd = mkstemp(cache);
    ck_assert(fd >= 0);
    close(fd);
    unlink(cache); /* the first build writes it */

    enum { N = 1, C = 3, H = 64, W = 64 }; /* resnet_mini's input */
    static float x[N * C * H * W];
    gpu_fill_random(x, N * C * H * W, 5, -1.0f, 1.0f);
    tci_tensor in = {"input", TCI_DTYPE_FLOAT, 4, {N, C, H, W}, x};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.timing_cache = cache;

    tci_engine *kept = NULL;
    if (kind == CONTEXTS)
        ck_assert_msg(tci_engine_create_from_file(model, &o, &kept) == TCI_OK, "%s",
                      tci_last_error());
    growth warm = {0, 0, 0};
    for (int i = 0; i < cycles; i++) {
        if (i == cycles / 10) warm = (growth){device_free(), heap_in_use(), rss_bytes()};
        if (kind == HANDLES) {
            handle_cycle();
            continue;
        }
        tci_engine *e = kept;
        if (!e)
            ck_assert_msg(tci_engine_create_from_file(model, &o, &e) == TCI_OK, "cycle %d: %s",
                          i, tci_last_error());
        if (kind != ENGINES) {
            tci_context *c = NULL;
            tci_tensor out;
            ck_assert_msg(tci_context_create(e, &c) == TCI_OK, "cycle %d: %s", i,
                          tci_last_error());
            ck_assert_msg(tci_context_run(c, &in, 1) == TCI_OK, "cycle %d: %s", i,
                          tci_last_error());
            ck_assert_msg(tci_context_output(c, 0, &out) == TCI_OK, "cycle %d: %s", i,
                          tci_last_error());
            tci_context_destroy(c);
        }
        if (!kept) tci_engine_destroy(e);
    }
    tci_engine_destroy(kept);
    unlink(cache);
    growth g = {warm.device - device_free(), heap_in_use() - warm.heap, rss_bytes() - warm.rss};
    printf("%d cycles of %s: device %+lld bytes taken, heap in use %+lld bytes, resident set "
           "%+lld bytes\n",
           cycles - cycles / 10, cycle_names[kind], g.device, g.heap, g.rss);
    fflush(stdout);
    return g;
}

START_TEST(test_cycles_keep_nothing) {
    const char *env = getenv("TCI_LIFECYCLE_CYCLES");
    int cycles = env ? atoi(env) : 1000;
    ck_assert_msg(cycles >= 10, "TCI_LIFECYCLE_CYCLES must be at least 10");
    growth base = cycles_of(HANDLES, cycles);
    const long long page = 2 << 20, host_slack = 1 << 20;
    for (cycle_kind k = ENGINES; k <= BOTH; k++) {
        growth g = cycles_of(k, cycles);
        long long sets = handle_sets[k];
        long long device_bound = sets * (base.device > 0 ? base.device : 0) + page;
        long long heap_bound = sets * (base.heap > 0 ? base.heap : 0) + host_slack;
        /* the heap the libraries keep becomes resident as it is touched, or not (the baseline
         * loop reuses freed pages that a build's allocations had spread over): their share of
         * the resident set is bounded by the larger of their two counts */
        long long base_host = base.heap > base.rss ? base.heap : base.rss;
        long long rss_bound = sets * (base_host > 0 ? base_host : 0) + host_slack;
        ck_assert_msg(g.device <= device_bound,
                      "%s: %lld device bytes taken, over the libraries' %lld for %lld handle "
                      "sets a cycle plus one page",
                      cycle_names[k], g.device, device_bound - page, sets);
        ck_assert_msg(g.heap <= heap_bound,
                      "%s: heap in use grew by %lld bytes, over the libraries' %lld plus 1 MiB",
                      cycle_names[k], g.heap, heap_bound - host_slack);
        ck_assert_msg(g.rss <= rss_bound,
                      "%s: resident set grew by %lld bytes, over the libraries' %lld plus 1 MiB",
                      cycle_names[k], g.rss, rss_bound - host_slack);
    }
}
END_TEST

int main(void) {
    gpu_require_device("lifecycle");
    Suite *s = suite_create("gpu_lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_cycles_keep_nothing);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
