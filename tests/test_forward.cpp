// The CPU engine's attention against an independent reference: GPT-2's
// forward written again in plain double-precision loops, one head at a time
// (reference_forward.h), for every combination of options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "model_writer.h"
#include "process.h"
#include "reference_forward.h"

using namespace headscope;
using test::Reference;
using test::reference_attention;

namespace {

class ForwardTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path, {.n_layer = 3, .n_head = 4, .n_embd = 32, .n_positions = 24});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }

    AttentionResult run(const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt) {
        backend_->load_weights(*model_);
        AttentionResult result;
        backend_->forward(Batch{texts, model_->config.eos_token_id}, opt, result);
        return result;
    }

    static test::TempDir* dir_;
    static Model* model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    // Three texts of different lengths, so that two of them are padded.
    const std::vector<std::vector<int32_t>> texts_ = {
        {464, 3797, 3332, 319, 262, 2603, 780, 340, 373, 2705},
        {15496, 995, 0, 11},
        {40, 716, 257, 1332, 286, 262, 5951},
    };
};
test::TempDir* ForwardTest::dir_ = nullptr;
Model* ForwardTest::model_ = nullptr;

TEST_F(ForwardTest, MatchesPerHeadLoopForEveryOptionCombination) {
    int combinations = 0;
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false})
            for (int heads : {0, 1, 2, 8, 32})
                for (Scale scale : {Scale::head, Scale::model, Scale::none})
                    for (Split split : {Split::transpose, Split::naive_view}) {
                        AttentionOptions opt{causal, padding_mask, heads, scale, split, {}, true};
                        const AttentionResult got = run(texts_, opt);
                        const Reference want = reference_attention(*model_, texts_, opt);
                        ASSERT_EQ(got.weights.size(), want.weights.size());
                        double max_diff = 0;
                        for (size_t n = 0; n < want.weights.size(); ++n)
                            max_diff = std::max(max_diff, std::abs(got.weights[n] - want.weights[n]));
                        EXPECT_LT(max_diff, 1e-5)
                            << "causal " << causal << " padding " << padding_mask << " heads " << heads << " scale "
                            << to_string(scale) << " split " << to_string(split);
                        EXPECT_EQ(got.fully_masked, want.fully_masked);
                        ASSERT_EQ(got.outputs.size(), want.outputs.size());
                        double max_output_diff = 0;
                        for (size_t n = 0; n < want.outputs.size(); ++n)
                            max_output_diff = std::max(max_output_diff, std::abs(got.outputs[n] - want.outputs[n]));
                        EXPECT_LT(max_output_diff, 1e-4);
                        ++combinations;
                    }
    EXPECT_EQ(combinations, 120);
}

TEST_F(ForwardTest, LayerSubsetReturnsThoseLayersOfTheFullRun) {
    AttentionOptions all;
    const AttentionResult full = run(texts_, all);
    AttentionOptions subset;
    subset.layers = {0, 2};
    const AttentionResult part = run(texts_, subset);
    ASSERT_EQ(part.layers, (std::vector<int>{0, 2}));
    const size_t map_floats = size_t(full.B) * full.NH * full.T * full.T;
    ASSERT_EQ(part.weights.size(), 2 * map_floats);
    for (size_t n = 0; n < map_floats; ++n) {
        EXPECT_EQ(part.weights[n], full.weights[n]);
        EXPECT_EQ(part.weights[map_floats + n], full.weights[2 * map_floats + n]);
    }
}

TEST_F(ForwardTest, PaddedRowsEqualTheTextRunAlone) {
    for (bool causal : {true, false}) {
        AttentionOptions opt;
        opt.causal = causal;
        const AttentionResult batch = run(texts_, opt);
        for (int b = 0; b < batch.B; ++b) {
            const AttentionResult alone = run({texts_[b]}, opt);
            const int n = alone.T;
            for (size_t slot = 0; slot < batch.layers.size(); ++slot)
                for (int h = 0; h < batch.NH; ++h)
                    for (int i = 0; i < n; ++i)
                        for (int j = 0; j < batch.T; ++j) {
                            const float want = j < n ? alone.map(slot, 0, h)[i * n + j] : 0.f;
                            EXPECT_NEAR(batch.map(slot, b, h)[i * batch.T + j], want, 1e-6)
                                << "text " << b << " layer " << slot << " head " << h << " row " << i;
                        }
        }
    }
}

