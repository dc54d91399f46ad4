/* Op family 'select': ops whose output size depends on their input values,
 * NonZero and NonMaxSuppression. The fp32 reference runs them (it re-infers
 * shapes from values at every node); at a GPU build, constant folding evaluates
 * them when their inputs are known then (a NonZero over a shape computation).
 * With values known only at run time, the GPU planner refuses the node because
 * its output shape is not known at build (a GPU engine's shapes are static):
 * such models (detection post-processing) run on the CPU reference, or are cut
 * before the op for the GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

/* ---- NonZero: the coordinates of the non-zero elements, int64 [rank, count]
 * ---- */

static const tci_dtype nonzero_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                          TCI_DTYPE_INT8,  TCI_DTYPE_UINT8,  TCI_DTYPE_INT32,
                                          TCI_DTYPE_INT64, TCI_DTYPE_BOOL,   0};

static tci_status nonzero_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 1, 1, 1, 1);
}

static int64_t count_nonzero(const tci_tensor *x) {
    const int64_t n = op_count(x);
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) count += op_read_number(x, i) != 0.0;
    return count;
}

static tci_status nonzero_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, nonzero_types));
    out[0]->dtype = TCI_DTYPE_INT64;
    out[0]->rank = 2;
    /* a scalar has one coordinate, 0, as onnxruntime gives it */
    out[0]->dims[0] = in[0]->rank < 0 ? -1 : in[0]->rank == 0 ? 1 : in[0]->rank;
    out[0]->dims[1] = in[0]->data && in[0]->rank >= 0 ? count_nonzero(in[0]) : -1;
    return TCI_OK;
}

static tci_status nonzero_forward(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    (void)node;
    const tci_tensor *x = in[0];
    const int64_t n = op_count(x), count = out[0]->dims[1];
    const int rank = x->rank;
    int64_t *y = out[0]->data, idx[TCI_MAX_RANK] = {0}, k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (op_read_number(x, i) != 0.0) {
            if (rank == 0) y[k] = 0;
            for (int d = 0; d < rank; d++) y[d * count + k] = idx[d];
            k++;
        }
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d]) break;
            idx[d] = 0;
        }
    }
    return TCI_OK;
}

/* ---- NonMaxSuppression: per (image, class), boxes by falling score, each kept
 * unless it overlaps a kept one by more than iou_threshold; int64 [selected, 3]
 * (image, class, box) ---- */

typedef struct nms_params {
    int64_t center_point_box;
} nms_params;

static tci_status nms_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"center_point_box", NULL};
    TRY_STATUS(op_check_arity(node, 2, 5, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, nms_params, p);
    TRY_STATUS(ir_attr_int(node, "center_point_box", 0, &p->center_point_box));
    if (p->center_point_box != 0 && p->center_point_box != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'center_point_box' is %lld, not 0 or 1",
                             (long long)p->center_point_box);
    return TCI_OK;
}

static const tci_dtype nms_float[] = {TCI_DTYPE_FLOAT, 0};
static const tci_dtype nms_int64[] = {TCI_DTYPE_INT64, 0};

static tci_status nms_check(const ir_node *node, const tci_tensor *const *in) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, nms_float));
    TRY_STATUS(op_check_dtype(node, in[1], 1, nms_float));
    if (node->num_inputs > 2 && in[2]) TRY_STATUS(op_check_dtype(node, in[2], 2, nms_int64));
    for (int i = 3; i < node->num_inputs; i++)
        if (in[i]) TRY_STATUS(op_check_dtype(node, in[i], i, nms_float));
    const tci_tensor *boxes = in[0], *scores = in[1];
    if (boxes->rank >= 0 && (boxes->rank != 3 || (boxes->dims[2] >= 0 && boxes->dims[2] != 4)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "boxes must be [batch, boxes, 4]");
    if (scores->rank >= 0 && scores->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "scores must be [batch, classes, boxes]");
    if (boxes->rank == 3 && scores->rank == 3 &&
        ((boxes->dims[0] >= 0 && scores->dims[0] >= 0 && boxes->dims[0] != scores->dims[0]) ||
         (boxes->dims[1] >= 0 && scores->dims[2] >= 0 && boxes->dims[1] != scores->dims[2])))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "boxes [%lld, %lld, 4] and scores [%lld, %lld, %lld] disagree",
                             (long long)boxes->dims[0], (long long)boxes->dims[1],
                             (long long)scores->dims[0], (long long)scores->dims[1],
                             (long long)scores->dims[2]);
    return TCI_OK;
}

typedef struct nms_box {
    float y1, x1, y2, x2, area;
} nms_box;

