// headscope-cli patch: activation patching of a clean and a corrupted text,
// exact (core's patching.h) or estimated by attribution (backward.h), as JSON: both metrics, both texts' tokens and one
// grid per kind asked (an encoder–decoder's: per kind and stack, patch_grid_name), each cell the fraction of the
// difference restored (denoise) or destroyed (noise); with --format npy each grid is a .npy file of its own.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_commands.h"
#include "cli/terminal_progress.h"
#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/text_batch.h"
#include "headscope/inspect/attention_export.h"
#include "headscope/io/files.h"
#include "headscope/io/npy.h"

namespace headscope {

using Json = nlohmann::ordered_json;

namespace {

// The flags the metric reads given, and those it does not read not given.
void check_metric_flags(const CliOptions& opt) {
    const PatchMetric metric = opt.patch.metric;
    const std::string named = std::string("--metric ") + to_string(metric);
    if (metric != PatchMetric::loss && opt.answer.empty()) throw Error(named + " needs --answer");
    if (metric == PatchMetric::logit_diff && opt.wrong.empty()) throw Error(named + " needs --wrong");
    if (metric == PatchMetric::loss && !opt.answer.empty()) throw Error(named + " reads no --answer");
    if (metric != PatchMetric::logit_diff && !opt.wrong.empty()) throw Error(named + " reads no --wrong");
    if (metric == PatchMetric::loss && opt.patch.position != -1)
        throw Error(named + " reads every position: it takes no --position");
}

// The request as given, checked before the model loads.
PatchRequest given_request(const CliOptions& opt) {
    if (opt.method != "exact" && opt.method != "attribution")
        throw Error("--method: expected exact or attribution, got '" + opt.method + "'");
    if (opt.format != "json" && opt.format != "npy")
        throw Error("--format: expected json or npy, got '" + opt.format + "'");
    if (opt.format == "npy" && opt.out.empty()) throw Error("--format npy needs --out DIR, the grids' folder");
    if (opt.heads_given && opt.heads < 1) throw Error("--heads must be at least 1, got " + std::to_string(opt.heads));
    if (opt.clean_pair.empty() != opt.corrupted_pair.empty())
        throw Error("--clean-pair and --corrupted-pair go together: each text of a pair compared with the other's");
    if (!opt.corrupted_target.empty() && opt.clean_target.empty())
        throw Error("--corrupted-target needs --clean-target: each text's target compared with the other's");
    check_metric_flags(opt);
    PatchRequest request = opt.patch;
    try {
        request.kinds = parse_patch_kinds(opt.what);
    } catch (const Error& e) {
        throw Error(std::string("--what: ") + e.what());
    }
    return request;
}

// The one token `flag`'s text is.
int32_t one_token(const Model& model, const std::string& flag, const std::string& text) {
    const std::vector<int32_t> ids = model.tokenizer.encode(text, false);
    if (ids.size() != 1)
        throw Error(flag + ": '" + text + "' is " + std::to_string(ids.size()) + " tokens " +
                    dump_json(token_texts(model.tokenizer, ids)) + ", not one");
    return ids[0];
}

// The clean and the corrupted text as the forward reads them: an encoder's
// pairs with their token types where given; an encoder–decoder's sources
// with their targets (the corrupted text's that of the clean one where not given).
std::vector<Batch> patch_texts(const Model& model, const CliOptions& opt) {
    BatchTexts texts{{opt.clean[0], opt.corrupted[0]}};
    texts.special = opt.special;
    if (!opt.clean_pair.empty()) {
        if (!model.config.is_encoder())
            throw Error("--clean-pair: sentence pairs are for encoders; this model (" + model.config.architecture +
                        ") is not one");
        texts.text_pairs = {opt.clean_pair[0], opt.corrupted_pair[0]};
    }
    if (!opt.clean_target.empty()) {
        if (!model.config.is_encoder_decoder())
            throw Error("--clean-target: targets are for encoder-decoders; this model (" + model.config.architecture +
                        ") is not one");
        texts.targets = {opt.clean_target[0],
                         opt.corrupted_target.empty() ? opt.clean_target[0] : opt.corrupted_target[0]};
    }
    const Batch both = text_batch(model, texts).batch;
    std::vector<Batch> each;
    for (int b = 0; b < 2; ++b) {
        each.push_back(Batch{{both.token_ids[b]}, both.pad_id});
        if (!both.token_types.empty()) each.back().token_types = {both.token_types[b]};
        if (!both.source_ids.empty()) each.back().source_ids = {both.source_ids[b]};
    }
    return each;
}

// The grid as rows of cells.
Json grid_json(const PatchGrid& grid) {
    Json rows = Json::array();
    for (int r = 0; r < grid.rows; ++r)
        rows.push_back(std::vector<double>(grid.cells.begin() + static_cast<size_t>(r) * grid.cols,
                                           grid.cells.begin() + static_cast<size_t>(r + 1) * grid.cols));
    return rows;
}

// Each grid as DIR/<grid>.npy (patch_grid_name), float32 of shape (rows, cols), DIR made where missing.
void write_grids_npy(const std::filesystem::path& dir, const std::vector<PatchGrid>& grids) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw Error(dir.string() + ": cannot make the grids' folder: " + error.message());
    for (const PatchGrid& grid : grids) {
        const std::vector<float> cells(grid.cells.begin(), grid.cells.end());
        const std::string name = patch_grid_name(grid.kind, grid.stack);
        write_file_atomically(dir / (name + ".npy"), "the " + name + " grid", [&](std::ostream& out) {
            write_npy(out, cells, {grid.rows, grid.cols});
        });
    }
}

}  // namespace

