// headscope-cli patch run as a user runs it, on the built-in model: its JSON
// holds core's own patching of the same tokens (its metrics and every grid,
// of the shapes patching.h gives them), its .npy files the same grids, and
// every bad request is one line on stderr, nothing on stdout, exit 2.
// Likewise attention --effects, the single text's effects grid (exact,
// estimated or hybrid) on a GPT-2-layout model of 32 heads.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "encoder_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/text_batch.h"
#include "model_writer.h"
#include "npy_file.h"
#include "process.h"
#include "seq2seq_models.h"

using namespace headscope;
using nlohmann::json;
using test::read_npy;

namespace {

const std::string clean_text = "When John and Peter went to the house, Peter gave a book to";
const std::string corrupted_text = "When John and Peter went to the house, John gave a book to";

class CliPatch : public ::testing::Test {
protected:
    static void SetUpTestSuite() { dir_ = new test::TempDir; }
    static void TearDownTestSuite() { delete dir_; }

    static test::ProcessRun run(std::vector<std::string> args) {
        args.insert(args.begin(), {test::cli_program(), "patch"});
        return test::run_program(args, dir_->path);
    }
    static json patch_json(const std::vector<std::string>& args) {
        const test::ProcessRun r = run(args);
        EXPECT_EQ(r.status, 0) << r.err;
        return json::parse(r.out);
    }
    void expect_error(const std::vector<std::string>& args, const std::string& names) {
        test::expect_one_line_error(run(args), "headscope-cli", names);
    }
    // Core's patching of the two texts with `request`, on the built-in model.
    Patching core_patching(PatchRequest request) const {
        request.answer = model_.tokenizer.encode(" John", false).at(0);
        request.wrong = model_.tokenizer.encode(" Peter", false).at(0);
        std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(model_);
        Patching patching;
        const int32_t pad = model_.config.pad_id();
        backend->patch(Batch{{model_.tokenizer.encode(clean_text)}, pad},
                       Batch{{model_.tokenizer.encode(corrupted_text)}, pad}, {}, request, patching);
        return patching;
    }

