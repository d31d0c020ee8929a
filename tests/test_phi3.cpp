// Phi-3's own features beyond the families' shared tests (test_families):
// LongRoPE's short factors on a text within its switch length, the prefix
// cache computing again across that length (as transformers' Phi-3 drops its
// cache there), heads that cannot be re-split, the config as read, and bad
// configs, each one line naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/prefix_cache.h"

using namespace headscope;
using namespace headscope::test;
using json = nlohmann::json;

namespace {

using Texts = std::vector<std::vector<int32_t>>;

template <typename Got>
double max_difference(const Got& got, const std::vector<double>& want) {
    double m = 0;
    for (size_t n = 0; n < want.size(); ++n) m = std::max(m, std::abs(got[n] - want[n]));
    return m;
}

class LongRope : public ::testing::Test {
protected:
    LongRope() { backend_->load_weights(family_.model); }

    // The engine's forward of `texts`, through `cache` when given, checked against the reference.
    AttentionResult expect_matches(const Texts& texts, PrefixCache* cache, const std::string& what) {
        AttentionResult got;
        AttentionOptions opt;
        backend_->forward(Batch{texts, family_.model.config.pad_id()}, opt, got, cache);
        const FamilyReference want = family_reference(family_.checkpoint, texts, opt);
        EXPECT_EQ(got.weights.size(), want.weights.size()) << what;
        EXPECT_LT(max_difference(got.weights, want.weights), 1e-5) << what;
        return got;
    }

