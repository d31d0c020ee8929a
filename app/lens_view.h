// The logit-lens tab: what each layer's residual stream already predicts, as
// a layers x positions grid of the selected text. Each cell is the top-1 next
// token read through the final norm and the output embedding after that
// layer (its text drawn where it fits), coloured by its probability with the
// colormap; hovering shows the top Session::lens_k.
#pragma once
#include <cstdint>

#include "ui.h"

namespace headscope {

// The selected text's top-1 lens probabilities, (layers, length) row-major:
// what the grid's cells are coloured by.
HeatmapImage lens_probabilities(const Session& session);
// A cell's token text is drawn dark above this probability (the colormap's bright end), else light.
inline constexpr float lens_dark_text_above = 0.6f;

class LensView {
public:
    // Records the grid for --layout as {"view": "lens", "row": "layer",
    // "col": "position"}, cell (slot, t) showing top-1 probability p.
    void draw(Session& session, Ui& ui);

private:
    struct Key {  // what the texture shows, and at which size
        uint64_t generation = 0;
        int b = -1, width = 0, height = 0;
        Colormap colormap{};
        bool operator==(const Key&) const = default;
    };
    Key key_;
    HeatmapTexture texture_;
};

}  // namespace headscope
