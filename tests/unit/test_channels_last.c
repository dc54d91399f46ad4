/* GPU plans of the Transposes between NCHW and channels-last (ConvNeXt's, Swin's): where the
 * channels are whole groups of 8, the NHWC8 tensor is the dense channels-last one, and the
 * Transposes share memory instead of copying; elsewhere they stay copies. Run on the CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"

static int count_steps(const plan *p, plan_step_kind kind) {
    int n = 0;
    for (int i = 0; i < p->num_steps; i++) n += p->steps[i].kind == kind;
    return n;
}

static int root(const plan *p, int t) { return p->tensors[t].alias_of >= 0 ? p->tensors[t].alias_of : t; }

/* The plan tensor of the output of the step whose node is named `node`, or -1. */
static int output_of(const plan *p, const char *node) {
    for (int i = 0; i < p->num_steps; i++)
        if (strcmp(p->steps[i].node->name, node) == 0) return p->steps[i].outputs[0];
    return -1;
}

/* The plan tensor named `name`, or -1. */
static int tensor_named(const plan *p, const char *name) {
    for (int t = 0; t < p->num_tensors; t++)
        if (strcmp(p->tensors[t].name, name) == 0) return t;
    return -1;
}

/* x[2, C, 6, 6] -> depthwise 3x3 Conv -> Transpose(0, 2, 3, 1) -> LayerNormalization ->
 * MatMul(C x C) -> Transpose(0, 3, 1, 2) -> Add(x) -> y: a ConvNeXt block. nchw_output: the
 * Transpose's result is a graph output too, so the GEMM cannot fuse the Add through it. */
