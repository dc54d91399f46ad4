/* Engine + context create/destroy cycles: no host memory growth. Run under LeakSanitizer (a leak
 * at exit fails the test), and the process's resident set after the first CYCLES/10 cycles may
 * not grow by more than 1 MiB over the remaining ones.
 *
 *   test_create_destroy MODEL.onnx INPUT.npy [CYCLES=1000] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcinfer.h"

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx INPUT.npy [CYCLES]\n", argv[0]);
        return 2;
    }
    int cycles = argc > 3 ? atoi(argv[3]) : 1000;
    tci_tensor input;
    if (tci_tensor_read_file(argv[2], &input) != TCI_OK) {
        fprintf(stderr, "%s\n", tci_last_error());
        return 1;
    }
    long rss_warm = 0;
    for (int i = 0; i < cycles; i++) {
        if (i == cycles / 10)
            rss_warm = rss_kib();
        tci_engine *engine = NULL;
        tci_context *ctx = NULL;
        tci_tensor out;
        if (tci_engine_create_from_file(argv[1], NULL, &engine) != TCI_OK ||
            tci_context_create(engine, &ctx) != TCI_OK ||
            tci_context_run(ctx, &input, 1) != TCI_OK ||
            tci_context_output(ctx, 0, &out) != TCI_OK) {
            fprintf(stderr, "cycle %d: %s\n", i, tci_last_error());
            return 1;
        }
        tci_context_destroy(ctx);
        tci_engine_destroy(engine);
    }
    long rss_end = rss_kib();
    tci_tensor_release(&input);
    printf("%d create/run/destroy cycles: resident set %ld KiB after %d, %ld KiB at the end\n",
           cycles, rss_warm, cycles / 10, rss_end);
    if (rss_warm <= 0 || rss_end - rss_warm > 1024) {
        fprintf(stderr, "FAIL: the resident set grew by %ld KiB\n", rss_end - rss_warm);
        return 1;
    }
    return 0;
}
