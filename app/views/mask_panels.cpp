// The mask view's panels: see mask_panels.h.
#include "views/mask_panels.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "widgets/texts.h"

namespace headscope {

namespace {

// The hovered cell's tokens and what the mask does there.
void cell_tooltip(const WindowState& state, const Session& session, const DrawnGrid& grid, const char* what) {
    if (grid.key < 0) return;
    ImGui::BeginTooltip();
    const std::string key = shown_token(session, state.selected, grid.key, true);
    if (grid.query >= 0)
        ImGui::Text("query %d %s  ->  key %d %s", grid.query,
                    shown_token(session, state.selected, grid.query, true).c_str(), grid.key, key.c_str());
    else
        ImGui::Text("key %d %s, for every query", grid.key, key.c_str());
    ImGui::TextUnformatted(what);
    ImGui::EndTooltip();
}

// The selected text's tokens along a square at `origin`, at the font size a
// row of `cell` pixels holds: the queries (then "<pad>") down its left,
// right-aligned in a column of `width`; the keys above it, each on one of two
// staggered lines so that neighbours do not collide, a gap before the next
// label of its line (byte pieces such as "\x96" would read as one), and the
// pad keys as one label over their run. A label longer than its place ends
// in an ellipsis.
// Each label's place is recorded for --layout, with what is shown in it.
void draw_token_labels(const WindowState& state, const Session& session, Ui& ui, ImVec2 origin, float cell,
                       float width) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float size = std::min(ImGui::GetFontSize(), cell), shrink = size / ImGui::GetFontSize();
    const ImU32 colour = ImGui::GetColorU32(ImGuiCol_Text);
    const float right = origin.x - 4 * ui.scale, bottom = origin.y - 2 * ui.scale;
    auto label = [&](const char* axis, int t, const std::string& text, ImVec2 at, const ImVec4& place) {
        const std::string shown = ellipsized(text, size, place.z - at.x);
        drawn_text(ui, {{"view", "mask label"}, {"axis", axis}, {"index", t}, {"text", text}, {"shown", shown}}, draw,
                   size, at, colour, shown, ImVec2(place.x, place.y), ImVec2(place.z - place.x, place.w - place.y));
    };
    const int T = session.shown.attention.T, length = session.length(state.selected);
    for (int t = 0; t < T; ++t) {
        const std::string text = shown_token(session, state.selected, t);
        const float row_top = origin.y + t * cell;
        const float x = std::max(right - ImGui::CalcTextSize(text.c_str()).x * shrink, right - width);
        label("query", t, text, ImVec2(x, row_top + (cell - size) / 2),
              ImVec4(right - width, row_top, right, row_top + cell));
        if (t >= length) continue;
        const float column_left = origin.x + t * cell, line_top = bottom - (t % 2 ? 1 : 2) * size;
        const float clip_right = std::min(column_left + 2 * cell, origin.x + length * cell) - 3 * ui.scale;
        label("key", t, text, ImVec2(column_left, line_top),
              ImVec4(column_left, line_top, clip_right, line_top + size));
    }
    if (length < T) {
        const float pads_left = origin.x + length * cell, line_top = bottom - 2 * size;
        label("key", length, "<pad> x " + std::to_string(T - length), ImVec2(pads_left, line_top),
              ImVec4(pads_left, line_top, origin.x + T * cell, line_top + size));
    }
}

// The masks the combined grid is made of, in words.
std::string masks_used(const AttentionOptions& options) {
    std::vector<std::string> masks;
    if (options.causal) masks.push_back("causal");
    if (options.sliding_window) masks.push_back("sliding window");
    if (options.padding_mask) masks.push_back("padding");
    if (masks.empty()) return "no mask: every key visible";
    std::string words = masks[0];
    for (size_t m = 1; m < masks.size(); ++m) words += (m + 1 == masks.size() ? " and " : ", ") + masks[m];
    return options.padding_mask ? words + "; a pad query sees nothing" : words;
}

// A colour swatch and its meaning, on the current line.
void legend_entry(ImU32 colour, const char* meaning, bool outline = false) {
    const float side = ImGui::GetTextLineHeight();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    if (outline)
        draw->AddRect(at, ImVec2(at.x + side, at.y + side), colour, 0, 0, 2);
    else
        draw->AddRectFilled(at, ImVec2(at.x + side, at.y + side), colour);
    ImGui::Dummy(ImVec2(side, side));
    ImGui::SameLine();
    ImGui::TextUnformatted(meaning);
}

}  // namespace

