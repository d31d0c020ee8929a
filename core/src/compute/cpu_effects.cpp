// The effects grid on the CPU (head_effects.h): one forward keeps the
// residual stream before every layer; each single knock-out (a head, or an
// expert of a layer of experts) then starts from its layer's input and
// computes that layer and the ones after it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"

namespace headscope {

const char* to_string(EffectsOf of) { return word_of(effects_of_choices, of); }

namespace {

// `grid` with cell (layer, i) of the grid also knocked out into `knocked`;
// false where the cell has no knock-out of its own (see HeadEffects::loss_change).
bool knock_out_cell(const Config& config, EffectsOf of, const AttentionOptions& grid, int layer, int i,
                    AttentionOptions& knocked) {
    knocked = grid;
    if (of == EffectsOf::heads) {
        const HeadRef head{layer, i};
        if (grid.knocks_out(head)) return false;
        knocked.ablate.insert(std::upper_bound(knocked.ablate.begin(), knocked.ablate.end(), head), head);
        return true;
    }
    const ExpertRef expert{layer, i};
    const auto out_in_layer = std::count_if(grid.ablate_experts.begin(), grid.ablate_experts.end(),
                                            [&](const ExpertRef& e) { return e.layer == layer; });
    if (!config.expert_layer(layer) || grid.knocks_out_expert(expert) ||
        config.n_experts - out_in_layer - 1 < config.experts_per_token)
        return false;
    std::vector<ExpertRef>& experts = knocked.ablate_experts;
    experts.insert(std::upper_bound(experts.begin(), experts.end(), expert), expert);
    return true;
}

}  // namespace

void CpuForward::head_effects(const Model& model, const Batch& batch, const AttentionOptions& options,
                              HeadEffects& effects, EffectsOf of, const Progress& progress) {
    if (batch.B() != 1 || batch.token_ids[0].size() < 2)
        throw Error("the effects grid needs one text of at least two tokens");
    if (model.config.is_encoder_decoder())
        throw Error("the effects grid is computed for decoders and encoders, not encoder–decoders");
    if (of == EffectsOf::experts && !model.config.has_experts())
        throw Error("the effects grid of experts needs a mixture of experts: the model has no experts");
    // The grid's own forward: the top token, the last layer's maps only (the
    // others go to the scratch maps, as the reruns' do), no lens or contributions.
    AttentionOptions grid = options;
    grid.layers = {model.config.n_layer - 1}, grid.top_k = 1, grid.lens_k = 0, grid.contributions = false;
    grid.capture_outputs = false, grid.new_rows_only = false, grid.maps = Maps::full, grid.summaries = false;
    AttentionResult result;
    keep_layer_inputs_ = true;
    try {
        run(model, batch, grid, result, Heads::batched, nullptr, progress);
    } catch (...) {
        keep_layer_inputs_ = false;
        throw;
    }
    keep_layer_inputs_ = false;

    const HeadSplit split = head_split(model.config, grid.n_head);
    const int L = model.config.n_layer, T = result.T, C = model.config.n_embd;
    const int N = of == EffectsOf::heads ? split.NH : model.config.n_experts;
    const size_t rows = static_cast<size_t>(rows_), cells = static_cast<size_t>(L) * N;
    effects = HeadEffects{
        of, L, N, T, grid.ablation, grid.ablate, grid.ablate_experts, result.loss(0), {}, {}, {}, result.computed_on};
    effects.loss_change.assign(cells, std::nanf(""));
    effects.top_p_change.assign(cells * T, std::nanf(""));
    for (int t = 0; t < T; ++t) effects.top.push_back(result.predictions_at(0, t)[0]);

    const std::string what = std::string("knocking out ") + to_string(of);
    std::vector<float> top_p(T);
    AttentionOptions knocked;
    for (size_t cell = 0; cell < cells; ++cell) {
        report_progress(progress, what, static_cast<int64_t>(cell), static_cast<int64_t>(cells), ProgressUnit::steps);
        const int l = static_cast<int>(cell / N);
        if (!knock_out_cell(model.config, of, grid, l, static_cast<int>(cell % N), knocked)) continue;
        std::copy_n(layer_inputs_.data() + l * rows * C, rows * C, x_.data());
        for (int layer = l; layer < L; ++layer) {
            float* att = layer == L - 1 ? result.weights.data() : scratch_att_.data();
            run_layer(model, batch, knocked, split, own_cache_, {layer, -1, att, false}, Heads::batched, result);
        }
        std::copy_n(x_.data(), rows * C, unembed_in_.data());
        predict(model, batch, knocked, result, effects.top.data(), top_p.data());
        effects.loss_change[cell] = static_cast<float>(result.loss(0) - effects.loss);
        for (int t = 0; t < T; ++t) effects.top_p_change[cell * T + t] = top_p[t] - effects.top[t].p;
    }
    report_progress(progress, what, static_cast<int64_t>(cells), static_cast<int64_t>(cells), ProgressUnit::steps);
}

}  // namespace headscope
