// The router tab, shown for a mixture of experts: which experts each layer's
// router chose for each token of the selected text, as the live forward
// computed it. Above, a layers x positions grid whose cell is the expert the
// router chose first (expert_colour, brighter for a larger weight) or, with
// "all k", the k chosen side by side, each as wide as its weight; below, one
// expert's weight at every layer and position in the colormap. Dense layers
// are grey in both. Hover: the k experts by falling weight; click: that
// expert's strip; right-click: knock it out of its layer (its router picks
// the next in its place) or back in, listed above with a way back.
#pragma once
#include <cstdint>
#include <string>

#include "widgets/ui.h"

namespace headscope {

// Expert e's colour at brightness `value` (0..1): HSV with hue e * 0.618034
// wrapped to [0, 1) (neighbouring experts far apart) and saturation 0.65.
ImU32 expert_colour(int expert, float value);
// A top-expert cell's brightness for its weight w: 0.3 + 0.7 w.
inline float expert_value(float weight) { return 0.3f + 0.7f * weight; }
// With "all k", each chosen expert's part of a cell at this brightness.
inline constexpr float all_k_value = 0.9f;
// A dense layer's cells, in both grids.
inline constexpr ImU32 dense_layer_colour = IM_COL32(62, 62, 68, 255);
// What no expert covers: a route not computed, or the cell past the k weights' sum (not renormalized).
inline constexpr ImU32 no_route_colour = IM_COL32(26, 26, 31, 255);

// Expert `expert`'s weight at each layer and position of the selected text
// (0 where its router did not choose it), (layers, length) row-major: the strip.
HeatmapImage expert_weights(const WindowState& state, const Session& session, int expert);

class RouterView {
public:
    // Records the grids for --layout as {"view": "router", "row": "layer",
    // "col": "position"} and {"view": "expert-strip", "expert": e, ...},
    // each knocked-out expert's button as control "bring back L.E".
    void draw(WindowState& state, Session& session, Ui& ui);

private:
    void controls(const WindowState& state, Session& session, Ui& ui);
    // The two grids in a child that scrolls sideways when the text is longer than a pixel a position.
    void grids(WindowState& state, Session& session, Ui& ui, float cell_w, float cell_h, float header);
    void routes(const WindowState& state, const Session& session, Ui& ui, ImVec2 origin, ImVec2 cell, int first,
                int end);
    void strip(const WindowState& state, const Session& session, Ui& ui, ImVec2 origin, ImVec2 cell, int first,
               int end);
    // Hover, click and right-click over the grid at `origin`; `strip_grid`: the strip's.
    void pointer(WindowState& state, Session& session, Ui& ui, ImVec2 origin, ImVec2 cell, bool strip_grid);

    int expert_ = 0;           // the strip's
    bool all_k_ = false;       // every chosen expert in a cell, not the first alone
    std::string refusal_;      // why the last knock-out was refused
    uint64_t generation_ = 0;  // what the strip's texture holds
    int b_ = -1, strip_of_ = -1;
    HeatmapTexture texture_;
};

}  // namespace headscope
