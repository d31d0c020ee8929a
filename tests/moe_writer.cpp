// Test support: the mixtures of experts' config keys and tensors (Mixtral,
// Qwen 3 MoE, OLMoE) as configuration_*.py and modeling_*.py name them; see
// family_writer.h.
#include <cmath>

#include "family_writer.h"

namespace headscope::test {

std::string FamilySpec::router_name(int l) const {
    const std::string layer = "model.layers." + std::to_string(l) + ".";
    return layer + (family == Family::mixtral   ? "block_sparse_moe.gate.weight"
                    : family == Family::gpt_oss ? "mlp.router.weight"
                                                : "mlp.gate.weight");
}

// Mixtral's experts are w1 (gate), w3 (up) and w2 (down) in block_sparse_moe.
std::string FamilySpec::expert_name(int l, int e, const char* part) const {
    const std::string layer = "model.layers." + std::to_string(l) + ".", which = part;
    if (family == Family::mixtral) {
        const char* w = which == "gate" ? "w1" : which == "up" ? "w3" : "w2";
        return layer + "block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight";
    }
    return layer + "mlp.experts." + std::to_string(e) + "." + which + "_proj.weight";
}

void add_expert_keys(const FamilySpec& s, nlohmann::json& c) {
    c["num_experts_per_tok"] = s.experts_per_token;
    c["output_router_logits"] = false;
    c["router_aux_loss_coef"] = 0.001;
    if (s.family == Family::mixtral) {
        c["num_local_experts"] = s.n_experts;
        c["router_jitter_noise"] = 0.0;
        return;
    }
    c["num_experts"] = s.n_experts;
    c["norm_topk_prob"] = s.norm_topk_prob;
    if (s.family == Family::olmoe) {
        c["clip_qkv"] = nullptr;
        return;
    }
    c["moe_intermediate_size"] = s.expert_mlp_dim;  // Qwen 3 MoE: intermediate_size is the dense layers'
    c["decoder_sparse_step"] = s.decoder_sparse_step;
    c["mlp_only_layers"] = s.mlp_only_layers;
}

// The router drawn wide (std 3 / sqrt(C)), so that its softmax tells the experts apart.
void draw_expert_tensors(FamilyCheckpoint& out, std::mt19937_64& rng, int layer) {
    const FamilySpec& s = out.spec;
    const int64_t C = s.n_embd, E = s.n_experts, Fe = s.expert_mlp_dim;
    const auto in = [](int64_t fan_in) { return 1 / std::sqrt(float(fan_in)); };
    draw_tensor(out.tensors, rng, s.router_name(layer), {E, C}, 0, 3 * in(C), s.dtype);
    for (int e = 0; e < E; ++e) {
        draw_tensor(out.tensors, rng, s.expert_name(layer, e, "gate"), {Fe, C}, 0, in(C), s.dtype);
        draw_tensor(out.tensors, rng, s.expert_name(layer, e, "up"), {Fe, C}, 0, in(C), s.dtype);
        draw_tensor(out.tensors, rng, s.expert_name(layer, e, "down"), {C, Fe}, 0, in(Fe), s.dtype);
    }
}

}  // namespace headscope::test
