/* Op family 'resize': Resize (opsets 10-19) and Upsample (7-10), nearest / N-linear / N-cubic,
 * with every coordinate transformation of the spec. Coordinates and weights are computed in double
 * as ONNX's reference does, so rounding ties in nearest mode land on the same pixel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "util/resize_modes.h"

typedef enum resize_keep {
    KEEP_STRETCH,
    KEEP_NOT_LARGER,
    KEEP_NOT_SMALLER,
} resize_keep;

typedef struct resize_params {
    bool is_upsample;
    resize_mode mode;
    resize_coord coord;
    resize_rounding rounding;
    resize_keep keep;
    float cubic_a;
    float extrapolation;
    bool exclude_outside;
    int num_axes; /* 0: every axis */
    int64_t axes[TCI_MAX_RANK];
    int roi_input, scales_input, sizes_input; /* -1 where the version has no such input */
    const float *attr_scales;                 /* Upsample-7 */
    size_t num_attr_scales;
} resize_params;

/* What the node resolves to for given inputs. */
typedef struct resize_target {
    int rank; /* -1 unknown */
    int64_t out[TCI_MAX_RANK]; /* -1 unknown */
    double scale[TCI_MAX_RANK];
    double roi_start[TCI_MAX_RANK], roi_end[TCI_MAX_RANK];
} resize_target;

static const tci_dtype scale_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16, 0};
static const tci_dtype sizes_types[] = {TCI_DTYPE_INT64, 0};

/* ---- parsing ---- */

/* The attribute names, indexed by the enums (util/resize_modes.h). */
#define RESIZE_ATTR_NAME(NAME, ATTR, COLUMN) ATTR,
static const char *const mode_names[] = {RESIZE_MODE_LIST(RESIZE_ATTR_NAME)};
static const char *const coord_names[] = {RESIZE_COORD_LIST(RESIZE_ATTR_NAME)};
static const char *const rounding_names[] = {RESIZE_ROUNDING_LIST(RESIZE_ATTR_NAME)};
#undef RESIZE_ATTR_NAME
static const char *const keep_names[] = {"stretch", "not_larger", "not_smaller"};

#define RESIZE_MODE_TAPS(NAME, ATTR, TAPS) TAPS,
static const int mode_taps[] = {RESIZE_MODE_LIST(RESIZE_MODE_TAPS)};
#undef RESIZE_MODE_TAPS

#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The index of name in names[0..count), false if absent (an empty entry matches nothing: no
 * attribute value names it). */
static bool find_name(const char *const *names, int count, const char *name, int *out) {
    for (int i = 0; i < count; i++)
        if (names[i][0] && strcmp(names[i], name) == 0) {
            *out = i;
            return true;
        }
    return false;
}

static tci_status parse_mode(ir_node *node, resize_params *p, bool allow_cubic) {
    const char *name;
    int mode;
    TRY_STATUS(ir_attr_string(node, "mode", "nearest", &name));
    /* "bilinear" is Upsample-1's name for linear, still written by some exporters */
    if (p->is_upsample && strcmp(name, "bilinear") == 0) name = "linear";
    if (!find_name(mode_names, COUNT_OF(mode_names), name, &mode) || (mode == RESIZE_CUBIC && !allow_cubic))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "mode '%s' is not supported (%s)", name,
                             allow_cubic ? "nearest, linear or cubic" : "nearest or linear");
    p->mode = (resize_mode)mode;
    return TCI_OK;
}

