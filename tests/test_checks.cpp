// Core's checks (the window's checks panel) against the double-precision
// reference forward written in the tests (reference_forward.h): the per-head
// loop's numbers, the batched-vs-loop comparison, the causality check and the
// parameter and shape tables, and one-line errors on bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/inspect/checks.h"
#include "headscope/inspect/dance.h"
#include "model_writer.h"
#include "reference_forward.h"

using namespace headscope;

namespace {

template <typename A, typename B>
double max_abs_diff(const A& a, const B& b) {
    EXPECT_EQ(a.size(), b.size());
    double diff = 0;
    for (size_t n = 0; n < std::min(a.size(), b.size()); ++n)
        diff = std::max(diff, std::abs(static_cast<double>(a[n]) - static_cast<double>(b[n])));
    return diff;
}

class ChecksTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path, {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 24, .seed = 7});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }
    void SetUp() override { backend_->load_weights(*model_); }

    Batch batch() const { return Batch{texts_, model_->config.eos_token_id}; }

    static test::TempDir* dir_;
    static Model* model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    // A long text and a short one: the short one is padded by 6.
    const std::vector<std::vector<int32_t>> texts_ = {
        {464, 3797, 3332, 319, 262, 2603, 780, 340, 373, 2705},
        {15496, 995, 0, 11},
    };
};
test::TempDir* ChecksTest::dir_ = nullptr;
Model* ChecksTest::model_ = nullptr;

TEST_F(ChecksTest, HeadLoopMatchesTheReferenceForEveryMaskAndHeadCount) {
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false})
            for (int heads : {0, 1, 8})
                for (Scale scale : {Scale::head, Scale::model}) {
                    const AttentionOptions opt{causal, padding_mask, heads, scale, Split::transpose, {}, true};
                    const AttentionResult loop = forward_by_head_loop(*model_, batch(), opt);
                    const test::Reference want = test::reference_attention(*model_, texts_, opt);
                    EXPECT_EQ(loop.layers, (std::vector<int>{0, 1}));
                    EXPECT_LT(max_abs_diff(loop.weights, want.weights), 1e-5)
                        << "causal " << causal << " padding " << padding_mask << " heads " << heads;
                    EXPECT_LT(max_abs_diff(loop.outputs, want.outputs), 1e-4);
                    EXPECT_EQ(loop.fully_masked, want.fully_masked);
                }
}

TEST_F(ChecksTest, LoopSplitsByColumnsWhateverTheSplitOption) {
    AttentionOptions naive;
    naive.split = Split::naive_view;
    const AttentionResult loop = forward_by_head_loop(*model_, batch(), naive);
    const test::Reference correct = test::reference_attention(*model_, texts_, {});
    EXPECT_LT(max_abs_diff(loop.weights, correct.weights), 1e-5);
}

TEST_F(ChecksTest, ComparisonIsRoundOffForTheCorrectSplitAndTheNaiveErrorOtherwise) {
    AttentionOptions opt;
    opt.layers = {1};  // the comparison always covers every layer
    const HeadLoopComparison same = compare_with_head_loop(*backend_, *model_, batch(), opt);
    EXPECT_LT(same.max_weight_diff, 1e-5);
    EXPECT_LT(same.max_output_diff, 1e-4);

    // The engine computes the naive split for real; the loop does not.
    opt = {};
    opt.split = Split::naive_view;
    AttentionOptions correct_split = opt;
    correct_split.split = Split::transpose;
    const test::Reference naive = test::reference_attention(*model_, texts_, opt);
    const test::Reference correct = test::reference_attention(*model_, texts_, correct_split);
    const HeadLoopComparison differ = compare_with_head_loop(*backend_, *model_, batch(), opt);
    const double want_weights = max_abs_diff(naive.weights, correct.weights);
    const double want_outputs = max_abs_diff(naive.outputs, correct.outputs);
    EXPECT_GT(want_weights, 1e-2);
    EXPECT_NEAR(differ.max_weight_diff, want_weights, 1e-4);
    EXPECT_NEAR(differ.max_output_diff, want_outputs, 1e-3);
    // The scale the round-off is judged against: the largest |output| of the correct split.
    double largest = 0;
    for (double v : correct.outputs) largest = std::max(largest, std::abs(v));
    EXPECT_GT(largest, 0.1);
    EXPECT_NEAR(differ.max_output, largest, 1e-4 * largest);
}

