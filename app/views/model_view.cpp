#include "views/model_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "widgets/texts.h"

namespace headscope {

namespace {

// "L3", or "L3 local" / "L5 global" where the layers differ in their window.
std::string row_label(const Config& config, int layer) {
    const char* kind = !config.mixed_windows() ? "" : config.windowed(layer) ? " local" : " global";
    char label[32];
    std::snprintf(label, sizeof label, "L%d%s", layer, kind);
    return label;
}
float row_label_width(const Config& config, const Ui& ui) {
    return ImGui::CalcTextSize(config.mixed_windows() ? "L00 global" : "L00").x + 8 * ui.scale;
}
// A line of head numbers above the first layer; grouped, a gap between
// groups and a line above that naming each group's KV head.
float group_gap(int group, const Ui& ui) { return group > 1 ? 10 * ui.scale : 0; }
float header_height(int group) { return (group > 1 ? 2 : 1) * ImGui::GetTextLineHeightWithSpacing(); }

// "H7" above each of the NH columns where the widest such label fits, else
// the number alone, else every k-th number: one style for the whole row.
std::string head_number(int h, int NH, float side) {
    const std::string widest = std::to_string(NH - 1);
    if (ImGui::CalcTextSize(("H" + widest).c_str()).x <= side) {
        std::string hn = "H";
        hn += std::to_string(h);  // not "H" + ...: GCC 12 warns on it
        return hn;
    }
    const float number_width = ImGui::CalcTextSize(widest.c_str()).x + ImGui::GetStyle().ItemSpacing.x;
    const int every = std::max(1, static_cast<int>(std::ceil(number_width / side)));
    return h % every ? std::string() : std::to_string(h);
}

// Thumbnails close together, as one grid: more of the area is maps.
float thumbnail_spacing(const Ui& ui) { return std::floor(3 * ui.scale); }

}  // namespace

float ModelView::map_side(const Session& session, const Ui& ui, ImVec2 area) {
    const int L = session.maps().layers(), NH = session.heads_shown();
    const int NKV = session.shown.attention.NKV, group = NH / NKV;
    const float spacing = thumbnail_spacing(ui), readable = 40 * ui.scale;
    const float across = std::floor(
        (area.x - row_label_width(session.model().config, ui) - (NKV - 1) * group_gap(group, ui)) / NH - spacing);
    return std::min(across, std::max(readable, std::floor((area.y - header_height(group)) / L - spacing)));
}

// Grouped-query heads: a gap between the query heads of one key/value head
// and the next, and a line above the first layer naming each group's KV
// head. Without grouping the grid is as it always was.
bool ModelView::draw(WindowState& state, Session& session, Ui& ui) {
    const int L = session.maps().layers(), NH = session.heads_shown();
    const int NKV = session.shown.attention.NKV, group = NH / NKV;
    const Config& config = session.model().config;
    const float label_width = row_label_width(config, ui), spacing = thumbnail_spacing(ui);
    const float gap = group_gap(group, ui);
    const float side = map_side(session, ui, ImGui::GetContentRegionAvail());
    maps_corner_ = {};  // until the thumbnails are drawn
    if (side < 4) {
        ImGui::TextUnformatted("The window is too small for every head.");
        return false;
    }
    const auto column_x = [&](int h) {
        return ImGui::GetCursorStartPos().x + label_width + h * (side + spacing) + h / group * gap;
    };
    if (group > 1) {
        for (int kv = 0; kv < NKV; ++kv) {
            if (kv)
                ImGui::SameLine(column_x(kv * group));
            else
                ImGui::SetCursorPosX(column_x(0));
            text_disabled(ui, {{"view", "model-group"}, {"kv_head", kv}, {"first_head", kv * group}, {"heads", group}},
                          "kv %d", kv);
        }
    }
    for (int h = 0; h < NH; ++h) {
        const std::string label = head_number(h, NH, side);
        if (h)
            ImGui::SameLine(column_x(h));
        else
            ImGui::SetCursorPosX(column_x(0));
        const nlohmann::ordered_json fields = {{"view", "model-head-label"}, {"head", h}, {"text", label}};
        text(ui, label.empty() ? nullptr : fields, "%s", label.c_str());
    }
    maps_.resize(static_cast<size_t>(L) * NH);
    maps_corner_ = ImVec2(ImGui::GetWindowPos().x + column_x(NH - 1) + side, ImGui::GetCursorScreenPos().y);
    bool jumped = false;
    ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(spacing, spacing));  // between the rows too
    for (int l = 0; l < L; ++l) {
        ImGui::AlignTextToFramePadding();
        const std::string label = row_label(config, l);
        text(ui, {{"view", "model-layer"}, {"layer", l}, {"text", label}}, "%s", label.c_str());
        for (int h = 0; h < NH; ++h) {
            ImGui::SameLine(column_x(h));
            if (maps_[static_cast<size_t>(l) * NH + h].draw_thumbnail(state, session, ui, "model", l, h, side)) {
                state.layer = l;
                state.head = h;
                jumped = true;
            }
        }
    }
    ImGui::PopStyleVar();
    return jumped;
}

}  // namespace headscope
