// headscope: the window. Type a sentence and every head of the selected layer
// redraws as you type; masks, head count, scale and split are live toggles.
// With --screenshot it renders a few frames, writes the framebuffer as PNG
// (and with --layout every drawn cell's rectangle as JSON) and exits: the
// tests drive it that way under Xvfb.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_stdlib.h>
#include <stb/stb_image_write.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "headscope/error.h"
#include "headscope/heatmap.h"
#include "headscope/live.h"
#include "heatmap_renderer.h"

using namespace headscope;
using Json = nlohmann::ordered_json;

namespace {

struct Args {
    std::string model = builtin_model;
    std::vector<std::string> texts;
    std::string view = "heads", causal = "on", padding_mask = "on";
    int layer = 0, heads = 0, frames = 3;
    std::string screenshot, layout;
};

// A drawn heatmap cell, in framebuffer pixels from the top left (for --layout).
struct DrawnCell {
    int layer, head, query, key;
    float x, y, w, h;
};

class App {
public:
    App(const Args& args, float content_scale)
        : model_(load_model(args.model)), scale_(content_scale), tooltips_(args.screenshot.empty()),
          record_cells_(!args.layout.empty()) {
        backend_ = make_cpu_backend();
        backend_->load_weights(model_);
        live_ = std::make_unique<LiveCompute>(*backend_, model_);
        texts_ = args.texts.empty() ? std::vector<std::string>{"The cat sat on the mat because it was soft."}
                                    : args.texts;
        options_.causal = parse_on_off("--causal", args.causal);
        options_.padding_mask = parse_on_off("--padding-mask", args.padding_mask);
        options_.n_head = args.heads;
        layer_ = args.layer;
        if (layer_ < 0 || layer_ >= model_.config.n_layer)
            throw Error("--layer " + std::to_string(layer_) + " out of range (the model has layers 0.." +
                        std::to_string(model_.config.n_layer - 1) + ")");
        submit();
    }

    // Waits for the compute in flight (screenshot mode wants the real maps).
    void settle() {
        while (live_->busy()) glfwWaitEventsTimeout(0.001);
        collect();
    }

    void frame() {
        collect();
        const ImGuiViewport* viewport = ImGui::GetMainViewport();
        ImGui::SetNextWindowPos(viewport->WorkPos);
        ImGui::SetNextWindowSize(viewport->WorkSize);
        ImGui::Begin("Headscope", nullptr,
                     ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                         ImGuiWindowFlags_NoBringToFrontOnFocus);
        controls();
        ImGui::Separator();
        heads_grid();
        status_bar();
        ImGui::End();
    }

    const std::vector<DrawnCell>& drawn_cells() const { return drawn_; }

private:
    void submit() { live_->submit({texts_, options_}); }

    // Takes a finished compute; an error keeps the last good maps.
    void collect() {
        std::optional<LiveResult> result = live_->take();
        if (!result) return;
        if (!result->error.empty()) {
            message_ = result->error;
            return;
        }
        message_.clear();
        shown_ = std::move(*result);
        shown_options_ = options_;
        textures_.clear();
    }

    void controls() {
        bool changed = false;
        const int layer_before = layer_;
        ImGui::TextUnformatted("Text");
        changed |= ImGui::InputTextMultiline("##text", &texts_.front(), ImVec2(-1, 60 * scale_));
        changed |= ImGui::Checkbox("causal mask", &options_.causal);
        ImGui::SameLine();
        changed |= ImGui::Checkbox("padding mask", &options_.padding_mask);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120 * scale_);
        ImGui::SliderInt("layer", &layer_, 0, model_.config.n_layer - 1);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120 * scale_);
        int colormap = static_cast<int>(colormap_);
        if (ImGui::Combo("colormap", &colormap, colormap_names, 3)) {
            colormap_ = static_cast<Colormap>(colormap);
            textures_.clear();
        }

        // Head count: every divisor of C; the same weights, re-split.
        const int C = model_.config.n_embd;
        const int heads_now = options_.n_head ? options_.n_head : model_.config.n_head;
        ImGui::SetNextItemWidth(90 * scale_);
        if (ImGui::BeginCombo("heads", std::to_string(heads_now).c_str())) {
            for (int n = 1; n <= C; ++n) {
                if (C % n) continue;
                if (ImGui::Selectable(std::to_string(n).c_str(), n == heads_now)) {
                    options_.n_head = n == model_.config.n_head ? 0 : n;
                    changed = true;
                }
            }
            ImGui::EndCombo();
        }
        ImGui::SameLine();
        static const char* scale_names[] = {"1/sqrt(d_head)", "1/sqrt(C)", "none"};
        int scale = static_cast<int>(options_.scale);
        ImGui::SetNextItemWidth(130 * scale_);
        if (ImGui::Combo("scale", &scale, scale_names, 3)) {
            options_.scale = static_cast<Scale>(scale);
            changed = true;
        }
        ImGui::SameLine();
        static const char* split_names[] = {"view + transpose", "naive view"};
        int split = static_cast<int>(options_.split);
        ImGui::SetNextItemWidth(150 * scale_);
        if (ImGui::Combo("split", &split, split_names, 2)) {
            options_.split = static_cast<Split>(split);
            changed = true;
        }
        ImGui::SameLine();
        ImGui::TextDisabled("%lld parameters (unchanged by the split)", static_cast<long long>(model_.params));
        differences_note(heads_now);

