// ggml's block formats (base/ggml_types.h) against the tests' independent
// reference (ggml_blocks_reference.h): random blocks of every format
// Headscope reads, and blocks built from chosen values whose dequantized
// values are known by construction.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ggml_blocks_reference.h"
#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"

using namespace headscope;

namespace {

const GgmlType read_types[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
                               GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
                               GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
                               GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

// The bytes a layout's words give its fields: the sum of each "N bytes of" (or "1 byte of").
uint32_t layout_bytes(const std::string& layout) {
    uint32_t bytes = 0;
    std::istringstream words(layout);
    for (std::string previous, word; words >> word; previous = word)
        if ((word == "bytes" || word == "byte") && !previous.empty() && std::isdigit(previous[0]))
            bytes += static_cast<uint32_t>(std::stoul(previous));
    return bytes;
}

std::vector<float> dequantized(GgmlType type, const std::vector<uint8_t>& bytes, size_t n) {
    std::vector<float> out(n);
    dequantize_row(type, reinterpret_cast<const std::byte*>(bytes.data()), n, out.data());
    return out;
}

TEST(GgmlTypes, NamesAndBlockSizes) {
    EXPECT_EQ(ggml_type_name(2), "Q4_0");
    EXPECT_EQ(ggml_type_name(12), "Q4_K");
    EXPECT_EQ(ggml_type_name(30), "BF16");
    EXPECT_EQ(ggml_type_name(4), "type 4");  // Q4_2, long removed
    EXPECT_EQ(ggml_type_traits(4), nullptr);
    EXPECT_EQ(ggml_type_traits(1000), nullptr);
    // A block's bytes follow from its layout (ggml-common.h's static_asserts).
    EXPECT_EQ(ggml_type_traits(GgmlType::Q4_K).block_bytes, 2u + 2 + 12 + 256 / 2);
    EXPECT_EQ(ggml_type_traits(GgmlType::Q6_K).block_bytes, 2u + 256 / 16 + 3 * 256 / 4);
    EXPECT_EQ(ggml_type_traits(GgmlType::MXFP4).block_bytes, 1u + 32 / 2);
    for (uint32_t id = 0; id < 64; ++id) {
        if (const GgmlTypeTraits* traits = ggml_type_traits(id)) {
            EXPECT_EQ(static_cast<uint32_t>(traits->type), id);
        }
    }
}

// Each readable type's layout words name its block's fields, whose bytes
// add up to the block's; the types Headscope does not read have none.
TEST(GgmlTypes, LayoutWordsAddUpToTheBlock) {
    for (uint32_t id = 0; id < 64; ++id) {
        const GgmlTypeTraits* traits = ggml_type_traits(id);
        if (!traits) continue;
        SCOPED_TRACE(traits->name);
        const std::string layout = traits->layout;
        if (!traits->dequantized) {
            EXPECT_EQ(layout, "");
            continue;
        }
        EXPECT_EQ(layout_bytes(layout), traits->block_bytes) << layout;
    }
    EXPECT_EQ(layout_bytes(ggml_type_traits(GgmlType::Q4_K).layout), 2u + 2 + 12 + 256 / 2);
}

// Exactly: every formula is at most one rounding of a product or sum of
// values a float holds exactly, which rounding the reference's double gives too.
TEST(GgmlBlocks, RandomBlocksEqualTheReference) {
    std::mt19937 rng(1234);
    constexpr size_t blocks = 64;
    for (GgmlType type : read_types) {
        const GgmlTypeTraits& traits = ggml_type_traits(type);
        ASSERT_TRUE(traits.dequantized) << traits.name;
        std::vector<uint8_t> row;
        std::vector<double> expected;
        for (size_t i = 0; i < blocks; ++i) {
            const test::Block block = test::random_block(type, rng);
            const std::vector<double> values = test::reference_values(type, block);
            row.insert(row.end(), block.begin(), block.end());
            expected.insert(expected.end(), values.begin(), values.end());
        }
        const std::vector<float> got = dequantized(type, row, expected.size());
        size_t wrong = 0;
        for (size_t i = 0; i < got.size(); ++i)
            if (got[i] != static_cast<float>(expected[i]) && wrong++ < 3)
                ADD_FAILURE() << traits.name << " value " << i << ": " << got[i] << ", reference " << expected[i];
        EXPECT_EQ(wrong, 0u) << traits.name;
    }
}

TEST(GgmlBlocks, TypesNotReadAreAnErrorNamingThem) {
    size_t unread = 0;
    for (uint32_t id = 0; id < 64; ++id) {
        const GgmlTypeTraits* traits = ggml_type_traits(id);
        if (!traits || traits->dequantized) continue;
        ++unread;
        std::vector<uint8_t> block(traits->block_bytes);
        try {
            dequantized(traits->type, block, traits->block_elements);
            ADD_FAILURE() << traits->name << " was dequantized";
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()),
                      std::string("tensors of type ") + traits->name + " are not read by Headscope");
        }
    }
    EXPECT_GE(unread, 15u);  // Q8_1, Q8_K, the I-quants but IQ4, the integers, F64, TQ, NVFP4, Q1_0
}

