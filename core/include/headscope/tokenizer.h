// GPT-2's byte-level BPE: bytes map to printable unicode characters, the
// text is split by GPT-2's pre-tokenizer pattern, and each piece is merged
// pair by pair in merge-rank order. Loads HF's vocab.json and merges.txt.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace headscope {

// The 256 unicode code points GPT-2 uses to stand for bytes 0..255.
const std::array<char32_t, 256>& byte_to_unicode();

// Splits UTF-8 text the way GPT-2's regex does:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Throws Error on invalid UTF-8. The pieces are views into `text`.
std::vector<std::string_view> pretokenize(std::string_view text);

class Tokenizer {
public:
    // Throws Error naming the file when either is missing or malformed.
    static Tokenizer load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt);

    // Token ids of UTF-8 text; throws Error on invalid UTF-8.
    std::vector<int32_t> encode(std::string_view text) const;
    // The raw bytes a token stands for (may be a partial UTF-8 sequence).
    std::string token_bytes(int32_t id) const;
    int32_t vocab_size() const { return static_cast<int32_t>(id_to_bytes_.size()); }

private:
    void bpe(const std::string& piece_symbols, std::vector<int32_t>& out) const;

    std::unordered_map<std::string, int32_t> symbols_to_id_;   // vocab.json: byte-unicode string -> id
    std::vector<std::string> id_to_bytes_;                      // id -> raw bytes
    std::unordered_map<std::string, int32_t> merge_rank_;      // "left right" -> rank
};

}  // namespace headscope
