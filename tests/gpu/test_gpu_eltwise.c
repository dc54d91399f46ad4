/* GPU tests of kern_eltwise against a plain C reference (double math on the values the kernel
 * sees): every activation, every binary op, broadcasting (same shape, per-channel, scalar, row,
 * general, rank 6), fused op+activation with input scales, NHWC8 channel padding, strided copies,
 * Equal/Where, the comparisons, bool results (IsNaN, IsInf) and bool inputs (And, Or, Xor, Not),
 * int64, Mod, 64-bit indexing and the argument errors. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/eltwise.h"
#include "layers/op.h"

#define MAX_IN KERN_ELTWISE_MAX_INPUTS

/* ---- reference ---------------------------------------------------------------------------- */

static double binary_ref(binary_op op, double a, double b) {
    switch (op) {
    case BINARY_ADD: return a + b;
    case BINARY_SUB: return a - b;
    case BINARY_MUL: return a * b;
    case BINARY_DIV: return a / b;
    case BINARY_POW: return pow(a, b);
    case BINARY_MAX: return a > b ? a : b;
    case BINARY_MIN: return a < b ? a : b;
    case BINARY_PRELU: return a < 0 ? b * a : a;
    case BINARY_MOD: return a - floor(a / b) * b; /* the spec's formula: NaN for b == 0 */
    case BINARY_FMOD: return fmod(a, b);
    case BINARY_EQUAL: return a == b;
    case BINARY_LESS: return a < b;
    case BINARY_LESS_EQUAL: return a <= b;
    case BINARY_GREATER: return a > b;
    case BINARY_GREATER_EQUAL: return a >= b;
    case BINARY_AND: return a != 0 && b != 0;
    case BINARY_OR: return a != 0 || b != 0;
    case BINARY_XOR: return (a != 0) != (b != 0);
    default: ck_abort_msg("no reference for op %d", (int)op); return 0;
    }
}

static int64_t total_of(const kern_eltwise_desc *d) {
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++)
        n *= d->dims[i];
    return n;
}

/* Offsets of output element i into each input; false in the channel padding. */
static bool ref_offsets(const kern_eltwise_desc *d, int64_t i, int64_t off[MAX_IN]) {
    bool valid = true;
    for (int k = 0; k < MAX_IN; k++)
        off[k] = 0;
    for (int j = d->rank - 1; j >= 0; j--) {
        int64_t coord = i % d->dims[j];
        i /= d->dims[j];
        if (j == d->pad_dim && coord >= d->real_c)
            valid = false;
        for (int k = 0; k < MAX_IN; k++)
            off[k] += coord * d->strides[k][j];
    }
    return valid;
}

/* ---- running ------------------------------------------------------------------------------- */

/* Uploads each input at `misalign` bytes past a cudaMalloc'd (256-aligned) address, runs, and
 * downloads the output (which is poisoned first). base[k] is the element the desc's index 0 maps
 * to, counted from the start of host_in[k] (non-zero for negative strides). */
static void run_raw(const kern_eltwise_desc *d, const void *const *host_in, const size_t *in_bytes,
                    const size_t *base_bytes, void *host_out, size_t out_bytes, size_t misalign) {
    int nin = kern_eltwise_num_inputs(d->op);
    void *dev[MAX_IN] = {NULL, NULL, NULL};
    const void *ptrs[MAX_IN] = {NULL, NULL, NULL};
    for (int k = 0; k < nin; k++) {
        unsigned char *tmp = calloc(in_bytes[k] + misalign + 1, 1);
        ck_assert_ptr_nonnull(tmp);
        memcpy(tmp + misalign, host_in[k], in_bytes[k]);
        dev[k] = gpu_upload(tmp, in_bytes[k] + misalign);
        free(tmp);
        ptrs[k] = (const unsigned char *)dev[k] + misalign + (base_bytes ? base_bytes[k] : 0);
    }
    unsigned char *out = gpu_upload(NULL, out_bytes + misalign);
    ck_assert_tci_ok(kern_eltwise(d, ptrs, out + misalign, 0));
    gpu_sync();
    gpu_download(host_out, out + misalign, out_bytes);
    for (int k = 0; k < nin; k++)
        gpu_free(dev[k]);
    gpu_free(out);
}

