// Attribution patching (backward.h): each grid cell of exact patching
// estimated to first order, (clean - corrupted activation) . the metric's
// gradient on the run being patched, summed over the component's values,
// and divided by the clean - corrupted difference of the metric. With the
// gradient taken on the corrupted run (denoise) that is the estimated
// restored fraction; on the clean run (noise), the destroyed one.
#include <string>

#include "headscope/base/error.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/forward.h"

namespace headscope {

namespace {

// For each of `cells` cells, the sum over its `count` values of (clean -
// corrupted) * gradient; `index(cell, i)` is the flat index of its i-th value.
template <typename Index>
std::vector<double> dotted(const std::vector<float>& clean, const std::vector<float>& corrupted,
                           const std::vector<float>& gradient, int cells, int count, Index index) {
    std::vector<double> sums(cells, 0.0);
    for (int cell = 0; cell < cells; ++cell)
        for (int i = 0; i < count; ++i) {
            const size_t at = index(cell, i);
            sums[cell] += (static_cast<double>(clean[at]) - corrupted[at]) * gradient[at];
        }
    return sums;
}

// One kind's estimates of the metric's change, (L, NH) or (L, T).
std::vector<double> estimates(PatchKind kind, const RunActivations& clean, const RunActivations& corrupted,
                              const RunActivations& gradient, int L, int NH, int T, int C, int hs) {
    const size_t Qw = static_cast<size_t>(NH) * hs;
    switch (kind) {
        case PatchKind::heads:  // cell (l, h): the head's hs values at each of the T positions
            return dotted(clean.heads, corrupted.heads, gradient.heads, L * NH, T * hs, [&](int cell, int i) {
                return (static_cast<size_t>(cell / NH) * T + i / hs) * Qw + static_cast<size_t>(cell % NH) * hs +
                       i % hs;
            });
        case PatchKind::pattern:  // cell (l, h): the head's T x T map, contiguous
            return dotted(clean.pattern, corrupted.pattern, gradient.pattern, L * NH, T * T,
                          [&](int cell, int i) { return static_cast<size_t>(cell) * T * T + i; });
        case PatchKind::residual:
            return dotted(clean.residual, corrupted.residual, gradient.residual, L * T, C,
                          [&](int cell, int i) { return static_cast<size_t>(cell) * C + i; });
        case PatchKind::mlp:
            return dotted(clean.mlp, corrupted.mlp, gradient.mlp, L * T, C,
                          [&](int cell, int i) { return static_cast<size_t>(cell) * C + i; });
    }
    return {};
}

// The first feature the backward does not follow, in words; null where it follows them all.
const char* unsupported_feature(const Config& cfg, const AttentionOptions& options) {
    if (cfg.is_encoder_decoder()) return "encoder-decoders";
    if (!cfg.predicts()) return "a model without an output head";
    if (cfg.positions == Positions::relative) return "relative position buckets";
    if (cfg.output_scale != 1) return "a scale on the output before the output embedding";
    if (options.causal != cfg.causal || options.window_both_ways ||
        (options.n_head != 0 && options.n_head != cfg.n_head) || options.split != Split::transpose ||
        !options.ablate.empty())
        return "options other than the model's own mask, heads and split, or knocked-out heads";
    return nullptr;
}

}  // namespace

void check_backward_supported(const Config& config, const AttentionOptions& options) {
    if (const char* feature = unsupported_feature(config, options))
        throw Error(std::string("attribution patching does not support ") + feature + " yet");
}

void attribution_patch(const Model& model, const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                       const AttentionOptions& options, const PatchRequest& asked, Patching& patching) {
    const Config& cfg = model.config;
    const PatchRequest request = checked_patch_request(cfg, clean, corrupted, asked);
    check_backward_supported(cfg, options);
    const bool denoise = request.direction == PatchDirection::denoise;
    RunActivations clean_run, corrupted_run, gradient;
    const double clean_metric =
        metric_gradients(model, clean, clean, options, request, &clean_run, denoise ? nullptr : &gradient);
    const double corrupted_metric =
        metric_gradients(model, corrupted, clean, options, request, &corrupted_run, denoise ? &gradient : nullptr);
    check_patched_difference(request.metric, clean_metric, corrupted_metric);
    const HeadSplit split = head_split(cfg, 0);
    const int L = cfg.n_layer, NH = split.NH, T = static_cast<int>(clean.size());
    Patching made{request, L, NH, T, clean_metric, corrupted_metric, {}, {"cpu", ""}};
    for (PatchKind kind : request.kinds) {
        const bool per_head = kind == PatchKind::heads || kind == PatchKind::pattern;
        PatchGrid grid{kind, L, per_head ? NH : T, {}};
        grid.cells = estimates(kind, clean_run, corrupted_run, gradient, L, NH, T, cfg.n_embd, split.hs);
        for (double& cell : grid.cells) cell /= clean_metric - corrupted_metric;
        made.grids.push_back(std::move(grid));
    }
    patching = std::move(made);
}

std::vector<float> estimated_loss_changes(const Model& model, const std::vector<int32_t>& ids,
                                          const AttentionOptions& options) {
    if (model.config.is_encoder())
        throw Error("the estimate is of the loss over next tokens, which an encoder does not predict");
    RunActivations actual, gradient;
    PatchRequest loss;
    loss.metric = PatchMetric::loss;
    metric_gradients(model, ids, ids, options, loss, &actual, &gradient);
    const HeadSplit split = head_split(model.config, 0);
    const int L = model.config.n_layer, NH = split.NH, T = static_cast<int>(ids.size()), hs = split.hs;
    const size_t Qw = static_cast<size_t>(NH) * hs;
    // The knocked-out output: zero, or the head's mean over the text (as the forward's knock_out).
    RunActivations knocked_out;
    std::vector<float>& knocked = knocked_out.heads;
    knocked.assign(actual.heads.size(), 0.f);
    if (options.ablation == Ablation::mean)
        for (int l = 0; l < L; ++l)
            for (size_t c = 0; c < Qw; ++c) {
                const float* column = actual.heads.data() + static_cast<size_t>(l) * T * Qw + c;
                double mean = 0;
                for (int t = 0; t < T; ++t) mean += column[t * Qw];
                for (int t = 0; t < T; ++t)
                    knocked[static_cast<size_t>(l) * T * Qw + t * Qw + c] = static_cast<float>(mean / T);
            }
    const std::vector<double> sums = estimates(PatchKind::heads, knocked_out, actual, gradient, L, NH, T, 0, hs);
    return std::vector<float>(sums.begin(), sums.end());
}

}  // namespace headscope
