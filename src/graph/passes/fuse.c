/* The GPU fusion passes: the attention subgraphs first (attention.c), BatchNormalization folded
 * into the Conv before it, the epilogues (residual Add, a Linear layer's bias, activations,
 * SiLU's Sigmoid+Mul, the expanded erf and tanh Gelus, through a Reshape of a GEMM's rows or a
 * Transpose that views its channels-last rows as NHWC8) that a
 * step computes on its accumulator before the one rounding to 16 bits,
 * and the residual Add before a LayerNormalization, which its step adds itself. Decisions are recorded in the IR
 * (ir_node.epilogue, ir_node.fused_into); what each op can fuse comes from its descriptor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

typedef struct fuse_ctx {
    ir_graph *g;
    int *consumers; /* by tensor index: node inputs reading it (+1 for a graph output) */
} fuse_ctx;

/* t's only reader (not a graph output), or NULL. */
static ir_node *single_consumer(const fuse_ctx *c, const ir_tensor *t) {
    return ir_graph_sole_reader(c->g, c->consumers, t);
}

/* The activation node computes as an epilogue, if its descriptor says it is one and its result
 * has its input's type (a test such as IsNaN writes bool, which no producer's step does). */
static tci_status activation_of(const ir_node *n, bool *is_act, act_params *act) {
    memset(act, 0, sizeof *act);
    *is_act = n->desc && n->desc->epilogue && !n->fused_into;
    if (!*is_act) return TCI_OK;
    TRY_STATUS(n->desc->epilogue(n, act));
    if (act_flags(act->kind) & ACT_BOOL_RESULT) *is_act = false;
    return TCI_OK;
}

static bool is_sigmoid(const ir_node *n) {
    bool is_act;
    act_params a;
    return activation_of(n, &is_act, &a) == TCI_OK && is_act && a.kind == ACT_SIGMOID;
}

static bool is_binary(const ir_node *n, binary_op op) {
    return n->desc && n->desc->binary == op && n->num_inputs == 2 && !n->fused_into;
}

/* x -> Sigmoid -> s, Mul(x, s) (SiLU as exporters write it): the pair when t's only readers are
 * exactly that Sigmoid and Mul. */
static bool silu_pair(const fuse_ctx *c, const ir_tensor *t, ir_node **out_sigmoid,
                      ir_node **out_mul) {
    *out_sigmoid = *out_mul = NULL;
    if (c->consumers[t->index] != 2 || t->is_graph_output) return false;
    ir_node *sig = NULL, *mul = NULL;
    for (size_t i = 0; i < c->g->num_nodes; i++) {
        ir_node *n = c->g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++)
            if (n->inputs[k] == t) {
                if (is_sigmoid(n)) sig = n;
                else if (is_binary(n, BINARY_MUL)) mul = n;
            }
    }
    if (!sig || !mul || sig->inputs[0] != t) return false;
    const ir_tensor *s = sig->outputs[0];
    if (c->consumers[s->index] != 1 || s->is_graph_output) return false;
    if (!((mul->inputs[0] == t && mul->inputs[1] == s) ||
          (mul->inputs[1] == t && mul->inputs[0] == s)))
        return false;
    *out_sigmoid = sig;
    *out_mul = mul;
    return true;
}

/* n's other operand when n is the binary op with t as one operand, else NULL. */
static ir_tensor *other_operand(const ir_node *n, binary_op op, const ir_tensor *t) {
    if (!n || !is_binary(n, op) || n->epilogue) return NULL;
    return n->inputs[0] == t ? n->inputs[1] : n->inputs[1] == t ? n->inputs[0] : NULL;
}

/* n = Mul or Add (binary op) of t and a constant scalar of value want, either side. */
static bool with_scalar(const ir_node *n, binary_op op, const ir_tensor *t, float want) {
    float v;
    return ir_float_scalar(other_operand(n, op, t), &v) && v == want;
}

