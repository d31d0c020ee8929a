// The tokens tab: see tokens_view.h.
#include "views/tokens_view.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {

void TokensView::update_weights(const Session& s, Ui& ui, int layer, int head, const std::vector<int>& queries) {
    const ShownMaps maps = s.maps();
    const int b = maps.b, keys = maps.cols, NH = maps.result->NH;
    const Key key{s.shown_generation, s.comparison().generation(), b, layer, head, average_, queries, ui.colormap,
                  maps.kind};
    if (key == key_) return;
    if (s.rows_lent()) {  // lent: the last row's colours until the forward is done; none where none were drawn
        if (weights_.size() != static_cast<size_t>(keys)) weights_.assign(keys, std::nanf(""));
        return;
    }
    key_ = key;
    weights_.assign(keys, std::nanf(""));
    const AttentionOptions options = s.maps_options_at(maps, layer);
    std::vector<double> sums(keys, 0.0);
    std::vector<float> computed;  // a long text's row: no map kept, computed from its queries and keys
    for (int q : queries)
        for (int h = average_ ? 0 : head; h < (average_ ? NH : head + 1); ++h) {
            if (s.long_text()) computed = query_row(*s.kept_maps(), layer, h, b, q);
            const float* row = s.long_text() ? computed.data() : maps.row(layer, b, h, q);
            for (int j = 0; j < maps.key_length; ++j) {
                if (!maps.visible(options, q, j)) continue;
                if (std::isnan(weights_[j])) weights_[j] = 0;  // seen by a query
                sums[j] += average_ ? row[j] / NH : row[j];
            }
        }
    for (int j = 0; j < maps.key_length; ++j)
        if (!std::isnan(weights_[j])) weights_[j] = static_cast<float>(sums[j]);
    // One row of cells through the window's own colormap (the shader's colours, read back).
    HeatmapImage row{1, keys, std::vector<float>(keys)};
    for (int j = 0; j < keys; ++j) row.cells[j] = std::isnan(weights_[j]) ? masked_cell : std::min(1.f, weights_[j]);
    colours_ = ui.renderer.cell_colours(ui.colormap, row);
}

std::vector<WrappedToken> wrap_tokens(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                      const std::function<float(const std::string&)>& width, float line_width,
                                      float gap) {
    std::vector<WrappedToken> wrapped;
    float x = 0;
    int line = 0;
    for (int32_t id : ids) {
        std::string text = shown_token(tokenizer, id);
        const float w = width(text);
        if (x > 0 && x + w > line_width) x = 0, ++line;
        wrapped.push_back({x, w, line, std::move(text)});
        x += w + gap;
        if (token_text(tokenizer, id).find('\n') != std::string::npos) x = 0, ++line;  // as in the text
    }
    return wrapped;
}

std::pair<int, int> TokensView::head_shown(const WindowState& state, bool beside) {
    const std::pair selected(state.layer, state.head);
    if (followed_ && followed_->second != selected) followed_.reset();  // a new selection wins
    if (state.hovered_head >= 0) followed_ = {{state.hovered_layer, state.hovered_head}, selected};
    return beside && followed_ ? followed_->first : selected;
}

std::vector<int> TokensView::query_rows(const Session& s, const ShownMaps& maps) const {
    const int last = maps.query_length - 1;
    std::vector<int> queries = {maps.kind == AttentionKind::encoder
                                    ? (source_query_ >= 0 ? std::min(source_query_, last) : last)
                                    : s.predicted_query()};
    for (int q : added_queries_)
        if (q <= last && q != queries[0]) queries.push_back(q);
    return queries;
}

void TokensView::pick_query(WindowState& state, const ShownMaps& maps, int hovered) {
    if (hovered < 0 || !ui_tooltips_) return;
    if (maps.kind != AttentionKind::encoder) state.hovered_query = hovered;
    if (!ImGui::IsMouseClicked(ImGuiMouseButton_Left)) return;
    if (ImGui::GetIO().KeyShift) {
        added_queries_.insert(hovered);
        return;
    }
    added_queries_.clear();
    if (maps.kind == AttentionKind::encoder)
        source_query_ = hovered;
    else
        state.query = hovered;
}

