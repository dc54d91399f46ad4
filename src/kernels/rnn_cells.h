/* The recurrent cells, as the kernels number them (ONNX gate orders: GRU z r h, LSTM i o f c):
 * shared by tcinfer's own recurrence (rnn.h) and cuDNN's (rnn_cudnn.h). Pure C. */
#ifndef TCI_KERNELS_RNN_CELLS_H
#define TCI_KERNELS_RNN_CELLS_H

enum { KERN_RNN_TANH = 0, KERN_RNN_GRU = 1, KERN_RNN_LSTM = 2 };

#endif
