// The products of many rows (a prompt) over Q8_0, Q4_K or Q6_K weights as
// AMX-BF16 tile products, on CPUs that have them (tile_products.cpp says
// what is computed); elsewhere the caller's float32 Gemm. Whether they run
// here, tile_products(dtype), and why, prompt_products_status(): matmul.h.
#pragma once
#include <cstdint>

#include "headscope/base/matrix.h"

namespace headscope {

// out rows [0, rows) (+)= x W on columns [first, last), W stored (out, in)
// in a type tile_products accepts.
void tile_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                       int64_t first, int64_t last);

}  // namespace headscope
