// Helpers the tokenizer's two loaders (gpt2_files.cpp: GPT-2's files, and
// tokenizer_json.cpp: tokenizer.json) and its encoder share, besides UTF-8
// (unicode.h); private to core.
#pragma once
#include "headscope/io/json_input.h"

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace headscope {

// The key of a merge's pair of symbol ids.
inline uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A vocab.json's limits: GPT-2's has 1.0 MB and 100,515 nodes; sixteen
// times those hold a 800,000-token vocabulary.
inline constexpr JsonLimits vocab_limits{16 << 20, 1 << 20};

// Calls `add(token, id)` for each entry of a vocab.json, an object of token
// -> id whose ids are 0..size-1, each once. Throws Error naming `file`.
void for_each_dense_id(const nlohmann::json& vocab, const std::string& file,
                       const std::function<void(const std::string&, int32_t)>& add);

// A byte-fallback token's text, "<0xAB>".
std::string byte_fallback_token(int byte);

// `text` with every `pattern` (not empty) replaced, left to right.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view replacement);

// BERT's normalizer (wordpiece.cpp) on well-formed UTF-8: controls dropped
// and whitespace made spaces, CJK ideographs spaced out, accents stripped
// (NFD without nonspacing marks; or, `accents_as_llama_cpp`, each character
// cut to its NFD's first code point and every mark dropped, as llama.cpp's WPM
// tokenizer strips them), lowercased; each step where asked.
std::string bert_normalized(std::string_view text, bool clean_text, bool chinese_chars, bool strip_accents,
                            bool accents_as_llama_cpp, bool lowercase);

// SentencePiece's nmt_nfkc (a Precompiled normalizer's charsmap, unigram.cpp)
// on well-formed UTF-8: controls dropped, other spaces, ▁ and U+FFFD made
// spaces, then NFKC (around each U+FF5E, which NFKC would change).
std::string nmt_nfkc_normalized(std::string_view text);

// The raw bytes a byte-level token stands for (each of its characters one of
// byte_to_unicode()'s), or nothing when a character is not one of them.
std::optional<std::string> byte_level_bytes(std::string_view token);

}  // namespace headscope
