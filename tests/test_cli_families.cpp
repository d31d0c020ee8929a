// headscope-cli on the families' checkpoints (Llama, Qwen 3, Mistral,
// GPT-NeoX, and a BF16 file): what info says of each, the key/value heads of
// the attention JSON, the dance's expand and reshape, and the sliding window.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test.h"
#include "family_models.h"

using namespace headscope;
using nlohmann::json;
using test::run_cli;

namespace {

// The families' checkpoints: what info says of each, the key/value heads of
// the attention JSON, and the sliding window, on by default.
class CliFamilyTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        for (const char* name : {"llama", "qwen3", "mistral", "gpt_neox_parallel"})
            test::write_family_model(dir_->path / name, test::family_variant(name));
        test::FamilySpec bf16 = test::family_variant("llama");
        bf16.dtype = test::FileDType::BF16;
        test::write_family_model(dir_->path / "llama_bf16", bf16);
        test::write_test_model(dir_->path / "gpt2", {.n_layer = 1, .n_head = 4, .n_embd = 32, .n_positions = 16});
    }
    static void TearDownTestSuite() { delete dir_; }

    static json cli_json(const std::vector<std::string>& args) {
        const test::ProcessRun r = run_cli(args, dir_->path);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? json::parse(r.out) : json();
    }
    static std::string model(const char* name) { return (dir_->path / name).string(); }
    static json info(const char* name) { return cli_json({"info", "--model", model(name)}); }

    static test::TempDir* dir_;
    const std::string text_ = "The cat sat on the mat because it was soft.";  // 11 tokens
};
test::TempDir* CliFamilyTest::dir_ = nullptr;

TEST_F(CliFamilyTest, InfoNamesEachFamilysArchitecture) {
    const json gpt2 = info("gpt2"), llama = info("llama"), qwen3 = info("qwen3"), mistral = info("mistral"),
               pythia = info("gpt_neox_parallel");
    // What every model says, as before the families, and what they differ in.
    for (const json* j : {&gpt2, &llama, &qwen3, &mistral, &pythia})
        for (const char* key : {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "params", "tensors"})
            EXPECT_TRUE(j->contains(key)) << key;
    EXPECT_EQ(gpt2["architecture"], "gpt2");
    EXPECT_EQ(gpt2["n_kv_head"], 4);
    EXPECT_EQ(gpt2["d_head"], 8);
    EXPECT_EQ(gpt2["positions"], "learned");
    EXPECT_EQ(gpt2["norm"], "layernorm");
    EXPECT_EQ(gpt2["mlp"], "gelu");
    EXPECT_EQ(gpt2["dtype"], "F32");
    EXPECT_FALSE(gpt2.contains("rope_theta"));
    EXPECT_FALSE(gpt2.contains("sliding_window"));

    EXPECT_EQ(llama["architecture"], "llama");
    EXPECT_EQ(llama["n_head"], 4);
    EXPECT_EQ(llama["n_kv_head"], 2);
    EXPECT_EQ(llama["d_head"], 8);
    EXPECT_EQ(llama["positions"], "rotary");
    EXPECT_EQ(llama["norm"], "rmsnorm");
    EXPECT_EQ(llama["mlp"], "swiglu");
    EXPECT_EQ(llama["rope_theta"], 500000);
    EXPECT_FALSE(llama.contains("sliding_window"));
    EXPECT_EQ(info("llama_bf16")["dtype"], "BF16");

    EXPECT_EQ(qwen3["architecture"], "qwen3");
    EXPECT_EQ(qwen3["n_embd"], 32);
    EXPECT_EQ(qwen3["d_head"], 16);  // not C / NH
    EXPECT_EQ(qwen3["rope_theta"], 1000000);

    EXPECT_EQ(mistral["architecture"], "mistral");
    EXPECT_EQ(mistral["n_kv_head"], 1);
    EXPECT_EQ(mistral["sliding_window"], 4);

    EXPECT_EQ(pythia["architecture"], "gpt_neox");
    EXPECT_EQ(pythia["n_kv_head"], 3);
    EXPECT_EQ(pythia["d_head"], 16);
    EXPECT_EQ(pythia["positions"], "rotary");
    EXPECT_EQ(pythia["norm"], "layernorm");
    EXPECT_EQ(pythia["mlp"], "gelu");
}

