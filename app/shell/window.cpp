// headscope: the window. Type a sentence and every head of the selected layer
// redraws as you type; masks, head count, scale and split are live toggles.
// This file is the shell, in the shape of Dear ImGui's GLFW + OpenGL 3
// example: create the window and ImGui, loop (poll, new frame, draw the
// views, render, swap), shut down in reverse. What is drawn is main_view.h's;
// what a test or benchmark asks (--screenshot, --layout, --frame-times) is
// headless.h's; the options are command_line.h's.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <imgui_internal.h>  // a window's hidden frames
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <new>
#include <optional>
#include <ostream>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/installation.h"
#include "shell/command_line.h"
#include "shell/headless.h"
#include "shell/main_view.h"

using namespace headscope;

namespace {

// What GLFW's callbacks report, for the loop to act on between frames.
struct WindowEvents {
    std::string dropped;                 // a file or folder dropped on the window
    std::optional<float> content_scale;  // the window moved to a monitor of another scale
};

// DejaVu Sans with every script it has (Latin, Greek, Cyrillic, Armenian,
// Hebrew, Arabic, Georgian, symbols), sized for the content scale.
void load_fonts_and_style(const std::filesystem::path& font, float scale) {
    static const ImWchar ranges[] = {0x0020, 0x2FFF, 0xFB00, 0xFFFD, 0};
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    io.Fonts->AddFontFromFileTTF(font.c_str(), 15.f * scale, nullptr, ranges);
    ImGui::GetStyle() = ImGuiStyle();
    ImGui::StyleColorsDark();
    ImGui::GetStyle().ScaleAllSizes(scale);
}

// What the window remembers is saved or, failing that, warned about: the
// session goes on.
void save_or_warn(const std::function<void()>& save) {
    try {
        save();
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: warning: %s\n", e.what());
    }
}

// ImGui's window positions, imgui.ini beside the settings: written here
// rather than by ImGui, so that it too is whole or not at all.
void save_imgui_ini(const std::filesystem::path& path) {
    ImGui::GetIO().WantSaveIniSettings = false;
    size_t size = 0;
    const char* text = ImGui::SaveIniSettingsToMemory(&size);
    write_file_atomically(path, "the window layout",
                          [&](std::ostream& out) { out.write(text, static_cast<std::streamsize>(size)); });
}

// Whether a window's title bar at `position` would be on some monitor, so
// that a position saved with a monitor since unplugged is not used.
bool on_a_monitor(std::array<int, 2> position) {
    int count = 0;
    GLFWmonitor** monitors = glfwGetMonitors(&count);
    for (int m = 0; m < count; ++m) {
        int x, y, width, height;
        glfwGetMonitorWorkarea(monitors[m], &x, &y, &width, &height);
        if (position[0] + 64 > x && position[0] < x + width && position[1] >= y && position[1] + 32 < y + height)
            return true;
    }
    return false;
}

// GLFW's own words for its last error, or `otherwise`.
std::string glfw_error(const char* otherwise) {
    const char* description = nullptr;
    glfwGetError(&description);
    return description ? description : otherwise;
}

// The window where it was (or as --window-size says). Screenshots are
// 1280 x 800 unless sized, the same on every machine; a first start takes
// most of the primary monitor's work area, centred.
GLFWwindow* create_window(const Settings& start, bool headless, WindowEvents& events) {
    if (!glfwInit()) throw Error("cannot open a window: " + glfw_error("GLFW could not initialise (no display?)"));
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);  // shown once placed
    WindowPlacement place = start.window;
    if (place.width == 0 && headless) {
        place.width = 1280;
        place.height = 800;
    } else if (place.width == 0) {
        int x, y, width, height;
        glfwGetMonitorWorkarea(glfwGetPrimaryMonitor(), &x, &y, &width, &height);
        place.width = std::max(640, width * 9 / 10);
        place.height = std::max(480, height * 9 / 10);
        place.position = std::array{x + (width - place.width) / 2, y + (height - place.height) / 2};
    }
    GLFWwindow* window = glfwCreateWindow(place.width, place.height, "Headscope", nullptr, nullptr);
    if (!window) {
        const std::string why = glfw_error("no reason given");  // before glfwTerminate clears it
        glfwTerminate();
        throw Error("cannot open an OpenGL 3.3 window: " + why);
    }
    if (place.position && on_a_monitor(*place.position))
        glfwSetWindowPos(window, (*place.position)[0], (*place.position)[1]);
    if (place.maximized && !headless) glfwMaximizeWindow(window);
    glfwShowWindow(window);
    glfwMakeContextCurrent(window);
    glfwSwapInterval(headless ? 0 : 1);
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
    return window;
}

// Where the window is now. Maximised, its size is the screen's: the size it
// had before stays the one to restore.
WindowPlacement placement(GLFWwindow* window, const Settings& start) {
    WindowPlacement place;
    place.maximized = glfwGetWindowAttrib(window, GLFW_MAXIMIZED);
    if (place.maximized && start.window.width > 0) {
        place.width = start.window.width;
        place.height = start.window.height;
    } else {
        glfwGetWindowSize(window, &place.width, &place.height);
    }
    int x, y;
    glfwGetWindowPos(window, &x, &y);
    place.position = std::array{x, y};
    return place;
}

