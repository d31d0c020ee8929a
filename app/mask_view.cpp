#include "mask_view.h"

#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace headscope {

namespace {

// A text on one short line, for the batch list.
std::string preview(const std::string& text) {
    constexpr size_t max_chars = 70;
    std::string line = text.substr(0, max_chars);
    std::replace(line.begin(), line.end(), '\n', ' ');
    return text.size() > max_chars ? line + "..." : line;
}

struct DrawnGrid {
    ImVec2 origin;            // the top left
    int query = 0, key = -1;  // the cell under the mouse; key -1 when none
};

// Draws rows x cols mask cells of `cell` pixels from the cursor, coloured by
// allowed(query, key), where row r is query first_query + r; records the
// grid for --layout as mask `mask` of text b.
template <typename Allowed>
DrawnGrid mask_grid(Ui& ui, const char* mask, int b, int first_query, int rows, int cols, ImVec2 cell,
                    Allowed allowed) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    DrawnGrid grid{ImGui::GetCursorScreenPos()};
    // A one-pixel gap between cells large enough to show it; smaller cells
    // touch, and a row's run of same-coloured cells is drawn as one rectangle.
    const bool gaps = std::min(cell.x, cell.y) >= 8;
    const ImVec2 filled(gaps ? cell.x - 1 : cell.x, gaps ? cell.y - 1 : cell.y);
    for (int r = 0; r < rows; ++r) {
        const int i = first_query + r;
        const float top = grid.origin.y + r * cell.y;
        for (int j = 0; j < cols;) {
            const bool visible = allowed(i, j);
            int end = j + 1;
            while (!gaps && end < cols && allowed(i, end) == visible) ++end;
            draw->AddRectFilled(ImVec2(grid.origin.x + j * cell.x, top),
                                ImVec2(grid.origin.x + (end - 1) * cell.x + filled.x, top + filled.y),
                                visible ? mask_allowed_colour : mask_blocked_colour);
            j = end;
        }
    }
    ui.layout.grid(
        {{"view", "mask"}, {"mask", mask}, {"b", b}, {"row", "query"}, {"first_row", first_query}, {"col", "key"}},
        {grid.origin, cell, filled, rows, cols});
    ImGui::Dummy(ImVec2(cols * cell.x, rows * cell.y));
    if (ui.tooltips && ImGui::IsItemHovered()) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        grid.query = first_query + std::clamp(static_cast<int>((mouse.y - grid.origin.y) / cell.y), 0, rows - 1);
        grid.key = std::clamp(static_cast<int>((mouse.x - grid.origin.x) / cell.x), 0, cols - 1);
    }
    return grid;
}

// The hovered cell's tokens and what the mask does there.
void cell_tooltip(const Session& session, const DrawnGrid& grid, const char* state) {
    if (grid.key < 0) return;
    ImGui::BeginTooltip();
    const std::string key = token_text(session, grid.key);
    if (grid.query >= 0)
        ImGui::Text("query %d %s  ->  key %d %s", grid.query, token_text(session, grid.query).c_str(), grid.key,
                    key.c_str());
    else
        ImGui::Text("key %d %s, for every query", grid.key, key.c_str());
    ImGui::TextUnformatted(state);
    ImGui::EndTooltip();
}

