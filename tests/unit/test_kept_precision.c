/* The precision of the layers an fp16 plan keeps out of fp16 (plan_options.kept_precision,
 * tci_engine_options.kept_precision), run on the CPU: bf16 kept layers store BFLOAT16 with casts
 * from and to fp16 at their boundaries and constants uploaded as bf16; tf32 ones plan as fp32
 * ones and only allow TF32 tensor cores; the options' refusals; every op type of the generated
 * models (the models.generate fixture, TCI_TEST_MODELS_DIR) kept in bf16 plans without a step
 * that mixes fp16 and bf16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "onnx/loader.h"
#include "onnx/writer.h"
#include "util/half.h"

static const plan_step *find_step(const plan *p, plan_step_kind kind, int nth) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind && nth-- == 0) return &p->steps[i];
    return NULL;
}

static int count_steps(const plan *p, plan_step_kind kind) {
    int n = 0;
    for (int i = 0; i < p->num_steps; i++) n += p->steps[i].kind == kind;
    return n;
}

static float fc_w[16 * 5];

/* x[2,8,6,6] -> Conv c1 (16, 3x3, pad 1) -> Relu r1 -> Conv c2 (16, 1x1) -> GlobalAveragePool
 * gap -> Flatten flat -> Gemm fc (5, transB) -> Softmax sm -> y */