/* The erf-expanded Gelu as exporters write it after Div (n) of x by a constant c:
 * Erf -> Add 1 -> Mul x -> Mul 0.5, every intermediate read once: the four nodes. */
static bool erf_gelu_chain(const fuse_ctx *c, const ir_node *n, float *divisor,
                           ir_node **chain) {
    if (!is_binary(n, BINARY_DIV) || !ir_float_scalar(n->inputs[1], divisor) || !(*divisor > 0.0f))
        return false;
    const ir_tensor *x = n->inputs[0];
    bool is_act;
    act_params a;
    ir_node *erf = single_consumer(c, n->outputs[0]);
    if (!erf || activation_of(erf, &is_act, &a) != TCI_OK || !is_act || a.kind != ACT_ERF)
        return false;
    ir_node *add = single_consumer(c, erf->outputs[0]);
    if (!with_scalar(add, BINARY_ADD, erf->outputs[0], 1.0f)) return false;
    ir_node *mul = single_consumer(c, add->outputs[0]);
    if (!mul || !is_binary(mul, BINARY_MUL) || mul->epilogue ||
        !((mul->inputs[0] == x && mul->inputs[1] == add->outputs[0]) ||
          (mul->inputs[1] == x && mul->inputs[0] == add->outputs[0])))
        return false;
    ir_node *half = single_consumer(c, mul->outputs[0]);
    if (!with_scalar(half, BINARY_MUL, mul->outputs[0], 0.5f)) return false;
    chain[0] = erf, chain[1] = add, chain[2] = mul, chain[3] = half;
    return true;
}

/* |v - want| within a few fp32 roundings of want: a constant an exporter may have computed in
 * double and rounded, or written with fewer digits (0.7978845608 for sqrt(2 / pi)). */
static bool near_value(float v, float want) {
    return fabsf(v - want) <= 1e-6f * fabsf(want);
}

/* t is a constant float scalar within fp32 rounding of want. */
static bool near_scalar(const ir_tensor *t, float want) {
    float v;
    return ir_float_scalar(t, &v) && near_value(v, want);
}

/* n = op(t, constant scalar near want), either side, n not yet fused. */
static bool with_near_scalar(const ir_node *n, binary_op op, const ir_tensor *t, float want) {
    return near_scalar(other_operand(n, op, t), want);
}

/* n = Mul(t, constant scalar near want), either side, n not yet fused: t, else NULL. */
static ir_tensor *scaled_by(const ir_node *n, float want) {
    if (!n || !is_binary(n, BINARY_MUL) || n->epilogue) return NULL;
    for (int side = 0; side < 2; side++)
        if (near_scalar(n->inputs[1 - side], want)) return n->inputs[side];
    return NULL;
}

/* t read by one node alone (not a graph output), float: an intermediate a fused chain owns. */
static bool private_float(const fuse_ctx *c, const ir_tensor *t) {
    return t && !t->data && t->dtype == TCI_DTYPE_FLOAT && c->consumers[t->index] == 1 &&
           !t->is_graph_output;
}

enum { TANH_GELU_MAX = 9 };

/* A tanh-form Gelu, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as exporters expand it
 * (Hugging Face's NewGELUActivation through torch.onnx; torch's own gelu(approximate="tanh")
 * before opset 20): x^3 as Pow(x, 3) or x * (x * x), Mul 0.044715, Add x, Mul sqrt(2 / pi),
 * Tanh, Add 1, then 0.5, x and that sum multiplied in any grouping. Every operand order, every
 * constant within fp32 rounding, every intermediate read once, and x read by these nodes alone.
 * The nodes in graph order (the last computes the result) into chain; their count, 0 if none. */
