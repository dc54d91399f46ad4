/* Op family 'rnn': the recurrent layers LSTM, GRU and RNN (forward, reverse, bidirectional;
 * optional B, sequence_lens, initial_h, initial_c, P; layout 0 and 1; the default activations).
 * The fp32 reference projects every time step's input at once (one cblas_sgemm per direction),
 * then runs the per-step recurrence with one more product per step. On the GPU the projection is
 * one GEMM step for all steps and directions, and a PLAN_STEP_RNN step runs the recurrence. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef enum rnn_cell { RNN_CELL_RNN = 0, RNN_CELL_GRU, RNN_CELL_LSTM } rnn_cell;

typedef struct rnn_params {
    rnn_cell cell;
    int gates;          /* weight blocks per direction: RNN 1, GRU 3 (zrh), LSTM 4 (iofc) */
    int64_t hidden;     /* hidden_size, or -1 when absent (then R's last dim) */
    int directions;     /* 1 or 2 */
    bool reverse;       /* direction == "reverse" */
    int layout;         /* 0: X (T, B, I); 1: X (B, T, I) */
    int linear_before_reset;
} rnn_params;

/* Input and output positions, as ONNX numbers them. */
enum { RNN_X, RNN_W, RNN_R, RNN_B, RNN_SEQ_LENS, RNN_INITIAL_H, RNN_INITIAL_C, RNN_P };
enum { RNN_Y, RNN_Y_H, RNN_Y_C };

/* ---- parse ---- */

static bool same_name_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

/* Only the default activations are implemented: an explicit list must repeat them for every
 * direction. */
static tci_status check_activations(const ir_node *node, const rnn_params *p) {
    static const char *const defaults[3][3] = {
        {"Tanh", NULL, NULL}, {"Sigmoid", "Tanh", NULL}, {"Sigmoid", "Tanh", "Tanh"}};
    static const int per_direction[3] = {1, 2, 3};
    const ir_attr *a = ir_node_attr(node, "activations");
    if (!a) return TCI_OK;
    int n = per_direction[p->cell];
    if (a->type != IR_ATTR_STRINGS)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'activations' must be strings");
    bool ok = a->count == (size_t)(n * p->directions);
    for (size_t i = 0; ok && i < a->count; i++)
        ok = same_name_nocase(a->strings[i], defaults[p->cell][i % (size_t)n]);
    if (!ok) {
        char list[256] = "";
        for (size_t i = 0; i < a->count && strlen(list) + 40 < sizeof list; i++) {
            strcat(list, i ? ", " : "");
            strncat(list, a->strings[i], 32);
        }
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "activations [%s] are not supported: only the defaults (%s%s%s%s%s "
                             "per direction) are implemented",
                             list, defaults[p->cell][0], n > 1 ? ", " : "",
                             n > 1 ? defaults[p->cell][1] : "", n > 2 ? ", " : "",
                             n > 2 ? defaults[p->cell][2] : "");
    }
    return TCI_OK;
}

