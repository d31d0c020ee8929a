// headscope-cli: the engine without a window. Prints a model's configuration
// and tensors, token ids, every head's attention weights as JSON (or .npy)
// with the predictions and the logit lens, generated tokens, head probe
// scores and the reshape dance, so that each number the window draws can be
// reproduced and tested; info and heads print aligned tables for a person at
// a terminal. This file is the command line; cli_commands.cpp the commands.
// Bad usage or input: one line "headscope-cli: error: ..." on stderr, exit 2.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "cli/cli_commands.h"
#include "headscope/base/error.h"
#include "headscope/io/installation.h"
#include "state/forward_options.h"
#include "state/word_option.h"

using namespace headscope;

namespace {

struct Commands {
    CLI::App *info, *tokenize, *attention, *generate, *heads, *dance, *patch;
};

void add_model(CLI::App* sub, CliOptions& opt) {
    sub->add_option("--model", opt.model,
                    "builtin (the default), a model directory, a GGUF file, a Hugging Face hub name, or an Ollama, LM "
                    "Studio or llama.cpp name (local stores only)");
    sub->add_option("--out", opt.out, "write to FILE instead of stdout");
}

void add_special(CLI::App* sub, CliOptions& opt) {
    add_word_option(
        sub, "--special", opt.special, "on|off",
        [](std::string_view word) { return parse_on_off("special tokens", word); },
        "add the tokenizer's special tokens, such as Llama 2's <s> (on by default)");
}

void add_text_pair(CLI::App* sub, CliOptions& opt) {
    add_text_option(sub, "--text-pair", opt.text_pairs,
                    "an encoder's second text of a sentence pair, one for each --text (BERT's [CLS] A [SEP] B [SEP])");
}

void add_target(CLI::App* sub, CliOptions& opt) {
    add_text_option(sub, "--target", opt.targets,
                    "an encoder-decoder's target: the decoder's input after its start token, one for each --text "
                    "(default: the start token alone)");
}

void add_token_ids(CLI::App* sub, CliOptions& opt) {
    sub->add_option("--token-ids", opt.token_ids, "one text's token ids I,J,..., in place of --text");
}

// Where the masks, heads, scale, split and backend of every command that runs
// a forward go (forward_options.h, the window's table too).
ForwardOptionTargets forward_targets(CliOptions& opt) {
    return {opt.attention, opt.sliding_window, opt.heads, opt.backend};
}

// The CLI's own: the window always cuts a text past the model's positions, and says so.
void add_truncate(CLI::App* sub, CliOptions& opt) {
    sub->add_flag("--truncate", opt.truncate,
                  "cut a text longer than the model's positions to its first n_positions tokens (saying so on "
                  "stderr) instead of refusing it");
}

// A seed as the unsigned 64-bit number it is: nothing is clamped or wrapped,
// so that two different seeds never make the same draws unnoticed.
uint64_t parse_seed(const std::string& word) {
    uint64_t seed = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), seed);
    if (word.empty() || ec != std::errc() || end != word.data() + word.size())
        throw Error("--seed: '" + word + "' is not a whole number from 0 to 18446744073709551615");
    return seed;
}

const std::string table_or_json =
    "table|json: aligned columns for a person, or JSON (default: table when stdout is a terminal, else json)";

CLI::App* add_info(CLI::App& app, CliOptions& opt) {
    CLI::App* info = app.add_subcommand("info", "the model's configuration, parameter count and weight shapes");
    add_model(info, opt);
    add_backend_option(info, opt.backend, "the backend reported");
    info->add_option("--format", opt.format, table_or_json);
    return info;
}

CLI::App* add_tokenize(CLI::App& app, CliOptions& opt) {
    CLI::App* tokenize = app.add_subcommand("tokenize", "token ids and texts of --text");
    add_model(tokenize, opt);
    add_text_option(tokenize, "--text", opt.texts, "UTF-8 text")->required()->expected(1);
    add_text_pair(tokenize, opt);
    add_special(tokenize, opt);
    return tokenize;
}

// attention's options for long texts: a text from a file, the row
// summaries, and which maps are written (none, a region, pooled).
void add_long_text_options(CLI::App* attention, CliOptions& opt) {
    add_text_option(attention, "--text-file", opt.text_files,
                    "a UTF-8 text file read whole as one text (repeat for a batch; longer than the model's positions: "
                    "refused unless --truncate)");
    attention->add_flag("--summaries", opt.summaries,
                        "also each head's row summaries: entropy, first_key, previous_key, max and distance");
    attention->add_option("--maps", opt.maps, "full|none: every map (the default), or none (no attention array)");
    attention->add_option("--rows", opt.rows, "Q0:Q1: the maps' query rows Q0 to Q1 - 1 only (default: all)");
    attention->add_option("--cols", opt.cols, "K0:K1: the maps' keys K0 to K1 - 1 only (default: all)");
    attention->add_option("--pool", opt.pool, "N: every map pooled to at most N x N cells");
    add_word_option(attention, "--pool-mode", opt.pool_mode, join_words(pooling_choices, "|"), parse_pooling,
                    "each pooled cell's mean (the default) or max");
}

