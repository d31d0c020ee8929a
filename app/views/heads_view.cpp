#include "views/heads_view.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// The whole token of a label under the mouse.
void label_tooltip(const Ui& ui, ImVec2 min, ImVec2 max, int t, const std::string& token) {
    if (ui.tooltips && ImGui::IsWindowHovered() && ImGui::IsMouseHoveringRect(min, max))
        ImGui::SetTooltip("token %d '%s'", t, token.c_str());
}

// A token label as recorded for --layout: the token's text and what is shown of it.
nlohmann::ordered_json label_fields(const char* view, int layer, int head, int t, const std::string& token,
                                    const std::string& shown) {
    return {{"view", "label"}, {"of", view},    {"layer", layer}, {"head", head},
            {"token", t},      {"text", token}, {"shown", shown}};
}

// Draws `widget`'s map in a square of `side` screen pixels with the tokens
// along its left (queries) and, turned to read upwards, along its top
// (keys), in a smaller font (down to 60% of the window's) where rows are
// short; where even that does not fit every row, every k-th token is
// labelled (zoom the large map for all of them). Both bands are as wide as
// the longest label, up to a fifth of the square; longer labels end in an
// ellipsis, and the whole token shows on hover. A learned sink's column
// (map_columns) is labelled "sink" where it is as wide as a label.
bool labelled_map(WindowState& state, Session& session, Ui& ui, MapWidget& widget, const char* view, int layer,
                  int head, float side, const TextureRegion& region = {}) {
    const ShownMaps maps = session.maps();
    const int rows = maps.rows, cols = maps.cols;
    const float rows_shown = std::max((region.v1 - region.v0) * rows, (region.u1 - region.u0) * cols);
    const float gap = 4 * ui.scale;
    // The map is at least four fifths of the square; a label every `every` rows (or columns).
    const float row = side * 4 / 5 / rows_shown, smallest = 0.6f * ImGui::GetFontSize();
    const int every = row >= smallest ? 1 : static_cast<int>(std::ceil(smallest / row));
    const float line = std::min(ImGui::GetFontSize(), std::max(smallest, std::floor(row)));
    const bool labels = side >= 6 * smallest;  // a map too small for any label has none
    const int first_row = static_cast<int>(region.v0 * rows),
              last_row = std::min(rows, static_cast<int>(std::ceil(region.v1 * rows)));
    const int first_col = static_cast<int>(region.u0 * cols),
              last_col = std::min(cols, static_cast<int>(std::ceil(region.u1 * cols)));
    const auto text_width = [&](const std::string& text) {
        return ImGui::GetFont()->CalcTextSizeA(line, FLT_MAX, 0, text.c_str()).x;
    };
    float widest = 0;
    for (int i = first_row; labels && i < last_row; i += every)
        widest = std::max(widest, text_width(query_token(session, maps, i)));
    for (int j = first_col; labels && j < last_col; j += every)
        widest = std::max(widest, text_width(key_token(session, maps, j)));
    const float band = std::min(widest + gap, std::floor(side / 5));
    const float map_side = labels ? side - band : side;
    const ImVec2 start = ImGui::GetCursorScreenPos();
    if (labels) {
        ImDrawList* draw = ImGui::GetWindowDrawList();
        const MapColumns columns = map_columns(maps, ui, map_side);
        const float cell_w = (map_side - columns.keys_x) / ((region.u1 - region.u0) * cols),
                    cell_h = map_side / ((region.v1 - region.v0) * rows);
        const ImU32 colour = ImGui::GetColorU32(ImGuiCol_Text);
        const ImVec2 map_origin(start.x + band, start.y + band);
        const float keys_left = map_origin.x + columns.keys_x;
        draw->PushClipRect(start, ImVec2(start.x + side, start.y + side), true);
        for (int i = first_row; i < last_row; ++i) {
            if (i % every) continue;
            // Centred on its row, or from its top where the label is taller.
            const float y = map_origin.y + (i - region.v0 * rows) * cell_h + std::max(0.f, (cell_h - line) / 2);
            if (y < map_origin.y) continue;  // a row the zoom cut in half
            const std::string token = query_token(session, maps, i);
            const std::string label = ellipsized(token, line, band - gap);
            const float width = text_width(label);
            const ImVec2 at(map_origin.x - gap - width, y);
            drawn_text(ui, label_fields(view, layer, head, i, token, label), draw, line, at, colour, label, at,
                       ImVec2(width, line));
            label_tooltip(ui, at, ImVec2(map_origin.x, y + line), i, token);
        }
        for (int j = first_col; j < last_col; ++j) {
            if (j % every) continue;
            const float x = keys_left + (j - region.u0 * cols) * cell_w + std::max(0.f, (cell_w - line) / 2);
            if (x < keys_left) continue;
            const std::string token = key_token(session, maps, j);
            const std::string label = ellipsized(token, line, band - gap);
            const float height = text_width(label);
            const ImVec2 top_left(x, map_origin.y - gap - height);
            upward_text(ui, label_fields(view, layer, head, j, token, label), draw, line, ImVec2(x, map_origin.y - gap),
                        colour, label, top_left, ImVec2(line, height));
            label_tooltip(ui, top_left, ImVec2(x + line, map_origin.y), j, token);
        }
        if (columns.sink >= line) {
            const std::string label = ellipsized("sink", line, band - gap);
            const float x = map_origin.x + (columns.sink - line) / 2, height = text_width(label);
            upward_text(ui, {{"view", "sink-label"}, {"of", view}, {"layer", layer}, {"head", head}, {"shown", label}},
                        draw, line, ImVec2(x, map_origin.y - gap), ImGui::GetColorU32(ImGuiCol_TextDisabled), label,
                        ImVec2(x, map_origin.y - gap - height), ImVec2(line, height));
        }
        draw->PopClipRect();
        ImGui::SetCursorScreenPos(map_origin);
    }
    const bool clicked = widget.draw(state, session, ui, view, layer, head, map_side, region);
    ImGui::SetCursorScreenPos(start);
    dummy(ui, {{"view", "map"}, {"of", view}, {"layer", layer}, {"head", head}}, ImVec2(side, side));
    return clicked;
}

