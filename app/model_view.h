// The model view: every layer's heads at once as thumbnails (rows are
// layers), so the kinds of heads stand out; a click opens that head large.
#pragma once
#include <vector>

#include "ui.h"

namespace headscope {

class ModelView {
public:
    // Returns true when a thumbnail was clicked (session.layer and head are then set to it).
    bool draw(Session& session, Ui& ui);

private:
    std::vector<MapWidget> maps_;  // (L, NH)
};

}  // namespace headscope
