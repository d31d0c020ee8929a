// The mixtures of experts' GGUF rows' helpers (gguf_architectures.h): their
// keys as llama.cpp reads them (its llama_model_qwen3moe's, llama_model_olmoe's
// and llama_model_llama's hparams), and their routing as its build_moe_ffn
// computes it from the file, which is what the Config must say where
// transformers' config.json would say otherwise.
#include <optional>
#include <string>

#include "gguf_architectures.h"

namespace headscope {

namespace {

using json = nlohmann::json;

// expert_used_count from 1 to expert_count, as llama.cpp requires.
void check_expert_counts(const GgufSource& s, uint64_t experts, uint64_t used) {
    if (used == 0) s.refuse("key '" + s.key("expert_used_count") + "' is 0: no expert for any token");
    if (used > experts)
        s.refuse("key '" + s.key("expert_used_count") + "' is " + std::to_string(used) + ", more than the " +
                 std::to_string(experts) + " experts of key '" + s.key("expert_count") + "'");
}

}  // namespace

// Qwen 3 MoE: every layer's MLP the experts (llama.cpp reads no
// mlp_only_layers or decoder_sparse_step), each of
// expert_feed_forward_length (else llama.cpp's feed_forward_length /
// expert_used_count), the chosen weights always renormalized (build_moe_ffn's
// norm_w, whatever norm_topk_prob said).
void qwen3moe_more_keys(const GgufSource& s, json& c) {
    llama_more_keys(s, c);
    check_expert_counts(s, c["num_experts"], c["num_experts_per_tok"]);
    const uint64_t used = c["num_experts_per_tok"], dense = c["intermediate_size"];
    c["moe_intermediate_size"] = s.file().integer(s.key("expert_feed_forward_length")).value_or(dense / used);
    c["norm_topk_prob"] = true;
}

// OLMoE: experts of feed_forward_length, the chosen weights never
// renormalized (build_moe_ffn's norm_w false, whatever norm_topk_prob said);
// llama.cpp requires output.weight. It clamps no Q, K or V (its OLMoE graph
// reads no clamp_kqv).
void olmoe_more_keys(const GgufSource& s, json& c) {
    llama_more_keys(s, c);
    check_expert_counts(s, c["num_experts"], c["num_experts_per_tok"]);
    if (!s.tensor("output.weight")) s.refuse("tensor 'output.weight' missing");
    c["norm_topk_prob"] = false;
}

// llama: Mixtral where expert_count is above 0 (llama_model_llama reads its
// experts so): every layer's MLP the experts of feed_forward_length, the
// chosen weights renormalized, no window. Older files' experts, a tensor
// each (blk.N.ffn_gate.E.weight), are refused.
void llama_or_mixtral_more_keys(const GgufSource& s, json& c) {
    llama_more_keys(s, c);
    const uint64_t experts = s.file().integer(s.key("expert_count")).value_or(0);
    if (experts == 0) return;
    if (s.tensor("blk.0.ffn_gate.0.weight"))
        s.refuse("experts stored a tensor each (blk.0.ffn_gate.0.weight), as older files have them, are not read yet");
    const std::string used_key = s.key("expert_used_count");
    const std::optional<uint64_t> used = s.file().integer(used_key);
    if (!used) s.refuse("key '" + used_key + "' missing");
    check_expert_counts(s, experts, *used);
    c["model_type"] = "mixtral";
    c["num_local_experts"] = experts;
    c["num_experts_per_tok"] = *used;
    c["sliding_window"] = nullptr;
}

// gpt-oss as llama.cpp computes it: biases where layer 0's Q has one, the
// experts of expert_feed_forward_length (else feed_forward_length), routed
// top-k then softmax (its read of the file), their SwiGLU clamped at
// llama.cpp's fixed 7 (swiglu_oai's alpha 1.702); the window on the even
// layers (its pattern of 2); YaRN from rope.scaling.factor and
// original_context_length, which context_length must equal factor times,
// its correction dims rounded out to whole dims (ggml's floor and ceil,
// where transformers' gpt-oss does not round them).
void gpt_oss_more_keys(const GgufSource& s, json& c) {
    llama_attention_keys(s, c);
    check_expert_counts(s, c["num_local_experts"], c["num_experts_per_tok"]);
    if (const auto experts_dim = s.file().integer(s.key("expert_feed_forward_length")))
        c["intermediate_size"] = *experts_dim;
    const auto type = s.file().string(s.key("rope.scaling.type"));
    if (!type || *type != "yarn") s.refuse("gpt-oss without YaRN (rope.scaling.type yarn) is not read yet");
    const double factor = s.file().number(s.key("rope.scaling.factor")).value_or(0);
    const uint64_t original = s.file().integer(s.key("rope.scaling.original_context_length")).value_or(0);
    const uint64_t context = c["max_position_embeddings"];
    if (!(factor > 1) || original == 0 || double(context) != factor * double(original))
        s.refuse("YaRN's factor " + std::to_string(factor) + " over an original length of " + std::to_string(original) +
                 " for a context of " + std::to_string(context) + " is not read yet");
    c["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", factor},
                         {"beta_fast", s.file().number(s.key("rope.scaling.yarn_beta_fast")).value_or(32)},
                         {"beta_slow", s.file().number(s.key("rope.scaling.yarn_beta_slow")).value_or(1)},
                         {"truncate", true},
                         {"original_max_position_embeddings", original}};
    c["swiglu_limit"] = 7;
    c["swiglu_alpha"] = 1.702;
}

// Its experts are tensors of their own, MXFP4 as the converter leaves them.
void gpt_oss_layout(const GgufSource&, Config& c) { c.packed_experts = false; }

}  // namespace headscope
