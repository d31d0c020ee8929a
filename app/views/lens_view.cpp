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

// The top tokens of layer slot `slot` at position t.
void lens_tooltip(const WindowState& state, const Session& s, const LensRows& rows, int slot, int t) {
    const Prediction* top = rows.at(slot, t);
    ImGui::BeginTooltip();
    ImGui::Text("after layer %d, at %s (token %d)", (*rows.layers)[slot],
                shown_token(s, state.selected, t, true).c_str(), t);
    for (int k = 0; k < rows.k && top[k].id >= 0; ++k)
        ImGui::Text("%d. %s  %.4f", k + 1, shown_token(s.model().tokenizer, top[k].id, true).c_str(), top[k].p);
    ImGui::EndTooltip();
}

// A long text's lens cells are at least this wide (points), its positions as many as fit.
constexpr float long_lens_cell_w = 56;

// A long text's lens positions [first, end) that fit `fit` cells: those
// from the first of the rows last on screen (the tokens tab's, the zoomed
// map's), unless the query row is among them; else the query row and those
// before it.
std::pair<int, int> long_lens_positions(const WindowState& state, int length, int fit) {
    const int query = state.query >= 0 && state.query < length ? state.query : length - 1;
    const int begin = std::clamp(state.rows_shown_begin, 0, length), end = std::min(state.rows_shown_end, length);
    const int last = begin < end && (query < begin || query >= end) ? std::min(begin + fit, length) - 1 : query;
    return {std::max(0, last + 1 - fit), last + 1};
}

}  // namespace

LensRows lens_rows(const WindowState& state, const Session& s) {
    if (s.long_text()) {
        const LensAnswer* answer = s.long_lens().answer();
        if (!answer || answer->ask.b != state.selected) return {};
        const LensAsk& ask = answer->ask;
        return {&answer->layers,         ask.first,
                ask.end - ask.first,     ask.k,
                answer->tops.data(),     static_cast<size_t>(ask.end - ask.first),
                s.long_lens().answered()};
    }
    const AttentionResult& att = s.shown.attention;
    if (att.lens_k == 0) return {};
    return {&att.layers,
            0,
            s.length(state.selected),
            att.lens_k,
            att.lens.data() + static_cast<size_t>(state.selected) * att.T * att.lens_k,
            static_cast<size_t>(att.B) * att.T,
            0};
}

HeatmapImage lens_probabilities(const WindowState& state, const Session& s) {
    const LensRows rows = lens_rows(state, s);
    const int L = rows.count ? rows.layer_count() : 0;
    HeatmapImage probabilities{.rows = L, .cols = rows.count, .cells = {}};
    for (int slot = 0; slot < L; ++slot)
        for (int t = rows.first; t < rows.first + rows.count; ++t) probabilities.cells.push_back(rows.at(slot, t)[0].p);
    return probabilities;
}

bool LensView::ask_long_lens(const WindowState& state, Session& s, Ui& ui, float width) {
    const int fit = std::clamp(static_cast<int>(width / (long_lens_cell_w * ui.scale)), 1, 256);
    const auto [first, end] = long_lens_positions(state, s.length(state.selected), fit);
    s.ask_lens(first, end);
    const LongLens& lens = s.long_lens();
    const LensAnswer* answer = lens.answer();
    const bool shown = answer && answer->ask.b == state.selected;
    if (lens.waiting())
        ImGui::Text(
            "the logit lens of positions %d to %d waits for the text's forward, whose keys and values it "
            "reads...",
            first, end - 1);
    else if (!lens.message().empty() && !lens.pending())
        ImGui::TextUnformatted(("The logit lens: " + lens.message()).c_str());
    else if (!shown || lens.pending())
        ImGui::Text("computing the logit lens of positions %d to %d (the forward up to them, on a worker)...", first,
                    end - 1);
    return shown;
}

