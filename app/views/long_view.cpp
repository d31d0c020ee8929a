// The long-text view: see long_view.h.
#include "views/long_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

std::vector<float> RowSummaries::*summary_of(Summary summary) {
    switch (summary) {
        case Summary::entropy: return &RowSummaries::entropy;
        case Summary::sink: return &RowSummaries::first_key;
        case Summary::distance: return &RowSummaries::distance;
        case Summary::previous: return &RowSummaries::previous_key;
    }
    return &RowSummaries::entropy;
}

// Head h's mean of `summary` over query rows [first, end) of text b in layer
// slot `slot` (rows from 1: row 0 sees key 0 alone under the causal mask, as sink_mass leaves it out).
float mean_summary(const Session& session, Summary summary, int slot, int b, int h, int first, int end) {
    const AttentionResult& att = session.shown.attention;
    const SummaryRows values = att.summary(summary_of(summary), static_cast<size_t>(slot), b, h);
    double sum = 0;
    for (int q = first; q < end; ++q) sum += values[q];
    return end > first ? static_cast<float>(sum / (end - first)) : 0.f;
}

// `values` scaled from their smallest (0) to their largest (1), all 0 when they are equal.
HeatmapImage scaled_image(int rows, int cols, std::vector<float> values, LongView::Span& span) {
    const auto [smallest, largest] = std::minmax_element(values.begin(), values.end());
    span = {*smallest, *largest};
    for (float& v : values) v = span.scaled(v);
    return {rows, cols, std::move(values)};
}

}  // namespace

MapRegion LongView::region(const Session& session) const {
    const int T = session.shown.attention.T;
    if (region_.rows() <= 0 || region_.row_end > T || region_.col_end > T) return {0, T, 0, T};
    return region_;
}

void LongView::draw(WindowState& state, Session& session, Ui& ui) {
    const int length = session.length(state.selected);
    text(ui, {{"view", "long-text"}, {"tokens", length}},
         "A long text, %d tokens: every head summarised, maps computed for what is shown.", length);
    ImGui::SameLine();
    ImGui::TextDisabled(
        "(the tokens tab shows a row, the logit lens the positions in view; the other tabs say what "
        "they show of it)");
    enum_combo(ui, "colour by", summary_, summary_choices.labels, 160 * ui.scale, "summary");
    ImGui::SameLine();
    enum_combo(ui, "pooling", pooling_, pooling_choices.labels, 80 * ui.scale, "pooling");
    if (session.rows_lent()) {  // an edit deeper than a few tokens: one set of kept rows, the forward's
        ImGui::SameLine();
        text_disabled(ui, {{"view", "rows-lent"}}, "%s: what is drawn is the last text's",
                      session.busy() ? "the edited text's forward is running" : "the edited text is not computed");
    } else if (session.map_pending()) {
        ImGui::SameLine();
        ImGui::TextDisabled("computing the map...");
    }
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // Beside the map: its title above, the hovered row's title and strip below.
    const float row_band = 3 * ImGui::GetTextLineHeightWithSpacing() + ImGui::GetFrameHeightWithSpacing();
    const float side = std::floor(std::min(avail.x * 0.6f, avail.y - row_band));
    const float left = std::floor(avail.x - side - ImGui::GetStyle().ItemSpacing.x);
    if (side < 32 || left < 64) {
        ImGui::TextUnformatted("The window is too small for the long-text view.");
        return;
    }
    ImGui::BeginGroup();
    overview(state, session, ui, left);
    distance_strip(state, session, ui, left);
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    head_map(state, session, ui, side);
    hovered_row(state, session, ui, side);
    ImGui::EndGroup();
}

