// headscope-cli: the engine without a window. Prints a model's shapes, GPT-2
// token ids, and every head's attention weights as JSON (or .npy), so each
// number the window draws can be reproduced and tested; info and heads print
// aligned tables for a person at a terminal. While a model loads or heads are
// scored, a one-line progress bar goes to stderr when it is a terminal.
// Bad usage or input: one line "headscope-cli: error: ..." on stderr, exit 2.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/attention_export.h"
#include "headscope/backend.h"
#include "headscope/checks.h"
#include "headscope/dance.h"
#include "headscope/error.h"
#include "headscope/files.h"
#include "headscope/forward.h"
#include "headscope/generate.h"
#include "headscope/installation.h"
#include "headscope/model.h"
#include "headscope/probes.h"
#include "headscope/progress.h"
#include "headscope/shape.h"
#include "terminal_progress.h"
#include "word_option.h"

using namespace headscope;
using Json = nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// "I,J,..." as integers; an item that is not one fails naming `flag` and `what` it expects.
std::vector<int> parse_ints(const std::string& flag, const std::string& word, const std::string& what) {
    std::vector<int> values;
    size_t start = 0;
    while (start <= word.size()) {
        const size_t end = std::min(word.find(',', start), word.size());
        const std::string item = word.substr(start, end - start);
        int value = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
            throw Error(flag + ": '" + item + "' is not " + what);
        values.push_back(value);
        start = end + 1;
    }
    return values;
}

// "all" or "I,J,..." as ascending unique layer indices (empty means all).
std::vector<int> parse_layers(const std::string& word) {
    if (word == "all") return {};
    std::vector<int> layers = parse_ints("--layers", word, "a layer index (expected all or I,J,...)");
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    return layers;
}

// load_model with its progress on the terminal.
Model load_model_shown(const std::string& name_or_path) {
    TerminalProgress bar;
    return load_model(name_or_path, bar.progress());
}

// The display width of UTF-8 text: its code points.
size_t text_width(const std::string& text) {
    return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

// Rows of cells as aligned columns: each column as wide as its widest cell,
// cells left-aligned, two spaces between, no trailing spaces.
std::string text_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()));
        for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], text_width(row[c]));
    }
    std::string text;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line += std::string(widths[c] - text_width(row[c]) + 2, ' ');
        }
        text += line + '\n';
    }
    return text;
}

// A JSON value as a table shows it: strings without quotes.
std::string cell(const Json& value) { return value.is_string() ? value.get<std::string>() : dump_json(value); }

// An object's fields as "name  value" rows, an object inside as "outer.name" rows.
void add_fields(const Json& object, const std::string& prefix, std::vector<std::vector<std::string>>& rows) {
    for (const auto& [name, value] : object.items()) {
        if (value.is_object())
            add_fields(value, prefix + name + ".", rows);
        else
            rows.push_back({prefix + name, cell(value)});
    }
}

// Writes to stdout, or, given a path, to that file whole or not at all.
void write_output(const std::string& path, const std::function<void(std::ostream&)>& write) {
    if (!path.empty()) return write_file_atomically(path, "the output", write);
    write(std::cout);
    if (!std::cout.flush()) throw Error("stdout: write failed");
}

struct Options {
    std::string model = builtin_model;
    std::vector<std::string> texts;
    std::string token_ids;       // "I,J,K": one text's ids, in place of --text
    int top_k = 0;               // attention: the predictions at every position
    bool logit_lens = false;     // attention: the top-1 after every returned layer
    Sampling sampling;           // generate
    int tokens = 0;              // generate: how many
    AttentionOptions attention;  // the masks, scale and split; attention_options sets the rest
    BackendChoice backend = BackendChoice::automatic;
    std::string layers = "all", out;
    std::string format;  // as given; empty: table or json by where the output goes (info, heads), else json
    int heads = 0, layer = 0;
    bool heads_given = false;
    bool special = true;         // the tokenizer's special tokens (Llama 2's <s>)
    bool sliding_window = true;  // the model's own, when it has one
};

