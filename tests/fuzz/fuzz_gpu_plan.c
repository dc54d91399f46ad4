/* libFuzzer: a serialized ModelProto through the GPU engine's build up to its plan, without a
 * device (backend GPU, plan_only): the passes that prepare a graph for the GPU (epilogue and
 * attention fusion, layouts, token views, merged GEMMs) and the planner (steps, aliases and
 * views, the arena), which fuzz_model's CPU engine never reaches; then the plan's report. The
 * GPU engine is built for fixed shapes: the inputs' symbolic dims (read from a CPU engine of the
 * same bytes) are fixed to 2, as a user's --shape would. The input's size picks the precision
 * (fp16, bf16, fp32, tf32, fp16 with every Relu kept in fp32) and the outputs marked (none,
 * unfused, as shipped), so that every planner path is reached from the same corpus. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tci_engine_options o;
    fuzz_options(&o);
    tci_engine *e = NULL;
    if (tci_engine_create_from_memory(data, size, NULL, &o, &e) != TCI_OK) return 0;
    size_t n = tci_engine_input_count(e);
    tci_shape_override *shapes = calloc(n + 1, sizeof *shapes);
    size_t num_shapes = 0;
    for (size_t i = 0; shapes && i < n; i++) {
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        if (tci_engine_input_info(e, i, &info) != TCI_OK || info.rank < 0) continue;
        tci_shape_override *s = &shapes[num_shapes];
        s->name = info.name; /* lives as long as the CPU engine */
        s->rank = info.rank;
        int symbolic = 0;
        for (int d = 0; d < info.rank; d++) {
            s->dims[d] = info.dims[d] < 0 ? 2 : info.dims[d];
            symbolic |= info.dims[d] < 0;
        }
        num_shapes += symbolic;
    }
    static const tci_precision precisions[] = {TCI_PRECISION_FP16, TCI_PRECISION_BF16,
                                               TCI_PRECISION_FP32, TCI_PRECISION_TF32,
                                               TCI_PRECISION_FP16};
    static const char *const relu[] = {"Relu", NULL};
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    o.precision = precisions[size % 5];
    if (size % 5 == 4) o.fp32_layers = relu; /* an op type: no error where the model has none */
    o.mark_all_outputs = (int)(size / 5 % 3);
    o.shapes = shapes;
    o.num_shapes = num_shapes;
    tci_engine *g = NULL;
    if (shapes && tci_engine_create_from_memory(data, size, NULL, &o, &g) == TCI_OK) {
        tci_gpu_report r;
        tci_gpu_report_init(&r);
        (void)tci_engine_gpu_report(g, &r);
        tci_engine_destroy(g);
    }
    free(shapes);
    tci_engine_destroy(e);
    return 0;
}