static int tanh_gelu_chain(const fuse_ctx *c, const ir_tensor *x, ir_node **chain) {
    if (!x || x->dtype != TCI_DTYPE_FLOAT || x->is_graph_output) return 0;
    ir_node *th = NULL;
    int count = 0;
    /* the Tanh: the one node whose input leads back to x through Mul(beta, Add(x, ...)) */
    for (size_t i = 0; !th && i < c->g->num_nodes; i++) {
        ir_node *m = c->g->nodes[i];
        bool is_act;
        act_params a;
        if (m->fused_into || m->epilogue || m->num_inputs != 1 ||
            activation_of(m, &is_act, &a) != TCI_OK || !is_act || a.kind != ACT_TANH)
            continue;
        ir_tensor *s = m->inputs[0];
        ir_node *scale = private_float(c, s) ? s->producer : NULL;
        ir_tensor *inner = scaled_by(scale, 0.79788456080286536f);
        ir_node *add = private_float(c, inner) ? inner->producer : NULL;
        ir_tensor *k = other_operand(add, BINARY_ADD, x);
        ir_node *kmul = private_float(c, k) ? k->producer : NULL;
        ir_tensor *cube = scaled_by(kmul, 0.044715f);
        ir_node *p3 = private_float(c, cube) ? cube->producer : NULL;
        if (!p3) continue;
        count = 0;
        if (with_near_scalar(p3, BINARY_POW, x, 3.0f) && p3->inputs[0] == x) {
            chain[count++] = p3;
        } else {
            ir_tensor *sq = other_operand(p3, BINARY_MUL, x);
            ir_node *p2 = private_float(c, sq) ? sq->producer : NULL;
            if (!p2 || !is_binary(p2, BINARY_MUL) || p2->epilogue || p2->inputs[0] != x ||
                p2->inputs[1] != x)
                continue;
            chain[count++] = p2;
            chain[count++] = p3;
        }
        chain[count++] = kmul;
        chain[count++] = add;
        chain[count++] = scale;
        chain[count++] = th = m;
    }
    if (!th) return 0;
    /* 1 + tanh, then 0.5 x (1 + tanh) as (0.5 x) p, (x p) 0.5 or x (0.5 p), any operand order */
    ir_node *one = private_float(c, th->outputs[0]) ? single_consumer(c, th->outputs[0]) : NULL;
    if (!with_near_scalar(one, BINARY_ADD, th->outputs[0], 1.0f)) return 0;
    chain[count++] = one;
    const ir_tensor *p = one->outputs[0];
    ir_node *m1 = private_float(c, p) ? single_consumer(c, p) : NULL;
    ir_tensor *o = other_operand(m1, BINARY_MUL, p);
    if (!o) return 0;
    ir_node *last = NULL, *half = NULL;
    if (o == x || near_scalar(o, 0.5f)) {
        /* (x p) 0.5 or x (0.5 p) */
        ir_node *m2 = private_float(c, m1->outputs[0]) ? single_consumer(c, m1->outputs[0]) : NULL;
        ir_tensor *o2 = other_operand(m2, BINARY_MUL, m1->outputs[0]);
        if (!o2 || (o == x ? !near_scalar(o2, 0.5f) : o2 != x)) return 0;
        chain[count++] = m1;
        last = m2;
    } else {
        /* (0.5 x) p */
        half = private_float(c, o) ? o->producer : NULL;
        if (!with_near_scalar(half, BINARY_MUL, x, 0.5f)) return 0;
        chain[count++] = half;
        last = m1;
    }
    if (last->outputs[0]->dtype != TCI_DTYPE_FLOAT) return 0;
    chain[count++] = last;
    /* x read by the chain alone: the step need not write it */
    int reads = 0;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < chain[i]->num_inputs; k++) reads += chain[i]->inputs[k] == x;
    if (reads != c->consumers[x->index]) return 0;
    for (int i = 1; i < count; i++) /* graph order: insertion sort of at most 9 */
        for (int j = i; j > 0 && chain[j - 1]->index > chain[j]->index; j--) {
            ir_node *t = chain[j];
            chain[j] = chain[j - 1];
            chain[j - 1] = t;
        }
    return chain[count - 1] == last ? count : 0;
}

