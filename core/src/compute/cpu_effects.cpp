// The effects grid on the CPU (head_effects.h): one forward keeps the
// residual stream before every layer; each single-head ablation then starts
// from its layer's input and computes that layer and the ones after it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"

namespace headscope {

void CpuForward::head_effects(const Model& model, const Batch& batch, const AttentionOptions& options,
                              HeadEffects& effects, const Progress& progress) {
    if (batch.B() != 1 || batch.token_ids[0].size() < 2)
        throw Error("the effects grid needs one text of at least two tokens");
    if (model.config.is_encoder_decoder())
        throw Error("the effects grid is computed for decoders and encoders, not encoder–decoders");
    // The grid's own forward: the top token, the last layer's maps only (the
    // others go to the scratch maps, as the reruns' do), no lens or contributions.
    AttentionOptions grid = options;
    grid.layers = {model.config.n_layer - 1}, grid.top_k = 1, grid.lens_k = 0, grid.contributions = false;
    grid.capture_outputs = false, grid.new_rows_only = false;
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
    const int L = model.config.n_layer, NH = split.NH, T = result.T, C = model.config.n_embd;
    const size_t rows = static_cast<size_t>(rows_);
    effects = HeadEffects{L, NH, T, grid.ablation, grid.ablate, result.loss(0), {}, {}, {}, result.computed_on};
    effects.loss_change.assign(static_cast<size_t>(L) * NH, std::nanf(""));
    effects.top_p_change.assign(static_cast<size_t>(L) * NH * T, std::nanf(""));
    for (int t = 0; t < T; ++t) effects.top.push_back(result.predictions_at(0, t)[0]);

    std::vector<float> top_p(T);
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < NH; ++h) {
            report_progress(progress, "knocking out heads", static_cast<int64_t>(l) * NH + h,
                            static_cast<int64_t>(L) * NH, ProgressUnit::steps);
            const HeadRef head{l, h};
            if (grid.knocks_out(head)) continue;
            AttentionOptions knocked = grid;
            knocked.ablate.insert(std::upper_bound(knocked.ablate.begin(), knocked.ablate.end(), head), head);
            std::copy_n(layer_inputs_.data() + l * rows * C, rows * C, x_.data());
            for (int layer = l; layer < L; ++layer) {
                float* att = layer == L - 1 ? result.weights.data() : scratch_att_.data();
                run_layer(model, batch, knocked, split, own_cache_, {layer, -1, att, false}, Heads::batched, result);
            }
            std::copy_n(x_.data(), rows * C, unembed_in_.data());
            predict(model, batch, knocked, result, effects.top.data(), top_p.data());
            effects.loss_change[static_cast<size_t>(l) * NH + h] = static_cast<float>(result.loss(0) - effects.loss);
            for (int t = 0; t < T; ++t)
                effects.top_p_change[(static_cast<size_t>(l) * NH + h) * T + t] = top_p[t] - effects.top[t].p;
        }
    report_progress(progress, "knocking out heads", static_cast<int64_t>(L) * NH, static_cast<int64_t>(L) * NH,
                    ProgressUnit::steps);
}

}  // namespace headscope
