/* Op family 'norm': BatchNormalization (inference, and training mode's output from the batch
 * statistics), LayerNormalization, Softmax and LogSoftmax (InstanceNormalization and
 * GroupNormalization are in groupnorm.c). Sums accumulate in double so long rows stay close to
 * onnxruntime. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

static tci_status batchnorm_gpu_lower(plan_builder *b, const ir_node *node);
static tci_status layernorm_gpu_lower(plan_builder *b, const ir_node *node);
static tci_status softmax_gpu_lower(plan_builder *b, const ir_node *node);

static void *alloc_params(ir_node *node, mem_arena *arena, size_t size) {
    void *p = arena_alloc(arena, size);
    if (!p) ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory parsing attributes");
    return p;
}

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t c = 1;
    for (int i = from; i < to; i++) c *= dims[i];
    return c;
}

/* Checks that t broadcasts unidirectionally to target (rank <= target's, each dim 1 or equal);
 * unknown dims pass. */
static tci_status check_unidirectional(const ir_node *node, const char *what, const tci_tensor *t,
                                       const tci_tensor *target) {
    if (t->rank < 0 || target->rank < 0) return TCI_OK;
    bool ok = t->rank <= target->rank;
    for (int i = 0; ok && i < t->rank; i++) {
        int64_t d = t->dims[i], td = target->dims[target->rank - t->rank + i];
        if (d >= 0 && td >= 0 && d != 1 && d != td) ok = false;
    }
    if (ok) return TCI_OK;
    char ts[128], xs[128];
    return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s of shape %s does not broadcast to %s",
                         what, ir_format_dims(t->rank, t->dims, ts, sizeof ts),
                         ir_format_dims(target->rank, target->dims, xs, sizeof xs));
}

/* ---- BatchNormalization ---- */

typedef struct batchnorm_params {
    float epsilon;
    float momentum;
    int spatial;
    int training; /* training_mode=1: normalise with the batch's statistics */
} batchnorm_params;

static const int batchnorm_versions[] = {1, 6, 7, 9, 14, 15, 0};

static tci_status batchnorm_parse(ir_node *node, mem_arena *arena) {
    int v = node->since_version;
    TRY_STATUS(op_check_arity(node, 5, 5, 1, v >= 14 ? 3 : 5));
    static const char *const known_v1[] = {"consumed_inputs", "epsilon", "is_test", "momentum",
                                           "spatial", NULL};
    static const char *const known_v6[] = {"epsilon", "is_test", "momentum", "spatial", NULL};
    static const char *const known_v7[] = {"epsilon", "momentum", "spatial", NULL};
    static const char *const known_v9[] = {"epsilon", "momentum", NULL};
    static const char *const known_v14[] = {"epsilon", "momentum", "training_mode", NULL};
    TRY_STATUS(ir_check_attrs(node, v >= 14  ? known_v14
                                 : v >= 9 ? known_v9
                                 : v >= 7 ? known_v7
                                 : v >= 6 ? known_v6
                                          : known_v1));
    batchnorm_params *p = alloc_params(node, arena, sizeof *p);
    if (!p) return TCI_ERR_OUT_OF_MEMORY;
    TRY_STATUS(ir_attr_float(node, "epsilon", 1e-5f, &p->epsilon));
    TRY_STATUS(ir_attr_float(node, "momentum", 0.9f, &p->momentum)); /* training mode's outputs */
    p->spatial = 1;
    if (v < 9) TRY_STATUS(op_read_flag(node, "spatial", 1, &p->spatial));
    if (v < 7) {
        int is_test = 0;
        TRY_STATUS(op_read_flag(node, "is_test", 0, &is_test));
    }
    int extra_outputs = 0;
    for (int i = 1; i < node->num_outputs; i++) extra_outputs += node->outputs[i] != NULL;
    if (v >= 14) {
        TRY_STATUS(op_read_flag(node, "training_mode", 0, &p->training));
        if (extra_outputs && !p->training)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "outputs running_mean/running_var are only valid with "
                                 "training_mode=1");
    } else if (extra_outputs) {
        /* before opset 14 the statistics outputs are what marks training mode */
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "training mode (%d statistics outputs) is not supported (inference "
                             "only)",
                             extra_outputs);
    }
    node->params = p;
    return TCI_OK;
}

