/* Op family 'einsum': Einsum, a sum of products over subscripts written as an
 * equation
 * ("bhqd,bhkd->bhqk"). The fp32 reference takes any equation numpy takes
 * (ellipses, repeated subscripts, implicit output, any number of operands,
 * size-1 broadcasting). The GPU path takes what exporters emit: one operand (a
 * transpose and/or a sum: one copy or reduce step) or two (batched matrix
 * products, outer and inner products: one batched GEMM, with strided copies
 * around it where the subscripts are in an order the GEMM cannot read or
 * write). */
#include <stdbool.h>
#include <string.h>

#include "layers/op.h"

enum {
    EIN_LETTERS = 52,  /* A-Z then a-z: label order is ASCII order */
    EIN_ELLIPSIS = -1, /* "..." in a term as written */
    EIN_MAX_OPERANDS = 16,
    EIN_MAX_LABELS = EIN_LETTERS + TCI_MAX_RANK, /* letters, then the ellipsis dims */
};

/* One term as written: letter labels and at most one ellipsis. */
typedef struct ein_term {
    int count;
    int labels[TCI_MAX_RANK + 1];
} ein_term;

typedef struct einsum_params {
    int num_terms;
    ein_term in[EIN_MAX_OPERANDS];
    ein_term out; /* with explicit_out */
    bool explicit_out;
    bool any_ellipsis;
} einsum_params;

/* The equation resolved against the operands' ranks: every dim of every operand
 * and of the output as a label, ellipsis dims numbered EIN_LETTERS + i. */
typedef struct ein_shape {
    int num_labels;            /* distinct labels: output ones first, then the summed ones */
    int order[EIN_MAX_LABELS]; /* the labels in that order */
    int num_out;
    int64_t dim[EIN_MAX_LABELS]; /* by label; -1 unknown */
    int rank[EIN_MAX_OPERANDS];
    int label[EIN_MAX_OPERANDS][TCI_MAX_RANK]; /* by operand dim */
} ein_shape;

static int letter_label(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -2;
}

static tci_status parse_term(const ir_node *node, const char *text, size_t len, ein_term *t,
                             bool *ellipsis) {
    t->count = 0;
    bool seen_ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') continue;
        int label;
        if (text[i] == '.') {
            if (i + 2 >= len || text[i + 1] != '.' || text[i + 2] != '.' || seen_ellipsis)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "equation: '.' outside one '...' per term");
            seen_ellipsis = true;
            label = EIN_ELLIPSIS;
            i += 2;
        } else if ((label = letter_label(text[i])) < 0) {
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "equation: '%c' is not a subscript letter", text[i]);
        }
        if (t->count == TCI_MAX_RANK + 1)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "equation: a term of more than %d subscripts", TCI_MAX_RANK);
        t->labels[t->count++] = label;
    }
    *ellipsis = *ellipsis || seen_ellipsis;
    return TCI_OK;
}

