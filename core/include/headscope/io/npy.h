// Writes a float32 array as a NumPy .npy file (format version 1.0, C order).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <span>
#include <vector>

namespace headscope {

// The caller checks `out` for errors (write_file_atomically does).
void write_npy(std::ostream& out, std::span<const float> data, const std::vector<int64_t>& shape);

}  // namespace headscope