static bool near(double got, double want, double tol) {
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* bf16: see GPU_BF16_TOL (one rounding of 8 significant bits). */
static double float_tol(tci_dtype t) {
    return t == TCI_DTYPE_FLOAT16 ? 2e-3 : t == TCI_DTYPE_BFLOAT16 ? GPU_BF16_TOL : 2e-5;
}

/* Runs a float-dtype case. vals[k] (counts[k] floats, physical layout of input k) are rounded
 * to fp16 / bf16 in place when the dtype is, so the reference sees what the kernel sees. cond is
 * WHERE's uint8 input 0. base[k]: element offset of index 0 within vals[k] (NULL: 0). */
static void check_float_base(const kern_eltwise_desc *d, float *const *vals, const size_t *counts,
                             const uint8_t *cond, const int64_t *base, size_t misalign) {
    int nin = kern_eltwise_num_inputs(d->op);
    bool half = d->dtype == TCI_DTYPE_FLOAT16;
    size_t esize = gpu_dtype_size(d->dtype);
    const void *raw[MAX_IN] = {NULL, NULL, NULL};
    void *owned[MAX_IN] = {NULL, NULL, NULL};
    size_t bytes[MAX_IN] = {0, 0, 0}, base_bytes[MAX_IN] = {0, 0, 0};
    for (int k = 0; k < nin; k++) {
        if (d->op == BINARY_WHERE && k == 0) {
            raw[k] = cond;
            bytes[k] = counts[k];
            base_bytes[k] = base ? (size_t)base[k] : 0;
            continue;
        }
        bytes[k] = counts[k] * esize;
        base_bytes[k] = base ? (size_t)base[k] * esize : 0;
        if (esize == 2) {
            uint16_t *h = malloc(bytes[k] + 1);
            gpu_encode(d->dtype, vals[k], h, counts[k]);
            gpu_decode(d->dtype, h, vals[k], counts[k]);
            raw[k] = owned[k] = h;
        } else {
            raw[k] = vals[k];
        }
    }
    int64_t total = total_of(d);
    /* comparisons and tests: bool bytes, exact (the reference sees the stored inputs) */
    bool to_bool = kern_eltwise_writes_bool(d);
    size_t out_esize = to_bool ? 1 : esize;
    unsigned char *out = malloc((size_t)total * out_esize + 1);
    run_raw(d, raw, bytes, base_bytes, out, (size_t)total * out_esize, misalign);

    double tol = float_tol(d->dtype);
    for (int64_t i = 0; i < total; i++) {
        int64_t off[MAX_IN];
        bool valid = ref_offsets(d, i, off);
        for (int k = 0; k < MAX_IN; k++)
            off[k] += base ? base[k] : 0;
        if (to_bool) {
            double v = 0;
            if (valid) {
                v = (double)(d->input_scale[0] * vals[0][off[0]]);
                if (d->op != BINARY_NONE)
                    v = binary_ref(d->op, v, (double)(d->input_scale[1] * vals[1][off[1]]));
                v = gpu_act_reference(d->act, v, d->act_alpha, d->act_beta);
            }
            uint8_t want = v != 0;
            ck_assert_msg(out[i] == want, "op %d act %d %s element %lld: got %d want %d",
                          (int)d->op, (int)d->act, gpu_dtype_tag(d->dtype), (long long)i, out[i],
                          want);
            continue;
        }
        float got_f = 0.0f;
        gpu_decode(d->dtype, out + (size_t)i * esize, &got_f, 1);
        double got = got_f;
        double want = 0;
        if (valid) {
            if (d->op == BINARY_WHERE) {
                want = cond[off[0]] ? (double)d->input_scale[1] * vals[1][off[1]]
                                    : (double)d->input_scale[2] * vals[2][off[2]];
            } else {
                want = (double)(d->input_scale[0] * vals[0][off[0]]);
                if (d->op != BINARY_NONE)
                    want = binary_ref(d->op, want, (double)(d->input_scale[1] * vals[1][off[1]]));
            }
            want = gpu_act_reference(d->act, want, d->act_alpha, d->act_beta);
            if (half && fabs(want) > 65504)
                want = want > 0 ? INFINITY : -INFINITY;
        } else {
            ck_assert_msg(got == 0.0 && !signbit(got),
                          "element %lld in the channel padding is %g, not 0", (long long)i, got);
        }
        ck_assert_msg(near(got, want, tol), "op %d act %d %s element %lld: got %.7g want %.7g",
                      (int)d->op, (int)d->act, gpu_dtype_tag(d->dtype), (long long)i, got, want);
    }
    free(out);
    for (int k = 0; k < MAX_IN; k++)
        free(owned[k]);
}

static void check_float(const kern_eltwise_desc *d, float *const *vals, const size_t *counts,
                        const uint8_t *cond, size_t misalign) {
    check_float_base(d, vals, counts, cond, NULL, misalign);
}

static float *random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc(n * sizeof *v + 1);
    gpu_fill_random(v, n, seed, lo, hi);
    return v;
}

/* Zeroes the padded channels of a (rows, cp) NHWC8-like buffer. */
static void zero_padding(float *v, int64_t rows, int64_t cp, int64_t c) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t ch = c; ch < cp; ch++)
            v[r * cp + ch] = 0.0f;
}

static const tci_dtype float_types[] = {TCI_DTYPE_FLOAT16, TCI_DTYPE_FLOAT, TCI_DTYPE_BFLOAT16};
#define FLOAT_TYPES ((int)(sizeof float_types / sizeof float_types[0]))

/* Input range where the activation is defined and well conditioned in fp16. */
static void act_range(act_kind act, float *lo, float *hi) {
    *lo = -4.0f, *hi = 4.0f;
    if (act == ACT_SQRT || act == ACT_LOG || act == ACT_RECIPROCAL)
        *lo = 0.25f;
    if (act == ACT_TAN) /* clear of the poles at +-pi/2 */
        *lo = -1.2f, *hi = 1.2f;
    if (act == ACT_ASIN || act == ACT_ACOS || act == ACT_ATANH)
        *lo = -0.95f, *hi = 0.95f;
    if (act == ACT_ACOSH)
        *lo = 1.05f;
}

static void set_act_params(kern_eltwise_desc *d, act_kind act) {
    d->act = act;
    d->act_alpha = 0.0f, d->act_beta = 0.0f;
    switch (act) {
    case ACT_LEAKY_RELU: d->act_alpha = 0.1f; break;
    case ACT_CLIP: d->act_alpha = -1.5f, d->act_beta = 2.25f; break;
    case ACT_HARD_SIGMOID: d->act_alpha = 0.2f, d->act_beta = 0.5f; break;
    case ACT_ELU: d->act_alpha = 0.7f; break;
    case ACT_SELU: d->act_alpha = 1.67326319f, d->act_beta = 1.05070102f; break;
    case ACT_CELU: d->act_alpha = 1.5f; break;
    case ACT_THRESHOLDED_RELU: d->act_alpha = 0.5f; break;
    case ACT_IS_INF: d->act_alpha = 1.0f, d->act_beta = 1.0f; break;
    case ACT_SHRINK: d->act_alpha = 0.5f, d->act_beta = 0.25f; break;
    case ACT_SWISH: d->act_alpha = 1.3f; break;
    case ACT_SCALE: d->act_alpha = 1.7f; break;
    case ACT_GELU_OF_DIV: d->act_alpha = 1.41421356f; break;
    case ACT_GELU_SCALED: d->act_alpha = 0.70710678f; break;
    default: break;
    }
}

/* ---- activations --------------------------------------------------------------------------- */

/* Every activation on a dense tensor: 1,638 elements (not whole vectors: the fast path's tail)
 * and 21,120 (whole vectors: for the Gelu forms and Erf 2.6 blocks of eltwise_unary_dense in
 * fp16, 5.2 in fp32, its partial last block), aligned, and misaligned by 4 bytes (the general
 * path). */
