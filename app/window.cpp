// headscope: the window. Type a sentence and every head of the selected layer
// redraws as you type; masks, head count, scale and split are live toggles.
// With --screenshot it renders a few frames, writes the framebuffer as PNG
// (and with --layout every drawn cell's rectangle as JSON) and exits: the
// tests drive it that way under Xvfb. Models open in the background (picker,
// path field, or a folder dropped on the window); the view exports as PNG and
// the attention as the CLI's JSON or NPY; settings persist between runs.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_stdlib.h>
#include <stb/stb_image_write.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "checks_view.h"
#include "dance_view.h"
#include "examples.h"
#include "headscope/attention_export.h"
#include "headscope/error.h"
#include "heads_view.h"
#include "mask_view.h"
#include "model_view.h"
#include "settings.h"
#include "ui.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

struct Args {
    std::string model = builtin_model;
    std::vector<std::string> texts;
    std::string example;  // an example's title: its texts
    std::string view = "heads", causal = "on", padding_mask = "on", scale = "head", split = "transpose";
    std::string colormap = "viridis", backend = "auto";
    int layer = 0, head = -1, heads = 0, dance_step = 1, frames = 3;
    std::string screenshot, layout, open_model, export_json, export_npy;
    std::string settings;  // on|off; empty: on, but off when a test drives the window (--screenshot, --layout)
    bool frame_times = false;
};

enum class View { heads, model, mask, dance, checks };
constexpr const char* view_names[] = {"heads", "model", "mask", "dance", "checks"};

// A combo box over an enum whose values are 0..N-1 in the order of `names`;
// true when the user chose another value.
template <typename Enum, size_t N>
bool enum_combo(const char* label, Enum& value, const char* const (&names)[N], float width) {
    int index = static_cast<int>(value);
    ImGui::SetNextItemWidth(width);
    if (!ImGui::Combo(label, &index, names, static_cast<int>(N)) || index == static_cast<int>(value)) return false;
    value = static_cast<Enum>(index);
    return true;
}

View parse_view(const std::string& word) {
    for (int v = 0; v < 5; ++v)
        if (word == view_names[v]) return static_cast<View>(v);
    throw Error("--view: expected heads, model, mask, dance or checks, got '" + word + "'");
}

// The saved settings with every option given on the command line in their place.
Settings start_settings(const Args& args, const CLI::App& cli, bool use_saved) {
    Settings s = use_saved ? read_settings(config_dir() / "settings.json") : Settings{};
    if (cli.count("--model")) s.model = args.model;
    if (cli.count("--text") && cli.count("--example")) throw Error("--text and --example both give the texts: pass one");
    if (cli.count("--text")) s.texts = args.texts;
    if (cli.count("--example")) s.texts = find_example(read_examples(examples_file()), args.example).texts;
    if (cli.count("--causal")) s.options.causal = parse_on_off("--causal", args.causal);
    if (cli.count("--padding-mask")) s.options.padding_mask = parse_on_off("--padding-mask", args.padding_mask);
    if (cli.count("--heads")) s.options.n_head = args.heads;
    if (cli.count("--scale")) s.options.scale = parse_scale(args.scale);
    if (cli.count("--split")) s.options.split = parse_split(args.split);
    if (cli.count("--colormap")) s.colormap = parse_colormap(args.colormap);
    return s;
}

// A bad --model is fatal; a saved model that no longer loads gives way to the built-in one.
LoadedModel load_start_model(const Settings& start, bool model_given, BackendChoice backend) {
    if (model_given || start.model == builtin_model) return load_with_backend(start.model, backend);
    try {
        return load_with_backend(start.model, backend);
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: warning: cannot reopen the last model, opening the built-in one: %s\n", e.what());
        return load_with_backend(builtin_model, backend);
    }
}

// "headscope-20260123-101500" from the local time: exports do not overwrite each other.
std::string export_stem() {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    return std::string("headscope-") + stamp;
}

void write_screenshot(const std::string& path, int width, int height);