static tci_status parse_resize_11(ir_node *node, resize_params *p) {
    int v = node->since_version, value;
    const char *s;
    TRY_STATUS(ir_attr_string(node, "coordinate_transformation_mode", "half_pixel", &s));
    /* half_pixel_symmetric came in 19; tf_half_pixel_for_nn left in 13 */
    if (!find_name(coord_names, COUNT_OF(coord_names), s, &value) ||
        (value == RESIZE_COORD_HALF_PIXEL_SYMMETRIC && v < 19) ||
        (value == RESIZE_COORD_TF_HALF_PIXEL_FOR_NN && v >= 13))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "coordinate_transformation_mode '%s' is not supported at opset %d", s,
                             node->opset);
    p->coord = (resize_coord)value;

    TRY_STATUS(ir_attr_string(node, "nearest_mode", "round_prefer_floor", &s));
    if (!find_name(rounding_names, COUNT_OF(rounding_names), s, &value))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "nearest_mode '%s' is not supported", s);
    p->rounding = (resize_rounding)value;

    int64_t flag;
    TRY_STATUS(ir_attr_int(node, "exclude_outside", 0, &flag));
    if (flag != 0 && flag != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "exclude_outside is %lld; must be 0 or 1",
                             (long long)flag);
    p->exclude_outside = flag != 0;
    TRY_STATUS(ir_attr_float(node, "cubic_coeff_a", -0.75f, &p->cubic_a));
    TRY_STATUS(ir_attr_float(node, "extrapolation_value", 0.0f, &p->extrapolation));

    TRY_STATUS(ir_attr_int(node, "antialias", 0, &flag));
    if (flag != 0 && flag != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "antialias is %lld; must be 0 or 1",
                             (long long)flag);
    if (flag)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "antialias=1 is not supported");

    TRY_STATUS(ir_attr_string(node, "keep_aspect_ratio_policy", "stretch", &s));
    if (!find_name(keep_names, COUNT_OF(keep_names), s, &value))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "keep_aspect_ratio_policy '%s' is not supported", s);
    p->keep = (resize_keep)value;

    const int64_t *axes;
    size_t n;
    TRY_STATUS(ir_attr_ints(node, "axes", &axes, &n));
    if (axes) {
        if (n == 0 || n > TCI_MAX_RANK)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axes has %zu entries", n);
        p->num_axes = (int)n;
        memcpy(p->axes, axes, n * sizeof *axes);
    }
    return TCI_OK;
}

