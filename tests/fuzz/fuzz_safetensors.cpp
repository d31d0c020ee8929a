// libFuzzer harness for the safetensors reader: the input is a whole
// .safetensors file. Every tensor the reader accepts must have non-negative
// dimensions whose product times the dtype's size is its byte count, and
// converting it to float32 must fill that many floats or throw Error.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "headscope/base/shape.h"
#include "headscope/io/safetensors.h"

using namespace headscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir() / "model.safetensors";
    fuzz::write_file(path, fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] {
        const SafetensorsFile file(path);
        // Not a structured binding: clang 14 cannot capture one in a lambda.
        for (const auto& entry : file.tensors()) {
            const std::string& name = entry.first;
            const TensorView& tensor = entry.second;
            const std::string shape = shape_string(tensor.shape, Notation::json);
            if (std::any_of(tensor.shape.begin(), tensor.shape.end(), [](int64_t d) { return d < 0; }))
                fuzz::fail("tensor '" + name + "' has a negative dimension in " + shape);
            const size_t dtype_size = tensor.dtype == DType::F32 ? 4 : 2;
            const auto n = static_cast<size_t>(element_count(tensor.shape));
            if (n * dtype_size != tensor.bytes.size())
                fuzz::fail("tensor '" + name + "' of shape " + shape + " views " + std::to_string(tensor.bytes.size()) +
                           " bytes");
            std::vector<float> out(n);
            fuzz::expect_success_or_error([&] { convert_to_f32(name, tensor, out.data()); });
        }
    });
    return 0;
}
