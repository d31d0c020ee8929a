// Test support: SentencePiece models trained here by SentencePiece's own
// spm_train, and its spm_encode as the reference encoder. Two Unigram models
// are trained once per process on the project's docs: a source model
// (docs/cli.md and docs/architecture.md, 400 pieces) and a target model
// (README.md and docs/window.md, 300 pieces), so that the two sides encode
// differently. Marian's tokenizer files are these two as source.spm and
// target.spm, and a vocab.json numbering both models' pieces in an order of
// its own (</s> <pad> <unk> >>de<< >>fr<<, then the pieces sorted), as
// transformers' MarianTokenizer reads them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headscope::test {

enum class Side { source, target };

// The trained model file (.model, SentencePiece's serialized proto) of a side.
const std::filesystem::path& sentencepiece_model(Side side);

// spm_encode's pieces of each text with the side's model, or the model file
// `model` (texts without newlines).
std::vector<std::vector<std::string>> reference_pieces(Side side, const std::vector<std::string>& texts);
std::vector<std::vector<std::string>> reference_pieces(const std::filesystem::path& model,
                                                       const std::vector<std::string>& texts);

// A protobuf field of the wire format's bytes type (a string or a message):
// its key, length and bytes. Appended to a model file, protobuf merges it in.
std::string protobuf_bytes_field(int field, const std::string& bytes);
// A model's pieces field holding one normal piece of `score`: appended to a
// model file, its last piece.
std::string sentencepiece_piece(const std::string& piece, float score);

// Marian's vocab.json (piece -> id); fewer than marian_vocab_bound ids.
const nlohmann::json& marian_vocab();
inline constexpr int marian_vocab_bound = 4096;
inline constexpr int marian_eos_id = 0, marian_pad_id = 1, marian_unk_id = 2;

// source.spm, target.spm and vocab.json into `dir`.
void write_marian_tokenizer(const std::filesystem::path& dir);

// MarianTokenizer's ids of `text` on a side, written from its Python: a
// leading language code (">>fr<<") as one token, spm_encode's pieces of the
// rest numbered by vocab.json (<unk> for a piece it lacks), then </s>.
std::vector<int32_t> marian_reference_ids(Side side, const std::string& text);

// A tokenizer.json for Hugging Face's port of a side's model: a Unigram
// with the model's pieces and scores, <unk> <s> </s> added, as transformers'
// converter writes T5's; in the converter's first layout (Precompiled, then
// WhitespaceSplit and Metaspace: t5-small's and xlm-roberta-base's files) or
// its current one (Precompiled, Strip on the right, runs of spaces replaced
// by one ▁ with a Regex, then Metaspace).
enum class SpmLayout { first, current };
nlohmann::json unigram_json_of(Side side, SpmLayout layout);

}  // namespace headscope::test
