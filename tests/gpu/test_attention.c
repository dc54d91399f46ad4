/* The fused attention kernel (src/kernels/attention.h) against the unfused steps computed in
 * double on the same fp16- (or bf16-) rounded inputs: S = scale Q K^T + mask, P = softmax(S)
 * over keys, Y = P V. A grid of sequence lengths (1, 7, 64, 128, 197, 384, and a query length
 * other than the key length), head dims 32, 64, 128 (80 and 96 once each), no mask, an additive
 * padding mask broadcast over heads and queries, a full (query, key) mask broadcast over batch
 * and heads, the causal flag, a bool keep mask (batch, 1, query, key) that is causal and left
 * padding at once (rows of padded queries keep no key: zeros, or the mean of V over every key
 * with keep_row_mean, as Hugging Face's -inf and finfo.min fills give), and Q, K, V read
 * through the strides of a head split (the 16-byte loads), of K stored transposed (element
 * loads), and at offsets into packed QKV
 * projections (aligned, and one element off: element loads) with Y written through strides
 * into the merged-head layouts (b, s, h, d) and (s, b, h, d) instead of dense (b, h, s, d).
 *
 * Error bound, with Q, K, V in [-1, 1): the scores accumulate exact products of rounded inputs
 * in fp32 (error ~1e-6 relative); the kernel rounds P to the storage type before P V (relative
 * error u = 2^-11 in fp16, 2^-8 in bf16, so at most u * max|v| on Y, as sum(P) = 1) and rounds Y
 * once (u * |Y| <= u). Y is within 2u of the reference; the test allows 4u (fp16 2e-3, bf16
 * 1.6e-2) for the fp32 exponentials and sums, and every output must be finite.
 *
 * Every case runs on both kernels behind kern_attention (desc.impl): the WMMA one always, the
 * FA2 one (attention_fa2.h) wherever it applies (the 16-byte-load layouts), each against the
 * same reference. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/attention.h"
#include "kernels/attention_cudnn.h"
#include "kernels/attention_fa2.h"

#define F16 TCI_DTYPE_FLOAT16
#define BF16 TCI_DTYPE_BFLOAT16

/* WINDOW: a full (2, heads, query, key) mask whose entry b % 2 batch b adds (Swin's shifted
 * windows, mask_batch_mod) */
enum mask_kind {
    MASK_NONE = 0,
    MASK_PADDING,
    MASK_FULL,
    MASK_CAUSAL,
    MASK_KEEP,
    MASK_KEEP_MEAN,
    MASK_WINDOW
};
/* PACKED: Q, K, V each in its slot of a packed projection (b, s, 3, h, d), read at an element
 * offset (0, h*d, 2*h*d), Y written through strides into (b, s, h, d), the layout an output
 * projection reads; PACKED_ODD: the same one element further (no 16-byte loads) and Y into
 * (s, b, h, d) (torchvision's sequence-first layout). */
enum layout_kind {
    LAYOUT_DENSE = 0,
    LAYOUT_HEAD_SPLIT,
    LAYOUT_K_TRANSPOSED,
    LAYOUT_PACKED,
    LAYOUT_PACKED_ODD
};

typedef struct attn_case {
    int64_t batch, heads, q_len, kv_len, d;
    enum mask_kind mask;
    enum layout_kind layout;
    tci_dtype dtype;
} attn_case;

/* element strides (batch, head, position, d) of operand `which` (0 Q, 1 K, 2 V) of (b, h, s, d)
 * values stored as laid out; returns its element offset, and the element count of its storage
 * in *count */
static int64_t strides_of(enum layout_kind layout, int which, const attn_case *c, int64_t s,
                          int64_t *st, size_t *count) {
    const int64_t h = c->heads, d = c->d;
    *count = (size_t)(c->batch * h * s * d);
    if (layout == LAYOUT_PACKED || layout == LAYOUT_PACKED_ODD) { /* (b, s, 3, h, d) */
        st[0] = s * 3 * h * d;
        st[1] = d;
        st[2] = 3 * h * d;
        st[3] = 1;
        const int64_t extra = layout == LAYOUT_PACKED_ODD;
        *count = (size_t)(c->batch * s * 3 * h * d + extra);
        return which * h * d + extra;
    }
    if (layout == LAYOUT_HEAD_SPLIT) { /* stored (b, s, h, d): the projection before the split */
        st[0] = s * h * d;
        st[1] = d;
        st[2] = h * d;
        st[3] = 1;
    } else if (layout == LAYOUT_K_TRANSPOSED && which == 1) { /* stored (b, h, d, s) */
        st[0] = h * d * s;
        st[1] = d * s;
        st[2] = 1;
        st[3] = s;
    } else {
        st[0] = h * s * d;
        st[1] = s * d;
        st[2] = d;
        st[3] = 1;
    }
    return 0;
}

