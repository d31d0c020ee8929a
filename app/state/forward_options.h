// The options of a forward, one table that both programs read: the window's
// command line (shell/command_line.cpp) and headscope-cli's commands that
// compute (cli/cli.cpp), so that a flag says and does the same in both.
#pragma once
#include <string>

#include "headscope/compute/attention.h"
#include "headscope/compute/backend.h"

namespace CLI {
class App;  // CLI11's, declared here so that only the files that parse include CLI11
}  // namespace CLI

namespace headscope {

// Where a program keeps what the options set.
struct ForwardOptionTargets {
    AttentionOptions& attention;  // --causal, --padding-mask, --scale, --split
    bool& sliding_window;         // --sliding-window
    int& heads;                   // --heads; 0: the model's own
    BackendChoice& backend;       // --backend
};

// Adds --causal, --padding-mask, --sliding-window, --heads, --scale, --split and --backend to `app`.
void add_forward_options(CLI::App* app, const ForwardOptionTargets& to);

// Adds --ablate (LAYER.HEAD,..., as the program parses it) and --ablate-mode.
void add_ablation_options(CLI::App* app, std::string& ablate, Ablation& mode);

// What --backend says where it picks the backend that computes.
inline constexpr const char* backend_help = "auto: CUDA when built with it and a device exists";

// Adds --backend, which `help` explains.
void add_backend_option(CLI::App* app, BackendChoice& backend, const std::string& help = backend_help);

}  // namespace headscope
