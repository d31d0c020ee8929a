#include "model_view.h"

#include <algorithm>
#include <cmath>

namespace headscope {

// Grouped-query heads: a gap between the query heads of one key/value head
// and the next, and a line above the first layer naming each group's KV
// head. Without grouping the grid is as it always was.
bool ModelView::draw(Session& session, Ui& ui) {
    const int L = static_cast<int>(session.shown.attention.layers.size()), NH = session.heads_shown();
    const int NKV = session.shown.attention.NKV, group = NH / NKV;
    const float row_label = ImGui::CalcTextSize("L00").x + 8 * ui.scale;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float group_gap = group > 1 ? 10 * ui.scale : 0;
    const float header = group > 1 ? ImGui::GetTextLineHeightWithSpacing() : 0;
    const float side = std::floor(
        std::min((avail.x - row_label - (NKV - 1) * group_gap) / NH - spacing, (avail.y - header) / L - spacing));
    if (side < 4) {
        ImGui::TextUnformatted("The window is too small for every head.");
        return false;
    }
    const auto column_x = [&](int h) {
        return row_label + h * (side + spacing) + h / group * group_gap + ImGui::GetStyle().WindowPadding.x;
    };
    if (group > 1) {
        for (int kv = 0; kv < NKV; ++kv) {
            if (kv)
                ImGui::SameLine(column_x(kv * group));
            else
                ImGui::SetCursorPosX(column_x(0));
            ImGui::TextDisabled("kv %d", kv);
            ui.layout.item({{"view", "model-group"}, {"kv_head", kv}, {"first_head", kv * group}, {"heads", group}});
        }
    }
    maps_.resize(static_cast<size_t>(L) * NH);
    bool jumped = false;
    for (int l = 0; l < L; ++l) {
        ImGui::AlignTextToFramePadding();
        ImGui::Text("L%d", l);
        for (int h = 0; h < NH; ++h) {
            ImGui::SameLine(column_x(h));
            if (maps_[static_cast<size_t>(l) * NH + h].draw(session, ui, "model", l, h, side)) {
                session.layer = l;
                session.head = h;
                jumped = true;
            }
        }
    }
    return jumped;
}

}  // namespace headscope
