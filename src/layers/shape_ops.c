/* Op family 'shape' (being implemented). */
#include "layers/op.h"

const op_desc *const layer_shape_ops[] = {NULL};
