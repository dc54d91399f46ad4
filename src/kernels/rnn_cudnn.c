/* A recurrent layer through cuDNN's RNN API: the descriptors and the packed weight space made
 * once, then cudnnRNNForward (inference mode) per run with descriptors of that run's sizes,
 * between casts of the initial and final states from and to tcinfer's fp32 state rows. */
#include "kernels/rnn_cudnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cast.h"
#include "kernels/copy.h"
#include "kernels/cuda_check.h"
#include "util/half.h"

struct kern_rnn_cudnn_plan {
    kern_rnn_cudnn_desc d;
    cudnnDataType_t type;
    size_t elem;                 /* bytes of the storage type */
    cudnnDropoutDescriptor_t dropout;
    cudnnRNNDescriptor_t rnn;
    size_t weight_bytes;
    void *weights;               /* device: cuDNN's weight space */
    int32_t *lens;               /* device: row t-1 holds d.batch lengths t (devSeqLengths) */
    char name[64];
};

/* The descriptors of one run's sizes (every sequence full length). */
typedef struct run_descs {
    cudnnRNNDataDescriptor_t x, y;
    cudnnTensorDescriptor_t h; /* h and c: directions x batch x hidden */
    int *lens;                 /* host: batch lengths */
} run_descs;

/* Where a run's pieces lie in the workspace (bytes, 256-aligned). */
typedef struct run_layout {
    size_t temp;   /* cuDNN's temp space, first */
    size_t state;  /* each of hx, cx, hy, cy */
    size_t y;      /* Y as cuDNN lays it out, where ONNX's differs or Y is not wanted */
    size_t total;
} run_layout;

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static void descs_free(run_descs *r) {
    if (r->x) cudnnDestroyRNNDataDescriptor(r->x);
    if (r->y) cudnnDestroyRNNDataDescriptor(r->y);
    if (r->h) cudnnDestroyTensorDescriptor(r->h);
    free(r->lens);
}

static tci_status descs_make(const kern_rnn_cudnn_plan *p, int64_t steps, int64_t batch,
                             run_descs *r) {
    const kern_rnn_cudnn_desc *d = &p->d;
    if (steps < 1 || batch < 1 || steps > d->seq_length || batch > d->batch)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_rnn_cudnn: %lld steps of %lld sequences outside the plan's "
                            "%lld of %lld",
                            (long long)steps, (long long)batch, (long long)d->seq_length,
                            (long long)d->batch);
    r->lens = malloc((size_t)batch * sizeof(int));
    if (!r->lens) return status_error(TCI_ERR_OUT_OF_MEMORY, "kern_rnn_cudnn: out of memory");
    for (int64_t b = 0; b < batch; b++) r->lens[b] = (int)steps;
    cudnnRNNDataLayout_t layout = d->batch_major ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
                                                 : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    KERN_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&r->x));
    KERN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(r->x, p->type, layout, (int)steps, (int)batch,
                                               (int)d->input, r->lens, NULL));
    KERN_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&r->y));
    KERN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(r->y, p->type, layout, (int)steps, (int)batch,
                                               (int)(d->directions * d->hidden), r->lens, NULL));
    const int dims[3] = {(int)d->directions, (int)batch, (int)d->hidden};
    const int strides[3] = {(int)(batch * d->hidden), (int)d->hidden, 1};
    KERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&r->h));
    KERN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(r->h, p->type, 3, dims, strides));
    return TCI_OK;
}

static tci_status layout_of(const kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                            const run_descs *r, int64_t steps, int64_t batch, run_layout *out) {
    size_t temp = 0, reserve = 0;
    KERN_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(cudnn, p->rnn, CUDNN_FWD_MODE_INFERENCE, r->x,
                                               &temp, &reserve));
    const size_t n = (size_t)(p->d.directions * batch * p->d.hidden);
    out->temp = align256(temp);
    out->state = align256(n * p->elem);
    out->y = align256((size_t)steps * n * p->elem);
    out->total = out->temp + 4 * out->state + out->y;
    return TCI_OK;
}

