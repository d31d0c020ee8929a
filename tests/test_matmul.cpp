// linear() against a double-precision product written here, over every
// dtype (the stored bytes built here, 16-bit ones at odd addresses), both
// layouts, accumulate or not, bias or not, a column block of a wider output
// (the columns around it untouched), and sizes that are not multiples of
// anything the implementation blocks by; stored_row and to_floats; and the
// same bits from the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml_blocks_reference.h"
#include "headscope/base/ggml_types.h"
#include "headscope/compute/matmul.h"
#include "headscope/compute/matmul_detail.h"

using namespace headscope;

namespace {

// Decoders written from the formats' definitions, not from the engine's.
double decode_f16(uint16_t h) {
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1 + mantissa / 1024.0, exponent - 15);
    return h & 0x8000 ? -magnitude : magnitude;
}

double decode_bf16(uint16_t h) {
    const int exponent = (h >> 7) & 0xff, mantissa = h & 0x7f;
    const double magnitude = std::ldexp(1 + mantissa / 128.0, exponent - 127);  // no subnormals drawn
    return h & 0x8000 ? -magnitude : magnitude;
}

// A weight's stored bytes and its math values W (in, out) in double.
struct Weight {
    std::vector<std::byte> buffer;
    Matrix matrix;
    std::vector<double> math;  // (in, out) row-major
};

// A block-quantized weight, stored (out, in) as GGUF files store them: each
// stored row random blocks (finite scales), one byte past an aligned
// address, its values as the tests' own block formulas read them.
Weight make_quantized_weight(DType dtype, int64_t in, int64_t out, std::mt19937& rng) {
    const GgmlType type = ggml_type(dtype);
    const int64_t blocks = out * in / static_cast<int64_t>(ggml_type_traits(type).block_elements);
    Weight w;
    w.buffer.resize(1);
    std::vector<double> stored;
    for (int64_t b = 0; b < blocks; ++b) {
        test::Block block = test::random_block(type, rng);
        // MXFP4's scale byte is a power of two up to 2^127: kept near 1, so
        // that the products stay within float32's range.
        if (type == GgmlType::MXFP4) block[0] = static_cast<uint8_t>(123 + rng() % 8);
        for (uint8_t byte : block) w.buffer.push_back(static_cast<std::byte>(byte));
        for (double v : test::reference_values(type, block)) stored.push_back(v);
    }
    w.matrix = {w.buffer.data() + 1, dtype, in, out, true};
    w.math.resize(stored.size());
    for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) w.math[i * out + o] = stored[o * in + i];
    return w;
}

// Finite random values of `dtype` of magnitude about 1/8 to 8, F16 with some
// subnormals; 16-bit data one byte past an aligned address, F32 four.
Weight make_weight(DType dtype, int64_t in, int64_t out, bool out_by_in, std::mt19937& rng) {
    if (quantized(dtype) && out_by_in) return make_quantized_weight(dtype, in, out, rng);
    if (quantized(dtype)) {  // the transpose of one stored (out, in): stored (in, out), blocks along out
        Weight w = make_quantized_weight(dtype, out, in, rng);
        const std::vector<double> math = w.math;  // (out, in) of the stored one
        for (int64_t i = 0; i < in; ++i)
            for (int64_t o = 0; o < out; ++o) w.math[i * out + o] = math[o * in + i];
        w.matrix = w.matrix.transposed();
        return w;
    }
    Weight w;
    const size_t n = static_cast<size_t>(in * out), size = dtype == DType::F32 ? 4 : 2, offset = size == 4 ? 4 : 1;
    w.buffer.resize(offset + n * size);
    std::vector<double> stored(n);
    std::uniform_real_distribution<float> uniform(-1, 1);
    for (size_t i = 0; i < n; ++i) {
        std::byte* at = w.buffer.data() + offset + i * size;
        if (dtype == DType::F32) {
            const float v = uniform(rng);
            std::memcpy(at, &v, 4);
            stored[i] = v;
            continue;
        }
        const uint16_t sign = rng() % 2 ? 0x8000 : 0;
        uint16_t bits;
        if (dtype == DType::F16) {
            const uint16_t exponent = rng() % 10 == 0 ? 0 : 12 + rng() % 7;  // 2^-3 .. 2^3, or subnormal
            bits = sign | exponent << 10 | (rng() & 0x3ff);
            stored[i] = decode_f16(bits);
        } else {
            bits = sign | (124 + rng() % 7) << 7 | (rng() & 0x7f);
            stored[i] = decode_bf16(bits);
        }
        std::memcpy(at, &bits, 2);
    }
    w.matrix = {w.buffer.data() + offset, dtype, in, out, out_by_in};
    w.math.resize(n);
    for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) w.math[i * out + o] = out_by_in ? stored[o * in + i] : stored[i * out + o];
    return w;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(rng);
    return v;
}