        // Page Up / Page Down step through the layers when no text field has the keyboard.
        if (!ImGui::GetIO().WantTextInput) {
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageDown))) layer_ = std::min(layer_ + 1, model_.config.n_layer - 1);
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageUp))) layer_ = std::max(layer_ - 1, 0);
        }
        if (layer_ != layer_before) textures_.clear();
        if (changed) submit();
    }

    // Says plainly when the maps are not the model's own computation.
    void differences_note(int heads_now) {
        std::string note;
        if (heads_now != model_.config.n_head)
            note += "re-split into " + std::to_string(heads_now) + " heads (the model was trained with " +
                    std::to_string(model_.config.n_head) + "); ";
        if (options_.scale == Scale::model) note += "scaled by 1/sqrt(C), the classic mistake; ";
        if (options_.scale == Scale::none) note += "not scaled at all; ";
        if (options_.split == Split::naive_view) note += "naive view: heads mix different tokens' channels; ";
        if (!options_.causal) note += "causal mask off: tokens see the future, unlike in training; ";
        if (note.empty()) return;
        note.resize(note.size() - 2);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "Not the model's own attention: %s.", note.c_str());
    }

    void heads_grid() {
        drawn_.clear();
        const AttentionResult& att = shown_.attention;
        if (att.weights.empty()) {
            ImGui::TextUnformatted(message_.empty() ? "computing..." : message_.c_str());
            return;
        }
        if (!message_.empty()) ImGui::TextColored(ImVec4(1, 0.5f, 0.4f, 1), "%s (showing the last good maps)",
                                                  message_.c_str());
        const int NH = att.NH, T = att.T;
        const int length = static_cast<int>(shown_.token_ids.front().size());
        const float avail_w = ImGui::GetContentRegionAvail().x;
        const float avail_h = ImGui::GetContentRegionAvail().y - ImGui::GetFrameHeightWithSpacing();
        // The column count that gives the largest maps.
        const float label = ImGui::GetTextLineHeightWithSpacing();
        float side = 0;
        int columns = 1;
        for (int c = 1; c <= NH; ++c) {
            const int rows = (NH + c - 1) / c;
            const float s = std::floor(std::min(avail_w / c - 8, avail_h / rows - label - 8));
            if (s > side) {
                side = s;
                columns = c;
            }
        }
        if (side < 8) return;
        const int pixels = static_cast<int>(side);
        textures_.resize(static_cast<size_t>(NH));
        const ImVec2 framebuffer_scale = ImGui::GetIO().DisplayFramebufferScale;
        for (int h = 0; h < NH; ++h) {
            if (h % columns) ImGui::SameLine();
            ImGui::BeginGroup();
            ImGui::Text("L%d H%d", layer_, h);
            HeatmapTexture& texture = textures_[h];
            if (texture.width() != pixels) {
                const HeatmapImage image = heatmap_image(att, shown_options_, layer_, 0, h, length, pixels);
                renderer_.render(image, colormap_, pixels, pixels, texture);
            }
            const ImVec2 origin = ImGui::GetCursorScreenPos();
            ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(texture.color())), ImVec2(side, side));
            const float cell = side / T;
            if (tooltips_ && ImGui::IsItemHovered()) hover_tooltip(h, origin, cell, length);
            for (int i = 0; record_cells_ && i < T; ++i)
                for (int j = 0; j < T; ++j)
                    drawn_.push_back({layer_, h, i, j, (origin.x + j * cell) * framebuffer_scale.x,
                                      (origin.y + i * cell) * framebuffer_scale.y, cell * framebuffer_scale.x,
                                      cell * framebuffer_scale.y});
            ImGui::EndGroup();
        }
    }

    // The query and key under the mouse, the weight, and the row's entropy.
    void hover_tooltip(int h, ImVec2 origin, float cell, int length) {
        const AttentionResult& att = shown_.attention;
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int i = std::clamp(static_cast<int>((mouse.y - origin.y) / cell), 0, att.T - 1);
        const int j = std::clamp(static_cast<int>((mouse.x - origin.x) / cell), 0, att.T - 1);
        const float* row = att.map(layer_, 0, h) + static_cast<size_t>(i) * att.T;
        double entropy = 0;
        for (int k = 0; k < att.T; ++k)
            if (row[k] > 0) entropy -= row[k] * std::log(static_cast<double>(row[k]));
        auto token = [&](int t) {
            return t < length ? "'" + model_.tokenizer.token_bytes(shown_.token_ids[0][t]) + "'" : std::string("<pad>");
        };
        ImGui::BeginTooltip();
        ImGui::Text("layer %d head %d", layer_, h);
        ImGui::Text("query %d %s  ->  key %d %s", i, token(i).c_str(), j, token(j).c_str());
        if (j < visible_end(shown_options_, i, length, att.T))
            ImGui::Text("weight %.4f   row entropy %.3f nats", row[j], entropy);
        else
            ImGui::TextUnformatted("masked: this query may not see this key");
        ImGui::EndTooltip();
    }

    void status_bar() {
        ImGui::Separator();
        ImGui::Text("%zu tokens   %.2f ms   backend %s   %s", shown_.token_ids.empty() ? 0 : shown_.token_ids[0].size(),
                    shown_.compute_ms, backend_->name().c_str(), live_->busy() ? "computing..." : "");
    }

    Model model_;
    float scale_;
    bool tooltips_;      // off for screenshots, where the pointer is wherever Xvfb left it
    bool record_cells_;  // only --layout needs every cell's rectangle: T*T per head per frame
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<LiveCompute> live_;
    std::vector<std::string> texts_;
    AttentionOptions options_, shown_options_;
    int layer_ = 0;
    Colormap colormap_ = Colormap::viridis;
    LiveResult shown_;
    std::string message_;
    HeatmapRenderer renderer_;
    std::vector<HeatmapTexture> textures_;  // (NH) of the selected layer
    std::vector<DrawnCell> drawn_;
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

