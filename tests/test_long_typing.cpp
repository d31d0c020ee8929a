// Typing at the end of a long text (prefix_cache.h over a forward without
// maps, attention.h's Maps and summaries): a forward handed the cache of the
// text before the keystroke computes only the new rows, and its summaries,
// queries and keys, and the maps recomputed from them (attention_maps.h)
// equal a fresh forward's of the whole text, on GPT-2's layout, grouped-query
// Llama (RoPE) and Mistral (a sliding window), with two texts of which only
// the first grows; the rows are written in place, and never under a result
// still held, which keeps its own copy of its last rows instead, or lets go
// of them when the cache asks (a deeper edit in the window).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "family_models.h"
#include "family_writer.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/prefix_cache.h"

using namespace headscope;
using namespace headscope::test;

namespace {

// Text b's rows [0, T) of every layer slot of r's kept queries (else keys), in (slots, T, width) order.
std::vector<float> kept_rows(const AttentionResult& r, int b, bool queries) {
    std::vector<float> rows;
    const size_t width = queries ? r.kept->shape.Qw : r.kept->shape.KVw;
    for (size_t slot = 0; slot < r.layers.size(); ++slot)
        for (int t = 0; t < r.T; ++t) {
            const float* row = queries ? r.query(slot, b, t) : r.key(slot, b, t);
            rows.insert(rows.end(), row, row + width);
        }
    return rows;
}

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
        ASSERT_EQ(got.T, want.T);
        const RowSummaries g = got.row_summaries(), w = want.row_summaries();
        ASSERT_EQ(g.entropy.size(), w.entropy.size());
        ASSERT_FALSE(w.entropy.empty());
        EXPECT_LT(worst(g.entropy, w.entropy), tolerance);
        EXPECT_LT(worst(g.first_key, w.first_key), tolerance);
        EXPECT_LT(worst(g.previous_key, w.previous_key), tolerance);
        EXPECT_LT(worst(g.max, w.max), tolerance);
        EXPECT_LT(worst(g.distance, w.distance), tolerance * b.T());
        ASSERT_EQ(got.keeps_queries(), want.keeps_queries());
        if (options_.maps != Maps::queries_and_keys) return;
        for (int text : {0, 1})
            for (bool queries : {true, false}) {
                const std::vector<float> have = kept_rows(got, text, queries), fresh = kept_rows(want, text, queries);
                ASSERT_EQ(have.size(), fresh.size());
                EXPECT_LT(worst(have, fresh), tolerance * worst(fresh, std::vector<float>(fresh.size(), 0.f)))
                    << "text " << text << (queries ? " queries" : " keys");
            }
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
// mark is in the result's rows of the earlier tokens (kept where they were:
// the same rows, no copy) and nowhere else, and the new rows are the fresh forward's.
TEST_P(LongTyping, OnlyTheNewRowsAreComputed) {
    PrefixCache cache;
    run(batch(290), &cache);
    const float mark = -1234.5f;
    for (float& e : cache.kept->summaries.entropy) e = mark;
    for (float& q : cache.kept->queries) q = mark;
    const AttentionResult typed = run(batch(292), &cache), fresh = run(batch(292), nullptr);
    EXPECT_EQ(typed.kept, cache.kept);  // no result held them: written in place
    const RowSummaries got = typed.row_summaries(), want = fresh.row_summaries();
    const int T = typed.T, NH = typed.NH, L = model_.config.n_layer;
    int marked = 0, new_rows_wrong = 0;
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < NH; ++h)
            for (int q = 0; q < T; ++q) {
                const size_t at = ((static_cast<size_t>(l) * 2 + 0) * NH + h) * T + q;
                marked += got.entropy[at] == mark;
                if (q >= 290) new_rows_wrong += std::abs(got.entropy[at] - want.entropy[at]) > 1e-5;
            }
    EXPECT_EQ(marked, L * NH * 290);  // text 0's 290 cached rows of every head, kept
    EXPECT_EQ(new_rows_wrong, 0);
    if (options_.maps != Maps::queries_and_keys) return;
    int marked_rows = 0;
    for (size_t l = 0; l < static_cast<size_t>(L); ++l)
        for (int t = 0; t < T; ++t) marked_rows += typed.query(l, 0, t)[0] == mark;
    EXPECT_EQ(marked_rows, L * 290);
}

