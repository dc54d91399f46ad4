/* cuDNN's fused attention: the operation graph built descriptor by descriptor (the C backend
 * API), cuDNN's heuristics asked for engines, the first whose execution plan finalises kept.
 * Every descriptor made lives as long as the plan (the execution plan refers to its graph). */
#include "kernels/attention_cudnn.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_check.h"
#include "util/status.h"

/* Unique ids of the tensors a run binds; the graph's virtual tensors count up from VIRTUAL. */
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE, UID_NEG_INF, UID_VIRTUAL = 100 };
enum { MAX_DESCS = 64, MAX_OPS = 16 };

struct kern_attention_cudnn_plan {
    kern_attention_desc d;
    cudnnBackendDescriptor_t descs[MAX_DESCS]; /* every one made, destroyed with the plan */
    int num_descs;
    cudnnBackendDescriptor_t ops[MAX_OPS];     /* the graph's operations, in order */
    int num_ops;
    int64_t next_uid;
    cudnnBackendDescriptor_t exec;             /* the execution plan kept */
    size_t workspace;
    float scale, neg_inf;                      /* the by-value scalars a run passes */
    char name[64];
};

/* A cuDNN call while building: a failure is cuDNN refusing the graph (UNSUPPORTED), its
 * reason cuDNN's last error text. */
#define BUILD_CHECK(call)                                                                         \
    do {                                                                                          \
        cudnnStatus_t build_st_ = (call);                                                         \
        if (build_st_ != CUDNN_STATUS_SUCCESS) return refused(#call, build_st_);                  \
    } while (0)

static tci_status refused(const char *call, cudnnStatus_t st) {
    char text[256] = "";
    cudnnGetLastErrorString(text, sizeof text);
    if (st == CUDNN_STATUS_ALLOC_FAILED)
        return status_error(TCI_ERR_OUT_OF_MEMORY, "%s: %s", call, cudnnGetErrorString(st));
    return status_error(TCI_ERR_UNSUPPORTED, "%s: %s%s%s", call, cudnnGetErrorString(st),
                        text[0] ? ": " : "", text);
}

static tci_status make(kern_attention_cudnn_plan *p, cudnnBackendDescriptorType_t type,
                       cudnnBackendDescriptor_t *out) {
    if (p->num_descs == MAX_DESCS)
        return status_error(TCI_ERR_INTERNAL, "kern_attention_cudnn: too many descriptors");
    BUILD_CHECK(cudnnBackendCreateDescriptor(type, out));
    p->descs[p->num_descs++] = *out;
    return TCI_OK;
}

static tci_status set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                      cudnnBackendAttributeType_t type, int64_t count, const void *value) {
    BUILD_CHECK(cudnnBackendSetAttribute(d, name, type, count, value));
    return TCI_OK;
}