static tci_status batchnorm_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const batchnorm_params *p = node->params;
    static const char *const names[] = {"X", "scale", "B", "mean", "var"};
    for (int i = 0; i < 5; i++) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    const tci_tensor *x = in[0];
    if (x->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input X must have rank >= 1");
    if (x->rank > 0) {
        /* statistics are per channel (dim 1), or per element of dims[1:] when not spatial */
        int want_rank = p->spatial ? 1 : x->rank - 1;
        int64_t want[TCI_MAX_RANK];
        if (p->spatial)
            want[0] = x->rank >= 2 ? x->dims[1] : 1;
        else
            for (int i = 1; i < x->rank; i++) want[i - 1] = x->dims[i];
        for (int i = 1; i < 5; i++) {
            const tci_tensor *s = in[i];
            if (s->rank < 0) continue;
            bool ok = s->rank == want_rank;
            for (int d = 0; ok && d < want_rank; d++)
                if (s->dims[d] >= 0 && want[d] >= 0 && s->dims[d] != want[d]) ok = false;
            if (!ok) {
                char ss[128], ws[128], xs[128];
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input %s has shape %s, expected %s for X of shape %s",
                                     names[i], ir_format_dims(s->rank, s->dims, ss, sizeof ss),
                                     ir_format_dims(want_rank, want, ws, sizeof ws),
                                     ir_format_dims(x->rank, x->dims, xs, sizeof xs));
            }
        }
    }
    op_same_shape(out[0], x);
    if (x->rank < 0) op_set_unknown(out[0], x->dtype);
    /* training mode's running_mean and running_var: per channel, in the statistics' dtype */
    for (int o = 1; o < node->num_outputs && o < 3; o++) {
        if (!out[o]) continue;
        op_set_unknown(out[o], in[3]->dtype);
        if (x->rank > 0) {
            out[o]->rank = 1;
            out[o]->dims[0] = x->rank >= 2 ? x->dims[1] : 1;
        }
    }
    return TCI_OK;
}

/* training_mode=1 (ONNX's reference): mean and biased variance of each channel over the batch
 * and spatial dims normalise X; running_mean / running_var = input * momentum + batch statistic
 * * (1 - momentum). */
static tci_status batchnorm_training_forward(const ir_node *node, const tci_tensor *const *in,
                                             tci_tensor *const *out) {
    const batchnorm_params *p = node->params;
    const tci_tensor *x = in[0];
    const float *xd = x->data, *scale = in[1]->data, *bias = in[2]->data, *mean_in = in[3]->data,
                *var_in = in[4]->data;
    float *y = out[0]->data;
    float *run_mean = node->num_outputs > 1 && out[1] ? out[1]->data : NULL;
    float *run_var = node->num_outputs > 2 && out[2] ? out[2]->data : NULL;
    int64_t batch = x->dims[0], channels = x->rank >= 2 ? x->dims[1] : 1;
    int64_t inner = prod(x->dims, 2, x->rank), count = batch * inner;
    for (int64_t c = 0; c < channels; c++) {
        double sum = 0.0, sq = 0.0;
        for (int64_t n = 0; n < batch; n++) {
            const float *src = xd + (n * channels + c) * inner;
            for (int64_t i = 0; i < inner; i++) sum += src[i];
        }
        double mean = count ? sum / (double)count : 0.0;
        for (int64_t n = 0; n < batch; n++) {
            const float *src = xd + (n * channels + c) * inner;
            for (int64_t i = 0; i < inner; i++) sq += (src[i] - mean) * (src[i] - mean);
        }
        double var = count ? sq / (double)count : 0.0;
        double a = scale[c] / sqrt(var + (double)p->epsilon);
        float fa = (float)a, fb = (float)(bias[c] - mean * a);
        for (int64_t n = 0; n < batch; n++) {
            const float *src = xd + (n * channels + c) * inner;
            float *dst = y + (n * channels + c) * inner;
            for (int64_t i = 0; i < inner; i++) dst[i] = src[i] * fa + fb;
        }
        double m = p->momentum;
        if (run_mean) run_mean[c] = (float)(mean_in[c] * m + mean * (1.0 - m));
        if (run_var) run_var[c] = (float)(var_in[c] * m + var * (1.0 - m));
    }
    return TCI_OK;
}

