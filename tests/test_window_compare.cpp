// Two texts in the window, on the built-in model (and a BERT-layout test
// encoder's diff and fills) under Xvfb, against core's
// forwards and patching of the same texts (which test_patching checks
// against the double-precision references): the diff view's cells are B - A
// through the diverging colours on the scale of the largest |B - A|, the
// compare text's predictions are its forward's, the patching tab's grids and
// metric values are core's (with the defaults, and with the metric and
// direction the settings saved), the estimate beside them is core's
// attribution patching, an encoder's grids and an encoder–decoder's (a
// compare source with its target) are core's patching of them, and
// texts of different lengths give the line that says the diff and patching
// need equal lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "encoder_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/text_batch.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"
#include "seq2seq_models.h"
#include "state/settings.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The texts: of 16 tokens each on the built-in tokenizer (" Paul" is one
// token, as " John" is), and one of 17 (" Mary" is two).
const std::string clean_text = "When Mary and John went to the store, John gave a drink to";
const std::string corrupted_text = "When Mary and John went to the store, Paul gave a drink to";
const std::string longer_text = "When Mary and John went to the store, Mary gave a drink to";

// The diverging colours app/state/colormap.h documents: blue below zero, red above, dark grey at zero.
constexpr std::array<double, 3> zero_rgb = {51, 51, 59}, negative_rgb = {64, 128, 242}, positive_rgb = {235, 77, 56};

std::array<double, 3> diverging(double v) {
    const double t = std::min(1.0, std::abs(v));
    const std::array<double, 3>& end = v < 0 ? negative_rgb : positive_rgb;
    std::array<double, 3> rgb{};
    for (int c = 0; c < 3; ++c) rgb[c] = zero_rgb[c] + (end[c] - zero_rgb[c]) * t;
    return rgb;
}

using test::centre;
using test::entries;

// Every cell of `want`'s grids of `stack` (a decoder's own, an
// encoder–decoder's shown) in the shot: its value, the scale the largest
// |value| of the grid and of `beside`'s (the estimate drawn beside it, on one
// scale), its colour the diverging colour of value / scale.
void expect_grids_drawn(const test::WindowShot& shot, const Patching& want, PatchStack stack = PatchStack::own,
                        const Patching* beside = nullptr) {
    for (size_t g = 0; g < want.grids.size(); ++g) {
        const PatchGrid& grid = want.grids[g];
        if (grid.stack != stack) continue;
        const json cells = entries(shot.layout, "patching-" + patch_grid_name(grid.kind, grid.stack));
        ASSERT_EQ(cells.size(), size_t(grid.rows) * grid.cols) << to_string(grid.kind);
        const double scale = cells[0]["scale"];
        double largest = 0;
        for (double v : grid.cells) largest = std::max(largest, std::abs(v));
        for (double v : beside ? beside->grids[g].cells : std::vector<double>{})
            largest = std::max(largest, std::abs(v));
        EXPECT_NEAR(scale, largest, 1e-5) << to_string(grid.kind);
        for (const json& cell : cells) {
            const int l = cell["layer"], c = cell["column"];
            const double v = cell["values"][l * grid.cols + c];
            EXPECT_NEAR(v, grid.at(l, c), 1e-5) << to_string(grid.kind) << " L" << l << " column " << c;
            EXPECT_TRUE(test::near(centre(shot.image, cell), diverging(v / scale), 2.5))
                << to_string(grid.kind) << " L" << l << " column " << c;
        }
    }
}

class WindowCompare : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = new Model(load_model(builtin_model));
        backend_ = make_cpu_backend().release();
        backend_->load_weights(*model_);
    }
    static void TearDownTestSuite() {
        delete backend_;
        delete model_;
        delete dir_;
    }

    static test::WindowShot shoot(const std::string& name, const std::string& compare, std::vector<std::string> args) {
        args.insert(args.begin(), {"--text", clean_text, "--compare", compare});
        test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        return shot;
    }
    static std::vector<int32_t> ids(const std::string& text) { return model_->tokenizer.encode_texts({text})[0]; }
    static AttentionResult forward(const std::string& text) {
        AttentionOptions options;
        options.top_k = 10;
        AttentionResult result;
        backend_->forward(Batch{{ids(text)}, model_->config.pad_id()}, options, result);
        return result;
    }

    static Model* model_;
    static Backend* backend_;
    static test::TempDir* dir_;
};
Model* WindowCompare::model_ = nullptr;
Backend* WindowCompare::backend_ = nullptr;
test::TempDir* WindowCompare::dir_ = nullptr;

