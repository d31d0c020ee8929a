// The controls' "compare with" line: see controls_view.h.
#include <algorithm>
#include <cmath>

#include "views/controls_view.h"
#include "widgets/controls.h"

namespace headscope {

// A second text (B), and the switch that draws every map as B - A, which
// needs as many tokens in both.
void compare_box(WindowState& state, Session& s, Ui& ui) {
    const float diff_w = std::floor(110 * ui.scale);
    ImGui::SetNextItemWidth(std::max(100 * ui.scale, ImGui::GetContentRegionAvail().x - diff_w));
    if (text_input(ui, "##compare", "compare with: a second text (B)", &state.compare_text, "compare"))
        s.submit_compare();
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip("its predictions beside the text's; of as many tokens, the diff view and patching");
    ImGui::SameLine();
    ImGui::BeginDisabled(!s.same_lengths());
    checkbox(ui, "diff B - A", &state.diff_shown, "diff");
    ImGui::EndDisabled();
    if (ui.tooltips && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip(s.same_lengths() ? "draw every map as the compare text's less the text's"
                                           : "the diff needs a compare text of as many tokens as the text");
}

}  // namespace headscope
