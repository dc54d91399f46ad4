/* Op family 'pool': MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool and LRN over
 * N x C x spatial tensors (1 to 6 spatial axes): the fp32 reference the GPU kernels answer to
 * (LpPool has no GPU path yet). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "layers/window.h"

#define POOL_MAX_SPATIAL (TCI_MAX_RANK - 2)
/* Attribute values beyond this are nonsense and would let window arithmetic overflow. */
#define POOL_ATTR_LIMIT INT64_C(0x7fffffff)

typedef enum pool_auto_pad {
    POOL_PAD_NOTSET,
    POOL_PAD_SAME_UPPER,
    POOL_PAD_SAME_LOWER,
    POOL_PAD_VALID,
} pool_auto_pad;

typedef struct pool_params {
    pool_kind kind;
    /* LpPool: the norm's p, > 0 (the window takes (sum |x|^p)^(1/p) of the taps inside the
     * input: padding adds 0); 0 for the other pools */
    double lp;
    int num_spatial;
    int64_t kernel[POOL_MAX_SPATIAL];
    int64_t strides[POOL_MAX_SPATIAL];
    int64_t dilations[POOL_MAX_SPATIAL];
    int64_t pads[2 * POOL_MAX_SPATIAL]; /* begins then ends, as in the attribute */
    pool_auto_pad auto_pad;
    bool ceil_mode;
    bool count_include_pad;
    bool column_major_indices; /* storage_order = 1 */
} pool_params;

typedef struct lrn_params {
    float alpha, beta, bias;
    int64_t size;
} lrn_params;

static const tci_dtype max_pool_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_INT8, TCI_DTYPE_UINT8, 0};

/* ---- attribute parsing ---- */

static tci_status read_bool_attr(const ir_node *node, const char *name, bool *out) {
    int64_t v;
    TRY_STATUS(ir_attr_int(node, name, 0, &v));
    if (v != 0 && v != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s is %lld; must be 0 or 1", name,
                             (long long)v);
    *out = v != 0;
    return TCI_OK;
}

/* Reads an INTS attribute of exactly `want` entries, each >= min; absent gives def everywhere. */
static tci_status read_axis_ints(const ir_node *node, const char *name, int want, int64_t min,
                                 int64_t def, int64_t *out) {
    const int64_t *v;
    size_t n;
    TRY_STATUS(ir_attr_ints(node, name, &v, &n));
    if (!v) {
        for (int i = 0; i < want; i++) out[i] = def;
        return TCI_OK;
    }
    if (n != (size_t)want)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has %zu entries, expected %d (kernel_shape has %d spatial axes)",
                             name, n, want, want / (strcmp(name, "pads") == 0 ? 2 : 1));
    for (int i = 0; i < want; i++) {
        if (v[i] < min)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s[%d] is %lld; must be %s", name,
                                 i, (long long)v[i], min > 0 ? "positive" : "non-negative");
        if (v[i] > POOL_ATTR_LIMIT)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s[%d] is %lld, too large", name, i,
                                 (long long)v[i]);
        out[i] = v[i];
    }
    return TCI_OK;
}

