// The window's command line: see command_line.h.
#include "command_line.h"

#include <cstdio>

#include "examples.h"
#include "headscope/error.h"

namespace headscope {

void add_window_options(CLI::App& cli, Args& args) {
    cli.add_option("--model", args.model, "builtin (the default), a model directory, or a Hugging Face hub name");
    cli.add_option("--text", args.texts, "the text to open with");
    cli.add_option("--example", args.example, "open with this example's texts (its title in assets/examples.json)");
    cli.add_option("--view", args.view, "heads|model|mask|dance|checks: the tab to open on");
    cli.add_option("--layer", args.layer, "the layer shown");
    cli.add_option("--head", args.head, "open this head of the layer large");
    cli.add_option("--dance-step", args.dance_step, "the reshape dance's step shown (1..8)");
    cli.add_option("--causal", args.causal, "on|off");
    cli.add_option("--padding-mask", args.padding_mask, "on|off");
    cli.add_option("--heads", args.heads, "re-split into N heads");
    cli.add_option("--screenshot", args.screenshot, "render --frames frames, write this PNG and exit");
    cli.add_option("--layout", args.layout, "on exit, write the last frame's drawn cells' rectangles as JSON");
    cli.add_option("--frames", args.frames, "frames to render before the screenshot");
    cli.add_flag("--frame-times", args.frame_times, "screenshot mode: recompute every 10th frame and print the frames' times (the benchmark)");
    cli.add_option("--scale", args.scale, "head|model|none: 1/sqrt(C/N), 1/sqrt(C), 1");
    cli.add_option("--split", args.split, "transpose|naive-view");
    cli.add_option("--colormap", args.colormap, "viridis|magma|grey");
    cli.add_option("--backend", args.backend, "auto|cpu|cuda (auto: CUDA when built with it and a device exists)");
    cli.add_option("--open-model", args.open_model, "screenshot mode: open this model after --frames frames, as the picker does");
    cli.add_option("--export-json", args.export_json, "screenshot mode: also save the attention as the CLI's JSON");
    cli.add_option("--export-npy", args.export_npy, "screenshot mode: also save the attention as the CLI's .npy");
    cli.add_option("--settings", args.settings,
                   "on|off: read and save settings in $XDG_CONFIG_HOME/headscope (default on; off with --screenshot or --layout)");
}

bool use_settings(const Args& args) {
    const bool driven_by_test = !args.screenshot.empty() || !args.layout.empty();
    return parse_on_off("--settings", !args.settings.empty() ? args.settings : driven_by_test ? "off" : "on");
}

Settings start_settings(const Args& args, const CLI::App& cli, bool use_saved) {
    Settings s = use_saved ? read_settings(config_dir() / "settings.json") : Settings{};
    if (cli.count("--model")) s.model = args.model;
    if (cli.count("--text") && cli.count("--example")) throw Error("--text and --example both give the texts: pass one");
    if (cli.count("--text")) s.texts = args.texts;
    if (cli.count("--example")) s.texts = find_example(read_examples(examples_file()), args.example).texts;
    if (cli.count("--causal")) s.options.causal = parse_on_off("--causal", args.causal);
    if (cli.count("--padding-mask")) s.options.padding_mask = parse_on_off("--padding-mask", args.padding_mask);
    if (cli.count("--heads")) s.options.n_head = args.heads;
    if (cli.count("--scale")) s.options.scale = parse_scale(args.scale);
    if (cli.count("--split")) s.options.split = parse_split(args.split);
    if (cli.count("--colormap")) s.colormap = parse_colormap(args.colormap);
    return s;
}

LoadedModel load_start_model(const Settings& start, bool model_given, BackendChoice backend) {
    if (model_given || start.model == builtin_model) return load_with_backend(start.model, backend);
    try {
        return load_with_backend(start.model, backend);
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: warning: cannot reopen the last model, opening the built-in one: %s\n", e.what());
        return load_with_backend(builtin_model, backend);
    }
}

}  // namespace headscope