CLI::App* add_attention(CLI::App& app, CliOptions& opt) {
    CLI::App* attention = app.add_subcommand("attention", "every head's attention weights for one or more texts");
    add_model(attention, opt);
    add_text_option(attention, "--text", opt.texts, "UTF-8 text (repeat for a batch, right-padded)");
    add_text_pair(attention, opt);
    add_target(attention, opt);
    add_token_ids(attention, opt);
    add_forward_options(attention, forward_targets(opt));
    add_truncate(attention, opt);
    attention->add_option("--layers", opt.layers, "all or I,J,...");
    attention->add_option("--format", opt.format, "json|npy|none (npy needs --out)");
    attention->add_option("--top-k", opt.top_k, "also the K most likely next tokens at every position, and the loss");
    attention->add_flag("--logit-lens", opt.logit_lens, "also the most likely token after every returned layer");
    attention->add_flag("--contributions", opt.contributions,
                        "also what each head contributes: value-weighted maps, the rollout and each head's direct "
                        "attribution to the top next token's logit (implies --top-k 1 at least)");
    attention
        ->add_option_function<std::string>(
            "--effects", [&](const std::string& word) { opt.effects = word.empty() ? "hybrid" : word; },
            "also the effects grid of the one text: each head's change in loss when knocked out, exact (every "
            "knock-out run), attribution (estimated from one forward and one backward) or hybrid (the estimate, "
            "then the 16 largest and 8 others exact; the default when --effects has no word)")
        ->type_name(join_words(effects_method_choices, "|"))
        ->expected(0, 1);
    add_ablation_options(attention, opt.ablation, opt.attention.ablation);
    add_special(attention, opt);
    add_long_text_options(attention, opt);
    return attention;
}

CLI::App* add_generate(CLI::App& app, CliOptions& opt) {
    CLI::App* generate = app.add_subcommand("generate", "tokens appended one at a time, each step's attention rows");
    add_model(generate, opt);
    add_text_option(generate, "--text", opt.texts, "the UTF-8 prompt (an encoder-decoder's source)")->expected(1);
    add_target(generate, opt);
    add_token_ids(generate, opt);
    generate->add_option("--tokens", opt.tokens, "how many tokens to generate (fewer at EOS or the context limit)")
        ->required();
    generate->add_option("--temperature", opt.sampling.temperature, "0 (the default): greedy; else sampled");
    generate->add_option("--top-k", opt.sampling.top_k, "sample among the K most likely tokens (0: all)");
    generate->add_option("--top-p", opt.sampling.top_p, "sample among the most likely tokens reaching P (1: all)");
    generate->add_option_function<std::string>(
        "--seed", [&](const std::string& word) { opt.sampling.seed = parse_seed(word); },
        "the sampling generator's seed, 0 to 2^64 - 1");
    generate->add_option("--format", opt.format, "json");
    add_forward_options(generate, forward_targets(opt));
    add_truncate(generate, opt);
    add_special(generate, opt);
    return generate;
}

CLI::App* add_heads(CLI::App& app, CliOptions& opt) {
    CLI::App* heads = app.add_subcommand("heads", "probe scores of every head (previous-token, induction, ...)");
    add_model(heads, opt);
    add_text_option(heads, "--text", opt.texts, "score this text instead of the validation text")->expected(1);
    heads->add_option("--format", opt.format, table_or_json + "; the table marks the strongest head of each probe *");
    add_backend_option(heads, opt.backend);
    return heads;
}

CLI::App* add_dance(CLI::App& app, CliOptions& opt) {
    CLI::App* dance = app.add_subcommand(
        "dance", "the reshape dance's steps (shapes, strides, buffers) for the texts, and the naive split's error");
    add_model(dance, opt);
    add_text_option(dance, "--text", opt.texts, "UTF-8 text (repeat for a batch, right-padded)")->required();
    add_forward_options(dance, forward_targets(opt));
    add_truncate(dance, opt);
    dance->add_option("--layer", opt.layer, "the layer whose attention output the naive split is compared at");
    return dance;
}