void write_layout(const std::string& path, const std::vector<DrawnCell>& cells) {
    std::ofstream out(path);
    out << "[";
    for (size_t n = 0; n < cells.size(); ++n) {
        const DrawnCell& c = cells[n];
        out << (n ? ",\n" : "\n")
            << Json{{"view", "heads"}, {"layer", c.layer}, {"head", c.head}, {"query", c.query}, {"key", c.key},
                    {"x", c.x}, {"y", c.y}, {"w", c.w}, {"h", c.h}}
                   .dump();
    }
    out << "\n]\n";
    if (!out) throw Error(path + ": cannot write the layout");
}

int run(const Args& args) {
    if (!glfwInit()) throw Error("cannot open a window: GLFW could not initialise (no display?)");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    GLFWwindow* window = glfwCreateWindow(1280, 800, "Headscope", nullptr, nullptr);
    if (!window) {
        glfwTerminate();
        throw Error("cannot open an OpenGL 3.3 window");
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(args.screenshot.empty() ? 1 : 0);
    float scale_x = 1, scale_y = 1;
    glfwGetWindowContentScale(window, &scale_x, &scale_y);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.Fonts->AddFontFromFileTTF(HEADSCOPE_FONT, 15.f * scale_x);
    ImGui::StyleColorsDark();
    ImGui::GetStyle().ScaleAllSizes(scale_x);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    {
        App app(args, scale_x);
        const bool headless = !args.screenshot.empty();
        for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
            if (headless) {
                app.settle();
                glfwPollEvents();
            } else {
                glfwWaitEventsTimeout(0.05);  // wakes for input, and to pick up finished computes
            }
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
            if (headless && frame + 1 >= args.frames) {
                write_screenshot(args.screenshot, width, height);
                if (!args.layout.empty()) write_layout(args.layout, app.drawn_cells());
                break;
            }
            glfwSwapBuffers(window);
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
    cli.add_option("--view", args.view, "heads");
    cli.add_option("--layer", args.layer, "the layer shown");
    cli.add_option("--causal", args.causal, "on|off");
    cli.add_option("--padding-mask", args.padding_mask, "on|off");
    cli.add_option("--heads", args.heads, "re-split into N heads");
    cli.add_option("--screenshot", args.screenshot, "render --frames frames, write this PNG and exit");
    cli.add_option("--layout", args.layout, "with --screenshot: write every drawn cell's rectangle as JSON");
    cli.add_option("--frames", args.frames, "frames to render before the screenshot");
    try {
        cli.parse(argc, argv);
        return run(args);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return cli.exit(e);
        std::fprintf(stderr, "headscope: error: %s\n", e.what());
        return 2;
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: error: %s\n", e.what());
        return 2;
    }
}
