// Test support: the encoders' checkpoints; see encoder_models.h.
#include "encoder_models.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>

#include "bert_tokenizer.h"

namespace headscope::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* prefix(Encoder family) {
    switch (family) {
        case Encoder::bert: return "bert.";
        case Encoder::roberta: return "roberta.";
        case Encoder::distilbert: return "distilbert.";
        case Encoder::modernbert: return "";
    }
    return "";
}

json config_json(const EncoderSpec& s) {
    if (s.family == Encoder::modernbert)
        return {{"architectures", {"ModernBertForMaskedLM"}},
                {"attention_bias", false},
                {"classifier_activation", "gelu"},
                {"classifier_bias", false},
                {"decoder_bias", true},
                {"global_attn_every_n_layers", s.global_every},
                {"global_rope_theta", s.global_rope_theta},
                {"hidden_activation", "gelu"},
                {"hidden_size", s.n_embd},
                {"intermediate_size", s.mlp_dim},
                {"local_attention", s.local_attention},
                {"local_rope_theta", s.local_rope_theta},
                {"max_position_embeddings", s.max_positions},
                {"mlp_bias", false},
                {"model_type", "modernbert"},
                {"norm_bias", false},
                {"norm_eps", s.norm_eps},
                {"num_attention_heads", s.n_head},
                {"num_hidden_layers", s.n_layer},
                {"pad_token_id", s.pad_id},
                {"vocab_size", s.vocab_size}};
    if (s.family == Encoder::distilbert)
        return {{"activation", s.activation},
                {"architectures", {"DistilBertForMaskedLM"}},
                {"dim", s.n_embd},
                {"hidden_dim", s.mlp_dim},
                {"max_position_embeddings", s.max_positions},
                {"model_type", "distilbert"},
                {"n_heads", s.n_head},
                {"n_layers", s.n_layer},
                {"pad_token_id", s.pad_id},
                {"sinusoidal_pos_embds", false},
                {"vocab_size", s.vocab_size}};
    const bool roberta = s.family == Encoder::roberta;
    return {{"architectures", {roberta ? "RobertaForMaskedLM" : "BertForMaskedLM"}},
            {"hidden_act", s.activation},
            {"hidden_size", s.n_embd},
            {"intermediate_size", s.mlp_dim},
            {"layer_norm_eps", s.norm_eps},
            {"max_position_embeddings", s.max_positions},
            {"model_type", model_type(s.family)},
            {"num_attention_heads", s.n_head},
            {"num_hidden_layers", s.n_layer},
            {"pad_token_id", s.pad_id},
            {"position_embedding_type", "absolute"},
            {"type_vocab_size", s.type_vocab_size},
            {"vocab_size", s.vocab_size}};
}

}  // namespace

const char* model_type(Encoder family) {
    switch (family) {
        case Encoder::bert: return "bert";
        case Encoder::roberta: return "roberta";
        case Encoder::distilbert: return "distilbert";
        case Encoder::modernbert: return "modernbert";
    }
    return "";
}

EncoderSpec encoder_spec(Encoder family) {
    EncoderSpec s;
    s.family = family;
    s.vocab_size = static_cast<int>(wordpiece_vocab().size());
    if (family == Encoder::roberta) s.type_vocab_size = 1, s.pad_id = 1, s.max_positions = 42, s.norm_eps = 1e-5;
    if (family == Encoder::distilbert) s.type_vocab_size = 0;
    if (family == Encoder::modernbert) s.type_vocab_size = 0, s.n_layer = 3, s.mlp_dim = 48, s.norm_eps = 1e-5;
    return s;
}

std::vector<EncoderVariant> encoder_variants() {
    EncoderSpec tanh = encoder_spec(Encoder::bert);
    tanh.activation = "gelu_new", tanh.n_head = 2, tanh.seed = 5;
    return {{"bert", encoder_spec(Encoder::bert)},
            {"bert_tanh_gelu", tanh},
            {"roberta", encoder_spec(Encoder::roberta)},
            {"distilbert", encoder_spec(Encoder::distilbert)},
            {"modernbert", encoder_spec(Encoder::modernbert)}};
}

EncoderSpec encoder_variant(const std::string& name) {
    for (const EncoderVariant& variant : encoder_variants())
        if (variant.name == name) return variant.spec;
    throw std::invalid_argument("no encoder variant " + name);
}

const std::vector<float>& EncoderCheckpoint::operator[](const std::string& name) const {
    for (const NamedTensor& t : tensors)
        if (t.name == name || t.name == prefix(spec.family) + name) return t.values;
    throw std::out_of_range("test checkpoint has no tensor " + name);
}

