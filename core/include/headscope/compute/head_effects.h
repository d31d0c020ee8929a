// The effects grid: for one text, what knocking out each single head does to
// the model's loss and to the probability of its top token at every
// position, on top of the heads the options already knock out. Each
// ablation reuses the residual stream before its layer and computes only the
// layers after it, then the predictions.
// Legend: L layers, NH query heads (of the options' split), T the text's tokens.
#pragma once
#include <cmath>
#include <vector>

#include "headscope/compute/attention.h"

namespace headscope {

struct HeadEffects {
    int L = 0, NH = 0, T = 0;
    Ablation ablation = Ablation::zero;
    std::vector<HeadRef> already_out;  // options.ablate: their cells are NaN
    double loss = std::nan("");        // the text's loss with only already_out knocked out
    std::vector<float> loss_change;    // (L, NH): the loss with the head also out, minus `loss`
    std::vector<Prediction> top;       // (T): the top token at each position and its p, before
    std::vector<float> top_p_change;   // (L, NH, T): that token's p with the head out, minus top[t].p
    ComputedOn computed_on;

    float loss_change_at(int layer, int head) const { return loss_change[static_cast<size_t>(layer) * NH + head]; }
    float top_p_change_at(int layer, int head, int t) const {
        return top_p_change[(static_cast<size_t>(layer) * NH + head) * T + t];
    }
};

}  // namespace headscope
