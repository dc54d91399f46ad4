/* Op family 'loss': the training losses exported with inference graphs: NegativeLogLikelihoodLoss
 * (of log-probabilities) and SoftmaxCrossEntropyLoss (the same of a log-softmax over axis 1,
 * which it can also return). Input (N, C, d1...), target (N, d1...) of class indices, an
 * optional weight per class; ignore_index drops an element, and a weighted mean divides by the
 * weights taken, as ONNX's reference does. Sums in double; CPU reference only (no GPU path). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_reduction;

typedef struct loss_params {
    loss_reduction reduction;
    bool has_ignore;
    int64_t ignore_index;
    bool softmax; /* SoftmaxCrossEntropyLoss: the input holds scores */
} loss_params;

static tci_status loss_parse(ir_node *node, mem_arena *arena, bool softmax) {
    TRY_STATUS(op_check_arity(node, 2, 3, 1, softmax ? 2 : 1));
    static const char *const known[] = {"ignore_index", "reduction", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, loss_params, p);
    p->softmax = softmax;
    p->has_ignore = ir_node_attr(node, "ignore_index") != NULL;
    TRY_STATUS(ir_attr_int(node, "ignore_index", 0, &p->ignore_index));
    const char *reduction;
    TRY_STATUS(ir_attr_string(node, "reduction", "mean", &reduction));
    if (strcmp(reduction, "none") == 0) p->reduction = LOSS_NONE;
    else if (strcmp(reduction, "sum") == 0) p->reduction = LOSS_SUM;
    else if (strcmp(reduction, "mean") == 0) p->reduction = LOSS_MEAN;
    else
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "reduction '%s' is not one of none, sum, mean", reduction);
    return TCI_OK;
}

static tci_status nll_parse(ir_node *node, mem_arena *arena) {
    return loss_parse(node, arena, false);
}

static tci_status sce_parse(ir_node *node, mem_arena *arena) {
    return loss_parse(node, arena, true);
}

static tci_status loss_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const loss_params *p = node->params;
    const tci_tensor *x = in[0], *target = in[1];
    const tci_tensor *weight = node->num_inputs > 2 ? in[2] : NULL;
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, target, 1, op_index_types));
    if (weight) {
        TRY_STATUS(op_check_dtype(node, weight, 2, op_float_types));
        if (weight->rank >= 0 && weight->rank != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "weight must be 1-D, got rank %d",
                                 weight->rank);
    }
    if (x->rank >= 0 && x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input must be (N, C, d1...), rank >= 2, got rank %d", x->rank);
    if (x->rank >= 0 && target->rank >= 0) {
        bool ok = target->rank == x->rank - 1;
        for (int i = 0; ok && i < target->rank; i++) {
            int64_t a = target->dims[i], b = x->dims[i == 0 ? 0 : i + 1];
            if (a >= 0 && b >= 0 && a != b) ok = false;
        }
        if (!ok) {
            char ts[128], xs[128];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "target of shape %s does not match input %s (N, d1... without "
                                 "C)",
                                 ir_format_dims(target->rank, target->dims, ts, sizeof ts),
                                 ir_format_dims(x->rank, x->dims, xs, sizeof xs));
        }
    }
    if (weight && weight->rank == 1 && x->rank >= 2 && weight->dims[0] >= 0 && x->dims[1] >= 0 &&
        weight->dims[0] != x->dims[1])
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "weight has %lld entries for %lld classes",
                             (long long)weight->dims[0], (long long)x->dims[1]);
    tci_tensor *y = out[0];
    if (p->reduction == LOSS_NONE) {
        op_same_shape(y, target);
        y->dtype = x->dtype;
    } else {
        y->dtype = x->dtype;
        y->rank = 0;
    }
    if (p->softmax && node->num_outputs > 1 && out[1]) op_same_shape(out[1], x);
    return TCI_OK;
}

/* log-softmax of x (n, c, d) over c into lp, in double */
static void log_softmax_axis1(const float *x, float *lp, int64_t n, int64_t c, int64_t d) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < d; k++) {
            const float *row = x + i * c * d + k;
            float *out = lp + i * c * d + k;
            double max = row[0];
            for (int64_t j = 1; j < c; j++)
                if (row[j * d] > max) max = row[j * d];
            double sum = 0.0;
            for (int64_t j = 0; j < c; j++) sum += exp(row[j * d] - max);
            double log_sum = log(sum);
            for (int64_t j = 0; j < c; j++) out[j * d] = (float)((row[j * d] - max) - log_sum);
        }
}

static tci_status loss_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const loss_params *p = node->params;
    const tci_tensor *x = in[0], *target = in[1];
    const tci_tensor *weight = node->num_inputs > 2 ? in[2] : NULL;
    int64_t n = x->dims[0], c = x->dims[1], d = 1;
    for (int i = 2; i < x->rank; i++) d *= x->dims[i];
    const float *logp = x->data;
    float *scratch = NULL;
    if (p->softmax) {
        tci_tensor *lp_out = node->num_outputs > 1 ? out[1] : NULL;
        float *lp = lp_out ? lp_out->data : NULL;
        if (!lp) {
            scratch = malloc((size_t)(op_count(x) ? op_count(x) : 1) * sizeof *scratch);
            if (!scratch)
                return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for log_prob");
            lp = scratch;
        }
        log_softmax_axis1(x->data, lp, n, c, d);
        logp = lp;
    }
    const float *w = weight ? weight->data : NULL;
    float *y = out[0]->data;
    double sum = 0.0, weights = 0.0;
    tci_status st = TCI_OK;
    for (int64_t i = 0; i < n && st == TCI_OK; i++)
        for (int64_t k = 0; k < d; k++) {
            int64_t at = i * d + k, t = op_read_int(target, at);
            double loss = 0.0, wt = 0.0;
            if (!(p->has_ignore && t == p->ignore_index)) {
                if (t < 0 || t >= c) {
                    st = ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                       "target %lld at element %lld is not a class in [0, %lld) "
                                       "nor ignore_index",
                                       (long long)t, (long long)at, (long long)c);
                    break;
                }
                wt = w ? w[t] : 1.0;
                loss = -(double)logp[(i * c + t) * d + k] * wt;
            }
            if (p->reduction == LOSS_NONE) y[at] = (float)loss;
            sum += loss;
            weights += wt;
        }
    free(scratch);
    if (st != TCI_OK) return st;
    /* a mean over no weight at all is 0/0: NaN, as ONNX's reference gives */
    if (p->reduction == LOSS_SUM) y[0] = (float)sum;
    else if (p->reduction == LOSS_MEAN) y[0] = (float)(sum / weights);
    return TCI_OK;
}

OP_DESC(nll_desc, "NegativeLogLikelihoodLoss", OP_VERSIONS(12, 13, 22), nll_parse, loss_infer,
        loss_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(sce_desc, "SoftmaxCrossEntropyLoss", OP_VERSIONS(12, 13), sce_parse, loss_infer,
        loss_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_loss_ops[] = {&nll_desc, &sce_desc, NULL};
