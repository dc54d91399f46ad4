/* Op family 'eltwise' (being implemented). */
#include "layers/op.h"

const op_desc *const layer_eltwise_ops[] = {NULL};
