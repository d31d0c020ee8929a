// The recorded texts, labels, bars, frames and areas: see texts.h.
#include "widgets/texts.h"

#include <cmath>
#include <cstdarg>

namespace headscope {

namespace {

// Records the last item as `fields` unless they are null.
void record_item(Ui& ui, nlohmann::ordered_json fields) {
    if (!fields.is_null()) ui.layout.item(std::move(fields));
}

}  // namespace

void text(Ui& ui, nlohmann::ordered_json fields, const char* format, ...) {
    va_list args;
    va_start(args, format);
    ImGui::TextV(format, args);
    va_end(args);
    record_item(ui, std::move(fields));
}

void text_coloured(Ui& ui, nlohmann::ordered_json fields, const ImVec4& colour, const char* format, ...) {
    va_list args;
    va_start(args, format);
    ImGui::TextColoredV(colour, format, args);
    va_end(args);
    record_item(ui, std::move(fields));
}

void text_wrapped(Ui& ui, nlohmann::ordered_json fields, const char* format, ...) {
    va_list args;
    va_start(args, format);
    ImGui::TextWrappedV(format, args);
    va_end(args);
    record_item(ui, std::move(fields));
}

void text_disabled(Ui& ui, nlohmann::ordered_json fields, const char* format, ...) {
    va_list args;
    va_start(args, format);
    ImGui::TextDisabledV(format, args);
    va_end(args);
    record_item(ui, std::move(fields));
}

void dummy(Ui& ui, nlohmann::ordered_json fields, ImVec2 size) {
    ImGui::Dummy(size);
    record_item(ui, std::move(fields));
}

void drawn_text(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, float size, ImVec2 at, ImU32 colour,
                const std::string& text, ImVec2 place_min, ImVec2 place_size) {
    draw->AddText(ImGui::GetFont(), size, at, colour, text.c_str());
    if (!fields.is_null()) ui.layout.rect(std::move(fields), place_min, place_size);
}

// ImGui 1.86 has no turned text: the glyphs' vertices are turned after they are added.
void upward_text(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, float size, ImVec2 bottom_left, ImU32 colour,
                 const std::string& text, ImVec2 place_min, ImVec2 place_size) {
    const int first = draw->VtxBuffer.Size;
    draw->PushClipRectFullScreen();  // clipped as laid out (sideways) it would lose glyphs it keeps when turned
    draw->AddText(ImGui::GetFont(), size, bottom_left, colour, text.c_str());
    draw->PopClipRect();
    for (int v = first; v < draw->VtxBuffer.Size; ++v) {
        ImVec2& p = draw->VtxBuffer[v].pos;
        const float dx = p.x - bottom_left.x, dy = p.y - bottom_left.y;
        p = ImVec2(bottom_left.x + dy, bottom_left.y - dx);
    }
    if (!fields.is_null()) ui.layout.rect(std::move(fields), place_min, place_size);
}

void frame(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, ImVec2 min, ImVec2 max, ImU32 colour) {
    draw->AddRect(min, max, colour, 0, 0, 1);
    if (!fields.is_null()) ui.layout.rect(std::move(fields), min, ImVec2(max.x - min.x, max.y - min.y));
}

void bar(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, ImVec2 min, ImVec2 size, float fraction,
         ImU32 track_colour, ImU32 bar_colour) {
    draw->AddRectFilled(min, ImVec2(min.x + size.x, min.y + size.y), track_colour);
    draw->AddRectFilled(min, ImVec2(min.x + std::round(fraction * size.x), min.y + size.y), bar_colour);
    if (!fields.is_null()) ui.layout.rect(std::move(fields), min, size);
}

void image_grid(Ui& ui, nlohmann::ordered_json fields, const HeatmapTexture& texture, ImVec2 size, int rows, int cols) {
    const ImVec2 origin = ImGui::GetCursorScreenPos(), cell(size.x / cols, size.y / rows);
    image(texture, size);
    ui.layout.grid(std::move(fields), {origin, cell, cell, rows, cols});
}

void end_group(Ui& ui, nlohmann::ordered_json fields) {
    ImGui::EndGroup();
    record_item(ui, std::move(fields));
}

void begin_child(Ui& ui, nlohmann::ordered_json fields, const char* id, ImVec2 size) {
    ImGui::BeginChild(id, size);
    if (!fields.is_null()) ui.layout.rect(std::move(fields), ImGui::GetWindowPos(), ImGui::GetWindowSize());
}

void region_left(Ui& ui, nlohmann::ordered_json fields) {
    ui.layout.rect(std::move(fields), ImGui::GetCursorScreenPos(), ImGui::GetContentRegionAvail());
}

}  // namespace headscope