    static test::TempDir* dir_;
    const Model model_ = load_model(builtin_model);
};
test::TempDir* CliPatch::dir_ = nullptr;

// Each of `got`'s grids as core's, by its name (an encoder–decoder's "encoder_heads", ...).
void expect_grids(const json& got, const Patching& want) {
    for (const PatchGrid& grid : want.grids) {
        const std::string name = patch_grid_name(grid.kind, grid.stack);
        const json& rows = got.at(name);
        ASSERT_EQ(rows.size(), static_cast<size_t>(grid.rows)) << name;
        for (int r = 0; r < grid.rows; ++r) {
            ASSERT_EQ(rows[r].size(), static_cast<size_t>(grid.cols)) << name;
            for (int c = 0; c < grid.cols; ++c)
                EXPECT_DOUBLE_EQ(rows[r][c].get<double>(), grid.at(r, c)) << name << r << c;
        }
    }
}

TEST_F(CliPatch, WritesCoresGridsOfEveryKind) {
    const json got = patch_json({"--clean", clean_text, "--corrupted", corrupted_text, "--answer", " John", "--wrong",
                                 " Peter", "--what", "heads,residual,mlp,pattern"});
    PatchRequest request;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const Patching want = core_patching(request);
    EXPECT_EQ(got["metric"], "logit-diff");
    EXPECT_EQ(got["direction"], "denoise");
    EXPECT_EQ(got["method"], "exact");
    EXPECT_EQ(got["position"], 13);
    EXPECT_EQ(got["answer"]["token"], " John");
    EXPECT_EQ(got["wrong"]["id"], model_.tokenizer.encode(" Peter", false).at(0));
    EXPECT_DOUBLE_EQ(got["clean_metric"].get<double>(), want.clean_metric);
    EXPECT_DOUBLE_EQ(got["corrupted_metric"].get<double>(), want.corrupted_metric);
    EXPECT_EQ(got["tokens"]["clean"].size(), 14u);
    EXPECT_EQ(got["tokens"]["clean"][9], " Peter");
    EXPECT_EQ(got["tokens"]["corrupted"][9], " John");
    EXPECT_EQ(got["token_ids"]["corrupted"].get<std::vector<int32_t>>(), model_.tokenizer.encode(corrupted_text));
    // The grids' shapes: (L, NH) for heads and patterns, (L, T) for the residual and the MLPs.
    EXPECT_EQ(want.grids[0].cols, 4);
    EXPECT_EQ(want.grids[1].cols, 14);
    expect_grids(got, want);
}

// --format npy: each grid in its own file, the JSON's cells in float32, and the rest of the JSON on stdout.
TEST_F(CliPatch, WritesEachGridAsNpy) {
    const std::vector<std::string> args = {
        "--clean", clean_text, "--corrupted", corrupted_text, "--answer",
        " John",   "--wrong",  " Peter",      "--what",       "heads,residual,mlp,pattern"};
    const json grids = patch_json(args);
    std::vector<std::string> as_npy = args;
    const std::filesystem::path dir = dir_->path / "grids";
    as_npy.insert(as_npy.end(), {"--format", "npy", "--out", dir.string()});
    const json metadata = patch_json(as_npy);
    EXPECT_EQ(metadata["clean_metric"], grids["clean_metric"]);
    EXPECT_EQ(metadata["tokens"], grids["tokens"]);
    const std::string L = std::to_string(model_.config.n_layer), NH = std::to_string(model_.config.n_head);
    const std::pair<const char*, std::string> shapes[] = {
        {"heads", L + ", " + NH}, {"residual", L + ", 14"}, {"mlp", L + ", 14"}, {"pattern", L + ", " + NH}};
    for (const auto& [kind, shape] : shapes) {
        EXPECT_EQ(metadata.count(kind), 0u) << kind;
        const test::NpyArray array = read_npy(dir / (std::string(kind) + ".npy"));
        EXPECT_EQ(array.shape, shape) << kind;
        const json& rows = grids.at(kind);
        ASSERT_EQ(array.data.size(), rows.size() * rows[0].size()) << kind;
        for (size_t r = 0, n = 0; r < rows.size(); ++r)
            for (size_t c = 0; c < rows[r].size(); ++c, ++n)
                EXPECT_EQ(array.data[n], rows[r][c].get<float>()) << kind << r << c;
    }
}

TEST_F(CliPatch, NoisingTheLogProbabilityAndTheLoss) {
    PatchRequest request;
    request.metric = PatchMetric::logprob, request.direction = PatchDirection::noise, request.position = 9;
    request.kinds = {PatchKind::mlp};
    const json logprob = patch_json({"--clean", clean_text, "--corrupted", corrupted_text, "--metric", "logprob",
                                     "--answer", " John", "--position", "9", "--direction", "noise", "--what", "mlp"});
    EXPECT_EQ(logprob.count("heads"), 0u);
    EXPECT_EQ(logprob.count("wrong"), 0u);
    EXPECT_EQ(logprob["direction"], "noise");
    const Patching want_logprob = core_patching(request);
    EXPECT_DOUBLE_EQ(logprob["clean_metric"].get<double>(), want_logprob.clean_metric);
    expect_grids(logprob, want_logprob);
    request.metric = PatchMetric::loss, request.direction = PatchDirection::denoise, request.position = -1;
    request.kinds = {PatchKind::heads};
    const json loss =
        patch_json({"--clean", clean_text, "--corrupted", corrupted_text, "--metric", "loss", "--what", "heads"});
    EXPECT_EQ(loss.count("answer"), 0u);
    EXPECT_EQ(loss.count("position"), 0u);
    const Patching want_loss = core_patching(request);
    EXPECT_DOUBLE_EQ(loss["corrupted_metric"].get<double>(), want_loss.corrupted_metric);
    expect_grids(loss, want_loss);
}

// --method attribution: core's estimates (backward.h) of the same texts, both directions.
TEST_F(CliPatch, AttributionWritesCoresEstimates) {
    for (const std::string direction : {"denoise", "noise"}) {
        const json got =
            patch_json({"--clean", clean_text, "--corrupted", corrupted_text, "--answer", " John", "--wrong", " Peter",
                        "--what", "heads,residual,mlp,pattern", "--method", "attribution", "--direction", direction});
        PatchRequest request;
        request.answer = model_.tokenizer.encode(" John", false).at(0);
        request.wrong = model_.tokenizer.encode(" Peter", false).at(0);
        request.direction = parse_patch_direction(direction);
        request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
        Patching want;
        attribution_patch(model_, Batch{{model_.tokenizer.encode(clean_text)}},
                          Batch{{model_.tokenizer.encode(corrupted_text)}}, {}, request, want);
        EXPECT_EQ(got["method"], "attribution");
        EXPECT_EQ(got["direction"], direction);
        EXPECT_DOUBLE_EQ(got["clean_metric"].get<double>(), want.clean_metric);
        EXPECT_DOUBLE_EQ(got["corrupted_metric"].get<double>(), want.corrupted_metric);
        ASSERT_EQ(want.grids.size(), 4u);
        expect_grids(got, want);
    }
}

TEST_F(CliPatch, RefusesABadRequestInOneLine) {
    const std::vector<std::string> texts = {"--clean", clean_text, "--corrupted", corrupted_text};
    const auto with = [&](std::vector<std::string> more) {
        more.insert(more.begin(), texts.begin(), texts.end());
        return more;
    };
    expect_error({"--clean", "a b", "--corrupted", "a b c", "--metric", "loss"},
                 "both texts need the same length: the clean text has 2 tokens, the corrupted 3");
    expect_error(with({"--answer", " Mary", "--wrong", " John"}), "--answer: ' Mary' is 2 tokens");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--method", "attribution", "--causal", "off"}),
                 "attribution patching does not support options other than");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--method", "guess"}), "--method: expected exact");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--format", "npy"}), "--format npy needs --out DIR");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--format", "csv"}), "--format: expected json or npy");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--what", "heads,neurons"}),
                 "--what: component 'neurons' is not one of");
    expect_error(with({"--metric", "accuracy"}), "metric 'accuracy' is not one of logit-diff, logprob, loss");
    expect_error(with({"--answer", " John"}), "--metric logit-diff needs --wrong");
    expect_error(with({"--metric", "loss", "--answer", " John"}), "--metric loss reads no --answer");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--position", "14"}),
                 "position 14 is outside the texts' 14 tokens");
    expect_error(with({"--answer", " John", "--wrong", " Peter", "--direction", "sideways"}),
                 "direction 'sideways' is not one of denoise, noise");
    expect_error({"--clean", "same", "--corrupted", "same", "--metric", "loss"},
                 "the clean and the corrupted text give the same loss");
}