// Layers down, heads across; a click opens the head.
void LongView::overview(WindowState& state, Session& session, Ui& ui, float width) {
    const AttentionResult& att = session.shown.attention;
    const int layers = static_cast<int>(att.layers.size()), NH = att.NH, b = state.selected;
    const int length = session.length(b);
    const auto key = std::tuple{session.shown_generation, b, summary_, 0, 0};
    if (key != overview_key_ && !session.rows_lent()) {  // summed up once for what is shown
        std::vector<float> values(static_cast<size_t>(layers) * NH);
        for (int l = 0; l < layers; ++l)
            for (int h = 0; h < NH; ++h)
                values[static_cast<size_t>(l) * NH + h] = mean_summary(session, summary_, l, b, h, 1, length);
        overview_ = scaled_image(layers, NH, std::move(values), overview_span_);
        ui.renderer.upload(overview_, overview_texture_);
        overview_key_ = key;
    }
    const Span& span = overview_span_;
    text_disabled(ui, {{"view", "overview-title"}, {"summary", summary_choices.words[static_cast<int>(summary_)]}},
                  "%s of each head (rows: layers, columns: heads), %.4g to %.4g",
                  summary_choices.labels[static_cast<int>(summary_)], span.smallest, span.largest);
    const float label = ImGui::CalcTextSize("L00").x + 4 * ui.scale;
    const float height = ImGui::GetContentRegionAvail().y - 3 * ImGui::GetTextLineHeightWithSpacing();
    const float cell = std::max(1.f, std::floor(std::min((width - label) / NH, height / layers)));
    const ImVec2 start = ImGui::GetCursorScreenPos(), origin(start.x + label, start.y);
    const ImVec2 end(origin.x + cell * NH, origin.y + cell * layers);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    for (int l = 0; l < layers && cell >= ImGui::GetFontSize() * 0.8f; ++l) {
        char name[16];
        std::snprintf(name, sizeof name, "L%d", att.layers[l]);
        draw->AddText(ImVec2(start.x, origin.y + l * cell), ImGui::GetColorU32(ImGuiCol_TextDisabled), name);
    }
    ImGui::SetCursorScreenPos(origin);
    ImGui::InvisibleButton("overview", ImVec2(cell * NH, cell * layers));
    ui.renderer.draw_on_screen(ui.colormap, overview_texture_, origin, end);
    ui.layout.grid({{"view", "overview"},
                    {"summary", summary_choices.words[static_cast<int>(summary_)]},
                    {"smallest", span.smallest},
                    {"largest", span.largest},
                    {"row", "layer"},
                    {"col", "head"}},
                   {origin, ImVec2(cell, cell), ImVec2(cell, cell), layers, NH});
    // The selected head framed.
    const ImVec2 at(origin.x + state.head * cell, origin.y + state.layer * cell);
    draw->AddRect(at, ImVec2(at.x + cell, at.y + cell), IM_COL32(255, 255, 255, 255));
    if (ImGui::IsItemHovered()) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int l = std::clamp(static_cast<int>((mouse.y - origin.y) / cell), 0, layers - 1);
        const int h = std::clamp(static_cast<int>((mouse.x - origin.x) / cell), 0, NH - 1);
        if (ui.tooltips)
            ImGui::SetTooltip("%s: %.4g\nclick to open it", head_label(session, att.layers[l], h).c_str(),
                              span.value(overview_.cells[static_cast<size_t>(l) * NH + h]));
        if (ImGui::IsItemClicked()) {
            state.layer = l, state.head = h;
            region_ = {};  // a new head opens whole
        }
    }
}

// The selected head's mean distance along the document: the query rows in
// equal parts, each part's mean, left (the text's start) to right.
void LongView::distance_strip(const WindowState& state, Session& session, Ui& ui, float width) {
    const int b = state.selected, length = session.length(b);
    const int parts = std::clamp(static_cast<int>(width / (4 * ui.scale)), 1, std::max(1, length - 1));
    const int step = (length - 1 + parts - 1) / parts;
    const int shown_parts = (length - 1 + step - 1) / step;
    const auto key = std::tuple{session.shown_generation, b, Summary::distance, state.layer, state.head, parts};
    if (key != strip_key_ && !session.rows_lent()) {  // the summaries' means once for what is shown
        std::vector<float> values(static_cast<size_t>(std::max(shown_parts, 1)), 0.f);
        for (int p = 0; p < shown_parts; ++p)
            values[p] = mean_summary(session, Summary::distance, state.layer, b, state.head, 1 + p * step,
                                     std::min(length, 1 + (p + 1) * step));
        strip_cols_ = static_cast<int>(values.size());
        ui.renderer.upload(scaled_image(1, strip_cols_, std::move(values), strip_span_), strip_texture_);
        strip_key_ = key;
    }
    const Span& span = strip_span_;
    text_disabled(ui, {{"view", "distance-title"}, {"layer", state.layer}, {"head", state.head}},
                  "L%d H%d: mean attention distance along the text (start to end), %.4g to %.4g tokens", state.layer,
                  state.head, span.smallest, span.largest);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float height = std::floor(1.5f * ImGui::GetFrameHeight());
    const float cell = width / static_cast<float>(std::max(strip_cols_, 1));
    ImGui::Dummy(ImVec2(width, height));
    ui.renderer.draw_on_screen(ui.colormap, strip_texture_, origin, ImVec2(origin.x + width, origin.y + height));
    ui.layout.grid({{"view", "distance-strip"},
                    {"layer", state.layer},
                    {"head", state.head},
                    {"rows_per_cell", step},
                    {"smallest", span.smallest},
                    {"largest", span.largest},
                    {"row", "row"},
                    {"col", "part"}},
                   {origin, ImVec2(cell, height), ImVec2(cell, height), 1, strip_cols_});
}

