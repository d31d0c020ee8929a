#include "widgets/ui.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "headscope/inspect/attention_export.h"
#include "headscope/inspect/heatmap.h"
#include "headscope/inspect/probes.h"
#include "headscope/io/files.h"
#include "widgets/map_tooltips.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// Screen coordinates to framebuffer pixels, as the screenshot has them.
ImVec2 to_pixels(ImVec2 screen) {
    const ImVec2 scale = ImGui::GetIO().DisplayFramebufferScale;
    return ImVec2(screen.x * scale.x, screen.y * scale.y);
}

}  // namespace

void LayoutRecorder::item(nlohmann::ordered_json fields) {
    if (on_) rect(std::move(fields), ImGui::GetItemRectMin(), ImGui::GetItemRectSize());
}

void LayoutRecorder::control(const char* name) { item({{"view", "control"}, {"name", name}}); }

void LayoutRecorder::rect(nlohmann::ordered_json fields, ImVec2 min, ImVec2 size) {
    if (!on_) return;
    const ImVec2 at = to_pixels(min), extent = to_pixels(size);
    fields["x"] = at.x;
    fields["y"] = at.y;
    fields["w"] = extent.x;
    fields["h"] = extent.y;
    entries_.push_back(std::move(fields));
}

void LayoutRecorder::grid(nlohmann::ordered_json fields, const GridLayout& grid) {
    if (!on_) return;
    const ImVec2 at = to_pixels(grid.origin), step = to_pixels(grid.step), cell = to_pixels(grid.cell);
    fields["grid"] = {{"x", at.x},   {"y", at.y},   {"step_x", step.x},  {"step_y", step.y},
                      {"w", cell.x}, {"h", cell.y}, {"rows", grid.rows}, {"cols", grid.cols}};
    entries_.push_back(std::move(fields));
}

void LayoutRecorder::write(const std::filesystem::path& path) const {
    write_file_atomically(path, "the layout", [&](std::ostream& out) {
        out << "[";
        for (size_t n = 0; n < entries_.size(); ++n) out << (n ? ",\n" : "\n") << dump_json(entries_[n]);
        out << "\n]\n";
    });
}

std::string head_label(const Session& session, int layer, int head) {
    char label[32];
    std::snprintf(label, sizeof label, "L%d H%d", layer, head);
    const ProbeReport* probes = session.probes();
    // Scores describe the model's own heads; a re-split makes different ones.
    if (!probes || session.heads_shown() != probes->n_head) return label;
    const HeadScores& s = probes->head(layer, head);
    char scores[96];
    std::snprintf(scores, sizeof scores, "  prev %.2f  ind %.2f", s.previous_token, s.induction);
    return std::string(label) + scores;
}

std::string ellipsized(const std::string& text, float size, float width, bool keep_end) {
    ImFont* font = ImGui::GetFont();
    if (font->CalcTextSizeA(size, FLT_MAX, 0, text.c_str()).x <= width) return text;
    const char* ellipsis = "\u2026";
    const float room = width - font->CalcTextSizeA(size, FLT_MAX, 0, ellipsis).x;
    if (keep_end) {  // the first character boundary from which the rest fits
        size_t from = 0;
        while (from < text.size() &&
               ((text[from] & 0xC0) == 0x80 || font->CalcTextSizeA(size, FLT_MAX, 0, text.c_str() + from).x > room))
            ++from;
        return ellipsis + text.substr(from);
    }
    const char* fits = text.c_str();
    if (room > 0) font->CalcTextSizeA(size, room, 0, text.c_str(), nullptr, &fits);
    return std::string(text.c_str(), fits) + ellipsis;
}

namespace {

// The length of the UTF-8 character at bytes[at], or 0 where none starts
// whole there (a byte-level token's piece of a character).
size_t utf8_character(std::string_view bytes, size_t at) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
    const size_t length = byte(at) < 0x80       ? 1
                          : byte(at) >> 5 == 6  ? 2
                          : byte(at) >> 4 == 14 ? 3
                          : byte(at) >> 3 == 30 ? 4
                                                : 0;
    if (length == 0 || at + length > bytes.size()) return 0;
    for (size_t i = at + 1; i < at + length; ++i)
        if (byte(i) >> 6 != 2) return 0;
    return length;
}

}  // namespace

std::string visible_text(std::string_view bytes) {
    std::string text;
    for (size_t at = 0; at < bytes.size();) {
        const size_t length = utf8_character(bytes, at);
        const char c = bytes[at];
        if (length > 1) {
            text.append(bytes.substr(at, length));
        } else if (c == '\n' || c == '\r' || c == '\t') {
            text += c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t";
        } else if (length == 0 || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            // No glyph: a control character, or a byte ImGui would draw as one
            // U+FFFD taking the bytes after it (a closing quote) as its own.
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned char>(c));
            text += escaped;
        } else {
            text += c;
        }
        at += std::max<size_t>(length, 1);
    }
    return text;
}

std::string shown_token(const Tokenizer& tokenizer, int32_t id, bool quoted) {
    const std::string text = visible_text(token_text(tokenizer, id));
    return quoted ? "'" + text + "'" : text;
}

