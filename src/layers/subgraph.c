/* The subgraphs of control-flow ops: preparing them once, inferring their outputs from the
 * enclosing node's inputs, and running them on the fp32 reference, node by node; what Loop and
 * Scan share: the hand-over of carried values between iterations and the stacking of
 * per-iteration scan outputs. */
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

/* Evaluating a node while inferring a subgraph is worth it for small values (shapes, scalars). */
enum { INFER_EVAL_MAX_ELEMENTS = 1 << 16 };

tci_status op_prepare_subgraph(ir_graph *sub, const ir_node *owner, const char *attr) {
    if (sub->prepared) return TCI_OK;
    tci_status st = ir_graph_sort(sub);
    for (size_t i = 0; st == TCI_OK && i < sub->num_nodes; i++)
        st = op_prepare_node(sub->nodes[i], sub->arena);
    if (st != TCI_OK)
        return status_error_prefix(st, "node '%s' (%s), subgraph '%s'", owner->name,
                                   owner->op_type, attr);
    sub->prepared = true;
    return TCI_OK;
}

/* One value per tensor of the subgraph, and which of them the walk allocated. */
typedef struct sub_values {
    tci_tensor *v;
    bool *owned;
    const tci_tensor **in;
    tci_tensor **out;
    tci_tensor *saved;
} sub_values;

static void values_free(const ir_graph *sub, sub_values *s) {
    if (s->v && s->owned)
        for (size_t t = 0; t < sub->num_tensors; t++)
            if (s->owned[t]) free(s->v[t].data);
    free(s->v);
    free(s->owned);
    free(s->in);
    free(s->out);
    free(s->saved);
}

/* Binds constants, inputs and outer values; with_data false keeps inputs' data out (inference
 * of values not known). */
static tci_status values_init(const ir_graph *sub, const tci_tensor *const *inputs,
                              const tci_tensor *const *node_in, sub_values *s) {
    memset(s, 0, sizeof *s);
    int width = 1;
    for (size_t i = 0; i < sub->num_nodes; i++) {
        if (sub->nodes[i]->num_inputs > width) width = sub->nodes[i]->num_inputs;
        if (sub->nodes[i]->num_outputs > width) width = sub->nodes[i]->num_outputs;
    }
    s->v = calloc(sub->num_tensors + 1, sizeof *s->v);
    s->owned = calloc(sub->num_tensors + 1, sizeof *s->owned);
    s->in = calloc((size_t)width, sizeof *s->in);
    s->out = calloc((size_t)width, sizeof *s->out);
    s->saved = calloc((size_t)width, sizeof *s->saved);
    if (!s->v || !s->owned || !s->in || !s->out || !s->saved) {
        values_free(sub, s);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory running a subgraph");
    }
    for (size_t t = 0; t < sub->num_tensors; t++) ir_tensor_view(sub->tensors[t], &s->v[t]);
    for (size_t i = 0; i < sub->num_inputs; i++)
        if (inputs && inputs[i]) {
            tci_tensor *v = &s->v[sub->inputs[i]->index];
            *v = *inputs[i];
            v->name = sub->inputs[i]->name;
        }
    for (size_t i = 0; i < sub->num_outer; i++) {
        tci_tensor *v = &s->v[sub->outer[i]->index];
        const tci_tensor *given = node_in[sub->outer_slot[i]];
        if (given) *v = *given;
        v->name = sub->outer[i]->name;
    }
    return TCI_OK;
}

static void node_io(const ir_node *n, sub_values *s) {
    for (int k = 0; k < n->num_inputs; k++)
        s->in[k] = n->inputs[k] ? &s->v[n->inputs[k]->index] : NULL;
    for (int k = 0; k < n->num_outputs; k++)
        s->out[k] = n->outputs[k] ? &s->v[n->outputs[k]->index] : NULL;
}

static bool inputs_known(const ir_node *n, const sub_values *s) {
    for (int k = 0; k < n->num_inputs; k++)
        if (s->in[k] && !s->in[k]->data) return false;
    return true;
}

static bool outputs_small(const ir_node *n, const sub_values *s) {
    for (int k = 0; k < n->num_outputs; k++) {
        if (!s->out[k]) continue;
        int64_t count;
        if (ir_count_elements(s->out[k]->rank, s->out[k]->dims, &count) != TCI_OK || count < 0 ||
            count > INFER_EVAL_MAX_ELEMENTS)
            return false;
    }
    return true;
}

