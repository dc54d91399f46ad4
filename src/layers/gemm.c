/* Op family 'linear': Gemm and MatMul, fp32 via OpenBLAS cblas_sgemm.
 * MatMul follows numpy.matmul: 1-D operands are promoted and the added dim removed again. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

static tci_status gemm_gpu_lower(plan_builder *b, const ir_node *node);

typedef struct gemm_params {
    int trans_a, trans_b;
    float alpha, beta;
} gemm_params;

static tci_dtype first_dtype(const tci_tensor *a, const tci_tensor *b) {
    return a->dtype != TCI_DTYPE_UNDEFINED ? a->dtype : b->dtype;
}

/* ---- Gemm ---- */

static const int gemm_versions[] = {7, 9, 11, 13, 0};

static tci_status gemm_parse(ir_node *node, mem_arena *arena) {
    /* C became optional in opset 11 */
    TRY_STATUS(op_check_arity(node, node->since_version >= 11 ? 2 : 3, 3, 1, 1));
    static const char *const known[] = {"transA", "transB", "alpha", "beta", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    gemm_params *p = arena_alloc(arena, sizeof *p);
    if (!p) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory parsing attributes");
    TRY_STATUS(op_read_flag(node, "transA", 0, &p->trans_a));
    TRY_STATUS(op_read_flag(node, "transB", 0, &p->trans_b));
    TRY_STATUS(ir_attr_float(node, "alpha", 1.0f, &p->alpha));
    TRY_STATUS(ir_attr_float(node, "beta", 1.0f, &p->beta));
    node->params = p;
    return TCI_OK;
}

static tci_status gemm_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const gemm_params *p = node->params;
    const tci_tensor *a = in[0], *b = in[1], *c = node->num_inputs > 2 ? in[2] : NULL;
    TRY_STATUS(op_check_dtype(node, a, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, b, 1, op_float_types));
    if (c) TRY_STATUS(op_check_dtype(node, c, 2, op_float_types));
    if (a->rank >= 0 && a->rank != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input A must be 2-D, got rank %d",
                             a->rank);
    if (b->rank >= 0 && b->rank != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input B must be 2-D, got rank %d",
                             b->rank);
    int64_t m = -1, ka = -1, kb = -1, n = -1;
    if (a->rank == 2) {
        m = a->dims[p->trans_a ? 1 : 0];
        ka = a->dims[p->trans_a ? 0 : 1];
    }
    if (b->rank == 2) {
        kb = b->dims[p->trans_b ? 1 : 0];
        n = b->dims[p->trans_b ? 0 : 1];
    }
    if (ka >= 0 && kb >= 0 && ka != kb)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "inner dimensions differ: A gives K=%lld, B gives K=%lld",
                             (long long)ka, (long long)kb);
    if (c && c->rank >= 0) {
        if (c->rank > 2)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input C must have rank <= 2 to broadcast to (M, N), got rank %d",
                                 c->rank);
        int64_t target[2] = {m, n};
        for (int i = 0; i < c->rank; i++) {
            int64_t cd = c->dims[i], td = target[2 - c->rank + i];
            if (cd >= 0 && td >= 0 && cd != 1 && cd != td) {
                char cs[64];
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input C of shape %s does not broadcast to (M, N) = "
                                     "(%lld, %lld)",
                                     ir_format_dims(c->rank, c->dims, cs, sizeof cs),
                                     (long long)m, (long long)n);
            }
        }
    }
    tci_tensor *y = out[0];
    op_set_unknown(y, first_dtype(a, b));
    y->rank = 2;
    y->dims[0] = m;
    y->dims[1] = n;
    return TCI_OK;
}

/* Writes C broadcast to (m, n) into y. */
static void broadcast_c(const tci_tensor *c, int64_t m, int64_t n, float *y) {
    const float *cd = c->data;
    int64_t rows = c->rank == 2 ? c->dims[0] : 1;
    int64_t cols = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    int64_t row_stride = rows == 1 ? 0 : cols;
    for (int64_t i = 0; i < m; i++) {
        const float *src = cd + i * row_stride;
        float *dst = y + i * n;
        if (cols == n) {
            memcpy(dst, src, (size_t)n * sizeof *dst);
        } else {
            for (int64_t j = 0; j < n; j++) dst[j] = src[0];
        }
    }
}

