/* Scan: runs its body once per element along each scan input's axis, carrying state values from
 * one iteration to the next and stacking per-iteration scan outputs. Scan-8 has a batch axis 0
 * on every value and an optional sequence_lens first input: it runs as Scan-9 once per batch
 * entry (scan8_*), its scan outputs padded with zeros past each entry's length. The body reads
 * the enclosing graph's tensors through the node's implicit inputs; CPU reference only. */
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef struct scan_params {
    ir_graph *body;
    int first;   /* the node input of state 0: 1 in Scan-8 (after sequence_lens), else 0 */
    int states;  /* N: state values (inputs and outputs 0..N-1) */
    int inputs;  /* M: scan inputs (inputs N..) */
    int outputs; /* K: scan outputs (outputs N..) */
    const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs; /* NULL: all 0 */
} scan_params;

/* An optional INTS attribute of `want` entries, each within [lo, hi] (hi < lo: any axis). */
static tci_status scan_list(const ir_node *node, const char *name, int want, bool direction,
                            const int64_t **out) {
    size_t count;
    TRY_STATUS(ir_attr_ints(node, name, out, &count));
    if (!*out) return TCI_OK;
    if (count != (size_t)want)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s has %zu entries, not %d", name,
                             count, want);
    for (size_t i = 0; direction && i < count; i++)
        if ((*out)[i] != 0 && (*out)[i] != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s[%zu] is %lld; a direction is 0 (forward) or 1 (reverse)",
                                 name, i, (long long)(*out)[i]);
    return TCI_OK;
}

static tci_status scan_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"body",          "num_scan_inputs",        "scan_input_axes",
                                        "scan_input_directions", "scan_output_axes",
                                        "scan_output_directions", NULL};
    static const char *const known_v8[] = {"body", "directions", "num_scan_inputs", NULL};
    bool batched = node->since_version < 9;
    TRY_STATUS(ir_check_attrs(node, batched ? known_v8 : known));
    int first = batched ? 1 : 0; /* Scan-8's sequence_lens may be omitted */
    int explicit_inputs = node->num_inputs - node->num_implicit_inputs - first;
    for (int k = first; k < explicit_inputs + first; k++)
        if (!node->inputs[k])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %d is omitted", k);
    const ir_attr *a = ir_node_attr(node, "body");
    if (!a || a->type != IR_ATTR_GRAPH || !a->graph)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'body' %s",
                             a ? "is not a graph" : "is missing");
    int64_t m;
    TRY_STATUS(ir_attr_int(node, "num_scan_inputs", -1, &m));
    if (m < 1 || m > explicit_inputs)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "num_scan_inputs is %lld; it must be in [1, %d] (the inputs)",
                             (long long)m, explicit_inputs);
    OP_ALLOC_PARAMS(node, arena, scan_params, p);
    p->body = a->graph;
    p->first = first;
    p->inputs = (int)m;
    p->states = explicit_inputs - p->inputs;
    p->outputs = node->num_outputs - p->states;
    if (p->outputs < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%d outputs for %d state values",
                             node->num_outputs, p->states);
    if (p->body->num_inputs != (size_t)(p->states + p->inputs) ||
        p->body->num_outputs != (size_t)(p->states + p->outputs))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the body has %zu inputs and %zu outputs; with %d state values, "
                             "%d scan inputs and %d scan outputs it needs %d and %d",
                             p->body->num_inputs, p->body->num_outputs, p->states, p->inputs,
                             p->outputs, p->states + p->inputs, p->states + p->outputs);
    if (batched) {
        TRY_STATUS(scan_list(node, "directions", p->inputs, true, &p->in_dirs));
        return op_prepare_subgraph(p->body, node, "body");
    }
    TRY_STATUS(scan_list(node, "scan_input_axes", p->inputs, false, &p->in_axes));
    TRY_STATUS(scan_list(node, "scan_input_directions", p->inputs, true, &p->in_dirs));
    TRY_STATUS(scan_list(node, "scan_output_axes", p->outputs, false, &p->out_axes));
    TRY_STATUS(scan_list(node, "scan_output_directions", p->outputs, true, &p->out_dirs));
    return op_prepare_subgraph(p->body, node, "body");
}

/* Scan input j's axis for its rank, normalised. */
static tci_status scan_in_axis(const ir_node *node, int j, int rank, int *out) {
    const scan_params *p = node->params;
    if (rank < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "scan input %d is a scalar", j);
    return op_normalize_axis(node, p->in_axes ? p->in_axes[j] : 0, rank, out);
}