// Zoom (wheel) about the mouse and pan (drag) in whole tokens, down to 4 x 4;
// double-click: the whole map.
void LongView::head_map(WindowState& state, Session& session, Ui& ui, float side) {
    const int T = session.shown.attention.T, b = state.selected;
    MapRegion shown = region(session);
    const bool zoomed_in = shown.rows() < T;  // the lens follows the rows on screen (WindowState::rows_shown_begin)
    state.rows_shown_begin = zoomed_in ? shown.row_begin : 0, state.rows_shown_end = zoomed_in ? shown.row_end : 0;
    const float pixel_scale = ImGui::GetIO().DisplayFramebufferScale.x;
    const MapAsk ask{state.layer, state.head, b, shown, std::max(1, static_cast<int>(side * pixel_scale)), pooling_};
    session.ask_map(ask);
    if (const MapAnswer* answer = session.map_answer(); answer && !(map_uploaded_ == answer->ask)) {
        ui.renderer.upload(answer->image, map_texture_);
        map_uploaded_ = answer->ask;
    }
    text(ui, {{"view", "long-map-title"}, {"layer", state.layer}, {"head", state.head}},
         "%s: queries %d-%d, keys %d-%d%s", head_label(session, state.layer, state.head).c_str(), shown.row_begin,
         shown.row_end - 1, shown.col_begin, shown.col_end - 1,
         shown.rows() <= ask.pixels ? " (every cell)" : ", pooled");
    const ImVec2 origin = ImGui::GetCursorScreenPos(), end(origin.x + side, origin.y + side);
    ImGui::InvisibleButton("long map", ImVec2(side, side));
    // Read before the tooltip, a window of its own, makes itself the last item.
    const bool hovered = ImGui::IsItemHovered(), dragging = ImGui::IsItemActive();
    if (ImGui::IsItemActivated()) drag_start_ = shown;
    const bool current = map_uploaded_ == ask;
    if (map_uploaded_) {
        ui.renderer.draw_on_screen(ui.colormap, map_texture_, origin, end);
        const MapAnswer* answer = session.map_answer();
        if (current && answer) {
            const HeatmapImage& image = answer->image;
            const ImVec2 cell(side / image.cols, side / image.rows);
            ui.layout.grid({{"view", "long-map"},
                            {"layer", state.layer},
                            {"head", state.head},
                            {"row_begin", shown.row_begin},
                            {"row_end", shown.row_end},
                            {"col_begin", shown.col_begin},
                            {"col_end", shown.col_end},
                            {"step_rows", answer->step_rows},
                            {"step_cols", answer->step_cols},
                            {"pooling", pooling_choices.words[static_cast<int>(pooling_)]},
                            {"ms", answer->ms},
                            {"row", "cell_row"},
                            {"col", "cell_col"}},
                           {origin, cell, cell, image.rows, image.cols});
        }
    }
    if (!hovered) return;
    ImGuiIO& io = ImGui::GetIO();
    const float fx = std::clamp((io.MousePos.x - origin.x) / side, 0.f, 1.f),
                fy = std::clamp((io.MousePos.y - origin.y) / side, 0.f, 1.f);
    state.hovered_query = std::min(shown.row_end - 1, shown.row_begin + static_cast<int>(fy * shown.rows()));
    state.hovered_layer = state.layer, state.hovered_head = state.head;
    const MapAnswer* answer = session.map_answer();
    if (ui.tooltips && current && answer) {
        const HeatmapImage& image = answer->image;
        const int r = std::min(image.rows - 1, static_cast<int>(fy * image.rows)),
                  c = std::min(image.cols - 1, static_cast<int>(fx * image.cols));
        const int q = shown.row_begin + r * answer->step_rows, k = shown.col_begin + c * answer->step_cols;
        const float value = image.cells[static_cast<size_t>(r) * image.cols + c];
        const ShownMaps maps = session.maps();
        if (answer->step_rows == 1 && answer->step_cols == 1)
            ImGui::SetTooltip("query %d %s, key %d %s: %s", q, query_token(session, maps, q, true).c_str(), k,
                              key_token(session, maps, k, true).c_str(),
                              value == masked_cell ? "masked" : std::to_string(value).c_str());
        else
            ImGui::SetTooltip("queries %d-%d, keys %d-%d: %s %s", q, q + answer->step_rows - 1, k,
                              k + answer->step_cols - 1, pooling_choices.labels[static_cast<int>(pooling_)],
                              value == masked_cell ? "masked" : std::to_string(value).c_str());
    }
    const int width = shown.cols();
    int zoomed = width;
    if (io.MouseWheel != 0)
        zoomed = std::clamp(static_cast<int>(std::lround(width * std::pow(0.8f, io.MouseWheel))), std::min(4, T), T);
    int row = shown.row_begin, col = shown.col_begin;
    if (zoomed != width) {
        col += static_cast<int>(std::lround(fx * (width - zoomed)));  // rounded: the token under the mouse stays
        row += static_cast<int>(std::lround(fy * (width - zoomed)));
    }
    // A drag pans from where it started by all it has moved: zoomed in, a pixel is less than a token.
    if (dragging && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
        const ImVec2 moved = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left);
        col = drag_start_.col_begin - static_cast<int>(std::lround(moved.x / side * zoomed));
        row = drag_start_.row_begin - static_cast<int>(std::lround(moved.y / side * zoomed));
    }
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) row = col = 0, zoomed = T;
    row = std::clamp(row, 0, T - zoomed), col = std::clamp(col, 0, T - zoomed);
    // The whole map stays whole as the text grows (typing, generating at its end).
    region_ = zoomed == T ? MapRegion{} : MapRegion{row, row + zoomed, col, col + zoomed};
}