static tci_status parse_resize(ir_node *node, mem_arena *arena) {
    int v = node->since_version;
    resize_params *p = arena_alloc(arena, sizeof *p);
    if (!p) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    memset(p, 0, sizeof *p);
    p->roi_input = p->sizes_input = -1;
    p->coord = RESIZE_COORD_ASYMMETRIC;
    p->rounding = RESIZE_ROUND_LEGACY;
    p->cubic_a = -0.75f;
    if (v < 11) {
        TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
        const char *known[] = {"mode", NULL};
        TRY_STATUS(ir_check_attrs(node, known));
        p->scales_input = 1;
        TRY_STATUS(parse_mode(node, p, false));
    } else {
        /* roi and scales are required at 11 but may be given the empty name; checked per run */
        TRY_STATUS(op_check_arity(node, 1, 4, 1, 1));
        const char *known_11[] = {"coordinate_transformation_mode", "cubic_coeff_a",
                                  "exclude_outside", "extrapolation_value", "mode", "nearest_mode",
                                  NULL};
        const char *known_18[] = {"antialias", "axes", "coordinate_transformation_mode",
                                  "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                                  "keep_aspect_ratio_policy", "mode", "nearest_mode", NULL};
        TRY_STATUS(ir_check_attrs(node, v >= 18 ? known_18 : known_11));
        p->roi_input = 1;
        p->scales_input = 2;
        p->sizes_input = 3;
        TRY_STATUS(parse_mode(node, p, true));
        TRY_STATUS(parse_resize_11(node, p));
    }
    node->params = p;
    return TCI_OK;
}

static tci_status parse_upsample(ir_node *node, mem_arena *arena) {
    int v = node->since_version;
    resize_params *p = arena_alloc(arena, sizeof *p);
    if (!p) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    memset(p, 0, sizeof *p);
    p->is_upsample = true;
    p->roi_input = p->sizes_input = p->scales_input = -1;
    p->coord = RESIZE_COORD_ASYMMETRIC;
    p->rounding = RESIZE_ROUND_LEGACY;
    if (v < 9) {
        TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
        const char *known[] = {"mode", "scales", NULL};
        TRY_STATUS(ir_check_attrs(node, known));
        TRY_STATUS(ir_attr_floats(node, "scales", &p->attr_scales, &p->num_attr_scales));
        if (!p->attr_scales || p->num_attr_scales == 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'scales' is required");
    } else {
        TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
        const char *known[] = {"mode", NULL};
        TRY_STATUS(ir_check_attrs(node, known));
        p->scales_input = 1;
    }
    TRY_STATUS(parse_mode(node, p, false));
    node->params = p;
    return TCI_OK;
}

/* ---- target shape ---- */

/* Entries of a 1-D input: -1 while unknown, 0 for an absent or empty one. */
static tci_status input_length(const ir_node *node, const tci_tensor *t, const char *what,
                               int64_t *out_len) {
    *out_len = 0;
    if (!t) return TCI_OK;
    if (t->rank < 0) {
        *out_len = -1;
        return TCI_OK;
    }
    if (t->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s must be 1-D, got rank %d", what,
                             t->rank);
    *out_len = t->dims[0];
    return TCI_OK;
}

static const tci_tensor *optional_input(const ir_node *node, const tci_tensor *const *in,
                                        int index) {
    return index >= 0 && index < node->num_inputs ? in[index] : NULL;
}

/* Works out output dims (and, when the values are known, scales and roi) per axis. Unknown
 * values leave -1 dims; every inconsistency the known values show is an error. */
static tci_status resolve_target(const ir_node *node, const tci_tensor *const *in,
                                 resize_target *t) {
    const resize_params *p = node->params;
    const tci_tensor *x = in[0];
    const tci_tensor *scales = optional_input(node, in, p->scales_input);
    const tci_tensor *sizes = optional_input(node, in, p->sizes_input);
    const tci_tensor *roi = optional_input(node, in, p->roi_input);
    if (scales) TRY_STATUS(op_check_dtype(node, scales, p->scales_input, scale_types));
    if (sizes) TRY_STATUS(op_check_dtype(node, sizes, p->sizes_input, sizes_types));
    if (roi) TRY_STATUS(op_check_dtype(node, roi, p->roi_input, scale_types));

    int64_t num_scales, num_sizes, num_roi;
    TRY_STATUS(input_length(node, scales, "scales", &num_scales));
    TRY_STATUS(input_length(node, sizes, "sizes", &num_sizes));
    TRY_STATUS(input_length(node, roi, "roi", &num_roi));
    if (p->attr_scales) num_scales = (int64_t)p->num_attr_scales;
    if (num_scales == 0) scales = NULL;
    if (num_sizes == 0) sizes = NULL;
    if (num_roi == 0) roi = NULL;
    bool has_scales = p->attr_scales || scales;
    if (!has_scales && !sizes)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             p->sizes_input >= 0 ? "needs a non-empty 'scales' or 'sizes' input"
                                                 : "needs a non-empty 'scales' input");
    if (has_scales && sizes && num_scales > 0 && num_sizes > 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "has both 'scales' and 'sizes'; exactly one may be non-empty");

    int rank = x->rank;
    int64_t given = has_scales && sizes ? -1 : has_scales ? num_scales : num_sizes;
    if (rank < 0 && p->num_axes == 0 && given > 0 && given <= TCI_MAX_RANK) rank = (int)given;
    t->rank = rank;
    if (rank < 0) return TCI_OK;

    int axes[TCI_MAX_RANK], num_axes = p->num_axes ? p->num_axes : rank;
    bool used[TCI_MAX_RANK] = {false};
    for (int i = 0; i < num_axes; i++) {
        if (p->num_axes) TRY_STATUS(op_normalize_axis(node, p->axes[i], rank, &axes[i]));
        else axes[i] = i;
        if (used[axes[i]])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axis %lld is repeated in axes",
                                 (long long)p->axes[i]);
        used[axes[i]] = true;
    }
    for (int d = 0; d < rank; d++) {
        t->out[d] = x->rank >= 0 ? x->dims[d] : -1;
        t->scale[d] = 1.0;
        t->roi_start[d] = 0.0;
        t->roi_end[d] = 1.0;
    }
    for (int i = 0; i < num_axes; i++) t->out[axes[i]] = -1;
    if (given >= 0 && given != num_axes)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has %lld entries, expected %d (%s)",
                             has_scales ? "scales" : "sizes", (long long)given, num_axes,
                             p->num_axes ? "one per entry of axes" : "one per input axis");

    if (p->coord == RESIZE_COORD_TF_CROP_AND_RESIZE && roi) {
        if (num_roi >= 0 && num_roi != 2 * num_axes)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "roi has %lld entries, expected %d (starts then ends)",
                                 (long long)num_roi, 2 * num_axes);
        if (roi->data)
            for (int i = 0; i < num_axes; i++) {
                t->roi_start[axes[i]] = op_read_number(roi, i);
                t->roi_end[axes[i]] = op_read_number(roi, num_axes + i);
            }
    }

    if (has_scales && sizes) return TCI_OK; /* which one applies is not known yet */
    if (has_scales) {
        if (!p->attr_scales && !scales->data) return TCI_OK;
        for (int i = 0; i < num_axes; i++) {
            double s = p->attr_scales ? p->attr_scales[i] : op_read_number(scales, i);
            if (!(s > 0.0) || isinf(s))
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "scales[%d] is %g; must be positive and finite", i, s);
            if (p->is_upsample && s < 1.0)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "scales[%d] is %g; Upsample needs scales >= 1", i, s);
            int a = axes[i];
            t->scale[a] = s;
            if (x->rank < 0 || x->dims[a] < 0) continue;
            double extent = floor(s * (double)x->dims[a]);
            if (extent > (double)(INT64_C(1) << 53))
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "scales[%d] = %g makes axis %d too large", i, s, a);
            t->out[a] = (int64_t)extent;
        }
        return TCI_OK;
    }
    if (!sizes->data) return TCI_OK;
    for (int i = 0; i < num_axes; i++) {
        int64_t size = op_read_int(sizes, i);
        if (size < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "sizes[%d] is %lld; must be >= 0",
                                 i, (long long)size);
        int a = axes[i];
        int64_t extent = x->rank >= 0 ? x->dims[a] : -1;
        if (extent == 0 && size > 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "sizes[%d] is %lld but input axis %d is empty", i,
                                 (long long)size, a);
        if (p->keep == KEEP_STRETCH) t->out[a] = size;
        if (extent > 0) t->scale[a] = (double)size / (double)extent;
    }
    if (p->keep != KEEP_STRETCH) {
        double scale = 0.0;
        for (int i = 0; i < num_axes; i++) {
            int a = axes[i];
            if (x->rank < 0 || x->dims[a] < 0) return TCI_OK;
            if (x->dims[a] == 0) continue;
            double s = t->scale[a];
            if (scale == 0.0 || (p->keep == KEEP_NOT_LARGER ? s < scale : s > scale)) scale = s;
        }
        for (int i = 0; i < num_axes; i++) {
            int a = axes[i];
            t->scale[a] = scale;
            t->out[a] = (int64_t)(scale * (double)x->dims[a] + 0.5); /* round half up */
        }
    }
    return TCI_OK;
}

