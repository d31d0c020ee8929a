// linear() with its float32 product made a parameter, so that bench-matmul
// runs the very same blocking, widening and threading on each library it
// compares. The engine calls linear() (matmul.h), and the backward (backward_trace.h) this with a higher
// small_rows_max.
#pragma once
#include <cstdint>

#include "headscope/compute/matmul.h"

namespace headscope::matmul_detail {

// out (rows, cols) = beta out + x (rows, in) B, single-threaded, all
// row-major: x with row stride ldx; B (in, cols) with row stride ldb, or
// B^T for B stored (cols, in) when b_transposed (cblas_sgemm's convention).
using Gemm = void (*)(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                      float beta, float* out, int ldo);

// What linear() uses: OpenBLAS's cblas_sgemm.
void openblas_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                   float beta, float* out, int ldo);

// Products of at most this many rows take linear()'s own kernel instead of
// a Gemm: it reads the weight once, widening each value as it uses it.
inline constexpr int small_rows = 8;

// linear() with `gemm` for products of more than `small_rows_max` rows;
// linear() is linear_with(openblas_gemm, small_rows, ...).
void linear_with(Gemm gemm, int small_rows_max, const float* x, int rows, const Matrix& w, const float* bias,
                 float* out, int64_t ldo, bool accumulate);

}  // namespace headscope::matmul_detail
