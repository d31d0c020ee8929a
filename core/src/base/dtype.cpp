// Widening the weights' element types to float32 (dtype.h).
#include "headscope/base/dtype.h"

#include "half_float.h"
#include "headscope/base/ggml_types.h"

namespace headscope {

void widen_to_f32(DType dtype, const std::byte* src, size_t n, float* out) {
    switch (dtype) {
        case DType::F32: std::memcpy(out, src, n * sizeof(float)); break;
        case DType::F16:
            for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_bits<uint16_t>(src + 2 * i));
            break;
        case DType::BF16:
            for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_bits<uint16_t>(src + 2 * i));
            break;
        default: dequantize_row(ggml_type(dtype), src, n, out); break;
    }
}

}  // namespace headscope