/* A slot from a descriptor cudnnGetRNNWeightParams filled and the address it gave. */
static tci_status slot_of(const kern_rnn_cudnn_plan *p, cudnnTensorDescriptor_t desc,
                          const void *addr, kern_rnn_param_slot *slot) {
    cudnnDataType_t type;
    int nb = 0, dims[8], strides[8];
    KERN_CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc, 8, &type, &nb, dims, strides));
    ptrdiff_t bytes = (const char *)addr - (const char *)p->weights;
    if (!addr || nb < 2 || nb > 8 || type != p->type || bytes < 0 ||
        (size_t)bytes % p->elem != 0)
        return status_error(TCI_ERR_UNSUPPORTED, "cuDNN's weight slots are not as expected");
    slot->offset = (int64_t)((size_t)bytes / p->elem);
    slot->rows = dims[nb - 2];
    slot->cols = dims[nb - 1];
    slot->row_stride = strides[nb - 2];
    slot->col_stride = strides[nb - 1];
    return TCI_OK;
}

static tci_status read_slots(kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                             cudnnTensorDescriptor_t m, cudnnTensorDescriptor_t b,
                             kern_rnn_param_slot *matrices, kern_rnn_param_slot *biases) {
    const int gates = kern_rnn_cudnn_gates(p->d.cell);
    for (int dir = 0; dir < (int)p->d.directions; dir++)
        for (int lin = 0; lin < 2 * gates; lin++) {
            void *maddr = NULL, *baddr = NULL;
            KERN_CUDNN_CHECK(cudnnGetRNNWeightParams(cudnn, p->rnn, dir, p->weight_bytes,
                                                     p->weights, lin, m, &maddr, b, &baddr));
            TRY_STATUS(slot_of(p, m, maddr, &matrices[dir * 2 * gates + lin]));
            TRY_STATUS(slot_of(p, b, baddr, &biases[dir * 2 * gates + lin]));
        }
    return TCI_OK;
}

/* The weight space packed on the host (in the storage type) and uploaded. */
static tci_status upload_weights(kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                                 const kern_rnn_onnx_weights *w) {
    const int gates = kern_rnn_cudnn_gates(p->d.cell);
    const size_t slots = (size_t)(p->d.directions * 2 * gates);
    const int64_t count = (int64_t)(p->weight_bytes / p->elem);
    kern_rnn_param_slot *matrices = calloc(2 * slots, sizeof *matrices);
    float *space = malloc((size_t)count * sizeof(float) + 1);
    void *packed = malloc(p->weight_bytes + 1);
    cudnnTensorDescriptor_t m = NULL, b = NULL;
    tci_status st = TCI_OK;
    if (!matrices || !space || !packed)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "kern_rnn_cudnn: out of memory packing weights");
    if (st == TCI_OK && (cudnnCreateTensorDescriptor(&m) != CUDNN_STATUS_SUCCESS ||
                         cudnnCreateTensorDescriptor(&b) != CUDNN_STATUS_SUCCESS))
        st = status_error(TCI_ERR_CUDA, "kern_rnn_cudnn: cudnnCreateTensorDescriptor failed");
    if (st == TCI_OK) st = read_slots(p, cudnn, m, b, matrices, matrices + slots);
    if (st == TCI_OK)
        st = kern_rnn_cudnn_pack(&p->d, w, matrices, matrices + slots, space, count);
    if (st == TCI_OK) {
        for (int64_t i = 0; i < count; i++) {
            if (p->d.dtype == TCI_DTYPE_FLOAT16) ((uint16_t *)packed)[i] = float_to_half(space[i]);
            else ((float *)packed)[i] = space[i];
        }
        cudaError_t e = cudaMemcpy(p->weights, packed, p->weight_bytes, cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = status_error(TCI_ERR_CUDA, "kern_rnn_cudnn: uploading the weights: %s",
                              cudaGetErrorString(e));
    }
    if (m) cudnnDestroyTensorDescriptor(m);
    if (b) cudnnDestroyTensorDescriptor(b);
    free(matrices);
    free(space);
    free(packed);
    return st;
}

static tci_status upload_lengths(kern_rnn_cudnn_plan *p) {
    const size_t n = (size_t)(p->d.seq_length * p->d.batch);
    int32_t *host = malloc(n * sizeof(int32_t));
    if (!host) return status_error(TCI_ERR_OUT_OF_MEMORY, "kern_rnn_cudnn: out of memory");
    for (size_t i = 0; i < n; i++) host[i] = (int32_t)(i / (size_t)p->d.batch) + 1;
    cudaError_t e = cudaMalloc((void **)&p->lens, n * sizeof(int32_t));
    if (e == cudaSuccess)
        e = cudaMemcpy(p->lens, host, n * sizeof(int32_t), cudaMemcpyHostToDevice);
    free(host);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return status_error(TCI_ERR_CUDA, "kern_rnn_cudnn: the sequence lengths: %s",
                            cudaGetErrorString(e));
    }
    return TCI_OK;
}

