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
// A slider over min..max; a value typed outside is clamped.
bool slider_int(Ui& ui, const char* label, int* value, int min, int max, const char* name = nullptr);
// A text box showing `hint` while empty; true when the text changed (with
// ImGuiInputTextFlags_EnterReturnsTrue: when Enter was pressed).
bool text_input(Ui& ui, const char* id, const char* hint, std::string* text, const char* name = nullptr,
                ImGuiInputTextFlags flags = 0);

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
