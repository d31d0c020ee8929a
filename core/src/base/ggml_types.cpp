// ggml's types (ggml_types.h): the table of ids, names and block sizes from
// gguf-py's GGML_QUANT_SIZES, with the readable blocks' fields as ggml-common.h lays them out, and each readable block
// format's dequantization, written from the layouts of ggml's ggml-common.h and the formulas of its dequantize_row_*
// functions; the names of llama.cpp's file types from its llama.h. A block is read byte by byte (a GGUF file aligns
// tensors, not blocks); the dispatch on the type is once a row.
#include "headscope/base/ggml_types.h"

#include <iterator>

#include "ggml_block_lanes.h"
#include "half_float.h"
#include "headscope/base/dtype.h"
#include "headscope/base/error.h"

namespace headscope {

namespace {

using ggml_lanes::half_at;

constexpr uint32_t super_block = 256;  // ggml's QK_K

constexpr GgmlTypeTraits type_table[] = {
    {GgmlType::F32, "F32", 1, 4, true, "4 bytes of float32"},
    {GgmlType::F16, "F16", 1, 2, true, "2 bytes of half float"},
    {GgmlType::Q4_0, "Q4_0", 32, 18, true, "2 bytes of half scale d, 16 bytes of 4-bit codes"},
    {GgmlType::Q4_1, "Q4_1", 32, 20, true, "4 bytes of half scale d and minimum m, 16 bytes of 4-bit codes"},
    {GgmlType::Q5_0, "Q5_0", 32, 22, true, "2 bytes of half scale d, 4 bytes of fifth bits, 16 bytes of low 4 bits"},
    {GgmlType::Q5_1, "Q5_1", 32, 24, true,
     "4 bytes of half scale d and minimum m, 4 bytes of fifth bits, 16 bytes of low 4 bits"},
    {GgmlType::Q8_0, "Q8_0", 32, 34, true, "2 bytes of half scale d, 32 bytes of 8-bit codes"},
    {GgmlType::Q8_1, "Q8_1", 32, 40, false},
    {GgmlType::Q2_K, "Q2_K", super_block, 84, true,
     "16 bytes of 4-bit scales and minima, 64 bytes of 2-bit codes, 4 bytes of half scales d and dmin"},
    {GgmlType::Q3_K, "Q3_K", super_block, 110, true,
     "32 bytes of high bits, 64 bytes of low 2 bits, 12 bytes of 6-bit scales, 2 bytes of half scale d"},
    {GgmlType::Q4_K, "Q4_K", super_block, 144, true,
     "4 bytes of half scales d and dmin, 12 bytes of 6-bit scales and minima, 128 bytes of 4-bit codes"},
    {GgmlType::Q5_K, "Q5_K", super_block, 176, true,
     "4 bytes of half scales d and dmin, 12 bytes of 6-bit scales and minima, 32 bytes of fifth bits, 128 bytes of low "
     "4 bits"},
    {GgmlType::Q6_K, "Q6_K", super_block, 210, true,
     "128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 bytes of 8-bit scales, 2 bytes of half scale d"},
    {GgmlType::Q8_K, "Q8_K", super_block, 292, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", super_block, 66, false},
    {GgmlType::IQ2_XS, "IQ2_XS", super_block, 74, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", super_block, 98, false},
    {GgmlType::IQ1_S, "IQ1_S", super_block, 50, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, true,
     "2 bytes of half scale d, 16 bytes of 4-bit indices into a table of 16 values"},
    {GgmlType::IQ3_S, "IQ3_S", super_block, 110, false},
    {GgmlType::IQ2_S, "IQ2_S", super_block, 82, false},
    {GgmlType::IQ4_XS, "IQ4_XS", super_block, 136, true,
     "2 bytes of half scale d, 6 bytes of 6-bit scales (2 of high bits, 4 of low), 128 bytes of 4-bit indices into a "
     "table of 16 values"},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::IQ1_M, "IQ1_M", super_block, 56, false},
    {GgmlType::BF16, "BF16", 1, 2, true, "2 bytes of bfloat16"},
    {GgmlType::TQ1_0, "TQ1_0", super_block, 54, false},
    {GgmlType::TQ2_0, "TQ2_0", super_block, 66, false},
    {GgmlType::MXFP4, "MXFP4", 32, 17, true, "1 byte of power-of-two scale (E8M0), 16 bytes of 4-bit floats (E2M1)"},
    {GgmlType::NVFP4, "NVFP4", 64, 36, false},
    {GgmlType::Q1_0, "Q1_0", 128, 18, false},
};

// IQ4_NL's non-linear 4-bit codebook (MXFP4's is ggml_block_lanes.h's).
constexpr int8_t iq4_nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

uint32_t u32_at(const uint8_t* p) { return load_bits<uint32_t>(reinterpret_cast<const std::byte*>(p)); }

// Q4_0: d, then 16 bytes of 4-bit codes, low nibbles the first 16 values.
void dequantize_q4_0(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 18, out += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 16; ++j) {
            out[j] = static_cast<float>((b[2 + j] & 15) - 8) * d;
            out[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
        }
    }
}

// Q4_1: d and the minimum m, then the codes as Q4_0's, unsigned.
void dequantize_q4_1(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 20, out += 32) {
        const float d = half_at(b), m = half_at(b + 2);
        for (int j = 0; j < 16; ++j) {
            out[j] = static_cast<float>(b[4 + j] & 15) * d + m;
            out[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
        }
    }
}

// Q5_0 and Q5_1: Q4's codes with a fifth bit each, value j's bit j of a 32-bit word.
void dequantize_q5_0(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 22, out += 32) {
        const float d = half_at(b);
        const uint32_t high = u32_at(b + 2);
        for (int j = 0; j < 16; ++j) {
            const int low_code = (b[6 + j] & 15) | static_cast<int>((high >> j) & 1) << 4;
            const int high_code = (b[6 + j] >> 4) | static_cast<int>((high >> (j + 16)) & 1) << 4;
            out[j] = static_cast<float>(low_code - 16) * d;
            out[j + 16] = static_cast<float>(high_code - 16) * d;
        }
    }
}

void dequantize_q5_1(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 24, out += 32) {
        const float d = half_at(b), m = half_at(b + 2);
        const uint32_t high = u32_at(b + 4);
        for (int j = 0; j < 16; ++j) {
            const int low_code = (b[8 + j] & 15) | static_cast<int>((high >> j) & 1) << 4;
            const int high_code = (b[8 + j] >> 4) | static_cast<int>((high >> (j + 16)) & 1) << 4;
            out[j] = static_cast<float>(low_code) * d + m;
            out[j + 16] = static_cast<float>(high_code) * d + m;
        }
    }
}

