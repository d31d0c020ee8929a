// The learned sinks in the window (gpt-oss's): in the heads grid each map
// has a one-cell column left of key 0, apart from the keys, whose cells are
// the colormap (viridis, written in tests/screenshot.cpp) of the share
// core's learned_sink_weight gives the sink in core's own forward of the same
// text, labelled "sink"; the keys' cells beside it are still the weights.
// test_window_families checks that a dense model's maps have no such column.
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

TEST(WindowSinks, EachMapHasTheLearnedSinksColumnLeftOfKeyZero) {
    const test::LoadedFamily& oss = test::loaded_family("gpt_oss", test::family_variant("gpt_oss"));
    const Model& model = oss.model;
    ASSERT_TRUE(model.config.attention_sinks);
    const std::string text = "The cat sat on the mat.";
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;  // as the window opens the model: its sliding window on
    options.sliding_window = model.config.sliding_window;
    AttentionResult result;
    backend->forward(Batch{model.tokenizer.encode_texts({text}), model.config.pad_id()}, options, result);
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

}  // namespace
