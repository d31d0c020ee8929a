// The products of a few rows (a generated token, a keystroke) over Q4_K,
// Q6_K, Q8_0 and MXFP4 weights in integers, as llama.cpp computes them but
// with activations 256 times finer than its 8-bit ones.
//
// Each row x is split once a call, in groups of the weight's block (256
// values, or 32 for Q8_0 and MXFP4): s = max |x| / 127, hi = round(x / s)
// and lo = round((x - s hi) 254 / s), both in [-127, 127], so that
// x = s hi + (s / 254) lo within s / 508, about 1.6e-5 of the group's
// largest value. (A group whose s is below float32's normal range counts as
// zeros; one holding Inf or NaN gives NaN.) For MXFP4, gpt-oss's experts
// read from files that hold them exactly, a third part too,
// rest = round((x - s hi - (s / 254) lo) 254^2 / s) (the difference in
// double), so that x is held within s / 129032, about 6e-8 of the group's
// largest value: as close as float32 holds x.
//
// Q4_K, Q6_K and Q8_0 join the two parts into one 16-bit part, J = 254 hi + lo
// (at most 32385), and sum each code times its group's integer scale times
// J in int32, exactly, in 16 lanes: lane l of a block holds the values whose
// place in their 32 is 2l and 2l + 1 (one 16-bit multiply-add for 32 values
// and a row, where the two 8-bit parts took two and their 16-bit pairs two
// more; Q4_K: lane l < 8 the values 4l to 4l + 3 of groups 0, 1, 4 and 5,
// lane l + 8 those of groups 2, 3, 6 and 7, as its code bytes read as words
// hold them, and J ordered to match by the split). Q4_K's code times scale
// and Q6_K's (code - 32) times scale are formed in 16 bits first (Q8_0's
// scale is 1; integer_k_quants.cpp). Each block then adds to each lane, in
// float32 and in this order, its sum T times d s / 254, and, for Q4_K, the
// minima's sums M times -(dmin s / 254): M's lane l (of the first 8) group
// l's minimum times the group's J summed, the others 0. MXFP4 keeps the
// three 8-bit parts and sums in 8 lanes, lane l of a block holding the
// values 4l to 4l + 3, its codes their FP4 values doubled:
// T = 254^2 H + 254 L + R, R the rest's sums, converted to float32, times
// its scale halved, 2^(e - 128), times s / 254^2. (Its blocks go in pairs,
// 16 lanes: the first block's lanes 0-7, the second's 8-15, a last odd
// block's 0-7.) The output is the 16 lanes summed in halves: lane l plus
// l + 8, then of those l plus l + 4, l + 2, and lane 0 plus lane 1.
// The integer sums are exact on every instruction set and the float
// operations the same ones, so that AVX-512 (VNNI), AVX2 and plain x86-64
// builds give the same bits. Each row's blocks ahead are prefetched
// (prefetch_ahead): the products wait on memory less. (This file is
// compiled without contracting a product and a sum into one FMA, which
// plain x86-64 lacks.)
#include "integer_products.h"

#include <array>

#include "../base/ggml_block_lanes.h"
#include "headscope/base/ggml_types.h"
#include "integer_lanes.h"
#include "row_groups.h"

namespace headscope {
namespace {

using namespace integer_lanes;

// Signed codes (x never -128): |code| times x with the code's sign.
inline void signed_dot(Ints& sums, const SignedBytes& codes, const int8_t* x) {
#if defined(__AVX2__)
    const __m256i c = reinterpret_cast<__m256i>(codes);
    const __m256i magnitudes = _mm256_sign_epi8(c, c);
    const __m256i signed_x = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), c);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    sums = reinterpret_cast<Ints>(_mm256_dpbusd_epi32(reinterpret_cast<__m256i>(sums), magnitudes, signed_x));
#else
    const __m256i pairs = _mm256_maddubs_epi16(magnitudes, signed_x);  // at most 2 * 128 * 127
    sums += reinterpret_cast<Ints>(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
#else
    for (int k = 0; k < 32; ++k) sums[k / 4] += codes[k] * x[k];
#endif
}

// Q8_0: one block of 32 codes a register, its lane sums at most
// 2 * 128 * 32385 = 8.3e6; a prefetch every other block (68 bytes).
template <int R>
void q8_0_row(const RowParts& x, const uint8_t* b, int64_t blocks, Floats16 (&acc)[R]) {
    for (int64_t i = 0; i < blocks; ++i, b += 34) {
        if (i % 2 == 0) prefetch_ahead(b);
        SignedBytes bytes;
        load(bytes, b + 2);
        Words32 codes;
        widen(codes, bytes);
        const float d = ggml_lanes::half_at(b);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            Ints16 sums = {};
            joined_dot(sums, codes, x.joined_at(r, 32 * i));
            add_scaled(acc[r], sums, d * x.fine_of(r, i));
        }
    }
}

