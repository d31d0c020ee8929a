// The effects tab: what each head does to the prediction. The effects grid
// (every single head knocked out in turn, or on a mixture of experts, as its
// switch says, every expert of every layer of experts: the change in loss,
// computed on request on a worker; estimated at once, then the largest
// exact, each estimated cell marked, unless every cell exact is ticked),
// the direct logit attribution at a position (each
// head's, each MLP's and the embeddings' share of the top token's logit,
// from the live forward's contributions), and what the selected head writes
// there (the tokens it promotes and suppresses most).
#pragma once
#include "headscope/inspect/explanations.h"
#include "widgets/ui.h"

namespace headscope {

class EffectsView {
public:
    void draw(WindowState& state, Session& session, Ui& ui);

private:
    void effects_grid(WindowState& state, Session& session, Ui& ui, float width);
    void effects_tooltip(const Session& session, const HeadEffects& effects, int layer, int i, bool selectable);
    void attribution_grid(WindowState& state, const Session& session, Ui& ui, float width);
    void head_writes_lists(const WindowState& state, const Session& session, Ui& ui);
    void rollout_map(const WindowState& state, const Session& session, Ui& ui, float width);

    // What the selected head writes, read through the whole vocabulary once per change.
    struct WritesKey {
        uint64_t generation = 0;
        int b = -1, layer = -1, head = -1, t = -1;
        bool operator==(const WritesKey&) const = default;
    };
    WritesKey writes_key_;
    HeadWrites writes_;
    // The rollout's texture, uploaded once per compute and size.
    struct RolloutKey {
        uint64_t generation = 0;
        int b = -1, pixels = 0;
        Colormap colormap{};
        bool operator==(const RolloutKey&) const = default;
    };
    RolloutKey rollout_key_;
    HeatmapTexture rollout_texture_;
};

}  // namespace headscope
