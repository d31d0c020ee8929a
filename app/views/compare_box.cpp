// The controls' "compare with" line: see controls_view.h.
#include <algorithm>
#include <cmath>

#include "views/controls_view.h"
#include "widgets/controls.h"

namespace headscope {

// A second text (B) (an encoder's with its pair's second text), and the
// switch that draws every map as B - A, which needs as many tokens in both;
// an encoder–decoder's second source and its target instead (its maps have no diff view).
void compare_box(WindowState& state, Session& s, Ui& ui) {
    const bool seq2seq = s.model().config.is_encoder_decoder(), encoder = s.model().config.is_encoder();
    const float diff_w = std::floor(110 * ui.scale), spacing = ImGui::GetStyle().ItemSpacing.x;
    const float width = std::max(100 * ui.scale, ImGui::GetContentRegionAvail().x - (seq2seq ? 0 : diff_w));
    ImGui::SetNextItemWidth(seq2seq || encoder ? std::floor(width / 2 - spacing) : width);
    if (text_input(ui, "##compare", seq2seq ? "compare with: a second source (B)" : "compare with: a second text (B)",
                   &state.compare_text, "compare"))
        s.submit_compare();
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip("its predictions beside the text's; of as many tokens, the diff view and patching");
    ImGui::SameLine();
    if (seq2seq) {
        ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x);
        if (text_input(ui, "##compare-target", "B's target: none, the start token alone", &state.compare_target,
                       "compare target"))
            s.submit_compare();
        if (ui.tooltips && ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "the compare source's target; patching needs as many target tokens as the text's, and "
                "sources of as many tokens");
        return;
    }
    if (encoder) {
        ImGui::SetNextItemWidth(std::floor(width / 2 - spacing));
        if (text_input(ui, "##compare-pair", "B's pair: none, one text", &state.compare_pair, "compare pair"))
            s.submit_compare();
        if (ui.tooltips && ImGui::IsItemHovered())
            ImGui::SetTooltip("the compare text's second text of a pair, as the text's pair is read");
        ImGui::SameLine();
    }
    ImGui::BeginDisabled(!s.same_lengths());
    checkbox(ui, "diff B - A", &state.diff_shown, "diff");
    ImGui::EndDisabled();
    if (ui.tooltips && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip(s.same_lengths() ? "draw every map as the compare text's less the text's"
                                           : "the diff needs a compare text of as many tokens as the text");
}

}  // namespace headscope