constexpr float sentinel = -12345.f;

// One row of x times the weight in double: for each output its sum over in
// (added in the order of i), the sum of its terms' magnitudes and, where x is
// split by the weight's blocks of split_group, of each weight's magnitude
// times its block's largest |x|. The weight is walked along its rows.
struct RowSums {
    std::vector<double> sum, magnitude, split;  // (out)
};
RowSums row_sums(const float* x, const std::vector<double>& math, int64_t in, int64_t out, int64_t split_group,
                 const std::vector<double>& largest) {
    RowSums s{std::vector<double>(out), std::vector<double>(out), std::vector<double>(out)};
    for (int64_t i = 0; i < in; ++i) {
        const double* row = &math[i * out];
        for (int64_t o = 0; o < out; ++o) {
            const double term = static_cast<double>(x[i]) * row[o];
            s.sum[o] += term;
            s.magnitude[o] += std::abs(term);
            if (split_group) s.split[o] += std::abs(row[o]) * largest[i / split_group];
        }
    }
    return s;
}

// Every combination for one dtype: out is columns [3, 3 + out) of rows of
// width out + 5, filled with a sentinel (or earlier values when
// accumulating); each value within float32 round-off of the double sum, the
// sentinel columns untouched. The products of many rows through `gemm`:
// linear()'s (float_gemm), or one library's.
void check_products(DType dtype, matmul_detail::Gemm gemm = matmul_detail::float_gemm) {
    std::mt19937 rng(static_cast<unsigned>(dtype) + 1);
    // The last: more than one 512-column tile of a thread's share (in, out).
    // A quantized weight: whole blocks of 256 (every type's multiple) along
    // its stored rows, more than the Gemm's widened stretch of 512 in one.
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        quantized(dtype) ? std::vector<std::pair<int64_t, int64_t>>{{256, 23}, {1280, 270}, {256, 1300}}
                         : std::vector<std::pair<int64_t, int64_t>>{{19, 23}, {70, 40}, {1030, 270}, {37, 1300}};
    for (auto [rows_in, rows_out] : shapes)
        for (bool out_by_in : {false, true}) {
            // A quantized weight stored (in, out) is a stored (out, in) one
            // transposed (the contributions read o_proj so): its blocks run along out.
            const bool swapped = quantized(dtype) && !out_by_in;
            if (swapped && rows_in > 256) continue;  // one path for every row count: the small shapes cover it
            const int64_t in = swapped ? rows_out : rows_in, out = swapped ? rows_in : rows_out;
            const Weight w = make_weight(dtype, in, out, out_by_in, rng);
            const std::vector<float> bias_values = random_floats(static_cast<size_t>(out), rng);
            for (int rows : {1, 2, 3, 4, 5, 8, 17, 128})
                for (bool accumulate : {false, true})
                    for (bool with_bias : {false, true}) {
                        SCOPED_TRACE(testing::Message()
                                     << to_string(dtype) << " in " << in << " out " << out
                                     << (out_by_in ? " (out, in)" : " (in, out)") << " rows " << rows
                                     << (accumulate ? " accumulate" : "") << (with_bias ? " bias" : ""));
                        const int64_t ldo = out + 5, first = 3;
                        const std::vector<float> x = random_floats(static_cast<size_t>(rows * in), rng);
                        // Up to 8 rows over Q4_K, Q6_K, Q8_0 and MXFP4 split x by the weight's
                        // blocks (integer_products.cpp): each block's largest |x|.
                        const bool split_x = rows <= 8 && out_by_in &&
                                             (dtype == DType::Q4_K || dtype == DType::Q6_K || dtype == DType::Q8_0 ||
                                              dtype == DType::MXFP4);
                        const int64_t split_group =
                            split_x ? static_cast<int64_t>(ggml_type_traits(ggml_type(dtype)).block_elements) : 0;
                        std::vector<std::vector<double>> largest(static_cast<size_t>(rows));
                        for (int r = 0; r < rows && split_x; ++r) {
                            largest[r].resize(static_cast<size_t>(in / split_group));
                            for (int64_t i = 0; i < in; ++i)
                                largest[r][i / split_group] =
                                    std::max<double>(largest[r][i / split_group], std::abs(x[r * in + i]));
                        }
                        std::vector<float> buffer(static_cast<size_t>(rows * ldo), sentinel);
                        if (accumulate)
                            for (int r = 0; r < rows; ++r)
                                for (int64_t o = 0; o < out; ++o)
                                    buffer[r * ldo + first + o] = std::uniform_real_distribution<float>(-1, 1)(rng);
                        const std::vector<float> before = buffer;
                        const float* bias = with_bias ? bias_values.data() : nullptr;
                        matmul_detail::linear_with(gemm, matmul_detail::own_kernel_rows(w.matrix), x.data(), rows,
                                                   w.matrix, bias, buffer.data() + first, ldo, accumulate);

                        std::vector<RowSums> sums;
                        for (int r = 0; r < rows; ++r)
                            sums.push_back(row_sums(&x[r * in], w.math, in, out, split_group, largest[r]));
                        int wrong = 0;
                        testing::Message first_wrong;
                        for (int r = 0; r < rows; ++r)
                            for (int64_t c = 0; c < ldo; ++c) {
                                const float got = buffer[r * ldo + c];
                                if (c < first || c >= first + out) {
                                    if (std::memcmp(&got, &sentinel, sizeof got) != 0 && wrong++ == 0)
                                        first_wrong << "row " << r << " column " << c << " outside changed to " << got;
                                    continue;
                                }
                                const int64_t o = c - first;
                                double sum = sums[r].sum[o], magnitude = sums[r].magnitude[o], split = sums[r].split[o];
                                for (double extra :
                                     {with_bias ? bias[o] : 0.0, accumulate ? before[r * ldo + c] : 0.0}) {
                                    sum += extra;
                                    magnitude += std::abs(extra);
                                }
                                // gamma_n u: float32 round-off of a sum of in + 2 terms in any order;
                                // plus, where x is split into two 8-bit parts, the split's bound
                                // (s / 500 of each value, s its group's largest / 127; see
                                // test_integer_products): with it left out, Q8_0's errors reached
                                // 0.98 of the round-off alone.
                                const double tolerance =
                                    (in + 2) * std::ldexp(1.0, -24) * magnitude + split / 127 / 500;
                                if (!(std::abs(got - sum) <= tolerance) && wrong++ == 0)
                                    first_wrong << "row " << r << " column " << o << ": " << got << " vs " << sum;
                            }
                        EXPECT_EQ(wrong, 0) << first_wrong;
                    }
        }
}

