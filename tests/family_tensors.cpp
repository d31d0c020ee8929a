// Test support: each family's random weights (make_family_checkpoint,
// family_writer.h) in its files' names and layouts. Matrices are scaled by
// their fan-in: scores at 1/sqrt(hs) then spread by about one unit, and the
// maps are peaked. Larger Q and K make the unscaled scores (scale none) of a
// few wide re-split heads so large that float32's rounding alone moves
// weights by over 1e-5 against the reference.
#include <cmath>
#include <stdexcept>

#include "family_writer.h"

namespace headscope::test {

namespace {

// Appends tensor `name` of `shape` to the checkpoint (draw_tensor), in its dtype.
struct Drawer {
    FamilyCheckpoint& out;
    std::mt19937_64 rng;

    void operator()(const std::string& name, std::vector<int64_t> shape, float mean, float std) {
        draw_tensor(out.tensors, rng, name, std::move(shape), mean, std, out.spec.dtype);
    }
    void table(const std::string& name, float mean, float std) {
        draw_vocabulary_table(out.tensors, rng, out.spec, name, mean, std);
    }
};

// The sizes every drawing reads.
struct Sizes {
    int64_t C, NH, NKV, hs, F, V, L;
    explicit Sizes(const FamilySpec& s)
        : C(s.n_embd), NH(s.n_head), NKV(s.kv_heads()), hs(s.head_dim), F(s.mlp_dim), V(s.vocab_size), L(s.n_layer) {}
    float in(int64_t fan_in) const { return 1 / std::sqrt(float(fan_in)); }
};

// GPT-2: Conv1D weights (in, out), Q, K and V fused [Q | K | V].
void draw_gpt2(const FamilySpec& spec, Drawer& draw) {
    const Sizes z(spec);
    if (z.F != 4 * z.C || z.hs * z.NH != z.C)
        throw std::invalid_argument("test spec: GPT-2 has F = 4C and hs = C / NH");
    draw.table("wte.weight", 0, 1);
    draw("wpe.weight", {spec.max_positions, z.C}, 0, 0.5f);
    for (int l = 0; l < z.L; ++l) {
        const std::string p = "h." + std::to_string(l) + ".";
        draw(p + "ln_1.weight", {z.C}, 1, 0.1f);
        draw(p + "ln_1.bias", {z.C}, 0, 0.1f);
        draw(p + "attn.c_attn.weight", {z.C, 3 * z.C}, 0, z.in(z.C));
        draw(p + "attn.c_attn.bias", {3 * z.C}, 0, 0.2f);
        draw(p + "attn.c_proj.weight", {z.C, z.C}, 0, z.in(z.C));
        draw(p + "attn.c_proj.bias", {z.C}, 0, 0.1f);
        draw(p + "ln_2.weight", {z.C}, 1, 0.1f);
        draw(p + "ln_2.bias", {z.C}, 0, 0.1f);
        draw(p + "mlp.c_fc.weight", {z.C, z.F}, 0, z.in(z.C));
        draw(p + "mlp.c_fc.bias", {z.F}, 0, 0.1f);
        draw(p + "mlp.c_proj.weight", {z.F, z.C}, 0, z.in(z.F));
        draw(p + "mlp.c_proj.bias", {z.C}, 0, 0.1f);
    }
    draw("ln_f.weight", {z.C}, 1, 0.1f);
    draw("ln_f.bias", {z.C}, 0, 0.1f);
    if (!spec.tied_embeddings) draw.table("lm_head.weight", 0, z.in(z.C));
}

// GPT-NeoX: LayerNorms and biases everywhere, query_key_value per head [q k v].
void draw_gpt_neox(const FamilySpec& spec, Drawer& draw) {
    const Sizes z(spec);
    draw.table("gpt_neox.embed_in.weight", 0, 1);
    for (int l = 0; l < z.L; ++l) {
        const std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
        draw(p + "input_layernorm.weight", {z.C}, 1, 0.1f);
        draw(p + "input_layernorm.bias", {z.C}, 0, 0.1f);
        draw(p + "post_attention_layernorm.weight", {z.C}, 1, 0.1f);
        draw(p + "post_attention_layernorm.bias", {z.C}, 0, 0.1f);
        draw(p + "attention.query_key_value.weight", {3 * z.NH * z.hs, z.C}, 0, z.in(z.C));
        draw(p + "attention.query_key_value.bias", {3 * z.NH * z.hs}, 0, 0.2f);
        draw(p + "attention.dense.weight", {z.C, z.NH * z.hs}, 0, z.in(z.NH * z.hs));
        draw(p + "attention.dense.bias", {z.C}, 0, 0.1f);
        draw(p + "mlp.dense_h_to_4h.weight", {z.F, z.C}, 0, z.in(z.C));
        draw(p + "mlp.dense_h_to_4h.bias", {z.F}, 0, 0.1f);
        draw(p + "mlp.dense_4h_to_h.weight", {z.C, z.F}, 0, z.in(z.F));
        draw(p + "mlp.dense_4h_to_h.bias", {z.C}, 0, 0.1f);
    }
    draw("gpt_neox.final_layer_norm.weight", {z.C}, 1, 0.1f);
    draw("gpt_neox.final_layer_norm.bias", {z.C}, 0, 0.1f);
    draw.table("embed_out.weight", 0, z.in(z.C));
}

// Phi-3: Linear (out, in), no biases; qkv_proj [Q | K | V], gate_up_proj [gate | up].
void draw_phi3(const FamilySpec& spec, Drawer& draw) {
    const Sizes z(spec);
    draw.table("model.embed_tokens.weight", 0, 1);
    for (int l = 0; l < z.L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        draw(p + "self_attn.qkv_proj.weight", {(z.NH + 2 * z.NKV) * z.hs, z.C}, 0, z.in(z.C));
        draw(p + "self_attn.o_proj.weight", {z.C, z.NH * z.hs}, 0, z.in(z.NH * z.hs));
        draw(p + "mlp.gate_up_proj.weight", {2 * z.F, z.C}, 0, z.in(z.C));
        draw(p + "mlp.down_proj.weight", {z.C, z.F}, 0, z.in(z.F));
        draw(p + "input_layernorm.weight", {z.C}, 1, 0.1f);
        draw(p + "post_attention_layernorm.weight", {z.C}, 1, 0.1f);
    }
    draw("model.norm.weight", {z.C}, 1, 0.1f);
    if (!spec.tied_embeddings) draw.table("lm_head.weight", 0, z.in(z.C));
}

// One layer of Llama's, Qwen's, Mistral's or OLMo 2's: separate projections,
// the biases each family has, Qwen 3's per-head and OLMo 2's whole q/k norms.
void draw_llama_layer(const FamilySpec& spec, Drawer& draw, const std::string& p, int layer) {
    const Sizes z(spec);
    const bool qkv_bias = spec.attention_bias || spec.family == Family::qwen2;
    const bool o_bias = spec.attention_bias && spec.family != Family::qwen2;
    draw(p + "self_attn.q_proj.weight", {z.NH * z.hs, z.C}, 0, z.in(z.C));
    if (qkv_bias) draw(p + "self_attn.q_proj.bias", {z.NH * z.hs}, 0, 0.2f);
    draw(p + "self_attn.k_proj.weight", {z.NKV * z.hs, z.C}, 0, z.in(z.C));
    if (qkv_bias) draw(p + "self_attn.k_proj.bias", {z.NKV * z.hs}, 0, 0.2f);
    draw(p + "self_attn.v_proj.weight", {z.NKV * z.hs, z.C}, 0, z.in(z.C));
    if (qkv_bias) draw(p + "self_attn.v_proj.bias", {z.NKV * z.hs}, 0, 0.2f);
    draw(p + "self_attn.o_proj.weight", {z.C, z.NH * z.hs}, 0, z.in(z.NH * z.hs));
    if (o_bias) draw(p + "self_attn.o_proj.bias", {z.C}, 0, 0.1f);
    if (spec.family == Family::qwen3 || spec.family == Family::olmo2 || spec.family == Family::qwen3_moe ||
        spec.family == Family::olmoe) {
        // Each head's q and k (OLMo 2: all of Q and K) have RMS 1 after the
        // norm; these weights then set the scores' spread (OLMo 2's less: one
        // re-split head of all 32 dims, unscaled, would have scores float32
        // rounds by more than the tolerance).
        const bool whole = spec.family == Family::olmo2 || spec.family == Family::olmoe;
        const float mean = whole ? 1.f : 1.2f;
        draw(p + "self_attn.q_norm.weight", {whole ? z.NH * z.hs : z.hs}, mean, 0.2f);
        draw(p + "self_attn.k_norm.weight", {whole ? z.NKV * z.hs : z.hs}, mean, 0.2f);
    }
    if (spec.family == Family::gpt_oss) {  // each head's sink logit, large enough to take weight from the keys
        draw(p + "self_attn.sinks", {z.NH}, 1, 1);
        draw_gpt_oss_experts(draw.out, draw.rng, layer);
    } else if (spec.expert_layer(layer)) {
        draw_expert_tensors(draw.out, draw.rng, layer);
    } else {
        draw(p + "mlp.gate_proj.weight", {z.F, z.C}, 0, z.in(z.C));
        draw(p + "mlp.up_proj.weight", {z.F, z.C}, 0, z.in(z.C));
        draw(p + "mlp.down_proj.weight", {z.C, z.F}, 0, z.in(z.F));
    }
    if (spec.family == Family::olmo2) {  // norms on the sublayers' outputs, none before them
        draw(p + "post_attention_layernorm.weight", {z.C}, 1, 0.1f);
        draw(p + "post_feedforward_layernorm.weight", {z.C}, 1, 0.1f);
    } else {
        draw(p + "input_layernorm.weight", {z.C}, 1, 0.1f);
        draw(p + "post_attention_layernorm.weight", {z.C}, 1, 0.1f);
    }
}

void draw_llama(const FamilySpec& spec, Drawer& draw) {
    const Sizes z(spec);
    draw.table("model.embed_tokens.weight", 0, 1);
    for (int l = 0; l < z.L; ++l) draw_llama_layer(spec, draw, "model.layers." + std::to_string(l) + ".", l);
    draw("model.norm.weight", {z.C}, 1, 0.1f);
    if (!spec.tied_embeddings) draw.table("lm_head.weight", 0, z.in(z.C));
}

}  // namespace

FamilyCheckpoint make_family_checkpoint(const FamilySpec& spec) {
    if (!spec.write_head_dim && spec.head_dim * spec.n_head != spec.n_embd)
        throw std::invalid_argument("test spec: head_dim unwritten but not C / NH");
    FamilyCheckpoint out{spec, family_config_json(spec), {}, {}, {}};
    Drawer draw{out, std::mt19937_64(spec.seed)};
    switch (spec.family) {
        case Family::gpt2: draw_gpt2(spec, draw); break;
        case Family::gpt_neox: draw_gpt_neox(spec, draw); break;
        case Family::phi3: draw_phi3(spec, draw); break;
        case Family::gemma2:
        case Family::gemma3_text:
        case Family::gemma3: draw_gemma_tensors(out, draw.rng); break;
        default: draw_llama(spec, draw); break;
    }
    return out;
}

}  // namespace headscope::test
