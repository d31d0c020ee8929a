// The bit-level conversions of 16-bit floats to float32, inline so that the
// loops over a tensor's elements (base/dtype.cpp, io/safetensors.cpp)
// vectorise.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace headscope {

// A finite IEEE half to float: normals rebias the exponent (15 -> 127) and
// widen the mantissa; zero and subnormals are mantissa * 2^-24, which a
// float holds exactly. Written branch-free so the loop vectorises.
inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exponent = (h >> 10) & 0x1f;
    const uint32_t mantissa = h & 0x3ff;
    const uint32_t is_special = 0u - static_cast<uint32_t>(exponent == 31);  // Inf or NaN: all ones or zero
    const uint32_t normal = (((exponent + 112) | (0xffu & is_special)) << 23) | (mantissa << 13);
    const uint32_t small = std::bit_cast<uint32_t>(static_cast<float>(mantissa) * 0x1p-24f);
    const uint32_t is_small = 0u - static_cast<uint32_t>(exponent == 0);
    return std::bit_cast<float>((small & is_small) | (normal & ~is_small) | sign);
}

// bfloat16 is the top half of a float32, subnormals included.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Raw elements are read with memcpy: the data section of a safetensors file
// has no alignment guarantee.
template <typename Bits>
Bits load_bits(const std::byte* p) {
    Bits bits;
    std::memcpy(&bits, p, sizeof bits);
    return bits;
}

}  // namespace headscope
