// Pooled heatmaps against a brute-force reference that writes the masks out
// in full, and the promise that a single strong weight survives pooling.
#include <gtest/gtest.h>

#include <random>

#include "headscope/inspect/heatmap.h"

using namespace headscope;

namespace {

AttentionResult random_result(int B, int NH, int T, uint32_t seed) {
    AttentionResult r;
    r.B = B;
    r.NH = NH;
    r.T = T;
    r.layers = {0};
    r.weights.resize(static_cast<size_t>(B) * NH * T * T);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (float& w : r.weights) w = u(rng);
    return r;
}

// Cell (r, c) of a rows x cols pooling: the largest weight among queries i
// with i * rows / T == r and keys j with j * cols / T == c that are visible.
HeatmapImage brute_force(const AttentionResult& res, bool causal, bool padding, int b, int h, int length, int side) {
    const int T = res.T;
    HeatmapImage out;
    out.rows = out.cols = std::min(T, side);
    for (int r = 0; r < out.rows; ++r)
        for (int c = 0; c < out.cols; ++c) {
            float best = masked_cell;
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < T; ++j) {
                    if (i * out.rows / T != r || j * out.cols / T != c) continue;
                    const bool visible = (!causal || j <= i) && (!padding || (i < length && j < length));
                    if (visible) best = std::max(best, res.map(0, b, h)[i * T + j]);
                }
            out.cells.push_back(best);
        }
    return out;
}

TEST(Heatmap, PoolingEqualsBruteForceForEveryMaskAndSize) {
    const AttentionResult res = random_result(2, 3, 37, 7);
    for (bool causal : {true, false})
        for (bool padding : {true, false})
            for (int side : {1, 5, 10, 36, 37, 100})
                for (int length : {37, 20}) {
                    AttentionOptions options;
                    options.causal = causal;
                    options.padding_mask = padding;
                    const HeatmapImage got = heatmap_image(res, options, 0, 1, 2, length, side);
                    const HeatmapImage want = brute_force(res, causal, padding, 1, 2, length, side);
                    EXPECT_EQ(got.rows, want.rows);
                    EXPECT_EQ(got.cols, want.cols);
                    EXPECT_EQ(got.cells, want.cells) << causal << padding << side << length;
                }
}

TEST(Heatmap, OneStrongWeightSurvivesPooling) {
    AttentionResult res;
    res.B = res.NH = 1;
    res.T = 1000;
    res.layers = {0};
    res.weights.assign(1000 * 1000, 0.f);
    res.weights[737 * 1000 + 5] = 0.9f;
    const HeatmapImage image = heatmap_image(res, AttentionOptions{}, 0, 0, 0, 1000, 64);
    ASSERT_EQ(image.rows, 64);
    EXPECT_FLOAT_EQ(image.cells[(737 * 64 / 1000) * 64 + 0], 0.9f);
    // The upper triangle is masked, the rest of the diagonal blocks are visible zeros.
    EXPECT_EQ(image.cells[0 * 64 + 63], masked_cell);
    EXPECT_EQ(image.cells[63 * 64 + 0], 0.f);
}

}  // namespace