std::string shown_token(const Session& session, int b, int t, bool quoted) {
    return shown_token(session, session.shown.token_ids[b], t, quoted);
}

std::string shown_token(const Session& session, const std::vector<int32_t>& ids, int t, bool quoted) {
    if (t >= static_cast<int>(ids.size())) return "<pad>";
    return shown_token(session.model().tokenizer, ids[t], quoted);
}

std::string query_token(const Session& session, const ShownMaps& maps, int i, bool quoted) {
    return shown_token(session, *maps.query_ids, i, quoted);
}

std::string key_token(const Session& session, const ShownMaps& maps, int j, bool quoted) {
    return shown_token(session, *maps.key_ids, j, quoted);
}

namespace {

// How `maps` are shaded: the shown forward's shading where they are its decoder's (a patched run has no value norms).
MapShading shading_of(const Session& session, const ShownMaps& maps) {
    return maps.kind == AttentionKind::decoder && !maps.patched ? session.shown_shading() : MapShading{};
}

}  // namespace

float sink_gap(const Ui& ui, float size) { return std::round(std::min(3 * ui.scale, size / 16)); }

MapColumns map_columns(const ShownMaps& maps, const Ui& ui, float size) {
    if (!maps.sinks) return {};
    // A thumbnail of many heads (gpt-oss-20b has 64 a layer) keeps most of its width for the keys.
    const float gap = sink_gap(ui, size);
    const float sink = std::max(std::floor((size - gap) / static_cast<float>(maps.cols + 1)),
                                std::min(std::round(3 * ui.scale), std::floor(size / 8)));
    return {sink, sink + gap};
}

MapColumns cell_columns(const ShownMaps& maps, const Ui& ui, float cell) {
    if (!maps.sinks) return {};
    return {cell, cell + sink_gap(ui, maps.cols * cell)};
}

// The map the widget draws, pooled to `pooled_to` a side.
HeatmapImage map_image(const Session& session, const ShownMaps& maps, int layer, int head, int pooled_to) {
    const int b = maps.b;
    const AttentionOptions options = session.maps_options_at(maps, layer);
    if (maps.kind == AttentionKind::cross)
        return cross_heatmap_image(*maps.result, options, layer, b, head, maps.query_length, maps.key_length,
                                   pooled_to);
    if (session.diff_shown())
        return difference_image(*maps.result, b, session.comparison().attention(), 0, options, layer, head,
                                maps.key_length, pooled_to, session.diff_scale());
    return heatmap_image(*maps.result, options, layer, b, head, maps.key_length, pooled_to, shading_of(session, maps));
}

ShownMaps MapWidget::maps(const Session& session) const { return kind_ ? session.maps(*kind_) : session.maps(); }

bool MapWidget::draw(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head, float size,
                     const TextureRegion& region) {
    return draw_in(state, session, ui, view, layer, head, ImVec2(size, size), map_columns(maps(session), ui, size),
                   region);
}

bool MapWidget::draw_cells(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head,
                           float cell) {
    const ShownMaps shown = maps(session);
    const MapColumns columns = cell_columns(shown, ui, cell);
    return draw_in(state, session, ui, view, layer, head, ImVec2(columns.keys_x + shown.cols * cell, shown.rows * cell),
                   columns, {});
}

