// Reading a whole file: the one way Headscope does it, so that every reader
// fails alike, with one line naming the file.
#pragma once
#include <filesystem>
#include <string>

namespace headscope {

// The bytes of the file at `path`. Throws Error "<path>: cannot open" or
// "<path>: cannot read", followed by `what` when given: what the file is to
// the reader, e.g. "the examples".
std::string read_file(const std::filesystem::path& path, const std::string& what = "");

}  // namespace headscope
