// The heads view: every head of the selected layer as a grid of maps, and
// one head large, with token labels, zoom (mouse wheel) and pan (drag).
#pragma once
#include <vector>

#include "ui.h"

namespace headscope {

class HeadsView {
public:
    void draw(Session& session, Ui& ui);
    // Shows session.head large (a click on a map, the model view, --head).
    void open_large() { large_ = true; }

private:
    void grid(Session& session, Ui& ui);
    void large(Session& session, Ui& ui);

    std::vector<MapWidget> maps_;
    MapWidget large_map_;
    bool large_ = false;
    MapRegion region_;  // the zoomed part of the large map
};

// Draws `widget`'s map with the tokens along its left (queries) and top
// (keys) where they fit, in a square of `side` screen pixels.
bool labelled_map(const Session& session, Ui& ui, MapWidget& widget, const char* view, int layer, int head,
                  float side, const MapRegion& region = {}, bool full_resolution = false);

}  // namespace headscope