CLI::App* add_patch(CLI::App& app, CliOptions& opt) {
    CLI::App* patch = app.add_subcommand(
        "patch",
        "activation patching: how much of the difference between a clean and a corrupted text of the same "
        "length each head, residual stream position, MLP and attention pattern carries");
    add_model(patch, opt);
    add_text_option(patch, "--clean", opt.clean, "the clean UTF-8 text")->required()->expected(1);
    add_text_option(patch, "--corrupted", opt.corrupted, "the corrupted UTF-8 text, as many tokens as --clean")
        ->required()
        ->expected(1);
    add_text_option(patch, "--clean-pair", opt.clean_pair, "an encoder's second text of the clean text's pair")
        ->expected(1);
    add_text_option(patch, "--corrupted-pair", opt.corrupted_pair,
                    "an encoder's second text of the corrupted text's pair (with --clean-pair)")
        ->expected(1);
    add_text_option(patch, "--clean-target", opt.clean_target,
                    "an encoder-decoder's target of the clean text (its source): the decoder's input after its start "
                    "token (default: the start token alone)")
        ->expected(1);
    add_text_option(patch, "--corrupted-target", opt.corrupted_target,
                    "an encoder-decoder's target of the corrupted text, as many tokens as --clean-target's (default: "
                    "--clean-target's)")
        ->expected(1);
    add_word_option(patch, "--metric", opt.patch.metric, join_words(patch_metric_choices, "|"), parse_patch_metric,
                    "the logit of --answer minus that of --wrong at --position (the default), the log-probability "
                    "of --answer there, or the loss over the clean text's next tokens");
    add_text_option(patch, "--answer", opt.answer, "the answer's text, one token (logit-diff, logprob)")->expected(1);
    add_text_option(patch, "--wrong", opt.wrong, "the wrong token's text, one token (logit-diff)")->expected(1);
    patch->add_option("--position", opt.patch.position, "where logit-diff and logprob read (default: the last token)");
    patch->add_option("--what", opt.what, "the grids: heads,residual,mlp,pattern, one or more (default: heads)");
    add_word_option(patch, "--direction", opt.patch.direction, join_words(patch_direction_choices, "|"),
                    parse_patch_direction,
                    "denoise (the default): the clean activation copied into the corrupted run; noise: the other way");
    patch->add_option("--method", opt.method,
                      "exact (the default): one forward per component; attribution: estimated from one "
                      "forward of each text and one backward pass of the run being patched");
    patch->add_option("--format", opt.format,
                      "json (the default), or npy: each grid as DIR/<grid>.npy (float32; --out DIR, made if "
                      "missing) and the rest of the JSON on stdout");
    add_forward_options(patch, forward_targets(opt));
    add_special(patch, opt);
    return patch;
}

// Parses the command line into `opt` and runs the command it names.
void run(CLI::App& app, const Commands& c, CliOptions& opt, int argc, char** argv) {
    // CLI11 would only say that a subcommand is required.
    const std::vector<CLI::App*> commands = app.get_subcommands([](CLI::App*) { return true; });
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(commands.begin(), commands.end(), [&](CLI::App* sub) { return sub->get_name() == argv[1]; }))
        throw Error(std::string("unknown command '") + argv[1] +
                    "' (expected info, tokenize, attention, generate, heads, dance or patch)");
    app.parse(argc, argv);
    const auto given = [&](const char* flag) {
        return c.attention->count(flag) + c.generate->count(flag) + c.dance->count(flag) + c.patch->count(flag) > 0;
    };
    opt.heads_given = given("--heads"), opt.causal_given = given("--causal"), opt.scale_given = given("--scale");
    opt.pool_given = c.attention->count("--pool") > 0, opt.pool_mode_given = c.attention->count("--pool-mode") > 0;
    if (opt.format.empty() && (*c.attention || *c.generate || *c.patch)) opt.format = "json";  // whatever the output is
    if (*c.info) run_info(opt);
    if (*c.tokenize) run_tokenize(opt);
    if (*c.attention) run_attention(opt);
    if (*c.generate) run_generate(opt);
    if (*c.heads) run_heads(opt);
    if (*c.dance) run_dance(opt);
    if (*c.patch) run_patch(opt);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Headscope: every attention head of a transformer, without a window", "headscope-cli"};
    app.require_subcommand(1);
    app.set_version_flag("--version", version_line("headscope-cli"));
    CliOptions opt;
    const Commands commands{add_info(app, opt),     add_tokenize(app, opt), add_attention(app, opt),
                            add_generate(app, opt), add_heads(app, opt),    add_dance(app, opt),
                            add_patch(app, opt)};
    try {
        run(app, commands, opt, argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);                                  // --help, --version
        std::fprintf(stderr, "headscope-cli: error: %s\n", one_line(e.what()).c_str());  // CLI11 quotes the arguments
        return 2;
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope-cli: error: %s\n", e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "headscope-cli: error: out of memory\n");
        return 2;
    } catch (const std::exception& e) {  // the last resort: one line, never a core dump
        std::fprintf(stderr, "headscope-cli: error: %s\n", one_line(e.what()).c_str());
        return 2;
    }
    return 0;
}