static tci_status infer_resize(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const resize_params *p = node->params;
    const tci_tensor *x = in[0];
    /* nearest only moves elements, so any dtype; the interpolating modes compute in fp32 */
    if (p->mode != RESIZE_NEAREST) TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    else if (x->dtype != TCI_DTYPE_UNDEFINED && tci_dtype_size(x->dtype) == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input 0 has unsupported dtype %s",
                             tci_dtype_name(x->dtype));
    resize_target t;
    TRY_STATUS(resolve_target(node, in, &t));
    tci_tensor *y = out[0];
    y->dtype = x->dtype;
    y->rank = t.rank;
    for (int d = 0; d < t.rank; d++) y->dims[d] = t.out[d];
    return TCI_OK;
}

/* ---- forward ---- */

/* Per output index of one axis: `taps` input offsets (already times the axis stride) and
 * weights, and whether tf_crop_and_resize extrapolates there. */
typedef struct axis_table {
    int taps; /* 0: identity axis, output index i reads input index i */
    int64_t *offsets;
    double *weights;
    bool *outside;
} axis_table;

static double source_coordinate(const resize_params *p, const resize_target *t, int a,
                                int64_t o, int64_t in, int64_t out) {
    float roi_start = (float)t->roi_start[a];
    return resize_source_coordinate(p->coord, o, t->scale[a], in, out, roi_start,
                                    (float)t->roi_end[a] - roi_start);
}

