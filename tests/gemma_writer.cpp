// Test support: Gemma 2's and Gemma 3's checkpoints (family_writer.h) as
// transformers saves them: Gemma2Config's and Gemma3TextConfig's keys, a
// gemma3 checkpoint's language model in text_config with its tensors under
// the Hub's older prefix language_model.model., and every norm's weight w
// of a scale (1 + w), drawn around 0.
#include <cmath>

#include "family_writer.h"

namespace headscope::test {

using json = nlohmann::json;

namespace {

json nullable(double value) { return value > 0 ? json(value) : json(); }

// The keys of the language model's config (Gemma 2's, or Gemma 3's text_config).
json gemma_text_json(const FamilySpec& s) {
    const bool gemma3 = s.family != Family::gemma2;
    json c = {{"attention_bias", s.attention_bias},
              {"attention_dropout", 0.0},
              {"bos_token_id", s.bos_id},
              {"final_logit_softcapping", nullable(s.final_softcap)},
              {"head_dim", s.head_dim},
              {"hidden_activation", "gelu_pytorch_tanh"},
              {"hidden_size", s.n_embd},
              {"initializer_range", 0.02},
              {"intermediate_size", s.mlp_dim},
              {"max_position_embeddings", s.max_positions},
              {"model_type", gemma3 ? "gemma3_text" : "gemma2"},
              {"num_attention_heads", s.n_head},
              {"num_hidden_layers", s.n_layer},
              {"num_key_value_heads", s.n_kv_head},
              {"pad_token_id", s.pad_id()},
              {"query_pre_attn_scalar", s.query_pre_attn_scalar},
              {"rms_norm_eps", s.norm_eps},
              {"rope_theta", s.rope_theta},
              {"sliding_window", nullable(s.sliding_window)},
              {"vocab_size", s.vocab_size}};
    if (gemma3) {
        c["rope_local_base_freq"] = s.local_rope_theta;
        c["rope_scaling"] =
            s.rope_linear_factor > 0 ? json{{"factor", s.rope_linear_factor}, {"rope_type", "linear"}} : json();
        c["sliding_window_pattern"] = s.window_pattern ? s.window_pattern : 6;
    } else {
        c["attn_logit_softcapping"] = nullable(s.attn_softcap);
        c["cache_implementation"] = "hybrid";
        c["hidden_act"] = "gelu_pytorch_tanh";
    }
    if (s.write_layer_types) {
        json types = json::array();
        for (int l = 0; l < s.n_layer; ++l) types.push_back(s.windowed(l) ? "sliding_attention" : "full_attention");
        c["layer_types"] = types;
    }
    return c;
}

}  // namespace

json gemma_config_json(const FamilySpec& s) {
    const json eos = s.eos_ids.size() == 1 ? json(s.eos_ids[0]) : json(s.eos_ids);
    const char* dtype = s.dtype == FileDType::BF16 ? "bfloat16" : s.dtype == FileDType::F16 ? "float16" : "float32";
    json text = gemma_text_json(s);
    if (s.family != Family::gemma3) {
        text["architectures"] = {s.family == Family::gemma2 ? "Gemma2ForCausalLM" : "Gemma3ForCausalLM"};
        text["eos_token_id"] = eos;
        text["tie_word_embeddings"] = s.tied_embeddings;
        text["torch_dtype"] = dtype;
        return text;
    }
    // As the Hub's gemma-3-4b-it: the eos list at the top only, the vision tower's config beside the text's.
    return {{"architectures", {"Gemma3ForConditionalGeneration"}},
            {"boi_token_index", 3},
            {"eoi_token_index", 4},
            {"eos_token_id", eos},
            {"image_token_index", 5},
            {"mm_tokens_per_image", 256},
            {"model_type", "gemma3"},
            {"text_config", text},
            {"torch_dtype", dtype},
            {"vision_config", {{"hidden_size", 8}, {"model_type", "siglip_vision_model"}}}};
}

void draw_gemma_tensors(FamilyCheckpoint& out, std::mt19937_64& rng) {
    const FamilySpec& s = out.spec;
    const int C = s.n_embd, NH = s.n_head, NKV = s.kv_heads(), hs = s.head_dim, F = s.mlp_dim;
    const float in_C = 1 / std::sqrt(float(C));
    const auto draw = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std) {
        draw_tensor(out.tensors, rng, name, std::move(shape), mean, std, s.dtype);
    };
    const std::string model = s.model_prefix();
    // The embeddings are times sqrt(C) before the first norm: rows of RMS 1 / sqrt(C) keep the residual near 1.
    draw_vocabulary_table(out.tensors, rng, s, model + "embed_tokens.weight", 0, in_C);
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string p = model + "layers." + std::to_string(l) + ".";
        draw(p + "input_layernorm.weight", {C}, 0, 0.1f);
        draw(p + "self_attn.q_proj.weight", {NH * hs, C}, 0, in_C);
        draw(p + "self_attn.k_proj.weight", {NKV * hs, C}, 0, in_C);
        draw(p + "self_attn.v_proj.weight", {NKV * hs, C}, 0, in_C);
        draw(p + "self_attn.o_proj.weight", {C, NH * hs}, 0, 1 / std::sqrt(float(NH * hs)));
        // Each head's q and k of RMS about 0.7 after the norm: larger ones make the
        // unscaled scores (scale none) of six layers so steep that float32's
        // rounding alone moves weights by over 1e-5 against the reference.
        if (s.family != Family::gemma2) {
            draw(p + "self_attn.q_norm.weight", {hs}, -0.3f, 0.1f);
            draw(p + "self_attn.k_norm.weight", {hs}, -0.3f, 0.1f);
        }
        draw(p + "post_attention_layernorm.weight", {C}, 0, 0.1f);
        draw(p + "pre_feedforward_layernorm.weight", {C}, 0, 0.1f);
        draw(p + "mlp.gate_proj.weight", {F, C}, 0, in_C);
        draw(p + "mlp.up_proj.weight", {F, C}, 0, in_C);
        draw(p + "mlp.down_proj.weight", {C, F}, 0, 1 / std::sqrt(float(F)));
        draw(p + "post_feedforward_layernorm.weight", {C}, 0, 0.1f);
    }
    draw(model + "norm.weight", {C}, 0, 0.1f);
    if (s.family == Family::gemma3)  // the vision tower's, which Headscope does not read
        draw("vision_tower.vision_model.post_layernorm.weight", {8}, 1, 0.1f);
}

}  // namespace headscope::test
