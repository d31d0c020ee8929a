// Test support: gpt-oss's config.json and experts as configuration_gpt_oss.py
// and its Hugging Face files have them: the router with its bias, the experts
// packed per layer as MXFP4 (blocks of 32 four-bit floats, E2M1, sharing a
// power-of-two scale, E8M0) with their biases; see family_writer.h.
#include <cmath>

#include "family_writer.h"

namespace headscope::test {

namespace {

// E2M1's values by their 4 bits, as transformers' FP4_VALUES lists them.
constexpr float fp4_values[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// An (E, rows, in) matrix of random MXFP4 values: `name`_blocks (E, rows,
// in / 32, 16), value 2j of a block in byte j's low nibble and 2j + 1 in its
// high one, and `name`_scales (E, rows, in / 32), each block's exponent
// byte e for 2^(e - 127), into out.packed; the floats they hold (FP4 times
// 2^(e - 127), exactly) into out.unpacked as `name`. The exponents put the
// values' spread near 1 / sqrt(in).
void draw_mxfp4(FamilyCheckpoint& out, std::mt19937_64& rng, const std::string& name, int64_t E, int64_t rows,
                int64_t in) {
    const int64_t groups = in / 32;
    RawTensor blocks{name + "_blocks", "U8", {E, rows, groups, 16}, {}};
    RawTensor scales{name + "_scales", "U8", {E, rows, groups}, {}};
    NamedTensor values{name, {E, rows, in}, {}};
    const int low = 127 - static_cast<int>(std::lround(std::log2(std::sqrt(double(in)) * 3)));
    std::uniform_int_distribution<int> nibble(0, 15), exponent(low, low + 1);
    for (int64_t g = 0; g < E * rows * groups; ++g) {
        const int e = exponent(rng);
        scales.bytes.push_back(static_cast<uint8_t>(e));
        for (int j = 0; j < 16; ++j) {
            const int first = nibble(rng), second = nibble(rng);
            blocks.bytes.push_back(static_cast<uint8_t>(first | second << 4));
            values.values.push_back(std::ldexp(fp4_values[first], e - 127));
            values.values.push_back(std::ldexp(fp4_values[second], e - 127));
        }
    }
    out.packed.push_back(std::move(blocks));
    out.packed.push_back(std::move(scales));
    out.unpacked.push_back(std::move(values));
}

}  // namespace

void draw_gpt_oss_experts(FamilyCheckpoint& out, std::mt19937_64& rng, int layer) {
    const FamilySpec& s = out.spec;
    const int64_t C = s.n_embd, E = s.n_experts, Fe = s.expert_mlp_dim;
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
    // The router drawn wide, its bias too, so that they tell the experts apart.
    draw_tensor(out.tensors, rng, s.router_name(layer), {E, C}, 0, 3 / std::sqrt(float(C)), s.dtype);
    draw_tensor(out.tensors, rng, p + "router.bias", {E}, 0, 0.5f, s.dtype);
    draw_tensor(out.tensors, rng, p + "experts.gate_up_proj_bias", {E, 2 * Fe}, 0, 0.2f, s.dtype);
    draw_tensor(out.tensors, rng, p + "experts.down_proj_bias", {E, C}, 0, 0.1f, s.dtype);
    draw_mxfp4(out, rng, p + "experts.gate_up_proj", E, 2 * Fe, C);
    draw_mxfp4(out, rng, p + "experts.down_proj", E, C, Fe);
}

nlohmann::json gpt_oss_config_json(const FamilySpec& s) {
    std::vector<std::string> layer_types;
    for (int l = 0; l < s.n_layer; ++l) layer_types.push_back(s.windowed(l) ? "sliding_attention" : "full_attention");
    return {{"architectures", {"GptOssForCausalLM"}},
            {"attention_bias", s.attention_bias},
            {"attention_dropout", 0.0},
            {"eos_token_id", s.eos_ids.at(0)},
            {"experts_per_token", s.experts_per_token},
            {"head_dim", s.head_dim},
            {"hidden_act", "silu"},
            {"hidden_size", s.n_embd},
            {"initial_context_length", s.original_max_positions},
            {"initializer_range", 0.02},
            {"intermediate_size", s.expert_mlp_dim},
            {"layer_types", layer_types},
            {"max_position_embeddings", s.max_positions},
            {"model_type", "gpt_oss"},
            {"num_attention_heads", s.n_head},
            {"num_experts_per_tok", s.experts_per_token},
            {"num_hidden_layers", s.n_layer},
            {"num_key_value_heads", s.n_kv_head},
            {"num_local_experts", s.n_experts},
            {"output_router_logits", false},
            {"pad_token_id", s.pad_id()},
            {"quantization_config",
             {{"modules_to_not_convert",
               {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
              {"quant_method", "mxfp4"}}},
            {"rms_norm_eps", s.norm_eps},
            {"rope_scaling",
             {{"beta_fast", 32.0},
              {"beta_slow", 1.0},
              {"factor", double(s.max_positions) / s.original_max_positions},
              {"original_max_position_embeddings", s.original_max_positions},
              {"rope_type", "yarn"},
              {"truncate", false}}},
            {"rope_theta", s.rope_theta},
            {"router_aux_loss_coef", 0.9},
            {"sliding_window", s.sliding_window},
            {"swiglu_limit", s.swiglu_limit},
            {"tie_word_embeddings", s.tied_embeddings},
            {"torch_dtype", s.dtype == FileDType::BF16  ? "bfloat16"
                            : s.dtype == FileDType::F16 ? "float16"
                                                        : "float32"},
            {"use_cache", true},
            {"vocab_size", s.vocab_size}};
}

}  // namespace headscope::test
