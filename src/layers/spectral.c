/* Op family 'spectral': the audio front ends' Fourier ops: DFT (complex, real-to-complex and
 * complex-to-real, forward and inverse, along any signal axis), STFT (windowed frames, each one
 * DFT) and MelWeightMatrix (the triangular mel filterbank). The transforms run through fft.h
 * (radix-2 or Bluestein, O(n log n) at any length) in double; tensors are fp32 (double and
 * float16 signals are refused by name). CPU reference only (no GPU path: the planner refuses
 * them naming the node; a MelWeightMatrix of constant sizes folds at build). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/fft.h"
#include "layers/op.h"

/* Transform lengths past this are refused rather than planned (dft_length is data). */
#define SPECTRAL_MAX_LENGTH (INT64_C(1) << 30)

/* Reads an optional scalar int32/int64 input (index i): *known false while absent or unknown. */
static tci_status read_scalar(const ir_node *node, const tci_tensor *t, int i, const char *what,
                              int64_t *value, bool *known) {
    *known = false;
    if (!t) return TCI_OK;
    TRY_STATUS(op_check_dtype(node, t, i, op_index_types));
    if (t->rank < 0) return TCI_OK;
    int64_t count;
    TRY_STATUS(ir_count_elements(t->rank, t->dims, &count));
    if (t->rank > 1 || (count >= 0 && count != 1))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %s must be a scalar", what);
    if (!t->data) return TCI_OK;
    *value = op_read_int(t, 0);
    *known = true;
    return TCI_OK;
}

/* A transform length read from an input: in [1, SPECTRAL_MAX_LENGTH]. */
static tci_status check_length(const ir_node *node, const char *what, int64_t n) {
    if (n < 1 || n > SPECTRAL_MAX_LENGTH)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s is %lld; must be in [1, %lld]", what,
                             (long long)n, (long long)SPECTRAL_MAX_LENGTH);
    return TCI_OK;
}

static tci_status plan_or_fail(const ir_node *node, fft_plan *fft, int64_t n) {
    if (!fft_plan_init(fft, n))
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for an FFT of length %lld",
                             (long long)n);
    return TCI_OK;
}

/* ---- DFT ---- */

typedef struct dft_params {
    int inverse, onesided;
    int64_t axis; /* version 17: the attribute (default 1); 20: the input's default -2 */
} dft_params;

static tci_status dft_parse(ir_node *node, mem_arena *arena) {
    bool v17 = node->since_version < 20;
    /* 17: (input, dft_length) and the axis attribute; 20: axis is input 2 */
    TRY_STATUS(op_check_arity(node, 1, v17 ? 2 : 3, 1, 1));
    static const char *const known17[] = {"axis", "inverse", "onesided", NULL};
    static const char *const known20[] = {"inverse", "onesided", NULL};
    TRY_STATUS(ir_check_attrs(node, v17 ? known17 : known20));
    OP_ALLOC_PARAMS(node, arena, dft_params, p);
    TRY_STATUS(op_read_flag(node, "inverse", 0, &p->inverse));
    TRY_STATUS(op_read_flag(node, "onesided", 0, &p->onesided));
    p->axis = -2;
    if (v17) TRY_STATUS(ir_attr_int(node, "axis", 1, &p->axis));
    return TCI_OK;
}

/* What a DFT node does with its input's shape: the axis, the transform's length n, the output's
 * length along the axis and its last dim; *known false while an input value it needs is not. */
typedef struct dft_shape {
    int axis;
    int64_t n, out_len, out_c;
} dft_shape;