static tci_status batchnorm_forward(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const batchnorm_params *p = node->params;
    if (p->training) return batchnorm_training_forward(node, in, out);
    const tci_tensor *x = in[0];
    const float *xd = x->data, *scale = in[1]->data, *bias = in[2]->data, *mean = in[3]->data,
                *var = in[4]->data;
    float *y = out[0]->data;
    int64_t batch = x->dims[0];
    int64_t channels, inner;
    if (p->spatial) {
        channels = x->rank >= 2 ? x->dims[1] : 1;
        inner = prod(x->dims, 2, x->rank);
    } else {
        channels = prod(x->dims, 1, x->rank);
        inner = 1;
    }
    for (int64_t c = 0; c < channels; c++) {
        /* folded to y = x * a + b; the double keeps a and b within one rounding each */
        double a = scale[c] / sqrt((double)var[c] + (double)p->epsilon);
        float fa = (float)a, fb = (float)(bias[c] - mean[c] * a);
        for (int64_t n = 0; n < batch; n++) {
            const float *src = xd + (n * channels + c) * inner;
            float *dst = y + (n * channels + c) * inner;
            for (int64_t i = 0; i < inner; i++) dst[i] = src[i] * fa + fb;
        }
    }
    return TCI_OK;
}

OP_DESC(batchnorm_desc, "BatchNormalization", batchnorm_versions, batchnorm_parse, batchnorm_infer,
        batchnorm_forward, OP_NHWC_INPUT | OP_NHWC_OUTPUT | OP_EPILOGUE_ACT, batchnorm_gpu_lower,
        NULL, BINARY_NONE);

/* ---- LayerNormalization ---- */

typedef struct layernorm_params {
    int64_t axis;
    float epsilon;
} layernorm_params;

static const int layernorm_versions[] = {17, 0};

static tci_status layernorm_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 3, 1, 3));
    static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    layernorm_params *p = alloc_params(node, arena, sizeof *p);
    if (!p) return TCI_ERR_OUT_OF_MEMORY;
    TRY_STATUS(ir_attr_int(node, "axis", -1, &p->axis));
    TRY_STATUS(ir_attr_float(node, "epsilon", 1e-5f, &p->epsilon));
    int64_t stash;
    TRY_STATUS(ir_attr_int(node, "stash_type", 1, &stash));
    if (stash != TCI_DTYPE_FLOAT)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "stash_type=%lld is not supported (only 1, float)", (long long)stash);
    node->params = p;
    return TCI_OK;
}

static tci_status layernorm_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const layernorm_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1], *bias = node->num_inputs > 2 ? in[2] : NULL;
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, scale, 1, op_float_types));
    if (bias) TRY_STATUS(op_check_dtype(node, bias, 2, op_float_types));
    TRY_STATUS(check_unidirectional(node, "Scale", scale, x));
    if (bias) TRY_STATUS(check_unidirectional(node, "B", bias, x));
    for (int o = 0; o < node->num_outputs; o++)
        if (out[o]) op_set_unknown(out[o], o == 0 ? x->dtype : TCI_DTYPE_FLOAT);
    if (x->rank < 0) return TCI_OK;
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    bool known = true;
    for (int i = axis; i < x->rank; i++) known = known && x->dims[i] >= 0;
    if (known && prod(x->dims, axis, x->rank) == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the normalized dims X.shape[%d:] hold no elements", axis);
    op_same_shape(out[0], x);
    for (int o = 1; o < node->num_outputs; o++) {
        if (!out[o]) continue;
        out[o]->rank = x->rank;
        for (int i = 0; i < x->rank; i++) out[o]->dims[i] = i < axis ? x->dims[i] : 1;
    }
    return TCI_OK;
}

