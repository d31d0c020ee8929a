// GGUF files of the mixtures of experts llama.cpp writes (qwen3moe, olmoe,
// llama with experts: Mixtral, and gpt-oss), in F32 and quantized: each expert's
// matrices the slices of the file's 3-D tensors, in their stored type and
// not copied; the Config as llama.cpp reads the file; every route and the
// next tokens against the double-precision reference (family_reference.h)
// on the values the file holds (gguf_models.h); the token ids against
// llama.cpp's. Their maps against the reference and next tokens against
// llama.cpp's are test_gguf_models.cpp's; the files refused,
// test_gguf_refusals.cpp's (part of test_gguf_models).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "prediction_checks.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

struct ExpertParam {
    Family family;
    DType dtype;
};

class GgufExperts : public ::testing::TestWithParam<ExpertParam> {};

TEST_P(GgufExperts, RoutesAndPredictionsMatchTheReference) {
    const auto [family, dtype] = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "model.gguf";
    const FamilySpec spec = gguf_family_spec(family);
    const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, dtype);
    const Model model = load_model(file.string());
    const Config& c = model.config;
    // Quantized experts run a few rows at a time through integer products,
    // whose activations are split into two 8-bit parts (about 1.6e-5 of a
    // group's largest value): within 2e-3 of the reference, 1e-5 in F32.
    const double tolerance = dtype == DType::F32 ? 1e-5 : 2e-3;

    EXPECT_EQ(c.architecture, model_type(family));
    EXPECT_EQ(c.n_experts, spec.n_experts);
    EXPECT_EQ(c.experts_per_token, spec.experts_per_token);
    EXPECT_EQ(c.expert_mlp_dim, spec.expert_mlp_dim);
    const bool gpt_oss = family == Family::gpt_oss;
    EXPECT_EQ(c.routing, gpt_oss ? Routing::top_k_then_softmax : Routing::softmax_then_top_k);
    // llama.cpp's build_moe_ffn renormalizes Qwen 3 MoE's and Mixtral's chosen weights, never OLMoE's.
    EXPECT_EQ(c.normalize_top_k, family == Family::qwen3_moe || family == Family::mixtral);
    EXPECT_EQ(c.sliding_window, spec.sliding_window) << "llama.cpp's llama has no window";
    EXPECT_EQ(c.swiglu_limit, gpt_oss ? 7.f : 0.f) << "llama.cpp's swiglu_oai clamps at 7";
    // Each expert's matrices in the file's type (gpt-oss's MXFP4 but in an F32
    // file), expert e's the e-th slice of the mapped 3-D tensor; gpt-oss's with their biases.
    const DType stored = gpt_oss && dtype != DType::F32 ? DType::MXFP4 : dtype;
    const size_t slice = dtype_row_bytes(stored, int64_t{spec.n_embd} * spec.expert_mlp_dim);
    for (int l = 0; l < spec.n_layer; ++l) {
        const std::vector<ExpertWeights>& experts = model.layers.at(l).experts;
        ASSERT_EQ(experts.size(), size_t(spec.n_experts));
        for (int e = 0; e < spec.n_experts; ++e)
            for (const auto& [matrix, first] :
                 {std::pair{experts[e].gate, experts[0].gate}, std::pair{experts[e].up, experts[0].up},
                  std::pair{experts[e].down, experts[0].down}}) {
                EXPECT_EQ(matrix.dtype, stored);
                EXPECT_EQ(matrix.data, first.data + e * slice) << "layer " << l << " expert " << e;
            }
        for (const ExpertWeights& expert : experts) EXPECT_EQ(expert.down_b != nullptr, gpt_oss);
    }

    const std::vector<std::vector<int32_t>> texts = {{257, 9, 100, 200, 129, 17, 30, 258, 42, 5, 77},
                                                     {257, 64, 256, 12, 90, 33, 2}};
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions opt;
    opt.top_k = 5;
    AttentionResult got;
    backend->forward(Batch{texts, c.pad_id()}, opt, got);
    const FamilyReference want = family_reference(checkpoint, texts, opt);
    ASSERT_EQ(got.router_experts.size(), want.router_experts.size());
    int differ = 0;
    double weights = 0;
    for (size_t i = 0; i < want.router_experts.size(); ++i) {
        differ += got.router_experts[i] != want.router_experts[i];
        weights = std::max(weights, double(std::abs(got.router_weights[i] - want.router_weights[i])));
    }
    EXPECT_EQ(differ, 0) << "of " << want.router_experts.size() << " choices";
    EXPECT_LT(weights, tolerance);
    expect_top_5(got, texts,
                 family_logits(checkpoint, real_rows(want.residual, spec.n_layer - 1, texts, got.T, spec.n_embd)),
                 spec.vocab_size, tolerance);
}

std::vector<ExpertParam> expert_params() {
    std::vector<ExpertParam> all;
    for (Family family : {Family::qwen3_moe, Family::olmoe, Family::mixtral})
        for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_K}) all.push_back({family, dtype});
    for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_K}) all.push_back({Family::gpt_oss, dtype});
    return all;
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufExperts, ::testing::ValuesIn(expert_params()), [](const auto& info) {
    return model_type(info.param.family) + std::string("_") + to_string(info.param.dtype);
});

// Each family's file's tokenizer gives llama.cpp's ids.
TEST(GgufExpertsTokens, TokenIdsAreLlamaCpps) {
    for (Family family : {Family::qwen3_moe, Family::olmoe, Family::mixtral, Family::gpt_oss}) {
        TempDir dir;
        const fs::path file = dir.path / "model.gguf";
        write_gguf_family(file, gguf_family_spec(family), DType::F32);
        const Model model = load_model(file.string());
        const std::vector<std::string> texts = {"The cat sat on the mat.", " two  spaces\tand a tab", "caf\xC3\xA9 t"};
        const auto expected = llama_cpp_token_ids(file, texts);
        if (!expected) GTEST_SKIP() << "node cannot be run: run tools/setup";
        ASSERT_EQ(expected->size(), texts.size());
        for (size_t i = 0; i < texts.size(); ++i)
            EXPECT_EQ(model.tokenizer.encode(texts[i]), (*expected)[i]) << model_type(family) << ": " << texts[i];
    }
}

}  // namespace
