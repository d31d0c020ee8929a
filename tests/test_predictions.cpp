// The CPU engine's predictions (top-k next tokens, the log-probability of
// each actual next token, the loss, the last logits) and its logit lens
// against the double-precision references carried through the final norm and
// the output embedding (reference_forward.h for GPT-2, family_reference.h for
// every family); and a forward that reuses a PrefixCache against a full
// recompute of the same batch, for each step a typing user takes: the maps
// and outputs for every option combination, the predictions (whose
// vocabulary-wide logits cost the most) for each option changed alone, and the
// lens with the model's own options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "family_reference.h"
#include "family_writer.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/io/files.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "reference_forward.h"

using namespace headscope;
using namespace headscope::test;

namespace {

using Texts = std::vector<std::vector<int32_t>>;

// Probabilities closer than this are a tie: float32 may order them either way.
constexpr double tie = 1e-6;

// The first of a comparison's mismatches and how many there were, so that a
// broken engine fails with one readable line per check rather than thousands.
struct Mismatches {
    int count = 0;
    std::string first;
    void add(const std::string& what) {
        if (count++ == 0) first = what;
    }
};

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
std::vector<int32_t> slice(const std::vector<int32_t>& ids, int from, int to) {
    return {ids.begin() + from, ids.begin() + to};
}

std::string where(int b, int t) { return "text " + std::to_string(b) + " position " + std::to_string(t); }

// ---- Against the references -------------------------------------------------

// One reference row of logits as a distribution: its log-probabilities and its
// `count` most likely ids, by p descending.
struct ReferenceRow {
    std::vector<double> logp;  // (V)
    std::vector<int> order;    // (count)
};

ReferenceRow reference_row(const double* logits, int V, int count) {
    const double max = *std::max_element(logits, logits + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(logits[v] - max);
    const double log_sum = max + std::log(sum);
    ReferenceRow row{std::vector<double>(V), std::vector<int>(V)};
    for (int v = 0; v < V; ++v) row.logp[v] = logits[v] - log_sum;
    std::iota(row.order.begin(), row.order.end(), 0);
    std::partial_sort(row.order.begin(), row.order.begin() + count, row.order.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    row.order.resize(count);
    return row;
}

// The engine's K predictions at one position against the reference's: each p
// within 1e-5 of the reference's K largest in turn, each id's own reference
// p the p reported, ids distinct and by p descending, and the reference's id
// wherever its p stands apart from its neighbours' by more than a tie.
void compare_top(const Prediction* got, int K, int V, const ReferenceRow& want, const std::string& what,
                 Mismatches& m) {
    const auto p = [&](int rank) { return std::exp(want.logp[want.order[rank]]); };
    for (int r = 0; r < K; ++r) {
        std::ostringstream s;
        s << what << " rank " << r << ": got id " << got[r].id << " p " << got[r].p << ", want id " << want.order[r]
          << " p " << p(r);
        if (got[r].id < 0 || got[r].id >= V) {
            m.add(s.str() + " (id out of the vocabulary)");
            continue;
        }
        if (std::abs(got[r].p - p(r)) > 1e-5) m.add(s.str() + " (p of the rank)");
        if (std::abs(got[r].p - std::exp(want.logp[got[r].id])) > 1e-5) m.add(s.str() + " (p of the id)");
        if (r > 0 && got[r].p > got[r - 1].p) m.add(s.str() + " (not by p descending)");
        for (int q = 0; q < r; ++q)
            if (got[q].id == got[r].id) m.add(s.str() + " (id repeated)");
        const bool apart_above = r == 0 || p(r - 1) - p(r) > tie;
        const bool apart_below = r + 1 == int(want.order.size()) || p(r) - p(r + 1) > tie;
        if (apart_above && apart_below && got[r].id != want.order[r]) m.add(s.str() + " (id)");
    }
}

void expect_none(const Prediction* got, int K, const std::string& what, Mismatches& m) {
    for (int r = 0; r < K; ++r)
        if (got[r].id != -1) m.add(what + ": a padded position holds id " + std::to_string(got[r].id));
}

// The reference's residual rows of `layer` at each text's real positions, (N, C).
std::vector<double> real_rows(const std::vector<double>& residual, int layer, const Texts& texts, int T, int C) {
    const int B = static_cast<int>(texts.size());
    std::vector<double> rows;
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < int(texts[b].size()); ++t) {
            const double* x = &residual[((size_t(layer) * B + b) * T + t) * C];
            rows.insert(rows.end(), x, x + C);
        }
    return rows;
}

using Logits = std::function<std::vector<double>(const std::vector<double>&)>;  // rows (N, C) -> (N, V)

// Every prediction field of `got` against the reference's residual stream
// (L, B, T, C) read through `logits`: top-k, logprob_next, loss, last_logits
// and the lens of every returned layer, and the padded positions.
void expect_predictions_match(const AttentionResult& got, const Texts& texts, const AttentionOptions& opt,
                              const std::vector<double>& residual, int L, int C, int V, const Logits& logits,
                              const std::string& what) {
    SCOPED_TRACE(what);
    const int B = static_cast<int>(texts.size()), T = got.T, K = opt.top_k, LK = opt.lens_k;
    ASSERT_EQ(got.top_k, K);
    ASSERT_EQ(got.lens_k, LK);
    ASSERT_EQ(got.lens.size(), got.layers.size() * B * T * LK);
    ASSERT_EQ(residual.size(), size_t(L) * B * T * C);
    // Each layer's logits at the texts' real positions, computed once (the
    // last layer's serve both the predictions and its lens).
    std::vector<std::vector<double>> layer_logits(L);
    const auto logits_of = [&](int layer) -> const std::vector<double>& {
        if (layer_logits[layer].empty()) layer_logits[layer] = logits(real_rows(residual, layer, texts, T, C));
        return layer_logits[layer];
    };
    if (K == 0) {  // the lens alone (attention.h leaves logprob_next and last_logits unsaid)
        EXPECT_TRUE(got.predictions.empty());
    } else {
        ASSERT_EQ(got.V, V);
        ASSERT_EQ(got.predictions.size(), size_t(B) * T * K);
        ASSERT_EQ(got.logprob_next.size(), size_t(B) * T);
        ASSERT_EQ(got.last_logits.size(), size_t(B) * V);

        // The last layer's rows give the predictions.
        const std::vector<double>& want = logits_of(L - 1);
        Mismatches top, logprob, last, loss, pads;
        size_t row = 0;
        for (int b = 0; b < B; ++b) {
            const int length = static_cast<int>(texts[b].size());
            double loss_sum = 0;
            for (int t = 0; t < length; ++t, ++row) {
                const double* z = &want[row * V];
                const ReferenceRow r = reference_row(z, V, K + 1);
                compare_top(got.predictions_at(b, t), K, V, r, where(b, t), top);
                const float lp = got.logprob_next[size_t(b) * T + t];
                if (t + 1 < length) {
                    const double want_lp = r.logp[texts[b][t + 1]];
                    loss_sum -= want_lp;
                    if (!(std::abs(lp - want_lp) <= 1e-4))
                        logprob.add(where(b, t) + ": " + std::to_string(lp) + " want " + std::to_string(want_lp));
                } else if (!std::isnan(lp)) {
                    logprob.add(where(b, t) + ": the last token's is " + std::to_string(lp) + ", not NaN");
                }
                if (t + 1 == length) {
                    double scale = 0;
                    for (int v = 0; v < V; ++v) scale = std::max(scale, std::abs(z[v]));
                    for (int v = 0; v < V; ++v) {
                        const float l = got.last_logits[size_t(b) * V + v];
                        if (!(std::abs(l - z[v]) <= 1e-5 * scale))
                            last.add("text " + std::to_string(b) + " token " + std::to_string(v) + ": " +
                                     std::to_string(l) + " want " + std::to_string(z[v]));
                    }
                }
            }
            for (int t = length; t < T; ++t) {
                expect_none(got.predictions_at(b, t), K, where(b, t), pads);
                if (!std::isnan(got.logprob_next[size_t(b) * T + t])) pads.add(where(b, t) + ": logprob_next not NaN");
            }
            const double got_loss = got.loss(b);
            if (length == 1) {
                if (!std::isnan(got_loss)) loss.add("text " + std::to_string(b) + ": a one-token text's loss");
            } else if (!(std::abs(got_loss - loss_sum / (length - 1)) <= 1e-4)) {
                loss.add("text " + std::to_string(b) + ": " + std::to_string(got_loss) + " want " +
                         std::to_string(loss_sum / (length - 1)));
            }
        }
        EXPECT_EQ(top.count, 0) << "top-k: " << top.first;
        EXPECT_EQ(logprob.count, 0) << "logprob_next: " << logprob.first;
        EXPECT_EQ(last.count, 0) << "last_logits: " << last.first;
        EXPECT_EQ(loss.count, 0) << "loss: " << loss.first;
        EXPECT_EQ(pads.count, 0) << "padded positions: " << pads.first;
    }

    if (LK == 0) return;
    for (size_t slot = 0; slot < got.layers.size(); ++slot) {
        const int layer = got.layers[slot];
        const std::vector<double>& want = logits_of(layer);
        Mismatches lens;
        size_t row = 0;
        for (int b = 0; b < B; ++b) {
            const int length = static_cast<int>(texts[b].size());
            for (int t = 0; t < length; ++t, ++row)
                compare_top(got.lens_at(int(slot), b, t), LK, V, reference_row(&want[row * V], V, LK + 1), where(b, t),
                            lens);
            for (int t = length; t < T; ++t) expect_none(got.lens_at(int(slot), b, t), LK, where(b, t), lens);
        }
        EXPECT_EQ(lens.count, 0) << "lens of layer " << layer << ": " << lens.first;
    }
}

std::string describe(const AttentionOptions& o) {
    std::ostringstream s;
    s << "causal " << o.causal << " padding " << o.padding_mask << " heads " << o.n_head << " scale "
      << to_string(o.scale) << " split " << to_string(o.split) << " window " << o.sliding_window << " top_k " << o.top_k
      << " lens_k " << o.lens_k << " layers";
    if (o.layers.empty()) s << " all";
    for (int l : o.layers) s << " " << l;
    if (!o.ablate.empty()) s << " ablate " << to_string(o.ablation);
    for (const HeadRef& h : o.ablate) s << " " << h.layer << "." << h.head;
    return s.str();
}

AttentionOptions with(AttentionOptions o, auto&& change) {
    change(o);
    return o;
}

// GPT-2's test model, shared by the suite's tests.
class Gpt2 : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        write_test_model(dir_->path, {.n_layer = 3, .n_head = 4, .n_embd = 32, .n_positions = 24});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }
    Gpt2() { backend_->load_weights(*model_); }

