// The controls' model bar (ControlsView::model_bar): see controls_view.h.
#include <algorithm>
#include <cstdio>

#include "views/controls_view.h"
#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {
namespace {

// A GGUF model's quantization and size in the picker: "Q4_K_M, 808 MB".
std::string gguf_details(const GgufModel& m) {
    char size[32];
    const double bytes = static_cast<double>(m.bytes);
    if (bytes >= 1e9)
        std::snprintf(size, sizeof size, "%.1f GB", bytes / 1e9);
    else
        std::snprintf(size, sizeof size, "%.0f MB", bytes / 1e6);
    return m.quantization.empty() ? size : m.quantization + ", " + size;
}

}  // namespace

// The open model, the ways to open another, and how a load is going.
void ControlsView::model_bar(Session& s, Ui& ui) {
    const Config& config = s.model().config;
    // The name and sizes share what the row's widgets leave at 1280 px: a long path keeps its end.
    const float row = ImGui::GetContentRegionAvail().x, font = ImGui::GetFontSize();
    ImGui::AlignTextToFramePadding();
    text(ui, {{"view", "control"}, {"name", "model"}, {"text", s.model_name()}}, "Model %s",
         ellipsized(s.model_name(), font, 0.18f * row, true).c_str());
    if (ui.tooltips && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.model_name().c_str());
    ImGui::SameLine();
    // How the weights are stored first ("Q4_K_M, 4.9 bits per weight"): a long row keeps its start.
    std::string sizes = storage_summary(s.model()) + "; " +
                        (config.is_encoder_decoder() ? std::to_string(config.encoder_layers) + " encoder + " +
                                                           std::to_string(config.n_layer) + " decoder layers, "
                                                     : std::to_string(config.n_layer) + " layers, ") +
                        std::to_string(config.n_head) + " heads";
    if (config.kv_heads() != config.n_head)
        sizes += " sharing " + std::to_string(config.kv_heads()) + " key/value heads";
    sizes += ", C = " + std::to_string(config.n_embd);
    if (config.head_size() * config.n_head != config.n_embd) sizes += ", hs = " + std::to_string(config.head_size());
    char params[32];
    std::snprintf(params, sizeof params, ", %.3g M parameters", static_cast<double>(s.model().params) / 1e6);
    sizes += params;
    const std::string shown = ellipsized(sizes, font, 0.24f * row);
    text_disabled(ui, {{"view", "control"}, {"name", "model sizes"}, {"text", shown}}, "%s", shown.c_str());
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\na re-split into other heads changes none of them", sizes.c_str());
    ImGui::SameLine();
    const bool loading = !s.loading().empty();
    ImGui::BeginDisabled(loading);
    ImGui::SetNextItemWidth(200 * ui.scale);
    combo(ui, "##cached", "open...", "open model", [&] {
        // The stores are read when the list opens: models downloaded meanwhile show up.
        if (ImGui::IsWindowAppearing()) {
            cached_models_ = list_cached_models();
            gguf_models_ = list_gguf_models();
        }
        if (ImGui::Selectable(builtin_model)) s.open_model(builtin_model);
        for (const CachedModel& m : cached_models_)
            if (selectable(ui, m.name.c_str(), {{"view", "picker"}, {"name", m.name}})) s.open_model(m.name);
        // The GGUF models' quantizations and sizes in one column after their names.
        float details_x = 0;
        for (const GgufModel& m : gguf_models_) details_x = std::max(details_x, ImGui::CalcTextSize(m.name.c_str()).x);
        details_x += ImGui::GetCursorPosX() + 2 * ImGui::GetStyle().ItemSpacing.x;
        if (!gguf_models_.empty()) ImGui::Separator();
        for (const GgufModel& m : gguf_models_) {
            const std::string details = gguf_details(m);
            if (selectable(ui, m.name.c_str(), {{"view", "picker"}, {"name", m.name}, {"details", details}}))
                s.open_model(m.name);
            if (ui.tooltips && ImGui::IsItemHovered())
                ImGui::SetTooltip("%s%s%s\n%s", m.title.c_str(), m.title.empty() || m.architecture.empty() ? "" : ", ",
                                  m.architecture.c_str(), m.path.string().c_str());
            ImGui::SameLine(details_x);
            ImGui::TextDisabled("%s", details.c_str());
        }
        if (cached_models_.empty() && gguf_models_.empty())
            ImGui::TextDisabled("no models this build opens in the Hugging Face cache or the stores of GGUF models");
    });
    ImGui::SameLine();
    ImGui::SetNextItemWidth(260 * ui.scale);
    const bool entered = text_input(ui, "##model path", "model folder, file or name", &model_path_, nullptr,
                                    ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if ((button(ui, "Open") || entered) && !model_path_.empty()) s.open_model(model_path_);
    ImGui::SameLine();
    BackendChoice backend = s.backend_choice();
    if (enum_combo(ui, "backend", backend, backend_choices.labels, 80 * ui.scale)) s.choose_backend(backend);
    ImGui::EndDisabled();
    ImGui::SameLine();
    if (loading) {
        if (progress_bar(s.load_progress(), ui, "load", 280 * ui.scale)) ImGui::SameLine();
        ImGui::Text("loading %s...", s.loading().c_str());
    } else if (!s.model_message.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, error_colour);
        text_wrapped(ui, {{"view", "control"}, {"name", "model message"}, {"text", s.model_message}}, "%s",
                     s.model_message.c_str());
        ImGui::PopStyleColor();

    } else if (const char* hint = "(or drop a model folder here)";
               ImGui::CalcTextSize(hint).x <= ImGui::GetContentRegionAvail().x) {
        ImGui::TextDisabled("%s", hint);
    } else {
        ImGui::NewLine();  // no room for the hint: the row ends here
    }
}

}  // namespace headscope
