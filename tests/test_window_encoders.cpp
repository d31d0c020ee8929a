// The window on an encoder (a BERT test checkpoint, encoder_models.h) as a
// user sees it under Xvfb: it opens with the model's own bidirectional mask,
// a sentence pair's maps are the CLI's pixel for pixel (the keys after each
// query drawn, not hatched), the pair box stands where a decoder's
// generation controls are, and the predictions panel fills the [MASK] with
// the CLI's top token; forcing the causal mask on hatches the upper triangle;
// the patching tab of a pair against a compare text with a pair of its own
// is core's exact and attribution patching of both, token types and all.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "encoder_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/text_batch.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

class WindowEncoders : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_encoder_checkpoint(dir_->path / "bert",
                                       test::make_encoder_checkpoint(test::encoder_spec(test::Encoder::bert)));
        test::write_encoder_checkpoint(dir_->path / "modernbert",
                                       test::make_encoder_checkpoint(test::encoder_spec(test::Encoder::modernbert)));
    }
    static void TearDownTestSuite() { delete dir_; }

    static std::string model() { return (dir_->path / "bert").string(); }

    static json cli(std::vector<std::string> args) {
        args.insert(args.begin(),
                    {test::cli_program(), "attention", "--model", model(), "--text", text_, "--text-pair", pair_});
        const test::ProcessRun run = test::run_program(args, dir_->path);
        EXPECT_EQ(run.status, 0) << run.err;
        return run.status == 0 ? json::parse(run.out) : json();
    }

    static test::WindowShot shoot(const std::string& name, std::vector<std::string> args) {
        args.insert(args.begin(), {"--model", model(), "--text", text_, "--text-pair", pair_});
        test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        return shot;
    }

    static test::TempDir* dir_;
    static constexpr const char* text_ = "The cat [MASK] on the mat.";
    static constexpr const char* pair_ = "It was soft.";
};
test::TempDir* WindowEncoders::dir_ = nullptr;

TEST_F(WindowEncoders, APairsMapsAreTheClisBidirectionalOnes) {
    const test::WindowShot shot = shoot("bert-pair", {"--layer", "1"});
    const json expected = cli({});
    const json cells = test::entries(shot.layout, "heads");
    ASSERT_FALSE(cells.empty());
    EXPECT_EQ(test::check_heatmap_cells(shot.image, cells, expected, false), 0);
    bool pair_box = false, next_token = false;
    for (const json& control : test::entries(shot.layout, "control")) {
        pair_box |= control["name"] == "text pair";
        next_token |= control["name"] == "next token";
    }
    EXPECT_TRUE(pair_box);
    EXPECT_FALSE(next_token) << "an encoder does not generate";
}

// The compare line's pair field (--compare-pair): each text read with its
// pair's second text and token types, the grids of both methods core's.
TEST_F(WindowEncoders, APairsPatchingGridsAreCores) {
    const std::string b_text = "The dog [MASK] on the mat.", b_pair = "It was hard.";
    const test::WindowShot shot =
        shoot("bert-pair-patching", {"--compare", b_text, "--compare-pair", b_pair, "--view", "patching",
                                     "--compute-patching", "--patch-method", "both"});
    const json metric = test::entries(shot.layout, "patch-metric");
    ASSERT_EQ(metric.size(), 1u);
    const Model bert = load_model(model());
    PatchRequest request;
    request.answer = metric[0]["answer"], request.wrong = metric[0]["wrong"], request.position = metric[0]["position"];
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const Batch both = text_batch(bert, {{text_, b_text}, {pair_, b_pair}}).batch;
    ASSERT_EQ(both.token_types.size(), 2u);
    const Batch a{{both.token_ids[0]}, both.pad_id, {both.token_types[0]}},
        b{{both.token_ids[1]}, both.pad_id, {both.token_types[1]}};
    std::unique_ptr<Backend> cpu = make_cpu_backend();
    cpu->load_weights(bert);
    AttentionOptions options;  // the encoder's own: no causal mask
    options.causal = false;
    Patching exact, estimate;
    cpu->patch(a, b, options, request, exact);
    attribution_patch(bert, a, b, options, request, estimate);
    EXPECT_NEAR(metric[0]["clean"].get<double>(), exact.clean_metric, 1e-6);
    for (const Patching* want : {&exact, &estimate})
        for (const PatchGrid& grid : want->grids) {
            const std::string name =
                std::string("patching-") + to_string(grid.kind) + (want == &estimate ? "-estimate" : "");
            const json cells = test::entries(shot.layout, name);
            ASSERT_EQ(cells.size(), grid.cells.size()) << name;
            for (const json& cell : cells) {
                const int l = cell["layer"], c = cell["column"];
                EXPECT_NEAR(cell["values"][l * grid.cols + c].get<double>(), grid.at(l, c), 1e-5) << name << l << c;
            }
        }
}

TEST_F(WindowEncoders, ThePredictionsFillTheMask) {
    const test::WindowShot shot = shoot("bert-fill", {});
    const json expected = cli({"--top-k", "1", "--layers", "0"});
    const std::vector<int32_t> ids = expected["token_ids"][0];
    const int mask = static_cast<int>(std::find(ids.begin(), ids.end(), 4) - ids.begin());
    const json query = test::entries(shot.layout, "prediction-query");
    ASSERT_EQ(query.size(), 1u);
    EXPECT_EQ(query[0]["query"], mask) << "the panel opens on the mask";
    const json fills = test::entries(shot.layout, "mask-fill");
    ASSERT_EQ(fills.size(), 1u);
    EXPECT_EQ(fills[0]["position"], mask);
    EXPECT_EQ(fills[0]["id"], expected["predictions"][0][mask][0]["id"]);
}

