// What the tokenizer's two loaders (tokenizer.cpp: GPT-2's files, and
// tokenizer_json.cpp: tokenizer.json) and its encoder share; private to core.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headscope {

// The key of a merge's pair of symbol ids.
inline uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A code point as UTF-8.
std::string utf8_of(char32_t cp);

// Throws Error "invalid UTF-8 at byte N" unless `text` is well-formed UTF-8
// (no overlong forms, surrogates or values past U+10FFFF).
void check_utf8(std::string_view text);

// `text` with every `pattern` (not empty) replaced, left to right.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view replacement);

// The raw bytes a byte-level token stands for (each of its characters one of
// byte_to_unicode()'s), or nothing when a character is not one of them.
std::optional<std::string> byte_level_bytes(std::string_view token);

}  // namespace headscope