/* Y's element strides (batch, head, query, d): the packed layouts' merged heads, else dense
 * (what the kernel writes for y_strides all 0) */
static bool y_strides_of(enum layout_kind layout, const attn_case *c, int64_t *ys) {
    const int64_t b = c->batch, h = c->heads, sq = c->q_len, d = c->d;
    if (layout == LAYOUT_PACKED) { /* (b, s, h, d) */
        ys[0] = sq * h * d;
        ys[1] = d;
        ys[2] = h * d;
        ys[3] = 1;
        return true;
    }
    if (layout == LAYOUT_PACKED_ODD) { /* (s, b, h, d) */
        ys[0] = h * d;
        ys[1] = d;
        ys[2] = b * h * d;
        ys[3] = 1;
        return true;
    }
    ys[0] = h * sq * d;
    ys[1] = sq * d;
    ys[2] = d;
    ys[3] = 1;
    return false;
}

static double tolerance(tci_dtype dt) { return dt == BF16 ? 1.6e-2 : 2e-3; }

/* Y (on the device, through ys) against the reference: every value finite and within the
 * bound; returns the largest error. */
static double check_y(const attn_case *c, const int64_t ys[4], const void *dy, uint16_t *yh,
                      float *y, const double *want_all, const char *kname) {
    const int64_t b = c->batch, h = c->heads, sq = c->q_len, sk = c->kv_len, d = c->d;
    const size_t nq = (size_t)(b * h * sq * d);
    double worst = 0.0;
    gpu_download(yh, dy, nq * 2);
    gpu_decode(c->dtype, yh, y, nq);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t hi = 0; hi < h; hi++)
            for (int64_t i = 0; i < sq; i++)
                for (int64_t e = 0; e < d; e++) {
                    const double want = want_all[((bi * h + hi) * sq + i) * d + e];
                    const float got = y[bi * ys[0] + hi * ys[1] + i * ys[2] + e * ys[3]];
                    ck_assert_msg(isfinite(got),
                                  "%s b%lld h%lld S%lldx%lld D%lld mask %d layout %d %s: "
                                  "y[%lld][%lld] = %g",
                                  kname, (long long)b, (long long)h, (long long)sq,
                                  (long long)sk, (long long)d, (int)c->mask, (int)c->layout,
                                  gpu_dtype_tag(c->dtype), (long long)i, (long long)e, got);
                    const double err = fabs(got - want);
                    if (err > worst) worst = err;
                    ck_assert_msg(err <= tolerance(c->dtype),
                                  "%s S%lldx%lld D%lld mask %d layout %d %s: y[b%lld h%lld "
                                  "i%lld e%lld] = %.6f, want %.6f (error %.2e > %.2e)",
                                  kname, (long long)sq, (long long)sk, (long long)d,
                                  (int)c->mask, (int)c->layout, gpu_dtype_tag(c->dtype),
                                  (long long)bi, (long long)hi, (long long)i, (long long)e, got,
                                  want, err, tolerance(c->dtype));
                }
    return worst;
}

/* Y poisoned (NaN in fp16 and bf16 alike) before a kernel writes it. */
static void poison(void *dy, uint16_t *yh, size_t n) {
    for (size_t i = 0; i < n; i++) yh[i] = 0xffff;
    ck_assert_int_eq(cudaMemcpy(dy, yh, n * 2, cudaMemcpyHostToDevice), cudaSuccess);
}

/* Cases cuDNN's fused attention ran, and refused (its reason printed), over the process. */
static int cudnn_ran, cudnn_refused;

/* The case through a plan of cuDNN's fused attention, where cuDNN takes it; the largest error. */
static double run_cudnn(const attn_case *c, const kern_attention_desc *desc, const void *qp,
                        const void *kp, const void *vp, void *dy, uint16_t *yh, float *y,
                        const int64_t ys[4], const double *want_all) {
    const bool masked = c->mask != MASK_NONE && c->mask != MASK_CAUSAL;
    cudnnHandle_t cudnn = NULL;
    ck_assert_int_eq(cudnnCreate(&cudnn), CUDNN_STATUS_SUCCESS);
    kern_attention_cudnn_plan *cp = NULL;
    tci_status st = kern_attention_cudnn_create(cudnn, desc, masked, &cp);
    double worst = 0.0;
    if (st == TCI_ERR_UNSUPPORTED) {
        cudnn_refused++;
        printf("cudnn S%lldx%lld D%lld mask %d layout %d %s: refused: %s\n",
               (long long)c->q_len, (long long)c->kv_len, (long long)c->d, (int)c->mask,
               (int)c->layout, gpu_dtype_tag(c->dtype), tci_last_error());
    } else {
        ck_assert_tci_ok(st);
        ck_assert(kern_attention_cudnn_applies(cp, desc, qp, kp, vp, dy));
        const size_t ws_bytes = kern_attention_cudnn_workspace(cp);
        void *ws = ws_bytes ? gpu_upload(NULL, ws_bytes) : NULL;
        const size_t nq = (size_t)(c->batch * c->heads * c->q_len * c->d);
        poison(dy, yh, nq);
        ck_assert_tci_ok(kern_attention_cudnn_run(cp, cudnn, 0, qp, kp, vp, dy, ws, ws_bytes));
        gpu_sync();
        worst = check_y(c, ys, dy, yh, y, want_all, kern_attention_cudnn_name(cp));
        cudnn_ran++;
        printf("cudnn S%lldx%lld D%lld mask %d layout %d %s: %s, workspace %zu, max error "
               "%.2e\n",
               (long long)c->q_len, (long long)c->kv_len, (long long)c->d, (int)c->mask,
               (int)c->layout, gpu_dtype_tag(c->dtype), kern_attention_cudnn_name(cp), ws_bytes,
               worst);
        gpu_free(ws);
        kern_attention_cudnn_destroy(cp);
    }
    cudnnDestroy(cudnn);
    return worst;
}

