// The element types of the weights Headscope computes with: the checkpoints'
// float types, and ggml's block-quantized types as GGUF files store them
// (ggml_types.h has their layouts); and their widening to float32. C++17:
// the CUDA backend includes it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace headscope {

enum class DType { F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 };

// Each type's name, in enum order: a safetensors header's for the first three
// (BF16), ggml's for the others (Q4_K); headscope-cli info shows them.
inline constexpr const char* dtype_names[] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1", "Q5_0",   "Q5_1",   "Q8_0",
                                              "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4"};
inline const char* to_string(DType dtype) { return dtype_names[static_cast<int>(dtype)]; }

// Whether values come in blocks that share scales (every type after BF16).
inline bool quantized(DType dtype) { return dtype > DType::BF16; }
// Values per block: 1 for the float types, 32 or 256 for the quantized ones.
int64_t dtype_block_values(DType dtype);
// The bytes of n consecutive values (a whole number of blocks).
int64_t dtype_row_bytes(DType dtype, int64_t n);

// n values of `dtype` at `src` (any alignment; a quantized type's at a block's
// start, n a whole number of blocks) as float32, unchecked.
void widen_to_f32(DType dtype, const std::byte* src, size_t n, float* out);

}  // namespace headscope
