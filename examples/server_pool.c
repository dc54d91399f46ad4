/* server_pool: one engine shared by N worker threads, each with its own context, serving a queue
 * of requests. Every output is checked bit for bit against the single-threaded one.
 *
 *   example_server_pool MODEL.onnx INPUT.npy [THREADS=8] [REQUESTS=1000] [--gpu]
 *
 * The requests cycle through NUM_VARIANTS inputs (the file's data scaled differently), so a
 * context that returned another request's result would be caught.
 *
 * On the CPU backend, run a pool with OPENBLAS_NUM_THREADS=1: the workers already fill the
 * cores, and OpenBLAS's own threads spin-wait, so on top of N workers they slow every run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcinfer.h"

#define NUM_VARIANTS 4

typedef struct {
    const tci_engine *engine;
    const tci_tensor *inputs;   /* NUM_VARIANTS request inputs */
    void *expected[NUM_VARIANTS]; /* output 0 of each, single-threaded */
    size_t expected_bytes;
    pthread_mutex_t lock;       /* guards the queue below */
    int next_request, num_requests;
    int mismatches, failures;   /* updated under lock */
} server;

static size_t tensor_bytes(const tci_tensor *t)
{
    return (size_t)tci_tensor_count(t) * tci_dtype_size(t->dtype);
}

static int take_request(server *s)
{
    pthread_mutex_lock(&s->lock);
    int r = s->next_request < s->num_requests ? s->next_request++ : -1;
    pthread_mutex_unlock(&s->lock);
    return r;
}

static void *worker(void *arg)
{
    server *s = arg;
    tci_context *ctx = NULL;
    int mismatches = 0, failures = 0;
    if (tci_context_create(s->engine, &ctx) != TCI_OK) {
        fprintf(stderr, "context: %s\n", tci_last_error());
        failures++;
    }
    for (int r; ctx && (r = take_request(s)) >= 0;) {
        int v = r % NUM_VARIANTS;
        tci_tensor out;
        if (tci_context_run(ctx, &s->inputs[v], 1) != TCI_OK ||
            tci_context_output(ctx, 0, &out) != TCI_OK) {
            fprintf(stderr, "request %d: %s\n", r, tci_last_error());
            failures++;
            continue;
        }
        if (tensor_bytes(&out) != s->expected_bytes ||
            memcmp(out.data, s->expected[v], s->expected_bytes) != 0)
            mismatches++;
    }
    tci_context_destroy(ctx);
    pthread_mutex_lock(&s->lock);
    s->mismatches += mismatches;
    s->failures += failures;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx INPUT.npy [THREADS] [REQUESTS] [--gpu]\n", argv[0]);
        return 2;
    }
    int threads = argc > 3 ? atoi(argv[3]) : 8;
    int requests = argc > 4 ? atoi(argv[4]) : 1000;
    if (threads < 1 || threads > 256 || requests < 1) {
        fprintf(stderr, "THREADS must be 1..256 and REQUESTS at least 1\n");
        return 2;
    }
    tci_engine_options opts;
    tci_engine_options_init(&opts);
    if (argc > 5 && strcmp(argv[5], "--gpu") == 0)
        opts.backend = TCI_BACKEND_GPU;

    server s = {.num_requests = requests};
    pthread_mutex_init(&s.lock, NULL);
    tci_tensor file, inputs[NUM_VARIANTS];
    tci_engine *engine = NULL;
    if (tci_engine_create_from_file(argv[1], &opts, &engine) != TCI_OK ||
        tci_tensor_read_file(argv[2], &file) != TCI_OK) {
        fprintf(stderr, "%s\n", tci_last_error());
        return 1;
    }
    if (file.dtype != TCI_DTYPE_FLOAT) {
        fprintf(stderr, "the example feeds float inputs\n");
        return 1;
    }
    s.engine = engine;
    s.inputs = inputs;

    /* the request inputs and their single-threaded outputs */
    tci_context *ctx = NULL;
    if (tci_context_create(engine, &ctx) != TCI_OK) {
        fprintf(stderr, "%s\n", tci_last_error());
        return 1;
    }
    int64_t count = tci_tensor_count(&file);
    for (int v = 0; v < NUM_VARIANTS; v++) {
        inputs[v] = file;
        float *data = malloc((size_t)count * sizeof(float));
        for (int64_t i = 0; i < count; i++)
            data[i] = ((const float *)file.data)[i] * (1.0f - 0.3f * (float)v);
        inputs[v].data = data;
        tci_tensor out;
        if (tci_context_run(ctx, &inputs[v], 1) != TCI_OK ||
            tci_context_output(ctx, 0, &out) != TCI_OK) {
            fprintf(stderr, "%s\n", tci_last_error());
            return 1;
        }
        s.expected_bytes = tensor_bytes(&out);
        s.expected[v] = malloc(s.expected_bytes);
        memcpy(s.expected[v], out.data, s.expected_bytes);
    }
    tci_context_destroy(ctx);

    pthread_t *tids = calloc((size_t)threads, sizeof(pthread_t));
    for (int t = 0; t < threads; t++)
        pthread_create(&tids[t], NULL, worker, &s);
    for (int t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);

    printf("%d threads, %d requests, %d variants: %d outputs differ from the single-threaded "
           "run, %d failed\n", threads, requests, NUM_VARIANTS, s.mismatches, s.failures);
    for (int v = 0; v < NUM_VARIANTS; v++) {
        free(inputs[v].data);
        free(s.expected[v]);
    }
    free(tids);
    tci_tensor_release(&file);
    tci_engine_destroy(engine);
    pthread_mutex_destroy(&s.lock);
    return s.mismatches == 0 && s.failures == 0 ? 0 : 1;
}