// Outlines the rows of the selected text with nothing to attend to on a
// T x T grid at `origin`, each run of them as one block, labelled on its right.
void outline_empty_rows(const Session& session, ImVec2 origin, float cell) {
    const AttentionResult& att = session.shown.attention;
    auto empty = [&](int i) { return att.row_fully_masked(session.selected, i); };
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

// The selected text's tokens along a square at `origin`, at the font size a
// row of `cell` pixels holds: the queries (then "<pad>") down its left,
// right-aligned in a column of `width`; the keys above it, each on one of two
// staggered lines so that neighbours do not collide, and the pad keys as one
// label over their run. A label longer than its place ends in an ellipsis.
// Each label's place is recorded for --layout, with what is shown in it.
void draw_token_labels(const Session& session, Ui& ui, ImVec2 origin, float cell, float width) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float size = std::min(ImGui::GetFontSize(), cell), shrink = size / ImGui::GetFontSize();
    const ImU32 colour = ImGui::GetColorU32(ImGuiCol_Text);
    const float right = origin.x - 4 * ui.scale, bottom = origin.y - 2 * ui.scale;
    auto label = [&](const char* axis, int t, const std::string& text, ImVec2 at, const ImVec4& place) {
        const std::string shown = ellipsized(text, size, place.z - at.x);
        draw->AddText(ImGui::GetFont(), size, at, colour, shown.c_str());
        ui.layout.rect({{"view", "mask label"}, {"axis", axis}, {"index", t}, {"text", text}, {"shown", shown}},
                       ImVec2(place.x, place.y), ImVec2(place.z - place.x, place.w - place.y));
    };
    const int T = session.shown.attention.T, length = session.length(session.selected);
    for (int t = 0; t < T; ++t) {
        const std::string text = token_label(session, t);
        const float row_top = origin.y + t * cell;
        const float x = std::max(right - ImGui::CalcTextSize(text.c_str()).x * shrink, right - width);
        label("query", t, text, ImVec2(x, row_top + (cell - size) / 2),
              ImVec4(right - width, row_top, right, row_top + cell));
        if (t >= length) continue;
        const float column_left = origin.x + t * cell, line_top = bottom - (t % 2 ? 1 : 2) * size;
        const float clip_right = std::min(column_left + 2 * cell, origin.x + length * cell);
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

void MaskView::batch_list(Session& session, const Ui& ui) {
    const int shown_B = static_cast<int>(session.shown.token_ids.size()), T = session.shown.attention.T;
    if (select_when_shown_ >= 0 && select_when_shown_ < shown_B) {
        session.selected = select_when_shown_;
        select_when_shown_ = -1;
    }
    if (shown_B > 0)
        ImGui::Text("Batch of %zu texts, right-padded with <|endoftext|> to the longest: T = %d tokens",
                    session.texts.size(), T);
    else
        ImGui::Text("Batch of %zu texts", session.texts.size());
    int remove = -1;
    for (int b = 0; b < static_cast<int>(session.texts.size()); ++b) {
        ImGui::PushID(b);
        // A text not yet computed cannot be shown: the views draw the last compute.
        const bool computed = b < shown_B;
        ImGui::BeginDisabled(!computed);
        if (ImGui::RadioButton("##select", session.selected == b)) session.selected = b;
        ImGui::EndDisabled();
        ImGui::SameLine();
        ImGui::BeginDisabled(session.texts.size() == 1);
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
        ImGui::TextUnformatted(preview(session.texts[b]).c_str());
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
        session.texts.push_back(new_text_);
        new_text_.clear();
        select_when_shown_ = static_cast<int>(session.texts.size()) - 1;
        session.submit();
    }
    if (remove >= 0) {
        session.texts.erase(session.texts.begin() + remove);
        // Keep the same text selected, or its neighbour when it was the one removed.
        if (session.selected > remove || session.selected == static_cast<int>(session.texts.size())) --session.selected;
        select_when_shown_ = -1;
        session.submit();
    }
}

void MaskView::draw(Session& session, Ui& ui) {
    batch_list(session, ui);
    ImGui::Separator();

    const AttentionOptions& options = session.shown_options;  // what the shown compute used
    const int B = static_cast<int>(session.shown.token_ids.size()), T = session.shown.attention.T;
    const int b = session.selected, length = session.length(b);
    const float line = ImGui::GetTextLineHeight(), spacing = ImGui::GetStyle().ItemSpacing.y;
    const float label_w = ImGui::CalcTextSize("000 empty rows").x + 10 * ui.scale;
    const float gap = 2 * ImGui::GetStyle().ItemSpacing.x;

    // The whole batch's padding masks, one 1 x T row per text.
    ImGui::TextUnformatted(
        options.padding_mask ? "Padding masks of the batch (B x T): a text's pad keys are masked"
                             : "Padding masks of the batch (B x T): off, pads attend and are attended like any token");
    const float row_label = ImGui::CalcTextSize("> text 00").x + 8 * ui.scale;
    const float overview_cell =
        std::clamp(std::floor((ImGui::GetContentRegionAvail().x - row_label) / T), 2.f, 14 * ui.scale);
    for (int text = 0; text < B; ++text) {
        const int text_length = session.length(text);
        ImGui::Text("%s text %d", text == b ? ">" : " ", text + 1);
        ImGui::SameLine(row_label);
        const DrawnGrid grid = mask_grid(ui, "padding", text, -1, 1, T, ImVec2(overview_cell, overview_cell),
                                         [&](int, int j) { return padding_allows(options, j, text_length); });
        if (grid.key >= 0) {
            ImGui::BeginTooltip();
            ImGui::Text("text %d, key %d: %s", text + 1, grid.key,
                        grid.key < text_length ? "one of its tokens" : "a pad (<|endoftext|>)");
            ImGui::EndTooltip();
        }
    }
    ImGui::Separator();

    // Squares of one size, tops aligned: causal, the sliding window (a model
    // with one), padding, combined, attention. The padding panel's 1 x T row
    // and its caption sit above its square, in space the others leave blank.
    // The tokens run along the first, the queries in a column to its left
    // kept only while a row is tall enough to read them.
    const int window = session.model().config.sliding_window;
    const std::string text_name = "text " + std::to_string(b + 1);
    // Each panel's title and detail, in order.
    std::vector<std::pair<std::string, std::string>> headers = {
        {"causal mask (T x T)", options.causal ? "every text's: key j <= query i" : "off: every key visible"}};
    if (window)
        headers.push_back(
            {"sliding window (T x T)", options.sliding_window
                                           ? "every text's: key j > query i - " + std::to_string(window)
                                           : "off: every key visible (the model's is " + std::to_string(window) + ")"});
    headers.push_back(
        {"padding mask of " + text_name + " (1 x T)",
         options.padding_mask ? "keys j < " + std::to_string(length) + ", its length" : "off: every key visible"});
    headers.push_back({"combined: what the engine used", masks_used(options)});
    headers.push_back({"attention " + head_label(session, session.layer, session.head),
                       "of " + text_name + ", hatched where masked"});
    const int panels = static_cast<int>(headers.size());

    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // Below the titles (two lines, unless they wrap), the key row (a cell, at
    // least 8 pixels) and its caption, the square, then the legend.
    const float two_lines = 2 * (line + spacing);
    auto side_for_height = [&](float titles) {
        const float fixed = titles + (line + 2 * spacing) + 2 * (line + spacing);
        return std::min(avail.y - fixed - 8 * ui.scale, (avail.y - fixed) * T / (T + 1));
    };
    auto cell_beside = [&](float column) {
        return std::min((avail.x - column - 2 * label_w - (panels - 1) * gap) / panels, side_for_height(two_lines)) / T;
    };
    const float query_column = 90 * ui.scale, smallest_label = 0.6f * ImGui::GetFontSize();
    const bool token_labels = cell_beside(query_column) >= smallest_label;
    float cell = cell_beside(token_labels ? query_column : 0);
    // Titles wrap within their panel; every square starts below the tallest.
    const float wrap = cell * T + gap / 2;
    float titles = two_lines;
    for (const auto& [title, detail] : headers)
        titles = std::max(titles, ImGui::CalcTextSize(title.c_str(), nullptr, false, wrap).y +
                                      ImGui::CalcTextSize(detail.c_str(), nullptr, false, wrap).y + 2 * spacing);
    cell = std::min(cell, side_for_height(titles) / T);
    if (cell < 2) {
        ImGui::TextUnformatted("The window is too small for the masks.");
        return;
    }
    if (cell >= 4) cell = std::floor(cell);
    const float side = cell * T;
    const float key_row = std::max(cell, 8 * ui.scale);   // the padding panel's 1 x T row, never a hairline
    const float above_square = key_row + spacing + line;  // that row and its caption

    // Panels at fixed offsets, so a caption wider than its square cannot push the others.
    const float panels_x = ImGui::GetCursorPosX() + (token_labels ? query_column : 0);
    int panel = 0;  // the last one placed
    auto next_panel = [&] {
        ++panel;
        ImGui::SameLine(panels_x + panel * (side + gap) + (panel == panels - 1 ? label_w : 0));
    };
    auto panel_title = [&] {
        const float top = ImGui::GetCursorPosY();
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap);
        ImGui::TextUnformatted(headers[panel].first.c_str());
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextUnformatted(headers[panel].second.c_str());
        ImGui::PopStyleColor();
        ImGui::PopTextWrapPos();
        ImGui::SetCursorPosY(top + titles);
    };

    ImGui::SetCursorPosX(panels_x);
    ImGui::BeginGroup();
    panel_title();
    ImGui::Dummy(ImVec2(side, above_square));
    const DrawnGrid causal = mask_grid(ui, "causal", b, 0, T, T, ImVec2(cell, cell),
                                       [&](int i, int j) { return causal_allows(options, i, j); });
    if (token_labels) draw_token_labels(session, ui, causal.origin, cell, query_column - 6 * ui.scale);
    cell_tooltip(session, causal,
                 !options.causal              ? "causal mask off: visible"
                 : causal.key <= causal.query ? "the key is not after the query: visible"
                                              : "the key comes after the query: the causal mask hides it");
    ImGui::EndGroup();
    next_panel();

    if (window) {
        ImGui::BeginGroup();
        panel_title();
        ImGui::Dummy(ImVec2(side, above_square));
        const DrawnGrid sliding = mask_grid(ui, "window", b, 0, T, T, ImVec2(cell, cell),
                                            [&](int i, int j) { return window_allows(options, i, j); });
        cell_tooltip(session, sliding,
                     !options.sliding_window ? "sliding window off: visible"
                     : window_allows(options, sliding.query, sliding.key)
                         ? "within the window of the query's latest keys: visible"
                         : "too far back: the sliding window hides it");
        ImGui::EndGroup();
        next_panel();
    }

    ImGui::BeginGroup();
    panel_title();
    auto padding = [&](int, int j) { return padding_allows(options, j, length); };
    auto padding_state = [&](const DrawnGrid& grid) {
        return !options.padding_mask ? "padding mask off: visible"
               : grid.key < length   ? "a token of the text: visible"
                                     : "a pad key: the padding mask hides it";
    };
    const DrawnGrid row = mask_grid(ui, "padding", b, -1, 1, T, ImVec2(cell, key_row), padding);
    cell_tooltip(session, row, padding_state(row));
    ImGui::TextDisabled("broadcast to T x T (B x 1 x T x T)");
    const DrawnGrid square = mask_grid(ui, "padding", b, 0, T, T, ImVec2(cell, cell), padding);
    cell_tooltip(session, square, padding_state(square));
    ImGui::EndGroup();
    next_panel();

    ImGui::BeginGroup();
    panel_title();
    ImGui::Dummy(ImVec2(side, above_square));
    auto visible = [&](int i, int j) { return attends(options, i, j, length, T); };
    const DrawnGrid combined = mask_grid(ui, "combined", b, 0, T, T, ImVec2(cell, cell), visible);
    outline_empty_rows(session, combined.origin, cell);
    if (combined.key >= 0) {
        const int i = combined.query, j = combined.key;
        cell_tooltip(session, combined,
                     visible_end(options, i, length, T) == 0
                         ? "a pad query: nothing to attend to, its weights are all zero (never NaN)"
                     : visible(i, j)                 ? "visible: the query attends to this key"
                     : !causal_allows(options, i, j) ? "masked: the key comes after the query"
                     : !window_allows(options, i, j) ? "masked: the key is outside the sliding window"
                                                     : "masked: the key is a pad");
    }
    ImGui::EndGroup();
    next_panel();

    ImGui::BeginGroup();
    panel_title();
    ImGui::Dummy(ImVec2(side, above_square));
    const ImVec2 map = ImGui::GetCursorScreenPos();
    attention_map_.draw(session, ui, "mask_attention", session.layer, session.head, side);
    outline_empty_rows(session, map, cell);
    ImGui::EndGroup();

    int empty_rows = 0;
    for (int i = 0; i < T; ++i) empty_rows += session.shown.attention.row_fully_masked(b, i);
    legend_entry(mask_allowed_colour, "the query may attend to the key");
    ImGui::SameLine(0, gap);
    legend_entry(mask_blocked_colour, "masked");
    ImGui::SameLine(0, gap);
    legend_entry(mask_empty_row_colour, "", true);
    ImGui::SameLine();
    ImGui::Text("%d row%s of %s with nothing to attend to: weights all zero, never NaN", empty_rows,
                empty_rows == 1 ? "" : "s", text_name.c_str());
}

}  // namespace headscope