TEST_F(ForwardTest, CausalMaskKeepsEarlierRowsWhenTheLastTokenChanges) {
    std::vector<int32_t> edited = texts_[0];
    edited.back() = 1110;
    for (bool causal : {true, false}) {
        AttentionOptions opt;
        opt.causal = causal;
        const AttentionResult before = run({texts_[0]}, opt), after = run({edited}, opt);
        const int T = before.T;
        double earlier_rows_diff = 0;
        for (size_t slot = 0; slot < before.layers.size(); ++slot)
            for (int h = 0; h < before.NH; ++h)
                for (int i = 0; i < T - 1; ++i)
                    for (int j = 0; j < T; ++j)
                        earlier_rows_diff = std::max(
                            earlier_rows_diff,
                            double(std::abs(before.map(slot, 0, h)[i * T + j] - after.map(slot, 0, h)[i * T + j])));
        if (causal)
            EXPECT_EQ(earlier_rows_diff, 0.0);
        else
            EXPECT_GT(earlier_rows_diff, 1e-3);
    }
}

TEST_F(ForwardTest, EveryRowSumsToOneOrIsAFlaggedZeroRow) {
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false}) {
            AttentionOptions opt;
            opt.causal = causal;
            opt.padding_mask = padding_mask;
            const AttentionResult r = run(texts_, opt);
            int flagged = 0;
            for (size_t slot = 0; slot < r.layers.size(); ++slot)
                for (int b = 0; b < r.B; ++b)
                    for (int h = 0; h < r.NH; ++h)
                        for (int i = 0; i < r.T; ++i) {
                            double sum = 0;
                            for (int j = 0; j < r.T; ++j) {
                                const float w = r.map(slot, b, h)[i * r.T + j];
                                ASSERT_TRUE(std::isfinite(w));
                                ASSERT_GE(w, 0.f);
                                sum += w;
                            }
                            const bool masked = r.fully_masked[b * r.T + i];
                            EXPECT_NEAR(sum, masked ? 0.0 : 1.0, 1e-5);
                            flagged += masked;
                        }
            // Pad query rows are empty exactly when the padding mask is on.
            const int pad_rows = (10 - 4) + (10 - 7);
            EXPECT_EQ(flagged, padding_mask ? pad_rows * int(r.layers.size()) * r.NH : 0);
        }
}

TEST_F(ForwardTest, ResplitKeepsTheParameterCount) {
    const int C = model_->config.n_embd, L = model_->config.n_layer;
    const int64_t expected = int64_t(model_->config.vocab_size) * C + int64_t(model_->config.n_positions) * C +
                             int64_t(L) * (12 * C * C + 13 * C) + 2 * C;
    for (int heads : {1, 2, 4, 8, 16, 32}) {
        AttentionOptions opt;
        opt.n_head = heads;
        const AttentionResult r = run({texts_[1]}, opt);
        EXPECT_EQ(r.NH, heads);
        EXPECT_EQ(r.NH * r.hs, C);
        EXPECT_EQ(model_->params, expected);
    }
}

TEST_F(ForwardTest, BadInputIsAnErrorNamingTheProblem) {
    auto error_of = [&](const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt) -> std::string {
        try {
            run(texts, opt);
        } catch (const Error& e) {
            return e.what();
        }
        return "no error";
    };
    AttentionOptions opt;
    opt.n_head = 5;
    EXPECT_EQ(error_of(texts_, opt), "head count 5 does not divide C = 32");
    opt = {};
    opt.layers = {3};
    EXPECT_NE(error_of(texts_, opt).find("layer 3 out of range"), std::string::npos);
    EXPECT_NE(error_of({{}}, {}).find("empty"), std::string::npos);
    EXPECT_NE(error_of({std::vector<int32_t>(25, 11)}, {}).find("25 tokens, more than the model's limit of 24"),
              std::string::npos);
    EXPECT_NE(error_of({{50257}}, {}).find("outside the vocabulary"), std::string::npos);
}

// cut_to_context keeps the first n_positions tokens of each text (and their
// types) and of each source that has more, leaves the others, and says which.
TEST_F(ForwardTest, CutToContextKeepsTheFirstPositionsOfTooLongTexts) {
    const int limit = model_->config.n_positions;
    std::vector<int32_t> long_text(limit + 5), long_types(limit + 5, 1);
    for (int t = 0; t < limit + 5; ++t) long_text[t] = 100 + 7 * t;
    const std::vector<int32_t> short_text = {5, 6, 7};
    Batch batch{{short_text, long_text}, 0, {{0, 0, 0}, long_types}, {long_text, short_text}};
    const std::vector<TextCut> cuts = cut_to_context(model_->config, batch);
    ASSERT_EQ(cuts.size(), 2u);
    EXPECT_FALSE(cuts[0].source);
    EXPECT_EQ(cuts[0].index, 1);
    EXPECT_EQ(cuts[0].tokens, limit + 5);
    EXPECT_EQ(cuts[0].kept, limit);
    EXPECT_EQ(cuts[0].message(), "text 2 has 29 tokens; cut to the first 24, the model's limit");
    EXPECT_TRUE(cuts[1].source);
    EXPECT_EQ(cuts[1].index, 0);
    EXPECT_EQ(cuts[1].message(), "source 1 has 29 tokens; cut to the first 24, the model's limit");
    const std::vector<int32_t> kept(long_text.begin(), long_text.begin() + limit);
    EXPECT_EQ(batch.token_ids, (std::vector<std::vector<int32_t>>{short_text, kept}));
    EXPECT_EQ(batch.token_types[1], std::vector<int32_t>(limit, 1));
    EXPECT_EQ(batch.source_ids, (std::vector<std::vector<int32_t>>{kept, short_text}));

    EXPECT_TRUE(cut_to_context(model_->config, batch).empty());  // nothing left to cut
}

}  // namespace

