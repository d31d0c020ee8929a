// Typing at the end of a long text (prefix_cache.h over a forward without
// maps, attention.h's Maps and summaries): a forward handed the cache of the
// text before the keystroke computes only the new rows, and its summaries,
// queries and keys, and the maps recomputed from them (attention_maps.h)
// equal a fresh forward's of the whole text, on GPT-2's layout, grouped-query
// Llama (RoPE) and Mistral (a sliding window), with two texts of which only
// the first grows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_writer.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/prefix_cache.h"

using namespace headscope;
using namespace headscope::test;

namespace {

struct Typing {
    std::string family;
    Maps maps;
};
void PrintTo(const Typing& t, std::ostream* out) { *out << t.family << " " << to_string(t.maps); }

class LongTyping : public ::testing::TestWithParam<Typing> {
protected:
    LongTyping() {
        backend_->load_weights(model_);
        std::mt19937 rng(5);
        std::uniform_int_distribution<int32_t> id(0, family_.checkpoint.spec.vocab_size - 1);
        for (int32_t& t : text_) t = id(rng);
        options_.sliding_window = model_.config.sliding_window;
        options_.maps = GetParam().maps;
        options_.summaries = true;
    }

    // Text 0: the first `n` tokens of text_; text 1: its last 150, unchanged.
    Batch batch(int n) const {
        return {{std::vector<int32_t>(text_.begin(), text_.begin() + n),
                 std::vector<int32_t>(text_.end() - 150, text_.end())},
                model_.config.pad_id()};
    }
    AttentionResult run(const Batch& b, PrefixCache* cache) const {
        AttentionResult result;
        backend_->forward(b, options_, result, cache);
        return result;
    }

    // `got` (through the cache) against `want` (fresh) of `b`: every summary
    // row (distance within tolerance x T), the queries and keys within
    // tolerance x their largest, and maps recomputed from each: the last
    // rows over every key, and an early block.
    void expect_same(const AttentionResult& got, const AttentionResult& want, const Batch& b) const {
        const double tolerance = 1e-5;
        const auto worst = [](const auto& x, const auto& y) {
            double w = 0;
            for (size_t n = 0; n < y.size(); ++n) w = std::max(w, double(std::abs(x[n] - y[n])));
            return w;
        };
        ASSERT_EQ(got.summaries.entropy.size(), want.summaries.entropy.size());
        EXPECT_LT(worst(got.summaries.entropy, want.summaries.entropy), tolerance);
        EXPECT_LT(worst(got.summaries.first_key, want.summaries.first_key), tolerance);
        EXPECT_LT(worst(got.summaries.previous_key, want.summaries.previous_key), tolerance);
        EXPECT_LT(worst(got.summaries.max, want.summaries.max), tolerance);
        EXPECT_LT(worst(got.summaries.distance, want.summaries.distance), tolerance * b.T());
        ASSERT_EQ(got.queries.size(), want.queries.size());
        ASSERT_EQ(got.keys.size(), want.keys.size());
        if (options_.maps != Maps::queries_and_keys) return;
        const std::vector<float> zeros(want.queries.size(), 0.f);
        EXPECT_LT(worst(got.queries, want.queries), tolerance * worst(want.queries, zeros));
        EXPECT_LT(worst(got.keys, want.keys), tolerance * worst(want.keys, zeros));
        const KeptForward kept_got{model_, b, options_, got}, kept_want{model_, b, options_, want};
        const int T = b.T(), length = static_cast<int>(b.token_ids[0].size());
        for (const MapRegion& region : {MapRegion{length - 4, length, 0, T}, MapRegion{10, 40, 0, 50}})
            for (int slot : {0, model_.config.n_layer - 1})
                for (int h : {0, got.NH - 1})
                    EXPECT_LT(
                        worst(map_region(kept_got, slot, 0, h, region), map_region(kept_want, slot, 0, h, region)),
                        tolerance)
                        << "layer " << slot << " head " << h << " rows from " << region.row_begin;
    }

    const LoadedFamily& family_ =
        loaded_family("typing_" + GetParam().family, family_variant(GetParam().family, Vocabulary::test_cut));
    const Model& model_ = family_.model;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    std::vector<int32_t> text_ = std::vector<int32_t>(300);
    AttentionOptions options_;
};

// Keystrokes at the end: one token, then two, then the last one replaced
// (BPE may change it): each through the cache equals a fresh forward, reusing
// every earlier row of the growing text (where the last token changed, all
// but it and the one before, whose prediction scores it) and all but the
// last of the unchanged one.
TEST_P(LongTyping, AppendedRowsEqualAFreshForward) {
    PrefixCache cache;
    run(batch(290), &cache);
    int before = 290;
    for (int n : {291, 293}) {
        const AttentionResult typed = run(batch(n), &cache), fresh = run(batch(n), nullptr);
        EXPECT_EQ(typed.reused, (std::vector<int>{before, 149}));
        expect_same(typed, fresh, batch(n));
        before = n;
    }
    Batch changed = batch(293);
    changed.token_ids[0].back() = (changed.token_ids[0].back() + 1) % family_.checkpoint.spec.vocab_size;
    const AttentionResult typed = run(changed, &cache), fresh = run(changed, nullptr);
    EXPECT_EQ(typed.reused, (std::vector<int>{291, 149}));
    expect_same(typed, fresh, changed);
}

// The rows computed are observable: every cached summary and kept query of
// the text is overwritten with a mark before the keystroke; after it, the
// mark is in the result's rows of the earlier tokens (copied, not computed)
// and nowhere else, and the new rows are the fresh forward's.
TEST_P(LongTyping, OnlyTheNewRowsAreComputed) {
    PrefixCache cache;
    run(batch(290), &cache);
    const float mark = -1234.5f;
    for (float& e : cache.result.summaries.entropy) e = mark;
    for (float& q : cache.result.queries) q = mark;
    const AttentionResult typed = run(batch(292), &cache), fresh = run(batch(292), nullptr);
    const int T = typed.T, NH = typed.NH, L = model_.config.n_layer;
    int marked = 0, new_rows_wrong = 0;
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < NH; ++h)
            for (int q = 0; q < T; ++q) {
                const size_t at = ((static_cast<size_t>(l) * 2 + 0) * NH + h) * T + q;
                marked += typed.summaries.entropy[at] == mark;
                if (q >= 290)
                    new_rows_wrong += std::abs(typed.summaries.entropy[at] - fresh.summaries.entropy[at]) > 1e-5;
            }
    EXPECT_EQ(marked, L * NH * 290);  // text 0's 290 cached rows of every head, copied
    EXPECT_EQ(new_rows_wrong, 0);
    if (options_.maps != Maps::queries_and_keys) return;
    const size_t Qw = static_cast<size_t>(NH) * typed.hs;
    int marked_rows = 0;
    for (int l = 0; l < L; ++l)
        for (int t = 0; t < T; ++t) marked_rows += typed.queries[((l * 2 + 0) * size_t(T) + t) * Qw] == mark;
    EXPECT_EQ(marked_rows, L * 290);
}

INSTANTIATE_TEST_SUITE_P(Families, LongTyping,
                         ::testing::Values(Typing{"gpt2", Maps::queries_and_keys},
                                           Typing{"llama", Maps::queries_and_keys},
                                           Typing{"mistral", Maps::queries_and_keys}, Typing{"llama", Maps::none}),
                         [](const auto& info) {
                             return info.param.family + (info.param.maps == Maps::none ? "_no_maps" : "");
                         });

}  // namespace
