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
// with \s as GPT-2's Python `regex` has it (Unicode White_Space). Throws Error on invalid UTF-8. The pieces are views
// into `text`.
std::vector<std::string_view> pretokenize(std::string_view text);

class Tokenizer {
public:
    // Throws Error naming the file when either is missing or malformed.
    static Tokenizer load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt);

    // Token ids of UTF-8 text; throws Error on invalid UTF-8.
    std::vector<int32_t> encode(std::string_view text) const;
    // Each text's ids; throws Error naming the text ("text 2 is empty", "text 1: invalid UTF-8 ...").
    std::vector<std::vector<int32_t>> encode_texts(const std::vector<std::string>& texts) const;
    // The raw bytes a token stands for (may be a partial UTF-8 sequence).
    std::string token_bytes(int32_t id) const;
    int32_t vocab_size() const { return static_cast<int32_t>(id_to_bytes_.size()); }

private:
    // The result of merging a pair of symbols, and the merge's rank in merges.txt.
    struct Merge {
        int32_t rank;
        int32_t result;
    };

    struct BpeScratch;

    // Symbols are interned as ids: vocab ids first, then strings that only
    // appear in merges.txt (a BPE result among those has no token id).
    void bpe(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const;

    std::vector<std::string> id_to_bytes_;         // vocab id -> raw bytes
    std::vector<std::string> merge_only_symbols_;  // symbol id - vocab size -> symbol string
    std::array<int32_t, 256> byte_symbol_{};       // byte -> its one-byte symbol
    std::unordered_map<uint64_t, Merge> merges_;   // (left << 32 | right) -> merge
};

}  // namespace headscope