START_TEST(test_every_activation_dense) {
    static const int64_t shapes[2][4] = {{2, 13, 7, 9}, {5, 16, 11, 24}};
    for (int shape = 0; shape < 2; shape++)
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (int act = 0; act < ACT_COUNT; act++)
            for (size_t misalign = 0; misalign <= 4; misalign += 4) { /* 4: general path */
                const int64_t *dims = shapes[shape];
                const size_t n = (size_t)(dims[0] * dims[1] * dims[2] * dims[3]);
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 4, dims);
                set_act_params(&d, (act_kind)act);
                d.input_scale[0] = act == ACT_RELU ? 0.5f : 1.0f;
                float lo, hi;
                act_range((act_kind)act, &lo, &hi);
                float *a = random_floats(n, 100 + (uint64_t)act, lo, hi);
                float *vals[1] = {a};
                size_t counts[1] = {n};
                check_float(&d, vals, counts, NULL, misalign);
                free(a);
            }
}
END_TEST

/* NHWC8: physical (2, 7, 9, 16), 13 real channels; sigmoid, exp and hard-sigmoid map the zero
 * padding to non-zero values, so the padding must be masked, on the fast and general paths. */
START_TEST(test_activation_nhwc8_padding) {
    const int64_t dims[4] = {2, 7, 9, 16};
    const int64_t rows = 2 * 7 * 9;
    const size_t n = (size_t)rows * 16;
    const act_kind acts[] = {ACT_NONE,         ACT_SIGMOID,    ACT_EXP,
                             ACT_HARD_SIGMOID, ACT_HARD_SWISH, ACT_GELU};
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (size_t a_i = 0; a_i < sizeof acts / sizeof acts[0]; a_i++)
            for (size_t misalign = 0; misalign <= 4; misalign += 4) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 4, dims);
                set_act_params(&d, acts[a_i]);
                d.pad_dim = 3;
                d.real_c = 13;
                float *a = random_floats(n, 7 + a_i, -3, 3);
                zero_padding(a, rows, 16, 13);
                float *vals[1] = {a};
                size_t counts[1] = {n};
                check_float(&d, vals, counts, NULL, misalign);
                free(a);
            }
}
END_TEST

/* Padding on a dim that is not last, and a last dim that is no multiple of the vector width:
 * both take the general path. */
START_TEST(test_padding_general_path) {
    const int64_t dims_a[3] = {2, 16, 5}; /* pad_dim 1 */
    const int64_t dims_b[3] = {3, 5, 12}; /* pad_dim 2, 12 % 8 != 0 */
    for (int t = 0; t < FLOAT_TYPES; t++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 3, dims_a);
        set_act_params(&d, ACT_SIGMOID);
        d.pad_dim = 1;
        d.real_c = 13;
        float *a = random_floats(180, 3, -2, 2); /* enough for both shapes */
        float *vals[1] = {a};
        size_t counts[1] = {180};
        check_float(&d, vals, counts, NULL, 0);
        kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 3, dims_b);
        set_act_params(&d, ACT_EXP);
        d.pad_dim = 2;
        d.real_c = 10;
        check_float(&d, vals, counts, NULL, 0);
        free(a);
    }
}
END_TEST

/* ---- binary ops ---------------------------------------------------------------------------- */

static void binary_ranges(binary_op op, float r[4]) {
    r[0] = -3, r[1] = 3, r[2] = -3, r[3] = 3;
    if (op == BINARY_DIV)
        r[2] = 0.5f, r[3] = 3; /* divisor away from 0 */
    if (op == BINARY_POW)
        r[0] = 0.5f, r[1] = 2, r[2] = -2, r[3] = 2;
}

START_TEST(test_binary_same_shape) {
    const int64_t dims4[4] = {2, 13, 7, 9};
    const int64_t dims3[3] = {3, 5, 7}; /* 105: a tail after the vectors */
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (int op = BINARY_ADD; op <= BINARY_PRELU; op++)
            for (int shape = 0; shape < 2; shape++)
                for (size_t misalign = 0; misalign <= 4; misalign += 4) {
                    kern_eltwise_desc d;
                    if (shape == 0)
                        kern_eltwise_desc_init(&d, (binary_op)op, float_types[t], 4, dims4);
                    else
                        kern_eltwise_desc_init(&d, (binary_op)op, float_types[t], 3, dims3);
                    size_t n = (size_t)total_of(&d);
                    float r[4];
                    binary_ranges((binary_op)op, r);
                    float *a = random_floats(n, 11 + (uint64_t)op, r[0], r[1]);
                    float *b = random_floats(n, 31 + (uint64_t)op, r[2], r[3]);
                    float *vals[2] = {a, b};
                    size_t counts[2] = {n, n};
                    check_float(&d, vals, counts, NULL, misalign);
                    free(a);
                    free(b);
                }
}
END_TEST

/* Per-channel scale/bias into NHWC8: b is a padded vector of Cp (strides 0,0,0,1) or an
 * unpadded one of C elements (only its C elements may be read). */
START_TEST(test_binary_per_channel_nhwc8) {
    const int64_t dims[4] = {2, 7, 9, 16};
    const int64_t rows = 2 * 7 * 9;
    const size_t n = (size_t)rows * 16;
    const binary_op ops[] = {BINARY_ADD, BINARY_MUL, BINARY_SUB,
                                   BINARY_PRELU, BINARY_DIV};
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (int padded_vec = 0; padded_vec < 2; padded_vec++)
                for (size_t misalign = 0; misalign <= 4; misalign += 4) {
                    kern_eltwise_desc d;
                    kern_eltwise_desc_init(&d, ops[o], float_types[t], 4, dims);
                    d.pad_dim = 3;
                    d.real_c = 13;
                    d.strides[1][0] = d.strides[1][1] = d.strides[1][2] = 0;
                    d.strides[1][3] = 1;
                    if (ops[o] == BINARY_ADD)
                        set_act_params(&d, ACT_RELU);
                    float *a = random_floats(n, 5 + o, -2, 2);
                    zero_padding(a, rows, 16, 13);
                    size_t vec = padded_vec ? 16 : 13;
                    float *b = random_floats(vec, 9 + o, 0.5f, 2);
                    if (padded_vec)
                        zero_padding(b, 1, 16, 13);
                    float *vals[2] = {a, b};
                    size_t counts[2] = {n, vec};
                    check_float(&d, vals, counts, NULL, misalign);
                    free(a);
                    free(b);
                }
}
END_TEST

