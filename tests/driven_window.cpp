// The window driven on a screen of its own: see driven_window.h.
#include "driven_window.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace headscope::test {

using nlohmann::json;

Centres control_centres(const json& layout) {
    Centres centres;
    for (const json& cell : layout) {
        if (cell["view"] != "control") continue;
        const std::string name = cell.contains("text")
                                     ? cell["name"].get<std::string>() + ":" + cell["text"].get<std::string>()
                                     : cell["name"].get<std::string>();
        centres[name] = {std::to_string(static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2)),
                         std::to_string(static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2))};
    }
    return centres;
}

DrivenWindow::DrivenWindow(const std::string& display, std::vector<std::string> args,
                           const std::filesystem::path& scratch, bool placed_by_settings)
    : display_(display), env_("DISPLAY", display), scratch_(scratch) {
    if (!placed_by_settings) args.insert(args.begin(), {"--window-size", "1280x800"});
    args.insert(args.begin(), HEADSCOPE_WINDOW);
    window_ = std::make_unique<Child>(args);
    // Under a heavy load xdotool has once failed to open a display whose
    // server was up: a second and third try before calling it missing.
    ProcessRun found{-1, "", ""};
    for (int tries = 0; tries < 3; ++tries) {
        found = xdotool({"search", "--sync", "--onlyvisible", "--name", "^Headscope$"});
        if (found.status == 0 || found.err.find("Can't open display") == std::string::npos) break;
        pause_ms(1000);
    }
    EXPECT_EQ(found.status, 0) << "no window: " << found.err;
}

ProcessRun DrivenWindow::xdotool(std::vector<std::string> args) const {
    args.insert(args.begin(), {"timeout", "20", "xdotool"});
    return run_program(args, scratch_);
}

std::array<int, 4> DrivenWindow::geometry() const {
    const ProcessRun run = xdotool({"search", "--name", "^Headscope$", "getwindowgeometry", "--shell"});
    EXPECT_EQ(run.status, 0) << run.err;
    std::map<std::string, int> values;
    std::istringstream lines(run.out);
    for (std::string line; std::getline(lines, line);)
        if (const size_t eq = line.find('='); eq != std::string::npos)
            values[line.substr(0, eq)] = std::atoi(line.c_str() + eq + 1);
    return {values["X"], values["Y"], values["WIDTH"], values["HEIGHT"]};
}

void DrivenWindow::click(const std::vector<std::string>& at) const {
    EXPECT_EQ(xdotool({"mousemove", at.at(0), at.at(1), "click", "1"}).status, 0);
    pause_ms(300);
}

// The CPU clock ticks a process has used (its threads' user and system
// time, /proc/PID/stat's 14th and 15th fields); -1 when it cannot be read.
static long cpu_ticks(int pid) {
    std::string stat;
    std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/stat"), stat);
    const size_t name_end = stat.rfind(')');  // the command's name may hold spaces
    if (name_end == std::string::npos) return -1;
    std::istringstream fields(stat.substr(name_end + 2));
    std::string field;
    for (int i = 3; i < 14; ++i) fields >> field;  // state (3) to cmajflt (13)
    long user = 0, system = 0;
    return fields >> user >> system ? user + system : -1;
}

// Whether any thread of the process is running or waiting for a core
// (state R in /proc/PID/task/TID/stat): a window that has input to handle
// but no core yet uses no CPU time either, on a loaded machine.
static bool has_runnable_thread(int pid) {
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
        std::string stat;
        std::getline(std::ifstream(task.path() / "stat"), stat);
        const size_t name_end = stat.rfind(')');
        if (name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'R') return true;
    }
    return false;
}

Image DrivenWindow::settled_screen() const {
    Image shot = grab_screen(display_);
    long ticks = cpu_ticks(window_->pid());
    for (int tries = 0, unchanged = 0; tries < 40 && unchanged < 2; ++tries) {
        pause_ms(500);
        Image next = grab_screen(display_);
        const long now = cpu_ticks(window_->pid());
        // A frame's swap or a cursor blink, not a forward; and nothing waiting for a core.
        const bool idle = now - ticks <= 2 && !has_runnable_thread(window_->pid());
        unchanged = next.rgba == shot.rgba && idle ? unchanged + 1 : 0;
        shot = std::move(next);
        ticks = now;
    }
    return shot;
}

int DrivenWindow::quit() {
    EXPECT_EQ(xdotool({"key", "ctrl+q"}).status, 0);
    for (int tries = 0; tries < 200 && !window_->ended(); ++tries) pause_ms(100);
    return window_->ended() ? window_->wait() : -1;
}

}  // namespace headscope::test
