// The status and export bar: see status_bar.h.
#include "views/status_bar.h"

#include <imgui_stdlib.h>
#include <stb/stb_image_write.h>

#include <ctime>
#include <optional>
#include <ostream>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/matmul.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/inspect/attention_export.h"
#include "headscope/io/files.h"
#include "widgets/controls.h"
#include "widgets/gl.h"
#include "widgets/texts.h"

namespace headscope {

namespace fs = std::filesystem;

namespace {

// "headscope-20260123-101500" from the local time: exports do not overwrite each other.
std::string export_stem() {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    return std::string("headscope-") + stamp;
}

// The selected text's tokens and how many of them the prefix cache supplied,
// or why it could not.
std::string tokens_note(const WindowState& state, const Session& s) {
    if (s.shown.token_ids.empty()) return "0 tokens";
    const AttentionResult& att = s.shown.attention;
    const int length = s.length(state.selected), reused = att.reused.empty() ? 0 : att.reused[state.selected];
    const std::string tokens = std::to_string(length) + " tokens";
    if (reused)
        return "reused " + std::to_string(reused) + " of " + tokens + ", computed " + std::to_string(length - reused);
    const std::string refusal = prefix_reuse_refusal(s.shown_options);
    return refusal.empty() ? tokens + " computed" : tokens + " computed, none reused: " + refusal;
}

}  // namespace

std::string device_note(const Session& s) {
    if (s.computed_on().device.empty()) return "backend " + s.backend().name() + " (" + s.backend_reason() + ")";
    return "computed on " + s.computed_on().device + " (" + s.computed_on_reason() + ")";
}

namespace {

// A long text's export (its forward kept no map): what the long view shows
// of the selected head (Session::asked_map), for every head, as
// headscope-cli attention writes maps on demand (attention_export.h): the
// region in view exactly where it is shown cell for cell, or is any part of
// the map small enough; the whole map pooled to the pixels it is drawn in.
std::optional<MapsOnDemand> long_text_maps(const Session& s, nlohmann::ordered_json& metadata) {
    if (!s.long_text()) return std::nullopt;
    const std::optional<MapAsk>& ask = s.asked_map();
    if (!ask) throw Error("a long text's map is not shown yet: nothing to export");
    const KeptForward kept = s.kept_maps()->kept();
    const MapRegion& region = ask->region;
    const AttentionResult& r = kept.result;
    const bool whole = region.rows() == r.T && region.cols() == r.T;
    if (whole && (region.rows() > ask->pixels || region.cols() > ask->pixels))
        return pooled_on_demand(kept, ask->pixels, ask->pooling, metadata);
    const double bytes = 4.0 * region.rows() * region.cols() * r.layers.size() * r.B * r.NH;
    if (bytes > full_maps_budget)
        throw Error("the region in view, " + std::to_string(region.rows()) + " x " + std::to_string(region.cols()) +
                    " tokens of every head, would take " + std::to_string(static_cast<int>(bytes / 1e9 + 0.5)) +
                    " GB: zoom in further, or out to the whole map (pooled)");
    return region_on_demand(kept, region, metadata);
}

}  // namespace

void export_json(const Session& s, const fs::path& path) {
    const AttentionTimings timings{s.model_load_ms(), s.shown.tokenize_ms, s.shown.compute_ms - s.shown.tokenize_ms};
    nlohmann::ordered_json metadata = attention_metadata(s.model(), s.computed_on().device, s.computed_on_reason(),
                                                         s.shown_texts, s.shown.token_ids, s.shown.attention, timings);
    const std::optional<MapsOnDemand> on_demand = long_text_maps(s, metadata);
    write_file_atomically(path, "the attention", [&](std::ostream& out) {
        write_attention_json(out, metadata, s.shown.attention, on_demand ? &*on_demand : nullptr);
    });
}

void export_npy(const Session& session, const fs::path& path) {
    nlohmann::ordered_json metadata;
    const std::optional<MapsOnDemand> on_demand = long_text_maps(session, metadata);
    write_file_atomically(path, "the attention", [&](std::ostream& out) {
        write_attention_npy(out, session.shown.attention, on_demand ? &*on_demand : nullptr);
    });
}

void write_screenshot(const fs::path& path, int width, int height) {
    std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    // Rows unfiltered: the window's flat colours compress as well or better
    // (7% smaller on docs/images' screenshots) in half the time of stb trying
    // its five filters on each row (72 against 36 ms at 1280 x 800).
    stbi_write_force_png_filter = 0;
    write_file_atomically(path, "the screenshot", [&](std::ostream& out) {
        // GL's row 0 is the bottom; PNG's is the top.
        const int encoded = stbi_write_png_to_func(
            [](void* stream, void* bytes, int size) {
                static_cast<std::ostream*>(stream)->write(static_cast<char*>(bytes), size);
            },
            &out, width, height, 4, pixels.data() + static_cast<size_t>(width) * 4 * (height - 1), -width * 4);
        if (!encoded) throw Error(path.string() + ": cannot encode the screenshot as PNG");
    });
}

void StatusBar::draw(const WindowState& state, Session& s, Ui& ui, FigureView shown) {
    ImGui::Separator();
    const std::string tokens = tokens_note(state, s);
    // A long reason nothing was reused keeps the row's buttons in the window: the whole on hover.
    text(ui, {{"view", "status"}, {"name", "tokens"}, {"text", tokens}}, "%s",
         ellipsized(tokens, ImGui::GetFontSize(), 0.3f * ImGui::GetContentRegionAvail().x).c_str());
    if (ui.tooltips && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tokens.c_str());
    ImGui::SameLine();
    if (!s.shown.cuts.empty()) {  // the selected text's cut, else the batch's first
        const TextCut* cut = s.cut_shown(s.model().config.is_encoder_decoder());
        const std::string note = (cut ? *cut : s.shown.cuts.front()).message();
        // Ellipsized as the tokens' note, so that the export buttons stay in a narrow window.
        text_coloured(ui, {{"view", "status"}, {"name", "cut"}, {"text", note}}, warning_colour, "  %s",
                      ellipsized(note, ImGui::GetFontSize(), 0.15f * ImGui::GetContentRegionAvail().x).c_str());
        if (ui.tooltips && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", note.c_str());
        ImGui::SameLine();
    }
    if (!s.shown_options.ablate.empty()) {
        const size_t out = s.shown_options.ablate.size();
        const std::string knocked = std::to_string(out) + (out == 1 ? " head" : " heads") + " knocked out (" +
                                    to_string(s.shown_options.ablation) + ")";
        text_coloured(ui, {{"view", "status"}, {"name", "knocked-out"}, {"text", knocked}}, warning_colour, "  %s",
                      knocked.c_str());
        ImGui::SameLine();
    }
    if (!s.shown_options.ablate_experts.empty()) {
        const size_t out = s.shown_options.ablate_experts.size();
        const std::string knocked = std::to_string(out) + (out == 1 ? " expert" : " experts") + " knocked out";
        text_coloured(ui, {{"view", "status"}, {"name", "experts-knocked-out"}, {"text", knocked}}, warning_colour,
                      "  %s", knocked.c_str());
        ImGui::SameLine();
    }
    const std::string device = device_note(s);
    text(ui, {{"view", "status"}, {"name", "device"}, {"text", device}}, "  %.2f ms   %s   %s", s.shown.compute_ms,
         device.c_str(), s.busy() && !s.live_progress().shown() ? "computing..." : "");
    if (ui.tooltips && ImGui::IsItemHovered() && s.computed_on().device == "cpu")  // how its prompt products ran
        ImGui::SetTooltip("%s", prompt_products_status().c_str());
    ImGui::SameLine();
    ImGui::TextUnformatted("save in");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(160 * ui.scale);
    ImGui::InputTextWithHint("##export dir", "folder to save in", &export_dir_);
    // The exports write every map: none before a compute, nor of a long text's, which keeps none.
    const bool every_map = !s.shown.attention.weights.empty();
    ImGui::SameLine();
    if (button(ui, "Save PNG", "Save PNG")) png_asked_ = true;
    ImGui::BeginDisabled(!every_map);
    ImGui::SameLine();
    const char* svg_refused = svg_refusal(shown.view, s.maps().kind);
    ImGui::BeginDisabled(svg_refused != nullptr);
    if (button(ui, "Save SVG", "Save SVG"))
        save(".svg", [&](const fs::path& path) { write_svg_figure(path, state, s, ui, shown); });
    ImGui::EndDisabled();
    if (svg_refused && ui.tooltips && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("%s", svg_refused);
    ImGui::SameLine();
    if (ImGui::Button("Save JSON")) save(".json", [&](const fs::path& path) { export_json(s, path); });
    ImGui::SameLine();
    if (ImGui::Button("Save NPY")) save(".npy", [&](const fs::path& path) { export_npy(s, path); });
    ImGui::EndDisabled();
    ImGui::SameLine();
    // Long work's progress last on the line, in the room left (its text ellipsized), so no button is pushed off.
    if (s.busy() && progress_bar(s.live_progress(), ui, "compute", 240 * ui.scale)) ImGui::SameLine();
    if (s.probes_pending() && progress_bar(s.probe_progress(), ui, "probes", 240 * ui.scale)) ImGui::SameLine();
    if (export_failed_)
        ImGui::TextColored(error_colour, "%s", export_message_.c_str());
    else
        ImGui::TextDisabled("%s", export_message_.c_str());
}

void StatusBar::save_png_if_asked(int width, int height) {
    if (!png_asked_) return;
    png_asked_ = false;
    save(".png", [&](const fs::path& path) { write_screenshot(path, width, height); });
}

template <class Write>
void StatusBar::save(const char* extension, Write write) {
    const fs::path path = fs::path(export_dir_) / (export_stem() + extension);
    try {
        write(path);
        export_message_ = "saved " + fs::absolute(path).lexically_normal().string();
        export_failed_ = false;
    } catch (const Error& e) {
        export_message_ = e.what();
        export_failed_ = true;
    }
}

}  // namespace headscope
