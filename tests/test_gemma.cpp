// Gemma's config.json as transformers reads it, apart from the checkpoints
// test_families runs: hostile keys refused in one line naming them, and a
// gemma3 checkpoint's nested text_config with Gemma3TextConfig's defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/model/model_description.h"

using namespace headscope;

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

}  // namespace