static tci_status rnn_parse(ir_node *node, mem_arena *arena, rnn_cell cell) {
    int max_in = cell == RNN_CELL_LSTM ? 8 : 6, max_out = cell == RNN_CELL_LSTM ? 3 : 2;
    TRY_STATUS(op_check_arity(node, 3, max_in, 0, max_out));
    static const char *const known[] = {"activation_alpha", "activation_beta", "activations",
                                        "clip", "direction", "hidden_size", "layout",
                                        "input_forget", "linear_before_reset", "output_sequence",
                                        NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, rnn_params, p);
    p->cell = cell;
    p->gates = cell == RNN_CELL_RNN ? 1 : cell == RNN_CELL_GRU ? 3 : 4;
    /* attributes of other cells, or of later versions, are errors */
    if (cell != RNN_CELL_LSTM && ir_node_attr(node, "input_forget"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'input_forget' is LSTM's");
    if (cell != RNN_CELL_GRU && ir_node_attr(node, "linear_before_reset"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'linear_before_reset' is GRU's");
    if (node->since_version < 14 && ir_node_attr(node, "layout"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'layout' exists from opset 14 (this node is version %d)",
                             node->since_version);
    if (node->since_version > 1 && ir_node_attr(node, "output_sequence"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'output_sequence' exists only in version 1");
    TRY_STATUS(ir_attr_int(node, "hidden_size", -1, &p->hidden));
    if (ir_node_attr(node, "hidden_size") && p->hidden <= 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "hidden_size must be positive, got %lld",
                             (long long)p->hidden);
    const char *direction;
    TRY_STATUS(ir_attr_string(node, "direction", "forward", &direction));
    if (strcmp(direction, "forward") == 0) {
        p->directions = 1;
    } else if (strcmp(direction, "reverse") == 0) {
        p->directions = 1;
        p->reverse = true;
    } else if (strcmp(direction, "bidirectional") == 0) {
        p->directions = 2;
    } else {
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "direction '%s' is not forward, reverse or bidirectional",
                             direction);
    }
    TRY_STATUS(op_read_flag(node, "layout", 0, &p->layout));
    TRY_STATUS(op_read_flag(node, "linear_before_reset", 0, &p->linear_before_reset));
    int input_forget, output_sequence;
    TRY_STATUS(op_read_flag(node, "input_forget", 0, &input_forget));
    TRY_STATUS(op_read_flag(node, "output_sequence", 0, &output_sequence));
    (void)output_sequence; /* version 1: whether Y is computed; an optional output here anyway */
    if (input_forget)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "input_forget=1 (coupled input and forget gates) is not supported");
    if (ir_node_attr(node, "clip"))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'clip' (cell clipping) is not supported");
    return check_activations(node, p);
}

static tci_status lstm_parse(ir_node *node, mem_arena *arena) {
    return rnn_parse(node, arena, RNN_CELL_LSTM);
}
static tci_status gru_parse(ir_node *node, mem_arena *arena) {
    return rnn_parse(node, arena, RNN_CELL_GRU);
}
static tci_status simple_rnn_parse(ir_node *node, mem_arena *arena) {
    return rnn_parse(node, arena, RNN_CELL_RNN);
}

/* ---- shapes ---- */

static const tci_tensor *input_of(const ir_node *node, const tci_tensor *const *in, int i) {
    return i < node->num_inputs ? in[i] : NULL;
}

/* Checks a known rank and the known dims of t against want (-1: any); the error names input i. */
static tci_status check_shape(const ir_node *node, const tci_tensor *t, int index, int rank,
                              const int64_t *want) {
    static const char *const names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h",
                                        "initial_c", "P"};
    if (!t || t->rank < 0) return TCI_OK;
    char got[96], expected[96];
    bool ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = t->dims[i] < 0 || want[i] < 0 || t->dims[i] == want[i];
    if (ok) return TCI_OK;
    return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %s has shape %s, expected %s",
                         names[index], ir_format_dims(t->rank, t->dims, got, sizeof got),
                         ir_format_dims(rank, want, expected, sizeof expected));
}

/* The dims of the problem: seq_length, batch, input and hidden size (-1 where unknown). */
typedef struct rnn_dims {
    int64_t t, b, i, h;
} rnn_dims;

static tci_status rnn_check(const ir_node *node, const tci_tensor *const *in, rnn_dims *d) {
    const rnn_params *p = node->params;
    static const tci_dtype int32_only[] = {TCI_DTYPE_INT32, 0};
    for (int k = 0; k < node->num_inputs; k++) {
        if (!in[k]) continue;
        TRY_STATUS(op_check_dtype(node, in[k], k, k == RNN_SEQ_LENS ? int32_only : op_float_types));
    }
    const tci_tensor *x = in[RNN_X], *r = in[RNN_R];
    if (x->rank >= 0 && x->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input X must be 3-D, got rank %d",
                             x->rank);
    d->t = x->rank == 3 ? x->dims[p->layout ? 1 : 0] : -1;
    d->b = x->rank == 3 ? x->dims[p->layout ? 0 : 1] : -1;
    d->i = x->rank == 3 ? x->dims[2] : -1;
    d->h = p->hidden;
    if (d->h < 0 && r->rank == 3) d->h = r->dims[2];
    int64_t dirs = p->directions, gh = d->h >= 0 ? p->gates * d->h : -1;
    const int64_t w_dims[3] = {dirs, gh, d->i}, r_dims[3] = {dirs, gh, d->h};
    const int64_t b_dims[2] = {dirs, gh >= 0 ? 2 * gh : -1}, seq_dims[1] = {d->b};
    const int64_t state_dims[3] = {p->layout ? d->b : dirs, p->layout ? dirs : d->b, d->h};
    const int64_t p_dims[2] = {dirs, d->h >= 0 ? 3 * d->h : -1};
    TRY_STATUS(check_shape(node, in[RNN_W], RNN_W, 3, w_dims));
    TRY_STATUS(check_shape(node, r, RNN_R, 3, r_dims));
    TRY_STATUS(check_shape(node, input_of(node, in, RNN_B), RNN_B, 2, b_dims));
    TRY_STATUS(check_shape(node, input_of(node, in, RNN_SEQ_LENS), RNN_SEQ_LENS, 1, seq_dims));
    TRY_STATUS(check_shape(node, input_of(node, in, RNN_INITIAL_H), RNN_INITIAL_H, 3, state_dims));
    if (p->cell == RNN_CELL_LSTM) {
        TRY_STATUS(check_shape(node, input_of(node, in, RNN_INITIAL_C), RNN_INITIAL_C, 3,
                            state_dims));
        TRY_STATUS(check_shape(node, input_of(node, in, RNN_P), RNN_P, 2, p_dims));
    }
    return TCI_OK;
}

static tci_status rnn_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const rnn_params *p = node->params;
    rnn_dims d;
    TRY_STATUS(rnn_check(node, in, &d));
    tci_dtype dtype = in[RNN_X]->dtype;
    for (int k = 0; k < node->num_outputs; k++) {
        tci_tensor *y = out[k];
        if (!y) continue;
        op_set_unknown(y, dtype);
        if (k == RNN_Y) {
            y->rank = 4;
            y->dims[0] = p->layout ? d.b : d.t;
            y->dims[1] = p->layout ? d.t : p->directions;
            y->dims[2] = p->layout ? p->directions : d.b;
            y->dims[3] = d.h;
        } else {
            y->rank = 3;
            y->dims[0] = p->layout ? d.b : p->directions;
            y->dims[1] = p->layout ? p->directions : d.b;
            y->dims[2] = d.h;
        }
    }
    return TCI_OK;
}

/* ---- the fp32 reference ---- */

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Index of hidden unit j of (direction d, batch b) in Y_h / initial_h, and in Y at time t. */
static int64_t state_index(const rnn_params *p, int64_t dirs, int64_t batch, int64_t hidden,
                           int64_t d, int64_t b, int64_t j) {
    return (p->layout ? b * dirs + d : d * batch + b) * hidden + j;
}
static int64_t y_index(const rnn_params *p, int64_t steps, int64_t dirs, int64_t batch,
                       int64_t hidden, int64_t t, int64_t d, int64_t b, int64_t j) {
    return (p->layout ? (b * steps + t) * dirs + d : (t * dirs + d) * batch + b) * hidden + j;
}

/* One direction of the recurrence over the whole sequence. xw holds X*W^T + Wb for every row of
 * X (in X's order); h and c (batch x hidden) hold the initial state on entry, the final one on
 * return; hr (batch x gates*hidden) and rh (batch x hidden) are scratch. */
typedef struct rnn_direction {
    const rnn_params *p;
    int64_t steps, batch, hidden, dirs, d;
    bool backward;
    const float *xw, *r, *rb, *peep; /* r: (gates*hidden, hidden); rb, peep may be NULL */
    const int32_t *lens;             /* or NULL */
    float *h, *c, *hr, *rh, *y;      /* y: the whole Y output, or NULL */
} rnn_direction;

static void run_direction(const rnn_direction *s) {
    const rnn_params *p = s->p;
    const int64_t B = s->batch, H = s->hidden, T = s->steps, G = p->gates, GH = G * H;
    const bool gru_reset_first = p->cell == RNN_CELL_GRU && !p->linear_before_reset;
    const float *rb = s->rb, *pe = s->peep;
    for (int64_t t = 0; t < T; t++) {
        /* h_{t-1} R^T for every batch row at once (GRU's default form takes its h-gate product
         * later, from r (.) h_{t-1}); after it each unit j needs only its own h and c, so the
         * state is updated in place */
        int n = (int)(gru_reset_first ? 2 * H : GH);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, n, (int)H, 1.0f, s->h,
                    (int)H, s->r, (int)H, 0.0f, s->hr, (int)GH);
        for (int64_t b = 0; b < B; b++) {
            int64_t len = s->lens ? s->lens[b] : T;
            float *h = s->h + b * H, *c = s->c + b * H, *hr = s->hr + b * GH;
            if (t >= len) { /* past this sequence's end: state kept, Y zero */
                if (s->y)
                    for (int64_t j = 0; j < H; j++)
                        s->y[y_index(p, T, s->dirs, B, H, t, s->d, b, j)] = 0.0f;
                continue;
            }
            int64_t tt = s->backward ? len - 1 - t : t;
            const float *x = s->xw + (p->layout ? b * T + tt : tt * B + b) * GH;
            float *rh = s->rh + b * H;
            for (int64_t j = 0; j < H; j++) {
                float g[4];
                for (int64_t k = 0; k < n / H; k++) /* the gates whose product is computed */
                    g[k] = x[k * H + j] + (rb ? rb[k * H + j] : 0.0f) + hr[k * H + j];
                if (p->cell == RNN_CELL_RNN) {
                    h[j] = tanhf(g[0]);
                } else if (p->cell == RNN_CELL_LSTM) {
                    float i = sigmoidf(g[0] + (pe ? pe[j] * c[j] : 0.0f));
                    float f = sigmoidf(g[2] + (pe ? pe[2 * H + j] * c[j] : 0.0f));
                    float cn = f * c[j] + i * tanhf(g[3]);
                    float o = sigmoidf(g[1] + (pe ? pe[H + j] * cn : 0.0f));
                    c[j] = cn;
                    h[j] = o * tanhf(cn);
                } else if (gru_reset_first) { /* h gate once every r is known, below */
                    float z = sigmoidf(g[0]), r = sigmoidf(g[1]);
                    rh[j] = r * h[j];
                    hr[j] = z; /* z's product is used: its slot keeps z */
                } else { /* linear_before_reset: r (.) (h_{t-1} R_h^T + Rb_h) */
                    float z = sigmoidf(g[0]), r = sigmoidf(g[1]);
                    float rbh = rb ? rb[2 * H + j] : 0.0f;
                    float hh = tanhf(x[2 * H + j] + r * (hr[2 * H + j] + rbh));
                    h[j] = (1.0f - z) * hh + z * h[j];
                }
            }
            if (gru_reset_first) { /* (r (.) h_{t-1}) R_h^T, then h_t */
                float *acc = hr + 2 * H;
                cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)H, (int)H, 1.0f, s->r + 2 * H * H,
                            (int)H, rh, 1, 0.0f, acc, 1);
                for (int64_t j = 0; j < H; j++) {
                    float z = hr[j];
                    float hh = tanhf(x[2 * H + j] + (rb ? rb[2 * H + j] : 0.0f) + acc[j]);
                    h[j] = (1.0f - z) * hh + z * h[j];
                }
            }
            if (s->y)
                for (int64_t j = 0; j < H; j++)
                    s->y[y_index(p, T, s->dirs, B, H, tt, s->d, b, j)] = h[j];
        }
    }
}

