// An independent reference for ggml's block formats, written for the tests
// from the layouts of ggml's ggml-common.h alone: each value's fields are
// found by their bit addresses in the block (bit b of byte i is bit 8i + b)
// and combined in double precision. It also builds blocks from chosen
// values, so that a test knows a block's contents by construction.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "headscope/base/ggml_types.h"

namespace headscope::test {

using Block = std::vector<uint8_t>;

// `count` (<= 32) bits of `block` from bit `first`, the lowest first.
uint32_t block_bits(std::span<const uint8_t> block, size_t first, int count);
void set_block_bits(std::span<uint8_t> block, size_t first, int count, uint32_t value);

// An IEEE half's value from its sign, exponent and mantissa; a finite half's
// bits for `value` when it holds it exactly (a test's chosen scales).
double half_value(uint16_t bits);
uint16_t exact_half(double value);

// The values of one block of `type` (one of those dequantize_row reads), in double.
std::vector<double> reference_values(GgmlType type, std::span<const uint8_t> block);

// Value e of a Q8_0, Q4_K, Q6_K or MXFP4 block as its fields, the value being
// d * scale * (code - offset) - dmin * minimum (dmin and minimum 0 but in Q4_K;
// MXFP4's code its FP4 value doubled, d its scale halved).
struct IntegerFields {
    double d, dmin;
    int scale, minimum, code, offset;
};
IntegerFields integer_fields(GgmlType type, std::span<const uint8_t> block, size_t e);

// A block of random bytes whose float fields (the scales, or the value of a
// plain type) are finite.
Block random_block(GgmlType type, std::mt19937& rng);

// Q8_0 with scale d (a half's bits) and codes q.
Block q8_0_block(uint16_t d, const std::array<int8_t, 32>& q);
// Q4_K with super-scales d and dmin (halves' bits), 6-bit scales and minima
// of its 8 groups of 32, and 4-bit codes.
Block q4_k_block(uint16_t d, uint16_t dmin, const std::array<uint8_t, 8>& scales, const std::array<uint8_t, 8>& mins,
                 const std::array<uint8_t, 256>& q);

}  // namespace headscope::test