/* Runs one case on tcinfer's kernels, and with_cudnn through cuDNN's fused attention too;
 * returns the largest error seen (and asserts it is within the bound). */
static double run_case_on(const attn_case *c, uint64_t seed, bool with_cudnn) {
    const int64_t b = c->batch, h = c->heads, sq = c->q_len, sk = c->kv_len, d = c->d;
    const size_t nq = (size_t)(b * h * sq * d), nk = (size_t)(b * h * sk * d);
    const size_t nm = c->mask == MASK_PADDING  ? (size_t)(b * sk)
                      : c->mask == MASK_FULL   ? (size_t)(sq * sk)
                      : c->mask == MASK_WINDOW ? (size_t)(2 * h * sq * sk)
                                               : 1;
    float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float));
    float *v = malloc(nk * sizeof(float)), *m = malloc(nm * sizeof(float));
    float *y = malloc(nq * sizeof(float));
    uint16_t *mh = malloc(nm * 2);
    uint16_t *yh = malloc(nq * 2);
    /* the keep mask: causal, and sequence bi padded on the left by 3 * bi keys */
    const bool keeps = c->mask == MASK_KEEP || c->mask == MASK_KEEP_MEAN;
    const size_t nkeep = keeps ? (size_t)(b * sq * sk) : 1;
    unsigned char *keep = calloc(nkeep, 1);
    ck_assert_ptr_nonnull(keep);
    for (int64_t bi = 0; keeps && bi < b; bi++)
        for (int64_t i = 0; i < sq; i++)
            for (int64_t j = 0; j < sk; j++) keep[(bi * sq + i) * sk + j] = j <= i && j >= 3 * bi;
    double *srow = malloc((size_t)(sk ? sk : 1) * sizeof(double));
    ck_assert(q && k && v && m && y && mh && yh && srow);
    gpu_fill_random(q, nq, seed, -1.0f, 1.0f);
    gpu_fill_random(k, nk, seed + 1, -1.0f, 1.0f);
    gpu_fill_random(v, nk, seed + 2, -1.0f, 1.0f);
    gpu_fill_random(m, nm, seed + 3, -2.0f, 2.0f);
    if (c->mask == MASK_PADDING) /* each sequence keeps its first keys, at least one */
        for (int64_t bi = 0; bi < b; bi++)
            for (int64_t j = 0; j < sk; j++)
                if (j >= 1 && j >= sk - (bi + 1) * 3) m[bi * sk + j] = -INFINITY;
    gpu_round_to(c->dtype, q, nq);
    gpu_round_to(c->dtype, k, nk);
    gpu_round_to(c->dtype, v, nk);
    gpu_round_to(c->dtype, m, nm);

    /* storage in the case's layout, from logical (b, h, s, d); the rest of it a value no
     * operand has, which an element read by mistake would show */
    int64_t qs[4], ks[4], vs[4], ys[4];
    size_t cq, ck, cv;
    const int64_t qo = strides_of(c->layout, 0, c, sq, qs, &cq);
    const int64_t ko = strides_of(c->layout, 1, c, sk, ks, &ck);
    const int64_t vo = strides_of(c->layout, 2, c, sk, vs, &cv);
    const bool y_strided = y_strides_of(c->layout, c, ys);
    float *qst = malloc(cq * sizeof(float)), *kst = malloc(ck * sizeof(float));
    float *vst = malloc(cv * sizeof(float));
    uint16_t *qsh = malloc(cq * 2), *ksh = malloc(ck * 2), *vsh = malloc(cv * 2);
    ck_assert(qst && kst && vst && qsh && ksh && vsh);
    for (size_t i = 0; i < cq; i++) qst[i] = 60000.0f;
    for (size_t i = 0; i < ck; i++) kst[i] = 60000.0f;
    for (size_t i = 0; i < cv; i++) vst[i] = 60000.0f;
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t hi = 0; hi < h; hi++) {
            for (int64_t i = 0; i < sq; i++)
                for (int64_t e = 0; e < d; e++)
                    qst[qo + bi * qs[0] + hi * qs[1] + i * qs[2] + e * qs[3]] =
                        q[((bi * h + hi) * sq + i) * d + e];
            for (int64_t j = 0; j < sk; j++)
                for (int64_t e = 0; e < d; e++) {
                    kst[ko + bi * ks[0] + hi * ks[1] + j * ks[2] + e * ks[3]] =
                        k[((bi * h + hi) * sk + j) * d + e];
                    vst[vo + bi * vs[0] + hi * vs[1] + j * vs[2] + e * vs[3]] =
                        v[((bi * h + hi) * sk + j) * d + e];
                }
        }
    gpu_encode(c->dtype, qst, qsh, cq);
    gpu_encode(c->dtype, kst, ksh, ck);
    gpu_encode(c->dtype, vst, vsh, cv);
    gpu_encode(c->dtype, m, mh, nm);

    kern_attention_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.batch = b;
    desc.heads = h;
    desc.q_len = sq;
    desc.kv_len = sk;
    desc.head_dim = d;
    for (int i = 0; i < 4; i++) {
        desc.q_strides[i] = qs[i];
        desc.k_strides[i] = ks[i];
        desc.v_strides[i] = vs[i];
        desc.y_strides[i] = y_strided ? ys[i] : 0; /* all 0: dense */
    }
    if (c->mask == MASK_PADDING) { /* (b, 1, 1, sk) */
        desc.mask_strides[0] = sk;
        desc.mask_strides[3] = 1;
    } else if (c->mask == MASK_FULL) { /* (1, 1, sq, sk) */
        desc.mask_strides[2] = sk;
        desc.mask_strides[3] = 1;
    } else if (c->mask == MASK_WINDOW) { /* (2, h, sq, sk), entry b % 2 */
        desc.mask_strides[0] = h * sq * sk;
        desc.mask_strides[1] = sq * sk;
        desc.mask_strides[2] = sk;
        desc.mask_strides[3] = 1;
        desc.mask_batch_mod = 2;
    }
    desc.scale = 1.0f / sqrtf((float)d);
    desc.causal = c->mask == MASK_CAUSAL;
    if (keeps) { /* (b, 1, sq, sk) */
        desc.keep_strides[0] = sq * sk;
        desc.keep_strides[2] = sk;
        desc.keep_strides[3] = 1;
    }
    desc.keep_row_mean = c->mask == MASK_KEEP_MEAN;
    desc.dtype = c->dtype;

    void *dq = gpu_upload(qsh, cq * 2), *dk = gpu_upload(ksh, ck * 2), *dv = gpu_upload(vsh, cv * 2);
    void *dm = gpu_upload(mh, nm * 2), *dy = gpu_upload(NULL, nq * 2);
    void *dkeep = gpu_upload(keep, nkeep);
    const bool has_mask = c->mask == MASK_PADDING || c->mask == MASK_FULL ||
                          c->mask == MASK_WINDOW;

    /* the unfused steps in double, into want (logical (b, h, s, d)) */
    double *want_all = malloc(nq * sizeof(double));
    ck_assert_ptr_nonnull(want_all);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t hi = 0; hi < h; hi++)
            for (int64_t i = 0; i < sq; i++) {
                const float *qr = q + ((bi * h + hi) * sq + i) * d;
                const unsigned char *krow = keep + (bi * sq + i) * sk;
                bool none_kept = keeps;
                for (int64_t j = 0; keeps && j < sk; j++) none_kept &= !krow[j];
                double mx = -INFINITY;
                for (int64_t j = 0; j < sk; j++) {
                    const float *kr = k + ((bi * h + hi) * sk + j) * d;
                    double s = 0.0;
                    for (int64_t e = 0; e < d; e++) s += (double)qr[e] * kr[e];
                    s *= (double)desc.scale;
                    if (c->mask == MASK_PADDING) s += m[bi * sk + j];
                    if (c->mask == MASK_FULL) s += m[i * sk + j];
                    if (c->mask == MASK_WINDOW) s += m[(((bi % 2) * h + hi) * sq + i) * sk + j];
                    if (c->mask == MASK_CAUSAL && j > i) s = -INFINITY;
                    if (keeps && !krow[j]) s = -INFINITY;
                    /* every key dropped: a finite fill makes the scores equal (uniform), -inf
                     * with the NaN guard makes the row zeros */
                    if (none_kept) s = c->mask == MASK_KEEP_MEAN ? 0.0 : -INFINITY;
                    srow[j] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0.0;
                if (mx == -INFINITY) mx = 0.0; /* a row of zeros below */
                for (int64_t j = 0; j < sk; j++) sum += srow[j] = exp(srow[j] - mx);
                if (sum == 0.0) sum = 1.0;
                for (int64_t e = 0; e < d; e++) {
                    double want = 0.0;
                    for (int64_t j = 0; j < sk; j++)
                        want += srow[j] * v[((bi * h + hi) * sk + j) * d + e];
                    want_all[((bi * h + hi) * sq + i) * d + e] = want / sum;
                }
            }

    /* each kernel on a poisoned Y (NaN in fp16 and bf16 alike), against the same reference */
    const void *qp = (uint16_t *)dq + qo, *kp = (uint16_t *)dk + ko, *vp = (uint16_t *)dv + vo;
    const bool fa2 = kern_attention_fa2_applies(&desc, qp, kp, vp);
    double worst = 0.0;
    for (int impl = KERN_ATTENTION_WMMA; impl <= KERN_ATTENTION_FA2; impl++) {
        if (impl == KERN_ATTENTION_FA2 && !fa2) break;
        desc.impl = (kern_attention_impl)impl;
        const char *kname = impl == KERN_ATTENTION_FA2 ? "fa2" : "wmma";
        poison(dy, yh, nq);
        ck_assert_tci_ok(kern_attention(&desc, qp, kp, vp, has_mask ? dm : NULL,
                                        keeps ? dkeep : NULL, dy, 0));
        gpu_sync();
        worst = fmax(worst, check_y(c, ys, dy, yh, y, want_all, kname));
    }
    if (with_cudnn) worst = fmax(worst, run_cudnn(c, &desc, qp, kp, vp, dy, yh, y, ys, want_all));
    free(want_all);
    gpu_free(dq);
    gpu_free(dk);
    gpu_free(dv);
    gpu_free(dm);
    gpu_free(dkeep);
    gpu_free(dy);
    free(keep);
    free(q), free(k), free(v), free(m), free(y), free(mh);
    free(yh), free(srow), free(qst), free(kst), free(vst), free(qsh), free(ksh), free(vsh);
    return worst;
}