void run_patch(const CliOptions& opt) {
    PatchRequest request = given_request(opt);
    const LoadedModel loaded = open_on_backend(opt);
    const Model& model = *loaded.model;
    AttentionOptions given = opt.attention;
    given.n_head = opt.heads;
    const AttentionOptions options = with_model(given, opt, model);
    const std::vector<Batch> texts = patch_texts(model, opt);
    const std::vector<std::vector<int32_t>> ids = {texts[0].token_ids[0], texts[1].token_ids[0]};
    if (!opt.answer.empty()) request.answer = one_token(model, "--answer", opt.answer[0]);
    if (!opt.wrong.empty()) request.wrong = one_token(model, "--wrong", opt.wrong[0]);

    Patching patching;
    const auto start = Clock::now();
    if (opt.method == "attribution") {
        attribution_patch(model, texts[0], texts[1], options, request, patching);
    } else {
        TerminalProgress bar;
        loaded.backend->patch(texts[0], texts[1], options, request, patching, bar.progress());
    }
    const double patch_ms = ms_since(start);
    const PatchRequest& done = patching.request;
    const ComputedOn& on = patching.computed_on;
    Json out = {{"backend", on.device},
                {"backend_reason", device_reason(on, loaded.backend_reason)},
                {"path", model.path.string()},
                {"method", opt.method},
                {"metric", to_string(done.metric)},
                {"direction", to_string(done.direction)}};
    if (done.metric != PatchMetric::loss) {
        out["position"] = done.position;
        out["answer"] = {{"id", done.answer}, {"token", opt.answer[0]}};
    }
    if (done.metric == PatchMetric::logit_diff) out["wrong"] = {{"id", done.wrong}, {"token", opt.wrong[0]}};
    out["clean_metric"] = patching.clean_metric;
    out["corrupted_metric"] = patching.corrupted_metric;
    out["n_layer"] = patching.L, out["n_head"] = patching.NH, out["T"] = patching.T;
    // "token_ids" and "tokens" (an encoder–decoder's: its targets'), or with `prefix` the sources'.
    const auto add_texts = [&](const std::string& prefix, const std::vector<int32_t>& clean,
                               const std::vector<int32_t>& corrupted) {
        out[prefix + "token_ids"] = {{"clean", clean}, {"corrupted", corrupted}};
        out[prefix + "tokens"] = {{"clean", token_texts(model.tokenizer, clean)},
                                  {"corrupted", token_texts(model.tokenizer, corrupted)}};
    };
    add_texts("", ids[0], ids[1]);
    if (model.config.is_encoder_decoder()) {  // the texts are its sources, as attention names them
        out["encoder_layers"] = model.encoder->config.n_layer, out["S"] = texts[0].S();
        add_texts("source_", texts[0].source_ids[0], texts[1].source_ids[0]);
    }
    out["patch_ms"] = patch_ms;
    if (opt.format == "npy") {
        write_grids_npy(opt.out, patching.grids);
        return write_output("", [&](std::ostream& stream) { stream << dump_json(out) << '\n'; });
    }
    for (const PatchGrid& grid : patching.grids) out[patch_grid_name(grid.kind, grid.stack)] = grid_json(grid);
    write_output(opt.out, [&](std::ostream& stream) { stream << dump_json(out) << '\n'; });
}

}  // namespace headscope
