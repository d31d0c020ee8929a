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
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/compute/attention.h"

namespace headscope {

// What the grid knocks out in turn.
enum class EffectsOf { heads, experts };
inline constexpr Choices<EffectsOf, 2> effects_of_choices = {
    "effects of", {"heads", "experts"}, {"each head", "each expert"}};
const char* to_string(EffectsOf of);

// How each cell's change in loss is found. exact: its knock-out is run.
// attribution: estimated to first order, (knocked-out - actual head output)
// . d loss / d head output, summed over positions, from one forward and one
// backward. hybrid: the estimate, then the exact value of the
// hybrid_largest heads of largest |estimate| and hybrid_others drawn at
// random from the rest (to catch what the estimate misses), in place of theirs.
enum class EffectsMethod { exact, attribution, hybrid };
inline constexpr Choices<EffectsMethod, 3> effects_method_choices = {
    "effects", {"exact", "attribution", "hybrid"}, {"exact", "estimated", "estimated, then the largest exact"}};
inline constexpr int hybrid_largest = 16, hybrid_others = 8;
inline constexpr uint64_t hybrid_seed = 2403'00745;  // AtP*'s arXiv number
EffectsMethod parse_effects_method(std::string_view word);
const char* to_string(EffectsMethod method);

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
    EffectsMethod method = EffectsMethod::exact;  // the method that ran: exact where the one asked could not
    std::string fallback;         // why every cell is exact in place of the method asked, in one line; else empty
    std::vector<float> estimate;  // (L, N): the estimated change in loss, where one was made; else empty
    // (L, N): 1 where loss_change and top_p_change are the knock-out's exact
    // values; 0 where loss_change is the estimate (top_p_change is then NaN).
    std::vector<uint8_t> exact;

    bool exact_at(int layer, int i) const { return exact[static_cast<size_t>(layer) * N + i] != 0; }
    float loss_change_at(int layer, int i) const { return loss_change[static_cast<size_t>(layer) * N + i]; }
    float top_p_change_at(int layer, int i, int t) const {
        return top_p_change[(static_cast<size_t>(layer) * N + i) * T + t];
    }
};

// Called with the grid as it stands: once the estimate is in every cell, and
// after each exact value replaces one (not for the exact method).
using EffectsUpdate = std::function<void(const HeadEffects&)>;

// The cells (layer * N + i) hybrid computes exactly: the hybrid_largest of
// largest |estimate| (ties to the lower cell), then hybrid_others drawn
// without replacement from the rest by hybrid_seed; NaN cells never.
std::vector<int> hybrid_cells(const std::vector<float>& estimate);

}  // namespace headscope
