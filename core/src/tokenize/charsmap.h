// SentencePiece's precompiled charsmap (private to core): its normalization
// rules compiled into a darts-clone double-array trie of UTF-8 byte strings,
// each leaf the offset of a NUL-terminated replacement. libsentencepiece
// (Marian's models) and llama.cpp (a GGUF t5 vocabulary) walk it; Headscope
// checks a blob before either walk and applies one as llama.cpp does.
#pragma once
#include <string>
#include <string_view>

namespace headscope {

// Whether walking `blob` for any input stays inside it: from the root and from
// every unit a byte can reach, each of the 256 children and the leaf lie
// inside the trie, and each leaf's replacement ends inside the blob. A blob
// too short for its trie-size word, or whose trie leaves no byte after it,
// counts as safe (libsentencepiece refuses it by itself).
bool charsmap_is_safe(std::string_view blob);

class Charsmap {
public:
    // Throws Error "<what is wrong>" unless `blob` is a trie-size word, a
    // trie that charsmap_is_safe accepts, and the replacements after it.
    explicit Charsmap(std::string blob);

    // `text` (well-formed UTF-8) with, at each position, the longest prefix
    // the trie holds replaced by its replacement, and otherwise the
    // character there kept (llama.cpp's llm_tokenizer_ugm_session::normalize_prefix,
    // which follows SentencePiece's Normalizer). Stops once the result has
    // more than `max_size` bytes.
    std::string normalized(std::string_view text, size_t max_size) const;

private:
    std::string blob_;
    std::string_view trie_;          // 32-bit units
    std::string_view replacements_;  // NUL-terminated strings, each unit's leaf an offset into them
};

}  // namespace headscope
