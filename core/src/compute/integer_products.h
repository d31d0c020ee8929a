// The products of a few rows over Q4_K, Q6_K, Q8_0 or MXFP4 weights, as integer
// dot products of the weights' codes with the activations split into two
// signed 8-bit parts, joined into one 16-bit part for all but MXFP4
// (integer_products.cpp says exactly what is computed).
#pragma once
#include <cstdint>

#include "headscope/base/matrix.h"

namespace headscope {

// Whether integer_rows_product computes products over this type.
bool has_integer_products(DType dtype);

// out rows [0, rows) (+)= x W on columns [first, last), W stored (out, in)
// in one of those types; each output bit-identical on every instruction set.
void integer_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                          int64_t first, int64_t last);

}  // namespace headscope