static tci_status einsum_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"equation", NULL};
    TRY_STATUS(op_check_arity(node, 1, EIN_MAX_OPERANDS, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    for (int i = 0; i < node->num_inputs; i++)
        if (!node->inputs[i])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %d is missing", i);
    if (!ir_node_attr(node, "equation"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'equation' is required");
    const char *eq;
    TRY_STATUS(ir_attr_string(node, "equation", "", &eq));
    OP_ALLOC_PARAMS(node, arena, einsum_params, p);
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    bool ellipsis = false;
    const char *term = eq;
    p->num_terms = 0;
    for (;;) {
        const char *comma = memchr(term, ',', lhs_len - (size_t)(term - eq));
        size_t len = comma ? (size_t)(comma - term) : lhs_len - (size_t)(term - eq);
        if (p->num_terms == EIN_MAX_OPERANDS)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "equation: too many terms");
        TRY_STATUS(parse_term(node, term, len, &p->in[p->num_terms++], &ellipsis));
        if (!comma) break;
        term = comma + 1;
    }
    if (p->num_terms != node->num_inputs)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "equation has %d terms for %d inputs",
                             p->num_terms, node->num_inputs);
    p->any_ellipsis = ellipsis;
    p->explicit_out = arrow != NULL;
    if (arrow) {
        bool out_ellipsis = false;
        TRY_STATUS(parse_term(node, arrow + 2, strlen(arrow + 2), &p->out, &out_ellipsis));
        bool used[EIN_LETTERS] = {false};
        for (int t = 0; t < p->num_terms; t++)
            for (int i = 0; i < p->in[t].count; i++)
                if (p->in[t].labels[i] >= 0) used[p->in[t].labels[i]] = true;
        bool twice[EIN_LETTERS] = {false};
        for (int i = 0; i < p->out.count; i++) {
            int l = p->out.labels[i];
            if (l == EIN_ELLIPSIS) continue;
            if (!used[l] || twice[l])
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "equation: output subscript '%c' %s",
                                     l < 26 ? 'A' + l : 'a' + l - 26,
                                     twice[l] ? "appears twice" : "is in no input term");
            twice[l] = true;
        }
        if (out_ellipsis && !ellipsis)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "equation: '...' in the output but in no input term");
    }
    return TCI_OK;
}

/* Resolves the equation against the operands' ranks (all known) and dims. */
static tci_status resolve(const ir_node *node, const tci_tensor *const *in, ein_shape *s) {
    const einsum_params *p = node->params;
    int ell_rank = 0;
    for (int t = 0; t < p->num_terms; t++) {
        const ein_term *term = &p->in[t];
        bool has = false;
        for (int i = 0; i < term->count; i++) has = has || term->labels[i] == EIN_ELLIPSIS;
        int letters = term->count - has;
        if (in[t]->rank < letters || (!has && in[t]->rank != letters))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input %d has rank %d, its term has %d subscripts", t, in[t]->rank,
                                 letters);
        if (has && in[t]->rank - letters > ell_rank) ell_rank = in[t]->rank - letters;
    }
    for (int l = 0; l < EIN_MAX_LABELS; l++) s->dim[l] = 0; /* 0: not seen */
    bool seen[EIN_MAX_LABELS] = {false};
    int count[EIN_MAX_LABELS] = {0};
    for (int t = 0; t < p->num_terms; t++) {
        const ein_term *term = &p->in[t];
        int d = 0, letters = 0;
        for (int i = 0; i < term->count; i++) letters += term->labels[i] != EIN_ELLIPSIS;
        const int e = in[t]->rank - letters; /* this operand's ellipsis dims */
        for (int i = 0; i < term->count; i++) {
            if (term->labels[i] == EIN_ELLIPSIS) {
                for (int k = 0; k < e; k++) s->label[t][d++] = EIN_LETTERS + ell_rank - e + k;
            } else {
                s->label[t][d++] = term->labels[i];
            }
        }
        s->rank[t] = in[t]->rank;
        for (int i = 0; i < in[t]->rank; i++) {
            const int l = s->label[t][i];
            const int64_t n = in[t]->dims[i];
            count[l]++;
            if (!seen[l] || s->dim[l] == 1 || s->dim[l] == -1) {
                if (!(seen[l] && n == 1)) s->dim[l] = n;
            } else if (n != s->dim[l] && n != 1 && n != -1) {
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input %d dim %d is %lld, the same subscript elsewhere is "
                                     "%lld",
                                     t, i, (long long)n, (long long)s->dim[l]);
            }
            seen[l] = true;
        }
    }
    /* the output's labels: as written, or the ellipsis then the letters seen
     * once, sorted */
    s->num_out = 0;
    if (p->explicit_out) {
        for (int i = 0; i < p->out.count; i++) {
            if (p->out.labels[i] == EIN_ELLIPSIS)
                for (int k = 0; k < ell_rank; k++) s->order[s->num_out++] = EIN_LETTERS + k;
            else
                s->order[s->num_out++] = p->out.labels[i];
        }
    } else {
        for (int k = 0; k < ell_rank; k++) s->order[s->num_out++] = EIN_LETTERS + k;
        for (int l = 0; l < EIN_LETTERS; l++)
            if (count[l] == 1) s->order[s->num_out++] = l;
    }
    if (s->num_out > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "an output of rank %d", s->num_out);
    bool in_out[EIN_MAX_LABELS] = {false};
    for (int i = 0; i < s->num_out; i++) in_out[s->order[i]] = true;
    s->num_labels = s->num_out;
    for (int l = 0; l < EIN_MAX_LABELS; l++)
        if (seen[l] && !in_out[l]) s->order[s->num_labels++] = l;
    return TCI_OK;
}

