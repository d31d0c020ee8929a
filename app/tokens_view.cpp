// The tokens tab: see tokens_view.h.
#include "tokens_view.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace headscope {

namespace {

// The map under the mouse (beside the maps, the tokens follow it), else the selected one.
std::pair<int, int> shown_head(const Session& s) {
    return s.hovered_head >= 0 ? std::pair(s.hovered_layer, s.hovered_head) : std::pair(s.layer, s.head);
}

}  // namespace

void TokensView::update_weights(const Session& s, Ui& ui, const std::vector<int>& queries) {
    const AttentionResult& att = s.shown.attention;
    const int b = s.selected, T = att.T, length = s.length(b);
    const auto [layer, head] = shown_head(s);
    const Key key{s.shown_generation, b, layer, head, average_, queries, ui.colormap};
    if (key == key_) return;
    key_ = key;
    weights_.assign(T, std::nanf(""));
    for (int j = 0; j < length; ++j) {
        double sum = 0;
        bool seen = false;
        for (int q : queries) {
            if (!attends(s.shown_options, q, j, length, T)) continue;
            seen = true;
            if (!average_) {
                sum += att.row(layer, b, head, q)[j];
                continue;
            }
            for (int h = 0; h < att.NH; ++h) sum += att.row(layer, b, h, q)[j] / att.NH;
        }
        if (seen) weights_[j] = static_cast<float>(sum);
    }
    // One row of cells through the window's own colormap (the shader's colours, read back).
    HeatmapImage row{1, T, std::vector<float>(T)};
    for (int j = 0; j < T; ++j) row.cells[j] = std::isnan(weights_[j]) ? masked_cell : std::min(1.f, weights_[j]);
    colours_ = ui.renderer.cell_colours(ui.colormap, row);
}

void TokensView::draw(Session& s, Ui& ui) {
    const int b = s.selected, length = s.length(b);
    const auto [layer, head] = shown_head(s);
    ImGui::Checkbox("layer average", &average_);
    ui.layout.control("layer average");
    ImGui::SameLine();
    description_ = (average_ ? std::string("all heads") : head_label(s, layer, head)) + ", layer " +
                   std::to_string(layer) + ": the weight each token gets from " +
                   (added_queries_.empty() ? "the query" : "the queries (summed)");
    ImGui::TextWrapped("%s", description_.c_str());  // wrapped: beside the maps the view may be narrow
    if (!added_queries_.empty() && ImGui::SmallButton("clear added queries")) added_queries_.clear();
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("hover a token to see what it attends to, click to keep it, shift-click to add rows");
    ImGui::PopStyleColor();

    std::vector<int> queries = {s.predicted_query()};
    for (int q : added_queries_)
        if (q < length && q != queries[0]) queries.push_back(q);
    update_weights(s, ui, queries);

    ImGui::BeginChild("tokens", ImVec2(0, 0), false);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float pad = std::floor(2 * ui.scale), line = ImGui::GetTextLineHeight() + 2 * pad + std::floor(3 * ui.scale);
    const float width = ImGui::GetContentRegionAvail().x;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float clip_top = ImGui::GetWindowPos().y, clip_bottom = clip_top + ImGui::GetWindowHeight();
    float x = 0, y = 0;
    int hovered = -1;
    for (int t = 0; t < length; ++t) {
        const std::string text = shown_token(s, b, t);
        const float w = ImGui::CalcTextSize(text.c_str()).x + 2 * pad;
        if (x > 0 && x + w > width) x = 0, y += line;
        const ImVec2 min(origin.x + x, origin.y + y), max(min.x + w, min.y + line - std::floor(3 * ui.scale));
        const bool masked = std::isnan(weights_[t]);
        if (max.y >= clip_top && min.y <= clip_bottom) {  // only what the scroll shows is drawn
            ImU32 text_colour = ImGui::GetColorU32(ImGuiCol_Text);
            if (!masked) {
                const Rgb& c = colours_[t];
                draw->AddRectFilled(min, max, IM_COL32(c.r, c.g, c.b, 255));
                text_colour = dark_text_on(c) ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
            }
            if (std::find(queries.begin(), queries.end(), t) != queries.end())
                draw->AddRect(min, max, replayed_row_colour, 0, 0, 2);
            draw->AddText(ImVec2(min.x + pad, min.y + pad), text_colour, text.c_str());
        }
        if (ImGui::IsWindowHovered() && ImGui::IsMouseHoveringRect(min, max)) hovered = t;
        ui.layout.rect({{"view", "token"},
                        {"token", t},
                        {"text", text},
                        {"weight", masked ? nlohmann::json(nullptr) : nlohmann::json(weights_[t])}},
                       min, ImVec2(max.x - min.x, max.y - min.y));
        x += w + pad;
        if (token_text(s.model().tokenizer, s.shown.token_ids[b][t]).find('\n') != std::string::npos)
            x = 0, y += line;  // a line feed ends the line, as in the text
    }
    ImGui::Dummy(ImVec2(width, y + line));
    if (hovered >= 0 && ui.tooltips) {  // as the maps: screenshots ignore where Xvfb left the pointer
        s.hovered_query = hovered;
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
            if (ImGui::GetIO().KeyShift)
                added_queries_.insert(hovered);
            else
                s.query = hovered, added_queries_.clear();
        }
        if (ui.tooltips && !std::isnan(weights_[hovered]))
            ImGui::SetTooltip("token %d %s: weight %.4f from the rows shown", hovered,
                              shown_token(s, b, hovered, true).c_str(), weights_[hovered]);
    }
    ImGui::EndChild();
}

}  // namespace headscope
