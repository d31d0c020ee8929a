// A safetensors file's tensors read back without the library, for
// test_model_loading's files: the weights a test wrote, decoded on their own,
// and good files to spoil.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model_writer.h"
#include "process.h"

namespace headscope::test {

// A safetensors file's tensors in data order, read without the library.
inline std::vector<RawTensor> read_raw_tensors(const std::filesystem::path& path) {
    const std::string file = read_file(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(file[i]);
    const nlohmann::json header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<int64_t>(n));
    std::vector<std::pair<uint64_t, RawTensor>> by_offset;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") continue;
        const auto begin = entry.at("data_offsets").at(0).get<int64_t>(),
                   end = entry.at("data_offsets").at(1).get<int64_t>();
        const auto data = file.begin() + 8 + static_cast<int64_t>(n);
        by_offset.push_back({static_cast<uint64_t>(begin),
                             {name, entry.at("dtype").get<std::string>(), entry.at("shape").get<std::vector<int64_t>>(),
                              std::vector<uint8_t>(data + begin, data + end)}});
    }
    std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<RawTensor> tensors;
    for (auto& [offset, t] : by_offset) tensors.push_back(std::move(t));
    return tensors;
}

inline RawTensor& raw_tensor(std::vector<RawTensor>& tensors, const std::string& name) {
    for (RawTensor& t : tensors)
        if (t.name == name) return t;
    throw std::runtime_error("test: no tensor " + name);
}

}  // namespace headscope::test