// d = 0.5 and the codes -128..127 over 8 blocks: value i is (i - 128) / 2.
TEST(GgmlBlocks, Q8_0BlocksOfKnownCodes) {
    std::vector<uint8_t> row;
    for (int b = 0; b < 8; ++b) {
        std::array<int8_t, 32> q;
        for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(-128 + 32 * b + j);
        const test::Block block = test::q8_0_block(test::exact_half(0.5), q);
        row.insert(row.end(), block.begin(), block.end());
    }
    const std::vector<float> got = dequantized(GgmlType::Q8_0, row, 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(got[i], (i - 128) * 0.5f) << i;
}

// Scales and minima that use all 6 bits (the high two of groups 4-7 live
// in other bytes than their low four), codes e % 16.
TEST(GgmlBlocks, Q4_KBlockOfChosenScalesAndMinima) {
    const std::array<uint8_t, 8> scales = {1, 63, 17, 32, 48, 5, 60, 33};
    const std::array<uint8_t, 8> mins = {0, 7, 63, 31, 16, 62, 1, 45};
    std::array<uint8_t, 256> q;
    for (int e = 0; e < 256; ++e) q[e] = static_cast<uint8_t>(e % 16);
    const test::Block block = test::q4_k_block(test::exact_half(0.25), test::exact_half(0.125), scales, mins, q);
    const std::vector<float> got = dequantized(GgmlType::Q4_K, block, 256);
    for (int e = 0; e < 256; ++e) ASSERT_EQ(got[e], 0.25f * scales[e / 32] * (e % 16) - 0.125f * mins[e / 32]) << e;
}

// The reference's own bit addressing and half decoding.
TEST(GgmlBlocks, ReferenceBitsAndHalves) {
    std::vector<uint8_t> bytes = {0b10110100, 0b00000001};
    EXPECT_EQ(test::block_bits(bytes, 2, 3), 0b101u);
    EXPECT_EQ(test::block_bits(bytes, 7, 2), 0b11u);
    test::set_block_bits(bytes, 4, 6, 0b100110);
    EXPECT_EQ(bytes[0], 0b01100100);
    EXPECT_EQ(bytes[1], 0b00000010);
    EXPECT_EQ(test::half_value(0x3c00), 1.0);
    EXPECT_EQ(test::half_value(0xc000), -2.0);
    EXPECT_EQ(test::half_value(0x0001), std::ldexp(1.0, -24));
    EXPECT_EQ(test::half_value(0x7bff), 65504.0);
    EXPECT_EQ(test::exact_half(0.5), 0x3800);
}

}  // namespace

// Hugging Face's MXFP4 (gpt-oss's experts: codes and exponents apart, values
// 2j and 2j + 1 in byte j) read as transformers' convert_moe_packed_tensors
// reads it, a table of FP4 values times 2^(e - 127), against the ggml blocks
// mxfp4_blocks_from_split makes of it.
TEST(GgmlBlocks, Mxfp4FromHuggingFacesSplitBlocksKeepsEveryValue) {
    const double fp4[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
    std::mt19937 rng(41);
    const size_t groups = 24;
    std::vector<std::byte> codes(groups * 16), exponents(groups);
    for (std::byte& b : codes) b = static_cast<std::byte>(rng() % 256);
    for (size_t g = 0; g < groups; ++g)  // every code; exponents around 1, and the subnormal ones
        exponents[g] = static_cast<std::byte>(g < 2 ? g : 120 + rng() % 16);
    std::vector<std::byte> blocks(groups * 17);
    mxfp4_blocks_from_split(codes.data(), exponents.data(), groups, blocks.data());
    std::vector<float> values(groups * 32);
    dequantize_row(GgmlType::MXFP4, blocks.data(), values.size(), values.data());
    for (size_t g = 0; g < groups; ++g)
        for (int v = 0; v < 32; ++v) {
            const auto byte = std::to_integer<int>(codes[g * 16 + v / 2]);
            const double expected =
                std::ldexp(fp4[v % 2 ? byte >> 4 : byte & 15], std::to_integer<int>(exponents[g]) - 127);
            ASSERT_EQ(values[g * 32 + v], static_cast<float>(expected)) << "group " << g << ", value " << v;
        }
}
