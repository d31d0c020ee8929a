// Writes a float32 array as a NumPy .npy file (format version 1.0, C order).
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace headscope {

// Throws Error naming the file when it cannot be written.
void write_npy(const std::filesystem::path& path, std::span<const float> data, const std::vector<int64_t>& shape);

}  // namespace headscope