/* The epilogue being built for one node. */
typedef struct building {
    ir_epilogue e;
    char label[256];
    bool any; /* something fused */
} building;

static void absorb(building *b, ir_node *owner, ir_node *fused, const char *label_part) {
    fused->fused_into = owner;
    b->e.output = fused->outputs[0];
    strncat(b->label, label_part, sizeof b->label - strlen(b->label) - 1);
    b->any = true;
}

/* A following activation (or SiLU pair). */
static tci_status fuse_activation(const fuse_ctx *c, ir_node *n, building *b) {
    ir_node *sig, *mul;
    if (silu_pair(c, b->e.output, &sig, &mul)) {
        b->e.act.kind = ACT_SILU;
        sig->fused_into = n;
        absorb(b, n, mul, "+SiLU");
        return TCI_OK;
    }
    ir_node *next = single_consumer(c, b->e.output);
    if (!next) return TCI_OK;
    bool is_act;
    act_params a;
    TRY_STATUS(activation_of(next, &is_act, &a));
    if (!is_act || next->inputs[0] != b->e.output) return TCI_OK;
    b->e.act = a;
    char part[64];
    snprintf(part, sizeof part, "+%s", next->op_type);
    absorb(b, n, next, part);
    return TCI_OK;
}

/* The erf-expanded Gelu of what the step computes so far, t: Div(t, c) -> Erf -> Add 1 ->
 * Mul t -> Mul 0.5, t read by exactly that Div and that Mul. The step divides its sum by c
 * (OP_EPILOGUE_SCALE) and applies GeluOfDiv (alpha c) to the quotient: Gelu of t. */
static bool fuse_erf_gelu_after(const fuse_ctx *c, ir_node *n, building *b) {
    const ir_tensor *t = b->e.output;
    if (c->consumers[t->index] != 2 || t->is_graph_output) return false;
    ir_node *div = NULL, *chain[4];
    float divisor;
    for (size_t i = 0; !div && i < c->g->num_nodes; i++) {
        ir_node *m = c->g->nodes[i];
        if (m != n && !m->fused_into && m->num_inputs == 2 && m->inputs[0] == t &&
            erf_gelu_chain(c, m, &divisor, chain))
            div = m;
    }
    if (!div) return false;
    b->e.act = (act_params){ACT_GELU_OF_DIV, divisor, 0.0f};
    b->e.divisor = divisor;
    absorb(b, n, div, "+Div+Erf+Add+Mul+Mul (Gelu)");
    for (int i = 0; i < 4; i++) absorb(b, n, chain[i], "");
    return true;
}

/* The tanh-expanded Gelu of what the step computes so far (tanh_gelu_chain): the step applies
 * GeluTanh to it. */
static bool fuse_tanh_gelu_after(const fuse_ctx *c, ir_node *n, building *b) {
    ir_node *chain[TANH_GELU_MAX];
    int count = tanh_gelu_chain(c, b->e.output, chain);
    if (!count) return false;
    char part[160] = "";
    for (int i = 0; i < count; i++) {
        strncat(part, "+", sizeof part - strlen(part) - 1);
        strncat(part, chain[i]->op_type, sizeof part - strlen(part) - 1);
    }
    strncat(part, " (GeluTanh)", sizeof part - strlen(part) - 1);
    b->e.act = (act_params){ACT_GELU_TANH, 0.0f, 0.0f};
    for (int i = 0; i < count; i++) absorb(b, n, chain[i], i ? "" : part);
    return true;
}

/* A GEMM's result [M, N] reshaped with its last dim kept (leading dims split or merged: a
 * Reshape, Flatten, Squeeze or Unsqueeze of the same row-major bytes), read by that node alone:
 * the step goes on fusing after it (residual, activation) and writes the reshaped tensor. The
 * node absorbed, else NULL. */
