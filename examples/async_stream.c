/* async_stream: two contexts of one GPU engine, each on its own CUDA stream, running on device
 * buffers with tci_context_run_device: input copies, runs and output copies are queued on both
 * streams and overlap; the host waits once at the end. Each result is checked against the
 * host-buffer path (tci_context_run). Without a GPU it says so and exits 77 (skipped).
 *
 *   example_async_stream MODEL.onnx INPUT.npy [RUNS=20]
 *
 * For a model with one float input and one float output. Buffers follow the engine's device
 * format (tci_engine_device_format): fp16/bf16/fp32 values, 4-D tensors in NHWC8. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "tcinfer.h"

#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t err_ = (call);                                                            \
        if (err_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(err_));                     \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define TCI_CHECK(call)                                                                       \
    do {                                                                                      \
        if ((call) != TCI_OK) {                                                               \
            fprintf(stderr, "%s: %s\n", #call, tci_last_error());                             \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static uint16_t float_to_half(float f) /* round to nearest even */
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t exp = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp), h = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        return (uint16_t)(sign | (h + (rem > half || (rem == half && (h & 1u)))));
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    return (uint16_t)(sign | (h + (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))));
}

static float half_to_float(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v = exp == 0    ? ldexpf((float)mant, -24)
              : exp == 31 ? (mant ? NAN : INFINITY)
                          : ldexpf((float)(1024 + mant), exp - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Offset (in elements) of logical element i of a tensor held in format f. */
static size_t device_offset(const tci_device_format *f, int64_t i)
{
    if (f->layout != TCI_DEVICE_NHWC8)
        return (size_t)i;
    int64_t C = f->dims[1], H = f->dims[2], W = f->dims[3];
    int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
    return (size_t)(((n * H + h) * W + w) * f->padded_channels + c);
}

/* Converts count floats to/from the device format's bytes (dst zeroed first: NHWC8 padding). */
static void pack(const float *src, int64_t count, const tci_device_format *f, void *dst)
{
    memset(dst, 0, f->bytes);
    for (int64_t i = 0; i < count; i++) {
        size_t o = device_offset(f, i);
        if (f->dtype == TCI_DTYPE_FLOAT16)
            ((uint16_t *)dst)[o] = float_to_half(src[i]);
        else if (f->dtype == TCI_DTYPE_BFLOAT16)
            ((uint16_t *)dst)[o] = float_to_bf16(src[i]);
        else
            ((float *)dst)[o] = src[i];
    }
}

static void unpack(const void *src, int64_t count, const tci_device_format *f, float *dst)
{
    for (int64_t i = 0; i < count; i++) {
        size_t o = device_offset(f, i);
        dst[i] = f->dtype == TCI_DTYPE_FLOAT16    ? half_to_float(((const uint16_t *)src)[o])
                 : f->dtype == TCI_DTYPE_BFLOAT16 ? bf16_to_float(((const uint16_t *)src)[o])
                                                  : ((const float *)src)[o];
    }
}

static int64_t format_count(const tci_device_format *f)
{
    int64_t n = 1;
    for (int d = 0; d < f->rank; d++)
        n *= f->dims[d];
    return n;
}

#define NUM_STREAMS 2

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx INPUT.npy [RUNS]\n", argv[0]);
        return 2;
    }
    int runs = argc > 3 ? atoi(argv[3]) : 20;
    char gpu[256] = "";
    if (tci_gpu_count(gpu, sizeof gpu) == 0) {
        printf("async_stream: SKIPPED: no CUDA GPU on this machine\n");
        return 77;
    }

    tci_engine_options opts;
    tci_engine_options_init(&opts);
    opts.backend = TCI_BACKEND_GPU;
    tci_engine *engine = NULL;
    TCI_CHECK(tci_engine_create_from_file(argv[1], &opts, &engine));
    tci_device_format fin, fout;
    tci_device_format_init(&fin);
    tci_device_format_init(&fout);
    TCI_CHECK(tci_engine_device_format(engine, 0, 0, &fin));
    TCI_CHECK(tci_engine_device_format(engine, 1, 0, &fout));
    int float_dtype_in = fin.dtype == TCI_DTYPE_FLOAT16 || fin.dtype == TCI_DTYPE_BFLOAT16 ||
                         fin.dtype == TCI_DTYPE_FLOAT;
    int float_dtype_out = fout.dtype == TCI_DTYPE_FLOAT16 || fout.dtype == TCI_DTYPE_BFLOAT16 ||
                          fout.dtype == TCI_DTYPE_FLOAT;
    if (tci_engine_input_count(engine) != 1 || tci_engine_output_count(engine) != 1 ||
        !float_dtype_in || !float_dtype_out) {
        fprintf(stderr, "the example takes a model with one float input and one float output\n");
        return 1;
    }
    tci_tensor file;
    TCI_CHECK(tci_tensor_read_file(argv[2], &file));
    int64_t in_count = format_count(&fin), out_count = format_count(&fout);
    if (file.dtype != TCI_DTYPE_FLOAT || tci_tensor_count(&file) != in_count) {
        fprintf(stderr, "the input file must hold %lld floats\n", (long long)in_count);
        return 1;
    }

    tci_context *ctx[NUM_STREAMS];
    cudaStream_t stream[NUM_STREAMS];
    void *d_in[NUM_STREAMS], *d_out[NUM_STREAMS], *h_in[NUM_STREAMS], *h_out[NUM_STREAMS];
    float *inputs[NUM_STREAMS], *results[NUM_STREAMS];
    for (int s = 0; s < NUM_STREAMS; s++) { /* stream s runs the input scaled by 1 - s/2 */
        inputs[s] = malloc((size_t)in_count * sizeof(float));
        results[s] = malloc((size_t)out_count * sizeof(float));
        for (int64_t i = 0; i < in_count; i++)
            inputs[s][i] = ((const float *)file.data)[i] * (1.0f - 0.5f * (float)s);
        TCI_CHECK(tci_context_create(engine, &ctx[s]));
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&d_in[s], fin.bytes));
        CUDA_CHECK(cudaMalloc(&d_out[s], fout.bytes));
        CUDA_CHECK(cudaMallocHost(&h_in[s], fin.bytes)); /* pinned: copies run asynchronously */
        CUDA_CHECK(cudaMallocHost(&h_out[s], fout.bytes));
        pack(inputs[s], in_count, &fin, h_in[s]);
    }

    /* queue everything on both streams, then wait once */
    for (int r = 0; r < runs; r++) {
        for (int s = 0; s < NUM_STREAMS; s++) {
            CUDA_CHECK(cudaMemcpyAsync(d_in[s], h_in[s], fin.bytes, cudaMemcpyHostToDevice,
                                       stream[s]));
            TCI_CHECK(tci_context_run_device(ctx[s], (const void *const *)&d_in[s], 1,
                                             &d_out[s], 1, NULL, stream[s]));
            CUDA_CHECK(cudaMemcpyAsync(h_out[s], d_out[s], fout.bytes, cudaMemcpyDeviceToHost,
                                       stream[s]));
        }
    }
    for (int s = 0; s < NUM_STREAMS; s++)
        CUDA_CHECK(cudaStreamSynchronize(stream[s]));

    /* each stream's result against the host-buffer path of a third context */
    tci_context *host = NULL;
    TCI_CHECK(tci_context_create(engine, &host));
    int bad = 0;
    for (int s = 0; s < NUM_STREAMS; s++) {
        unpack(h_out[s], out_count, &fout, results[s]);
        tci_tensor in = file, out;
        in.data = inputs[s];
        TCI_CHECK(tci_context_run(host, &in, 1));
        TCI_CHECK(tci_context_output(host, 0, &out));
        double max_diff = 0, max_ref = 0;
        for (int64_t i = 0; i < out_count; i++) {
            double ref = ((const float *)out.data)[i];
            max_diff = fmax(max_diff, fabs(results[s][i] - ref));
            max_ref = fmax(max_ref, fabs(ref));
        }
        /* same engine, same kernels: only the fp16 rounding of the host copies may differ */
        int ok = max_diff <= 1e-3 * (max_ref > 1 ? max_ref : 1);
        bad += !ok;
        printf("stream %d: %d runs on %s, max |device - host path| = %g %s\n", s, runs, gpu,
               max_diff, ok ? "ok" : "MISMATCH");
    }

    tci_context_destroy(host);
    for (int s = 0; s < NUM_STREAMS; s++) {
        tci_context_destroy(ctx[s]);
        CUDA_CHECK(cudaFree(d_in[s]));
        CUDA_CHECK(cudaFree(d_out[s]));
        CUDA_CHECK(cudaFreeHost(h_in[s]));
        CUDA_CHECK(cudaFreeHost(h_out[s]));
        CUDA_CHECK(cudaStreamDestroy(stream[s]));
        free(inputs[s]);
        free(results[s]);
    }
    tci_tensor_release(&file);
    tci_engine_destroy(engine);
    return bad ? 1 : 0;
}