// MXFP4's 32 codes as their doubled FP4 values (-12 to 12), in value order:
// a byte shuffle of the codebook where the build has AVX2.
void mxfp4_codes(SignedBytes& codes, const uint8_t* b) {
#if defined(__AVX2__)
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 1)), low = _mm_set1_epi8(15);
    const __m256i nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low), _mm_and_si128(packed, low));
    const __m256i codebook = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(ggml_lanes::mxfp4_doubled_values)));
    codes = reinterpret_cast<SignedBytes>(_mm256_shuffle_epi8(codebook, nibbles));
#else
    for (int j = 0; j < 16; ++j) {
        codes[j] = ggml_lanes::mxfp4_doubled_values[b[1 + j] & 15];
        codes[j + 16] = ggml_lanes::mxfp4_doubled_values[b[1 + j] >> 4];
    }
#endif
}

// One MXFP4 block's T against row r's three parts.
void mxfp4_t(Ints& t, const SignedBytes& codes, const RowParts& x, int r, int64_t block) {
    Ints hi = {}, lo = {}, rest = {};
    signed_dot(hi, codes, x.hi_at(r, 32 * block));
    signed_dot(lo, codes, x.lo_at(r, 32 * block));
    signed_dot(rest, codes, x.rest_at(r, 32 * block));
    t = 64516 * hi + 254 * lo + rest;
}

// The halved scales by E8M0 byte: one load, where the conversion takes several.
constexpr std::array<float, 256> mxfp4_scales = [] {
    std::array<float, 256> scales{};
    for (int e = 0; e < 256; ++e)
        scales[static_cast<size_t>(e)] = ggml_lanes::mxfp4_halved_scale(static_cast<uint8_t>(e));
    return scales;
}();

// Two MXFP4 blocks' codes, and T = 254^2 H + 254 L + R of one row against
// them, the first block's 8 lanes then the second's. With AVX-512 (VNNI),
// both blocks a register, each code plus 12 (0 to 24, unsigned) times x,
// less 12 times the lane's sum of its parts (the split's sums of 4, times
// -12); else each block's register as signed_dot does it.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
using PairCodes = __m512i;

constexpr std::array<uint8_t, 16> offset_codebook = [] {
    std::array<uint8_t, 16> codes{};
    for (size_t j = 0; j < 16; ++j) codes[j] = static_cast<uint8_t>(ggml_lanes::mxfp4_doubled_values[j] + 12);
    return codes;
}();

// (Both always inlined: called, GCC passed the codes and T through memory,
// and a core summed 5.4 GB/s of MXFP4 blocks against 8.9 inlined.)
[[gnu::always_inline]] inline void pair_codes(PairCodes& codes, const uint8_t* b) {
    // Each block's 16 bytes twice, the second copy's high nibbles shifted
    // down. (The masked forms: GCC 12 warns, wrongly, of the plain ones'
    // undefined source.)
    const auto bytes_at = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
    const __m512i twice =
        _mm512_mask_broadcast_i32x4(_mm512_maskz_broadcast_i32x4(0x00ff, bytes_at(b + 1)), 0xff00, bytes_at(b + 18));
    const __m512i nibbles = _mm512_and_si512(_mm512_mask_srli_epi16(twice, 0xff00ff00, twice, 4), _mm512_set1_epi8(15));
    codes = _mm512_shuffle_epi8(_mm512_maskz_broadcast_i32x4(0xffff, bytes_at(offset_codebook.data())), nibbles);
}

[[gnu::always_inline]] inline void pair_sums(Ints16& t, const PairCodes& codes, const RowParts& x, int r, int64_t i) {
    Ints16 offsets;
    load(offsets, x.block_sums_at(r, i));
    const auto dot = [&](Ints16 sums, const int8_t* part) {
        return reinterpret_cast<Ints16>(
            _mm512_dpbusd_epi32(reinterpret_cast<__m512i>(sums), codes, _mm512_loadu_si512(part)));
    };
    // T = 254 (254 H + L) + R, each dot adding into the one before (fewer shifts than 64516 H + 254 L + R).
    const Ints16 high = dot(Ints16{}, x.hi_at(r, 32 * i)), joined = dot(254 * high, x.lo_at(r, 32 * i));
    t = dot(254 * joined + offsets, x.rest_at(r, 32 * i));
}
#else
struct PairCodes {
    SignedBytes codes[2];
};