// The heads the forward splits C into, checked against the model; its error
// names the flag.
int head_count_of(const Model& model, const AttentionOptions& options) {
    try {
        return head_count(model.config, options.n_head);
    } catch (const Error& e) {
        throw Error(std::string("--heads: ") + e.what());
    }
}

// info and heads: --format table or json; by default a table when the
// output is a terminal (stdout, no --out), else JSON.
bool as_table(const Options& opt) {
    if (opt.format.empty()) return opt.out.empty() && isatty(STDOUT_FILENO) == 1;
    if (opt.format != "table" && opt.format != "json")
        throw Error("--format: expected table or json, got '" + opt.format + "'");
    return opt.format == "table";
}

void run_info(const Options& opt) {
    const bool table = as_table(opt);
    const BackendPick pick = make_backend(opt.backend);
    const Model model = load_model_shown(opt.model);
    Json tensors = Json::array();
    for (const TensorInfo& t : model.tensors)
        tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", to_string(t.dtype)}, {"bytes", t.bytes}});
    const Config& c = model.config;
    Json info = {{"backend", pick.backend->name()},
                 {"backend_reason", pick.reason},
                 {"n_layer", c.n_layer},
                 {"n_head", c.n_head},
                 {"n_embd", c.n_embd},
                 {"n_positions", c.n_positions},
                 {"vocab_size", c.vocab_size},
                 {"params", model.params},
                 {"path", model.path.string()},
                 {"architecture", c.architecture},
                 {"n_kv_head", c.kv_heads()},
                 {"d_head", c.head_size()},
                 {"positions", to_string(c.positions)},
                 {"norm", to_string(c.norm)},
                 {"mlp", to_string(c.mlp)}};
    if (c.positions == Positions::rotary) info["rope_theta"] = c.rope.theta;
    if (c.sliding_window) info["sliding_window"] = c.sliding_window;
    info["dtype"] = to_string(model.dtype);
    info["tensors"] = tensors;
    if (!c.training.is_null()) info["training"] = c.training;
    if (!table) return write_output(opt.out, [&](std::ostream& out) { out << dump_json(info) << '\n'; });
    // The configuration as "name  value" lines, then the tensors.
    std::vector<std::vector<std::string>> fields, rows = {{"tensor", "shape", "dtype", "bytes"}};
    Json configuration = info;
    configuration.erase("tensors");
    add_fields(configuration, "", fields);
    for (const TensorInfo& t : model.tensors)
        rows.push_back({t.name, shape_string(t.shape), to_string(t.dtype), std::to_string(t.bytes)});
    const std::string text = text_table(fields) + '\n' + text_table(rows);
    write_output(opt.out, [&](std::ostream& out) { out << text; });
}

void run_tokenize(const Options& opt) {
    const Model model = load_model_shown(opt.model);
    const std::vector<int32_t> ids = model.tokenizer.encode_texts(opt.texts, opt.special).front();
    const Json tokens = {{"token_ids", ids}, {"tokens", token_texts(model.tokenizer, ids)}};
    write_output(opt.out, [&](std::ostream& out) { out << dump_json(tokens) << '\n'; });
}

// One text's ids from --token-ids, each checked against the tokenizer's
// vocabulary, or the ids of the --text texts.
std::vector<std::vector<int32_t>> input_ids(const Model& model, const Options& opt) {
    if (opt.token_ids.empty()) return model.tokenizer.encode_texts(opt.texts, opt.special);
    const int32_t V = std::min(model.config.vocab_size, model.tokenizer.vocab_size());
    std::vector<int32_t> ids;
    for (int id : parse_ints("--token-ids", opt.token_ids, "a token id (expected I,J,...)")) {
        if (id < 0 || id >= V)
            throw Error("--token-ids: " + std::to_string(id) + " is outside the vocabulary (0.." +
                        std::to_string(V - 1) + ")");
        ids.push_back(id);
    }
    return {ids};
}

// The texts as the JSON names them: --text's, or the --token-ids text decoded.
std::vector<std::string> input_texts(const Model& model, const Options& opt,
                                     const std::vector<std::vector<int32_t>>& ids) {
    if (opt.token_ids.empty()) return opt.texts;
    std::string text;
    for (int32_t id : ids.front()) text += model.tokenizer.token_bytes(id);
    return {text};
}