static tci_status gemm_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const gemm_params *p = node->params;
    const tci_tensor *a = in[0], *b = in[1], *c = node->num_inputs > 2 ? in[2] : NULL;
    int64_t m = out[0]->dims[0], n = out[0]->dims[1];
    int64_t k = a->dims[p->trans_a ? 0 : 1];
    float *y = out[0]->data;
    if (m == 0 || n == 0) return TCI_OK;
    TRY_STATUS(op_check_blas_dims(node, m, n, k));
    bool use_c = c && p->beta != 0.0f;
    if (use_c) broadcast_c(c, m, n, y);
    if (k == 0) { /* empty product: BLAS leaves lda undefined here, so do it by hand */
        for (int64_t i = 0; i < m * n; i++) y[i] = use_c ? p->beta * y[i] : 0.0f;
        return TCI_OK;
    }
    cblas_sgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans,
                p->trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, p->alpha,
                a->data, (int)a->dims[1], b->data, (int)b->dims[1], use_c ? p->beta : 0.0f, y,
                (int)n);
    return TCI_OK;
}

/* ---- the layer-scale fold (op_desc.scale_columns) ---- */

/* Column j of alpha A B + beta C times scale[j]: B's columns (its rows under transB) and C,
 * broadcast to N columns first, scaled. */
static tci_status gemm_scale_columns(ir_graph *g, ir_node *node, int axis, const float *scale,
                                     int64_t count, bool *done) {
    const gemm_params *p = node->params;
    ir_tensor *w = node->inputs[1], *c = node->num_inputs > 2 ? node->inputs[2] : NULL;
    const ir_tensor *y = node->outputs[0];
    bool use_c = c && p->beta != 0.0f;
    *done = false;
    if (axis != 1 || !op_constant_float(w) || w->rank != 2 || y->rank != 2 || y->dims[1] < 0 ||
        (count != 1 && count != y->dims[1]) || (use_c && (!op_constant_float(c) || c->rank > 2)))
        return TCI_OK;
    int64_t n = y->dims[1], rows = use_c && c->rank == 2 ? c->dims[0] : 1;
    ir_tensor *scaled_w = NULL, *scaled_c = NULL;
    TRY_STATUS(op_scaled_copy(g, w, p->trans_b ? 0 : 1, scale, count, &scaled_w));
    if (use_c) {
        float *v = malloc((size_t)(rows * n > 0 ? rows * n : 1) * sizeof *v);
        if (!v) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding a layer scale");
        tci_tensor view;
        ir_tensor_view(c, &view);
        broadcast_c(&view, rows, n, v);
        for (int64_t i = 0; i < rows * n; i++) v[i] *= scale[count == 1 ? 0 : i % n];
        int64_t dims[2] = {rows, n};
        tci_status st = c->rank == 2 ? ir_graph_add_float_constant(g, v, 2, dims, &scaled_c)
                                     : ir_graph_add_float_constant(g, v, 1, dims + 1, &scaled_c);
        free(v);
        TRY_STATUS(st);
        node->inputs[2] = scaled_c;
    }
    node->inputs[1] = scaled_w;
    *done = true;
    return TCI_OK;
}

/* Column j of A B times scale[j]: B's last dim scaled (a constant B of rank 2 or more). */
static tci_status matmul_scale_columns(ir_graph *g, ir_node *node, int axis, const float *scale,
                                       int64_t count, bool *done) {
    ir_tensor *w = node->inputs[1], *scaled = NULL;
    *done = false;
    if (!op_constant_float(w) || w->rank < 2 || !node->outputs[0] ||
        axis != node->outputs[0]->rank - 1 || (count != 1 && count != w->dims[w->rank - 1]))
        return TCI_OK;
    TRY_STATUS(op_scaled_copy(g, w, w->rank - 1, scale, count, &scaled));
    node->inputs[1] = scaled;
    *done = true;
    return TCI_OK;
}

