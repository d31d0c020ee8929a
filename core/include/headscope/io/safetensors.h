// Reader for the safetensors format, memory-mapped.
//
// Layout of a .safetensors file:
//   bytes [0, 8)        N, the header length, unsigned 64-bit little endian
//   bytes [8, 8+N)      a UTF-8 JSON object: for each tensor name
//                       {"dtype": "F32"|"F16"|"BF16"|..., "shape": [d0, d1, ...],
//                        "data_offsets": [begin, end]}, plus an optional
//                       "__metadata__" object of strings
//   bytes [8+N, end)    the data; offsets are relative to byte 8+N
// Every field is validated (header length bound, JSON, dtype, shape, offsets
// inside the file, size = product(shape) * dtype size, no two tensors
// overlapping) before any data is touched.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "headscope/base/dtype.h"

namespace headscope {

struct TensorView {
    DType dtype;
    std::vector<int64_t> shape;
    std::span<const std::byte> bytes;  // inside the mapped file
};

// A tensor of a dtype the engine does not compute with (Pythia's U8 or BOOL
// masks, integer buffers, gpt-oss's MXFP4 blocks and scales stored as U8):
// its bytes, checked against its shape like every tensor's.
struct RawTensor {
    std::string dtype;  // as the header names it: "U8"
    std::vector<int64_t> shape;
    std::span<const std::byte> bytes;  // inside the mapped file
};

class SafetensorsFile {
public:
    // Maps and validates the file; throws Error naming the file and the problem.
    explicit SafetensorsFile(const std::filesystem::path& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    // The tensors Headscope reads: F32, F16 and BF16.
    const std::map<std::string, TensorView>& tensors() const { return tensors_; }
    // The others by name.
    const std::map<std::string, RawTensor>& unread_tensors() const { return unread_; }

    // Drops from memory the pages of this file's map that lie wholly inside
    // `bytes` (its other bytes ignored): for tensors copied out at load, whose
    // pages would otherwise stay resident beside the copy. The map is private
    // and read-only, so a page touched again is read back from the file.
    void release(std::span<const std::byte> bytes) const;

private:
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, RawTensor> unread_;
};

// Converts a tensor to float32 into `out` (product(shape) floats); throws
// Error naming `name` if any value is NaN or Inf.
void convert_to_f32(const std::string& name, const TensorView& tensor, float* out);

// Throws Error naming `name` and the element if any value is NaN or Inf.
void check_finite(const std::string& name, const TensorView& tensor);

struct SafetensorsEntry {
    std::string name;
    std::vector<int64_t> shape;
    std::span<const float> data;  // product(shape) floats
};

// Writes float32 tensors back to back after a header padded to a multiple of
// 8 bytes, whole or not at all (write_file_atomically).
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsEntry>& tensors);

}  // namespace headscope