/* A scalar on either side (strides all 0). */
START_TEST(test_binary_scalar) {
    const int64_t dims[2] = {5, 33};
    const size_t n = 5 * 33;
    const binary_op ops[] = {BINARY_MUL, BINARY_SUB, BINARY_DIV,
                                   BINARY_POW, BINARY_MAX};
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (int side = 0; side < 2; side++) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, ops[o], float_types[t], 2, dims);
                d.strides[side][0] = d.strides[side][1] = 0;
                float r[4];
                binary_ranges(ops[o], r);
                float *a = random_floats(side == 0 ? 1 : n, 41 + o, r[0], r[1]);
                float *b = random_floats(side == 1 ? 1 : n, 43 + o, r[2], r[3]);
                float *vals[2] = {a, b};
                size_t counts[2] = {side == 0 ? 1 : n, side == 1 ? 1 : n};
                check_float(&d, vals, counts, NULL, 0);
                free(a);
                free(b);
            }
}
END_TEST

/* Dense row broadcasts through kern_eltwise_broadcast_strides: (5,7,40)+(40) is a last-dim
 * vector (fast path), (5,7,33)+(33) and (5,7,33)+(5,1,33) take the general path. */
START_TEST(test_binary_row_broadcast) {
    struct {
        int64_t out[3];
        int b_rank;
        int64_t b[3];
    } cases[] = {{{5, 7, 40}, 1, {40}},
                 {{5, 7, 33}, 1, {33}},
                 {{5, 7, 33}, 3, {5, 1, 33}},
                 {{5, 7, 33}, 2, {7, 1}}};
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            kern_eltwise_desc d;
            kern_eltwise_desc_init(&d, BINARY_ADD, float_types[t], 3, cases[c].out);
            ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, cases[c].b_rank, cases[c].b));
            size_t n = (size_t)total_of(&d), nb = 1;
            for (int i = 0; i < cases[c].b_rank; i++)
                nb *= (size_t)cases[c].b[i];
            float *a = random_floats(n, 51 + c, -2, 2);
            float *b = random_floats(nb, 53 + c, -2, 2);
            float *vals[2] = {a, b};
            size_t counts[2] = {n, nb};
            check_float(&d, vals, counts, NULL, 0);
            free(a);
            free(b);
        }
}
END_TEST

/* Both sides broadcast: (2,1,9) * (1,7,1), and a rank-6 pattern. */
START_TEST(test_binary_general_broadcast) {
    for (int t = 0; t < FLOAT_TYPES; t++) {
        const int64_t out[3] = {2, 7, 9}, ad[3] = {2, 1, 9}, bd[3] = {1, 7, 1};
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_MUL, float_types[t], 3, out);
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 0, 3, ad));
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 3, bd));
        float *a = random_floats(18, 61, -2, 2), *b = random_floats(7, 62, -2, 2);
        float *vals[2] = {a, b};
        size_t counts[2] = {18, 7};
        check_float(&d, vals, counts, NULL, 0);
        free(a);
        free(b);

        const int64_t out6[6] = {2, 3, 4, 5, 3, 2}, a6[6] = {2, 1, 4, 1, 3, 2},
                      b6[5] = {3, 1, 5, 1, 2};
        kern_eltwise_desc_init(&d, BINARY_SUB, float_types[t], 6, out6);
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 0, 6, a6));
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 5, b6));
        set_act_params(&d, ACT_TANH);
        a = random_floats(48, 63, -2, 2), b = random_floats(30, 64, -2, 2);
        float *vals6[2] = {a, b};
        size_t counts6[2] = {48, 30};
        check_float(&d, vals6, counts6, NULL, 0);
        free(a);
        free(b);
    }
}
END_TEST

/* y = act(binary(s0*a, s1*b)) in one launch: Add+Relu, Sub+Clip(0,6), Mul+Sigmoid. */
START_TEST(test_fused_binary_activation_scales) {
    const int64_t dims[4] = {2, 13, 7, 9};
    const size_t n = 2 * 13 * 7 * 9;
    const binary_op ops[] = {BINARY_ADD, BINARY_SUB, BINARY_MUL};
    const act_kind acts[] = {ACT_RELU, ACT_CLIP, ACT_SIGMOID};
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (int i = 0; i < 3; i++)
            for (size_t misalign = 0; misalign <= 4; misalign += 4) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, ops[i], float_types[t], 4, dims);
                set_act_params(&d, acts[i]);
                if (acts[i] == ACT_CLIP)
                    d.act_alpha = 0.0f, d.act_beta = 6.0f;
                d.input_scale[0] = 0.5f;
                d.input_scale[1] = -2.0f;
                float *a = random_floats(n, 71 + (uint64_t)i, -8, 8);
                float *b = random_floats(n, 73 + (uint64_t)i, -4, 4);
                float *vals[2] = {a, b};
                size_t counts[2] = {n, n};
                check_float(&d, vals, counts, NULL, misalign);
                free(a);
                free(b);
            }
}
END_TEST

/* UNARY as a strided copy: NHWC8 (2,7,9,16) read into dense NCHW (2,13,7,9), and a copy
 * that reverses W through a negative stride. */
START_TEST(test_strided_copy) {
    for (int t = 0; t < FLOAT_TYPES; t++) {
        const int64_t out[4] = {2, 13, 7, 9};
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 4, out);
        d.strides[0][0] = 7 * 9 * 16, d.strides[0][1] = 1, d.strides[0][2] = 9 * 16,
        d.strides[0][3] = 16;
        size_t n = 2 * 7 * 9 * 16;
        float *a = random_floats(n, 81, -2, 2);
        float *vals[1] = {a};
        size_t counts[1] = {n};
        check_float(&d, vals, counts, NULL, 0);

        const int64_t out2[2] = {6, 11};
        kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 2, out2);
        d.strides[0][1] = -1;
        int64_t base[MAX_IN] = {10, 0, 0}; /* index 0 maps to the last element of a row */
        check_float_base(&d, vals, (size_t[]){66}, NULL, base, 0);
        free(a);
    }
}
END_TEST