// A map's title: a checkbox that knocks the head out of the forward, the
// head's label and, with the first key hidden, its sink mass (with a learned
// sink, named its key-0 mass: the learned sink has its own column); all within
// `width` (a label longer ends in an ellipsis, whole on hover).
void head_title(const WindowState& state, Session& session, Ui& ui, int layer, int head, float width) {
    bool out = state.options.knocks_out({layer, head});
    ImGui::PushID(layer * 4096 + head);
    ImGui::PushStyleVar(ImGuiStyleVar_FramePadding, ImVec2(0, 0));
    ImGui::BeginDisabled(session.maps().kind != AttentionKind::decoder);  // knocking out is of the decoder's heads
    if (checkbox(ui, "##out", &out, {{"view", "knock-out"}, {"layer", layer}, {"head", head}}, "out"))
        session.toggle_knock_out(layer, head);
    ImGui::EndDisabled();
    ImGui::PopStyleVar();
    ImGui::PopID();
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip(out ? "knocked out: click to bring the head back" : "knock this head out of the forward");
    ImGui::SameLine(0, 4 * ui.scale);
    std::string label = head_label(session, layer, head);
    if (const ShownMaps maps = session.maps(); state.shading.hide_first_key && maps.kind == AttentionKind::decoder) {
        char sink[32];
        std::snprintf(sink, sizeof sink, session.model().config.attention_sinks ? "  key 0 %.2f" : "  sink %.2f",
                      sink_mass(*maps.result, layer, maps.b, head, maps.query_length));
        label += sink;
    }
    const std::string shown = ellipsized(label, ImGui::GetFontSize(), width - ImGui::GetFrameHeight() - 4 * ui.scale);
    text(ui, {{"view", "head-title"}, {"layer", layer}, {"head", head}, {"text", label}, {"shown", shown}}, "%s",
         shown.c_str());
    if (ui.tooltips && shown != label && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", label.c_str());
}

// The grid of maps that fills an area: the side of each map with its
// labels, and how many maps across.
struct GridFit {
    float side = 0;
    int columns = 1;
};

// Grouped, the KV head's line above each head's.
float title_height(bool grouped) { return (grouped ? 2 : 1) * ImGui::GetTextLineHeightWithSpacing(); }
float group_gap(bool grouped, const Ui& ui) { return grouped ? 10 * ui.scale : 0; }  // besides the item spacing

// The column count that gives the largest maps; grouped, a group fills
// whole rows or whole groups fill a row.
GridFit fit_grid(int NH, int group, const Ui& ui, ImVec2 area) {
    const bool grouped = group > 1;
    const float label = title_height(grouped), gap = group_gap(grouped, ui);
    GridFit fit;
    for (int c = 1; c <= NH; ++c) {
        if (grouped && c % group && group % c) continue;
        const int rows = (NH + c - 1) / c;
        const float s = std::floor(std::min(area.x / c - 8 - gap, area.y / rows - label - 8 - gap));
        if (s > fit.side) fit = {s, c};
    }
    return fit;
}

}  // namespace

