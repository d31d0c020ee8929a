// The tooltips of a map cell under the mouse: what the map and the shown
// forward know of it, why the head attends there (the neuron view), and a
// learned sink's column.
#pragma once
#include "widgets/ui.h"

namespace headscope {

// The query and key under the mouse, the weight, the row's entropy and the
// head's probe scores; what more the shown forward knows of a decoder's cell.
void map_tooltip(Ui& ui, const WindowState& state, const Session& session, const ShownMaps& maps, int layer, int head,
                 int i, int j);

// The sink column's hover: query i's share of the softmax the head's learned
// sink took, and the sink's logit where the heads are the model's own.
void sink_tooltip(Ui& ui, const Session& session, const ShownMaps& maps, int layer, int head, int i);

}  // namespace headscope