static const tci_dtype einsum_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT32,
                                         TCI_DTYPE_INT64, 0};

static tci_status einsum_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    for (int i = 0; i < node->num_inputs; i++) {
        TRY_STATUS(op_check_dtype(node, in[i], i, einsum_types));
        if (i > 0) TRY_STATUS(op_check_same_dtype(node, in[0], 0, in[i], i));
        if (in[i]->rank < 0) { /* the output rank needs every operand's */
            out[0]->dtype = in[0]->dtype;
            out[0]->rank = -1;
            return TCI_OK;
        }
    }
    ein_shape s;
    TRY_STATUS(resolve(node, in, &s));
    out[0]->dtype = in[0]->dtype;
    out[0]->rank = s.num_out;
    for (int i = 0; i < s.num_out; i++) out[0]->dims[i] = s.dim[s.order[i]];
    return TCI_OK;
}

/* Moves the odometer idx (labels from..to-1 of s's order, the last fastest) one
 * step, keeping each operand's offset up to date. */
static void advance(const ein_shape *s, int from, int to, int n_ops,
                    int64_t stride[][EIN_MAX_LABELS], int64_t *idx, int64_t *off) {
    for (int k = to - 1; k >= from; k--) {
        for (int t = 0; t < n_ops; t++) off[t] += stride[t][k];
        if (++idx[k] < s->dim[s->order[k]]) return;
        for (int t = 0; t < n_ops; t++) off[t] -= idx[k] * stride[t][k];
        idx[k] = 0;
    }
}

/* Every output element sums, over the summed labels, the product of the
 * operands' elements: one odometer over all labels (output labels outermost, so
 * `inner` steps move the output on by one), each operand's offset kept up to
 * date by its stride per label (summed over a repeated subscript: a diagonal; 0
 * where it broadcasts a size-1 dim). Accumulates in double. */
static tci_status einsum_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    ein_shape s;
    TRY_STATUS(resolve(node, in, &s));
    const int n_ops = node->num_inputs, n = s.num_labels;
    int64_t stride[EIN_MAX_OPERANDS][EIN_MAX_LABELS];
    for (int t = 0; t < n_ops; t++) {
        int64_t st[TCI_MAX_RANK];
        op_strides(in[t]->rank, in[t]->dims, st);
        for (int k = 0; k < n; k++) {
            stride[t][k] = 0;
            for (int i = 0; i < s.rank[t]; i++)
                if (s.label[t][i] == s.order[k] && in[t]->dims[i] != 1) stride[t][k] += st[i];
        }
    }
    int64_t inner = 1;
    for (int k = s.num_out; k < n; k++) inner *= s.dim[s.order[k]];
    const int64_t total_out = op_count(out[0]);
    int64_t idx[EIN_MAX_LABELS] = {0}, off[EIN_MAX_OPERANDS] = {0};
    for (int64_t o = 0; o < total_out; o++) {
        double acc = 0.0;
        for (int64_t r = 0; r < inner; r++) {
            double prod = 1.0;
            for (int t = 0; t < n_ops; t++) prod *= op_read_number(in[t], off[t]);
            acc += prod;
            advance(&s, 0, n, n_ops, stride, idx, off);
        }
        if (inner == 0) advance(&s, 0, s.num_out, n_ops, stride, idx, off);
        op_write_number(out[0], o, acc);
    }
    return TCI_OK;
}

