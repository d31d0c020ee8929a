// Pooled heatmaps against a brute-force reference that writes the masks out
// in full, and the promise that a single strong weight survives pooling; the
// difference of two maps likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

// Cell (r, c) of a rows x cols pooling: the largest value among queries i
// with i * rows / T == r and keys j with j * cols / T == c that are visible:
// the weight, or with the shading the weight renormalised without key 0 or
// the value-weighted norm over its row's largest (past key 0 if hidden).
HeatmapImage brute_force(const AttentionResult& res, bool causal, bool padding, int b, int h, int length, int side,
                         MapShading shading = {}) {
    const int T = res.T;
    const auto in_filter = [&](int i, int j) {  // the sentence filter, written out
        const Sentences s = shading.sentences;
        if (s == Sentences::all) return true;
        const bool query_b = s == Sentences::b_to_a || s == Sentences::b_to_b;
        const bool key_b = s == Sentences::a_to_b || s == Sentences::b_to_b;
        return (i >= shading.second_start) == query_b && (j >= shading.second_start) == key_b;
    };
    const auto visible = [&](int i, int j) {
        return (!causal || j <= i) && (!padding || (i < length && j < length)) && !(shading.hide_first_key && j == 0) &&
               in_filter(i, j);
    };
    const float* map =
        shading.value_weighted ? &res.value_weighted[((size_t(0) * res.B + b) * res.NH + h) * T * T] : res.map(0, b, h);
    const auto value = [&](int i, int j) {
        double denominator = 1;
        if (shading.value_weighted) {
            denominator = 0;
            for (int k = 0; k < T; ++k)
                if (visible(i, k)) denominator = std::max(denominator, double(map[i * T + k]));
        } else if (shading.hide_first_key && (!padding || i < length)) {
            denominator = 1 - map[i * T];
        }
        return static_cast<float>(map[i * T + j] / denominator);
    };
    HeatmapImage out;
    out.rows = out.cols = std::min(T, side);
    for (int r = 0; r < out.rows; ++r)
        for (int c = 0; c < out.cols; ++c) {
            float best = masked_cell;
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < T; ++j) {
                    if (i * out.rows / T != r || j * out.cols / T != c) continue;
                    if (visible(i, j)) best = std::max(best, value(i, j));
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

TEST(Heatmap, ShadingsEqualBruteForce) {
    AttentionResult res = random_result(2, 3, 23, 9);
    // Rows that add up to 1, as weights do; the value-weighted norms another random map.
    for (size_t row = 0; row < res.weights.size(); row += res.T) {
        float sum = 0;
        for (int j = 0; j < res.T; ++j) sum += res.weights[row + j];
        for (int j = 0; j < res.T; ++j) res.weights[row + j] /= sum;
    }
    res.value_weighted = random_result(2, 3, 23, 10).weights;
    for (MapShading shading : {MapShading{true, false}, MapShading{false, true}, MapShading{true, true}})
        for (bool causal : {true, false})
            for (int side : {5, 23})
                for (int length : {23, 12}) {
                    AttentionOptions options;
                    options.causal = causal;
                    const HeatmapImage got = heatmap_image(res, options, 0, 1, 2, length, side, shading);
                    const HeatmapImage want = brute_force(res, causal, true, 1, 2, length, side, shading);
                    ASSERT_EQ(got.cells.size(), want.cells.size());
                    for (size_t n = 0; n < want.cells.size(); ++n)
                        EXPECT_NEAR(got.cells[n], want.cells[n], 1e-5)
                            << shading.value_weighted << shading.hide_first_key << causal << side << length;
                }
}

// A sentence pair's filter (its second text from token 9): only A's or B's
// queries, and only A's or B's keys, with every shading.
TEST(Heatmap, SentenceFiltersEqualBruteForce) {
    AttentionResult res = random_result(2, 3, 23, 11);
    res.value_weighted = random_result(2, 3, 23, 12).weights;
    for (Sentences sentences : {Sentences::a_to_a, Sentences::a_to_b, Sentences::b_to_a, Sentences::b_to_b})
        for (MapShading shading : {MapShading{false, false}, MapShading{true, false}, MapShading{false, true}})
            for (bool causal : {true, false})
                for (int side : {5, 23}) {
                    shading.sentences = sentences;
                    shading.second_start = 9;
                    AttentionOptions options;
                    options.causal = causal;
                    const HeatmapImage got = heatmap_image(res, options, 0, 1, 2, 20, side, shading);
                    const HeatmapImage want = brute_force(res, causal, true, 1, 2, 20, side, shading);
                    ASSERT_EQ(got.cells.size(), want.cells.size());
                    for (size_t n = 0; n < want.cells.size(); ++n)
                        EXPECT_NEAR(got.cells[n], want.cells[n], 1e-5) << int(sentences) << causal << side << n;
                }
}

// The rollout pools as a map does, each row's keys up to where the masks end it.
TEST(Heatmap, RolloutPoolsEveryShownKey) {
    AttentionResult res = random_result(2, 1, 19, 12);
    res.rollout = res.weights;  // (B, T, T): any values do
    for (bool causal : {true, false})
        for (int side : {4, 19})
            for (int length : {19, 11}) {
                AttentionOptions options;
                options.causal = causal;
                const HeatmapImage got = rollout_image(res, options, 1, length, side);
                ASSERT_EQ(got.rows, std::min(19, side));
                for (int r = 0; r < got.rows; ++r)
                    for (int c = 0; c < got.cols; ++c) {
                        float best = masked_cell;
                        for (int i = 0; i < 19; ++i)
                            for (int j = 0; j < 19; ++j)
                                if (i * got.rows / 19 == r && j * got.cols / 19 == c && i < length && j < length &&
                                    (!causal || j <= i))
                                    best = std::max(best, res.rollout[(19 + i) * 19 + j]);
                        EXPECT_EQ(got.cells[r * got.cols + c], best) << causal << side << length;
                    }
            }
}

// The sink mass is the mean weight on the first key of rows 1..length-1.
TEST(Heatmap, SinkMassIsTheMeanWeightOnTheFirstKey) {
    const AttentionResult res = random_result(2, 3, 10, 11);
    double sum = 0;
    for (int i = 1; i < 7; ++i) sum += res.map(0, 1, 2)[i * 10];
    EXPECT_NEAR(sink_mass(res, 0, 1, 2, 7), sum / 6, 1e-6);
    EXPECT_EQ(sink_mass(res, 0, 1, 2, 1), 0.f);
}

// A learned sink's column: row i's 1 - sum of its keys' weights (rows here
// add up to 0.5..1), renormalised as the row is without key 0 (where key 0
// is all the row sees, the row and its sink are masked), 0 weighted by value,
// masked past a padded text's end; pooled, each block of rows' largest.
TEST(Heatmap, SinkColumnIsEachRowsShareLeftToTheSink) {
    constexpr int T = 13, length = 9;
    AttentionResult res = random_result(1, 2, T, 12);
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> keys_share(0.5f, 1.f);
    std::vector<double> sink(T), first(T);
    for (int i = 0; i < T; ++i) {
        float* row = res.weights.data() + (static_cast<size_t>(T) + i) * T;  // head 1
        for (int j = i + 1; j < T; ++j) row[j] = 0;                          // causal
        float sum = 0;
        for (int j = 0; j <= i; ++j) sum += row[j];
        const float share = keys_share(rng);
        for (int j = 0; j <= i; ++j) row[j] *= share / sum;
        sink[i] = 1 - share;
        first[i] = row[0];
    }
    res.value_weighted = res.weights;
    AttentionOptions options;  // causal, padding masked
    for (MapShading shading : {MapShading{}, MapShading{false, true}, MapShading{true, false}})
        for (int side : {T, 4}) {
            const HeatmapImage got = sink_column_image(res, options, 0, 0, 1, length, side, shading);
            ASSERT_EQ(got.rows, std::min(T, side));
            ASSERT_EQ(got.cols, 1);
            std::vector<float> want(static_cast<size_t>(got.rows), masked_cell);
            for (int i = 0; i < length; ++i) {
                if (shading.hide_first_key && i == 0) continue;
                const double shown = shading.value_weighted   ? 0
                                     : shading.hide_first_key ? sink[i] / (1 - first[i])
                                                              : sink[i];
                float& cell = want[static_cast<size_t>(i * got.rows / T)];
                cell = std::max(cell, static_cast<float>(shown));
            }
            for (int r = 0; r < got.rows; ++r)
                EXPECT_NEAR(got.cells[r], want[r], 1e-5)
                    << "row " << r << " of " << side << shading.value_weighted << shading.hide_first_key;
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

// The diff view's image of text 1 of a batch of 2 (padded) against a single
// text of its length: each pooled cell the difference of largest magnitude
// among its block's visible cells (causal, within the length), as
// 0.5 + d / (2 scale) clamped; masked where none is visible; the scale
// largest_difference's, the largest |d| of them all.
TEST(Heatmap, DifferencePoolsTheLargestMagnitude) {
    const int T = 23, length = 19, NH = 2, h = 1;
    const AttentionResult base = random_result(2, NH, T, 11), changed = random_result(1, NH, length, 12);
    AttentionOptions options;  // causal
    const auto visible = [&](int i, int j) { return j <= i && i < length && j < length; };
    double largest = 0;
    for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j)
            if (visible(i, j))
                largest = std::max(
                    largest, double(std::abs(changed.map(0, 0, h)[i * length + j] - base.map(0, 1, h)[i * T + j])));
    EXPECT_FLOAT_EQ(largest_difference(base, 1, changed, 0, options, 0, h, length), largest);
    for (const float scale : {float(largest), float(largest) / 2}) {  // half: some cells clamp
        for (const int side : {T, 11, 4}) {
            const HeatmapImage got = difference_image(base, 1, changed, 0, options, 0, h, length, side, scale);
            ASSERT_EQ(got.rows, std::min(T, side));
            ASSERT_EQ(got.cols, got.rows);
            for (int r = 0; r < got.rows; ++r)
                for (int c = 0; c < got.cols; ++c) {
                    double best = 0;
                    bool any = false;
                    for (int i = 0; i < T; ++i)
                        for (int j = 0; j < T; ++j) {
                            if (i * got.rows / T != r || j * got.cols / T != c || !visible(i, j)) continue;
                            const double d = changed.map(0, 0, h)[i * length + j] - base.map(0, 1, h)[i * T + j];
                            if (!any || std::abs(d) > std::abs(best)) best = d;
                            any = true;
                        }
                    const float want = any ? std::clamp(float(0.5 + best / (2 * scale)), 0.f, 1.f) : masked_cell;
                    EXPECT_NEAR(got.cells[r * got.cols + c], want, 1e-6)
                        << "cell " << r << "," << c << " of " << side << ", scale " << scale;
                }
        }
    }
}

}  // namespace
