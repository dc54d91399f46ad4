/* Engine files on the CPU: the optimised graph written as ONNX and read back (same plan, same
 * CPU results; fp16-stored weights widened to their rounded values), and the container's
 * version, size and checksum checks. Saving and loading whole GPU engines is tested on the GPU
 * (tests/gpu/test_gpu_engine_io.c). */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/engine_file.h"
#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"
#include "onnx/loader.h"
#include "onnx/writer.h"

/* x[2,3,6,6] -> Conv 3x3 (+BN, +residual of a 1x1 projection, Relu) -> MaxPool -> GAP ->
 * Flatten -> Gemm(transB) -> Softmax; an anonymous intermediate tensor, and int, ints, float and
 * string attributes. */
static ir_graph *small_net(void) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 3, 6, 6}, wd[4] = {8, 3, 3, 3}, w1d[4] = {8, 3, 1, 1}, cd[1] = {8},
            fd[2] = {5, 8}, bd[1] = {5};
    float w[216], w1[24], gamma[8], beta[8], mean[8], var[8], fc[40], fb[5];
    for (int i = 0; i < 216; i++) w[i] = 0.01f * (float)((i * 37) % 23) - 0.11f;
    for (int i = 0; i < 24; i++) w1[i] = 0.03f * (float)(i % 5) - 0.05f;
    for (int i = 0; i < 8; i++) {
        gamma[i] = 1.0f + 0.1f * (float)i;
        beta[i] = 0.05f * (float)i;
        mean[i] = 0.01f * (float)i;
        var[i] = 1.0f + 0.2f * (float)i;
    }
    for (int i = 0; i < 40; i++) fc[i] = 0.02f * (float)((i * 13) % 11) - 0.1f;
    for (int i = 0; i < 5; i++) fb[i] = 0.1f * (float)i;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    ir_tensor *w1t = th_named(g, "w1", TCI_DTYPE_FLOAT, 4, w1d, w1);
    ir_tensor *ga = th_named(g, "gamma", TCI_DTYPE_FLOAT, 1, cd, gamma),
              *be = th_named(g, "beta", TCI_DTYPE_FLOAT, 1, cd, beta),
              *me = th_named(g, "mean", TCI_DTYPE_FLOAT, 1, cd, mean),
              *va = th_named(g, "var", TCI_DTYPE_FLOAT, 1, cd, var);
    ir_tensor *fct = th_named(g, "fc_w", TCI_DTYPE_FLOAT, 2, fd, fc),
              *fbt = th_named(g, "fc_b", TCI_DTYPE_FLOAT, 1, bd, fb);
    ir_tensor *proj = th_named(g, NULL, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *c = th_named(g, "c", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *bn = th_named(g, "bn", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *sum = th_named(g, "sum", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *r = th_named(g, "r", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *mp = th_named(g, "mp", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *gp = th_named(g, "gp", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *fl = th_named(g, "fl", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *logits = th_named(g, "logits", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
              *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "proj", "Conv", 17, (ir_tensor *[]){x, w1t}, 2, &proj, 1);
    ir_node *conv = th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    th_attr_ints(g, conv, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    th_attr_string(g, conv, "auto_pad", "NOTSET");
    ir_node *bnn = th_node_io(g, "bn", "BatchNormalization", 15,
                              (ir_tensor *[]){c, ga, be, me, va}, 5, &bn, 1);
    th_attr_float(g, bnn, "epsilon", 1e-3f);
    th_node_io(g, "add", "Add", 14, (ir_tensor *[]){bn, proj}, 2, &sum, 1);
    th_node_io(g, "relu", "Relu", 14, &sum, 1, &r, 1);
    ir_node *pool = th_node_io(g, "pool", "MaxPool", 12, &r, 1, &mp, 1);
    th_attr_ints(g, pool, "kernel_shape", (const int64_t[]){2, 2}, 2);
    th_attr_ints(g, pool, "strides", (const int64_t[]){2, 2}, 2);
    th_node_io(g, "gap", "GlobalAveragePool", 1, &mp, 1, &gp, 1);
    th_node_io(g, "flatten", "Flatten", 13, &gp, 1, &fl, 1);
    ir_node *fcn = th_node_io(g, "fc", "Gemm", 13, (ir_tensor *[]){fl, fct, fbt}, 3, &logits, 1);
    th_attr_int(g, fcn, "transB", 1);
    th_node_io(g, "softmax", "Softmax", 13, &logits, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    return g;
}

/* Writes g (as_fp16 may be NULL), reads it back and optimises it again. */
static ir_graph *round_trip(const ir_graph *g, const bool *as_fp16, const char *const *fp16_names) {
    void *bytes = NULL;
    size_t size = 0;
    ck_assert_tci_ok(onnx_save_model(g, as_fp16, &bytes, &size));
    ck_assert_uint_gt(size, 0);
    ir_graph *back = NULL;
    ck_assert_tci_ok(onnx_load_model(bytes, size, NULL, &back));
    free(bytes);
    ck_assert_tci_ok(onnx_widen_fp16(back, fp16_names));
    ck_assert_tci_ok(pass_optimize(back));
    ck_assert_tci_ok(pass_prepare_for_gpu(back));
    return back;
}

static float *run_cpu(const ir_graph *g, const float *x, size_t *count) {
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(g, &ex));
    tci_tensor in = {"x", TCI_DTYPE_FLOAT, 4, {2, 3, 6, 6}, (void *)x};
    ck_assert_tci_ok(exec_cpu_run(ex, &in, 1));
    const tci_tensor *out = exec_cpu_output(ex, 0);
    *count = (size_t)tci_tensor_count(out);
    float *copy = malloc(*count * sizeof(float));
    memcpy(copy, out->data, *count * sizeof(float));
    exec_cpu_destroy(ex);
    return copy;
}

static void input(float *x) {
    for (int i = 0; i < 216; i++) x[i] = 0.01f * (float)((i * 29) % 41) - 0.2f;
}

START_TEST(test_graph_round_trip) {
    ir_graph *g = small_net(), *back = round_trip(g, NULL, NULL);
    ck_assert_uint_eq(back->num_nodes, g->num_nodes);
    for (size_t i = 0; i < g->num_nodes; i++) {
        ck_assert_str_eq(back->nodes[i]->name, g->nodes[i]->name);
        ck_assert_str_eq(back->nodes[i]->op_type, g->nodes[i]->op_type);
        ck_assert_int_eq(back->nodes[i]->num_attrs, g->nodes[i]->num_attrs);
    }
    /* the same GPU plan */
    plan *p, *q;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_tci_ok(plan_build(back, NULL, &q));
    ck_assert_int_eq(q->num_steps, p->num_steps);
    for (int i = 0; i < p->num_steps; i++) {
        ck_assert_int_eq(q->steps[i].kind, p->steps[i].kind);
        ck_assert_str_eq(q->steps[i].label, p->steps[i].label);
    }
    ck_assert_uint_eq(q->arena_bytes, p->arena_bytes);
    plan_destroy(p);
    plan_destroy(q);
    /* and bit-identical CPU results: every constant came back exactly */
    float x[216];
    input(x);
    size_t n1, n2;
    float *a = run_cpu(g, x, &n1), *b = run_cpu(back, x, &n2);
    ck_assert_uint_eq(n1, 10);
    ck_assert_uint_eq(n2, n1);
    ck_assert_mem_eq(a, b, n1 * sizeof(float));
    free(a);
    free(b);
    ir_graph_destroy(back);
    ir_graph_destroy(g);
}
END_TEST

/* An engine file holds the graph as the GPU passes left it, which the load optimises and
 * prepares again: the generated attention models (models.generate fixture) at batch 4 and
 * sequence 16 plan the same steps. torchvision's MultiheadAttention moves its (batch, seq)
 * Transpose after the packed projection, where the attention reads through it; loaded again,
 * the Transpose was planned as a copy of the whole projection (ViT-B/16 at batch 64: 12 copies,
 * 0.7 ms a run). */
START_TEST(test_attention_plan_round_trip) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir != NULL, "TCI_TEST_MODELS_DIR is not set (ctest sets it)");
    static const char *const names[] = {"mixed_attention_block", "vit_layers", "bert_block",
                                        "gpt2_block", "packed_attention_block"};
    for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.onnx", dir, names[m]);
        ir_graph *g;
        ck_assert_tci_ok(onnx_load_file(path, &g));
        for (size_t i = 0; i < g->num_inputs; i++) {
            g->inputs[i]->dims[0] = 4;
            if (g->inputs[i]->rank > 1) g->inputs[i]->dims[1] = 16;
        }
        ck_assert_tci_ok(pass_optimize(g));
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
        ir_graph *back = round_trip(g, NULL, NULL);
        plan *p, *q;
        ck_assert_tci_ok(plan_build(g, NULL, &p));
        ck_assert_tci_ok(plan_build(back, NULL, &q));
        int attention = 0;
        for (int i = 0; i < p->num_steps; i++) attention += p->steps[i].kind == PLAN_STEP_ATTENTION;
        ck_assert_msg(attention > 0, "%s: no attention step", names[m]);
        ck_assert_msg(q->num_steps == p->num_steps, "%s: %d steps built, %d loaded", names[m],
                      p->num_steps, q->num_steps);
        for (int i = 0; i < p->num_steps; i++)
            ck_assert_msg(strcmp(q->steps[i].label, p->steps[i].label) == 0,
                          "%s step %d: '%s' built, '%s' loaded", names[m], i, p->steps[i].label,
                          q->steps[i].label);
        plan_destroy(p);
        plan_destroy(q);
        ir_graph_destroy(back);
        ir_graph_destroy(g);
    }
}
END_TEST

/* Weights stored as fp16 come back widened: each value is its fp16 rounding; the rest exact. */
START_TEST(test_fp16_weights) {
    ir_graph *g = small_net();
    bool *mask = calloc(g->num_tensors, sizeof(bool));
    ir_tensor *w = ir_graph_find_tensor(g, "w1"); /* the 1x1 projection's weights */
    mask[w->index] = true;
    const char *names[] = {"w1", NULL};
    ir_graph *back = round_trip(g, mask, names);
    ir_tensor *w2 = ir_graph_find_tensor(back, "w1");
    ck_assert_ptr_nonnull(w2);
    ck_assert_int_eq(w2->dtype, TCI_DTYPE_FLOAT);
    int inexact = 0;
    for (int64_t i = 0; i < 24; i++) {
        float v = ((const float *)w->data)[i], r = ((const float *)w2->data)[i];
        ck_assert_float_eq(r, half_to_float(float_to_half(v)));
        inexact += r != v;
    }
    ck_assert_int_gt(inexact, 0); /* the test means something: fp16 did round */
    /* the others exactly */
    const char *exact[] = {"w", "fc_w", "fc_b", "gamma"};
    for (int i = 0; i < 4; i++) {
        const ir_tensor *a = ir_graph_find_tensor(g, exact[i]), *b = ir_graph_find_tensor(back, exact[i]);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(b->dtype, TCI_DTYPE_FLOAT);
        int64_t n;
        ck_assert_tci_ok(ir_count_elements(a->rank, a->dims, &n));
        ck_assert_mem_eq(a->data, b->data, (size_t)n * sizeof(float));
    }
    /* fp16-stored tensors must be named as such, and only those */
    const char *wrong[] = {"fc_b", NULL};
    ck_assert_tci_error(onnx_widen_fp16(back, wrong), TCI_ERR_INVALID_MODEL, "fc_b");
    free(mask);
    ir_graph_destroy(back);
    ir_graph_destroy(g);
}
END_TEST

static char *temp_path(void) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tci_engine_fileXXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return path;
}

/* A sample file; with num_auto >= 0, one TCI_PRECISION_AUTO built (its last num_auto fp32
 * layers chosen by the search), written as format 2; its fp32 layers kept in kept (format 3
 * where that is TF32 or BF16). */
static void write_sample_kept(const char *path, int num_auto, double error, double target,
                              int32_t kept) {
    char model[100];
    for (int i = 0; i < 100; i++) model[i] = (char)(i * 7);
    char *fp32[] = {"Softmax", "conv_1", NULL}, *fp16[] = {"w", NULL};
    engine_file f = {.machine = "GPU X\tsm_90",
                     .producer = "tcinfer 0.1.0",
                     .precision = 2,
                     .kernels = 1,
                     .fp32_layers = fp32,
                     .model = model,
                     .model_size = sizeof model,
                     .fp16_tensors = fp16,
                     .choices = "conv key\twmma 3\t0.1\t0.05\n",
                     .has_auto = num_auto >= 0,
                     .num_auto_fp32 = num_auto >= 0 ? (uint32_t)num_auto : 0,
                     .auto_error = error,
                     .auto_target = target,
                     .kept_precision = kept};
    ck_assert_tci_ok(engine_file_write(path, &f));
}

static void write_sample_auto(const char *path, int num_auto, double error, double target) {
    write_sample_kept(path, num_auto, error, target, TCI_PRECISION_FP32);
}

static void write_sample(const char *path) { write_sample_auto(path, -1, -1, 0); }

static unsigned file_version(const char *path) {
    unsigned char head[12];
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fread(head, 1, sizeof head, fp), sizeof head);
    fclose(fp);
    return head[8] | (unsigned)head[9] << 8 | (unsigned)head[10] << 16 | (unsigned)head[11] << 24;
}

/* Rewrites the header's format version (outside the checksummed payload). */
static void set_version(const char *path, unsigned char version) {
    FILE *fp = fopen(path, "r+b");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 8, SEEK_SET);
    fputc(version, fp);
    fclose(fp);
}

START_TEST(test_container) {
    const char *path = temp_path();
    write_sample(path);
    engine_file f;
    ck_assert_tci_ok(engine_file_read(path, &f));
    ck_assert_str_eq(f.machine, "GPU X\tsm_90");
    ck_assert_str_eq(f.producer, "tcinfer 0.1.0");
    ck_assert_int_eq(f.precision, 2);
    ck_assert_int_eq(f.kernels, 1);
    ck_assert_str_eq(f.fp32_layers[0], "Softmax");
    ck_assert_str_eq(f.fp32_layers[1], "conv_1");
    ck_assert_ptr_null(f.fp32_layers[2]);
    ck_assert_str_eq(f.fp16_tensors[0], "w");
    ck_assert_ptr_null(f.fp16_tensors[1]);
    ck_assert_uint_eq(f.model_size, 100);
    ck_assert_int_eq(((const char *)f.model)[99], (char)(99 * 7));
    ck_assert_str_eq(f.choices, "conv key\twmma 3\t0.1\t0.05\n");
    ck_assert_int_eq(f.has_auto, 0);
    ck_assert_int_eq(f.kept_precision, TCI_PRECISION_FP32);
    engine_file_free(&f);
    /* a file without the auto record stays format 1, which older readers load */
    ck_assert_uint_eq(file_version(path), 1);
    remove(path);
}
END_TEST

/* What TCI_PRECISION_AUTO chose comes back: which layers (the last ones), the error reached
 * (NaN too: outputs that hold the model's own NaN) and the target; format 2. */
START_TEST(test_container_auto) {
    const char *path = temp_path();
    write_sample_auto(path, 1, 3.25e-4, 1e-3);
    ck_assert_uint_eq(file_version(path), 2);
    engine_file f;
    ck_assert_tci_ok(engine_file_read(path, &f));
    ck_assert_int_eq(f.has_auto, 1);
    ck_assert_uint_eq(f.num_auto_fp32, 1);
    ck_assert_double_eq(f.auto_error, 3.25e-4);
    ck_assert_double_eq(f.auto_target, 1e-3);
    ck_assert_str_eq(f.fp32_layers[1], "conv_1");
    ck_assert_str_eq(f.choices, "conv key\twmma 3\t0.1\t0.05\n");
    engine_file_free(&f);
    write_sample_auto(path, 0, NAN, 0); /* overflow only, nothing moved */
    ck_assert_tci_ok(engine_file_read(path, &f));
    ck_assert_int_eq(f.has_auto, 1);
    ck_assert_uint_eq(f.num_auto_fp32, 0);
    ck_assert(isnan(f.auto_error));
    ck_assert_double_eq(f.auto_target, 0);
    engine_file_free(&f);
    /* more automatic layers than fp32 layers, a negative error, a negative or infinite target:
     * malformed */
    const double bad[][3] = {{3, 1e-4, 0}, {1, -1, 0}, {1, 1e-4, -1e-3}, {1, 1e-4, INFINITY}};
    for (int i = 0; i < 4; i++) {
        write_sample_auto(path, (int)bad[i][0], bad[i][1], bad[i][2]);
        ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_PARSE, "malformed records");
    }
    /* the auto record in a file that says format 1 (which has none): malformed */
    write_sample_auto(path, 1, 1e-4, 0);
    set_version(path, 1);
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_PARSE, "malformed records");
    /* a format newer than this reader's: refused, saying which it reads */
    set_version(path, 4);
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_UNSUPPORTED,
                        "format 4; this tcinfer reads formats 1 to 3: rebuild it");
    remove(path);
}
END_TEST