static tci_status dft_shape_of(const ir_node *node, const tci_tensor *const *in, dft_shape *s,
                               bool *axis_known, bool *n_known) {
    const dft_params *p = node->params;
    const tci_tensor *x = in[0];
    const tci_tensor *len_in = node->num_inputs > 1 ? in[1] : NULL;
    const tci_tensor *axis_in = node->num_inputs > 2 ? in[2] : NULL;
    int rank = x->rank;
    int64_t c = x->dims[rank - 1];
    if (c >= 0 && c != 1 && c != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the input's last dim is %lld; must be 1 (real) or 2 (complex)",
                             (long long)c);
    if (p->onesided && c >= 0 && c != (p->inverse ? 2 : 1))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             p->inverse ? "onesided=1 with inverse=1 (IRFFT) takes a complex "
                                          "input (last dim 2)"
                                        : "onesided=1 with inverse=0 (RFFT) takes a real input "
                                          "(last dim 1)");
    s->out_c = p->inverse && p->onesided ? 1 : 2;
    int64_t axis = p->axis;
    *axis_known = true;
    if (axis_in) {
        bool known;
        TRY_STATUS(read_scalar(node, axis_in, 2, "axis", &axis, &known));
        *axis_known = known;
    }
    s->axis = -1;
    if (*axis_known) {
        int a;
        if (axis < -rank || axis > rank - 2 || (axis < 0 && axis > -2))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "axis is %lld; must be in [-%d, -2] or [0, %d] (the last dim "
                                 "holds the real and imaginary parts)",
                                 (long long)axis, rank, rank - 2);
        TRY_STATUS(op_normalize_axis(node, axis, rank, &a));
        s->axis = a;
    }
    int64_t n = -1;
    bool len_known;
    TRY_STATUS(read_scalar(node, len_in, 1, "dft_length", &n, &len_known));
    *n_known = len_known;
    if (len_known) TRY_STATUS(check_length(node, "dft_length", n));
    if (!len_in && *axis_known && x->dims[s->axis] >= 0) {
        int64_t l = x->dims[s->axis];
        n = p->inverse && p->onesided ? 2 * (l - 1) : l;
        TRY_STATUS(check_length(node, p->inverse && p->onesided
                                          ? "the IRFFT's default length 2 * (dim - 1)"
                                          : "the length of the transformed axis",
                                n));
        *n_known = true;
    }
    s->n = n;
    s->out_len = !*n_known ? -1 : p->onesided && !p->inverse ? n / 2 + 1 : n;
    return TCI_OK;
}

static tci_status dft_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    op_set_unknown(out[0], TCI_DTYPE_FLOAT);
    if (x->rank < 0) return TCI_OK;
    if (x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input must have rank >= 2 (signal dims, then real/imaginary), "
                             "got %d",
                             x->rank);
    dft_shape s;
    bool axis_known, n_known;
    TRY_STATUS(dft_shape_of(node, in, &s, &axis_known, &n_known));
    out[0]->rank = x->rank;
    for (int d = 0; d < x->rank - 1; d++) out[0]->dims[d] = axis_known ? x->dims[d] : -1;
    if (axis_known) out[0]->dims[s.axis] = s.out_len;
    out[0]->dims[x->rank - 1] = s.out_c;
    return TCI_OK;
}

static tci_status dft_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const dft_params *p = node->params;
    const tci_tensor *x = in[0];
    dft_shape s;
    bool axis_known, n_known;
    TRY_STATUS(dft_shape_of(node, in, &s, &axis_known, &n_known));
    int rank = x->rank;
    int64_t outer = 1, inner = 1, len = x->dims[s.axis], c = x->dims[rank - 1], n = s.n;
    for (int d = 0; d < s.axis; d++) outer *= x->dims[d];
    for (int d = s.axis + 1; d < rank - 1; d++) inner *= x->dims[d];
    if (op_count(out[0]) == 0) return TCI_OK;
    fft_plan fft;
    TRY_STATUS(plan_or_fail(node, &fft, n));
    double complex *line = malloc((size_t)n * sizeof *line);
    if (!line) {
        fft_plan_free(&fft);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for a line of %lld",
                             (long long)n);
    }
    const float *xd = x->data;
    float *yd = out[0]->data;
    bool irfft = p->inverse && p->onesided;
    /* the input values the transform reads: the first n (IRFFT: the first n / 2 + 1, the rest
     * of the spectrum being their conjugates) */
    int64_t take = irfft ? n / 2 + 1 : n;
    if (take > len) take = len;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t k = 0; k < n; k++) line[k] = 0;
            for (int64_t k = 0; k < take; k++) {
                const float *v = xd + ((o * len + k) * inner + i) * c;
                line[k] = fft_complex(v[0], c == 2 ? v[1] : 0.0);
            }
            if (irfft) {
                /* the Hermitian spectrum: X[n - k] = conj(X[k]); the imaginary parts of X[0]
                 * and (n even) X[n / 2] are dropped, as numpy's irfft does */
                line[0] = creal(line[0]);
                if (n % 2 == 0) line[n / 2] = creal(line[n / 2]);
                for (int64_t k = 1; k < (n + 1) / 2; k++) line[n - k] = conj(line[k]);
            }
            fft_run(&fft, line, p->inverse);
            double scale = p->inverse ? 1.0 / (double)n : 1.0;
            for (int64_t k = 0; k < s.out_len; k++) {
                float *v = yd + ((o * s.out_len + k) * inner + i) * s.out_c;
                v[0] = (float)(creal(line[k]) * scale);
                if (s.out_c == 2) v[1] = (float)(cimag(line[k]) * scale);
            }
        }
    free(line);
    fft_plan_free(&fft);
    return TCI_OK;
}

