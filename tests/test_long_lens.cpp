// A long text's logit lens of the positions in view (session/long_lens.h):
// core's lens read out only from AttentionOptions::lens_from, and the lens
// of positions asked, computed by forwards up to them that read the rows
// before them from the live forward's cache, or compute them over a cache of
// their own where it does not hold them (absent, another text, another
// model's options, a keystroke that changes them meanwhile), against the
// double-precision reference's residual stream read through its final norm
// and output embedding, and against the lens of one forward of the whole
// text for asks that move back and forth along it, also while another thread
// types into the live cache.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "headscope/compute/cpu_forward.h"
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

    // The live forward of `ids` over `live`, as the window's (long_maps.h:
    // the queries and keys kept, the summaries; the predictions, which
    // change no key or value, left out for the time).
    static void type(const std::vector<int32_t>& ids, PrefixCache& live, const AttentionOptions& asked = {}) {
        AttentionResult result;
        backend_->forward(Batch{{ids}, kept_->batch.pad_id}, long_text_options(asked), result, &live);
    }

    // `answers` (of one ask) against the reference's lens of the text up to
    // its last position: ids where not tied, p within 1e-4.
    static void expect_reference(const std::vector<LensAnswer>& answers) {
        const LensAsk& ask = answers.at(0).ask;
        const Model& model = *kept_->model;
        const Texts text{slice(ids(), 0, ask.end)};
        const Reference ref = reference_attention(model, text, AttentionOptions{});
        const int C = model.config.n_embd, V = model.config.vocab_size;
        for (int layer = 0; layer < 2; ++layer) {
            const std::vector<double> rows = real_rows(ref.residual, layer, text, ask.end, C);
            const std::vector<double> logits = reference_logits(model, {rows.begin() + ask.first * C, rows.end()});
            for (const LensAnswer& answer : answers) {
                ASSERT_EQ(answer.ask, ask);
                Mismatches m;
                for (int t = ask.first; t < ask.end; ++t)
                    compare_top(answer.at(layer, t), K, V, reference_row(&logits[size_t(t - ask.first) * V], V, K + 1),
                                "layer " + std::to_string(layer) + " position " + std::to_string(t), m);
                EXPECT_EQ(m.count, 0) << m.first << " (" << answer.read << " rows read)";
            }
        }
    }

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

// Positions 600..605 asked with no live cache (the rows before them in a
// chunk of 512 and the rest, over the lens's own cache), and with the live
// forward's (the rows before them read): the reference's lens of the first 606 tokens there.
TEST_F(LongTextLens, ThePositionsAskedAreTheReferencesLens) {
    CpuForward forward;
    PrefixCache own;
    const LensAnswer computed = compute_lens(forward, nullptr, own, *kept_, {0, 600, 606, K});
    ASSERT_EQ(computed.tops.size(), 2u * 6 * K);
    EXPECT_EQ(computed.read, 0);
    ASSERT_EQ(own.token_ids.at(0).size(), 606u);  // kept for the next ask
    EXPECT_EQ(own.capacity, 606);                 // the rows planned taken at once, not grown chunk by chunk
    PrefixCache live;
    type(ids(), live);
    const LensAnswer read = compute_lens(forward, &live, own, *kept_, {0, 600, 606, K});
    EXPECT_EQ(read.read, 600);
    EXPECT_TRUE(own.kv.empty());  // the live cache served: the lens's own rows freed
    expect_reference({computed, read});
}

