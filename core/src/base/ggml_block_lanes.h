// The block formats a Q4_K_M or Q8_0 file holds (Q4_K, Q6_K, Q8_0: the
// layouts of ggml's ggml-common.h, the formulas of its dequantize_row_*)
// decoded `lanes` values at a time into a vector register: each calls
// visit(at, w) with the values [at, at + lanes) of the blocks as float32.
// dequantize_row stores them; the products of a few rows
// (compute/quantized_products.cpp) multiply them by the activations where
// they are, so that a generated token reads each weight's bytes once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "half_float.h"
#include "vector_lanes.h"

namespace headscope::ggml_lanes {

static_assert(16 % lanes == 0, "a Q6_K scale covers 16 values: whole registers of them");

// A block's scale: by the CPU's conversion where the build may use it (one
// instruction of the few dozen a block's values take), else half_float.h's.
inline float half_at(const uint8_t* p) {
    const uint16_t bits = load_bits<uint16_t>(reinterpret_cast<const std::byte*>(p));
#if defined(__F16C__)
    return _cvtsh_ss(bits);
#else
    return f16_to_f32(bits);
#endif
}

template <typename Bytes>
Bytes bytes_at(const uint8_t* p) {
    Bytes bytes;
    std::memcpy(&bytes, p, sizeof bytes);
    return bytes;
}

// The codes in `bytes` as float32, signed or not. By the CPU's widening
// where the build may use it: GCC 12 converts byte vectors one by one.
template <typename Bytes>
Lanes lanes_of(Bytes bytes) {
    // Which widening the vector instructions take (the loop below needs none).
    [[maybe_unused]] constexpr bool is_signed = std::is_same_v<Bytes, LaneSignedBytes>;
    Lanes out;
#if defined(__AVX512F__)
    __m128i packed;
    std::memcpy(&packed, &bytes, sizeof packed);
    const __m512i ints =
        is_signed ? _mm512_maskz_cvtepi8_epi32(0xffff, packed) : _mm512_maskz_cvtepu8_epi32(0xffff, packed);
    const __m512 floats = _mm512_maskz_cvtepi32_ps(0xffff, ints);
#elif defined(__AVX2__)
    const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&bytes));
    const __m256 floats = _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(packed) : _mm256_cvtepu8_epi32(packed));
#else
    float floats[lanes];
    for (int l = 0; l < lanes; ++l) floats[l] = static_cast<float>(bytes[l]);
#endif
    std::memcpy(&out, &floats, sizeof out);
    return out;
}

// The 6-bit scale and minimum of group j of Q4_K and Q5_K, from their 12 bytes.
inline void k4_scale_min(const uint8_t* packed, int j, float& scale, float& minimum) {
    if (j < 4) {
        scale = static_cast<float>(packed[j] & 63);
        minimum = static_cast<float>(packed[j + 4] & 63);
    } else {
        scale = static_cast<float>((packed[j + 4] & 15) | (packed[j - 4] >> 6) << 4);
        minimum = static_cast<float>((packed[j + 4] >> 4) | (packed[j] >> 6) << 4);
    }
}

// Q8_0: d, then 32 signed 8-bit codes.
template <typename Visit>
void visit_q8_0(const uint8_t* b, size_t blocks, Visit&& visit) {
    for (size_t i = 0; i < blocks; ++i, b += 34) {
        const float d = half_at(b);
        for (int c = 0; c < 32; c += lanes) visit(32 * i + c, lanes_of(bytes_at<LaneSignedBytes>(b + 2 + c)) * d);
    }
}

// Q4_K: 8 groups of 32, each d * scale * code - dmin * minimum; group pairs
// share 32 bytes of 4-bit codes, low nibbles first. (Shifts by constants:
// x86 shifts no bytes, and a shift by a variable count is not vectorised.)
template <typename Visit>
void visit_q4_k(const uint8_t* b, size_t blocks, Visit&& visit) {
    for (size_t i = 0; i < blocks; ++i, b += 144) {
        const float d = half_at(b), dmin = half_at(b + 2);
        for (int pair = 0; pair < 4; ++pair) {
            const uint8_t* codes = b + 16 + 32 * pair;
            float scale, minimum;
            k4_scale_min(b + 4, 2 * pair, scale, minimum);
            float ds = d * scale, dm = dmin * minimum;
            for (int c = 0; c < 32; c += lanes)
                visit(256 * i + 64 * pair + c, lanes_of(bytes_at<LaneBytes>(codes + c) & 15) * ds - dm);
            k4_scale_min(b + 4, 2 * pair + 1, scale, minimum);
            ds = d * scale, dm = dmin * minimum;
            for (int c = 0; c < 32; c += lanes)
                visit(256 * i + 64 * pair + 32 + c, lanes_of(bytes_at<LaneBytes>(codes + c) >> 4) * ds - dm);
        }
    }
}

// Q6_K: 16 groups of 16 with signed 8-bit scales; a code's low 4 bits in
// ql, its high 2 in qh, each half of the block laid out as 4 runs of 32:
// run r's low bits from ql's first or second 32 bytes (r % 2), low or high
// nibbles (r / 2), its high bits qh's bits 2r and 2r + 1.
template <typename Visit>
void visit_q6_k(const uint8_t* b, size_t blocks, Visit&& visit) {
    for (size_t i = 0; i < blocks; ++i, b += 210) {
        const float d = half_at(b + 208);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* low = b + 64 * half;
            const uint8_t* high = b + 128 + 32 * half;
            const auto* scales = reinterpret_cast<const int8_t*>(b + 192 + 8 * half);
            const size_t at = 256 * i + 128 * half;
            for (int c = 0; c < 32; c += lanes) {
                const LaneBytes first = bytes_at<LaneBytes>(low + c), second = bytes_at<LaneBytes>(low + 32 + c);
                const LaneBytes h = bytes_at<LaneBytes>(high + c);
                const LaneBytes codes[4] = {(first & 15) | (h & 3) << 4, (second & 15) | ((h >> 2) & 3) << 4,
                                            (first >> 4) | ((h >> 4) & 3) << 4, (second >> 4) | (h >> 6) << 4};
#pragma GCC unroll 4
                for (int run = 0; run < 4; ++run) {
                    const float ds = d * static_cast<float>(scales[2 * run + c / 16]);
                    visit(at + 32 * run + c, lanes_of(codes[run]) * ds - 32 * ds);  // (code - 32) * ds, exactly
                }
            }
        }
    }
}

}  // namespace headscope::ggml_lanes