    AttentionResult run(const Texts& texts, const AttentionOptions& opt) {
        AttentionResult result;
        backend_->forward(Batch{texts, model_->config.eos_token_id}, opt, result);
        return result;
    }

    static TempDir* dir_;
    static Model* model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    // Two texts of different lengths: the second is padded.
    const Texts texts_ = {{464, 3797, 3332, 319, 262, 2603, 780, 340, 373, 2705}, {40, 716, 257, 1332, 286, 262, 5951}};
};
TempDir* Gpt2::dir_ = nullptr;
Model* Gpt2::model_ = nullptr;

TEST_F(Gpt2, PredictionsAndLensMatchTheReference) {
    const Config& config = model_->config;
    const std::vector<AttentionOptions> option_sets = {
        with(AttentionOptions{}, [](auto& o) { o.top_k = 5, o.lens_k = 3; }),
        // The lens of a layer subset, over a forward the options change.
        with(AttentionOptions{},
             [](auto& o) {
                 o.causal = false, o.padding_mask = false, o.n_head = 2, o.scale = Scale::model;
                 o.split = Split::naive_view, o.layers = {0, 2}, o.top_k = 4, o.lens_k = 2;
             }),
        with(AttentionOptions{},
             [](auto& o) { o.padding_mask = false, o.n_head = 8, o.scale = Scale::none, o.layers = {1}, o.top_k = 1; }),
        with(AttentionOptions{}, [](auto& o) { o.layers = {1}, o.top_k = 2, o.lens_k = 5; }),
    };
    const Logits logits = [&](const std::vector<double>& rows) { return reference_logits(*model_, rows); };
    for (const AttentionOptions& opt : option_sets) {
        const AttentionResult got = run(texts_, opt);
        const Reference want = reference_attention(*model_, texts_, opt);
        expect_predictions_match(got, texts_, opt, want.residual, config.n_layer, config.n_embd, config.vocab_size,
                                 logits, describe(opt));
    }
}

