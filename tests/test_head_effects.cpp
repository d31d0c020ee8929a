// What a head does, against the double-precision references: heads knocked
// out (zero and mean, one and several, either split, every family), what each
// head contributes (value-weighted maps, rollout, the logit attribution whose
// parts add up to the logit), why a head attends (the score's terms) and what
// it writes (the tokens it promotes and suppresses); and the built-in model's
// induction heads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "family_reference.h"
#include "headscope/base/error.h"
#include "headscope/base/progress.h"
#include "headscope/inspect/attention_export.h"
#include "headscope/io/files.h"
#include "prediction_checks.h"
#include "reference_forward.h"

using namespace headscope;
using namespace headscope::test;

namespace {

TEST_F(Gpt2, KnockedOutHeadsMatchTheReference) {
    const Config& config = model_->config;
    const Logits logits = [&](const std::vector<double>& rows) { return reference_logits(*model_, rows); };
    for (const AttentionOptions& opt : knock_out_options(config.n_head)) {
        const AttentionResult got = run(texts_, opt);
        const Reference want = reference_attention(*model_, texts_, opt);
        EXPECT_EQ(got.ablated, opt.ablate);
        expect_maps_and_outputs_match(got, want, describe(opt));
        expect_predictions_match(got, texts_, opt, want.residual, config.n_layer, config.n_embd, config.vocab_size,
                                 logits, describe(opt));
    }
    // Knocking a head out changes what the model predicts.
    AttentionOptions intact;
    intact.top_k = 1;
    AttentionOptions knocked = intact;
    knocked.ablate = {{0, 0}, {1, 0}, {2, 0}};
    EXPECT_NE(run(texts_, intact).loss(0), run(texts_, knocked).loss(0));
}

// What each head contributes, against the double-precision reference: the
// value-weighted maps, the rollout, and the logit attribution of the top
// token, whose parts add up to its logit.
TEST_F(Gpt2, ContributionsMatchTheReference) {
    const Config& config = model_->config;
    const int L = config.n_layer;
    AttentionOptions all;
    all.contributions = true, all.top_k = 2;
    AttentionOptions knocked = all;
    knocked.ablate = {{0, 1}, {1, 2}}, knocked.layers = {0, 1};  // a knocked-out head's value-weighted map is 0
    for (const AttentionOptions& opt : {all, knocked}) {
        const AttentionResult got = run(texts_, opt);
        const Reference want = reference_attention(*model_, texts_, opt);
        const int B = got.B, T = got.T;
        ASSERT_EQ(got.value_weighted.size(), want.value_weighted.size());
        double vw = 0, largest = 0, rollout = 0;
        for (size_t n = 0; n < want.value_weighted.size(); ++n) {
            vw = std::max(vw, std::abs(got.value_weighted[n] - want.value_weighted[n]));
            largest = std::max(largest, std::abs(want.value_weighted[n]));
        }
        EXPECT_LT(vw, 1e-4 * largest) << describe(opt);
        ASSERT_EQ(got.rollout.size(), want.rollout.size());
        for (size_t n = 0; n < want.rollout.size(); ++n)
            rollout = std::max(rollout, std::abs(got.rollout[n] - want.rollout[n]));
        EXPECT_LT(rollout, 1e-5) << describe(opt);
        for (int b = 0; b < B; ++b)
            for (int t = 0; t < static_cast<int>(texts_[b].size()); ++t) {
                const int32_t token = got.predictions_at(b, t)[0].id;
                const Attribution a = reference_attribution(*model_, want, B, T, b, t, token);
                const double tolerance = 1e-4 * (1 + std::abs(a.logit));
                const size_t at = static_cast<size_t>(b) * T + t;
                const float* parts = &got.part_logit_attribution[at * got.parts()];
                EXPECT_NEAR(got.attributed_logit[at], a.logit, tolerance) << b << " " << t;
                EXPECT_NEAR(parts[0], a.embedding, tolerance);
                EXPECT_NEAR(parts[2 * L + 1], a.shift, tolerance);
                double sum = parts[0] + parts[2 * L + 1];
                for (int l = 0; l < L; ++l) {
                    EXPECT_NEAR(parts[1 + l], a.bias[l], tolerance);
                    EXPECT_NEAR(parts[1 + L + l], a.mlp[l], tolerance);
                    sum += parts[1 + l] + parts[1 + L + l];
                    for (int h = 0; h < got.NH; ++h) {
                        const float head = got.head_logit_attribution[((size_t(l) * B + b) * got.NH + h) * T + t];
                        EXPECT_NEAR(head, a.heads[l][h], tolerance) << "L" << l << " H" << h;
                        sum += head;
                    }
                }
                // The parts add up to the logit, which is the forward's own.
                EXPECT_NEAR(sum, got.attributed_logit[at], tolerance);
                if (t + 1 == static_cast<int>(texts_[b].size())) {
                    EXPECT_NEAR(got.last_logits[size_t(b) * got.V + token], got.attributed_logit[at], tolerance);
                }
            }
    }
}

// The reference's loss of a text and its p of `ids` at each position (the
// tokens the engine's grid tracks), with the heads `opt.ablate` knocks out.
std::pair<double, std::vector<double>> reference_loss_and_p(const Model& model, const std::vector<int32_t>& text,
                                                            const AttentionOptions& opt,
                                                            const std::vector<Prediction>& ids) {
    const Reference ref = reference_attention(model, {text}, opt);
    const Config& cfg = model.config;
    const int T = static_cast<int>(text.size()), V = cfg.vocab_size;
    return loss_and_p(reference_logits(model, real_rows(ref.residual, cfg.n_layer - 1, {text}, T, cfg.n_embd)), V, text,
                      ids);
}

// Every single head knocked out, on top of one already out, zero and mean:
// the grid's change in loss and in the top token's p are the reference's.
TEST_F(Gpt2, EffectsGridIsTheReferences) {
    const std::vector<int32_t>& text = texts_[0];
    for (Ablation ablation : {Ablation::zero, Ablation::mean}) {
        AttentionOptions opt;
        opt.ablate = {{1, 2}}, opt.ablation = ablation;
        HeadEffects got;
        backend_->head_effects(Batch{{text}, model_->config.pad_id()}, opt, got);
        ASSERT_EQ(got.L, 3);
        ASSERT_EQ(got.N, 4);
        ASSERT_EQ(got.T, int(text.size()));
        EXPECT_EQ(got.computed_on.device, "cpu");
        const auto [loss, p] = reference_loss_and_p(*model_, text, opt, got.top);
        EXPECT_NEAR(got.loss, loss, 1e-4);
        for (int t = 0; t < got.T; ++t) EXPECT_NEAR(got.top[t].p, p[t], 1e-5);
        for (int l = 0; l < got.L; ++l)
            for (int h = 0; h < got.N; ++h) {
                const std::string at =
                    std::string(to_string(ablation)) + " L" + std::to_string(l) + " H" + std::to_string(h);
                if (l == 1 && h == 2) {
                    EXPECT_TRUE(std::isnan(got.loss_change_at(l, h))) << at << ": already out";
                    continue;
                }
                AttentionOptions knocked = opt;
                knocked.ablate.push_back({l, h});
                std::sort(knocked.ablate.begin(), knocked.ablate.end());
                const auto [loss_without, p_without] = reference_loss_and_p(*model_, text, knocked, got.top);
                EXPECT_NEAR(got.loss_change_at(l, h), loss_without - loss, 1e-4) << at;
                for (int t = 0; t < got.T; ++t)
                    EXPECT_NEAR(got.top_p_change_at(l, h, t), p_without[t] - p[t], 1e-5) << at << " position " << t;
            }
    }
}

TEST_F(Gpt2, EffectsGridRefusesABatchOrOneTokenAndCancels) {
    HeadEffects got;
    EXPECT_THROW(backend_->head_effects(Batch{texts_, 0}, {}, got), Error);
    EXPECT_THROW(backend_->head_effects(Batch{{{464}}, 0}, {}, got), Error);
    int heard = 0;
    const Progress cancel = [&](const ProgressReport& r) {
        if (r.what == "knocking out heads" && ++heard == 3) throw Cancelled();
    };
    EXPECT_THROW(backend_->head_effects(Batch{{texts_[0]}, 0}, {}, got, EffectsOf::heads, cancel), Cancelled);
    EXPECT_EQ(heard, 3);
    // The backend is whole after a cancel: the next forward is a fresh one's.
    AttentionOptions opt;
    opt.top_k = 2;
    const AttentionResult after = run(texts_, opt);
    std::unique_ptr<Backend> fresh = make_cpu_backend();
    fresh->load_weights(*model_);
    AttentionResult want;
    fresh->forward(Batch{texts_, model_->config.eos_token_id}, opt, want);
    EXPECT_THAT(after.logprob_next, testing::Pointwise(testing::NanSensitiveFloatEq(), want.logprob_next));
}

// The export's sink_mass: every returned layer's, text's and head's mean
// weight of rows 1..length-1 on key 0, written here again.
TEST_F(Gpt2, TheExportCarriesEachHeadsSinkMass) {
    AttentionOptions opt;
    opt.layers = {0, 2};
    const AttentionResult got = run(texts_, opt);
    std::vector<std::string> texts(texts_.size());
    const nlohmann::ordered_json metadata =
        attention_metadata(*model_, "cpu", "test", texts, texts_, got, AttentionTimings{});
    ASSERT_EQ(metadata["sink_mass"].size(), 2u);
    for (int slot = 0; slot < 2; ++slot)
        for (int b = 0; b < got.B; ++b)
            for (int h = 0; h < got.NH; ++h) {
                const int length = static_cast<int>(texts_[b].size());
                double sum = 0;
                for (int i = 1; i < length; ++i) sum += got.row(slot, b, h, i)[0];
                EXPECT_NEAR(metadata["sink_mass"][slot][b][h].get<double>(), sum / (length - 1), 1e-6);
            }
}

// The built-in model's induction heads (L1 H2, L1 H3) carry its prediction of
// a repeated text's second copy: knocked out, that copy's loss rises from
// under 1 nat to over 4 (measured: 0.68 to 4.48), while the first copy's
// hardly moves, and layer 1's other two heads matter far less. Knocking out
// the previous-token head (L0 H1) undoes the second copy too: the induction
// heads read what it wrote (docs/builtin-model.md).
TEST(BuiltinAblation, TheInductionHeadsCarryTheRepeatedCopy) {
    const Model model = load_model(builtin_model);
    const nlohmann::json examples =
        nlohmann::json::parse(read_file(std::filesystem::path(HEADSCOPE_ASSETS_DIR) / "examples.json"));
    std::string text;
    for (const auto& example : examples)
        if (example["title"] == "Random words, twice") text = example["texts"][0];
    ASSERT_FALSE(text.empty());
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const Texts texts = {model.tokenizer.encode(text)};
    // The mean loss over the first copy's positions and the second's.
    const auto losses = [&](std::vector<HeadRef> ablate) {
        AttentionOptions opt;
        opt.top_k = 1, opt.ablate = std::move(ablate);
        AttentionResult got;
        backend->forward(Batch{texts, model.config.pad_id()}, opt, got);
        const int n = static_cast<int>(texts[0].size()), R = n / 2;
        double first = 0, second = 0;
        for (int t = 0; t < R - 1; ++t) first -= got.logprob_next[t] / (R - 1);
        for (int t = R; t < n - 1; ++t) second -= got.logprob_next[t] / (n - 1 - R);
        return std::pair{first, second};
    };
    const auto [first, second] = losses({});
    const auto [first_without, second_without] = losses({{1, 2}, {1, 3}});
    const auto [first_others, second_others] = losses({{1, 0}, {1, 1}});
    const auto [first_previous, second_previous] = losses({{0, 1}});
    std::printf(
        "second copy: %.2f nats intact, %.2f without L1 H2 and H3, %.2f without L1 H0 and H1, %.2f without "
        "L0 H1; first copy: %.2f, %.2f\n",
        second, second_without, second_others, second_previous, first, first_without);
    EXPECT_LT(second, 1.5);
    EXPECT_GT(second_without, second + 2.5);
    EXPECT_LT(std::abs(first_without - first), 0.5);
    EXPECT_LT(second_others, second + 1);
    EXPECT_GT(second_previous, second + 2.5);
}

TEST_P(FamilyPredictions, KnockedOutHeadsMatchTheReference) {
    const FamilySpec& spec = checkpoint_.spec;
    const Logits logits = [&](const std::vector<double>& rows) { return family_logits(checkpoint_, rows); };
    for (AttentionOptions opt : knock_out_options(spec.n_head)) {
        opt.sliding_window = spec.sliding_window;
        AttentionResult got;
        backend_->forward(Batch{texts_, model_.config.pad_id()}, opt, got);
        const FamilyReference want = family_reference(checkpoint_, texts_, opt);
        expect_maps_and_outputs_match(got, want, describe(opt));
        expect_predictions_match(got, texts_, opt, want.residual, spec.n_layer, spec.n_embd, spec.vocab_size, logits,
                                 describe(opt));
    }
}

// Every family: the logit attribution's parts add up to the top token's
// logit, the forward's own; each rollout row sums to 1; and a value-weighted
// map is its attention map times one norm per key.
TEST_P(FamilyPredictions, ContributionsAddUpToTheLogit) {
    AttentionOptions opt;
    opt.contributions = true, opt.top_k = 1, opt.sliding_window = checkpoint_.spec.sliding_window;
    AttentionResult got;
    backend_->forward(Batch{texts_, model_.config.pad_id()}, opt, got);
    const int B = got.B, T = got.T, L = got.L, NH = got.NH;
    for (int b = 0; b < B; ++b) {
        const int length = static_cast<int>(texts_[b].size());
        for (int t = 0; t < length; ++t) {
            const size_t at = static_cast<size_t>(b) * T + t;
            const float* parts = &got.part_logit_attribution[at * got.parts()];
            double sum = std::accumulate(parts, parts + got.parts(), 0.0);
            for (int l = 0; l < L; ++l)
                for (int h = 0; h < NH; ++h) sum += got.head_logit_attribution[((size_t(l) * B + b) * NH + h) * T + t];
            const double tolerance = 1e-4 * (1 + std::abs(got.attributed_logit[at]));
            EXPECT_NEAR(sum, got.attributed_logit[at], tolerance) << "text " << b << " position " << t;
        }
        for (int t = 0; t < T; ++t) {  // padding rows too
            const size_t at = static_cast<size_t>(b) * T + t;
            double row = 0;
            for (int k = 0; k < T; ++k) row += got.rollout[at * T + k];
            EXPECT_NEAR(row, 1.0, 1e-5) << "text " << b << " position " << t;
        }
        const int32_t token = got.predictions_at(b, length - 1)[0].id;
        const size_t last = static_cast<size_t>(b) * T + length - 1;
        // The parts add up to the logit before Gemma's final soft-cap, which then bends it into the forward's.
        const double cap = checkpoint_.spec.final_softcap, attributed = got.attributed_logit[last];
        const double capped = cap > 0 ? cap * std::tanh(attributed / cap) : attributed;
        EXPECT_NEAR(got.last_logits[size_t(b) * got.V + token], capped, 1e-4 * (1 + std::abs(attributed)));
        if (cap > 0) {
            EXPECT_GT(std::abs(attributed - capped), 1e-2) << "the cap bends the top logit";
        }
        // Key 0 is every query's: the ratio value-weighted / weight is its norm, whatever the query.
        const size_t map = (static_cast<size_t>(L - 1) * B + b) * NH;
        const double norm = got.value_weighted[map * T * T] / got.weights[map * T * T];
        for (int q = 1; q < length; ++q)
            if (got.weights[(map * T + q) * T] > 0) {  // not past a sliding window
                EXPECT_NEAR(got.value_weighted[(map * T + q) * T] / got.weights[(map * T + q) * T], norm, 1e-4 * norm);
            }
    }
}

// Every family (grouped-query heads, the window): each cell of the grid,
// which starts at its layer's kept input, equals a whole forward with the
// head knocked out (which KnockedOutHeadsMatchTheReference checks).
TEST_P(FamilyPredictions, EffectsGridEqualsWholeForwards) {
    AttentionOptions opt;
    opt.sliding_window = checkpoint_.spec.sliding_window, opt.ablation = Ablation::mean;
    const Batch batch{{texts_[0]}, model_.config.pad_id()};
    HeadEffects got;
    backend_->head_effects(batch, opt, got);
    for (const auto& [l, h] : {std::pair{0, 0}, {1, got.N - 1}, {2, 1}}) {
        AttentionOptions knocked = opt;
        knocked.top_k = 1, knocked.ablate = {{l, h}};
        AttentionResult want;
        backend_->forward(batch, knocked, want);
        EXPECT_NEAR(got.loss_change_at(l, h), want.loss(0) - got.loss, 1e-4) << "L" << l << " H" << h;
    }
}

// A long text (300 tokens) is knocked out in batches of fewer copies than
// heads: every cell of a layer still equals a whole forward without its head.
TEST_P(FamilyPredictions, EffectsGridOfALongTextEqualsWholeForwards) {
    std::vector<int32_t> ids;
    while (ids.size() < 300) ids.insert(ids.end(), texts_[0].begin(), texts_[0].end());
    ids.resize(300);
    AttentionOptions opt;
    opt.sliding_window = checkpoint_.spec.sliding_window;
    const Batch batch{{ids}, model_.config.pad_id()};
    HeadEffects got;
    backend_->head_effects(batch, opt, got);
    const int l = 1;
    for (int h = 0; h < got.N; ++h) {
        AttentionOptions knocked = opt;
        knocked.top_k = 1, knocked.ablate = {{l, h}};
        AttentionResult want;
        backend_->forward(batch, knocked, want);
        EXPECT_NEAR(got.loss_change_at(l, h), want.loss(0) - got.loss, 1e-4) << "H" << h;
    }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyPredictions, ::testing::ValuesIn(family_params()), family_param_name);

}  // namespace
