// What the window remembers between runs: settings.json in the config
// directory ($XDG_CONFIG_HOME/headscope, else ~/.config/headscope), beside
// ImGui's imgui.ini. A file that cannot be read as settings is ignored with
// a one-line warning, never fatal.
#pragma once
#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/compute/head_effects.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"
#include "state/colormap.h"

namespace headscope {

// Where the window was, in screen coordinates: its size (0 x 0 until a run
// has saved one: a first start takes most of the screen), its top-left
// corner when known, and whether it was maximised.
struct WindowPlacement {
    int width = 0, height = 0;
    std::optional<std::array<int, 2>> position;
    bool maximized = false;
};

struct Settings {
    std::string model = builtin_model;  // as load_model takes it
    std::vector<std::string> texts;     // empty: the window's default sentence
    Colormap colormap = Colormap::viridis;
    AttentionOptions options;                            // masks, head count, scale and split
    bool sliding_window = true;                          // the model's own sliding window, when it has one
    EffectsOf effects_of = EffectsOf::heads;             // the effects grid's switch, on a mixture of experts
    bool effects_all_exact = false;                      // the effects grid's toggle: every cell exact, not hybrid
    std::string export_dir = ".";                        // where Save PNG/JSON/NPY write
    std::string compare_text;                            // the "compare with" text; "": none
    std::string compare_target;                          // an encoder–decoder's compare text's target
    std::string compare_pair;                            // an encoder's compare text's pair's second text
    bool diff = false;                                   // the maps drawn as B - A
    PatchMetric patch_metric = PatchMetric::logit_diff;  // the patching tab's
    PatchDirection patch_direction = PatchDirection::denoise;
    PatchStack patch_stack = PatchStack::decoder;  // an encoder–decoder's patching grids shown
    WindowPlacement window;
};

std::filesystem::path config_dir();

// The settings in `file`; the defaults when it is missing, or, with a
// warning on stderr, when it is not valid settings.
Settings read_settings(const std::filesystem::path& file);

// Creates the directory if needed; writes the file whole or not at all
// (write_file_atomically). Throws Error naming the file.
void write_settings(const std::filesystem::path& file, const Settings& settings);

Colormap parse_colormap(const std::string& word);  // throws Error naming the word

}  // namespace headscope