TEST(Matmul, LinearF32MatchesDoubleProduct) { check_products(DType::F32); }
TEST(Matmul, LinearF16MatchesDoubleProduct) { check_products(DType::F16); }
TEST(Matmul, LinearBF16MatchesDoubleProduct) { check_products(DType::BF16); }
// Both libraries linear() may take for the products of many rows (float_gemm,
// float_products_status), whichever this machine's OpenBLAS leads it to.
TEST(Matmul, OpenBlasAndEigenProductsMatchDoubleProduct) {
    for (DType dtype : {DType::F32, DType::BF16}) {
        check_products(dtype, matmul_detail::openblas_gemm);
        check_products(dtype, matmul_detail::eigen_gemm);
    }
    const std::string& status = float_products_status();
    EXPECT_TRUE(status.starts_with("OpenBLAS's ") || status.starts_with("Eigen's: OpenBLAS chose its ")) << status;
}
// Every block-quantized type, whose rows widen whole inside the products.
TEST(Matmul, LinearOfQuantizedWeightsMatchesDoubleProduct) {
    for (int d = static_cast<int>(DType::BF16) + 1; d < static_cast<int>(std::size(dtype_names)); ++d)
        check_products(static_cast<DType>(d));
}

TEST(Matmul, StoredRowAndToFloatsGiveTheStoredValues) {
    std::mt19937 rng(5);
    for (DType dtype : {DType::F32, DType::F16, DType::BF16})
        for (bool out_by_in : {false, true}) {
            SCOPED_TRACE(testing::Message() << to_string(dtype) << (out_by_in ? " (out, in)" : " (in, out)"));
            const int64_t in = 21, out = 34;
            const Weight w = make_weight(dtype, in, out, out_by_in, rng);
            const std::vector<float> all = to_floats(w.matrix);
            ASSERT_EQ(all.size(), static_cast<size_t>(in * out));
            for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], w.math[i]) << "element " << i;
            const int64_t stored_rows = out_by_in ? out : in, width = out_by_in ? in : out;
            std::vector<float> row(static_cast<size_t>(width));
            for (int64_t s = 0; s < stored_rows; ++s) {
                stored_row(w.matrix, s, row.data());
                for (int64_t j = 0; j < width; ++j) {
                    const double expected = out_by_in ? w.math[j * out + s] : w.math[s * out + j];
                    ASSERT_EQ(row[j], expected) << "stored row " << s << " element " << j;
                }
            }
        }
}