/* Expands t (broadcastable to dims) into a full tensor of shape dims; caller frees. */
static float *expand_to(const tci_tensor *t, int rank, const int64_t *dims, int64_t count) {
    float *dst = malloc((size_t)count * sizeof *dst);
    if (!dst) return NULL;
    int64_t st[TCI_MAX_RANK], idx[TCI_MAX_RANK] = {0}, s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int j = i - (rank - t->rank);
        int64_t d = j >= 0 ? t->dims[j] : 1;
        st[i] = d == 1 ? 0 : s;
        s *= d;
    }
    const float *src = t->data;
    int64_t off = 0;
    for (int64_t e = 0; e < count; e++) {
        dst[e] = src[off];
        for (int d = rank - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < dims[d]) break;
            off -= st[d] * idx[d];
            idx[d] = 0;
        }
    }
    return dst;
}

/* True when t, right-aligned to x, varies only over x's dims [axis:] and matches them there, so
 * that one row of t serves every row of x. */
static bool per_row(const tci_tensor *t, const tci_tensor *x, int axis) {
    for (int xi = 0; xi < x->rank; xi++) {
        int ti = xi - (x->rank - t->rank);
        int64_t d = ti >= 0 ? t->dims[ti] : 1;
        if (xi < axis ? d != 1 : d != x->dims[xi]) return false;
    }
    return true;
}

static tci_status layernorm_forward(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const layernorm_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1], *bias = node->num_inputs > 2 ? in[2] : NULL;
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t rows = prod(x->dims, 0, axis), n = prod(x->dims, axis, x->rank), total = rows * n;
    const float *xd = x->data;
    float *y = out[0]->data;
    float *mean_out = node->num_outputs > 1 && out[1] ? out[1]->data : NULL;
    float *inv_out = node->num_outputs > 2 && out[2] ? out[2]->data : NULL;
    /* a Scale or B that differs between rows (rare) is expanded to X's shape */
    const float *sd = scale->data, *bd = bias ? bias->data : NULL;
    float *scale_full = NULL, *bias_full = NULL;
    int64_t scale_step = 0, bias_step = 0;
    if (!per_row(scale, x, axis)) {
        sd = scale_full = expand_to(scale, x->rank, x->dims, total);
        scale_step = n;
    }
    if (bias && !per_row(bias, x, axis)) {
        bd = bias_full = expand_to(bias, x->rank, x->dims, total);
        bias_step = n;
    }
    if ((!sd && total) || (bias && !bd && total)) {
        free(scale_full);
        free(bias_full);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory expanding Scale/B");
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *src = xd + r * n;
        float *dst = y + r * n;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += src[i];
        double mean = sum / (double)n, sq = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double d = src[i] - mean;
            sq += d * d;
        }
        float inv = (float)(1.0 / sqrt(sq / (double)n + (double)p->epsilon));
        float fmean = (float)mean;
        const float *srow = sd + r * scale_step, *brow = bd ? bd + r * bias_step : NULL;
        if (brow)
            for (int64_t i = 0; i < n; i++) dst[i] = (src[i] - fmean) * inv * srow[i] + brow[i];
        else
            for (int64_t i = 0; i < n; i++) dst[i] = (src[i] - fmean) * inv * srow[i];
        if (mean_out) mean_out[r] = fmean;
        if (inv_out) inv_out[r] = inv;
    }
    free(scale_full);
    free(bias_full);
    return TCI_OK;
}

OP_DESC(layernorm_desc, "LayerNormalization", layernorm_versions, layernorm_parse, layernorm_infer,
        layernorm_forward, OP_PROLOGUE_RESIDUAL, layernorm_gpu_lower, NULL, BINARY_NONE);

/* ---- Softmax, LogSoftmax ---- */

typedef struct softmax_params {
    int64_t axis;
    bool log;
    bool coerce_2d; /* before opset 13: normalise over all of dims[axis:] as one row */
} softmax_params;

static const int softmax_versions[] = {1, 11, 13, 0};

static tci_status softmax_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"axis", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    softmax_params *p = alloc_params(node, arena, sizeof *p);
    if (!p) return TCI_ERR_OUT_OF_MEMORY;
    p->coerce_2d = node->since_version < 13;
    p->log = strcmp(node->op_type, "LogSoftmax") == 0;
    TRY_STATUS(ir_attr_int(node, "axis", p->coerce_2d ? 1 : -1, &p->axis));
    node->params = p;
    return TCI_OK;
}

