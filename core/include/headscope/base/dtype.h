// The element types of the checkpoints Headscope reads, and their widening
// to float32. C++17: the CUDA backend includes it.
#pragma once
#include <cstddef>

namespace headscope {

enum class DType { F32, F16, BF16 };

// Each type's name in a safetensors header (and in headscope-cli info), in enum order.
inline constexpr const char* dtype_names[] = {"F32", "F16", "BF16"};
inline const char* to_string(DType dtype) { return dtype_names[static_cast<int>(dtype)]; }
inline size_t dtype_bytes(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

// n elements of `dtype` at `src` (any alignment) as float32, unchecked.
void widen_to_f32(DType dtype, const std::byte* src, size_t n, float* out);

}  // namespace headscope