static tci_status rnn_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const rnn_params *p = node->params;
    rnn_dims dm;
    TRY_STATUS(rnn_check(node, in, &dm));
    const int64_t T = dm.t, B = dm.b, IN = dm.i, H = dm.h, G = p->gates, GH = G * H;
    const int64_t dirs = p->directions;
    const tci_tensor *bias = input_of(node, in, RNN_B), *lens = input_of(node, in, RNN_SEQ_LENS);
    const tci_tensor *init_h = input_of(node, in, RNN_INITIAL_H);
    const tci_tensor *init_c = p->cell == RNN_CELL_LSTM ? input_of(node, in, RNN_INITIAL_C) : NULL;
    const tci_tensor *peep = p->cell == RNN_CELL_LSTM ? input_of(node, in, RNN_P) : NULL;
    tci_tensor *y = node->num_outputs > RNN_Y ? out[RNN_Y] : NULL;
    tci_tensor *y_h = node->num_outputs > RNN_Y_H ? out[RNN_Y_H] : NULL;
    tci_tensor *y_c = node->num_outputs > RNN_Y_C ? out[RNN_Y_C] : NULL;
    if (lens)
        for (int64_t b = 0; b < B; b++) {
            int64_t v = ((const int32_t *)lens->data)[b];
            if (v < 0 || v > T)
                return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                     "sequence_lens[%lld] = %lld is outside [0, %lld]",
                                     (long long)b, (long long)v, (long long)T);
        }
    TRY_STATUS(op_check_blas_dims(node, T * B, GH, IN > H ? IN : H));
    if (y) memset(y->data, 0, (size_t)op_count(y) * sizeof(float));
    size_t rows = (size_t)(T * B), state = (size_t)(B * H);
    float *xw = malloc((rows * (size_t)GH + 2 * state + 2 * (size_t)B * (size_t)GH + state + 1) *
                       sizeof(float));
    if (!xw) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the gates");
    float *h = xw + rows * (size_t)GH, *c = h + state, *hr = c + state, *rh = hr + B * GH;
    for (int64_t d = 0; d < dirs; d++) {
        const float *w = (const float *)in[RNN_W]->data + d * GH * IN;
        if (T * B > 0 && IN > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(T * B), (int)GH, (int)IN,
                        1.0f, in[RNN_X]->data, (int)IN, w, (int)IN, 0.0f, xw, (int)GH);
        else
            memset(xw, 0, rows * (size_t)GH * sizeof(float));
        const float *wb = bias ? (const float *)bias->data + d * 2 * GH : NULL;
        if (wb)
            for (size_t r = 0; r < rows; r++)
                for (int64_t k = 0; k < GH; k++) xw[r * (size_t)GH + (size_t)k] += wb[k];
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < H; j++) {
                int64_t si = state_index(p, dirs, B, H, d, b, j);
                h[b * H + j] = init_h ? ((const float *)init_h->data)[si] : 0.0f;
                c[b * H + j] = init_c ? ((const float *)init_c->data)[si] : 0.0f;
            }
        rnn_direction s = {.p = p,
                           .steps = T,
                           .batch = B,
                           .hidden = H,
                           .dirs = dirs,
                           .d = d,
                           .backward = d == 1 || p->reverse,
                           .xw = xw,
                           .r = (const float *)in[RNN_R]->data + d * GH * H,
                           .rb = wb ? wb + GH : NULL,
                           .peep = peep ? (const float *)peep->data + d * 3 * H : NULL,
                           .lens = lens ? lens->data : NULL,
                           .h = h,
                           .c = c,
                           .hr = hr,
                           .rh = rh,
                           .y = y ? y->data : NULL};
        if (H > 0) run_direction(&s);
        /* an empty sequence's final state is zero, as onnxruntime gives it, not initial_h */
        for (int64_t b = 0; b < B; b++) {
            bool empty = lens && ((const int32_t *)lens->data)[b] == 0;
            for (int64_t j = 0; j < H; j++) {
                int64_t si = state_index(p, dirs, B, H, d, b, j);
                if (y_h) ((float *)y_h->data)[si] = empty ? 0.0f : h[b * H + j];
                if (y_c) ((float *)y_c->data)[si] = empty ? 0.0f : c[b * H + j];
            }
        }
    }
    free(xw);
    return TCI_OK;
}

