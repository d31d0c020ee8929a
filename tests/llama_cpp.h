// llama.cpp itself, the GGUF tests' reference (tests/reference/llama_cpp.js,
// node-llama-cpp's prebuilt build): one node process per test program,
// started at the first question and asked each in turn, since starting node
// and loading llama.cpp's library takes about a second. Its answers are kept
// in the build tree by what they answer (the file's bytes, the rest of the
// request, the script), so that a sanitized twin, or another program asking
// of the same file, reads them rather than asking llama.cpp again.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>

namespace headscope::test {

// llama.cpp's answer to `request` (llama_cpp.js lists the requests); none
// when node cannot be run; std::runtime_error naming the script when it fails.
std::optional<nlohmann::json> ask_llama_cpp(const nlohmann::json& request);

}  // namespace headscope::test