class App {
public:
    App(const Args& args, const Settings& start, LoadedModel loaded, float content_scale)
        : session_(std::move(loaded), start.texts, start.options),
          ui_(content_scale, args.screenshot.empty(), !args.layout.empty()),
          tab_to_select_(parse_view(args.view)), export_dir_(start.export_dir) {
        ui_.colormap = start.colormap;
        const Model& model = session_.model();
        if (args.layer < 0 || args.layer >= model.config.n_layer)
            throw Error("--layer " + std::to_string(args.layer) + " out of range (the model has layers 0.." +
                        std::to_string(model.config.n_layer - 1) + ")");
        session_.layer = args.layer;
        const int heads = start.options.n_head ? start.options.n_head : model.config.n_head;
        if (args.head >= heads)
            throw Error("--head " + std::to_string(args.head) + " out of range (" + std::to_string(heads) + " heads)");
        if (args.head >= 0) {
            session_.head = args.head;
            heads_view_.open_large();
        }
        dance_view_.set_step(args.dance_step);
        try {
            examples_ = read_examples(examples_file());
        } catch (const Error& e) {  // the menu says so; the window works without it
            examples_error_ = e.what();
            std::fprintf(stderr, "headscope: warning: %s\n", e.what());
        }
    }

    // Waits for a model loading, the compute in flight, the probe scores, the
    // checks' figures and the dance's naive-split error (screenshot mode wants
    // the real maps and labels).
    void settle() {
        while (!session_.loading().empty() || session_.busy() || session_.probes_pending() || checks_view_.computing() ||
               dance_view_.computing()) {
            glfwWaitEventsTimeout(0.001);
            session_.collect();
        }
    }

    // Computes the current texts again (the frame-time benchmark's keystroke).
    void recompute() { session_.submit(); }
    uint64_t shown_generation() const { return session_.shown_generation; }

    void frame() {
        session_.collect();
        ui_.layout.clear();
        const ImGuiViewport* viewport = ImGui::GetMainViewport();
        ImGui::SetNextWindowPos(viewport->WorkPos);
        ImGui::SetNextWindowSize(viewport->WorkSize);
        ImGui::Begin("Headscope", nullptr,
                     ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                         ImGuiWindowFlags_NoBringToFrontOnFocus);
        controls();
        ImGui::Separator();
        views();
        status_bar();
        ImGui::End();
    }

    const LayoutRecorder& layout() const { return ui_.layout; }

    // Opens a model in the background, as the picker does.
    void open_model(const std::string& name_or_path) { session_.open_model(name_or_path); }

    void set_scale(float scale) { ui_.scale = scale; }

    // What to remember of this run, for a window of this size.
    Settings settings(int window_width, int window_height) const {
        Settings s;
        s.model = session_.model_name();
        s.texts = session_.texts;
        s.colormap = ui_.colormap;
        s.options = session_.options;
        s.export_dir = export_dir_;
        s.window_width = window_width;
        s.window_height = window_height;
        return s;
    }

    // The shown attention exactly as `headscope-cli attention` writes it for
    // the same model, texts and options (the Save JSON/NPY buttons, --export-json/-npy).
    void export_json(const fs::path& path) const {
        const Session& s = session_;
        const AttentionTimings timings{s.model_load_ms(), s.shown.tokenize_ms, s.shown.compute_ms - s.shown.tokenize_ms};
        write_attention_json(path,
                             attention_metadata(s.model(), s.backend().name(), s.backend_reason(), s.shown_texts,
                                                s.shown.token_ids, s.shown.attention, timings),
                             s.shown.attention);
    }
    void export_npy(const fs::path& path) const { write_attention_npy(path, session_.shown.attention); }

    // Save PNG reads the framebuffer once the frame that asked is drawn.
    void save_png_if_asked(int width, int height) {
        if (!png_asked_) return;
        png_asked_ = false;
        save(".png", [&](const fs::path& path) { write_screenshot(path.string(), width, height); });
    }

private:
    void controls() {
        Session& s = session_;
        const Model& model = s.model();
        bool changed = false;
        model_bar();
        ImGui::AlignTextToFramePadding();
        ImGui::TextUnformatted(s.texts.size() > 1 ? ("Text " + std::to_string(s.selected + 1) + " of the batch").c_str()
                                                  : "Text");
        ImGui::SameLine();
        examples_menu();
        changed |= ImGui::InputTextMultiline("##text", &s.texts[s.selected], ImVec2(-1, 60 * ui_.scale));
        record_control("text");
        changed |= ImGui::Checkbox("causal mask", &s.options.causal);
        record_control("causal mask");
        ImGui::SameLine();
        changed |= ImGui::Checkbox("padding mask", &s.options.padding_mask);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120 * ui_.scale);
        ImGui::SliderInt("layer", &s.layer, 0, model.config.n_layer - 1, "%d", ImGuiSliderFlags_AlwaysClamp);
        ImGui::SameLine();
        enum_combo("colormap", ui_.colormap, colormap_names, 120 * ui_.scale);
        ImGui::SameLine();
        legend();