/* Rewrites the header's checksum (FNV-1a-64 of the payload) after a patch of the payload. */
static void rechecksum(unsigned char *bytes, size_t size) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 32; i < size; i++) {
        h ^= bytes[i];
        h *= 0x100000001b3ull;
    }
    for (int i = 0; i < 8; i++) bytes[24 + i] = (unsigned char)(h >> (8 * i));
}

/* The precision of the fp32 layers comes back (format 3, with or without the auto record); FP32
 * writes no record (format 1 or 2 as before, read as FP32); a kept precision other than TF32 or
 * BF16 in the record, or the record in a file that says format 2, is malformed. */
START_TEST(test_container_kept) {
    const char *path = temp_path();
    engine_file f;
    const int32_t kept[] = {TCI_PRECISION_TF32, TCI_PRECISION_BF16};
    for (int i = 0; i < 2; i++) {
        write_sample_kept(path, i ? 1 : -1, 2e-4, 0, kept[i]);
        ck_assert_uint_eq(file_version(path), 3);
        ck_assert_tci_ok(engine_file_read(path, &f));
        ck_assert_int_eq(f.kept_precision, kept[i]);
        ck_assert_int_eq(f.has_auto, i);
        ck_assert_str_eq(f.fp32_layers[1], "conv_1");
        ck_assert_str_eq(f.choices, "conv key\twmma 3\t0.1\t0.05\n");
        engine_file_free(&f);
    }
    write_sample_kept(path, 1, 2e-4, 0, TCI_PRECISION_FP32);
    ck_assert_uint_eq(file_version(path), 2);
    ck_assert_tci_ok(engine_file_read(path, &f));
    ck_assert_int_eq(f.kept_precision, TCI_PRECISION_FP32);
    engine_file_free(&f);
    write_sample_kept(path, -1, 0, 0, TCI_PRECISION_BF16);
    set_version(path, 2);
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_PARSE, "malformed records");
    /* the record's value patched to FP16 (0; the checksum recomputed): malformed */
    write_sample_kept(path, -1, 0, 0, TCI_PRECISION_BF16);
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    unsigned char bytes[4096];
    size_t size = fread(bytes, 1, sizeof bytes, fp);
    fclose(fp);
    ck_assert_uint_lt(size, sizeof bytes);
    /* the record is the payload's last: tag, size 8, then the u32 precision and u32 zero */
    ck_assert_uint_eq(bytes[size - 8], TCI_PRECISION_BF16);
    bytes[size - 8] = 0;
    ck_assert_tci_error(engine_file_parse(bytes, size, path, &f), TCI_ERR_PARSE, "checksum");
    rechecksum(bytes, size);
    ck_assert_tci_error(engine_file_parse(bytes, size, path, &f), TCI_ERR_PARSE,
                        "malformed records");
    bytes[size - 8] = TCI_PRECISION_TF32;
    rechecksum(bytes, size);
    ck_assert_tci_ok(engine_file_parse(bytes, size, path, &f));
    ck_assert_int_eq(f.kept_precision, TCI_PRECISION_TF32);
    engine_file_free(&f);
    remove(path);
}
END_TEST

