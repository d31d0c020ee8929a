// headscope-cli attention --effects: the effects grid of the one text, each
// head's change in loss when knocked out, exact, estimated (attribution) or
// both (hybrid), as JSON beside the attention weights: per cell its value
// and whether it is exact or estimated.
#include <string>
#include <vector>

#include "cli/cli_commands.h"
#include "cli/terminal_progress.h"
#include "headscope/base/clock.h"

namespace headscope {

namespace {

// An (L, N) grid as rows of cells.
template <typename Cell>
Json rows_of(const std::vector<Cell>& cells, int rows, int cols) {
    Json out = Json::array();
    for (int r = 0; r < rows; ++r) {
        Json row = Json::array();
        for (int c = 0; c < cols; ++c) row.push_back(cells[static_cast<size_t>(r) * cols + c]);
        out.push_back(std::move(row));
    }
    return out;
}

}  // namespace

Json effects_json(Backend& backend, const Batch& batch, const AttentionOptions& options, EffectsMethod method) {
    HeadEffects effects;
    const auto start = Clock::now();
    {
        TerminalProgress bar;
        backend.head_effects(batch, options, effects, EffectsOf::heads, bar.progress(), method);
    }
    const double effects_ms = ms_since(start);
    Json out = {{"method", to_string(effects.method)}, {"asked", to_string(method)}};
    if (!effects.fallback.empty()) out["fallback"] = effects.fallback;
    out["ablation"] = to_string(effects.ablation);
    out["loss"] = effects.loss;
    out["n_layer"] = effects.L, out["n_head"] = effects.N;
    out["loss_change"] = rows_of(effects.loss_change, effects.L, effects.N);
    std::vector<bool> exact(effects.exact.begin(), effects.exact.end());
    out["exact"] = rows_of(exact, effects.L, effects.N);
    if (!effects.estimate.empty()) out["estimate"] = rows_of(effects.estimate, effects.L, effects.N);
    out["effects_ms"] = effects_ms;
    return out;
}

}  // namespace headscope