        // Head count: every divisor of C; the same weights, re-split.
        const int C = model.config.n_embd;
        const int heads_now = s.options.n_head ? s.options.n_head : model.config.n_head;
        ImGui::SetNextItemWidth(90 * ui_.scale);
        if (ImGui::BeginCombo("heads", std::to_string(heads_now).c_str())) {
            for (int n = 1; n <= C; ++n) {
                if (C % n) continue;
                if (ImGui::Selectable(std::to_string(n).c_str(), n == heads_now)) {
                    s.options.n_head = n == model.config.n_head ? 0 : n;
                    changed = true;
                }
            }
            ImGui::EndCombo();
        }
        ImGui::SameLine();
        static const char* const scale_names[] = {"1/sqrt(d_head)", "1/sqrt(C)", "none"};
        changed |= enum_combo("scale", s.options.scale, scale_names, 130 * ui_.scale);
        ImGui::SameLine();
        static const char* const split_names[] = {"view + transpose", "naive view"};
        changed |= enum_combo("split", s.options.split, split_names, 150 * ui_.scale);
        ImGui::SameLine();
        ImGui::TextDisabled("%lld parameters (unchanged by the split)", static_cast<long long>(model.params));
        differences_note(heads_now);

        // Page Up / Page Down step through the layers when no text field has the keyboard.
        if (!ImGui::GetIO().WantTextInput) {
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageDown)))
                s.layer = std::min(s.layer + 1, model.config.n_layer - 1);
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageUp))) s.layer = std::max(s.layer - 1, 0);
        }
        if (changed) s.submit();
    }

    // The example texts: choosing one replaces the batch. While the texts
    // are still an example's, what to look for in it.
    void examples_menu() {
        Session& s = session_;
        ImGui::SetNextItemWidth(300 * ui_.scale);
        if (ImGui::BeginCombo("##examples", "examples...")) {
            for (const Example& example : examples_) {
                if (ImGui::Selectable(example.title.c_str())) {
                    s.texts = example.texts;
                    s.selected = 0;
                    s.submit();
                }
                if (ui_.layout.on())
                    ui_.layout.add({{"view", "control"}, {"name", "example"}, {"text", example.title}},
                                   ImGui::GetItemRectMin(), ImGui::GetItemRectSize());
            }
            if (!examples_error_.empty()) ImGui::TextDisabled("no examples: %s", examples_error_.c_str());
            ImGui::EndCombo();
        }
        record_control("examples");
        for (const Example& example : examples_) {
            if (example.texts != s.texts) continue;
            ImGui::SameLine();
            ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
            ImGui::TextWrapped("%s", example.look_for.c_str());
            ImGui::PopStyleColor();
            break;
        }
    }

    // The open model, the ways to open another, and how a load is going.
    void model_bar() {
        Session& s = session_;
        const Config& config = s.model().config;
        ImGui::AlignTextToFramePadding();
        ImGui::Text("Model %s", s.model_name().c_str());
        if (ui_.layout.on())
            ui_.layout.add({{"view", "control"}, {"name", "model"}, {"text", s.model_name()}}, ImGui::GetItemRectMin(),
                           ImGui::GetItemRectSize());
        ImGui::SameLine();
        ImGui::TextDisabled("%d layers, %d heads, C = %d", config.n_layer, config.n_head, config.n_embd);
        ImGui::SameLine();
        const bool loading = !s.loading().empty();
        ImGui::BeginDisabled(loading);
        ImGui::SetNextItemWidth(200 * ui_.scale);
        if (ImGui::BeginCombo("##cached", "open...")) {
            // The cache is read when the list opens: models downloaded meanwhile show up.
            if (ImGui::IsWindowAppearing()) cached_models_ = list_cached_models();
            if (ImGui::Selectable(builtin_model)) s.open_model(builtin_model);
            for (const CachedModel& m : cached_models_)
                if (ImGui::Selectable(m.name.c_str())) s.open_model(m.name);
            if (cached_models_.empty()) ImGui::TextDisabled("no GPT-2 models in the Hugging Face cache");
            ImGui::EndCombo();
        }
        ImGui::SameLine();
        ImGui::SetNextItemWidth(260 * ui_.scale);
        const bool entered = ImGui::InputTextWithHint("##model path", "model folder or hub name", &model_path_,
                                                      ImGuiInputTextFlags_EnterReturnsTrue);
        ImGui::SameLine();
        if ((ImGui::Button("Open") || entered) && !model_path_.empty()) s.open_model(model_path_);
        ImGui::SameLine();
        static const char* const backend_names[] = {to_string(BackendChoice::automatic), to_string(BackendChoice::cpu),
                                                    to_string(BackendChoice::cuda)};
        BackendChoice backend = s.backend_choice();
        if (enum_combo("backend", backend, backend_names, 80 * ui_.scale)) s.choose_backend(backend);
        ImGui::EndDisabled();
        ImGui::SameLine();
        if (loading) {
            ImGui::ProgressBar(s.load_progress(), ImVec2(120 * ui_.scale, 0));
            ImGui::SameLine();
            ImGui::Text("loading %s...", s.loading().c_str());
        } else if (!s.model_message.empty()) {
            ImGui::PushStyleColor(ImGuiCol_Text, error_colour);
            ImGui::TextWrapped("%s", s.model_message.c_str());
            ImGui::PopStyleColor();
            if (ui_.layout.on())
                ui_.layout.add({{"view", "control"}, {"name", "model message"}, {"text", s.model_message}},
                               ImGui::GetItemRectMin(), ImGui::GetItemRectSize());
        } else {
            ImGui::TextDisabled("(or drop a model folder on the window)");
        }
    }

    // Save PNG / JSON / NPY into the export folder, and where the last one went.
    void export_bar() {
        ImGui::SameLine();
        ImGui::TextUnformatted("save in");
        ImGui::SameLine();
        ImGui::SetNextItemWidth(160 * ui_.scale);
        ImGui::InputTextWithHint("##export dir", "folder to save in", &export_dir_);
        const bool computed = !session_.shown.attention.weights.empty();
        ImGui::SameLine();
        if (ImGui::Button("Save PNG")) png_asked_ = true;
        ImGui::BeginDisabled(!computed);
        ImGui::SameLine();
        if (ImGui::Button("Save JSON")) save(".json", [this](const fs::path& path) { export_json(path); });
        ImGui::SameLine();
        if (ImGui::Button("Save NPY")) save(".npy", [this](const fs::path& path) { export_npy(path); });
        ImGui::EndDisabled();
        ImGui::SameLine();
        if (export_failed_)
            ImGui::TextColored(error_colour, "%s", export_message_.c_str());
        else
            ImGui::TextDisabled("%s", export_message_.c_str());
    }

    // Writes headscope-DATE-TIME<extension> into the export folder with
    // `write` and says where, or why not.
    template <class Write>
    void save(const char* extension, Write write) {
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

    // The last item's rectangle, for tests that click it (view "control").
    void record_control(const char* name) {
        if (ui_.layout.on()) ui_.layout.add({{"view", "control"}, {"name", name}}, ImGui::GetItemRectMin(), ImGui::GetItemRectSize());
    }

    // The colormap from 0 to 1, and the masked look.
    void legend() {
        const int width = static_cast<int>(100 * ui_.scale), height = static_cast<int>(ImGui::GetFrameHeight());
        if (legend_.width() != width || legend_colormap_ != ui_.colormap) {
            ui_.renderer.render_legend(ui_.colormap, width, height, legend_);
            legend_colormap_ = ui_.colormap;
        }
        ImGui::TextUnformatted("0");
        ImGui::SameLine();
        ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(legend_.color())),
                     ImVec2(static_cast<float>(width), static_cast<float>(height)));
        ImGui::SameLine();
        ImGui::TextUnformatted("1");
        if (masked_swatch_.width() != height) {
            const HeatmapImage masked{.rows = 1, .cols = 1, .cells = {masked_cell}};
            ui_.renderer.upload(masked, masked_swatch_);
            ui_.renderer.draw(ui_.colormap, height, height, masked_swatch_);
        }
        ImGui::SameLine();
        ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(masked_swatch_.color())),
                     ImVec2(static_cast<float>(height), static_cast<float>(height)));
        ImGui::SameLine();
        ImGui::TextUnformatted("masked");
    }

    // Says plainly when the maps are not the model's own computation.
    void differences_note(int heads_now) {
        const Session& s = session_;
        const int model_heads = s.model().config.n_head;
        std::string note;
        if (heads_now != model_heads)
            note += "re-split into " + std::to_string(heads_now) + " heads (the model was trained with " +
                    std::to_string(model_heads) + "); ";
        if (s.options.scale == Scale::model) note += "scaled by 1/sqrt(C), the classic mistake; ";
        if (s.options.scale == Scale::none) note += "not scaled at all; ";
        if (s.options.split == Split::naive_view) note += "naive view: heads mix different tokens' channels; ";
        if (!s.options.causal) note += "causal mask off: tokens see the future, unlike in training; ";
        if (note.empty()) return;
        note.resize(note.size() - 2);
        ImGui::TextColored(warning_colour, "Not the model's own attention: %s.", note.c_str());
    }

    void views() {
        const Session& s = session_;
        if (s.shown.attention.weights.empty()) {
            ImGui::TextUnformatted(s.message.empty() ? "computing..." : s.message.c_str());
            if (!s.message.empty() && s.texts.size() > 1) mask_view_.batch_list(session_, ui_);
            return;
        }
        if (!s.message.empty())
            ImGui::TextColored(error_colour, "%s (showing the last good maps)", s.message.c_str());
        if (!ImGui::BeginTabBar("views")) return;
        for (int v = 0; v < 5; ++v) {
            const View view = static_cast<View>(v);
            const ImGuiTabItemFlags flags = tab_to_select_ == view ? ImGuiTabItemFlags_SetSelected : 0;
            if (!ImGui::BeginTabItem(view_names[v], nullptr, flags)) continue;
            if (tab_to_select_ == view) tab_to_select_.reset();  // shown: the user's clicks choose again
            // Leave room for the status bar.
            ImGui::BeginChild("view", ImVec2(0, -ImGui::GetFrameHeightWithSpacing()));
            switch (view) {
            case View::heads: heads_view_.draw(session_, ui_); break;
            case View::model:
                if (model_view_.draw(session_, ui_)) {
                    heads_view_.open_large();
                    tab_to_select_ = View::heads;
                }
                break;
            case View::mask: mask_view_.draw(session_, ui_); break;
            case View::dance: dance_view_.draw(session_, ui_); break;
            case View::checks: checks_view_.draw(session_, ui_); break;
            }
            ImGui::EndChild();
            ImGui::EndTabItem();
        }
        ImGui::EndTabBar();
    }

    void status_bar() {
        const Session& s = session_;
        ImGui::Separator();
        ImGui::Text("%zu tokens   %.2f ms   backend %s (%s)   %s",
                    s.shown.token_ids.empty() ? 0 : s.shown.token_ids[s.selected].size(), s.shown.compute_ms,
                    s.backend().name().c_str(), s.backend_reason().c_str(), s.busy() ? "computing..." : "");
        export_bar();
    }

    Session session_;
    Ui ui_;
    std::optional<View> tab_to_select_;  // chosen outside the tab bar (--view, a model-view click), until shown
    HeadsView heads_view_;
    ModelView model_view_;
    MaskView mask_view_;
    DanceView dance_view_;
    ChecksView checks_view_;
    HeatmapTexture legend_, masked_swatch_;
    Colormap legend_colormap_{};
    std::vector<CachedModel> cached_models_;  // the picker's list, read when it opens
    std::vector<Example> examples_;           // the examples menu's
    std::string examples_error_;              // why there are none
    std::string model_path_;                  // the path field
    std::string export_dir_;
    std::string export_message_;              // where the last export went, or why it failed
    bool export_failed_ = false;
    bool png_asked_ = false;
};

