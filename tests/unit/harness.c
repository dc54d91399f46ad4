/* Shared bits of the Check unit tests. */
#include "harness.h"

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"

#include <math.h>
#include <stdlib.h>

int test_run_suite(Suite *suite) {
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#include <stdio.h>

#include "layers/op.h"

ir_node *th_node(ir_graph *graph, const char *op_type, int opset, int num_inputs,
                 int num_outputs) {
    ir_node *node = NULL;
    ck_assert_tci_ok(ir_graph_add_node(graph, NULL, op_type, "", num_inputs, num_outputs, &node));
    node->opset = opset;
    for (int i = 0; i < num_inputs; i++) {
        ck_assert_tci_ok(ir_graph_add_tensor(graph, NULL, &node->inputs[i]));
        node->inputs[i]->is_graph_input = true;
    }
    for (int i = 0; i < num_outputs; i++) {
        ck_assert_tci_ok(ir_graph_add_tensor(graph, NULL, &node->outputs[i]));
        node->outputs[i]->producer = node;
    }
    return node;
}

static ir_attr *add_attr(ir_graph *graph, ir_node *node, const char *name, ir_attr_type type) {
    ir_attr *attrs = arena_alloc(graph->arena, sizeof(ir_attr) * (size_t)(node->num_attrs + 1));
    ck_assert_ptr_nonnull(attrs);
    if (node->num_attrs) memcpy(attrs, node->attrs, sizeof(ir_attr) * (size_t)node->num_attrs);
    node->attrs = attrs;
    ir_attr *a = &attrs[node->num_attrs++];
    a->name = arena_strdup(graph->arena, name);
    a->type = type;
    return a;
}

void th_attr_int(ir_graph *graph, ir_node *node, const char *name, int64_t value) {
    add_attr(graph, node, name, IR_ATTR_INT)->i = value;
}

void th_attr_ints(ir_graph *graph, ir_node *node, const char *name, const int64_t *values,
                  size_t count) {
    ir_attr *a = add_attr(graph, node, name, IR_ATTR_INTS);
    a->ints = arena_memdup(graph->arena, values, count * sizeof *values);
    a->count = count;
}

void th_attr_float(ir_graph *graph, ir_node *node, const char *name, float value) {
    add_attr(graph, node, name, IR_ATTR_FLOAT)->f = value;
}

void th_attr_floats(ir_graph *graph, ir_node *node, const char *name, const float *values,
                    size_t count) {
    ir_attr *a = add_attr(graph, node, name, IR_ATTR_FLOATS);
    a->floats = arena_memdup(graph->arena, values, count * sizeof *values);
    a->count = count;
}

void th_attr_string(ir_graph *graph, ir_node *node, const char *name, const char *value) {
    add_attr(graph, node, name, IR_ATTR_STRING)->s = arena_strdup(graph->arena, value);
}

void th_attr_strings(ir_graph *graph, ir_node *node, const char *name,
                     const char *const *values, size_t count) {
    ir_attr *a = add_attr(graph, node, name, IR_ATTR_STRINGS);
    const char **list = arena_alloc(graph->arena, (count ? count : 1) * sizeof *list);
    ck_assert_ptr_nonnull(list);
    for (size_t i = 0; i < count; i++) list[i] = arena_strdup(graph->arena, values[i]);
    a->strings = list;
    a->count = count;
}

void th_attr_tensor(ir_graph *graph, ir_node *node, const char *name, const tci_tensor *value) {
    ir_attr *a = add_attr(graph, node, name, IR_ATTR_TENSOR);
    ck_assert_tci_ok(ir_graph_add_tensor(graph, NULL, &a->tensor));
    ir_tensor_copy_shape(a->tensor, value);
    size_t bytes = (size_t)tci_tensor_count(value) * tci_dtype_size(value->dtype);
    a->tensor->data = arena_memdup(graph->arena, value->data, bytes ? bytes : 1);
}

tci_tensor th_tensor(tci_dtype dtype, int rank, const int64_t *dims, const void *data) {
    tci_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.data = (void *)data;
    return t;
}

tci_status th_run(ir_graph *graph, ir_node *node, const tci_tensor *inputs, tci_tensor *outputs) {
    const tci_tensor *in[16] = {0};
    tci_tensor *out[16] = {0};
    ck_assert_int_le(node->num_inputs, 16);
    ck_assert_int_le(node->num_outputs, 16);
    for (int i = 0; i < node->num_inputs; i++) {
        if (inputs[i].dtype == TCI_DTYPE_UNDEFINED) {
            node->inputs[i] = NULL;
        } else {
            in[i] = &inputs[i];
            ir_tensor_copy_shape(node->inputs[i], &inputs[i]);
        }
    }
    for (int i = 0; i < node->num_outputs; i++) {
        memset(&outputs[i], 0, sizeof outputs[i]);
        out[i] = node->outputs[i] ? &outputs[i] : NULL;
    }
    tci_status st = op_prepare_node(node, graph->arena);
    if (st != TCI_OK) return st;
    return op_run_node(node, in, out);
}

float *th_cpu_output(ir_graph *graph, const tci_tensor *in, size_t num_in, size_t index) {
    /* the executor runs what the passes bound: a graph fresh from th_node_io has no op yet */
    for (size_t i = 0; i < graph->num_nodes; i++)
        ck_assert_msg(graph->nodes[i]->desc, "th_cpu_output: node '%s' is not bound to its op: "
                      "run pass_optimize first", graph->nodes[i]->name);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(graph, &ex));
    ck_assert_tci_ok(exec_cpu_run(ex, in, num_in));
    const tci_tensor *y = exec_cpu_output(ex, index);
    ck_assert_int_eq(y->dtype, TCI_DTYPE_FLOAT);
    size_t bytes = (size_t)op_count(y) * sizeof(float);
    float *copy = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, y->data, bytes);
    exec_cpu_destroy(ex);
    return copy;
}