// The types ggml_block_lanes.h decodes into registers: each register stored.
void dequantize_q8_0(const uint8_t* b, size_t blocks, float* out) {
    ggml_lanes::visit_q8_0(b, blocks, [out](size_t at, const Lanes& w) { std::memcpy(out + at, &w, sizeof w); });
}

// Q2_K: 16 groups of 16, each with a 4-bit scale and a 4-bit minimum (one
// byte), times d and dmin; the 2-bit codes of four groups share 32 bytes.
void dequantize_q2_k(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 84) {
        const uint8_t* scales = b;
        const float d = half_at(b + 80), dmin = half_at(b + 82);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* codes = b + 16 + 32 * half;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; ++k, ++scales, out += 16) {
                    const float scale = d * static_cast<float>(*scales & 15);
                    const float minimum = dmin * static_cast<float>(*scales >> 4);
                    for (int l = 0; l < 16; ++l)
                        out[l] = scale * static_cast<float>((codes[16 * k + l] >> shift) & 3) - minimum;
                }
            }
        }
    }
}

// Q3_K: Q2_K's code order with a third bit from hmask (set: no offset,
// clear: minus 4) and 16 signed 6-bit scales packed into 12 bytes.
void dequantize_q3_k(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 110) {
        const uint8_t* hmask = b;
        const uint8_t* packed = b + 96;
        const float d = half_at(b + 108);
        int group = 0;
        for (int half = 0; half < 2; ++half) {
            const uint8_t* codes = b + 32 + 32 * half;
            for (int j = 0; j < 4; ++j) {
                const int shift = 2 * j, bit = 4 * half + j;
                for (int k = 0; k < 2; ++k, ++group, out += 16) {
                    const int low = group < 8 ? packed[group] & 15 : packed[group - 8] >> 4;
                    const int high = (packed[8 + group % 4] >> (2 * (group / 4))) & 3;
                    const float scale = d * static_cast<float>((low | high << 4) - 32);
                    for (int l = 0; l < 16; ++l) {
                        const int code = (codes[16 * k + l] >> shift) & 3;
                        const int offset = (hmask[16 * k + l] >> bit) & 1 ? 0 : 4;
                        out[l] = scale * static_cast<float>(code - offset);
                    }
                }
            }
        }
    }
}

void dequantize_q4_k(const uint8_t* b, size_t blocks, float* out) {
    ggml_lanes::visit_q4_k(b, blocks, [out](size_t at, const Lanes& w) { std::memcpy(out + at, &w, sizeof w); });
}

