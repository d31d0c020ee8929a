// Test support: random-weight checkpoints of the encoder families (BERT,
// RoBERTa, DistilBERT, ModernBERT) as their *ForMaskedLM classes save them: the real
// config.json keys, tensor names ("bert.encoder.layer.0.attention.self.query.weight",
// "cls.predictions.bias", ...) and Linear (out, in) layouts, beside a BERT
// tokenizer.json (bert_tokenizer.h). The weights stay here as floats for
// encoder_reference, which never reads them through the loader.
// Legend: C channels, V vocab, F the MLP's hidden size.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "family_writer.h"

namespace headscope::test {

enum class Encoder { bert, roberta, distilbert, modernbert };

struct EncoderSpec {
    Encoder family = Encoder::bert;
    int n_layer = 2;
    int n_embd = 32;  // C
    int n_head = 4;
    int mlp_dim = 64;  // F
    int max_positions = 40;
    int type_vocab_size = 2;          // BERT's two segments; RoBERTa's one; DistilBERT none
    std::string activation = "gelu";  // hidden_act: gelu (erf) or gelu_new (tanh)
    int vocab_size = 0;               // the tokenizer's (encoder_spec sets it)
    int pad_id = 0;                   // RoBERTa's 1: its positions start at 2
    double norm_eps = 1e-12;
    uint64_t seed = 3;
    // ModernBERT: the window's width (|i - j| <= local_attention / 2) on every
    // layer but each global_every-th, and the two rotary bases.
    int local_attention = 4, global_every = 3;
    double global_rope_theta = 160000, local_rope_theta = 10000;
};
EncoderSpec encoder_spec(Encoder family);
const char* model_type(Encoder family);

// The tests' encoders, each named: BERT with erf and tanh GELU, RoBERTa, DistilBERT.
struct EncoderVariant {
    std::string name;
    EncoderSpec spec;
};
std::vector<EncoderVariant> encoder_variants();
EncoderSpec encoder_variant(const std::string& name);  // std::invalid_argument when none has that name
inline std::ostream& operator<<(std::ostream& os, const EncoderVariant& v) { return os << v.name; }

struct EncoderCheckpoint {
    EncoderSpec spec;
    nlohmann::json config;
    std::vector<NamedTensor> tensors;  // in the order of the files
    // The values of a tensor by its name after the family's prefix ("bert.",
    // "roberta.", "distilbert.") where it has one; std::out_of_range naming it when absent.
    const std::vector<float>& operator[](const std::string& name) const;
};

EncoderCheckpoint make_encoder_checkpoint(const EncoderSpec& spec);
// config.json, model.safetensors and the BERT tokenizer.json into `dir`.
void write_encoder_checkpoint(const std::filesystem::path& dir, const EncoderCheckpoint& checkpoint);

}  // namespace headscope::test