static tci_status softmax_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const softmax_params *p = node->params;
    TRY_STATUS(op_check_dtype(node, in[0], 0, op_float_types));
    if (in[0]->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input must have rank >= 1");
    if (in[0]->rank > 0) {
        int axis;
        TRY_STATUS(op_normalize_axis(node, p->axis, in[0]->rank, &axis));
        op_same_shape(out[0], in[0]);
    } else {
        op_set_unknown(out[0], in[0]->dtype);
    }
    return TCI_OK;
}

/* One contiguous row; sums in double (fp32 sums drift on long rows). */
static void softmax_row(const float *x, float *y, int64_t n, bool log_out) {
    float max = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    double sum = 0.0;
    if (log_out) {
        for (int64_t i = 0; i < n; i++) sum += expf(x[i] - max);
        /* (x - max) - log(sum): folding max and log(sum) first would round away small terms */
        float log_sum = (float)log(sum);
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] - max) - log_sum;
    } else {
        for (int64_t i = 0; i < n; i++) {
            y[i] = expf(x[i] - max);
            sum += y[i];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) y[i] *= inv;
    }
}

/* n values spaced `inner` apart, for `inner` interleaved rows at once so that the inner loops
 * stay contiguous. max and sum are scratch of `inner` entries. */
static void softmax_strided(const float *x, float *y, int64_t n, int64_t inner, bool log_out,
                            float *max, double *sum) {
    memcpy(max, x, (size_t)inner * sizeof *max);
    for (int64_t k = 1; k < n; k++)
        for (int64_t j = 0; j < inner; j++)
            if (x[k * inner + j] > max[j]) max[j] = x[k * inner + j];
    for (int64_t j = 0; j < inner; j++) sum[j] = 0.0;
    for (int64_t k = 0; k < n; k++)
        for (int64_t j = 0; j < inner; j++) {
            float e = expf(x[k * inner + j] - max[j]);
            if (!log_out) y[k * inner + j] = e;
            sum[j] += e;
        }
    if (log_out) {
        for (int64_t j = 0; j < inner; j++) sum[j] = (float)log(sum[j]);
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++)
                y[k * inner + j] = (x[k * inner + j] - max[j]) - (float)sum[j];
    } else {
        for (int64_t j = 0; j < inner; j++) max[j] = (float)(1.0 / sum[j]);
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) y[k * inner + j] *= max[j];
    }
}

static tci_status softmax_forward(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const softmax_params *p = node->params;
    const tci_tensor *x = in[0];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t outer = prod(x->dims, 0, axis), n, inner;
    if (p->coerce_2d) {
        n = prod(x->dims, axis, x->rank);
        inner = 1;
    } else {
        n = x->dims[axis];
        inner = prod(x->dims, axis + 1, x->rank);
    }
    if (outer == 0 || n == 0 || inner == 0) return TCI_OK;
    const float *xd = x->data;
    float *y = out[0]->data;
    if (inner == 1) {
        for (int64_t r = 0; r < outer; r++) softmax_row(xd + r * n, y + r * n, n, p->log);
        return TCI_OK;
    }
    float *max = malloc((size_t)inner * sizeof *max);
    double *sum = malloc((size_t)inner * sizeof *sum);
    if (!max || !sum) {
        free(max);
        free(sum);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for softmax scratch");
    }
    for (int64_t r = 0; r < outer; r++)
        softmax_strided(xd + r * n * inner, y + r * n * inner, n, inner, p->log, max, sum);
    free(max);
    free(sum);
    return TCI_OK;
}

/* Softmax over the last axis only: axis rank-1 (before opset 13 the dims from axis on form the
 * row, which is the same for the last axis). */
static void softmax_pattern(const ir_node *node, op_pattern *out) {
    const softmax_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    out->kind = OP_PATTERN_NONE;
    if (!p || p->log || x->rank < 1) return;
    int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
    if (axis == x->rank - 1) out->kind = OP_PATTERN_SOFTMAX_LAST;
}