// Q5_K: Q4_K with a fifth bit for group g in bit g of qh's 32 bytes.
void dequantize_q5_k(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 176) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const uint8_t* high = b + 16;
        const ggml_lanes::K4Scales k = ggml_lanes::k4_scales(b + 4);
        for (int group = 0; group < 8; ++group, out += 32) {
            const float ds = d * ggml_lanes::k4_field(k, group), dm = dmin * ggml_lanes::k4_field(k, 8 + group);
            const uint8_t* codes = b + 48 + 32 * (group / 2);
            const int shift = 4 * (group % 2);
            for (int l = 0; l < 32; ++l) {
                const int code = ((codes[l] >> shift) & 15) | ((high[l] >> group) & 1) << 4;
                out[l] = ds * static_cast<float>(code) - dm;
            }
        }
    }
}

void dequantize_q6_k(const uint8_t* b, size_t blocks, float* out) {
    ggml_lanes::visit_q6_k(b, blocks, [out](size_t at, const Lanes& w) { std::memcpy(out + at, &w, sizeof w); });
}

void dequantize_iq4_nl(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 18, out += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 16; ++j) {
            out[j] = d * static_cast<float>(iq4_nl_values[b[2 + j] & 15]);
            out[j + 16] = d * static_cast<float>(iq4_nl_values[b[2 + j] >> 4]);
        }
    }
}

// IQ4_XS: IQ4_NL's codebook in 8 groups of 32, each with a 6-bit scale (its
// low 4 bits in scales_l, its high 2 in scales_h) minus 32.
void dequantize_iq4_xs(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 136) {
        const float d = half_at(b);
        const unsigned scales_high = load_bits<uint16_t>(reinterpret_cast<const std::byte*>(b + 2));
        for (int group = 0; group < 8; ++group, out += 32) {
            const int scale = ((b[4 + group / 2] >> (4 * (group % 2))) & 15) |
                              static_cast<int>((scales_high >> (2 * group)) & 3) << 4;
            const float ds = d * static_cast<float>(scale - 32);
            const uint8_t* codes = b + 8 + 16 * group;
            for (int j = 0; j < 16; ++j) {
                out[j] = ds * static_cast<float>(iq4_nl_values[codes[j] & 15]);
                out[j + 16] = ds * static_cast<float>(iq4_nl_values[codes[j] >> 4]);
            }
        }
    }
}

#if defined(__AVX2__)
// 16 codebook values (int8) times d into out[0, 16).
void store_scaled(__m128i values, float d, float* out) {
#if defined(__AVX512F__)
    // The masked forms: GCC 12 warns, wrongly, of the plain ones' undefined source.
    const __m512 floats = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_maskz_cvtepi8_epi32(0xffff, values));
    _mm512_storeu_ps(out, _mm512_mul_ps(floats, _mm512_set1_ps(d)));
#else
    const __m256 scale = _mm256_set1_ps(d);
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(values)), scale));
    _mm256_storeu_ps(out + 8,
                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(values, 8))), scale));
#endif
}
#endif

// MXFP4 (ggml_block_lanes.h's codebook and scale). Where the build has
// AVX2, each half of a block's codes is looked up 16 at a time by a byte
// shuffle: the products of more than a few rows widen the experts' rows so.
void dequantize_mxfp4(const uint8_t* b, size_t blocks, float* out) {
    for (size_t i = 0; i < blocks; ++i, b += 17, out += 32) {
        const float d = ggml_lanes::mxfp4_halved_scale(b[0]);
#if defined(__AVX2__)
        const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ggml_lanes::mxfp4_doubled_values));
        const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 1)), low = _mm_set1_epi8(15);
        store_scaled(_mm_shuffle_epi8(table, _mm_and_si128(codes, low)), d, out);
        store_scaled(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(codes, 4), low)), d, out + 16);
#else
        for (int j = 0; j < 16; ++j) {
            out[j] = static_cast<float>(ggml_lanes::mxfp4_doubled_values[b[1 + j] & 15]) * d;
            out[j + 16] = static_cast<float>(ggml_lanes::mxfp4_doubled_values[b[1 + j] >> 4]) * d;
        }
#endif
    }
}