// An encoder (BERT, a pair's two texts): core's grids of the masked-LM
// logits at the mask, each text read with its pair's second text and token
// types, exact and by attribution; its loss, pairs on a decoder and half a
// pair, each one line.
TEST_F(CliPatch, PatchesAnEncodersPairAtTheMask) {
    const auto bert_dir = dir_->path / "bert";
    test::write_encoder_checkpoint(bert_dir, test::make_encoder_checkpoint(test::encoder_spec(test::Encoder::bert)));
    const std::vector<std::string> texts = {"--model",          bert_dir.string(),
                                            "--clean",          "The cat [MASK] on the mat.",
                                            "--corrupted",      "The dog [MASK] on the mat.",
                                            "--clean-pair",     "It was happy.",
                                            "--corrupted-pair", "It was sad."};
    std::vector<std::string> args = texts;
    args.insert(args.end(), {"--answer", " sat", "--wrong", " lay", "--position", "3", "--what", "heads,residual"});
    const json got = patch_json(args);
    const Model bert = load_model(bert_dir.string());
    BatchTexts both{{"The cat [MASK] on the mat.", "The dog [MASK] on the mat."}, {"It was happy.", "It was sad."}};
    const Batch batch = text_batch(bert, both).batch;
    ASSERT_EQ(batch.token_types.size(), 2u);
    std::vector<Batch> each;
    for (int b = 0; b < 2; ++b) each.push_back(Batch{{batch.token_ids[b]}, batch.pad_id, {batch.token_types[b]}});
    EXPECT_EQ(got["token_ids"]["clean"].get<std::vector<int32_t>>(), batch.token_ids[0]);
    EXPECT_EQ(got["tokens"]["clean"][3], "[MASK]");
    PatchRequest request;
    request.answer = bert.tokenizer.encode(" sat", false).at(0),
    request.wrong = bert.tokenizer.encode(" lay", false).at(0);
    request.position = 3, request.kinds = {PatchKind::heads, PatchKind::residual};
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(bert);
    AttentionOptions options;  // the encoder's own: no causal mask
    options.causal = false;
    Patching want;
    backend->patch(each[0], each[1], options, request, want);
    EXPECT_DOUBLE_EQ(got["clean_metric"].get<double>(), want.clean_metric);
    EXPECT_DOUBLE_EQ(got["corrupted_metric"].get<double>(), want.corrupted_metric);
    expect_grids(got, want);

    std::vector<std::string> loss = texts;
    loss.insert(loss.end(), {"--metric", "loss"});
    expect_error(loss, "the loss reads each next token, which an encoder does not predict");
    expect_error(
        {"--clean", "a b", "--corrupted", "a c", "--clean-pair", "b", "--corrupted-pair", "c", "--metric", "loss"},
        "--clean-pair: sentence pairs are for encoders; this model (gpt2) is not one");
    expect_error({"--clean", "a b", "--corrupted", "a c", "--clean-pair", "b", "--metric", "loss"},
                 "--clean-pair and --corrupted-pair go together");
    std::vector<std::string> estimated = args;
    estimated.insert(estimated.end(), {"--method", "attribution"});
    const json by_attribution = patch_json(estimated);
    Patching estimate;
    attribution_patch(bert, each[0], each[1], options, request, estimate);
    EXPECT_DOUBLE_EQ(by_attribution["clean_metric"].get<double>(), estimate.clean_metric);
    expect_grids(by_attribution, estimate);
}

