// The heads view: every head of the selected layer as a grid of maps, and
// one head large, with token labels, zoom (mouse wheel) and pan (drag).
#pragma once
#include <vector>

#include "widgets/ui.h"

namespace headscope {

class HeadsView {
public:
    void draw(WindowState& state, Session& session, Ui& ui);
    // The side of the maps this view draws in an area of `area` screen
    // pixels (the main view places the predictions panel by it).
    float map_side(const Session& session, const Ui& ui, ImVec2 area) const;
    // Shows state.head large (a click on a map, the model view, --head).
    void open_large() {
        large_ = true;
        region_ = {};  // a new head opens whole
    }
    bool large() const { return large_; }
    // The top right corner of the maps drawn last, on screen (the main view
    // fills what lies beyond); x is 0 when none were drawn.
    ImVec2 maps_corner() const { return maps_corner_; }

private:
    void grid(WindowState& state, Session& session, Ui& ui);
    void large(WindowState& state, Session& session, Ui& ui);

    std::vector<MapWidget> maps_;
    MapWidget large_map_;
    bool large_ = false;
    TextureRegion region_;  // the zoomed part of the large map
    ImVec2 maps_corner_;
};

}  // namespace headscope
