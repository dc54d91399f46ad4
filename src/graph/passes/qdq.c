/* For the GPU: QuantizeLinear -> DequantizeLinear pairs on activations (QDQ models) become the
 * float ops the GPU runs, Mul(Clip(Round(Div(x, s)), lo - z, hi - z), s). On integers, (q - z)
 * with q = saturate(round(x / s) + z) is exactly that clamp, so the CPU reference computes the
 * same values either way. On the GPU the fusion pass puts Round into the Div's step, so x / s is
 * rounded in fp32, not after an fp16 store; the integers stored after it are exact in fp16
 * (|v| <= 2048, and larger values saturate the same), and only the final product is rounded to
 * the storage type. Per tensor only: a per-channel Div would divide NHWC8's zero padding by the
 * padded (zero) constants. Pairs it does not match (per axis, blocked, scales that are not
 * constants or differ between the two nodes, float16 scales) stay, and the planner refuses them
 * naming the node. The op types are written here only to create nodes; nodes are recognised by
 * their descriptors' pattern roles. */
#include <stdio.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

/* The opset the new nodes are created at: Clip's bounds are inputs from 11, and 13 is every op
 * used here in the form written below. */
enum { QDQ_OPSET = 13 };

static bool pattern_of(const ir_node *n, op_pattern_kind kind, op_pattern *out) {
    return n && !n->fused_into && op_node_pattern(n, out) == kind;
}

static int64_t count_of(const ir_tensor *t) {
    int64_t c = 1;
    for (int d = 0; d < t->rank; d++) c *= t->dims[d];
    return c;
}

static int32_t int_at(const ir_tensor *t, int64_t i) {
    if (!t) return 0;
    switch (t->dtype) {
    case TCI_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case TCI_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    default: return 0;
    }
}

/* Scale and zero point (z may be NULL) of a node: constants of float scales. */
static bool constant_params(const ir_node *n, const ir_tensor **s, const ir_tensor **z) {
    *s = n->inputs[1];
    *z = n->num_inputs > 2 ? n->inputs[2] : NULL;
    return (*s)->data && (*s)->dtype == TCI_DTYPE_FLOAT && (!*z || (*z)->data);
}

/* Whether the two nodes' scales and zero points hold the same values. */
static bool same_params(const ir_tensor *s1, const ir_tensor *z1, const ir_tensor *s2,
                        const ir_tensor *z2) {
    int64_t c = count_of(s1);
    if (count_of(s2) != c) return false;
    if (memcmp(s1->data, s2->data, (size_t)c * sizeof(float)) != 0) return false;
    for (int64_t i = 0; i < c; i++)
        if (int_at(z1, z1 && count_of(z1) == 1 ? 0 : i) !=
            int_at(z2, z2 && count_of(z2) == 1 ? 0 : i))
            return false;
    return true;
}

/* A scalar float constant. */
static tci_status scalar(ir_graph *g, float value, ir_tensor **out) {
    return ir_graph_add_float_constant(g, &value, 0, NULL, out);
}

/* A float tensor of x's shape named name (anonymous where the model has that name), or out
 * itself when given. */
static tci_status activation(ir_graph *g, const ir_tensor *x, const char *name, ir_tensor *out,
                             ir_tensor **t) {
    if (out) {
        *t = out;
        return TCI_OK;
    }
    TRY_STATUS(ir_graph_add_tensor(g, ir_graph_find_tensor(g, name) ? NULL : name, t));
    (*t)->dtype = TCI_DTYPE_FLOAT;
    (*t)->rank = x->rank;
    memcpy((*t)->dims, x->dims, sizeof x->dims);
    return TCI_OK;
}

/* Node op_type(a[, b[, c]]) -> out (a fresh tensor of x's shape when out is NULL), named after
 * the DequantizeLinear it replaces. */
static tci_status add_node(ir_graph *g, const ir_node *dq, const char *op_type,
                           ir_tensor *const *in, int num_in, ir_tensor *out, ir_tensor **y) {
    char name[512];
    snprintf(name, sizeof name, "%s/%s", dq->name, op_type);
    ir_node *n;
    TRY_STATUS(ir_graph_add_node(g, name, op_type, "", num_in, 1, &n));
    n->opset = QDQ_OPSET;
    for (int i = 0; i < num_in; i++) n->inputs[i] = in[i];
    snprintf(name, sizeof name, "%s/%s_output", dq->name, op_type);
    TRY_STATUS(activation(g, in[0], name, out, y));
    n->outputs[0] = *y;
    return op_prepare_node(n, g->arena);
}

/* Replaces dq (reading q's output) by the float ops; dq is left writing a tensor nobody reads. */
static tci_status emulate(ir_graph *g, ir_node *q, ir_node *dq) {
    const ir_tensor *s, *z;
    constant_params(q, &s, &z);
    float lo = 0.f, hi = 255.f;
    if (q->outputs[0]->dtype == TCI_DTYPE_INT8) lo = -128.f, hi = 127.f;
    const float zv = (float)int_at(z, 0);
    ir_tensor *x = q->inputs[0], *st, *lot, *hit, *t1, *t2, *t3, *y;
    TRY_STATUS(scalar(g, *(const float *)s->data, &st));
    TRY_STATUS(scalar(g, lo - zv, &lot));
    TRY_STATUS(scalar(g, hi - zv, &hit));
    ir_tensor *out = dq->outputs[0];
    ir_tensor *div_in[2] = {x, st};
    TRY_STATUS(add_node(g, dq, "Div", div_in, 2, NULL, &t1));
    TRY_STATUS(add_node(g, dq, "Round", &t1, 1, NULL, &t2));
    ir_tensor *clip_in[3] = {t2, lot, hit};
    TRY_STATUS(add_node(g, dq, "Clip", clip_in, 3, NULL, &t3));
    ir_tensor *dead;
    TRY_STATUS(ir_graph_add_tensor(g, NULL, &dead));
    dead->dtype = out->dtype;
    dq->outputs[0] = dead;
    ir_tensor *mul_in[2] = {t3, st};
    return add_node(g, dq, "Mul", mul_in, 2, out, &y);
}

tci_status pass_emulate_qdq(ir_graph *g) {
    bool changed = false;
    size_t num_nodes = g->num_nodes; /* the nodes added below are not visited */
    for (size_t i = 0; i < num_nodes; i++) {
        ir_node *dq = g->nodes[i];
        op_pattern pd, pq;
        if (!pattern_of(dq, OP_PATTERN_DEQUANTIZE, &pd)) continue;
        ir_node *q = dq->inputs[0]->producer;
        if (!pattern_of(q, OP_PATTERN_QUANTIZE, &pq) || pq.axis >= 0 || pd.axis >= 0) continue;
        const ir_tensor *x = q->inputs[0], *s1, *z1, *s2, *z2;
        if (x->data || x->dtype != TCI_DTYPE_FLOAT || !dq->outputs[0] ||
            dq->outputs[0]->dtype != TCI_DTYPE_FLOAT || !constant_params(q, &s1, &z1) ||
            !constant_params(dq, &s2, &z2) || !same_params(s1, z1, s2, z2) ||
            (z1 && count_of(z1) != 1))
            continue;
        TRY_STATUS(emulate(g, q, dq));
        changed = true;
    }
    if (!changed) return TCI_OK;
    TRY_STATUS(ir_graph_sort(g));
    return pass_eliminate_dead_nodes(g);
}
