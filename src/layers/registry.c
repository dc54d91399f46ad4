/* The op registry: family tables joined, and the opset resolution every node goes through. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

static const op_desc *const *const families[] = {
    layer_conv_ops,     layer_pool_ops,   layer_eltwise_ops, layer_cast_ops,   layer_shape_ops,
    layer_movement_ops, layer_linear_ops, layer_norm_ops,    layer_reduce_ops, layer_resize_ops,
    layer_range_ops,    layer_index_ops,  layer_rearrange_ops, layer_rnn_ops, layer_argreduce_ops,
    layer_logic_ops,    layer_groupnorm_ops, layer_unary_ops, layer_einsum_ops,
    layer_select_ops,   layer_grid_sample_ops,
    layer_quant_ops,    layer_quant_linear_ops, layer_control_ops, layer_scan_ops,
    layer_axisnorm_ops, layer_generate_ops, layer_pick_ops, layer_linalg_ops, layer_image_ops,
    layer_loss_ops,
    /* the LLM-era ops (opset 23+) */
    layer_rmsnorm_ops, layer_rotary_ops, layer_sdpa_ops,
    /* detection heads, audio front ends, set, bit and text-feature ops (CPU reference only) */
    layer_roi_ops, layer_spectral_ops, layer_unique_ops, layer_unpool_ops, layer_bitwise_ops,
    layer_deform_conv_ops, layer_linear_attention_ops, layer_tfidf_ops,
};

void op_registry_each(void (*fn)(const op_desc *desc, void *user), void *user) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const op_desc *const *d = families[f]; *d; d++) fn(*d, user);
}

static const op_desc *find(const char *op_type) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const op_desc *const *d = families[f]; *d; d++)
            if (strcmp((*d)->op_type, op_type) == 0) return *d;
    return NULL;
}

tci_status op_registry_resolve(const ir_node *node, const op_desc **out_desc, int *out_since) {
    *out_desc = NULL;
    *out_since = 0;
    if (node->domain[0] && strcmp(node->domain, "ai.onnx") != 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "op domain '%s' is not supported (only the default ONNX domain)",
                             node->domain);
    const op_desc *d = find(node->op_type);
    if (!d)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "op '%s' (opset %d) is not supported; tci_list_ops lists the "
                             "supported ops",
                             node->op_type, node->opset);
    if (node->opset > IR_MAX_KNOWN_OPSET)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "opset %d is newer than the newest tcinfer knows (%d)", node->opset,
                             IR_MAX_KNOWN_OPSET);
    int since = 0;
    for (const int *v = d->versions; *v; v++)
        if (*v <= node->opset) since = *v;
    if (!since)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "opset %d selects a version of %s older than tcinfer supports "
                             "(from opset %d)",
                             node->opset, node->op_type, d->versions[0]);
    *out_desc = d;
    *out_since = since;
    return TCI_OK;
}

tci_status op_prepare_node(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_registry_resolve(node, &node->desc, &node->since_version));
    return node->desc->parse(node, arena);
}

tci_status op_run_node(const ir_node *node, const tci_tensor *const *in, tci_tensor *const *out) {
    return op_run_node_limited(node, in, out, IR_DEFAULT_MAX_TENSOR_ELEMENTS);
}

tci_status op_run_node_limited(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out, int64_t max_elements) {
    for (int o = 0; o < node->num_outputs; o++)
        if (out[o]) {
            memset(out[o], 0, sizeof *out[o]);
            out[o]->rank = -1;
            if (node->outputs[o]) out[o]->name = node->outputs[o]->name;
        }
    if (node->desc->cpu_run) return node->desc->cpu_run(node, in, out, max_elements);
    TRY_STATUS(node->desc->infer(node, in, out));
    tci_status st = TCI_OK;
    for (int o = 0; o < node->num_outputs && st == TCI_OK; o++) {
        tci_tensor *t = out[o];
        if (!t) continue;
        int64_t count;
        st = ir_count_elements(t->rank, t->dims, &count);
        if (st != TCI_OK) {
            st = status_error_prefix(st, "node '%s' (%s) output %d", node->name, node->op_type, o);
            break;
        }
        if (count < 0 || t->dtype == TCI_DTYPE_UNDEFINED) {
            st = ir_node_error(node, TCI_ERR_INTERNAL, "output %d shape not inferred", o);
            break;
        }
        size_t elem = tci_dtype_size(t->dtype);
        if (count > max_elements) {
            /* shapes known only at run time (data-dependent) meet the limit here, before any
             * allocation */
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "output %d would have %lld elements, over the limit of %lld "
                               "(max_tensor_elements)",
                               o, (long long)count, (long long)max_elements);
            break;
        }
        if ((uint64_t)count > SIZE_MAX / 2 / elem) {
            st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "output %d is too large", o);
            break;
        }
        /* never malloc(0): a zero-element tensor still gets a distinct non-NULL pointer */
        t->data = malloc(count ? (size_t)count * elem : 1);
        if (!t->data)
            st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "cannot allocate output %d (%lld bytes)",
                               o, (long long)(count * (int64_t)elem));
    }
    if (st == TCI_OK) st = node->desc->cpu_forward(node, in, out);
    if (st != TCI_OK)
        for (int o = 0; o < node->num_outputs; o++)
            if (out[o]) {
                free(out[o]->data);
                out[o]->data = NULL;
            }
    return st;
}
