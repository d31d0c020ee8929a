// The learned sinks in the window (gpt-oss's): in the heads grid each map
// has a one-cell column left of key 0, apart from the keys, whose cells are
// the colormap (viridis, written in tests/screenshot.cpp) of the share
// core's learned_sink_weight gives the sink in core's own forward of the same
// text, labelled "sink"; the keys' cells beside it are still the weights.
// test_window_families checks that a dense model's maps have no such column.
// The mask tab's map keeps its keys in line with the masks beside it, the
// sink's column apart on its left.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "family_models.h"
#include "headscope/compute/backend.h"
#include "headscope/inspect/heatmap.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The masked cells' hatch: two greys.
bool hatched(const std::array<int, 3>& got) {
    return got[0] == got[1] && got[1] == got[2] && (std::abs(got[0] - 41) <= 1 || std::abs(got[0] - 77) <= 1);
}

const test::LoadedFamily& gpt_oss() { return test::loaded_family("gpt_oss", test::family_variant("gpt_oss")); }

// Core's forward of `text` as the window opens the model: its sliding window on.
AttentionResult window_forward(const std::string& text) {
    const Model& model = gpt_oss().model;
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;
    options.sliding_window = model.config.sliding_window;
    AttentionResult result;
    backend->forward(Batch{model.tokenizer.encode_texts({text}), model.config.pad_id()}, options, result);
    return result;
}

TEST(WindowSinks, EachMapHasTheLearnedSinksColumnLeftOfKeyZero) {
    const test::LoadedFamily& oss = gpt_oss();
    ASSERT_TRUE(oss.model.config.attention_sinks);
    const std::string text = "The cat sat on the mat.";
    const AttentionResult result = window_forward(text);
    const int T = result.T, NH = result.NH;

    test::TempDir dir;
    const test::WindowShot shot =
        test::shoot_window({"--model", oss.dir.path.string(), "--text", text, "--layer", "1"}, dir.path, "sinks");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json sinks = test::entries(shot.layout, "sink"), keys = test::entries(shot.layout, "heads");
    ASSERT_EQ(sinks.size(), static_cast<size_t>(NH * T));
    ASSERT_EQ(keys.size(), static_cast<size_t>(NH * T * T));
    double largest = 0;
    for (const json& cell : sinks) {
        const int h = cell["head"], i = cell["query"];
        EXPECT_EQ(cell["layer"], 1);
        const double w = learned_sink_weight(result, 1, 0, h, i);
        largest = std::max(largest, w);
        const std::array<int, 3> got = test::centre(shot.image, cell);
        EXPECT_TRUE(test::near(got, test::viridis(w))) << "head " << h << " query " << i << ": sink " << w << ", drawn "
                                                       << got[0] << "," << got[1] << "," << got[2];
        // Beside its row's key 0, apart from it: the same height, a gap between.
        const json& key0 = keys[(h * T + i) * T];
        ASSERT_EQ(key0["head"], h);
        ASSERT_EQ(key0["query"], i);
        ASSERT_EQ(key0["key"], 0);
        EXPECT_NEAR(cell["y"].get<double>(), key0["y"].get<double>(), 0.5);
        EXPECT_NEAR(cell["h"].get<double>(), key0["h"].get<double>(), 0.5);
        EXPECT_GE(key0["x"].get<double>() - (cell["x"].get<double>() + cell["w"].get<double>()), 2.0);
        EXPECT_NEAR(cell["w"].get<double>(), key0["w"].get<double>(), 1.5);  // one key wide
    }
    EXPECT_GT(largest, 0.05);  // the sinks take a share a colour can tell from 0
    for (const json& cell : keys) {
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        const double w = result.row(1, 0, h, i)[j];
        const std::array<int, 3> got = test::centre(shot.image, cell);
        // A key the mask hides (causal, the window) has weight 0 exactly, and is hatched.
        EXPECT_TRUE(test::near(got, test::viridis(w)) || (w == 0 && hatched(got)))
            << "head " << h << " cell " << i << "," << j << ": " << w;
    }
    // Each map's column is labelled "sink" (heads grid maps at 1280 x 800 have the room).
    EXPECT_EQ(test::entries(shot.layout, "sink-label").size(), static_cast<size_t>(NH));
}

// The mask tab: the head's map beside the masks has cells of the masks'
// size, each key's column at the same offset from key 0 as the combined
// mask's and each row at its height; the sink's column (one cell wide, apart)
// sits left of key 0. Its cells and the keys' are the colormap of core's
// weights, as in the heads grid.
TEST(WindowSinks, TheMaskTabsMapKeepsItsKeysInLineWithTheMasks) {
    const std::string text = "The cat sat on the mat.";
    const AttentionResult result = window_forward(text);
    const int T = result.T;
    test::TempDir dir;
    const test::WindowShot shot = test::shoot_window(
        {"--model", gpt_oss().dir.path.string(), "--text", text, "--view", "mask", "--layer", "1"}, dir.path, "mask");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    json combined = json::array(), sinks = json::array();
    for (const json& cell : test::entries(shot.layout, "mask"))
        if (cell["mask"] == "combined") combined.push_back(cell);
    for (const json& cell : test::entries(shot.layout, "sink"))
        if (cell["of"] == "mask_attention") sinks.push_back(cell);
    const json keys = test::entries(shot.layout, "mask_attention");
    ASSERT_EQ(combined.size(), static_cast<size_t>(T * T));
    ASSERT_EQ(keys.size(), static_cast<size_t>(T * T));
    ASSERT_EQ(sinks.size(), static_cast<size_t>(T));
    const auto x = [](const json& cell) { return cell["x"].get<double>(); };
    for (size_t at = 0; at < keys.size(); ++at) {
        const json &key = keys[at], &mask = combined[at];
        const int i = key["query"], j = key["key"];
        ASSERT_EQ(mask["query"], i);
        ASSERT_EQ(mask["key"], j);
        EXPECT_NEAR(x(key) - x(keys[0]), x(mask) - x(combined[0]), 0.5) << "key " << j;
        EXPECT_NEAR(key["y"].get<double>(), mask["y"].get<double>(), 0.5) << "query " << i;
        const double w = result.row(1, 0, 0, i)[j];
        const std::array<int, 3> got = test::centre(shot.image, key);
        EXPECT_TRUE(test::near(got, test::viridis(w)) || (w == 0 && hatched(got)))
            << "cell " << i << "," << j << ": " << w << ", drawn " << got[0] << "," << got[1] << "," << got[2];
    }
    for (const json& sink : sinks) {
        const int i = sink["query"];
        const json& key0 = keys[i * T];
        EXPECT_NEAR(sink["w"].get<double>(), key0["w"].get<double>(), 0.5);  // one cell wide
        EXPECT_GE(x(key0) - (x(sink) + sink["w"].get<double>()), 2.0);       // apart from key 0
        EXPECT_NEAR(sink["y"].get<double>(), key0["y"].get<double>(), 0.5);
        const double w = learned_sink_weight(result, 1, 0, 0, i);
        const std::array<int, 3> got = test::centre(shot.image, sink);
        EXPECT_TRUE(test::near(got, test::viridis(w)))
            << "query " << i << ": sink " << w << ", drawn " << got[0] << "," << got[1] << "," << got[2];
    }
}

}  // namespace
