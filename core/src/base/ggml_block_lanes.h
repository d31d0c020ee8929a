// The block formats a Q4_K_M or Q8_0 file holds (Q4_K, Q6_K, Q8_0: the
// layouts of ggml's ggml-common.h, the formulas of its dequantize_row_*)
// decoded `lanes` values at a time into a vector register: each calls
// visit(at, w) with the values [at, at + lanes) of the blocks as float32.
// dequantize_row stores them. The layouts themselves (k4_scales,
// q4_k_pair_codes, q6_k_run_codes) are also what the integer products of a
// few rows (compute/integer_products.cpp) read, and so are MXFP4's codebook
// and scale (mxfp4_doubled_values, mxfp4_halved_scale).
#pragma once
#include <bit>
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

// MXFP4 (32 values: an E8M0 scale byte, then 16 bytes of 4-bit E2M1 codes,
// the low nibbles the first 16 values): the codes' FP4 values doubled, as
// int8 (ggml's kvalues_mxfp4), and the block's scale 2^(e - 127) halved to
// undo the doubling; e = 0 and 1 give float32 subnormals.
inline constexpr int8_t mxfp4_doubled_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr float mxfp4_halved_scale(uint8_t e) {
    return std::bit_cast<float>(e < 2 ? 0x00200000u << e : (static_cast<uint32_t>(e) - 1) << 23);
}

