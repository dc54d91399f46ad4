/* Op family 'pool' (being implemented). */
#include "layers/op.h"

const op_desc *const layer_pool_ops[] = {NULL};