/* Row i of A B + C is row i of A times B, plus C's row where C has one row for all of them. */
static void gemm_pattern(const ir_node *node, op_pattern *out) {
    const gemm_params *p = node->params;
    const ir_tensor *c = node->num_inputs > 2 ? node->inputs[2] : NULL;
    if (!p || p->trans_a) return;
    if (c && p->beta != 0.0f && (c->rank < 0 || (c->rank == 2 && c->dims[0] != 1))) return;
    out->kind = OP_PATTERN_ROWS;
}

/* ---- the siblings' merge (op_desc.merge_columns) ---- */

/* K and the columns of all the nodes' B together (*total); false where a B is not constant
 * float 2-D of nodes[0]'s K. */
static bool same_k_weights(ir_node *const *nodes, int count, bool trans_b, int64_t *k,
                           int64_t *total) {
    *total = 0;
    for (int i = 0; i < count; i++) {
        const ir_tensor *w = nodes[i]->inputs[1];
        if (!op_constant_float(w) || w->rank != 2) return false;
        int64_t wk = w->dims[trans_b ? 1 : 0];
        if (i == 0) *k = wk;
        if (wk != *k) return false;
        *total += w->dims[trans_b ? 0 : 1];
    }
    return *total > 0;
}

/* The nodes' B side by side in a new constant: [K, N_i] each in [K, sum N], or under transB
 * [N_i, K] one after another in [sum N, K]. */
static tci_status merged_weights(ir_graph *g, ir_node *const *nodes, int count, bool trans_b,
                                 int64_t k, int64_t total, ir_tensor **out) {
    float *v = malloc((size_t)(k * total > 0 ? k * total : 1) * sizeof *v);
    if (!v) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMM weights");
    int64_t first = 0;
    for (int i = 0; i < count; i++) {
        const ir_tensor *w = nodes[i]->inputs[1];
        const float *src = w->data;
        int64_t n = w->dims[trans_b ? 0 : 1];
        if (trans_b) {
            memcpy(v + first * k, src, (size_t)(n * k) * sizeof *v);
        } else {
            for (int64_t r = 0; r < k; r++)
                memcpy(v + r * total + first, src + r * n, (size_t)n * sizeof *v);
        }
        first += n;
    }
    int64_t dims[2] = {trans_b ? total : k, trans_b ? k : total};
    tci_status st = ir_graph_add_float_constant(g, v, 2, dims, out);
    free(v);
    return st;
}

/* Gemms of one transA, transB and alpha, each with a C of one row (a Linear layer's bias) and
 * one beta, or none with a C: B and C side by side. */
static tci_status gemm_merge_columns(ir_graph *g, ir_node *const *nodes, int count, bool *done) {
    const gemm_params *p = nodes[0]->params;
    bool with_c = nodes[0]->num_inputs > 2 && nodes[0]->inputs[2];
    int64_t k, total;
    *done = false;
    for (int i = 0; i < count; i++) {
        const gemm_params *q = nodes[i]->params;
        const ir_tensor *c = nodes[i]->num_inputs > 2 ? nodes[i]->inputs[2] : NULL;
        if (nodes[i]->desc != nodes[0]->desc || q->trans_a != p->trans_a ||
            q->trans_b != p->trans_b || q->alpha != p->alpha || (c != NULL) != with_c)
            return TCI_OK;
        if (c && (q->beta != p->beta || !op_constant_float(c) || c->rank > 2 ||
                  (c->rank == 2 && c->dims[0] != 1)))
            return TCI_OK;
    }
    if (!same_k_weights(nodes, count, p->trans_b, &k, &total)) return TCI_OK;
    ir_tensor *w = NULL, *c = NULL;
    TRY_STATUS(merged_weights(g, nodes, count, p->trans_b, k, total, &w));
    if (with_c) {
        float *v = malloc((size_t)total * sizeof *v);
        if (!v) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMM biases");
        int64_t first = 0;
        for (int i = 0; i < count; i++) {
            tci_tensor view;
            ir_tensor_view(nodes[i]->inputs[2], &view);
            int64_t n = nodes[i]->inputs[1]->dims[p->trans_b ? 0 : 1];
            broadcast_c(&view, 1, n, v + first);
            first += n;
        }
        tci_status st = ir_graph_add_float_constant(g, v, 1, &total, &c);
        free(v);
        TRY_STATUS(st);
        nodes[0]->inputs[2] = c;
    }
    nodes[0]->inputs[1] = w;
    *done = true;
    return TCI_OK;
}

