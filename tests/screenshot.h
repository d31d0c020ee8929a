// Test support for the window's screenshots: PNG pixels, an independently
// written viridis, a run of `headscope` under Xvfb, and the layout it
// records (--layout) with every grid expanded into its cells.
#pragma once
#include <array>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
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
// HSV (each 0..1) to RGB in 0..255, the textbook six-sector formula: the dance's owner colours.
std::array<double, 3> hsv_to_rgb(double h, double s, double v);
// The router tab's colour of a route's first expert at its weight
// (app/views/router_view.h's formula, written again): expert e's hue
// e * 0.618034 wrapped, saturation 0.65, value 0.3 + 0.7 w; and a dense layer's.
std::array<double, 3> expert_rgb(int expert, double weight);
inline constexpr std::array<double, 3> dense_layer_rgb = {62, 62, 68};

// Runs headscope on an Xvfb screen of its own, 1920x1080, with these arguments
// (which should include --screenshot), capturing its output as run_program does.
// `under`: a command that runs the window (and not the X server), e.g. prlimit.
// `window`: the program, the build's unless an installed one is tested.
ProcessRun run_window(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                      const std::vector<std::string>& under = {},
                      const std::filesystem::path& window = HEADSCOPE_WINDOW);

// The window's --layout file as a list of entries, each grid expanded into
// one entry per cell, with the rectangle x, y, w, h: a map's or mask's cell
// carries its row and column (query, key); a dance grid's, one entry per
// float it holds, its position in the order drawn and its index in storage.
nlohmann::json read_layout(const std::filesystem::path& path);

// The entries of `layout` (read_layout's) of view `view`, in the order drawn.
nlohmann::json entries(const nlohmann::json& layout, const std::string& view);
// The pixel at the centre of an entry's rectangle.
std::array<int, 3> centre(const Image& image, const nlohmann::json& entry);
// Whether a pixel is within `tolerance` of a colour in every channel.
bool near(const std::array<int, 3>& got, const std::array<double, 3>& want, double tolerance = 2.0);

// Empty when a label `shown` for `text` is the whole text or a prefix of it
// cut between characters and ended with an ellipsis; else what is wrong.
std::string label_fault(const std::string& shown, const std::string& text);

// One screenshot run: `args` plus --screenshot DIR/NAME.png --layout DIR/NAME.json.
struct WindowShot {
    ProcessRun run;
    Image image;
    nlohmann::json layout;  // read_layout's; empty when the window wrote none
};
WindowShot shoot_window(std::vector<std::string> args, const std::filesystem::path& dir, const std::string& name,
                        const std::filesystem::path& window = HEADSCOPE_WINDOW);
// One run shooting several tabs: `args` plus --screenshot-views `asked` (V,V,... or all) and the PNG and
// layout as shoot_window names them. Each tab's shot by its word, among `shown` (a tab the run wrote no PNG of
// has an empty image); every shot has the one run. `written`: how many PNGs the run wrote in all.
std::map<std::string, WindowShot> shoot_views(std::vector<std::string> args, const std::string& asked,
                                              const std::vector<std::string>& shown, const std::filesystem::path& dir,
                                              const std::string& name, size_t* written = nullptr);

// Every heatmap cell of `cells` (read_layout's entries of one view) checked
// at its centre in `image`: the colormap (viridis) of the weight in `cli`
// (headscope-cli attention's JSON for the same text and settings, its maps
// under `key`: an encoder–decoder's "cross_attention", ...), or, where
// `causal` hides the key, the mask's hatch. Returns how many were masked.
int check_heatmap_cells(const Image& image, const nlohmann::json& cells, const nlohmann::json& cli, bool causal,
                        const std::string& key = "attention");

// The long view's overview (`layout`'s "overview" entries, one cell a head):
// each cell's centre the colour of its head's mean entropy, `entropy`
// (layers x heads), between the smallest and the largest, which the cells
// carry too.
void check_overview_cells(const Image& image, const nlohmann::json& layout, const std::vector<double>& entropy,
                          int heads);

}  // namespace headscope::test