/* MaxPool (kind POOL_MAX), AveragePool (POOL_AVERAGE, lp false) or LpPool (lp). */
static tci_status parse_window(ir_node *node, mem_arena *arena, pool_kind kind, bool lp) {
    int v = node->since_version;
    bool is_max = kind == POOL_MAX;
    bool has_indices = is_max && v >= 8;
    TRY_STATUS(op_check_arity(node, 1, 1, 1, has_indices ? 2 : 1));
    const char *known[8];
    int n = 0;
    known[n++] = "auto_pad";
    known[n++] = "kernel_shape";
    known[n++] = "pads";
    known[n++] = "strides";
    if (lp ? v >= 18 : v >= 10) known[n++] = "ceil_mode";
    if (lp ? v >= 18 : is_max ? v >= 10 : v >= 19) known[n++] = "dilations";
    if (is_max && v >= 8) known[n++] = "storage_order";
    if (!is_max && !lp && v >= 7) known[n++] = "count_include_pad";
    if (lp) known[n++] = "p";
    known[n] = NULL;
    TRY_STATUS(ir_check_attrs(node, known));

    pool_params *p = arena_alloc(arena, sizeof *p);
    if (!p) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    memset(p, 0, sizeof *p);
    p->kind = kind;
    if (lp && v < 2) { /* LpPool-1's p is a float */
        float f;
        TRY_STATUS(ir_attr_float(node, "p", 2.0f, &f));
        p->lp = f;
    } else if (lp) {
        int64_t i;
        TRY_STATUS(ir_attr_int(node, "p", 2, &i));
        p->lp = (double)i;
    }
    if (lp && !(p->lp > 0.0 && p->lp <= POOL_ATTR_LIMIT))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "p is %g; must be positive", p->lp);

    const int64_t *kernel;
    size_t k;
    TRY_STATUS(ir_attr_ints(node, "kernel_shape", &kernel, &k));
    if (!kernel || k == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'kernel_shape' is required");
    if (k > POOL_MAX_SPATIAL)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "kernel_shape has %zu axes; at most %d spatial axes are supported", k,
                             POOL_MAX_SPATIAL);
    p->num_spatial = (int)k;
    TRY_STATUS(read_axis_ints(node, "kernel_shape", (int)k, 1, 1, p->kernel));
    TRY_STATUS(read_axis_ints(node, "strides", (int)k, 1, 1, p->strides));
    TRY_STATUS(read_axis_ints(node, "dilations", (int)k, 1, 1, p->dilations));
    TRY_STATUS(read_axis_ints(node, "pads", 2 * (int)k, 0, 0, p->pads));

    const char *auto_pad;
    TRY_STATUS(ir_attr_string(node, "auto_pad", "NOTSET", &auto_pad));
    if (strcmp(auto_pad, "NOTSET") == 0) p->auto_pad = POOL_PAD_NOTSET;
    else if (strcmp(auto_pad, "SAME_UPPER") == 0) p->auto_pad = POOL_PAD_SAME_UPPER;
    else if (strcmp(auto_pad, "SAME_LOWER") == 0) p->auto_pad = POOL_PAD_SAME_LOWER;
    else if (strcmp(auto_pad, "VALID") == 0) p->auto_pad = POOL_PAD_VALID;
    else
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                             auto_pad);

    TRY_STATUS(read_bool_attr(node, "ceil_mode", &p->ceil_mode));
    TRY_STATUS(read_bool_attr(node, "count_include_pad", &p->count_include_pad));
    TRY_STATUS(read_bool_attr(node, "storage_order", &p->column_major_indices));
    node->params = p;
    return TCI_OK;
}

static tci_status parse_max_pool(ir_node *node, mem_arena *arena) {
    return parse_window(node, arena, POOL_MAX, false);
}

static tci_status parse_average_pool(ir_node *node, mem_arena *arena) {
    return parse_window(node, arena, POOL_AVERAGE, false);
}

/* LpPool sums like an average pool (padding counts nothing) and takes the p-th root instead of
 * dividing */
static tci_status parse_lp_pool(ir_node *node, mem_arena *arena) {
    return parse_window(node, arena, POOL_AVERAGE, true);
}

static tci_status parse_global(ir_node *node, mem_arena *arena) {
    (void)arena;
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    const char *known[] = {NULL};
    return ir_check_attrs(node, known);
}