/* The sequence length: every scan input's length along its axis; -1 while unknown. */
static tci_status scan_length(const ir_node *node, const tci_tensor *const *in, int64_t *out) {
    const scan_params *p = node->params;
    *out = -1;
    for (int j = 0; j < p->inputs; j++) {
        const tci_tensor *x = in[p->states + j];
        if (x->rank < 0) continue;
        int axis;
        TRY_STATUS(scan_in_axis(node, j, x->rank, &axis));
        int64_t len = x->dims[axis];
        if (len < 0) continue;
        if (*out >= 0 && len != *out)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "scan input %d has %lld elements along its axis, scan input 0 "
                                 "%lld",
                                 j, (long long)len, (long long)*out);
        *out = len;
    }
    return TCI_OK;
}

static tci_status scan_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const scan_params *p = node->params;
    int64_t len;
    TRY_STATUS(scan_length(node, in, &len));
    int nin = p->states + p->inputs, nout = p->states + p->outputs;
    tci_tensor *body_in = calloc((size_t)(nin + nout), sizeof *body_in);
    const tci_tensor **bind = calloc((size_t)nin, sizeof *bind);
    if (!body_in || !bind) {
        free(body_in);
        free(bind);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory inferring");
    }
    tci_tensor *body_out = body_in + nin;
    tci_status st = TCI_OK;
    for (int k = 0; k < nin && st == TCI_OK; k++) {
        body_in[k] = *in[k];
        body_in[k].data = NULL;
        bind[k] = &body_in[k];
        if (k < p->states || in[k]->rank < 0) continue;
        int axis; /* a slice: the scan axis left out */
        st = scan_in_axis(node, k - p->states, in[k]->rank, &axis);
        body_in[k].rank = in[k]->rank - 1;
        for (int d = axis; d < TCI_MAX_RANK - 1; d++) body_in[k].dims[d] = in[k]->dims[d + 1];
    }
    /* the body's errors name the body's node: this one's name goes before */
    if (st == TCI_OK && (st = op_infer_subgraph(p->body, bind, in, body_out)) != TCI_OK)
        st = status_error_prefix(st, "node '%s' (Scan)", node->name);
    for (int k = 0; st == TCI_OK && k < nout; k++) {
        if (!out[k]) continue;
        const tci_tensor *b = &body_out[k];
        if (k < p->states) {
            st = op_carried_infer(node, "state", k, in[k], b, out[k]);
            continue;
        }
        out[k]->dtype = b->dtype;
        if (b->rank < 0) continue;
        if (b->rank >= TCI_MAX_RANK) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "scan output %d would have rank %d; at most %d is supported",
                               k - p->states, b->rank + 1, TCI_MAX_RANK);
            break;
        }
        int axis;
        st = op_normalize_axis(node, p->out_axes ? p->out_axes[k - p->states] : 0, b->rank + 1,
                               &axis);
        if (st != TCI_OK) break;
        out[k]->rank = b->rank + 1;
        for (int d = 0, s = 0; d <= b->rank; d++) out[k]->dims[d] = d == axis ? len : b->dims[s++];
    }
    free(body_in);
    free(bind);
    return st;
}

/* slice = x[..., index, ...] along axis (its data allocated by the caller). */
static void scan_slice(const tci_tensor *x, int axis, int64_t index, tci_tensor *slice) {
    int64_t outer = lower_prod(x->dims, 0, axis), len = x->dims[axis];
    size_t row = (size_t)lower_prod(x->dims, axis + 1, x->rank) * tci_dtype_size(x->dtype);
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)slice->data + (size_t)o * row,
               (const char *)x->data + ((size_t)(o * len + index)) * row, row);
}

