// Products of more rows than one group of the small-product kernel (the
// backward's few dozen, backward_trace.h) over a weight stored (in, out):
// each of its stretches read from memory once for all the rows
// (panel_products.cpp says how).
#pragma once
#include <cstdint>

#include "headscope/base/matrix.h"

namespace headscope {

// out rows [0, rows) (+)= x W on columns [first, last), W F32, F16 or BF16
// stored (in, out). Each output is its inputs' products added in order to
// 0 (then to out where accumulating), as the small-product kernel adds
// them: the same bits whatever the rows.
void panel_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                        int64_t first, int64_t last);

}  // namespace headscope