void th_free(tci_tensor *outputs, int count) {
    for (int i = 0; i < count; i++) {
        free(outputs[i].data);
        outputs[i].data = NULL;
    }
}

void th_assert_near(const float *got, const float *want, size_t count, float tol) {
    for (size_t i = 0; i < count; i++) {
        /* equal first: inf - inf is NaN */
        float d = got[i] == want[i] ? 0.0f : got[i] - want[i];
        if (d < 0) d = -d;
        ck_assert_msg(d <= tol || (got[i] != got[i] && want[i] != want[i]),
                      "element %zu: got %.9g, want %.9g (tolerance %g)", i, (double)got[i],
                      (double)want[i], (double)tol);
    }
}

ir_tensor *th_named(ir_graph *graph, const char *name, tci_dtype dtype, int rank,
                    const int64_t *dims, const void *data) {
    ir_tensor *t = NULL;
    ck_assert_tci_ok(ir_graph_add_tensor(graph, name, &t));
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    if (data) {
        int64_t count = 1;
        for (int i = 0; i < rank; i++) count *= dims[i];
        size_t bytes = (size_t)count * tci_dtype_size(dtype);
        t->data = arena_memdup(graph->arena, data, bytes ? bytes : 1);
    }
    return t;
}

ir_node *th_node_io(ir_graph *graph, const char *name, const char *op_type, int opset,
                    ir_tensor **inputs, int num_inputs, ir_tensor **outputs, int num_outputs) {
    ir_node *n = NULL;
    ck_assert_tci_ok(ir_graph_add_node(graph, name, op_type, "", num_inputs, num_outputs, &n));
    n->opset = opset;
    for (int i = 0; i < num_inputs; i++) n->inputs[i] = inputs[i];
    for (int i = 0; i < num_outputs; i++) n->outputs[i] = outputs[i];
    return n;
}

void th_graph_io(ir_graph *graph, ir_tensor **inputs, int num_inputs, ir_tensor **outputs,
                 int num_outputs) {
    graph->inputs = arena_alloc(graph->arena, sizeof(ir_tensor *) * (size_t)(num_inputs + 1));
    graph->outputs = arena_alloc(graph->arena, sizeof(ir_tensor *) * (size_t)(num_outputs + 1));
    for (int i = 0; i < num_inputs; i++) {
        graph->inputs[i] = inputs[i];
        inputs[i]->is_graph_input = true;
    }
    for (int i = 0; i < num_outputs; i++) {
        graph->outputs[i] = outputs[i];
        outputs[i]->is_graph_output = true;
    }
    graph->num_inputs = (size_t)num_inputs;
    graph->num_outputs = (size_t)num_outputs;
}