// Whether ImGui hid a window this frame to measure it (a popup's or a
// tooltip's first frame): it shows it only in a frame to come.
bool windows_appearing() {
    for (const ImGuiWindow* window : GImGui->Windows)
        if (window->Active && (window->HiddenFramesCannotSkipItems > 0 || window->HiddenFramesCanSkipItems > 0))
            return true;
    return false;
}

// Sleeps until the next frame is due: at once in screenshot mode; 30 times a
// second while work runs (its progress bar, a generation's steps); otherwise
// until input or a worker's wake, then `settle` frames more, as ImGui settles
// hover, popups and layout. An idle window draws nothing.
void wait_for_frame(Headless& headless, MainView& view, int& settle) {
    if (headless.on()) {
        headless.before_frame(view);
        glfwPollEvents();
    } else if (view.computing()) {
        glfwWaitEventsTimeout(1.0 / 30);
        settle = 2;
    } else if (settle > 0) {
        --settle;
        glfwPollEvents();
    } else {
        const double longest = headless.longest_sleep();
        if (longest < 0)
            glfwWaitEvents();
        else
            glfwWaitEventsTimeout(longest);
        settle = 2;
    }
}

int run(const Args& args, Settings start, bool use_settings, bool model_given) {
    LoadedModel loaded = load_start_model(start, model_given, args.backend);
    check_start_choices(args, start, *loaded.model);
    // Opened here only to fail with one line naming it: ImGui would assert.
    const std::filesystem::path font = data_dir() / "fonts" / "DejaVuSans.ttf";
    OpenFile{font, "the window's font"};
    Headless headless(args);
    WindowEvents events;
    GLFWwindow* window = create_window(start, headless.on(), events);
    float scale = 1;
    glfwGetWindowContentScale(window, &scale, nullptr);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    const std::filesystem::path ini_path = config_dir() / "imgui.ini";
    ImGui::GetIO().IniFilename = nullptr;               // save_imgui_ini writes it
    ImGui::GetIO().ConfigInputTextCursorBlink = false;  // a blink would need frames while idle
    if (use_settings) {
        std::error_code ec;
        std::filesystem::create_directories(config_dir(), ec);
        ImGui::LoadIniSettingsFromDisk(ini_path.c_str());
    }
    load_fonts_and_style(font, scale);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    {
        // A worker with something new for the frame wakes the loop: no frame waits for it.
        MainView view(args, start, std::move(loaded), scale, [] { glfwPostEmptyEvent(); });
        int settle = 2;
        while (!glfwWindowShouldClose(window)) {
            wait_for_frame(headless, view, settle);
            if (!events.dropped.empty()) view.open_dropped(std::exchange(events.dropped, std::string()));
            if (events.content_scale) {
                load_fonts_and_style(font, *events.content_scale);
                ImGui_ImplOpenGL3_DestroyFontsTexture();
                ImGui_ImplOpenGL3_CreateFontsTexture();
                view.set_scale(*std::exchange(events.content_scale, std::nullopt));
            }
            headless.frame_started();
            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            ImGui::NewFrame();
            view.draw();
            ImGui::Render();
            int width, height;
            glfwGetFramebufferSize(window, &width, &height);
            glViewport(0, 0, width, height);
            glClearColor(0.1f, 0.1f, 0.12f, 1);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
            view.status_bar().save_png_if_asked(width, height);
            if (headless.frame_rendered(view, width, height)) break;
            if (view.take_frame_wanted() || windows_appearing()) settle = std::max(settle, 1);
            glfwSwapBuffers(window);
            if (use_settings && ImGui::GetIO().WantSaveIniSettings) save_or_warn([&] { save_imgui_ini(ini_path); });
        }
        // Closed at once, though the model's background work (its head scores)
        // may keep the process a few seconds more.
        const WindowPlacement closed_at = placement(window, start);
        glfwHideWindow(window);
        headless.finish(view);
        if (use_settings) {
            save_or_warn([&] { write_settings(config_dir() / "settings.json", view.settings(closed_at)); });
            save_or_warn([&] { save_imgui_ini(ini_path); });
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
    CLI::App cli{"Headscope: every attention head of a transformer, live", "headscope"};
    Args args;
    add_window_options(cli, args);
    cli.set_version_flag("--version", version_line("headscope"));
    try {
        cli.parse(argc, argv);
        finish_args(cli, args);
        return run(args, start_settings(args, cli, args.settings), args.settings, cli.count("--model") > 0);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return cli.exit(e);
        std::fprintf(stderr, "headscope: error: %s\n", one_line(e.what()).c_str());  // CLI11 quotes the arguments
        return 2;
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: error: %s\n", e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "headscope: error: out of memory\n");
        return 2;
    } catch (const std::exception& e) {  // the last resort: one line, never a core dump
        std::fprintf(stderr, "headscope: error: %s\n", one_line(e.what()).c_str());
        return 2;
    }
}
