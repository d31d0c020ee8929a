// The products of a few rows over Q4_K, Q6_K, Q8_0 and MXFP4 weights, which split
// each activation into two 8-bit parts and sum integer products
// (core/src/compute/integer_products.cpp): against the double-precision
// sum of the weights' values (the tests' own block decoder) within the
// split's error bound, on random blocks and on blocks and rows at their
// extremes; and bit for bit against the computation its comment describes,
// written here as plain scalar code, which this build's vector kernels
// must equal (so AVX-512, AVX2 and plain x86-64 builds agree).
// (Compiled, like the kernels, without contracting a product and a sum into an FMA.)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ggml_blocks_reference.h"
#include "headscope/base/ggml_types.h"
#include "headscope/compute/matmul.h"

using namespace headscope;

namespace {

// A weight stored (out, in) as a GGUF file stores it, and its blocks' bytes.
struct Weight {
    GgmlType type;
    int64_t in, out;
    std::vector<test::Block> blocks;  // out x in / block values, row by row
    std::vector<std::byte> bytes;
    Matrix matrix() const { return {bytes.data(), *dtype_of(type), in, out, true}; }
};

Weight make_weight(GgmlType type, int64_t in, const std::vector<test::Block>& blocks) {
    Weight w{type, in, 0, blocks, {}};
    w.out = static_cast<int64_t>(blocks.size() * ggml_type_traits(type).block_elements) / in;
    for (const test::Block& b : blocks)
        for (uint8_t byte : b) w.bytes.push_back(static_cast<std::byte>(byte));
    return w;
}

test::IntegerFields fields(const Weight& w, int64_t o, int64_t i) {
    const auto n = static_cast<int64_t>(ggml_type_traits(w.type).block_elements);
    return test::integer_fields(w.type, w.blocks[static_cast<size_t>((o * w.in + i) / n)], static_cast<size_t>(i % n));
}

// ---- The computation integer_products.cpp describes, one value at a time ----

struct Split {
    std::vector<int> hi, lo, rest;   // rest: MXFP4's third part
    std::vector<float> scale, fine;  // by group: s and T's unit
};

Split split(const std::vector<float>& x, int64_t group, bool three_parts) {
    Split p{std::vector<int>(x.size()), std::vector<int>(x.size()), std::vector<int>(x.size()), {}, {}};
    for (size_t g = 0; g < x.size() / static_cast<size_t>(group); ++g) {
        const auto first = x.begin() + static_cast<int64_t>(g) * group;
        float largest = 0;
        bool finite = true;
        for (auto v = first; v != first + group; ++v) {
            finite = finite && std::isfinite(*v);
            largest = std::max(largest, std::abs(*v));
        }
        const float s = largest / 127;
        if (!finite || s < std::numeric_limits<float>::min()) {
            p.scale.push_back(finite ? 0.f : NAN), p.fine.push_back(finite ? 0.f : NAN);
            continue;
        }
        p.scale.push_back(s), p.fine.push_back(three_parts ? s / 64516 : s / 254);
        for (int64_t j = 0; j < group; ++j) {
            const size_t at = static_cast<size_t>(g * group + j);
            const float h = std::clamp(std::nearbyint(x[at] / s), -127.f, 127.f);
            const float l = std::clamp(std::nearbyint((x[at] - s * h) * 254 / s), -127.f, 127.f);
            const double left =
                static_cast<double>(x[at]) - static_cast<double>(s) * h - static_cast<double>(s) * l / 254;
            p.hi[at] = static_cast<int>(h), p.lo[at] = static_cast<int>(l);
            p.rest[at] =
                static_cast<int>(std::clamp(std::nearbyint(static_cast<float>(left * 64516 / s)), -127.f, 127.f));
        }
    }
    return p;
}

// Output o of row x: per block, the lanes of integer sums, then the float
// steps in the comment's order, into 16 lanes. Q4_K, Q6_K and Q8_0: 16 lanes
// of T, each code times its scale (Q6_K: code - 32) times J = 254 hi + lo,
// lane l the values 2l and 2l + 1 of each 32 (Q4_K: as below), and Q4_K's
// minima times their groups' sums of J in lanes 0-7. MXFP4: 8 lanes (lane l the values 4l to
// 4l + 3 of each 32) of T = 254^2 H + 254 L + R, its odd blocks' in lanes 8-15.
float described_product(const Weight& w, int64_t o, const std::vector<float>& x) {
    const auto n = static_cast<int64_t>(ggml_type_traits(w.type).block_elements);
    const bool three_parts = w.type == GgmlType::MXFP4;
    const Split p = split(x, n, three_parts);
    std::array<float, 16> acc{};
    for (int64_t b = 0; b < w.in / n; ++b) {
        const test::IntegerFields first = fields(w, o, b * n);
        const auto d = static_cast<float>(first.d), dmin = static_cast<float>(first.dmin);
        if (three_parts) {
            float* lanes = acc.data() + (b % 2 ? 8 : 0);
            std::array<int32_t, 8> t{};
            for (int64_t e = 0; e < n; ++e) {
                const int64_t i = b * n + e;
                const test::IntegerFields f = fields(w, o, i);
                t[static_cast<size_t>(e / 4)] += f.scale * f.code * (64516 * p.hi[i] + 254 * p.lo[i] + p.rest[i]);
            }
            for (size_t l = 0; l < 8; ++l) lanes[l] = lanes[l] + static_cast<float>(t[l]) * (d * p.fine[b]);
            continue;
        }
        std::array<int32_t, 16> t{}, minima{};
        for (int64_t e = 0; e < n; ++e) {
            const int64_t i = b * n + e;
            const test::IntegerFields f = fields(w, o, i);
            const int joined = 254 * p.hi[i] + p.lo[i];
            // Q4_K: values 4l to 4l + 3 of groups 0, 1, 4, 5 in lane l, of groups 2, 3, 6, 7 in lane l + 8.
            const int64_t lane = w.type == GgmlType::Q4_K ? e % 32 / 4 + 8 * (e / 64 % 2) : e % 32 / 2;
            t[static_cast<size_t>(lane)] += f.scale * (f.code - f.offset) * joined;
            minima[static_cast<size_t>(e / 32)] += f.minimum * joined;
        }
        for (size_t l = 0; l < 16; ++l) {
            acc[l] = acc[l] + static_cast<float>(t[l]) * (d * p.fine[b]);
            if (w.type == GgmlType::Q4_K) acc[l] = acc[l] + static_cast<float>(minima[l]) * -(dmin * p.fine[b]);
        }
    }
    for (size_t half = 8; half > 0; half /= 2)  // the lanes summed in halves
        for (size_t l = 0; l < half; ++l) acc[l] = acc[l] + acc[l + half];
    return acc[0];
}

// ---- Weights and rows ----

// MXFP4's scale byte kept within 2^15 of 1, so that its factors and
// products stay within float32's normal range (a byte's whole range of
// 2^-127 to 2^127 does not).
std::vector<test::Block> random_blocks(GgmlType type, size_t count, std::mt19937& rng) {
    std::vector<test::Block> blocks;
    for (size_t i = 0; i < count; ++i) {
        blocks.push_back(test::random_block(type, rng));
        if (type == GgmlType::MXFP4) blocks.back()[0] = static_cast<uint8_t>(112 + rng() % 31);
    }
    return blocks;
}

// Blocks whose integer sums are the largest the type allows: every code and
// scale at its extreme (Q6_K's codes 0 and 63, its scales -128 and 127;
// MXFP4's codes 6 and -6, doubled 12 and -12).
std::vector<test::Block> extreme_blocks(GgmlType type) {
    const uint16_t one = test::exact_half(1.0), half = test::exact_half(0.5);
    switch (type) {
        case GgmlType::Q8_0: {
            std::array<int8_t, 32> lowest, highest;
            lowest.fill(-128), highest.fill(127);
            return {test::q8_0_block(one, lowest), test::q8_0_block(half, highest)};
        }
        case GgmlType::MXFP4: {
            test::Block highest(17, 0x77), lowest(17, 0xff);
            highest[0] = 127, lowest[0] = 130;
            return {highest, lowest};
        }
        case GgmlType::Q4_K: {
            std::array<uint8_t, 8> sixes, zeros{};
            std::array<uint8_t, 256> fifteens;
            sixes.fill(63), fifteens.fill(15);
            return {test::q4_k_block(one, half, sixes, sixes, fifteens),
                    test::q4_k_block(one, one, sixes, zeros, fifteens)};
        }
        default: {
            std::vector<test::Block> blocks;
            for (uint8_t codes : {0x00, 0xff})
                for (uint8_t scale : {0x80, 0x7f}) {
                    test::Block b(210, codes);
                    std::fill(b.begin() + 192, b.begin() + 208, scale);
                    test::set_block_bits(b, 8 * 208, 16, one);
                    blocks.push_back(b);
                }
            return blocks;
        }
    }
}

std::vector<float> normal_row(int64_t in, std::mt19937& rng) {
    std::normal_distribution<float> normal;
    std::vector<float> x(static_cast<size_t>(in));
    for (float& v : x) v = normal(rng);
    return x;
}

// Rows at their extremes: a huge outlier among small values, a zero first
// block, every value the largest (hi 127, lo 0), alternating signs.
std::vector<std::vector<float>> extreme_rows(int64_t in, std::mt19937& rng) {
    std::vector<float> outlier = normal_row(in, rng), zero_block = normal_row(in, rng);
    for (float& v : outlier) v *= 1e-3f;
    outlier[static_cast<size_t>(in / 3)] = 3e4f;
    std::fill(zero_block.begin(), zero_block.begin() + 256, 0.f);
    std::vector<float> largest(static_cast<size_t>(in), 7.5f), alternating(static_cast<size_t>(in));
    for (size_t j = 0; j < alternating.size(); ++j) alternating[j] = j % 2 ? -2.f : 2.f;
    return {outlier, zero_block, largest, alternating};
}

std::vector<float> products(const Weight& w, const std::vector<std::vector<float>>& rows) {
    std::vector<float> x;
    for (const auto& row : rows) x.insert(x.end(), row.begin(), row.end());
    std::vector<float> out(rows.size() * static_cast<size_t>(w.out));
    linear(x.data(), static_cast<int>(rows.size()), w.matrix(), nullptr, out.data(), w.out);
    return out;
}

// Each output against the double sum of the blocks' values times x: x is
// split within s / 508 of its group (s = its largest / 127; s / 500 covers
// the rounding of x - s hi; MXFP4's three parts within s / 129032, which
// s / 254 / 500 covers), and the float steps round each term that they add
// (d s times a code's part, and dmin s times a minimum's, each as large as
// the other) once for every step, at most 3 a block (MXFP4: 4, its T
// rounded to float32 too) and 8 at the end.
void check_against_double(const Weight& w, const std::vector<std::vector<float>>& rows) {
    const std::vector<float> got = products(w, rows);
    const auto n = static_cast<int64_t>(ggml_type_traits(w.type).block_elements);
    for (size_t r = 0; r < rows.size(); ++r)
        for (int64_t o = 0; o < w.out; ++o) {
            const std::vector<float>& x = rows[r];
            std::vector<double> largest(static_cast<size_t>(w.in / n));  // by group
            for (int64_t i = 0; i < w.in; ++i) largest[i / n] = std::max<double>(largest[i / n], std::abs(x[i]));
            const bool three_parts = w.type == GgmlType::MXFP4;
            double sum = 0, split_bound = 0, terms = 0;
            for (int64_t i = 0; i < w.in; ++i) {
                const test::IntegerFields f = fields(w, o, i);
                const double value = f.d * f.scale * (f.code - f.offset) - f.dmin * f.minimum;
                sum += value * x[i];
                split_bound += std::abs(value) * largest[i / n] / 127 / 500 / (three_parts ? 254 : 1);
                terms += (std::abs(f.d * f.scale * f.code) + std::abs(f.d * f.scale * f.offset) +
                          std::abs(f.dmin * f.minimum)) *
                         std::abs(x[i]);
            }
            const double steps = (three_parts ? 4 : 3) * w.in / n + 8 + 4;
            const double tolerance = split_bound + steps * std::ldexp(1.0, -24) * terms * 1.01;
            const float y = got[r * static_cast<size_t>(w.out) + static_cast<size_t>(o)];
            ASSERT_LE(std::abs(y - sum), tolerance) << "row " << r << " output " << o << ": " << y << " vs " << sum;
        }
}

const GgmlType integer_types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::MXFP4};

