// headscope-cli's commands, each from the options as cli.cpp parsed them:
// what it computes and prints. Each command that computes opens its model
// through core's load_with_backend (as the window's session does) and
// reports the device that computed, and why; tokenize only loads the model.
// Bad input throws Error, which main turns into one line and exit 2.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "cli/cli_options.h"

namespace headscope {

// What the commands share (cli_commands.cpp): the model, opened on the
// backend --backend picks, its load's progress on the terminal; the output
// written to stdout, or, given a path, to that file whole or not at all; the
// forward's options completed for the model (its own mask, scale and
// window unless given), checked so that an error names the flag.
LoadedModel open_on_backend(const CliOptions& opt);
void write_output(const std::string& path, const std::function<void(std::ostream&)>& write);
AttentionOptions with_model(AttentionOptions options, const CliOptions& opt, const Model& model);
// info and heads: --format table or json; by default a table when the
// output is a terminal (stdout, no --out), else JSON.
bool as_table(const CliOptions& opt);

void run_info(const CliOptions& opt);
void run_tokenize(const CliOptions& opt);
void run_attention(const CliOptions& opt);
void run_generate(const CliOptions& opt);
void run_heads(const CliOptions& opt);  // cli_heads.cpp
void run_dance(const CliOptions& opt);
void run_patch(const CliOptions& opt);  // cli_patch.cpp

using Json = nlohmann::ordered_json;
// attention --effects (cli_effects.cpp): the effects grid of `batch`'s one
// text under `options` by `method`, with its progress on the terminal.
Json effects_json(Backend& backend, const Batch& batch, const AttentionOptions& options, EffectsMethod method);

}  // namespace headscope
