// What the window shows of the model's predictions, on the built-in model
// (trained, so its predictions are peaked) rendered under Xvfb: the
// predictions panel's bars, token for token and pixel for pixel, and the
// logit-lens grid's colours, against the numbers core's CPU forward gives
// for the same text (top_k, lens_k).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The colours documented in app/views/predictions_view.h.
constexpr std::array<int, 3> bar_rgb = {90, 170, 240};

const std::string text = "The cat sat on the mat because it was soft.";

using test::entries;
using test::near;

class WindowPredictions : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = new Model(load_model(builtin_model));
        std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(*model_);
        ids_ = model_->tokenizer.encode_texts({text})[0];
        AttentionOptions options;
        options.top_k = 10;
        options.lens_k = 5;
        expected_ = new AttentionResult;
        backend->forward(Batch{{ids_}, model_->config.pad_id()}, options, *expected_);
    }
    static void TearDownTestSuite() {
        delete expected_;
        delete model_;
        delete dir_;
    }

    static test::WindowShot shoot(const std::string& name, std::vector<std::string> args) {
        args.insert(args.begin(), {"--text", text});
        test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        EXPECT_EQ(shot.image.width, 1280);
        return shot;
    }

    static Model* model_;
    static std::vector<int32_t> ids_;
    static AttentionResult* expected_;
    static test::TempDir* dir_;
};
Model* WindowPredictions::model_ = nullptr;
std::vector<int32_t> WindowPredictions::ids_;
AttentionResult* WindowPredictions::expected_ = nullptr;
test::TempDir* WindowPredictions::dir_ = nullptr;

// --query 3: the panel shows the ten most likely tokens after token 3, each
// bar filled p of its track, and the text's own token 4 with its rank and p.
TEST_F(WindowPredictions, PanelBarsAreTheTopTenNextTokens) {
    const int query = 3;
    const test::WindowShot shot = shoot("predictions", {"--query", std::to_string(query)});
    ASSERT_EQ(entries(shot.layout, "prediction-query").size(), 1u);
    EXPECT_EQ(entries(shot.layout, "prediction-query")[0]["query"], query);
    const json bars = entries(shot.layout, "prediction");
    ASSERT_EQ(bars.size(), 10u);
    const Prediction* want = expected_->predictions_at(0, query);
    int next_rank = 0;
    for (int k = 0; k < 10; ++k) {
        const json& bar = bars[k];
        EXPECT_EQ(bar["rank"], k + 1);
        EXPECT_EQ(bar["id"], want[k].id) << "rank " << k + 1;
        EXPECT_NEAR(bar["p"].get<double>(), want[k].p, 1e-5) << "rank " << k + 1;
        if (want[k].id == ids_[query + 1]) next_rank = k + 1;
        // The filled part of the bar's middle row: p of the track, to the pixel.
        const int x = static_cast<int>(bar["x"].get<double>()), w = static_cast<int>(bar["w"].get<double>());
        const int y = static_cast<int>(bar["y"].get<double>() + bar["h"].get<double>() / 2);
        int filled = 0;
        for (int px = x; px < x + w; ++px)
            filled += near(shot.image.at(px, y), {1.0 * bar_rgb[0], 1.0 * bar_rgb[1], 1.0 * bar_rgb[2]});
        EXPECT_NEAR(filled, want[k].p * w, 1.0) << "rank " << k + 1 << " p " << want[k].p;
    }
    EXPECT_GT(want[0].p, 0.05) << "the built-in model's predictions should be peaked";
    const json next = entries(shot.layout, "prediction-next");
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0]["id"], ids_[query + 1]);
    EXPECT_EQ(next[0]["rank"], next_rank);
    EXPECT_NEAR(next[0]["p"].get<double>(), std::exp(expected_->logprob_next[query]), 1e-5);
}

// The lens tab: a layers x positions grid, each cell the colormap of the top-1
// probability after that layer (sampled in the cell's corner, clear of its
// text); the panel beside it shows the last token, where the text ends.
TEST_F(WindowPredictions, LensGridColoursAreTheTopOneProbabilities) {
    const test::WindowShot shot = shoot("lens", {"--view", "lens"});
    const json cells = entries(shot.layout, "lens");
    const int L = model_->config.n_layer, T = static_cast<int>(ids_.size());
    ASSERT_EQ(cells.size(), size_t(L * T));
    for (const json& cell : cells) {
        const int layer = cell["layer"], t = cell["position"];
        const float p = expected_->lens_at(layer, 0, t)[0].p;
        const std::array<int, 3> got =
            shot.image.at(static_cast<int>(cell["x"].get<double>()) + 1, static_cast<int>(cell["y"].get<double>()) + 1);
        EXPECT_TRUE(near(got, test::viridis(p))) << "layer " << layer << " position " << t << " p " << p << " is "
                                                 << got[0] << "," << got[1] << "," << got[2];
    }
    EXPECT_EQ(entries(shot.layout, "prediction-query")[0]["query"], T - 1);
    EXPECT_TRUE(entries(shot.layout, "prediction-next").empty());
}

// A 190-token text on the lens tab: every position's column fits the width
// (thin, no scrolling) in the top-1 probability's colour, and the positions
// are labelled every k-th, k > 1, in order, in two rows whose labels keep
// apart.
TEST_F(WindowPredictions, LensOfALongTextShowsEveryPositionAndLabelsEveryKth) {
    std::string long_text;
    while (model_->tokenizer.encode(long_text).size() < 190)
        long_text += "The cat sat on the mat because it was soft. ";
    const std::vector<int32_t> ids = model_->tokenizer.encode(long_text);
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(*model_);
    AttentionOptions options;
    options.lens_k = 5;
    AttentionResult want;
    backend->forward(Batch{{ids}, model_->config.pad_id()}, options, want);

    const test::WindowShot shot = test::shoot_window({"--text", long_text, "--view", "lens"}, dir_->path, "lens-long");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json cells = entries(shot.layout, "lens");
    const int L = model_->config.n_layer, T = static_cast<int>(ids.size());
    ASSERT_EQ(cells.size(), size_t(L * T));
    for (const json& cell : cells) {
        EXPECT_LE(cell["x"].get<double>() + cell["w"].get<double>(), 1280) << "position " << cell["position"];
        const float p = want.lens_at(cell["layer"], 0, cell["position"])[0].p;
        const std::array<int, 3> got = test::centre(shot.image, cell);
        EXPECT_TRUE(near(got, test::viridis(p))) << "layer " << cell["layer"] << " position " << cell["position"];
    }
    const json labels = entries(shot.layout, "lens-label");
    ASSERT_GE(labels.size(), 3u);
    const int every = labels[1]["position"].get<int>() - labels[0]["position"].get<int>();
    EXPECT_GT(every, 1);
    for (size_t n = 0; n < labels.size(); ++n) {
        EXPECT_EQ(labels[n]["position"], static_cast<int>(n) * every);
        if (n < 2) continue;
        const json& before = labels[n - 2];  // the label before it in the same row
        EXPECT_LE(before["x"].get<double>() + before["w"].get<double>(), labels[n]["x"].get<double>() + 0.5)
            << "labels " << before["position"] << " and " << labels[n]["position"];
    }
}

}  // namespace
