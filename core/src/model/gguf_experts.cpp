// The mixtures of experts' GGUF rows' helpers (gguf_architectures.h): their
// keys as llama.cpp reads them (its llama_model_qwen3moe's hparams), and
// their routing as its build_moe_ffn computes it from the file, which is
// what the Config must say where transformers' config.json would say
// otherwise.
#include "gguf_architectures.h"

namespace headscope {

namespace {

using json = nlohmann::json;

// expert_used_count from 1 to expert_count, as llama.cpp requires.
void check_expert_counts(const GgufSource& s, const json& c) {
    const uint64_t experts = c["num_experts"], used = c["num_experts_per_tok"];
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
    check_expert_counts(s, c);
    const uint64_t used = c["num_experts_per_tok"], dense = c["intermediate_size"];
    c["moe_intermediate_size"] = s.file().integer(s.key("expert_feed_forward_length")).value_or(dense / used);
    c["norm_topk_prob"] = true;
}

}  // namespace headscope