// Asks along the text over one cache: at the end, back (the cache cut to the
// new first position), on (only the rows between computed), and from 0 (no
// cache): each the whole text's lens there; a cancel between chunks keeps the cache whole.
TEST_F(LongTextLens, AsksAlongTheTextAreTheWholeTextsLens) {
    CpuForward forward;
    PrefixCache cache;
    const int T = static_cast<int>(ids().size());
    for (const LensAsk ask : {LensAsk{0, T - 8, T, K}, LensAsk{0, 100, 130, K}, LensAsk{0, 300, 310, K},
                              LensAsk{0, 0, 20, K}, LensAsk{0, 310, 311, K}}) {
        SCOPED_TRACE("positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end));
        expect_whole_texts(compute_lens(forward, nullptr, cache, *kept_, ask));
    }
    int reports = 0;
    const Progress cancel = [&](const ProgressReport&) {
        if (++reports == 1) throw Cancelled();
    };
    EXPECT_THROW(compute_lens(forward, nullptr, cache, *kept_, {0, T - 2, T, K}, cancel), Cancelled);
    expect_whole_texts(compute_lens(forward, nullptr, cache, *kept_, {0, T - 2, T, K}));
    EXPECT_THROW(compute_lens(forward, nullptr, cache, *kept_, {0, 5, T + 1, K}), Error);
}

// The live cache read along the text, and asks it cannot serve: the live
// text edited before the positions asked, computed with a head knocked out
// (other keys and values), or another model's (the lens's own rows computed
// then), each the whole text's lens; the forward that reads refuses rows
// that leave it nothing to compute.
TEST_F(LongTextLens, TheLiveCachesRowsAreReadWhereItHoldsThem) {
    CpuForward forward;
    PrefixCache own, live;
    const int T = static_cast<int>(ids().size());
    type(ids(), live);
    for (const LensAsk ask : {LensAsk{0, T - 8, T, K}, LensAsk{0, 100, 130, K}, LensAsk{0, 1, 2, K}}) {
        SCOPED_TRACE("positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end));
        const LensAnswer answer = compute_lens(forward, &live, own, *kept_, ask);
        EXPECT_EQ(answer.read, ask.first);
        expect_whole_texts(answer);
    }
    std::vector<int32_t> edited = ids();
    edited[300] = edited[300] == 0 ? 1 : 0;
    type(edited, live);
    LensAnswer answer = compute_lens(forward, &live, own, *kept_, {0, 290, 300, K});
    EXPECT_EQ(answer.read, 290);  // before the edit
    expect_whole_texts(answer);
    answer = compute_lens(forward, &live, own, *kept_, {0, 400, 410, K});
    EXPECT_EQ(answer.read, 0);
    expect_whole_texts(answer);
    AttentionOptions knocked;
    knocked.ablate = {{0, 1}};
    type(ids(), live, knocked);
    answer = compute_lens(forward, &live, own, *kept_, {0, 400, 410, K});
    EXPECT_EQ(answer.read, 0);
    expect_whole_texts(answer);
    const Model again = load_model(dir_->path.string());  // the same weights, another model
    auto other = make_cpu_backend();
    other->load_weights(again);
    AttentionResult result;
    PrefixCache theirs;
    other->forward(kept_->batch, long_text_options(AttentionOptions{}), result, &theirs);
    answer = compute_lens(forward, &theirs, own, *kept_, {0, 400, 410, K});
    EXPECT_EQ(answer.read, 0);
    expect_whole_texts(answer);
    ForwardRequest request;
    request.cached_rows = {&live, T};
    AttentionOptions options = kept_->options;
    options.maps = Maps::none, options.summaries = false, options.lens_k = K;
    EXPECT_THROW(
        forward.run(*kept_->model, kept_->batch, options, result, CpuForward::Heads::batched, nullptr, {}, request),
        Error);
}

// A keystroke while the lens reads the live cache, between its layers (the
// live forward on the same cache from the lens's progress): one that grows
// the cache (its rows move) leaves the rows read valid; one that edits
// before the positions asked cuts them, and the lens computes them itself.
// Both the whole text's lens.
TEST_F(LongTextLens, AKeystrokeBetweenTheLensesLayersKeepsItRight) {
    CpuForward forward;
    PrefixCache own, live;
    type(slice(ids(), 0, 400), live);
    const float* before = live.kv.at(0).data();
    int reports = 0;
    const Progress grow = [&](const ProgressReport&) {
        if (++reports == 2) type(ids(), live);  // the first report: before layer 0
    };
    LensAnswer answer = compute_lens(forward, &live, own, *kept_, {0, 380, 400, K}, grow);
    ASSERT_NE(live.kv.at(0).data(), before);  // the rows moved while the lens read them
    EXPECT_EQ(answer.read, 380);
    expect_whole_texts(answer);
    std::vector<int32_t> edited = ids();
    edited[100] = edited[100] == 0 ? 1 : 0;
    reports = 0;
    const Progress edit = [&](const ProgressReport&) {
        if (++reports == 2) type(edited, live);
    };
    answer = compute_lens(forward, &live, own, *kept_, {0, 600, 610, K}, edit);
    EXPECT_EQ(answer.read, 0);
    expect_whole_texts(answer);
}

// The lens on this thread while keystrokes on another write the live cache it
// reads, at once, as the window's lens and live workers run: the typist
// grows the text a token at a time past the positions asked (the cache's
// rows move as it grows), cuts it back, and now and then types a text whose
// every token from 150 on differs (its rows there are other keys and
// values, and the cache is cut before the positions asked). Every answer,
// read from the live cache or computed over the lens's own, is the whole
// text's lens: a row read while it was rewritten, or from the other text,
// would move the probabilities far past the 1e-5 allowed. A race need not
// show here: with the reader's lock taken out of copy_cached_rows this still
// passed 10 runs of 16 to 150 asks (a read and a write overlap for
// microseconds); ThreadSanitizer would see it every time.
TEST_F(LongTextLens, TheLensIsRightWhileAnotherThreadTypes) {
    PrefixCache live;
    type(slice(ids(), 0, 520), live);
    std::vector<int32_t> other = ids();
    for (size_t t = 150; t < other.size(); ++t) other[t] = (other[t] + 1) % kept_->model->config.vocab_size;
    std::atomic<bool> done = false;
    std::atomic<int> keystrokes = 0;
    std::thread typist([&] {
        for (int n = 0; !done; ++n, ++keystrokes) type(slice(n % 9 == 8 ? other : ids(), 0, 480 + n % 60), live);
    });
    CpuForward forward;
    PrefixCache own;
    int read = 0;
    for (int i = 0; i < 16 || keystrokes < 20; ++i) {
        const int first = 300 + 37 * (i % 5);
        const LensAnswer answer = compute_lens(forward, &live, own, *kept_, {0, first, first + 3, K});
        read += answer.read > 0;
        expect_whole_texts(answer);
    }
    done = true;
    typist.join();
    EXPECT_GT(read, 0);         // the live cache served, and
    EXPECT_GE(keystrokes, 20);  // was written meanwhile
}

}  // namespace
