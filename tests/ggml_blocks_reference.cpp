// The tests' reference for ggml's block formats (ggml_blocks_reference.h).
// Each function below reads one block format's layout (ggml-common.h) as bit
// addresses: value e's code, its group's scale and the block's scales.
#include "ggml_blocks_reference.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace headscope::test {

namespace {

// IQ4_NL's and IQ4_XS's codebook (ggml-common.h's kvalues_iq4nl).
constexpr int iq4_codebook[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

double half_at(std::span<const uint8_t> block, size_t byte) {
    return half_value(static_cast<uint16_t>(block_bits(block, 8 * byte, 16)));
}

int8_t int8_at(std::span<const uint8_t> block, size_t byte) {
    return static_cast<int8_t>(block_bits(block, 8 * byte, 8));
}

// The 4-bit code of value e where values e and e + 16 of a 32-value group
// share byte `codes + e % 16` (low nibble, high nibble).
uint32_t paired_nibble(std::span<const uint8_t> block, size_t codes, size_t e) {
    return block_bits(block, 8 * (codes + e % 16) + 4 * ((e % 32) / 16), 4);
}

// Where Q4_K's and Q5_K's 6-bit scale or minimum of group g lies (12 bytes
// from byte 4): groups 0-3 whole in one byte, groups 4-7 as 4 low bits and
// 2 high bits in two bytes.
struct SixBits {
    size_t low_first;
    int low_count;
    size_t high_first;  // 2 bits, when low_count is 4
};

SixBits k4_field(size_t g, bool minimum) {
    const size_t shift = minimum ? 4 : 0;
    if (g < 4) return {8 * (4 + g + shift), 6, 0};
    return {8 * (8 + g) + shift, 4, 8 * (g + shift) + 6};
}

uint32_t k4_six_bits(std::span<const uint8_t> block, size_t g, bool minimum) {
    const SixBits field = k4_field(g, minimum);
    const uint32_t low = block_bits(block, field.low_first, field.low_count);
    return field.low_count == 6 ? low : low | block_bits(block, field.high_first, 2) << 4;
}

void set_k4_six_bits(std::span<uint8_t> block, size_t g, bool minimum, uint32_t value) {
    const SixBits field = k4_field(g, minimum);
    set_block_bits(block, field.low_first, field.low_count, value);
    if (field.low_count == 4) set_block_bits(block, field.high_first, 2, value >> 4);
}

// FP4 E2M1: a sign, 2 bits of exponent (bias 1) and 1 of mantissa.
double e2m1(uint32_t code) {
    const uint32_t exponent = (code >> 1) & 3, mantissa = code & 1;
    const double magnitude = exponent == 0 ? 0.5 * mantissa : (1 + 0.5 * mantissa) * std::ldexp(1.0, exponent - 1);
    return code & 8 ? -magnitude : magnitude;
}

double value_of(GgmlType type, std::span<const uint8_t> b, size_t e) {
    switch (type) {
        case GgmlType::F32: return std::bit_cast<float>(block_bits(b, 0, 32));
        case GgmlType::F16: return half_at(b, 0);
        case GgmlType::BF16: return std::bit_cast<float>(block_bits(b, 0, 16) << 16);
        case GgmlType::Q4_0: return (static_cast<double>(paired_nibble(b, 2, e)) - 8) * half_at(b, 0);
        case GgmlType::Q4_1: return paired_nibble(b, 4, e) * half_at(b, 0) + half_at(b, 2);
        case GgmlType::Q5_0: {
            const double code = paired_nibble(b, 6, e) + 16.0 * block_bits(b, 16 + e, 1);
            return (code - 16) * half_at(b, 0);
        }
        case GgmlType::Q5_1: {
            const double code = paired_nibble(b, 8, e) + 16.0 * block_bits(b, 32 + e, 1);
            return code * half_at(b, 0) + half_at(b, 2);
        }
        case GgmlType::Q8_0:
        case GgmlType::Q4_K:
        case GgmlType::Q6_K: {
            const IntegerFields f = integer_fields(type, b, e);
            return f.d * f.scale * (f.code - f.offset) - f.dmin * f.minimum;
        }
        case GgmlType::Q2_K: {
            const size_t g = e / 16;
            const double code = block_bits(b, 8 * (16 + 32 * (e / 128) + e % 32) + 2 * ((e % 128) / 32), 2);
            return half_at(b, 80) * block_bits(b, 8 * g, 4) * code - half_at(b, 82) * block_bits(b, 8 * g + 4, 4);
        }
        case GgmlType::Q3_K: {
            const size_t g = e / 16;
            const double low = block_bits(b, 8 * (32 + 32 * (e / 128) + e % 32) + 2 * ((e % 128) / 32), 2);
            const double high_set = block_bits(b, 8 * (e % 32) + e / 32, 1);
            const double scale = block_bits(b, 8 * (96 + g % 8) + 4 * (g / 8), 4) |
                                 block_bits(b, 8 * (104 + g % 4) + 2 * (g / 4), 2) << 4;
            return half_at(b, 108) * (scale - 32) * (low - (high_set ? 0 : 4));
        }
        case GgmlType::Q5_K: {
            const size_t g = e / 32;
            const double code = block_bits(b, 8 * (48 + 32 * (e / 64) + e % 32) + 4 * (g % 2), 4) +
                                16.0 * block_bits(b, 8 * (16 + e % 32) + g, 1);
            return half_at(b, 0) * k4_six_bits(b, g, false) * code - half_at(b, 2) * k4_six_bits(b, g, true);
        }
        case GgmlType::IQ4_NL: return half_at(b, 0) * iq4_codebook[paired_nibble(b, 2, e)];
        case GgmlType::IQ4_XS: {
            const size_t g = e / 32;
            const double scale = block_bits(b, 8 * (4 + g / 2) + 4 * (g % 2), 4) | block_bits(b, 16 + 2 * g, 2) << 4;
            return half_at(b, 0) * (scale - 32) * iq4_codebook[paired_nibble(b, 8 + 16 * g, e)];
        }
        case GgmlType::MXFP4:
            return std::ldexp(e2m1(paired_nibble(b, 1, e)), static_cast<int>(block_bits(b, 0, 8)) - 127);
        default: throw std::invalid_argument("no reference for this type");
    }
}

}  // namespace

IntegerFields integer_fields(GgmlType type, std::span<const uint8_t> b, size_t e) {
    switch (type) {
        case GgmlType::Q8_0: return {half_at(b, 0), 0, 1, 0, int8_at(b, 2 + e), 0};
        case GgmlType::Q4_K: {
            const size_t g = e / 32;
            const auto code = static_cast<int>(block_bits(b, 8 * (16 + 32 * (e / 64) + e % 32) + 4 * (g % 2), 4));
            return {half_at(b, 0),
                    half_at(b, 2),
                    static_cast<int>(k4_six_bits(b, g, false)),
                    static_cast<int>(k4_six_bits(b, g, true)),
                    code,
                    0};
        }
        case GgmlType::Q6_K: {
            const size_t half = e / 128, run = (e % 128) / 32, l = e % 32;
            const uint32_t low = block_bits(b, 8 * (64 * half + 32 * (run % 2) + l) + 4 * (run / 2), 4);
            const uint32_t high = block_bits(b, 8 * (128 + 32 * half + l) + 2 * run, 2);
            return {half_at(b, 208), 0, int8_at(b, 192 + e / 16), 0, static_cast<int>(low | high << 4), 32};
        }
        case GgmlType::MXFP4: {  // the FP4 value doubled, an integer, and the scale halved
            const double d = std::ldexp(1.0, static_cast<int>(block_bits(b, 0, 8)) - 128);
            return {d, 0, 1, 0, static_cast<int>(2 * e2m1(paired_nibble(b, 1, e))), 0};
        }
        default: throw std::invalid_argument("no integer fields for this type");
    }
}

namespace {

// Where a block of `type` keeps half floats (its scales), by byte.
std::vector<size_t> half_fields(GgmlType type) {
    switch (type) {
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K: return {0, 2};
        case GgmlType::Q2_K: return {80, 82};
        case GgmlType::Q3_K: return {108};
        case GgmlType::Q6_K: return {208};
        case GgmlType::F32:
        case GgmlType::BF16:
        case GgmlType::MXFP4: return {};
        default: return {0};
    }
}

}  // namespace

uint32_t block_bits(std::span<const uint8_t> block, size_t first, int count) {
    uint32_t value = 0;
    for (int i = 0; i < count; ++i) {
        const size_t bit = first + static_cast<size_t>(i);
        value |= static_cast<uint32_t>((block[bit / 8] >> (bit % 8)) & 1) << i;
    }
    return value;
}

void set_block_bits(std::span<uint8_t> block, size_t first, int count, uint32_t value) {
    for (int i = 0; i < count; ++i) {
        const size_t bit = first + static_cast<size_t>(i);
        const auto mask = static_cast<uint8_t>(1u << (bit % 8));
        block[bit / 8] = static_cast<uint8_t>(((value >> i) & 1) ? block[bit / 8] | mask : block[bit / 8] & ~mask);
    }
}

double half_value(uint16_t bits) {
    const int exponent = (bits >> 10) & 31, mantissa = bits & 1023;
    const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return bits & 0x8000 ? -magnitude : magnitude;
}

uint16_t exact_half(double value) {
    for (uint32_t bits = 0; bits < 0x10000; ++bits)
        if (((bits >> 10) & 31) != 31 && half_value(static_cast<uint16_t>(bits)) == value)
            return static_cast<uint16_t>(bits);
    throw std::invalid_argument("no half holds this value exactly");
}

std::vector<double> reference_values(GgmlType type, std::span<const uint8_t> block) {
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    if (block.size() != traits.block_bytes) throw std::invalid_argument("not one block");
    std::vector<double> values(traits.block_elements);
    for (size_t e = 0; e < values.size(); ++e) values[e] = value_of(type, block, e);
    return values;
}

Block random_block(GgmlType type, std::mt19937& rng) {
    Block block(ggml_type_traits(type).block_bytes);
    for (uint8_t& byte : block) byte = static_cast<uint8_t>(rng());
    for (size_t at : half_fields(type)) {
        if (block_bits(block, 8 * at + 10, 5) == 31) set_block_bits(block, 8 * at + 14, 1, 0);  // not Inf or NaN
    }
    // A plain float's exponent not all ones: bit 30 of a float32, bit 14 of a bfloat16.
    if (type == GgmlType::F32 && block_bits(block, 23, 8) == 255) set_block_bits(block, 30, 1, 0);
    if (type == GgmlType::BF16 && block_bits(block, 7, 8) == 255) set_block_bits(block, 14, 1, 0);
    return block;
}

Block q8_0_block(uint16_t d, const std::array<int8_t, 32>& q) {
    Block block(34);
    set_block_bits(block, 0, 16, d);
    for (size_t j = 0; j < 32; ++j) set_block_bits(block, 8 * (2 + j), 8, static_cast<uint8_t>(q[j]));
    return block;
}

Block q4_k_block(uint16_t d, uint16_t dmin, const std::array<uint8_t, 8>& scales, const std::array<uint8_t, 8>& mins,
                 const std::array<uint8_t, 256>& q) {
    Block block(144);
    set_block_bits(block, 0, 16, d);
    set_block_bits(block, 16, 16, dmin);
    for (size_t g = 0; g < 8; ++g) {
        set_k4_six_bits(block, g, false, scales[g]);
        set_k4_six_bits(block, g, true, mins[g]);
    }
    for (size_t e = 0; e < 256; ++e)
        set_block_bits(block, 8 * (16 + 32 * (e / 64) + e % 32) + 4 * ((e / 32) % 2), 4, q[e]);
    return block;
}

}  // namespace headscope::test
