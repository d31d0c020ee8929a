// The window's command line: see command_line.h.
#include "shell/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>

#include "cli/terminal_progress.h"
#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/text_batch.h"
#include "headscope/io/files.h"
#include "state/examples.h"
#include "state/forward_options.h"
#include "state/text_options.h"
#include "state/word_option.h"
#include "views/svg_figure.h"

namespace headscope {

void add_window_options(CLI::App& cli, Args& args) {
    cli.add_option("--model", args.model,
                   "builtin (the default), a model directory, a GGUF file, a Hugging Face hub name, or an Ollama, LM "
                   "Studio or llama.cpp name (docs/cli.md)");
    add_text_option(&cli, "--text", args.texts, "the text to open with");
    add_text_option(&cli, "--text-file", args.text_files,
                    "a file whose text to open with (UTF-8), after any --text; repeat for more");
    add_text_option(&cli, "--text-pair", args.text_pairs, "an encoder's second text of a pair, one for each --text");
    add_text_option(&cli, "--target", args.targets,
                    "an encoder-decoder's target (the decoder's input after its start token), one for each --text");
    add_word_option(
        &cli, "--attention", args.attention_kind, join_words(attention_kind_choices, "|"),
        [](std::string_view word) { return parse_choice(attention_kind_choices, word); },
        "an encoder-decoder's maps shown: the decoder's or the encoder's self-attention, or the cross-attention "
        "(the default)");
    cli.add_option("--example", args.example, "open with this example's texts (its title in assets/examples.json)");
    add_word_option(
        &cli, "--view", args.view, join_words(view_choices, "|"),
        [](std::string_view word) { return parse_choice(view_choices, word); }, "the tab to open on");
    cli.add_option("--layer", args.layer, "the layer shown");
    cli.add_option("--head", args.head, "open this head of the layer large");
    cli.add_option("--rows", args.rows,
                   "a long text: the selected head's map shown from query FIRST to END-1 (FIRST:END)");
    cli.add_option("--cols", args.cols, "a long text: and from key FIRST to END-1 (FIRST:END; default: as --rows)");
    cli.add_option("--dance-step", args.dance_step, "the reshape dance's step shown (from 1)");
    cli.add_option("--query", args.query, "the query row whose predictions the panel shows (default: the last token)");
    add_forward_options(&cli, {args.options, args.sliding_window, args.options.n_head, args.backend});
    add_ablation_options(&cli, args.ablation, args.options.ablation);
    cli.add_flag("--hide-first-key", args.hide_first_key,
                 "draw the maps without key 0 (the sink), each row renormalised over the other keys");
    cli.add_flag("--value-weighted", args.value_weighted,
                 "shade the maps by weight x |value W_O|, each row scaled to 1");
    add_word_option(
        &cli, "--sentences", args.sentences, join_words(sentences_choices, "|"),
        [](std::string_view word) { return parse_choice(sentences_choices, word); },
        "of a sentence pair, the maps' queries of one text and keys of one (a-b: A's queries, B's keys)");
    cli.add_flag("--compute-effects", args.compute_effects,
                 "compute the effects grid (every head knocked out in turn) at the start");
    add_word_option(
        &cli, "--effects-of", args.effects_of, join_words(effects_of_choices, "|"),
        [](std::string_view word) { return parse_choice(effects_of_choices, word); },
        "what the effects grid knocks out in turn: each head or each expert of a mixture of experts (default: the "
        "saved choice, else heads)");
    cli.add_flag("--effects-exact", args.effects_all_exact,
                 "compute every cell of the effects grid exactly (default: the saved choice, else the estimate, "
                 "then the 16 largest and 8 others exact)");
    cli.add_option("--compare", args.compare_text,
                   "a second text (B), compared with the text (A): predictions, diff view, patching (an "
                   "encoder-decoder's second source)");
    cli.add_option("--compare-target", args.compare_target,
                   "an encoder-decoder's target of the --compare text, compared with the text's --target");
    cli.add_option("--compare-pair", args.compare_pair,
                   "an encoder's second text of a pair for the --compare text, compared with the text's --text-pair");
    cli.add_flag("--diff", args.diff, "draw every map as B - A (the --compare text's less the text's)");
    cli.add_flag("--compute-patching", args.compute_patching,
                 "patch the text (clean) and the --compare text (corrupted) at the start, as the patching tab does");
    add_word_option(
        &cli, "--patch-method", args.patch_method, join_words(patch_method_choices, "|"),
        [](std::string_view word) { return parse_choice(patch_method_choices, word); },
        "the patching tab's method: exact (the default), attribution (the estimate) or both side by side");
    add_word_option(
        &cli, "--patch-stack", args.patch_stack, "encoder|decoder|cross", parse_shown_patch_stack,
        "an encoder-decoder's patching grids shown: its encoder's, its decoder's or its cross-attention's (default: "
        "the saved choice, else the decoder's)");
    cli.add_option("--window-size", args.window_size,
                   "the window's size (screenshots: default 1280x800; otherwise the saved size, or most of the "
                   "screen at a first start)")
        ->type_name("WxH")
        ->check(CLI::Validator(
            [](const std::string& text) {
                try {
                    parse_window_size(text);
                    return std::string();
                } catch (const Error& e) {
                    return std::string(e.what());
                }
            },
            ""));
    cli.add_option("--screenshot", args.screenshot, "render --frames frames, write this PNG and exit");
    cli.add_option("--layout", args.layout, "on exit, write the last frame's drawn cells' rectangles as JSON");
    cli.add_option("--frames", args.frames, "frames to render before the screenshot");
    cli.add_option("--screenshot-views", args.screenshot_views_words,
                   "screenshot mode: shoot these tabs in turn, --frames frames each, each into the screenshot's name "
                   "with -VIEW (shot-lens.png) and the --layout file's likewise (all: every tab the model has)")
        ->type_name("V,V,...|all");
    cli.add_option("--count-idle-frames", args.idle_seconds,
                   "once every worker has settled, count the frames drawn without input over this many seconds, "
                   "print them and the CPU time, and exit (the idle test)");
    cli.add_flag("--frame-times", args.frame_times,
                 "screenshot mode: recompute every 10th frame and print the frames' times (the benchmark)");
    add_word_option(&cli, "--colormap", args.colormap, join_words(colormap_choices, "|"), parse_colormap,
                    "the maps' colours");
    cli.add_option("--open-model", args.open_model,
                   "screenshot mode: open this model after --frames frames, as the picker does");
    cli.add_option("--export-json", args.export_json, "screenshot mode: also save the attention as the CLI's JSON");
    cli.add_option("--export-npy", args.export_npy, "screenshot mode: also save the attention as the CLI's .npy");
    cli.add_option(
        "--export-svg", args.export_svg,
        "screenshot mode: also save the shown view as a vector figure (heads, tokens, model and logit-lens tabs)");
    add_word_option(
        &cli, "--settings", args.settings, "on|off",
        [](std::string_view word) { return parse_on_off("settings", word); },
        "read and save settings in $XDG_CONFIG_HOME/headscope (default on; off with --screenshot or --layout)");
}

std::array<int, 2> parse_window_size(std::string_view text) {
    const auto refuse = [&] {
        return Error("a window size is WIDTHxHEIGHT, each from 320 to 16384 (like 1920x1080): got '" +
                     std::string(text) + "'");
    };
    std::array<int, 2> size{};
    const size_t x = text.find('x');
    if (x == std::string_view::npos) throw refuse();
    const std::string_view parts[2] = {text.substr(0, x), text.substr(x + 1)};
    for (int n = 0; n < 2; ++n) {
        const auto [end, error] = std::from_chars(parts[n].data(), parts[n].data() + parts[n].size(), size[n]);
        if (error != std::errc() || end != parts[n].data() + parts[n].size() || size[n] < 320 || size[n] > 16384)
            throw refuse();
    }
    return size;
}

namespace {

// --screenshot-views' words as the tabs to shoot, the first of them opened on.
void read_screenshot_views(const CLI::App& cli, Args& args) {
    const std::string& words = args.screenshot_views_words;
    if (args.screenshot.empty()) throw Error("--screenshot-views needs --screenshot");
    if (cli.count("--view")) throw Error("--view and --screenshot-views both give the tab: pass one");
    if (!args.export_svg.empty())
        throw Error("--export-svg saves the figure of one tab: give it --view, not --screenshot-views");
    args.every_view = words == "all";
    for (size_t at = 0; !args.every_view && at <= words.size();) {
        const size_t end = std::min(words.find(',', at), words.size());
        View view{};
        try {
            view = parse_choice(view_choices, std::string_view(words).substr(at, end - at));
        } catch (const Error& e) {
            throw Error(std::string("--screenshot-views: ") + e.what());
        }
        if (std::find(args.screenshot_views.begin(), args.screenshot_views.end(), view) != args.screenshot_views.end())
            throw Error(std::string("--screenshot-views: ") + word_of(view_choices, view) + " twice");
        args.screenshot_views.push_back(view);
        at = end + 1;
    }
    for (size_t v = 0; args.every_view && v < std::size(view_choices.words); ++v)
        args.screenshot_views.push_back(static_cast<View>(v));
    args.view = args.screenshot_views.front();
}

}  // namespace

void finish_args(const CLI::App& cli, Args& args) {
    const bool driven_by_test = !args.screenshot.empty() || !args.layout.empty() || args.idle_seconds > 0;
    if (!cli.count("--settings")) args.settings = !driven_by_test;
    args.heads_given = cli.count("--heads") > 0;
    args.causal_given = cli.count("--causal") > 0;
    args.patch_stack_given = cli.count("--patch-stack") > 0;
    if (!args.cols.empty() && args.rows.empty()) throw Error("--cols needs --rows");
    if (!args.rows.empty()) {
        MapRegion& region = args.region;
        parse_range("--rows", args.rows, region.row_begin, region.row_end);
        parse_range("--cols", args.cols.empty() ? args.rows : args.cols, region.col_begin, region.col_end);
    }
    if (!args.screenshot_views_words.empty()) read_screenshot_views(cli, args);
    // The attention shown is checked again at the export, once the model is known.
    if (const char* refusal = svg_refusal(args.view, AttentionKind::decoder); refusal && !args.export_svg.empty())
        throw Error(std::string("--export-svg: ") + refusal);
}

Settings start_settings(const Args& args, const CLI::App& cli, bool use_saved) {
    Settings s = use_saved ? read_settings(config_dir() / "settings.json") : Settings{};
    if (cli.count("--model")) s.model = args.model;
    for (const std::string flag : {"--text", "--text-file"})
        if (cli.count(flag) && cli.count("--example"))
            throw Error(flag + " and --example both give the texts: pass one");
    if (cli.count("--text") || cli.count("--text-file")) s.texts = args.texts;
    for (const std::string& path : args.text_files) s.texts.push_back(read_file(path, "--text-file"));
    if (cli.count("--example")) s.texts = find_example(read_examples(examples_file()), args.example).texts;
    if (cli.count("--causal")) s.options.causal = args.options.causal;
    if (cli.count("--padding-mask")) s.options.padding_mask = args.options.padding_mask;
    if (cli.count("--sliding-window")) s.sliding_window = args.sliding_window;
    if (cli.count("--heads")) s.options.n_head = args.options.n_head;
    if (cli.count("--scale")) s.options.scale = args.options.scale;
    if (cli.count("--split")) s.options.split = args.options.split;
    if (cli.count("--ablate-mode")) s.options.ablation = args.options.ablation;
    parse_ablation_words(args.ablation, s.options);
    if (cli.count("--colormap")) s.colormap = args.colormap;
    if (cli.count("--effects-of")) s.effects_of = args.effects_of;
    if (cli.count("--effects-exact")) s.effects_all_exact = true;
    if (cli.count("--compare")) s.compare_text = args.compare_text;
    if (cli.count("--compare-target")) s.compare_target = args.compare_target;
    if (cli.count("--compare-pair")) s.compare_pair = args.compare_pair;
    if (cli.count("--diff")) s.diff = args.diff;
    if (cli.count("--patch-stack")) s.patch_stack = args.patch_stack;
    if (cli.count("--window-size")) {
        const std::array<int, 2> size = parse_window_size(args.window_size);
        s.window.width = size[0];
        s.window.height = size[1];
        s.window.maximized = false;
    }
    return s;
}

void check_start_choices(const Args& args, Settings& start, const Model& model) {
    const Config& config = model.config;
    if (start.options.n_head) {
        try {
            head_split(config, start.options.n_head);
        } catch (const Error& e) {
            if (args.heads_given) throw Error(std::string("--heads: ") + e.what());
            std::fprintf(stderr, "headscope: warning: ignoring the saved head count: %s\n", e.what());
            start.options.n_head = 0;
        }
    }
    // An encoder–decoder's encoder may have more or fewer layers than its decoder.
    const int layers = config.is_encoder_decoder() && args.attention_kind == AttentionKind::encoder
                           ? config.encoder_layers
                           : config.n_layer;
    if (args.layer < 0 || args.layer >= layers)
        throw Error("--layer " + std::to_string(args.layer) + " out of range (the model has layers 0.." +
                    std::to_string(layers - 1) + ")");
    const int heads = start.options.n_head ? start.options.n_head : config.n_head;
    if (args.head < -1 || args.head >= heads)
        throw Error("--head " + std::to_string(args.head) + " out of range (" + std::to_string(heads) +
                    " heads, 0 to " + std::to_string(heads - 1) + ")");
    check_text_options(model, std::max<size_t>(start.texts.size(), 1), args.text_pairs.size(), args.targets.size());
    try {
        check_ablation(config, start.options);
    } catch (const Error& e) {
        throw Error(std::string("--ablate: ") + e.what());
    }
    try {
        check_expert_ablation(config, start.options);
    } catch (const Error& e) {
        throw Error(std::string("--ablate-expert: ") + e.what());
    }
    const std::vector<View>& shot = args.screenshot_views;
    if (!config.has_experts() &&
        (args.view == View::router ||
         (!args.every_view && std::find(shot.begin(), shot.end(), View::router) != shot.end())))
        throw Error(std::string(shot.empty() ? "--view" : "--screenshot-views") +
                    " router: the model has no experts (its MLPs are dense)");
    if (args.effects_of == EffectsOf::experts && !config.has_experts())
        throw Error("--effects-of experts: the model has no experts (its MLPs are dense)");
    if (args.patch_stack_given && !config.is_encoder_decoder())
        throw Error("--patch-stack: the model is not an encoder-decoder (its patching grids are of its one stack)");
    if (args.query < -1) throw Error("--query " + std::to_string(args.query) + " is not a token's position");
    if (args.query >= 0) {
        // The tokens of the text the window shows: the first, with its pair or
        // as an encoder-decoder's target.
        const std::string first = start.texts.empty() ? default_text : start.texts[0];
        const BatchTexts shown{{first},
                               args.text_pairs.empty() ? std::vector<std::string>{} : std::vector{args.text_pairs[0]},
                               args.targets.empty() ? std::vector<std::string>{} : std::vector{args.targets[0]}};
        const int tokens = static_cast<int>(text_batch(model, shown).batch.token_ids[0].size());
        if (tokens == 0) throw Error("--query " + std::to_string(args.query) + ": the text has no tokens");
        if (args.query >= tokens)
            throw Error("--query " + std::to_string(args.query) + " out of range (the text's " +
                        std::to_string(tokens) + " tokens are at positions 0 to " + std::to_string(tokens - 1) + ")");
    }
}

LoadedModel load_start_model(const Settings& start, bool model_given, BackendChoice backend) {
    // Before the window opens: the load's bar, if any, is on the terminal.
    const auto load = [&](const std::string& name) {
        TerminalProgress bar;
        return load_with_backend(name, backend, bar.progress());
    };
    if (model_given || start.model == builtin_model) return load(start.model);
    try {
        return load(start.model);
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope: warning: cannot reopen the last model, opening the built-in one: %s\n",
                     e.what());
        return load(builtin_model);
    }
}

}  // namespace headscope
