// Test support: the encoder–decoders' checkpoints; see seq2seq_models.h.
#include "seq2seq_models.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>

#include "sentencepiece_models.h"
#include "written_tokenizers.h"

namespace headscope::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* model_type(Seq2Seq family) {
    switch (family) {
        case Seq2Seq::t5: return "t5";
        case Seq2Seq::bart: return "bart";
        case Seq2Seq::marian: return "marian";
    }
    return "";
}

json config_json(const Seq2SeqSpec& s) {
    if (s.family == Seq2Seq::t5)
        return {{"architectures", {"T5ForConditionalGeneration"}},
                {"d_ff", s.mlp_dim},
                {"d_kv", s.head_dim},
                {"d_model", s.n_embd},
                {"decoder_start_token_id", s.start_id},
                {"eos_token_id", s.eos_id},
                {"feed_forward_proj", s.activation},
                {"layer_norm_epsilon", 1e-6},
                {"model_type", "t5"},
                {"n_positions", s.max_positions},
                {"num_decoder_layers", s.decoder_layers},
                {"num_heads", s.n_head},
                {"num_layers", s.encoder_layers},
                {"pad_token_id", s.pad_id},
                {"relative_attention_max_distance", s.max_distance},
                {"relative_attention_num_buckets", s.buckets},
                {"tie_word_embeddings", s.tied},
                {"vocab_size", s.vocab_size}};
    return {{"activation_function", s.activation},
            {"architectures", {s.family == Seq2Seq::bart ? "BartForConditionalGeneration" : "MarianMTModel"}},
            {"d_model", s.n_embd},
            {"decoder_attention_heads", s.n_head},
            {"decoder_ffn_dim", s.mlp_dim},
            {"decoder_layers", s.decoder_layers},
            {"decoder_start_token_id", s.start_id},
            {"encoder_attention_heads", s.n_head},
            {"encoder_ffn_dim", s.mlp_dim},
            {"encoder_layers", s.encoder_layers},
            {"eos_token_id", s.eos_id},
            {"max_position_embeddings", s.max_positions},
            {"model_type", model_type(s.family)},
            {"pad_token_id", s.pad_id},
            {"scale_embedding", s.scale_embedding},
            {"vocab_size", s.vocab_size}};
}

const json& tokenizer_json(const Seq2SeqSpec& s) {
    return s.family == Seq2Seq::bart ? roberta_tokenizer_json() : unigram_tokenizer_json(UnigramLayout::t5);
}

Seq2SeqSpec spec_of(Seq2Seq family) {
    Seq2SeqSpec s;
    s.family = family;
    if (family == Seq2Seq::marian) {  // MarianMTModel's: </s> first, <pad> starts the decoder
        s.vocab_size = marian_vocab_bound;
        s.pad_id = marian_pad_id, s.eos_id = marian_eos_id, s.start_id = marian_pad_id;
        s.activation = "swish", s.scale_embedding = true, s.seed = 13;
        return s;
    }
    const json& tokenizer = tokenizer_json(s);
    if (family == Seq2Seq::bart) {
        const json& vocab = tokenizer["model"]["vocab"];
        s.vocab_size = static_cast<int>(vocab.size());
        s.pad_id = vocab["<pad>"], s.eos_id = vocab["</s>"], s.start_id = s.eos_id;
        s.activation = "gelu", s.seed = 12;
    } else {
        s.vocab_size = static_cast<int>(tokenizer["model"]["vocab"].size());
        s.pad_id = 0, s.eos_id = 1, s.start_id = 0;
    }
    return s;
}

using Draw = std::function<void(const std::string&, std::vector<int64_t>, float, float)>;

// One T5 attention (SelfAttention or EncDecAttention) at `at`: Q and K at
// twice the fan-in scale, for peaked maps without 1/sqrt(hs).
void draw_t5_attention(const Seq2SeqSpec& s, const Draw& draw, const std::string& at) {
    const int C = s.n_embd, inner = s.n_head * s.head_dim;
    const float in_C = 1 / std::sqrt(float(C));
    draw(at + ".q.weight", {inner, C}, 0, in_C);
    draw(at + ".k.weight", {inner, C}, 0, in_C);
    draw(at + ".v.weight", {inner, C}, 0, in_C);
    draw(at + ".o.weight", {C, inner}, 0, 1 / std::sqrt(float(inner)));
}

void draw_t5(const Seq2SeqSpec& s, const Draw& draw) {
    const int C = s.n_embd, F = s.mlp_dim;
    draw("shared.weight", {s.vocab_size, C}, 0, 1);
    for (const std::string stack : {"encoder", "decoder"}) {
        const bool decoder = stack == "decoder";
        for (int l = 0; l < (decoder ? s.decoder_layers : s.encoder_layers); ++l) {
            const std::string at = stack + ".block." + std::to_string(l) + ".layer.";
            draw_t5_attention(s, draw, at + "0.SelfAttention");
            if (l == 0) draw(at + "0.SelfAttention.relative_attention_bias.weight", {s.buckets, s.n_head}, 0, 1);
            draw(at + "0.layer_norm.weight", {C}, 1, 0.1f);
            if (decoder) {
                draw_t5_attention(s, draw, at + "1.EncDecAttention");
                draw(at + "1.layer_norm.weight", {C}, 1, 0.1f);
            }
            const std::string ff = at + (decoder ? "2." : "1.");
            if (s.activation == "relu") {
                draw(ff + "DenseReluDense.wi.weight", {F, C}, 0, 1 / std::sqrt(float(C)));
            } else {
                draw(ff + "DenseReluDense.wi_0.weight", {F, C}, 0, 1 / std::sqrt(float(C)));
                draw(ff + "DenseReluDense.wi_1.weight", {F, C}, 0, 1 / std::sqrt(float(C)));
            }
            draw(ff + "DenseReluDense.wo.weight", {C, F}, 0, 1 / std::sqrt(float(F)));
            draw(ff + "layer_norm.weight", {C}, 1, 0.1f);
        }
        draw(stack + ".final_layer_norm.weight", {C}, 1, 0.1f);
    }
    if (!s.tied) draw("lm_head.weight", {s.vocab_size, C}, 0, 1 / std::sqrt(float(C)));
}