static ir_node *fuse_reshape_view(const fuse_ctx *c, ir_node *n, building *b) {
    const ir_tensor *out = b->e.output;
    ir_node *next = single_consumer(c, out);
    op_pattern pat;
    if (!next || next->fused_into || next->epilogue || next->num_inputs < 1 ||
        next->inputs[0] != out || next->num_outputs < 1)
        return NULL;
    op_node_pattern(next, &pat);
    const ir_tensor *y = next->outputs[0];
    int64_t out_count, y_count;
    if (pat.kind != OP_PATTERN_RESHAPE || !y || y->dtype != TCI_DTYPE_FLOAT ||
        out->dtype != TCI_DTYPE_FLOAT || out->rank < 1 || y->rank < 1 ||
        ir_count_elements(out->rank, out->dims, &out_count) != TCI_OK ||
        ir_count_elements(y->rank, y->dims, &y_count) != TCI_OK || out_count < 0 ||
        out_count != y_count || y->dims[y->rank - 1] != out->dims[out->rank - 1])
        return NULL;
    char part[64];
    snprintf(part, sizeof part, "+%s", next->op_type);
    absorb(b, n, next, part);
    return next;
}

/* A GEMM's channels-last result [N, H, W, C] transposed to NCHW where the Transpose views it as
 * NHWC8 (op_desc.views_as_nhwc: C a multiple of 8, no padding), read by it alone: the step goes
 * on fusing after it (ConvNeXt's residual Add) and writes the NCHW tensor NHWC8, which holds
 * its rows' bytes. The node absorbed, else NULL. */
static ir_node *fuse_nhwc_view(const fuse_ctx *c, ir_node *n, building *b) {
    const ir_tensor *out = b->e.output;
    ir_node *next = single_consumer(c, out);
    if (!next || next->fused_into || next->epilogue || !next->desc ||
        !next->desc->views_as_nhwc || next->num_inputs < 1 || next->inputs[0] != out ||
        next->num_outputs < 1 || out->dtype != TCI_DTYPE_FLOAT || out->rank != 4 ||
        !next->desc->views_as_nhwc(next))
        return NULL;
    char part[64];
    snprintf(part, sizeof part, "+%s", next->op_type);
    absorb(b, n, next, part);
    b->e.nhwc_output = true;
    return next;
}

static bool same_shape(const ir_tensor *a, const ir_tensor *b) {
    if (a->rank != b->rank || a->rank < 1) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i] || a->dims[i] < 0) return false;
    return true;
}

/* Whether t already holds its value when node n runs: a graph input, or the output of a step
 * before n (constants excluded). */
static bool computed_before(const ir_tensor *t, const ir_node *n) {
    if (t->data) return false;
    if (t->is_graph_input) return true;
    const ir_node *p = t->producer;
    if (!p) return false;
    const ir_node *step = p->fused_into ? p->fused_into : p;
    return step->index < n->index;
}

/* Conv or GEMM + Add(output, other): the other operand, a float tensor of the output's shape
 * computed before the node (4-D for a step that writes NHWC8), becomes the residual the step
 * adds before its activation. */
static void fuse_residual(const fuse_ctx *c, ir_node *n, building *b) {
    const ir_tensor *out = b->e.output;
    ir_node *next = single_consumer(c, out);
    if (!next || !is_binary(next, BINARY_ADD) || next->epilogue) return;
    ir_tensor *other = next->inputs[0] == out ? next->inputs[1] : next->inputs[0];
    bool nhwc = n->desc && (n->desc->flags & OP_NHWC_OUTPUT);
    if (other == out || (nhwc && out->rank != 4) || other->dtype != TCI_DTYPE_FLOAT ||
        out->dtype != TCI_DTYPE_FLOAT || !same_shape(other, out) ||
        !same_shape(next->outputs[0], out) || !computed_before(other, n))
        return;
    b->e.residual = other;
    b->e.residual_add = next;
    absorb(b, n, next, "+Add");
}