// --diff with L1 H2 large: each visible cell is the diverging colour of
// (B - A) / scale, the scale the largest |B - A| of every map, written here
// again; the hidden keys hatched; the legend says the scale; the compare
// text's top 5 beside the text's are its forward's.
TEST_F(WindowCompare, TheDiffViewDrawsBMinusAOfEveryMap) {
    ASSERT_EQ(ids(clean_text).size(), ids(corrupted_text).size());
    const test::WindowShot shot = shoot("diff", corrupted_text, {"--diff", "--layer", "1", "--head", "2"});
    const AttentionResult a = forward(clean_text), b = forward(corrupted_text);
    const int T = a.T;
    double largest = 0;
    for (int l = 0; l < int(a.layers.size()); ++l)
        for (int h = 0; h < a.NH; ++h)
            for (int i = 0; i < T; ++i)
                for (int j = 0; j <= i; ++j)
                    largest = std::max(largest, double(std::abs(b.row(l, 0, h, i)[j] - a.row(l, 0, h, i)[j])));
    ASSERT_GT(largest, 0.01) << "the texts differ, and so do some maps";
    const json cells = entries(shot.layout, "large");
    ASSERT_EQ(cells.size(), size_t(T) * T);
    EXPECT_NEAR(cells[0]["diff_scale"].get<double>(), largest, 1e-5);
    int checked = 0, coloured = 0;
    for (const json& cell : cells) {
        const int i = cell["query"], j = cell["key"];
        const std::array<int, 3> got = centre(shot.image, cell);
        if (j > i) {  // hatched: grey, not a colour of the diff
            EXPECT_LT(std::abs(got[0] - got[2]), 20) << "query " << i << " key " << j;
            continue;
        }
        const double d = b.row(1, 0, 2, i)[j] - a.row(1, 0, 2, i)[j];
        EXPECT_TRUE(test::near(got, diverging(d / largest), 2.5))
            << "query " << i << " key " << j << " B - A " << d << " got " << got[0] << "," << got[1] << "," << got[2];
        ++checked;
        coloured += std::abs(d) > 0.1 * largest;
    }
    EXPECT_EQ(checked, T * (T + 1) / 2);
    EXPECT_GT(coloured, 3) << "some cells far from zero";
    const json legend = entries(shot.layout, "diff-legend");
    ASSERT_EQ(legend.size(), 1u);
    EXPECT_NEAR(legend[0]["scale"].get<double>(), largest, 1e-5);
    const json predictions = entries(shot.layout, "compare-prediction");
    ASSERT_EQ(predictions.size(), 10u);
    for (const json& p : predictions) {
        const AttentionResult& run = p["text"] == "A" ? a : b;
        const Prediction& want = run.predictions_at(0, T - 1)[p["rank"].get<int>() - 1];
        EXPECT_EQ(p["id"], want.id) << p;
        EXPECT_NEAR(p["p"].get<double>(), want.p, 1e-5) << p;
    }
    EXPECT_TRUE(entries(shot.layout, "compare-lengths").empty());
}

