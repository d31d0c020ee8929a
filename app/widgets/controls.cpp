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

bool slider_int(Ui& ui, const char* label, int* value, int min, int max, const char* name) {
    return recorded(ui, name, ImGui::SliderInt(label, value, min, max, "%d", ImGuiSliderFlags_AlwaysClamp));
}

bool text_input(Ui& ui, const char* id, const char* hint, std::string* text, const char* name,
                ImGuiInputTextFlags flags) {
    return recorded(ui, name, ImGui::InputTextWithHint(id, hint, text, flags));
}

}  // namespace headscope
