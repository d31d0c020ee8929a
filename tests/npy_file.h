// A float32 .npy file read back, for the tests of what the programs write.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "headscope/io/files.h"

namespace headscope::test {

// As NumPy's format 1.0 says: its shape from the header's tuple ("2, 1, 4"), then the data.
struct NpyArray {
    std::string shape;
    std::vector<float> data;
};
inline NpyArray read_npy(const std::filesystem::path& path) {
    const std::string bytes = read_file(path);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << path;
    const size_t header_len = uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8;
    const std::string header = bytes.substr(10, header_len);
    EXPECT_NE(header.find("'descr': '<f4', 'fortran_order': False"), std::string::npos) << header;
    const size_t open = header.find("'shape': (") + 10;
    NpyArray array{header.substr(open, header.find(')', open) - open), {}};
    array.data.resize((bytes.size() - 10 - header_len) / 4);
    std::memcpy(array.data.data(), bytes.data() + 10 + header_len, array.data.size() * 4);
    return array;
}

}  // namespace headscope::test