// A one-token text has no next token: its logprob_next is NaN and so is its loss.
TEST_F(Gpt2, OneTokenTextHasNoLoss) {
    AttentionOptions opt;
    opt.top_k = 3;
    const Texts texts = {{464}, {40, 716}};
    const AttentionResult got = run(texts, opt);
    const Reference want = reference_attention(*model_, texts, opt);
    ASSERT_NO_FATAL_FAILURE(expect_predictions_match(
        got, texts, opt, want.residual, model_->config.n_layer, model_->config.n_embd, model_->config.vocab_size,
        [&](const std::vector<double>& rows) { return reference_logits(*model_, rows); }, "one-token text"));
    EXPECT_TRUE(std::isnan(got.loss(0)));
    EXPECT_FALSE(std::isnan(got.loss(1)));
}

// Heads knocked out (zero, or each text's mean over its real positions), one
// and several, in either split: the maps, the outputs (the knocked-out
// heads' replaced) and every prediction and lens are the reference's
// ablated model's.
std::vector<AttentionOptions> knock_out_options(int heads) {
    const auto knock = [&](std::vector<HeadRef> ablate, Ablation ablation, auto&& change) {
        AttentionOptions o;
        o.ablate = std::move(ablate), o.ablation = ablation, o.capture_outputs = true, o.top_k = 3, o.lens_k = 2;
        change(o);
        return o;
    };
    const auto same = [](auto&) {};
    return {knock({{0, 1}}, Ablation::zero, same),
            knock({{0, 0}, {1, heads - 1}, {2, 1}}, Ablation::zero, same),
            knock({{1, 0}}, Ablation::mean, same),
            knock({{0, 1}, {0, heads - 1}, {2, 0}}, Ablation::mean, same),
            knock({{1, 1}}, Ablation::mean, [](auto& o) { o.split = Split::naive_view; }),
            knock({{0, 0}, {1, 1}}, Ablation::zero, [](auto& o) {
                o.padding_mask = false, o.layers = {1, 2};
            })};
}