static ir_graph *block(int64_t c, bool nchw_output) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, c, 6, 6}, wd[4] = {c, 1, 3, 3}, md[2] = {c, c};
    float *w = malloc(sizeof(float) * (size_t)(c * 9)), *m = malloc(sizeof(float) * (size_t)(c * c)),
          *ones = malloc(sizeof(float) * (size_t)c);
    for (int64_t i = 0; i < c * 9; i++) w[i] = 0.1f * (float)(i % 5);
    for (int64_t i = 0; i < c * c; i++) m[i] = 0.01f * (float)(i % 7);
    for (int64_t i = 0; i < c; i++) ones[i] = 1.0f;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    ir_tensor *mt = th_named(g, "m", TCI_DTYPE_FLOAT, 2, md, m);
    ir_tensor *gamma = th_named(g, "gamma", TCI_DTYPE_FLOAT, 1, &c, ones);
    free(w);
    free(m);
    free(ones);
    ir_tensor *dw = th_act(g, "dw"), *nhwc = th_act(g, "nhwc"), *ln = th_act(g, "ln"), *mm = th_act(g, "mm"),
              *nchw = th_act(g, "nchw"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, (ir_tensor *[]){y, nchw}, nchw_output ? 2 : 1);
    ir_node *conv = th_node_io(g, "dwconv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &dw, 1);
    th_attr_ints(g, conv, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    th_attr_int(g, conv, "group", c);
    ir_node *t1 = th_node_io(g, "to_nhwc", "Transpose", 17, &dw, 1, &nhwc, 1);
    th_attr_ints(g, t1, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
    th_node_io(g, "ln", "LayerNormalization", 17, (ir_tensor *[]){nhwc, gamma}, 2, &ln, 1);
    th_node_io(g, "mm", "MatMul", 17, (ir_tensor *[]){ln, mt}, 2, &mm, 1);
    ir_node *t2 = th_node_io(g, "to_nchw", "Transpose", 17, &mm, 1, &nchw, 1);
    th_attr_ints(g, t2, "perm", (const int64_t[]){0, 3, 1, 2}, 4);
    th_node_io(g, "add", "Add", 14, (ir_tensor *[]){nchw, x}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    return g;
}

/* 16 channels, the Transpose's result read twice: conv, layernorm, GEMM and the Add; no copies,
 * no conversions; the LayerNormalization reads the convolution's NHWC8 memory as dense
 * (2, 6, 6, 16), the Add reads the GEMM's dense rows as NHWC8 (2, 16, 6, 6). */
START_TEST(test_whole_groups_share_memory) {
    ir_graph *g = block(16, true);
    ck_assert_int_eq(ir_graph_find_tensor(g, "nchw")->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(ir_graph_find_tensor(g, "nhwc")->layout, PLAN_LAYOUT_DENSE);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 4);
    ck_assert_int_eq(p->num_layout_conversions, 0);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 0);
    int conv = output_of(p, "dwconv"), mm = output_of(p, "mm");
    int nhwc = tensor_named(p, "nhwc"), nchw = tensor_named(p, "nchw");
    ck_assert_int_ge(conv, 0);
    ck_assert_int_ge(nhwc, 0);
    ck_assert_int_eq(p->tensors[conv].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[nhwc].layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(root(p, nhwc), root(p, conv));
    ck_assert_int_eq(p->tensors[nhwc].bytes, p->tensors[conv].bytes);
    ck_assert_int_eq(p->tensors[nhwc].dims[3], 16);
    ck_assert_int_eq(p->tensors[mm].layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(p->tensors[nchw].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[nchw].padded_channels, 16);
    ck_assert_int_eq(root(p, nchw), root(p, mm));
    ck_assert_int_eq(p->tensors[output_of(p, "add")].layout, PLAN_LAYOUT_NHWC8);
    /* the shared memory lives until its last reader (the Add) */
    ck_assert_int_ge(p->tensors[root(p, mm)].last_step, 3);
    plan_destroy(p);

    /* kept in fp32, the Transposes still share (the cast is before them) */
    const char *layers[] = {"to_nhwc", "to_nchw", NULL};
    plan_options o = {.fp32_layers = layers};
    ck_assert_tci_ok(plan_build(g, &o, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 0);
    nhwc = tensor_named(p, "nhwc");
    nchw = tensor_named(p, "nchw");
    ck_assert_int_eq(p->tensors[nhwc].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(p->tensors[nchw].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(p->tensors[root(p, nhwc)].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[root(p, nchw)].layout, PLAN_LAYOUT_DENSE);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* 16 channels, the Transpose read by the Add alone: the GEMM step writes its rows as the Add's
 * NHWC8 result and adds x, read NHWC8 as the same rows, itself: conv, layernorm and the GEMM. */
START_TEST(test_residual_fuses_through_the_view) {
    ir_graph *g = block(16, false);
    ck_assert_int_eq(ir_graph_find_tensor(g, "y")->layout, PLAN_LAYOUT_NHWC8);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 3);
    ck_assert_int_eq(p->num_layout_conversions, 0);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 0);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_ELTWISE), 0);
    const plan_step *s = &p->steps[2];
    ck_assert_int_eq(s->kind, PLAN_STEP_GEMM);
    ck_assert_str_eq(s->label, "MatMul+Transpose+Add");
    ck_assert(s->u.gemm.has_c);
    ck_assert_int_eq(s->u.gemm.m, 2 * 6 * 6);
    ck_assert_int_eq(s->u.gemm.ldc, 16);
    const plan_tensor *out = &p->tensors[s->outputs[0]];
    ck_assert_str_eq(out->name, "y");
    ck_assert_int_eq(out->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(out->padded_channels, 16);
    ck_assert_int_eq(p->tensors[s->inputs[3]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(root(p, s->inputs[3]), root(p, tensor_named(p, "x")));
    ck_assert_int_eq(tensor_named(p, "nchw"), -1);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* 12 channels (NHWC8 pads them to 16): the Transposes copy, with the layout conversions. */
START_TEST(test_padded_channels_copy) {
    ir_graph *g = block(12, false);
    ck_assert_int_eq(ir_graph_find_tensor(g, "nchw")->layout, PLAN_LAYOUT_DENSE);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 2);
    ck_assert_int_gt(p->num_layout_conversions, 0);
    for (int t = 0; t < p->num_tensors; t++) {
        int r = root(p, t);
        ck_assert_msg(p->tensors[r].layout == p->tensors[t].layout,
                      "'%s' shares memory across layouts", p->tensors[t].name);
    }
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* x[2, 3, 6, 6] -> Conv (24 channels) -> Split(16, 8) along the channels; the 8 -> Slice of
 * channels 1..5 and of every other row from 1: in NHWC8 throughout, each a copy in the physical
 * (N, H, W, padded C) order, a zero fill before the one whose 5 channels leave padding. */
START_TEST(test_channel_selections_stay_nhwc8) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 3, 6, 6}, wd[4] = {24, 3, 1, 1}, two = 2;
    float w[72];
    for (int i = 0; i < 72; i++) w[i] = 0.1f * (float)(i % 9);
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    const int64_t size_v[2] = {16, 8}, start_v[2] = {1, 1}, end_v[2] = {6, 6}, axes_v[2] = {1, 2},
                  step_v[2] = {1, 2};
    ir_tensor *sizes = th_named(g, "sizes", TCI_DTYPE_INT64, 1, &two, size_v);
    ir_tensor *starts = th_named(g, "starts", TCI_DTYPE_INT64, 1, &two, start_v);
    ir_tensor *ends = th_named(g, "ends", TCI_DTYPE_INT64, 1, &two, end_v);
    ir_tensor *axes = th_named(g, "axes", TCI_DTYPE_INT64, 1, &two, axes_v);
    ir_tensor *steps = th_named(g, "steps", TCI_DTYPE_INT64, 1, &two, step_v);
    ir_tensor *c = th_act(g, "c"), *a = th_act(g, "a"), *bt = th_act(g, "b"), *y = th_act(g, "y");
    ir_tensor *outs[2] = {a, y};
    th_graph_io(g, &x, 1, outs, 2);
    th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    ir_node *split = th_node_io(g, "split", "Split", 13, (ir_tensor *[]){c, sizes}, 2,
                                (ir_tensor *[]){a, bt}, 2);
    th_attr_int(g, split, "axis", 1);
    th_node_io(g, "slice", "Slice", 13, (ir_tensor *[]){bt, starts, ends, axes, steps}, 5, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_layout_conversions, 0);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_FILL), 1);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 3);
    const plan_step *copies[3];
    for (int i = 0, n = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == PLAN_STEP_COPY) copies[n++] = &p->steps[i];
    /* Split's second output: channels 16..23 of 24, whole groups of 8, no fill */
    const plan_strided *v = &copies[1]->u.copy.view;
    ck_assert_int_eq(p->tensors[copies[1]->outputs[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(v->rank, 4);
    ck_assert_int_eq(v->dims[3], 8);
    ck_assert_int_eq(v->in_offset[0], 16);
    ck_assert_int_eq(v->strides[0][2], 24); /* next pixel: 24 padded channels on */
    ck_assert_int_eq(v->out_strides[2], 8);
    /* the Slice: 5 channels from 1, rows 1, 3, 5: the fill comes just before it */
    v = &copies[2]->u.copy.view;
    ck_assert_int_eq(copies[2][-1].kind, PLAN_STEP_FILL);
    ck_assert_int_eq(v->dims[1], 3);
    ck_assert_int_eq(v->dims[3], 5);
    ck_assert_int_eq(v->strides[0][1], 2 * 6 * 8);
    ck_assert_int_eq(v->in_offset[0], 1 + 1 * 6 * 8);
    ck_assert_int_eq(v->out_strides[1], 6 * 8);
    ck_assert_int_eq(p->tensors[copies[2]->outputs[0]].padded_channels, 8);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("channels_last");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_whole_groups_share_memory);
    tcase_add_test(tc, test_residual_fuses_through_the_view);
    tcase_add_test(tc, test_padded_channels_copy);
    tcase_add_test(tc, test_channel_selections_stay_nhwc8);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
