/* Fused attention micro-benchmark: kern_attention's two kernels, the WMMA one and the FA2 one
 * (src/kernels/attention_fa2.h), forced through kern_attention_desc.impl, and cuDNN's fused
 * attention (src/kernels/attention_cudnn.h, the candidate the engine times against FA2; the
 * seconds its plan took to make beside it), on the attention shapes
 * of the bench's transformers: ViT-B/16 at batch 64 (Q, K, V read from the packed QKV
 * projection, Y into (b, s, h, d), as the executor passes them), BERT-base at batch 32 and
 * sequences 128 and 384 (also with a keep mask), GPT-2 causal at sequence 512 (batch 1 and 64),
 * head dim 128 (plain and causal), and ViT-B/16 and BERT s128 at batch 1.
 *
 * Each time is the median of 9 replays of a CUDA graph of back-to-back launches; before it is
 * timed, FA2's output is compared with WMMA's (largest difference within 4e-3 of the largest
 * value, or the run fails). TFLOP/s counts 4 b h d per (query, key) pair computed: all pairs,
 * or the ones at or below the diagonal with causal. Information only: the exit status says
 * whether everything ran and matched, never whether a speed target was met. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/attention.h"
#include "kernels/attention_cudnn.h"
#include "kernels/attention_fa2.h"
#include "layers/op.h"

#define MATCH_BOUND 4e-3

typedef struct {
    const char *name;
    int64_t b, h, s, d;
    int causal, packed, keep; /* packed: (b, s, 3, h, d) QKV, Y (b, s, h, d); keep: padding */
} shape;

static const shape k_shapes[] = {
    {"ViT-B/16 b64 (packed QKV)", 64, 12, 197, 64, 0, 1, 0},
    {"BERT-base b32 s128", 32, 12, 128, 64, 0, 0, 0},
    {"BERT-base b32 s384", 32, 12, 384, 64, 0, 0, 0},
    {"BERT-base b32 s384 keep mask", 32, 12, 384, 64, 0, 0, 1},
    {"GPT-2 b1 s512 causal", 1, 12, 512, 64, 1, 0, 0},
    {"GPT-2 b64 s512 causal", 64, 12, 512, 64, 1, 0, 0},
    {"d128 b16 h16 s1024", 16, 16, 1024, 128, 0, 0, 0},
    {"d128 b16 h16 s1024 causal", 16, 16, 1024, 128, 1, 0, 0},
    {"d128 b64 h12 s197 (packed QKV)", 64, 12, 197, 128, 0, 1, 0},
    {"ViT-B/16 b1 (packed QKV)", 1, 12, 197, 64, 0, 1, 0},
    {"BERT-base b1 s128", 1, 12, 128, 64, 0, 0, 0},
};
enum { SHAPE_COUNT = (int)(sizeof k_shapes / sizeof k_shapes[0]) };

typedef struct {
    cudaStream_t stream;
    kern_attention_desc desc;
    const void *q, *k, *v, *keep;
    void *y;
    cudnnHandle_t cudnn;
    const kern_attention_cudnn_plan *sdpa; /* launch runs cuDNN's plan instead, where set */
    void *workspace;
    size_t workspace_bytes;
} bench;

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "bench_attention: %s: %s\n", what, detail);
    return 1;
}

#define CUDA_OR_FAIL(call)                                                                      \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) return fail(#call, cudaGetErrorString(e_));                      \
    } while (0)

static tci_status launch(const bench *x) {
    if (x->sdpa)
        return kern_attention_cudnn_run(x->sdpa, x->cudnn, x->stream, x->q, x->k, x->v, x->y,
                                        x->workspace, x->workspace_bytes);
    return kern_attention(&x->desc, x->q, x->k, x->v, NULL, x->keep, x->y, x->stream);
}

static int cmp_float(const void *p, const void *q) {
    const float a = *(const float *)p, b = *(const float *)q;
    return (a > b) - (a < b);
}

/* Median ms of one launch: `inner` launches captured in a CUDA graph, one warm-up replay, then
 * 9 replays each between its own pair of events. */