tci_status op_infer_subgraph(const ir_graph *sub, const tci_tensor *const *inputs,
                             const tci_tensor *const *node_in, tci_tensor *outs) {
    sub_values s;
    TRY_STATUS(values_init(sub, inputs, node_in, &s));
    tci_status st = TCI_OK;
    for (size_t i = 0; i < sub->num_nodes && st == TCI_OK; i++) {
        const ir_node *n = sub->nodes[i];
        node_io(n, &s);
        for (int k = 0; k < n->num_outputs; k++)
            if (s.out[k]) {
                const char *name = s.out[k]->name;
                memset(s.out[k], 0, sizeof *s.out[k]);
                s.out[k]->name = name;
                s.out[k]->rank = -1;
                for (int d = 0; d < TCI_MAX_RANK; d++) s.out[k]->dims[d] = -1;
            }
        st = n->desc->infer(n, s.in, s.out);
        if (st != TCI_OK || !inputs_known(n, &s) || !outputs_small(n, &s)) continue;
        /* a value that fails to evaluate (in a branch these inputs do not take) stays unknown,
         * as inference alone leaves it; running the subgraph reports the failure */
        for (int k = 0; k < n->num_outputs; k++)
            if (s.out[k]) s.saved[k] = *s.out[k];
        if (op_run_node_limited(n, s.in, s.out, sub->limits.max_tensor_elements) != TCI_OK) {
            for (int k = 0; k < n->num_outputs; k++)
                if (s.out[k]) *s.out[k] = s.saved[k];
            continue;
        }
        for (int k = 0; k < n->num_outputs; k++)
            if (n->outputs[k]) s.owned[n->outputs[k]->index] = true;
    }
    for (size_t o = 0; o < sub->num_outputs && st == TCI_OK; o++) {
        outs[o] = s.v[sub->outputs[o]->index];
        outs[o].data = NULL;
    }
    values_free(sub, &s);
    if (st != TCI_OK)
        return status_error_prefix(st, "subgraph '%s'", sub->name ? sub->name : "");
    return st;
}

tci_status op_run_subgraph(const ir_graph *sub, const tci_tensor *const *inputs,
                           const tci_tensor *const *node_in, tci_tensor *outs,
                           int64_t max_elements) {
    sub_values s;
    TRY_STATUS(values_init(sub, inputs, node_in, &s));
    /* the last node reading each tensor: owned values are freed after it */
    size_t *last_use = calloc(sub->num_tensors + 1, sizeof *last_use);
    if (!last_use) {
        values_free(sub, &s);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory running a subgraph");
    }
    for (size_t i = 0; i < sub->num_nodes; i++) {
        const ir_node *n = sub->nodes[i];
        for (int k = 0; k < n->num_inputs + n->num_outputs; k++) {
            const ir_tensor *t = k < n->num_inputs ? n->inputs[k] : n->outputs[k - n->num_inputs];
            if (t) last_use[t->index] = i;
        }
    }
    for (size_t o = 0; o < sub->num_outputs; o++) last_use[sub->outputs[o]->index] = SIZE_MAX;
    tci_status st = TCI_OK;
    for (size_t i = 0; i < sub->num_nodes && st == TCI_OK; i++) {
        const ir_node *n = sub->nodes[i];
        node_io(n, &s);
        st = op_run_node_limited(n, s.in, s.out, max_elements);
        if (st != TCI_OK) break;
        for (int k = 0; k < n->num_outputs; k++)
            if (n->outputs[k]) s.owned[n->outputs[k]->index] = true;
        for (int k = 0; k < n->num_inputs + n->num_outputs; k++) {
            const ir_tensor *t = k < n->num_inputs ? n->inputs[k] : n->outputs[k - n->num_inputs];
            if (!t || last_use[t->index] != i || !s.owned[t->index]) continue;
            free(s.v[t->index].data);
            s.v[t->index].data = NULL;
            s.owned[t->index] = false;
        }
    }
    free(last_use);
    /* an output the walk computed is handed over; inputs, outer values, constants and a second
     * listing of one tensor are copied */
    size_t done = 0;
    for (; done < sub->num_outputs && st == TCI_OK; done++) {
        size_t t = sub->outputs[done]->index;
        outs[done] = s.v[t];
        if (s.owned[t]) {
            s.owned[t] = false;
            continue;
        }
        int64_t count = op_count(&s.v[t]);
        size_t bytes = (size_t)count * tci_dtype_size(s.v[t].dtype);
        outs[done].data = malloc(bytes ? bytes : 1);
        if (!outs[done].data) {
            st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory copying a subgraph output");
            break;
        }
        if (bytes) memcpy(outs[done].data, s.v[t].data, bytes);
    }
    if (st != TCI_OK)
        for (size_t o = 0; o < done; o++) {
            free(outs[o].data);
            outs[o].data = NULL;
        }
    values_free(sub, &s);
    return st;
}