static tci_status scan_steps(const ir_node *node, const tci_tensor *const *in, int64_t len,
                             op_carried *c, tci_tensor *slices, op_value_stack *stacks,
                             tci_tensor *body_out, int64_t max_elements) {
    const scan_params *p = node->params;
    int n = p->states, nin = p->states + p->inputs;
    const tci_tensor **bind = calloc((size_t)nin, sizeof *bind);
    if (!bind) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Scan");
    tci_status st = TCI_OK;
    for (int64_t t = 0; t < len && st == TCI_OK; t++) {
        for (int k = 0; k < n; k++) bind[k] = &c->v[k];
        for (int j = 0; j < p->inputs; j++) {
            const tci_tensor *x = in[n + j];
            int axis;
            scan_in_axis(node, j, x->rank, &axis);
            bool reverse = p->in_dirs && p->in_dirs[j];
            scan_slice(x, axis, reverse ? len - 1 - t : t, &slices[j]);
            bind[n + j] = &slices[j];
        }
        st = op_run_subgraph(p->body, bind, in, body_out, max_elements);
        if (st != TCI_OK) { /* named by the body's node: this one's name goes before */
            st = status_error_prefix(st, "node '%s' (Scan)", node->name);
            break;
        }
        st = op_carried_take(node, c, body_out);
        for (int k = 0; k < p->outputs && st == TCI_OK; k++)
            st = op_stack_push(node, k, &stacks[k], &body_out[n + k]);
        for (int k = 0; k < n + p->outputs; k++) free(body_out[k].data);
    }
    free(bind);
    return st;
}

/* Scan's inputs sliced: one buffer per scan input, its shape the input's without the axis. */
static tci_status scan_slices(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *slices) {
    const scan_params *p = node->params;
    for (int j = 0; j < p->inputs; j++) {
        const tci_tensor *x = in[p->states + j];
        int axis;
        TRY_STATUS(scan_in_axis(node, j, x->rank, &axis));
        slices[j].dtype = x->dtype;
        slices[j].rank = x->rank - 1;
        for (int d = 0, s = 0; d < x->rank; d++)
            if (d != axis) slices[j].dims[s++] = x->dims[d];
        size_t bytes = (size_t)op_count(&slices[j]) * tci_dtype_size(x->dtype);
        slices[j].data = malloc(bytes ? bytes : 1);
        if (!slices[j].data) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return TCI_OK;
}

static tci_status scan_run(const ir_node *node, const tci_tensor *const *in,
                           tci_tensor *const *out, int64_t max_elements) {
    const scan_params *p = node->params;
    int n = p->states;
    int64_t len;
    TRY_STATUS(scan_length(node, in, &len));
    op_carried c = {0};
    tci_tensor *slices = calloc((size_t)p->inputs, sizeof *slices);
    op_value_stack *stacks = calloc((size_t)p->outputs + 1, sizeof *stacks);
    tci_tensor *body_out = calloc((size_t)(n + p->outputs) + 1, sizeof *body_out);
    tci_status st = slices && stacks && body_out
                        ? op_carried_init(node, &c, "state", n, in)
                        : ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Scan");
    if (st == TCI_OK) st = scan_slices(node, in, slices);
    if (st == TCI_OK) st = scan_steps(node, in, len, &c, slices, stacks, body_out, max_elements);
    /* the scan inputs are empty along their axis: each scan output is empty along its own, its
     * other dims from the body's inference */
    if (st == TCI_OK)
        st = op_stack_infer_empty(node, scan_infer, in, n, p->outputs, stacks, p->out_axes);
    if (st == TCI_OK) st = op_carried_out(node, &c, out);
    for (int k = 0; st == TCI_OK && k < p->outputs; k++)
        if (out[n + k])
            st = op_stack_output(node, k, &stacks[k], p->out_axes ? p->out_axes[k] : 0,
                                 p->out_dirs && p->out_dirs[k], max_elements, out[n + k]);
    if (st != TCI_OK)
        for (int k = 0; k < node->num_outputs; k++)
            if (out[k]) {
                free(out[k]->data);
                out[k]->data = NULL;
            }
    op_carried_free(&c);
    for (int j = 0; slices && j < p->inputs; j++) free(slices[j].data);
    for (int k = 0; stacks && k < p->outputs; k++) free(stacks[k].data);
    free(slices);
    free(stacks);
    free(body_out);
    return st;
}

/* ---- Scan-8: per batch entry ---- */

/* The values Scan-9's functions read for one batch entry, in[] of the node as they index it:
 * states and scan inputs without their batch axis (data NULL: shapes only; b < 0), the scan
 * inputs cut to len steps, then the implicit inputs unchanged. views[] holds the tensors. */
static tci_status scan8_views(const ir_node *node, const tci_tensor *const *in, int64_t b,
                              int64_t len, tci_tensor *views, const tci_tensor **vin) {
    const scan_params *p = node->params;
    int n = p->states + p->inputs;
    for (int i = 0; i < node->num_inputs; i++) vin[i] = in[i];
    for (int k = 0; k < n; k++) {
        const tci_tensor *x = in[k + 1];
        vin[k] = &views[k];
        views[k] = *x;
        views[k].data = NULL;
        if (x->rank < 0) continue;
        if (x->rank < 1 || (k >= p->states && x->rank < 2))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input %d has rank %d; Scan-8 needs the batch axis 0%s", k + 1,
                                 x->rank, k >= p->states ? " and the sequence axis 1" : "");
        views[k].rank = x->rank - 1;
        memmove(views[k].dims, x->dims + 1, sizeof(int64_t) * (size_t)views[k].rank);
        if (b < 0) continue;
        size_t per = (size_t)(op_count(x) / x->dims[0]) * tci_dtype_size(x->dtype);
        views[k].data = (char *)x->data + (size_t)b * per;
        if (k >= p->states) views[k].dims[0] = len;
    }
    return TCI_OK;
}

