// Test support: random-weight checkpoints of the encoder–decoder families
// (T5, Flan-T5, BART, Marian) as T5ForConditionalGeneration,
// BartForConditionalGeneration and MarianMTModel save them: the real
// config.json keys, tensor names ("encoder.block.0.layer.0.SelfAttention.q.weight",
// "model.decoder.layers.0.encoder_attn.k_proj.weight", "final_logits_bias", ...)
// and Linear (out, in) layouts, beside their tokenizer: a tokenizer.json
// (written_tokenizers.h: T5's Unigram for T5, RoBERTa's byte-level BPE for
// BART), or Marian's source.spm, target.spm and vocab.json
// (sentencepiece_models.h), with more rows than tokens, as Qwen pads. The
// weights stay here as floats for seq2seq_reference, which never reads them
// through the loader.
// Legend: C channels, V vocab, F the MLP's hidden size, hs head size (T5's d_kv).
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "family_writer.h"

namespace headscope::test {

enum class Seq2Seq { t5, bart, marian };

struct Seq2SeqSpec {
    Seq2Seq family = Seq2Seq::t5;
    int encoder_layers = 2, decoder_layers = 2;
    int n_embd = 32;  // C
    int n_head = 4;
    int head_dim = 8;  // hs (T5's d_kv; BART's and Marian's C / NH)
    int mlp_dim = 48;  // F
    int max_positions = 40;
    std::string activation =
        "relu";                    // T5's feed_forward_proj (relu, gated-gelu); BART's and Marian's activation_function
    bool tied = true;              // T5: tie_word_embeddings (Flan-T5's are not)
    bool scale_embedding = false;  // BART's and Marian's: embeddings times sqrt(C)
    int buckets = 8, max_distance = 20;                        // T5's relative positions
    int vocab_size = 0, pad_id = 0, eos_id = 1, start_id = 0;  // the tokenizer's (seq2seq_spec sets them)
    uint64_t seed = 11;
};

// The tests' encoder–decoders, each named: T5 (ReLU, tied, d_kv x heads
// other than C), Flan-T5 (gated GELU, untied, more decoder layers than
// encoder layers), BART (GELU, learned positions, embedding norm), Marian
// (swish, sinusoids, scaled embeddings).
struct Seq2SeqVariant {
    std::string name;
    Seq2SeqSpec spec;
};
std::vector<Seq2SeqVariant> seq2seq_variants();
Seq2SeqSpec seq2seq_variant(const std::string& name);  // std::invalid_argument when none has that name
inline std::ostream& operator<<(std::ostream& os, const Seq2SeqVariant& v) { return os << v.name; }

struct Seq2SeqCheckpoint {
    Seq2SeqSpec spec;
    nlohmann::json config;
    std::vector<NamedTensor> tensors;  // in the order of the files
    // The values of a tensor by its name without BART's and Marian's
    // "model."; null (find) or std::out_of_range naming it (operator[]) when absent.
    const std::vector<float>* find(const std::string& name) const;
    const std::vector<float>& operator[](const std::string& name) const;
};

Seq2SeqCheckpoint make_seq2seq_checkpoint(const Seq2SeqSpec& spec);
// config.json, model.safetensors and the tokenizer.json into `dir`.
void write_seq2seq_checkpoint(const std::filesystem::path& dir, const Seq2SeqCheckpoint& checkpoint);
// The BART checkpoint's tokenizer in `dir` as many fine-tunes ship it:
// vocab.json and merges.txt (its tokenizer.json's vocabulary and merges), no tokenizer.json.
void write_bart_vocab_files(const std::filesystem::path& dir);

}  // namespace headscope::test
