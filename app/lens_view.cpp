// The logit-lens tab: see lens_view.h.
#include "lens_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace headscope {

namespace {

// The top lens_k tokens of layer slot `slot` at position t.
void lens_tooltip(const Session& s, int slot, int t) {
    const AttentionResult& att = s.shown.attention;
    const Prediction* top = att.lens_at(slot, s.selected, t);
    ImGui::BeginTooltip();
    ImGui::Text("after layer %d, at %s (token %d)", att.layers[slot], shown_token(s, s.selected, t, true).c_str(), t);
    for (int k = 0; k < att.lens_k && top[k].id >= 0; ++k)
        ImGui::Text("%d. %s  %.4f", k + 1, shown_token(s.model().tokenizer, top[k].id, true).c_str(), top[k].p);
    ImGui::EndTooltip();
}

}  // namespace

HeatmapImage lens_probabilities(const Session& s) {
    const AttentionResult& att = s.shown.attention;
    const int L = static_cast<int>(att.layers.size()), b = s.selected, length = s.length(b);
    HeatmapImage probabilities{.rows = L, .cols = length, .cells = {}};
    for (int slot = 0; slot < L; ++slot)
        for (int t = 0; t < length; ++t) probabilities.cells.push_back(att.lens_at(slot, b, t)[0].p);
    return probabilities;
}

void LensView::draw(Session& s, Ui& ui) {
    const AttentionResult& att = s.shown.attention;
    if (att.lens_k == 0) {
        if (s.generation)
            ImGui::TextUnformatted(
                "A generation's maps carry no logit lens: type, or change an option, to compute it.");
        else
            ImGui::TextUnformatted("computing the logit lens...");
        return;
    }
    ImGui::TextDisabled(
        "The next token each layer's residual stream already predicts, read through the final norm and the output "
        "embedding; colour: its probability.");
    const int L = static_cast<int>(att.layers.size()), b = s.selected, length = s.length(b);
    const float line = ImGui::GetTextLineHeight();
    const float label_w = ImGui::CalcTextSize("L00").x + 8 * ui.scale, header = 2 * line + 4 * ui.scale;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float cell_w = std::floor((avail.x - label_w) / length);
    const float cell_h = std::min(std::floor((avail.y - header) / L), std::floor(2 * line));
    if (cell_w < 1 || cell_h < 1) {
        ImGui::TextUnformatted("The window is too small for the lens grid.");
        return;
    }
    // Whole pixels: every cell the same size.
    const ImVec2 start = ImGui::GetCursorScreenPos();
    const ImVec2 origin(std::floor(start.x + label_w), std::floor(start.y + header));
    const ImVec2 size(cell_w * length, cell_h * L);
    const float framebuffer_scale = ImGui::GetIO().DisplayFramebufferScale.x;
    const Key key{s.shown_generation, b, static_cast<int>(size.x * framebuffer_scale),
                  static_cast<int>(size.y * framebuffer_scale), ui.colormap};
    if (!(key == key_)) {
        ui.renderer.upload(lens_probabilities(s), texture_);
        ui.renderer.draw(ui.colormap, key.width, key.height, texture_);
        key_ = key;
    }
    ImGui::SetCursorScreenPos(origin);
    image(texture_, size);
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked();

    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImU32 text_colour = ImGui::GetColorU32(ImGuiCol_Text);
    const float pad = 4 * ui.scale;
    const bool text_fits = cell_h >= line && cell_w >= 3 * ImGui::CalcTextSize("M").x + pad;
    for (int slot = 0; slot < L; ++slot) {
        const float y = origin.y + slot * cell_h;
        char label[16];
        std::snprintf(label, sizeof label, "L%d", att.layers[slot]);
        draw->AddText(ImVec2(start.x, y + (cell_h - line) / 2), text_colour, label);
        if (!text_fits) continue;
        for (int t = 0; t < length; ++t) {
            const Prediction& top = att.lens_at(slot, b, t)[0];
            const float x = origin.x + t * cell_w;
            const ImU32 colour = top.p > lens_dark_text_above ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
            const std::string shown = ellipsized(shown_token(s.model().tokenizer, top.id), line, cell_w - pad - 1);
            draw->AddText(ImVec2(x + pad, y + (cell_h - line) / 2), colour, shown.c_str());
        }
    }
    // The text's tokens above their columns, staggered in two rows as the maps' keys are.
    for (int t = 0; t < length && cell_w >= 2 * pad; ++t) {
        const float x = origin.x + t * cell_w, y = start.y + (t % 2 ? line : 0);
        const std::string shown =
            ellipsized(shown_token(s, s.selected, t), line, std::min(2 * cell_w, origin.x + size.x - x));
        draw->AddText(ImVec2(x, y), text_colour, shown.c_str());
    }
    ui.layout.grid({{"view", "lens"}, {"row", "layer"}, {"col", "position"}},
                   {origin, ImVec2(cell_w, cell_h), ImVec2(cell_w, cell_h), L, length});
    if (ui.tooltips && hovered) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int slot = std::clamp(static_cast<int>((mouse.y - origin.y) / cell_h), 0, L - 1);
        const int t = std::clamp(static_cast<int>((mouse.x - origin.x) / cell_w), 0, length - 1);
        lens_tooltip(s, slot, t);
        s.hovered_query = t;
        if (clicked) s.query = t;
    }
    ImGui::SetCursorScreenPos(start);
    ImGui::Dummy(ImVec2(label_w + size.x, header + size.y));
}

}  // namespace headscope
