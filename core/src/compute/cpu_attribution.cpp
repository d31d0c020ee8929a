// Attribution patching (backward.h): each grid cell of exact patching
// estimated to first order, (clean - corrupted activation) . the metric's
// gradient on the run being patched, summed over the component's values,
// and divided by the clean - corrupted difference of the metric. With the
// gradient taken on the corrupted run (denoise) that is the estimated
// restored fraction; on the clean run (noise), the destroyed one.
// Of a causal decoder the run being patched is computed from the first token
// where the texts differ (patching_gradients), its rows before it the other
// run's: the residual's and the MLPs' cells at the positions before it are
// exactly 0, and no head's or map's cell has a term there.
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

// One stack's shape: L layers of NH heads over T tokens (an encoder's S), a
// head's map over `keys` keys (T, or the cross-attention's S), C channels, heads of hs.
struct StackShape {
    int L, NH, T, keys, C, hs;
};

// One kind's estimates of the metric's change, (L, NH) or (L, T), from the activations' and the gradients' vectors of
// that kind (RunActivations' layouts).
std::vector<double> estimates(PatchKind kind, const std::vector<float>& clean, const std::vector<float>& corrupted,
                              const std::vector<float>& gradient, const StackShape& s) {
    const size_t Qw = static_cast<size_t>(s.NH) * s.hs;
    switch (kind) {
        case PatchKind::heads:  // cell (l, h): the head's hs values at each of the T positions
            return dotted(clean, corrupted, gradient, s.L * s.NH, s.T * s.hs, [&](int cell, int i) {
                return (static_cast<size_t>(cell / s.NH) * s.T + i / s.hs) * Qw +
                       static_cast<size_t>(cell % s.NH) * s.hs + i % s.hs;
            });
        case PatchKind::pattern:  // cell (l, h): the head's T x keys map, contiguous
            return dotted(clean, corrupted, gradient, s.L * s.NH, s.T * s.keys,
                          [&](int cell, int i) { return static_cast<size_t>(cell) * s.T * s.keys + i; });
        case PatchKind::residual:
        case PatchKind::mlp:
            return dotted(clean, corrupted, gradient, s.L * s.T, s.C,
                          [&](int cell, int i) { return static_cast<size_t>(cell) * s.C + i; });
    }
    return {};
}

// A run's vector of `kind` in `stack` (an encoder–decoder's encoder's, its cross-attention's, or its own).
const std::vector<float>& of(const RunActivations& run, PatchKind kind, PatchStack stack) {
    const RunActivations& own = stack == PatchStack::encoder ? run.encoder.at(0) : run;
    const bool cross = stack == PatchStack::cross;
    switch (kind) {
        case PatchKind::heads: return cross ? own.cross_heads : own.heads;
        case PatchKind::pattern: return cross ? own.cross_pattern : own.pattern;
        case PatchKind::residual: return own.residual;
        case PatchKind::mlp: return own.mlp;
    }
    return own.heads;
}

// The first feature the backward does not follow, in words; null where it follows them all.
const char* unsupported_feature(const Config& cfg, const AttentionOptions& options) {
    if (!cfg.predicts()) return "a model without an output head";
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

void attribution_patch(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                       const PatchRequest& asked, Patching& patching) {
    const Config& cfg = model.config;
    const std::vector<int32_t>& clean_ids = clean.token_ids.at(0);
    const PatchRequest request = checked_patch_request(cfg, clean_ids, corrupted.token_ids.at(0), asked);
    if (cfg.is_encoder_decoder()) check_patch_sources(clean.source_ids.at(0), corrupted.source_ids.at(0));
    check_backward_supported(cfg, options);
    RunActivations clean_run, corrupted_run, gradient;
    const auto [clean_metric, corrupted_metric] =
        patching_gradients(model, clean, corrupted, options, request, clean_run, corrupted_run, gradient);
    check_patched_difference(request.metric, clean_metric, corrupted_metric);
    const HeadSplit split = head_split(cfg, 0);
    const int L = cfg.n_layer, NH = split.NH, T = clean.T(), S = clean.S();
    Patching made{request, L, NH, T, clean_metric, corrupted_metric, {}, {"cpu", ""}};
    for (PatchKind kind : request.kinds)
        for (PatchStack stack : patch_stacks(cfg, kind)) {
            const bool encoder = stack == PatchStack::encoder,
                       per_head = kind == PatchKind::heads || kind == PatchKind::pattern;
            const StackShape shape =
                encoder ? StackShape{model.encoder->config.n_layer, NH, S, S, cfg.n_embd, split.hs}
                        : StackShape{L, NH, T, stack == PatchStack::cross ? S : T, cfg.n_embd, split.hs};
            PatchGrid grid{kind, shape.L, per_head ? NH : shape.T, {}, stack};
            grid.cells = estimates(kind, of(clean_run, kind, stack), of(corrupted_run, kind, stack),
                                   of(gradient, kind, stack), shape);
            for (double& cell : grid.cells) cell /= clean_metric - corrupted_metric;
            made.grids.push_back(std::move(grid));
        }
    patching = std::move(made);
}

std::vector<float> estimated_loss_changes(const Model& model, const std::vector<int32_t>& ids,
                                          const AttentionOptions& options) {
    if (model.config.is_encoder())
        throw Error("the estimate is of the loss over next tokens, which an encoder does not predict");
    if (model.config.is_encoder_decoder())
        throw Error("the effects grid is computed for decoders and encoders, not encoder–decoders");
    RunActivations actual, gradient;
    PatchRequest loss;
    loss.metric = PatchMetric::loss;
    metric_gradients(model, Batch{{ids}, model.config.pad_id()}, ids, options, loss, &actual, &gradient);
    const HeadSplit split = head_split(model.config, 0);
    const int L = model.config.n_layer, NH = split.NH, T = static_cast<int>(ids.size()), hs = split.hs;
    const size_t Qw = static_cast<size_t>(NH) * hs;
    // The knocked-out output: zero, or the head's mean over the text (as the forward's knock_out).
    std::vector<float> knocked(actual.heads.size(), 0.f);
    if (options.ablation == Ablation::mean)
        for (int l = 0; l < L; ++l)
            for (size_t c = 0; c < Qw; ++c) {
                const float* column = actual.heads.data() + static_cast<size_t>(l) * T * Qw + c;
                double mean = 0;
                for (int t = 0; t < T; ++t) mean += column[t * Qw];
                for (int t = 0; t < T; ++t)
                    knocked[static_cast<size_t>(l) * T * Qw + t * Qw + c] = static_cast<float>(mean / T);
            }
    const std::vector<double> sums =
        estimates(PatchKind::heads, knocked, actual.heads, gradient.heads, StackShape{L, NH, T, T, 0, hs});
    return std::vector<float>(sums.begin(), sums.end());
}

}  // namespace headscope