// llama.h's llama_ftype, the names without LLAMA_FTYPE_ and MOSTLY_. Ids 4
// to 6 and 33 to 35 are file types llama.cpp no longer writes.
struct FileType {
    uint64_t id;
    const char* name;
};
constexpr FileType file_types[] = {
    {0, "F32"},     {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},    {7, "Q8_0"},       {8, "Q5_0"},    {9, "Q5_1"},
    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},  {13, "Q3_K_L"}, {14, "Q4_K_S"},    {15, "Q4_K_M"}, {16, "Q5_K_S"},
    {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"},    {22, "IQ3_XS"}, {23, "IQ3_XXS"},
    {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},   {27, "IQ3_M"},  {28, "IQ2_S"},     {29, "IQ2_M"},  {30, "IQ4_XS"},
    {31, "IQ1_M"},  {32, "BF16"},   {36, "TQ1_0"},   {37, "TQ2_0"},  {38, "MXFP4_MOE"}, {39, "NVFP4"},  {40, "Q1_0"},
};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
    for (const GgmlTypeTraits& traits : type_table)
        if (static_cast<uint32_t>(traits.type) == id) return &traits;
    return nullptr;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) { return *ggml_type_traits(static_cast<uint32_t>(type)); }

std::string ggml_type_name(uint32_t id) {
    const GgmlTypeTraits* traits = ggml_type_traits(id);
    return traits ? traits->name : "type " + std::to_string(id);
}

// DType's types in its order (dtype.h), as ggml names them.
constexpr GgmlType ggml_types_of_dtypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
                                             GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
                                             GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
                                             GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
static_assert(std::size(ggml_types_of_dtypes) == std::size(dtype_names));

GgmlType ggml_type(DType dtype) { return ggml_types_of_dtypes[static_cast<int>(dtype)]; }

std::optional<DType> dtype_of(GgmlType type) {
    for (size_t d = 0; d < std::size(ggml_types_of_dtypes); ++d)
        if (ggml_types_of_dtypes[d] == type) return static_cast<DType>(d);
    return std::nullopt;
}

int64_t dtype_block_values(DType dtype) { return ggml_type_traits(ggml_type(dtype)).block_elements; }

int64_t dtype_row_bytes(DType dtype, int64_t n) {
    const GgmlTypeTraits& traits = ggml_type_traits(ggml_type(dtype));
    return n / traits.block_elements * traits.block_bytes;
}

void mxfp4_blocks_from_split(const std::byte* codes, const std::byte* exponents, size_t groups, std::byte* out) {
    for (size_t g = 0; g < groups; ++g, codes += 16, out += 17) {
        uint8_t values[32];
        for (int j = 0; j < 16; ++j) {
            const auto byte = std::to_integer<uint8_t>(codes[j]);
            values[2 * j] = byte & 15;
            values[2 * j + 1] = byte >> 4;
        }
        out[0] = exponents[g];
        for (int j = 0; j < 16; ++j) out[1 + j] = static_cast<std::byte>(values[j] | values[j + 16] << 4);
    }
}

std::string gguf_file_type_name(uint64_t id) {
    for (const FileType& type : file_types)
        if (type.id == id) return type.name;
    return "file type " + std::to_string(id);
}

void dequantize_row(GgmlType type, const std::byte* src, size_t n, float* out) {
    const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(type));
    if (!traits || !traits->dequantized)
        throw Error("tensors of type " + ggml_type_name(static_cast<uint32_t>(type)) + " are not read by Headscope");
    const auto* b = reinterpret_cast<const uint8_t*>(src);
    const size_t blocks = n / traits->block_elements;
    switch (type) {
        case GgmlType::F32: widen_to_f32(DType::F32, src, n, out); return;
        case GgmlType::F16: widen_to_f32(DType::F16, src, n, out); return;
        case GgmlType::BF16: widen_to_f32(DType::BF16, src, n, out); return;
        case GgmlType::Q4_0: dequantize_q4_0(b, blocks, out); return;
        case GgmlType::Q4_1: dequantize_q4_1(b, blocks, out); return;
        case GgmlType::Q5_0: dequantize_q5_0(b, blocks, out); return;
        case GgmlType::Q5_1: dequantize_q5_1(b, blocks, out); return;
        case GgmlType::Q8_0: dequantize_q8_0(b, blocks, out); return;
        case GgmlType::Q2_K: dequantize_q2_k(b, blocks, out); return;
        case GgmlType::Q3_K: dequantize_q3_k(b, blocks, out); return;
        case GgmlType::Q4_K: dequantize_q4_k(b, blocks, out); return;
        case GgmlType::Q5_K: dequantize_q5_k(b, blocks, out); return;
        case GgmlType::Q6_K: dequantize_q6_k(b, blocks, out); return;
        case GgmlType::IQ4_NL: dequantize_iq4_nl(b, blocks, out); return;
        case GgmlType::IQ4_XS: dequantize_iq4_xs(b, blocks, out); return;
        case GgmlType::MXFP4: dequantize_mxfp4(b, blocks, out); return;
        default: break;  // none: the table says which types are read
    }
}

}  // namespace headscope