void outline_empty_rows(const WindowState& state, const Session& session, ImVec2 origin, float cell) {
    const AttentionResult& att = session.shown.attention;
    auto empty = [&](int i) { return att.row_fully_masked(state.selected, i); };
    ImDrawList* draw = ImGui::GetWindowDrawList();
    for (int first = 0; first < att.T;) {
        if (!empty(first)) {
            ++first;
            continue;
        }
        int end = first + 1;
        while (end < att.T && empty(end)) ++end;
        const float top = origin.y + first * cell, bottom = origin.y + end * cell;
        draw->AddRect(ImVec2(origin.x - 2, top - 1), ImVec2(origin.x + att.T * cell + 1, bottom), mask_empty_row_colour,
                      0, 0, 2);
        const std::string label = end - first == 1 ? "empty row" : std::to_string(end - first) + " empty rows";
        draw->AddText(ImVec2(origin.x + att.T * cell + 5, (top + bottom - ImGui::GetTextLineHeight()) / 2),
                      mask_empty_row_colour, label.c_str());
        first = end;
    }
}

void batch_padding_masks(const WindowState& state, const Session& session, Ui& ui) {
    const AttentionOptions options = session.shown_options_at(state.layer);  // what the shown compute used
    const int B = static_cast<int>(session.shown.token_ids.size()), T = session.shown.attention.T;
    ImGui::TextUnformatted(
        options.padding_mask ? "Padding masks of the batch (B x T): a text's pad keys are masked"
                             : "Padding masks of the batch (B x T): off, pads attend and are attended like any token");
    const float row_label = ImGui::CalcTextSize("> text 00").x + 8 * ui.scale;
    const float cell = std::clamp(std::floor((ImGui::GetContentRegionAvail().x - row_label) / T), 2.f, 14 * ui.scale);
    for (int text = 0; text < B; ++text) {
        const int text_length = session.length(text);
        ImGui::Text("%s text %d", text == state.selected ? ">" : " ", text + 1);
        ImGui::SameLine(row_label);
        const DrawnGrid grid = mask_grid(ui, "padding", text, -1, 1, T, ImVec2(cell, cell),
                                         [&](int, int j) { return padding_allows(options, j, text_length); });
        if (grid.key >= 0) {
            ImGui::BeginTooltip();
            const std::string pad =
                "a pad (" + shown_token(session.model().tokenizer, session.model().config.pad_id(), true) + ")";
            ImGui::Text("text %d, key %d: %s", text + 1, grid.key,
                        grid.key < text_length ? "one of its tokens" : pad.c_str());
            ImGui::EndTooltip();
        }
    }
}

