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

// The same for W stored (out, in) and at most turned_rows_max() rows (64
// with AVX-512, 16 with AVX): x's rows turned into a panel (in, rows) once,
// W's stored rows broadcast against it a few at a time, so that W is read
// once and the panel stays in L2. Each output is its inputs' products
// added in order to 0.
int turned_rows_max();
void turned_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                         int64_t first, int64_t last);

}  // namespace headscope