static tci_status setup(kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                        const kern_rnn_onnx_weights *w) {
    const kern_rnn_cudnn_desc *d = &p->d;
    const bool fp16 = d->dtype == TCI_DTYPE_FLOAT16;
    const cudnnRNNMode_t mode = d->cell == KERN_RNN_LSTM  ? CUDNN_LSTM
                                : d->cell == KERN_RNN_GRU ? CUDNN_GRU
                                                          : CUDNN_RNN_TANH;
    /* fp16: tensor cores; fp32: FMA, or TF32 where the engine allows it */
    const cudnnMathType_t math = fp16 ? CUDNN_TENSOR_OP_MATH
                                 : d->tf32 ? CUDNN_DEFAULT_MATH
                                           : CUDNN_FMA_MATH;
    KERN_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&p->dropout));
    KERN_CUDNN_CHECK(cudnnSetDropoutDescriptor(p->dropout, cudnn, 0.0f, NULL, 0, 0));
    KERN_CUDNN_CHECK(cudnnCreateRNNDescriptor(&p->rnn));
    /* fp32 compute; fp16 storage falls back to fp16 compute where cuDNN refuses that */
    bool fp16_math = false;
    cudnnStatus_t set = CUDNN_STATUS_NOT_SUPPORTED;
    for (int k = 0; k < (fp16 ? 2 : 1) && set != CUDNN_STATUS_SUCCESS; k++) {
        fp16_math = k == 1;
        set = cudnnSetRNNDescriptor_v8(
            p->rnn, CUDNN_RNN_ALGO_STANDARD, mode, CUDNN_RNN_DOUBLE_BIAS,
            d->directions == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
            p->type, fp16_math ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT, math, (int32_t)d->input,
            (int32_t)d->hidden, (int32_t)d->hidden, 1, p->dropout, CUDNN_RNN_PADDED_IO_ENABLED);
    }
    if (set != CUDNN_STATUS_SUCCESS)
        return status_error(TCI_ERR_CUDA, "cudnnSetRNNDescriptor_v8 failed at %s:%d: %s",
                            __FILE__, __LINE__, cudnnGetErrorString(set));
    KERN_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(cudnn, p->rnn, &p->weight_bytes));
    if (p->weight_bytes == 0 || p->weight_bytes % p->elem != 0)
        return status_error(TCI_ERR_UNSUPPORTED, "cuDNN's weight space has %zu bytes",
                            p->weight_bytes);
    KERN_CUDA_CHECK(cudaMalloc(&p->weights, p->weight_bytes));
    TRY_STATUS(upload_weights(p, cudnn, w));
    TRY_STATUS(upload_lengths(p));
    snprintf(p->name, sizeof p->name, "cuDNN RNN (standard, %s)",
             fp16_math ? "tensor ops, fp16 compute" : fp16 ? "tensor ops" : d->tf32 ? "tf32"
                                                                             : "fp32 FMA");
    return TCI_OK;
}

tci_status kern_rnn_cudnn_create(cudnnHandle_t cudnn, const kern_rnn_cudnn_desc *d,
                                 const kern_rnn_onnx_weights *w, kern_rnn_cudnn_plan **out) {
    *out = NULL;
    const char *why = kern_rnn_cudnn_refusal(d, w->peep);
    if (why) return status_error(TCI_ERR_UNSUPPORTED, "%s", why);
    kern_rnn_cudnn_plan *p = calloc(1, sizeof *p);
    if (!p) return status_error(TCI_ERR_OUT_OF_MEMORY, "kern_rnn_cudnn: out of memory");
    p->d = *d;
    p->type = d->dtype == TCI_DTYPE_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    p->elem = d->dtype == TCI_DTYPE_FLOAT16 ? 2 : 4;
    tci_status st = setup(p, cudnn, w);
    if (st != TCI_OK) {
        kern_rnn_cudnn_destroy(p);
        /* a cuDNN call refusing the layer (no CUDA error behind it) is a refusal: tcinfer's
         * recurrence runs the layer */
        if (st == TCI_ERR_CUDA && cudaPeekAtLastError() == cudaSuccess) {
            char text[512];
            snprintf(text, sizeof text, "%s", tci_last_error());
            st = status_error(TCI_ERR_UNSUPPORTED, "cuDNN refuses the layer: %s", text);
        }
        return st;
    }
    *out = p;
    return TCI_OK;
}

