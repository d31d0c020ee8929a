// The families' checkpoints and config.json files the loader refuses, each in
// one line naming the problem, and the configs it reads apart from the
// checkpoints test_families runs: attention biases as transformers has them,
// Gemma's hostile keys, a gemma3 checkpoint's nested text_config with
// Gemma3TextConfig's defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_writer.h"
#include "headscope/base/error.h"
#include "headscope/model/model.h"
#include "headscope/model/model_description.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

// Hostile Gemma configs: each refused in one line naming the key.
TEST(GemmaConfig, BadKeysAreRefusedInOneLineNamingThem) {
    using nlohmann::json;
    const json text = {{"model_type", "gemma3_text"}, {"num_hidden_layers", 2}, {"hidden_size", 32},
                       {"vocab_size", 100},           {"head_dim", 8},          {"num_attention_heads", 4}};
    struct Case {
        const char* key;
        json value;
    };
    const Case cases[] = {{"use_bidirectional_attention", true},
                          {"layer_types", json::array({"sliding_attention"})},
                          {"layer_types", json::array({"sliding_attention", "chunked_attention"})},
                          {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 8}}},
                          {"hidden_activation", "relu"},
                          {"query_pre_attn_scalar", 0},
                          {"final_logit_softcapping", "30"},
                          {"sliding_window", -1}};
    for (const Case& c : cases) {
        json bad = text;
        bad[c.key] = c.value;
        for (const json& config : {bad, json{{"model_type", "gemma3"}, {"text_config", bad}}}) {
            try {
                config_from_json(config, "config.json");
                ADD_FAILURE() << "no error for " << config.dump();
            } catch (const Error& e) {
                const std::string message = e.what();
                EXPECT_NE(message.find(c.key), std::string::npos) << message;
                EXPECT_EQ(message.find('\n'), std::string::npos) << message;
            }
        }
    }
    try {
        config_from_json({{"model_type", "gemma3"}}, "config.json");
        ADD_FAILURE() << "a gemma3 config without text_config";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("text_config"), std::string::npos) << e.what();
    }
}

// A gemma3 checkpoint's ids: text_config's where it names them, else the top level's (its eos list).
TEST(GemmaConfig, Gemma3TakesTokenIdsFromTextConfigThenTheTop) {
    const nlohmann::json config = {
        {"model_type", "gemma3"},
        {"eos_token_id", {1, 106}},
        {"bos_token_id", 7},
        {"text_config", {{"bos_token_id", 2}, {"vocab_size", 300}, {"num_hidden_layers", 12}}}};
    const Config c = config_from_json(config, "config.json");
    EXPECT_EQ(c.bos_token_id, 2);
    EXPECT_EQ(c.eos_token_id, 1);
    EXPECT_EQ(c.more_eos_ids, std::vector<int>{106});
    EXPECT_EQ(c.n_embd, 2304) << "Gemma3TextConfig's default";
    EXPECT_FLOAT_EQ(c.rope.theta, 1e6f) << "Gemma3TextConfig's default, not Gemma 2's";
    EXPECT_EQ(c.logit_softcap, 0.f);
    for (int l = 0; l < 12; ++l) EXPECT_EQ(c.windowed(l), (l + 1) % 6 != 0) << "layer " << l;
    EXPECT_TRUE(c.vision_tower_left_out);
}

// Bad checkpoints: each loads to one Error, on one line, naming the problem.
class BadFamilyCheckpoint : public ::testing::Test {
protected:
    static FamilyCheckpoint sharded(Family family) {
        FamilySpec spec = family_spec(family);
        spec.shards = 2;
        return make_family_checkpoint(spec);
    }

    // Loads `checkpoint` written afresh, after `damage` to the directory.
    template <typename Damage>
    ::testing::AssertionResult fails_naming(const FamilyCheckpoint& checkpoint, Damage damage,
                                            std::initializer_list<std::string> parts) {
        TempDir dir;
        write_family_checkpoint(dir.path, checkpoint);
        damage(dir.path);
        std::string message;
        try {
            load_model(dir.path.string());
            return ::testing::AssertionFailure() << "no error";
        } catch (const Error& e) {
            message = e.what();
        }
        if (message.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "two lines: " << message;
        for (const std::string& part : parts)
            if (message.find(part) == std::string::npos)
                return ::testing::AssertionFailure() << "'" << message << "' does not name " << part;
        return ::testing::AssertionSuccess() << message;
    }
    ::testing::AssertionResult fails_naming(const FamilyCheckpoint& checkpoint,
                                            std::initializer_list<std::string> parts) {
        return fails_naming(
            checkpoint, [](const fs::path&) {}, parts);
    }

    const FamilyCheckpoint llama_ = sharded(Family::llama), neox_ = sharded(Family::gpt_neox);
};

// Attention biases as transformers has them: Qwen 2 on Q, K and V and never
// on the output projection; Mistral none, whatever attention_bias says; Llama
// and Qwen 3 attention_bias on all four. The tensors a file must hold follow.
TEST(FamilyConfig, AttentionBiasesFollowTransformers) {
    struct Case {
        const char* model_type;
        bool attention_bias, qkv_bias, o_bias;
    };
    const Case cases[] = {{"llama", false, false, false},   {"llama", true, true, true},
                          {"qwen3", false, false, false},   {"qwen3", true, true, true},
                          {"qwen2", false, true, false},    {"qwen2", true, true, false},
                          {"mistral", false, false, false}, {"mistral", true, false, false}};
    for (const Case& c : cases) {
        const nlohmann::json json = {
            {"model_type", c.model_type},    {"num_hidden_layers", 1}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2},      {"hidden_size", 32},      {"intermediate_size", 64},
            {"max_position_embeddings", 64}, {"vocab_size", 100},      {"attention_bias", c.attention_bias}};
        const Config config = config_from_json(json, "config.json");
        const std::string what = std::string(c.model_type) + (c.attention_bias ? " with" : " without");
        EXPECT_EQ(config.qkv_bias, c.qkv_bias) << what;
        EXPECT_EQ(config.o_bias, c.o_bias) << what;
        std::vector<std::string> names;
        for (const TensorSpec& t : model_tensors(config)) names.push_back(t.name);
        const auto has = [&](const std::string& name) {
            return std::find(names.begin(), names.end(), name) != names.end();
        };
        for (const char* projection : {"q_proj", "k_proj", "v_proj"})
            EXPECT_EQ(has(std::string("model.layers.0.self_attn.") + projection + ".bias"), c.qkv_bias) << what;
        EXPECT_EQ(has("model.layers.0.self_attn.o_proj.bias"), c.o_bias) << what;
    }
}