static tci_status parse_lrn(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    const char *known[] = {"alpha", "beta", "bias", "size", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    lrn_params *p = arena_alloc(arena, sizeof *p);
    if (!p) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    TRY_STATUS(ir_attr_float(node, "alpha", 0.0001f, &p->alpha));
    TRY_STATUS(ir_attr_float(node, "beta", 0.75f, &p->beta));
    TRY_STATUS(ir_attr_float(node, "bias", 1.0f, &p->bias));
    if (!ir_node_attr(node, "size"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'size' is required");
    TRY_STATUS(ir_attr_int(node, "size", 0, &p->size));
    if (p->size < 1 || p->size > POOL_ATTR_LIMIT)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "size is %lld; must be positive",
                             (long long)p->size);
    node->params = p;
    return TCI_OK;
}

/* ---- window geometry ---- */

/* Output extent and the padding applied on spatial axis d for input extent `in` (< 0: unknown).
 * SAME pads depend on the input, so run time recomputes them here rather than at parse. */
static tci_status window_axis(const ir_node *node, const pool_params *p, int d, int64_t in,
                              int64_t *out, int64_t *pad_begin, int64_t *pad_end) {
    int64_t s = p->strides[d], extent = (p->kernel[d] - 1) * p->dilations[d] + 1;
    int64_t pb = p->pads[d], pe = p->pads[d + p->num_spatial];
    if (p->auto_pad == POOL_PAD_VALID) pb = pe = 0;
    *pad_begin = pb;
    *pad_end = pe;
    if (in < 0) {
        *out = -1;
        return TCI_OK;
    }
    if (p->auto_pad == POOL_PAD_SAME_UPPER || p->auto_pad == POOL_PAD_SAME_LOWER) {
        int64_t o = (in + s - 1) / s; /* ceil(in / stride), ceil_mode or not */
        int64_t total = (o - 1) * s + extent - in;
        if (total < 0) total = 0;
        *pad_begin = p->auto_pad == POOL_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        *pad_end = total - *pad_begin;
        *out = o;
        return TCI_OK;
    }
    int64_t span = in + pb + pe - extent;
    if (span < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "kernel extent %lld (kernel_shape %lld, dilation %lld) is larger than "
                             "the padded input %lld on spatial axis %d",
                             (long long)extent, (long long)p->kernel[d],
                             (long long)p->dilations[d], (long long)(in + pb + pe), d);
    int64_t o = span / s + 1;
    /* the spec's VALID formula for ceil_mode reduces to the floor one */
    if (p->ceil_mode && p->auto_pad == POOL_PAD_NOTSET) {
        o = (span + s - 1) / s + 1;
        /* the last window must start inside the input or its leading padding */
        if ((o - 1) * s >= in + pb) o--;
    }
    *out = o;
    return TCI_OK;
}

static tci_status infer_window(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const pool_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, p->kind == POOL_MAX ? max_pool_types : op_float_types));
    int k = p->num_spatial;
    if (x->rank >= 0 && x->rank != k + 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input has rank %d; kernel_shape has %d spatial axes, so rank %d is "
                             "expected",
                             x->rank, k, k + 2);
    tci_tensor *y = out[0];
    y->dtype = x->dtype;
    y->rank = k + 2;
    y->dims[0] = x->rank >= 0 ? x->dims[0] : -1;
    y->dims[1] = x->rank >= 0 ? x->dims[1] : -1;
    for (int d = 0; d < k; d++) {
        int64_t pad_begin, pad_end;
        TRY_STATUS(window_axis(node, p, d, x->rank >= 0 ? x->dims[2 + d] : -1, &y->dims[2 + d],
                            &pad_begin, &pad_end));
    }
    if (node->num_outputs > 1 && out[1]) {
        op_same_shape(out[1], y);
        out[1]->dtype = TCI_DTYPE_INT64;
    }
    return TCI_OK;
}

tci_status layer_pool_window(const ir_node *node, const tci_tensor *const *in,
                             layer_window *out_window) {
    const pool_params *p = node->params;
    const tci_tensor *x = in[0];
    memset(out_window, 0, sizeof *out_window);
    if (x->rank != p->num_spatial + 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input has rank %d, expected %d",
                             x->rank, p->num_spatial + 2);
    out_window->spatial = p->num_spatial;
    out_window->batch = x->dims[0];
    out_window->in_channels = out_window->out_channels = x->dims[1];
    out_window->group = 1;
    out_window->kind = p->kind;
    out_window->count_include_pad = p->count_include_pad;
    out_window->ceil_mode = p->ceil_mode;
    for (int d = 0; d < p->num_spatial; d++) {
        out_window->in[d] = x->dims[2 + d];
        out_window->kernel[d] = p->kernel[d];
        out_window->stride[d] = p->strides[d];
        out_window->dilation[d] = p->dilations[d];
        TRY_STATUS(window_axis(node, p, d, x->dims[2 + d], &out_window->out[d],
                            &out_window->pad_begin[d], &out_window->pad_end[d]));
    }
    return TCI_OK;
}

