// The forward's matrix products over weights as their checkpoint stores them:
// memory-mapped, in the file's dtype (F32, F16 or BF16) and layout (GPT-2's
// Conv1D (in, out) or Hugging Face's Linear (out, in)), converted to float32
// block by block as the product reads them, so that a BF16 model's memory
// stays near its file's size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "headscope/safetensors.h"

namespace headscope {

// A weight matrix W of y = x W: `in` rows of `out` values in the math, stored
// row-major as (in, out), or as (out, in) when out_by_in (y = x S^T for the
// stored S). An embedding table (V, C) is a Matrix with in = V, out = C.
struct Matrix {
    const std::byte* data = nullptr;  // nullptr: the family has no such weight
    DType dtype = DType::F32;         // F32 data is 4-byte aligned
    int64_t in = 0, out = 0;
    bool out_by_in = false;

    explicit operator bool() const { return data != nullptr; }
    // The same bytes as the matrix of the other product: (in, out) <-> (out, in).
    Matrix transposed() const { return {data, dtype, out, in, !out_by_in}; }
};

// out (rows, w.out), row stride ldo, = x (rows, w.in) W + bias, or += that
// when accumulate. x is row-major with row stride w.in; bias may be null.
void linear(const float* x, int rows, const Matrix& w, const float* bias, float* out, int64_t ldo,
            bool accumulate = false);

// The stored row `row` of `m` (out values, or in when out_by_in) as float32.
void stored_row(const Matrix& m, int64_t row, float* out);

// The whole matrix as float32 (in, out) row-major, for tests and figures.
std::vector<float> to_floats(const Matrix& m);

}  // namespace headscope