static tci_status set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                           cudnnBackendDescriptor_t value) {
    return set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

static tci_status finalize(cudnnBackendDescriptor_t d) {
    BUILD_CHECK(cudnnBackendFinalize(d));
    return TCI_OK;
}

/* A 4-D tensor: uid 0 makes a virtual one (the next virtual uid); by_value a host scalar. */
static tci_status tensor(kern_attention_cudnn_plan *p, int64_t uid, cudnnDataType_t type,
                         const int64_t dims[4], const int64_t strides[4], bool by_value,
                         cudnnBackendDescriptor_t *out) {
    const bool is_virtual = uid == 0;
    const int64_t align = 16;
    if (is_virtual) uid = p->next_uid++;
    TRY_STATUS(make(p, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
    TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    if (is_virtual)
        TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    if (by_value)
        TRY_STATUS(set(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
    return finalize(*out);
}

/* A virtual tensor of dims, densely strided. */
static tci_status virt(kern_attention_cudnn_plan *p, cudnnDataType_t type, int64_t d0, int64_t d1,
                       int64_t d2, int64_t d3, cudnnBackendDescriptor_t *out) {
    const int64_t dims[4] = {d0, d1, d2, d3};
    const int64_t strides[4] = {d1 * d2 * d3, d2 * d3, d3, 1};
    return tensor(p, 0, type, dims, strides, false, out);
}

static tci_status add_op(kern_attention_cudnn_plan *p, cudnnBackendDescriptor_t op) {
    TRY_STATUS(finalize(op));
    if (p->num_ops == MAX_OPS)
        return status_error(TCI_ERR_INTERNAL, "kern_attention_cudnn: too many operations");
    p->ops[p->num_ops++] = op;
    return TCI_OK;
}

/* y = mode(x, b, t) in precision prec; axis >= 0 for GEN_INDEX. */
static tci_status pointwise(kern_attention_cudnn_plan *p, cudnnPointwiseMode_t mode,
                            cudnnDataType_t prec, int64_t axis, cudnnBackendDescriptor_t x,
                            cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                            cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw, op;
    TRY_STATUS(make(p, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
    TRY_STATUS(set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    TRY_STATUS(set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    if (axis >= 0) TRY_STATUS(set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
    TRY_STATUS(finalize(pw));
    TRY_STATUS(make(p, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
    if (b) TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b));
    if (t) TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
    return add_op(p, op);
}

/* y = the max or sum of x over the dims where y is 1 (fp32). */
static tci_status reduction(kern_attention_cudnn_plan *p, cudnnReduceTensorOp_t how,
                            cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t r, op;
    TRY_STATUS(make(p, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &r));
    TRY_STATUS(set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how));
    TRY_STATUS(set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    TRY_STATUS(finalize(r));
    TRY_STATUS(make(p, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, &op));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y));
    return add_op(p, op);
}

/* c = a b over the last two dims, batched over the first two (fp32 accumulation). */
static tci_status matmul(kern_attention_cudnn_plan *p, cudnnBackendDescriptor_t a,
                         cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t m, op;
    TRY_STATUS(make(p, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &m));
    TRY_STATUS(set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    TRY_STATUS(finalize(m));
    TRY_STATUS(make(p, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &op));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
    TRY_STATUS(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, m));
    return add_op(p, op);
}

/* The graph: S = Q K^T; S *= scale; [causal: S = row >= col ? S : -inf]; P = softmax(S) in
 * the storage type (with its statistics, virtual); O = P V. */
static tci_status build_graph(kern_attention_cudnn_plan *p, cudnnDataType_t io) {
    const kern_attention_desc *d = &p->d;
    const int64_t B = d->batch, H = d->heads, SQ = d->q_len, SK = d->kv_len, D = d->head_dim;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const int64_t one[4] = {1, 1, 1, 1};
    const int64_t qd[4] = {B, H, SQ, D}, ktd[4] = {B, H, D, SK}, vd[4] = {B, H, SK, D};
    const int64_t kts[4] = {d->k_strides[0], d->k_strides[1], d->k_strides[3], d->k_strides[2]};
    int64_t ys[4] = {H * SQ * D, SQ * D, D, 1};
    if (d->y_strides[0] || d->y_strides[1] || d->y_strides[2] || d->y_strides[3])
        memcpy(ys, d->y_strides, sizeof ys);
    cudnnBackendDescriptor_t q, kt, v, o, scale, s, scaled, max, sub, ex, sum, prob;
    TRY_STATUS(tensor(p, UID_Q, io, qd, d->q_strides, false, &q));
    TRY_STATUS(tensor(p, UID_K, io, ktd, kts, false, &kt));
    TRY_STATUS(tensor(p, UID_V, io, vd, d->v_strides, false, &v));
    TRY_STATUS(tensor(p, UID_O, io, qd, ys, false, &o));
    TRY_STATUS(tensor(p, UID_SCALE, f32, one, one, true, &scale));

    TRY_STATUS(virt(p, f32, B, H, SQ, SK, &s));
    TRY_STATUS(matmul(p, q, kt, s));
    TRY_STATUS(virt(p, f32, B, H, SQ, SK, &scaled));
    TRY_STATUS(pointwise(p, CUDNN_POINTWISE_MUL, f32, -1, s, scale, NULL, scaled));
    if (d->causal) {
        cudnnBackendDescriptor_t row, col, keep, neg_inf, masked;
        TRY_STATUS(tensor(p, UID_NEG_INF, f32, one, one, true, &neg_inf));
        TRY_STATUS(virt(p, CUDNN_DATA_INT32, B, H, SQ, SK, &row));
        TRY_STATUS(pointwise(p, CUDNN_POINTWISE_GEN_INDEX, f32, 2, scaled, NULL, NULL, row));
        TRY_STATUS(virt(p, CUDNN_DATA_INT32, B, H, SQ, SK, &col));
        TRY_STATUS(pointwise(p, CUDNN_POINTWISE_GEN_INDEX, f32, 3, scaled, NULL, NULL, col));
        TRY_STATUS(virt(p, CUDNN_DATA_BOOLEAN, B, H, SQ, SK, &keep));
        TRY_STATUS(pointwise(p, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL,
                             keep));
        TRY_STATUS(virt(p, f32, B, H, SQ, SK, &masked));
        /* masked = keep ? scaled : -inf */
        TRY_STATUS(pointwise(p, CUDNN_POINTWISE_BINARY_SELECT, f32, -1, scaled, neg_inf, keep,
                             masked));
        scaled = masked;
    }
    TRY_STATUS(virt(p, f32, B, H, SQ, 1, &max));
    TRY_STATUS(reduction(p, CUDNN_REDUCE_TENSOR_MAX, scaled, max));
    TRY_STATUS(virt(p, f32, B, H, SQ, SK, &sub));
    TRY_STATUS(pointwise(p, CUDNN_POINTWISE_SUB, f32, -1, scaled, max, NULL, sub));
    TRY_STATUS(virt(p, f32, B, H, SQ, SK, &ex));
    TRY_STATUS(pointwise(p, CUDNN_POINTWISE_EXP, f32, -1, sub, NULL, NULL, ex));
    TRY_STATUS(virt(p, f32, B, H, SQ, 1, &sum));
    TRY_STATUS(reduction(p, CUDNN_REDUCE_TENSOR_ADD, ex, sum));
    /* the softmax statistics max + log(sum), into a virtual tensor: nothing reads them, but
     * cuDNN's fused-attention engines recognise the softmax only with them (cuDNN 9.14 and 9.19
     * on the H200: without them the heuristics return no engine) */
    cudnnBackendDescriptor_t log_sum, stats;
    TRY_STATUS(virt(p, f32, B, H, SQ, 1, &log_sum));
    TRY_STATUS(pointwise(p, CUDNN_POINTWISE_LOG, f32, -1, sum, NULL, NULL, log_sum));
    TRY_STATUS(virt(p, f32, B, H, SQ, 1, &stats));
    TRY_STATUS(pointwise(p, CUDNN_POINTWISE_ADD, f32, -1, max, log_sum, NULL, stats));
    TRY_STATUS(virt(p, io, B, H, SQ, SK, &prob));
    TRY_STATUS(pointwise(p, CUDNN_POINTWISE_DIV, f32, -1, ex, sum, NULL, prob));
    return matmul(p, prob, v, o);
}

/* The engine a config names, for reports. */
static void name_engine(kern_attention_cudnn_plan *p, cudnnBackendDescriptor_t cfg) {
    snprintf(p->name, sizeof p->name, "cuDNN fused attention");
    cudnnBackendDescriptor_t engine = NULL;
    int64_t got = 0, index = -1;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) !=
        CUDNN_STATUS_SUCCESS)
        return;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &got, &engine) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got,
                                 &index) == CUDNN_STATUS_SUCCESS)
        snprintf(p->name, sizeof p->name, "cuDNN fused attention (engine %lld)",
                 (long long)index);
    cudnnBackendDestroyDescriptor(engine);
}

/* The first of the heuristics' engine configs whose execution plan finalises. The graph's
 * and the plan's handle attributes are deprecated in cuDNN 9's headers but still what binds a
 * handle to them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static tci_status choose_engine(kern_attention_cudnn_plan *p, cudnnHandle_t cudnn) {
    cudnnBackendDescriptor_t graph, heur;
    TRY_STATUS(make(p, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    TRY_STATUS(set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                   p->num_ops, p->ops));
    TRY_STATUS(set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &cudnn));
    TRY_STATUS(finalize(graph));
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    TRY_STATUS(make(p, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    TRY_STATUS(set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
    TRY_STATUS(set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    TRY_STATUS(finalize(heur));
    int64_t count = 0;
    BUILD_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (count <= 0)
        return status_error(TCI_ERR_UNSUPPORTED, "no cuDNN engine takes the attention graph");
    if (count > 8) count = 8;
    cudnnBackendDescriptor_t cfgs[8];
    for (int64_t i = 0; i < count; i++) TRY_STATUS(make(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    int64_t got = 0;
    BUILD_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs));
    tci_status st = status_error(TCI_ERR_UNSUPPORTED, "no cuDNN engine takes the attention graph");
    for (int64_t i = 0; i < got; i++) {
        cudnnBackendDescriptor_t exec;
        TRY_STATUS(make(p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &exec));
        TRY_STATUS(set(exec, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &cudnn));
        TRY_STATUS(set_desc(exec, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i]));
        st = finalize(exec);
        if (st == TCI_ERR_UNSUPPORTED) continue; /* the next engine; the last reason kept */
        TRY_STATUS(st);
        int64_t bytes = 0, n = 0;
        BUILD_CHECK(cudnnBackendGetAttribute(exec, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &n, &bytes));
        p->exec = exec;
        p->workspace = bytes > 0 ? (size_t)bytes : 0;
        name_engine(p, cfgs[i]);
        status_error_clear();
        return TCI_OK;
    }
    return st;
}
#pragma GCC diagnostic pop

static bool strided_by_one(const int64_t s[4]) { return s[3] == 1; }

tci_status kern_attention_cudnn_create(cudnnHandle_t cudnn, const kern_attention_desc *d,
                                       bool masked, kern_attention_cudnn_plan **out) {
    *out = NULL;
    if (masked)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "an additive or keep mask (tcinfer offers cuDNN unmasked and causal "
                            "attention only)");
    if (!d || d->batch < 1 || d->heads < 1 || d->q_len < 1 || d->kv_len < 1)
        return status_error(TCI_ERR_UNSUPPORTED, "empty attention");
    const tci_dtype dt = d->dtype ? d->dtype : TCI_DTYPE_FLOAT16;
    if (dt != TCI_DTYPE_FLOAT16 && dt != TCI_DTYPE_BFLOAT16)
        return status_error(TCI_ERR_UNSUPPORTED, "cuDNN's fused attention takes fp16 or bf16");
    if (d->head_dim % 8 != 0 || d->head_dim < 8 || d->head_dim > 128)
        return status_error(TCI_ERR_UNSUPPORTED, "head dim %lld (cuDNN: multiples of 8 to 128)",
                            (long long)d->head_dim);
    const bool dense_y = !d->y_strides[0] && !d->y_strides[1] && !d->y_strides[2] &&
                         !d->y_strides[3];
    if (!strided_by_one(d->q_strides) || !strided_by_one(d->k_strides) ||
        !strided_by_one(d->v_strides) || (!dense_y && !strided_by_one(d->y_strides)))
        return status_error(TCI_ERR_UNSUPPORTED, "Q, K, V or Y is strided along the head dim");
    kern_attention_cudnn_plan *p = calloc(1, sizeof *p);
    if (!p) return status_error(TCI_ERR_OUT_OF_MEMORY, "kern_attention_cudnn: out of memory");
    p->d = *d;
    p->d.dtype = dt;
    p->d.impl = KERN_ATTENTION_AUTO;
    p->next_uid = UID_VIRTUAL;
    p->scale = d->scale;
    /* cuDNN before 9.10 wants the lowest finite value as the mask's fill */
    p->neg_inf = cudnnGetVersion() < 91000 ? -FLT_MAX : -INFINITY;
    tci_status st = build_graph(p, dt == TCI_DTYPE_BFLOAT16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF);
    if (st == TCI_OK) st = choose_engine(p, cudnn);
    if (st != TCI_OK) {
        kern_attention_cudnn_destroy(p);
        return st;
    }
    *out = p;
    return TCI_OK;
}