TEST_F(ChecksTest, CausalityIsExactWithTheCausalMaskAndBrokenWithout) {
    for (int b : {0, 1})
        for (bool padding_mask : {true, false}) {
            AttentionOptions opt;
            opt.padding_mask = padding_mask;
            const CausalityCheck on = check_causality(*backend_, *model_, batch(), b, opt);
            const int length = static_cast<int>(texts_[b].size());
            EXPECT_EQ(on.position, length - 1);
            EXPECT_EQ(on.earlier_rows, length - 1);
            EXPECT_EQ(on.token, texts_[b].back());
            EXPECT_NE(on.replacement, on.token);
            EXPECT_EQ(on.max_earlier_diff, 0.0) << "text " << b << " padding " << padding_mask;
            EXPECT_GT(on.max_changed_row_diff, 1e-3);

            // With the mask off, the reference says how much the earlier rows move.
            opt.causal = false;
            const CausalityCheck off = check_causality(*backend_, *model_, batch(), b, opt);
            std::vector<std::vector<int32_t>> edited = texts_;
            edited[b].back() = off.replacement;
            const test::Reference before = test::reference_attention(*model_, texts_, opt);
            const test::Reference after = test::reference_attention(*model_, edited, opt);
            const int NH = model_->config.n_head, T = 10;
            double want = 0;
            for (int l = 0; l < model_->config.n_layer; ++l)
                for (int h = 0; h < NH; ++h)
                    for (int i = 0; i < length - 1; ++i)
                        for (int j = 0; j < T; ++j) {
                            const size_t n = ((((size_t(l) * 2 + b) * NH + h) * T + i) * T + j);
                            want = std::max(want, std::abs(before.weights[n] - after.weights[n]));
                        }
            EXPECT_GT(want, 1e-3);
            EXPECT_NEAR(off.max_earlier_diff, want, 1e-5) << "text " << b << " padding " << padding_mask;
        }
}