bool MapWidget::draw_in(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head,
                        ImVec2 size, const MapColumns& columns, const TextureRegion& region) {
    const ShownMaps maps = this->maps(session);
    const int rows = maps.rows, cols = maps.cols, b = maps.b;
    const float framebuffer_scale = ImGui::GetIO().DisplayFramebufferScale.x;
    const int pixels = std::max(1, static_cast<int>(std::max(size.x, size.y) * framebuffer_scale));
    // A zoomed region shows a fraction of the map: pool the whole map finer.
    const int pooled_to = std::min(std::max(rows, cols), static_cast<int>(std::ceil(pixels / (region.u1 - region.u0))));
    const bool diff = session.diff_shown();
    const ImageKey image_key{session.shown_generation,
                             session.comparison().generation(),
                             b,
                             layer,
                             head,
                             pooled_to,
                             shading_of(session, maps),
                             maps.kind,
                             diff};
    const bool sink = maps.sinks && !diff;  // the diff has no sink column
    const ImVec2 origin = ImGui::GetCursorScreenPos(), end(origin.x + size.x, origin.y + size.y);
    const float keys_left = origin.x + columns.keys_x;
    ImGui::Dummy(size);
    if (ImGui::IsItemVisible()) {  // a map scrolled out of view is neither pooled nor drawn
        if (!(image_key == image_key_)) {
            ui.renderer.upload(map_image(session, maps, layer, head, image_key.pooled_to), texture_);
            if (sink)
                ui.renderer.upload(sink_column_image(*maps.result, session.maps_options_at(maps, layer), layer, b, head,
                                                     maps.key_length, pooled_to, shading_of(session, maps)),
                                   sink_texture_);
            image_key_ = image_key;
        }
        ui.renderer.draw_on_screen(diff ? Colormap::diverging : ui.colormap, texture_, ImVec2(keys_left, origin.y), end,
                                   region);
        if (sink)
            ui.renderer.draw_on_screen(ui.colormap, sink_texture_, origin, ImVec2(origin.x + columns.sink, end.y),
                                       {0, region.v0, 1, region.v1});
    }
    const bool clicked = ImGui::IsItemClicked();
    // Knocking out is of the decoder's (the forward's) own heads.
    if (ImGui::IsItemClicked(ImGuiMouseButton_Right) && maps.kind == AttentionKind::decoder)
        session.toggle_knock_out(layer, head);

    // Cells in screen pixels: the region spans the keys' width and the height.
    const float cell_w = (size.x - columns.keys_x) / ((region.u1 - region.u0) * cols),
                cell_h = size.y / ((region.v1 - region.v0) * rows);
    const ImVec2 corner(keys_left - region.u0 * cols * cell_w, origin.y - region.v0 * rows * cell_h);
    if (ui.tooltips && ImGui::IsItemHovered()) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int i = std::clamp(static_cast<int>((mouse.y - corner.y) / cell_h), 0, rows - 1);
        const int j = std::clamp(static_cast<int>((mouse.x - corner.x) / cell_w), 0, cols - 1);
        if (mouse.x < keys_left)  // the sink's column or the gap after it
            sink_tooltip(ui, session, maps, layer, head, i);
        else
            map_tooltip(ui, state, session, maps, layer, head, i, j);
        if (maps.kind != AttentionKind::encoder) {  // the predictions follow a target's query
            state.hovered_query = i;
            if (clicked) state.query = i;
        }
        state.hovered_layer = layer;
        state.hovered_head = head;
    }
    if (session.replaying() && maps.kind != AttentionKind::encoder) {
        const int r = session.generation->replayed_row();
        const float top = corner.y + r * cell_h, bottom = top + cell_h;
        ImDrawList* draw = ImGui::GetWindowDrawList();
        draw->PushClipRect(origin, end, true);
        draw->AddRectFilled(ImVec2(origin.x, bottom), end, after_replay_colour);
        draw->AddRect(ImVec2(origin.x, top), ImVec2(end.x, bottom), replayed_row_colour, 0, 0, 2);
        draw->PopClipRect();
    }
    if (session.knocked_out(layer, head)) {  // crossed out
        ImDrawList* draw = ImGui::GetWindowDrawList();
        const float width = std::max(2.f, size.y / 40);
        draw->AddLine(origin, end, knocked_out_colour, width);
        draw->AddLine(ImVec2(origin.x, end.y), ImVec2(end.x, origin.y), knocked_out_colour, width);
        ui.layout.rect({{"view", "knocked-out"}, {"of", view}, {"layer", layer}, {"head", head}}, origin, size);
    }
    if (region == TextureRegion{}) {
        nlohmann::ordered_json fields = {
            {"view", view},   {"layer", layer},
            {"head", head},   {"attention", attention_kind_choices.words[static_cast<int>(maps.kind)]},
            {"row", "query"}, {"col", "key"}};
        if (diff) fields["diff_scale"] = session.diff_scale();
        ui.layout.grid(std::move(fields), {corner, ImVec2(cell_w, cell_h), ImVec2(cell_w, cell_h), rows, cols});
    }
    if (region == TextureRegion{} && sink)
        ui.layout.grid(
            {{"view", "sink"}, {"of", view}, {"layer", layer}, {"head", head}, {"row", "query"}, {"col", "column"}},
            {ImVec2(origin.x, corner.y), ImVec2(columns.sink, cell_h), ImVec2(columns.sink, cell_h), rows, 1});
    return clicked;
}

bool MapWidget::draw_thumbnail(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head,
                               float size) {
    const bool clicked = draw(state, session, ui, view, layer, head, size);
    ui.layout.item({{"view", "map"}, {"of", view}, {"layer", layer}, {"head", head}});
    return clicked;
}

bool progress_bar(JobProgress& job, Ui& ui, const char* name, float width) {
    const std::optional<ProgressReport> report = job.shown();
    if (!report) return false;
    std::string text = progress_text(*report);
    if (const std::optional<double> left = job.seconds_left()) {
        char note[48];
        std::snprintf(note, sizeof note, ", about %.0f s left", std::ceil(*left));
        text += note;
    }
    const float fraction = report->total > 0 ? static_cast<float>(report->done) / static_cast<float>(report->total) : 0;
    ImGui::PushID(name);
    if (ImGui::SmallButton("Cancel")) job.cancel();  // first: on a crowded line it stays in view
    ImGui::SameLine();
    // The text within the bar, ended with an ellipsis where the line is short.
    const float bar = std::min(width, ImGui::GetContentRegionAvail().x);
    const std::string shown = ellipsized(text, ImGui::GetFontSize(), bar - 2 * ImGui::GetStyle().FramePadding.x);
    ImGui::ProgressBar(fraction, ImVec2(bar, 0), shown.c_str());
    ImGui::PopID();
    ui.layout.item({{"view", "progress"}, {"name", name}, {"text", text}});
    return true;
}

}  // namespace headscope
