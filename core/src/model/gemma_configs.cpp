// Gemma 2's and Gemma 3's config.json readers (family_configs.h): the keys
// and defaults of transformers' Gemma2Config and Gemma3TextConfig, which
// fill every key a file leaves out (a gemma3 checkpoint's text_config omits many).
#include <algorithm>
#include <cmath>
#include <string>

#include "family_configs.h"

namespace headscope {

namespace {

// Where Gemma2Config's defaults and Gemma3TextConfig's differ.
struct GemmaDefaults {
    int vocab_size, max_positions;
    float rope_theta, final_softcap, attention_softcap;  // a cap of 0: none
};
constexpr GemmaDefaults gemma2_defaults = {256000, 8192, 10000, 30, 50};
constexpr GemmaDefaults gemma3_defaults = {262208, 131072, 1e6f, 0, 0};

// A key that may be null (none: 0), else a positive number.
float nullable_number(const ConfigReader& r, const std::string& key, float fallback) {
    const ConfigReader::json* v = r.find(key);
    if (!v) return fallback;
    return v->is_null() ? 0 : r.positive_number(key, fallback);
}

// rope_scaling: none, or rope_type "linear" (every frequency divided by its factor).
void read_linear_rope(const ConfigReader& r, Config& c) {
    const ConfigReader::json* v = r.find("rope_scaling");
    if (!v || v->is_null()) return;
    const ConfigReader s = r.object("rope_scaling");
    const std::string type = s.word("rope_type", s.word("type", "default"));
    if (type == "linear")
        c.rope.linear_factor = s.positive_number("factor", 1);
    else if (type != "default")
        r.refuse("rope_scaling of type '" + type + "' is not supported (only linear)");
}

// What Gemma 2 and Gemma 3's language model share: RMSNorm as x (1 + w)
// before and after each sublayer, embeddings times sqrt(C) rounded to the
// weights' dtype, scores times query_pre_attn_scalar^-1/2, tanh-GELU(gate) *
// up, tied embeddings, the final logits soft-capped where
// final_logit_softcapping says. A special token's id is read from `r`, or
// where it names none from `outer` (a gemma3 checkpoint's top level).
void read_gemma_text(const ConfigReader& r, Config& c, const GemmaDefaults& d, const ConfigReader& outer) {
    c.n_layer = r.positive_int("num_hidden_layers", 26);
    c.n_head = r.positive_int("num_attention_heads", 8);
    c.n_embd = r.positive_int("hidden_size", 2304);
    c.n_positions = r.positive_int("max_position_embeddings", d.max_positions);
    c.vocab_size = r.positive_int("vocab_size", d.vocab_size);
    c.n_kv_head = r.positive_int("num_key_value_heads", 4);
    c.head_dim = r.positive_int("head_dim", 256);
    c.mlp_dim = r.positive_int("intermediate_size", 9216);
    const auto id = [&](const char* key, int fallback) {
        return (r.find(key) ? r : outer).token_id(key, c.vocab_size, fallback < c.vocab_size ? fallback : -1);
    };
    c.pad_token_id = id("pad_token_id", 0);
    c.eos_token_id = std::max(id("eos_token_id", 1), 0);
    c.bos_token_id = id("bos_token_id", 2);
    if (r.find("eos_token_id")) c.more_eos_ids = r.more_token_ids("eos_token_id", c.vocab_size);
    c.layer_norm_epsilon = r.epsilon("rms_norm_eps", 1e-6f);
    const std::string act = r.word("hidden_activation", r.word("hidden_act", "gelu_pytorch_tanh"));
    if (act != "gelu_pytorch_tanh" && act != "gelu_new")
        r.refuse("hidden_activation '" + act + "' is not supported (gelu_pytorch_tanh, gelu_new)");
    c.mlp = Mlp::gated_gelu;
    c.mlp_bias = false;
    c.norm = Norm::rms_norm;
    c.norm_offset = 1;
    c.output_norms = true;
    c.positions = Positions::rotary;
    c.rope.theta = r.positive_number("rope_theta", d.rope_theta);
    read_linear_rope(r, c);
    c.qkv_layout = QkvLayout::separate;
    c.weights_out_by_in = true;
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
    c.tied_embeddings = r.flag("tie_word_embeddings", true);
    c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.n_embd)));
    c.embedding_scale_rounded = true;
    c.attention_scale =
        static_cast<float>(1 / std::sqrt(static_cast<double>(r.positive_number("query_pre_attn_scalar", 256))));
    c.logit_softcap = nullable_number(r, "final_logit_softcapping", d.final_softcap);
    c.sliding_window = static_cast<int>(nullable_number(r, "sliding_window", 4096));
}

}  // namespace

std::vector<bool> windowed_layers(const ConfigReader& r, int layers, int pattern) {
    std::vector<bool> windowed(static_cast<size_t>(layers));
    const ConfigReader::json* types = r.find("layer_types");
    if (types && !types->is_null()) {
        if (!types->is_array() || types->size() != windowed.size())
            r.refuse("layer_types must list one type for each of the " + std::to_string(layers) + " layers");
        for (size_t l = 0; l < windowed.size(); ++l) {
            const ConfigReader::json& type = (*types)[l];
            if (type != "sliding_attention" && type != "full_attention")
                r.refuse("layer_types holds " + describe_json(type) + ", not sliding_attention or full_attention");
            windowed[l] = type == "sliding_attention";
        }
        return windowed;
    }
    for (int l = 0; l < layers; ++l) windowed[static_cast<size_t>(l)] = (l + 1) % pattern != 0;
    return windowed;
}

// Gemma 2: even layers (layer 0 among them) with the window, odd ones
// global; every score soft-capped (attn_logit_softcapping).
void read_gemma2(const ConfigReader& r, Config& c) {
    read_gemma_text(r, c, gemma2_defaults, r);
    c.attention_softcap = nullable_number(r, "attn_logit_softcapping", gemma2_defaults.attention_softcap);
    c.windowed_layers = windowed_layers(r, c.n_layer, 2);
}

namespace {

// Gemma 3's language model (`outer`: where token ids the text config lacks are read).
void read_gemma3_language_model(const ConfigReader& r, Config& c, const ConfigReader& outer) {
    read_gemma_text(r, c, gemma3_defaults, outer);
    if (r.flag("use_bidirectional_attention", false))
        r.refuse("use_bidirectional_attention is true: EmbeddingGemma's attention both ways is not supported");
    c.qk_norm = true;  // each head's q and k, x (1 + w), before RoPE
    c.local_rope_theta = r.positive_number("rope_local_base_freq", 10000);
    c.windowed_layers = windowed_layers(r, c.n_layer, r.positive_int("sliding_window_pattern", 6));
}

}  // namespace

// Gemma 3 (Gemma3ForCausalLM): as Gemma 2 with q/k norms, no score cap,
// five local layers to one global (layer_types or sliding_window_pattern),
// the local ones rotating by rope_local_base_freq without rope_scaling.
void read_gemma3_text(const ConfigReader& r, Config& c) { read_gemma3_language_model(r, c, r); }

// A gemma3 checkpoint (Gemma3ForConditionalGeneration): its language model's
// config in text_config; the vision tower is not read.
void read_gemma3(const ConfigReader& r, Config& c) {
    read_gemma3_language_model(r.object("text_config"), c, r);
    c.vision_tower_left_out = true;
}

}  // namespace headscope