// --compute-patching: the metric's tokens are the clean run's top token and
// the corrupted run's (else the clean run's second); the metric values and
// every cell of the four grids are core's patching of the two texts, each
// cell the diverging colour of its value / the grid's largest.
TEST_F(WindowCompare, ThePatchingGridsAreCoresPatching) {
    const test::WindowShot shot = shoot("patching", corrupted_text, {"--view", "patching", "--compute-patching"});
    const AttentionResult a = forward(clean_text), b = forward(corrupted_text);
    const int T = a.T;
    const json metric = entries(shot.layout, "patch-metric");
    ASSERT_EQ(metric.size(), 1u);
    const int32_t answer = a.predictions_at(0, T - 1)[0].id, corrupted_top = b.predictions_at(0, T - 1)[0].id;
    const int32_t wrong = corrupted_top != answer ? corrupted_top : a.predictions_at(0, T - 1)[1].id;
    EXPECT_EQ(metric[0]["answer"], answer);
    EXPECT_EQ(metric[0]["wrong"], wrong);
    EXPECT_EQ(metric[0]["position"], T - 1);
    EXPECT_EQ(metric[0]["direction"], "denoise");
    PatchRequest request;
    request.answer = answer, request.wrong = wrong;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    Patching want;
    const int32_t pad = model_->config.pad_id();
    backend_->patch(Batch{{ids(clean_text)}, pad}, Batch{{ids(corrupted_text)}, pad}, {}, request, want);
    EXPECT_NEAR(metric[0]["clean"].get<double>(), want.clean_metric, 1e-6);
    EXPECT_NEAR(metric[0]["corrupted"].get<double>(), want.corrupted_metric, 1e-6);
    ASSERT_EQ(want.grids.size(), 4u);
    expect_grids_drawn(shot, want);
}

// --patch-method both: each kind's exact grid is core's patching and the
// grid beside it core's attribution estimate, both drawn on one scale, the
// largest magnitude of the two; with a head knocked out the backward
// refuses, and the exact grids come with the one line that says why.
TEST_F(WindowCompare, TheEstimateIsBesideTheExactValues) {
    const test::WindowShot shot =
        shoot("both", corrupted_text, {"--view", "patching", "--compute-patching", "--patch-method", "both"});
    const json metric = entries(shot.layout, "patch-metric");
    ASSERT_EQ(metric.size(), 1u);
    PatchRequest request;
    request.answer = metric[0]["answer"], request.wrong = metric[0]["wrong"];
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    Patching exact, estimate;
    const int32_t pad = model_->config.pad_id();
    backend_->patch(Batch{{ids(clean_text)}, pad}, Batch{{ids(corrupted_text)}, pad}, {}, request, exact);
    attribution_patch(*model_, Batch{{ids(clean_text)}}, Batch{{ids(corrupted_text)}}, {}, request, estimate);
    for (size_t k = 0; k < 4; ++k) {
        const std::string kind = to_string(exact.grids[k].kind);
        double largest = 0;
        for (const Patching* grids : {&exact, &estimate})
            for (double v : grids->grids[k].cells) largest = std::max(largest, std::abs(v));
        for (const auto& [name, want] : {std::pair{"patching-" + kind, &exact.grids[k]},
                                         std::pair{"patching-" + kind + "-estimate", &estimate.grids[k]}}) {
            const json cells = entries(shot.layout, name);
            ASSERT_EQ(cells.size(), want->cells.size()) << name;
            for (const json& cell : cells) {
                const int l = cell["layer"], c = cell["column"];
                EXPECT_NEAR(cell["scale"].get<double>(), largest, 1e-5) << name;
                const double v = cell["values"][l * want->cols + c];
                EXPECT_NEAR(v, want->at(l, c), 1e-5) << name << " L" << l << " column " << c;
                EXPECT_TRUE(test::near(centre(shot.image, cell), diverging(v / largest), 2.5))
                    << name << " L" << l << " column " << c;
            }
        }
        double apart = 0;  // the two grids differ, so that each check tells them apart
        for (size_t i = 0; i < exact.grids[k].cells.size(); ++i)
            apart = std::max(apart, std::abs(exact.grids[k].cells[i] - estimate.grids[k].cells[i]));
        EXPECT_GT(apart, 1e-3) << kind;
    }
    EXPECT_TRUE(entries(shot.layout, "patch-estimate-refusal").empty());

    const test::WindowShot refused =
        shoot("both-refused", corrupted_text,
              {"--view", "patching", "--compute-patching", "--patch-method", "both", "--ablate", "0.1"});
    const json line = entries(refused.layout, "patch-estimate-refusal");
    ASSERT_EQ(line.size(), 1u);
    EXPECT_EQ(line[0]["text"],
              "no estimate: attribution patching does not support options other than the model's own mask, heads "
              "and split, or knocked-out heads yet");
    EXPECT_EQ(entries(refused.layout, "patching-heads").size(), exact.grids[0].cells.size());
    EXPECT_TRUE(entries(refused.layout, "patching-heads-estimate").empty());
}

