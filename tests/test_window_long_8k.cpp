// An 8,192-token document in the window (issue 44's screenshot test): a
// 2-layer, 4-head, 64-wide GPT-2-layout model of 8,192 positions and a text
// filling them, in one screenshot run of 1280 x 800 zoomed to 16 x 16 single
// cells of a head's map (the text's first: at its end every weight of a
// random model is within 0.002 of 0, one colour). The layers x heads overview is checked against
// core's summaries of the same tokens (each head's mean entropy from row 1,
// from the smallest to the largest), and the zoomed map, single cells, each
// against core's exact weight of that region, computed from the queries and
// keys of core's own forward (or the mask's hatch past the diagonal).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"
#include "model_writer.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

constexpr int layers = 2, heads = 4, positions = 8192;

TEST(WindowLong8k, TheOverviewIsCoresSummariesAndTheZoomEachExactWeight) {
    test::TempDir dir;
    test::write_test_model(dir.path / "model", {.n_layer = layers,
                                                .n_head = heads,
                                                .n_embd = 64,
                                                .n_positions = positions,
                                                .transformer_prefix = false,
                                                .seed = 5});
    const Model model = load_model((dir.path / "model").string());
    // One line of one-token words, by a fixed linear congruence, past the
    // model's 8,192 positions (the window cuts the text there, and so does
    // this test): about 33,000 characters, which the text box draws a few
    // lines of at a time.
    const char* words[] = {" the", " cat",   " sat", " on",  " mat", " and", " dog", " ran",
                           " to",  " house", " a",   " big", " red", " in",  " of",  " it"};
    std::string text;
    uint32_t seed = 2024;
    for (int w = 0; w < 8300; ++w) {
        seed = seed * 1664525u + 1013904223u;
        text += words[(seed >> 16) % 16];
    }
    std::ofstream(dir.path / "long.txt") << text;
    Batch batch{model.tokenizer.encode_texts({text}), model.config.pad_id()};
    ASSERT_GT(batch.token_ids[0].size(), static_cast<size_t>(positions));
    batch.token_ids[0].resize(positions);
    const int T = positions;

    // Core's forward of the same tokens, as the window's long forward runs: queries and keys kept, the summaries.
    AttentionOptions options;
    options.maps = Maps::queries_and_keys, options.summaries = true;
    AttentionResult result;
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    backend->forward(batch, options, result);

    // The zoom's region, 16 x 16 cells, of the head whose weights there
    // differ most: colours the check tells apart. The text's first cells: at
    // its end a random model's weights are all within 0.002 of 0, one colour.
    const MapRegion region{0, 16, 0, 16};
    int layer = 0, head = 0;
    float spread = 0;
    std::vector<float> weights;
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            std::vector<float> w = map_region({model, batch, options, result}, l, 0, h, region);
            const auto [low, high] = std::minmax_element(w.begin(), w.end());
            if (*high - *low > spread) spread = *high - *low, layer = l, head = h, weights = std::move(w);
        }
    ASSERT_GT(spread, 0.2f);

    const test::WindowShot shot =
        test::shoot_window({"--model", (dir.path / "model").string(), "--text-file", (dir.path / "long.txt").string(),
                            "--window-size", "1280x800", "--layer", std::to_string(layer), "--head",
                            std::to_string(head), "--rows", "0:16", "--cols", "0:16"},
                           dir.path, "long8k");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    ASSERT_EQ(test::entries(shot.layout, "long-text").size(), 1u);
    EXPECT_EQ(test::entries(shot.layout, "long-text")[0]["tokens"], T);

    std::vector<double> entropy(layers * heads, 0.0);
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            const SummaryRows rows = result.summary(&RowSummaries::entropy, static_cast<size_t>(l), 0, h);
            for (int q = 1; q < T; ++q) entropy[l * heads + h] += rows[q];
            entropy[l * heads + h] /= T - 1;
        }
    test::check_overview_cells(shot.image, shot.layout, entropy, heads);

    const json map = test::entries(shot.layout, "long-map");
    ASSERT_EQ(map.size(), 16u * 16u);
    int masked = 0;
    for (const json& cell : map) {
        EXPECT_EQ(cell["step_rows"], 1);
        EXPECT_EQ(cell["step_cols"], 1);
        const int r = cell["cell_row"], c = cell["cell_col"];
        EXPECT_EQ(cell["row_begin"], region.row_begin);
        EXPECT_EQ(cell["col_begin"], region.col_begin);
        const std::array<int, 3> got = test::centre(shot.image, cell);
        if (c > r) {  // a key past its query: the mask's hatch, two greys
            EXPECT_TRUE(got[0] == got[1] && got[1] == got[2]) << r << "," << c;
            ++masked;
        } else {
            const float w = weights[static_cast<size_t>(r) * region.cols() + c];
            EXPECT_TRUE(test::near(got, test::viridis(w)))
                << "query " << r << " key " << c << ": " << w << ", drawn " << got[0] << "," << got[1] << "," << got[2];
        }
    }
    EXPECT_EQ(masked, 16 * 15 / 2);
}

}  // namespace
