// What the loader and the model finder share (private to core/src/model).
#pragma once
#include <filesystem>

#include "headscope/model/model_description.h"

namespace headscope {

// The Config of a config.json; throws Error naming the file when it is missing or wrong.
Config read_config(const std::filesystem::path& path);

}  // namespace headscope
