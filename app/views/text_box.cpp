// The controls' text box (ControlsView::text_box): see controls_view.h.
#include <imgui_internal.h>  // ImTextStrToUtf8
#include <imgui_stdlib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "views/controls_view.h"
#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {
namespace {

// The edit box's cursor to the end of the text, once, when it takes the keys
// (a box activated by code would start at the text's beginning).
int cursor_to_end(ImGuiInputTextCallbackData* data) {
    bool& pending = *static_cast<bool*>(data->UserData);
    if (std::exchange(pending, false)) data->CursorPos = data->SelectionStart = data->SelectionEnd = data->BufTextLen;
    return 0;
}

// The characters typed this frame appended to `text` as UTF-8, taken from ImGui's queue.
bool take_typed_characters(std::string& text) {
    ImVector<ImWchar>& typed = ImGui::GetIO().InputQueueCharacters;
    for (const ImWchar c : typed) {
        char utf8[8] = {};
        const ImWchar one[2] = {c, 0};
        ImTextStrToUtf8(utf8, sizeof utf8, one, one + 1);
        text += utf8;
    }
    const bool any = !typed.empty();
    typed.resize(0);
    return any;
}

// The text's lines wrapped at `wrap`, as ImGui wraps a text (the blanks
// that start a wrapped line left out).
std::vector<std::string_view> wrapped_lines(const std::string& text, float wrap) {
    const ImFont* font = ImGui::GetFont();
    const float scale = ImGui::GetFontSize() / font->FontSize;
    std::vector<std::string_view> lines;
    const char* const end = text.data() + text.size();
    for (const char* s = text.data();;) {
        const char* line_end = static_cast<const char*>(std::memchr(s, '\n', static_cast<size_t>(end - s)));
        if (!line_end) line_end = end;
        const char* at = s;
        do {
            const char* cut =
                std::max(font->CalcWordWrapPositionA(scale, at, line_end, wrap), std::min(at + 1, line_end));
            lines.emplace_back(at, static_cast<size_t>(cut - at));
            for (at = cut; at < line_end && (*at == ' ' || *at == '\t');) ++at;
        } while (at < line_end);
        if (line_end == end) return lines;
        s = line_end + 1;
    }
}

// Only the lines in view are drawn: ImGui 1.86 draws a wrapped text's
// every glyph, and past about 16,000 characters a window's 65,536 vertices
// overflow (an assertion ends the program).
void draw_lines(const std::vector<std::string_view>& lines) {
    ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(ImGui::GetStyle().ItemSpacing.x, 0));
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(lines.size()), ImGui::GetTextLineHeight());
    while (clipper.Step())
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
            const std::string_view line = lines[static_cast<size_t>(i)];
            ImGui::TextUnformatted(line.data(), line.data() + line.size());
        }
    ImGui::PopStyleVar();
}

}  // namespace

// The text, as tall as its wrapped lines (three to six, then it scrolls).
// ImGui 1.86's multi-line box cannot wrap: while it has the keys it scrolls
// sideways to the cursor; otherwise the same place shows the text wrapped,
// and a click there gives the keys back to the box, its cursor at the end.
// A text cut to the model's positions says where, above it.
bool ControlsView::text_box(WindowState& state, const Session& s, Ui& ui, float width) {
    std::string& text = state.texts[state.selected];
    const ImGuiStyle& style = ImGui::GetStyle();
    const float line = ImGui::GetTextLineHeight();
    const float wrap = width - 2 * style.FramePadding.x - style.ScrollbarSize;
    const TextCut* cut = s.cut_shown(s.model().config.is_encoder_decoder());
    const std::vector<std::string_view> lines = wrapped_lines(text, wrap);
    const float height = static_cast<float>(lines.size() + (cut ? 1 : 0)) * line;
    const ImVec2 size(width, std::clamp(height, 3 * line, 6 * line) + 2 * style.FramePadding.y);
    bool changed = false;
    if (editing_text_) {
        const int since_click = ImGui::GetFrameCount() - text_clicked_frame_;
        if (since_click == 1) {
            // The focus lands next frame: what is typed meanwhile goes where the cursor will start.
            ImGui::SetKeyboardFocusHere();
            changed = take_typed_characters(text);
        }
        changed |= text_input_multiline(ui, "##text", &text, size, ImGuiInputTextFlags_CallbackAlways, cursor_to_end,
                                        &cursor_to_end_pending_, "text");
        editing_text_ = ImGui::IsItemActive() || since_click < 4;  // until the focus has landed, the box stays
        ui.frame_wanted |= since_click < 4;
        ui.frame_wanted |= !editing_text_;  // the wrapped text, drawn next frame
        return changed;
    }
    ImGui::PushStyleColor(ImGuiCol_ChildBg, style.Colors[ImGuiCol_FrameBg]);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, style.FramePadding);
    ImGui::BeginChild("##text wrapped", size, false, ImGuiWindowFlags_AlwaysUseWindowPadding);
    ImGui::PushTextWrapPos(0);
    if (cut) {
        const std::vector<int32_t>& ids = s.model().config.is_encoder_decoder() ? s.shown.source_ids[state.selected]
                                                                                : s.shown.token_ids[state.selected];
        const std::string note = "the model reads the first " + std::to_string(cut->kept) + " of its " +
                                 std::to_string(cut->tokens) + " tokens, up to " +
                                 shown_token(s.model().tokenizer, ids.back(), true);
        text_coloured(ui, {{"view", "control"}, {"name", "text cut"}, {"text", note}}, warning_colour, "%s",
                      note.c_str());
    }
    ImGui::PopTextWrapPos();
    draw_lines(lines);
    const bool clicked = ImGui::IsWindowHovered() && ImGui::IsMouseClicked(ImGuiMouseButton_Left);
    if (ImGui::IsWindowHovered()) ImGui::SetMouseCursor(ImGuiMouseCursor_TextInput);
    end_child(ui, "text");
    ImGui::PopStyleVar();
    ImGui::PopStyleColor();
    if (clicked) {
        editing_text_ = cursor_to_end_pending_ = ui.frame_wanted = true;
        text_clicked_frame_ = ImGui::GetFrameCount();
    }
    return changed;
}

}  // namespace headscope