TEST(IntegerProducts, RandomBlocksMatchTheDoubleSum) {
    std::mt19937 rng(11);
    for (GgmlType type : integer_types) {
        SCOPED_TRACE(ggml_type_traits(type).name);
        const int64_t in = 1024, out = 5;
        const Weight w =
            make_weight(type, in, random_blocks(type, out * in / ggml_type_traits(type).block_elements, rng));
        for (int rows : {1, 3, 8}) {
            std::vector<std::vector<float>> x;
            for (int r = 0; r < rows; ++r) x.push_back(normal_row(in, rng));
            check_against_double(w, x);
        }
        check_against_double(w, extreme_rows(in, rng));
    }
}

TEST(IntegerProducts, ExtremeBlocksMatchTheDoubleSum) {
    std::mt19937 rng(12);
    for (GgmlType type : integer_types) {
        SCOPED_TRACE(ggml_type_traits(type).name);
        std::vector<test::Block> blocks = extreme_blocks(type);
        const auto per_row = static_cast<size_t>(256 / ggml_type_traits(type).block_elements);
        while (blocks.size() % per_row) blocks.push_back(blocks[blocks.size() % 2]);
        const Weight w = make_weight(type, 256, blocks);
        std::vector<std::vector<float>> rows = extreme_rows(256, rng);
        rows.push_back(normal_row(256, rng));
        check_against_double(w, rows);
    }
}