namespace {

using Draw = std::function<void(const std::string&, std::vector<int64_t>, float, float)>;

// ModernBERT's tensors: pre-norm layers without norm biases, layer 0 without
// attn_norm, fused Wqkv and Wi, a final norm, its head and the decoder's bias.
void draw_modernbert(const EncoderSpec& s, const Draw& draw) {
    const int C = s.n_embd, F = s.mlp_dim, V = s.vocab_size;
    const float in_C = 1 / std::sqrt(float(C)), in_F = 1 / std::sqrt(float(F));
    draw("model.embeddings.tok_embeddings.weight", {V, C}, 0, 1);
    draw("model.embeddings.norm.weight", {C}, 1, 0.1f);
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string at = "model.layers." + std::to_string(l) + ".";
        if (l > 0) draw(at + "attn_norm.weight", {C}, 1, 0.1f);
        draw(at + "attn.Wqkv.weight", {3 * C, C}, 0, 2 * in_C);
        draw(at + "attn.Wo.weight", {C, C}, 0, in_C);
        draw(at + "mlp_norm.weight", {C}, 1, 0.1f);
        draw(at + "mlp.Wi.weight", {2 * F, C}, 0, in_C);
        draw(at + "mlp.Wo.weight", {C, F}, 0, in_F);
    }
    draw("model.final_norm.weight", {C}, 1, 0.1f);
    draw("head.dense.weight", {C, C}, 0, in_C);
    draw("head.norm.weight", {C}, 1, 0.1f);
    draw("decoder.bias", {V}, 0, 0.5f);
}

}  // namespace

EncoderCheckpoint make_encoder_checkpoint(const EncoderSpec& s) {
    EncoderCheckpoint out{s, config_json(s), {}};
    std::mt19937_64 rng(s.seed);
    const Draw draw = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std) {
        draw_tensor(out.tensors, rng, name, std::move(shape), mean, std);
    };
    if (s.family == Encoder::modernbert) {
        draw_modernbert(s, draw);
        return out;
    }
    const int C = s.n_embd, F = s.mlp_dim, V = s.vocab_size;
    const float in_C = 1 / std::sqrt(float(C)), in_F = 1 / std::sqrt(float(F));
    const bool distil = s.family == Encoder::distilbert;
    const std::string p = prefix(s.family);
    draw(p + "embeddings.word_embeddings.weight", {V, C}, 0, 1);
    draw(p + "embeddings.position_embeddings.weight", {s.max_positions, C}, 0, 1);
    if (s.type_vocab_size) draw(p + "embeddings.token_type_embeddings.weight", {s.type_vocab_size, C}, 0, 1);
    draw(p + "embeddings.LayerNorm.weight", {C}, 1, 0.1f);
    draw(p + "embeddings.LayerNorm.bias", {C}, 0, 0.1f);
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string at = p + (distil ? "transformer.layer." : "encoder.layer.") + std::to_string(l) + ".";
        const auto linear = [&](const std::string& name, int rows, int cols, float scale) {
            draw(at + name + ".weight", {rows, cols}, 0, scale);
            draw(at + name + ".bias", {rows}, 0, 0.1f);
        };
        const auto norm = [&](const std::string& name) {
            draw(at + name + ".weight", {C}, 1, 0.1f);
            draw(at + name + ".bias", {C}, 0, 0.1f);
        };
        // Q and K at twice the fan-in scale: peaked maps.
        linear(distil ? "attention.q_lin" : "attention.self.query", C, C, 2 * in_C);
        linear(distil ? "attention.k_lin" : "attention.self.key", C, C, 2 * in_C);
        linear(distil ? "attention.v_lin" : "attention.self.value", C, C, in_C);
        linear(distil ? "attention.out_lin" : "attention.output.dense", C, C, in_C);
        norm(distil ? "sa_layer_norm" : "attention.output.LayerNorm");
        linear(distil ? "ffn.lin1" : "intermediate.dense", F, C, in_C);
        linear(distil ? "ffn.lin2" : "output.dense", C, F, in_F);
        norm(distil ? "output_layer_norm" : "output.LayerNorm");
    }
    const std::string head = distil                      ? "vocab_transform"
                             : s.family == Encoder::bert ? "cls.predictions.transform.dense"
                                                         : "lm_head.dense";
    const std::string head_norm = distil                      ? "vocab_layer_norm"
                                  : s.family == Encoder::bert ? "cls.predictions.transform.LayerNorm"
                                                              : "lm_head.layer_norm";
    draw(head + ".weight", {C, C}, 0, in_C);
    draw(head + ".bias", {C}, 0, 0.1f);
    draw(head_norm + ".weight", {C}, 1, 0.1f);
    draw(head_norm + ".bias", {C}, 0, 0.1f);
    draw(distil                      ? "vocab_projector.bias"
         : s.family == Encoder::bert ? "cls.predictions.bias"
                                     : "lm_head.bias",
         {V}, 0, 0.5f);
    return out;
}

void write_encoder_checkpoint(const fs::path& dir, const EncoderCheckpoint& checkpoint) {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << checkpoint.config.dump(2) << "\n";
    write_f32_tensors(dir / "model.safetensors", checkpoint.tensors);
    static const std::string tokenizer = bert_tokenizer_json(wordpiece_vocab()).dump();  // the same for every encoder
    std::ofstream(dir / "tokenizer.json") << tokenizer << "\n";
}

}  // namespace headscope::test
