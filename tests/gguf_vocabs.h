// Test support: vocabularies as a GGUF file's tokenizer.ggml.* metadata
// holds them, written as llama.cpp's convert_hf_to_gguf.py writes them from
// real tokenizers (Llama 3's, Qwen 3's and Llama 2's tokenizer.json, GPT-2's
// files, a BERT WordPiece vocabulary, SentencePiece Unigram models trained
// here), and the texts the GGUF tokenizer tests compare with llama.cpp.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf_writer.h"

namespace headscope::test {

// A vocabulary as GGUF metadata holds it.
struct GgufVocab {
    std::vector<std::string> tokens;
    std::vector<int32_t>
        types;  // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
    std::vector<float> scores;  // empty: none written
    std::vector<std::string> merges;
    std::string charsmap;  // tokenizer.ggml.precompiled_charsmap; empty: none written
};

using GgufMetadata = std::vector<std::pair<std::string, GgufMetaValue>>;

// A byte-level tokenizer.json's vocabulary: its added tokens control (special,
// or looking so) or user-defined, as convert_hf_to_gguf.py's get_vocab_base.
GgufVocab byte_level_gguf_vocab(const nlohmann::json& tokenizer_json);
// Llama 2's as a SentencePiece model's: <unk> unknown, <s> </s> control,
// <0xAB> byte, and the rest scored -id, as the BPE model's merge order has them.
GgufVocab sentencepiece_gguf_vocab(const nlohmann::json& tokenizer_json);
// GPT-2's encoder.json and vocab.bpe; <|endoftext|> control.
GgufVocab gpt2_gguf_vocab();
// BERT's (bert_tokenizer.h) as convert_hf_to_gguf.py's BertModel writes
// it: [PAD], [unused0] to [unused98], then [UNK] [CLS] [SEP] [MASK] (control,
// ids 100-103 as in bert-base-uncased), and the other tokens, a "##"
// continuation without its ##, any other after a "▁"; then pieces for
// accents and case kept, Hangul's leading consonants, some CJK and an emoji,
// and <tool_call> user-defined.
GgufVocab bert_gguf_vocab();

// A SentencePiece Unigram model trained by spm_train (normalization rule
// `rule`: nmt_nfkc, SentencePiece's default and T5's, or nfkc_cf, which also
// folds case) on the project's docs, as convert_hf_to_gguf.py's T5Model
// writes it: the pieces, scores and types, the precompiled charsmap; then
// <extra_id_0> and <think> user-defined (scored -1000), an unused piece
// (scored -10000) padding the vocabulary and another of two emoji.
struct SpmGgufVocab {
    GgufVocab vocab;
    bool add_dummy_prefix, remove_extra_whitespaces;  // the model's normalizer_spec
};
const SpmGgufVocab& unigram_gguf_vocab(const std::string& rule);

// The tokenizer.ggml.* keys of vocabulary `v`: tokenizer model `model`,
// pre-tokenizer `pre` ("": no key), the tokens, types and what else it has.
GgufMetadata gguf_tokenizer_metadata(const GgufVocab& v, const std::string& model, const std::string& pre);
// BERT's vocabulary (bert_gguf_vocab) with the keys BertModel writes besides
// from its tokenizer's files: [CLS] as bos and cls, [SEP] as eos and sep,
// [UNK], [PAD] and [MASK], and the tokens added around a text.
GgufMetadata bert_gguf_tokenizer();
// A trained Unigram model (unigram_gguf_vocab) as T5Model writes it: the
// vocabulary, <unk> and </s> as unknown and eos, the normalizer_spec's space
// options, no bos and eos after the text.
GgufMetadata t5_gguf_tokenizer(const SpmGgufVocab& spm);
// The id of `token` in `v`; std::out_of_range when it has none.
int32_t token_id(const GgufVocab& v, const std::string& token);

// The metadata of a vocabulary-only model of architecture llama holding
// `tokenizer` (llama.cpp reads a tokenizer the same whatever the architecture).
GgufMetadata gguf_vocab_only(const GgufMetadata& tokenizer);
GgufMetadata gguf_vocab_metadata(const GgufVocab& v, const std::string& model, const std::string& pre);
GgufMetadata with(GgufMetadata m, const GgufMetadata& more);
GgufMetadata replaced(GgufMetadata m, const std::string& key, const GgufMetaValue& value);
GgufMetadata without(GgufMetadata m, const std::string& key);
GgufMetaValue gguf_byte_array(const std::string& bytes);

// The compared texts: ones chosen by hand, digit and whitespace runs, and
// random mixtures of fragments in many scripts.
std::vector<std::string> gguf_tokenizer_texts();

// The ids llama.cpp itself gives each of `texts` on the tokenizer of GGUF
// file `model` (llama_cpp.h); none when node cannot be run;
// std::runtime_error naming the script when it fails.
std::optional<std::vector<std::vector<int32_t>>> llama_cpp_token_ids(const std::filesystem::path& model,
                                                                     const std::vector<std::string>& texts);

}  // namespace headscope::test