void kern_attention_cudnn_destroy(kern_attention_cudnn_plan *p) {
    if (!p) return;
    for (int i = p->num_descs - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->descs[i]);
    free(p);
}

const char *kern_attention_cudnn_name(const kern_attention_cudnn_plan *p) { return p->name; }

size_t kern_attention_cudnn_workspace(const kern_attention_cudnn_plan *p) { return p->workspace; }

static bool same4(const int64_t a[4], const int64_t b[4]) {
    return memcmp(a, b, 4 * sizeof(int64_t)) == 0;
}

static bool aligned16(const void *q, const void *k, const void *v, const void *y) {
    return ((uintptr_t)q | (uintptr_t)k | (uintptr_t)v | (uintptr_t)y) % 16 == 0;
}

bool kern_attention_cudnn_applies(const kern_attention_cudnn_plan *p,
                                  const kern_attention_desc *d, const void *q, const void *k,
                                  const void *v, const void *y) {
    const kern_attention_desc *a = &p->d;
    const tci_dtype dt = d->dtype ? d->dtype : TCI_DTYPE_FLOAT16;
    return a->batch == d->batch && a->heads == d->heads && a->q_len == d->q_len &&
           a->kv_len == d->kv_len && a->head_dim == d->head_dim && same4(a->q_strides, d->q_strides) &&
           same4(a->k_strides, d->k_strides) && same4(a->v_strides, d->v_strides) &&
           same4(a->y_strides, d->y_strides) && a->scale == d->scale && a->causal == d->causal &&
           a->dtype == dt && q && k && v && y && aligned16(q, k, v, y);
}