void kern_rnn_cudnn_destroy(kern_rnn_cudnn_plan *p) {
    if (!p) return;
    if (p->rnn) cudnnDestroyRNNDescriptor(p->rnn);
    if (p->dropout) cudnnDestroyDropoutDescriptor(p->dropout);
    cudaFree(p->weights);
    cudaFree(p->lens);
    free(p);
}

const char *kern_rnn_cudnn_name(const kern_rnn_cudnn_plan *p) { return p->name; }

tci_status kern_rnn_cudnn_workspace(const kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                                    int64_t seq_length, int64_t batch, size_t *out_bytes) {
    *out_bytes = 0;
    run_descs r;
    memset(&r, 0, sizeof r);
    run_layout l;
    tci_status st = descs_make(p, seq_length, batch, &r);
    if (st == TCI_OK) st = layout_of(p, cudnn, &r, seq_length, batch, &l);
    if (st == TCI_OK) *out_bytes = l.total;
    descs_free(&r);
    return st;
}

static tci_status forward(const kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn, cudaStream_t stream,
                          const run_descs *r, int64_t steps, int64_t batch, const void *x,
                          float *state, void *y, void *workspace, size_t workspace_bytes) {
    const kern_rnn_cudnn_desc *d = &p->d;
    run_layout l;
    TRY_STATUS(layout_of(p, cudnn, r, steps, batch, &l));
    if (!workspace || workspace_bytes < l.total)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_rnn_cudnn_run: the workspace has %zu bytes, the run needs %zu",
                            workspace_bytes, l.total);
    char *temp = workspace, *hx = temp + l.temp, *cx = hx + l.state, *hy = cx + l.state;
    char *cy = hy + l.state, *ytmp = cy + l.state;
    const bool lstm = d->cell == KERN_RNN_LSTM;
    const int64_t n = d->directions * batch * d->hidden;
    /* cuDNN's Y is (steps, batch, directions, hidden) in the sequence-major layout, ONNX's
     * (steps, directions, batch, hidden): the same only for one direction */
    const bool direct = y && (d->batch_major || d->directions == 1);
    TRY_STATUS(kern_cast(state, TCI_DTYPE_FLOAT, hx, d->dtype, n, stream));
    if (lstm) TRY_STATUS(kern_cast(state + 2 * n, TCI_DTYPE_FLOAT, cx, d->dtype, n, stream));
    KERN_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
    KERN_CUDNN_CHECK(cudnnRNNForward(cudnn, p->rnn, CUDNN_FWD_MODE_INFERENCE,
                                     p->lens + (steps - 1) * d->batch, r->x, x, r->y,
                                     direct ? y : (void *)ytmp, r->h, hx, hy, r->h,
                                     lstm ? cx : NULL, lstm ? cy : NULL, p->weight_bytes,
                                     p->weights, l.temp, temp, 0, NULL));
    if (y && !direct) {
        kern_copy_desc c;
        memset(&c, 0, sizeof c);
        c.rank = 4;
        c.elem_size = (int)p->elem;
        const int64_t D = d->directions, H = d->hidden, B = batch;
        const int64_t shape[4] = {steps, D, B, H};
        const int64_t dst[4] = {D * B * H, B * H, H, 1}, src[4] = {B * D * H, H, D * H, 1};
        for (int k = 0; k < 4; k++) {
            c.shape[k] = shape[k];
            c.dst_strides[k] = dst[k];
            c.src_strides[k] = src[k];
        }
        TRY_STATUS(kern_strided_copy(y, ytmp, &c, stream));
    }
    TRY_STATUS(kern_cast(hy, d->dtype, state + (steps & 1) * n, TCI_DTYPE_FLOAT, n, stream));
    if (lstm) TRY_STATUS(kern_cast(cy, d->dtype, state + 2 * n, TCI_DTYPE_FLOAT, n, stream));
    return TCI_OK;
}

tci_status kern_rnn_cudnn_run(const kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                              cudaStream_t stream, int64_t seq_length, int64_t batch,
                              const void *x, float *state, void *y, void *workspace,
                              size_t workspace_bytes) {
    if (!p || !x || !state)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rnn_cudnn_run: missing buffers");
    run_descs r;
    memset(&r, 0, sizeof r);
    tci_status st = descs_make(p, seq_length, batch, &r);
    if (st == TCI_OK)
        st = forward(p, cudnn, stream, &r, seq_length, batch, x, state, y, workspace,
                     workspace_bytes);
    descs_free(&r);
    return st;
}