/* ---- GPU lowering ---- */

/* Where label l sits among the n labels of list, or -1. */
static int find_label(const int *list, int n, int l) {
    for (int i = 0; i < n; i++)
        if (list[i] == l) return i;
    return -1;
}

static bool same_labels(const int *a, const int *b, int n) {
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Plan tensor xi (the dense operand t, labels s->label[t]) with its dims in the
 * label order want (n labels): xi itself when it is in that order already, else
 * a strided copy into a temporary. */
static tci_status in_order(plan_builder *b, const ir_node *node, const ein_shape *s, int t, int xi,
                           const int *want, int n, int *out_index) {
    if (s->rank[t] == n && same_labels(s->label[t], want, n)) {
        *out_index = xi;
        return TCI_OK;
    }
    if (n > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "operand %d needs a transpose of rank %d, the GPU path's limit is "
                             "%d",
                             t, n, PLAN_MAX_PHYS_RANK);
    const ir_tensor *x = node->inputs[t];
    int64_t st[TCI_MAX_RANK], strides[TCI_MAX_RANK], dims[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, st);
    for (int i = 0; i < n; i++) {
        int d = find_label(s->label[t], s->rank[t], want[i]);
        strides[i] = st[d];
        dims[i] = x->dims[d];
    }
    TRY_STATUS(lower_temporary(b, "einsum_operand", lower_float_dtype(b), PLAN_LAYOUT_DENSE, n,
                               dims, out_index));
    return lower_copy_step(b, node, xi, *out_index, strides, 0);
}

/* One operand: a transpose (copy step) and/or a sum over the labels not in the
 * output (reduce step over an operand whose kept dims are in the output's
 * order). */
static tci_status lower_one_operand(plan_builder *b, const ir_node *node, const ein_shape *s,
                                    int xi, int yt) {
    if (s->num_labels == s->num_out) { /* a transpose */
        if (s->num_out > PLAN_MAX_PHYS_RANK)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "a transpose of rank %d has no GPU path (at most %d)", s->num_out,
                                 PLAN_MAX_PHYS_RANK);
        const ir_tensor *x = node->inputs[0];
        int64_t st[TCI_MAX_RANK], strides[TCI_MAX_RANK];
        op_strides(x->rank, x->dims, st);
        for (int i = 0; i < s->num_out; i++)
            strides[i] = st[find_label(s->label[0], s->rank[0], s->order[i])];
        return lower_copy_step(b, node, xi, yt, strides, 0);
    }
    /* the kept dims in output order, the summed ones after them, unless the
     * operand already has its kept dims in output order */
    int kept[TCI_MAX_RANK], nk = 0;
    for (int i = 0; i < s->rank[0]; i++)
        if (find_label(s->order, s->num_out, s->label[0][i]) >= 0) kept[nk++] = s->label[0][i];
    int src = xi;
    const int *labels = s->label[0];
    if (!same_labels(kept, s->order, s->num_out)) {
        TRY_STATUS(in_order(b, node, s, 0, xi, s->order, s->num_labels, &src));
        labels = s->order;
    }
    const int n = s->num_labels;
    if (n > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "a sum over a rank-%d operand has no GPU path (at most %d)", n,
                             PLAN_MAX_PHYS_RANK);
    plan_step *step;
    TRY_STATUS(lower_step(b, PLAN_STEP_REDUCE, node, NULL, &step));
    plan_strided *v = &step->u.reduce.view;
    memset(v, 0, sizeof *v);
    v->rank = n;
    v->pad_dim = -1;
    for (int i = 0; i < n; i++) {
        v->dims[i] = s->dim[labels[i]];
        step->u.reduce.reduce_dim[i] = find_label(s->order, s->num_out, labels[i]) < 0;
    }
    op_strides(n, v->dims, v->strides[0]);
    step->u.reduce.op = REDUCE_SUM;
    lower_step_io(step, 1, &src, 1, &yt);
    return TCI_OK;
}