tci_status th_infer(ir_graph *graph, ir_node *node, const tci_tensor *const *in, tci_tensor *out) {
    TRY_STATUS(op_prepare_node(node, graph->arena));
    tci_tensor *o[4] = {0};
    ck_assert_int_le(node->num_outputs, 4);
    for (int k = 0; k < node->num_outputs; k++) {
        memset(&out[k], 0, sizeof out[k]);
        o[k] = node->outputs[k] ? &out[k] : NULL;
    }
    return node->desc->infer(node, in, o);
}

tci_tensor th_shape_only(tci_dtype dtype, int rank, const int64_t *dims) {
    tci_tensor t = th_tensor(dtype, rank < 0 ? 0 : rank, dims, NULL);
    t.rank = rank;
    return t;
}

void th_assert_dims(const tci_tensor *t, int rank, const int64_t *dims) {
    ck_assert_int_eq(t->rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(t->dims[i], dims[i]);
}

void th_replay_copy(const plan_step *s, const float *src, float *dst) {
    const plan_strided *v = &s->u.copy.view;
    int64_t idx[PLAN_MAX_PHYS_RANK] = {0}, total = 1;
    for (int d = 0; d < v->rank; d++) total *= v->dims[d];
    for (int64_t e = 0; e < total; e++) {
        int64_t si = v->in_offset[0], di = v->out_offset;
        for (int d = 0; d < v->rank; d++) {
            si += idx[d] * v->strides[0][d];
            di += idx[d] * v->out_strides[d];
        }
        dst[di] = src[si];
        for (int d = v->rank - 1; d >= 0; d--) {
            if (++idx[d] < v->dims[d]) break;
            idx[d] = 0;
        }
    }
}

void th_replay_attention(const plan_attention *a, const float *q, const float *k, const float *v,
                         const float *mask, const uint8_t *keep, float *y) {
    double *srow = malloc((size_t)(a->kv_len > 0 ? a->kv_len : 1) * sizeof(double));
    ck_assert_ptr_nonnull(srow);
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t h = 0; h < a->heads; h++)
            for (int64_t i = 0; i < a->q_len; i++) {
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < a->kv_len; j++) {
                    double acc = 0.0;
                    for (int64_t e = 0; e < a->head_dim; e++)
                        acc += (double)q[a->q_offset + b * a->q_strides[0] + h * a->q_strides[1] +
                                         i * a->q_strides[2] + e * a->q_strides[3]] *
                               k[a->k_offset + b * a->k_strides[0] + h * a->k_strides[1] +
                                 j * a->k_strides[2] + e * a->k_strides[3]];
                    srow[j] = acc * a->scale;
                    const int64_t mb = a->mask_batch_mod ? b % a->mask_batch_mod : b;
                    const int64_t mi = mb * a->mask_strides[0] + h * a->mask_strides[1] +
                                       i * a->mask_strides[2] + j * a->mask_strides[3];
                    const int64_t ki = b * a->keep_strides[0] + h * a->keep_strides[1] +
                                       i * a->keep_strides[2] + j * a->keep_strides[3];
                    if (a->causal && j > i) srow[j] = -INFINITY;
                    else if (a->has_keep && !keep[ki]) srow[j] = a->keep_row_mean ? -1e30 : -INFINITY;
                    else if (a->has_mask) srow[j] += mask[mi];
                    if (srow[j] > mx) mx = srow[j];
                }
                for (int64_t j = 0; j < a->kv_len; j++)
                    sum += srow[j] = mx == -INFINITY ? 0.0 : exp(srow[j] - mx);
                for (int64_t e = 0; e < a->head_dim; e++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < a->kv_len; j++)
                        acc += srow[j] * v[a->v_offset + b * a->v_strides[0] +
                                           h * a->v_strides[1] + j * a->v_strides[2] +
                                           e * a->v_strides[3]];
                    y[b * a->y_strides[0] + h * a->y_strides[1] + i * a->y_strides[2] +
                      e * a->y_strides[3]] = sum > 0.0 ? (float)(acc / sum) : 0.0f;
                }
            }
    free(srow);
}

tci_status th_plan_for_gpu(ir_graph *g, plan **out_plan) {
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    return plan_build(g, NULL, out_plan);
}

ir_tensor *th_act(ir_graph *graph, const char *name) {
    return th_named(graph, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

void th_fill(float *v, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}
