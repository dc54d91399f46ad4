/* The GPU engine's lifetime: cycles (TCI_LIFECYCLE_CYCLES, 1,000 by default) of engine builds,
 * of context create/run/destroy on one engine, and of both, each leave the device's free memory (cudaMemGetInfo) and the process's resident
 * set where they were after the first tenth of the cycles. The builds after the first take
 * their kernel choices from a timing cache, as a server reloading a model would. The device must
 * not be shared with other processes while this runs (their allocations would move the count). */
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
static long rss_kib(void) {
    malloc_trim(0);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* Bytes of the C heap in use (malloc'd and not freed, by tcinfer or the libraries under it). */
static long long heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return (long long)(m.uordblks + m.hblkhd);
}

static size_t device_free(void) {
    size_t free_bytes = 0, total = 0;
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
    return free_bytes;
}

typedef enum { ENGINES, CONTEXTS, BOTH } cycle_kind;

/* CYCLES cycles of kind: engines alone (build + destroy), contexts of one engine (create, run,
 * destroy), or both. Device free memory and resident set are sampled after the first tenth and
 * at the end; nothing may stay allocated on the device (a leak of even one 2 MiB page per
 * hundred cycles shows), and the host is held to test_create_destroy's 1 MiB. */
static void cycles_of(cycle_kind kind, const char *what) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir && dir[0], "TCI_TEST_MODELS_DIR (the generated test models) is not set");
    char model[4096];
    snprintf(model, sizeof model, "%s/resnet_mini.onnx", dir);
    const char *env = getenv("TCI_LIFECYCLE_CYCLES");
    int cycles = env ? atoi(env) : 1000;
    ck_assert_msg(cycles >= 10, "TCI_LIFECYCLE_CYCLES must be at least 10");

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
    size_t free_warm = 0;
    long rss_warm = 0;
    long long heap_warm = 0;
    for (int i = 0; i < cycles; i++) {
        if (i == cycles / 10) {
            free_warm = device_free();
            rss_warm = rss_kib();
            heap_warm = heap_in_use();
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
    size_t free_end = device_free();
    long rss_end = rss_kib();
    long long heap_end = heap_in_use();
    unlink(cache);
    long long device_drop = (long long)free_warm - (long long)free_end;
    printf("%d cycles of %s: device free memory %zu bytes after %d, %zu at the end (%lld bytes "
           "less); resident set %ld KiB after %d, %ld KiB at the end; heap in use %+lld bytes\n",
           cycles, what, free_warm, cycles / 10, free_end, device_drop, rss_warm, cycles / 10,
           rss_end, heap_end - heap_warm);
    fflush(stdout);
    ck_assert_msg(device_drop <= 0, "%s: the device's free memory fell by %lld bytes", what,
                  device_drop);
    ck_assert_msg(rss_warm > 0 && rss_end - rss_warm <= 1024, "%s: the resident set grew by %ld KiB",
                  what, rss_end - rss_warm);
}

/* What the CUDA libraries themselves keep per handle: the stream, cuDNN and cuBLASLt handles
 * every context (and every tuning build) creates and destroys. Printed beside the tests below
 * as their baseline; not a check of tcinfer. */
START_TEST(test_library_handle_baseline) {
    const char *env = getenv("TCI_LIFECYCLE_CYCLES");
    int cycles = env ? atoi(env) : 1000;
    long rss_warm = 0;
    long long heap_warm = 0;
    for (int i = 0; i < cycles; i++) {
        if (i == cycles / 10) {
            rss_warm = rss_kib();
            heap_warm = heap_in_use();
        }
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
    printf("%d cycles of a stream + cuDNN + cuBLASLt handle (baseline): resident set %+ld KiB, "
           "heap in use %+lld bytes\n",
           cycles, rss_kib() - rss_warm, heap_in_use() - heap_warm);
}
END_TEST

START_TEST(test_engine_cycles) {
    cycles_of(ENGINES, "GPU engine create + destroy");
}
END_TEST

START_TEST(test_context_cycles) {
    cycles_of(CONTEXTS, "context create + run + destroy on one GPU engine");
}
END_TEST

START_TEST(test_engine_context_cycles) {
    cycles_of(BOTH, "GPU engine + context create + run + destroy");
}
END_TEST

int main(void) {
    gpu_require_device("lifecycle");
    Suite *s = suite_create("gpu_lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_library_handle_baseline);
    tcase_add_test(tc, test_engine_cycles);
    tcase_add_test(tc, test_context_cycles);
    tcase_add_test(tc, test_engine_context_cycles);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