/* Two operands: y[batch, i, j] = sum_k A[batch, i, k] B[batch, k, j] as one
 * batched GEMM over the labels grouped as batch (in both and the output), free
 * in A or B (and the output), and contracted (in both, not the output); each
 * side read transposed where its labels come in the other order, copied where
 * neither; the result copied where the output wants another order. */
static tci_status lower_two_operands(plan_builder *b, const ir_node *node, const ein_shape *s,
                                     int ai, int bi, int yt) {
    int batch[TCI_MAX_RANK], fa[TCI_MAX_RANK], fb[TCI_MAX_RANK], con[TCI_MAX_RANK];
    int nb = 0, nfa = 0, nfb = 0, nc = 0;
    for (int i = 0; i < s->num_out; i++) {
        int l = s->order[i];
        bool in_a = find_label(s->label[0], s->rank[0], l) >= 0;
        bool in_b = find_label(s->label[1], s->rank[1], l) >= 0;
        if (in_a && in_b)
            batch[nb++] = l;
        else if (in_a)
            fa[nfa++] = l;
        else
            fb[nfb++] = l;
    }
    for (int i = 0; i < s->rank[0]; i++) {
        int l = s->label[0][i];
        if (find_label(s->order, s->num_out, l) >= 0) continue;
        if (find_label(s->label[1], s->rank[1], l) < 0)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "a subscript summed within operand 0 alone has no GPU path");
        con[nc++] = l;
    }
    for (int i = 0; i < s->rank[1]; i++) {
        int l = s->label[1][i];
        if (find_label(s->order, s->num_out, l) < 0 && find_label(con, nc, l) < 0)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "a subscript summed within operand 1 alone has no GPU path");
    }
    int64_t batch_n = 1, m = 1, n = 1, k = 1;
    for (int i = 0; i < nb; i++) batch_n *= s->dim[batch[i]];
    for (int i = 0; i < nfa; i++) m *= s->dim[fa[i]];
    for (int i = 0; i < nfb; i++) n *= s->dim[fb[i]];
    for (int i = 0; i < nc; i++) k *= s->dim[con[i]];
    /* the orders the GEMM reads: A as (batch, M, K) or transposed (batch, K, M);
     * B as (batch, K, N) or (batch, N, K) */
    int a_rows[EIN_MAX_LABELS], a_cols[EIN_MAX_LABELS], b_rows[EIN_MAX_LABELS],
        b_cols[EIN_MAX_LABELS], c_order[EIN_MAX_LABELS];
#define CAT3(dst, x, nx, y, ny, z, nz)                                                             \
    do {                                                                                           \
        memcpy(dst, x, (size_t)(nx) * sizeof(int));                                                \
        memcpy(dst + (nx), y, (size_t)(ny) * sizeof(int));                                         \
        memcpy(dst + (nx) + (ny), z, (size_t)(nz) * sizeof(int));                                  \
    } while (0)
    CAT3(a_rows, batch, nb, fa, nfa, con, nc);
    CAT3(a_cols, batch, nb, con, nc, fa, nfa);
    CAT3(b_rows, batch, nb, con, nc, fb, nfb);
    CAT3(b_cols, batch, nb, fb, nfb, con, nc);
    CAT3(c_order, batch, nb, fa, nfa, fb, nfb);