template <typename Want>
void expect_maps_and_outputs_match(const AttentionResult& got, const Want& want, const std::string& what) {
    ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
    ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
    double weights = 0, outputs = 0, largest = 0;
    for (size_t n = 0; n < want.weights.size(); ++n)
        weights = std::max(weights, std::abs(got.weights[n] - want.weights[n]));
    for (size_t n = 0; n < want.outputs.size(); ++n) {
        outputs = std::max(outputs, std::abs(got.outputs[n] - want.outputs[n]));
        largest = std::max(largest, std::abs(want.outputs[n]));
    }
    EXPECT_LT(weights, 1e-5) << what;
    EXPECT_LT(outputs, 2e-5 * largest) << what;
}

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

TEST_F(Gpt2, WithoutTopKOrLensThereAreNoPredictions) {
    const AttentionResult got = run(texts_, {});
    EXPECT_EQ(got.top_k, 0);
    EXPECT_EQ(got.lens_k, 0);
    EXPECT_TRUE(got.predictions.empty());
    EXPECT_TRUE(got.lens.empty());
    EXPECT_EQ(got.reused, std::vector<int>(texts_.size(), 0));
}

// The built-in model predicts its own validation text: through the reference
// (which checks the reference's final norm and output embedding against the
// trainer's loss, independently of the engine) a loss near the training's
// recorded validation loss and far below its unigram loss; and the engine's
// predictions equal the reference's on real, peaked distributions.
TEST(BuiltinPredictions, ReferenceLossIsTheTrainingsAndTheEngineMatchesIt) {
    const Model model = load_model(builtin_model);
    const std::string text = read_file(model.path / "validation.txt");
    const std::vector<int32_t> ids = model.tokenizer.encode(text.substr(0, 6000), false);
    ASSERT_GE(ids.size(), 400u);
    const Texts texts = {slice(ids, 0, 250), slice(ids, 250, 400)};
    AttentionOptions opt;
    opt.top_k = 5, opt.lens_k = 3;
    const Reference want = reference_attention(model, texts, opt);
    const Config& config = model.config;
    const Logits logits = [&](const std::vector<double>& rows) { return reference_logits(model, rows); };

    const std::vector<double> z = logits(real_rows(want.residual, config.n_layer - 1, texts, 250, config.n_embd));
    double loss = 0;
    int count = 0;
    size_t row = 0;
    for (const auto& t : texts)
        for (size_t i = 0; i < t.size(); ++i, ++row)
            if (i + 1 < t.size()) {
                loss -= reference_row(&z[row * config.vocab_size], config.vocab_size, 1).logp[t[i + 1]];
                ++count;
            }
    loss /= count;
    const double recorded = config.training["final_val_loss"].get<double>();
    const double unigram = config.training["unigram_val_loss"].get<double>();
    EXPECT_NEAR(loss, recorded, 0.75) << "the reference's loss on the validation text";
    EXPECT_LT(loss, unigram - 1);

    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionResult got;
    backend->forward(Batch{texts, config.pad_id()}, opt, got);
    expect_predictions_match(got, texts, opt, want.residual, config.n_layer, config.n_embd, config.vocab_size, logits,
                             "the built-in model");
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

// ---- Every family ----------------------------------------------------------

using FamilyParam = std::tuple<FamilyVariant, FileDType>;

class FamilyPredictions : public ::testing::TestWithParam<FamilyParam> {
protected:
    FamilyPredictions() {
        FamilySpec spec = std::get<0>(GetParam()).spec;
        spec.dtype = std::get<1>(GetParam());
        checkpoint_ = make_family_checkpoint(spec);
        write_family_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        backend_->load_weights(model_);
    }

    TempDir dir_;
    FamilyCheckpoint checkpoint_;
    Model model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    Texts texts_ = family_texts(std::get<0>(GetParam()).spec);  // 11 and 7 tokens
};

TEST_P(FamilyPredictions, MatchTheReference) {
    const FamilySpec& spec = checkpoint_.spec;
    const std::vector<int> counts = head_counts(model_.config);
    const std::vector<AttentionOptions> option_sets = {
        with(AttentionOptions{}, [&](auto& o) { o.sliding_window = spec.sliding_window, o.top_k = 5, o.lens_k = 3; }),
        // A layer subset's lens, over a forward the options change.
        with(AttentionOptions{},
             [&](auto& o) {
                 o.padding_mask = false, o.n_head = counts.front(), o.scale = Scale::model;
                 o.split = Split::naive_view, o.layers = {0, 2}, o.top_k = 2, o.lens_k = 4;
             }),
        with(AttentionOptions{},
             [&](auto& o) { o.causal = false, o.n_head = counts.back(), o.layers = {1}, o.lens_k = 2; }),
    };
    const Logits logits = [&](const std::vector<double>& rows) { return family_logits(checkpoint_, rows); };
    for (const AttentionOptions& opt : option_sets) {
        AttentionResult got;
        backend_->forward(Batch{texts_, model_.config.pad_id()}, opt, got);
        const FamilyReference want = family_reference(checkpoint_, texts_, opt);
        expect_predictions_match(got, texts_, opt, want.residual, spec.n_layer, spec.n_embd, spec.vocab_size, logits,
                                 describe(opt));
    }
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

std::vector<FamilyParam> family_params() {
    std::vector<FamilyParam> params;
    for (const FamilyVariant& v : family_variants()) params.emplace_back(v, FileDType::F32);
    // A tied output embedding as a BF16 matrix (the input embedding's bytes).
    for (const FamilyVariant& v : family_variants())
        if (v.name == "llama_tied") params.emplace_back(v, FileDType::BF16);
    return params;
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyPredictions, ::testing::ValuesIn(family_params()), [](const auto& info) {
    return std::get<0>(info.param).name + "_" + dtype_name(std::get<1>(info.param));
});

// ---- The prefix cache --------------------------------------------------------

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
int expected_reused(const Texts& cached, const Texts& texts, int b, const AttentionOptions& opt) {
    if (!prefix_reuse_refusal(opt).empty() || b >= int(cached.size())) return 0;
    const int shared = shared_prefix(cached[b], texts[b]);
    if (shared == int(cached[b].size()) && shared < int(texts[b].size())) return shared;
    return std::max(0, shared - 1);
}

// Walks `steps` with one cache and one result reused from step to step (as
// the live forward does), each step against a fresh forward without a cache.
// The cache comes in holding another forward's state (other options, or none),
// so the first step reuses nothing.
void expect_reuse_equals_recompute(Backend& backend, int32_t pad_id, const std::vector<Texts>& steps,
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
            EXPECT_EQ(got.reused[b], step == 0 ? 0 : expected_reused(steps[step - 1], texts, b, opt))
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
    add([&](auto& o) { o.n_head = heads.back(); });
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
        expect_reuse_equals_recompute(backend, config.pad_id(), walk, opt, cache, describe(opt));
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
