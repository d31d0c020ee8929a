// The integer products over Q4_K and Q6_K weights, the types of a Q4_K_M
// file (integer_products.cpp says what they compute): each group's codes
// times its scale in 16 bits, then times the joined parts of x, 32 values an
// instruction a row. (Compiled, as that file, without contracting a product
// and a sum into one FMA: the same bits everywhere.)
#include <bit>
#include <utility>

#include "../base/ggml_block_lanes.h"
#include "integer_lanes.h"

namespace headscope::integer_lanes {
namespace {

using Words = int16_t __attribute__((vector_size(32)));            // a block's 16 scales (Q4_K: and minima)
using ScaleBytes = uint8_t __attribute__((vector_size(16)));       // Q4_K's, as k4_scales unpacks them
using SignedScaleBytes = int8_t __attribute__((vector_size(16)));  // Q6_K's, as stored

// Blocks prefetched about 4 KB ahead into L1 (into L2, as Q8_0's, these
// instruction-bound kernels were 1-4% slower): a row's blocks ahead of it,
// then the next row's.
constexpr int64_t prefetch_bytes = 4096;

// body(g) for g = 0 .. n - 1, each g a compile-time constant (the scales'
// shuffles take constant places).
template <typename Body, int... g>
void each_constant(std::integer_sequence<int, g...>, Body&& body) {
    (body(std::integral_constant<int, g>{}), ...);
}

// Independent chains of sums a row keeps, so that the multiply-adds of few
// rows do not each wait on the one before (their sums, exact integers, are
// added at the block's end): 8 accumulators at most among the rows.
template <int R>
constexpr int chains = R == 1   ? 4
                       : R <= 4 ? 2
                                : 1;

// The chains' sums, in lanes.
template <int R>
void joined_chains(Ints16& t, const Ints16 (&sums)[chains<R>]) {
    t = sums[0];
    for (int k = 1; k < chains<R>; ++k) t += sums[k];
}

// Words j and k of a block's 16 scales, each 16 times: the scales of 32 values.
template <int j, int k>
void scale_words(Words32& out, const Words& scales) {
    out = __builtin_shufflevector(scales, scales, j, j, j, j, j, j, j, j, j, j, j, j, j, j, j, j, k, k, k, k, k, k, k,
                                  k, k, k, k, k, k, k, k, k);
}

// Q4_K's 64 code bytes of group pairs 2m and 2m + 1 (groups 4m to 4m + 3)
// read as 32 words, byte 2k and 2k + 1 word k: each nibble's code times its
// group's scale, in 4 registers of 32 words. Word k of register v holds
// nibble v / 2 (low, high) of byte 2k + v % 2 (words 16-31: of the second
// pair), so that no bytes move: with AVX-512, one multiply-add of bytes
// each, the other byte of each pair masked off, where widening, shifting and
// multiplying words took three. `scales`: the block's 8 scales then 8 minima.
template <int m>
void q4_k_scaled(Words32 (&scaled)[4], const uint8_t* codes, const ScaleBytes& scales) {
#if defined(__AVX512BW__)
    const __m512i w = _mm512_loadu_si512(codes), high = _mm512_srli_epi16(w, 4);
    const __m512i even = _mm512_set1_epi16(0x000f), odd = _mm512_set1_epi16(0x0f00);
    __m128i packed;
    std::memcpy(&packed, &scales, sizeof packed);
    // The 16 bytes in every 128-bit lane (the masked form: GCC 12 warns, wrongly, of the plain one's undefined source).
    const __m512i each = _mm512_maskz_broadcast_i32x4(0xffff, packed);
    // Every byte of words 0-15 group 4m's scale, of words 16-31 group 4m + 2's
    // (registers 0 and 1); 4m + 1's and 4m + 3's (registers 2 and 3).
    const auto places = [](char first) {
        return _mm512_mask_blend_epi8(0xffffffff00000000ull, _mm512_set1_epi8(first),
                                      _mm512_set1_epi8(static_cast<char>(first + 2)));
    };
    const __m512i low_scales = _mm512_shuffle_epi8(each, places(4 * m)),
                  high_scales = _mm512_shuffle_epi8(each, places(4 * m + 1));
    const __m512i regs[4] = {_mm512_maddubs_epi16(_mm512_and_si512(w, even), low_scales),
                             _mm512_maddubs_epi16(_mm512_and_si512(w, odd), low_scales),
                             _mm512_maddubs_epi16(_mm512_and_si512(high, even), high_scales),
                             _mm512_maddubs_epi16(_mm512_and_si512(high, odd), high_scales)};
    std::memcpy(scaled, regs, sizeof regs);
#else
    using Unsigned = uint16_t __attribute__((vector_size(64)));
    Unsigned w;
    load(w, codes);
    const Unsigned nibbles[4] = {w & 15, (w >> 8) & 15, (w >> 4) & 15, w >> 12};
    for (int v = 0; v < 4; ++v) {
        const auto first = static_cast<int16_t>(scales[4 * m + v / 2]),
                   second = static_cast<int16_t>(scales[4 * m + 2 + v / 2]);
        Words32 scale;
        for (int k = 0; k < 32; ++k) scale[k] = k < 16 ? first : second;
        scaled[v] = reinterpret_cast<const Words32&>(nibbles[v]) * scale;
    }
#endif
}

// The 8 minima (bytes 8-15 of the 16) as int32: by the CPU's widening where
// the build may use it (GCC 12 moves the bytes one by one).
inline void widen_minima(Ints& minima, const ScaleBytes& scales) {
#if defined(__AVX2__)
    __m128i packed;
    std::memcpy(&packed, &scales, sizeof packed);
    minima = reinterpret_cast<Ints>(_mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8)));
#else
    for (int g = 0; g < 8; ++g) minima[g] = scales[8 + g];
#endif
}