// The options as given; checked before the model loads, and completed by
// with_model once it has.
AttentionOptions attention_options(const Options& opt) {
    if (opt.texts.empty() == opt.token_ids.empty()) throw Error("pass either --text or --token-ids");
    AttentionOptions options = opt.attention;
    if (opt.heads_given && opt.heads < 1) throw Error("--heads must be at least 1, got " + std::to_string(opt.heads));
    options.n_head = opt.heads;
    options.layers = parse_layers(opt.layers);
    return options;
}

AttentionOptions with_model(AttentionOptions options, const Options& opt, const Model& model) {
    options.sliding_window = sliding_window(model.config, opt.sliding_window);
    head_count_of(model, options);  // before the forward, which checks it too, so that the error names the flag
    return options;
}

void run_attention(const Options& opt) {
    AttentionOptions given = attention_options(opt);
    if (opt.format != "json" && opt.format != "npy" && opt.format != "none")
        throw Error("--format: expected json, npy or none, got '" + opt.format + "'");
    if (opt.format == "npy" && opt.out.empty()) throw Error("--format npy needs --out FILE");
    if (opt.top_k < 0) throw Error("--top-k must be at least 0 (0: no predictions), got " + std::to_string(opt.top_k));
    given.top_k = opt.top_k;
    given.lens_k = opt.logit_lens ? 1 : 0;
    const BackendPick pick = make_backend(opt.backend);
    Backend* backend = pick.backend.get();

    auto start = Clock::now();
    const Model model = load_model_shown(opt.model);
    const double load_ms = ms_since(start);
    const AttentionOptions options = with_model(given, opt, model);

    start = Clock::now();
    Batch batch{input_ids(model, opt), model.config.pad_id()};
    const double tokenize_ms = ms_since(start);

    backend->load_weights(model);
    AttentionResult result;
    start = Clock::now();
    backend->forward(batch, options, result);
    const double forward_ms = ms_since(start);

    const Json metadata =
        attention_metadata(model, backend->name(), pick.reason, input_texts(model, opt, batch.token_ids),
                           batch.token_ids, result, {load_ms, tokenize_ms, forward_ms});
    if (opt.format == "npy") write_output(opt.out, [&](std::ostream& out) { write_attention_npy(out, result); });
    // The JSON, or with npy and none the metadata on stdout.
    write_output(opt.format == "json" ? opt.out : std::string(), [&](std::ostream& out) {
        if (opt.format == "json")
            write_attention_json(out, metadata, result);
        else
            out << dump_json(metadata) << '\n';
    });
}

// --tokens tokens after the prompt, one cached forward each.
void run_generate(const Options& opt) {
    const AttentionOptions given = attention_options(opt);
    if (opt.format != "json") throw Error("--format: generate writes json, got '" + opt.format + "'");
    validate_generation(opt.sampling, opt.tokens, given);
    const BackendPick pick = make_backend(opt.backend);
    Backend* backend = pick.backend.get();
    const Model model = load_model_shown(opt.model);
    const AttentionOptions options = with_model(given, opt, model);
    backend->load_weights(model);
    Generator generator(*backend, model, input_ids(model, opt).front(), options, opt.sampling, opt.tokens);
    {
        TerminalProgress bar;
        const Progress progress = bar.progress();
        // The generator may stop before opt.tokens (end of text, the context); the bar goes all the same.
        for (int made = 0; generator.generation().stop == Stop::running; ++made) {
            report_progress(progress, "generating tokens", made, opt.tokens, ProgressUnit::steps);
            generator.step();
        }
    }
    const Json metadata = {{"backend", backend->name()}, {"backend_reason", pick.reason}};
    write_output(opt.out, [&](std::ostream& out) {
        write_generation_json(out, metadata, model.tokenizer, generator.generation());
    });
}

