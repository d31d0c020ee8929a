// JSON from files a user hands Headscope (config.json, vocab.json, the
// safetensors header, settings, examples): the one way every reader parses
// it, bounded so that no file can exhaust the stack, and the one way a
// message quotes a value from it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace headscope {

// Deeper nesting than any file Headscope reads has (a training record is 3).
inline constexpr int max_json_depth = 64;

// Parses `text`, the contents of `file`. Throws Error naming the file for
// anything nlohmann refuses (syntax, a number too large for a double, ...)
// and for nesting deeper than max_json_depth, which it stops at.
nlohmann::json parse_json(std::string_view text, const std::string& file);

// A value as a message may quote it, bounded and never recursive: a scalar
// as JSON cut to 40 bytes, an array or object by its size.
std::string describe_json(const nlohmann::json& value);

}  // namespace headscope
