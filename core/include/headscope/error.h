// The one exception type of the engine: bad input at an edge (file, parse,
// option). Its message is one line that names the file, tensor or value.
#pragma once
#include <stdexcept>

namespace headscope {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace headscope
