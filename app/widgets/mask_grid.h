// A grid of mask cells, each coloured by whether its query may attend to its
// key, recording itself for --layout: the mask tab's panels (mask_panels.h)
// draw every mask with it.
#pragma once
#include <imgui.h>

#include <algorithm>

#include "widgets/ui.h"

namespace headscope {

// The mask colours, in this one place: every mask grid and the legend use them.
inline constexpr ImU32 mask_allowed_colour = IM_COL32(236, 190, 72, 255);   // the query may attend to the key
inline constexpr ImU32 mask_blocked_colour = IM_COL32(52, 58, 70, 255);     // masked
inline constexpr ImU32 mask_empty_row_colour = IM_COL32(235, 80, 60, 255);  // outlines a row with nothing to attend to

// A mask grid as drawn.
struct DrawnGrid {
    ImVec2 origin;            // the top left
    int query = 0, key = -1;  // the cell under the mouse; key -1 when none
};

// Draws rows x cols mask cells of `cell` pixels from the cursor, coloured by
// allowed(query, key), where row r is query first_query + r; records the
// grid for --layout as mask `mask` of text b.
template <typename Allowed>
DrawnGrid mask_grid(Ui& ui, const char* mask, int b, int first_query, int rows, int cols, ImVec2 cell,
                    Allowed allowed) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    DrawnGrid grid{ImGui::GetCursorScreenPos()};
    // A one-pixel gap between cells large enough to show it; smaller cells
    // touch, and a row's run of same-coloured cells is drawn as one rectangle.
    const bool gaps = std::min(cell.x, cell.y) >= 8;
    const ImVec2 filled(gaps ? cell.x - 1 : cell.x, gaps ? cell.y - 1 : cell.y);
    for (int r = 0; r < rows; ++r) {
        const int i = first_query + r;
        const float top = grid.origin.y + r * cell.y;
        for (int j = 0; j < cols;) {
            const bool visible = allowed(i, j);
            int end = j + 1;
            while (!gaps && end < cols && allowed(i, end) == visible) ++end;
            draw->AddRectFilled(ImVec2(grid.origin.x + j * cell.x, top),
                                ImVec2(grid.origin.x + (end - 1) * cell.x + filled.x, top + filled.y),
                                visible ? mask_allowed_colour : mask_blocked_colour);
            j = end;
        }
    }
    ui.layout.grid(
        {{"view", "mask"}, {"mask", mask}, {"b", b}, {"row", "query"}, {"first_row", first_query}, {"col", "key"}},
        {grid.origin, cell, filled, rows, cols});
    ImGui::Dummy(ImVec2(cols * cell.x, rows * cell.y));
    if (ui.tooltips && ImGui::IsItemHovered()) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        grid.query = first_query + std::clamp(static_cast<int>((mouse.y - grid.origin.y) / cell.y), 0, rows - 1);
        grid.key = std::clamp(static_cast<int>((mouse.x - grid.origin.x) / cell.x), 0, cols - 1);
    }
    return grid;
}

}  // namespace headscope
