// linear()'s products over a block-quantized W (a GGUF file's types), on the
// output columns [first, last) of one thread (see matmul.cpp).
#pragma once
#include <cstdint>

#include "headscope/base/matrix.h"

namespace headscope {

// out rows [0, rows) (+)= x W on columns [first, last), W stored (out, in)
// as GGUF stores it; for a few rows (a keystroke, a generated token): over
// Q4_K, Q6_K and Q8_0 integer_rows_product (integer_products.h), over the
// other types each stored row widened, then summed in input order.
void quantized_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                            int64_t first, int64_t last);

// The same for W stored (in, out), the transpose of a GGUF matrix (the
// contributions read o_proj that way), for any number of rows.
void quantized_columns_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                               int64_t first, int64_t last);

}  // namespace headscope