static tci_status build_axis(const ir_node *node, const resize_target *t, int a, int64_t in,
                             int64_t out, int64_t stride, axis_table *table) {
    const resize_params *p = node->params;
    memset(table, 0, sizeof *table);
    bool default_roi = p->coord != RESIZE_COORD_TF_CROP_AND_RESIZE ||
                       (t->roi_start[a] == 0.0 && t->roi_end[a] == 1.0);
    if (out == in && fabs(t->scale[a] - 1.0) <= 1e-9 && default_roi) return TCI_OK;

    int taps = mode_taps[p->mode];
    size_t n = (size_t)(out ? out : 1);
    table->taps = taps;
    table->offsets = malloc(n * (size_t)taps * sizeof *table->offsets);
    table->weights = malloc(n * (size_t)taps * sizeof *table->weights);
    table->outside = malloc(n * sizeof *table->outside);
    if (!table->offsets || !table->weights || !table->outside)
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t o = 0; o < out; o++) {
        double x = source_coordinate(p, t, a, o, in, out);
        int64_t *off = table->offsets + o * taps;
        double *w = table->weights + o * taps;
        table->outside[o] =
            p->coord == RESIZE_COORD_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(in - 1));
        int64_t first;
        if (p->mode == RESIZE_NEAREST) {
            first = resize_nearest_index(p->rounding, x, t->scale[a]);
            w[0] = 1.0;
        } else {
            double base = floor(x), r = x - base;
            if (p->mode == RESIZE_LINEAR) {
                first = (int64_t)base;
                w[0] = 1.0 - r;
                w[1] = r;
            } else {
                first = (int64_t)base - 1;
                resize_cubic_weights(p->cubic_a, r, w);
            }
        }
        double sum = 0.0;
        for (int k = 0; k < taps; k++) {
            int64_t i = first + k;
            if (p->exclude_outside && (i < 0 || i >= in)) w[k] = 0.0;
            sum += w[k];
            /* samples beyond the edge repeat the edge */
            off[k] = (i < 0 ? 0 : i >= in ? in - 1 : i) * stride;
        }
        if (p->exclude_outside && sum != 0.0)
            for (int k = 0; k < taps; k++) w[k] /= sum;
    }
    return TCI_OK;
}

static void free_tables(axis_table *tables, int rank) {
    for (int d = 0; d < rank; d++) {
        free(tables[d].offsets);
        free(tables[d].weights);
        free(tables[d].outside);
    }
}

static void resize_elements(const resize_params *p, const tci_tensor *x, tci_tensor *y,
                            const axis_table *tables, const int64_t *in_strides) {
    int rank = y->rank;
    int active[TCI_MAX_RANK], num_active = 0;
    for (int d = 0; d < rank; d++)
        if (tables[d].taps) active[num_active++] = d;
    size_t elem = tci_dtype_size(x->dtype);
    bool interpolate = p->mode != RESIZE_NEAREST;
    const float *xf = x->data;
    float *yf = y->data;
    int64_t count = op_count(y), o[TCI_MAX_RANK] = {0};
    for (int64_t i = 0; i < count; i++) {
        /* offset of the identity axes, and extrapolation on any resized one */
        int64_t base = 0;
        bool outside = false;
        for (int d = 0; d < rank; d++) {
            if (!tables[d].taps) base += o[d] * in_strides[d];
            else if (tables[d].outside[o[d]]) outside = true;
        }
        if (outside) {
            op_write_number(y, i, p->extrapolation);
        } else if (!interpolate) {
            int64_t at = base;
            for (int j = 0; j < num_active; j++) at += tables[active[j]].offsets[o[active[j]]];
            memcpy((char *)y->data + (size_t)i * elem, (const char *)x->data + (size_t)at * elem,
                   elem);
        } else {
            /* sum over the product of every resized axis's taps */
            int k[TCI_MAX_RANK] = {0};
            double acc = 0.0;
            for (;;) {
                int64_t at = base;
                double w = 1.0;
                for (int j = 0; j < num_active; j++) {
                    const axis_table *tb = &tables[active[j]];
                    int64_t slot = o[active[j]] * tb->taps + k[j];
                    at += tb->offsets[slot];
                    w *= tb->weights[slot];
                }
                if (w != 0.0) acc += w * (double)xf[at];
                int j = num_active - 1;
                while (j >= 0 && ++k[j] == tables[active[j]].taps) k[j--] = 0;
                if (j < 0) break;
            }
            yf[i] = (float)acc;
        }
        for (int d = rank - 1; d >= 0; d--) {
            if (++o[d] < y->dims[d]) break;
            o[d] = 0;
        }
    }
}

