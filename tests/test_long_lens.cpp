// A long text's logit lens of the positions in view (session/long_lens.h):
// core's lens read out only from AttentionOptions::lens_from, and the lens
// of positions asked, computed by forwards up to them over a prefix cache of
// their own, against the double-precision reference's residual stream read
// through its final norm and output embedding, and against the lens of one
// forward of the whole text for asks that move back and forth along it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "headscope/compute/prefix_cache.h"
#include "prediction_checks.h"
#include "reference_forward.h"
#include "session/long_lens.h"

using namespace headscope;
using namespace headscope::test;

namespace {

constexpr int K = 5;

class LongTextLens : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        write_test_model(dir_->path, {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 1024, .seed = 11});
        auto model = std::make_shared<Model>(load_model(dir_->path.string()));
        // Words of one token each, by a fixed linear congruence: 700 tokens.
        const char* words[] = {" the", " cat", " sat", " on", " mat", " and", " dog", " ran"};
        std::string text;
        uint32_t seed = 99;
        for (int w = 0; w < 700; ++w) {
            seed = seed * 1664525u + 1013904223u;
            text += words[(seed >> 16) % 8];
        }
        kept_ = new KeptMaps{model,
                             Batch{model->tokenizer.encode_texts({text}), model->config.pad_id()},
                             long_text_options(AttentionOptions{}),
                             {}};
        backend_ = make_cpu_backend().release();
        backend_->load_weights(*model);
        whole_ = new AttentionResult;
        AttentionOptions lens = kept_->options;
        lens.maps = Maps::none, lens.summaries = false, lens.lens_k = K;
        backend_->forward(kept_->batch, lens, *whole_);
    }
    static void TearDownTestSuite() {
        delete whole_;
        delete backend_;
        delete kept_;
        delete dir_;
    }
    static const std::vector<int32_t>& ids() { return kept_->batch.token_ids[0]; }

    // `answer` against the whole text's lens at its positions: p within 1e-5, ids where not tied.
    static void expect_whole_texts(const LensAnswer& answer) {
        const LensAsk& ask = answer.ask;
        ASSERT_EQ(answer.layers, whole_->layers);
        for (size_t slot = 0; slot < answer.layers.size(); ++slot)
            for (int t = ask.first; t < ask.end; ++t)
                for (int r = 0; r < K; ++r) {
                    const Prediction got = answer.at(int(slot), t)[r], want = whole_->lens_at(int(slot), 0, t)[r];
                    const std::string where = "layer " + std::to_string(slot) + " position " + std::to_string(t) +
                                              " rank " + std::to_string(r);
                    EXPECT_NEAR(got.p, want.p, 1e-5) << where;
                    const Prediction* row = whole_->lens_at(int(slot), 0, t);
                    const bool apart =
                        (r == 0 || row[r - 1].p - want.p > tie) && (r + 1 == K || want.p - row[r + 1].p > tie);
                    if (apart) {
                        EXPECT_EQ(got.id, want.id) << where;
                    }
                }
    }

    static inline TempDir* dir_ = nullptr;
    static inline KeptMaps* kept_ = nullptr;
    static inline Backend* backend_ = nullptr;
    static inline AttentionResult* whole_ = nullptr;  // every position's lens, one forward
};

// lens_from: the rows before it hold no lens; the rows from it the lens of a
// forward without it; a forward none of whose rows reaches it reads out nothing.
TEST_F(LongTextLens, TheLensIsReadOutFromLensFromOnly) {
    const int T = static_cast<int>(ids().size()), from = 650;
    AttentionOptions options = kept_->options;
    options.maps = Maps::none, options.summaries = false, options.lens_k = K, options.lens_from = from;
    AttentionResult from_650;
    backend_->forward(kept_->batch, options, from_650);
    for (size_t slot = 0; slot < from_650.layers.size(); ++slot)
        for (int t = 0; t < T; ++t)
            for (int r = 0; r < K; ++r) {
                const Prediction got = from_650.lens_at(int(slot), 0, t)[r], want = whole_->lens_at(int(slot), 0, t)[r];
                if (t < from)
                    ASSERT_EQ(got.id, -1) << "position " << t;
                else
                    ASSERT_TRUE(got.id == want.id && got.p == want.p) << "position " << t;
            }
    AttentionResult before;
    backend_->forward(Batch{{slice(ids(), 0, from)}, kept_->batch.pad_id}, options, before);
    for (const Prediction& p : before.lens) ASSERT_EQ(p.id, -1);
    AttentionOptions negative = options;
    negative.lens_from = -1;
    EXPECT_THROW(backend_->forward(kept_->batch, negative, before), Error);
}

// Positions 600..605 asked with an empty cache (the rows before them in a
// chunk of 512 and the rest): the reference's lens of the first 606 tokens there.
TEST_F(LongTextLens, ThePositionsAskedAreTheReferencesLens) {
    PrefixCache cache;
    const LensAnswer answer = compute_lens(*backend_, cache, *kept_, {0, 600, 606, K});
    ASSERT_EQ(answer.tops.size(), 2u * 6 * K);
    ASSERT_EQ(cache.token_ids.at(0).size(), 606u);  // kept for the next ask
    EXPECT_EQ(cache.capacity, 606);                 // the rows planned taken at once, not grown chunk by chunk
    const Model& model = *kept_->model;
    const Texts text{slice(ids(), 0, 606)};
    const Reference ref = reference_attention(model, text, AttentionOptions{});
    const int C = model.config.n_embd, V = model.config.vocab_size;
    for (int layer = 0; layer < 2; ++layer) {
        const std::vector<double> rows = real_rows(ref.residual, layer, text, 606, C);
        const std::vector<double> logits = reference_logits(model, {rows.begin() + 600 * C, rows.end()});
        Mismatches m;
        for (int t = 600; t < 606; ++t)
            compare_top(answer.at(layer, t), K, V, reference_row(&logits[size_t(t - 600) * V], V, K + 1),
                        "layer " + std::to_string(layer) + " position " + std::to_string(t), m);
        EXPECT_EQ(m.count, 0) << m.first;
    }
}

// Asks along the text over one cache: at the end, back (the cache cut to the
// new first position), on (only the rows between computed), and from 0 (no
// cache): each the whole text's lens there; a cancel between chunks keeps the cache whole.
TEST_F(LongTextLens, AsksAlongTheTextAreTheWholeTextsLens) {
    PrefixCache cache;
    const int T = static_cast<int>(ids().size());
    for (const LensAsk ask : {LensAsk{0, T - 8, T, K}, LensAsk{0, 100, 130, K}, LensAsk{0, 300, 310, K},
                              LensAsk{0, 0, 20, K}, LensAsk{0, 310, 311, K}}) {
        SCOPED_TRACE("positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end));
        expect_whole_texts(compute_lens(*backend_, cache, *kept_, ask));
    }
    int reports = 0;
    const Progress cancel = [&](const ProgressReport&) {
        if (++reports == 1) throw Cancelled();
    };
    EXPECT_THROW(compute_lens(*backend_, cache, *kept_, {0, T - 2, T, K}, cancel), Cancelled);
    expect_whole_texts(compute_lens(*backend_, cache, *kept_, {0, T - 2, T, K}));
    EXPECT_THROW(compute_lens(*backend_, cache, *kept_, {0, 5, T + 1, K}), Error);
}

}  // namespace
