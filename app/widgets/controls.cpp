// The recorded controls: see controls.h.
#include "widgets/controls.h"

#include <imgui_stdlib.h>

namespace headscope {

namespace {

// `answer` as the control gave it, after recording the control just drawn when it has a name.
bool recorded(Ui& ui, const char* name, bool answer) {
    if (name) ui.layout.control(name);
    return answer;
}

}  // namespace

bool button(Ui& ui, const char* label, const char* name) { return recorded(ui, name, ImGui::Button(label)); }

bool checkbox(Ui& ui, const char* label, bool* value, const char* name) {
    return recorded(ui, name, ImGui::Checkbox(label, value));
}

bool checkbox(Ui& ui, const char* label, bool* value, nlohmann::ordered_json fields, const char* value_field) {
    const bool clicked = ImGui::Checkbox(label, value);
    fields[value_field] = *value;
    ui.layout.item(std::move(fields));
    return clicked;
}

bool selectable(Ui& ui, const char* label, nlohmann::ordered_json fields) {
    const bool clicked = ImGui::Selectable(label);
    ui.layout.item(std::move(fields));
    return clicked;
}

bool slider_int(Ui& ui, const char* label, int* value, int min, int max, const char* name) {
    return recorded(ui, name, ImGui::SliderInt(label, value, min, max, "%d", ImGuiSliderFlags_AlwaysClamp));
}

bool text_input(Ui& ui, const char* id, const char* hint, std::string* text, const char* name,
                ImGuiInputTextFlags flags) {
    return recorded(ui, name, ImGui::InputTextWithHint(id, hint, text, flags));
}

bool text_input_multiline(Ui& ui, const char* id, std::string* text, ImVec2 size, ImGuiInputTextFlags flags,
                          ImGuiInputTextCallback callback, void* data, const char* name) {
    return recorded(ui, name, ImGui::InputTextMultiline(id, text, size, flags, callback, data));
}

void end_child(Ui& ui, const char* name) {
    ImGui::EndChild();
    ui.layout.control(name);
}

}  // namespace headscope