START_TEST(test_equal_and_where) {
    for (int t = 0; t < FLOAT_TYPES; t++) {
        /* Equal on small integers (so that equal values occur) with a row broadcast */
        const int64_t out[2] = {9, 13}, bd[1] = {13};
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_EQUAL, float_types[t], 2, out);
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 1, bd));
        float *a = random_floats(117, 91, 0, 3), *b = random_floats(13, 92, 0, 3);
        for (int i = 0; i < 117; i++)
            a[i] = floorf(a[i]);
        for (int i = 0; i < 13; i++)
            b[i] = floorf(b[i]);
        float *vals[2] = {a, b};
        size_t counts[2] = {117, 13};
        check_float(&d, vals, counts, NULL, 0);
        free(a);
        free(b);

        /* Where with cond (9,1) broadcast, x (9,13), y scalar, and an activation after */
        kern_eltwise_desc_init(&d, BINARY_WHERE, float_types[t], 2, out);
        const int64_t cd[2] = {9, 1};
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 0, 2, cd));
        d.strides[2][0] = d.strides[2][1] = 0;
        set_act_params(&d, ACT_RELU);
        d.input_scale[1] = 2.0f;
        uint8_t cond[9] = {1, 0, 1, 1, 0, 0, 1, 0, 1};
        float *x = random_floats(117, 93, -2, 2), *y = random_floats(1, 94, -2, 2);
        y[0] = 1.25f;
        float *wvals[3] = {NULL, x, y};
        size_t wcounts[3] = {9, 117, 1};
        check_float(&d, wvals, wcounts, cond, 0);
        free(x);
        free(y);
    }
}
END_TEST

/* ---- comparisons and bool results ---------------------------------------------------------- */

/* Less, LessOrEqual, Greater, GreaterOrEqual and Equal on small integers (equal values occur)
 * with a row broadcast and a scalar, in every float storage; exact. */
START_TEST(test_comparisons) {
    const binary_op ops[] = {BINARY_EQUAL, BINARY_LESS, BINARY_LESS_EQUAL, BINARY_GREATER,
                             BINARY_GREATER_EQUAL};
    const int64_t out[2] = {9, 13}, bd[1] = {13};
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (int scalar = 0; scalar < 2; scalar++) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, ops[o], float_types[t], 2, out);
                if (scalar)
                    d.strides[1][0] = d.strides[1][1] = 0;
                else
                    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 1, bd));
                float *a = random_floats(117, 71 + o, -3, 3), *b = random_floats(13, 81 + o, -3, 3);
                for (int i = 0; i < 117; i++)
                    a[i] = floorf(a[i]) * 0.5f;
                for (int i = 0; i < 13; i++)
                    b[i] = floorf(b[i]) * 0.5f;
                b[0] = 0.5f;
                float *vals[2] = {a, b};
                size_t counts[2] = {117, 13};
                check_float(&d, vals, counts, NULL, 0);
                free(a);
                free(b);
            }
}
END_TEST

/* IsNaN and IsInf on special values (NaN, +-inf, the largest finite values, zeros), with every
 * detect_negative / detect_positive pair; NHWC8 padding reads as false. */
START_TEST(test_isnan_isinf) {
    const float specials[8] = {NAN, INFINITY, -INFINITY, 65504.0f, -65504.0f, 0.0f, -0.0f, 1.5f};
    const int64_t dims[4] = {2, 3, 5, 16};
    const size_t n = 2 * 3 * 5 * 16;
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (int k = 0; k < 5; k++)
            for (int padded = 0; padded < 2; padded++) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, BINARY_NONE, float_types[t], 4, dims);
                d.act = k == 0 ? ACT_IS_NAN : ACT_IS_INF;
                d.act_alpha = (float)((k - 1) & 1), d.act_beta = (float)(((k - 1) >> 1) & 1);
                if (padded)
                    d.pad_dim = 3, d.real_c = 11;
                float *a = random_floats(n, 5 + (uint64_t)k, -3, 3);
                for (size_t i = 0; i < n; i += 3)
                    a[i] = specials[(i / 3) % 8];
                float *vals[1] = {a};
                size_t counts[1] = {n};
                check_float(&d, vals, counts, NULL, 0);
                free(a);
            }
}
END_TEST

static uint8_t bool_ref(binary_op op, act_kind act, uint8_t a, uint8_t b) {
    bool x = a != 0, y = b != 0, r = x;
    switch (op) {
    case BINARY_AND: r = x && y; break;
    case BINARY_OR: r = x || y; break;
    case BINARY_XOR: r = x != y; break;
    case BINARY_EQUAL: r = x == y; break;
    default: break;
    }
    return act == ACT_NOT ? !r : r;
}

/* The bool kernel: And, Or, Xor, Equal with a row broadcast, Not and a copy with a transposed
 * read; bytes other than 0 and 1 read as true. */
START_TEST(test_bool_ops) {
    const int64_t out[2] = {7, 9}, bd[1] = {9};
    uint8_t a[63], b[9];
    for (int i = 0; i < 63; i++)
        a[i] = (uint8_t)((i * 5) % 3 == 0 ? 0 : (i % 4 == 0 ? 7 : 1));
    for (int i = 0; i < 9; i++)
        b[i] = (uint8_t)(i % 2);
    const binary_op ops[] = {BINARY_AND, BINARY_OR, BINARY_XOR, BINARY_EQUAL};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, ops[o], TCI_DTYPE_BOOL, 2, out);
        ck_assert(kern_eltwise_writes_bool(&d));
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 1, bd));
        const void *raw[2] = {a, b};
        size_t bytes[2] = {sizeof a, sizeof b};
        uint8_t got[63];
        run_raw(&d, raw, bytes, NULL, got, sizeof got, 0);
        for (int i = 0; i < 63; i++)
            ck_assert_msg(got[i] == bool_ref(ops[o], ACT_NONE, a[i], b[i % 9]),
                          "bool op %d element %d: got %d", (int)ops[o], i, got[i]);
    }
    const act_kind acts[] = {ACT_NOT, ACT_NONE};
    const int64_t tout[2] = {9, 7};
    for (size_t k = 0; k < 2; k++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_BOOL, 2, tout);
        d.act = acts[k];
        d.strides[0][0] = 1, d.strides[0][1] = 9;
        const void *raw[1] = {a};
        size_t bytes[1] = {sizeof a};
        uint8_t got[63];
        run_raw(&d, raw, bytes, NULL, got, sizeof got, 0);
        for (int r = 0; r < 9; r++)
            for (int c = 0; c < 7; c++)
                ck_assert_int_eq(got[r * 7 + c], bool_ref(BINARY_NONE, acts[k], a[c * 9 + r], 0));
    }
}
END_TEST

