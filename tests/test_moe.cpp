// The mixtures of experts (Mixtral, Qwen 3 MoE, OLMoE): each router's
// choices and weights against the reference written from transformers'
// SparseMoeBlock (family_reference.h's expert_mlp), equal weights to the
// lower expert, an expert knocked out against the reference without it, the
// effects grid of experts against the reference without each expert, the
// prefix cache's routes against a full forward (their refusals:
// test_expert_refusals.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "family_writer.h"
#include "headscope/base/error.h"
#include "headscope/base/progress.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/prefix_cache.h"
#include "prediction_checks.h"
#include "process.h"

using namespace headscope;
using namespace headscope::test;
using json = nlohmann::json;

namespace {

AttentionResult run(const Model& model, const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt,
                    PrefixCache* cache = nullptr) {
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionResult result;
    backend->forward(Batch{texts, model.config.pad_id()}, opt, result, cache, {});
    return result;
}

// Every route of `result` equals the reference's: the same experts in the same order, weights within 1e-5.
void expect_routes(const AttentionResult& result, const FamilyReference& ref, const std::string& what) {
    ASSERT_EQ(result.router_experts.size(), ref.router_experts.size()) << what;
    for (size_t i = 0; i < ref.router_experts.size(); ++i) {
        EXPECT_EQ(result.router_experts[i], ref.router_experts[i]) << what << " at " << i;
        EXPECT_NEAR(result.router_weights[i], ref.router_weights[i], 1e-5) << what << " at " << i;
    }
}

class Experts : public ::testing::TestWithParam<std::string> {
protected:
    const LoadedFamily& loaded() const { return loaded_family(GetParam(), family_variant(GetParam())); }
};

TEST_P(Experts, RoutesMatchTheReference) {
    const LoadedFamily& f = loaded();
    const auto texts = family_texts(f.checkpoint.spec);
    AttentionOptions opt;
    opt.top_k = 1;  // every layer run
    const AttentionResult result = run(f.model, texts, opt);
    EXPECT_EQ(result.router_k, f.checkpoint.spec.experts_per_token);
    expect_routes(result, family_reference(f.checkpoint, texts, opt), "routes");
    for (int l = 0; l < result.router_layers; ++l)  // a dense layer has none; a layer of experts every one
        EXPECT_EQ(result.router_experts[result.router_at(l, 0, 0)] >= 0, f.checkpoint.spec.expert_layer(l)) << l;
}

// Knocked out, an expert is never chosen, and the choices are the
// reference's with it removed; the residual after every layer matches.
TEST_P(Experts, AnExpertKnockedOutIsTheReferenceWithoutIt) {
    const LoadedFamily& f = loaded();
    const auto texts = family_texts(f.checkpoint.spec);
    AttentionOptions opt;
    opt.top_k = 1;
    const int chosen = run(f.model, texts, opt).router_experts.at(0);  // layer 0's first choice at the first token
    opt.ablate_experts = {{0, chosen}};
    const AttentionResult knocked = run(f.model, texts, opt);
    const FamilyReference ref = family_reference(f.checkpoint, texts, opt);
    expect_routes(knocked, ref, "knocked out");
    EXPECT_EQ(knocked.ablated_experts, opt.ablate_experts);
    for (size_t i = 0; i < size_t(knocked.B * knocked.T * knocked.router_k); ++i)
        EXPECT_NE(knocked.router_experts[i], chosen);
}

// Typing a token: the cached rows' routes and the new row's equal a full forward's.
TEST_P(Experts, ThePrefixCacheKeepsTheRoutes) {
    const LoadedFamily& f = loaded();
    std::vector<int32_t> text = family_texts(f.checkpoint.spec)[0];
    AttentionOptions opt;
    opt.top_k = 1;
    PrefixCache cache;
    run(f.model, {std::vector<int32_t>(text.begin(), text.end() - 1)}, opt, &cache);
    const AttentionResult reused = run(f.model, {text}, opt, &cache), full = run(f.model, {text}, opt);
    EXPECT_EQ(reused.reused.at(0), int(text.size()) - 1);
    EXPECT_EQ(reused.router_experts, full.router_experts);
    for (size_t i = 0; i < full.router_weights.size(); ++i)
        EXPECT_NEAR(reused.router_weights[i], full.router_weights[i], 1e-6);
}

// The reference's loss of a text and its p of `ids` at each position (the
// tokens the engine's grid tracks), with the experts `opt` knocks out.
std::pair<double, std::vector<double>> reference_loss_and_p(const FamilyCheckpoint& checkpoint,
                                                            const std::vector<int32_t>& text,
                                                            const AttentionOptions& opt,
                                                            const std::vector<Prediction>& ids) {
    const FamilySpec& spec = checkpoint.spec;
    const int T = static_cast<int>(text.size()), V = spec.vocab_size;
    const FamilyReference ref = family_reference(checkpoint, {text}, opt);
    return loss_and_p(family_logits(checkpoint, real_rows(ref.residual, spec.n_layer - 1, {text}, T, spec.n_embd)), V,
                      text, ids);
}

// The effects grid of experts, one expert already out: every other expert of
// every layer of experts knocked out in turn gives the reference's loss and
// top-token p without it; a dense layer's row and the expert already out are NaN.
TEST_P(Experts, EffectsGridOfExpertsIsTheReferenceWithoutEachExpert) {
    const LoadedFamily& f = loaded();
    const FamilySpec& spec = f.checkpoint.spec;
    const std::vector<int32_t> text = family_texts(spec)[0];
    int first = 0;
    while (!spec.expert_layer(first)) ++first;
    AttentionOptions opt;
    opt.ablate_experts = {{first, 1}};
    auto backend = make_cpu_backend();
    backend->load_weights(f.model);
    HeadEffects got;
    backend->head_effects(Batch{{text}, f.model.config.pad_id()}, opt, got, EffectsOf::experts);
    ASSERT_EQ(got.of, EffectsOf::experts);
    ASSERT_EQ(got.L, spec.n_layer);
    ASSERT_EQ(got.N, spec.n_experts);
    ASSERT_EQ(got.T, int(text.size()));
    EXPECT_EQ(got.experts_already_out, opt.ablate_experts);
    const auto [loss, p] = reference_loss_and_p(f.checkpoint, text, opt, got.top);
    EXPECT_NEAR(got.loss, loss, 1e-4);
    for (int t = 0; t < got.T; ++t) EXPECT_NEAR(got.top[t].p, p[t], 1e-5);
    int compared = 0;
    for (int l = 0; l < got.L; ++l)
        for (int e = 0; e < got.N; ++e) {
            const std::string at = "L" + std::to_string(l) + " E" + std::to_string(e);
            if (!spec.expert_layer(l) || (l == first && e == 1)) {
                EXPECT_TRUE(std::isnan(got.loss_change_at(l, e))) << at << ": dense or already out";
                continue;
            }
            AttentionOptions knocked = opt;
            knocked.ablate_experts.push_back({l, e});
            std::sort(knocked.ablate_experts.begin(), knocked.ablate_experts.end());
            const auto [loss_without, p_without] = reference_loss_and_p(f.checkpoint, text, knocked, got.top);
            EXPECT_NEAR(got.loss_change_at(l, e), loss_without - loss, 1e-4) << at;
            for (int t = 0; t < got.T; ++t)
                EXPECT_NEAR(got.top_p_change_at(l, e, t), p_without[t] - p[t], 1e-5) << at << " position " << t;
            ++compared;
        }
    EXPECT_GE(compared, spec.n_experts);
}

INSTANTIATE_TEST_SUITE_P(Families, Experts, ::testing::Values("mixtral", "qwen3_moe", "olmoe", "gpt_oss"));

// A router of zeros ties every expert: each row takes experts 0 and 1, in that order, at 1/2 each (Mixtral
// renormalizes).
TEST(ExpertTies, EqualWeightsGoToTheLowerExpert) {
    FamilyCheckpoint checkpoint = make_family_checkpoint(family_variant("mixtral"));
    for (NamedTensor& t : checkpoint.tensors)
        if (t.name == checkpoint.spec.router_name(0)) std::fill(t.values.begin(), t.values.end(), 0.f);
    TempDir dir;
    write_family_checkpoint(dir.path, checkpoint);
    const Model model = load_model(dir.path.string());
    const auto texts = family_texts(checkpoint.spec);
    AttentionOptions opt;
    opt.top_k = 1;
    const AttentionResult result = run(model, texts, opt);
    for (int b = 0; b < result.B; ++b)
        for (int t = 0; t < result.T; ++t) {
            const size_t at = result.router_at(0, b, t);
            EXPECT_EQ(result.router_experts[at], 0);
            EXPECT_EQ(result.router_experts[at + 1], 1);
            EXPECT_FLOAT_EQ(result.router_weights[at], 0.5f);
            EXPECT_FLOAT_EQ(result.router_weights[at + 1], 0.5f);
        }
    expect_routes(result, family_reference(checkpoint, texts, opt), "tied");
}

// What each family's config says about its experts, Qwen 3 MoE's dense layers by both of its keys.
TEST(ExpertConfigs, ReadAsTransformersDoes) {
    const json base = {{"num_hidden_layers", 4},        {"num_attention_heads", 4}, {"hidden_size", 32},
                       {"max_position_embeddings", 64}, {"vocab_size", 100},        {"intermediate_size", 48}};
    json mixtral = base;
    mixtral["model_type"] = "mixtral";
    const Config m = config_from_json(mixtral, "config.json");
    EXPECT_EQ(m.n_experts, 8);  // MixtralConfig's defaults
    EXPECT_EQ(m.experts_per_token, 2);
    EXPECT_EQ(m.expert_mlp_dim, 48);
    EXPECT_TRUE(m.normalize_top_k);
    json qwen = base;
    qwen.update({{"model_type", "qwen3_moe"},
                 {"num_experts", 4},
                 {"num_experts_per_tok", 2},
                 {"moe_intermediate_size", 16},
                 {"decoder_sparse_step", 2},
                 {"mlp_only_layers", {3}}});
    const Config q = config_from_json(qwen, "config.json");
    EXPECT_EQ(q.expert_mlp_dim, 16);
    EXPECT_EQ(q.mlp_size(), 48);
    EXPECT_FALSE(q.normalize_top_k);
    for (int l = 0; l < 4; ++l) EXPECT_EQ(q.expert_layer(l), l == 1) << l;  // (l + 1) % 2 == 0, less layer 3
    json olmoe = base;
    olmoe.update({{"model_type", "olmoe"}, {"norm_topk_prob", true}, {"head_dim", 4}});
    const Config o = config_from_json(olmoe, "config.json");
    EXPECT_EQ(o.n_experts, 64);
    EXPECT_EQ(o.experts_per_token, 8);
    EXPECT_TRUE(o.normalize_top_k);
    EXPECT_EQ(o.head_size(), 8);  // C / NH whatever head_dim says
    EXPECT_TRUE(o.qk_norm_whole);
}

// The effects grid of experts: a layer left with only the experts each token
// takes has no cell to knock out (NaN), the others are computed; a model
// without experts has no such grid; a cancel ends it.
TEST(ExpertEffects, ALayerAtItsLastExpertsHasNoCellsAndADenseModelNoGrid) {
    const LoadedFamily& f = loaded_family("mixtral", family_variant("mixtral"));
    const Config& c = f.model.config;
    const std::vector<int32_t> text = family_texts(f.checkpoint.spec)[0];
    auto backend = make_cpu_backend();
    backend->load_weights(f.model);
    AttentionOptions opt;
    for (int e = 0; e < c.n_experts - c.experts_per_token; ++e) opt.ablate_experts.push_back({0, e});
    HeadEffects got;
    backend->head_effects(Batch{{text}, c.pad_id()}, opt, got, EffectsOf::experts);
    for (int e = 0; e < c.n_experts; ++e) {
        EXPECT_TRUE(std::isnan(got.loss_change_at(0, e))) << e;
        EXPECT_FALSE(std::isnan(got.loss_change_at(1, e))) << e;
    }
    int heard = 0;
    const Progress cancel = [&](const ProgressReport& r) {
        if (r.what == "knocking out experts" && ++heard == 2) throw Cancelled();
    };
    EXPECT_THROW(backend->head_effects(Batch{{text}, c.pad_id()}, {}, got, EffectsOf::experts, cancel), Cancelled);
    EXPECT_EQ(heard, 2);
    const LoadedFamily& dense = loaded_family("llama", family_variant("llama"));
    backend->load_weights(dense.model);
    EXPECT_TRUE(throws_naming(
        [&] {
            backend->head_effects(Batch{{family_texts(dense.checkpoint.spec)[0]}, dense.model.config.pad_id()}, {}, got,
                                  EffectsOf::experts);
        },
        {"no experts"}));
}

}  // namespace
