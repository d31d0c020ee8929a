// The element types of the checkpoints Headscope reads.
#pragma once

namespace headscope {

enum class DType { F32, F16, BF16 };

}  // namespace headscope