// An encoder–decoder (T5's layout): the texts its sources, each with its
// target; core's ten grids of every kind in every stack, under their names,
// of the loss of the clean target's next tokens, noising, exact and by
// attribution; the targets on a decoder and half the targets, each one line.
TEST_F(CliPatch, PatchesAnEncoderDecodersSourcesAndTargets) {
    const auto t5_dir = dir_->path / "t5";
    test::write_seq2seq_checkpoint(t5_dir, test::make_seq2seq_checkpoint(test::seq2seq_variant("t5")));
    const std::vector<std::string> texts = {
        "--model",   t5_dir.string(),      "--clean",  "The cat sat.", "--corrupted", "The dog sat.", "--clean-target",
        "Die Katze", "--corrupted-target", "Der Hund", "--metric",     "loss"};
    std::vector<std::string> args = texts;
    args.insert(args.end(), {"--what", "heads,residual,mlp,pattern", "--direction", "noise"});
    const json got = patch_json(args);
    const Model t5 = load_model(t5_dir.string());
    const Batch batch = text_batch(t5, {{"The cat sat.", "The dog sat."}, {}, {"Die Katze", "Der Hund"}}).batch;
    std::vector<Batch> each;
    for (int b = 0; b < 2; ++b) {
        each.push_back(Batch{{batch.token_ids[b]}, batch.pad_id});
        each.back().source_ids = {batch.source_ids[b]};
    }
    EXPECT_EQ(got["source_token_ids"]["corrupted"].get<std::vector<int32_t>>(), batch.source_ids[1]);
    EXPECT_EQ(got["source_tokens"]["clean"].size(), batch.source_ids[0].size());
    EXPECT_EQ(got["S"], batch.S());
    EXPECT_EQ(got["token_ids"]["clean"].get<std::vector<int32_t>>(), batch.token_ids[0]);
    PatchRequest request;
    request.metric = PatchMetric::loss, request.direction = PatchDirection::noise;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(t5);
    AttentionOptions options;  // T5's own: no 1/sqrt(hs)
    options.scale = own_scale(t5.config.scaled_scores);
    Patching want;
    backend->patch(each[0], each[1], options, request, want);
    EXPECT_DOUBLE_EQ(got["clean_metric"].get<double>(), want.clean_metric);
    EXPECT_DOUBLE_EQ(got["corrupted_metric"].get<double>(), want.corrupted_metric);
    EXPECT_EQ(want.grids.size(), 10u);
    expect_grids(got, want);

    expect_error({"--clean", "a b", "--corrupted", "a c", "--clean-target", "b", "--metric", "loss"},
                 "--clean-target: targets are for encoder-decoders; this model (gpt2) is not one");
    expect_error({"--clean", "a b", "--corrupted", "a c", "--corrupted-target", "b", "--metric", "loss"},
                 "--corrupted-target needs --clean-target");
    std::vector<std::string> estimated = args;
    estimated.insert(estimated.end(), {"--method", "attribution"});
    const json by_attribution = patch_json(estimated);
    Patching estimate;
    attribution_patch(t5, each[0], each[1], options, request, estimate);
    EXPECT_EQ(by_attribution["method"], "attribution");
    EXPECT_DOUBLE_EQ(by_attribution["clean_metric"].get<double>(), estimate.clean_metric);
    EXPECT_EQ(estimate.grids.size(), 10u);
    expect_grids(by_attribution, estimate);
}

