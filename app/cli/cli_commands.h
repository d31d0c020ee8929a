// headscope-cli's commands, each from the options as cli.cpp parsed them:
// what it computes and prints. Each command that computes opens its model
// through core's load_with_backend (as the window's session does) and
// reports the device that computed, and why; tokenize only loads the model.
// Bad input throws Error, which main turns into one line and exit 2.
#pragma once
#include "cli/cli_options.h"

namespace headscope {

void run_info(const CliOptions& opt);
void run_tokenize(const CliOptions& opt);
void run_attention(const CliOptions& opt);
void run_generate(const CliOptions& opt);
void run_heads(const CliOptions& opt);
void run_dance(const CliOptions& opt);

}  // namespace headscope
