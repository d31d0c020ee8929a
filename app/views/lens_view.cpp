// The logit-lens tab: see lens_view.h.
#include "views/lens_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "widgets/texts.h"

namespace headscope {

namespace {

// Up to 200-pixel cells.
float max_zoom(float fit_w) { return std::max(1.f, 200 / fit_w); }

// The top lens_k tokens of layer slot `slot` at position t.
void lens_tooltip(const WindowState& state, const Session& s, int slot, int t) {
    const AttentionResult& att = s.shown.attention;
    const Prediction* top = att.lens_at(slot, state.selected, t);
    ImGui::BeginTooltip();
    ImGui::Text("after layer %d, at %s (token %d)", att.layers[slot], shown_token(s, state.selected, t, true).c_str(),
                t);
    for (int k = 0; k < att.lens_k && top[k].id >= 0; ++k)
        ImGui::Text("%d. %s  %.4f", k + 1, shown_token(s.model().tokenizer, top[k].id, true).c_str(), top[k].p);
    ImGui::EndTooltip();
}

}  // namespace

HeatmapImage lens_probabilities(const WindowState& state, const Session& s) {
    const AttentionResult& att = s.shown.attention;
    const int L = static_cast<int>(att.layers.size()), b = state.selected, length = s.length(b);
    HeatmapImage probabilities{.rows = L, .cols = length, .cells = {}};
    for (int slot = 0; slot < L; ++slot)
        for (int t = 0; t < length; ++t) probabilities.cells.push_back(att.lens_at(slot, b, t)[0].p);
    return probabilities;
}

void LensView::draw(WindowState& state, const Session& s, Ui& ui) {
    const AttentionResult& att = s.shown.attention;
    if (att.lens_k == 0) {
        if (!s.model().config.predicts())
            ImGui::TextUnformatted(no_head_message);
        else if (s.generation)
            ImGui::TextUnformatted(
                "A generation's maps carry no logit lens: type, or change an option, to compute it.");
        else
            ImGui::TextUnformatted("computing the logit lens...");
        return;
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped(
        "The next token each layer's residual stream already predicts, read through the final norm and the output "
        "embedding; colour: its probability. Wheel: zoom, drag: pan, double-click: every position.");
    ImGui::PopStyleColor();
    const int L = static_cast<int>(att.layers.size()), length = s.length(state.selected);
    const float line = ImGui::GetTextLineHeight(), scrollbar = ImGui::GetStyle().ScrollbarSize;
    const float label_w = ImGui::CalcTextSize("L00").x + 8 * ui.scale, header = 2 * line + 4 * ui.scale;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float fit_w = (avail.x - label_w) / static_cast<float>(length);
    const float cell_h = std::min(std::floor((avail.y - header - scrollbar) / L), std::floor(2 * line));
    if (length < 1 || fit_w * length < 16 || cell_h < 1) {
        ImGui::TextUnformatted("The window is too small for the lens grid.");
        return;
    }
    // At least a pixel a position (a longer text scrolls), filling the width: cells within a pixel of each other.
    zoom_ = std::clamp(zoom_, 1.f, max_zoom(fit_w));  // the window may have grown
    const float cell_w = std::max(1.f, fit_w * zoom_);
    const ImVec2 start = ImGui::GetCursorScreenPos();
    for (int slot = 0; slot < L; ++slot) {
        char label[16];
        std::snprintf(label, sizeof label, "L%d", att.layers[slot]);
        ImGui::GetWindowDrawList()->AddText(ImVec2(start.x, start.y + header + slot * cell_h + (cell_h - line) / 2),
                                            ImGui::GetColorU32(ImGuiCol_Text), label);
    }
    ImGui::SetCursorScreenPos(ImVec2(start.x + label_w, start.y));
    // This frame's width, so that a zoom's scroll is clamped to it, not to the last frame's.
    ImGui::SetNextWindowContentSize(ImVec2(cell_w * length, 0));
    ImGui::BeginChild("lens grid", ImVec2(0, header + L * cell_h + scrollbar), false,
                      ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    grid(state, s, ui, {cell_w, cell_h}, header, fit_w);
    ImGui::EndChild();
}

// Inside the scrolling child: the cells in view, their tokens, the labels
// above the columns, hover, and zoom and pan.
void LensView::grid(WindowState& state, const Session& s, Ui& ui, ImVec2 cell, float header, float fit_w) {
    const AttentionResult& att = s.shown.attention;
    const int L = static_cast<int>(att.layers.size()), b = state.selected, length = s.length(b);
    const float line = ImGui::GetTextLineHeight(), scroll = ImGui::GetScrollX(), view_w = ImGui::GetWindowWidth();
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const ImVec2 origin(top.x, std::floor(top.y + header));  // column 0's corner, maybe scrolled off
    ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y));
    ImGui::InvisibleButton("lens cells", ImVec2(cell.x * length, cell.y * L));
    const bool hovered = ImGui::IsItemHovered();
    // A click selects the query; the end of a drag (a pan) does not.
    const ImGuiIO& io = ImGui::GetIO();
    const bool clicked =
        hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
        io.MouseDragMaxDistanceSqr[ImGuiMouseButton_Left] < io.MouseDragThreshold * io.MouseDragThreshold;
    const int first = std::clamp(static_cast<int>(scroll / cell.x), 0, length - 1);
    const int end = std::clamp(static_cast<int>(std::ceil((scroll + view_w) / cell.x)), first + 1, length);
    if (generation_ != s.shown_generation || b_ != b) {
        ui.renderer.upload(lens_probabilities(state, s), texture_);
        generation_ = s.shown_generation, b_ = b;
    }
    ui.renderer.draw_on_screen(ui.colormap, texture_, ImVec2(origin.x + first * cell.x, origin.y),
                               ImVec2(origin.x + end * cell.x, origin.y + L * cell.y),
                               {static_cast<float>(first) / length, 0, static_cast<float>(end) / length, 1});
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float pad = 4 * ui.scale;
    if (cell.y >= line && cell.x >= 3 * ImGui::CalcTextSize("M").x + pad)
        for (int slot = 0; slot < L; ++slot)
            for (int t = first; t < end; ++t) {
                const Prediction& best = att.lens_at(slot, b, t)[0];
                const ImU32 ink = best.p > lens_dark_text_above ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
                const std::string shown = ellipsized(shown_token(s.model().tokenizer, best.id), line, cell.x - pad - 1);
                draw->AddText(ImVec2(origin.x + t * cell.x + pad, origin.y + slot * cell.y + (cell.y - line) / 2), ink,
                              shown.c_str());
            }
    // The tokens above their columns in two staggered rows; where cells are
    // narrower than a short word, every k-th (zoom in or hover for the rest).
    const int every = std::max(1, static_cast<int>(std::ceil(ImGui::CalcTextSize("MMM").x / (2 * cell.x))));
    for (int t = first / every * every; t < end; t += every) {
        const float x = origin.x + t * cell.x, y = top.y + (t / every % 2 ? line : 0);
        const std::string shown = ellipsized(shown_token(s, b, t), line, 2 * every * cell.x - pad);
        drawn_text(ui, {{"view", "lens-label"}, {"position", t}, {"text", shown}}, draw, ImGui::GetFontSize(),
                   ImVec2(x, y), ImGui::GetColorU32(ImGuiCol_Text), shown, ImVec2(x, y),
                   ImGui::CalcTextSize(shown.c_str()));
    }
    ui.layout.grid({{"view", "lens"}, {"row", "layer"}, {"col", "position"}}, {origin, cell, cell, L, length});
    if (!hovered) return;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int t = std::clamp(static_cast<int>((mouse.x - origin.x) / cell.x), 0, length - 1);
    if (ui.tooltips) {
        lens_tooltip(state, s, std::clamp(static_cast<int>((mouse.y - origin.y) / cell.y), 0, L - 1), t);
        state.hovered_query = t;
        if (clicked) state.query = t;
    }
    zoom_and_pan(fit_w, mouse.x - ImGui::GetWindowPos().x);
}

// The wheel zooms about the mouse's column, a drag pans, a double-click shows every position.
void LensView::zoom_and_pan(float fit_w, float mouse_x) {
    const ImGuiIO& io = ImGui::GetIO();
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
        zoom_ = 1;
        return;
    }
    if (ImGui::IsMouseDragging(ImGuiMouseButton_Left)) ImGui::SetScrollX(ImGui::GetScrollX() - io.MouseDelta.x);
    if (io.MouseWheel == 0) return;
    const float before = std::max(1.f, fit_w * zoom_);
    zoom_ = std::clamp(zoom_ * std::pow(1.25f, io.MouseWheel), 1.f, max_zoom(fit_w));
    const float after = std::max(1.f, fit_w * zoom_);
    // The position under the mouse stays under it.
    ImGui::SetScrollX((ImGui::GetScrollX() + mouse_x) * after / before - mouse_x);
}

}  // namespace headscope
