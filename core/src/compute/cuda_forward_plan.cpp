// The host's part of the device's forward (cuda_forward_plan.h).
#include "cuda_forward_plan.h"

#include "headscope/compute/attention_maps.h"
#include "headscope/compute/cpu_ops.h"

namespace headscope {

std::string device_forward_refusal(const Model& model, const AttentionOptions& options) {
    const Config& cfg = model.config;
    if (cfg.is_encoder_decoder()) return "the CUDA backend runs no encoder–decoder yet";
    if (cfg.has_experts()) return "the CUDA backend runs no mixture of experts yet";
    if (cfg.positions == Positions::relative) return "the CUDA backend adds no relative position bias yet";
    if (options.maps != Maps::full || options.summaries)
        return "the CUDA backend keeps every map and computes no summaries yet";
    if (options.contributions) return "the CUDA backend computes no contributions yet";
    return "";
}

DeviceForwardPlan plan_device_forward(const Model& model, const Batch& batch, const AttentionOptions& options,
                                      const AttentionResult& result) {
    const Config& cfg = model.config;
    DeviceForwardPlan plan;
    plan.split = head_split(cfg, options.n_head);
    plan.B = batch.B(), plan.T = batch.T();
    const int B = plan.B, T = plan.T, C = cfg.n_embd;
    // The encoder's output needs every layer; predictions too; the maps only up to the last returned layer.
    plan.every_layer = options.top_k > 0 || options.lens_k > 0;
    plan.layers_run = plan.every_layer ? cfg.n_layer : result.layers.back() + 1;
    plan.x.resize(static_cast<size_t>(B) * T * C);
    for (int b = 0; b < B; ++b) {
        embed_text(model, batch, b, 0, plan.x.data() + static_cast<size_t>(b) * T * C);
        plan.lengths.push_back(static_cast<int>(batch.token_ids[b].size()));
        for (int t = 0; t < T; ++t) plan.positions.push_back(t);
    }
    for (int l = 0; l < plan.layers_run; ++l) {
        const ScoreRule rule = score_rule(model, options, l, plan.split.hs);
        DeviceLayerPlan layer;
        layer.scale = rule.scale, layer.softcap = rule.softcap, layer.sinks = rule.sinks;
        for (int b = 0; b < B; ++b)
            for (int i = 0; i < T; ++i) {
                const ops::KeyRange seen = rule.visible(i, plan.lengths[b], T);
                layer.key_begin.push_back(seen.begin);
                layer.key_end.push_back(seen.end);
            }
        if (cfg.positions == Positions::rotary) layer.rope = rope_table(layer_rope(cfg, l), plan.split.hs, T);
        plan.layers.push_back(std::move(layer));
    }
    return plan;
}

}  // namespace headscope