std::optional<MaskPanels> MaskPanels::fit(const WindowState& state, const Session& session, const Ui& ui) {
    const AttentionOptions options = session.shown_options_at(state.layer);
    const int T = session.shown.attention.T, b = state.selected, length = session.length(b);
    const float line = ImGui::GetTextLineHeight(), spacing = ImGui::GetStyle().ItemSpacing.y;
    MaskPanels p;
    p.T_ = T;
    p.label_w_ = ImGui::CalcTextSize("000 empty rows").x + 10 * ui.scale;
    p.gap_ = 2 * ImGui::GetStyle().ItemSpacing.x;
    const int window = session.model().config.sliding_window;
    const std::string text_name = "text " + std::to_string(b + 1);
    p.headers_ = {
        {"causal mask (T x T)", options.causal ? "every text's: key j <= query i" : "off: every key visible"}};
    if (window)
        p.headers_.push_back(
            {"sliding window (T x T)",
             options.sliding_window ? (options.window_both_ways ? "every text's: |key j - query i| < "
                                                                : "every text's: key j > query i - ") +
                                          std::to_string(window)
             : state.sliding_window_on
                 ? "none in layer " + std::to_string(state.layer) + ": a global layer, every key visible"
                 : "off: every key visible (the model's is " + std::to_string(window) + ")"});
    p.headers_.push_back(
        {"padding mask of " + text_name + " (1 x T)",
         options.padding_mask ? "keys j < " + std::to_string(length) + ", its length" : "off: every key visible"});
    p.headers_.push_back({"combined: what the engine used", masks_used(options)});
    p.headers_.push_back(
        {"attention " + head_label(session, state.layer, state.head), "of " + text_name + ", hatched where masked"});
    const int panels = static_cast<int>(p.headers_.size());

    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // Below the titles (two lines, unless they wrap), the key row (a cell, at
    // least 8 pixels) and its caption, the square, then the legend.
    const float two_lines = 2 * (line + spacing);
    auto side_for_height = [&](float titles) {
        const float fixed = titles + (line + 2 * spacing) + 2 * (line + spacing);
        return std::min(avail.y - fixed - 8 * ui.scale, (avail.y - fixed) * T / (T + 1));
    };
    // A learned sink's column, one cell wide, and its gap come before the attention's keys, which line up with
    // the masks' (MapWidget::draw_cells).
    const bool sinks = session.maps(AttentionKind::decoder).sinks;
    const float sink_gap_room = sinks ? sink_gap(ui, avail.x) : 0;
    auto cell_beside = [&](float column) {
        const float keys = avail.x - column - 2 * p.label_w_ - (panels - 1) * p.gap_ - sink_gap_room;
        return std::min(keys / (panels * T + sinks), side_for_height(two_lines) / T);
    };
    // The tokens run along the first square, the queries in a column to its
    // left kept only while a row is tall enough to read them.
    const float query_column = 90 * ui.scale, smallest_label = 0.6f * ImGui::GetFontSize();
    p.query_column_ = cell_beside(query_column) >= smallest_label ? query_column : 0;
    float cell = cell_beside(p.query_column_);
    // Titles wrap within their panel; every square starts below the tallest.
    p.wrap_ = cell * T + p.gap_ / 2;
    p.titles_ = two_lines;
    for (const auto& [title, detail] : p.headers_)
        p.titles_ =
            std::max(p.titles_, ImGui::CalcTextSize(title.c_str(), nullptr, false, p.wrap_).y +
                                    ImGui::CalcTextSize(detail.c_str(), nullptr, false, p.wrap_).y + 2 * spacing);
    cell = std::min(cell, side_for_height(p.titles_) / T);
    if (cell < 2) {  // each cell is drawn: under 2 px they would blur into one another
        ImGui::TextWrapped(
            "T = %d tokens is too long for the mask panels in this window (a cell would be under 2 "
            "pixels): a shorter text, or a larger window, shows them. The heads and tokens tabs show "
            "every token.",
            T);
        return std::nullopt;
    }
    p.cell_ = cell >= 4 ? std::floor(cell) : cell;
    p.key_row_ = std::max(p.cell_, 8 * ui.scale);  // the padding panel's 1 x T row, never a hairline
    // Panels at fixed offsets, so a caption wider than its square cannot push the others.
    p.panels_x_ = ImGui::GetCursorPosX() + p.query_column_;
    ImGui::SetCursorPosX(p.panels_x_);
    return p;
}

void MaskPanels::next() {
    ImGui::EndGroup();
    ++panel_;
    const bool last = panel_ == static_cast<int>(headers_.size()) - 1;
    ImGui::SameLine(panels_x_ + panel_ * (side() + gap_) + (last ? label_w_ : 0));
}

void MaskPanels::title() {
    ImGui::BeginGroup();
    const float top = ImGui::GetCursorPosY();
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap_);
    ImGui::TextUnformatted(headers_[panel_].first.c_str());
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextUnformatted(headers_[panel_].second.c_str());
    ImGui::PopStyleColor();
    ImGui::PopTextWrapPos();
    ImGui::SetCursorPosY(top + titles_);
}

// The padding panel's 1 x T row and its caption sit above its square, in
// space the other panels leave blank.
void MaskPanels::above_square() const {
    ImGui::Dummy(ImVec2(side(), key_row_ + ImGui::GetStyle().ItemSpacing.y + ImGui::GetTextLineHeight()));
}

void MaskPanels::causal(const WindowState& state, const Session& session, Ui& ui) {
    const AttentionOptions options = session.shown_options_at(state.layer);
    title();
    above_square();
    const DrawnGrid causal = mask_grid(ui, "causal", state.selected, 0, T_, T_, ImVec2(cell_, cell_),
                                       [&](int i, int j) { return causal_allows(options, i, j); });
    if (query_column_ > 0) draw_token_labels(state, session, ui, causal.origin, cell_, query_column_ - 6 * ui.scale);
    cell_tooltip(state, session, causal,
                 !options.causal              ? "causal mask off: visible"
                 : causal.key <= causal.query ? "the key is not after the query: visible"
                                              : "the key comes after the query: the causal mask hides it");
}

void MaskPanels::window(const WindowState& state, const Session& session, Ui& ui) {
    const AttentionOptions options = session.shown_options_at(state.layer);
    title();
    above_square();
    const DrawnGrid sliding = mask_grid(ui, "window", state.selected, 0, T_, T_, ImVec2(cell_, cell_),
                                        [&](int i, int j) { return window_allows(options, i, j); });
    cell_tooltip(state, session, sliding,
                 !options.sliding_window ? "sliding window off: visible"
                 : window_allows(options, sliding.query, sliding.key)
                     ? "within the sliding window: visible"
                     : "too far from the query: the sliding window hides it");
}

