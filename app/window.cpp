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
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "checks_view.h"
#include "dance_view.h"
#include "headscope/error.h"
#include "heads_view.h"
#include "mask_view.h"
#include "model_view.h"
#include "ui.h"

using namespace headscope;
using Json = nlohmann::ordered_json;

namespace {

struct Args {
    std::string model = builtin_model;
    std::vector<std::string> texts;
    std::string view = "heads", causal = "on", padding_mask = "on";
    int layer = 0, head = -1, heads = 0, dance_step = 1, frames = 3;
    std::string screenshot, layout;
    bool frame_times = false;
};

enum class View { heads, model, mask, dance, checks };
constexpr const char* view_names[] = {"heads", "model", "mask", "dance", "checks"};

View parse_view(const std::string& word) {
    for (int v = 0; v < 5; ++v)
        if (word == view_names[v]) return static_cast<View>(v);
    throw Error("--view: expected heads, model, mask, dance or checks, got '" + word + "'");
}

AttentionOptions initial_options(const Args& args) {
    AttentionOptions options;
    options.causal = parse_on_off("--causal", args.causal);
    options.padding_mask = parse_on_off("--padding-mask", args.padding_mask);
    options.n_head = args.heads;
    return options;
}

class App {
public:
    App(const Args& args, float content_scale)
        : session_(load_model(args.model), args.texts, initial_options(args)),
          ui_(content_scale, args.screenshot.empty(), !args.layout.empty()),
          view_(parse_view(args.view)), select_tab_(true) {
        const Model& model = session_.model();
        if (args.layer < 0 || args.layer >= model.config.n_layer)
            throw Error("--layer " + std::to_string(args.layer) + " out of range (the model has layers 0.." +
                        std::to_string(model.config.n_layer - 1) + ")");
        session_.layer = args.layer;
        const int heads = args.heads ? args.heads : model.config.n_head;
        if (args.head >= heads)
            throw Error("--head " + std::to_string(args.head) + " out of range (" + std::to_string(heads) + " heads)");
        if (args.head >= 0) {
            session_.head = args.head;
            heads_view_.open_large();
        }
        dance_view_.set_step(args.dance_step);
    }

    // Waits for the compute in flight and the probe scores (screenshot mode
    // wants the real maps and labels).
    void settle() {
        while (session_.busy() || session_.probes_pending()) {
            glfwWaitEventsTimeout(0.001);
            session_.collect();
        }
    }

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

private:
    void controls() {
        Session& s = session_;
        const Model& model = s.model();
        bool changed = false;
        ImGui::TextUnformatted(s.texts.size() > 1 ? ("Text " + std::to_string(s.selected + 1) + " of the batch").c_str()
                                                  : "Text");
        changed |= ImGui::InputTextMultiline("##text", &s.texts[s.selected], ImVec2(-1, 60 * ui_.scale));
        record_control("text");
        changed |= ImGui::Checkbox("causal mask", &s.options.causal);
        record_control("causal mask");
        ImGui::SameLine();
        changed |= ImGui::Checkbox("padding mask", &s.options.padding_mask);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120 * ui_.scale);
        ImGui::SliderInt("layer", &s.layer, 0, model.config.n_layer - 1);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120 * ui_.scale);
        int colormap = static_cast<int>(ui_.colormap);
        if (ImGui::Combo("colormap", &colormap, colormap_names, 3)) ui_.colormap = static_cast<Colormap>(colormap);
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
        static const char* scale_names[] = {"1/sqrt(d_head)", "1/sqrt(C)", "none"};
        int scale = static_cast<int>(s.options.scale);
        ImGui::SetNextItemWidth(130 * ui_.scale);
        if (ImGui::Combo("scale", &scale, scale_names, 3)) {
            s.options.scale = static_cast<Scale>(scale);
            changed = true;
        }
        ImGui::SameLine();
        static const char* split_names[] = {"view + transpose", "naive view"};
        int split = static_cast<int>(s.options.split);
        ImGui::SetNextItemWidth(150 * ui_.scale);
        if (ImGui::Combo("split", &split, split_names, 2)) {
            s.options.split = static_cast<Split>(split);
            changed = true;
        }
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

