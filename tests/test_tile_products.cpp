// A prompt's products over Q8_0, Q4_K and Q6_K weights on AMX-BF16 tiles
// (core/src/compute/tile_products.cpp), through linear(), against the
// double-precision product of the weights as the tests' own block decoder
// reads them (ggml_blocks_reference.h): shapes that are no multiple of the
// tiles' 16 rows or of the kernel's 32 rows of W, 128 rows of x or 2048
// inputs, so that every last tile is ragged; added to what the output held,
// the columns beside it untouched. On a CPU without the tiles the test says
// so in one skip line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml_blocks_reference.h"
#include "headscope/base/ggml_types.h"
#include "headscope/compute/matmul.h"

using namespace headscope;

namespace {

// W stored (out, in) of random blocks; per stored value its exact value and
// the magnitude of its terms, |d s (code - offset)| + |dmin m| (a Q4_K value
// near 0 is two large terms that cancel, and the tiles sum them apart).
struct Quantized {
    std::vector<std::byte> bytes;
    std::vector<double> value, terms;  // (out, in)
};

Quantized random_weight(GgmlType type, int64_t in, int64_t out, std::mt19937& rng) {
    const auto per_block = static_cast<int64_t>(ggml_type_traits(type).block_elements);
    Quantized w;
    for (int64_t b = 0; b < out * in / per_block; ++b) {
        const test::Block block = test::random_block(type, rng);
        for (uint8_t byte : block) w.bytes.push_back(static_cast<std::byte>(byte));
        for (double v : test::reference_values(type, block)) w.value.push_back(v);
        for (size_t e = 0; e < static_cast<size_t>(per_block); ++e) {
            const test::IntegerFields f = test::integer_fields(type, block, e);
            w.terms.push_back(std::abs(f.d * f.scale * (f.code - f.offset)) + std::abs(f.dmin * f.minimum));
        }
    }
    return w;
}

void check_type(GgmlType type, int64_t in, int64_t out, int rows, std::mt19937& rng) {
    const Quantized w = random_weight(type, in, out, rng);
    const Matrix matrix{w.bytes.data(), *dtype_of(type), in, out, true};
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::vector<float> x(static_cast<size_t>(rows) * in);
    for (size_t i = 0; i < x.size(); ++i) x[i] = uniform(rng) * (i % 7 == 0 ? 100.f : 1.f);  // some large values
    // Columns [2, 2 + out) of rows of out + 5, each holding 0.5 before.
    const int64_t ldo = out + 5, first = 2;
    std::vector<float> y(static_cast<size_t>(rows * ldo), 0.5f);
    linear(x.data(), rows, matrix, nullptr, y.data() + first, ldo, true);
    int wrong = 0;
    testing::Message first_wrong;
    for (int r = 0; r < rows; ++r)
        for (int64_t c = 0; c < ldo; ++c) {
            const double got = y[static_cast<size_t>(r * ldo + c)];
            const int64_t o = c - first;
            if (o < 0 || o >= out) {
                if (got != 0.5 && wrong++ == 0) first_wrong << "row " << r << " column " << c << " changed";
                continue;
            }
            double sum = 0.5, magnitude = 0, terms = 0;
            for (int64_t i = 0; i < in; ++i) {
                const double xi = x[static_cast<size_t>(r * in + i)];
                sum += xi * w.value[static_cast<size_t>(o * in + i)];
                magnitude += std::abs(xi * w.value[static_cast<size_t>(o * in + i)]);
                terms += std::abs(xi) * w.terms[static_cast<size_t>(o * in + i)];
            }
            // x as its two BF16 parts hold it, within 2^-16 of each value;
            // and float32's round-off of sums of at most 2 in + 8 terms.
            const double tolerance = std::ldexp(magnitude, -16) + (2 * in + 8) * std::ldexp(terms + 0.5, -24);
            if (!(std::abs(got - sum) <= tolerance) && wrong++ == 0)
                first_wrong << "row " << r << " output " << o << ": " << got << " vs " << sum << " (tolerance "
                            << tolerance << ")";
        }
    EXPECT_EQ(wrong, 0) << ggml_type_name(static_cast<uint32_t>(type)) << " " << rows << " rows: " << first_wrong;
}

TEST(TileProducts, MatchTheDoubleProductOfTheBlocksValues) {
    if (!tile_products(DType::Q8_0)) GTEST_SKIP() << prompt_products_status();
    std::mt19937 rng(41);
    // Q8_0 over 2,080 inputs: 2,048 and a last 32; 45 outputs: 32 and 13;
    // 133 rows: 128 and 5; 37 rows: two tiles of 16 and 5.
    for (int rows : {37, 133}) check_type(GgmlType::Q8_0, 2080, 45, rows, rng);
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) check_type(type, 512, 45, 37, rng);
}

}  // namespace
