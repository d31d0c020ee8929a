// Long texts (attention_maps.h): the forward without maps, its row summaries
// and the maps recomputed on demand from the queries and keys it kept,
// against the full maps of the same forward and against the families'
// double-precision reference (family_reference.h), at up to 1,024 tokens, on
// GPT-2's layout, grouped-query Llama (RoPE), Mistral (a sliding window),
// Gemma 2 (soft-capped scores, a window on some layers) and gpt-oss (sinks).
// The summaries the tests expect are summed here from the maps, in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "family_writer.h"
#include "headscope/base/error.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"

using namespace headscope;
using namespace headscope::test;

namespace {

// Two texts of random ids, 1,024 and 777 tokens (the second padded).
std::vector<std::vector<int32_t>> long_texts(const FamilySpec& spec) {
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> id(0, spec.vocab_size - 1);
    std::vector<std::vector<int32_t>> texts(2);
    for (size_t b = 0; b < texts.size(); ++b) texts[b].resize(b == 0 ? 1024 : 777);
    for (auto& text : texts)
        for (int32_t& t : text) t = id(rng);
    return texts;
}

// A row's summary from its weights w (T of them), in double: what the
// forward's summaries must be.
template <typename Weight>
std::vector<double> expected_summary(const Weight* w, int T, int q) {
    double entropy = 0, largest = 0, distance = 0;
    for (int k = 0; k < T; ++k) {
        const double x = w[k];
        if (x > 0) entropy -= x * std::log(x);
        largest = std::max(largest, x);
        distance += x * (q - k);
    }
    return {entropy, static_cast<double>(w[0]), q > 0 ? static_cast<double>(w[q - 1]) : 0.0, largest, distance};
}

std::vector<double> summary_of(const RowSummaries& s, size_t at) {
    const RowSummary r = s.at(at);
    return {r.entropy, r.first_key, r.previous_key, r.max, r.distance};
}

class LongTexts : public ::testing::TestWithParam<std::string> {
protected:
    LongTexts() { backend_->load_weights(model_); }

    AttentionOptions options(Maps maps, bool summaries) const {
        AttentionOptions opt;
        opt.sliding_window = model_.config.sliding_window;
        opt.capture_outputs = true;
        opt.maps = maps;
        opt.summaries = summaries;
        return opt;
    }
    AttentionResult run(const AttentionOptions& opt) const {
        AttentionResult result;
        backend_->forward(batch_, opt, result);
        return result;
    }
    // Each row's summary against `expected_summary` of the maps in `weights`
    // ((layers, B, NH, T, T)), entropy and distance within `tolerance`
    // times their scale (1 and T), the three weights within it.
    template <typename Weights>
    void expect_summaries(const RowSummaries& got, const Weights& weights, int NH, double tolerance,
                          const std::string& what) const {
        const int T = batch_.T(), L = model_.config.n_layer;
        double worst[5] = {};
        for (size_t row = 0; row < static_cast<size_t>(L) * 2 * NH * T; ++row) {
            const std::vector<double> want = expected_summary(&weights[row * T], T, static_cast<int>(row % T));
            const std::vector<double> have = summary_of(got, row);
            for (int f = 0; f < 5; ++f) worst[f] = std::max(worst[f], std::abs(have[f] - want[f]));
        }
        const char* names[5] = {"entropy", "first_key", "previous_key", "max", "distance"};
        for (int f = 0; f < 5; ++f)
            EXPECT_LT(worst[f], tolerance * (f == 4 ? T : 1)) << what << ": " << names[f] << " " << GetParam();
    }