// Typing on while earlier results are held (the window draws the last one
// while its worker computes the next): appended tokens, the last token
// changed and a token deleted are written in place, among the rows the held
// results share, each of which reads its own copy of its last rows
// (held_rows) where the keystroke wrote; a deletion deeper than those, and
// growing past the room kept, take new rows. After all of it each held
// result equals a fresh forward of its text (a rewrite of a row a held result
// reads from the shared rows fails it).
TEST_P(LongTyping, HeldResultsKeepTheirRowsAsTypingGoesOn) {
    PrefixCache cache;
    const AttentionResult first = run(batch(250), &cache);  // rows for 250 tokens and room for 25 more
    const AttentionResult grown = run(batch(260), &cache), typed = run(batch(270), &cache);
    Batch changed = batch(270);
    changed.token_ids[0].back() = (changed.token_ids[0].back() + 1) % family_.checkpoint.spec.vocab_size;
    const AttentionResult edited = run(changed, &cache);        // rows 268 and 269 again: `typed` reads them
    const AttentionResult shortened = run(batch(267), &cache);  // row 266 again: `edited` and `typed` read it
    for (const AttentionResult* held : {&grown, &typed, &edited, &shortened}) EXPECT_EQ(held->kept, first.kept);
    const AttentionResult deleted = run(batch(230), &cache);  // row 229 again: under what they share
    EXPECT_NE(deleted.kept, first.kept);
    const AttentionResult past = run(batch(300), &cache);  // past the 253 rows `deleted` made
    EXPECT_NE(past.kept, deleted.kept);
    EXPECT_EQ(grown.reused, (std::vector<int>{250, 149}));
    EXPECT_EQ(typed.reused, (std::vector<int>{260, 149}));
    EXPECT_EQ(edited.reused, (std::vector<int>{268, 149}));
    EXPECT_EQ(shortened.reused, (std::vector<int>{266, 149}));
    EXPECT_EQ(deleted.reused, (std::vector<int>{229, 149}));
    EXPECT_EQ(past.reused, (std::vector<int>{230, 149}));
    const std::vector<std::pair<const AttentionResult*, Batch>> held = {
        {&first, batch(250)},     {&grown, batch(260)},   {&typed, batch(270)}, {&edited, changed},
        {&shortened, batch(267)}, {&deleted, batch(230)}, {&past, batch(300)}};
    for (const auto& [result, text] : held) {
        SCOPED_TRACE(text.token_ids[0].size());
        expect_same(*result, run(text, nullptr), text);
    }
}

// A result's own copy is of its last rows only (held_rows of the growing
// text; the unchanged shorter one's from its last rows to the padded end),
// and once no result holds the rows, a deletion under what they read writes
// in place.
TEST_P(LongTyping, ResultsCopyOnlyTheirLastRows) {
    PrefixCache cache;
    AttentionResult typed = run(batch(270), &cache);
    ASSERT_TRUE(typed.tail);
    EXPECT_EQ(typed.tail_from, (std::vector<int>{270 - held_rows, 150 - held_rows}));
    EXPECT_EQ(typed.tail->capacity, 270 - (150 - held_rows));
    const KeptRows* rows = typed.kept.get();
    typed = AttentionResult{};
    const AttentionResult deleted = run(batch(240), &cache);
    EXPECT_EQ(deleted.kept.get(), rows);
    expect_same(deleted, run(batch(240), nullptr), batch(240));
    EXPECT_FALSE(run(batch(240), nullptr).tail);  // without a cache nothing rewrites its rows
}

// A deeper edit (a deleted paragraph) on a cache whose results' holder lets
// go of them when asked, on another thread (the window's view, in its frame:
// PrefixCache::ask_for_rows): typing at the end does not ask; the deletion
// asks once, waits until the shown result is gone, and writes in place, so
// one set of kept rows is held rather than two, and equals a fresh forward.
TEST_P(LongTyping, ADeepEditHasTheShownResultLetGoOfItsRows) {
    PrefixCache cache;
    int asked = 0;
    std::shared_ptr<AttentionResult> shown;
    std::thread view;
    cache.ask_for_rows = [&] {
        ++asked;
        view = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the forward waits for it
            shown.reset();
        });
    };
    shown = std::make_shared<AttentionResult>(run(batch(270), &cache));
    shown = std::make_shared<AttentionResult>(run(batch(272), &cache));  // written past what it reads
    EXPECT_EQ(asked, 0);
    const KeptRows* rows = shown->kept.get();
    const AttentionResult deleted = run(batch(200), &cache);  // from row 199: under what `shown` reads
    if (view.joinable()) view.join();
    EXPECT_EQ(asked, 1);
    EXPECT_FALSE(shown);
    EXPECT_EQ(deleted.kept.get(), rows);  // the same set, written in place
    EXPECT_EQ(deleted.reused, (std::vector<int>{199, 149}));
    expect_same(deleted, run(batch(200), nullptr), batch(200));
}

INSTANTIATE_TEST_SUITE_P(Families, LongTyping,
                         ::testing::Values(Typing{"gpt2", Maps::queries_and_keys},
                                           Typing{"llama", Maps::queries_and_keys},
                                           Typing{"mistral", Maps::queries_and_keys}, Typing{"llama", Maps::none}),
                         [](const auto& info) {
                             return info.param.family + (info.param.maps == Maps::none ? "_no_maps" : "");
                         });

}  // namespace