/* ---- windowed pooling ---- */

typedef struct window_plan {
    int k;
    int64_t in[POOL_MAX_SPATIAL], out[POOL_MAX_SPATIAL];
    int64_t pad_begin[POOL_MAX_SPATIAL], pad_end[POOL_MAX_SPATIAL];
    int64_t in_strides[POOL_MAX_SPATIAL];     /* row-major, within one plane */
    int64_t column_strides[POOL_MAX_SPATIAL]; /* for storage_order = 1 indices */
    int64_t in_plane, out_plane, planes;
} window_plan;

/* Taps k in [first, last) of one axis land inside the input; `counted` taps land inside the
 * input or its explicit padding (count_include_pad's divisor). */
typedef struct axis_window {
    int64_t start, first, last, counted;
} axis_window;

static axis_window axis_window_at(const pool_params *p, const window_plan *w, int d, int64_t o) {
    axis_window a;
    int64_t dil = p->dilations[d], kernel = p->kernel[d], in = w->in[d];
    a.start = o * p->strides[d] - w->pad_begin[d];
    a.first = a.start >= 0 ? 0 : (-a.start + dil - 1) / dil;
    a.last = in > a.start ? (in - a.start + dil - 1) / dil : 0;
    if (a.last > kernel) a.last = kernel;
    if (a.first > a.last) a.first = a.last;
    int64_t limit = in + w->pad_end[d]; /* windows never start before -pad_begin */
    a.counted = limit > a.start ? (limit - a.start + dil - 1) / dil : 0;
    if (a.counted > kernel) a.counted = kernel;
    return a;
}

static void pool_window_plane(const pool_params *p, const window_plan *w, const float *x,
                              float *y, int64_t *indices, int64_t plane_base) {
    int k = w->k;
    int64_t o[POOL_MAX_SPATIAL] = {0};
    for (int64_t oi = 0; oi < w->out_plane; oi++) {
        axis_window a[POOL_MAX_SPATIAL];
        bool empty = false;
        int64_t counted = 1;
        for (int d = 0; d < k; d++) {
            a[d] = axis_window_at(p, w, d, o[d]);
            if (a[d].first >= a[d].last) empty = true;
            counted *= a[d].counted;
        }
        float best = -INFINITY, sum = 0.0f;
        double lp_sum = 0.0;
        int64_t best_at = -1, taps = 0;
        if (!empty) {
            /* odometer over the outer kernel axes, contiguous loop over the last one */
            int64_t kk[POOL_MAX_SPATIAL];
            for (int d = 0; d < k; d++) kk[d] = a[d].first;
            int last = k - 1;
            int64_t dil_last = p->dilations[last];
            for (;;) {
                int64_t base = 0;
                for (int d = 0; d < last; d++)
                    base += (a[d].start + kk[d] * p->dilations[d]) * w->in_strides[d];
                int64_t pos = a[last].start + a[last].first * dil_last;
                const float *row = x + base;
                if (p->kind == POOL_MAX) {
                    for (int64_t t = a[last].first; t < a[last].last; t++, pos += dil_last) {
                        float v = row[pos];
                        if (best_at < 0 || v > best) {
                            best = v;
                            best_at = base + pos;
                        }
                    }
                } else if (p->lp > 0.0) {
                    for (int64_t t = a[last].first; t < a[last].last; t++, pos += dil_last)
                        lp_sum += pow(fabs((double)row[pos]), p->lp);
                } else {
                    for (int64_t t = a[last].first; t < a[last].last; t++, pos += dil_last)
                        sum += row[pos];
                    taps += a[last].last - a[last].first;
                }
                int d = last - 1;
                while (d >= 0 && ++kk[d] == a[d].last) {
                    kk[d] = a[d].first;
                    d--;
                }
                if (d < 0) break;
            }
        }
        if (p->kind == POOL_MAX) {
            /* a window that misses the input (pads or dilation) gives the lowest value, as
             * onnxruntime does */
            y[oi] = best_at < 0 ? -FLT_MAX : best;
            if (indices) {
                int64_t at = best_at;
                if (at >= 0 && p->column_major_indices) {
                    int64_t rest = at;
                    at = 0;
                    for (int d = 0; d < k; d++) {
                        at += rest / w->in_strides[d] * w->column_strides[d];
                        rest %= w->in_strides[d];
                    }
                }
                indices[oi] = at >= 0 ? plane_base + at : -1;
            }
        } else if (p->lp > 0.0) {
            y[oi] = (float)pow(lp_sum, 1.0 / p->lp);
        } else {
            /* a dilated window can miss the input entirely: 0 as onnxruntime, not 0/0 */
            int64_t divisor = p->count_include_pad ? counted : taps;
            y[oi] = divisor ? sum / (float)divisor : 0.0f;
        }
        for (int d = k - 1; d >= 0; d--) {
            if (++o[d] < w->out[d]) break;
            o[d] = 0;
        }
    }
}