/* The batch size and the maximum sequence length (-1 while unknown), every value agreeing. */
static tci_status scan8_sizes(const ir_node *node, const tci_tensor *const *in, int64_t *batch,
                              int64_t *seq) {
    const scan_params *p = node->params;
    *batch = *seq = -1;
    int from = 0; /* the input that gave *batch */
    for (int k = 0; k < p->states + p->inputs; k++) {
        const tci_tensor *x = in[k + 1];
        if (x->rank < 1) continue;
        if (*batch >= 0 && x->dims[0] >= 0 && x->dims[0] != *batch)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input %d has batch size %lld, input %d %lld", k + 1,
                                 (long long)x->dims[0], from, (long long)*batch);
        if (x->dims[0] >= 0 && *batch < 0) {
            *batch = x->dims[0];
            from = k + 1;
        }
        if (k >= p->states && x->rank >= 2 && x->dims[1] >= 0) *seq = x->dims[1];
    }
    const tci_tensor *lens = in[0];
    if (!lens) return TCI_OK;
    TRY_STATUS(op_check_dtype(node, lens, 0, (const tci_dtype[]){TCI_DTYPE_INT64, 0}));
    if (lens->rank >= 0 &&
        (lens->rank != 1 || (lens->dims[0] >= 0 && *batch >= 0 && lens->dims[0] != *batch)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "sequence_lens must be 1-D with one length per batch entry (%lld)",
                             (long long)*batch);
    return TCI_OK;
}

/* Adds the batch axis in front of each output Scan-9's rules gave for one entry. */
static tci_status scan8_add_batch(const ir_node *node, int64_t batch, tci_tensor *t) {
    if (t->rank < 0) return TCI_OK;
    if (t->rank >= TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "an output would have rank %d; at most %d is supported", t->rank + 1,
                             TCI_MAX_RANK);
    memmove(t->dims + 1, t->dims, sizeof(int64_t) * (size_t)t->rank);
    t->dims[0] = batch;
    t->rank++;
    return TCI_OK;
}

static tci_status scan8_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    int64_t batch, seq;
    TRY_STATUS(scan8_sizes(node, in, &batch, &seq));
    tci_tensor *views = calloc((size_t)node->num_inputs + 1, sizeof *views);
    const tci_tensor **vin = calloc((size_t)node->num_inputs + 1, sizeof *vin);
    tci_status st = views && vin ? TCI_OK
                                 : ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TCI_OK) st = scan8_views(node, in, -1, seq, views, vin);
    if (st == TCI_OK) st = scan_infer(node, vin, out);
    for (int k = 0; st == TCI_OK && k < node->num_outputs; k++)
        if (out[k]) st = scan8_add_batch(node, batch, out[k]);
    free(views);
    free(vin);
    return st;
}

/* Entry b's outputs (Scan-9's, one[]) into the batched outputs: allocated (zeros) at entry 0,
 * each scan output's first len steps of the seq it holds. */