static tci_status forward_resize(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const resize_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *y = out[0];
    resize_target t;
    TRY_STATUS(resolve_target(node, in, &t));
    if (op_count(y) == 0) return TCI_OK;
    int64_t in_strides[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, in_strides);
    axis_table tables[TCI_MAX_RANK];
    memset(tables, 0, sizeof tables);
    tci_status st = TCI_OK;
    for (int d = 0; d < x->rank && st == TCI_OK; d++)
        st = build_axis(node, &t, d, x->dims[d], y->dims[d], in_strides[d], &tables[d]);
    if (st == TCI_OK) resize_elements(p, x, y, tables, in_strides);
    free_tables(tables, x->rank);
    return st;
}

/* ---- GPU lowering ---- */

static tci_status resize_gpu_lower(plan_builder *b, const ir_node *node) {
    const resize_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, y));
    if (x->rank != 4 || x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path resizes the two spatial dims of 4-D inputs");
    if (p->coord == RESIZE_COORD_TF_HALF_PIXEL_FOR_NN ||
        p->coord == RESIZE_COORD_TF_CROP_AND_RESIZE)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "Resize coordinate mode '%s' has no GPU path", coord_names[p->coord]);
    /* scales: given ones (the spec computes coordinates from them), else output/input */
    float sh = (float)y->dims[2] / (float)x->dims[2], sw = (float)y->dims[3] / (float)x->dims[3];
    const ir_tensor *scales = p->scales_input >= 0 && p->scales_input < node->num_inputs
                                  ? node->inputs[p->scales_input]
                                  : NULL;
    if (p->attr_scales) {
        if (p->num_attr_scales == 4) {
            sh = p->attr_scales[2];
            sw = p->attr_scales[3];
        }
    } else if (scales && scales->data && lower_count(scales) == 4) {
        const float *sc = scales->data;
        sh = sc[2];
        sw = sc[3];
    }
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_RESIZE, node, NULL, &s));
    s->u.resize.n = x->dims[0];
    s->u.resize.c = x->dims[1];
    s->u.resize.h = x->dims[2];
    s->u.resize.w = x->dims[3];
    s->u.resize.out_h = y->dims[2];
    s->u.resize.out_w = y->dims[3];
    s->u.resize.mode = p->mode;
    s->u.resize.coord = p->coord;
    s->u.resize.rounding = p->rounding;
    s->u.resize.scale_h = sh;
    s->u.resize.scale_w = sw;
    s->u.resize.cubic_a = p->cubic_a;
    s->u.resize.exclude_outside = p->exclude_outside;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

/* ---- descriptors ---- */

static const int resize_versions[] = {10, 11, 13, 18, 19, 0};
static const int upsample_versions[] = {7, 9, 10, 0};

OP_DESC(resize_desc, "Resize", resize_versions, parse_resize, infer_resize, forward_resize,
        OP_NHWC_INPUT | OP_NHWC_OUTPUT, resize_gpu_lower, NULL, BINARY_NONE);

OP_DESC(upsample_desc, "Upsample", upsample_versions, parse_upsample, infer_resize, forward_resize,
        OP_NHWC_OUTPUT, resize_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_resize_ops[] = {&resize_desc, &upsample_desc, NULL};