static double run_case(const attn_case *c, uint64_t seed) { return run_case_on(c, seed, false); }

static void run_grid(tci_dtype dt, enum layout_kind layout, const int64_t *dims, int num_dims) {
    static const int64_t lengths[] = {1, 7, 64, 128, 197, 384};
    uint64_t seed = 100;
    for (int li = 0; li < 6; li++)
        for (int di = 0; di < num_dims; di++)
            for (int mk = MASK_NONE; mk <= MASK_CAUSAL; mk++) {
                const int64_t s = lengths[li];
                attn_case c = {.batch = s >= 197 ? 1 : 2, .heads = s >= 197 ? 2 : 3,
                               .q_len = s, .kv_len = s, .d = dims[di],
                               .mask = (enum mask_kind)mk, .layout = layout, .dtype = dt};
                double worst = run_case(&c, seed++);
                printf("attention %s layout %d S %lld D %lld mask %d: max error %.2e\n",
                       gpu_dtype_tag(dt), (int)layout, (long long)s, (long long)dims[di], mk,
                       worst);
            }
}

static const int64_t kDims[] = {32, 64, 128};

START_TEST(test_attention_fp16_dense) { run_grid(F16, LAYOUT_DENSE, kDims, 3); }
END_TEST

START_TEST(test_attention_fp16_head_split) { run_grid(F16, LAYOUT_HEAD_SPLIT, kDims, 3); }
END_TEST