static int time_graph(const bench *x, int inner, float *out_ms) {
    enum { REPS = 9 };
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OR_FAIL(cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal));
    tci_status st = TCI_OK;
    for (int i = 0; i < inner && st == TCI_OK; i++) st = launch(x);
    CUDA_OR_FAIL(cudaStreamEndCapture(x->stream, &graph));
    if (st != TCI_OK) {
        cudaGraphDestroy(graph);
        return fail("launch", tci_last_error());
    }
    CUDA_OR_FAIL(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OR_FAIL(cudaGraphLaunch(exec, x->stream));
    cudaEvent_t ev[2 * REPS];
    float t[REPS];
    for (int i = 0; i < 2 * REPS; i++) CUDA_OR_FAIL(cudaEventCreate(&ev[i]));
    for (int i = 0; i < REPS; i++) {
        CUDA_OR_FAIL(cudaEventRecord(ev[2 * i], x->stream));
        CUDA_OR_FAIL(cudaGraphLaunch(exec, x->stream));
        CUDA_OR_FAIL(cudaEventRecord(ev[2 * i + 1], x->stream));
    }
    CUDA_OR_FAIL(cudaStreamSynchronize(x->stream));
    for (int i = 0; i < REPS; i++) {
        CUDA_OR_FAIL(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
        t[i] /= (float)inner;
    }
    for (int i = 0; i < 2 * REPS; i++) cudaEventDestroy(ev[i]);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    qsort(t, REPS, sizeof t[0], cmp_float);
    *out_ms = t[REPS / 2];
    return 0;
}

/* Runs x once on a poisoned Y and downloads it (count fp16 values). */
static int run_once(const bench *x, uint16_t *host, size_t count) {
    CUDA_OR_FAIL(cudaMemsetAsync(x->y, 0xff, count * 2, x->stream));
    if (launch(x) != TCI_OK) return fail("launch", tci_last_error());
    CUDA_OR_FAIL(cudaStreamSynchronize(x->stream));
    CUDA_OR_FAIL(cudaMemcpy(host, x->y, count * 2, cudaMemcpyDeviceToHost));
    return 0;
}

static double rel_diff(const uint16_t *ours, const uint16_t *ref, size_t count) {
    double diff = 0.0, mag = 0.0;
    for (size_t i = 0; i < count; i++) {
        const double a = half_to_float(ours[i]), b = half_to_float(ref[i]);
        if (!(fabs(a - b) <= diff)) diff = fabs(a - b); /* NaN-sticky */
        if (fabs(b) > mag) mag = fabs(b);
    }
    return diff / (mag > 0 ? mag : 1.0);
}

/* the (query, key) pairs computed: all, or those with key <= query */
static double pairs(const shape *s) {
    return s->causal ? (double)s->s * (double)(s->s + 1) / 2.0 : (double)s->s * (double)s->s;
}

static double tflops(const shape *s, float ms) {
    return 4.0 * (double)(s->b * s->h * s->d) * pairs(s) / (ms * 1e-3) / 1e12;
}

/* the descriptor of shape s: dense (b, h, s, d) Q, K, V and Y, or the packed projection's */
static void describe(const shape *s, kern_attention_desc *d) {
    memset(d, 0, sizeof *d);
    d->batch = s->b, d->heads = s->h, d->q_len = s->s, d->kv_len = s->s, d->head_dim = s->d;
    const int64_t hd = s->h * s->d;
    for (int w = 0; w < 3; w++) {
        int64_t *st = w == 0 ? d->q_strides : w == 1 ? d->k_strides : d->v_strides;
        if (s->packed)
            st[0] = s->s * 3 * hd, st[1] = s->d, st[2] = 3 * hd, st[3] = 1;
        else
            st[0] = s->s * hd, st[1] = s->s * s->d, st[2] = s->d, st[3] = 1;
    }
    if (s->packed) /* Y (b, s, h, d): what the output projection reads */
        d->y_strides[0] = s->s * hd, d->y_strides[1] = s->d, d->y_strides[2] = hd,
        d->y_strides[3] = 1;
    if (s->keep) /* (b, 1, 1, s): sequence i keeps its first s - 16 i keys (at least 1) */
        d->keep_strides[0] = s->s, d->keep_strides[3] = 1;
    d->scale = 1.0f / sqrtf((float)s->d);
    d->causal = s->causal != 0;
    d->dtype = TCI_DTYPE_FLOAT16;
}

static void usage(FILE *f) {
    fprintf(f, "usage: tcinfer_bench_attention [--quick]\n"
               "  --quick    ViT-B/16 and BERT s128 only\n");
}

int main(int argc, char **argv) {
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
        return fail("no GPU", "this benchmark needs a CUDA device");
    struct cudaDeviceProp prop;
    CUDA_OR_FAIL(cudaGetDeviceProperties(&prop, 0));

    bench x;
    memset(&x, 0, sizeof x);
    CUDA_OR_FAIL(cudaStreamCreate(&x.stream));
    if (cudnnCreate(&x.cudnn) != CUDNN_STATUS_SUCCESS) return fail("cudnnCreate", "failed");

    /* one buffer each for Q, K, V (the packed projection uses Q's, 3x), uniform [-1, 1) fp16 */
    size_t max_elems = 0, max_keep = 1;
    for (int i = 0; i < SHAPE_COUNT; i++) {
        const shape *s = &k_shapes[i];
        const size_t e = (size_t)(s->b * s->s * s->h * s->d) * (s->packed ? 3 : 1);
        if (e > max_elems) max_elems = e;
        if (s->keep && (size_t)(s->b * s->s) > max_keep) max_keep = (size_t)(s->b * s->s);
    }
    uint16_t *h = malloc(max_elems * 2), *ref = malloc(max_elems * 2),
             *buf = malloc(max_elems * 2);
    unsigned char *keep = malloc(max_keep);
    if (!h || !ref || !buf || !keep) return fail("malloc", "out of memory");
    void *dbuf[3], *dy, *dkeep;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int w = 0; w < 3; w++) {
        for (size_t i = 0; i < max_elems; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            h[i] = float_to_half((float)((state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f);
        }
        CUDA_OR_FAIL(cudaMalloc(&dbuf[w], max_elems * 2));
        CUDA_OR_FAIL(cudaMemcpy(dbuf[w], h, max_elems * 2, cudaMemcpyHostToDevice));
    }
    CUDA_OR_FAIL(cudaMalloc(&dy, max_elems * 2));
    CUDA_OR_FAIL(cudaMalloc(&dkeep, max_keep));

    printf("Fused attention micro-benchmark on %s (%d SMs): fp16 Q, K, V and Y, fp32 "
           "accumulation.\nms = median of 9 CUDA-graph replays; TFLOP/s = 4 b h d (query, key) "
           "pairs / time (causal: the pairs at or below the diagonal); speedup = WMMA ms / FA2 "
           "ms; cuDNN: its fused attention (cuDNN %zu), the seconds its plan took to make in "
           "brackets.\n\n",
           prop.name, prop.multiProcessorCount, cudnnGetVersion());
    printf("| shape | b x h x s x d | WMMA ms | TFLOP/s | FA2 ms | TFLOP/s | speedup | cuDNN ms "
           "(plan s) | FA2 / cuDNN | max|diff| |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | "
           "---: | ---: | ---: |\n");
    for (int si = 0; si < SHAPE_COUNT; si++) {
        const shape *s = &k_shapes[si];
        if (quick && si >= 2) break;
        describe(s, &x.desc);
        const size_t hd = (size_t)(s->h * s->d);
        if (s->packed) {
            x.q = dbuf[0];
            x.k = (const uint16_t *)dbuf[0] + hd;
            x.v = (const uint16_t *)dbuf[0] + 2 * hd;
        } else {
            x.q = dbuf[0], x.k = dbuf[1], x.v = dbuf[2];
        }
        x.keep = NULL;
        if (s->keep) {
            for (int64_t bi = 0; bi < s->b; bi++)
                for (int64_t j = 0; j < s->s; j++)
                    keep[bi * s->s + j] = j == 0 || j < s->s - 16 * (bi % 8);
            CUDA_OR_FAIL(cudaMemcpy(dkeep, keep, (size_t)(s->b * s->s), cudaMemcpyHostToDevice));
            x.keep = dkeep;
        }
        x.y = dy;
        if (!kern_attention_fa2_applies(&x.desc, x.q, x.k, x.v))
            return fail(s->name, "the FA2 kernel does not apply");
        const size_t count = (size_t)(s->b * s->s) * hd;
        const double flops = 4.0 * (double)(s->b * s->h * s->d) * pairs(s);
        const int inner = flops > 5e11 ? 5 : flops > 5e10 ? 20 : 50;

        float ms[2];
        for (int impl = 0; impl < 2; impl++) {
            x.desc.impl = impl == 0 ? KERN_ATTENTION_WMMA : KERN_ATTENTION_FA2;
            if (run_once(&x, impl == 0 ? ref : buf, count)) return 1;
            if (time_graph(&x, inner, &ms[impl])) return 1;
        }
        double rel = rel_diff(buf, ref, count);
        /* cuDNN's plan for the shape (a keep mask: refused), made, checked and timed */
        char cudnn_text[160];
        float cudnn_ms = -1.0f;
        kern_attention_cudnn_plan *sdpa = NULL;
        struct timespec t0, t1;
        timespec_get(&t0, TIME_UTC);
        tci_status st = kern_attention_cudnn_create(x.cudnn, &x.desc, s->keep != 0, &sdpa);
        timespec_get(&t1, TIME_UTC);
        const double plan_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (st == TCI_OK) {
            x.workspace_bytes = kern_attention_cudnn_workspace(sdpa);
            x.workspace = NULL;
            if (x.workspace_bytes) CUDA_OR_FAIL(cudaMalloc(&x.workspace, x.workspace_bytes));
            x.sdpa = sdpa;
            if (run_once(&x, buf, count) || time_graph(&x, inner, &cudnn_ms)) return 1;
            x.sdpa = NULL;
            const double r = rel_diff(buf, ref, count);
            if (r > rel || r != r) rel = r;
            cudaFree(x.workspace);
            kern_attention_cudnn_destroy(sdpa);
            snprintf(cudnn_text, sizeof cudnn_text, "%.4f (%.2f) | %.2f", (double)cudnn_ms, plan_s,
                     (double)(ms[1] / cudnn_ms));
        } else {
            snprintf(cudnn_text, sizeof cudnn_text, "refused | -");
            fprintf(stderr, "bench_attention: %s: cuDNN refuses: %s\n", s->name, tci_last_error());
        }
        if (!(rel < MATCH_BOUND)) {
            fprintf(stderr, "bench_attention: %s: FA2 or cuDNN against WMMA: max |diff| %.3g of "
                            "the largest value (bound %g)\n",
                    s->name, rel, MATCH_BOUND);
            return 1;
        }
        printf("| %s | %lldx%lldx%lldx%lld%s | %.4f | %.1f | %.4f | %.1f | %.2fx | %s | %.1e |\n",
               s->name, (long long)s->b, (long long)s->h, (long long)s->s, (long long)s->d,
               s->causal ? " causal" : "", (double)ms[0], tflops(s, ms[0]), (double)ms[1],
               tflops(s, ms[1]), (double)(ms[0] / ms[1]), cudnn_text, rel);
        fflush(stdout);
    }
    printf("\nFA2's and cuDNN's outputs matched WMMA's within %g of the largest value on every "
           "shape.\n",
           MATCH_BOUND);
    cudnnDestroy(x.cudnn);
    cudaStreamDestroy(x.stream);
    for (int w = 0; w < 3; w++) cudaFree(dbuf[w]);
    cudaFree(dy), cudaFree(dkeep);
    free(h), free(ref), free(buf), free(keep);
    return 0;
}
