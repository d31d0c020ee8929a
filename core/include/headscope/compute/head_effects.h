// The effects grid: for one text, what knocking out each single head (or, on
// a mixture of experts, each expert of each layer of experts) does to the
// model's loss and to the probability of its top token at every position,
// on top of the heads and experts the options already knock out. Each
// knock-out reuses the residual stream before its layer and computes only
// the layers after it, then the predictions.
// Legend: L layers, N the heads of a layer (of the options' split) or its
// experts, T the text's tokens.
#pragma once
#include <cmath>
#include <vector>

#include "headscope/compute/attention.h"

namespace headscope {

// What the grid knocks out in turn.
enum class EffectsOf { heads, experts };
inline constexpr Choices<EffectsOf, 2> effects_of_choices = {
    "effects of", {"heads", "experts"}, {"each head", "each expert"}};
const char* to_string(EffectsOf of);

struct HeadEffects {
    EffectsOf of = EffectsOf::heads;
    int L = 0, N = 0, T = 0;
    Ablation ablation = Ablation::zero;
    std::vector<HeadRef> already_out;            // options.ablate: their cells are NaN (heads)
    std::vector<ExpertRef> experts_already_out;  // options.ablate_experts: their cells are NaN (experts)
    double loss = std::nan("");                  // the text's loss with only those knocked out
    // (L, N): the loss with the head or expert also out, minus `loss`; NaN
    // where it is already out, in a dense layer's row (experts), or where
    // knocking it out would leave its layer fewer experts than each token takes.
    std::vector<float> loss_change;
    std::vector<Prediction> top;      // (T): the top token at each position and its p, before
    std::vector<float> top_p_change;  // (L, N, T): that token's p with the head or expert out, minus top[t].p
    ComputedOn computed_on;

    float loss_change_at(int layer, int i) const { return loss_change[static_cast<size_t>(layer) * N + i]; }
    float top_p_change_at(int layer, int i, int t) const {
        return top_p_change[(static_cast<size_t>(layer) * N + i) * T + t];
    }
};

}  // namespace headscope
