// A long text's logit lens of the positions in view (session/long_lens.h):
// core's lens read out only from AttentionOptions::lens_from, and the lens
// of positions asked, computed by forwards up to them that read the rows
// before them from the live forward's cache, and that wait for the live
// forward where the cache does not hold them and one computes, or else say
// why (absent, another text, another model's options, a keystroke that
// changes them meanwhile), against the double-precision reference's residual
// stream read through its final norm and output embedding, and against the
// lens of one forward of the whole text for asks that move back and forth
// along it, also while another thread types into the live cache; LongRoPE's
// factors as the whole text's; and the window's LongLens asking again once
// the forward it waited for is done.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "family_models.h"
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

    static inline const std::function<bool()> computing = [] { return true; }, idle = [] { return false; };
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

// Positions 600..605, the rows before them read from the live forward's
// cache, and positions 0..5, computed (no row before them): the reference's
// lens of the text up to them. With no live cache, 600..605 are refused.
TEST_F(LongTextLens, ThePositionsAskedAreTheReferencesLens) {
    CpuForward forward;
    PrefixCache live;
    type(ids(), live);
    const LensAnswer read = compute_lens(forward, &live, *kept_, {0, 600, 606, K});
    ASSERT_EQ(read.tops.size(), 2u * 6 * K);
    EXPECT_EQ(read.read, 600);
    expect_reference({read});
    const LensAnswer first = compute_lens(forward, nullptr, *kept_, {0, 0, 6, K});
    EXPECT_EQ(first.read, 0);
    expect_reference({first});
    EXPECT_THROW(compute_lens(forward, nullptr, *kept_, {0, 600, 606, K}), Error);
}

