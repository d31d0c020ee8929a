// The CUDA backend against the CPU backend (itself checked against an
// independent reference in test_forward): the same weights and outputs for
// every option, on random GPT-2-layout models and on the built-in model.
// Without a usable CUDA device every test skips, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <vector>

#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"
#include "model_writer.h"

using namespace headscope;

namespace {

using Texts = std::vector<std::vector<int32_t>>;

double max_abs_diff(const AlignedVector<float>& a, const AlignedVector<float>& b) {
    double largest = 0;
    for (size_t n = 0; n < a.size(); ++n) largest = std::max(largest, std::abs(double(a[n]) - double(b[n])));
    return largest;
}

// `lengths` texts of random ids below `vocab`, the same for every run.
Texts random_texts(const std::vector<int>& lengths, int vocab) {
    std::mt19937 generator(7);
    std::uniform_int_distribution<int32_t> id(0, vocab - 1);
    Texts texts;
    for (int length : lengths) {
        texts.emplace_back(length);
        for (int32_t& t : texts.back()) t = id(generator);
    }
    return texts;
}

class CudaTest : public ::testing::Test {
protected:
    void SetUp() override {
        const CudaStatus cuda = cuda_status();
        if (!cuda.usable) GTEST_SKIP() << "CUDA backend not usable: " << cuda.reason;
    }
};

// Both backends on one model, weights loaded once (as the window does).
class Comparison {
public:
    explicit Comparison(const Model& model) : model_(model) {
        cpu_->load_weights(model);
        cuda_->load_weights(model);
    }

    // Runs `texts` with `options` on both backends and expects the same result.
    void expect_same(const Texts& texts, const AttentionOptions& options, const std::string& what) {
        const Batch batch{texts, model_.config.eos_token_id};
        AttentionResult want, got;
        cpu_->forward(batch, options, want);
        cuda_->forward(batch, options, got);
        ASSERT_EQ(cuda_->name(), "cuda") << what << ": fell back to the CPU";
        ASSERT_EQ(got.computed_on.device, "cuda") << what << ": fell back to the CPU: " << got.computed_on.fallback;
        EXPECT_EQ(got.B, want.B) << what;
        EXPECT_EQ(got.T, want.T) << what;
        EXPECT_EQ(got.NH, want.NH) << what;
        EXPECT_EQ(got.hs, want.hs) << what;
        EXPECT_EQ(got.layers, want.layers) << what;
        EXPECT_EQ(got.fully_masked, want.fully_masked) << what;
        ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
        ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
        EXPECT_LE(max_abs_diff(got.weights, want.weights), 1e-4) << what;
        EXPECT_LE(max_abs_diff(got.outputs, want.outputs), 1e-3) << what;
        for (float w : got.weights) ASSERT_TRUE(std::isfinite(w)) << what;
    }

    // Every combination of the masks, head count, scale and split, all layers
    // with outputs; then layer subsets.
    void expect_same_for_every_option(const Texts& texts, const std::vector<int>& heads) {
        int combinations = 0;
        for (bool causal : {true, false})
            for (bool padding_mask : {true, false})
                for (int n_head : heads)
                    for (Scale scale : {Scale::head, Scale::model, Scale::none})
                        for (Split split : {Split::transpose, Split::naive_view}) {
                            const AttentionOptions options{causal, padding_mask, n_head, scale, split, {}, true};
                            std::ostringstream what;
                            what << "causal " << causal << " padding " << padding_mask << " heads " << n_head
                                 << " scale " << to_string(scale) << " split " << to_string(split);
                            expect_same(texts, options, what.str());
                            ++combinations;
                        }
        EXPECT_EQ(combinations, 24 * static_cast<int>(heads.size()));
        const int last = model_.config.n_layer - 1;
        for (const std::vector<int>& layers : std::vector<std::vector<int>>{{0}, {last}, {0, last}}) {
            AttentionOptions options;
            options.layers = layers;
            options.capture_outputs = true;
            expect_same(texts, options,
                        "layers " + std::to_string(layers.front()) + ".." + std::to_string(layers.back()));
        }
    }

private:
    const Model& model_;
    std::unique_ptr<Backend> cpu_ = make_cpu_backend();
    std::unique_ptr<Backend> cuda_ = make_cuda_backend();
};

TEST_F(CudaTest, SmallModelMatchesTheCpuForEveryOption) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 3, .n_head = 4, .n_embd = 32, .n_positions = 24});
    const Model model = load_model(dir.path.string());
    // Three lengths, so that two texts are padded.
    const Texts texts = random_texts({10, 4, 7}, model.config.vocab_size);
    Comparison(model).expect_same_for_every_option(texts, {0, 1, 2, 8, 32});
}

// Rows longer than a warp, C wider than a block, and a one-token text.
TEST_F(CudaTest, WiderModelAndLongerTextsMatchTheCpu) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 2, .n_head = 6, .n_embd = 288, .n_positions = 80, .seed = 3});
    const Model model = load_model(dir.path.string());
    const Texts texts = random_texts({80, 33, 1, 50}, model.config.vocab_size);
    Comparison(model).expect_same_for_every_option(texts, {0, 1, 12, 32});
}

TEST_F(CudaTest, BuiltinModelMatchesTheCpuForEveryOption) {
    const Model model = load_model(builtin_model);
    const Texts texts = {model.tokenizer.encode("The cat sat on the mat because it was soft."),
                         model.tokenizer.encode("When Mary and John went to the store, John gave a drink to"),
                         model.tokenizer.encode("Hello")};
    Comparison(model).expect_same_for_every_option(texts, {0, 1, 2, 8});
}

// Whether this process has cuBLAS's library mapped.
bool cublas_mapped() {
    std::ifstream maps("/proc/self/maps");
    return std::string(std::istreambuf_iterator<char>(maps), {}).find("libcublas") != std::string::npos;
}

// cuBLAS is opened by the CUDA backend when it starts, never by a program
// that computes on the CPU (linked, it cost every start 0.17 s and 210 MB).
TEST(CublasOnDemand, OpenedOnlyWhenACudaBackendStarts) {
    const Model model = load_model(builtin_model);
    BackendPick pick = make_backend(BackendChoice::automatic);
    pick.backend->load_weights(model);
    AttentionResult result;
    pick.backend->forward(Batch{{model.tokenizer.encode("Hello there")}, model.config.eos_token_id}, {}, result,
                          nullptr, {});
    if (!cuda_status().usable) {
        EXPECT_EQ(result.computed_on.device, "cpu");
        EXPECT_FALSE(cublas_mapped()) << "no CUDA backend could start here, yet cuBLAS is mapped";
    } else {
        EXPECT_TRUE(cublas_mapped()) << "a CUDA backend started without cuBLAS";
    }
}

// Buffers sized for a long batch are reused by a shorter one (and grown again).
TEST_F(CudaTest, ShorterBatchAfterALongerOneMatchesTheCpu) {
    const Model model = load_model(builtin_model);
    const int longest = model.config.n_positions;
    AttentionOptions options;
    options.capture_outputs = true;
    Comparison both(model);
    both.expect_same(random_texts({longest, longest / 2}, model.config.vocab_size), options, "long");
    both.expect_same(random_texts({5, 3, 9}, model.config.vocab_size), options, "short");
    both.expect_same(random_texts({longest, 1, longest, 2, 7, longest}, model.config.vocab_size), options,
                     "longer batch");
}

}  // namespace
