/* Op family 'resize' (being implemented). */
#include "layers/op.h"

const op_desc *const layer_resize_ops[] = {NULL};