// Q4_K: codes 0 to 15 times scales to 63 (945 at most, in 16 bits); lane
// sums at most 16 * 945 * 32385 = 4.9e8 a block. Lane l < 8 holds the
// values 4l to 4l + 3 of groups 0, 1, 4 and 5, lane l + 8 those of groups 2,
// 3, 6 and 7 (q4_k_scaled's registers; the split orders x's joined part to
// match). The minima's 8 lanes are its 8 groups, added in the first 8.
template <int R>
void q4_k_row(const RowParts& x, const uint8_t* b, int64_t blocks, Floats16 (&acc)[R]) {
    const int16_t* joined[R];  // (held: through x, each block reloads them)
    for (int r = 0; r < R; ++r) joined[r] = x.joined_at(r, 0);
    for (int64_t i = 0; i < blocks; ++i, b += 144) {
        for (int64_t line = 0; line < 144; line += 64) __builtin_prefetch(b + prefetch_bytes + line);
        const auto scales = std::bit_cast<ScaleBytes>(ggml_lanes::k4_scales(b + 4));  // and the minima
        Ints16 t[R][chains<R>] = {};
        each_constant(std::make_integer_sequence<int, 2>{}, [&](auto m) {
            Words32 scaled[4];
            q4_k_scaled<m>(scaled, b + 16 + 64 * m, scales);
            for (int v = 0; v < 4; ++v)
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
                    joined_dot(t[r][(4 * m + v) % chains<R>], scaled[v], joined[r] + 256 * i + 128 * m + 32 * v);
        });
        Ints minima;
        widen_minima(minima, scales);
        const float d = ggml_lanes::half_at(b), dmin = ggml_lanes::half_at(b + 2);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const float fine = x.fine_of(r, i);
            Ints sums;
            load(sums, x.block_sums_at(r, i));
            const Ints offsets = minima * sums;
            Ints16 sum;
            joined_chains<R>(sum, t[r]);
            add_scaled(acc[r], sum, d * fine);
            add_scaled(acc[r],
                       __builtin_shufflevector(offsets, Ints{}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       -(dmin * fine));
        }
    }
}

// Q6_K: codes 0 to 63 less 32, times signed scales (4096 at most, in 16
// bits); lane sums at most 16 * 4096 * 32385 = 2.12e9 a block, within an
// int32's 2.15e9.
template <int R>
void q6_k_row(const RowParts& x, const uint8_t* b, int64_t blocks, Floats16 (&acc)[R]) {
    const int16_t* joined[R];  // (as in q4_k_row)
    for (int r = 0; r < R; ++r) joined[r] = x.joined_at(r, 0);
    for (int64_t i = 0; i < blocks; ++i, b += 210) {
        for (int64_t line = 0; line < 256; line += 64) __builtin_prefetch(b + prefetch_bytes + line);
        SignedScaleBytes scale_bytes;
        load(scale_bytes, b + 192);
        const Words scales = __builtin_convertvector(scale_bytes, Words);
        Ints16 t[R][chains<R>] = {};
        each_constant(std::make_integer_sequence<int, 2>{}, [&](auto half) {
            Bytes codes[4];
            ggml_lanes::q6_k_run_codes(b, half, 0, codes);
            each_constant(std::make_integer_sequence<int, 4>{}, [&](auto run) {
                constexpr int g = 8 * decltype(half)::value + 2 * run;  // the run's two groups of 16
                Words32 centred, scale;
                widen(centred, reinterpret_cast<SignedBytes>(codes[run] - 32));
                scale_words<g, g + 1>(scale, scales);
                const Words32 scaled = centred * scale;
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) joined_dot(t[r][g / 2 % chains<R>], scaled, joined[r] + 256 * i + 16 * g);
            });
        });
        const float d = ggml_lanes::half_at(b + 208);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            Ints16 sum;
            joined_chains<R>(sum, t[r]);
            add_scaled(acc[r], sum, d * x.fine_of(r, i));
        }
    }
}

}  // namespace

template <int R>
void q4_k_outputs(const RowParts& x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                  int64_t last) {
    each_output<R>(
        x, w, out, ldo, accumulate, first, last,
        [](const RowParts& p, const uint8_t* b, int64_t n, Floats16(&acc)[R]) { q4_k_row<R>(p, b, n, acc); });
}

template <int R>
void q6_k_outputs(const RowParts& x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                  int64_t last) {
    each_output<R>(
        x, w, out, ldo, accumulate, first, last,
        [](const RowParts& p, const uint8_t* b, int64_t n, Floats16(&acc)[R]) { q6_k_row<R>(p, b, n, acc); });
}

// For each count of rows that for_row_groups runs.
#define HEADSCOPE_K_QUANT_OUTPUTS(R)                                                                        \
    template void q4_k_outputs<R>(const RowParts&, const Matrix&, float*, int64_t, bool, int64_t, int64_t); \
    template void q6_k_outputs<R>(const RowParts&, const Matrix&, float*, int64_t, bool, int64_t, int64_t);
HEADSCOPE_K_QUANT_OUTPUTS(1)
HEADSCOPE_K_QUANT_OUTPUTS(2)
HEADSCOPE_K_QUANT_OUTPUTS(3)
HEADSCOPE_K_QUANT_OUTPUTS(4)
HEADSCOPE_K_QUANT_OUTPUTS(5)
HEADSCOPE_K_QUANT_OUTPUTS(6)
HEADSCOPE_K_QUANT_OUTPUTS(7)
HEADSCOPE_K_QUANT_OUTPUTS(8)
#undef HEADSCOPE_K_QUANT_OUTPUTS

}  // namespace headscope::integer_lanes