void pair_codes(PairCodes& c, const uint8_t* b) {
    mxfp4_codes(c.codes[0], b);
    mxfp4_codes(c.codes[1], b + 17);
}

void pair_sums(Ints16& t, const PairCodes& c, const RowParts& x, int r, int64_t i) {
    Ints block_t[2];
    for (int k = 0; k < 2; ++k) mxfp4_t(block_t[k], c.codes[k], x, r, i + k);
    t = __builtin_shufflevector(block_t[0], block_t[1], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
#endif

// MXFP4, its blocks in pairs, the first's lanes 0-7 and the second's 8-15
// (a last odd block's 0-7): codes -12 to 12, so that T is at most
// 4 * 12 * 127 * (254^2 + 254 + 1) = 4.0e8 (with the codes plus 12 and
// their offset taken off, 1.2e9 on the way) and fits an int32.
template <int R>
void mxfp4_row(const RowParts& x, const uint8_t* b, int64_t blocks, Floats16 (&acc)[R]) {
    int64_t i = 0;
    for (; i + 1 < blocks; i += 2, b += 34) {
        if (i % 4 == 0) prefetch_ahead(b);  // every other pair (68 bytes)
        PairCodes codes;
        pair_codes(codes, b);
        const float first = mxfp4_scales[b[0]], second = mxfp4_scales[b[17]];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            Ints16 t;
            pair_sums(t, codes, x, r, i);
            const float f = first * x.fine_of(r, i), g = second * x.fine_of(r, i + 1);
            const Floats16 factors = {f, f, f, f, f, f, f, f, g, g, g, g, g, g, g, g};
            acc[r] = acc[r] + __builtin_convertvector(t, Floats16) * factors;
        }
    }
    if (i == blocks) return;
    SignedBytes codes;
    mxfp4_codes(codes, b);
    for (int r = 0; r < R; ++r) {
        Ints t;
        mxfp4_t(t, codes, x, r, i);
        const float f = mxfp4_scales[b[0]] * x.fine_of(r, i);
        for (int l = 0; l < 8; ++l) acc[r][l] = acc[r][l] + static_cast<float>(t[l]) * f;
    }
}

// Each type's kernel as a lambda (a function pointer would not be inlined).
template <int R>
void rows_product(const RowParts& x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                  int64_t last) {
    using Sixteen = Floats16(&)[R];
    switch (w.dtype) {
        case DType::Q4_K: return q4_k_outputs<R>(x, w, out, ldo, accumulate, first, last);
        case DType::Q6_K: return q6_k_outputs<R>(x, w, out, ldo, accumulate, first, last);
        case DType::Q8_0:
            return each_output<R>(
                x, w, out, ldo, accumulate, first, last,
                [](const RowParts& p, const uint8_t* b, int64_t n, Sixteen acc) { q8_0_row<R>(p, b, n, acc); });
        default:
            return each_output<R>(
                x, w, out, ldo, accumulate, first, last,
                [](const RowParts& p, const uint8_t* b, int64_t n, Sixteen acc) { mxfp4_row<R>(p, b, n, acc); });
    }
}

}  // namespace

bool has_integer_products(DType dtype) {
    return dtype == DType::Q4_K || dtype == DType::Q6_K || dtype == DType::Q8_0 || dtype == DType::MXFP4;
}

void integer_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                          int64_t first, int64_t last) {
    const int64_t group = dtype_block_values(w.dtype);
    const SplitPlan plan = w.dtype == DType::Q4_K    ? SplitPlan{group, 32, 1, false, true, true}
                           : w.dtype == DType::MXFP4 ? SplitPlan{group, 4, -12, true, false, false}
                                                     : SplitPlan{group, 0, 1, false, true, false};
    const SplitRows& split = split_rows(x, rows, w.in, plan);
    for_row_groups(rows, [&](auto shared, int r0) {
        const RowParts parts{split, r0, w.in, w.in / group, plan.sum_group ? group / plan.sum_group : 0};
        rows_product<shared>(parts, w, out + r0 * ldo, ldo, accumulate, first, last);
    });
}

}  // namespace headscope