void write_screenshot(const std::string& path, int width, int height) {
    std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    // GL's row 0 is the bottom; PNG's is the top.
    if (!stbi_write_png(path.c_str(), width, height, 4, pixels.data() + static_cast<size_t>(width) * 4 * (height - 1),
                        -width * 4))
        throw Error(path + ": cannot write the screenshot");
}

// --frame-times: each frame's time, from input handled to the frame drawn,
// and whether it drew the maps of a new compute into their textures (what a
// keystroke costs) or only showed them. The first frame also builds the font
// atlas and compiles shaders, so it is reported alone.
struct FrameTimes {
    std::vector<double> new_maps_ms, redraw_ms;
    double first_ms = -1;

    void add(double ms, bool new_maps) {
        if (first_ms < 0)
            first_ms = ms;
        else
            (new_maps ? new_maps_ms : redraw_ms).push_back(ms);
    }
    void print() const {
        auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v.empty() ? 0.0 : v[v.size() / 2];
        };
        std::printf("first frame %.2f ms; frames with new maps: %zu, median %.2f ms; other frames: %zu, median %.2f ms\n",
                    first_ms, new_maps_ms.size(), median(new_maps_ms), redraw_ms.size(), median(redraw_ms));
    }
};

// What GLFW's callbacks report, for the loop to act on between frames.
struct WindowEvents {
    std::string dropped;                // a folder dropped on the window
    std::optional<float> content_scale;  // the window moved to a monitor of another scale
};

