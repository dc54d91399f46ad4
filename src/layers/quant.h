/* What the quantisation families share (quant.c, quant_linear.c): the integer types' ranges and
 * onnxruntime's rounding and saturation. */
#ifndef TCI_LAYERS_QUANT_H
#define TCI_LAYERS_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "tcinfer.h"

/* The range of int8 or uint8 as floats; false for any other type. */
bool quant_range(tci_dtype type, float *lo, float *hi);
/* nearbyint(v) (half to even) + zero_point, saturated to [lo, hi]; NaN gives lo. */
int32_t quant_saturate(float v, float zero_point, float lo, float hi);
/* Element i of int8, uint8 or int32 data / v stored as element i of int8 or uint8 data. */
int32_t quant_load(tci_dtype type, const void *data, int64_t i);
void quant_store(tci_dtype type, void *data, int64_t i, int32_t v);
/* Element i of a float or float16 tensor as float. */
float quant_load_scale(const tci_tensor *t, int64_t i);

#endif
