// The forward's products: see matmul.h.
#include "headscope/matmul.h"

#include <Eigen/Core>
#include <algorithm>

#include "headscope/aligned.h"

namespace headscope {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;
using OutMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

size_t element_bytes(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

// out (rows, cols) [+]= x (rows, in) S, S (in, cols) row-major, or S^T for S (cols, in).
void product(const float* x, int rows, int64_t in, const float* s, int64_t cols, bool s_out_by_in, float* out,
             int64_t ldo, bool accumulate) {
    OutMap y(out, rows, cols, Eigen::OuterStride<>(ldo));
    const ConstMap X(x, rows, in);
    if (s_out_by_in) {
        const ConstMap S(s, cols, in);
        if (accumulate) y.noalias() += X * S.transpose();
        else y.noalias() = X * S.transpose();
    } else {
        const ConstMap S(s, in, cols);
        if (accumulate) y.noalias() += X * S;
        else y.noalias() = X * S;
    }
}

}  // namespace

void linear(const float* x, int rows, const Matrix& w, const float* bias, float* out, int64_t ldo, bool accumulate) {
    if (w.dtype == DType::F32) {
        product(x, rows, w.in, reinterpret_cast<const float*>(w.data), w.out, w.out_by_in, out, ldo, accumulate);
    } else {
        // Blocks of output columns, each widened into a thread's scratch that
        // stays in the cache, so a 16-bit matrix is never widened whole.
        constexpr int64_t block = 64;
        const int64_t blocks = (w.out + block - 1) / block;
#pragma omp parallel
        {
            AlignedVector<float> scratch(static_cast<size_t>(block * w.in));
#pragma omp for schedule(static)
            for (int64_t n = 0; n < blocks; ++n) {
                const int64_t first = n * block, cols = std::min(block, w.out - first);
                if (w.out_by_in) {  // rows [first, first + cols) of the stored (out, in): contiguous
                    widen_to_f32(w.dtype, w.data + first * w.in * 2, static_cast<size_t>(cols * w.in), scratch.data());
                } else {  // columns [first, first + cols) of the stored (in, out)
                    for (int64_t r = 0; r < w.in; ++r)
                        widen_to_f32(w.dtype, w.data + (r * w.out + first) * 2, static_cast<size_t>(cols),
                                     scratch.data() + r * cols);
                }
                product(x, rows, w.in, scratch.data(), cols, w.out_by_in, out + first, ldo, accumulate);
            }
        }
    }
    if (bias) {
        OutMap y(out, rows, w.out, Eigen::OuterStride<>(ldo));
        y.rowwise() += Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>>(bias, w.out);
    }
}

void stored_row(const Matrix& m, int64_t row, float* out) {
    const int64_t width = m.out_by_in ? m.in : m.out;
    widen_to_f32(m.dtype, m.data + row * width * static_cast<int64_t>(element_bytes(m.dtype)), static_cast<size_t>(width),
                 out);
}

std::vector<float> to_floats(const Matrix& m) {
    std::vector<float> stored(static_cast<size_t>(m.in * m.out));
    widen_to_f32(m.dtype, m.data, stored.size(), stored.data());
    if (!m.out_by_in) return stored;
    std::vector<float> math(stored.size());  // (in, out) from the stored (out, in)
    for (int64_t o = 0; o < m.out; ++o)
        for (int64_t i = 0; i < m.in; ++i) math[i * m.out + o] = stored[o * m.in + i];
    return math;
}

}  // namespace headscope
