// The logit-lens tab: what each layer's residual stream already predicts, as
// a layers x positions grid of the selected text. Each cell is the top-1 next
// token read through the final norm and the output embedding after that
// layer (its text drawn where it fits), coloured by its probability with the
// colormap; hovering shows the top Session::lens_k. At first every position
// fits the width (a long text: thin columns, every k-th labelled); the wheel
// zooms until each cell's token can be read, and the grid scrolls sideways.
#pragma once
#include <cstdint>
#include <vector>

#include "widgets/ui.h"

namespace headscope {

// What the grid shows: each returned layer's top tokens at the selected
// text's positions [first, first + count): a short text's every position
// (the shown forward's lens); a long text's positions asked (LongLens's
// answer; count 0 before one).
struct LensRows {
    const std::vector<int>* layers = nullptr;
    int first = 0, count = 0, k = 0;
    const Prediction* tops = nullptr;  // slot s, position t: at tops + (s * slot_stride + t - first) * k
    size_t slot_stride = 0;
    uint64_t answered = 0;  // a long text's: which answer (LongLens::answered)
    const Prediction* at(int slot, int t) const { return tops + (slot * slot_stride + t - first) * k; }
    int layer_count() const { return static_cast<int>(layers->size()); }
};
LensRows lens_rows(const WindowState& state, const Session& session);

// The lens rows' top-1 probabilities, (layers, count) row-major: what the grid's cells are coloured by.
HeatmapImage lens_probabilities(const WindowState& state, const Session& session);
// A cell's token text is drawn dark above this probability (the colormap's bright end), else light.
inline constexpr float lens_dark_text_above = 0.6f;

class LensView {
public:
    // Records the grid for --layout as {"view": "lens", "row": "layer",
    // "col": "position"}, cell (slot, t) showing top-1 probability p, and
    // each cell's token where it is written as {"view": "lens-top", "layer",
    // "position", "id", "p", "text"}.
    // A long text's lens is asked of the session for the positions in view:
    // the query row (clicked, --query, else the last) and those before it that fit the width.
    void draw(WindowState& state, Session& session, Ui& ui);

private:
    void grid(WindowState& state, const Session& session, const LensRows& rows, Ui& ui, ImVec2 cell, float header,
              float fit_w);
    // Asks the session for a long text's lens of the positions that fit `width`; false (and says why) until one is
    // answered.
    bool ask_long_lens(const WindowState& state, Session& session, Ui& ui, float width);
    void zoom_and_pan(float fit_w, float mouse_x);

    float zoom_ = 1;           // cell width over the width that fits every position
    uint64_t generation_ = 0;  // what the weights texture holds
    int b_ = -1;
    uint64_t answered_ = 0;  // a long text's: the lens answer it holds (LongLens::answered)
    HeatmapTexture texture_;
};

}  // namespace headscope