static tci_status scan8_place(const ir_node *node, int64_t b, int64_t batch, int64_t seq,
                              tci_tensor *one, tci_tensor *const *out, int64_t max_elements) {
    const scan_params *p = node->params;
    for (int k = 0; k < node->num_outputs; k++) {
        if (!out[k]) continue;
        tci_tensor want = one[k];
        bool scanned = k >= p->states;
        if (scanned) want.dims[0] = seq;
        TRY_STATUS(scan8_add_batch(node, batch, &want));
        if (b == 0) {
            int64_t count;
            TRY_STATUS(ir_count_elements(want.rank, want.dims, &count));
            if (count > max_elements)
                return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                     "output %d would hold %lld elements, over the limit %lld",
                                     k, (long long)count, (long long)max_elements);
            const char *name = out[k]->name;
            *out[k] = want;
            out[k]->name = name;
            out[k]->data = calloc((size_t)count + 1, tci_dtype_size(want.dtype));
            if (!out[k]->data) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
        } else if (want.dtype != out[k]->dtype || want.rank != out[k]->rank ||
                   memcmp(want.dims, out[k]->dims, sizeof(int64_t) * (size_t)want.rank) != 0) {
            char a[128], c[128];
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "output %d is %s for batch entry %lld, %s for entry 0", k,
                                 ir_format_dims(want.rank, want.dims, a, sizeof a), (long long)b,
                                 ir_format_dims(out[k]->rank, out[k]->dims, c, sizeof c));
        }
        size_t es = tci_dtype_size(want.dtype);
        size_t per = (size_t)(op_count(out[k]) / batch) * es;
        size_t bytes = (size_t)op_count(&one[k]) * es;
        if (bytes) memcpy((char *)out[k]->data + (size_t)b * per, one[k].data, bytes);
    }
    return TCI_OK;
}

static tci_status scan8_run(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out, int64_t max_elements) {
    const scan_params *p = node->params;
    int64_t batch, seq;
    TRY_STATUS(scan8_sizes(node, in, &batch, &seq));
    int nout = node->num_outputs;
    tci_tensor *views = calloc((size_t)node->num_inputs + 1, sizeof *views);
    const tci_tensor **vin = calloc((size_t)node->num_inputs + 1, sizeof *vin);
    tci_tensor *one = calloc((size_t)nout + 1, sizeof *one);
    tci_tensor **one_out = calloc((size_t)nout + 1, sizeof *one_out);
    tci_status st = views && vin && one && one_out
                        ? TCI_OK
                        : ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; st == TCI_OK && k < nout; k++) {
        if (out[k]) out[k]->data = NULL;
        one_out[k] = out[k] ? &one[k] : NULL;
    }
    for (int64_t b = 0; st == TCI_OK && b < batch; b++) {
        int64_t len = in[0] ? ((const int64_t *)in[0]->data)[b] : seq;
        if (len < 0 || len > seq) {
            st = ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                               "sequence_lens[%lld] is %lld; the scan inputs hold %lld steps",
                               (long long)b, (long long)len, (long long)seq);
            break;
        }
        st = scan8_views(node, in, b, len, views, vin);
        if (st == TCI_OK && len == 0 && b > 0) {
            /* no step: the initial states, the scan outputs left zeros */
            for (int k = 0; k < p->states; k++) {
                size_t bytes = (size_t)op_count(&views[k]) * tci_dtype_size(views[k].dtype);
                if (out[k] && bytes)
                    memcpy((char *)out[k]->data + (size_t)b * bytes, views[k].data, bytes);
            }
            continue;
        }
        if (st == TCI_OK) st = scan_run(node, vin, one_out, max_elements);
        if (st == TCI_OK) st = scan8_place(node, b, batch, seq, one, out, max_elements);
        for (int k = 0; k < nout; k++) {
            free(one[k].data);
            one[k].data = NULL;
        }
    }
    if (st == TCI_OK && batch == 0)
        st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                           "the batch is empty: no entry gives the outputs' shapes");
    if (st != TCI_OK)
        for (int k = 0; k < nout; k++)
            if (out[k]) {
                free(out[k]->data);
                out[k]->data = NULL;
            }
    free(views);
    free(vin);
    free(one);
    free(one_out);
    return st;
}

static tci_status scan_infer_any(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const scan_params *p = node->params;
    return p->first ? scan8_infer(node, in, out) : scan_infer(node, in, out);
}

static tci_status scan_run_any(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out, int64_t max_elements) {
    const scan_params *p = node->params;
    return p->first ? scan8_run(node, in, out, max_elements)
                    : scan_run(node, in, out, max_elements);
}

static const op_desc scan_op = {.op_type = "Scan",
                                .versions = OP_VERSIONS(8, 9, 11, 16, 19, 21, 23, 24, 25),
                                .parse = scan_parse,
                                .infer = scan_infer_any,
                                .flags = OP_CONTROL_FLOW,
                                .binary = BINARY_NONE,
                                .cpu_run = scan_run_any};

const op_desc *const layer_scan_ops[] = {&scan_op, NULL};

