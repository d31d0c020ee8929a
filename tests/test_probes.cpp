// Head probes on attention maps whose scores are known by construction: a
// stand-in backend draws four kinds of head, and each score is checked
// against its closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/inspect/probes.h"

using namespace headscope;

namespace {

// Every layer has the same four heads: 0 looks at the previous token, 1
// spreads evenly over the keys the mask shows (the causal prefix, or every
// token), 2 looks at the first token, 3 (on a
// run followed by its repeat) at the token after the earlier occurrence.
class DrawnHeadsBackend : public Backend {
public:
    std::vector<std::vector<int32_t>> seen;  // every text forwarded

    std::string name() const override { return "drawn"; }
    void load_weights(const Model&) override {}
    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& r, PrefixCache*,
                 const Progress&) override {
        const std::vector<int32_t>& ids = batch.token_ids.front();
        seen.push_back(ids);
        const int T = static_cast<int>(ids.size()), R = T / 2;
        const bool repeated = T % 2 == 0 && std::equal(ids.begin(), ids.begin() + R, ids.begin() + R);
        r.B = 1;
        r.T = T;
        r.NH = 4;
        r.layers = {0, 1};
        r.weights.assign(2 * 4 * static_cast<size_t>(T) * T, 0.f);
        r.fully_masked.assign(T, 0);
        for (int l = 0; l < 2; ++l) {
            float* w = r.weights.data() + static_cast<size_t>(l) * 4 * T * T;
            for (int i = 0; i < T; ++i) {
                float* row0 = w + static_cast<size_t>(i) * T;
                float* row1 = row0 + static_cast<size_t>(T) * T;
                float* row2 = row1 + static_cast<size_t>(T) * T;
                float* row3 = row2 + static_cast<size_t>(T) * T;
                row0[std::max(i - 1, 0)] = 1;
                const int seen = options.causal ? i + 1 : T;
                for (int j = 0; j < seen; ++j) row1[j] = 1.f / static_cast<float>(seen);
                row2[0] = 1;
                row3[repeated && i >= R ? i - R + 1 : i] = 1;
            }
        }
    }
};

Model two_layer_four_head_model() {
    Model m;
    m.config.n_layer = 2;
    m.config.n_head = 4;
    m.config.n_positions = 40;  // induction runs of R = 20
    m.config.vocab_size = 1000;
    m.config.eos_token_id = 999;
    return m;
}

TEST(Probes, ScoresEqualTheirClosedFormsOnDrawnHeads) {
    const Model model = two_layer_four_head_model();
    DrawnHeadsBackend backend;
    // Two texts of 5 and 9 tokens: rows i = 1..4 and 1..8 are scored.
    const std::vector<std::vector<int32_t>> texts = {{1, 2, 3, 4, 5}, {9, 8, 7, 6, 5, 4, 3, 2, 1}};
    const ProbeReport report = probe_heads(backend, model, texts, 3);
    ASSERT_EQ(report.heads.size(), 8u);
    EXPECT_EQ(report.rows, 12u);

    // Closed forms over the scored rows: one row of each text (i = 1) has i - 1 == 0.
    double uniform_previous = 0, uniform_entropy = 0;
    for (int T : {5, 9})
        for (int i = 1; i < T; ++i) {
            uniform_previous += 1.0 / (i + 1);
            uniform_entropy += std::log(i + 1.0);
        }
    const int R = 20;
    double uniform_induction = 0;
    for (int k = 0; k + 1 < R; ++k) uniform_induction += 1.0 / (R + k + 1);
    uniform_induction /= R - 1;

    for (int l = 0; l < 2; ++l) {
        const HeadScores& previous = report.heads[l * 4 + 0];
        const HeadScores& uniform = report.heads[l * 4 + 1];
        const HeadScores& first = report.heads[l * 4 + 2];
        const HeadScores& induction = report.heads[l * 4 + 3];
        EXPECT_DOUBLE_EQ(previous.previous_token, 1);
        EXPECT_DOUBLE_EQ(previous.first_token, 2.0 / 12);
        EXPECT_DOUBLE_EQ(previous.current_token, 0);
        EXPECT_DOUBLE_EQ(previous.entropy, 0);
        EXPECT_DOUBLE_EQ(previous.induction, 0);

        EXPECT_NEAR(uniform.previous_token, uniform_previous / 12, 1e-7);
        EXPECT_NEAR(uniform.first_token, uniform_previous / 12, 1e-7);
        EXPECT_NEAR(uniform.current_token, uniform_previous / 12, 1e-7);
        EXPECT_NEAR(uniform.entropy, uniform_entropy / 12, 1e-6);
        EXPECT_NEAR(uniform.induction, uniform_induction, 1e-7);

        EXPECT_DOUBLE_EQ(first.first_token, 1);
        EXPECT_DOUBLE_EQ(first.previous_token, 2.0 / 12);
        EXPECT_DOUBLE_EQ(first.entropy, 0);

        EXPECT_DOUBLE_EQ(induction.induction, 1);
        EXPECT_DOUBLE_EQ(induction.current_token, 1);  // the texts are not repeats
    }
}