static const op_desc gemm_desc = {.op_type = "Gemm",
                                  .versions = gemm_versions,
                                  .parse = gemm_parse,
                                  .infer = gemm_infer,
                                  .cpu_forward = gemm_forward,
                                  .flags = OP_EPILOGUE_RESIDUAL | OP_EPILOGUE_SCALE |
                                           OP_EPILOGUE_ACT,
                                  .gpu_lower = gemm_gpu_lower,
                                  .binary = BINARY_NONE,
                                  .pattern = gemm_pattern,
                                  .scale_columns = gemm_scale_columns,
                                  .merge_columns = gemm_merge_columns};

/* ---- MatMul ---- */

static const int matmul_versions[] = {1, 9, 13, 0};

static tci_status matmul_parse(ir_node *node, mem_arena *arena) {
    return op_parse_no_attrs(node, 2, 2, 1, 1);
}

static tci_status matmul_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *a = in[0], *b = in[1];
    TRY_STATUS(op_check_dtype(node, a, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, b, 1, op_float_types));
    op_set_unknown(out[0], first_dtype(a, b));
    return op_matmul_shape(node, a, b, out[0]);
}

static tci_status matmul_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const tci_tensor *a = in[0], *b = in[1];
    tci_tensor *y = out[0];
    op_matmul_side sa, sb;
    op_matmul_side_of(a, false, &sa);
    op_matmul_side_of(b, true, &sb);
    int64_t m = sa.rows, k = sa.cols, n = sb.cols;
    int out_batch_rank = y->rank - (a->rank != 1) - (b->rank != 1);
    int64_t batches = 1, b_batches = 1;
    for (int i = 0; i < out_batch_rank; i++) batches *= y->dims[i];
    for (int i = 0; i < sb.batch_rank; i++) b_batches *= sb.batch[i];
    float *yd = y->data;
    const float *ad = a->data, *bd = b->data;
    if (batches == 0 || m == 0 || n == 0) return TCI_OK;
    if (k == 0) {
        memset(yd, 0, (size_t)(batches * m * n) * sizeof *yd);
        return TCI_OK;
    }
    if (b_batches == 1) {
        /* one weight matrix for every batch: A's batches stack into one tall matrix */
        TRY_STATUS(op_check_blas_dims(node, batches * m, n, k));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(batches * m), (int)n, (int)k,
                    1.0f, ad, (int)k, bd, (int)n, 0.0f, yd, (int)n);
        return TCI_OK;
    }
    TRY_STATUS(op_check_blas_dims(node, m, n, k));
    int64_t sta[TCI_MAX_RANK], stb[TCI_MAX_RANK], idx[TCI_MAX_RANK] = {0};
    op_matmul_batch_strides(&sa, out_batch_rank, sta);
    op_matmul_batch_strides(&sb, out_batch_rank, stb);
    int64_t offa = 0, offb = 0;
    for (int64_t bi = 0; bi < batches; bi++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f,
                    ad + offa * m * k, (int)k, bd + offb * k * n, (int)n, 0.0f,
                    yd + bi * m * n, (int)n);
        for (int d = out_batch_rank - 1; d >= 0; d--) { /* odometer over the output batch */
            offa += sta[d];
            offb += stb[d];
            if (++idx[d] < y->dims[d]) break;
            offa -= sta[d] * idx[d];
            offb -= stb[d] * idx[d];
            idx[d] = 0;
        }
    }
    return TCI_OK;
}

/* ---- GPU lowering ---- */

/* The GEMM step of Gemm and MatMul: A and B (inputs 0 and 1) dense, the fused epilogue e, and
 * bias (n values, malloc'd or NULL; freed here). A fused residual is C (beta 1) in D's layout;
 * a fused erf-expanded Gelu divides the whole sum by its divisor (alpha, beta and bias scaled)
 * before GeluOfDiv. */
