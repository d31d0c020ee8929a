#include "heads_view.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace headscope {

namespace {

// Draws `widget`'s map with the tokens along its left (queries) and top
// (keys) where they fit, in a square of `side` screen pixels.
bool labelled_map(Session& session, Ui& ui, MapWidget& widget, const char* view, int layer, int head, float side,
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

// Query heads that share a key/value head (grouped-query attention) are
// drawn as one group: a line naming the KV head above the group's first map,
// a gap between groups and a thin frame around each. Without grouping the
// grid is as it always was.
void HeadsView::grid(Session& session, Ui& ui) {
    const int NH = session.heads_shown(), group = NH / session.shown.attention.NKV;
    const bool grouped = group > 1;
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float avail_h = ImGui::GetContentRegionAvail().y;
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float label = grouped ? 2 * line : line;        // the KV head's line, then the head's
    const float group_gap = grouped ? 10 * ui.scale : 0;  // besides the item spacing, between groups
    // The column count that gives the largest maps; grouped, a group fills
    // whole rows or whole groups fill a row.
    float side = 0;
    int columns = 1;
    for (int c = 1; c <= NH; ++c) {
        if (grouped && c % group && group % c) continue;
        const int rows = (NH + c - 1) / c;
        const float s = std::floor(std::min(avail_w / c - 8 - group_gap, avail_h / rows - label - 8 - group_gap));
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
    const float spacing = ImGui::GetStyle().ItemSpacing.x, pad = 3 * ui.scale;  // the frame outside the group
    if (grouped) {
        ImGui::Indent(pad);
        ImGui::Dummy(ImVec2(0, pad));
    }
    struct Frame {
        ImVec2 min, max;
    };
    std::vector<Frame> frames(static_cast<size_t>(NH / group));
    for (int h = 0; h < NH; ++h) {
        if (h % columns)
            ImGui::SameLine(0, spacing + (h % group ? 0 : group_gap));
        else if (grouped && h)
            ImGui::Dummy(ImVec2(0, group_gap));
        ImGui::BeginGroup();
        if (grouped) {
            // Drawn, not laid out: the label may run over the group's other maps' blank line.
            const ImVec2 at = ImGui::GetCursorScreenPos();
            ImGui::Dummy(ImVec2(side, ImGui::GetTextLineHeight()));
            const float width = static_cast<float>(std::min(group, columns)) * (side + spacing) - spacing;
            const std::string kv = "kv " + std::to_string(h / group) + ": heads " + std::to_string(h) + "-" +
                                   std::to_string(h + group - 1);
            const ImVec4 clip(at.x, at.y, at.x + width, at.y + ImGui::GetTextLineHeight());
            if (h % group == 0)
                ImGui::GetWindowDrawList()->AddText(nullptr, 0, at, ImGui::GetColorU32(ImGuiCol_TextDisabled),
                                                    kv.c_str(), nullptr, 0, &clip);
        }
        ImGui::TextUnformatted(head_label(session, session.layer, h).c_str());
        if (labelled_map(session, ui, maps_[h], "heads", session.layer, h, side)) {
            session.head = h;
            open_large();
        }
        ImGui::EndGroup();
        Frame& frame = frames[h / group];
        const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
        if (h % group == 0) frame = {min, max};
        frame = {ImVec2(std::min(frame.min.x, min.x), std::min(frame.min.y, min.y)),
                 ImVec2(std::max(frame.max.x, max.x), std::max(frame.max.y, max.y))};
    }
    if (!grouped) return;
    ImGui::Unindent(pad);
    for (size_t kv = 0; kv < frames.size(); ++kv) {
        const ImVec2 min(frames[kv].min.x - pad, frames[kv].min.y - pad),
            max(frames[kv].max.x + pad, frames[kv].max.y + pad);
        ImGui::GetWindowDrawList()->AddRect(min, max, group_frame_colour, 0, 0, 1);
        ui.layout.rect({{"view", "heads-group"},
                        {"layer", session.layer},
                        {"kv_head", kv},
                        {"first_head", kv * group},
                        {"heads", group}},
                       min, ImVec2(max.x - min.x, max.y - min.y));
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
    const int group = session.heads_shown() / session.shown.attention.NKV;
    if (group > 1) {
        const int first = session.head / group * group;
        ImGui::SameLine();
        ImGui::TextDisabled("kv %d: keys and values shared by heads %d-%d", session.head / group, first,
                            first + group - 1);
    }
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