/* ---- GPU lowering ---- */

static tci_status rnn_gpu_lower(plan_builder *b, const ir_node *node) {
    const rnn_params *p = node->params;
    const ir_tensor *x = node->inputs[RNN_X], *w = node->inputs[RNN_W], *r = node->inputs[RNN_R];
    const ir_tensor *opt[8] = {0};
    for (int k = RNN_B; k < node->num_inputs; k++) opt[k] = node->inputs[k];
    if (p->cell != RNN_CELL_LSTM) opt[RNN_INITIAL_C] = opt[RNN_P] = NULL;
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, r));
    const float *wv = lower_const_floats(w), *rv = lower_const_floats(r);
    const float *bv = opt[RNN_B] ? lower_const_floats(opt[RNN_B]) : NULL;
    const float *pv = opt[RNN_P] ? lower_const_floats(opt[RNN_P]) : NULL;
    if (!wv || !rv || (opt[RNN_B] && !bv) || (opt[RNN_P] && !pv))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path takes W, R, B and P only as fp32 constants "
                             "(initializers)");
    const int64_t T = x->dims[p->layout ? 1 : 0], B = x->dims[p->layout ? 0 : 1];
    const int64_t IN = x->dims[2], H = r->dims[2], G = p->gates, GH = G * H;
    const int64_t D = p->directions;
    if (T * B == 0 || IN == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "the GPU path needs a non-empty input X");
    /* kern_rnn keeps a sequence's h_{t-1} in shared memory: KERN_RNN_MAX_HIDDEN */
    if (H < 1 || H > 4096)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "hidden_size %lld is outside the GPU path's 1..4096", (long long)H);
    /* the input projection of every step and direction: one GEMM, X (T*B, I) by W^T */
    int xi = -1, wi = -1, bias_i = -1, xw = -1;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_input(b, node, w, PLAN_LAYOUT_DENSE, &wi));
    size_t blob_count = (size_t)(D * H * GH + D * GH + D * 3 * H);
    float *blob = calloc(blob_count + (size_t)(D * GH), sizeof(float));
    if (!blob) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for weights");
    float *wb = blob + blob_count, *rt = blob, *rb = blob + D * H * GH, *pe = rb + D * GH;
    for (int64_t d = 0; d < D; d++) {
        for (int64_t row = 0; row < GH; row++)
            for (int64_t k = 0; k < H; k++) rt[(d * H + k) * GH + row] = rv[(d * GH + row) * H + k];
        for (int64_t k = 0; bv && k < GH; k++) {
            wb[d * GH + k] = bv[d * 2 * GH + k];
            rb[d * GH + k] = bv[d * 2 * GH + GH + k];
        }
        for (int64_t k = 0; pv && k < 3 * H; k++) pe[d * 3 * H + k] = pv[d * 3 * H + k];
    }
    int weights = -1;
    const int64_t bias_dims[1] = {D * GH}, blob_dims[1] = {(int64_t)blob_count};
    tci_status st = TCI_OK;
    if (bv)
        st = lower_host_constant(b, "rnn_input_bias", wb, 1, bias_dims, TCI_DTYPE_FLOAT,
                                 PLAN_LAYOUT_DENSE, &bias_i);
    if (st == TCI_OK)
        st = lower_host_data(b, "rnn_recurrent_weights", blob, 1, blob_dims, TCI_DTYPE_FLOAT,
                             &weights);
    free(blob);
    TRY_STATUS(st);
    char label[96];
    snprintf(label, sizeof label, "%s input projection", node->op_type);
    const int64_t xw_dims[2] = {T * B, D * GH};
    TRY_STATUS(lower_temporary(b, "rnn_projection", lower_float_dtype(b), PLAN_LAYOUT_DENSE, 2,
                            xw_dims, &xw));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_GEMM, node, lower_intern(b, label), &s));
    plan_gemm g = {0};
    g.batch = 1;
    g.m = T * B;
    g.n = D * GH;
    g.k = IN;
    g.trans_b = true;
    g.lda = IN;
    g.ldb = IN;
    g.ldc = D * GH;
    g.alpha = 1.0f;
    g.has_bias = bias_i >= 0;
    g.fused = s->label;
    s->u.gemm = g;
    lower_step_io(s, 3, (int[]){xi, wi, bias_i}, 1, &xw);
    /* the recurrence: state set-up, every time step, final state */
    plan_rnn rs = {0};
    rs.cell = p->cell == RNN_CELL_LSTM ? PLAN_RNN_LSTM
              : p->cell == RNN_CELL_GRU ? PLAN_RNN_GRU
                                        : PLAN_RNN_TANH;
    rs.seq_length = T;
    rs.batch = B;
    rs.hidden = H;
    rs.directions = D;
    rs.reverse = p->reverse;
    rs.batch_major = p->layout != 0;
    rs.linear_before_reset = p->linear_before_reset != 0;
    int state = -1, init[2] = {-1, -1}, lens = -1;
    const int64_t state_dims[2] = {PLAN_RNN_STATE_ROWS, D * B * H};
    TRY_STATUS(lower_temporary(b, "rnn_state", TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, 2, state_dims,
                            &state));
    for (int k = 0; k < 2; k++) {
        const ir_tensor *t = opt[k ? RNN_INITIAL_C : RNN_INITIAL_H];
        if (t) TRY_STATUS(lower_input(b, node, t, PLAN_LAYOUT_DENSE, &init[k]));
    }
    if (opt[RNN_SEQ_LENS])
        TRY_STATUS(lower_input(b, node, opt[RNN_SEQ_LENS], PLAN_LAYOUT_DENSE, &lens));
    snprintf(label, sizeof label, "%s initial state", node->op_type);
    TRY_STATUS(lower_step(b, PLAN_STEP_RNN, node, lower_intern(b, label), &s));
    rs.phase = PLAN_RNN_INIT;
    s->u.rnn = rs;
    lower_step_io(s, 2, init, 1, &state);
    /* outputs nothing reads are not written */
    const ir_tensor *y = node->num_outputs > RNN_Y ? node->outputs[RNN_Y] : NULL;
    if (y && !lower_is_read(b, y)) y = NULL;
    int yi = -1;
    if (y) TRY_STATUS(lower_output(b, node, y, &yi));
    snprintf(label, sizeof label, "%s recurrence", node->op_type);
    TRY_STATUS(lower_step(b, PLAN_STEP_RNN, node, lower_intern(b, label), &s));
    rs.phase = PLAN_RNN_STEPS;
    s->u.rnn = rs;
    lower_step_io(s, 5, (int[]){xw, weights, lens, state, xi}, y ? 1 : 0, &yi);
    int finals[2], num_finals = 0;
    for (int k = RNN_Y_H; k < node->num_outputs; k++) {
        if (!node->outputs[k] || !lower_is_read(b, node->outputs[k])) continue;
        TRY_STATUS(lower_output(b, node, node->outputs[k], &finals[num_finals++]));
        if (k == RNN_Y_H) rs.has_y_h = true;
        else rs.has_y_c = true;
    }
    if (!num_finals) return TCI_OK;
    snprintf(label, sizeof label, "%s final state", node->op_type);
    TRY_STATUS(lower_step(b, PLAN_STEP_RNN, node, lower_intern(b, label), &s));
    rs.phase = PLAN_RNN_FINAL;
    s->u.rnn = rs;
    lower_step_io(s, 2, (int[]){state, lens}, num_finals, finals);
    return TCI_OK;
}

OP_DESC(lstm_desc, "LSTM", OP_VERSIONS(1, 7, 14, 22), lstm_parse, rnn_infer, rnn_forward, 0,
        rnn_gpu_lower, NULL, BINARY_NONE);
OP_DESC(gru_desc, "GRU", OP_VERSIONS(1, 3, 7, 14, 22), gru_parse, rnn_infer, rnn_forward, 0,
        rnn_gpu_lower, NULL, BINARY_NONE);
OP_DESC(simple_rnn_desc, "RNN", OP_VERSIONS(1, 7, 14, 22), simple_rnn_parse, rnn_infer,
        rnn_forward, 0, rnn_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_rnn_ops[] = {&lstm_desc, &gru_desc, &simple_rnn_desc, NULL};