/* ---- per-iteration values (Loop, Scan) ---- */

/* Carried value k (what names it) is of dtype want, the body makes it got. */
static tci_status carried_dtype_error(const ir_node *node, const char *what, int k,
                                      tci_dtype want, tci_dtype got) {
    return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s %d is %s, the body makes it %s", what,
                         k, tci_dtype_name(want), tci_dtype_name(got));
}

tci_status op_carried_infer(const ir_node *node, const char *what, int k, const tci_tensor *init,
                            const tci_tensor *body, tci_tensor *out) {
    if (body->dtype != TCI_DTYPE_UNDEFINED && init->dtype != TCI_DTYPE_UNDEFINED &&
        body->dtype != init->dtype)
        return carried_dtype_error(node, what, k, init->dtype, body->dtype);
    out->dtype = init->dtype;
    out->rank = body->rank == init->rank ? init->rank : -1;
    for (int d = 0; d < TCI_MAX_RANK; d++)
        out->dims[d] = d < out->rank && body->dims[d] == init->dims[d] ? init->dims[d] : -1;
    return TCI_OK;
}

tci_status op_carried_init(const ir_node *node, op_carried *c, const char *what, int n,
                           const tci_tensor *const *init) {
    c->what = what;
    c->count = n;
    c->v = calloc((size_t)n + 1, sizeof *c->v);
    c->owned = calloc((size_t)n + 1, sizeof *c->owned);
    if (!c->v || !c->owned) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; k < n; k++) c->v[k] = *init[k];
    return TCI_OK;
}

tci_status op_carried_take(const ir_node *node, op_carried *c, tci_tensor *body) {
    for (int k = 0; k < c->count; k++)
        if (body[k].dtype != c->v[k].dtype)
            return carried_dtype_error(node, c->what, k, c->v[k].dtype, body[k].dtype);
    for (int k = 0; k < c->count; k++) {
        if (c->owned[k]) free(c->v[k].data);
        c->v[k] = body[k];
        c->owned[k] = true;
        body[k].data = NULL;
    }
    return TCI_OK;
}

tci_status op_carried_out(const ir_node *node, op_carried *c, tci_tensor *const *out) {
    for (int k = 0; k < c->count; k++) {
        if (!out[k]) continue;
        const char *name = out[k]->name;
        *out[k] = c->v[k];
        out[k]->name = name;
        if (c->owned[k]) {
            c->owned[k] = false;
            continue;
        }
        size_t bytes = (size_t)op_count(&c->v[k]) * tci_dtype_size(c->v[k].dtype);
        out[k]->data = malloc(bytes ? bytes : 1);
        if (!out[k]->data) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
        if (bytes) memcpy(out[k]->data, c->v[k].data, bytes);
    }
    return TCI_OK;
}

void op_carried_free(op_carried *c) {
    for (int k = 0; c->owned && k < c->count; k++)
        if (c->owned[k]) free(c->v[k].data);
    free(c->v);
    free(c->owned);
}