// attention --effects METHOD (bare: hybrid) writes core's grid of the text
// under the options given: each cell's value, whether it is exact, the
// estimate where one was made, and the method that ran.
TEST_F(CliPatch, EffectsWriteCoresGridAndSayWhichCellsAreExact) {
    const auto model_dir = dir_->path / "wide";
    test::write_test_model(model_dir, {.n_layer = 4, .n_head = 8, .n_embd = 32, .n_positions = 32});
    const Model wide = load_model(model_dir.string());
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(wide);
    const std::string text = "When John and Peter went to the house, Peter gave a book to";
    const Batch batch{{wide.tokenizer.encode(text)}, wide.config.pad_id()};
    for (const std::optional<std::string>& word :
         {std::optional<std::string>("exact"), {"attribution"}, {"hybrid"}, std::optional<std::string>()}) {
        const EffectsMethod method = word ? parse_effects_method(*word) : EffectsMethod::hybrid;
        for (const Ablation ablation : {Ablation::zero, Ablation::mean}) {
            std::vector<std::string> args = {
                test::cli_program(), "attention",         "--model",  model_dir.string(), "--text", text,
                "--ablate-mode",     to_string(ablation), "--effects"};
            if (word) args.push_back(*word);
            const test::ProcessRun r = test::run_program(args, dir_->path);
            ASSERT_EQ(r.status, 0) << r.err;
            const json got = json::parse(r.out).at("effects");
            AttentionOptions options;
            options.ablation = ablation;
            HeadEffects want;
            backend->head_effects(batch, options, want, EffectsOf::heads, {}, method);
            const std::string at = std::string(to_string(method)) + " " + to_string(ablation);
            EXPECT_EQ(got["method"], to_string(method)) << at;
            EXPECT_EQ(got["asked"], to_string(method)) << at;
            EXPECT_EQ(got.count("fallback"), 0u) << at;
            EXPECT_EQ(got["ablation"], to_string(ablation)) << at;
            EXPECT_DOUBLE_EQ(got["loss"].get<double>(), want.loss) << at;
            ASSERT_EQ(got["loss_change"].size(), 4u) << at;
            ASSERT_EQ(got.count("estimate"), method == EffectsMethod::exact ? 0u : 1u) << at;
            int exact = 0;
            for (int l = 0; l < 4; ++l) {
                ASSERT_EQ(got["loss_change"][l].size(), 8u) << at;
                for (int h = 0; h < 8; ++h) {
                    EXPECT_EQ(got["loss_change"][l][h].get<float>(), want.loss_change_at(l, h)) << at << l << h;
                    EXPECT_EQ(got["exact"][l][h].get<bool>(), want.exact_at(l, h)) << at << l << h;
                    if (method != EffectsMethod::exact) {
                        EXPECT_EQ(got["estimate"][l][h].get<float>(), want.estimate[l * 8 + h]) << at << l << h;
                    }
                    exact += want.exact_at(l, h);
                }
            }
            EXPECT_EQ(exact, method == EffectsMethod::exact         ? 32
                             : method == EffectsMethod::attribution ? 0
                                                                    : hybrid_largest + hybrid_others)
                << at;
        }
    }
    // Heads already out: every cell exact, and why.
    const test::ProcessRun knocked = test::run_program({test::cli_program(), "attention", "--model", model_dir.string(),
                                                        "--text", text, "--ablate", "1.2", "--effects", "hybrid"},
                                                       dir_->path);
    ASSERT_EQ(knocked.status, 0) << knocked.err;
    const json fallback = json::parse(knocked.out).at("effects");
    EXPECT_EQ(fallback["method"], "exact");
    EXPECT_EQ(fallback["asked"], "hybrid");
    EXPECT_NE(fallback["fallback"].get<std::string>().find("knocked-out heads"), std::string::npos);
    EXPECT_TRUE(fallback["loss_change"][1][2].is_null());

    const auto attention_error = [&](std::vector<std::string> args, const std::string& names) {
        args.insert(args.begin(), {test::cli_program(), "attention", "--model", model_dir.string()});
        test::expect_one_line_error(test::run_program(args, dir_->path), "headscope-cli", names);
    };
    attention_error({"--text", text, "--effects", "guess"}, "--effects: effects 'guess' is not one of exact");
    attention_error({"--text", text, "--text", "a second text", "--effects"},
                    "the effects grid needs one text of at least two tokens");
}

}  // namespace
