/* ONNX recurrent layers against cuDNN's RNN: what it computes exactly, and the weights in its
 * gate order and slots (pure C, compiled without CUDA too, for the unit tests). */
#include "kernels/rnn_cudnn_pack.h"

#include <string.h>

#include "util/status.h"

int kern_rnn_cudnn_gates(int cell) {
    return cell == KERN_RNN_LSTM ? 4 : cell == KERN_RNN_GRU ? 3 : 1;
}

int kern_rnn_cudnn_onnx_gate(int cell, int k) {
    static const int lstm[4] = {0, 2, 3, 1}; /* cuDNN i f g o -> ONNX i o f c */
    static const int gru[3] = {1, 0, 2};     /* cuDNN r z h -> ONNX z r h */
    if (cell == KERN_RNN_LSTM) return lstm[k & 3];
    if (cell == KERN_RNN_GRU) return k >= 0 && k < 3 ? gru[k] : 0;
    return 0;
}

const char *kern_rnn_cudnn_refusal(const kern_rnn_cudnn_desc *d, const float *peep) {
    if (d->dtype != TCI_DTYPE_FLOAT16 && d->dtype != TCI_DTYPE_FLOAT)
        return "cuDNN's RNN runs fp16 and fp32 storage here";
    if (d->cell < KERN_RNN_TANH || d->cell > KERN_RNN_LSTM) return "unknown cell";
    if (d->seq_length < 1 || d->batch < 1 || d->input < 1 || d->hidden < 1 ||
        d->seq_length > INT32_MAX || d->batch > INT32_MAX || d->input > INT32_MAX ||
        d->hidden > INT32_MAX || d->directions < 1 || d->directions > 2)
        return "sizes outside cuDNN's";
    if (d->has_seq_lens)
        return "sequence_lens: cuDNN takes the lengths on the host, the layer's are device data";
    if (d->reverse) return "direction reverse: cuDNN has no reverse-only RNN";
    if (d->cell == KERN_RNN_GRU && !d->linear_before_reset)
        return "GRU linear_before_reset=0: cuDNN's GRU is the linear_before_reset=1 form";
    if (d->cell == KERN_RNN_LSTM && peep)
        for (int64_t i = 0; i < d->directions * 3 * d->hidden; i++)
            if (peep[i] != 0.0f) return "LSTM peepholes: cuDNN's LSTM has none";
    return NULL;
}

/* Copies a rows x cols matrix, element (i, j) from src[i * src_row + j * src_col], to its
 * slot; the slot must have that shape and lie within the space. */
static tci_status place(const kern_rnn_param_slot *slot, int64_t rows, int64_t cols,
                        const float *src, int64_t src_row, int64_t src_col, float *space,
                        int64_t count, const char *what) {
    if (slot->rows != rows || slot->cols != cols || slot->offset < 0 || slot->row_stride < 0 ||
        slot->col_stride < 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "cuDNN's %s slot is %lld x %lld at offset %lld, the layer's "
                            "%lld x %lld",
                            what, (long long)slot->rows, (long long)slot->cols,
                            (long long)slot->offset, (long long)rows, (long long)cols);
    int64_t last = slot->offset + (rows - 1) * slot->row_stride + (cols - 1) * slot->col_stride;
    if (last >= count)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "cuDNN's %s slot ends at element %lld of a weight space of %lld", what,
                            (long long)last, (long long)count);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            space[slot->offset + i * slot->row_stride + j * slot->col_stride] =
                src ? src[i * src_row + j * src_col] : 0.0f;
    return TCI_OK;
}

tci_status kern_rnn_cudnn_pack(const kern_rnn_cudnn_desc *d, const kern_rnn_onnx_weights *w,
                               const kern_rnn_param_slot *matrices,
                               const kern_rnn_param_slot *biases, float *space, int64_t count) {
    const int gates = kern_rnn_cudnn_gates(d->cell);
    const int64_t H = d->hidden, IN = d->input, GH = gates * H;
    memset(space, 0, (size_t)count * sizeof(float));
    for (int64_t dir = 0; dir < d->directions; dir++)
        for (int lin = 0; lin < 2 * gates; lin++) {
            const bool recurrent = lin >= gates;
            const int64_t g = kern_rnn_cudnn_onnx_gate(d->cell, lin % gates);
            const kern_rnn_param_slot *m = &matrices[dir * 2 * gates + lin];
            const kern_rnn_param_slot *b = &biases[dir * 2 * gates + lin];
            /* row i of gate g: unit i; W row-major (GH x IN), R^T column i of the gate's block */
            if (recurrent)
                TRY_STATUS(place(m, H, H, w->rt + dir * H * GH + g * H, 1, GH, space, count,
                                 "recurrent matrix"));
            else
                TRY_STATUS(place(m, H, IN, w->w + (dir * GH + g * H) * IN, IN, 1, space, count,
                                 "input matrix"));
            const float *bias = recurrent ? w->rb : w->wb;
            TRY_STATUS(place(b, H, 1, bias ? bias + dir * GH + g * H : NULL, 1, 1, space, count,
                             "bias"));
        }
    return TCI_OK;
}