void HeadsView::draw(WindowState& state, Session& session, Ui& ui) {
    maps_corner_ = {};  // until maps are drawn
    if (large_)
        large(state, session, ui);
    else
        grid(state, session, ui);
}

float HeadsView::map_side(const Session& session, const Ui& ui, ImVec2 area) const {
    if (large_) return std::min(area.x, area.y - ImGui::GetFrameHeightWithSpacing());
    const int NH = session.heads_shown();
    return fit_grid(NH, NH / session.shown.attention.NKV, ui, area).side;
}

// Query heads that share a key/value head (grouped-query attention) are
// drawn as one group: a line naming the KV head above the group's first map,
// a gap between groups and a thin frame around each. Without grouping the
// grid is as it always was.
void HeadsView::grid(WindowState& state, Session& session, Ui& ui) {
    const int NH = session.heads_shown(), group = NH / session.shown.attention.NKV;
    const bool grouped = group > 1;
    const auto [side, columns] = fit_grid(NH, group, ui, ImGui::GetContentRegionAvail());
    const float gap = group_gap(grouped, ui);
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
            ImGui::SameLine(0, spacing + (h % group ? 0 : gap));
        else if (grouped && h)
            ImGui::Dummy(ImVec2(0, gap));
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
        head_title(state, session, ui, state.layer, h, side);
        if (labelled_map(state, session, ui, maps_[h], "heads", state.layer, h, side)) {
            state.head = h;
            open_large();
        }
        ImGui::EndGroup();
        Frame& frame = frames[h / group];
        const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
        if (h % group == 0) frame = {min, max};
        if (h == 0) maps_corner_.y = min.y;
        maps_corner_.x = std::max(maps_corner_.x, max.x);
        frame = {ImVec2(std::min(frame.min.x, min.x), std::min(frame.min.y, min.y)),
                 ImVec2(std::max(frame.max.x, max.x), std::max(frame.max.y, max.y))};
    }
    if (!grouped) return;
    ImGui::Unindent(pad);
    for (size_t kv = 0; kv < frames.size(); ++kv) {
        const ImVec2 min(frames[kv].min.x - pad, frames[kv].min.y - pad),
            max(frames[kv].max.x + pad, frames[kv].max.y + pad);
        frame(ui,
              {{"view", "heads-group"},
               {"layer", state.layer},
               {"kv_head", kv},
               {"first_head", kv * group},
               {"heads", group}},
              ImGui::GetWindowDrawList(), min, max, group_frame_colour);
    }
}

void HeadsView::large(WindowState& state, Session& session, Ui& ui) {
    if (ImGui::Button("< all heads") ||
        (!ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))) {
        large_ = false;
        return;
    }
    ImGui::SameLine();
    head_title(state, session, ui, state.layer, state.head, ImGui::GetContentRegionAvail().x);
    const int group = session.heads_shown() / session.shown.attention.NKV;
    if (group > 1) {
        const int first = state.head / group * group;
        ImGui::SameLine();
        ImGui::TextDisabled("kv %d: keys and values shared by heads %d-%d", state.head / group, first,
                            first + group - 1);
    }
    ImGui::SameLine();
    ImGui::TextDisabled("wheel: zoom, drag: pan, double-click: whole map");
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float side = std::floor(std::min(avail.x, avail.y) - 4);
    if (side < 16) return;
    const ImVec2 start = ImGui::GetCursorScreenPos();
    labelled_map(state, session, ui, large_map_, "large", state.layer, state.head, side, region_);
    maps_corner_ = ImVec2(start.x + side, start.y);

    // Zoom about the mouse, pan by dragging; the region stays inside the map.
    ImGuiIO& io = ImGui::GetIO();
    const bool hovered = ImGui::IsMouseHoveringRect(start, ImVec2(start.x + side, start.y + side));
    const float width = region_.u1 - region_.u0;
    float zoomed = width;
    if (hovered && io.MouseWheel != 0)
        zoomed = std::clamp(width * std::pow(0.8f, io.MouseWheel), std::min(1.f, 4.f / session.maps().rows), 1.f);
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
