// headscope-cli's commands: see cli_commands.h.
#include "cli/cli_commands.h"

#include <unistd.h>

#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/cli_inputs.h"
#include "cli/cli_maps.h"
#include "cli/terminal_progress.h"
#include "cli/terminal_table.h"
#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/base/shape.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/matmul.h"
#include "headscope/inspect/attention_export.h"
#include "headscope/inspect/checks.h"
#include "headscope/inspect/dance.h"
#include "headscope/io/files.h"

namespace headscope {

namespace {

// "all" or "I,J,..." as ascending unique layer indices (empty means all).
std::vector<int> parse_layers(const std::string& word) {
    if (word == "all") return {};
    std::vector<int> layers = parse_ints("--layers", word, "a layer index (expected all or I,J,...)");
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    return layers;
}

}  // namespace

LoadedModel open_on_backend(const CliOptions& opt) {
    TerminalProgress bar;
    return load_with_backend(opt.model, opt.backend, bar.progress());
}

void write_output(const std::string& path, const std::function<void(std::ostream&)>& write) {
    if (!path.empty()) return write_file_atomically(path, "the output", write);
    write(std::cout);
    if (!std::cout.flush()) throw Error("stdout: write failed");
}

bool as_table(const CliOptions& opt) {
    if (opt.format.empty()) return opt.out.empty() && isatty(STDOUT_FILENO) == 1;
    if (opt.format != "table" && opt.format != "json")
        throw Error("--format: expected table or json, got '" + opt.format + "'");
    return opt.format == "table";
}

namespace {

// The heads the forward splits C into, checked against the model; its error
// names the flag.
int head_count_of(const Model& model, const AttentionOptions& options) {
    try {
        return head_count(model.config, options.n_head);
    } catch (const Error& e) {
        throw Error(std::string("--heads: ") + e.what());
    }
}

// An encoder–decoder's JSON: the decoder's input is token_ids (its start
// token first); the sources (the texts) are the encoder's.
void add_sources(Json& metadata, const Model& model, const CliOptions& opt, const Batch& batch) {
    Json tokens = Json::array(), lengths = Json::array();
    for (const auto& ids : batch.source_ids) {
        tokens.push_back(token_texts(model.tokenizer, ids));
        lengths.push_back(ids.size());
    }
    metadata["kind"] = model_kind(model.config);
    metadata["encoder_layers"] = model.encoder->config.n_layer;
    metadata["targets"] = opt.targets;
    metadata["source_token_ids"] = batch.source_ids;
    metadata["source_tokens"] = tokens;
    metadata["source_lengths"] = lengths;
}

// The options as given; checked before the model loads, and completed by
// with_model once it has.
AttentionOptions attention_options(const CliOptions& opt) {
    if (opt.texts.empty() == opt.token_ids.empty()) throw Error("pass either --text or --token-ids");
    AttentionOptions options = opt.attention;
    if (opt.heads_given && opt.heads < 1) throw Error("--heads must be at least 1, got " + std::to_string(opt.heads));
    options.n_head = opt.heads;
    options.layers = parse_layers(opt.layers);
    parse_ablation_words(opt.ablation, options);
    return options;
}

}  // namespace

AttentionOptions with_model(AttentionOptions options, const CliOptions& opt, const Model& model) {
    options.sliding_window = sliding_window(model.config, opt.sliding_window);
    if (!opt.causal_given) options.causal = model.config.causal;
    if (!opt.scale_given) options.scale = own_scale(model.config.scaled_scores);
    head_count_of(model, options);  // before the forward, which checks it too, so that the error names the flag
    try {
        check_ablation(model.config, options);
    } catch (const Error& e) {
        throw Error(std::string("--ablate: ") + e.what());
    }
    try {
        check_expert_ablation(model.config, options);
    } catch (const Error& e) {
        throw Error(std::string("--ablate-expert: ") + e.what());
    }
    return options;
}

namespace {

// A mixture of experts as info names it: how many, how many a token takes,
// their hidden size, the layers whose MLP is dense, and the routing rule.
Json experts_json(const Config& c) {
    Json dense = Json::array();  // a list, so that the table keeps it on one row
    for (int l = 0; l < c.n_layer; ++l)
        if (!c.expert_layer(l)) dense.push_back(l);
    return {{"count", c.n_experts},
            {"per_token", c.experts_per_token},
            {"hidden_size", c.expert_mlp_dim},
            {"dense_layers", dense},
            {"routing", routing_words(c)}};
}

Json layout_json(const StridedLayout& layout) {
    return {{"shape", layout.shape},
            {"strides", layout.strides},
            {"offset", layout.offset},
            {"contiguous", layout.is_contiguous()}};
}

}  // namespace

void run_info(const CliOptions& opt) {
    const bool table = as_table(opt);
    const LoadedModel loaded = open_on_backend(opt);
    const Model& model = *loaded.model;
    Json tensors = Json::array();
    for (const TensorInfo& t : model.tensors)
        tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", to_string(t.dtype)}, {"bytes", t.bytes}});
    const Config& c = model.config;
    // Nothing is computed: the backend picked, and why.
    Json info = {{"backend", loaded.backend->name()},
                 {"backend_reason", loaded.backend_reason},
                 {"n_layer", c.n_layer},
                 {"n_head", c.n_head},
                 {"n_embd", c.n_embd},
                 {"n_positions", c.n_positions},
                 {"vocab_size", c.vocab_size},
                 {"params", model.params},
                 {"path", model.path.string()},
                 {"architecture", c.architecture},
                 {"kind", model_kind(c)},
                 {"n_kv_head", c.kv_heads()},
                 {"d_head", c.head_size()},
                 {"positions", to_string(c.positions)},
                 {"norm", to_string(c.norm)},
                 {"mlp", to_string(c.mlp)}};
    if (c.is_encoder_decoder()) info["encoder_layers"] = c.encoder_layers;
    if (c.positions == Positions::rotary) info["rope_theta"] = c.rope.theta;
    if (c.sliding_window) info["sliding_window"] = c.sliding_window;
    if (c.has_experts()) info["experts"] = experts_json(c);
    info["dtype"] = to_string(model.dtype);
    const WeightStorage storage = weight_storage(model);
    Json dtypes = Json::array();  // a list, so that the table keeps it on one row
    for (const auto& [dtype, count] : storage.tensors_by_dtype)
        dtypes.push_back({{"dtype", dtype}, {"tensors", count}});
    info["tensor_dtypes"] = dtypes;
    info["bits_per_weight"] = storage.bits_per_weight;
    if (!model.file_type.empty()) info["file_type"] = model.file_type;
    if (loaded.backend->name() == "cpu") {
        info["prompt_products"] = prompt_products_status();
        info["float_products"] = float_products_status();
    }
    info["tensors"] = tensors;
    if (!c.training.is_null()) info["training"] = c.training;
    if (!table) return write_output(opt.out, [&](std::ostream& out) { out << dump_json(info) << '\n'; });
    // The configuration as "name  value" lines, then the tensors.
    TableRows fields, rows = {{"tensor", "shape", "dtype", "bytes"}};
    Json configuration = info;
    configuration.erase("tensors");
    add_fields(configuration, "", fields);
    for (const TensorInfo& t : model.tensors)
        rows.push_back({t.name, shape_string(t.shape), to_string(t.dtype), std::to_string(t.bytes)});
    const std::string text = text_table(fields) + '\n' + text_table(rows);
    write_output(opt.out, [&](std::ostream& out) { out << text; });
}

void run_tokenize(const CliOptions& opt) {
    const Model model = [&] {
        TerminalProgress bar;
        return load_model(opt.model, bar.progress());
    }();
    if (!opt.text_pairs.empty()) {
        const TextBatch pair = pair_batch(model, opt);
        const Json tokens = {{"token_ids", pair.batch.token_ids[0]},
                             {"tokens", token_texts(model.tokenizer, pair.batch.token_ids[0])},
                             {"token_type_ids", pair.token_types[0]}};
        return write_output(opt.out, [&](std::ostream& out) { out << dump_json(tokens) << '\n'; });
    }
    const std::vector<int32_t> ids = model.tokenizer.encode_texts(opt.texts, opt.special).front();
    const Json tokens = {{"token_ids", ids}, {"tokens", token_texts(model.tokenizer, ids)}};
    write_output(opt.out, [&](std::ostream& out) { out << dump_json(tokens) << '\n'; });
}

namespace {

// --format npy: the attention array (if any) into `path`, and each summary
// into the same path with its name before ".npy" (out.npy: out.entropy.npy, ...).
void write_attention_npys(const std::string& path, const AttentionResult& result, const MapsOnDemand* on_demand) {
    if (result.maps == Maps::full || on_demand)
        write_output(path, [&](std::ostream& out) { write_attention_npy(out, result, on_demand); });
    if (!result.has_summaries()) return;
    const std::string stem = path.size() > 4 && path.ends_with(".npy") ? path.substr(0, path.size() - 4) : path;
    const RowSummaries summaries = result.row_summaries();
    for (const SummaryField& field : summary_fields)
        write_output(stem + "." + field.name + ".npy",
                     [&](std::ostream& out) { write_summary_npy(out, result, summaries.*field.values); });
}

}  // namespace

void run_attention(const CliOptions& given_opt) {
    const CliOptions opt = with_text_files(given_opt);
    AttentionOptions given = attention_options(opt);
    const MapsRequest maps = maps_request(opt);
    if (opt.format != "json" && opt.format != "npy" && opt.format != "none")
        throw Error("--format: expected json, npy or none, got '" + opt.format + "'");
    if (opt.format == "npy" && opt.out.empty()) throw Error("--format npy needs --out FILE");
    if (opt.format == "npy" && opt.contributions)
        throw Error("--format npy: the contributions are arrays of their own, and one .npy holds one array: use json");
    if (opt.top_k < 0) throw Error("--top-k must be at least 0 (0: no predictions), got " + std::to_string(opt.top_k));
    given.top_k = opt.top_k;
    given.lens_k = opt.logit_lens ? 1 : 0;
    given.contributions = opt.contributions;
    if (opt.contributions) given.top_k = std::max(given.top_k, 1);  // the attribution is to the top token
    std::optional<EffectsMethod> effects;
    if (!opt.effects.empty()) try {
            effects = parse_effects_method(opt.effects);
        } catch (const Error& e) {
            throw Error(std::string("--effects: ") + e.what());
        }
    given.maps = maps.forward_maps();
    given.summaries = opt.summaries;
    const LoadedModel loaded = open_on_backend(opt);
    const Model& model = *loaded.model;
    const AttentionOptions options = with_model(given, opt, model);

    if (options.maps != Maps::full && model.config.is_encoder_decoder())
        throw Error("--maps none, --rows, --cols and --pool: an encoder-decoder's forward keeps every map");
    if (opt.format == "npy" && model.config.is_encoder_decoder())
        throw Error("--format npy: an encoder-decoder has three attentions, and one .npy holds one array: use json");
    auto start = Clock::now();
    const bool pairs = !opt.text_pairs.empty();
    const TextBatch inputs = forward_batch(model, opt);
    const Batch& batch = inputs.batch;
    const double tokenize_ms = ms_since(start);
    if (maps.on_demand()) region_for(maps, batch.T());  // a bad --rows or --cols fails before the forward

    AttentionResult result;
    start = Clock::now();
    loaded.backend->forward(batch, options, result);
    const double forward_ms = ms_since(start);

    const ComputedOn& on = result.computed_on;
    Json metadata = attention_metadata(model, on.device, device_reason(on, loaded.backend_reason),
                                       input_texts(model, opt, batch.token_ids), batch.token_ids, result,
                                       {loaded.load_ms, tokenize_ms, forward_ms});
    if (pairs) {
        metadata["text_pairs"] = opt.text_pairs;
        metadata["token_type_ids"] = inputs.token_types;  // the tokenizer's, which a one-type model is not given
    }
    if (model.config.is_encoder_decoder()) add_sources(metadata, model, opt, batch);
    if (effects) metadata["effects"] = effects_json(*loaded.backend, batch, options, *effects);
    const std::optional<MapsOnDemand> shown = maps_on_demand(maps, {model, batch, options, result}, metadata);
    const MapsOnDemand* on_demand = shown ? &*shown : nullptr;
    if (opt.format == "npy") write_attention_npys(opt.out, result, on_demand);
    // The JSON, or with npy and none the metadata on stdout.
    write_output(opt.format == "json" ? opt.out : std::string(), [&](std::ostream& out) {
        if (opt.format == "json")
            write_attention_json(out, metadata, result, on_demand);
        else
            out << dump_json(metadata) << '\n';
    });
}

// --tokens tokens after the prompt, one cached forward each.
void run_generate(const CliOptions& opt) {
    const AttentionOptions given = attention_options(opt);
    if (opt.format != "json") throw Error("--format: generate writes json, got '" + opt.format + "'");
    validate_generation(opt.sampling, opt.tokens, given);
    const LoadedModel loaded = open_on_backend(opt);
    const Model& model = *loaded.model;
    AttentionOptions options = with_model(given, opt, model);
    options.new_rows_only = true;  // each step's new row is all the output needs
    const Batch batch = forward_batch(model, opt).batch;
    Generator generator(*loaded.backend, model, batch.token_ids.front(), options, opt.sampling, opt.tokens,
                        batch.source_ids.empty() ? std::vector<int32_t>{} : batch.source_ids.front());
    {
        TerminalProgress bar;
        const Progress progress = bar.progress();
        // The generator may stop before opt.tokens (end of text, the context); the bar goes all the same.
        for (int made = 0; generator.generation().stop == Stop::running; ++made) {
            report_progress(progress, "generating tokens", made, opt.tokens, ProgressUnit::steps);
            generator.step();
        }
    }
    const ComputedOn& on = generator.generation().computed_on;
    const Json metadata = {{"backend", on.device}, {"backend_reason", device_reason(on, loaded.backend_reason)}};
    write_output(opt.out, [&](std::ostream& out) {
        write_generation_json(out, metadata, model.tokenizer, generator.generation());
    });
}

// The reshape dance for the texts' batch, and how far the naive split's
// attention output at --layer is from the correct one's.
void run_dance(const CliOptions& opt) {
    const AttentionOptions given = attention_options(opt);
    const LoadedModel loaded = open_on_backend(opt);
    const Model& model = *loaded.model;
    const Batch batch = forward_batch(model, opt).batch;
    const AttentionOptions options = with_model(given, opt, model);

    // Both splits run for the comparison (which also validates the options); options.split is the walk printed.
    ComputedOn on;
    const double max_diff = naive_view_max_diff(*loaded.backend, batch, options, opt.layer, &on);
    const Dance dance =
        reshape_dance(batch.B(), batch.T(), model.config, options.n_head, options.split, &model.layers.at(opt.layer));
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
        if (!s.weights.empty()) step["weights"] = s.weights;
        steps.push_back(step);
    }
    for (const auto& ids : batch.token_ids) tokens.push_back(token_texts(model.tokenizer, ids));
    const Json out_json = {{"backend", on.device},
                           {"backend_reason", device_reason(on, loaded.backend_reason)},
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

}  // namespace headscope
