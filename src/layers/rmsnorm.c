/* Op family 'rmsnorm': RMSNormalization (opset 23), Y = X / sqrt(mean(X^2 over [axis:]) + epsilon)
 * * Scale, Scale broadcast unidirectionally to X. The mean of squares accumulates in double. On the
 * GPU it is LayerNormalization's step without the mean (fp32 statistics). */
#include <math.h>
#include <stdlib.h>

#include "layers/op.h"

typedef struct rmsnorm_params {
    int64_t axis;
    float epsilon;
} rmsnorm_params;

static tci_status rmsnorm_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, rmsnorm_params, p);
    TRY_STATUS(ir_attr_int(node, "axis", -1, &p->axis));
    TRY_STATUS(ir_attr_float(node, "epsilon", 1e-5f, &p->epsilon));
    int64_t stash;
    TRY_STATUS(ir_attr_int(node, "stash_type", TCI_DTYPE_FLOAT, &stash));
    if (stash != TCI_DTYPE_FLOAT)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "stash_type=%lld is not supported (only 1, float)", (long long)stash);
    return TCI_OK;
}

static tci_status rmsnorm_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const rmsnorm_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, scale, 1, op_float_types));
    /* Y has Scale's type (V); both are float here */
    if (x->rank < 0) {
        op_set_unknown(out[0], scale->dtype ? scale->dtype : x->dtype);
        return TCI_OK;
    }
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    if (scale->rank >= 0) {
        bool ok = scale->rank <= x->rank;
        for (int i = 0; ok && i < scale->rank; i++) {
            int64_t d = scale->dims[i], xd = x->dims[x->rank - scale->rank + i];
            if (d >= 0 && xd >= 0 && d != 1 && d != xd) ok = false;
        }
        if (!ok) {
            char ss[128], xs[128];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "scale of shape %s does not broadcast to X's %s",
                                 ir_format_dims(scale->rank, scale->dims, ss, sizeof ss),
                                 ir_format_dims(x->rank, x->dims, xs, sizeof xs));
        }
    }
    op_same_shape(out[0], x);
    out[0]->dtype = scale->dtype ? scale->dtype : x->dtype;
    return TCI_OK;
}

static tci_status rmsnorm_forward(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const rmsnorm_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t rows = 1, n = 1;
    for (int i = 0; i < x->rank; i++) *(i < axis ? &rows : &n) *= x->dims[i];
    if (rows * n == 0) return TCI_OK;
    const float *xd = x->data, *sd = scale->data;
    float *y = out[0]->data;
    float *inv = malloc((size_t)rows * sizeof *inv);
    if (!inv) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the RMS rows");
    for (int64_t r = 0; r < rows; r++) {
        const float *src = xd + r * n;
        double sq = 0.0;
        for (int64_t i = 0; i < n; i++) sq += (double)src[i] * src[i];
        inv[r] = (float)(1.0 / sqrt(sq / (double)n + (double)p->epsilon));
    }
    /* Scale may vary over X's leading dims too (unidirectional broadcast): walk Y in the rows of
     * the broadcast, each element finding its RMS row by its offset */
    op_bcast it;
    op_bcast_init(&it, out[0], (const tci_tensor *const[]){x, scale}, 2);
    int64_t o, offs[2];
    while (op_bcast_next(&it, &o, offs)) {
        const float *s = sd + offs[1];
        for (int64_t i = 0; i < it.row; i++)
            y[o + i] = xd[o + i] * inv[(o + i) / n] * s[i * it.row_stride[1]];
    }
    free(inv);
    return TCI_OK;
}

/* LayerNormalization's step in its RMS mode (norm.c), with a residual Add before it folded in. */
static tci_status rmsnorm_gpu_lower(plan_builder *b, const ir_node *node) {
    const rmsnorm_params *p = node->params;
    return layer_lower_norm_rows(b, node, p->axis, p->epsilon, NULL, true);
}

OP_DESC(rmsnorm_desc, "RMSNormalization", OP_VERSIONS(23), rmsnorm_parse, rmsnorm_infer,
        rmsnorm_forward, OP_PROLOGUE_RESIDUAL, rmsnorm_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_rmsnorm_ops[] = {&rmsnorm_desc, NULL};
