// A weight matrix as its checkpoint stores it: the model holds these, the
// products (compute/matmul.h) read them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "headscope/base/dtype.h"

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
    // Outputs [first, first + count) of a matrix stored (out, in): the same bytes from that row.
    Matrix output_rows(int64_t first, int64_t count) const {
        return {data + dtype_row_bytes(dtype, first * in), dtype, in, count, true};
    }
};

}  // namespace headscope
