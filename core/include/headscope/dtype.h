// The element types of the checkpoints Headscope reads.
#pragma once

namespace headscope {

enum class DType { F32, F16, BF16 };

// Each type's name in a safetensors header (and in headscope-cli info), in enum order.
inline constexpr const char* dtype_names[] = {"F32", "F16", "BF16"};
inline const char* to_string(DType dtype) { return dtype_names[static_cast<int>(dtype)]; }

}  // namespace headscope
