/* Op family 'norm', per-image statistics: InstanceNormalization and GroupNormalization. Both
 * normalise each image's channel groups (InstanceNormalization: one channel a group) by their own
 * mean and biased variance; sums accumulate in double on the CPU, in fp32 on the GPU. */
#include <math.h>
#include <string.h>

#include "layers/op.h"

typedef struct groupnorm_params {
    float epsilon;
    int64_t groups;       /* GroupNormalization's num_groups; 0: one group per channel */
    bool scale_per_group; /* GroupNormalization-18: scale and bias hold num_groups values */
} groupnorm_params;

static tci_status instancenorm_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    static const char *const known_v1[] = {"consumed_inputs", "epsilon", NULL};
    static const char *const known[] = {"epsilon", NULL};
    TRY_STATUS(ir_check_attrs(node, node->since_version < 6 ? known_v1 : known));
    OP_ALLOC_PARAMS(node, arena, groupnorm_params, p);
    TRY_STATUS(ir_attr_float(node, "epsilon", 1e-5f, &p->epsilon));
    p->groups = 0;
    p->scale_per_group = false;
    return TCI_OK;
}

static tci_status groupnorm_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    static const char *const known_v18[] = {"epsilon", "num_groups", NULL};
    static const char *const known_v21[] = {"epsilon", "num_groups", "stash_type", NULL};
    TRY_STATUS(ir_check_attrs(node, node->since_version < 21 ? known_v18 : known_v21));
    OP_ALLOC_PARAMS(node, arena, groupnorm_params, p);
    TRY_STATUS(ir_attr_float(node, "epsilon", 1e-5f, &p->epsilon));
    if (!ir_node_attr(node, "num_groups"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'num_groups' is required");
    TRY_STATUS(ir_attr_int(node, "num_groups", 0, &p->groups));
    if (p->groups < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "num_groups is %lld; must be >= 1",
                             (long long)p->groups);
    int64_t stash = TCI_DTYPE_FLOAT;
    TRY_STATUS(ir_attr_int(node, "stash_type", TCI_DTYPE_FLOAT, &stash));
    if (stash != TCI_DTYPE_FLOAT)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "stash_type=%lld is not supported (only 1, float)", (long long)stash);
    p->scale_per_group = node->since_version < 21;
    return TCI_OK;
}

/* Values scale and bias hold: one per group (GroupNormalization-18) or per channel; -1 while the
 * channel count is unknown. */
static int64_t groupnorm_scale_count(const groupnorm_params *p, int64_t channels) {
    return p->scale_per_group ? p->groups : channels;
}

static tci_status groupnorm_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const groupnorm_params *p = node->params;
    for (int i = 0; i < 3; i++) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    const tci_tensor *x = in[0];
    int min_rank = p->groups ? 2 : 3;
    if (x->rank >= 0 && x->rank < min_rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input has rank %d; expected N x C x D1 ... (rank >= %d)", x->rank,
                             min_rank);
    int64_t c = x->rank > 1 ? x->dims[1] : -1;
    if (p->groups && c >= 0 && c % p->groups)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "num_groups %lld does not divide the %lld channels",
                             (long long)p->groups, (long long)c);
    int64_t want = groupnorm_scale_count(p, c);
    static const char *const names[] = {"X", "scale", "B"};
    for (int i = 1; i < 3; i++) {
        const tci_tensor *s = in[i];
        if (s->rank < 0) continue;
        if (s->rank != 1 || (want >= 0 && s->dims[0] >= 0 && s->dims[0] != want)) {
            char ss[128];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input %s has shape %s, expected (%lld)", names[i],
                                 ir_format_dims(s->rank, s->dims, ss, sizeof ss),
                                 (long long)want);
        }
    }
    if (x->rank < 0) op_set_unknown(out[0], x->dtype);
    else op_same_shape(out[0], x);
    return TCI_OK;
}