TEST_F(BadFamilyCheckpoint, UnknownModelTypeListsTheSupportedOnes) {
    FamilyCheckpoint falcon = llama_;
    falcon.config["model_type"] = "falcon";
    EXPECT_TRUE(fails_naming(falcon, {"config.json", "falcon", supported_architectures()}));
    const std::string supported = supported_architectures();
    for (const char* family : {"gpt2", "llama", "qwen2", "qwen3", "mistral", "gpt_neox"})
        EXPECT_NE(supported.find(family), std::string::npos) << supported;
}

TEST_F(BadFamilyCheckpoint, MissingConfigKey) {
    for (const FamilyCheckpoint* base : {&llama_, &neox_})
        for (const char* key : {"hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size"}) {
            FamilyCheckpoint missing = *base;
            missing.config.erase(key);
            EXPECT_TRUE(fails_naming(missing, {"config.json", key})) << model_type(base->spec.family);
        }
}

TEST_F(BadFamilyCheckpoint, EosListWithAnIdThatIsNotOne) {
    using nlohmann::json;
    const int eos = llama_.spec.eos_ids.at(0);
    for (const json& bad : {json::array({eos, "x"}), json::array({eos, -1}), json::array({eos, 1 << 30})}) {
        FamilyCheckpoint listed = llama_;
        listed.config["eos_token_id"] = bad;
        EXPECT_TRUE(fails_naming(listed, {"config.json", "eos_token_id"})) << bad.dump();
    }
}

TEST_F(BadFamilyCheckpoint, HeadsNotAMultipleOfKeyValueHeads) {
    FamilyCheckpoint three = llama_;
    three.config["num_key_value_heads"] = 3;  // of 4 query heads
    EXPECT_TRUE(fails_naming(three, {"config.json", "num_key_value_heads"}));
}

TEST_F(BadFamilyCheckpoint, TensorOfTheWrongShapeNamesBothShapes) {
    FamilyCheckpoint wrong = llama_;
    for (NamedTensor& t : wrong.tensors)
        if (t.name == "model.layers.1.self_attn.k_proj.weight") {  // (NKV * hs, C) = (16, 32) made (32, 32)
            t.shape = {32, 32};
            t.values.resize(32 * 32);
        }
    EXPECT_TRUE(fails_naming(wrong, {"model.layers.1.self_attn.k_proj.weight", "[32, 32]", "[16, 32]"}));

    FamilyCheckpoint fused = neox_;
    for (NamedTensor& t : fused.tensors)
        if (t.name == "gpt_neox.layers.0.attention.query_key_value.weight") {  // (3C, C) = (96, 32) made (64, 32)
            t.shape = {64, 32};
            t.values.resize(64 * 32);
        }
    EXPECT_TRUE(fails_naming(fused, {"gpt_neox.layers.0.attention.query_key_value.weight", "[64, 32]", "[96, 32]"}));
}

TEST_F(BadFamilyCheckpoint, IndexNamesAMissingShard) {
    const std::string second = shard_file_name(2, 2);
    EXPECT_TRUE(fails_naming(llama_, [&](const fs::path& dir) { fs::remove(dir / second); }, {second}));
}

TEST_F(BadFamilyCheckpoint, TensorInTwoShards) {
    FamilyCheckpoint twice = llama_;
    const NamedTensor first_shard = twice.tensors[1];  // written again, last, into the second shard
    twice.tensors.push_back(first_shard);
    EXPECT_TRUE(fails_naming(twice, {first_shard.name}));
}

TEST_F(BadFamilyCheckpoint, TensorInNoShard) {
    FamilyCheckpoint lost = llama_;
    std::erase_if(lost.tensors, [](const NamedTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
    EXPECT_TRUE(fails_naming(lost, {"model.layers.1.mlp.up_proj.weight", "missing"}));
}

}  // namespace
