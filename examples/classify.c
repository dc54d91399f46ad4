/* classify: load a model, run a batch read from a .npy file, print the top-5 classes of each row.
 *
 *   example_classify MODEL.onnx INPUT.npy [--gpu]
 *
 * The model's first output is taken as N x C scores (or probabilities). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcinfer.h"

#define CHECK(call)                                                                           \
    do {                                                                                      \
        if ((call) != TCI_OK) {                                                               \
            fprintf(stderr, "%s: %s\n", #call, tci_last_error());                             \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx INPUT.npy [--gpu]\n", argv[0]);
        return 2;
    }
    tci_engine_options opts;
    tci_engine_options_init(&opts);
    if (argc > 3 && strcmp(argv[3], "--gpu") == 0)
        opts.backend = TCI_BACKEND_GPU;

    tci_engine *engine = NULL;
    tci_context *ctx = NULL;
    tci_tensor input, output;
    CHECK(tci_engine_create_from_file(argv[1], &opts, &engine));
    CHECK(tci_context_create(engine, &ctx));
    CHECK(tci_tensor_read_file(argv[2], &input));
    CHECK(tci_context_run(ctx, &input, 1));
    CHECK(tci_context_output(ctx, 0, &output));
    if (output.dtype != TCI_DTYPE_FLOAT || output.rank != 2) {
        fprintf(stderr, "expected a 2-D float output, got rank %d %s\n", output.rank,
                tci_dtype_name(output.dtype));
        return 1;
    }

    const float *scores = output.data;
    int64_t rows = output.dims[0], classes = output.dims[1];
    for (int64_t r = 0; r < rows; r++) {
        const float *row = scores + r * classes;
        int top[5];
        int k = classes < 5 ? (int)classes : 5;
        for (int i = 0; i < k; i++) { /* selection of the k largest, ties to the lower index */
            int best = -1;
            for (int c = 0; c < classes; c++) {
                int taken = 0;
                for (int j = 0; j < i; j++)
                    taken |= top[j] == c;
                if (!taken && (best < 0 || row[c] > row[best]))
                    best = c;
            }
            top[i] = best;
        }
        printf("row %lld top-5:", (long long)r);
        for (int i = 0; i < k; i++)
            printf("  class %d (%.4f)", top[i], row[top[i]]);
        printf("\n");
    }

    tci_tensor_release(&input);
    tci_context_destroy(ctx);
    tci_engine_destroy(engine);
    return 0;
}