/* MatMul + Add(matmul, c) with c a constant vector of the N output columns: a fused bias. */
static void fuse_bias(const fuse_ctx *c, ir_node *n, building *b) {
    const ir_tensor *out = b->e.output;
    ir_node *next = single_consumer(c, out);
    if (!next || !is_binary(next, BINARY_ADD) || out->rank < 1) return;
    ir_tensor *v = next->inputs[0] == out ? next->inputs[1] : next->inputs[0];
    int64_t cols = out->dims[out->rank - 1];
    int64_t count = 1;
    for (int i = 0; i < v->rank; i++) count *= v->dims[i];
    if (!v->data || v->dtype != TCI_DTYPE_FLOAT || v->rank < 1 || count != cols ||
        v->dims[v->rank - 1] != cols || next->outputs[0]->rank != out->rank)
        return;
    b->e.bias = v;
    absorb(b, n, next, "+Add");
}

/* Conv + BatchNormalization: the statistics folded into new weights and bias (Conv's constant
 * float weights, BN's constant statistics of K channels; otherwise nothing happens). */
static tci_status fold_batchnorm(ir_graph *g, const fuse_ctx *c, ir_node *n, building *b) {
    const ir_tensor *w = n->inputs[1], *bias = n->num_inputs > 2 ? n->inputs[2] : NULL;
    ir_node *next = single_consumer(c, b->e.output);
    if (!next || next->inputs[0] != b->e.output || !w->data || w->dtype != TCI_DTYPE_FLOAT ||
        w->rank < 1 || (bias && (!bias->data || bias->dtype != TCI_DTYPE_FLOAT)))
        return TCI_OK;
    int64_t k = w->dims[0], per = 1;
    for (int i = 1; i < w->rank; i++) per *= w->dims[i];
    float *scale = malloc((size_t)(k ? k : 1) * sizeof(float));
    float *shift = malloc((size_t)(k ? k : 1) * sizeof(float));
    float *folded = malloc((size_t)(k * per > 0 ? k * per : 1) * sizeof(float));
    tci_status st = scale && shift && folded
                        ? TCI_OK
                        : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding BatchNormalization");
    for (int64_t i = 0; st == TCI_OK && i < k; i++) {
        scale[i] = 1.0f;
        shift[i] = bias ? ((const float *)bias->data)[i] : 0.0f;
    }
    bool done = false;
    if (st == TCI_OK) st = layer_batchnorm_fold(next, k, scale, shift, &done);
    if (st == TCI_OK && done) {
        const float *src = w->data;
        for (int64_t i = 0; i < k * per; i++) folded[i] = src[i] * scale[i / per];
        st = ir_graph_add_float_constant(g, folded, w->rank, w->dims, &b->e.weights);
        int64_t bd[1] = {k};
        if (st == TCI_OK) st = ir_graph_add_float_constant(g, shift, 1, bd, &b->e.bias);
        if (st == TCI_OK) absorb(b, n, next, "+BatchNormalization");
    }
    free(scale);
    free(shift);
    free(folded);
    return st;
}

/* Sigmoid on its own, followed by the Mul of a SiLU pair: one SiLU step. */
static void fuse_standalone_silu(const fuse_ctx *c, ir_node *n, building *b) {
    ir_node *sig, *mul;
    if (!is_sigmoid(n) || !silu_pair(c, n->inputs[0], &sig, &mul) || sig != n) return;
    b->e.act.kind = ACT_SILU;
    snprintf(b->label, sizeof b->label, "Sigmoid+Mul(SiLU)");
    mul->fused_into = n;
    b->e.output = mul->outputs[0];
    b->any = true;
}

/* Add(a, r) -> n (OP_PROLOGUE_RESIDUAL, reading the sum as input 0): n's step adds a and r itself,
 * and also writes the sum when another node (or the graph's outputs) reads it, which must then
 * run after n. a and r are computed float tensors of the sum's shape, computed before n. */