void draw_bart(const Seq2SeqSpec& s, const Draw& draw) {
    const int C = s.n_embd, F = s.mlp_dim;
    const float in_C = 1 / std::sqrt(float(C)), in_F = 1 / std::sqrt(float(F));
    const bool bart = s.family == Seq2Seq::bart;
    draw("model.shared.weight", {s.vocab_size, C}, 0, bart ? 1 : in_C);  // Marian's are scaled up by sqrt(C)
    for (const std::string stack : {"encoder", "decoder"}) {
        const std::string at = "model." + stack + ".";
        const bool decoder = stack == "decoder";
        if (bart) draw(at + "embed_positions.weight", {s.max_positions + 2, C}, 0, 1);
        const auto linear = [&](const std::string& name, int rows, int cols, float scale) {
            draw(name + ".weight", {rows, cols}, 0, scale);
            draw(name + ".bias", {rows}, 0, 0.1f);
        };
        const auto norm = [&](const std::string& name) {
            draw(name + ".weight", {C}, 1, 0.1f);
            draw(name + ".bias", {C}, 0, 0.1f);
        };
        for (int l = 0; l < (decoder ? s.decoder_layers : s.encoder_layers); ++l) {
            const std::string layer = at + "layers." + std::to_string(l) + ".";
            for (const std::string attention : {"self_attn", "encoder_attn"}) {
                if (attention == "encoder_attn" && !decoder) continue;
                linear(layer + attention + ".k_proj", C, C, 2 * in_C);
                linear(layer + attention + ".v_proj", C, C, in_C);
                linear(layer + attention + ".q_proj", C, C, 2 * in_C);
                linear(layer + attention + ".out_proj", C, C, in_C);
                norm(layer + attention + "_layer_norm");
            }
            linear(layer + "fc1", F, C, in_C);
            linear(layer + "fc2", C, F, in_F);
            norm(layer + "final_layer_norm");
        }
        if (bart) norm(at + "layernorm_embedding");
    }
    draw("final_logits_bias", {1, s.vocab_size}, 0, 0.5f);
}

}  // namespace

std::vector<Seq2SeqVariant> seq2seq_variants() {
    Seq2SeqSpec t5 = spec_of(Seq2Seq::t5);
    t5.head_dim = 6;  // NH x d_kv = 24, not C
    Seq2SeqSpec flan = spec_of(Seq2Seq::t5);
    flan.activation = "gated-gelu", flan.tied = false, flan.decoder_layers = 3, flan.seed = 14;
    return {{"t5", t5}, {"flan_t5", flan}, {"bart", spec_of(Seq2Seq::bart)}, {"marian", spec_of(Seq2Seq::marian)}};
}

Seq2SeqSpec seq2seq_variant(const std::string& name) {
    for (const Seq2SeqVariant& variant : seq2seq_variants())
        if (variant.name == name) return variant.spec;
    throw std::invalid_argument("no encoder-decoder variant " + name);
}

const std::vector<float>* Seq2SeqCheckpoint::find(const std::string& name) const {
    for (const NamedTensor& t : tensors)
        if (t.name == name || t.name == "model." + name) return &t.values;
    return nullptr;
}

const std::vector<float>& Seq2SeqCheckpoint::operator[](const std::string& name) const {
    if (const std::vector<float>* values = find(name)) return *values;
    throw std::out_of_range("test checkpoint has no tensor " + name);
}

Seq2SeqCheckpoint make_seq2seq_checkpoint(const Seq2SeqSpec& s) {
    Seq2SeqCheckpoint out{s, config_json(s), {}};
    std::mt19937_64 rng(s.seed);
    const Draw draw = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std) {
        draw_tensor(out.tensors, rng, name, std::move(shape), mean, std);
    };
    if (s.family == Seq2Seq::t5)
        draw_t5(s, draw);
    else
        draw_bart(s, draw);
    return out;
}

void write_seq2seq_checkpoint(const fs::path& dir, const Seq2SeqCheckpoint& checkpoint) {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << checkpoint.config.dump(2) << "\n";
    write_f32_tensors(dir / "model.safetensors", checkpoint.tensors);
    if (checkpoint.spec.family == Seq2Seq::marian)
        write_marian_tokenizer(dir);
    else
        std::ofstream(dir / "tokenizer.json") << tokenizer_json(checkpoint.spec).dump() << "\n";
}

void write_bart_vocab_files(const fs::path& dir) {
    const json model = roberta_tokenizer_json()["model"];
    std::ofstream(dir / "vocab.json") << model["vocab"].dump() << "\n";
    std::ofstream merges(dir / "merges.txt");
    merges << "#version: 0.2\n";
    for (const json& merge : model["merges"]) merges << merge.get<std::string>() << "\n";
    fs::remove(dir / "tokenizer.json");
}

}  // namespace headscope::test