#undef CAT3
    plan_gemm g = {0};
    g.batch = batch_n;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = 1.0f;
    int a_src, b_src;
    const int na = nb + nfa + nc, nbb = nb + nc + nfb;
    if (s->rank[0] == na && same_labels(s->label[0], a_cols, na)) {
        g.trans_a = true;
        a_src = ai;
    } else {
        TRY_STATUS(in_order(b, node, s, 0, ai, a_rows, na, &a_src));
    }
    if (s->rank[1] == nbb && same_labels(s->label[1], b_cols, nbb)) {
        g.trans_b = true;
        b_src = bi;
    } else {
        TRY_STATUS(in_order(b, node, s, 1, bi, b_rows, nbb, &b_src));
    }
    g.lda = g.trans_a ? m : k;
    g.ldb = g.trans_b ? k : n;
    g.ldc = n;
    g.stride_a = batch_n > 1 ? m * k : 0;
    g.stride_b = batch_n > 1 ? k * n : 0;
    g.stride_c = batch_n > 1 ? m * n : 0;
    const int nout = s->num_out;
    int c_index = yt;
    const bool direct = same_labels(c_order, s->order, nout);
    if (!direct) {
        if (nout > PLAN_MAX_PHYS_RANK)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "the output needs a transpose of rank %d, the GPU path's limit "
                                 "is %d",
                                 nout, PLAN_MAX_PHYS_RANK);
        int64_t dims[TCI_MAX_RANK];
        for (int i = 0; i < nout; i++) dims[i] = s->dim[c_order[i]];
        TRY_STATUS(lower_temporary(b, "einsum_product", lower_float_dtype(b), PLAN_LAYOUT_DENSE,
                                   nout, dims, &c_index));
    }
    plan_step *step;
    TRY_STATUS(lower_step(b, PLAN_STEP_GEMM, node, NULL, &step));
    g.fused = step->label;
    step->u.gemm = g;
    lower_step_io(step, 3, (int[]){a_src, b_src, -1}, 1, &c_index);
    if (direct) return TCI_OK;
    /* y[out order] = C[c_order]: each output dim reads C's stride of its label */
    int64_t cdims[TCI_MAX_RANK], cst[TCI_MAX_RANK], strides[TCI_MAX_RANK];
    for (int i = 0; i < nout; i++) cdims[i] = s->dim[c_order[i]];
    op_strides(nout, cdims, cst);
    for (int i = 0; i < nout; i++) strides[i] = cst[find_label(c_order, nout, s->order[i])];
    return lower_copy_step(b, node, c_index, yt, strides, 0);
}

static tci_status einsum_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *y = node->outputs[0];
    if (node->num_inputs > 2)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "Einsum of %d operands has no GPU path (1 or 2)", node->num_inputs);
    tci_tensor views[2];
    const tci_tensor *in[2];
    for (int t = 0; t < node->num_inputs; t++) {
        TRY_STATUS(lower_require_known(node, node->inputs[t]));
        if (node->inputs[t]->dtype != TCI_DTYPE_FLOAT)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED, "%s Einsum has no GPU path (float)",
                                 tci_dtype_name(node->inputs[t]->dtype));
        ir_tensor_view(node->inputs[t], &views[t]);
        in[t] = &views[t];
    }
    ein_shape s;
    TRY_STATUS(resolve(node, in, &s));
    for (int t = 0; t < node->num_inputs; t++)
        for (int i = 0; i < s.rank[t]; i++) {
            if (find_label(s.label[t], i, s.label[t][i]) >= 0)
                return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                     "a subscript repeated within a term (a diagonal) has no "
                                     "GPU path");
            if (in[t]->dims[i] != s.dim[s.label[t][i]])
                return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                     "broadcasting a size-1 dim of operand %d has no GPU path", t);
        }
    int xi[2], yt;
    for (int t = 0; t < node->num_inputs; t++)
        TRY_STATUS(lower_input(b, node, node->inputs[t], PLAN_LAYOUT_DENSE, &xi[t]));
    TRY_STATUS(lower_output(b, node, y, &yt));
    if (node->num_inputs == 1) return lower_one_operand(b, node, &s, xi[0], yt);
    return lower_two_operands(b, node, &s, xi[0], xi[1], yt);
}

OP_DESC(einsum_desc, "Einsum", OP_VERSIONS(12, 28), einsum_parse, einsum_infer, einsum_forward, 0,
        einsum_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_einsum_ops[] = {&einsum_desc, NULL};
