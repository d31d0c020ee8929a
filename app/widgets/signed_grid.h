// A grid of signed values coloured blue below zero and red above (the
// effects tab's effects and attribution grids), recording itself for
// --layout with its values.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "state/colormap.h"
#include "widgets/ui.h"

namespace headscope {

// The colour of a signed value `v` in [-1, 1] (clamped): colormap.h's
// diverging colours, as the diverging colormap draws (1 + v) / 2.
ImU32 diverging_colour(float v);

// The largest magnitude of the finite values: a grid's colour scale.
float largest_magnitude(const std::vector<float>& values);

// "L3", "H11": a grid's row and column labels.
std::string indexed(char prefix, int i);

// A grid of signed values, `rows` x `cols`, `cell` pixels a side, with row
// labels "L0".. and the column labels given, coloured by value / scale;
// NaN cells crossed; where `marked` is given, the cells it flags 1 carry a
// small triangle of the text colour in their top-left corner (the effects
// grid's estimated cells). Records itself for --layout as view `name` with
// its values (and `marked`). Returns the cell under the mouse as (row, col),
// or (-1, -1).
std::pair<int, int> signed_grid(Ui& ui, const char* name, const std::vector<float>& values, int rows, int cols,
                                const std::vector<std::string>& col_labels, float cell, float scale,
                                const std::vector<uint8_t>& marked = {});

}  // namespace headscope