static tci_status finish_gemm(plan_builder *b, const ir_node *node, plan_gemm *g,
                              const ir_epilogue *e, float *bias) {
    int a_index = -1, b_index = -1, bias_index = -1, c_index = -1, yt = -1;
    if (e->residual) g->beta = 1.0f;
    if (e->divisor != 0.0f) {
        g->alpha /= e->divisor;
        g->beta /= e->divisor;
        for (int64_t i = 0; bias && i < g->n; i++) bias[i] /= e->divisor;
    }
    tci_status st = lower_input(b, node, node->inputs[0], PLAN_LAYOUT_DENSE, &a_index);
    if (st == TCI_OK) st = lower_input(b, node, node->inputs[1], PLAN_LAYOUT_DENSE, &b_index);
    if (st == TCI_OK && bias) {
        int64_t dims[1] = {g->n};
        st = lower_host_constant(b, "bias", bias, 1, dims, TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE,
                                 &bias_index);
    }
    free(bias);
    TRY_STATUS(st);
    /* conversions the residual needs are its Add's steps, in the Add's precision; read in the
     * output's layout (an NHWC8 output holds the step's dense rows) */
    if (e->residual)
        TRY_STATUS(lower_input(b, e->residual_add, e->residual,
                               e->nhwc_output ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE, &c_index));
    TRY_STATUS(lower_output(b, node, e->output, &yt));
    plan_step *step;
    TRY_STATUS(lower_step(b, PLAN_STEP_GEMM, node, lower_intern(b, e->label), &step));
    g->act = e->act;
    g->has_bias = bias_index >= 0;
    g->has_c = c_index >= 0;
    g->fused = step->label;
    step->u.gemm = *g;
    lower_step_io(step, 4, (int[]){a_index, b_index, bias_index, c_index}, 1, &yt);
    return TCI_OK;
}

static tci_status gemm_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *a = node->inputs[0], *bm = node->inputs[1];
    const ir_tensor *c = node->num_inputs > 2 ? node->inputs[2] : NULL;
    const gemm_params *p = node->params;
    const int64_t trans_a = p->trans_a, trans_b = p->trans_b;
    const float alpha = p->alpha, beta = p->beta;
    TRY_STATUS(lower_require_known(node, a));
    TRY_STATUS(lower_require_known(node, bm));
    plan_gemm g = {0};
    g.batch = 1;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = trans_a ? a->dims[1] : a->dims[0];
    g.k = trans_a ? a->dims[0] : a->dims[1];
    g.n = trans_b ? bm->dims[0] : bm->dims[1];
    g.lda = a->dims[1];
    g.ldb = bm->dims[1];
    g.ldc = g.n;
    g.alpha = alpha;
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    float *bias = NULL;
    if (c && beta != 0.0f) {
        if (!c->data || c->dtype != TCI_DTYPE_FLOAT || lower_count(c) != g.n ||
            c->dims[c->rank - 1] != g.n)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "the GPU path takes C only as a constant bias of N values");
        bias = malloc((size_t)g.n * sizeof(float));
        if (!bias) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        for (int64_t i = 0; i < g.n; i++) bias[i] = beta * ((const float *)c->data)[i];
    }
    return finish_gemm(b, node, &g, e, bias);
}


static tci_status matmul_lower_gemm(plan_builder *b, const ir_node *node, const ir_epilogue *e);

static tci_status matmul_gpu_lower(plan_builder *b, const ir_node *node) {
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    if (!e->attention) return matmul_lower_gemm(b, node, e);
    bool fused;
    const char *reason;
    TRY_STATUS(layer_lower_attention(b, node, e, &fused, &reason));
    if (fused) return TCI_OK;
    /* the chain before it is lowered step by step: this MatMul is a plain one, said why */
    ir_epilogue plain;
    memset(&plain, 0, sizeof plain);
    plain.output = node->outputs[0];
    plain.label = reason;
    TRY_STATUS(matmul_lower_gemm(b, node, &plain));
    return layer_lower_attention_after(b, e);
}