    const LoadedFamily& family_ = loaded_family("phi3_longrope", family_variant("phi3_longrope"));
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    std::vector<int32_t> text_ = family_texts(family_.checkpoint.spec)[0];  // 11 tokens; the switch is at 8
};

// Within 8 positions the short factors rotate; past them the long ones
// (test_families compares the 11 positions); the two differ.
TEST_F(LongRope, ShortFactorsWithinTheSwitchLengthLongPastIt) {
    const Texts short_text = {{text_.begin(), text_.begin() + 8}};
    const AttentionResult within = expect_matches(short_text, nullptr, "8 positions");
    const FamilySpec& spec = family_.checkpoint.spec;
    FamilySpec long_everywhere = spec;
    long_everywhere.short_factors = spec.long_factors;
    FamilyCheckpoint other = family_.checkpoint;
    other.spec = long_everywhere;
    EXPECT_GT(max_difference(within.weights, family_reference(other, short_text, {}).weights), 1e-3)
        << "the short factors are not the long";
}

// Growing one token at a time from 6 to 11 tokens: each forward reuses the
// cached rows except where it crosses from 8 positions (short) to 9 (long),
// where every row is computed again; each equals the reference.
TEST_F(LongRope, PrefixCacheComputesAgainAcrossTheSwitchLength) {
    PrefixCache cache;
    for (int length = 6; length <= 11; ++length) {
        const Texts texts = {{text_.begin(), text_.begin() + length}};
        const std::string what = std::to_string(length) + " tokens";
        const AttentionResult got = expect_matches(texts, &cache, what);
        const int want_reused = length == 6 || length == 9 ? 0 : length - 1;
        EXPECT_EQ(got.reused, std::vector<int>{want_reused}) << what;
    }
}

TEST_F(LongRope, HeadsAreNotResplit) {
    AttentionOptions opt;
    opt.n_head = 8;
    AttentionResult result;
    try {
        backend_->forward(Batch{{text_}, family_.model.config.pad_id()}, opt, result);
        FAIL() << "no error";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("LongRoPE"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
}

// configuration_phi3.py's and modeling_rope_utils.py's values for the test models.
TEST(Phi3Config, ReadAsTransformersReadsIt) {
    const Config longrope = config_from_json(make_family_checkpoint(family_variant("phi3_longrope")).config, "c");
    EXPECT_TRUE(longrope.fused_gate_up);
    EXPECT_EQ(longrope.qkv_layout, QkvLayout::fused);
    EXPECT_TRUE(longrope.rope.joined_by_cat);
    EXPECT_EQ(longrope.rope.frequency_divisors, (std::vector<float>{1.0f, 1.5f, 3.0f}));
    EXPECT_EQ(longrope.rope.long_divisors, (std::vector<float>{2.0f, 5.0f, 11.0f}));
    EXPECT_EQ(longrope.rope.long_after, 8);
    EXPECT_FLOAT_EQ(longrope.rope.cos_sin_scale, std::sqrt(3.0f));  // 512 / 8 = 64: sqrt(1 + ln 64 / ln 8)
    EXPECT_TRUE(longrope.tied_embeddings);
    EXPECT_EQ(longrope.pad_id(), 32000);
    const Config su = config_from_json(make_family_checkpoint(family_variant("phi3_su")).config, "c");
    EXPECT_FLOAT_EQ(su.rope.cos_sin_scale, 1.5f);  // 512 / 16 = 32: sqrt(1 + ln 32 / ln 16)
    EXPECT_EQ(su.rope.long_divisors.size(), 4u);
    // Phi-4 (14B): no rope_scaling, so no LongRoPE; a window of 5 on the plain variant.
    const Config plain = config_from_json(make_family_checkpoint(family_variant("phi3")).config, "c");
    EXPECT_TRUE(plain.rope.long_divisors.empty());
    EXPECT_FLOAT_EQ(plain.rope.cos_sin_scale, 1);
    EXPECT_EQ(plain.sliding_window, 5);
    // An attention_factor given is taken as it is.
    json given = make_family_checkpoint(family_variant("phi3_su")).config;
    given["rope_scaling"]["attention_factor"] = 1.125;
    EXPECT_FLOAT_EQ(config_from_json(given, "c").rope.cos_sin_scale, 1.125f);
}

// Each bad config: one Error, on one line, naming its key.
TEST(Phi3Config, BadConfigsNameTheProblem) {
    const json base = make_family_checkpoint(family_variant("phi3_longrope")).config;
    const auto changed = [&](auto&& change) {
        json c = base;
        change(c);
        return c;
    };
    const std::vector<std::pair<json, std::string>> cases = {
        {changed([](json& c) {
             c["rope_scaling"]["short_factor"] = {1.0, 2.0};
         }),
         "short_factor"},
        {changed([](json& c) {
             c["rope_scaling"]["long_factor"] = {1.0, 2.0, 3.0, 4.0};
         }),
         "long_factor"},
        {changed([](json& c) {
             c["rope_scaling"]["long_factor"] = {1.0, "x", 3.0};
         }),
         "long_factor"},
        {changed([](json& c) {
             c["rope_scaling"]["long_factor"] = {1.0, -2.0, 3.0};
         }),
         "long_factor"},
        {changed([](json& c) { c["rope_scaling"]["long_factor"] = 2.0; }), "long_factor"},
        {changed([](json& c) { c["rope_scaling"].erase("short_factor"); }), "short_factor"},
        {changed([](json& c) { c["rope_scaling"]["type"] = "dynamic"; }), "dynamic"},
        {changed([](json& c) { c["rope_scaling"] = "longrope"; }), "rope_scaling"},
        {changed([](json& c) { c["partial_rotary_factor"] = 0.625; }), "partial_rotary_factor"},  // 5 of 8 dims
        {changed([](json& c) { c["partial_rotary_factor"] = 1.5; }), "partial_rotary_factor"},
        {changed([](json& c) { c["original_max_position_embeddings"] = 1; }), "original_max_position_embeddings"},
        {changed([](json& c) { c["hidden_act"] = "gelu"; }), "hidden_act"},
        {changed([](json& c) { c["num_key_value_heads"] = 3; }), "num_key_value_heads"},
        {changed([](json& c) { c["hidden_size"] = 30; }), "hidden_size"},
    };
    for (const auto& [config, key] : cases) {
        try {
            config_from_json(config, "config.json");
            ADD_FAILURE() << "no error for " << key;
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find(key), std::string::npos) << message;
            EXPECT_NE(message.find("config.json"), std::string::npos) << message;
            EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        }
    }
}

}  // namespace