// The hovered query's row over the keys shown, exactly (one row is cheap: computed in the frame).
void LongView::hovered_row(WindowState& state, Session& session, Ui& ui, float width) {
    const int i = state.hovered_query;
    if (i < 0) {
        ImGui::TextDisabled("wheel: zoom, drag: pan, double-click: whole map; the row under the mouse shows here");
        return;
    }
    if (session.rows_lent()) {
        ImGui::TextDisabled("query %d: its row waits for the edited text's forward", i);
        return;
    }
    const MapRegion shown = region(session);
    const MapAsk ask{state.layer,
                     state.head,
                     state.selected,
                     {i, i + 1, shown.col_begin, shown.col_end},
                     std::max(1, static_cast<int>(width * ImGui::GetIO().DisplayFramebufferScale.x)),
                     pooling_};
    if (!(row_uploaded_ == ask)) {
        ui.renderer.upload(compute_map(*session.kept_maps(), ask).image, row_texture_);
        row_uploaded_ = ask;
    }
    const std::string token = query_token(session, session.maps(), i, true);
    text(ui, {{"view", "long-row-title"}, {"query", i}}, "query %d %s over keys %d-%d", i, token.c_str(),
         shown.col_begin, shown.col_end - 1);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float height = std::floor(ImGui::GetFrameHeight());
    ImGui::Dummy(ImVec2(width, height));
    ui.renderer.draw_on_screen(ui.colormap, row_texture_, origin, ImVec2(origin.x + width, origin.y + height));
}

}  // namespace headscope
