/* Op family 'conv' (being implemented). */
#include "layers/op.h"

const op_desc *const layer_conv_ops[] = {NULL};
