#include "model_view.h"

#include <algorithm>
#include <cmath>

namespace headscope {

bool ModelView::draw(Session& session, Ui& ui) {
    const int L = static_cast<int>(session.shown.attention.layers.size()), NH = session.heads_shown();
    const float row_label = ImGui::CalcTextSize("L00").x + 8 * ui.scale;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float side = std::floor(std::min((avail.x - row_label) / NH - spacing, avail.y / L - spacing));
    if (side < 4) {
        ImGui::TextUnformatted("The window is too small for every head.");
        return false;
    }
    maps_.resize(static_cast<size_t>(L) * NH);
    bool jumped = false;
    for (int l = 0; l < L; ++l) {
        ImGui::AlignTextToFramePadding();
        ImGui::Text("L%d", l);
        for (int h = 0; h < NH; ++h) {
            ImGui::SameLine(row_label + h * (side + spacing) + ImGui::GetStyle().WindowPadding.x);
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