// The verdicts the checks tab shows: exactly 0 is exact; a difference of
// float round-off (the 7.8e-7 two forwards' sums could differ by) is
// round-off, green too; beyond relative_round_off of the values' size it differs.
// The progress of the checks (the window's bar): steps that rise to their
// total, with the results unchanged by being watched; a cancel at a report ends them there.
TEST_F(ChecksTest, ChecksReportTheirStepsAndStopWhenCancelled) {
    std::vector<ProgressReport> reports;
    const Progress record = [&](const ProgressReport& r) { reports.push_back(r); };
    const HeadLoopComparison watched = compare_with_head_loop(*backend_, *model_, batch(), {}, record);
    const HeadLoopComparison unwatched = compare_with_head_loop(*backend_, *model_, batch(), {});
    EXPECT_EQ(watched.max_weight_diff, unwatched.max_weight_diff);
    EXPECT_EQ(watched.max_output_diff, unwatched.max_output_diff);
    // The loop's 2 layers, each before it runs, then the backend's forward before and after: 3 steps.
    std::vector<int64_t> done;
    for (const ProgressReport& r : reports) {
        EXPECT_EQ(r.total, 3);
        EXPECT_EQ(r.unit, ProgressUnit::steps);
        done.push_back(r.done);
    }
    EXPECT_EQ(done, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(reports.front().what, "checks: the per-head loop");
    EXPECT_EQ(reports.back().what, "checks: the batched heads");

    reports.clear();
    check_causality(*backend_, *model_, batch(), 1, {}, record);
    done.clear();
    for (const ProgressReport& r : reports) done.push_back(r.done);
    EXPECT_EQ(done, (std::vector<int64_t>{0, 1, 2}));

    int seen = 0;
    const Progress cancel_second = [&](const ProgressReport&) {
        if (++seen == 2) throw Cancelled();
    };
    EXPECT_THROW(compare_with_head_loop(*backend_, *model_, batch(), {}, cancel_second), Cancelled);
    EXPECT_EQ(seen, 2);
    seen = 0;
    EXPECT_THROW(check_causality(*backend_, *model_, batch(), 1, {}, cancel_second), Cancelled);
    EXPECT_EQ(seen, 2);
}

TEST_F(ChecksTest, AgreementSaysExactRoundOffOrDiffers) {
    AttentionOptions opt;
    AttentionResult first, second;
    backend_->forward(batch(), opt, first);
    backend_->forward(batch(), opt, second);
    ASSERT_EQ(first.weights, second.weights);
    EXPECT_EQ(agreement(0, 1), Agreement::exact);
    // Earlier rows that differ only by round-off: one weight of the second run nudged.
    second.weights[3] += 7.8e-7f;
    double max_diff = 0;
    for (size_t n = 0; n < first.weights.size(); ++n)
        max_diff = std::max(max_diff, std::abs(double(first.weights[n]) - second.weights[n]));
    EXPECT_GT(max_diff, 0);
    EXPECT_EQ(agreement(max_diff, 1), Agreement::round_off);
    EXPECT_EQ(agreement(2 * relative_round_off, 1), Agreement::differs);
    // Relative to the size of what is compared: outputs of size 50 allow 50 times more.
    EXPECT_EQ(round_off_tolerance(50), 50 * relative_round_off);
    EXPECT_EQ(agreement(2 * relative_round_off, 50), Agreement::round_off);
    EXPECT_EQ(agreement(60 * relative_round_off, 50), Agreement::differs);
    EXPECT_EQ(round_off_tolerance(0.5), relative_round_off);  // sizes below 1 count as 1
}

TEST_F(ChecksTest, ParameterTableAddsUpToTheModel) {
    const Config& cfg = model_->config;
    const int64_t C = cfg.n_embd, L = cfg.n_layer;
    const std::vector<ParameterRow> rows = parameter_table(*model_);
    EXPECT_EQ(rows.size(), static_cast<size_t>(12 * L + 4));  // wte, wpe, ln_f weight and bias, 12 per layer
    int64_t total = 0;
    for (const ParameterRow& row : rows) {
        int64_t product = 1;
        for (int64_t size : row.shape) product *= size;
        EXPECT_EQ(row.count, product) << row.name;
        total += row.count;
    }
    EXPECT_EQ(total, int64_t(cfg.vocab_size) * C + int64_t(cfg.n_positions) * C + L * (12 * C * C + 13 * C) + 2 * C);
    EXPECT_EQ(total, model_->params);
    const auto qkv = std::find_if(rows.begin(), rows.end(),
                                  [](const ParameterRow& r) { return r.name == "transformer.h.0.attn.c_attn.weight"; });
    ASSERT_NE(qkv, rows.end());
    EXPECT_EQ(qkv->shape, (std::vector<int64_t>{C, 3 * C}));
}

TEST_F(ChecksTest, ComputeShapesFollowTheSplit) {
    const std::vector<ShapeRow> rows = compute_shapes(model_->config, 2, 10, 8);
    auto shape_of = [&](const std::string& name) {
        for (const ShapeRow& row : rows)
            if (row.name == name) return row.shape;
        return std::vector<int64_t>{};
    };
    EXPECT_EQ(shape_of("qkv"), (std::vector<int64_t>{2, 10, 96}));
    EXPECT_EQ(shape_of("q, k, v"), (std::vector<int64_t>{2, 8, 10, 4}));
    EXPECT_EQ(shape_of("att"), (std::vector<int64_t>{2, 8, 10, 10}));
    EXPECT_EQ(shape_of("y"), (std::vector<int64_t>{2, 10, 32}));
}

// Grouped heads of another size than C / NH (Qwen 3's 4 heads of 16 on C =
// 32, 2 key/value heads): q, k and v have their own head counts, K and V are
// expanded to the group and repeated, y is NH * hs wide.
TEST_F(ChecksTest, ComputeShapesOfGroupedHeads) {
    Config qwen3;
    qwen3.architecture = "qwen3";
    qwen3.n_embd = 32;
    qwen3.n_head = 4;
    qwen3.n_kv_head = 2;
    qwen3.head_dim = 16;
    qwen3.positions = Positions::rotary;
    qwen3.qkv_layout = QkvLayout::separate;
    std::vector<std::string> names;
    for (const ShapeRow& row : compute_shapes(qwen3, 2, 10, 4)) names.push_back(row.name);
    EXPECT_EQ(names, (std::vector<std::string>{"x", "qkv", "q", "k, v", "k, v expanded", "k, v repeated", "att",
                                               "att @ v", "y"}));
    const std::vector<ShapeRow> rows = compute_shapes(qwen3, 2, 10, 4);
    auto shape_of = [&](const std::string& name) {
        for (const ShapeRow& row : rows)
            if (row.name == name) return row.shape;
        return std::vector<int64_t>{};
    };
    EXPECT_EQ(shape_of("qkv"), (std::vector<int64_t>{2, 10, 64 + 2 * 32}));
    EXPECT_EQ(shape_of("q"), (std::vector<int64_t>{2, 4, 10, 16}));
    EXPECT_EQ(shape_of("k, v"), (std::vector<int64_t>{2, 2, 10, 16}));
    EXPECT_EQ(shape_of("k, v expanded"), (std::vector<int64_t>{2, 2, 2, 10, 16}));
    EXPECT_EQ(shape_of("k, v repeated"), (std::vector<int64_t>{2, 4, 10, 16}));
    EXPECT_EQ(shape_of("y"), (std::vector<int64_t>{2, 10, 64}));
    EXPECT_EQ(rows.back().dims, "(B, T, NH*hs)");
    // Re-split into 8 heads of 8: groups of 2 kept, so 4 key/value heads.
    const std::vector<ShapeRow> resplit = compute_shapes(qwen3, 1, 3, 8);
    EXPECT_EQ(resplit[3].shape, (std::vector<int64_t>{1, 4, 3, 8}));
    EXPECT_THROW(compute_shapes(qwen3, 1, 3, 3), Error);
    // The repeat copies where the dance's strides need a new buffer (two
    // key/value heads), and is a view where they do not (2 heads: one key/value head).
    for (int n_head : {4, 2}) {
        const Dance dance = reshape_dance(1, 3, qwen3, n_head, Split::transpose);
        const bool copied = std::any_of(dance.buffers.begin(), dance.buffers.end(),
                                        [](const DanceBuffer& b) { return b.name == "k_repeated"; });
        for (const ShapeRow& row : compute_shapes(qwen3, 1, 3, n_head)) {
            if (row.name == "k, v repeated") {
                EXPECT_EQ(row.what.find("copies") != std::string::npos, copied) << n_head << ": " << row.what;
            }
        }
        EXPECT_EQ(copied, n_head == 4);
    }
}

// The model table names the GPT-2 test model's configuration in words.
TEST_F(ChecksTest, ConfigTableSaysWhatTheModelIs) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const ConfigRow& row : config_table(*model_)) rows.emplace_back(row.name, row.value);
    const std::vector<std::pair<std::string, std::string>> want = {
        {"architecture", "gpt2"},
        {"layers L", "2"},
        {"channels C", "32"},
        {"query heads NH", "4"},
        {"key/value heads NKV", "4 (one per query head)"},
        {"head size hs", "8 (C / NH)"},
        {"norm", "LayerNorm"},
        {"positions", "learned (wpe), 24 positions"},
        {"MLP", "GELU (tanh), 128 hidden"},
        {"sliding window", "none"},
        {"weights", "F32"},
        {"tensors", "28 F32"},  // wte, wpe, 12 a layer, ln_f's 2
        {"vocabulary V", "50257"}};
    EXPECT_EQ(rows, want);
}

TEST_F(ChecksTest, BadInputIsAOneLineError) {
    auto error_of = [](auto call) -> std::string {
        try {
            call();
        } catch (const Error& e) {
            return e.what();
        }
        return "no error";
    };
    AttentionOptions five_heads;
    five_heads.n_head = 5;
    const std::vector<std::string> errors = {
        error_of([&] { forward_by_head_loop(*model_, batch(), five_heads); }),
        error_of([&] { compare_with_head_loop(*backend_, *model_, batch(), five_heads); }),
        error_of([&] { check_causality(*backend_, *model_, batch(), 0, five_heads); }),
        error_of([&] { compute_shapes(model_->config, 2, 10, 5); }),
    };
    for (const std::string& error : errors) {
        EXPECT_NE(error.find("divid"), std::string::npos) << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    }
    EXPECT_NE(error_of([&] { check_causality(*backend_, *model_, batch(), 2, {}); }).find("not in the batch"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  forward_by_head_loop(*model_, Batch{{{50257}}, 50256}, {});
              }).find("outside the vocabulary"),
              std::string::npos);
}

}  // namespace
