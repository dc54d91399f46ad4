/* What of an ONNX recurrent layer cuDNN's RNN API computes exactly, and the layer's weights placed
 * in cuDNN's weight space at the offsets cudnnGetRNNWeightParams reports. Pure C (no CUDA), so the
 * mapping is unit-tested without a GPU; rnn_cudnn.c drives cuDNN with it. */
#ifndef TCI_KERNELS_RNN_CUDNN_PACK_H
#define TCI_KERNELS_RNN_CUDNN_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/rnn_cells.h"
#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One layer: its sizes are the largest a run takes (a shape variant runs fewer steps or
 * sequences on the same plan). */
typedef struct kern_rnn_cudnn_desc {
    tci_dtype dtype;          /* storage of X, Y and the weights: FLOAT16 or FLOAT */
    int cell;                 /* KERN_RNN_* */
    int64_t seq_length, batch, input, hidden, directions;
    bool reverse;             /* ONNX direction "reverse" */
    bool batch_major;         /* ONNX layout 1 */
    bool linear_before_reset; /* GRU */
    bool has_seq_lens;        /* the layer reads sequence_lens */
    bool tf32;                /* FLOAT storage: TF32 tensor cores allowed */
} kern_rnn_cudnn_desc;

/* The layer's weights in fp32, as the plan holds them (plan_rnn in graph/lower.h). */
typedef struct kern_rnn_onnx_weights {
    const float *w;    /* directions x gates*hidden x input: ONNX W */
    const float *rt;   /* directions x hidden x gates*hidden: ONNX R, each direction transposed */
    const float *wb;   /* directions x gates*hidden (W's half of ONNX B), or NULL: zeros */
    const float *rb;   /* directions x gates*hidden (R's half), or NULL: zeros */
    const float *peep; /* directions x 3*hidden (ONNX P), or NULL: none */
} kern_rnn_onnx_weights;

/* Where cuDNN keeps one matrix or bias, from cudnnGetRNNWeightParams: the element offset from
 * the weight space's start and the shape and strides (elements) of its descriptor's last two
 * dims: a gate's matrix is hidden x (input or hidden), a bias hidden x 1. */
typedef struct kern_rnn_param_slot {
    int64_t offset, rows, cols, row_stride, col_stride;
} kern_rnn_param_slot;

/* Gates of a cell: 1, 3 or 4; cuDNN numbers a direction's matrices ("linear layers") 0..gates-1
 * for W and gates..2*gates-1 for R, each with its bias (the double-bias mode: W's, then R's). */
int kern_rnn_cudnn_gates(int cell);
/* The ONNX gate (LSTM i o f c, GRU z r h) of cuDNN's gate k (LSTM i f g o, GRU r z h). */
int kern_rnn_cudnn_onnx_gate(int cell, int k);
/* Why cuDNN cannot compute the layer as ONNX defines it (a sentence for reports), or NULL when
 * it can: fp16 or fp32 storage, forward or bidirectional, no sequence_lens, GRU with
 * linear_before_reset=1, LSTM peepholes absent or all zero. (Only the default activations and no
 * clip reach the GPU: the op refuses the others at load.) */
const char *kern_rnn_cudnn_refusal(const kern_rnn_cudnn_desc *d, const float *peep);
/* Writes the weight space (count elements, as floats: the caller converts them to the storage
 * type): zeros, then every matrix and bias of every direction at its slot (matrices and biases
 * indexed direction * 2 * gates + cuDNN's linear layer). TCI_ERR_UNSUPPORTED when a slot has
 * another shape than the layer's or leaves the space. */
tci_status kern_rnn_cudnn_pack(const kern_rnn_cudnn_desc *d, const kern_rnn_onnx_weights *w,
                               const kern_rnn_param_slot *matrices,
                               const kern_rnn_param_slot *biases, float *space, int64_t count);

#ifdef __cplusplus
}
#endif

#endif
