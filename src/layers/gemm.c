/* Op family 'linear' (being implemented). */
#include "layers/op.h"

const op_desc *const layer_linear_ops[] = {NULL};
