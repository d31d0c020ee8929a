// The effects grid on the CPU (head_effects.h): one forward keeps the
// residual stream before every layer; each single knock-out (a head, or an
// expert of a layer of experts) then starts from its layer's input and
// computes that layer and the ones after it. The estimate is the backward's
// (backward.h).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/cpu_forward.h"

namespace headscope {

const char* to_string(EffectsOf of) { return word_of(effects_of_choices, of); }
const char* to_string(EffectsMethod method) { return word_of(effects_method_choices, method); }
EffectsMethod parse_effects_method(std::string_view word) { return parse_choice(effects_method_choices, word); }

std::vector<int> hybrid_cells(const std::vector<float>& estimate) {
    std::vector<int> rest;
    for (int cell = 0; cell < static_cast<int>(estimate.size()); ++cell)
        if (!std::isnan(estimate[cell])) rest.push_back(cell);
    const auto larger = [&](int a, int b) {
        const float x = std::fabs(estimate[a]), y = std::fabs(estimate[b]);
        return x > y || (x == y && a < b);
    };
    const size_t largest = std::min<size_t>(hybrid_largest, rest.size());
    std::partial_sort(rest.begin(), rest.begin() + largest, rest.end(), larger);
    std::vector<int> cells(rest.begin(), rest.begin() + largest);
    rest.erase(rest.begin(), rest.begin() + largest);
    // A partial Fisher-Yates shuffle on mt19937_64's output, which the standard fixes (a distribution's is not).
    std::mt19937_64 draws(hybrid_seed);
    for (size_t i = 0; i < rest.size() && i < static_cast<size_t>(hybrid_others); ++i) {
        std::swap(rest[i], rest[i + draws() % (rest.size() - i)]);
        cells.push_back(rest[i]);
    }
    return cells;
}

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

// The estimate of every cell where `method` asks for one and the backward
// follows the model, the options and the grid; else empty, and why in `fallback`.
std::vector<float> estimate_or_why(const Model& model, const std::vector<int32_t>& ids, const AttentionOptions& options,
                                   EffectsOf of, EffectsMethod method, std::string& fallback) {
    if (method == EffectsMethod::exact) return {};
    std::string why = "the estimate is of heads, not experts";
    if (of == EffectsOf::heads) try {
            return estimated_loss_changes(model, ids, options);
        } catch (const Error& e) {
            why = e.what();
        }
    fallback = why + ": every cell computed exactly";
    return {};
}

}  // namespace

void CpuForward::head_effects(const Model& model, const Batch& batch, const AttentionOptions& options,
                              HeadEffects& effects, EffectsOf of, const Progress& progress, EffectsMethod method,
                              const EffectsUpdate& on_update) {
    if (batch.B() != 1 || batch.token_ids[0].size() < 2)
        throw Error("the effects grid needs one text of at least two tokens");
    if (model.config.is_encoder_decoder())
        throw Error("the effects grid is computed for decoders and encoders, not encoder–decoders");
    if (of == EffectsOf::experts && !model.config.has_experts())
        throw Error("the effects grid of experts needs a mixture of experts: the model has no experts");
    std::string fallback;
    std::vector<float> estimate = estimate_or_why(model, batch.token_ids[0], options, of, method, fallback);
    const EffectsMethod ran = estimate.empty() ? EffectsMethod::exact : method;
    // The grid's own forward: the top token, the last layer's maps only (the
    // others go to the scratch maps, as the reruns' do), no lens or contributions.
    AttentionOptions grid = options;
    grid.layers = {model.config.n_layer - 1}, grid.top_k = 1, grid.lens_k = 0, grid.contributions = false;
    grid.capture_outputs = false, grid.new_rows_only = false, grid.maps = Maps::full, grid.summaries = false;
    AttentionResult result;
    // Every row is computed (no cache): the residual entering each layer, (L, T, C).
    std::vector<float> inputs(static_cast<size_t>(model.config.n_layer) * batch.T() * model.config.n_embd);
    ForwardRequest keep;
    keep.layer_inputs = inputs.data();
    run(model, batch, grid, result, Heads::batched, nullptr, progress, keep);

    const HeadSplit split = head_split(model.config, grid.n_head);
    const int L = model.config.n_layer, T = result.T;
    const int N = of == EffectsOf::heads ? split.NH : model.config.n_experts;
    const int cells = L * N;
    effects = HeadEffects{of,
                          L,
                          N,
                          T,
                          grid.ablation,
                          grid.ablate,
                          grid.ablate_experts,
                          result.loss(0),
                          {},
                          {},
                          {},
                          result.computed_on,
                          ran,
                          fallback,
                          {},
                          {}};
    effects.top_p_change.assign(static_cast<size_t>(cells) * T, std::nanf(""));
    for (int t = 0; t < T; ++t) effects.top.push_back(result.predictions_at(0, t)[0]);
    std::vector<int> exact_cells;
    if (ran == EffectsMethod::exact) {
        effects.loss_change.assign(cells, std::nanf(""));
        effects.exact.assign(cells, 1);
        exact_cells.resize(cells);
        std::iota(exact_cells.begin(), exact_cells.end(), 0);
    } else {
        effects.estimate = estimate, effects.loss_change = std::move(estimate);
        effects.exact.assign(cells, 0);
        if (ran == EffectsMethod::hybrid) exact_cells = hybrid_cells(effects.estimate);
        if (on_update) on_update(effects);
    }

    const std::string what = std::string("knocking out ") + to_string(of);
    const auto count = static_cast<int64_t>(exact_cells.size());
    for (int64_t done = 0; done < count; ++done) {
        report_progress(progress, what, done, count, ProgressUnit::steps);
        knock_out_exactly(model, batch, grid, split, inputs.data(), exact_cells[done], result, effects);
        if (ran != EffectsMethod::exact && on_update) on_update(effects);
    }
    report_progress(progress, what, count, count, ProgressUnit::steps);
}

void CpuForward::knock_out_exactly(const Model& model, const Batch& batch, const AttentionOptions& grid,
                                   const HeadSplit& split, const float* inputs, int cell, AttentionResult& result,
                                   HeadEffects& effects) {
    const int L = effects.L, N = effects.N, T = effects.T, C = model.config.n_embd, l = cell / N;
    const size_t rows = static_cast<size_t>(rows_);
    effects.exact[cell] = 1;
    AttentionOptions knocked;
    if (!knock_out_cell(model.config, effects.of, grid, l, cell % N, knocked)) {
        effects.loss_change[cell] = std::nanf("");
        return;
    }
    std::copy_n(inputs + l * rows * C, rows * C, x_.data());
    for (int layer = l; layer < L; ++layer) {
        float* att = layer == L - 1 ? result.weights.data() : scratch_att_.data();
        run_layer(model, batch, knocked, split, own_cache_, {layer, -1, att, false}, Heads::batched, {}, result);
    }
    std::copy_n(x_.data(), rows * C, unembed_in_.data());
    std::vector<float> top_p(T);
    predict(model, batch, knocked, result, effects.top.data(), top_p.data());
    effects.loss_change[cell] = static_cast<float>(result.loss(0) - effects.loss);
    for (int t = 0; t < T; ++t) effects.top_p_change[static_cast<size_t>(cell) * T + t] = top_p[t] - effects.top[t].p;
}

}  // namespace headscope