static tci_status forward_window(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const pool_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *y = out[0];
    tci_tensor *ind = node->num_outputs > 1 ? out[1] : NULL;
    window_plan w;
    w.k = p->num_spatial;
    w.planes = x->dims[0] * x->dims[1];
    w.in_plane = w.out_plane = 1;
    for (int d = w.k - 1; d >= 0; d--) {
        w.in[d] = x->dims[2 + d];
        w.out[d] = y->dims[2 + d];
        int64_t extent;
        TRY_STATUS(window_axis(node, p, d, w.in[d], &extent, &w.pad_begin[d], &w.pad_end[d]));
        w.in_strides[d] = w.in_plane;
        w.in_plane *= w.in[d];
        w.out_plane *= w.out[d];
    }
    int64_t c = 1;
    for (int d = 0; d < w.k; d++) {
        w.column_strides[d] = c;
        c *= w.in[d];
    }
    if (w.planes == 0 || w.out_plane == 0) return TCI_OK;

    /* int8/uint8 are exact in float: pool a float copy rather than keeping a second loop */
    const float *xf = x->data;
    float *yf = y->data, *x_copy = NULL, *y_copy = NULL;
    if (x->dtype != TCI_DTYPE_FLOAT) {
        int64_t nx = w.planes * w.in_plane, ny = w.planes * w.out_plane;
        x_copy = malloc((size_t)(nx ? nx : 1) * sizeof *x_copy);
        y_copy = malloc((size_t)ny * sizeof *y_copy);
        if (!x_copy || !y_copy) {
            free(x_copy);
            free(y_copy);
            return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
        }
        for (int64_t i = 0; i < nx; i++) x_copy[i] = (float)op_read_number(x, i);
        xf = x_copy;
        yf = y_copy;
    }
    for (int64_t plane = 0; plane < w.planes; plane++)
        pool_window_plane(p, &w, xf + plane * w.in_plane, yf + plane * w.out_plane,
                          ind ? (int64_t *)ind->data + plane * w.out_plane : NULL,
                          plane * w.in_plane);
    if (y_copy) {
        float lo = x->dtype == TCI_DTYPE_INT8 ? -128.0f : 0.0f;
        for (int64_t i = 0; i < w.planes * w.out_plane; i++)
            op_write_number(y, i, yf[i] < lo ? lo : yf[i]);
    }
    free(x_copy);
    free(y_copy);
    return TCI_OK;
}

/* ---- global pooling ---- */