// The patching tab's metric and direction as the settings saved them (the
// loss, noising): the metric values and the heads grid are core's for them.
TEST_F(WindowCompare, TheSavedMetricAndDirectionArePatched) {
    const std::filesystem::path config = dir_->path / "config";
    Settings saved;
    saved.patch_metric = PatchMetric::loss;
    saved.patch_direction = PatchDirection::noise;
    write_settings(config / "headscope" / "settings.json", saved);
    const test::ScopedEnv env("XDG_CONFIG_HOME", config.string());
    const test::WindowShot shot =
        shoot("saved", corrupted_text, {"--view", "patching", "--compute-patching", "--settings", "on"});
    const json metric = entries(shot.layout, "patch-metric");
    ASSERT_EQ(metric.size(), 1u);
    EXPECT_EQ(metric[0]["metric"], "loss");
    EXPECT_EQ(metric[0]["direction"], "noise");
    PatchRequest request;
    request.metric = PatchMetric::loss, request.direction = PatchDirection::noise;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    Patching want;
    const int32_t pad = model_->config.pad_id();
    backend_->patch(Batch{{ids(clean_text)}, pad}, Batch{{ids(corrupted_text)}, pad}, {}, request, want);
    EXPECT_NEAR(metric[0]["clean"].get<double>(), want.clean_metric, 1e-6);
    EXPECT_NEAR(metric[0]["corrupted"].get<double>(), want.corrupted_metric, 1e-6);
    const json cells = entries(shot.layout, "patching-heads");
    ASSERT_EQ(cells.size(), size_t(want.grids[0].rows) * want.grids[0].cols);
    for (const json& cell : cells) {
        const int l = cell["layer"], h = cell["column"];
        EXPECT_NEAR(cell["values"][l * want.grids[0].cols + h].get<double>(), want.grids[0].at(l, h), 1e-5)
            << "L" << l << " H" << h;
    }
}

// An encoder's compare text (without a pair): the bidirectional maps' diff
// is core's B - A in every cell, and the panel's fills of both texts at the
// mask are their forwards'.
TEST_F(WindowCompare, AnEncodersDiffAndFillsAreCores) {
    const std::filesystem::path bert = dir_->path / "bert";
    test::write_encoder_checkpoint(bert, test::make_encoder_checkpoint(test::encoder_spec(test::Encoder::bert)));
    const Model encoder = load_model(bert.string());
    const std::string a_text = "The cat [MASK] on the mat.", b_text = "The mat [MASK] on the cat.";
    std::unique_ptr<Backend> cpu = make_cpu_backend();
    cpu->load_weights(encoder);
    AttentionOptions options;
    options.causal = false, options.top_k = 10;
    AttentionResult a, b;
    const std::vector<int32_t> a_ids = encoder.tokenizer.encode_texts({a_text})[0];
    const std::vector<int32_t> b_ids = encoder.tokenizer.encode_texts({b_text})[0];
    ASSERT_EQ(a_ids.size(), b_ids.size());
    cpu->forward(Batch{{a_ids}, encoder.config.pad_id()}, options, a);
    cpu->forward(Batch{{b_ids}, encoder.config.pad_id()}, options, b);
    const test::WindowShot shot =
        test::shoot_window({"--model", bert.string(), "--text", a_text, "--compare", b_text, "--diff", "--head", "0"},
                           dir_->path, "encoder");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const int T = a.T;
    double largest = 0;
    for (int l = 0; l < int(a.layers.size()); ++l)
        for (int h = 0; h < a.NH; ++h)
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < T; ++j)
                    largest = std::max(largest, double(std::abs(b.row(l, 0, h, i)[j] - a.row(l, 0, h, i)[j])));
    ASSERT_GT(largest, 0.01) << "the words swapped, the maps differ";
    const json cells = entries(shot.layout, "large");
    ASSERT_EQ(cells.size(), size_t(T) * T);
    EXPECT_NEAR(cells[0]["diff_scale"].get<double>(), largest, 1e-5);
    for (const json& cell : cells) {
        const int i = cell["query"], j = cell["key"];
        const double d = b.row(0, 0, 0, i)[j] - a.row(0, 0, 0, i)[j];
        EXPECT_TRUE(test::near(centre(shot.image, cell), diverging(d / largest), 2.5)) << "query " << i << " key " << j;
    }
    const json query = entries(shot.layout, "prediction-query");
    ASSERT_EQ(query.size(), 1u);
    const int t = query[0]["query"];
    ASSERT_EQ(encoder.tokenizer.token_bytes(a_ids[t]), "[MASK]");
    const json fills = entries(shot.layout, "compare-prediction");
    ASSERT_EQ(fills.size(), 10u);
    for (const json& p : fills) {
        const Prediction& want = (p["text"] == "A" ? a : b).predictions_at(0, t)[p["rank"].get<int>() - 1];
        EXPECT_EQ(p["id"], want.id) << p;
        EXPECT_NEAR(p["p"].get<double>(), want.p, 1e-5) << p;
    }
}

