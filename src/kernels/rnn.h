/* The recurrence of LSTM, GRU and RNN layers on the device: the state set-up, the time steps (one
 * kernel launch per step, both directions and every sequence in it, each sequence's units split
 * over several blocks; two launches for GRU with the reset before the product) and the final
 * state. The input projection
 * X W^T + Wb comes from a GEMM beforehand; see plan_rnn in graph/lower.h for the buffers. */
#ifndef TCI_KERNELS_RNN_H
#define TCI_KERNELS_RNN_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/rnn_cells.h"
#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest hidden size: a block keeps h_{t-1} (or GRU's r (.) h_{t-1}) of one sequence in shared
 * memory. */
#define KERN_RNN_MAX_HIDDEN 4096

typedef struct kern_rnn_desc {
    tci_dtype dtype; /* storage of xw, initial_h/c, Y, Y_h, Y_c: FLOAT16, BFLOAT16 or FLOAT */
    int cell;        /* KERN_RNN_* (ONNX gate orders: GRU z r h, LSTM i o f c) */
    int64_t seq_length, batch, hidden, directions;
    bool reverse;     /* one direction, run backward */
    bool batch_major; /* layout 1 */
    bool linear_before_reset;
} kern_rnn_desc;

/* state (fp32, 4 rows of directions*batch*hidden: h before even steps, h before odd steps, c
 * (GRU: its update gate), GRU's r (.) h_{t-1}): h from initial_h, c from initial_c (NULL:
 * zeros), both in Y_h's layout and dtype. */
tci_status kern_rnn_init(const kern_rnn_desc *d, const void *initial_h, const void *initial_c,
                         float *state, cudaStream_t stream);
/* Every time step: xw (seq_length*batch rows of directions*gates*hidden, X's row order), the fp32
 * weights (R transposed, Rb, P; graph/lower.h), seq_lens (int32 per batch entry, clamped to
 * [0, seq_length]; NULL: all full), y (NULL: not written; zero past a sequence's end). */
tci_status kern_rnn_steps(const kern_rnn_desc *d, const void *xw, const float *weights,
                          const int32_t *seq_lens, float *state, void *y, cudaStream_t stream);
/* Y_h and Y_c (either NULL) from the state; zero for an empty sequence. */
tci_status kern_rnn_final(const kern_rnn_desc *d, const float *state, const int32_t *seq_lens,
                          void *y_h, void *y_c, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