void TokensView::draw(WindowState& state, const Session& s, Ui& ui, bool beside) {
    const ShownMaps maps = s.maps();
    const auto [followed_layer, head] = head_shown(state, beside);
    const int layer = std::min(followed_layer, maps.layers() - 1);  // a map hovered under another attention
    checkbox(ui, "layer average", &average_, "layer average");
    ImGui::SameLine();
    const std::string kind =
        maps.kind == AttentionKind::decoder ? "" : std::string(attention_kind_choices.labels[int(maps.kind)]) + ", ";
    description_ = kind + (average_ ? std::string("all heads") : head_label(s, layer, head)) + ", layer " +
                   std::to_string(layer) + ": the weight each token gets from " +
                   (added_queries_.empty() ? "the query" : "the queries (summed)");
    ImGui::TextWrapped("%s", description_.c_str());  // wrapped: beside the maps the view may be narrow
    if (!added_queries_.empty() && ImGui::SmallButton("clear added queries")) added_queries_.clear();
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("hover a token to see what it attends to, click to keep it, shift-click to add rows");
    ImGui::PopStyleColor();

    const std::vector<int> queries = query_rows(s, maps);
    update_weights(s, ui, layer, head, queries);
    ui_tooltips_ = ui.tooltips;  // as the maps: screenshots ignore where Xvfb left the pointer
    ImGui::BeginChild("tokens", ImVec2(0, 0), false);
    ui.layout.rect({{"view", "tokens-scrolled"}}, ImGui::GetWindowPos(), ImGui::GetWindowSize());  // what shows
    if (maps.kind == AttentionKind::cross) {  // the target's tokens ask; the source's are coloured
        ImGui::TextDisabled("target (the queries):");
        pick_query(state, maps, draw_tokens(s, ui, *maps.query_ids, nullptr, queries, "query-token"));
        ImGui::TextDisabled("source (the keys), by the weight each gets:");
    }
    const std::vector<int> outlined = maps.kind == AttentionKind::cross ? std::vector<int>{} : queries;
    // A query chosen off screen (--query, or a text that grew) is scrolled to, once.
    const int scroll_to = maps.kind == AttentionKind::decoder && state.query != scrolled_query_ ? state.query : -1;
    scrolled_query_ = state.query;
    const int hovered = draw_tokens(s, ui, *maps.key_ids, &weights_, outlined, "token", scroll_to);
    if (s.long_text() && !beside) state.rows_shown_begin = drawn_.first, state.rows_shown_end = drawn_.second;
    // The keys are an encoder–decoder's source but in its decoder's self-attention.
    const bool source_keys = s.model().config.is_encoder_decoder() && maps.kind != AttentionKind::decoder;
    if (const TextCut* cut = s.cut_shown(source_keys)) {
        const std::string note = "cut here: " + std::to_string(cut->tokens - cut->kept) +
                                 " more tokens past the model's limit of " + std::to_string(cut->kept);
        text_coloured(ui, {{"view", "token-cut"}, {"text", note}}, warning_colour, "%s", note.c_str());
    }
    if (maps.kind != AttentionKind::cross) pick_query(state, maps, hovered);

    if (hovered >= 0 && ui.tooltips && !std::isnan(weights_[hovered]))
        ImGui::SetTooltip("token %d %s: weight %.4f from the rows shown", hovered,
                          key_token(s, maps, hovered, true).c_str(), weights_[hovered]);
    ImGui::EndChild();
}

int TokensView::draw_tokens(const Session& s, Ui& ui, const std::vector<int32_t>& ids,
                            const std::vector<float>* weights, const std::vector<int>& queries, const char* view,
                            int scroll_to) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float pad = std::floor(2 * ui.scale), gap = std::floor(3 * ui.scale);
    const float line = ImGui::GetTextLineHeight() + 2 * pad + gap, width = ImGui::GetContentRegionAvail().x;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float clip_top = ImGui::GetWindowPos().y, clip_bottom = clip_top + ImGui::GetWindowHeight();
    const std::vector<WrappedToken> wrapped = wrap_tokens(
        s.model().tokenizer, ids,
        [&](const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x + 2 * pad; }, width, pad);
    int hovered = -1;
    drawn_ = {0, 0};
    for (int t = 0; t < static_cast<int>(wrapped.size()); ++t) {
        const WrappedToken& token = wrapped[t];
        const ImVec2 min(origin.x + token.x, origin.y + token.line * line),
            max(min.x + token.width, min.y + line - gap);
        const bool coloured = weights && !std::isnan((*weights)[t]);
        if (t == scroll_to && (min.y < clip_top || max.y > clip_bottom))
            ImGui::SetScrollFromPosY(min.y - ImGui::GetWindowPos().y, 0.5f);  // drawn from the next frame
        if (max.y >= clip_top && min.y <= clip_bottom) {                      // only what the scroll shows is drawn
            drawn_ = {drawn_.second > 0 ? drawn_.first : t, t + 1};
            ImU32 text_colour = ImGui::GetColorU32(ImGuiCol_Text);
            if (coloured) {
                const Rgb& c = colours_[t];
                draw->AddRectFilled(min, max, IM_COL32(c.r, c.g, c.b, 255));
                text_colour = dark_text_on(c) ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
            }
            if (std::find(queries.begin(), queries.end(), t) != queries.end())
                draw->AddRect(min, max, replayed_row_colour, 0, 0, 2);
            draw->AddText(ImVec2(min.x + pad, min.y + pad), text_colour, token.text.c_str());
        }
        if (ImGui::IsWindowHovered() && ImGui::IsMouseHoveringRect(min, max)) hovered = t;
        ui.layout.rect({{"view", view},
                        {"token", t},
                        {"text", token.text},
                        {"weight", coloured ? nlohmann::json((*weights)[t]) : nlohmann::json(nullptr)}},
                       min, ImVec2(max.x - min.x, max.y - min.y));
    }
    ImGui::Dummy(ImVec2(width, (wrapped.empty() ? 0 : wrapped.back().line + 1) * line));
    return hovered;
}

}  // namespace headscope