// Token windows to score heads on: --text, else core's validation windows.
std::vector<std::vector<int32_t>> probe_texts(const Model& model, const Options& opt) {
    if (!opt.texts.empty()) {
        std::vector<std::vector<int32_t>> ids = model.tokenizer.encode_texts(opt.texts);
        if (ids.front().size() < 2) throw Error("--text needs at least 2 tokens to score heads");
        if (ids.front().size() > static_cast<size_t>(model.config.n_positions))
            throw Error("text 1 has " + std::to_string(ids.front().size()) +
                        " tokens, more than the model's limit of " + std::to_string(model.config.n_positions));
        return ids;
    }
    return validation_windows(model);
}

// The probe columns of heads' table; the strongest head of each is marked *.
struct ProbeColumn {
    const char* name;
    double HeadScores::*score;
    bool marked;
};
constexpr ProbeColumn probe_columns[] = {{"previous_token", &HeadScores::previous_token, true},
                                         {"first_token", &HeadScores::first_token, true},
                                         {"current_token", &HeadScores::current_token, true},
                                         {"induction", &HeadScores::induction, true},
                                         {"entropy", &HeadScores::entropy, false}};

// The summary's fields, then one row per head with each score (4 decimals).
std::string heads_table(const Json& summary, const ProbeReport& report) {
    std::vector<std::vector<std::string>> fields, rows = {{"layer", "head"}};
    add_fields(summary, "", fields);
    std::vector<size_t> strongest;  // per column, the head's index in report.heads
    for (const ProbeColumn& column : probe_columns) {
        rows.front().push_back(column.name);
        size_t best = 0;
        for (size_t i = 1; i < report.heads.size(); ++i)
            if (report.heads[i].*column.score > report.heads[best].*column.score) best = i;
        strongest.push_back(column.marked ? best : report.heads.size());
    }
    for (size_t i = 0; i < report.heads.size(); ++i) {
        std::vector<std::string> row = {std::to_string(i / report.n_head), std::to_string(i % report.n_head)};
        for (size_t c = 0; c < std::size(probe_columns); ++c) {
            char number[32];
            std::snprintf(number, sizeof number, "%.4f%s", report.heads[i].*probe_columns[c].score,
                          strongest[c] == i ? "*" : "");
            row.push_back(number);
        }
        rows.push_back(row);
    }
    return text_table(fields) + '\n' + text_table(rows) + "* the strongest head of each probe\n";
}

void run_heads(const Options& opt) {
    const bool table = as_table(opt);
    const BackendPick pick = make_backend(opt.backend);
    Backend* backend = pick.backend.get();
    const Model model = load_model_shown(opt.model);
    backend->load_weights(model);
    const ProbeReport report = [&] {
        TerminalProgress bar;
        return probe_heads(*backend, model, probe_texts(model, opt), 8, 42, bar.progress());
    }();
    const Json summary = {{"backend", backend->name()},  {"backend_reason", pick.reason},
                          {"path", model.path.string()}, {"n_layer", report.n_layer},
                          {"n_head", report.n_head},     {"source", opt.texts.empty() ? "validation" : "text"},
                          {"rows", report.rows}};
    if (table) return write_output(opt.out, [&](std::ostream& out) { out << heads_table(summary, report); });
    // The summary's fields, then "heads" with one head per line, so that the
    // scores read well in a terminal.
    std::string text = dump_json(summary);
    text.pop_back();
    text += ",\"heads\":[";
    for (int l = 0; l < report.n_layer; ++l)
        for (int h = 0; h < report.n_head; ++h) {
            const HeadScores& s = report.head(l, h);
            const Json head = {{"layer", l},
                               {"head", h},
                               {"previous_token", s.previous_token},
                               {"first_token", s.first_token},
                               {"current_token", s.current_token},
                               {"induction", s.induction},
                               {"entropy", s.entropy}};
            text += (l || h ? ",\n " : "\n ") + dump_json(head);
        }
    text += "\n]}\n";
    write_output(opt.out, [&](std::ostream& out) { out << text; });
}

Json layout_json(const StridedLayout& layout) {
    return {{"shape", layout.shape},
            {"strides", layout.strides},
            {"offset", layout.offset},
            {"contiguous", layout.is_contiguous()}};
}