/* ---- STFT ---- */

typedef struct stft_params {
    int onesided;
} stft_params;

static tci_status stft_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 4, 1, 1));
    static const char *const known[] = {"onesided", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, stft_params, p);
    return op_read_flag(node, "onesided", 1, &p->onesided);
}

/* The frames: count, length (the DFT size) and step; *known false while a value is not. */
typedef struct stft_shape {
    int64_t frames, length, step, bins;
} stft_shape;

static tci_status stft_shape_of(const ir_node *node, const tci_tensor *const *in, stft_shape *s,
                                bool *known) {
    const stft_params *p = node->params;
    const tci_tensor *x = in[0], *window = node->num_inputs > 2 ? in[2] : NULL;
    const tci_tensor *len_in = node->num_inputs > 3 ? in[3] : NULL;
    *s = (stft_shape){-1, -1, -1, -1};
    *known = false;
    if (x->rank >= 0 && x->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "signal must be 3-D (batch, length, 1 or 2), got rank %d", x->rank);
    int64_t c = x->rank == 3 ? x->dims[2] : -1;
    if (c >= 0 && c != 1 && c != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the signal's last dim is %lld; must be 1 (real) or 2 (complex)",
                             (long long)c);
    if (p->onesided && c == 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "onesided=1 takes a real signal (last dim 1); set onesided=0 for a "
                             "complex one");
    if (window) {
        TRY_STATUS(op_check_dtype(node, window, 2, op_float_types));
        if (window->rank >= 0 && window->rank != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "window must be 1-D, got rank %d",
                                 window->rank);
    }
    int64_t win_len = window && window->rank == 1 ? window->dims[0] : -1;
    bool step_known, len_known;
    TRY_STATUS(read_scalar(node, in[1], 1, "frame_step", &s->step, &step_known));
    TRY_STATUS(read_scalar(node, len_in, 3, "frame_length", &s->length, &len_known));
    if (step_known && s->step < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "frame_step is %lld; must be >= 1",
                             (long long)s->step);
    if (len_known) {
        TRY_STATUS(check_length(node, "frame_length", s->length));
        if (win_len >= 0 && win_len != s->length)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "window has %lld values but frame_length is %lld",
                                 (long long)win_len, (long long)s->length);
    } else if (!len_in) {
        s->length = window ? win_len : x->rank == 3 ? x->dims[1] : -1;
        if (s->length >= 0) TRY_STATUS(check_length(node, "the frame length", s->length));
    }
    if (s->length >= 0) s->bins = p->onesided ? s->length / 2 + 1 : s->length;
    int64_t signal = x->rank == 3 ? x->dims[1] : -1;
    if (s->length < 0 || signal < 0 || !step_known) return TCI_OK;
    if (signal < s->length)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the signal (%lld samples) is shorter than a frame (%lld)",
                             (long long)signal, (long long)s->length);
    s->frames = 1 + (signal - s->length) / s->step;
    *known = true;
    return TCI_OK;
}

static tci_status stft_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, op_float_types));
    stft_shape s;
    bool known;
    TRY_STATUS(stft_shape_of(node, in, &s, &known));
    out[0]->dtype = TCI_DTYPE_FLOAT;
    out[0]->rank = 4;
    out[0]->dims[0] = in[0]->rank == 3 ? in[0]->dims[0] : -1;
    out[0]->dims[1] = s.frames;
    out[0]->dims[2] = s.bins;
    out[0]->dims[3] = 2;
    return TCI_OK;
}