static tci_status fuse_residual_prologue(ir_graph *g, const fuse_ctx *c, ir_node *n) {
    ir_tensor *x = n->num_inputs > 0 ? n->inputs[0] : NULL;
    ir_node *add = x ? x->producer : NULL;
    if (!x || x->data || !add || !is_binary(add, BINARY_ADD) || add->epilogue || !n->outputs[0])
        return TCI_OK;
    ir_tensor *a = add->inputs[0], *r = add->inputs[1];
    if (!a || !r || x->dtype != TCI_DTYPE_FLOAT || a->dtype != TCI_DTYPE_FLOAT ||
        r->dtype != TCI_DTYPE_FLOAT || !same_shape(a, x) || !same_shape(r, x) ||
        !computed_before(a, n) || !computed_before(r, n))
        return TCI_OK;
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_node *m = g->nodes[i];
        const ir_node *step = m->fused_into ? m->fused_into : m;
        for (int k = 0; k < m->num_inputs; k++)
            if (m->inputs[k] == x && m != n && step->index <= n->index) return TCI_OK;
    }
    ir_epilogue e;
    memset(&e, 0, sizeof e);
    e.output = n->outputs[0];
    e.residual = r;
    e.residual_add = add;
    e.sum_output = c->consumers[x->index] > 1 ? x : NULL;
    char label[128];
    snprintf(label, sizeof label, "%s+%s", add->op_type, n->op_type);
    e.label = arena_strdup(g->arena, label);
    n->epilogue = e.label ? arena_memdup(g->arena, &e, sizeof e) : NULL;
    if (!n->epilogue) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing epilogues");
    add->fused_into = n;
    return TCI_OK;
}

static tci_status fuse_node(ir_graph *g, const fuse_ctx *c, ir_node *n) {
    unsigned f = n->desc ? n->desc->flags : 0;
    building b;
    memset(&b, 0, sizeof b);
    b.e.output = n->outputs[0];
    snprintf(b.label, sizeof b.label, "%s", n->op_type);
    if (n->desc && n->desc->epilogue) fuse_standalone_silu(c, n, &b);
    /* a variadic op of one input is a copy, and a copy has no epilogue */
    bool one_input = n->desc && n->desc->binary != BINARY_NONE && n->num_inputs < 2;
    if (b.e.output && !one_input) {
        if (f & OP_FOLDS_BATCHNORM) TRY_STATUS(fold_batchnorm(g, c, n, &b));
        if (f & OP_EPILOGUE_BIAS) fuse_bias(c, n, &b);
        /* a GEMM (a residual epilogue, dense output) fuses on through a reshape of its rows,
         * or a Transpose of channels-last rows that views them as NHWC8; the view stays apart
         * where nothing after it fuses */
        building before = b;
        bool gemm = (f & OP_EPILOGUE_RESIDUAL) && !(f & OP_NHWC_OUTPUT);
        ir_node *view = gemm ? fuse_reshape_view(c, n, &b) : NULL;
        if (gemm && !view) view = fuse_nhwc_view(c, n, &b);
        if (f & OP_EPILOGUE_RESIDUAL) fuse_residual(c, n, &b);
        ir_node *gelu[4];
        float divisor;
        if ((f & OP_EPILOGUE_ACT) && erf_gelu_chain(c, n, &divisor, gelu)) {
            /* the Div's step applies the Gelu to its dividend x, dividing by c in fp32 (the
             * constant c read in the storage type, sqrt(2) as 1.4140625 in fp16, would scale
             * every output by the same 1e-4: invisible per element, a bias in every mean) */
            b.e.act = (act_params){ACT_GELU_SCALED, 1.0f / divisor, 0.0f};
            for (int i = 0; i < 4; i++) absorb(&b, n, gelu[i], i ? "" : "+Erf+Add+Mul+Mul (Gelu)");
        } else if ((f & OP_EPILOGUE_ACT) &&
                   !((f & OP_EPILOGUE_SCALE) && fuse_erf_gelu_after(c, n, &b)) &&
                   !fuse_tanh_gelu_after(c, n, &b)) {
            TRY_STATUS(fuse_activation(c, n, &b));
        }
        if (view && b.e.output == view->outputs[0]) {
            view->fused_into = NULL;
            b = before;
        }
    }
    if (!b.any) return TCI_OK;
    n->epilogue = arena_memdup(g->arena, &b.e, sizeof b.e);
    if (n->epilogue) n->epilogue->label = arena_strdup(g->arena, b.label);
    if (!n->epilogue || !n->epilogue->label)
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing epilogues");
    return TCI_OK;
}