// The reshape dance for the texts' batch, and how far the naive split's
// attention output at --layer is from the correct one's.
void run_dance(const Options& opt) {
    const AttentionOptions given = attention_options(opt);
    const BackendPick pick = make_backend(opt.backend);
    Backend* backend = pick.backend.get();
    const Model model = load_model_shown(opt.model);
    const Batch batch{model.tokenizer.encode_texts(opt.texts), model.config.pad_id()};
    const AttentionOptions options = with_model(given, opt, model);
    backend->load_weights(model);

    // Both splits run for the comparison (which also validates the options); options.split is the walk printed.
    const double max_diff = naive_view_max_diff(*backend, batch, options, opt.layer);
    const Dance dance = reshape_dance(batch.B(), batch.T(), model.config, options.n_head, options.split);
    Json buffers = Json::array(), steps = Json::array(), tokens = Json::array();
    for (const DanceBuffer& b : dance.buffers)
        buffers.push_back({{"name", b.name}, {"dims", b.dims}, {"shape", b.shape}});
    for (size_t i = 0; i < dance.steps.size(); ++i) {
        const DanceStep& s = dance.steps[i];
        Json step = {{"step", i + 1},
                     {"title", s.title},
                     {"code", s.code},
                     {"buffer", dance.buffers[s.buffer].name},
                     {"dims", s.dims}};
        step.update(layout_json(s.layout));
        steps.push_back(step);
    }
    for (const auto& ids : batch.token_ids) tokens.push_back(token_texts(model.tokenizer, ids));
    const Json out_json = {{"backend", backend->name()},
                           {"backend_reason", pick.reason},
                           {"B", dance.B},
                           {"T", dance.T},
                           {"C", dance.C},
                           {"n_head", dance.NH},
                           {"d_head", dance.hs},
                           {"n_kv_head", dance.NKV},
                           {"rotary_dims", dance.rope_dims},
                           {"split", to_string(dance.split)},
                           {"layer", opt.layer},
                           {"tokens", tokens},
                           {"naive_view_max_diff", max_diff},
                           {"buffers", buffers},
                           {"steps", steps}};
    write_output(opt.out, [&](std::ostream& out) { out << dump_json(out_json) << '\n'; });
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Headscope: every attention head of a transformer, without a window", "headscope-cli"};
    app.require_subcommand(1);
    app.set_version_flag("--version", version_line("headscope-cli"));
    Options opt;

    auto add_model = [&](CLI::App* sub) {
        sub->add_option("--model", opt.model,
                        "builtin (the default), a model directory, or a Hugging Face hub name (local cache only)");
        sub->add_option("--out", opt.out, "write to FILE instead of stdout");
    };
    auto add_backend = [&](CLI::App* sub, const std::string& help) {
        add_word_option(sub, "--backend", opt.backend, join_words(backend_choices, "|"), parse_backend_choice, help);
    };
    auto add_special = [&](CLI::App* sub) {
        add_word_option(
            sub, "--special", opt.special, "on|off",
            [](std::string_view word) { return parse_on_off("special tokens", word); },
            "add the tokenizer's special tokens, such as Llama 2's <s> (on by default)");
    };
    CLI::App* info = app.add_subcommand("info", "the model's configuration, parameter count and weight shapes");
    add_model(info);
    add_backend(info, "the backend reported");
    const std::string table_or_json =
        "table|json: aligned columns for a person, or JSON (default: table when stdout is a terminal, else json)";
    info->add_option("--format", opt.format, table_or_json);
    CLI::App* tokenize = app.add_subcommand("tokenize", "token ids and texts of --text");
    add_model(tokenize);
    tokenize->add_option("--text", opt.texts, "UTF-8 text")->required()->expected(1);
    add_special(tokenize);
    CLI::App* attention = app.add_subcommand("attention", "every head's attention weights for one or more texts");
    add_model(attention);
    auto add_forward_options = [&](CLI::App* sub) {
        add_word_option(
            sub, "--causal", opt.attention.causal, "on|off",
            [](std::string_view word) { return parse_on_off("causal mask", word); }, "the causal mask");
        add_word_option(
            sub, "--padding-mask", opt.attention.padding_mask, "on|off",
            [](std::string_view word) { return parse_on_off("padding mask", word); }, "the padding mask");
        add_word_option(
            sub, "--sliding-window", opt.sliding_window, "on|off",
            [](std::string_view word) { return parse_on_off("sliding window", word); },
            "the model's sliding window, when it has one (default on)");
        sub->add_option("--heads", opt.heads,
                        "re-split into N query heads (N a multiple of the heads sharing a key/value head, dividing "
                        "the query width)");
        add_word_option(sub, "--scale", opt.attention.scale, join_words(scale_choices, "|"), parse_scale,
                        "1/sqrt(head size), 1/sqrt(C), 1");
        add_word_option(sub, "--split", opt.attention.split, join_words(split_choices, "|"), parse_split,
                        "how Q, K and V are split into heads");
        add_backend(sub, "auto: CUDA when built with it and a device exists");
    };
    auto add_token_ids = [&](CLI::App* sub) {
        sub->add_option("--token-ids", opt.token_ids, "one text's token ids I,J,..., in place of --text");
    };
    attention->add_option("--text", opt.texts, "UTF-8 text (repeat for a batch, right-padded)");
    add_token_ids(attention);
    add_forward_options(attention);
    attention->add_option("--layers", opt.layers, "all or I,J,...");
    attention->add_option("--format", opt.format, "json|npy|none (npy needs --out)");
    attention->add_option("--top-k", opt.top_k, "also the K most likely next tokens at every position, and the loss");
    attention->add_flag("--logit-lens", opt.logit_lens, "also the most likely token after every returned layer");
    add_special(attention);
    CLI::App* generate = app.add_subcommand("generate", "tokens appended one at a time, each step's attention rows");
    add_model(generate);
    generate->add_option("--text", opt.texts, "the UTF-8 prompt")->expected(1);
    add_token_ids(generate);
    generate->add_option("--tokens", opt.tokens, "how many tokens to generate (fewer at EOS or the context limit)")
        ->required();
    generate->add_option("--temperature", opt.sampling.temperature, "0 (the default): greedy; else sampled");
    generate->add_option("--top-k", opt.sampling.top_k, "sample among the K most likely tokens (0: all)");
    generate->add_option("--top-p", opt.sampling.top_p, "sample among the most likely tokens reaching P (1: all)");
    generate->add_option("--seed", opt.sampling.seed, "the sampling generator's seed");
    generate->add_option("--format", opt.format, "json");
    add_forward_options(generate);
    add_special(generate);
    CLI::App* heads = app.add_subcommand("heads", "probe scores of every head (previous-token, induction, ...)");
    add_model(heads);
    heads->add_option("--text", opt.texts, "score this text instead of the validation text")->expected(1);
    heads->add_option("--format", opt.format, table_or_json + "; the table marks the strongest head of each probe *");
    add_backend(heads, "auto: CUDA when built with it and a device exists");
    CLI::App* dance = app.add_subcommand(
        "dance", "the reshape dance's steps (shapes, strides, buffers) for the texts, and the naive split's error");
    add_model(dance);
    dance->add_option("--text", opt.texts, "UTF-8 text (repeat for a batch, right-padded)")->required();
    add_forward_options(dance);
    dance->add_option("--layer", opt.layer, "the layer whose attention output the naive split is compared at");

    try {
        // CLI11 would only say that a subcommand is required.
        const std::vector<CLI::App*> commands = app.get_subcommands([](CLI::App*) { return true; });
        if (argc > 1 && argv[1][0] != '-' &&
            std::none_of(commands.begin(), commands.end(), [&](CLI::App* c) { return c->get_name() == argv[1]; }))
            throw Error(std::string("unknown command '") + argv[1] +
                        "' (expected info, tokenize, attention, generate, heads or dance)");
        app.parse(argc, argv);
        opt.heads_given = attention->count("--heads") + generate->count("--heads") + dance->count("--heads") > 0;
        if (opt.format.empty() && (*attention || *generate)) opt.format = "json";  // whatever the output is
        if (*info) run_info(opt);
        if (*tokenize) run_tokenize(opt);
        if (*attention) run_attention(opt);
        if (*generate) run_generate(opt);
        if (*heads) run_heads(opt);
        if (*dance) run_dance(opt);
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
    }
    return 0;
}
