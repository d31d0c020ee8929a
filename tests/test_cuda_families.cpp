// The CUDA backend's layer loop against the CPU's on every family the test
// checkpoints cover, F32 and BF16: the maps within 1e-4, the heads' outputs,
// the predictions and the lens, knock-outs, a sliding window, re-split
// heads and both splits; a forward with a prefix cache (the window's
// keystroke) computed whole on the device, the cache emptied; and the
// forwards the device does not compute yet (experts) named in the result's
// computed_on. Without a usable CUDA device every test skips, saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "family_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/prefix_cache.h"

namespace headscope {
namespace {

using test::FamilyVariant;
using test::FileDType;
using Texts = std::vector<std::vector<int32_t>>;
using Param = std::tuple<FamilyVariant, FileDType>;

template <typename A, typename B>
double max_abs_diff(const A& a, const B& b) {
    double largest = 0;
    for (size_t n = 0; n < a.size(); ++n) largest = std::max(largest, std::abs(double(a[n]) - double(b[n])));
    return largest;
}

// Each row's top tokens' probabilities, and each next token's log-probability (NaN where none).
void expect_same_predictions(const AttentionResult& got, const AttentionResult& want, const std::string& what) {
    ASSERT_EQ(got.predictions.size(), want.predictions.size()) << what;
    for (size_t n = 0; n < got.predictions.size(); ++n)
        EXPECT_NEAR(got.predictions[n].p, want.predictions[n].p, 1e-4) << what << ", prediction " << n;
    ASSERT_EQ(got.lens.size(), want.lens.size()) << what;
    for (size_t n = 0; n < got.lens.size(); ++n)
        EXPECT_NEAR(got.lens[n].p, want.lens[n].p, 1e-4) << what << ", lens " << n;
    ASSERT_EQ(got.logprob_next.size(), want.logprob_next.size()) << what;
    for (size_t n = 0; n < got.logprob_next.size(); ++n)
        if (std::isnan(want.logprob_next[n]))
            EXPECT_TRUE(std::isnan(got.logprob_next[n])) << what << ", row " << n;
        else
            EXPECT_NEAR(got.logprob_next[n], want.logprob_next[n], 1e-3) << what << ", row " << n;
}

class CudaFamilies : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override {
        const CudaStatus cuda = cuda_status();
        if (!cuda.usable) GTEST_SKIP() << "CUDA backend not usable: " << cuda.reason;
        const auto& [variant, dtype] = GetParam();
        test::FamilySpec spec = variant.spec;
        spec.dtype = dtype;
        family_ = &test::loaded_family(variant.name + "_" + test::dtype_name(dtype) + "_1", spec);
        texts_ = test::family_texts(variant.spec);
        cpu_->load_weights(family_->model);
        cuda_->load_weights(family_->model);
    }

    const Model& model() const { return family_->model; }

    // Both backends' forward of the texts under `options`: the device's equal to the CPU's.
    void expect_same(const AttentionOptions& options, const std::string& what) {
        const Batch batch{texts_, model().config.pad_id()};
        AttentionResult want, got;
        cpu_->forward(batch, options, want);
        cuda_->forward(batch, options, got);
        ASSERT_EQ(got.computed_on.device, "cuda") << what << ": fell back: " << got.computed_on.fallback;
        EXPECT_EQ(got.layers, want.layers) << what;
        EXPECT_EQ(got.fully_masked, want.fully_masked) << what;
        ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
        EXPECT_LE(max_abs_diff(got.weights, want.weights), 1e-4) << what;
        ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
        EXPECT_LE(max_abs_diff(got.outputs, want.outputs), 1e-3) << what;
        expect_same_predictions(got, want, what);
    }

    const test::LoadedFamily* family_ = nullptr;
    Texts texts_;
    std::unique_ptr<Backend> cpu_ = make_cpu_backend();
    std::unique_ptr<Backend> cuda_ = cuda_status().usable ? make_cuda_backend() : nullptr;
};

TEST_P(CudaFamilies, MatchesTheCpuForEveryOption) {
    if (model().config.has_experts()) {  // named, and computed on the CPU
        AttentionResult result;
        cuda_->forward(Batch{texts_, model().config.pad_id()}, {}, result);
        EXPECT_EQ(result.computed_on.device, "cpu");
        EXPECT_EQ(result.computed_on.fallback, "the CUDA backend runs no mixture of experts yet");
        return;
    }
    std::vector<int> windows = {0};
    if (model().config.sliding_window) windows.push_back(model().config.sliding_window);
    for (bool causal : {true, false})
        for (int window : windows)
            for (int heads : head_counts(model().config))
                for (Scale scale : {Scale::head, Scale::none})
                    for (Split split : {Split::transpose, Split::naive_view}) {
                        AttentionOptions options{causal, true, heads, scale, split, {}, true, window};
                        expect_same(options, "causal " + std::to_string(causal) + " window " + std::to_string(window) +
                                                 " heads " + std::to_string(heads) + " scale " + to_string(scale) +
                                                 " split " + to_string(split));
                    }
}

TEST_P(CudaFamilies, PredictionsLensAndKnockOutsMatchTheCpu) {
    if (model().config.has_experts()) GTEST_SKIP() << "the device runs no experts yet (MatchesTheCpuForEveryOption)";
    AttentionOptions options;
    options.top_k = 5;
    options.lens_k = 3;
    options.capture_outputs = true;
    expect_same(options, "predictions and lens");
    options.ablate = {{0, 0}, {model().config.n_layer - 1, 1}};
    for (Ablation ablation : {Ablation::zero, Ablation::mean}) {
        options.ablation = ablation;
        expect_same(options, std::string("heads knocked out, ") + to_string(ablation));
    }
}

// The window's keystroke: a prefix cache asked for, the rows computed whole, the cache left empty.
TEST_P(CudaFamilies, AForwardWithACacheComputesEveryRow) {
    if (model().config.has_experts()) GTEST_SKIP() << "the device runs no experts yet (MatchesTheCpuForEveryOption)";
    AttentionOptions options;
    options.top_k = 5;
    PrefixCache cache;
    const Batch batch{{texts_[0]}, model().config.pad_id()};
    AttentionResult first, second, want;
    cuda_->forward(batch, options, first, &cache);
    cuda_->forward(batch, options, second, &cache);
    cpu_->forward(batch, options, want);
    ASSERT_EQ(second.computed_on.device, "cuda") << second.computed_on.fallback;
    EXPECT_EQ(second.reused, std::vector<int>{0});
    EXPECT_TRUE(cache.token_ids.empty());
    EXPECT_LE(max_abs_diff(second.weights, want.weights), 1e-4);
    expect_same_predictions(second, want, "with a cache");
}

std::vector<Param> params() {
    std::vector<Param> out;
    for (const FamilyVariant& variant : test::family_variants())
        for (FileDType dtype : {FileDType::F32, FileDType::BF16}) out.emplace_back(variant, dtype);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFamilies, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                             return std::get<0>(info.param).name + "_" + test::dtype_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace headscope