/* Patches byte `at` of the file (XOR 1) or truncates it to `at` bytes. */
static void damage(const char *path, long at, bool truncate_it) {
    FILE *fp = fopen(path, "r+b");
    ck_assert_ptr_nonnull(fp);
    if (truncate_it) {
        ck_assert_int_eq(ftruncate(fileno(fp), at), 0);
    } else {
        fseek(fp, at, SEEK_SET);
        int c = fgetc(fp);
        fseek(fp, at, SEEK_SET);
        fputc(c ^ 1, fp);
    }
    fclose(fp);
}

START_TEST(test_container_refusals) {
    const char *path = temp_path();
    engine_file f;
    write_sample(path);
    damage(path, 100, false); /* a payload byte */
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_PARSE, "checksum");
    write_sample(path);
    damage(path, 90, true);
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_PARSE, "truncated");
    write_sample(path);
    damage(path, 0, false);
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_PARSE, "not a tcinfer engine file");
    write_sample(path);
    damage(path, 8, false); /* format version 1 -> 0 */
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_UNSUPPORTED, "format 0");
    remove(path);
    ck_assert_tci_error(engine_file_read(path, &f), TCI_ERR_IO, "cannot open");
    /* an ONNX model is not an engine file */
    ck_assert_tci_error(tci_engine_load(TCI_TEST_DATA "/loader/dup_attr.onnx", NULL,
                                        &(tci_engine *){NULL}),
                        TCI_ERR_PARSE, "not a tcinfer engine file");
}
END_TEST