// The start options are checked as the CLI checks them: a pair for each
// text; a query counts the tokens shown, the pair's second text's too.
TEST_F(WindowEncoders, StartOptionsAreCheckedAsTheClisAgainstWhatIsShown) {
    test::expect_one_line_error(
        test::run_window({"--model", model(), "--text", text_, "--text-pair", pair_, "--text-pair", pair_,
                          "--screenshot", (dir_->path / "bad.png").string()},
                         dir_->path),
        "headscope", "--text-pair: 2 given for 1 texts (one for each --text)");
    const int tokens = static_cast<int>(cli({})["token_ids"][0].size());
    const test::WindowShot shot = shoot("bert-pair-query", {"--query", std::to_string(tokens - 2)});
    const json query = test::entries(shot.layout, "prediction-query");
    ASSERT_EQ(query.size(), 1u);
    EXPECT_EQ(query[0]["query"], tokens - 2) << "a query in the second text";
}

// BertViz's sentence filter: A -> B draws the first text's queries over the
// second text's keys, in the CLI's colours, and hatches every other cell.
TEST_F(WindowEncoders, TheSentenceFilterKeepsOneTextsQueriesOverTheOthersKeys) {
    const test::WindowShot shot = shoot("bert-a-b", {"--sentences", "a-b"});
    const json expected = cli({"--layers", "0"});
    const std::vector<int32_t> types = expected["token_type_ids"][0];
    const int second = static_cast<int>(std::find(types.begin(), types.end(), 1) - types.begin());
    int drawn = 0, hatched = 0;
    for (const json& cell : test::entries(shot.layout, "heads")) {
        const int i = cell["query"], j = cell["key"];
        const std::array<int, 3> got =
            shot.image.at(static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2),
                          static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2));
        if (i < second && j >= second) {
            ++drawn;
            const std::array<double, 3> want =
                test::viridis(expected["attention"][0][0][cell["head"].get<int>()][i][j]);
            for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 2.0) << i << "," << j;
        } else {
            ++hatched;
            EXPECT_TRUE(got[0] == got[1] && got[1] == got[2]) << "cell " << i << "," << j << " not hatched";
        }
    }
    EXPECT_GT(drawn, 0);
    EXPECT_GT(hatched, drawn);
}

// ModernBERT's local layer 1 sees keys less than 3 tokens away, both ways
// (local_attention 4); its global layer 0 every key. The mask tab's window
// and combined panels say so cell by cell, in the allowed and masked colours.
TEST_F(WindowEncoders, ModernBertsWindowReachesBothWaysOnItsLocalLayers) {
    const std::string modernbert = (dir_->path / "modernbert").string();
    for (int layer : {0, 1}) {
        SCOPED_TRACE("layer " + std::to_string(layer));
        const test::WindowShot shot = test::shoot_window(
            {"--model", modernbert, "--text", text_, "--view", "mask", "--layer", std::to_string(layer)}, dir_->path,
            "modernbert-mask-" + std::to_string(layer));
        ASSERT_EQ(shot.run.status, 0) << shot.run.err;
        int window = 0, blocked = 0;
        for (const json& cell : test::entries(shot.layout, "mask")) {
            if (cell["mask"] != "window" && cell["mask"] != "combined") continue;
            const int i = cell["query"], j = cell["key"];
            const bool allowed = layer == 0 || std::abs(i - j) < 3;
            const std::array<int, 3> got =
                shot.image.at(static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2),
                              static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2));
            const std::array<int, 3> want = allowed ? std::array{236, 190, 72} : std::array{52, 58, 70};
            for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 2) << cell["mask"] << " " << i << "," << j;
            window += cell["mask"] == "window";
            blocked += !allowed;
        }
        EXPECT_GT(window, 0) << "the window panel is drawn for a model with a window";
        EXPECT_EQ(blocked > 0, layer == 1);
        // Beside the layer slider: the shown layer's kind.
        const json kind = test::entries(shot.layout, "layer-kind");
        ASSERT_EQ(kind.size(), 1u);
        EXPECT_EQ(kind[0]["local"], layer == 1);
    }
}

// The model tab names each row's kind where they differ: ModernBERT's layer 0
// is global, and every global_attn_every_n_layers-th (3) from it; the others local.
TEST_F(WindowEncoders, TheModelTabNamesEachLayerLocalOrGlobal) {
    const test::WindowShot shot =
        test::shoot_window({"--model", (dir_->path / "modernbert").string(), "--text", text_, "--view", "model"},
                           dir_->path, "modernbert-model");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json rows = test::entries(shot.layout, "model-layer");
    ASSERT_EQ(rows.size(), 3u);
    for (const json& row : rows) {
        const int l = row["layer"];
        EXPECT_EQ(row["text"], "L" + std::to_string(l) + (l % 3 == 0 ? " global" : " local"));
    }
}

TEST_F(WindowEncoders, TheCausalMaskForcedOnHatchesTheKeysAfter) {
    const test::WindowShot shot = shoot("bert-causal", {"--causal", "on"});
    const json expected = cli({"--causal", "on"});
    const int T = expected["seq_len"];
    EXPECT_EQ(test::check_heatmap_cells(shot.image, test::entries(shot.layout, "heads"), expected, true),
              4 * T * (T - 1) / 2);
}

}  // namespace
