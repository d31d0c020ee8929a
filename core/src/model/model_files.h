// What the loader and the model finder share (private to core/src/model).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "headscope/model/model_description.h"

namespace headscope {

// The Config of a config.json; throws Error naming the file when it is missing or wrong.
Config read_config(const std::filesystem::path& path);

// Throws Error naming `file` and tensor `name` where `shape` differs from the `expected` config.json implies.
void check_shape(const std::string& file, const std::string& name, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& expected);

}  // namespace headscope