// An encoder's patching tab (BERT, no pair), exact and estimated: the grids
// of the masked-LM logits at the metric's position are core's patching and
// attribution patching with the encoder's own options (no causal mask).
TEST_F(WindowCompare, AnEncodersPatchingGridsAreCores) {
    const std::filesystem::path bert = dir_->path / "bert_patching";
    test::write_encoder_checkpoint(bert, test::make_encoder_checkpoint(test::encoder_spec(test::Encoder::bert)));
    const Model encoder = load_model(bert.string());
    const std::string a_text = "The cat [MASK] on the mat.", b_text = "The dog [MASK] on the mat.";
    const test::WindowShot shot =
        test::shoot_window({"--model", bert.string(), "--text", a_text, "--compare", b_text, "--view", "patching",
                            "--compute-patching", "--patch-method", "both"},
                           dir_->path, "encoder-patching");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json metric = entries(shot.layout, "patch-metric");
    ASSERT_EQ(metric.size(), 1u);
    PatchRequest request;
    request.answer = metric[0]["answer"], request.wrong = metric[0]["wrong"], request.position = metric[0]["position"];
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    std::unique_ptr<Backend> cpu = make_cpu_backend();
    cpu->load_weights(encoder);
    AttentionOptions options;
    options.causal = false;
    const std::vector<int32_t> a = encoder.tokenizer.encode_texts({a_text})[0],
                               b = encoder.tokenizer.encode_texts({b_text})[0];
    Patching exact, estimate;
    cpu->patch(Batch{{a}, encoder.config.pad_id()}, Batch{{b}, encoder.config.pad_id()}, options, request, exact);
    attribution_patch(encoder, Batch{{a}}, Batch{{b}}, options, request, estimate);
    EXPECT_NEAR(metric[0]["clean"].get<double>(), exact.clean_metric, 1e-6);
    EXPECT_NEAR(metric[0]["corrupted"].get<double>(), exact.corrupted_metric, 1e-6);
    EXPECT_TRUE(entries(shot.layout, "patch-estimate-refusal").empty());
    for (size_t k = 0; k < 4; ++k) {
        const std::string kind = to_string(exact.grids[k].kind);
        for (const auto& [name, want] : {std::pair{"patching-" + kind, &exact.grids[k]},
                                         std::pair{"patching-" + kind + "-estimate", &estimate.grids[k]}}) {
            const json cells = entries(shot.layout, name);
            ASSERT_EQ(cells.size(), want->cells.size()) << name;
            for (const json& cell : cells) {
                const int l = cell["layer"], c = cell["column"];
                EXPECT_NEAR(cell["values"][l * want->cols + c].get<double>(), want->at(l, c), 1e-5)
                    << name << " L" << l << " column " << c;
            }
        }
    }
}

