#include "heads_view.h"

#include <algorithm>
#include <cmath>

namespace headscope {

namespace {

// Draws `widget`'s map with the tokens along its left (queries) and top
// (keys) where they fit, in a square of `side` screen pixels.
bool labelled_map(const Session& session, Ui& ui, MapWidget& widget, const char* view, int layer, int head, float side,
                  const MapRegion& region = {}) {
    const int T = session.shown.attention.T;
    const float line = ImGui::GetTextLineHeight();
    const float rows_shown = (region.v1 - region.v0) * T;
    // Labels only when a row is tall enough for a line of text: queries on
    // the left, keys above in two staggered rows so neighbours do not collide.
    const float left = 90 * ui.scale, top = 2 * line + 4 * ui.scale;
    const bool labels = (side - left) / rows_shown >= line;
    const float map_side = labels ? side - std::max(left, top) : side;
    const ImVec2 start = ImGui::GetCursorScreenPos();
    if (labels) {
        ImDrawList* draw = ImGui::GetWindowDrawList();
        const float cell_w = map_side / ((region.u1 - region.u0) * T), cell_h = map_side / rows_shown;
        const ImU32 colour = ImGui::GetColorU32(ImGuiCol_Text);
        const ImVec2 map_origin(start.x + left, start.y + top);
        const int first_row = static_cast<int>(region.v0 * T),
                  last_row = std::min(T, static_cast<int>(std::ceil(region.v1 * T)));
        for (int i = first_row; i < last_row; ++i) {
            const float y = map_origin.y + (i - region.v0 * T) * cell_h + (cell_h - line) / 2;
            const ImVec4 clip(start.x, std::max(y, map_origin.y), map_origin.x - 4, map_origin.y + map_side);
            draw->AddText(nullptr, 0, ImVec2(start.x, y), colour, token_label(session, i).c_str(), nullptr, 0, &clip);
        }
        const int first_col = static_cast<int>(region.u0 * T),
                  last_col = std::min(T, static_cast<int>(std::ceil(region.u1 * T)));
        for (int j = first_col; j < last_col; ++j) {
            const float x = map_origin.x + (j - region.u0 * T) * cell_w;
            const float y = start.y + (j % 2 ? line : 0);
            const ImVec4 clip(std::max(x, map_origin.x), y, std::min(x + 2 * cell_w, map_origin.x + map_side),
                              y + line);
            draw->AddText(nullptr, 0, ImVec2(x, y), colour, token_label(session, j).c_str(), nullptr, 0, &clip);
        }
        ImGui::SetCursorScreenPos(map_origin);
    }
    const bool clicked = widget.draw(session, ui, view, layer, head, map_side, region);
    ImGui::SetCursorScreenPos(start);
    ImGui::Dummy(ImVec2(side, side));
    return clicked;
}

}  // namespace

void HeadsView::draw(Session& session, Ui& ui) {
    if (large_)
        large(session, ui);
    else
        grid(session, ui);
}

void HeadsView::grid(Session& session, Ui& ui) {
    const int NH = session.heads_shown();
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float avail_h = ImGui::GetContentRegionAvail().y;
    const float label = ImGui::GetTextLineHeightWithSpacing();
    // The column count that gives the largest maps.
    float side = 0;
    int columns = 1;
    for (int c = 1; c <= NH; ++c) {
        const int rows = (NH + c - 1) / c;
        const float s = std::floor(std::min(avail_w / c - 8, avail_h / rows - label - 8));
        if (s > side) {
            side = s;
            columns = c;
        }
    }
    if (side < 8) {
        ImGui::TextUnformatted("The window is too small for this many heads: the model tab shows them smaller.");
        return;
    }
    maps_.resize(static_cast<size_t>(NH));
    for (int h = 0; h < NH; ++h) {
        if (h % columns) ImGui::SameLine();
        ImGui::BeginGroup();
        ImGui::TextUnformatted(head_label(session, session.layer, h).c_str());
        if (labelled_map(session, ui, maps_[h], "heads", session.layer, h, side)) {
            session.head = h;
            open_large();
        }
        ImGui::EndGroup();
    }
}

void HeadsView::large(Session& session, Ui& ui) {
    if (ImGui::Button("< all heads") ||
        (!ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))) {
        large_ = false;
        return;
    }
    ImGui::SameLine();
    ImGui::TextUnformatted(head_label(session, session.layer, session.head).c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("wheel: zoom, drag: pan, double-click: whole map");
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float side = std::floor(std::min(avail.x, avail.y) - 4);
    if (side < 16) return;
    const ImVec2 start = ImGui::GetCursorScreenPos();
    labelled_map(session, ui, large_map_, "large", session.layer, session.head, side, region_);

    // Zoom about the mouse, pan by dragging; the region stays inside the map.
    ImGuiIO& io = ImGui::GetIO();
    const bool hovered = ImGui::IsMouseHoveringRect(start, ImVec2(start.x + side, start.y + side));
    const float width = region_.u1 - region_.u0;
    float zoomed = width;
    if (hovered && io.MouseWheel != 0)
        zoomed = std::clamp(width * std::pow(0.8f, io.MouseWheel), 4.f / session.shown.attention.T, 1.f);
    float u = region_.u0, v = region_.v0;
    if (zoomed != width) {
        const float fx = std::clamp((io.MousePos.x - start.x) / side, 0.f, 1.f);
        const float fy = std::clamp((io.MousePos.y - start.y) / side, 0.f, 1.f);
        u += fx * (width - zoomed);
        v += fy * (width - zoomed);
    }
    if (hovered && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
        u -= io.MouseDelta.x / side * zoomed;
        v -= io.MouseDelta.y / side * zoomed;
    }
    if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) u = v = 0, zoomed = 1;
    u = std::clamp(u, 0.f, 1 - zoomed);
    v = std::clamp(v, 0.f, 1 - zoomed);
    region_ = {u, v, u + zoomed, v + zoomed};
}

}  // namespace headscope