tci_status pass_fuse_for_gpu(ir_graph *g) {
    for (size_t i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->epilogue || g->nodes[i]->fused_into) return TCI_OK; /* done already */
    /* attention first: its scores MatMul must not take the mask as a bias; it may move the
     * Transposes around projections (rows.c), so the readers are counted after it */
    TRY_STATUS(pass_fuse_attention(g));
    fuse_ctx c = {g, ir_graph_count_readers(g)};
    if (!c.consumers) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing epilogues");
    tci_status st = TCI_OK;
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++)
        if (!g->nodes[i]->fused_into && !g->nodes[i]->epilogue) st = fuse_node(g, &c, g->nodes[i]);
    /* then the residual Adds before normalisations, of what the epilogues left */
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        if (!n->fused_into && !n->epilogue && n->desc && (n->desc->flags & OP_PROLOGUE_RESIDUAL))
            st = fuse_residual_prologue(g, &c, n);
    }
    free(c.consumers);
    return st;
}

/* x is a Slice's output that concat (reading it as input) can read in place: the Slice's only
 * reader, no graph output, both dense; it selects only along axis, in steps of 1. */
static bool concat_reads_slice(const int *consumers, const ir_node *concat, const ir_tensor *x,
                               int axis) {
    const ir_node *s = x->producer;
    op_pattern pat;
    if (!s || s->fused_into || s->epilogue || strcmp(s->op_type, "Slice") != 0 ||
        x->is_graph_output || consumers[x->index] != 1 ||
        x->layout != PLAN_LAYOUT_DENSE || s->inputs[0]->layout != PLAN_LAYOUT_DENSE ||
        s->inputs[0]->data || s->inputs[0]->dtype != x->dtype || x->rank != s->inputs[0]->rank ||
        s == concat)
        return false;
    if (op_node_pattern(s, &pat) != OP_PATTERN_SELECT || pat.drop_axis >= 0 ||
        pat.rank != x->rank)
        return false;
    for (int d = 0; d < x->rank; d++)
        if (pat.step[d] != 1 || (d != axis && (pat.start[d] != 0 ||
                                              x->dims[d] != s->inputs[0]->dims[d])))
            return false;
    return true;
}

tci_status pass_fold_slices_into_concats(ir_graph *g) {
    int *consumers = ir_graph_count_readers(g);
    if (!consumers) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding slices");
    for (size_t i = 0; i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        const ir_tensor *y = n->num_outputs ? n->outputs[0] : NULL;
        if (strcmp(n->op_type, "Concat") != 0 || n->fused_into || n->epilogue || !y ||
            y->layout != PLAN_LAYOUT_DENSE || y->rank < 1 || !n->desc)
            continue;
        int64_t axis = 0;
        if (ir_attr_int(n, "axis", 0, &axis) != TCI_OK) continue;
        if (axis < 0) axis += y->rank;
        for (int k = 0; k < n->num_inputs && axis >= 0 && axis < y->rank; k++)
            if (n->inputs[k] && concat_reads_slice(consumers, n, n->inputs[k], (int)axis))
                n->inputs[k]->producer->fused_into = n;
    }
    free(consumers);
    return TCI_OK;
}