// Asking for more maps than memory can hold is refused before anything is
// allocated: 2 layers x 2 texts x 32 heads x 4096^2 tokens x 4 bytes = 8.6 GB.
TEST(ForwardLimits, MapsBeyondTheMemoryLimitAreAnError) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 4096});
    const Model model = load_model(dir.path.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;
    options.n_head = 32;
    AttentionResult result;
    const std::vector<int32_t> text(4096, 11);
    try {
        backend->forward(Batch{{text, text}, 50256}, options, result);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("would need 9 GB"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(result.weights.empty());
    options.n_head = 4;  // 1.1 GB: allowed, but not run here
    options.layers = {0};
    EXPECT_NO_THROW(validate_forward(model, Batch{{text, text}, 50256}, options));
}

// visible_end's prefix is exactly the keys both masks allow, and a pad query
// with the padding mask sees none.
TEST(Masks, VisibleEndIsWhereBothMasksAllow) {
    for (bool causal : {true, false})
        for (bool padding : {true, false}) {
            AttentionOptions options;
            options.causal = causal;
            options.padding_mask = padding;
            const int T = 7;
            for (int length = 1; length <= T; ++length)
                for (int i = 0; i < T; ++i) {
                    int end = 0;
                    for (int j = 0; j < T; ++j) {
                        const bool seen = (!causal || j <= i) && (!padding || (j < length && i < length));
                        if (seen) end = j + 1;
                        EXPECT_EQ(causal_allows(options, i, j), !causal || j <= i);
                        EXPECT_EQ(padding_allows(options, j, length), !padding || j < length);
                    }
                    EXPECT_EQ(visible_end(options, i, length, T), end)
                        << "causal " << causal << " padding " << padding << " length " << length << " row " << i;
                }
        }
}

// The sliding window of W lets query i see key j when j > i - W, and attends
// is exactly visible_begin <= j < visible_end, every mask together.
TEST(Masks, AttendsIsWhereTheCausalWindowAndPaddingMasksAllAllow) {
    const int T = 9;
    for (int window : {0, 1, 3})
        for (bool causal : {true, false})
            for (bool padding : {true, false}) {
                AttentionOptions options;
                options.causal = causal;
                options.padding_mask = padding;
                options.sliding_window = window;
                for (int length = 1; length <= T; ++length)
                    for (int i = 0; i < T; ++i)
                        for (int j = 0; j < T; ++j) {
                            const bool in_window = window == 0 || j > i - window;
                            EXPECT_EQ(window_allows(options, i, j), in_window);
                            EXPECT_EQ(attends(options, i, j, length, T),
                                      in_window && (!causal || j <= i) && (!padding || (j < length && i < length)))
                                << "window " << window << " causal " << causal << " padding " << padding << " length "
                                << length << " query " << i << " key " << j;
                        }
            }
}

// head_counts lists exactly the counts head_split takes: for GPT-2 every
// divisor of C; for a grouped model the multiples of its group size that
// divide the query width NH * hs.
TEST(HeadCounts, AreTheCountsHeadSplitAccepts) {
    Config gpt2;
    gpt2.n_embd = 12;
    gpt2.n_head = 3;
    Config grouped = gpt2;  // 6 query heads of 4 in groups of 3: a query width of 24 from C = 12
    grouped.n_head = 6;
    grouped.n_kv_head = 2;
    grouped.head_dim = 4;
    EXPECT_EQ(head_counts(gpt2), (std::vector<int>{1, 2, 3, 4, 6, 12}));
    EXPECT_EQ(head_counts(grouped), (std::vector<int>{3, 6, 12, 24}));
    for (const Config* config : {&gpt2, &grouped}) {
        const std::vector<int> counts = head_counts(*config);
        for (int n = 1; n <= 30; ++n) {
            bool accepted = true;
            try {
                head_split(*config, n);
            } catch (const Error&) {
                accepted = false;
            }
            EXPECT_EQ(accepted, std::find(counts.begin(), counts.end(), n) != counts.end()) << n;
        }
    }
    const HeadSplit resplit = head_split(grouped, 12);
    EXPECT_EQ(resplit.NKV, 4);  // groups of 3 kept
    EXPECT_EQ(resplit.hs, 2);
}

// The choice tables are in enum order: each value's word parses back to it,
// and a word not in the table is an error naming the option and its words.
TEST(OptionWords, EachValueHasItsWordAndLabel) {
    const auto error_of = [](auto parse) -> std::string {
        try {
            parse();
        } catch (const Error& e) {
            return e.what();
        }
        return "no error";
    };
    EXPECT_STREQ(to_string(Scale::head), "head");
    EXPECT_STREQ(scale_choices.labels[static_cast<int>(Scale::head)], "1/sqrt(d_head)");
    EXPECT_STREQ(to_string(Split::naive_view), "naive-view");
    EXPECT_STREQ(split_choices.labels[static_cast<int>(Split::naive_view)], "naive view");
    EXPECT_STREQ(to_string(BackendChoice::automatic), "auto");
    for (Scale scale : {Scale::head, Scale::model, Scale::none}) EXPECT_EQ(parse_scale(to_string(scale)), scale);
    for (Split split : {Split::transpose, Split::naive_view}) EXPECT_EQ(parse_split(to_string(split)), split);
    for (BackendChoice choice : {BackendChoice::automatic, BackendChoice::cpu, BackendChoice::cuda})
        EXPECT_EQ(parse_backend_choice(to_string(choice)), choice);
    EXPECT_STREQ(to_string(Norm::rms_norm), "rmsnorm");
    EXPECT_STREQ(to_string(Positions::rotary), "rotary");
    EXPECT_STREQ(to_string(Mlp::gelu_exact), "gelu");  // the kind; the label tells the GELUs apart
    EXPECT_STREQ(mlp_choices.labels[static_cast<int>(Mlp::gelu_exact)], "GELU (erf)");
    EXPECT_STREQ(to_string(DType::BF16), "BF16");
    EXPECT_TRUE(parse_on_off("causal mask", "on"));
    EXPECT_FALSE(parse_on_off("causal mask", "off"));

    EXPECT_EQ(error_of([] { parse_scale("sqrt"); }), "scale 'sqrt' is not one of head, model, none");
    EXPECT_EQ(error_of([] { parse_split("Transpose"); }), "split 'Transpose' is not one of transpose, naive-view");
    EXPECT_EQ(error_of([] { parse_backend_choice("gpu"); }), "backend 'gpu' is not one of auto, cpu, cuda");
    EXPECT_EQ(error_of([] { parse_on_off("causal mask", "yes"); }), "causal mask 'yes' is not one of off, on");
}

// The maps depend only on the input: the same text gives the same bits from
// one backend before and after a longer text has grown its buffers, from a
// second backend (buffers elsewhere in memory), and from another process.
TEST(Determinism, SameTextSameBitsWhateverRanBeforeAndWherever) {
    const Model model = load_model(builtin_model);
    const std::vector<std::string> texts = {
        "The old lighthouse keeper walked slowly down the stone steps to the harbour.",
        "Numbers: 3.14159, 2,718 and 1e-9; punctuation!? (yes) [no] {maybe}",
    };
    std::string longer;
    for (int i = 0; i < 10; ++i) longer += texts[0] + " ";  // 231 tokens
    auto forward = [&](Backend& backend, const std::vector<std::string>& batch) {
        std::vector<std::vector<int32_t>> ids;
        for (const std::string& text : batch) ids.push_back(model.tokenizer.encode(text));
        AttentionResult result;
        backend.forward(Batch{ids, model.config.eos_token_id}, {}, result);
        return result;
    };
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const AttentionResult first = forward(*backend, texts);
    forward(*backend, {longer, texts[1]});  // grows every buffer
    EXPECT_EQ(forward(*backend, texts).weights, first.weights);
    const std::unique_ptr<Backend> other = make_cpu_backend();
    other->load_weights(model);
    forward(*other, {texts[1]});
    EXPECT_EQ(forward(*other, texts).weights, first.weights);

    // Two processes: the CLI's .npy of the same texts, byte for byte.
    test::TempDir dir;
    std::vector<std::string> bytes;
    for (const char* name : {"a.npy", "b.npy"}) {
        const test::ProcessRun run =
            test::run_program({test::cli_program(), "attention", "--text", texts[0], "--text", texts[1], "--format",
                               "npy", "--out", (dir.path / name).string()},
                              dir.path);
        ASSERT_EQ(run.status, 0) << run.err;
        bytes.push_back(test::read_file(dir.path / name));
    }
    EXPECT_EQ(bytes[0], bytes[1]);
}