/* ---- int64 --------------------------------------------------------------------------------- */

static int64_t i64_ref(binary_op op, int64_t a, int64_t b) {
    switch (op) {
    case BINARY_ADD: return a + b;
    case BINARY_SUB: return a - b;
    case BINARY_MUL: return a * b;
    case BINARY_DIV: return b == 0 ? 0 : a / b;
    case BINARY_MAX: return a > b ? a : b;
    case BINARY_MIN: return a < b ? a : b;
    case BINARY_EQUAL: return a == b;
    case BINARY_LESS: return a < b;
    case BINARY_LESS_EQUAL: return a <= b;
    case BINARY_GREATER: return a > b;
    case BINARY_GREATER_EQUAL: return a >= b;
    default: return a;
    }
}

/* Mod through 128-bit floor / truncating division (the kernel answers x % 0 with 0). */
static int64_t i64_mod_ref(binary_op op, int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    __int128 q = (__int128)a / b;
    if (op == BINARY_MOD && q * b != a && (a < 0) != (b < 0))
        q -= 1;
    return (int64_t)((__int128)a - q * b);
}

START_TEST(test_int64_ops) {
    const int64_t out[2] = {4, 11}, bd[1] = {11};
    int64_t a[44], b[11];
    for (int i = 0; i < 44; i++)
        a[i] = (i * 37) % 23 - 11;
    for (int i = 0; i < 11; i++)
        b[i] = i - 5; /* includes 0: x/0 gives 0 */
    const binary_op ops[] = {BINARY_ADD,  BINARY_SUB,        BINARY_MUL,     BINARY_DIV,
                             BINARY_MAX,  BINARY_MIN,        BINARY_EQUAL,   BINARY_LESS,
                             BINARY_LESS_EQUAL, BINARY_GREATER, BINARY_GREATER_EQUAL};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, ops[o], TCI_DTYPE_INT64, 2, out);
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 1, bd));
        const void *raw[2] = {a, b};
        size_t bytes[2] = {sizeof a, sizeof b};
        bool equal = binary_flags(ops[o]) & BINARY_BOOL_RESULT;
        int64_t got[44];
        uint8_t got8[44];
        run_raw(&d, raw, bytes, NULL, equal ? (void *)got8 : (void *)got, equal ? 44 : sizeof got,
                0);
        for (int i = 0; i < 44; i++) {
            int64_t want = i64_ref(ops[o], a[i], b[i % 11]);
            int64_t g = equal ? got8[i] : got[i];
            ck_assert_msg(g == want, "int64 op %d element %d (%lld, %lld): got %lld want %lld",
                          (int)ops[o], i, (long long)a[i], (long long)b[i % 11], (long long)g,
                          (long long)want);
        }
    }
    /* truncation toward zero */
    ck_assert_int_eq(i64_ref(BINARY_DIV, -7, 2), -3);

    /* unary Neg / Abs / Sign / copy with a strided (transposed) read */
    const act_kind acts[] = {ACT_NONE, ACT_NEG, ACT_ABS, ACT_RELU, ACT_SIGN};
    const int64_t tout[2] = {11, 4};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_INT64, 2, tout);
        d.act = acts[i];
        d.strides[0][0] = 1, d.strides[0][1] = 11;
        const void *raw[1] = {a};
        size_t bytes[1] = {sizeof a};
        int64_t got[44];
        run_raw(&d, raw, bytes, NULL, got, sizeof got, 0);
        for (int r = 0; r < 11; r++)
            for (int c = 0; c < 4; c++) {
                int64_t x = a[c * 11 + r];
                int64_t want = acts[i] == ACT_NEG    ? -x
                               : acts[i] == ACT_ABS  ? (x < 0 ? -x : x)
                               : acts[i] == ACT_RELU ? (x < 0 ? 0 : x)
                               : acts[i] == ACT_SIGN ? (x > 0) - (x < 0)
                                                     : x;
                ck_assert_int_eq(got[r * 4 + c], want);
            }
    }
    /* Where on int64 with a broadcast cond */
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_WHERE, TCI_DTYPE_INT64, 2, out);
    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 0, 1, bd));
    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 2, 1, bd));
    uint8_t cond[11] = {1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0};
    const void *raw[3] = {cond, a, b};
    size_t bytes[3] = {sizeof cond, sizeof a, sizeof b};
    int64_t got[44];
    run_raw(&d, raw, bytes, NULL, got, sizeof got, 0);
    for (int i = 0; i < 44; i++)
        ck_assert_int_eq(got[i], cond[i % 11] ? a[i] : b[i % 11]);
}
END_TEST

/* ---- Mod ----------------------------------------------------------------------------------- */

/* MOD (numpy.mod, Mod-28's fmod=0 on floats) and FMOD: mixed signs and zero divisors in every
 * float storage, same shape (vector path, and misaligned: general path), a scalar divisor and a
 * row broadcast; int64 with the extremes. */