OP_DESC_PATTERN(softmax_desc, "Softmax", softmax_versions, softmax_parse, softmax_infer,
                softmax_forward, 0, softmax_gpu_lower, softmax_pattern);

OP_DESC(logsoftmax_desc, "LogSoftmax", softmax_versions, softmax_parse, softmax_infer,
        softmax_forward, 0, softmax_gpu_lower, NULL, BINARY_NONE);

/* ---- GPU lowering ---- */

tci_status layer_batchnorm_fold(const ir_node *node, int64_t k, float *scale, float *shift,
                                bool *folded) {
    *folded = false;
    if (node->desc != &batchnorm_desc || node->num_outputs != 1 ||
        ((const batchnorm_params *)node->params)->training)
        return TCI_OK;
    for (int i = 1; i < 5; i++)
        if (!node->inputs[i]->data || node->inputs[i]->dtype != TCI_DTYPE_FLOAT ||
            lower_count(node->inputs[i]) != k)
            return TCI_OK;
    const batchnorm_params *p = node->params;
    const float *gamma = node->inputs[1]->data, *beta = node->inputs[2]->data;
    const float *mean = node->inputs[3]->data, *var = node->inputs[4]->data;
    for (int64_t i = 0; i < k; i++) {
        double sc = gamma[i] / sqrt((double)var[i] + p->epsilon);
        scale[i] = (float)sc;
        shift[i] = (float)((shift[i] - mean[i]) * sc + beta[i]);
    }
    *folded = true;
    return TCI_OK;
}

/* The element-wise view of a dense BatchNormalization step: (N, C, inner) per channel, or
 * (N, count) per element of dims[1:] (spatial=0), so any rank fits; operand 0 is X (or the
 * scaled temporary), operand 1 the statistics vector. */
static void batchnorm_dense_view(const ir_tensor *x, bool spatial, plan_strided *v) {
    memset(v, 0, sizeof *v);
    v->pad_dim = -1;
    v->dims[0] = x->dims[0];
    if (spatial) {
        v->rank = 3;
        v->dims[1] = x->rank >= 2 ? x->dims[1] : 1;
        v->dims[2] = lower_prod(x->dims, 2, x->rank);
    } else {
        v->rank = 2;
        v->dims[1] = lower_prod(x->dims, 1, x->rank);
    }
    int64_t st = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        v->out_strides[i] = st;
        v->strides[0][i] = st;
        v->strides[1][i] = i == 1 ? 1 : 0;
        st *= v->dims[i];
    }
}

/* Standalone BatchNormalization: y = x * scale + shift per channel. A 4-D X (NHWC8) is one
 * depthwise 1x1 convolution step (layer_lower_channel_affine: one rounding, the shift in fp32,
 * the activation fused, one pass); any other rank (LeViT's 2-D and 3-D) two dense element-wise
 * steps. Training mode folds at build when X is a constant (weight standardisation); a computed
 * X has no GPU path. */
