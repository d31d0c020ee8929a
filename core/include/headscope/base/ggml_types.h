// ggml's tensor types, as GGUF files name them by id: each type's name, how
// many values one block packs, its bytes and their fields in words, and the dequantization of a row
// of blocks to float32 (the layouts of ggml's ggml-common.h); and the names of
// llama.cpp's file types, a whole model's quantization.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "headscope/base/dtype.h"

namespace headscope {

// The ids of ggml's types in a GGUF file (gguf-py's GGMLQuantizationType).
// Ids 4, 5 and 31 to 33, 36 to 38 were types ggml no longer writes.
enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
};

struct GgmlTypeTraits {
    GgmlType type;
    const char* name;         // as gguf-py spells it: "Q4_K", "BF16"
    uint32_t block_elements;  // values in one block (1 for the plain types)
    uint32_t block_bytes;     // bytes of one block
    bool dequantized;         // whether dequantize_row reads it
    // One block's fields in the order stored (ggml-common.h), each "N bytes
    // of ...": "2 bytes of half scale d, 32 bytes of 8-bit codes" (Q8_0); ""
    // for a type dequantize_row does not read.
    const char* layout = "";
};

// The traits of type id `id`; nullptr for an id Headscope does not know.
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);

// "Q4_K", or "type 37" for an id Headscope does not know.
std::string ggml_type_name(uint32_t id);

// The ggml type of each DType, and the DType Headscope computes a ggml type
// in (nullopt for the types it does not read).
GgmlType ggml_type(DType dtype);
std::optional<DType> dtype_of(GgmlType type);

// A GGUF model's general.file_type, llama.cpp's numbering (llama.h's
// llama_ftype) by its short name: "F32" for 0, "Q4_K_M" for 15, "BF16" for
// 32; "file type <id>" for an id Headscope does not know.
std::string gguf_file_type_name(uint64_t id);

// Dequantizes `n` values of `type` (a multiple of its block's values) from
// `src` (n / block_elements blocks, any alignment) into `out`. Throws Error
// naming the type for one it does not read.
void dequantize_row(GgmlType type, const std::byte* src, size_t n, float* out);

// MXFP4 as Hugging Face stores it (gpt-oss's experts) into ggml's blocks:
// `codes` holds `groups` groups of 32 values, 16 bytes each, value 2j in the
// low nibble of byte j and 2j + 1 in its high one; `exponents` one E8M0 byte
// per group. `out` gets `groups` 17-byte MXFP4 blocks, the exponent first,
// then value j in the low nibble of byte j and j + 16 in its high one: the
// same values (FP4 times 2^(e - 127)) in ggml's order.
void mxfp4_blocks_from_split(const std::byte* codes, const std::byte* exponents, size_t groups, std::byte* out);

}  // namespace headscope