// A quantized weight's values, whole (to_floats), by stored row and by input
// rows from the middle of its blocks' rows (input_rows), as its blocks hold them.
TEST(Matmul, QuantizedRowsGiveTheirBlocksValues) {
    std::mt19937 rng(7);
    for (DType dtype : {DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
        SCOPED_TRACE(to_string(dtype));
        const int64_t in = 512, out = 6, first = 100, count = 300;
        const Weight w = make_weight(dtype, in, out, true, rng);
        const std::vector<float> all = to_floats(w.matrix);
        for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<float>(w.math[i])) << "element " << i;
        std::vector<float> row(static_cast<size_t>(in)), inputs(static_cast<size_t>(count * out));
        for (int64_t o = 0; o < out; ++o) {
            stored_row(w.matrix, o, row.data());
            for (int64_t i = 0; i < in; ++i)
                ASSERT_EQ(row[i], static_cast<float>(w.math[i * out + o])) << o << " " << i;
        }
        input_rows(w.matrix, first, count, inputs.data());
        for (int64_t i = 0; i < count * out; ++i)
            ASSERT_EQ(inputs[i], static_cast<float>(w.math[first * out + i])) << "input value " << i;
    }
}

TEST(Matmul, SameInputsGiveSameBits) {
    std::mt19937 rng(9);
    for (DType dtype : {DType::F32, DType::BF16})
        for (bool out_by_in : {false, true})
            for (int rows : {3, 128}) {
                SCOPED_TRACE(testing::Message()
                             << to_string(dtype) << (out_by_in ? " (out, in)" : " (in, out)") << " rows " << rows);
                const int64_t in = 1030, out = 270;
                const Weight w = make_weight(dtype, in, out, out_by_in, rng);
                const std::vector<float> x = random_floats(static_cast<size_t>(rows * in), rng);
                std::vector<float> first(static_cast<size_t>(rows * out)), second(first.size());
                linear(x.data(), rows, w.matrix, nullptr, first.data(), out);
                linear(x.data(), rows, w.matrix, nullptr, second.data(), out);
                EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
            }
}

}  // namespace