START_TEST(test_api_refusals) {
    /* engine files hold GPU engines: a CPU engine is not saved */
    ir_graph *g = small_net();
    void *bytes = NULL;
    size_t size = 0;
    ck_assert_tci_ok(onnx_save_model(g, NULL, &bytes, &size));
    ir_graph_destroy(g);
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_memory(bytes, size, NULL, NULL, &e));
    free(bytes);
    ck_assert_tci_error(tci_engine_save(e, "unused.tci"), TCI_ERR_INVALID_ARGUMENT,
                        "runs on the CPU");
    tci_engine_destroy(e);
    e = NULL;
    /* the file fixes what the engine was built with */
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.precision = TCI_PRECISION_FP32;
    ck_assert_tci_error(tci_engine_load("any.tci", &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "of tci_engine_options only no_cuda_graph, device, the log and the progress");
    ck_assert_ptr_null(e);
    o.precision = TCI_PRECISION_FP16;
    o.kept_precision = TCI_PRECISION_BF16;
    ck_assert_tci_error(tci_engine_load("any.tci", &o, &e), TCI_ERR_INVALID_ARGUMENT,
                        "fp32 layers (and their kept precision)");
    ck_assert_ptr_null(e);
}
END_TEST

int main(void) {
    Suite *s = suite_create("engine_file");
    TCase *tc = tcase_create("engine_file");
    tcase_add_test(tc, test_graph_round_trip);
    tcase_add_test(tc, test_attention_plan_round_trip);
    tcase_add_test(tc, test_fp16_weights);
    tcase_add_test(tc, test_container);
    tcase_add_test(tc, test_container_auto);
    tcase_add_test(tc, test_container_kept);
    tcase_add_test(tc, test_container_refusals);
    tcase_add_test(tc, test_api_refusals);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