static ir_graph *net(void) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 8, 6, 6}, w1d[4] = {16, 8, 3, 3}, w2d[4] = {16, 16, 1, 1},
            fd[2] = {5, 16}, bd[1] = {5};
    static float w1[16 * 8 * 9], w2[16 * 16], fb[5] = {0.5f, -1, 2, 0, 1};
    for (int i = 0; i < 16 * 8 * 9; i++) w1[i] = 0.01f * (float)(i % 13) - 0.06f;
    for (int i = 0; i < 16 * 16; i++) w2[i] = 0.02f * (float)(i % 7) - 0.05f;
    for (int i = 0; i < 16 * 5; i++) fc_w[i] = 0.03f * (float)(i % 11) - 0.1f + 1e-3f / 3;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *w1t = th_named(g, "w1", TCI_DTYPE_FLOAT, 4, w1d, w1),
              *w2t = th_named(g, "w2", TCI_DTYPE_FLOAT, 4, w2d, w2),
              *fwt = th_named(g, "fc.w", TCI_DTYPE_FLOAT, 2, fd, fc_w),
              *fbt = th_named(g, "fc.b", TCI_DTYPE_FLOAT, 1, bd, fb);
    ir_tensor *c1 = th_act(g, "c1"), *r1 = th_act(g, "r1"), *c2 = th_act(g, "c2"), *gap = th_act(g, "gap"),
              *flat = th_act(g, "flat"), *fc = th_act(g, "fc"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *conv = th_node_io(g, "c1", "Conv", 17, (ir_tensor *[]){x, w1t}, 2, &c1, 1);
    th_attr_ints(g, conv, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    th_node_io(g, "r1", "Relu", 14, &c1, 1, &r1, 1);
    th_node_io(g, "c2", "Conv", 17, (ir_tensor *[]){r1, w2t}, 2, &c2, 1);
    th_node_io(g, "gap", "GlobalAveragePool", 1, &c2, 1, &gap, 1);
    th_node_io(g, "flat", "Flatten", 13, &gap, 1, &flat, 1);
    ir_node *gemm = th_node_io(g, "fc", "Gemm", 13, (ir_tensor *[]){flat, fwt, fbt}, 3, &fc, 1);
    th_attr_int(g, gemm, "transB", 1);
    th_node_io(g, "sm", "Softmax", 13, &fc, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    return g;
}

static const char *const kept_c2_fc[] = {"c2", "fc", NULL};

/* Layers kept in bf16: the fp32-kept plan with every FLOAT tensor BFLOAT16 at half the bytes
 * (same steps, tensors and layouts), casts fp16<->bf16 at the same boundaries, the GEMM's
 * constant weights uploaded as bf16 bits, the conv and GEMM steps of kept layers bf16 steps
 * (their weights packed at 2 bytes: the weights count as in the all-fp16 plan). */
START_TEST(test_kept_bf16) {
    ir_graph *g = net();
    plan_options o32 = {.fp32_layers = kept_c2_fc},
                 ob = {.fp32_layers = kept_c2_fc, .kept_precision = TCI_PRECISION_BF16};
    plan *p32, *pb, *p16;
    ck_assert_tci_ok(plan_build(g, &o32, &p32));
    ck_assert_tci_ok(plan_build(g, &ob, &pb));
    ck_assert_tci_ok(plan_build(g, NULL, &p16));
    ck_assert_int_eq(pb->num_steps, p32->num_steps);
    ck_assert_int_eq(pb->num_tensors, p32->num_tensors);
    int bf16_tensors = 0;
    for (int t = 0; t < pb->num_tensors; t++) {
        const plan_tensor *a = &pb->tensors[t], *b = &p32->tensors[t];
        /* packing sources (conv weights, biases) stay fp32 on the host in every plan */
        ck_assert_int_eq(a->packed_source, b->packed_source);
        bool kept = b->dtype == TCI_DTYPE_FLOAT && !b->packed_source;
        ck_assert_msg(a->dtype == (kept ? TCI_DTYPE_BFLOAT16 : b->dtype), "tensor %s is %s",
                      a->name, tci_dtype_name(a->dtype));
        ck_assert_int_eq(a->layout, b->layout);
        ck_assert_uint_eq(a->bytes, kept ? b->bytes / 2 : b->bytes);
        bf16_tensors += a->dtype == TCI_DTYPE_BFLOAT16;
    }
    ck_assert_int_gt(bf16_tensors, 3);
    /* fp16 -> c2 -> gap (fp16), flat -> fc -> sm (fp16): four casts, as with fp32 */
    ck_assert_int_eq(count_steps(pb, PLAN_STEP_CAST), 4);
    ck_assert_int_eq(count_steps(p32, PLAN_STEP_CAST), 4);
    const char *labels[] = {"cast fp16->bf16", "cast bf16->fp16", "cast fp16->bf16",
                            "cast bf16->fp16"};
    for (int i = 0; i < 4; i++) {
        const plan_step *cast = find_step(pb, PLAN_STEP_CAST, i);
        ck_assert_str_eq(cast->label, labels[i]);
        const plan_tensor *to = &pb->tensors[cast->outputs[0]];
        /* a cast's tensor names its precision where it is the kept one */
        ck_assert_int_eq(strstr(to->name, ":bf16") != NULL, to->dtype == TCI_DTYPE_BFLOAT16);
    }
    const plan_step *c2 = find_step(pb, PLAN_STEP_CONV, 1), *c1 = find_step(pb, PLAN_STEP_CONV, 0);
    ck_assert_int_eq(pb->tensors[c2->outputs[0]].dtype, TCI_DTYPE_BFLOAT16);
    ck_assert_int_eq(pb->tensors[c2->inputs[0]].dtype, TCI_DTYPE_BFLOAT16);
    ck_assert(pb->tensors[c2->inputs[1]].packed_source);
    ck_assert_int_eq(pb->tensors[c1->outputs[0]].dtype, TCI_DTYPE_FLOAT16);
    const plan_step *fc = find_step(pb, PLAN_STEP_GEMM, 0);
    ck_assert_int_eq(pb->tensors[fc->outputs[0]].dtype, TCI_DTYPE_BFLOAT16);
    const plan_tensor *w = &pb->tensors[fc->inputs[1]];
    ck_assert_int_eq(w->memory, PLAN_MEM_CONSTANT);
    ck_assert_int_eq(w->dtype, TCI_DTYPE_BFLOAT16);
    const uint16_t *bits = w->host_data;
    int differs_from_fp16 = 0;
    for (int i = 0; i < 16 * 5; i++) {
        ck_assert_uint_eq(bits[i], float_to_bfloat16(fc_w[i]));
        differs_from_fp16 += bits[i] != float_to_half(fc_w[i]);
    }
    ck_assert_int_gt(differs_from_fp16, 0);
    const plan_step *sm = find_step(pb, PLAN_STEP_SOFTMAX, 0);
    ck_assert_int_eq(pb->tensors[sm->inputs[0]].dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(pb->tensors[pb->output_tensors[0]].dtype, TCI_DTYPE_FLOAT16);
    /* every constant 16-bit: the weights count as in the plan keeping nothing */
    ck_assert_uint_eq(pb->weight_bytes, p16->weight_bytes);
    ck_assert_uint_gt(p32->weight_bytes, p16->weight_bytes);
    plan_destroy(p16);
    plan_destroy(pb);
    plan_destroy(p32);
    ir_graph_destroy(g);
}
END_TEST

/* Layers kept in tf32: the very plan of fp32 kept layers (dtypes, bytes, steps); only the
 * permission of TF32 tensor cores differs, for FP16 plans keeping in TF32 and TF32 plans. The
 * kept precision applies to FP16 plans alone. */
START_TEST(test_kept_tf32) {
    ir_graph *g = net();
    plan_options o32 = {.fp32_layers = kept_c2_fc},
                 ot = {.fp32_layers = kept_c2_fc, .kept_precision = TCI_PRECISION_TF32};
    plan *p32, *pt;
    ck_assert_tci_ok(plan_build(g, &o32, &p32));
    ck_assert_tci_ok(plan_build(g, &ot, &pt));
    ck_assert_int_eq(pt->num_steps, p32->num_steps);
    ck_assert_int_eq(pt->num_tensors, p32->num_tensors);
    ck_assert_uint_eq(pt->weight_bytes, p32->weight_bytes);
    for (int t = 0; t < pt->num_tensors; t++) {
        ck_assert_int_eq(pt->tensors[t].dtype, p32->tensors[t].dtype);
        ck_assert_uint_eq(pt->tensors[t].bytes, p32->tensors[t].bytes);
    }
    for (int s = 0; s < pt->num_steps; s++) ck_assert_str_eq(pt->steps[s].label, p32->steps[s].label);
    ck_assert_int_eq(pt->tensors[find_step(pt, PLAN_STEP_GEMM, 0)->outputs[0]].dtype,
                     TCI_DTYPE_FLOAT);
    ck_assert(plan_allows_tf32(&ot));
    ck_assert(!plan_allows_tf32(&o32));
    ck_assert(!plan_allows_tf32(NULL));
    ck_assert(plan_allows_tf32(&(plan_options){.precision = TCI_PRECISION_TF32}));
    ck_assert_str_eq(plan_kept_name(&ot), "tf32");
    ck_assert_str_eq(plan_kept_name(&o32), "fp32");
    ck_assert_str_eq(plan_kept_name(&(plan_options){.kept_precision = TCI_PRECISION_BF16}),
                     "bf16");
    ck_assert_str_eq(plan_kept_name(&(plan_options){.kept_precision = TCI_PRECISION_FP32}),
                     "fp32");
    /* other precisions keep in fp32 whatever the field says */
    plan_options bf = {.precision = TCI_PRECISION_BF16, .kept_precision = TCI_PRECISION_TF32};
    ck_assert(!plan_allows_tf32(&bf));
    ck_assert_int_eq(plan_kept_dtype(&bf), TCI_DTYPE_FLOAT);
    bf.kept_precision = TCI_PRECISION_BF16;
    ck_assert_int_eq(plan_kept_dtype(&bf), TCI_DTYPE_FLOAT);
    ck_assert_str_eq(plan_kept_name(&bf), "fp32");
    plan_options f32 = {.precision = TCI_PRECISION_FP32, .kept_precision = TCI_PRECISION_BF16};
    ck_assert_int_eq(plan_kept_dtype(&f32), TCI_DTYPE_FLOAT);
    plan_destroy(pt);
    plan_destroy(p32);
    ir_graph_destroy(g);
}
END_TEST

/* An engine input that a bf16-kept layer reads arrives as bf16 (NHWC8 for the convolution), at
 * half the bytes of fp32; a data-movement node after a bf16 layer stays bf16, and the fp16
 * reader after it gets the cast. */
START_TEST(test_kept_bf16_input_and_movement) {
    ir_graph *g = net();
    const char *first[] = {"c1", NULL};
    plan_options o = {.fp32_layers = first, .kept_precision = TCI_PRECISION_BF16};
    plan *p;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    const plan_tensor *x = &p->tensors[p->input_tensors[0]];
    ck_assert_int_eq(x->dtype, TCI_DTYPE_BFLOAT16);
    ck_assert_int_eq(x->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_uint_eq(x->bytes, 2 * 6 * 6 * 8 * 2);
    ck_assert_str_eq(find_step(p, PLAN_STEP_CAST, 0)->label, "cast bf16->fp16");
    ck_assert_int_eq(count_steps(p, PLAN_STEP_CAST), 1);
    plan_destroy(p);

    const char *pool[] = {"gap", NULL};
    o.fp32_layers = pool;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    const plan_step *gp = find_step(p, PLAN_STEP_GLOBAL_POOL, 0);
    ck_assert_ptr_nonnull(gp);
    ck_assert_int_eq(p->tensors[gp->outputs[0]].dtype, TCI_DTYPE_BFLOAT16);
    const plan_step *fc = find_step(p, PLAN_STEP_GEMM, 0);
    const plan_step *cast = find_step(p, PLAN_STEP_CAST, 1);
    ck_assert_str_eq(cast->label, "cast bf16->fp16");
    ck_assert_int_eq(cast->outputs[0], fc->inputs[0]);
    /* what the cast reads is the Flatten of the pooled values: still bf16 */
    ck_assert_int_eq(p->tensors[cast->inputs[0]].dtype, TCI_DTYPE_BFLOAT16);
    ck_assert_int_eq(p->tensors[fc->outputs[0]].dtype, TCI_DTYPE_FLOAT16);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* ---- through the API: plan_only engines (no GPU needed) ---- */

typedef struct layer_dtypes {
    int bf16, fp32, total;
    char bf16_nodes[256];
} layer_dtypes;

static void count_layer(size_t index, const char *node, const char *fused_ops, const char *kernel,
                        const char *layout, void *user) {
    (void)index, (void)fused_ops, (void)kernel;
    layer_dtypes *d = user;
    d->total++;
    if (strstr(layout, " bf16")) {
        d->bf16++;
        strncat(d->bf16_nodes, node, sizeof d->bf16_nodes - strlen(d->bf16_nodes) - 2);
        strcat(d->bf16_nodes, ",");
    }
    if (strstr(layout, " fp32")) d->fp32++;
}

static void *net_bytes(size_t *size) {
    ir_graph *g = net();
    void *bytes = NULL;
    ck_assert_tci_ok(onnx_save_model(g, NULL, &bytes, size));
    ir_graph_destroy(g);
    return bytes;
}

static void plan_engine_layers(tci_precision kept, layer_dtypes *d) {
    size_t size = 0;
    void *bytes = net_bytes(&size);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    o.fp32_layers = kept_c2_fc;
    o.kept_precision = kept;
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_memory(bytes, size, NULL, &o, &e));
    free(bytes);
    memset(d, 0, sizeof *d);
    ck_assert_tci_ok(tci_engine_layers(e, count_layer, d));
    /* the engine says what it was built with */
    tci_precision precision = TCI_PRECISION_AUTO, got = TCI_PRECISION_AUTO;
    ck_assert_tci_ok(tci_engine_precision(e, &precision, &got));
    ck_assert_int_eq(precision, TCI_PRECISION_FP16);
    ck_assert_int_eq(got, kept);
    ck_assert_tci_ok(tci_engine_precision(e, NULL, NULL));
    tci_engine_destroy(e);
}

START_TEST(test_api_precision_of_a_cpu_engine) {
    size_t size = 0;
    void *bytes = net_bytes(&size);
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_memory(bytes, size, NULL, NULL, &e));
    free(bytes);
    tci_precision p;
    ck_assert_tci_error(tci_engine_precision(e, &p, NULL), TCI_ERR_INVALID_ARGUMENT,
                        "a CPU engine runs the fp32 reference");
    ck_assert_tci_error(tci_engine_precision(NULL, &p, NULL), TCI_ERR_INVALID_ARGUMENT, "NULL");
    tci_engine_destroy(e);
}
END_TEST

START_TEST(test_api_plan_only) {
    layer_dtypes b, t, f;
    plan_engine_layers(TCI_PRECISION_BF16, &b);
    plan_engine_layers(TCI_PRECISION_TF32, &t);
    plan_engine_layers(TCI_PRECISION_FP32, &f);
    /* the kept layers' steps (c2, and the casts into it and fc, fc) report bf16, else fp32 */
    ck_assert_int_eq(b.total, f.total);
    ck_assert_int_eq(t.total, f.total);
    ck_assert_int_eq(b.fp32, 0);
    ck_assert_int_gt(b.bf16, 2);
    ck_assert_int_eq(b.bf16, f.fp32);
    ck_assert_int_eq(t.fp32, f.fp32);
    ck_assert_int_eq(t.bf16, 0);
    ck_assert_ptr_nonnull(strstr(b.bf16_nodes, "c2,"));
    ck_assert_ptr_nonnull(strstr(b.bf16_nodes, "fc,"));
}
END_TEST

/* Refusals: an unknown kept precision, one with an engine of another precision, and bf16 with
 * an accuracy target (bf16 fixes range, not precision). */
START_TEST(test_api_refusals) {
    size_t size = 0;
    void *bytes = net_bytes(&size);
    tci_engine_options o;
    tci_engine_options_init(&o);
    ck_assert_int_eq(o.kept_precision, TCI_PRECISION_FP32);
    o.backend = TCI_BACKEND_GPU;
    o.plan_only = 1;
    tci_engine *e = NULL;
    o.kept_precision = TCI_PRECISION_AUTO;
    ck_assert_tci_error(tci_engine_create_from_memory(bytes, size, NULL, &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "kept_precision is 4");
    o.kept_precision = TCI_PRECISION_FP16;
    ck_assert_tci_error(tci_engine_create_from_memory(bytes, size, NULL, &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "kept_precision is 0");
    const tci_precision others[] = {TCI_PRECISION_FP32, TCI_PRECISION_TF32, TCI_PRECISION_BF16};
    for (int i = 0; i < 3; i++) {
        o.precision = others[i];
        o.kept_precision = i == 1 ? TCI_PRECISION_BF16 : TCI_PRECISION_TF32;
        ck_assert_tci_error(tci_engine_create_from_memory(bytes, size, NULL, &o, &e),
                            TCI_ERR_INVALID_ARGUMENT, "is for the layers fp16 and");
        ck_assert_ptr_null(e);
    }
    /* with fp32 it is the default, allowed everywhere */
    o.kept_precision = TCI_PRECISION_FP32;
    ck_assert_tci_ok(tci_engine_create_from_memory(bytes, size, NULL, &o, &e));
    tci_engine_destroy(e);
    e = NULL;
    o.precision = TCI_PRECISION_AUTO;
    o.plan_only = 0;
    o.kept_precision = TCI_PRECISION_BF16;
    o.accuracy_target = 1e-3;
    ck_assert_tci_error(tci_engine_create_from_memory(bytes, size, NULL, &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "fixes overflow, not accuracy");
    ck_assert_ptr_null(e);
    free(bytes);
}
END_TEST

/* ---- the generated models (TCI_TEST_MODELS_DIR) ---- */

/* Whether a step mixes the two 16-bit types (the kernels take one float type per step; only a
 * cast converts), leaving out fp32 packing sources. */
static bool mixes_16_bit(const plan *p, const plan_step *s) {
    bool f16 = false, bf16 = false;
    for (int k = 0; k < s->num_inputs + s->num_outputs; k++) {
        int t = k < s->num_inputs ? s->inputs[k] : s->outputs[k - s->num_inputs];
        if (t < 0 || p->tensors[t].packed_source) continue;
        f16 |= p->tensors[t].dtype == TCI_DTYPE_FLOAT16;
        bf16 |= p->tensors[t].dtype == TCI_DTYPE_BFLOAT16;
    }
    return f16 && bf16 && s->kind != PLAN_STEP_CAST;
}

/* Every generated model (symbolic dims 4) with every op type of its optimised graph that has a
 * step of its own kept in bf16: the plan builds, mostly with bf16 tensors (not where the op is
 * on integers), and no step but a cast reads or writes both fp16 and bf16; kept in tf32, the
 * plan is the fp32-kept one. */
START_TEST(test_kept_generated_models) {
    static const char *const models[] = {
        "small_cnn", "resnet_mini", "mobilenetv2_mini", "mlp", "transformer_block",
        "attention_block", "packed_attention_block", "bert_block", "gpt2_block",
        "segmentation_decoder", "dense_concat", "crnn", "resnext_block", "grouped_norms",
        "audio_frontend", "convnext_blocks", "split_blocks"};
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir != NULL, "TCI_TEST_MODELS_DIR is not set (ctest sets it)");
    int plans = 0, with_bf16 = 0;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.onnx", dir, models[m]);
        ir_graph *g;
        ck_assert_msg(onnx_load_file(path, &g) == TCI_OK, "%s: %s", path, tci_last_error());
        for (size_t i = 0; i < g->num_inputs; i++)
            for (int d = 0; d < g->inputs[i]->rank; d++)
                if (g->inputs[i]->dims[d] < 0) g->inputs[i]->dims[d] = 4;
        ck_assert_msg(pass_optimize(g) == TCI_OK, "%s: %s", models[m], tci_last_error());
        ck_assert_msg(pass_prepare_for_gpu(g) == TCI_OK, "%s: %s", models[m], tci_last_error());
        for (size_t n = 0; n < g->num_nodes; n++) {
            /* op types with a step of their own (a folded BatchNormalization has none) */
            const char *op = g->nodes[n]->op_type;
            bool seen = g->nodes[n]->fused_into != NULL;
            for (size_t e = 0; e < n && !seen; e++)
                seen = !g->nodes[e]->fused_into && strcmp(g->nodes[e]->op_type, op) == 0;
            if (seen) continue;
            const char *layers[] = {op, NULL};
            plan_options ob = {.fp32_layers = layers, .kept_precision = TCI_PRECISION_BF16},
                         ot = {.fp32_layers = layers, .kept_precision = TCI_PRECISION_TF32},
                         o32 = {.fp32_layers = layers};
            plan *pb, *pt, *p32;
            ck_assert_msg(plan_build(g, &ob, &pb) == TCI_OK, "%s, %s in bf16: %s", models[m], op,
                          tci_last_error());
            ck_assert_tci_ok(plan_build(g, &ot, &pt));
            ck_assert_tci_ok(plan_build(g, &o32, &p32));
            int bf16 = 0;
            for (int t = 0; t < pb->num_tensors; t++)
                bf16 += pb->tensors[t].dtype == TCI_DTYPE_BFLOAT16;
            with_bf16 += bf16 > 0; /* not for integer ops (Equal on a mask) */
            for (int s = 0; s < pb->num_steps; s++)
                ck_assert_msg(!mixes_16_bit(pb, &pb->steps[s]),
                              "%s, %s in bf16: step %d (%s, %s) mixes fp16 and bf16", models[m],
                              op, s, pb->steps[s].node->name, pb->steps[s].label);
            ck_assert_int_eq(pt->num_steps, p32->num_steps);
            ck_assert_int_eq(pt->num_tensors, p32->num_tensors);
            for (int t = 0; t < pt->num_tensors; t++)
                ck_assert_int_eq(pt->tensors[t].dtype, p32->tensors[t].dtype);
            plan_destroy(pb);
            plan_destroy(pt);
            plan_destroy(p32);
            plans++;
        }
        ir_graph_destroy(g);
    }
    printf("%d plans, %d of them with bf16 tensors\n", plans, with_bf16);
    ck_assert_int_gt(plans, 50);
    ck_assert_int_gt(with_bf16, plans * 3 / 4);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kept_precision");
    TCase *tc = tcase_create("kept_precision");
    tcase_add_test(tc, test_kept_bf16);
    tcase_add_test(tc, test_kept_tf32);
    tcase_add_test(tc, test_kept_bf16_input_and_movement);
    tcase_add_test(tc, test_api_plan_only);
    tcase_add_test(tc, test_api_precision_of_a_cpu_engine);
    tcase_add_test(tc, test_api_refusals);
    tcase_add_test(tc, test_kept_generated_models);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
