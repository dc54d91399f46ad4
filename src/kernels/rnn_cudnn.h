/* One recurrent layer (LSTM, GRU, RNN) through cuDNN's RNN API (v8/v9: cudnnRNNForward,
 * CUDNN_RNN_ALGO_STANDARD, tensor-op math in fp16): the candidate timed against tcinfer's own
 * recurrence (rnn.h). A plan is made once at engine build (weights packed into cuDNN's weight
 * space), then run any number of times, also inside CUDA graph capture, at the built sizes or
 * fewer steps and sequences. It computes the input projection itself: it reads X. */
#ifndef TCI_KERNELS_RNN_CUDNN_H
#define TCI_KERNELS_RNN_CUDNN_H

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stddef.h>

#include "kernels/rnn_cudnn_pack.h"
#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_rnn_cudnn_plan kern_rnn_cudnn_plan;

/* TCI_ERR_UNSUPPORTED (the reason in tci_last_error()) where cuDNN does not compute the layer
 * as ONNX defines it (kern_rnn_cudnn_refusal) or refuses its descriptors; the caller then keeps
 * tcinfer's recurrence. The weights are read during the call only. */
tci_status kern_rnn_cudnn_create(cudnnHandle_t cudnn, const kern_rnn_cudnn_desc *d,
                                 const kern_rnn_onnx_weights *w, kern_rnn_cudnn_plan **out);
void kern_rnn_cudnn_destroy(kern_rnn_cudnn_plan *p);
/* What runs it, for reports. */
const char *kern_rnn_cudnn_name(const kern_rnn_cudnn_plan *p);
/* Workspace bytes a run of seq_length steps over batch sequences needs (at most the plan's). */
tci_status kern_rnn_cudnn_workspace(const kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                                    int64_t seq_length, int64_t batch, size_t *out_bytes);
/* The layer over x (X, in the storage type and the desc's layout; seq_length and batch at most
 * the plan's): the initial state from state (fp32, plan_rnn's rows of directions*batch*hidden:
 * row 0 h, row 2 c), the final state written back there (h into row seq_length & 1, c into row
 * 2), where tcinfer's final-state step reads it; y (may be NULL) receives ONNX's Y. */
tci_status kern_rnn_cudnn_run(const kern_rnn_cudnn_plan *p, cudnnHandle_t cudnn,
                              cudaStream_t stream, int64_t seq_length, int64_t batch,
                              const void *x, float *state, void *y, void *workspace,
                              size_t workspace_bytes);

#ifdef __cplusplus
}
#endif

#endif