static tci_status groupnorm_forward(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const groupnorm_params *p = node->params;
    const tci_tensor *x = in[0];
    const float *xd = x->data, *scale = in[1]->data, *bias = in[2]->data;
    float *y = out[0]->data;
    int64_t batch = x->dims[0], channels = x->dims[1], spatial = 1;
    for (int d = 2; d < x->rank; d++) spatial *= x->dims[d];
    int64_t groups = p->groups ? p->groups : channels;
    if (groups == 0) return TCI_OK;
    int64_t per = channels / groups, len = per * spatial;
    for (int64_t blk = 0; blk < batch * groups; blk++) {
        int64_t g = blk % groups;
        const float *src = xd + blk * len;
        float *dst = y + blk * len;
        double sum = 0.0, sq = 0.0;
        for (int64_t i = 0; i < len; i++) sum += src[i];
        double mean = len ? sum / (double)len : 0.0;
        for (int64_t i = 0; i < len; i++) sq += (src[i] - mean) * (src[i] - mean);
        double inv = 1.0 / sqrt((len ? sq / (double)len : 0.0) + (double)p->epsilon);
        for (int64_t k = 0; k < per; k++) {
            int64_t s = p->scale_per_group ? g : g * per + k;
            /* folded to x * a + b per channel; the double keeps a and b within one rounding */
            double a = inv * scale[s];
            float fa = (float)a, fb = (float)(bias[s] - mean * a);
            for (int64_t i = 0; i < spatial; i++)
                dst[k * spatial + i] = src[k * spatial + i] * fa + fb;
        }
    }
    return TCI_OK;
}

/* Blocks a group's statistics are gathered by on the GPU (kern_groupnorm_dtype's chunks): one
 * per (image, group) where there are enough of those to fill the GPU, else enough chunks of at
 * least 2048 values to make about 256 blocks (GroupNorm(1) at batch 1: one block would walk a
 * whole 64 x 56 x 56 image). */
static int64_t groupnorm_chunks(int64_t pairs, int64_t len) {
    const int64_t target = 256, least = 2048;
    if (pairs >= target / 2 || len < 2 * least) return 1;
    int64_t chunks = (target + pairs - 1) / pairs, most = len / least;
    return chunks < most ? chunks : most;
}

/* One PLAN_STEP_GROUPNORM: a 4-D X in NHWC8 (the layout of the convolutions around it), any other
 * rank dense; scale and bias are read as device tensors, so they need not be constants. */
static tci_status groupnorm_gpu_lower(plan_builder *b, const ir_node *node) {
    const groupnorm_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *scale = node->inputs[1], *bias = node->inputs[2];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, scale));
    TRY_STATUS(lower_require_known(node, bias));
    int64_t c = x->dims[1];
    plan_layout layout = node->outputs[0]->layout; /* the layout pass's: NHWC8 for 4-D */
    int xi, si, bi, yt;
    TRY_STATUS(lower_input(b, node, x, layout, &xi));
    TRY_STATUS(lower_input(b, node, scale, PLAN_LAYOUT_DENSE, &si));
    TRY_STATUS(lower_input(b, node, bias, PLAN_LAYOUT_DENSE, &bi));
    TRY_STATUS(lower_output(b, node, node->outputs[0], &yt));
    const int64_t n = x->dims[0], spatial = lower_prod(x->dims, 2, x->rank);
    const int64_t groups = p->groups ? p->groups : c;
    const int64_t chunks = groupnorm_chunks(n * groups, c / groups * spatial);
    int outs[2] = {yt, -1};
    if (chunks > 1) {
        int64_t count = 2 * n * groups * chunks;
        TRY_STATUS(lower_temporary(b, "groupnorm_partials", TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, 1,
                                   &count, &outs[1]));
    }
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_GROUPNORM, node, NULL, &s));
    s->u.groupnorm.n = n;
    s->u.groupnorm.c = c;
    s->u.groupnorm.spatial = spatial;
    s->u.groupnorm.groups = groups;
    s->u.groupnorm.chunks = chunks;
    s->u.groupnorm.epsilon = p->epsilon;
    s->u.groupnorm.scale_per_group = p->scale_per_group;
    lower_step_io(s, 3, (int[]){xi, si, bi}, chunks > 1 ? 2 : 1, outs);
    return TCI_OK;
}

/* 22 only added bfloat16, which infer refuses. */
OP_DESC(instancenorm_desc, "InstanceNormalization", OP_VERSIONS(1, 6, 22), instancenorm_parse,
        groupnorm_infer, groupnorm_forward, OP_NHWC_INPUT | OP_NHWC_OUTPUT, groupnorm_gpu_lower,
        NULL, BINARY_NONE);

OP_DESC(groupnorm_desc, "GroupNormalization", OP_VERSIONS(18, 21), groupnorm_parse,
        groupnorm_infer, groupnorm_forward, OP_NHWC_INPUT | OP_NHWC_OUTPUT, groupnorm_gpu_lower,
        NULL, BINARY_NONE);

const op_desc *const layer_groupnorm_ops[] = {&instancenorm_desc, &groupnorm_desc, NULL};