// An encoder–decoder's patching tab (BART's layout: a compare source with
// its target), exact and estimated: the decoder's grids drawn (the stack
// shown first) are core's patching of the sources and targets, pixel for
// pixel, the estimates core's attribution patching; the other stacks' grids are not drawn.
TEST_F(WindowCompare, AnEncoderDecodersPatchingGridsAreCores) {
    const std::filesystem::path bart = dir_->path / "bart_patching";
    test::write_seq2seq_checkpoint(bart, test::make_seq2seq_checkpoint(test::seq2seq_variant("bart")));
    const Model seq2seq = load_model(bart.string());
    const std::vector<std::string> sources = {"The cat sat on the mat.", "The dog sat on the mat."},
                                   targets = {"Die Katze", "Der Hund"};
    const test::WindowShot shot = test::shoot_window(
        {"--model", bart.string(), "--text", sources[0], "--target", targets[0], "--compare", sources[1],
         "--compare-target", targets[1], "--view", "patching", "--compute-patching", "--patch-method", "both"},
        dir_->path, "seq2seq-patching");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json metric = entries(shot.layout, "patch-metric");
    ASSERT_EQ(metric.size(), 1u);
    PatchRequest request;
    request.answer = metric[0]["answer"], request.wrong = metric[0]["wrong"], request.position = metric[0]["position"];
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const Batch both = text_batch(seq2seq, {sources, {}, targets}).batch;
    std::vector<Batch> each;
    for (int b = 0; b < 2; ++b) each.push_back(Batch{{both.token_ids[b]}, both.pad_id, {}, {both.source_ids[b]}});
    std::unique_ptr<Backend> cpu = make_cpu_backend();
    cpu->load_weights(seq2seq);
    Patching exact, estimate;
    cpu->patch(each[0], each[1], {}, request, exact);
    attribution_patch(seq2seq, each[0], each[1], {}, request, estimate);
    EXPECT_NEAR(metric[0]["clean"].get<double>(), exact.clean_metric, 1e-6);
    EXPECT_NEAR(metric[0]["corrupted"].get<double>(), exact.corrupted_metric, 1e-6);
    ASSERT_EQ(exact.grids.size(), 10u);
    expect_grids_drawn(shot, exact, PatchStack::decoder, &estimate);
    for (const PatchGrid& grid : estimate.grids) {
        const std::string name = "patching-" + patch_grid_name(grid.kind, grid.stack) + "-estimate";
        const json cells = entries(shot.layout, name);
        ASSERT_EQ(cells.size(), grid.stack == PatchStack::decoder ? grid.cells.size() : 0u) << name;
        for (const json& cell : cells) {
            const int l = cell["layer"], c = cell["column"];
            EXPECT_NEAR(cell["values"][l * grid.cols + c].get<double>(), grid.at(l, c), 1e-5) << name << l << c;
        }
    }
}

// A compare text of another length: the predictions panel and the patching
// tab each say why, the diff is not drawn, and no patching starts.
TEST_F(WindowCompare, DifferentLengthsGiveTheLine) {
    ASSERT_NE(ids(clean_text).size(), ids(longer_text).size());
    const test::WindowShot heads = shoot("lengths", longer_text, {"--diff", "--layer", "1", "--head", "2"});
    const json line = entries(heads.layout, "compare-lengths");
    ASSERT_EQ(line.size(), 1u);
    EXPECT_EQ(line[0]["text"], "B has 17 tokens, the text 16: the diff view and patching need equal lengths");
    const json cells = entries(heads.layout, "large");
    ASSERT_FALSE(cells.empty());
    EXPECT_FALSE(cells[0].contains("diff_scale")) << "the maps are the text's own";
    EXPECT_TRUE(entries(heads.layout, "diff-legend").empty());
    EXPECT_EQ(entries(heads.layout, "compare-prediction").size(), 10u) << "side by side";

    const test::WindowShot tab = shoot("lengths-patching", longer_text, {"--view", "patching", "--compute-patching"});
    const json refusal = entries(tab.layout, "patching-lengths");
    ASSERT_EQ(refusal.size(), 1u);
    EXPECT_NE(refusal[0]["text"].get<std::string>().find("needs equal lengths: B has 17 tokens, the text 16"),
              std::string::npos)
        << refusal[0]["text"];
    EXPECT_TRUE(entries(tab.layout, "patch-metric").empty());
}

}  // namespace
