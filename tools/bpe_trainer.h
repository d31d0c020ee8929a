// Byte-level BPE training for GPT-2-format tokenizers: counts GPT-2 pre-tokens
// over a corpus's documents, learns merges from pair frequencies, and writes
// vocab.json and merges.txt that headscope::Tokenizer loads like GPT-2's.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace headscope {

// Ends each document in a corpus file (tools/corpus) on a line of its own,
// and is the last token of every trained vocabulary.
inline constexpr std::string_view end_of_text = "<|endoftext|>";

// The documents of a corpus: the text between `end_of_text` lines, without
// the newline before each such line. Text after the last one is a document too.
std::vector<std::string_view> split_documents(std::string_view corpus);

// Pre-token (raw bytes) -> how often it occurs.
using PieceCounts = std::unordered_map<std::string, int64_t>;

// Adds the GPT-2 pre-tokens of one document; throws Error on invalid UTF-8.
void count_pieces(std::string_view document, PieceCounts& counts);

struct BpeMerge {
    std::string left;   // raw bytes
    std::string right;  // raw bytes
    int64_t count;      // occurrences of the pair when it was merged
};

struct BpeVocab {
    std::vector<std::string> tokens;  // raw bytes by id: bytes 0..255, then each new merge result
    std::vector<BpeMerge> merges;     // in rank order
};

// Merges the most frequent adjacent pair of symbols over all pieces, weighted
// by count, until there are `n_tokens` tokens or no pair is left. Ties go to
// the pair whose (left, right) bytes sort first. A merge whose result is
// already a token adds a merge but no token. `progress`, when given, is
// called after every merge.
BpeVocab train_bpe(const PieceCounts& pieces, size_t n_tokens,
                   const std::function<void(const BpeVocab&)>& progress = {});

// Writes dir/vocab.json (token -> id, with `end_of_text` last) and
// dir/merges.txt in GPT-2's byte-to-unicode form, each whole or not at all;
// throws Error naming the file that cannot be written.
void write_gpt2_tokenizer(const BpeVocab& vocab, const std::filesystem::path& dir);

}  // namespace headscope