TEST(IntegerProducts, EqualTheDescribedComputationBitForBit) {
    std::mt19937 rng(13);
    for (GgmlType type : integer_types) {
        SCOPED_TRACE(ggml_type_traits(type).name);
        const int64_t in = type == GgmlType::MXFP4 ? 544 : 512, out = 6;  // MXFP4: a last block unpaired
        std::vector<test::Block> blocks = random_blocks(type, out * in / ggml_type_traits(type).block_elements, rng);
        const std::vector<test::Block> extremes = extreme_blocks(type);
        std::copy(extremes.begin(), extremes.end(), blocks.end() - static_cast<int64_t>(extremes.size()));
        if (type == GgmlType::MXFP4) blocks[0][0] = 0, blocks[1][0] = 1;  // subnormal scales, the same bits too
        const Weight w = make_weight(type, in, blocks);
        for (int rows : {1, 2, 5, 8}) {
            std::vector<std::vector<float>> x = extreme_rows(in, rng);
            x.resize(static_cast<size_t>(rows), normal_row(in, rng));
            const std::vector<float> got = products(w, x);
            for (int r = 0; r < rows; ++r)
                for (int64_t o = 0; o < out; ++o) {
                    const float expected = described_product(w, o, x[static_cast<size_t>(r)]);
                    const float y = got[static_cast<size_t>(r * out + o)];
                    ASSERT_EQ(std::memcmp(&y, &expected, sizeof y), 0)
                        << rows << " rows, row " << r << " output " << o << ": " << y << " vs " << expected;
                }
        }
    }
}

TEST(IntegerProducts, InfOrNaNInARowGivesNaN) {
    std::mt19937 rng(14);
    for (GgmlType type : integer_types) {
        SCOPED_TRACE(ggml_type_traits(type).name);
        const Weight w = make_weight(type, 256, random_blocks(type, 256 / ggml_type_traits(type).block_elements, rng));
        for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
            std::vector<float> x = normal_row(256, rng);
            x[7] = bad;
            EXPECT_TRUE(std::isnan(products(w, {x})[0])) << bad;
        }
    }
}

}  // namespace
