// Products of a few rows over a block-quantized W (quantized_products.h).
// Q4_K, Q6_K and Q8_0, the types of a Q4_K_M or Q8_0 file, and MXFP4,
// gpt-oss's experts', are integer dot products with the activations split
// into two 8-bit parts (integer_products.cpp), so that a generated token's
// products cost a few integer instructions for every 32 weights, shared by
// the rows. The other types widen each stored row into the thread's
// scratch first, and each output is its inputs' products summed in input
// order, lane by lane.
#include "quantized_products.h"

#include <algorithm>
#include <cstring>

#include "../base/vector_lanes.h"
#include "headscope/base/aligned.h"
#include "headscope/base/ggml_types.h"
#include "integer_products.h"
#include "row_groups.h"

namespace headscope {
namespace {

// The sums of R rows against one stored row, a register of values at a time.
template <int R>
struct RowSums {
    const float* x;
    int64_t in;
    Lanes acc[R] = {};

    void operator()(size_t at, const Lanes& w) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            Lanes xr;
            std::memcpy(&xr, x + r * in + static_cast<int64_t>(at), sizeof xr);
            acc[r] += xr * w;
        }
    }
};

// Stored row `o` of w widened into `sums`.
template <int R>
void visit_row(const Matrix& w, int64_t o, RowSums<R>& sums, AlignedVector<float>& scratch) {
    const std::byte* row = w.data + dtype_row_bytes(w.dtype, o * w.in);
    widen_to_f32(w.dtype, row, static_cast<size_t>(w.in), scratch.data());
    for (int64_t i = 0; i < w.in; i += lanes) {  // a whole number of blocks: of registers too
        Lanes v;
        std::memcpy(&v, scratch.data() + i, sizeof v);
        sums(static_cast<size_t>(i), v);
    }
}

template <int R>
void rows_product(const float* x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                  int64_t last) {
    thread_local AlignedVector<float> scratch;
    scratch.resize(static_cast<size_t>(w.in));
    for (int64_t o = first; o < last; ++o) {
        RowSums<R> sums{x, w.in};
        visit_row(w, o, sums, scratch);
        for (int r = 0; r < R; ++r) {
            float sum = 0;
            for (int l = 0; l < lanes; ++l) sum += sums.acc[r][l];
            float& y = out[r * ldo + o];
            y = accumulate ? y + sum : sum;
        }
    }
}

}  // namespace

void quantized_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                            int64_t first, int64_t last) {
    if (has_integer_products(w.dtype)) return integer_rows_product(x, rows, w, out, ldo, accumulate, first, last);
    for_row_groups(rows, [&](auto shared, int r0) {
        rows_product<shared>(x + static_cast<int64_t>(r0) * w.in, w, out + r0 * ldo, ldo, accumulate, first, last);
    });
}

// Each stored row, whole blocks, widened once per thread, then added into
// the thread's columns in input order.
void quantized_columns_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                               int64_t first, int64_t last) {
    const int64_t in = w.in, width = w.out;
    thread_local AlignedVector<float> row;
    row.resize(static_cast<size_t>(width));
    for (int r = 0; r < rows; ++r)
        if (!accumulate) std::fill(out + r * ldo + first, out + r * ldo + last, 0.f);
    for (int64_t i = 0; i < in; ++i) {
        widen_to_f32(w.dtype, w.data + dtype_row_bytes(w.dtype, i * width), static_cast<size_t>(width), row.data());
        for (int r = 0; r < rows; ++r) {
            const float xi = x[r * in + i];
            float* y = out + r * ldo;
            for (int64_t c = first; c < last; ++c) y[c] += xi * row[static_cast<size_t>(c)];
        }
    }
}

}  // namespace headscope