static tci_status matmul_lower_gemm(plan_builder *b, const ir_node *node, const ir_epilogue *e) {
    const ir_tensor *a = node->inputs[0], *bm = node->inputs[1], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, a));
    TRY_STATUS(lower_require_known(node, bm));
    TRY_STATUS(lower_require_known(node, y));
    /* a 1-D A is one row (1, K), a 1-D B one column (K, 1): the same bytes, and the output
     * leaves out the promoted dim */
    const int a_batch_rank = a->rank == 1 ? 0 : a->rank - 2;
    const int b_batch_rank = bm->rank == 1 ? 0 : bm->rank - 2;
    plan_gemm g = {0};
    g.m = a->rank == 1 ? 1 : a->dims[a->rank - 2];
    g.k = a->dims[a->rank - 1];
    g.n = bm->rank == 1 ? 1 : bm->dims[bm->rank - 1];
    g.lda = g.k;
    g.ldb = g.n;
    g.ldc = g.n;
    g.alpha = 1.0f;
    int yb = y->rank - (a->rank != 1) - (bm->rank != 1);
    int64_t a_batch = lower_prod(a->dims, 0, a_batch_rank);
    int64_t b_batch = lower_prod(bm->dims, 0, b_batch_rank);
    int64_t y_batch = lower_prod(y->dims, 0, yb);
    if (b_batch == 1) { /* weights or a shared matrix: one tall GEMM */
        g.m *= a_batch;
        g.batch = 1;
    } else {
        /* each side's batch dims must be the output's or all ones */
        bool a_ok = a_batch == 1 || (a_batch == y_batch && a_batch_rank == yb);
        bool b_ok = b_batch == y_batch && b_batch_rank == yb;
        for (int i = 0; a_ok && a_batch != 1 && i < yb; i++) a_ok = a->dims[i] == y->dims[i];
        for (int i = 0; b_ok && i < yb; i++) b_ok = bm->dims[i] == y->dims[i];
        if (!a_ok || !b_ok)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "batch broadcasting of this MatMul has no GPU path");
        g.batch = y_batch;
        g.stride_a = a_batch == 1 ? 0 : g.m * g.k;
        g.stride_b = g.k * g.n;
        g.stride_c = g.m * g.n;
    }
    float *bias = NULL;
    if (e->bias) { /* a fused Add of a constant vector (a Linear layer's bias) */
        bias = malloc((size_t)g.n * sizeof(float));
        if (!bias) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(bias, e->bias->data, (size_t)g.n * sizeof(float));
    }
    return finish_gemm(b, node, &g, e, bias);
}

static void matmul_pattern(const ir_node *node, op_pattern *out) {
    (void)node;
    out->kind = OP_PATTERN_MATMUL;
}

/* MatMuls of 2-D constant weights of one K: B side by side. */
static tci_status matmul_merge_columns(ir_graph *g, ir_node *const *nodes, int count,
                                       bool *done) {
    int64_t k, total;
    ir_tensor *w = NULL;
    *done = false;
    for (int i = 0; i < count; i++)
        if (nodes[i]->desc != nodes[0]->desc) return TCI_OK;
    if (!same_k_weights(nodes, count, false, &k, &total)) return TCI_OK;
    TRY_STATUS(merged_weights(g, nodes, count, false, k, total, &w));
    nodes[0]->inputs[1] = w;
    *done = true;
    return TCI_OK;
}

static const op_desc matmul_desc = {.op_type = "MatMul",
                                    .versions = matmul_versions,
                                    .parse = matmul_parse,
                                    .infer = matmul_infer,
                                    .cpu_forward = matmul_forward,
                                    .flags = OP_EPILOGUE_BIAS | OP_EPILOGUE_RESIDUAL |
                                             OP_EPILOGUE_SCALE | OP_EPILOGUE_ACT,
                                    .gpu_lower = matmul_gpu_lower,
                                    .binary = BINARY_NONE,
                                    .pattern = matmul_pattern,
                                    .scale_columns = matmul_scale_columns,
                                    .merge_columns = matmul_merge_columns};

const op_desc *const layer_linear_ops[] = {&gemm_desc, &matmul_desc, NULL};