    // The last item's rectangle, for tests that click it (view "control").
    void record_control(const char* name) {
        if (ui_.layout.on()) ui_.layout.add({{"view", "control"}, {"name", name}}, ImGui::GetItemRectMin(), ImGui::GetItemRectSize());
    }

    // The colormap from 0 to 1, with the masked look beside it.
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
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "Not the model's own attention: %s.", note.c_str());
    }

    void views() {
        const Session& s = session_;
        if (s.shown.attention.weights.empty()) {
            ImGui::TextUnformatted(s.message.empty() ? "computing..." : s.message.c_str());
            return;
        }
        if (!s.message.empty())
            ImGui::TextColored(ImVec4(1, 0.5f, 0.4f, 1), "%s (showing the last good maps)", s.message.c_str());
        if (!ImGui::BeginTabBar("views")) return;
        for (int v = 0; v < 5; ++v) {
            const ImGuiTabItemFlags flags = select_tab_ && view_ == static_cast<View>(v) ? ImGuiTabItemFlags_SetSelected : 0;
            if (!ImGui::BeginTabItem(view_names[v], nullptr, flags)) continue;
            if (!select_tab_) view_ = static_cast<View>(v);
            // Leave room for the status bar.
            ImGui::BeginChild("view", ImVec2(0, -ImGui::GetFrameHeightWithSpacing()));
            switch (view_) {
            case View::heads: heads_view_.draw(session_, ui_); break;
            case View::model:
                if (model_view_.draw(session_, ui_)) {
                    heads_view_.open_large();
                    view_ = View::heads;
                    select_tab_ = true;
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
        select_tab_ = select_tab_ && ImGui::GetFrameCount() < 2;
    }

    void status_bar() {
        const Session& s = session_;
        ImGui::Separator();
        ImGui::Text("%zu tokens   %.2f ms   backend %s   %s",
                    s.shown.token_ids.empty() ? 0 : s.shown.token_ids[s.selected].size(), s.shown.compute_ms,
                    s.backend().name().c_str(), s.busy() ? "computing..." : "");
    }

    Session session_;
    Ui ui_;
    View view_;
    bool select_tab_;  // the tab to show was chosen outside the tab bar (--view, a model-view click)
    HeadsView heads_view_;
    ModelView model_view_;
    MaskView mask_view_;
    DanceView dance_view_;
    ChecksView checks_view_;
    HeatmapTexture legend_;
    Colormap legend_colormap_{};
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

// The first frame draws every map of a new compute into its texture; the
// others only show them.
void print_frame_times(std::vector<double> ms) {
    const double first = ms.front();
    ms.erase(ms.begin());
    std::sort(ms.begin(), ms.end());
    std::printf("frames %zu  first (new maps) %.2f ms  then median %.2f ms  max %.2f ms\n", ms.size() + 1, first,
                ms.empty() ? first : ms[ms.size() / 2], ms.empty() ? first : ms.back());
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
        std::chrono::steady_clock::time_point frame_start;
        std::vector<double> frame_ms;  // --frame-times: from input handled to the frame drawn
        for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
            if (headless) {
                app.settle();
                glfwPollEvents();
            } else {
                glfwWaitEventsTimeout(0.05);  // wakes for input, and to pick up finished computes
            }
            frame_start = std::chrono::steady_clock::now();
            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            ImGui::NewFrame();
            app.frame();
            if (ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_Q)) glfwSetWindowShouldClose(window, 1);
            ImGui::Render();
            int width, height;
            glfwGetFramebufferSize(window, &width, &height);
            glViewport(0, 0, width, height);
            glClearColor(0.1f, 0.1f, 0.12f, 1);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
            if (args.frame_times) {
                glFinish();  // the GPU's (llvmpipe's) work counts too
                frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count());
            }
            if (headless && frame + 1 >= args.frames) {
                write_screenshot(args.screenshot, width, height);
                break;
            }
            glfwSwapBuffers(window);
        }
        // The last frame's cells (a test driving the window reads them after Ctrl+Q).
        if (!args.layout.empty()) app.layout().write(args.layout);
        if (!frame_ms.empty()) print_frame_times(frame_ms);
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
    cli.add_flag("--frame-times", args.frame_times, "print the frames' times on exit (the benchmark uses it)");
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
