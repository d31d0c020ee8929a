// JSON from files a user hands Headscope (config.json, tokenizer.json,
// vocab.json, the shard index, the safetensors header, the settings, the
// examples): the one way every reader parses it, bounded so that no file can
// exhaust the stack, the memory or the time, and the one way a message
// quotes a value from it.
#pragma once
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace headscope {

// Deeper nesting than any file Headscope reads has (a training record is 3).
inline constexpr int max_json_depth = 64;

// How much JSON a reader takes: the file's bytes, and its nodes (every
// value, array, object and key), which bound the parsed document's memory:
// a node costs at most about 100 bytes (an empty object in an array, the
// worst; a number in an array costs 27), on top of its strings' bytes. Each
// reader sets them from the largest real files it reads, with a margin.
struct JsonLimits {
    size_t max_bytes;
    size_t max_nodes;
};

// Parses `text`, the contents of `file`. Throws Error naming the file for
// anything nlohmann refuses (syntax, a number too large for a double, ...),
// for nesting deeper than max_json_depth and for more nodes than `limits`
// allow, checked in one pass over the text before any document is built
// (which then takes linear time: nlohmann's parser with a callback takes
// quadratic time over an array of objects).
nlohmann::json parse_json(std::string_view text, const std::string& file, const JsonLimits& limits);

// The JSON file at `path`, read as read_file does (at most limits.max_bytes)
// and parsed by parse_json. `what` names it to the reader: "the tokenizer".
nlohmann::json read_json_file(const std::filesystem::path& path, const JsonLimits& limits,
                              const std::string& what = "");

// A value as a message may quote it, bounded and never recursive: a scalar
// as JSON cut to 40 bytes, an array or object by its size.
std::string describe_json(const nlohmann::json& value);

}  // namespace headscope