tci_status kern_attention_cudnn_run(const kern_attention_cudnn_plan *p, cudnnHandle_t cudnn,
                                    cudaStream_t stream, const void *q, const void *k,
                                    const void *v, void *y, void *workspace,
                                    size_t workspace_bytes) {
    if (!q || !k || !v || !y)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_attention_cudnn: NULL operand");
    if (!aligned16(q, k, v, y))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_attention_cudnn: Q, K, V and Y must be 16-byte aligned");
    if (workspace_bytes < p->workspace || (p->workspace && !workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_attention_cudnn: %zu bytes of workspace, the plan needs %zu",
                            workspace_bytes, p->workspace);
    const int64_t uids[6] = {UID_Q, UID_K, UID_V, UID_O, UID_SCALE, UID_NEG_INF};
    void *ptrs[6] = {(void *)q, (void *)k, (void *)v, y, (void *)&p->scale, (void *)&p->neg_inf};
    const int64_t n = p->d.causal ? 6 : 5;
    KERN_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
    cudnnBackendDescriptor_t pack = NULL;
    KERN_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    cudnnStatus_t cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                                CUDNN_TYPE_INT64, n, uids);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                      1, &workspace);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnBackendFinalize(pack);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnBackendExecute(cudnn, p->exec, pack);
    cudnnBackendDestroyDescriptor(pack);
    if (cs != CUDNN_STATUS_SUCCESS) {
        char text[256] = "";
        cudnnGetLastErrorString(text, sizeof text);
        return status_error(TCI_ERR_CUDA, "cuDNN's fused attention failed: %s%s%s",
                            cudnnGetErrorString(cs), text[0] ? ": " : "", text);
    }
    return TCI_OK;
}