    const LoadedFamily& family_ = loaded_family("long_" + GetParam(), family_variant(GetParam(), Vocabulary::test_cut));
    const Model& model_ = family_.model;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    std::vector<std::vector<int32_t>> texts_ = long_texts(family_.checkpoint.spec);
    Batch batch_{texts_, model_.config.pad_id()};
};

TEST_P(LongTexts, SummariesMatchTheFullMapsAndTheReference) {
    const AttentionResult full = run(options(Maps::full, true));
    const AttentionResult none = run(options(Maps::none, true));
    EXPECT_TRUE(none.weights.empty());
    EXPECT_FALSE(none.keeps_queries());
    // The same attention, held or not: the outputs agree, and the summaries
    // of both against the full maps'.
    ASSERT_EQ(none.outputs.size(), full.outputs.size());
    double outputs = 0, largest = 0;
    for (size_t n = 0; n < full.outputs.size(); ++n) {
        outputs = std::max(outputs, double(std::abs(none.outputs[n] - full.outputs[n])));
        largest = std::max(largest, double(std::abs(full.outputs[n])));
    }
    EXPECT_LT(outputs, 1e-5 * largest);
    expect_summaries(full.row_summaries(), full.weights, full.NH, 2e-5, "with the maps");
    expect_summaries(none.row_summaries(), full.weights, full.NH, 2e-5, "without the maps");
    const FamilyReference reference = family_reference(family_.checkpoint, texts_, options(Maps::full, false));
    expect_summaries(none.row_summaries(), reference.weights, reference.NH, 2e-4, "against the reference");
}

TEST_P(LongTexts, RegionsAndPooledMapsMatchTheFullMaps) {
    const AttentionResult full = run(options(Maps::full, false));
    const AttentionOptions kept_options = options(Maps::queries_and_keys, false);
    const AttentionResult kept = run(kept_options);
    const FamilyReference reference = family_reference(family_.checkpoint, texts_, kept_options);
    const KeptForward forward{model_, batch_, kept_options, kept};
    const int T = batch_.T(), NH = kept.NH;
    ASSERT_TRUE(kept.keeps_queries());  // every layer's, of both texts, T rows each: no cache, no room to grow
    ASSERT_EQ(kept.kept->shape.slots, model_.config.n_layer);
    ASSERT_EQ(kept.kept->capacity, T);
    // The whole map, a corner, rows past the second text's end (padding), one
    // cell, a band along the diagonal, the last rows over the first keys.
    const std::vector<MapRegion> regions = {{0, T, 0, T},         {0, 70, 0, 130},      {760, 800, 700, 790},
                                            {513, 514, 100, 101}, {300, 420, 280, 420}, {960, T, 0, 3}};
    for (int slot : {0, model_.config.n_layer - 1})
        for (int b : {0, 1})
            for (int h : {0, NH - 1})
                for (const MapRegion& region : regions) {
                    const std::vector<float> got = map_region(forward, slot, b, h, region);
                    ASSERT_EQ(got.size(), static_cast<size_t>(region.rows()) * region.cols());
                    const size_t map = ((static_cast<size_t>(slot) * 2 + b) * NH + h) * T * T;
                    double to_full = 0, to_reference = 0;
                    for (int i = 0; i < region.rows(); ++i)
                        for (int j = 0; j < region.cols(); ++j) {
                            const size_t at = map + size_t(region.row_begin + i) * T + region.col_begin + j;
                            const double value = got[size_t(i) * region.cols() + j];
                            to_full = std::max(to_full, std::abs(value - full.weights[at]));
                            to_reference = std::max(to_reference, std::abs(value - reference.weights[at]));
                        }
                    const std::string what = GetParam() + " layer " + std::to_string(slot) + " text " +
                                             std::to_string(b) + " head " + std::to_string(h) + " rows from " +
                                             std::to_string(region.row_begin);
                    EXPECT_LT(to_full, 1e-6) << what;
                    // float32 over 1,024 keys: Gemma 2's steep capped scores reach 1.01e-5.
                    EXPECT_LT(to_reference, 2e-5) << what;
                }
    // Pooled, as the test pools the full maps: cells of ceil(T / n).
    for (int n : {1, 7, 64, 1000, T + 5})
        for (Pooling pooling : {Pooling::mean, Pooling::max}) {
            const int slot = model_.config.n_layer - 1, b = 1, h = NH / 2;
            const PooledMap got = pooled_map(forward, slot, b, h, n, pooling);
            const int step = (T + n - 1) / n, cells = (T + step - 1) / step;
            ASSERT_EQ(got.step, step);
            ASSERT_EQ(got.cells, cells);
            ASSERT_LE(cells, n);
            const float* map = full.weights.data() + ((static_cast<size_t>(slot) * 2 + b) * NH + h) * T * T;
            double worst = 0;
            for (int r = 0; r < cells; ++r)
                for (int c = 0; c < cells; ++c) {
                    double sum = 0, largest = 0;
                    int count = 0;
                    for (int i = r * step; i < std::min(T, (r + 1) * step); ++i)
                        for (int j = c * step; j < std::min(T, (c + 1) * step); ++j, ++count) {
                            sum += map[size_t(i) * T + j];
                            largest = std::max(largest, double(map[size_t(i) * T + j]));
                        }
                    const double want = pooling == Pooling::max ? largest : sum / count;
                    worst = std::max(worst, std::abs(got.values[size_t(r) * cells + c] - want));
                }
            EXPECT_LT(worst, 1e-6) << GetParam() << " n " << n << " " << word_of(pooling_choices, pooling);
        }
}

TEST_P(LongTexts, SummariesOfALayerSubsetAreThoseLayersOnes) {
    const AttentionResult all = run(options(Maps::none, true));
    AttentionOptions one = options(Maps::none, true);
    one.layers = {1};
    const AttentionResult subset = run(one);
    const size_t per_layer = static_cast<size_t>(2) * all.NH * all.T;
    const RowSummaries got = subset.row_summaries(), want = all.row_summaries();
    ASSERT_EQ(got.entropy.size(), per_layer);
    for (size_t n = 0; n < per_layer; ++n) ASSERT_EQ(summary_of(got, n), summary_of(want, per_layer + n)) << n;
}

INSTANTIATE_TEST_SUITE_P(Families, LongTexts, ::testing::Values("gpt2", "llama", "mistral", "gemma2", "gpt_oss"));

// What a forward without maps refuses, and maps asked of a forward that kept nothing.
TEST(LongTextRefusals, EachSaysWhy) {
    const LoadedFamily& family = loaded_family("long_llama", family_variant("llama", Vocabulary::test_cut));
    auto backend = make_cpu_backend();
    backend->load_weights(family.model);
    const Batch batch{{{1, 2, 3, 4, 5}}, family.model.config.pad_id()};
    AttentionOptions opt;
    opt.maps = Maps::none;
    opt.split = Split::naive_view;
    AttentionResult result;
    EXPECT_THROW(backend->forward(batch, opt, result), Error);
    opt.split = Split::transpose;
    opt.contributions = true;
    opt.top_k = 1;
    EXPECT_THROW(backend->forward(batch, opt, result), Error);
    opt = {};
    opt.maps = Maps::none;
    backend->forward(batch, opt, result);
    const KeptForward nothing_kept{family.model, batch, opt, result};
    EXPECT_THROW(map_region(nothing_kept, 0, 0, 0, {0, 1, 0, 1}), Error);
    opt.maps = Maps::queries_and_keys;
    backend->forward(batch, opt, result);
    const KeptForward kept{family.model, batch, opt, result};
    for (const MapRegion& bad : {MapRegion{0, 0, 0, 1}, MapRegion{0, 6, 0, 1}, MapRegion{2, 1, 0, 1},
                                 MapRegion{-1, 1, 0, 1}, MapRegion{0, 1, 4, 9}})
        EXPECT_THROW(map_region(kept, 0, 0, 0, bad), Error);
    EXPECT_THROW(pooled_map(kept, 0, 0, 0, 0, Pooling::mean), Error);
}

}  // namespace
