// Texts, labels, bars, frames and areas as the views draw them, each recording
// itself for --layout as the caller's `fields` (null: not recorded): the
// tests find what a view shows in the screenshot by them. The controls
// that record themselves are in controls.h.
#pragma once
#include <imgui.h>

#include <nlohmann/json.hpp>
#include <string>

#include "widgets/ui.h"

namespace headscope {

// ImGui's Text, TextColored, TextWrapped and TextDisabled, recorded as items.
void text(Ui& ui, nlohmann::ordered_json fields, const char* format, ...) IM_FMTARGS(3);
void text_coloured(Ui& ui, nlohmann::ordered_json fields, const ImVec4& colour, const char* format, ...) IM_FMTARGS(4);
void text_wrapped(Ui& ui, nlohmann::ordered_json fields, const char* format, ...) IM_FMTARGS(3);
void text_disabled(Ui& ui, nlohmann::ordered_json fields, const char* format, ...) IM_FMTARGS(3);

// An empty item of `size` (what ImGui::Dummy reserves), recorded.
void dummy(Ui& ui, nlohmann::ordered_json fields, ImVec2 size);

// `text` on `draw` (no item) at `at`, `size` pixels high, in `colour`;
// recorded as the rectangle of its place (`place_min`, `place_size`).
void drawn_text(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, float size, ImVec2 at, ImU32 colour,
                const std::string& text, ImVec2 place_min, ImVec2 place_size);

// `text` turned a quarter to the left, reading upwards, its first glyph's
// bottom-left corner at `bottom_left`: it occupies one line's width to the
// right of that point and its length above it. Recorded as drawn_text is.
void upward_text(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, float size, ImVec2 bottom_left, ImU32 colour,
                 const std::string& text, ImVec2 place_min, ImVec2 place_size);

// A one-pixel frame from `min` to `max` on `draw` (no item), recorded as its rectangle.
void frame(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, ImVec2 min, ImVec2 max, ImU32 colour);

// A bar `fraction` of its track long (whole pixels), on `draw` (no item);
// recorded as the track's rectangle.
void bar(Ui& ui, nlohmann::ordered_json fields, ImDrawList* draw, ImVec2 min, ImVec2 size, float fraction,
         ImU32 track_colour, ImU32 bar_colour);

// `texture` as an image of `size` screen pixels (ui.h's image), recorded as
// a grid of `rows` x `cols` equal cells.
void image_grid(Ui& ui, nlohmann::ordered_json fields, const HeatmapTexture& texture, ImVec2 size, int rows, int cols);

// ImGui::EndGroup, the group recorded as an item.
void end_group(Ui& ui, nlohmann::ordered_json fields);

// ImGui::BeginChild, the child window recorded as its rectangle; ImGui::EndChild ends it.
void begin_child(Ui& ui, nlohmann::ordered_json fields, const char* id, ImVec2 size);

// Records the rest of the window from the cursor (a region, drawing nothing).
void region_left(Ui& ui, nlohmann::ordered_json fields);

}  // namespace headscope