tci_status op_stack_push(const ir_node *node, int k, op_value_stack *s, const tci_tensor *v) {
    if (s->count == 0) {
        s->first = *v;
        s->first.data = NULL;
    } else if (v->dtype != s->first.dtype || v->rank != s->first.rank ||
               memcmp(v->dims, s->first.dims, sizeof(int64_t) * (size_t)v->rank) != 0) {
        char a[128], b[128];
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                             "scan output %d is %s at iteration %lld, %s at the first", k,
                             ir_format_dims(v->rank, v->dims, a, sizeof a), (long long)s->count,
                             ir_format_dims(s->first.rank, s->first.dims, b, sizeof b));
    }
    size_t bytes = (size_t)op_count(v) * tci_dtype_size(v->dtype);
    if (s->bytes + bytes > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->bytes + bytes) cap *= 2;
        unsigned char *grown = realloc(s->data, cap);
        if (!grown) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory stacking");
        s->data = grown;
        s->cap = cap;
    }
    if (bytes) memcpy(s->data + s->bytes, v->data, bytes);
    s->bytes += bytes;
    s->count++;
    return TCI_OK;
}

tci_status op_stack_infer_empty(const ir_node *node,
                                tci_status (*infer)(const ir_node *, const tci_tensor *const *,
                                                    tci_tensor *const *),
                                const tci_tensor *const *in, int first_out, int n,
                                op_value_stack *stacks, const int64_t *axes) {
    bool empty = false;
    for (int k = 0; k < n; k++) empty = empty || stacks[k].count == 0;
    if (!empty) return TCI_OK;
    size_t nout = (size_t)node->num_outputs;
    tci_tensor *outs = calloc(nout + 1, sizeof *outs);
    tci_tensor **views = calloc(nout + 1, sizeof *views);
    tci_status st = TCI_OK;
    if (!outs || !views) st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t o = 0; st == TCI_OK && o < nout; o++) {
        outs[o].rank = -1;
        views[o] = &outs[o];
    }
    if (st == TCI_OK) st = infer(node, in, views);
    for (int k = 0; st == TCI_OK && k < n; k++) {
        if (stacks[k].count) continue;
        const tci_tensor *o = &outs[first_out + k];
        tci_tensor *f = &stacks[k].first;
        int axis = -1;
        int64_t count = -1;
        if (o->rank >= 1 && op_normalize_axis(node, axes ? axes[k] : 0, o->rank, &axis) == TCI_OK) {
            f->dtype = o->dtype;
            f->rank = o->rank - 1;
            for (int d = 0, j = 0; d < o->rank; d++)
                if (d != axis) f->dims[j++] = o->dims[d];
            ir_count_elements(f->rank, f->dims, &count);
        }
        if (count < 0 || o->dtype == TCI_DTYPE_UNDEFINED)
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "no iteration ran and the body's inference does not give scan "
                               "output %d's shape",
                               k);
    }
    free(outs);
    free(views);
    return st;
}

tci_status op_stack_output(const ir_node *node, int k, op_value_stack *s, int64_t axis,
                           bool reverse, int64_t max_elements, tci_tensor *out) {
    if (s->first.rank >= TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "scan output %d would have rank %d; at most %d is supported", k,
                             s->first.rank + 1, TCI_MAX_RANK);
    int a;
    TRY_STATUS(op_normalize_axis(node, axis, s->first.rank + 1, &a));
    const char *name = out->name;
    memset(out, 0, sizeof *out);
    out->name = name;
    out->dtype = s->first.dtype;
    out->rank = s->first.rank + 1;
    for (int d = 0, j = 0; d < out->rank; d++) out->dims[d] = d == a ? s->count : s->first.dims[j++];
    if (op_count(out) > max_elements)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "scan output %d would have %lld elements, over the limit of %lld "
                             "(max_tensor_elements)",
                             k, (long long)op_count(out), (long long)max_elements);
    if (a == 0 && !reverse) { /* the stack is the output as it is */
        out->data = s->data ? s->data : malloc(1);
        s->data = NULL;
        return out->data ? TCI_OK : ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    /* the iterations interleave: outer blocks of count x inner elements around the axis */
    int64_t len = s->count, outer = lower_prod(out->dims, 0, a);
    size_t row = (size_t)lower_prod(out->dims, a + 1, out->rank) * tci_dtype_size(out->dtype);
    out->data = malloc(s->bytes ? s->bytes : 1);
    if (!out->data) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t t = 0; t < len; t++) {
        int64_t pos = reverse ? len - 1 - t : t;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + (size_t)(o * len + pos) * row,
                   s->data + (size_t)(t * outer + o) * row, row);
    }
    return TCI_OK;
}
