// The forward's matrix products over weights as their checkpoint stores them:
// memory-mapped, in the file's dtype (F32, F16 or BF16) and layout (GPT-2's
// Conv1D (in, out) or Hugging Face's Linear (out, in)), converted to float32
// block by block as the product reads them, so that a BF16 model's memory
// stays near its file's size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "headscope/base/matrix.h"

namespace headscope {

// out (rows, w.out), row stride ldo, = x (rows, w.in) W + bias, or += that
// when accumulate. x is row-major with row stride w.in; bias may be null.
void linear(const float* x, int rows, const Matrix& w, const float* bias, float* out, int64_t ldo,
            bool accumulate = false);

// Whether linear() computes products of more than a few rows (a prompt)
// over `dtype` on AMX-BF16 tiles here: Q8_0, Q4_K and Q6_K weights, on a CPU
// that has the tiles and a Linux that grants them (core/src/compute/
// tile_products.cpp; elsewhere float32 products). In words, for the reports:
// "Q8_0, Q4_K and Q6_K prompts on AMX-BF16 tiles", or why not.
bool tile_products(DType dtype);
const std::string& prompt_products_status();
// Whose float32 products of many rows linear() runs, in words for the
// reports: "OpenBLAS's Haswell kernels", or Eigen's and why (OpenBLAS chose
// kernels without FMA for a CPU that has it: matmul.cpp).
const std::string& float_products_status();

// The stored row `row` of `m` (out values, or in when out_by_in) as float32.
void stored_row(const Matrix& m, int64_t row, float* out);

// W's rows [first, first + count) as float32 (count, out) row-major: a
// head's rows of an output projection (NH * hs -> C).
void input_rows(const Matrix& m, int64_t first, int64_t count, float* out);

// The whole matrix as float32 (in, out) row-major, for tests and figures.
std::vector<float> to_floats(const Matrix& m);

}  // namespace headscope
