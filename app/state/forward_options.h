// The options of a forward, one table that both programs read: the window's
// command line (shell/command_line.cpp) and headscope-cli's commands that
// compute (cli/cli.cpp), so that a flag says and does the same in both.
#pragma once
#include <string>
#include <vector>

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

// The words of --ablate (LAYER.HEAD,...) and of each --ablate-expert (LAYER.EXPERT,...), as given.
struct AblationWords {
    std::string heads;
    std::vector<std::string> experts;
};

// Adds --ablate, --ablate-mode and --ablate-expert.
void add_ablation_options(CLI::App* app, AblationWords& words, Ablation& mode);

// The heads and experts `words` knock out, into `options`; throws Error naming the flag of a bad word.
void parse_ablation_words(const AblationWords& words, AttentionOptions& options);

// What --backend says where it picks the backend that computes.
inline constexpr const char* backend_help = "auto: CUDA when built with it and a device exists";

// Adds --backend, which `help` explains.
void add_backend_option(CLI::App* app, BackendChoice& backend, const std::string& help = backend_help);

}  // namespace headscope
