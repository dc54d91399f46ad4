/* Fused scaled-dot-product attention through cuDNN's graph (backend) API: the candidate timed
 * against tcinfer's own kernel (attention.h) at engine build. The graph is the one cuDNN's fused
 * flash-attention engines recognise: Q K^T (fp32), times the scale, the causal mask where asked
 * (row index >= column index, else -inf), the softmax as max / subtract / exp / sum / divide
 * (and the statistics max + log(sum) into a virtual tensor, without which cuDNN's engines do not
 * recognise it), the probabilities in the storage type, times V. A plan is made once for one
 * descriptor (its sizes and strides) and then runs any number of times, also inside CUDA graph
 * capture. */
#ifndef TCI_KERNELS_ATTENTION_CUDNN_H
#define TCI_KERNELS_ATTENTION_CUDNN_H

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdbool.h>
#include <stddef.h>

#include "kernels/attention.h"
#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_attention_cudnn_plan kern_attention_cudnn_plan;

/* A plan for d (its impl ignored); masked: the attention adds a mask or drops keys by a keep
 * mask. TCI_ERR_UNSUPPORTED, the reason in tci_last_error(), where cuDNN's fused attention does
 * not compute it: masked, a head dim that is not
 * a multiple of 8 up to 128, Q, K, V or Y not contiguous along the head dim, or no engine of
 * this cuDNN on this GPU takes the graph. Q, K, V and Y must then lie 16-byte aligned at run. */
tci_status kern_attention_cudnn_create(cudnnHandle_t cudnn, const kern_attention_desc *d,
                                       bool masked, kern_attention_cudnn_plan **out);
void kern_attention_cudnn_destroy(kern_attention_cudnn_plan *p);
/* What runs it, for reports ("cuDNN fused attention (engine N)"). */
const char *kern_attention_cudnn_name(const kern_attention_cudnn_plan *p);
size_t kern_attention_cudnn_workspace(const kern_attention_cudnn_plan *p);
/* Whether the plan computes d on these buffers: the same sizes, strides, scale, causal flag and
 * dtype, and every operand 16-byte aligned. A smaller shape (an engine's shape variant) needs
 * tcinfer's kernel or a plan of its own. */
bool kern_attention_cudnn_applies(const kern_attention_cudnn_plan *p,
                                  const kern_attention_desc *d, const void *q, const void *k,
                                  const void *v, const void *y);
/* Y for the plan's descriptor; workspace of at least kern_attention_cudnn_workspace bytes.
 * Enqueues on stream (cuDNN's handle is set to it) without synchronising. */
tci_status kern_attention_cudnn_run(const kern_attention_cudnn_plan *p, cudnnHandle_t cudnn,
                                    cudaStream_t stream, const void *q, const void *k,
                                    const void *v, void *y, void *workspace,
                                    size_t workspace_bytes);

#ifdef __cplusplus
}
#endif

#endif