/* Frame t of batch b is samples t * step .. + length, times the window (in fp32, as ONNX's
 * reference weighs them), transformed; onesided keeps bins 0 .. length / 2. */
static tci_status stft_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0], *window = node->num_inputs > 2 ? in[2] : NULL;
    stft_shape s;
    bool known;
    TRY_STATUS(stft_shape_of(node, in, &s, &known));
    int64_t batch = x->dims[0], signal = x->dims[1], c = x->dims[2], n = s.length;
    if (op_count(out[0]) == 0) return TCI_OK;
    fft_plan fft;
    TRY_STATUS(plan_or_fail(node, &fft, n));
    double complex *line = malloc((size_t)n * sizeof *line);
    if (!line) {
        fft_plan_free(&fft);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for a frame of %lld",
                             (long long)n);
    }
    const float *xd = x->data, *w = window ? window->data : NULL;
    float *yd = out[0]->data;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < s.frames; t++) {
            const float *frame = xd + (b * signal + t * s.step) * c;
            for (int64_t k = 0; k < n; k++) {
                float wk = w ? w[k] : 1.0f;
                line[k] = fft_complex(frame[k * c] * wk, c == 2 ? frame[k * c + 1] * wk : 0.0f);
            }
            fft_run(&fft, line, false);
            float *y = yd + (b * s.frames + t) * s.bins * 2;
            for (int64_t k = 0; k < s.bins; k++) {
                y[2 * k] = (float)creal(line[k]);
                y[2 * k + 1] = (float)cimag(line[k]);
            }
        }
    free(line);
    fft_plan_free(&fft);
    return TCI_OK;
}

/* ---- MelWeightMatrix ---- */

typedef struct mel_params {
    tci_dtype dtype;
} mel_params;

static tci_status mel_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 5, 5, 1, 1));
    static const char *const known[] = {"output_datatype", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, mel_params, p);
    int64_t t;
    TRY_STATUS(ir_attr_int(node, "output_datatype", TCI_DTYPE_FLOAT, &t));
    /* ONNX's T3 is the float types; tcinfer stores float, double and float16 of them */
    if (t != TCI_DTYPE_FLOAT && t != TCI_DTYPE_DOUBLE && t != TCI_DTYPE_FLOAT16) {
        const char *name = op_onnx_type_name(t);
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'output_datatype' is %s; tcinfer produces float, double "
                             "or float16 here",
                             name ? name : "no data type");
    }
    p->dtype = (tci_dtype)t;
    return TCI_OK;
}

/* The sizes and edges; *known false while a value is not. */
typedef struct mel_inputs {
    int64_t bins, dft_length, sample_rate;
    double lower, upper;
} mel_inputs;

static tci_status mel_read(const ir_node *node, const tci_tensor *const *in, mel_inputs *m,
                           bool *known) {
    static const char *const names[] = {"num_mel_bins", "dft_length", "sample_rate"};
    int64_t *ints[] = {&m->bins, &m->dft_length, &m->sample_rate};
    bool all = true;
    for (int i = 0; i < 3; i++) {
        bool k;
        *ints[i] = -1;
        TRY_STATUS(read_scalar(node, in[i], i, names[i], ints[i], &k));
        if (k && (*ints[i] < 1 || *ints[i] > SPECTRAL_MAX_LENGTH))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s is %lld; must be in [1, %lld]",
                                 names[i], (long long)*ints[i], (long long)SPECTRAL_MAX_LENGTH);
        all = all && k;
    }
    static const tci_dtype edge_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, 0};
    for (int i = 3; i < 5; i++) {
        const tci_tensor *t = in[i];
        TRY_STATUS(op_check_dtype(node, t, i, edge_types));
        int64_t count;
        TRY_STATUS(ir_count_elements(t->rank, t->dims, &count));
        if (t->rank > 1 || (count >= 0 && count != 1))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %s must be a scalar",
                                 i == 3 ? "lower_edge_hertz" : "upper_edge_hertz");
        all = all && t->data;
    }
    *known = all;
    if (!all) return TCI_OK;
    m->lower = op_read_number(in[3], 0);
    m->upper = op_read_number(in[4], 0);
    return TCI_OK;
}