START_TEST(test_mod_fmod) {
    const binary_op ops[2] = {BINARY_MOD, BINARY_FMOD};
    const int64_t dims[3] = {3, 5, 7}, rd[1] = {7};
    const size_t n = 3 * 5 * 7;
    for (int t = 0; t < FLOAT_TYPES; t++)
        for (int o = 0; o < 2; o++) {
            for (size_t misalign = 0; misalign <= 4; misalign += 4) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, ops[o], float_types[t], 3, dims);
                float *a = random_floats(n, 61 + (uint64_t)o, -3, 3);
                float *b = random_floats(n, 67 + (uint64_t)o, -3, 3);
                b[5] = 0.0f, b[9] = -0.0f; /* NaN */
                a[6] = 0.0f, a[7] = -0.0f;
                float *vals[2] = {a, b};
                size_t counts[2] = {n, n};
                check_float(&d, vals, counts, NULL, misalign);
                free(a);
                free(b);
            }
            for (int broadcast = 0; broadcast < 2; broadcast++) {
                kern_eltwise_desc d;
                kern_eltwise_desc_init(&d, ops[o], float_types[t], 3, dims);
                size_t nb = broadcast == 0 ? 1 : 7;
                if (broadcast == 0)
                    d.strides[1][0] = d.strides[1][1] = d.strides[1][2] = 0;
                else
                    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 1, rd));
                float *a = random_floats(n, 71 + (uint64_t)o, -3, 3);
                float *b = random_floats(nb, 73 + (uint64_t)o, -3, 3);
                float *vals[2] = {a, b};
                size_t counts[2] = {n, nb};
                check_float(&d, vals, counts, NULL, 0);
                free(a);
                free(b);
            }
        }
    /* fp16 spot values: the divisor's sign against the dividend's */
    const float want[2][4] = {{1.5f, -1.5f, -1.0f, 1.0f}, {-0.5f, 0.5f, -1.0f, 1.0f}};
    for (int o = 0; o < 2; o++) {
        const int64_t four[1] = {4};
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, ops[o], TCI_DTYPE_FLOAT16, 1, four);
        float af[4] = {-4.5f, 4.5f, -7, 7}, bf[4] = {2, -2, -3, 3};
        uint16_t ah[4], bh[4], yh[4];
        gpu_to_half(af, ah, 4);
        gpu_to_half(bf, bh, 4);
        const void *raw[2] = {ah, bh};
        size_t bytes[2] = {sizeof ah, sizeof bh};
        run_raw(&d, raw, bytes, NULL, yh, sizeof yh, 0);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(half_to_float(yh[i]) == want[o][i], "op %d element %d: %g", (int)ops[o],
                          i, half_to_float(yh[i]));
    }

    /* int64: x % 0 and x % -1 give 0 (MIN % -1 must not trap) */
    const int64_t out[2] = {6, 9}, bd[1] = {9};
    int64_t a[54];
    const int64_t b[9] = {3, -3, 7, -7, 0, -1, 1, INT64_MIN, INT64_MAX};
    for (int i = 0; i < 54; i++)
        a[i] = (i * 37) % 23 - 11;
    a[0] = INT64_MIN, a[1] = INT64_MAX, a[5] = INT64_MIN, a[52] = INT64_MIN, a[53] = INT64_MAX;
    for (int o = 0; o < 2; o++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, ops[o], TCI_DTYPE_INT64, 2, out);
        ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 1, bd));
        const void *raw[2] = {a, b};
        size_t bytes[2] = {sizeof a, sizeof b};
        int64_t got[54];
        run_raw(&d, raw, bytes, NULL, got, sizeof got, 0);
        for (int i = 0; i < 54; i++) {
            int64_t w = i64_mod_ref(ops[o], a[i], b[i % 9]);
            ck_assert_msg(got[i] == w, "int64 op %d element %d (%lld, %lld): got %lld want %lld",
                          (int)ops[o], i, (long long)a[i], (long long)b[i % 9],
                          (long long)got[i], (long long)w);
        }
    }
    ck_assert_int_eq(i64_mod_ref(BINARY_MOD, -7, 3), 2);
    ck_assert_int_eq(i64_mod_ref(BINARY_FMOD, -7, 3), -1);
    ck_assert_int_eq(i64_mod_ref(BINARY_MOD, INT64_MIN, INT64_MAX), INT64_MAX - 1);
}
END_TEST

/* ---- sizes --------------------------------------------------------------------------------- */

/* A larger NHWC8 bias+ReLU (many grid-stride blocks) and an in-place update. */
START_TEST(test_large_and_in_place) {
    const int64_t dims[4] = {4, 56, 56, 72};
    const int64_t rows = 4 * 56 * 56;
    const size_t n = (size_t)rows * 72;
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    d.pad_dim = 3;
    d.real_c = 67;
    d.strides[1][0] = d.strides[1][1] = d.strides[1][2] = 0;
    set_act_params(&d, ACT_RELU);
    float *a = random_floats(n, 101, -2, 2), *b = random_floats(72, 102, -1, 1);
    zero_padding(a, rows, 72, 67);
    float *vals[2] = {a, b};
    size_t counts[2] = {n, 72};
    check_float(&d, vals, counts, NULL, 0);

    /* in place: out == input 0 */
    uint16_t *h = malloc(n * 2);
    gpu_to_half(a, h, n);
    void *buf = gpu_upload(h, n * 2);
    kern_eltwise_desc u;
    kern_eltwise_desc_init(&u, BINARY_NONE, TCI_DTYPE_FLOAT16, 4, dims);
    set_act_params(&u, ACT_NEG);
    const void *in[1] = {buf};
    ck_assert_tci_ok(kern_eltwise(&u, in, buf, 0));
    gpu_sync();
    gpu_download(h, buf, n * 2);
    for (size_t i = 0; i < n; i += 97)
        ck_assert_float_eq(half_to_float(h[i]), -half_to_float(float_to_half(a[i])));
    gpu_free(buf);
    free(h);
    free(a);
    free(b);
}
END_TEST

/* More than 2^30 elements: the 64-bit index variants of both paths. Only the first and last
 * megabytes are read back. */
