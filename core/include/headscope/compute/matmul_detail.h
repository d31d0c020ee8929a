// linear() with its float32 product made a parameter, so that bench-matmul
// runs the very same blocking, widening and threading on each library it
// compares. The engine calls linear() (matmul.h).
#pragma once
#include <cstdint>

#include "headscope/compute/matmul.h"

namespace headscope::matmul_detail {

// out (rows, cols) = beta out + x (rows, in) B, single-threaded, all
// row-major: x with row stride ldx; B (in, cols) with row stride ldb, or
// B^T for B stored (cols, in) when b_transposed (cblas_sgemm's convention).
using Gemm = void (*)(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                      float beta, float* out, int ldo);

// OpenBLAS's cblas_sgemm.
void openblas_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                   float beta, float* out, int ldo);
// Eigen's GEMM, compiled for this CPU.
void eigen_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                float beta, float* out, int ldo);
// What linear() uses: openblas_gemm, or eigen_gemm where the kernels
// OpenBLAS chose for this CPU use no FMA and the CPU has it (float_products_status, matmul.h).
void float_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                float beta, float* out, int ldo);

// linear()'s own kernel takes rows in groups of up to this many, reading
// the weight once for each, widening each value as it uses it; a quantized
// weight's products of at most this many rows take its own kernels.
inline constexpr int small_rows = 8;

// The most rows whose product with `w` takes linear()'s own kernels
// instead of a Gemm: small_rows for a block-quantized weight and for one
// stored (out, in); for a float32 or 16-bit weight stored (in, out), which
// those kernels read once for all the rows (small_product, matmul.cpp),
// 256, where they stop being faster than OpenBLAS's sgemm, which packs the
// weight for each product (docs/benchmarks.md). Of a weight stored (out,
// in) their sums are in another order than OpenBLAS's, which a text's rows
// alone and in a batch of patched runs would then not share; the
// backward's products take them there (backward_trace.h).
int own_kernel_rows(const Matrix& w);

// linear() with `gemm` for products of more than `small_rows_max` rows;
// linear() is linear_with(float_gemm, own_kernel_rows(w), ...).
void linear_with(Gemm gemm, int small_rows_max, const float* x, int rows, const Matrix& w, const float* bias,
                 float* out, int64_t ldo, bool accumulate);

}  // namespace headscope::matmul_detail