static tci_status mel_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const mel_params *p = node->params;
    mel_inputs m;
    bool known;
    TRY_STATUS(mel_read(node, in, &m, &known));
    out[0]->dtype = p->dtype;
    out[0]->rank = 2;
    out[0]->dims[0] = m.dft_length >= 0 ? m.dft_length / 2 + 1 : -1;
    out[0]->dims[1] = m.bins;
    return TCI_OK;
}

/* The mel value of an edge in hertz, as ONNX's reference computes it: 2595 log1p(f / 700) in the
 * edge's own type, then divided by ln 10 in double. */
static double mel_of(const tci_tensor *edge, double f) {
    if (edge->dtype == TCI_DTYPE_FLOAT)
        return (double)(2595.0f * log1pf((float)f / 700.0f)) / log(10.0);
    return 2595.0 * log1p(f / 700.0) / log(10.0);
}

/* numpy's floor division of doubles (a // b), which a plain floor(a / b) can miss by one where
 * a / b rounds up to a whole number */
static double floor_divide(double a, double b) {
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0;
    if (div == 0) return copysign(0.0, a / b);
    double fl = floor(div);
    return div - fl > 0.5 ? fl + 1.0 : fl;
}

/* ONNX's reference: num_mel_bins + 2 points evenly spaced in mel from the lower edge, with a
 * step of (high - low) / (num_mel_bins + 2), back to hertz, to spectrogram bins
 * floor((dft_length + 1) f / sample_rate); filter i rises from point i to i + 1 and falls to
 * i + 2, peaking at 1. */
static tci_status mel_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    mel_inputs m;
    bool known;
    TRY_STATUS(mel_read(node, in, &m, &known));
    tci_tensor *y = out[0];
    int64_t rows = m.dft_length / 2 + 1, cols = m.bins;
    double low = mel_of(in[3], m.lower), high = mel_of(in[4], m.upper);
    double step = (high - low) / (double)(cols + 2);
    int64_t *point = malloc((size_t)(cols + 2) * sizeof *point);
    if (!point) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < cols + 2; i++) {
        double hz = 700.0 * expm1(((double)i * step + low) / 2595.0 * log(10.0));
        double bin = floor_divide((double)(m.dft_length + 1) * hz, (double)m.sample_rate);
        if (!(bin >= 0 && bin < (double)rows)) {
            free(point);
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "mel point %lld (%g Hz) falls outside the %lld spectrogram bins "
                                 "(the edges must lie in [0, sample_rate / 2])",
                                 (long long)i, hz, (long long)rows);
        }
        point[i] = (int64_t)bin;
    }
    for (int64_t e = 0; e < rows * cols; e++) op_store_number(y->dtype, y->data, e, 0.0);
    for (int64_t i = 0; i < cols; i++) {
        int64_t lo = point[i], mid = point[i + 1], hi = point[i + 2];
        if (mid == lo)
            op_store_number(y->dtype, y->data, mid * cols + i, 1.0);
        else
            for (int64_t j = lo; j <= mid; j++)
                op_store_number(y->dtype, y->data, j * cols + i,
                                (double)(j - lo) / (double)(mid - lo));
        if (hi > mid)
            for (int64_t j = mid; j < hi; j++)
                op_store_number(y->dtype, y->data, j * cols + i,
                                (double)(hi - j) / (double)(hi - mid));
    }
    free(point);
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(dft_desc, "DFT", OP_VERSIONS(17, 20), dft_parse, dft_infer, dft_forward, 0, NULL, NULL,
        BINARY_NONE);
OP_DESC(stft_desc, "STFT", OP_VERSIONS(17), stft_parse, stft_infer, stft_forward, 0, NULL, NULL,
        BINARY_NONE);
OP_DESC(mel_desc, "MelWeightMatrix", OP_VERSIONS(17), mel_parse, mel_infer, mel_forward, 0, NULL,
        NULL, BINARY_NONE);

const op_desc *const layer_spectral_ops[] = {&dft_desc, &stft_desc, &mel_desc, NULL};
