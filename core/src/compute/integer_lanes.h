// What the integer products' kernels share (integer_products.cpp says what
// they compute): their vector types, the 16-bit dot product of 32 codes with
// 32 joined parts of x, the float step that adds a block's integer sums, and
// the loop over outputs; and each type's kernel, R rows sharing each block's
// codes (integer_k_quants.cpp: Q4_K, Q6_K; integer_products.cpp: the others).
#pragma once
#include <cstdint>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "headscope/base/matrix.h"
#include "integer_split.h"

namespace headscope::integer_lanes {

using Bytes = uint8_t __attribute__((vector_size(32)));
using SignedBytes = int8_t __attribute__((vector_size(32)));
using Ints = int32_t __attribute__((vector_size(32)));    // 8 lanes of a block's sums
using Ints16 = int32_t __attribute__((vector_size(64)));  // 16 lanes of a block's sums
using Floats16 = float __attribute__((vector_size(64)));
using Words32 = int16_t __attribute__((vector_size(64)));  // 32 codes, 16-bit

// (Vectors go by reference: by value, GCC warns that their ABI depends on
// the vector extensions the build may use.)
template <typename Vector>
void load(Vector& v, const void* p) {
    std::memcpy(&v, p, sizeof v);
}

// Q8_0's blocks and MXFP4's pairs (34 bytes each) 256 ahead of a row's
// place (8.5 KB) fetched into L2, not L1 (a prefetcht2), about once a cache
// line: one prefetcht0 a block, 4 KB ahead, filled L1's few fill buffers and
// a Q8_0 token's products waited on them (74.5 -> 66-68 ms idle, a
// gpt-oss 4-layer token 73.6 -> 70.7). Q4_K's and Q6_K's kernels, bound by
// their instructions, ran 1-4% slower with it and keep their prefetcht0.
inline void prefetch_ahead(const uint8_t* at) { __builtin_prefetch(at + 256 * 34, 0, 1); }

// 32 signed or unsigned byte codes widened to 16 bits: one register, where
// GCC's conversion makes two halves and then joins them.
inline void widen(Words32& words, const SignedBytes& codes) {
#if defined(__AVX512BW__)
    words = reinterpret_cast<Words32>(_mm512_cvtepi8_epi16(reinterpret_cast<__m256i>(codes)));
#else
    words = __builtin_convertvector(codes, Words32);
#endif
}

inline void widen(Words32& words, const Bytes& codes) {
#if defined(__AVX512BW__)
    words = reinterpret_cast<Words32>(_mm512_cvtepu8_epi16(reinterpret_cast<__m256i>(codes)));
#else
    words = __builtin_convertvector(codes, Words32);
#endif
}

// 32 16-bit codes times 32 joined parts of x (254 hi + lo): lane l of the
// 16 gets the products of 2l and 2l + 1, one instruction a row.
inline void joined_dot(Ints16& sums, const Words32& codes, const int16_t* x) {
#if defined(__AVX512BW__)
    const __m512i c = reinterpret_cast<__m512i>(codes), v = _mm512_loadu_si512(x);
#if defined(__AVX512VNNI__)
    sums = reinterpret_cast<Ints16>(_mm512_dpwssd_epi32(reinterpret_cast<__m512i>(sums), c, v));
#else
    sums += reinterpret_cast<Ints16>(_mm512_madd_epi16(c, v));
#endif
#elif defined(__AVX2__)
    __m256i c[2];
    std::memcpy(c, &codes, sizeof c);
    Ints halves[2];
    for (int k = 0; k < 2; ++k)
        halves[k] = reinterpret_cast<Ints>(
            _mm256_madd_epi16(c[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 * k))));
    sums += __builtin_shufflevector(halves[0], halves[1], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
    for (int k = 0; k < 32; ++k) sums[k / 2] += codes[k] * x[k];
#endif
}

// acc + sums * factor, in float32.
inline void add_scaled(Floats16& acc, const Ints16& sums, float factor) {
    acc = acc + __builtin_convertvector(sums, Floats16) * factor;
}

// The 16 lanes summed in halves: lane l plus lane l + 8, then of those 8
// lane l plus l + 4, then l + 2, then lane 0 plus lane 1 (four additions in
// a row, where summing from the first waited on fifteen).
inline float lanes_sum(const Floats16& acc) {
    using Floats8 = float __attribute__((vector_size(32)));
    using Floats4 = float __attribute__((vector_size(16)));
    const Floats8 eight = __builtin_shufflevector(acc, acc, 0, 1, 2, 3, 4, 5, 6, 7) +
                          __builtin_shufflevector(acc, acc, 8, 9, 10, 11, 12, 13, 14, 15);
    const Floats4 four =
        __builtin_shufflevector(eight, eight, 0, 1, 2, 3) + __builtin_shufflevector(eight, eight, 4, 5, 6, 7);
    const float two[2] = {four[0] + four[2], four[1] + four[3]};
    return two[0] + two[1];
}

// Outputs [first, last): each stored row's blocks through `row_sums` into R
// rows of 16 lanes, each row's summed by lanes_sum.
template <int R, typename RowSums>
void each_output(const RowParts& x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                 int64_t last, RowSums row_sums) {
    const int64_t blocks = w.in / dtype_block_values(w.dtype);
    const size_t row_bytes = dtype_row_bytes(w.dtype, w.in);  // whole blocks
    for (int64_t o = first; o < last; ++o) {
        Floats16 acc[R] = {};
        row_sums(x, reinterpret_cast<const uint8_t*>(w.data) + o * row_bytes, blocks, acc);
        for (int r = 0; r < R; ++r) {
            const float sum = lanes_sum(acc[r]);
            float& y = out[r * ldo + o];
            y = accumulate ? y + sum : sum;
        }
    }
}

// Outputs [first, last) of R rows from r0 over Q4_K or Q6_K weights (integer_k_quants.cpp).
template <int R>
void q4_k_outputs(const RowParts& x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                  int64_t last);
template <int R>
void q6_k_outputs(const RowParts& x, const Matrix& w, float* out, int64_t ldo, bool accumulate, int64_t first,
                  int64_t last);

}  // namespace headscope::integer_lanes
