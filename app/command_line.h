// The window's command line: its options, and what the window starts with
// (the saved settings with every option given in their place, the model).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "session.h"
#include "settings.h"

namespace headscope {

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

void add_window_options(CLI::App& cli, Args& args);

// Whether settings are read at start and saved on exit.
bool use_settings(const Args& args);

// The saved settings (when `use_saved`) with every option given on the command line in their place.
Settings start_settings(const Args& args, const CLI::App& cli, bool use_saved);

// A bad --model is fatal; a saved model that no longer loads gives way to the built-in one.
LoadedModel load_start_model(const Settings& start, bool model_given, BackendChoice backend);

}  // namespace headscope