// An encoder's rows see every token: a head spread evenly over them has
// entropy ln T in every row, not ln(i + 1).
TEST(Probes, AnEncodersEntropyCountsEveryKey) {
    Model model = two_layer_four_head_model();
    model.config.causal = false;
    DrawnHeadsBackend backend;
    const std::vector<std::vector<int32_t>> texts = {{1, 2, 3, 4, 5}, {9, 8, 7, 6, 5, 4, 3, 2, 1}};
    const ProbeReport report = probe_heads(backend, model, texts, 0);
    const double rows_mean = (4 * std::log(5.0) + 8 * std::log(9.0)) / 12;
    for (int l = 0; l < 2; ++l) {
        EXPECT_NEAR(report.heads[l * 4 + 1].entropy, rows_mean, 1e-6);
        EXPECT_DOUBLE_EQ(report.heads[l * 4 + 0].entropy, 0);
    }
}

// The induction texts hold no end-of-sequence token, any the config lists;
// a vocabulary of nothing else is refused rather than drawn from forever.
TEST(Probes, InductionTextsLeaveOutEveryEosId) {
    Model model = two_layer_four_head_model();
    model.config.vocab_size = 3, model.config.eos_token_id = 0, model.config.more_eos_ids = {2};
    DrawnHeadsBackend backend;
    probe_heads(backend, model, {{1, 1, 1}}, 3);
    ASSERT_EQ(backend.seen.size(), 1u + 3);
    for (size_t run = 1; run < backend.seen.size(); ++run)
        for (int32_t id : backend.seen[run]) EXPECT_EQ(id, 1);
    model.config.more_eos_ids = {1, 2};
    EXPECT_THROW(probe_heads(backend, model, {{1, 1, 1}}, 3), Error);
}

// One step per forward (each text, each induction run), the scores the same
// for being watched; a cancel at a report ends the scoring there.
TEST(Probes, ScoringReportsEachForwardAndStopsWhenCancelled) {
    const Model model = two_layer_four_head_model();
    DrawnHeadsBackend backend;
    const std::vector<std::vector<int32_t>> texts = {{1, 2, 3, 4, 5}, {9, 8, 7, 6, 5, 4, 3, 2, 1}};
    std::vector<int64_t> done;
    const ProbeReport watched = probe_heads(backend, model, texts, 3, 42, [&](const ProgressReport& r) {
        EXPECT_EQ(r.what, "scoring heads");
        EXPECT_EQ(r.total, 2 + 3);
        done.push_back(r.done);
    });
    EXPECT_EQ(done, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
    const ProbeReport unwatched = probe_heads(backend, model, texts, 3);
    for (size_t i = 0; i < watched.heads.size(); ++i)
        EXPECT_EQ(watched.heads[i].induction, unwatched.heads[i].induction);

    int seen = 0;
    EXPECT_THROW(probe_heads(backend, model, texts, 3, 42,
                             [&](const ProgressReport&) {
                                 if (++seen == 3) throw Cancelled();
                             }),
                 Cancelled);
    EXPECT_EQ(seen, 3);
}

}  // namespace
