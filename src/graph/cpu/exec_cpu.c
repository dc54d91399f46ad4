/* The fp32 CPU reference executor: re-infers shapes from actual values at every node, so models
 * whose shapes depend on input values run too; frees each intermediate after its last use. */
#include "graph/cpu/exec_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef struct exec_value {
    tci_tensor tensor;
    bool owned;
} exec_value;

struct exec_cpu {
    const ir_graph *graph;
    exec_value *values;     /* by tensor index */
    size_t *last_use;       /* node index after which the tensor is dead; SIZE_MAX: keep */
    const tci_tensor **in;  /* scratch for one node's inputs */
    tci_tensor **out;
    int max_io;
};

tci_status exec_cpu_create(const ir_graph *graph, exec_cpu **out_exec) {
    *out_exec = NULL;
    exec_cpu *e = calloc(1, sizeof *e);
    if (!e) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating executor");
    e->graph = graph;
    size_t nt = graph->num_tensors ? graph->num_tensors : 1;
    e->values = calloc(nt, sizeof *e->values);
    e->last_use = calloc(nt, sizeof *e->last_use);
    for (size_t i = 0; i < graph->num_nodes; i++) {
        const ir_node *n = graph->nodes[i];
        if (n->num_inputs > e->max_io) e->max_io = n->num_inputs;
        if (n->num_outputs > e->max_io) e->max_io = n->num_outputs;
    }
    e->in = calloc((size_t)e->max_io + 1, sizeof *e->in);
    e->out = calloc((size_t)e->max_io + 1, sizeof *e->out);
    if (!e->values || !e->last_use || !e->in || !e->out) {
        exec_cpu_destroy(e);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating executor");
    }
    for (size_t i = 0; i < graph->num_nodes; i++) {
        const ir_node *n = graph->nodes[i];
        for (int k = 0; k < n->num_inputs; k++)
            if (n->inputs[k]) e->last_use[n->inputs[k]->index] = i;
        /* an output nobody reads dies right after its node */
        for (int k = 0; k < n->num_outputs; k++)
            if (n->outputs[k] && e->last_use[n->outputs[k]->index] < i)
                e->last_use[n->outputs[k]->index] = i;
    }
    for (size_t i = 0; i < graph->num_outputs; i++) e->last_use[graph->outputs[i]->index] = SIZE_MAX;
    for (size_t t = 0; t < graph->num_tensors; t++) {
        const ir_tensor *it = graph->tensors[t];
        if (it->data) ir_tensor_view(it, &e->values[t].tensor);
    }
    *out_exec = e;
    return TCI_OK;
}

static void release_all(exec_cpu *e) {
    for (size_t t = 0; t < e->graph->num_tensors; t++) {
        exec_value *v = &e->values[t];
        if (v->owned) free(v->tensor.data);
        memset(v, 0, sizeof *v);
        if (e->graph->tensors[t]->data) ir_tensor_view(e->graph->tensors[t], &v->tensor);
    }
}

void exec_cpu_destroy(exec_cpu *exec) {
    if (!exec) return;
    if (exec->values) release_all(exec);
    free(exec->values);
    free(exec->last_use);
    free(exec->in);
    free(exec->out);
    free(exec);
}

static tci_status check_input(const ir_tensor *decl, const tci_tensor *given) {
    char want[128], got[128];
    if (given->dtype != decl->dtype)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "input '%s' has dtype %s, the model expects %s",
                         decl->name, tci_dtype_name(given->dtype), tci_dtype_name(decl->dtype));
    bool ok = given->rank == decl->rank && given->rank >= 0 && given->rank <= TCI_MAX_RANK;
    for (int i = 0; ok && i < given->rank; i++)
        if (given->dims[i] < 0 || (decl->dims[i] >= 0 && decl->dims[i] != given->dims[i]))
            ok = false;
    if (!ok)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "input '%s' has shape %s, the model expects %s",
                         decl->name, ir_format_dims(given->rank, given->dims, got, sizeof got),
                         ir_format_dims(decl->rank, decl->dims, want, sizeof want));
    int64_t count;
    TRY_STATUS(ir_count_elements(given->rank, given->dims, &count));
    if (count > 0 && !given->data)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "input '%s' has no data", decl->name);
    return TCI_OK;
}

tci_status exec_cpu_run(exec_cpu *e, const tci_tensor *inputs, size_t num_inputs) {
    const ir_graph *g = e->graph;
    release_all(e);
    if (num_inputs != g->num_inputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "got %zu inputs, the model has %zu", num_inputs,
                         g->num_inputs);
    for (size_t i = 0; i < num_inputs; i++) {
        TRY_STATUS(check_input(g->inputs[i], &inputs[i]));
        exec_value *v = &e->values[g->inputs[i]->index];
        v->tensor = inputs[i];
        v->tensor.name = g->inputs[i]->name;
        v->owned = false;
    }
    tci_status st = TCI_OK;
    for (size_t i = 0; i < g->num_nodes && st == TCI_OK; i++) {
        const ir_node *n = g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++)
            e->in[k] = n->inputs[k] ? &e->values[n->inputs[k]->index].tensor : NULL;
        for (int k = 0; k < n->num_outputs; k++)
            e->out[k] = n->outputs[k] ? &e->values[n->outputs[k]->index].tensor : NULL;
        st = op_run_node_limited(n, e->in, e->out, g->limits.max_tensor_elements);
        if (st != TCI_OK) break;
        for (int k = 0; k < n->num_outputs; k++)
            if (n->outputs[k]) e->values[n->outputs[k]->index].owned = true;
        for (int k = 0; k < n->num_inputs + n->num_outputs; k++) {
            const ir_tensor *t = k < n->num_inputs ? n->inputs[k] : n->outputs[k - n->num_inputs];
            if (!t || e->last_use[t->index] != i) continue;
            exec_value *v = &e->values[t->index];
            if (v->owned) {
                free(v->tensor.data);
                memset(v, 0, sizeof *v);
            }
        }
    }
    /* outputs that are graph inputs or constants: copy, so they outlive the caller's buffers */
    for (size_t i = 0; i < g->num_outputs && st == TCI_OK; i++) {
        exec_value *v = &e->values[g->outputs[i]->index];
        if (v->owned) continue;
        int64_t count = op_count(&v->tensor);
        size_t bytes = (size_t)count * tci_dtype_size(v->tensor.dtype);
        void *copy = malloc(bytes ? bytes : 1);
        if (!copy) {
            st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory copying output");
            break;
        }
        if (bytes) memcpy(copy, v->tensor.data, bytes);
        v->tensor.data = copy;
        v->owned = true;
    }
    if (st != TCI_OK) release_all(e);
    return st;
}

const tci_tensor *exec_cpu_output(const exec_cpu *exec, size_t index) {
    return &exec->values[exec->graph->outputs[index]->index].tensor;
}
