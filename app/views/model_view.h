// The model view: every layer's heads at once as thumbnails (rows are
// layers), so the kinds of heads stand out; a click opens that head large.
#pragma once
#include <vector>

#include "widgets/ui.h"

namespace headscope {

class ModelView {
public:
    // Returns true when a thumbnail was clicked (state.layer and head are then set to it).
    bool draw(WindowState& state, Session& session, Ui& ui);

    // The side of the thumbnails in an area of `area` screen pixels: one row
    // per layer filling it, but never below a readable size while the row of
    // heads fits across (the view then scrolls).
    static float map_side(const Session& session, const Ui& ui, ImVec2 area);
    // The top right corner of the thumbnails drawn last, on screen.
    ImVec2 maps_corner() const { return maps_corner_; }

private:
    std::vector<MapWidget> maps_;  // (L, NH)
    ImVec2 maps_corner_;
};

}  // namespace headscope