static nms_box corners(const float *b, bool center) {
    nms_box r;
    if (center) {
        r.x1 = b[0] - b[2] / 2;
        r.x2 = b[0] + b[2] / 2;
        r.y1 = b[1] - b[3] / 2;
        r.y2 = b[1] + b[3] / 2;
    } else { /* any two opposite corners */
        r.y1 = fminf(b[0], b[2]);
        r.y2 = fmaxf(b[0], b[2]);
        r.x1 = fminf(b[1], b[3]);
        r.x2 = fmaxf(b[1], b[3]);
    }
    r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
    return r;
}

static bool overlaps(const nms_box *a, const nms_box *b, float threshold) {
    if (a->area <= 0 || b->area <= 0) return false;
    float h = fminf(a->y2, b->y2) - fmaxf(a->y1, b->y1);
    float w = fminf(a->x2, b->x2) - fmaxf(a->x1, b->x1);
    if (h <= 0 || w <= 0) return false;
    float inter = h * w;
    return inter / (a->area + b->area - inter) > threshold;
}

typedef struct nms_candidate {
    float score;
    int64_t index;
} nms_candidate;

/* falling score, then rising box index */
static int by_score(const void *pa, const void *pb) {
    const nms_candidate *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Runs the selection; writes up to `cap` triples to y (NULL: counts only). */
static tci_status nms_run(const ir_node *node, const tci_tensor *const *in, int64_t *y,
                          int64_t *out_count) {
    const nms_params *p = node->params;
    const tci_tensor *boxes = in[0], *scores = in[1];
    const int64_t batch = boxes->dims[0], nb = boxes->dims[1], classes = scores->dims[1];
    int64_t max_out = node->num_inputs > 2 && in[2] && op_count(in[2]) ? op_read_int(in[2], 0) : 0;
    float iou =
        node->num_inputs > 3 && in[3] && op_count(in[3]) ? (float)op_read_number(in[3], 0) : 0.0f;
    bool has_min = node->num_inputs > 4 && in[4] && op_count(in[4]);
    float min_score = has_min ? (float)op_read_number(in[4], 0) : 0.0f;
    if (iou < 0 || iou > 1)
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT, "iou_threshold %g is outside [0, 1]",
                             iou);
    *out_count = 0;
    if (max_out <= 0 || nb == 0) return TCI_OK;
    nms_candidate *cand = malloc((size_t)nb * sizeof *cand);
    nms_box *kept = malloc((size_t)nb * sizeof *kept);
    if (!cand || !kept) {
        free(cand);
        free(kept);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    const float *bx = boxes->data, *sc = scores->data;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t c = 0; c < classes; c++) {
            int64_t n = 0, nk = 0;
            for (int64_t i = 0; i < nb; i++) {
                float s = sc[(b * classes + c) * nb + i];
                if (!has_min || s > min_score) cand[n++] = (nms_candidate){s, i};
            }
            qsort(cand, (size_t)n, sizeof *cand, by_score);
            for (int64_t i = 0; i < n && nk < max_out; i++) {
                nms_box box = corners(bx + (b * nb + cand[i].index) * 4, p->center_point_box);
                bool keep = true;
                for (int64_t k = 0; k < nk && keep; k++) keep = !overlaps(&box, &kept[k], iou);
                if (!keep) continue;
                kept[nk++] = box;
                if (y) {
                    int64_t *row = y + 3 * *out_count;
                    row[0] = b;
                    row[1] = c;
                    row[2] = cand[i].index;
                }
                (*out_count)++;
            }
        }
    free(cand);
    free(kept);
    return TCI_OK;
}

static tci_status nms_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    TRY_STATUS(nms_check(node, in));
    out[0]->dtype = TCI_DTYPE_INT64;
    out[0]->rank = 2;
    out[0]->dims[0] = -1;
    out[0]->dims[1] = 3;
    bool known = true;
    for (int i = 0; i < node->num_inputs; i++)
        if (in[i]) known = known && in[i]->data && in[i]->rank >= 0;
    if (known) TRY_STATUS(nms_run(node, in, NULL, &out[0]->dims[0]));
    return TCI_OK;
}

static tci_status nms_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    int64_t count;
    return nms_run(node, in, out[0]->data, &count);
}

OP_DESC(nonzero_desc, "NonZero", OP_VERSIONS(9, 13), nonzero_parse, nonzero_infer, nonzero_forward,
        0, NULL, NULL, BINARY_NONE);
OP_DESC(nms_desc, "NonMaxSuppression", OP_VERSIONS(10, 11), nms_parse, nms_infer, nms_forward, 0,
        NULL, NULL, BINARY_NONE);

const op_desc *const layer_select_ops[] = {&nonzero_desc, &nms_desc, NULL};