// Asks along the text over the live cache: at the end, back, on, from 0:
// each the whole text's lens there; a cancel leaves the next ask right.
TEST_F(LongTextLens, AsksAlongTheTextAreTheWholeTextsLens) {
    CpuForward forward;
    PrefixCache live;
    type(ids(), live);
    const int T = static_cast<int>(ids().size());
    for (const LensAsk ask : {LensAsk{0, T - 8, T, K}, LensAsk{0, 100, 130, K}, LensAsk{0, 300, 310, K},
                              LensAsk{0, 0, 20, K}, LensAsk{0, 310, 311, K}}) {
        SCOPED_TRACE("positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end));
        expect_whole_texts(compute_lens(forward, &live, *kept_, ask));
    }
    int reports = 0;
    const Progress cancel = [&](const ProgressReport&) {
        if (++reports == 2) throw Cancelled();
    };
    EXPECT_THROW(compute_lens(forward, &live, *kept_, {0, T - 2, T, K}, {}, cancel), Cancelled);
    expect_whole_texts(compute_lens(forward, &live, *kept_, {0, T - 2, T, K}));
    EXPECT_THROW(compute_lens(forward, &live, *kept_, {0, 5, T + 1, K}), Error);
}

// The live cache read along the text, and asks it cannot serve: the live
// text edited before the positions asked, computed with a head knocked out
// (other keys and values), or another model's: each waits while the live
// forward computes, and is refused in a line where none computes; the
// forward that reads refuses rows that leave it nothing to compute.
TEST_F(LongTextLens, TheLiveCachesRowsAreReadWhereItHoldsThem) {
    CpuForward forward;
    PrefixCache live;
    const int T = static_cast<int>(ids().size());
    type(ids(), live);
    for (const LensAsk ask : {LensAsk{0, T - 8, T, K}, LensAsk{0, 100, 130, K}, LensAsk{0, 1, 2, K}}) {
        SCOPED_TRACE("positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end));
        const LensAnswer answer = compute_lens(forward, &live, *kept_, ask, computing);
        EXPECT_EQ(answer.read, ask.first);
        expect_whole_texts(answer);
    }
    std::vector<int32_t> edited = ids();
    edited[300] = edited[300] == 0 ? 1 : 0;
    type(edited, live);
    LensAnswer answer = compute_lens(forward, &live, *kept_, {0, 290, 300, K}, computing);
    EXPECT_EQ(answer.read, 290);  // before the edit
    expect_whole_texts(answer);
    const auto expect_waits_then_refused = [&](const PrefixCache& cache, const std::string& what) {
        SCOPED_TRACE(what);
        const LensAnswer waits = compute_lens(forward, &cache, *kept_, {0, 400, 410, K}, computing);
        EXPECT_TRUE(waits.waits);
        EXPECT_TRUE(waits.tops.empty());
        EXPECT_THROW(compute_lens(forward, &cache, *kept_, {0, 400, 410, K}, idle), Error);
    };
    expect_waits_then_refused(live, "edited before");
    AttentionOptions knocked;
    knocked.ablate = {{0, 1}};
    type(ids(), live, knocked);
    expect_waits_then_refused(live, "a head knocked out");
    const Model again = load_model(dir_->path.string());  // the same weights, another model
    auto other = make_cpu_backend();
    other->load_weights(again);
    AttentionResult result;
    PrefixCache theirs;
    other->forward(kept_->batch, long_text_options(AttentionOptions{}), result, &theirs);
    expect_waits_then_refused(theirs, "another model's");
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
// before the positions asked cuts them: the lens waits for that forward,
// or, where none computes, says so.
TEST_F(LongTextLens, AKeystrokeBetweenTheLensesLayersKeepsItRight) {
    CpuForward forward;
    PrefixCache live;
    type(slice(ids(), 0, 400), live);
    const float* before = live.kv.at(0).data();
    int reports = 0;
    const Progress grow = [&](const ProgressReport&) {
        if (++reports == 2) type(ids(), live);  // the first report: before layer 0
    };
    LensAnswer answer = compute_lens(forward, &live, *kept_, {0, 380, 400, K}, computing, grow);
    ASSERT_NE(live.kv.at(0).data(), before);  // the rows moved while the lens read them
    EXPECT_EQ(answer.read, 380);
    expect_whole_texts(answer);
    std::vector<int32_t> edited = ids();
    edited[100] = edited[100] == 0 ? 1 : 0;
    for (const bool live_computes : {true, false}) {
        type(ids(), live);
        reports = 0;
        const Progress edit = [&](const ProgressReport&) {
            if (++reports == 2) type(edited, live);
        };
        if (live_computes) {
            EXPECT_TRUE(compute_lens(forward, &live, *kept_, {0, 600, 610, K}, computing, edit).waits);
        } else {
            EXPECT_THROW(compute_lens(forward, &live, *kept_, {0, 600, 610, K}, idle, edit), Error);
        }
    }
}

// The lens on this thread while keystrokes on another write the live cache it
// reads, at once, as the window's lens and live workers run: the typist
// grows the text a token at a time past the positions asked (the cache's
// rows move as it grows), cuts it back, and now and then types a text whose
// every token from 150 on differs (its rows there are other keys and
// values, and the cache is cut before the positions asked: the lens waits).
// Every answer read from the live cache is the whole text's lens: a row read
// while it was rewritten, or from the other text, would move the
// probabilities far past the 1e-5 allowed. A race need not show here: with
// the reader's lock taken out of copy_cached_rows this still passed 10 runs
// of 16 to 150 asks (a read and a write overlap for microseconds);
// ThreadSanitizer would see it every time.
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
    int read = 0;
    for (int i = 0; i < 16 || keystrokes < 20; ++i) {
        const int first = 300 + 37 * (i % 5);
        const LensAnswer answer = compute_lens(forward, &live, *kept_, {0, first, first + 3, K}, computing);
        if (answer.waits) continue;
        read += answer.read > 0;
        expect_whole_texts(answer);
    }
    done = true;
    typist.join();
    EXPECT_GT(read, 0);         // the live cache served, and
    EXPECT_GE(keystrokes, 20);  // was written meanwhile
}

// The window's LongLens: an ask the live cache cannot serve while the live
// forward computes waits (the answer shown stays), is not computed again
// while it still computes, and is once it is done (the rows read); one
// that finds no forward computing says why, the answer shown kept, and is
// not asked again. A wait whose forward ends with no text to ask of (it
// failed with the rows lent) says so; forget() ends a wait.
TEST_F(LongTextLens, TheWindowsLensAsksAgainOnceTheLiveForwardIsDone) {
    auto live = std::make_shared<PrefixCache>();
    std::vector<int32_t> edited = ids();
    edited[100] = edited[100] == 0 ? 1 : 0;
    type(edited, *live);
    std::atomic<bool> live_computes = true;
    LongLens lens({});
    lens.open(live, [&] { return live_computes.load(); });
    const std::shared_ptr<const KeptMaps> kept(kept_, [](const KeptMaps*) {});  // the fixture's
    const auto answer_of = [&](const LensAsk& ask) {
        lens.ask(kept, ask);
        for (int i = 0; i < 20000 && lens.pending(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return lens.collect();
    };
    EXPECT_TRUE(answer_of({0, 90, 95, K}));  // before the edit: read
    EXPECT_EQ(lens.answer()->read, 90);
    EXPECT_FALSE(answer_of({0, 400, 405, K}));
    EXPECT_TRUE(lens.waiting());
    EXPECT_EQ(lens.answer()->ask, (LensAsk{0, 90, 95, K}));  // the older answer stays
    lens.ask(kept, {0, 400, 405, K});
    lens.ask(nullptr, {0, 400, 405, K});  // the rows lent meanwhile
    EXPECT_FALSE(lens.pending());         // still computing: not asked again
    EXPECT_TRUE(lens.waiting());
    type(ids(), *live);  // the forward done
    live_computes = false;
    EXPECT_TRUE(answer_of({0, 400, 405, K}));
    EXPECT_FALSE(lens.waiting());
    EXPECT_EQ(lens.answer()->read, 400);
    expect_whole_texts(*lens.answer());
    type(edited, *live);  // a forward that left the cache cut, none computing
    EXPECT_FALSE(answer_of({0, 410, 415, K}));
    EXPECT_NE(lens.message().find("cache does not hold"), std::string::npos) << lens.message();
    EXPECT_EQ(lens.answer()->ask, (LensAsk{0, 400, 405, K}));
    lens.ask(kept, {0, 410, 415, K});
    EXPECT_FALSE(lens.pending());
    EXPECT_EQ(lens.answered(), 2u);
    live_computes = true;
    EXPECT_FALSE(answer_of({0, 420, 425, K}));
    EXPECT_TRUE(lens.waiting());
    live_computes = false;
    lens.ask(nullptr, {0, 420, 425, K});  // done, and failed: no kept rows
    EXPECT_FALSE(lens.waiting());
    EXPECT_NE(lens.message().find("did not complete"), std::string::npos) << lens.message();
    live_computes = true;
    EXPECT_FALSE(answer_of({0, 430, 435, K}));
    EXPECT_TRUE(lens.waiting());
    lens.forget();
    EXPECT_FALSE(lens.waiting());
    EXPECT_EQ(lens.answer(), nullptr);
}

// LongRoPE: a text past the switch length (8 here) rotates every position
// by the long factors, its lens too. The lens of positions before the switch
// reads the live cache's rows (3 to 5) and computes its own (0 to 5) as the
// whole text's forward does, not as a text of their length (the short
// factors, other values).
TEST(LongRopeLens, ThePositionsBeforeTheSwitchRotateAsTheWholeText) {
    const LoadedFamily& family = loaded_family("phi3_longrope", family_variant("phi3_longrope"));
    const std::shared_ptr<const Model> model(&family.model, [](const Model*) {});
    const std::vector<int32_t> text = family_texts(family.checkpoint.spec)[0];  // 11 tokens
    const int pad = model->config.pad_id();
    const KeptMaps kept{model, Batch{{text}, pad}, long_text_options(AttentionOptions{}), {}};
    auto backend = make_cpu_backend();
    backend->load_weights(*model);
    AttentionOptions lens = kept.options;
    lens.maps = Maps::none, lens.summaries = false, lens.lens_k = K;
    AttentionResult whole, prefix;
    PrefixCache live;
    backend->forward(kept.batch, lens, whole, &live);
    backend->forward(Batch{{slice(text, 0, 6)}, pad}, lens, prefix);  // 6 positions: the short factors
    CpuForward forward;
    for (const PrefixCache* cache : std::vector<const PrefixCache*>{&live, nullptr}) {
        const LensAsk ask{0, cache ? 3 : 0, 6, K};
        const LensAnswer answer = compute_lens(forward, cache, kept, ask);
        EXPECT_EQ(answer.read, ask.first);
        float apart_from_prefix = 0;
        for (size_t slot = 0; slot < answer.layers.size(); ++slot)
            for (int t = ask.first; t < ask.end; ++t) {
                EXPECT_NEAR(answer.at(int(slot), t)[0].p, whole.lens_at(int(slot), 0, t)[0].p, 1e-5);
                apart_from_prefix = std::max(
                    apart_from_prefix, std::abs(answer.at(int(slot), t)[0].p - prefix.lens_at(int(slot), 0, t)[0].p));
            }
        EXPECT_GT(apart_from_prefix, 1e-4) << "the short factors give the same lens: the test shows nothing";
    }
    ForwardRequest shorter;  // a text shorter than the forward's, or a forward that keeps a cache: refused
    shorter.text_length = 5;
    AttentionResult refused;
    EXPECT_THROW(forward.run(*model, Batch{{slice(text, 0, 6)}, pad}, lens, refused, CpuForward::Heads::batched,
                             nullptr, {}, shorter),
                 Error);
    ForwardRequest cached;
    cached.text_length = 11;
    PrefixCache cache;
    EXPECT_THROW(forward.run(*model, Batch{{slice(text, 0, 6)}, pad}, lens, refused, CpuForward::Heads::batched, &cache,
                             {}, cached),
                 Error);
}

}  // namespace
