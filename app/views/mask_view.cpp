// The mask view: see mask_view.h.
#include "views/mask_view.h"

#include <imgui_stdlib.h>

#include <algorithm>
#include <string>

#include "views/mask_panels.h"

namespace headscope {

namespace {

// A text on one short line, for the batch list.
std::string preview(const std::string& text) {
    constexpr size_t max_chars = 70;
    std::string line = text.substr(0, max_chars);
    std::replace(line.begin(), line.end(), '\n', ' ');
    return text.size() > max_chars ? line + "..." : line;
}

}  // namespace

void MaskView::batch_list(WindowState& state, Session& session, const Ui& ui) {
    const int shown_B = static_cast<int>(session.shown.token_ids.size()), T = session.shown.attention.T;
    if (select_when_shown_ >= 0 && select_when_shown_ < shown_B) {
        state.selected = select_when_shown_;
        select_when_shown_ = -1;
    }
    const size_t B = state.texts.size();
    const std::string batch = B == 1 ? "One text" : "Batch of " + std::to_string(B) + " texts";
    if (shown_B > 0)
        ImGui::Text("%s, right-padded with %s to the longest: T = %d tokens", batch.c_str(),
                    shown_token(session.model().tokenizer, session.model().config.pad_id(), true).c_str(), T);
    else
        ImGui::TextUnformatted(batch.c_str());
    int remove = -1;
    for (int b = 0; b < static_cast<int>(state.texts.size()); ++b) {
        ImGui::PushID(b);
        // A text not yet computed cannot be shown: the views draw the last compute.
        const bool computed = b < shown_B;
        ImGui::BeginDisabled(!computed);
        if (ImGui::RadioButton("##select", state.selected == b)) state.selected = b;
        ImGui::EndDisabled();
        ImGui::SameLine();
        ImGui::BeginDisabled(state.texts.size() == 1);
        if (ImGui::SmallButton("remove")) remove = b;
        ImGui::EndDisabled();
        ImGui::SameLine();
        if (computed) {
            const int length = session.length(b);
            ImGui::TextDisabled("%2d: %3d tokens + %3d pads", b + 1, length, T - length);
        } else {
            ImGui::TextDisabled("%2d: %s", b + 1, session.busy() ? "computing..." : "not computed");
        }
        ImGui::SameLine();
        ImGui::TextUnformatted(preview(state.texts[b]).c_str());
        ImGui::PopID();
    }
    ImGui::SetNextItemWidth(420 * ui.scale);
    const bool entered = ImGui::InputTextWithHint("##new text", "another text for the batch", &new_text_,
                                                  ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    ImGui::BeginDisabled(new_text_.empty());
    const bool add = ImGui::Button("add text") || entered;
    ImGui::EndDisabled();
    if (add && !new_text_.empty()) {
        state.texts.push_back(new_text_);
        new_text_.clear();
        select_when_shown_ = static_cast<int>(state.texts.size()) - 1;
        session.submit();
    }
    if (remove >= 0) {
        state.texts.erase(state.texts.begin() + remove);
        // Keep the same text selected, or its neighbour when it was the one removed.
        if (state.selected > remove || state.selected == static_cast<int>(state.texts.size())) --state.selected;
        select_when_shown_ = -1;
        session.submit();
    }
}

void MaskView::draw(WindowState& state, Session& session, Ui& ui) {
    batch_list(state, session, ui);
    ImGui::Separator();
    batch_padding_masks(state, session, ui);
    ImGui::Separator();
    if (session.model().config.is_encoder_decoder())
        ImGui::TextDisabled("The decoder's masks (its self-attention over the target); the cross-attention's below.");
    std::optional<MaskPanels> panels = MaskPanels::fit(state, session, ui);
    if (!panels) return;
    panels->causal(state, session, ui);
    panels->next();
    if (session.model().config.sliding_window) {
        panels->window(state, session, ui);
        panels->next();
    }
    panels->padding(state, session, ui);
    panels->next();
    panels->combined(state, session, ui);
    panels->next();
    panels->attention_title();
    // Its keys (after a learned sink's column) in line with the masks' columns.
    const ImVec2 map = ImGui::GetCursorScreenPos();
    attention_map_.draw_cells(state, session, ui, "mask_attention", state.layer, state.head, panels->cell());
    const float keys_x = cell_columns(session.maps(AttentionKind::decoder), ui, panels->cell()).keys_x;
    outline_empty_rows(state, session, ImVec2(map.x + keys_x, map.y), panels->cell());
    ImGui::EndGroup();
    panels->legend(state, session);
    if (session.model().config.is_encoder_decoder()) {
        ImGui::Separator();
        cross_mask(state, session, ui);
    }
}

}  // namespace headscope