// DejaVu Sans with every script it has (Latin, Greek, Cyrillic, Armenian,
// Hebrew, Arabic, Georgian, symbols), sized for the content scale.
void load_fonts_and_style(float scale) {
    static const ImWchar ranges[] = {0x0020, 0x2FFF, 0xFB00, 0xFFFD, 0};
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    io.Fonts->AddFontFromFileTTF(HEADSCOPE_FONT, 15.f * scale, nullptr, ranges);
    ImGui::GetStyle() = ImGuiStyle();
    ImGui::StyleColorsDark();
    ImGui::GetStyle().ScaleAllSizes(scale);
}

int run(const Args& args, const Settings& start, bool use_settings, bool model_given) {
    LoadedModel loaded = load_start_model(start, model_given, parse_backend_choice(args.backend));
    if (!glfwInit()) throw Error("cannot open a window: GLFW could not initialise (no display?)");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    GLFWwindow* window = glfwCreateWindow(start.window_width, start.window_height, "Headscope", nullptr, nullptr);
    if (!window) {
        glfwTerminate();
        throw Error("cannot open an OpenGL 3.3 window");
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(args.screenshot.empty() ? 1 : 0);
    float scale_x = 1, scale_y = 1;
    glfwGetWindowContentScale(window, &scale_x, &scale_y);
    WindowEvents events;
    glfwSetWindowUserPointer(window, &events);
    glfwSetDropCallback(window, [](GLFWwindow* w, int count, const char** paths) {
        if (count > 0) static_cast<WindowEvents*>(glfwGetWindowUserPointer(w))->dropped = paths[0];
    });
    glfwSetWindowContentScaleCallback(window, [](GLFWwindow* w, float x, float) {
        static_cast<WindowEvents*>(glfwGetWindowUserPointer(w))->content_scale = x;
    });
    // Ctrl+Q quits. GLFW's event rather than ImGui's key state, which misses
    // a press and release that arrive in the same poll (as xdotool sends them).
    // ImGui's callback, installed next, passes keys on to this one.
    glfwSetKeyCallback(window, [](GLFWwindow* w, int key, int, int action, int mods) {
        if (key == GLFW_KEY_Q && action == GLFW_PRESS && (mods & GLFW_MOD_CONTROL)) glfwSetWindowShouldClose(w, 1);
    });

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    const std::string ini_path = (config_dir() / "imgui.ini").string();
    if (use_settings) {
        std::error_code ec;
        fs::create_directories(config_dir(), ec);
    }
    io.IniFilename = use_settings ? ini_path.c_str() : nullptr;
    load_fonts_and_style(scale_x);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    {
        App app(args, start, std::move(loaded), scale_x);
        const bool headless = !args.screenshot.empty();
        std::string model_to_open = args.open_model;  // opened after the first frames, as the picker does
        int frames_drawn = 0;                          // since the last model was asked for
        std::chrono::steady_clock::time_point frame_start;
        FrameTimes frame_times;
        uint64_t drawn_generation = 0;  // of the maps the last frame drew
        while (!glfwWindowShouldClose(window)) {
            // Every 10th frame recomputes the same texts, as a keystroke would.
            if (headless && args.frame_times && frames_drawn % 10 == 9) app.recompute();
            if (headless) {
                app.settle();
                glfwPollEvents();
            } else {
                glfwWaitEventsTimeout(0.05);  // wakes for input, and to pick up finished computes and loads
            }
            if (!events.dropped.empty()) app.open_model(std::exchange(events.dropped, std::string()));
            if (events.content_scale) {
                load_fonts_and_style(*events.content_scale);
                ImGui_ImplOpenGL3_DestroyFontsTexture();
                ImGui_ImplOpenGL3_CreateFontsTexture();
                app.set_scale(*events.content_scale);
                events.content_scale.reset();
            }
            frame_start = std::chrono::steady_clock::now();
            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            ImGui::NewFrame();
            app.frame();
            ImGui::Render();
            int width, height;
            glfwGetFramebufferSize(window, &width, &height);
            glViewport(0, 0, width, height);
            glClearColor(0.1f, 0.1f, 0.12f, 1);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
            app.save_png_if_asked(width, height);
            if (args.frame_times) {
                glFinish();  // the GPU's (llvmpipe's) work counts too
                frame_times.add(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count(),
                                app.shown_generation() != drawn_generation);
                drawn_generation = app.shown_generation();
            }
            if (headless && ++frames_drawn >= args.frames) {
                if (model_to_open.empty()) {
                    write_screenshot(args.screenshot, width, height);
                    if (!args.export_json.empty()) app.export_json(args.export_json);
                    if (!args.export_npy.empty()) app.export_npy(args.export_npy);
                    break;
                }
                app.open_model(std::exchange(model_to_open, std::string()));
                frames_drawn = 0;
            }
            glfwSwapBuffers(window);
        }
        // Closed at once, though the model's background work (its head scores)
        // may keep the process a few seconds more.
        glfwHideWindow(window);
        // The last frame's cells (a test driving the window reads them after Ctrl+Q).
        if (!args.layout.empty()) app.layout().write(args.layout);
        if (args.frame_times) frame_times.print();
        if (use_settings) {
            int window_width, window_height;
            glfwGetWindowSize(window, &window_width, &window_height);
            try {
                write_settings(config_dir() / "settings.json", app.settings(window_width, window_height));
            } catch (const Error& e) {
                std::fprintf(stderr, "headscope: warning: %s\n", e.what());
            }
        }
    }
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App cli{"Headscope: every attention head of a GPT-2-family model, live", "headscope"};
    Args args;
    cli.add_option("--model", args.model, "builtin (the default), a model directory, or a Hugging Face hub name");
    cli.add_option("--text", args.texts, "the text to open with");
    cli.add_option("--example", args.example, "open with this example's texts (its title in assets/examples.json)");
    cli.add_option("--view", args.view, "heads|model|mask|dance|checks: the tab to open on");
    cli.add_option("--layer", args.layer, "the layer shown");
    cli.add_option("--head", args.head, "open this head of the layer large");
    cli.add_option("--dance-step", args.dance_step, "the reshape dance's step shown (1..8)");
    cli.add_option("--causal", args.causal, "on|off");
    cli.add_option("--padding-mask", args.padding_mask, "on|off");
    cli.add_option("--heads", args.heads, "re-split into N heads");
    cli.add_option("--screenshot", args.screenshot, "render --frames frames, write this PNG and exit");
    cli.add_option("--layout", args.layout, "on exit, write the last frame's drawn cells' rectangles as JSON");
    cli.add_option("--frames", args.frames, "frames to render before the screenshot");
    cli.add_flag("--frame-times", args.frame_times, "screenshot mode: recompute every 10th frame and print the frames' times (the benchmark)");
    cli.add_option("--scale", args.scale, "head|model|none: 1/sqrt(C/N), 1/sqrt(C), 1");
    cli.add_option("--split", args.split, "transpose|naive-view");
    cli.add_option("--colormap", args.colormap, "viridis|magma|grey");
    cli.add_option("--backend", args.backend, "auto|cpu|cuda (auto: CUDA when built with it and a device exists)");
    cli.add_option("--open-model", args.open_model, "screenshot mode: open this model after --frames frames, as the picker does");
    cli.add_option("--export-json", args.export_json, "screenshot mode: also save the attention as the CLI's JSON");
    cli.add_option("--export-npy", args.export_npy, "screenshot mode: also save the attention as the CLI's .npy");
    cli.add_option("--settings", args.settings,
                   "on|off: read and save settings in $XDG_CONFIG_HOME/headscope (default on; off with --screenshot or --layout)");
    try {
        cli.parse(argc, argv);
        const bool driven_by_test = !args.screenshot.empty() || !args.layout.empty();
        const bool use_settings =
            parse_on_off("--settings", !args.settings.empty() ? args.settings : driven_by_test ? "off" : "on");
        return run(args, start_settings(args, cli, use_settings), use_settings, cli.count("--model") > 0);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return cli.exit(e);
        std::fprintf(stderr, "headscope: error: %s\n", e.what());
        return 2;
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: error: %s\n", e.what());
        return 2;
    }
}