static tci_status batchnorm_gpu_lower(plan_builder *b, const ir_node *node) {
    const batchnorm_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    TRY_STATUS(lower_require_known(node, x));
    if (p->training)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "training_mode=1 on a computed X has no GPU path (on constant "
                             "inputs it is folded at build)");
    if (node->num_outputs > 1)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path takes inference-mode BatchNormalization");
    bool spatial = p->spatial != 0;
    int64_t c = spatial ? (x->rank >= 2 ? x->dims[1] : 1) : lower_prod(x->dims, 1, x->rank);
    for (int i = 1; i < 5; i++)
        if (!node->inputs[i]->data || node->inputs[i]->dtype != TCI_DTYPE_FLOAT ||
            lower_count(node->inputs[i]) != c)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED, "statistics must be constants");
    float *scale = malloc((size_t)(c ? c : 1) * sizeof(float));
    float *shift = malloc((size_t)(c ? c : 1) * sizeof(float));
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    const float *gamma = node->inputs[1]->data, *beta = node->inputs[2]->data;
    const float *mean = node->inputs[3]->data, *var = node->inputs[4]->data;
    for (int64_t i = 0; i < c; i++) {
        scale[i] = (float)(gamma[i] / sqrt((double)var[i] + p->epsilon));
        shift[i] = beta[i] - mean[i] * scale[i];
    }
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    const char *label = lower_intern(b, e->label);
    act_params act = e->act;
    const ir_tensor *out = e->output;
    plan_layout layout = out->layout; /* the layout pass's: NHWC8 for 4-D */
    bool nhwc = layout == PLAN_LAYOUT_NHWC8;
    if (nhwc && !spatial) {
        free(scale);
        free(shift);
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "spatial=0 on a 4-D input has no GPU path");
    }
    if (nhwc) {
        tci_status st = layer_lower_channel_affine(b, node, x, scale, shift, act, out, label);
        free(scale);
        free(shift);
        return st;
    }
    /* the vectors as (1, c, 1, 1) constants uploaded as they are in the device dtype, c
     * contiguous values (dense fp32 host constants are packing sources) */
    int64_t dims[4] = {1, c, 1, 1};
    int si = -1, hi = -1, xi = -1, tmp = -1, yt = -1;
    tci_status st = lower_host_constant(b, "bn_scale", scale, 4, dims, lower_float_dtype(b),
                                        PLAN_LAYOUT_NHWC8, &si);
    if (st == TCI_OK)
        st = lower_host_constant(b, "bn_shift", shift, 4, dims, lower_float_dtype(b),
                                 PLAN_LAYOUT_NHWC8, &hi);
    free(scale);
    free(shift);
    TRY_STATUS(st);
    TRY_STATUS(lower_input(b, node, x, layout, &xi));
    TRY_STATUS(lower_temporary(b, "bn_scaled", lower_float_dtype(b), layout, x->rank, x->dims,
                            &tmp));
    TRY_STATUS(lower_output(b, node, out, &yt));
    const int pairs[2][3] = {{xi, si, tmp}, {tmp, hi, yt}};
    for (int k = 0; k < 2; k++) {
        plan_step *s;
        TRY_STATUS(lower_step(b, PLAN_STEP_ELTWISE, node, label, &s));
        s->u.eltwise.op = k == 0 ? BINARY_MUL : BINARY_ADD;
        if (k == 1) s->u.eltwise.act = act;
        batchnorm_dense_view(x, spatial, &s->u.eltwise.view);
        lower_step_io(s, 2, pairs[k], 1, &pairs[k][2]);
    }
    return TCI_OK;
}

/* One softmax step over `rows` rows of `length` contiguous values. */
static tci_status softmax_rows_step(plan_builder *b, const ir_node *node, int xi, int yt,
                                    int64_t rows, int64_t length, bool log) {
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_SOFTMAX, node, NULL, &s));
    s->u.softmax.rows = rows;
    s->u.softmax.length = length;
    s->u.softmax.log = log;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

static tci_status softmax_gpu_lower(plan_builder *b, const ir_node *node) {
    const softmax_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    if (p->coerce_2d || axis == x->rank - 1) {
        return softmax_rows_step(b, node, xi, yt, lower_prod(x->dims, 0, axis),
                                 lower_prod(x->dims, axis, x->rank), p->log);
    }
    /* another axis (ResNeSt's split attention): x viewed as (outer, L, inner) is copied to
     * (outer, inner, L), its rows normalised, and copied back */
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "softmax over axis %d of a rank-%d tensor has no GPU path (rank at "
                             "most %d)",
                             axis, x->rank, PLAN_MAX_PHYS_RANK);
    const int64_t outer = lower_prod(x->dims, 0, axis), len = x->dims[axis];
    const int64_t inner = lower_prod(x->dims, axis + 1, x->rank);
    const int64_t dims[3] = {outer, inner, len};
    int t1, t2;
    TRY_STATUS(lower_temporary(b, "softmax_axis_last", lower_float_dtype(b), PLAN_LAYOUT_DENSE, 3,
                               dims, &t1));
    TRY_STATUS(lower_temporary(b, "softmax_rows", lower_float_dtype(b), PLAN_LAYOUT_DENSE, 3, dims,
                               &t2));
    TRY_STATUS(lower_copy_step(b, node, xi, t1, (const int64_t[3]){len * inner, 1, inner}, 0));
    TRY_STATUS(softmax_rows_step(b, node, t1, t2, outer * inner, len, p->log));
    /* y's dim i read from t2: dims before the axis step over whole (inner, L) blocks */
    int64_t strides[PLAN_MAX_PHYS_RANK];
    for (int i = 0; i < x->rank; i++) {
        if (i < axis)
            strides[i] = lower_prod(x->dims, i + 1, axis) * inner * len;
        else if (i == axis)
            strides[i] = 1;
        else
            strides[i] = lower_prod(x->dims, i + 1, x->rank) * len;
    }
    return lower_copy_step(b, node, t2, yt, strides, 0);
}