void MaskPanels::padding(const WindowState& state, const Session& session, Ui& ui) {
    const AttentionOptions options = session.shown_options_at(state.layer);
    const int b = state.selected, length = session.length(b);
    title();
    auto padding = [&](int, int j) { return padding_allows(options, j, length); };
    auto padding_state = [&](const DrawnGrid& grid) {
        return !options.padding_mask ? "padding mask off: visible"
               : grid.key < length   ? "a token of the text: visible"
                                     : "a pad key: the padding mask hides it";
    };
    const DrawnGrid row = mask_grid(ui, "padding", b, -1, 1, T_, ImVec2(cell_, key_row_), padding);
    cell_tooltip(state, session, row, padding_state(row));
    ImGui::TextDisabled("broadcast to T x T (B x 1 x T x T)");
    const DrawnGrid square = mask_grid(ui, "padding", b, 0, T_, T_, ImVec2(cell_, cell_), padding);
    cell_tooltip(state, session, square, padding_state(square));
}

void MaskPanels::combined(const WindowState& state, const Session& session, Ui& ui) {
    const AttentionOptions options = session.shown_options_at(state.layer);
    const int b = state.selected, length = session.length(b), T = T_;
    title();
    above_square();
    auto visible = [&](int i, int j) { return attends(options, i, j, length, T); };
    const DrawnGrid combined = mask_grid(ui, "combined", b, 0, T, T, ImVec2(cell_, cell_), visible);
    outline_empty_rows(state, session, combined.origin, cell_);
    if (combined.key < 0) return;
    const int i = combined.query, j = combined.key;
    cell_tooltip(state, session, combined,
                 visible_end(options, i, length, T) == 0
                     ? "a pad query: nothing to attend to, its weights are all zero (never NaN)"
                 : visible(i, j)                 ? "visible: the query attends to this key"
                 : !causal_allows(options, i, j) ? "masked: the key comes after the query"
                 : !window_allows(options, i, j) ? "masked: the key is outside the sliding window"
                                                 : "masked: the key is a pad");
}

void MaskPanels::attention_title() {
    title();
    above_square();
}

void MaskPanels::legend(const WindowState& state, const Session& session) const {
    int empty_rows = 0;
    for (int i = 0; i < T_; ++i) empty_rows += session.shown.attention.row_fully_masked(state.selected, i);
    legend_entry(mask_allowed_colour, "the query may attend to the key");
    ImGui::SameLine(0, gap_);
    legend_entry(mask_blocked_colour, "masked");
    ImGui::SameLine(0, gap_);
    legend_entry(mask_empty_row_colour, "", true);
    ImGui::SameLine();
    ImGui::Text("%d row%s of text %d with nothing to attend to: weights all zero, never NaN", empty_rows,
                empty_rows == 1 ? "" : "s", state.selected + 1);
}

void cross_mask(const WindowState& state, const Session& session, Ui& ui) {
    const AttentionResult& att = session.shown.attention;
    if (!att.encoder) return;
    const AttentionOptions& options = session.shown_options;
    const int b = state.selected, T = att.T, S = att.S;
    const int target = session.length(b), source = static_cast<int>(session.shown.source_ids[b].size());
    ImGui::Text("Cross-attention mask of text %d (T x T_src): each target query over the source's keys", b + 1);
    ImGui::TextDisabled(options.padding_mask ? "the source's padding only (keys j < %d, its length); no causal "
                                               "mask: the whole source is known"
                                             : "padding mask off: every source key visible (%d are the text's)",
                        source);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float cell = std::clamp(std::floor(std::min(avail.x / S, avail.y / T)), 2.f, 14 * ui.scale);
    const auto visible = [&](int i, int j) { return j < cross_visible_end(options, i, target, source, S); };
    const DrawnGrid grid = mask_grid(ui, "cross", b, 0, T, S, ImVec2(cell, cell), visible);
    if (grid.key < 0) return;
    ImGui::BeginTooltip();
    ImGui::Text("target query %d %s  ->  source key %d %s", grid.query,
                shown_token(session, b, grid.query, true).c_str(), grid.key,
                shown_token(session, session.shown.source_ids[b], grid.key, true).c_str());
    ImGui::TextUnformatted(visible(grid.query, grid.key) ? "visible"
                           : grid.query >= target        ? "a pad query: nothing to attend to"
                                                         : "a pad of the source: masked");
    ImGui::EndTooltip();
}

}  // namespace headscope