START_TEST(test_64bit_indexing) {
    size_t free_bytes = 0, total_bytes = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    if (free_bytes < ((size_t)6 << 30)) {
        printf("test_64bit_indexing: skipped, only %zu MiB free\n", free_bytes >> 20);
        return;
    }
    const int64_t rows = ((int64_t)1 << 27) + 5;
    const int64_t dims[2] = {rows, 8};
    const size_t n = (size_t)rows * 8, bytes = n * 2;
    float vecf[9] = {0.5f, -1, 2, -3, 4, 0.25f, -0.5f, 1.5f, 0};
    uint16_t vech[9];
    gpu_to_half(vecf, vech, 9);
    unsigned char *vdev = gpu_upload(vech, sizeof vech);
    unsigned char *out = gpu_upload(NULL, bytes + 16);
    const size_t chunk = (size_t)1 << 20;
    uint16_t *host = malloc(chunk * 2);
    for (int general = 0; general < 2; general++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_FLOAT16, 2, dims);
        d.strides[0][0] = 0;
        d.pad_dim = 1;
        d.real_c = 5;
        set_act_params(&d, ACT_ABS);
        /* misaligned vector and output force the general path */
        const void *in[1] = {vdev + (general ? 2 : 0)};
        unsigned char *o = out + (general ? 2 : 0);
        ck_assert_tci_ok(kern_eltwise(&d, in, o, 0));
        gpu_sync();
        for (int part = 0; part < 2; part++) {
            size_t first = part == 0 ? 0 : n - chunk;
            gpu_download(host, o + first * 2, chunk * 2);
            for (size_t i = 0; i < chunk; i++) {
                size_t c = (first + i) % 8;
                float want = c < 5 ? fabsf(vecf[c + (general ? 1 : 0)]) : 0.0f;
                ck_assert_msg(half_to_float(host[i]) == want, "element %zu: got %g want %g",
                              first + i, half_to_float(host[i]), want);
            }
        }
    }
    free(host);
    gpu_free(vdev);
    gpu_free(out);
}
END_TEST

/* ---- errors -------------------------------------------------------------------------------- */

START_TEST(test_errors) {
    const int64_t dims[4] = {2, 3, 4, 8};
    kern_eltwise_desc d;
    float dummy_host[1] = {0};
    void *dev = gpu_upload(dummy_host, sizeof dummy_host);
    const void *in[3] = {dev, dev, dev};

    ck_assert_tci_error(kern_eltwise(NULL, in, dev, 0), TCI_ERR_INVALID_ARGUMENT, "NULL desc");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    d.rank = 7;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_INVALID_ARGUMENT, "rank 7");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    d.dims[1] = -2;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_INVALID_ARGUMENT,
                        "dim 1 is negative");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    d.pad_dim = 4;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_INVALID_ARGUMENT, "pad_dim 4");
    d.pad_dim = 3;
    d.real_c = -1;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_INVALID_ARGUMENT, "real_c -1");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_DOUBLE, 4, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED, "dtype double");
    kern_eltwise_desc_init(&d, (binary_op)99, TCI_DTYPE_FLOAT16, 4, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_INVALID_ARGUMENT, "unknown op 99");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    d.act = (act_kind)-1;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_INVALID_ARGUMENT,
                        "unknown activation -1");
    kern_eltwise_desc_init(&d, BINARY_EQUAL, TCI_DTYPE_FLOAT16, 4, dims);
    d.act = ACT_RELU;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED, "Equal");
    kern_eltwise_desc_init(&d, BINARY_POW, TCI_DTYPE_INT64, 4, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED, "int64");
    kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_INT64, 4, dims);
    d.act = ACT_SIGMOID;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "activation Sigmoid is not provided for int64");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_INT64, 4, dims);
    d.input_scale[1] = 2.0f;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED, "take no scale");
    /* what writes bool takes no activation; bool inputs only where they mean something */
    kern_eltwise_desc_init(&d, BINARY_LESS, TCI_DTYPE_FLOAT16, 4, dims);
    d.act = ACT_NEG;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "Less writes bool and takes no activation");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    d.act = ACT_IS_NAN;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "activation IsNaN writes bool and follows no binary op (Add)");
    kern_eltwise_desc_init(&d, BINARY_AND, TCI_DTYPE_FLOAT16, 4, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "And takes bool inputs, not float16");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_BOOL, 4, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "Add is not provided for bool");
    kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_BOOL, 4, dims);
    d.act = ACT_SIGMOID;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "activation Sigmoid is not provided for bool");
    kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_INT64, 4, dims);
    d.act = ACT_FLOOR;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "not provided for int64");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 4, dims);
    const void *missing[3] = {dev, NULL, NULL};
    ck_assert_tci_error(kern_eltwise(&d, missing, dev, 0), TCI_ERR_INVALID_ARGUMENT,
                        "input 1 is NULL");
    ck_assert_tci_error(kern_eltwise(&d, in, NULL, 0), TCI_ERR_INVALID_ARGUMENT, "output is NULL");
    const int64_t bad[1] = {5};
    ck_assert_tci_error(kern_eltwise_broadcast_strides(&d, 1, 1, bad), TCI_ERR_INVALID_ARGUMENT,
                        "does not broadcast");
    ck_assert_tci_error(kern_eltwise_broadcast_strides(&d, 3, 1, bad), TCI_ERR_INVALID_ARGUMENT,
                        "input 3");
    /* an empty output enqueues nothing and needs no buffers */
    const int64_t empty[2] = {0, 5};
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_FLOAT16, 2, empty);
    const void *none[3] = {NULL, NULL, NULL};
    ck_assert_tci_ok(kern_eltwise(&d, none, NULL, 0));
    ck_assert_int_eq(kern_eltwise_num_inputs(BINARY_WHERE), 3);
    ck_assert_int_eq(kern_eltwise_num_inputs(BINARY_NONE), 1);
    gpu_free(dev);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_eltwise");
    Suite *s = suite_create("gpu_eltwise");
    TCase *tc = tcase_create("eltwise");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_every_activation_dense);
    tcase_add_test(tc, test_activation_nhwc8_padding);
    tcase_add_test(tc, test_padding_general_path);
    tcase_add_test(tc, test_binary_same_shape);
    tcase_add_test(tc, test_binary_per_channel_nhwc8);
    tcase_add_test(tc, test_binary_scalar);
    tcase_add_test(tc, test_binary_row_broadcast);
    tcase_add_test(tc, test_binary_general_broadcast);
    tcase_add_test(tc, test_fused_binary_activation_scales);
    tcase_add_test(tc, test_strided_copy);
    tcase_add_test(tc, test_equal_and_where);
    tcase_add_test(tc, test_comparisons);
    tcase_add_test(tc, test_isnan_isinf);
    tcase_add_test(tc, test_bool_ops);
    tcase_add_test(tc, test_int64_ops);
    tcase_add_test(tc, test_mod_fmod);
    tcase_add_test(tc, test_large_and_in_place);
    tcase_add_test(tc, test_64bit_indexing);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
