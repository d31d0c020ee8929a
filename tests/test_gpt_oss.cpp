// gpt-oss: a tiny checkpoint as its Hugging Face files hold it (experts packed
// as MXFP4 blocks and scales, every attention bias, sinks, a window on even
// layers, YaRN) against the double-precision reference written from
// modeling_gpt_oss.py: the maps, the sinks' weight, the routes, the
// residual after every layer and the last logits; its config read as
// configuration_gpt_oss.py reads it (its refusals: test_expert_refusals.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "family_writer.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "process.h"

using namespace headscope;
using namespace headscope::test;
using json = nlohmann::json;

namespace {

// The tiny model (family_variants' gpt_oss): 4 heads of 16 in 2 groups, 4
// experts of 32, 2 a token, layers 0 and 2 windowed (4 keys, shorter than
// the texts), layer 1 global; a swiglu_limit of 0.3 that the experts' gates and ups cross.
FamilySpec tiny_spec() { return family_variant("gpt_oss"); }

struct Loaded {
    TempDir dir;
    FamilyCheckpoint checkpoint = make_family_checkpoint(tiny_spec());
    Model model;
    Loaded() {
        write_family_checkpoint(dir.path, checkpoint);
        model = load_model(dir.path.string());
    }
};
const Loaded& loaded() {
    static const Loaded model;
    return model;
}

AttentionResult forward_of(const Model& model, const std::vector<std::vector<int32_t>>& texts,
                           const AttentionOptions& opt) {
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionResult result;
    backend->forward(Batch{texts, model.config.pad_id()}, opt, result, nullptr, {});
    return result;
}

AttentionOptions model_options(const FamilySpec& spec) {
    AttentionOptions opt;
    opt.top_k = 1;
    opt.sliding_window = spec.sliding_window;
    return opt;
}

TEST(GptOss, ConfigIsReadAsTransformersReadsIt) {
    const Config& c = loaded().model.config;
    EXPECT_TRUE(c.attention_sinks);
    EXPECT_TRUE(c.qkv_bias && c.o_bias);
    EXPECT_EQ(c.routing, Routing::top_k_then_softmax);
    EXPECT_TRUE(c.router_bias && c.packed_experts);
    EXPECT_FLOAT_EQ(c.swiglu_limit, 0.3f);
    EXPECT_EQ(c.n_experts, 4);
    EXPECT_EQ(c.expert_mlp_dim, 32);
    EXPECT_TRUE(c.windowed(0));
    EXPECT_FALSE(c.windowed(1));
    EXPECT_NEAR(c.rope.cos_sin_scale, 0.1 * std::log(32.0) + 1, 1e-6);
    // YaRN's divisors against the reference's frequencies: pair 0 kept, pair 1 on the ramp, the rest divided by 32.
    FamilySpec unscaled = loaded().checkpoint.spec;
    unscaled.family = Family::llama;
    const std::vector<float> yarn = rope_inverse_frequencies(loaded().checkpoint.spec, 16),
                             plain = rope_inverse_frequencies(unscaled, 16);
    ASSERT_EQ(c.rope.frequency_divisors.size(), yarn.size());
    for (size_t d = 0; d < yarn.size(); ++d)
        EXPECT_NEAR(c.rope.frequency_divisors[d], plain[d] / yarn[d], 1e-5 * plain[d] / yarn[d]) << d;
    EXPECT_FLOAT_EQ(c.rope.frequency_divisors[0], 1);
    EXPECT_GT(c.rope.frequency_divisors[1], 1.5);
    EXPECT_LT(c.rope.frequency_divisors[1], 31);
    // Defaults: configuration_gpt_oss.py's, its layer_types alternating from a windowed layer 0.
    const json bare = {
        {"model_type", "gpt_oss"}, {"num_hidden_layers", 3},  {"num_attention_heads", 4},          {"hidden_size", 64},
        {"vocab_size", 100},       {"intermediate_size", 32}, {"max_position_embeddings", 131072}, {"head_dim", 16},
        {"rope_scaling", nullptr}};
    const Config d = config_from_json(bare, "config.json");
    EXPECT_EQ(d.n_experts, 128);
    EXPECT_EQ(d.experts_per_token, 4);
    EXPECT_EQ(d.sliding_window, 128);
    EXPECT_FLOAT_EQ(d.rope.theta, 150000);
    EXPECT_FLOAT_EQ(d.swiglu_limit, 7);
    EXPECT_NEAR(d.layer_norm_epsilon, 1e-5, 1e-12);
    for (int l = 0; l < 3; ++l) EXPECT_EQ(d.windowed(l), l % 2 == 0) << l;
    EXPECT_NEAR(d.rope.cos_sin_scale, 0.1 * std::log(32.0) + 1, 1e-6);  // the default YaRN: 131072 / 4096
    EXPECT_TRUE(d.qkv_bias);
}

// Every weight counted: the file's tensors and the values its MXFP4 blocks hold.
TEST(GptOss, ParamsCountThePackedExperts) {
    const Loaded& f = loaded();
    int64_t params = 0;
    for (const auto* list : {&f.checkpoint.tensors, &f.checkpoint.unpacked})
        for (const NamedTensor& t : *list) params += static_cast<int64_t>(t.values.size());
    EXPECT_EQ(f.model.params, params);
    const std::string packed = "model.layers.2.mlp.experts.gate_up_proj";
    const auto info = std::find_if(f.model.tensors.begin(), f.model.tensors.end(),
                                   [&](const TensorInfo& t) { return t.name == packed; });
    ASSERT_NE(info, f.model.tensors.end());
    EXPECT_EQ(info->dtype, DType::MXFP4);
    EXPECT_EQ(info->shape, (std::vector<int64_t>{4, 64, 64}));
    EXPECT_EQ(info->bytes, 4 * 64 * 2 * 17);  // 2 blocks a row: 16 bytes of codes and a scale each
}

TEST(GptOss, ForwardMatchesTheReference) {
    const Loaded& f = loaded();
    const FamilySpec& spec = f.checkpoint.spec;
    const auto texts = family_texts(spec);
    const AttentionOptions opt = model_options(spec);
    const AttentionResult result = forward_of(f.model, texts, opt);
    const FamilyReference ref = family_reference(f.checkpoint, texts, opt);
    ASSERT_EQ(result.weights.size(), ref.weights.size());
    const int T = result.T;
    double largest_sink = 0;
    for (size_t row = 0; row < ref.weights.size() / T; ++row) {
        double sum = 0, ref_sum = 0;
        for (int j = 0; j < T; ++j) {
            EXPECT_NEAR(result.weights[row * T + j], ref.weights[row * T + j], 2e-5) << row << " " << j;
            sum += result.weights[row * T + j], ref_sum += ref.weights[row * T + j];
        }
        if (ref_sum == 0) continue;                      // a fully masked row
        EXPECT_NEAR(1 - sum, 1 - ref_sum, 2e-5) << row;  // the sink's weight
        largest_sink = std::max(largest_sink, 1 - ref_sum);
    }
    EXPECT_GT(largest_sink, 0.1);  // the sinks matter
    ASSERT_EQ(result.router_experts.size(), ref.router_experts.size());
    for (size_t i = 0; i < ref.router_experts.size(); ++i) {
        EXPECT_EQ(result.router_experts[i], ref.router_experts[i]) << i;
        EXPECT_NEAR(result.router_weights[i], ref.router_weights[i], 1e-5) << i;
    }
    // The logits at each text's last token, through the reference's final norm and lm_head.
    const int C = spec.n_embd, V = spec.vocab_size, B = static_cast<int>(texts.size());
    for (int b = 0; b < B; ++b) {
        const int last = static_cast<int>(texts[b].size()) - 1;
        const size_t at = ((size_t(spec.n_layer - 1) * B + b) * T + last) * C;
        const std::vector<double> row(ref.residual.begin() + at, ref.residual.begin() + at + C);
        const std::vector<double> logits = family_logits(f.checkpoint, row);
        for (int v = 0; v < V; ++v)
            EXPECT_NEAR(result.last_logits[size_t(b) * V + v], logits[v], 2e-4) << b << " " << v;
    }
}

// An expert knocked out is never chosen, and the routes are the reference's without it.
TEST(GptOss, AnExpertKnockedOutIsTheReferenceWithoutIt) {
    const Loaded& f = loaded();
    const auto texts = family_texts(f.checkpoint.spec);
    AttentionOptions opt = model_options(f.checkpoint.spec);
    const AttentionResult full = forward_of(f.model, texts, opt);
    const int chosen = full.router_experts.at(full.router_at(1, 0, 0));  // layer 1's first choice at the first token
    opt.ablate_experts = {{1, chosen}};
    const AttentionResult knocked = forward_of(f.model, texts, opt);
    const FamilyReference ref = family_reference(f.checkpoint, texts, opt);
    ASSERT_EQ(knocked.router_experts.size(), ref.router_experts.size());
    for (size_t i = 0; i < ref.router_experts.size(); ++i) {
        EXPECT_EQ(knocked.router_experts[i], ref.router_experts[i]) << i;
        EXPECT_NEAR(knocked.router_weights[i], ref.router_weights[i], 1e-5) << i;
    }
    for (int b = 0; b < knocked.B; ++b)
        for (int t = 0; t < knocked.T; ++t)
            for (int i = 0; i < knocked.router_k; ++i)
                EXPECT_NE(knocked.router_experts[knocked.router_at(1, b, t) + i], chosen);
}

// A router of zeros with a bias of zeros ties every expert: each row takes
// experts 0 and 1, in that order, at 1/2 each (the softmax over the two).
TEST(GptOss, EqualLogitsGoToTheLowerExpert) {
    FamilyCheckpoint checkpoint = loaded().checkpoint;
    for (NamedTensor& t : checkpoint.tensors)
        if (t.name.starts_with("model.layers.0.mlp.router.")) std::fill(t.values.begin(), t.values.end(), 0.f);
    TempDir dir;
    write_family_checkpoint(dir.path, checkpoint);
    const Model model = load_model(dir.path.string());
    const auto texts = family_texts(checkpoint.spec);
    const AttentionOptions opt = model_options(checkpoint.spec);
    const AttentionResult result = forward_of(model, texts, opt);
    for (int b = 0; b < result.B; ++b)
        for (int t = 0; t < result.T; ++t) {
            const size_t at = result.router_at(0, b, t);
            EXPECT_EQ(result.router_experts[at], 0);
            EXPECT_EQ(result.router_experts[at + 1], 1);
            EXPECT_FLOAT_EQ(result.router_weights[at], 0.5f);
            EXPECT_FLOAT_EQ(result.router_weights[at + 1], 0.5f);
        }
    const FamilyReference ref = family_reference(checkpoint, texts, opt);
    EXPECT_EQ(result.router_experts, ref.router_experts);
}

}  // namespace
