// The logit-lens tab: what each layer's residual stream already predicts, as
// a layers x positions grid of the selected text. Each cell is the top-1 next
// token read through the final norm and the output embedding after that
// layer (its text drawn where it fits), coloured by its probability with the
// colormap; hovering shows the top Session::lens_k. At first every position
// fits the width (a long text: thin columns, every k-th labelled); the wheel
// zooms until each cell's token can be read, and the grid scrolls sideways.
#pragma once
#include <cstdint>

#include "widgets/ui.h"

namespace headscope {

// The selected text's top-1 lens probabilities, (layers, length) row-major:
// what the grid's cells are coloured by.
HeatmapImage lens_probabilities(const WindowState& state, const Session& session);
// A cell's token text is drawn dark above this probability (the colormap's bright end), else light.
inline constexpr float lens_dark_text_above = 0.6f;

class LensView {
public:
    // Records the grid for --layout as {"view": "lens", "row": "layer",
    // "col": "position"}, cell (slot, t) showing top-1 probability p.
    void draw(WindowState& state, const Session& session, Ui& ui);

private:
    void grid(WindowState& state, const Session& session, Ui& ui, ImVec2 cell, float header, float fit_w);
    void zoom_and_pan(float fit_w, float mouse_x);

    float zoom_ = 1;           // cell width over the width that fits every position
    uint64_t generation_ = 0;  // what the weights texture holds
    int b_ = -1;
    HeatmapTexture texture_;
};

}  // namespace headscope
