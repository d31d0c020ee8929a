// The checks panel's figures: see checks.h.
#include "headscope/inspect/checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "headscope/base/error.h"
#include "headscope/base/shape.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/forward.h"

namespace headscope {

namespace {

double max_abs_diff(const AlignedVector<float>& a, const AlignedVector<float>& b) {
    double diff = 0;
    for (size_t n = 0; n < a.size(); ++n) diff = std::max(diff, std::abs(static_cast<double>(a[n]) - b[n]));
    return diff;
}

}  // namespace

AttentionResult forward_by_head_loop(const Model& model, const Batch& batch, const AttentionOptions& options,
                                     const Progress& progress) {
    AttentionOptions every_layer = options;  // the loop returns every layer, with outputs, whatever was asked
    every_layer.layers.clear();
    every_layer.capture_outputs = true;
    every_layer.split = Split::transpose;  // the loop splits heads by columns, the correct split
    AttentionResult result;
    CpuForward().run(model, batch, every_layer, result, CpuForward::Heads::loop, nullptr, progress);
    return result;
}

double round_off_tolerance(double size) { return relative_round_off * std::max(1.0, size); }

Agreement agreement(double max_diff, double size) {
    if (max_diff == 0) return Agreement::exact;
    return max_diff <= round_off_tolerance(size) ? Agreement::round_off : Agreement::differs;
}

HeadLoopComparison compare_with_head_loop(Backend& backend, const Model& model, const Batch& batch,
                                          const AttentionOptions& options, const Progress& progress) {
    AttentionOptions every_layer = options;
    every_layer.layers.clear();
    every_layer.capture_outputs = true;
    const int64_t steps = model.config.n_layer + 1;
    const AttentionResult loop = forward_by_head_loop(model, batch, every_layer, [&](const ProgressReport& layer) {
        report_progress(progress, "checks: the per-head loop", layer.done, steps, ProgressUnit::steps);
    });
    report_progress(progress, "checks: the batched heads", steps - 1, steps, ProgressUnit::steps);
    AttentionResult engine;
    backend.forward(batch, every_layer, engine);
    report_progress(progress, "checks: the batched heads", steps, steps, ProgressUnit::steps);
    double max_output = 0;
    for (float v : loop.outputs) max_output = std::max(max_output, static_cast<double>(std::abs(v)));
    return {max_abs_diff(engine.weights, loop.weights), max_abs_diff(engine.outputs, loop.outputs), max_output};
}

CausalityCheck check_causality(Backend& backend, const Model& model, const Batch& batch, int b,
                               const AttentionOptions& options, const Progress& progress) {
    if (b < 0 || b >= batch.B())
        throw Error("causality check: text " + std::to_string(b + 1) + " is not in the batch of " +
                    std::to_string(batch.B()));
    AttentionOptions every_layer = options;
    every_layer.layers.clear();
    AttentionResult before, after;
    const char* what = "checks: causality";
    report_progress(progress, what, 0, 2, ProgressUnit::steps);
    backend.forward(batch, every_layer, before);  // validates the batch first
    report_progress(progress, what, 1, 2, ProgressUnit::steps);

    CausalityCheck check;
    Batch edited = batch;
    std::vector<int32_t>& ids = edited.token_ids[b];
    check.position = static_cast<int>(ids.size()) - 1;
    check.token = ids.back();
    check.replacement = (ids.back() + 1) % model.config.vocab_size;
    ids.back() = check.replacement;
    backend.forward(edited, every_layer, after);
    report_progress(progress, what, 2, 2, ProgressUnit::steps);

    const int T = before.T;
    check.earlier_rows = check.position;
    for (size_t slot = 0; slot < before.layers.size(); ++slot)
        for (int h = 0; h < before.NH; ++h) {
            const float* w0 = before.map(static_cast<int>(slot), b, h);
            const float* w1 = after.map(static_cast<int>(slot), b, h);
            for (int i = 0; i <= check.position; ++i)
                for (int j = 0; j < T; ++j) {
                    const size_t n = static_cast<size_t>(i) * T + j;
                    const double diff = std::abs(static_cast<double>(w0[n]) - w1[n]);
                    double& max = i < check.position ? check.max_earlier_diff : check.max_changed_row_diff;
                    max = std::max(max, diff);
                }
        }
    return check;
}

std::vector<ParameterRow> parameter_table(const Model& model) {
    std::vector<ParameterRow> rows;
    for (const TensorInfo& tensor : model.tensors)
        rows.push_back({tensor.name, tensor.shape, element_count(tensor.shape)});
    return rows;
}

namespace {

// The positions row: the kind, its base and what scales its frequencies.
std::string positions_words(const Config& c) {
    std::string positions = positions_choices.labels[static_cast<int>(c.positions)];
    if (c.positions == Positions::learned) return positions + ", " + std::to_string(c.n_positions) + " positions";
    char theta[32];
    std::snprintf(theta, sizeof theta, "%.10g", c.rope.theta);
    positions += ", theta " + std::string(theta);
    const int hs = c.head_size();
    if (c.rope.fraction < 1)
        positions +=
            ", on " + std::to_string(rope_dims(c.rope, hs)) + " of each head's " + std::to_string(hs) + " dims";
    if (c.rope.factor > 0) positions += ", Llama 3 scaling";
    if (!c.rope.long_divisors.empty())
        positions += ", LongRoPE (its long factors past " + std::to_string(c.rope.long_after) + " positions)";
    else if (!c.rope.frequency_divisors.empty())
        positions += ", each frequency divided by its own factor (YaRN's or the file's rope_freqs)";
    if (c.rope.cos_sin_scale != 1) {
        char scale[32];
        std::snprintf(scale, sizeof scale, "%.4g", c.rope.cos_sin_scale);
        positions += ", cos and sin times " + std::string(scale);
    }
    return positions;
}

// The MLP row: a dense MLP's kind and size, or the mixture of experts'.
std::string mlp_words(const Config& c) {
    const std::string kind = mlp_choices.labels[static_cast<int>(c.mlp)];
    if (!c.has_experts()) return kind + ", " + std::to_string(c.mlp_size()) + " hidden";
    std::string dense;
    for (int l = 0; l < c.n_layer; ++l)
        if (!c.expert_layer(l)) dense += (dense.empty() ? "" : ", ") + std::to_string(l);
    char clamp[64] = "";
    if (c.swiglu_limit > 0)
        std::snprintf(clamp, sizeof clamp, " clamped at %.3g (alpha %.4g)", c.swiglu_limit, c.swiglu_alpha);
    return std::to_string(c.n_experts) + " experts (SwiGLU" + clamp + ", " + std::to_string(c.expert_mlp_dim) +
           " hidden), " + std::to_string(c.experts_per_token) + " a token: " + routing_words(c) +
           (dense.empty() ? ""
                          : "; dense layers " + dense + " (" + kind + ", " + std::to_string(c.mlp_size()) + " hidden)");
}

}  // namespace

std::vector<ConfigRow> config_table(const Model& model) {
    const Config& c = model.config;
    const int NH = c.n_head, NKV = c.kv_heads(), hs = c.head_size();
    std::vector<ConfigRow> rows = {
        {"architecture", c.architecture},
        {"layers L", std::to_string(c.n_layer)},
        {"channels C", std::to_string(c.n_embd)},
        {"query heads NH", std::to_string(NH)},
        {"key/value heads NKV",
         std::to_string(NKV) +
             (NKV == NH ? " (one per query head)" : " (groups of " + std::to_string(NH / NKV) + " query heads)")},
        {"head size hs",
         std::to_string(hs) +
             (NH * hs == c.n_embd ? " (C / NH)" : " (the config's; NH x hs = " + std::to_string(NH * hs) + ", not C)")},
        {"norm", norm_choices.labels[static_cast<int>(c.norm)]},
    };
    rows.push_back({"positions", positions_words(c)});
    if (c.qk_norm)
        rows.push_back({"q/k norm", c.qk_norm_whole ? "RMSNorm over each token's whole Q and whole K"
                                                    : "RMSNorm over each head's hs values"});
    if (c.output_norms)
        rows.push_back({"norm placement",
                        c.input_norms ? "before and after each sublayer" : "after each sublayer: x + norm(attn(x))"});
    rows.push_back({"MLP", mlp_words(c)});
    std::string window = "none";
    if (c.sliding_window)
        window = c.causal ? std::to_string(c.sliding_window) + " keys back"
                          : "keys less than " + std::to_string(c.sliding_window) + " tokens away";
    if (c.global_every) window += ", in every layer but each " + std::to_string(c.global_every) + "th from layer 0";
    if (c.sliding_window && !c.windowed_layers.empty()) {
        std::string global;
        for (int l = 0; l < c.n_layer; ++l)
            if (!c.windowed(l)) global += (global.empty() ? "" : ", ") + std::to_string(l);
        window += ", in every layer but the global " + (global.empty() ? std::string("(none)") : global);
    }
    rows.push_back({"sliding window", window});
    if (c.norm_offset != 0) rows.push_back({"norm scale", "x (1 + w): the files store w"});
    const auto number = [](float value) {
        char text[32];
        std::snprintf(text, sizeof text, "%.6g", value);
        return std::string(text);
    };
    if (c.attention_scale > 0)
        rows.push_back({"score scale", number(c.attention_scale) + " (the model's own, in place of hs^-1/2)"});
    if (c.attention_softcap > 0 || c.logit_softcap > 0)
        rows.push_back({"soft-caps", "scores " + (c.attention_softcap > 0 ? number(c.attention_softcap) : "none") +
                                         ", logits " + (c.logit_softcap > 0 ? number(c.logit_softcap) : "none") +
                                         " (cap tanh(x / cap))"});
    if (c.attention_sinks)
        rows.push_back({"attention sinks", "a learned logit per head in each softmax's denominator (its sink weight)"});
    if (c.vision_tower_left_out) rows.push_back({"vision tower", "left out: the language model alone is read"});
    if (c.is_encoder())
        rows.push_back({"encoder", std::string(c.post_norm ? "LayerNorm after each sublayer (post-LN)" : "pre-norm") +
                                       (c.mlm_head ? ", masked-LM head" : ", no head (maps only)")});
    // How the weights are stored: a GGUF file's mix by name, then every type's count of tensors.
    rows.push_back({"weights", storage_summary(model)});
    std::string tensors;
    for (const auto& [dtype, count] : weight_storage(model).tensors_by_dtype)
        tensors += (tensors.empty() ? "" : ", ") + std::to_string(count) + " " + dtype;
    rows.push_back({"tensors", tensors});
    rows.push_back({"vocabulary V", std::to_string(c.vocab_size)});
    return rows;
}

std::vector<ShapeRow> compute_shapes(const Config& config, int B, int T, int NH) {
    if (B < 1 || T < 1)
        throw Error("shapes: need a positive batch and length (got B=" + std::to_string(B) + " T=" + std::to_string(T) +
                    ")");
    const HeadSplit s = head_split(config, NH);
    const int64_t C = config.n_embd, NKV = s.NKV, hs = s.hs, width = s.q_width(), g = s.group();
    const bool grouped = g > 1, rotary = config.positions == Positions::rotary;
    // One C -> 3C product in the model's own split (GPT-2's), in its own words.
    const bool fused = config.qkv_layout == QkvLayout::fused && !grouped && width == C;
    std::vector<ShapeRow> rows = {{"x",
                                   "(B, T, C)",
                                   {B, T, C},
                                   config.input_norms ? "the attention's input (after its norm)"
                                                      : "the attention's input (the residual itself: no norm before)"}};
    if (fused)
        rows.push_back({"qkv",
                        "(B, T, 3C)",
                        {B, T, 3 * C},
                        "the fused " + module_name(config, Weight::attn_w) + " projection [Q | K | V]"});
    else
        rows.push_back({"qkv",
                        "(B, T, (NH + 2 NKV) hs)",
                        {B, T, width + 2 * NKV * hs},
                        "the Q, K and V projections side by side [Q | K | V]"});
    if (!grouped) {
        rows.push_back({"q, k, v",
                        "(B, NH, T, hs)",
                        {B, NH, T, hs},
                        std::string("each viewed as (B, T, NH, hs), then transposed") +
                            (rotary ? "; q and k rotated (RoPE)" : "")});
    } else {
        rows.push_back({"q",
                        "(B, NH, T, hs)",
                        {B, NH, T, hs},
                        std::string("viewed as (B, T, NH, hs), transposed") + (rotary ? ", rotated" : "")});
        rows.push_back({"k, v",
                        "(B, NKV, T, hs)",
                        {B, NKV, T, hs},
                        std::string("viewed as (B, T, NKV, hs), transposed") + (rotary ? "; k rotated" : "")});
        rows.push_back({"k, v expanded",
                        "(B, NKV, NH/NKV, T, hs)",
                        {B, NKV, g, T, hs},
                        "one per query head of the group: stride 0, no copy"});
        // With one key/value head its axis has size 1, and reshape merges the stride-0 axis as a view.
        rows.push_back(
            {"k, v repeated",
             "(B, NH, T, hs)",
             {B, NH, T, hs},
             NKV == 1 ? "reshape: a view of the one key/value head, no copy" : "reshape copies each key/value head"});
    }
    rows.push_back({"att", "(B, NH, T, T)", {B, NH, T, T}, "scores, masked and softmaxed: the maps"});
    rows.push_back({"att @ v", "(B, NH, T, hs)", {B, NH, T, hs}, "each head's output"});
    rows.push_back(
        {"y",
         width == C ? "(B, T, C)" : "(B, T, NH*hs)",
         {B, T, width},
         "heads transposed back and merged, before the output projection " + module_name(config, Weight::attn_proj_w)});
    return rows;
}

double naive_view_max_diff(Backend& backend, const Batch& batch, AttentionOptions options, int layer,
                           ComputedOn* computed_on) {
    options.layers = {layer};
    options.capture_outputs = true;
    AttentionResult correct, naive;
    options.split = Split::transpose;
    backend.forward(batch, options, correct);
    options.split = Split::naive_view;
    backend.forward(batch, options, naive);
    if (computed_on) *computed_on = together(correct.computed_on, naive.computed_on);
    return max_abs_diff(naive.outputs, correct.outputs);
}

}  // namespace headscope