static tci_status layernorm_gpu_lower(plan_builder *b, const ir_node *node) {
    const layernorm_params *p = node->params;
    for (int o = 1; o < node->num_outputs; o++)
        if (node->outputs[o] && lower_is_read(b, node->outputs[o]))
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "the Mean/InvStdDev outputs have no GPU path");
    return layer_lower_norm_rows(b, node, p->axis, p->epsilon,
                                 node->num_inputs > 2 ? node->inputs[2] : NULL, false);
}

tci_status layer_lower_norm_rows(plan_builder *b, const ir_node *node, int64_t axis_attr,
                                 float epsilon, const ir_tensor *bias, bool rms) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0], *scale = node->inputs[1];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, scale));
    if (bias) TRY_STATUS(lower_require_known(node, bias));
    int axis;
    TRY_STATUS(op_normalize_axis(node, axis_attr, x->rank, &axis));
    int64_t length = lower_prod(x->dims, axis, x->rank);
    if (!(epsilon >= 0.0f))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "epsilon %g is negative: the GPU step takes epsilon >= 0 (run it "
                             "with --backend cpu)",
                             (double)epsilon);
    /* the step reads one row of scale (and bias) for every row of X */
    tci_tensor xv, sv, bv;
    ir_tensor_view(x, &xv);
    ir_tensor_view(scale, &sv);
    if (bias) ir_tensor_view(bias, &bv);
    if (!per_row(&sv, &xv, axis) || (bias && !per_row(&bv, &xv, axis))) {
        char ss[128], xs[128];
        const ir_tensor *t = per_row(&sv, &xv, axis) ? bias : scale;
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "%s of shape %s is not one full row of X's dims from axis %d on "
                             "(X is %s): the GPU step reads that one row for every row of X "
                             "(run it with --backend cpu)",
                             t == scale ? "scale" : "bias",
                             ir_format_dims(t->rank, t->dims, ss, sizeof ss), axis,
                             ir_format_dims(x->rank, x->dims, xs, sizeof xs));
    }
    /* a residual Add folded in (fuse.c): its operands are read instead of its sum, which is
     * written as a second output when something else reads it */
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    const ir_node *add = e->residual_add;
    int xi, si, bi = -1, ri = -1, yt, sum_t = -1;
    TRY_STATUS(lower_input(b, node, add ? add->inputs[0] : x, PLAN_LAYOUT_DENSE, &xi));
    if (add) TRY_STATUS(lower_input(b, node, e->residual, PLAN_LAYOUT_DENSE, &ri));
    TRY_STATUS(lower_input(b, node, scale, PLAN_LAYOUT_DENSE, &si));
    if (bias) TRY_STATUS(lower_input(b, node, bias, PLAN_LAYOUT_DENSE, &bi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    if (add && e->sum_output) TRY_STATUS(lower_output(b, add, e->sum_output, &sum_t));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_LAYERNORM, node, lower_intern(b, e->label), &s));
    s->u.layernorm.rows = lower_prod(x->dims, 0, axis);
    s->u.layernorm.length = length;
    s->u.layernorm.epsilon = epsilon;
    s->u.layernorm.has_bias = bias != NULL;
    s->u.layernorm.has_residual = add != NULL;
    s->u.layernorm.rms = rms;
    lower_step_io(s, 4, (int[]){xi, si, bi, ri}, sum_t >= 0 ? 2 : 1, (int[]){yt, sum_t});
    return TCI_OK;
}

const op_desc *const layer_norm_ops[] = {&batchnorm_desc, &layernorm_desc, &softmax_desc,
                                         &logsoftmax_desc, NULL};
