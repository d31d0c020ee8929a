// A forward that reuses a PrefixCache against a full recompute of the same
// batch, for each step a typing user takes: the maps and outputs for every
// option combination, the predictions (whose vocabulary-wide logits cost the
// most) for each option changed alone, the lens with the model's own options,
// and heads knocked out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "headscope/base/progress.h"
#include "headscope/compute/prefix_cache.h"
#include "prediction_checks.h"

using namespace headscope;
using namespace headscope::test;

namespace {

// The cached forward's result against a full recompute: the same shapes and
// masked rows, maps within 1e-5 and outputs within 1e-5 of the largest (the
// reused rows' keys were computed in other products, whose float32 rounding
// differs: up to 3e-6 on the maps of unscaled wide heads), predictions' and the
// lens' p within 1e-5 and ids equal wherever p is not a tie, logprob_next
// within 1e-4 (NaN where the recompute's is), last logits within 1e-5 of the
// largest.
void expect_same_result(const AttentionResult& got, const AttentionResult& want, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(got.B, want.B);
    ASSERT_EQ(got.T, want.T);
    ASSERT_EQ(got.NH, want.NH);
    ASSERT_EQ(got.NKV, want.NKV);
    ASSERT_EQ(got.hs, want.hs);
    ASSERT_EQ(got.layers, want.layers);
    EXPECT_EQ(got.fully_masked, want.fully_masked);
    ASSERT_EQ(got.weights.size(), want.weights.size());
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    ASSERT_EQ(got.top_k, want.top_k);
    ASSERT_EQ(got.lens_k, want.lens_k);
    ASSERT_EQ(got.V, want.V);
    ASSERT_EQ(got.predictions.size(), want.predictions.size());
    ASSERT_EQ(got.logprob_next.size(), want.logprob_next.size());
    ASSERT_EQ(got.last_logits.size(), want.last_logits.size());
    ASSERT_EQ(got.lens.size(), want.lens.size());
    ASSERT_EQ(got.reused.size(), size_t(got.B));

    const auto close = [](const auto& a, const auto& b, double tolerance, const char* name, Mismatches& m) {
        for (size_t n = 0; n < b.size(); ++n)
            if (!(std::abs(a[n] - b[n]) <= tolerance))
                m.add(std::string(name) + " [" + std::to_string(n) + "]: " + std::to_string(a[n]) + " want " +
                      std::to_string(b[n]));
    };
    Mismatches maps, outputs;
    float largest_output = 0;
    for (float o : want.outputs) largest_output = std::max(largest_output, std::abs(o));
    close(got.weights, want.weights, 1e-5, "map", maps);
    close(got.outputs, want.outputs, 1e-5 * largest_output, "output", outputs);
    EXPECT_EQ(maps.count, 0) << maps.first;
    EXPECT_EQ(outputs.count, 0) << outputs.first;

    // K predictions per position: p within 1e-5, ids where not tied.
    const auto same_top = [](const std::vector<Prediction>& a, const std::vector<Prediction>& b, int K,
                             const char* name, Mismatches& m) {
        for (size_t at = 0; at < b.size(); at += K)
            for (int r = 0; r < K; ++r) {
                const Prediction &g = a[at + r], &w = b[at + r];
                const std::string s = std::string(name) + " row " + std::to_string(at / K) + " rank " +
                                      std::to_string(r) + ": got id " + std::to_string(g.id) + " p " +
                                      std::to_string(g.p) + ", want id " + std::to_string(w.id) + " p " +
                                      std::to_string(w.p);
                if (w.id == -1 || g.id == -1) {
                    if (w.id != g.id) m.add(s);
                    continue;
                }
                if (std::abs(g.p - w.p) > 1e-5) m.add(s);
                const bool apart_above = r == 0 || b[at + r - 1].p - w.p > tie;
                const bool apart_below = r + 1 == K || w.p - b[at + r + 1].p > tie;
                if (apart_above && apart_below && g.id != w.id) m.add(s);
            }
    };
    Mismatches top, lens, logprob, last;
    same_top(got.predictions, want.predictions, want.top_k, "predictions", top);
    same_top(got.lens, want.lens, want.lens_k, "lens", lens);
    for (size_t n = 0; n < want.logprob_next.size(); ++n) {
        const float g = got.logprob_next[n], w = want.logprob_next[n];
        if (std::isnan(w) != std::isnan(g) || (!std::isnan(w) && std::abs(g - w) > 1e-4))
            logprob.add("[" + std::to_string(n) + "]: " + std::to_string(g) + " want " + std::to_string(w));
    }
    for (int b = 0; b < want.B && !want.last_logits.empty(); ++b) {
        const float* w = want.last_logits.data() + size_t(b) * want.V;
        const float* g = got.last_logits.data() + size_t(b) * want.V;
        float scale = 0;
        for (int v = 0; v < want.V; ++v) scale = std::max(scale, std::abs(w[v]));
        for (int v = 0; v < want.V; ++v)
            if (!(std::abs(g[v] - w[v]) <= 1e-5 * scale))
                last.add("text " + std::to_string(b) + " token " + std::to_string(v) + ": " + std::to_string(g[v]) +
                         " want " + std::to_string(w[v]));
    }
    EXPECT_EQ(top.count, 0) << top.first;
    EXPECT_EQ(lens.count, 0) << lens.first;
    EXPECT_EQ(logprob.count, 0) << "logprob_next " << logprob.first;
    EXPECT_EQ(last.count, 0) << "last_logits " << last.first;
    const bool has_loss = want.top_k > 0 && want.logprob_next.size() == size_t(want.B) * want.T;
    for (int b = 0; b < want.B && has_loss; ++b) {
        EXPECT_EQ(std::isnan(got.loss(b)), std::isnan(want.loss(b))) << "text " << b;
        if (!std::isnan(want.loss(b))) {
            EXPECT_NEAR(got.loss(b), want.loss(b), 1e-4) << "text " << b;
        }
    }
}

// The tokens `ids` repeats of `cached` from its start (written here again: core's is inside reusable_rows).
int shared_prefix(const std::vector<int32_t>& cached, const std::vector<int32_t>& ids) {
    size_t n = 0;
    while (n < cached.size() && n < ids.size() && cached[n] == ids[n]) ++n;
    return static_cast<int>(n);
}

// What a typing user does to two texts a and b (at least 9 and 7 tokens), a
// batch per step, each step's forward reusing the one before's cache: both
// appended to, the last token of one edited (the other unchanged), one
// shortened while the other is edited inside, one changed at its first token
// while the other grows, a third text added, and back to one text. `x` is a
// token none of a and b's first 9 holds (x to x + 3 are the edits).
std::vector<Texts> typing_steps(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int32_t x) {
    const int32_t y = x + 1, z = x + 2, w = x + 3;
    const std::vector<int32_t> b_edited = cat(cat(slice(b, 0, 2), {y}), slice(b, 3, 7));
    const std::vector<int32_t> a_first = cat({z}, slice(a, 1, 6));
    return {
        {slice(a, 0, 7), slice(b, 0, 5)},
        {slice(a, 0, 9), slice(b, 0, 7)},
        {cat(slice(a, 0, 8), {x}), slice(b, 0, 7)},
        {slice(a, 0, 4), b_edited},
        {a_first, cat(b_edited, {w})},
        {a_first, cat(b_edited, {w}), slice(a, 0, 5)},
        {cat(a_first, {x})},
    };
}

// How many of text b's rows the rule lets a cache of `cached` supply: all of
// the cached text when text b only appends to it (its last logits score the
// first new token), else the rows before the last token they share (that
// token's row is computed again, to score the new next token); none when the
// options refuse reuse or the cache has no text b.
int expected_reused(const Texts& cached, const Texts& texts, int b, const AttentionOptions& opt, int long_after) {
    if (!prefix_reuse_refusal(opt).empty() || b >= int(cached.size())) return 0;
    // LongRoPE's factors differ on the two sides of its switch length (0: none), picked by the padded length.
    const auto padded = [](const Texts& t) {
        size_t n = 0;
        for (const auto& ids : t) n = std::max(n, ids.size());
        return int(n);
    };
    if (long_after && (padded(cached) > long_after) != (padded(texts) > long_after)) return 0;
    const int shared = shared_prefix(cached[b], texts[b]);
    if (shared == int(cached[b].size()) && shared < int(texts[b].size())) return shared;
    return std::max(0, shared - 1);
}

// Walks `steps` with one cache and one result reused from step to step (as
// the live forward does), each step against a fresh forward without a cache.
// The cache comes in holding another forward's state (other options, or none),
// so the first step reuses nothing.
void expect_reuse_equals_recompute(Backend& backend, int32_t pad_id, int long_after, const std::vector<Texts>& steps,
                                   const AttentionOptions& opt, PrefixCache& cache, const std::string& what) {
    const std::string refusal = prefix_reuse_refusal(opt);
    EXPECT_EQ(refusal.empty(), opt.causal && opt.split == Split::transpose) << what << ": " << refusal;
    AttentionResult got;
    for (size_t step = 0; step < steps.size(); ++step) {
        const Texts& texts = steps[step];
        const std::string at = what + ", step " + std::to_string(step);
        backend.forward(Batch{texts, pad_id}, opt, got, &cache);
        AttentionResult want;
        backend.forward(Batch{texts, pad_id}, opt, want);
        ASSERT_EQ(got.reused.size(), texts.size()) << at;
        for (int b = 0; b < int(texts.size()); ++b)
            EXPECT_EQ(got.reused[b], step == 0 ? 0 : expected_reused(steps[step - 1], texts, b, opt, long_after))
                << at << " text " << b;
        EXPECT_EQ(want.reused, std::vector<int>(texts.size(), 0)) << at << ": a forward without a cache";
        expect_same_result(got, want, at);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// Every option combination: the masks, each accepted head count (0, the
// model's own, among them), the scales, the splits and the windows given.
std::vector<AttentionOptions> every_option(const Config& config, const std::vector<int>& windows,
                                           const AttentionOptions& base) {
    std::vector<int> heads = head_counts(config);
    heads.insert(heads.begin(), 0);
    std::vector<AttentionOptions> all;
    for (bool causal : {true, false})
        for (bool padding : {true, false})
            for (int window : windows)
                for (int n_head : heads)
                    for (Scale scale : {Scale::head, Scale::model, Scale::none})
                        for (Split split : {Split::transpose, Split::naive_view}) {
                            AttentionOptions o = base;
                            o.causal = causal, o.padding_mask = padding, o.sliding_window = window;
                            o.n_head = n_head, o.scale = scale, o.split = split;
                            all.push_back(o);
                        }
    return all;
}

// The model's own forward (with its window, the last of `windows`) and each
// option changed from it alone: the padding mask off, the other windows, the
// fewest and the most heads, the other scales, and the two that refuse reuse
// (causal off, the naive view).
std::vector<AttentionOptions> each_option_once(const Config& config, const std::vector<int>& windows,
                                               const AttentionOptions& base) {
    AttentionOptions own = base;
    own.sliding_window = windows.back();
    const std::vector<int> heads = head_counts(config);
    std::vector<AttentionOptions> all = {own};
    const auto add = [&](auto&& change) { all.push_back(with(own, change)); };
    add([](auto& o) { o.padding_mask = false; });
    for (int window : windows)
        if (window != own.sliding_window) add([&](auto& o) { o.sliding_window = window; });
    add([&](auto& o) { o.n_head = heads.front(); });
    if (heads.back() != heads.front()) add([&](auto& o) { o.n_head = heads.back(); });  // LongRoPE's have one
    add([](auto& o) { o.scale = Scale::model; });
    add([](auto& o) { o.scale = Scale::none; });
    add([](auto& o) { o.causal = false; });
    add([](auto& o) { o.split = Split::naive_view; });
    return all;
}

// Walks the typing steps for each of `options` with one cache, handed from
// one options to the next (which then reuses nothing at first).
void sweep_reuse(Backend& backend, const Config& config, const std::vector<Texts>& steps,
                 const std::vector<AttentionOptions>& options) {
    PrefixCache cache;
    for (const AttentionOptions& opt : options) {
        // A refused combination computes everything whatever the texts: two
        // steps show it (reused 0, the same result); reuse walks them all.
        const bool refused = !prefix_reuse_refusal(opt).empty();
        const std::vector<Texts> walk = refused ? std::vector<Texts>(steps.begin(), steps.begin() + 2) : steps;
        expect_reuse_equals_recompute(backend, config.pad_id(), config.rope.long_after, walk, opt, cache,
                                      describe(opt));
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// Maps and outputs: every layer, and a forward that stops after the first
// (its cache then holds that layer alone).
const std::vector<AttentionOptions> maps_and_outputs = {
    with(AttentionOptions{}, [](auto& o) { o.capture_outputs = true; }),
    with(AttentionOptions{}, [](auto& o) { o.layers = {0}, o.capture_outputs = true; }),
};
// Predictions with the lens of every layer, and with the lens of a layer
// subset, walking every step with the model's own options; and predictions
// with each option changed alone, over the first three steps (appending and
// an edited last token). Each forward's vocabulary-wide logits make these the
// costly ones.
void sweep_predictions_and_lens(Backend& backend, const Config& config, const std::vector<Texts>& steps,
                                const std::vector<int>& windows) {
    const AttentionOptions predicting =
        with(AttentionOptions{}, [](auto& o) { o.capture_outputs = true, o.top_k = 3, o.lens_k = 2; });
    const std::vector<AttentionOptions> options = each_option_once(config, windows, predicting);
    sweep_reuse(backend, config, steps, {options.front(), with(options.front(), [](auto& o) {
                                             o.layers = {0, 2}, o.top_k = 2, o.lens_k = 3;
                                         })});
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<AttentionOptions> changed(options.begin() + 1, options.end());
    for (AttentionOptions& o : changed) o.lens_k = 0;
    sweep_reuse(backend, config, {steps.begin(), steps.begin() + 3}, changed);
}

TEST_F(Gpt2, PrefixReuseOfMapsAndOutputsEqualsRecomputeForEveryOptionCombination) {
    const std::vector<Texts> steps = typing_steps(texts_[0], texts_[1], 1234);
    for (const AttentionOptions& base : maps_and_outputs)
        sweep_reuse(*backend_, model_->config, steps, every_option(model_->config, {0}, base));
}

TEST_F(Gpt2, PrefixReuseOfPredictionsAndLensEqualsRecomputeForEachOption) {
    sweep_predictions_and_lens(*backend_, model_->config, typing_steps(texts_[0], texts_[1], 1234), {0});
}

// With heads knocked out to zero, typing reuses the cache (one row a
// keystroke) and equals a full recompute; to their mean, nothing is reused.
TEST_F(Gpt2, PrefixReuseWithKnockedOutHeadsEqualsRecompute) {
    const std::vector<Texts> steps = typing_steps(texts_[0], texts_[1], 1234);
    AttentionOptions zero;
    zero.capture_outputs = true, zero.top_k = 3, zero.lens_k = 2, zero.ablate = {{0, 1}, {2, 3}};
    AttentionOptions mean = zero;
    mean.ablation = Ablation::mean;
    EXPECT_TRUE(prefix_reuse_refusal(zero).empty());
    sweep_reuse(*backend_, model_->config, steps, {zero});
    EXPECT_NE(prefix_reuse_refusal(mean).find("mean over the whole text"), std::string::npos);
    PrefixCache cache;
    for (size_t step = 0; step < 3; ++step) {
        AttentionResult cached, fresh;
        backend_->forward(Batch{steps[step], model_->config.pad_id()}, mean, cached, &cache);
        backend_->forward(Batch{steps[step], model_->config.pad_id()}, mean, fresh);
        EXPECT_EQ(cached.reused, std::vector<int>(steps[step].size(), 0)) << "step " << step;
        EXPECT_EQ(cached.weights, fresh.weights) << "step " << step;
        EXPECT_THAT(cached.logprob_next, testing::Pointwise(testing::NanSensitiveFloatEq(), fresh.logprob_next))
            << "step " << step;
    }
}

// A cache another model, other options or a cleared cache left reuses nothing,
// and the forward still equals a full recompute.
TEST_F(Gpt2, PrefixCacheOfOtherOptionsOrModelReusesNothing) {
    TempDir other_dir;
    write_test_model(other_dir.path, {.n_layer = 3, .n_head = 4, .n_embd = 32, .n_positions = 24, .seed = 2});
    const Model other = load_model(other_dir.path.string());
    std::unique_ptr<Backend> other_backend = make_cpu_backend();
    other_backend->load_weights(other);

    AttentionOptions opt;
    opt.top_k = 3, opt.lens_k = 2, opt.capture_outputs = true;
    const Batch batch{texts_, model_->config.eos_token_id};
    const std::vector<int> none(texts_.size(), 0);
    PrefixCache cache;
    AttentionResult got;
    backend_->forward(batch, opt, got, &cache);
    EXPECT_EQ(got.reused, none) << "an empty cache";
    EXPECT_EQ(cache.model, model_);
    EXPECT_EQ(cache.token_ids, texts_);
    EXPECT_EQ(cache.options, opt);

    // The same batch again reuses all but each text's last row.
    backend_->forward(batch, opt, got, &cache);
    EXPECT_EQ(got.reused, (std::vector<int>{int(texts_[0].size()) - 1, int(texts_[1].size()) - 1}));
    expect_same_result(got, run(texts_, opt), "the same batch again");

    // Another model's.
    other_backend->forward(batch, opt, got, &cache);
    EXPECT_EQ(got.reused, none) << "another model's cache";
    AttentionResult want;
    other_backend->forward(batch, opt, want);
    expect_same_result(got, want, "another model's cache");
    EXPECT_EQ(cache.model, &other);

    // Other options, then those options again.
    backend_->forward(batch, opt, got, &cache);
    AttentionOptions other_options = opt;
    other_options.scale = Scale::none;
    backend_->forward(batch, other_options, got, &cache);
    EXPECT_EQ(got.reused, none) << "a cache of other options";
    expect_same_result(got, run(texts_, other_options), "a cache of other options");
    backend_->forward(batch, other_options, got, &cache);
    EXPECT_EQ(got.reused, (std::vector<int>{int(texts_[0].size()) - 1, int(texts_[1].size()) - 1}));
    expect_same_result(got, run(texts_, other_options), "those options again");

    // Other top_k.
    AttentionOptions other_k = other_options;
    other_k.top_k = 4;
    backend_->forward(batch, other_k, got, &cache);
    EXPECT_EQ(got.reused, none) << "a cache of another top_k";
    expect_same_result(got, run(texts_, other_k), "a cache of another top_k");

    cache.clear();
    backend_->forward(batch, other_k, got, &cache);
    EXPECT_EQ(got.reused, none) << "a cleared cache";
    expect_same_result(got, run(texts_, other_k), "a cleared cache");
}

// A forward cancelled part way (the next keystroke) leaves the cache the rows
// it reused, whatever it had rewritten after them: the next forward reuses
// them and equals a full recompute, the row before its first new token
// computed again (the cached last logits are those of the text before).
TEST_F(Gpt2, ACancelledForwardLeavesTheRowsItReused) {
    AttentionOptions opt;
    opt.top_k = 3, opt.lens_k = 2, opt.capture_outputs = true;
    const std::vector<int32_t>& a = texts_[0];
    const int32_t pad = model_->config.pad_id();
    PrefixCache cache;
    AttentionResult got;
    backend_->forward(Batch{{slice(a, 0, 7)}, pad}, opt, got, &cache);
    int reports = 0;
    const Progress cancel_second_layer = [&](const ProgressReport&) {
        if (++reports == 2) throw Cancelled();
    };
    // Its last token edited: 5 rows reused, the first layer's rows after them rewritten, then cancelled.
    EXPECT_THROW(backend_->forward(Batch{{cat(slice(a, 0, 6), {1234})}, pad}, opt, got, &cache, cancel_second_layer),
                 Cancelled);
    EXPECT_EQ(cache.token_ids, Texts{slice(a, 0, 5)});
    backend_->forward(Batch{{slice(a, 0, 8)}, pad}, opt, got, &cache);
    EXPECT_EQ(got.reused, std::vector<int>{4});
    expect_same_result(got, run({slice(a, 0, 8)}, opt), "after a cancelled forward");
}

class FamilyPrefixCache : public FamilyPredictions {
protected:
    // The typing steps over the family's texts; no window, and the model's own if it has one.
    std::vector<Texts> steps_ = typing_steps(texts_[0], texts_[1], 1234);
    std::vector<int> windows_ =
        checkpoint_.spec.sliding_window ? std::vector<int>{0, checkpoint_.spec.sliding_window} : std::vector<int>{0};
};

// One test per family (its checkpoint and tokenizer load once): the maps and
// outputs for every option combination, then the predictions and the lens.
TEST_P(FamilyPrefixCache, ReuseEqualsRecompute) {
    for (const AttentionOptions& base : maps_and_outputs)
        sweep_reuse(*backend_, model_.config, steps_, every_option(model_.config, windows_, base));
    if (HasFatalFailure()) return;
    sweep_predictions_and_lens(*backend_, model_.config, steps_, windows_);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyPrefixCache,
                         ::testing::Combine(::testing::ValuesIn(family_variants()), ::testing::Values(FileDType::F32)),
                         [](const auto& info) { return std::get<0>(info.param).name; });

}  // namespace