// Test support for the window's screenshots: PNG pixels, an independently
// written viridis, and a run of `headscope` under Xvfb.
#pragma once
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "process.h"

namespace headscope::test {

struct Image {
    int width = 0, height = 0;
    std::vector<unsigned char> rgba;
    std::array<int, 3> at(int x, int y) const;
};

Image load_png(const std::filesystem::path& path);  // empty when it cannot be read

// matplotlib's viridis at 9 even stops, interpolated linearly, in 0..255.
std::array<double, 3> viridis(double t);

// Runs headscope under xvfb-run on a 1280x800 screen with these arguments
// (which should include --screenshot), capturing its output as run_program does.
ProcessRun run_window(const std::vector<std::string>& args, const std::filesystem::path& scratch);

}  // namespace headscope::test