START_TEST(test_attention_bf16) { run_grid(BF16, LAYOUT_DENSE, kDims, 3); }
END_TEST

/* Q, K, V read at their offsets into packed projections, Y written into the merged-head layout;
 * fp16 with 16-byte loads, bf16 one element off them (element loads) with Y sequence-first */
START_TEST(test_attention_packed) { run_grid(F16, LAYOUT_PACKED, kDims, 3); }
END_TEST

START_TEST(test_attention_packed_odd) {
    static const int64_t dims[] = {64, 96};
    run_grid(BF16, LAYOUT_PACKED_ODD, dims, 2);
}
END_TEST

/* the element-by-element loads (K stored transposed), head dims 80 and 96, and query lengths
 * other than the key length (cross attention; causal keeps keys j <= i) */
START_TEST(test_attention_other_shapes) {
    static const int64_t odd[] = {80, 96};
    const attn_case cases[] = {
        {2, 3, 64, 64, 64, MASK_NONE, LAYOUT_K_TRANSPOSED, F16},
        {1, 2, 197, 197, 64, MASK_FULL, LAYOUT_K_TRANSPOSED, F16},
        {2, 2, 7, 197, 64, MASK_PADDING, LAYOUT_DENSE, F16},
        {2, 2, 197, 7, 128, MASK_FULL, LAYOUT_HEAD_SPLIT, F16},
        {1, 3, 130, 200, 32, MASK_CAUSAL, LAYOUT_DENSE, BF16},
        {1, 1, 1, 1, 128, MASK_NONE, LAYOUT_DENSE, BF16},
        {2, 3, 7, 197, 64, MASK_PADDING, LAYOUT_PACKED, F16},
        {3, 2, 130, 45, 80, MASK_FULL, LAYOUT_PACKED_ODD, F16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 500 + i);
    for (int i = 0; i < 2; i++)
        for (int mk = MASK_NONE; mk <= MASK_CAUSAL; mk++) {
            attn_case c = {2, 2, 100, 100, odd[i], (enum mask_kind)mk, LAYOUT_HEAD_SPLIT, F16};
            run_case(&c, 600 + (uint64_t)(i * 4 + mk));
        }
}
END_TEST

/* a mask repeating along the batch (mask_batch_mod 2: Swin's shifted windows, 49 tokens of
 * head dim 32), batches of 2, 4 and 6 windows, on both kernels and the layouts the executor
 * passes */
START_TEST(test_attention_window_mask) {
    const attn_case cases[] = {
        {4, 3, 49, 49, 32, MASK_WINDOW, LAYOUT_PACKED, F16},
        {6, 2, 49, 49, 32, MASK_WINDOW, LAYOUT_DENSE, BF16},
        {2, 3, 64, 64, 64, MASK_WINDOW, LAYOUT_HEAD_SPLIT, F16},
        {6, 2, 100, 100, 32, MASK_WINDOW, LAYOUT_K_TRANSPOSED, F16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double worst = run_case(&cases[i], 950 + i);
        printf("attention window mask case %zu: max error %.2e\n", i, worst);
    }
}
END_TEST

/* the bool keep mask (causal and left padding, some rows keeping no key) with both row rules,
 * over lengths across the 64-key tiles, head dims 64 and 128, fp16 and bf16, and the packed
 * layouts */
START_TEST(test_attention_keep_mask) {
    static const int64_t lengths[] = {1, 7, 64, 128, 130};
    uint64_t seed = 700;
    for (int li = 0; li < 5; li++)
        for (int mk = MASK_KEEP; mk <= MASK_KEEP_MEAN; mk++) {
            const int64_t sl = lengths[li];
            const attn_case cases[] = {
                {3, 2, sl, sl, 64, (enum mask_kind)mk, LAYOUT_DENSE, F16},
                {2, 3, sl, sl, 128, (enum mask_kind)mk, LAYOUT_HEAD_SPLIT, BF16},
                {2, 2, sl, sl, 64, (enum mask_kind)mk, LAYOUT_PACKED, F16},
            };
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                double worst = run_case(&cases[i], seed++);
                printf("attention keep mask %d S %lld case %zu: max error %.2e\n", mk,
                       (long long)sl, i, worst);
            }
        }
    /* a query length other than the key length: rows past the keys keep what causal gives */
    const attn_case other = {2, 2, 97, 45, 64, MASK_KEEP_MEAN, LAYOUT_DENSE, F16};
    run_case(&other, 800);
}
END_TEST

/* cuDNN's fused attention, the candidate the engine times against tcinfer's kernel: unmasked
 * and causal, the layouts the executor passes (dense, head split, packed QKV with Y in merged
 * heads), sequence lengths across cuDNN's tiles (ViT's 197 included), head dims 64 and 128,
 * fp16 and bf16, each against the same reference as tcinfer's kernels. A padding mask is
 * refused (tcinfer offers cuDNN no masks). On a GPU of compute capability 8.0 or later cuDNN
 * must run at least the unmasked cases: else the candidate would never be chosen. */
START_TEST(test_attention_cudnn) {
    const attn_case cases[] = {
        {2, 12, 197, 197, 64, MASK_NONE, LAYOUT_PACKED, F16},
        {2, 12, 197, 197, 64, MASK_NONE, LAYOUT_PACKED, BF16},
        {2, 3, 64, 64, 64, MASK_NONE, LAYOUT_DENSE, F16},
        {1, 2, 384, 384, 64, MASK_NONE, LAYOUT_HEAD_SPLIT, F16},
        {2, 4, 197, 197, 128, MASK_NONE, LAYOUT_PACKED, F16},
        {2, 3, 7, 7, 64, MASK_NONE, LAYOUT_DENSE, F16},
        {1, 4, 513, 513, 64, MASK_CAUSAL, LAYOUT_PACKED, F16},
        {2, 2, 128, 128, 128, MASK_CAUSAL, LAYOUT_HEAD_SPLIT, BF16},
        {2, 2, 7, 197, 64, MASK_NONE, LAYOUT_DENSE, F16},
        {2, 2, 64, 64, 64, MASK_PADDING, LAYOUT_DENSE, F16},
    };
    const int before = cudnn_refused;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case_on(&cases[i], 900 + i, true);
    ck_assert_int_ge(cudnn_refused - before, 1); /* the padding mask */
    int major = 0;
    ck_assert_int_eq(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
                     cudaSuccess);
    printf("cudnn fused attention: %d cases ran, %d refused (cuDNN %zu)\n", cudnn_ran,
           cudnn_refused, cudnnGetVersion());
    if (major >= 8) ck_assert_int_ge(cudnn_ran, 5);
}
END_TEST

/* The shapes the FA2 kernel was written for: ViT-B/16's attention (12 heads, 197 tokens, head
 * dim 64) read from the packed QKV projection as the executor passes it (torchvision's in_proj:
 * (b, s, 3, h, d) at offsets 0, h*d, 2*h*d, Y into (b, s, h, d)), head dim 128 with each mask
 * kind and tails on both sides of the 64-key tiles, and causal runs longer than the tiles. */
START_TEST(test_attention_fa2_shapes) {
    const attn_case cases[] = {
        {2, 12, 197, 197, 64, MASK_NONE, LAYOUT_PACKED, F16},
        {2, 12, 197, 197, 64, MASK_NONE, LAYOUT_PACKED, BF16},
        {2, 4, 197, 197, 128, MASK_NONE, LAYOUT_PACKED, F16},
        {2, 4, 200, 131, 128, MASK_PADDING, LAYOUT_DENSE, F16},
        {1, 3, 129, 257, 128, MASK_FULL, LAYOUT_HEAD_SPLIT, BF16},
        {2, 2, 300, 300, 128, MASK_CAUSAL, LAYOUT_DENSE, F16},
        {1, 4, 513, 513, 64, MASK_CAUSAL, LAYOUT_PACKED, F16},
        {2, 2, 65, 65, 128, MASK_KEEP_MEAN, LAYOUT_PACKED, BF16},
        {2, 2, 190, 190, 128, MASK_KEEP, LAYOUT_DENSE, F16},
        {2, 2, 77, 77, 96, MASK_CAUSAL, LAYOUT_PACKED, F16},
        {2, 2, 77, 140, 80, MASK_FULL, LAYOUT_HEAD_SPLIT, BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const double worst = run_case(&cases[i], 900 + i);
        printf("attention fa2 shape %zu (b%lld h%lld S%lldx%lld D%lld mask %d): max error %.2e\n",
               i, (long long)cases[i].batch, (long long)cases[i].heads,
               (long long)cases[i].q_len, (long long)cases[i].kv_len, (long long)cases[i].d,
               (int)cases[i].mask, worst);
    }
}
END_TEST

/* a query row whose every key is masked out (-inf) gets zeros, never NaN; no key at all, too */
START_TEST(test_attention_fully_masked) {
    const int64_t sq = 5, sk = 9, d = 32;
    float *q = malloc(sq * d * sizeof(float)), *kv = malloc(sk * d * sizeof(float));
    float mask[5 * 9];
    uint16_t *qh = malloc(sq * d * 2), *kvh = malloc(sk * d * 2), mh[5 * 9], yh[5 * 32];
    ck_assert(q && kv && qh && kvh);
    gpu_fill_random(q, (size_t)(sq * d), 7, -1.0f, 1.0f);
    gpu_fill_random(kv, (size_t)(sk * d), 8, -1.0f, 1.0f);
    for (int64_t i = 0; i < sq * sk; i++) mask[i] = i / sk == 2 ? -INFINITY : 0.0f;
    gpu_to_half(q, qh, (size_t)(sq * d));
    gpu_to_half(kv, kvh, (size_t)(sk * d));
    gpu_to_half(mask, mh, (size_t)(sq * sk));
    kern_attention_desc desc = {.batch = 1, .heads = 1, .q_len = sq, .kv_len = sk, .head_dim = d,
                                .q_strides = {0, 0, d, 1}, .k_strides = {0, 0, d, 1},
                                .v_strides = {0, 0, d, 1}, .mask_strides = {0, 0, sk, 1},
                                .scale = 0.5f, .dtype = F16};
    void *dq = gpu_upload(qh, (size_t)(sq * d * 2)), *dkv = gpu_upload(kvh, (size_t)(sk * d * 2));
    void *dm = gpu_upload(mh, sizeof mh), *dy = gpu_upload(NULL, sizeof yh);
    ck_assert(kern_attention_fa2_applies(&desc, dq, dkv, dkv));
    for (int impl = KERN_ATTENTION_WMMA; impl <= KERN_ATTENTION_FA2; impl++) {
        desc.impl = (kern_attention_impl)impl;
        desc.kv_len = sk;
        ck_assert_int_eq(cudaMemset(dy, 0xff, sizeof yh), cudaSuccess);
        ck_assert_tci_ok(kern_attention(&desc, dq, dkv, dkv, dm, NULL, dy, 0));
        gpu_sync();
        gpu_download(yh, dy, sizeof yh);
        float y[5 * 32];
        gpu_from_half(yh, y, 5 * 32);
        for (int64_t i = 0; i < sq * d; i++) {
            ck_assert_msg(isfinite(y[i]), "impl %d: y[%lld] = %g", impl, (long long)i, y[i]);
            if (i / d == 2)
                ck_assert_msg(y[i] == 0.0f, "impl %d: masked row: y[%lld] = %g", impl,
                              (long long)i, y[i]);
        }
        desc.kv_len = 0;
        ck_assert_int_eq(cudaMemset(dy, 0xff, sizeof yh), cudaSuccess);
        ck_assert_tci_ok(kern_attention(&desc, dq, dkv, dkv, NULL, NULL, dy, 0));
        gpu_sync();
        gpu_download(yh, dy, sizeof yh);
        gpu_from_half(yh, y, 5 * 32);
        for (int64_t i = 0; i < sq * d; i++)
            ck_assert_msg(y[i] == 0.0f, "impl %d: no keys: y = %g", impl, y[i]);
    }
    gpu_free(dq);
    gpu_free(dkv);
    gpu_free(dm);
    gpu_free(dy);
    free(q), free(kv), free(qh), free(kvh);
}
END_TEST

START_TEST(test_attention_errors) {
    kern_attention_desc desc = {.batch = 1, .heads = 1, .q_len = 4, .kv_len = 4, .head_dim = 40,
                                .dtype = F16};
    void *p = (void *)256;
    ck_assert_tci_error(kern_attention(&desc, p, p, p, NULL, NULL, p, 0),
                        TCI_ERR_UNSUPPORTED, "head dim 40");
    desc.head_dim = 64;
    desc.dtype = TCI_DTYPE_FLOAT;
    ck_assert_tci_error(kern_attention(&desc, p, p, p, NULL, NULL, p, 0),
                        TCI_ERR_UNSUPPORTED, "fp16 and bf16 only");
    desc.dtype = F16;
    desc.q_len = -1;
    ck_assert_tci_error(kern_attention(&desc, p, p, p, NULL, NULL, p, 0),
                        TCI_ERR_INVALID_ARGUMENT,
                        "negative");
    desc.q_len = 4;
    ck_assert_tci_error(kern_attention(&desc, NULL, p, p, NULL, NULL, p, 0),
                        TCI_ERR_INVALID_ARGUMENT,
                        "NULL");
    ck_assert(kern_attention_head_dim_ok(64) && kern_attention_head_dim_ok(80) &&
              !kern_attention_head_dim_ok(48));
    /* the FA2 kernel forced where it does not apply (element loads: Q one element off 16 bytes,
     * a head_dim stride other than 1), and an impl that is none */
    desc.q_strides[2] = 64, desc.q_strides[3] = 1;
    desc.k_strides[2] = 64, desc.k_strides[3] = 1;
    desc.v_strides[2] = 64, desc.v_strides[3] = 1;
    ck_assert(kern_attention_fa2_applies(&desc, p, p, p));
    ck_assert(!kern_attention_fa2_applies(&desc, (char *)p + 2, p, p));
    desc.impl = KERN_ATTENTION_FA2;
    ck_assert_tci_error(kern_attention(&desc, (char *)p + 2, p, p, NULL, NULL, p, 0),
                        TCI_ERR_UNSUPPORTED, "FA2 kernel needs");
    desc.k_strides[3] = 2;
    ck_assert(!kern_attention_fa2_applies(&desc, p, p, p));
    ck_assert_tci_error(kern_attention(&desc, p, p, p, NULL, NULL, p, 0), TCI_ERR_UNSUPPORTED,
                        "FA2 kernel needs");
    desc.impl = (kern_attention_impl)7;
    ck_assert_tci_error(kern_attention(&desc, p, p, p, NULL, NULL, p, 0),
                        TCI_ERR_INVALID_ARGUMENT, "impl 7");
}
END_TEST

int main(void) {
    gpu_require_device("gpu_attention");
    Suite *s = suite_create("gpu_attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_attention_errors);
    tcase_add_test(tc, test_attention_cudnn);
    tcase_add_test(tc, test_attention_window_mask);
    tcase_add_test(tc, test_attention_fully_masked);
    tcase_add_test(tc, test_attention_fa2_shapes);
    tcase_add_test(tc, test_attention_keep_mask);
    tcase_add_test(tc, test_attention_other_shapes);
    tcase_add_test(tc, test_attention_fp16_dense);
    tcase_add_test(tc, test_attention_fp16_head_split);
    tcase_add_test(tc, test_attention_bf16);
    tcase_add_test(tc, test_attention_packed);
    tcase_add_test(tc, test_attention_packed_odd);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