// The 6-bit scales and minima of the 8 groups of Q4_K and Q5_K, from their
// 12 bytes: groups 0-3's whole in the low 6 bits of bytes 0-3 (scales) and
// 4-7 (minima); groups 4-7's low 4 bits in the nibbles of bytes 8-11
// (scales low, minima high), their high 2 bits in the top bits of bytes 0-7.
// As 16 bytes, the 8 scales and then the 8 minima, in a vector of 4 words
// (kept in registers: read back through memory, each word's store would
// stall the load), formed by byte shuffles of the 16 bytes from `packed`
// (the block's 4 after them too, unused): a few vector instructions where
// the words' shifts and masks one by one took some 25.
using K4Scales = uint32_t __attribute__((vector_size(16)));
inline K4Scales k4_scales(const uint8_t* packed) {
    using Bytes16 = uint8_t __attribute__((vector_size(16)));
    Bytes16 bytes;
    std::memcpy(&bytes, packed, sizeof bytes);
    // Words 0-3 of the result: bytes 0-3, 8-11, 4-7, 8-11; their high bits
    // (words 1 and 3) from bytes 0-3 and 4-7; 16 and up are zeros.
    const auto low = std::bit_cast<K4Scales>(
        __builtin_shufflevector(bytes, Bytes16{}, 0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const auto high = std::bit_cast<K4Scales>(
        __builtin_shufflevector(bytes, Bytes16{}, 16, 16, 16, 16, 0, 1, 2, 3, 16, 16, 16, 16, 4, 5, 6, 7));
    const uint32_t six = 0x3f3f3f3f, four = 0x0f0f0f0f;
    return ((low >> K4Scales{0, 0, 0, 4}) & K4Scales{six, four, six, four}) | ((high >> 2) & 0x30303030);
}
// Byte j of the 16 (scale g: j = g; minimum g: j = 8 + g).
inline float k4_field(const K4Scales& k, int j) { return static_cast<float>((k[j / 4] >> (8 * (j % 4))) & 255); }

// Q4_K's codes of group pair p: 32 bytes, group 2p's codes their low
// nibbles, group 2p + 1's their high ones. (Shifts by constants: x86 shifts
// no bytes, and a shift by a variable count is not vectorised.)
template <typename Bytes>
void q4_k_pair_codes(const uint8_t* block, int pair, int c, Bytes (&codes)[2]) {
    Bytes bytes;  // (not bytes_at: a vector returned by value has an ABI of its build's extensions)
    std::memcpy(&bytes, block + 16 + 32 * pair + c, sizeof bytes);
    codes[0] = bytes & 15;
    codes[1] = bytes >> 4;
}

// Bytes shifted up s bits in place as 16-bit words, each byte's top bits
// into the next byte's bottom (for the caller to mask off): x86 shifts no
// bytes, and GCC adds a byte vector to itself s times instead. (In place: a
// vector returned by value has an ABI of its build's extensions.)
template <int s, typename Bytes>
void shift_words_up(Bytes& bytes) {
    typedef uint16_t Words __attribute__((vector_size(sizeof(Bytes))));  // (a using ignores a dependent size)
    Words words;
    std::memcpy(&words, &bytes, sizeof words);
    words <<= s;
    std::memcpy(&bytes, &words, sizeof bytes);
}

// Q6_K's codes (0 to 63) of one half of a block, 4 runs of 32 values, from
// offset c in each run: run r's low bits from ql's first or second 32 bytes
// (r % 2), low or high nibbles (r / 2), its high bits qh's bits 2r and 2r + 1
// (moved to bits 4 and 5 of the code).
template <typename Bytes>
void q6_k_run_codes(const uint8_t* block, int half, int c, Bytes (&codes)[4]) {
    Bytes first, second, h;  // (as in q4_k_pair_codes)
    std::memcpy(&first, block + 64 * half + c, sizeof first);
    std::memcpy(&second, block + 64 * half + 32 + c, sizeof second);
    std::memcpy(&h, block + 128 + 32 * half + c, sizeof h);
    Bytes up4 = h, up2 = h;
    shift_words_up<4>(up4);
    shift_words_up<2>(up2);
    codes[0] = (first & 15) | (up4 & 0x30);
    codes[1] = (second & 15) | (up2 & 0x30);
    codes[2] = (first >> 4) | (h & 0x30);
    codes[3] = (second >> 4) | ((h >> 2) & 0x30);
}

// Q8_0: d, then 32 signed 8-bit codes.
template <typename Visit>
void visit_q8_0(const uint8_t* b, size_t blocks, Visit&& visit) {
    for (size_t i = 0; i < blocks; ++i, b += 34) {
        const float d = half_at(b);
        for (int c = 0; c < 32; c += lanes) visit(32 * i + c, lanes_of(bytes_at<LaneSignedBytes>(b + 2 + c)) * d);
    }
}

// Q4_K: 8 groups of 32, each d * scale * code - dmin * minimum.
template <typename Visit>
void visit_q4_k(const uint8_t* b, size_t blocks, Visit&& visit) {
    for (size_t i = 0; i < blocks; ++i, b += 144) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const K4Scales k = k4_scales(b + 4);
        for (int pair = 0; pair < 4; ++pair)
            for (int side = 0; side < 2; ++side) {
                const int g = 2 * pair + side;
                const float ds = d * k4_field(k, g), dm = dmin * k4_field(k, 8 + g);
                for (int c = 0; c < 32; c += lanes) {
                    LaneBytes codes[2];
                    q4_k_pair_codes(b, pair, c, codes);
                    visit(256 * i + 64 * pair + 32 * side + c, lanes_of(codes[side]) * ds - dm);
                }
            }
    }
}

// Q6_K: 16 groups of 16 with signed 8-bit scales, each half of the block
// 4 runs of 32 (q6_k_run_codes).
template <typename Visit>
void visit_q6_k(const uint8_t* b, size_t blocks, Visit&& visit) {
    for (size_t i = 0; i < blocks; ++i, b += 210) {
        const float d = half_at(b + 208);
        for (int half = 0; half < 2; ++half) {
            const auto* scales = reinterpret_cast<const int8_t*>(b + 192 + 8 * half);
            const size_t at = 256 * i + 128 * half;
            for (int c = 0; c < 32; c += lanes) {
                LaneBytes codes[4];
                q6_k_run_codes(b, half, c, codes);
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
