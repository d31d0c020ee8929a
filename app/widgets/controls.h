// ImGui's controls as the views draw them, each recording itself for
// --layout as {"view": "control", "name": name} when it is given a name:
// the tests find a control in the screenshot by it.
#pragma once
#include <imgui.h>

#include <cstddef>
#include <string>

#include "widgets/ui.h"

namespace headscope {

bool button(Ui& ui, const char* label, const char* name = nullptr);
bool checkbox(Ui& ui, const char* label, bool* value, const char* name = nullptr);
// A checkbox recorded as `fields` with its value (as the click left it) as `value_field`.
bool checkbox(Ui& ui, const char* label, bool* value, nlohmann::ordered_json fields, const char* value_field);
// A selectable line (a combo's item), recorded as `fields`; true when clicked.
bool selectable(Ui& ui, const char* label, nlohmann::ordered_json fields);
// A slider over min..max; a value typed outside is clamped.
bool slider_int(Ui& ui, const char* label, int* value, int min, int max, const char* name = nullptr);
// A text box showing `hint` while empty; true when the text changed (with
// ImGuiInputTextFlags_EnterReturnsTrue: when Enter was pressed).
bool text_input(Ui& ui, const char* id, const char* hint, std::string* text, const char* name = nullptr,
                ImGuiInputTextFlags flags = 0);
// A multiline text box `size` large, with ImGui's `flags`, `callback` and its `data`.
bool text_input_multiline(Ui& ui, const char* id, std::string* text, ImVec2 size, ImGuiInputTextFlags flags,
                          ImGuiInputTextCallback callback, void* data, const char* name = nullptr);
// ImGui::EndChild, the child (a control drawn as a child window) recorded as control `name`.
void end_child(Ui& ui, const char* name);

// A combo box whose open list `items` draws; recorded as control `name`
// (what ImGui's last item is after the combo, as the tests have it).
template <typename Items>
void combo(Ui& ui, const char* id, const char* preview, const char* name, Items items) {
    if (ImGui::BeginCombo(id, preview)) {
        items();
        ImGui::EndCombo();
    }
    ui.layout.control(name);
}

// A combo box `width` pixels wide over an enum whose values are 0..N-1 in
// the order of `names`; true when the user chose another value.
template <typename Enum, size_t N>
bool enum_combo(Ui& ui, const char* label, Enum& value, const char* const (&names)[N], float width,
                const char* name = nullptr) {
    int index = static_cast<int>(value);
    ImGui::SetNextItemWidth(width);
    const bool chosen = ImGui::Combo(label, &index, names, static_cast<int>(N)) && index != static_cast<int>(value);
    if (name) ui.layout.control(name);
    if (chosen) value = static_cast<Enum>(index);
    return chosen;
}

}  // namespace headscope
