// The real window driven as a person drives it, for test_window_e2e's files:
// an Xvfb screen of its own, the window started on it and driven with
// xdotool's clicks and keys, and the screen read back through Xlib.
#pragma once
#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"
#include "screenshot.h"
#include "virtual_screen.h"

namespace headscope::test {

// The centre of each control a layout names, as xdotool's x and y.
using Centres = std::map<std::string, std::vector<std::string>>;
Centres control_centres(const nlohmann::json& layout);

// The window, started on a virtual screen for xdotool to drive; unless
// `placed_by_settings`, the size of the screenshot runs whose layouts say
// where its controls are.
class DrivenWindow {
public:
    DrivenWindow(const std::string& display, std::vector<std::string> args, const std::filesystem::path& scratch,
                 bool placed_by_settings = false);

    ProcessRun xdotool(std::vector<std::string> args) const;
    // The window's x, y, width and height on the screen.
    std::array<int, 4> geometry() const;
    void click(const std::vector<std::string>& at) const;
    // The compute and the head scores run in the background: the screen once
    // it has not changed for a second, two grabs in a row, while the window
    // used no CPU and none of its threads was runnable (at most 20 s). An
    // unchanged screen alone is not enough on a loaded machine, where the
    // worker can still be computing a map that the window has not drawn yet,
    // nor is CPU time, which a window waiting for a core does not use; an
    // idle window sleeps.
    Image settled_screen() const;
    // Ctrl+Q, which writes the layout of the last frame; the exit status, or
    // -1 when the window is still open 20 s later (it is then killed).
    int quit();

private:
    std::string display_;
    ScopedEnv env_;
    std::filesystem::path scratch_;
    std::unique_ptr<Child> window_;
};

}  // namespace headscope::test
