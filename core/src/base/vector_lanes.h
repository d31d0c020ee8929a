// One vector register of float32 for the products' kernels and the block decoders (AVX-512, AVX or
// SSE), and how many of them may hold sums: a vector type wider than the
// registers is split by the compiler through the stack, at a third of the speed.
#pragma once
#include <cstdint>

namespace headscope {

#if defined(__AVX512F__)
inline constexpr int lanes = 16, sum_registers = 16;
#elif defined(__AVX__)
inline constexpr int lanes = 8, sum_registers = 8;
#else
inline constexpr int lanes = 4, sum_registers = 8;
#endif
using Lanes = float __attribute__((vector_size(lanes * sizeof(float))));
// `lanes` bytes, each converted to one lane's float.
using LaneBytes = uint8_t __attribute__((vector_size(lanes)));
using LaneSignedBytes = int8_t __attribute__((vector_size(lanes)));

}  // namespace headscope
