// The refusals of the mixtures of experts' configs, checkpoints and
// knock-outs (Mixtral, Qwen 3 MoE, OLMoE, gpt-oss's packed MXFP4 experts),
// each in one line naming the problem. Apart from test_moe.cpp and
// test_gpt_oss.cpp (the forwards, against the references, plain pass only)
// so that test_forward's sanitized twin runs them too.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "family_models.h"
#include "family_writer.h"
#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "process.h"

using namespace headscope;
using namespace headscope::test;
using json = nlohmann::json;

namespace {

// The tiny gpt-oss of family_variants, as test_gpt_oss.cpp loads it.
const LoadedFamily& gpt_oss() { return loaded_family("gpt_oss", family_variant("gpt_oss")); }

// Hostile keys of a mixture of experts' config.
TEST(ExpertRefusals, HostileExpertConfigKeys) {
    const json base = {
        {"model_type", "qwen3_moe"}, {"num_hidden_layers", 2},  {"num_attention_heads", 4},      {"hidden_size", 32},
        {"vocab_size", 100},         {"intermediate_size", 48}, {"max_position_embeddings", 64}, {"num_experts", 4},
        {"num_experts_per_tok", 2}};
    const std::pair<json, const char*> cases[] = {
        {{{"num_experts_per_tok", 5}}, "num_experts_per_tok"},
        {{{"num_experts", 0}}, "num_experts"},
        {{{"num_experts", -2}}, "num_experts"},
        {{{"moe_intermediate_size", 0}}, "moe_intermediate_size"},
        {{{"decoder_sparse_step", 0}}, "decoder_sparse_step"},
        {{{"mlp_only_layers", {2}}}, "mlp_only_layers"},
        {{{"mlp_only_layers", "0"}}, "mlp_only_layers"},
        {{{"model_type", "olmoe"}, {"clip_qkv", 8}}, "clip_qkv"},
        {{{"model_type", "mixtral"}, {"num_local_experts", 1}}, "num_experts_per_tok"}};
    for (const auto& [change, names] : cases) {
        json config = base;
        config.update(change);
        EXPECT_TRUE(throws_naming([&] { config_from_json(config, "config.json"); }, {names}));
    }
}

// A checkpoint without an expert's tensor, or with one of the wrong shape.
TEST(ExpertRefusals, MissingOrMisshapenExpertTensors) {
    const FamilySpec spec = family_variant("olmoe");
    const std::string name = spec.expert_name(1, 2, "up");
    for (bool missing : {true, false}) {
        FamilyCheckpoint checkpoint = make_family_checkpoint(spec);
        for (auto t = checkpoint.tensors.begin(); t != checkpoint.tensors.end(); ++t)
            if (t->name == name) {
                if (missing)
                    checkpoint.tensors.erase(t);
                else
                    t->shape = {t->shape[0] / 2, t->shape[1] * 2};  // the same values, another shape
                break;
            }
        TempDir dir;
        write_family_checkpoint(dir.path, checkpoint);
        EXPECT_TRUE(throws_naming([&] { load_model(dir.path.string()); }, {name}));
    }
}

// Experts to knock out: out of range, of a dense layer, too many of a layer, on a model without experts.
TEST(ExpertRefusals, BadExpertsToKnockOut) {
    const Config& c = loaded_family("qwen3_moe", family_variant("qwen3_moe")).model.config;
    const std::vector<std::vector<ExpertRef>> cases = {
        {{0, 8}}, {{3, 0}}, {{-1, 0}}, {{1, 0}}, {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}, {{0, 2}, {0, 1}}};
    for (const auto& experts : cases) {
        AttentionOptions opt;
        opt.ablate_experts = experts;
        EXPECT_TRUE(throws_naming([&] { check_expert_ablation(c, opt); }, {"expert"}));
    }
    AttentionOptions opt;
    opt.ablate_experts = {{0, 0}};
    EXPECT_TRUE(throws_naming([&] { check_expert_ablation(Config{}, opt); }, {"no experts"}));
}

// gpt-oss's config: a rope_scaling other than YaRN, impossible expert counts, a
// negative swiglu_limit, layer_types of the wrong length, YaRN's betas crossed.
TEST(ExpertRefusals, HostileGptOssConfigs) {
    const json base = gpt_oss().checkpoint.config;
    const std::pair<json, const char*> cases[] = {
        {{{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2}}}}, "rope_scaling"},
        {{{"num_experts_per_tok", 5}}, "num_experts_per_tok"},
        {{{"num_local_experts", 0}}, "num_local_experts"},
        {{{"swiglu_limit", -1}}, "swiglu_limit"},
        {{{"layer_types", {"sliding_attention"}}}, "layer_types"},
        {{{"rope_scaling", {{"rope_type", "yarn"}, {"beta_fast", 1}, {"beta_slow", 32}}}}, "beta_fast"}};
    for (const auto& [change, names] : cases) {
        json config = base;
        config.update(change);
        EXPECT_TRUE(throws_naming([&] { config_from_json(config, "config.json"); }, {names}));
    }
}

// The packed experts' tensors missing, misshapen, unpacked (a BF16
// conversion's gate_up_proj) or holding a NaN scale: each one line naming it.
TEST(ExpertRefusals, BadGptOssExpertTensors) {
    const std::string p = "model.layers.1.mlp.experts.";
    const auto refused = [&](const std::function<void(FamilyCheckpoint&)>& change, const std::string& names) {
        FamilyCheckpoint checkpoint = gpt_oss().checkpoint;
        change(checkpoint);
        TempDir dir;
        write_family_checkpoint(dir.path, checkpoint);
        EXPECT_TRUE(throws_naming([&] { load_model(dir.path.string()); }, {names}));
    };
    const auto packed = [&](FamilyCheckpoint& c, const std::string& name) -> RawTensor& {
        return *std::find_if(c.packed.begin(), c.packed.end(), [&](const RawTensor& t) { return t.name == p + name; });
    };
    const auto remove = [&](FamilyCheckpoint& c, const std::string& name) {
        std::erase_if(c.packed, [&](const RawTensor& t) { return t.name == p + name; });
    };
    refused([&](FamilyCheckpoint& c) { remove(c, "down_proj_blocks"); }, "tensor '" + p + "down_proj_blocks' missing");
    refused(
        [&](FamilyCheckpoint& c) {
            packed(c, "gate_up_proj_scales").shape = {4, 128, 1};
        },  // the same bytes
        "tensor '" + p + "gate_up_proj_scales' has shape [4, 128, 1]");
    refused([&](FamilyCheckpoint& c) { packed(c, "down_proj_scales").dtype = "I8"; }, "expected U8");
    refused([&](FamilyCheckpoint& c) { packed(c, "gate_up_proj_scales").bytes[5] = 255; }, "NaN");
    refused(  // a BF16 conversion's experts, (E, C, 2Fe), in place of the blocks
        [&](FamilyCheckpoint& c) {
            remove(c, "gate_up_proj_blocks");
            remove(c, "gate_up_proj_scales");
            c.packed.push_back({p + "gate_up_proj",
                                "BF16",
                                {4, 64, 64},
                                encode(std::vector<float>(4 * 64 * 64, 0.f), FileDType::BF16)});
        },
        "only gpt-oss's MXFP4 files");
}

}  // namespace