void LensView::draw(WindowState& state, Session& s, Ui& ui) {
    if (s.long_text() && s.model().config.predicts() &&
        !ask_long_lens(state, s, ui, ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("L00").x))
        return;
    const LensRows rows = lens_rows(state, s);
    if (rows.count == 0) {
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
    if (s.long_text())
        ImGui::TextWrapped(
            "A long text: positions %d to %d, from the first of the rows last on screen (the tokens tab's, the "
            "zoomed map's), or the query row and those before it (click a token to choose the row).",
            rows.first, rows.first + rows.count - 1);
    ImGui::PopStyleColor();
    const int L = rows.layer_count(), length = rows.count;
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
        std::snprintf(label, sizeof label, "L%d", (*rows.layers)[slot]);
        ImGui::GetWindowDrawList()->AddText(ImVec2(start.x, start.y + header + slot * cell_h + (cell_h - line) / 2),
                                            ImGui::GetColorU32(ImGuiCol_Text), label);
    }
    ImGui::SetCursorScreenPos(ImVec2(start.x + label_w, start.y));
    // This frame's width, so that a zoom's scroll is clamped to it, not to the last frame's.
    ImGui::SetNextWindowContentSize(ImVec2(cell_w * length, 0));
    ImGui::BeginChild("lens grid", ImVec2(0, header + L * cell_h + scrollbar), false,
                      ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    grid(state, s, rows, ui, {cell_w, cell_h}, header, fit_w);
    ImGui::EndChild();
}

// Inside the scrolling child: the cells in view, their tokens, the labels
// above the columns, hover, and zoom and pan.
void LensView::grid(WindowState& state, const Session& s, const LensRows& rows, Ui& ui, ImVec2 cell, float header,
                    float fit_w) {
    // Columns c of the grid are positions rows.first + c.
    const int L = rows.layer_count(), b = state.selected, length = rows.count, at = rows.first;
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
    if (generation_ != s.shown_generation || b_ != b || answered_ != rows.answered) {
        ui.renderer.upload(lens_probabilities(state, s), texture_);
        generation_ = s.shown_generation, b_ = b, answered_ = rows.answered;
    }
    ui.renderer.draw_on_screen(ui.colormap, texture_, ImVec2(origin.x + first * cell.x, origin.y),
                               ImVec2(origin.x + end * cell.x, origin.y + L * cell.y),
                               {static_cast<float>(first) / length, 0, static_cast<float>(end) / length, 1});
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float pad = 4 * ui.scale;
    if (cell.y >= line && cell.x >= 3 * ImGui::CalcTextSize("M").x + pad)
        for (int slot = 0; slot < L; ++slot)
            for (int t = first; t < end; ++t) {
                const Prediction& best = rows.at(slot, at + t)[0];
                const ImU32 ink = best.p > lens_dark_text_above ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
                const std::string shown = ellipsized(shown_token(s.model().tokenizer, best.id), line, cell.x - pad - 1);
                const ImVec2 place(origin.x + t * cell.x, origin.y + slot * cell.y);
                drawn_text(ui,
                           {{"view", "lens-top"},
                            {"layer", (*rows.layers)[slot]},
                            {"position", at + t},
                            {"id", best.id},
                            {"p", best.p},
                            {"text", shown}},
                           draw, ImGui::GetFontSize(), ImVec2(place.x + pad, place.y + (cell.y - line) / 2), ink, shown,
                           place, cell);
            }
    // The tokens above their columns in two staggered rows; where cells are
    // narrower than a short word, every k-th (zoom in or hover for the rest).
    const int every = std::max(1, static_cast<int>(std::ceil(ImGui::CalcTextSize("MMM").x / (2 * cell.x))));
    for (int t = first / every * every; t < end; t += every) {
        const float x = origin.x + t * cell.x, y = top.y + (t / every % 2 ? line : 0);
        const std::string shown = ellipsized(shown_token(s, b, at + t), line, 2 * every * cell.x - pad);
        drawn_text(ui, {{"view", "lens-label"}, {"position", at + t}, {"text", shown}}, draw, ImGui::GetFontSize(),
                   ImVec2(x, y), ImGui::GetColorU32(ImGuiCol_Text), shown, ImVec2(x, y),
                   ImGui::CalcTextSize(shown.c_str()));
    }
    ui.layout.grid({{"view", "lens"}, {"row", "layer"}, {"col", "position"}, {"first_col", at}},
                   {origin, cell, cell, L, length});
    if (!hovered) return;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int t = std::clamp(static_cast<int>((mouse.x - origin.x) / cell.x), 0, length - 1);
    if (ui.tooltips) {
        lens_tooltip(state, s, rows, std::clamp(static_cast<int>((mouse.y - origin.y) / cell.y), 0, L - 1), at + t);
        state.hovered_query = at + t;
        if (clicked) state.query = at + t;
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