TEST_F(CliFamilyTest, AttentionNamesTheKeyValueHeadsOfTheSplit) {
    const json own = cli_json({"attention", "--model", model("llama"), "--text", text_, "--format", "none"});
    EXPECT_EQ(own["n_head"], 4);
    EXPECT_EQ(own["n_kv_head"], 2);
    EXPECT_EQ(own["d_head"], 8);
    // Two query heads of 16, still sharing one key/value head in pairs.
    const json resplit =
        cli_json({"attention", "--model", model("llama"), "--text", text_, "--heads", "2", "--format", "none"});
    EXPECT_EQ(resplit["n_head"], 2);
    EXPECT_EQ(resplit["n_kv_head"], 1);
    EXPECT_EQ(resplit["d_head"], 16);
    EXPECT_EQ(cli_json({"attention", "--model", model("gpt2"), "--text", text_, "--format", "none"})["n_kv_head"], 4);
    test::expect_one_line_error(
        run_cli({"attention", "--model", model("llama"), "--text", text_, "--heads", "1"}, dir_->path), "headscope-cli",
        "--heads: head count 1 is not a multiple of 2");
}

// Llama's dance: K split into its 2 key/value heads, rotated, expanded to the
// 4 query heads with stride 0 (the same memory), then copied by reshape.
TEST_F(CliFamilyTest, DanceWalksTheKeysThroughExpandAndReshape) {
    const json j = cli_json({"dance", "--model", model("llama"), "--text", "The cat sat", "--text", "It"});
    const int B = 2, T = 3, NKV = 2, g = 2, hs = 8;
    EXPECT_EQ(j["n_head"], 4);
    EXPECT_EQ(j["n_kv_head"], NKV);
    EXPECT_EQ(j["d_head"], hs);
    EXPECT_EQ(j["rotary_dims"], hs);
    EXPECT_TRUE(j["naive_view_max_diff"].is_number());
    const json& steps = j["steps"];
    size_t expand = 0;
    while (expand < steps.size() && steps[expand]["code"].get<std::string>().find("expand") == std::string::npos)
        ++expand;
    ASSERT_LT(expand + 1, steps.size());
    EXPECT_EQ(steps[expand]["shape"], json::array({B, NKV, g, T, hs}));
    EXPECT_EQ(steps[expand]["strides"], json::array({T * NKV * hs, hs, 0, NKV * hs, 1}));
    EXPECT_EQ(steps[expand]["buffer"], steps[expand - 1]["buffer"]);
    EXPECT_EQ(steps[expand - 1]["buffer"], "k_rotated");
    EXPECT_EQ(steps[expand + 1]["buffer"], "k_repeated");
    EXPECT_EQ(steps[expand + 1]["strides"], json::array({4 * T * hs, T * hs, hs, 1}));
    EXPECT_EQ(steps[expand + 1]["contiguous"], true);
}

// Mistral's window of 4: on by default, query i sees keys i-3..i; off, every earlier key.
TEST_F(CliFamilyTest, SlidingWindowIsTheModelsUnlessTurnedOff) {
    const std::vector<std::string> args = {"attention", "--model", model("mistral"), "--text", text_};
    std::vector<std::string> on = args, off = args;
    on.insert(on.end(), {"--sliding-window", "on"});
    off.insert(off.end(), {"--sliding-window", "off"});
    const json by_default = cli_json(args), windowed = cli_json(on), unwindowed = cli_json(off);
    EXPECT_EQ(by_default["attention"], windowed["attention"]);
    const int T = windowed["seq_len"];
    ASSERT_EQ(T, 12);  // Llama 2's tokenizer (Mistral's) puts <s> before the text's 11 tokens
    int far_keys = 0;
    for (size_t l = 0; l < windowed["attention"].size(); ++l)
        for (int h = 0; h < 4; ++h)
            for (int i = 0; i < T; ++i) {
                double row = 0;
                for (int j = 0; j <= i; ++j) {
                    const double w = windowed["attention"][l][0][h][i][j],
                                 w_off = unwindowed["attention"][l][0][h][i][j];
                    if (j <= i - 4) {
                        EXPECT_EQ(w, 0.0) << "layer " << l << " head " << h << " query " << i << " key " << j;
                        EXPECT_GT(w_off, 0.0);
                        ++far_keys;
                    }
                    row += w;
                }
                EXPECT_NEAR(row, 1.0, 1e-5);
            }
    EXPECT_EQ(far_keys, 3 * 4 * ((T - 4) * (T - 3) / 2));  // query i has i - 3 keys beyond the window
    // A model without a window: the option changes nothing.
    const std::vector<std::string> gpt2 = {"attention", "--model", model("gpt2"), "--text", text_};
    std::vector<std::string> gpt2_off = gpt2;
    gpt2_off.insert(gpt2_off.end(), {"--sliding-window", "off"});
    EXPECT_EQ(cli_json(gpt2)["attention"], cli_json(gpt2_off)["attention"]);
    test::expect_one_line_error(
        run_cli({"attention", "--model", model("mistral"), "--text", text_, "--sliding-window", "maybe"}, dir_->path),
        "headscope-cli", "--sliding-window: sliding window 'maybe' is not one of off, on");
}

}  // namespace