static tci_status infer_global(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    if (x->rank >= 0 && x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input has rank %d; expected N x C x spatial (rank >= 2)", x->rank);
    op_same_shape(out[0], x);
    for (int d = 2; d < x->rank; d++) out[0]->dims[d] = 1;
    return TCI_OK;
}

static tci_status forward_global(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out, pool_kind kind) {
    (void)node;
    const tci_tensor *x = in[0];
    int64_t planes = x->dims[0] * x->dims[1], size = 1;
    for (int d = 2; d < x->rank; d++) size *= x->dims[d];
    const float *xp = x->data;
    float *yp = out[0]->data;
    for (int64_t c = 0; c < planes; c++) {
        const float *row = xp + c * size;
        if (kind == POOL_MAX) {
            float best = -INFINITY;
            for (int64_t i = 0; i < size; i++)
                if (i == 0 || row[i] > best) best = row[i];
            yp[c] = best;
        } else {
            double sum = 0.0;
            for (int64_t i = 0; i < size; i++) sum += row[i];
            yp[c] = (float)(sum / (double)size);
        }
    }
    return TCI_OK;
}

static tci_status forward_global_average(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    return forward_global(node, in, out, POOL_AVERAGE);
}

static tci_status forward_global_max(const ir_node *node, const tci_tensor *const *in,
                                     tci_tensor *const *out) {
    return forward_global(node, in, out, POOL_MAX);
}

/* ---- LRN ---- */

static tci_status infer_lrn(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    if (x->rank >= 0 && x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input has rank %d; expected N x C x ... (rank >= 2)", x->rank);
    op_same_shape(out[0], x);
    return TCI_OK;
}

static tci_status forward_lrn(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const lrn_params *p = node->params;
    const tci_tensor *x = in[0];
    int64_t batch = x->dims[0], channels = x->dims[1], size = 1;
    for (int d = 2; d < x->rank; d++) size *= x->dims[d];
    int64_t before = (p->size - 1) / 2, after = p->size - 1 - before;
    float scale = p->alpha / (float)p->size;
    const float *xp = x->data;
    float *yp = out[0]->data;
    for (int64_t n = 0; n < batch; n++) {
        const float *xn = xp + n * channels * size;
        float *yn = yp + n * channels * size;
        for (int64_t c = 0; c < channels; c++) {
            int64_t lo = c - before < 0 ? 0 : c - before;
            int64_t hi = c + after > channels - 1 ? channels - 1 : c + after;
            for (int64_t i = 0; i < size; i++) {
                float sq = 0.0f;
                for (int64_t j = lo; j <= hi; j++) {
                    float v = xn[j * size + i];
                    sq += v * v;
                }
                yn[c * size + i] = xn[c * size + i] / powf(p->bias + scale * sq, p->beta);
            }
        }
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

static const int max_pool_versions[] = {1, 8, 10, 11, 12, 22, 0};
static const int average_pool_versions[] = {1, 7, 10, 11, 19, 22, 0};
static const int lp_pool_versions[] = {1, 2, 11, 18, 22, 0};
static const int global_versions[] = {1, 22, 0};
static const int lrn_versions[] = {1, 13, 0};

/* ---- GPU lowering ---- */

static tci_status pool_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0];
    TRY_STATUS(lower_require_known(node, x));
    if (x->rank != 4 || (node->num_outputs > 1 && node->outputs[1] &&
                         lower_is_read(b, node->outputs[1])))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path pools 2-D inputs without the Indices output");
    tci_tensor vx;
    ir_tensor_view(x, &vx);
    const tci_tensor *views[1] = {&vx};
    layer_window win;
    TRY_STATUS(layer_pool_window(node, views, &win));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    const char *label = lower_intern(b, e->label);
    TRY_STATUS(lower_output(b, node, e->output, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_POOL, node, label, &s));
    plan_pool *pp = &s->u.pool;
    pp->kind = win.kind;
    pp->count_include_pad = win.count_include_pad;
    conv_geom *g = &pp->geom;
    layer_window_geom(&win, g);
    /* the end padding the kernel gets is what the output size implies beyond the input (the
     * ceil-mode overhang included), not the attribute's */
    g->pad_bottom = (g->out_h - 1) * g->stride_h + (g->kernel_h - 1) * g->dilation_h + 1 - g->h -
                    g->pad_top;
    g->pad_right = (g->out_w - 1) * g->stride_w + (g->kernel_w - 1) * g->dilation_w + 1 - g->w -
                   g->pad_left;
    if (g->pad_bottom < 0) g->pad_bottom = 0;
    if (g->pad_right < 0) g->pad_right = 0;
    lower_step_io(s, 1, &xi, 1, &yt);
    if (e->act.kind != ACT_NONE) /* pooling kernels have no epilogue: apply it in place */
        return lower_eltwise_step(b, node, BINARY_NONE, (const ir_tensor *const *)&e->output, 1,
                                  e->output, e->act, label, yt);
    return TCI_OK;
}

tci_status layer_lower_global_pool(plan_builder *b, const ir_node *node, const ir_tensor *x,
                                   const ir_tensor *out, pool_kind kind) {
    TRY_STATUS(lower_require_known(node, x));
    if (x->rank != 4)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "the GPU path pools 4-D inputs");
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    TRY_STATUS(lower_output(b, node, out, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_GLOBAL_POOL, node, NULL, &s));
    s->u.pool.kind = kind;
    conv_geom *g = &s->u.pool.geom;
    g->n = x->dims[0];
    g->c = x->dims[1];
    g->h = x->dims[2];
    g->w = x->dims[3];
    g->out_h = g->out_w = 1; /* the rest of the window is the whole plane */
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

static tci_status global_average_pool_gpu_lower(plan_builder *b, const ir_node *node) {
    return layer_lower_global_pool(b, node, node->inputs[0], node->outputs[0], POOL_AVERAGE);
}

static tci_status global_max_pool_gpu_lower(plan_builder *b, const ir_node *node) {
    return layer_lower_global_pool(b, node, node->inputs[0], node->outputs[0], POOL_MAX);
}

OP_DESC(max_pool_desc, "MaxPool", max_pool_versions, parse_max_pool, infer_window, forward_window,
        OP_NHWC_INPUT | OP_NHWC_OUTPUT | OP_EPILOGUE_ACT, pool_gpu_lower, NULL, BINARY_NONE);

OP_DESC(average_pool_desc, "AveragePool", average_pool_versions, parse_average_pool, infer_window,
        forward_window, OP_NHWC_INPUT | OP_NHWC_OUTPUT | OP_EPILOGUE_ACT, pool_gpu_lower, NULL,
        BINARY_NONE);

OP_DESC(lp_pool_desc, "LpPool", lp_pool_versions, parse_lp_pool, infer_window, forward_window, 0,
        NULL, NULL, BINARY_NONE);

OP_DESC(global_average_pool_desc, "GlobalAveragePool", global_versions, parse_global, infer_global,
        forward_global_average, OP_NHWC_INPUT | OP_NHWC_OUTPUT, global_average_pool_gpu_lower, NULL,
        BINARY_NONE);

OP_DESC(global_max_pool_desc, "GlobalMaxPool", global_versions, parse_global, infer_global,
        forward_global_max, OP_NHWC_OUTPUT, global_max_pool_gpu_lower, NULL, BINARY_NONE);

/* One PLAN_STEP_LRN: a 4-D X in NHWC8 (the layout its Conv / pooling neighbours use), any other
 * rank dense; the kernel reads either. */
static tci_status lrn_gpu_lower(plan_builder *b, const ir_node *node) {
    const lrn_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    TRY_STATUS(lower_require_known(node, x));
    plan_layout layout = node->outputs[0]->layout; /* the layout pass's: NHWC8 for 4-D */
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, layout, &xi));
    TRY_STATUS(lower_output(b, node, node->outputs[0], &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_LRN, node, NULL, &s));
    s->u.lrn.n = x->dims[0];
    s->u.lrn.c = x->dims[1];
    s->u.lrn.spatial = lower_prod(x->dims, 2, x->rank);
    s->u.lrn.size = p->size;
    s->u.lrn.alpha = p->alpha;
    s->u.lrn.beta = p->beta;
    s->u.lrn.bias = p->bias;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

OP_DESC(lrn_desc, "LRN", lrn_versions, parse_lrn, infer_lrn, forward_lrn,
        OP_NHWC_INPUT | OP_NHWC_OUTPUT, lrn_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_pool_ops[] = {
    &max_pool_desc, &average_pool_desc, &global_average_pool_desc, &global_max_pool_desc,
    &lrn_desc,      &lp_pool_desc,      NULL,
};
