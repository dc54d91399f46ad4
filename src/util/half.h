/* fp16 and bfloat16 bits <-> fp32 on the host: what constant packing, engine files, ONNX
 * float16 tensors and the CPU reference convert with. */
#ifndef TCI_UTIL_HALF_H
#define TCI_UTIL_HALF_H

#include <stdint.h>

/* IEEE fp16 <-> fp32, round to nearest even. */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
/* bfloat16 bits (the top half of an fp32): round to nearest even, NaN stays a quiet NaN. */
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

#endif
