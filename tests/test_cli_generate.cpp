// headscope-cli's predictions (--top-k, the logit lens, the loss), token ids
// in place of the text, truncation and greedy generation, against the engine,
// and their bad input in one line (test_cli's fixture, cli_test.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test.h"
#include "headscope/compute/backend.h"

using namespace headscope;
using nlohmann::json;
using test::CliTest;

namespace {

TEST_F(CliTest, AttentionTopKGivesPredictionsLogprobsAndLoss) {
    const test::ProcessRun r =
        run({"attention", "--model", model(), "--text", "The cat sat on the mat", "--text", "It was soft", "--top-k",
             "3", "--logit-lens", "--layers", "0", "--format", "none"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    const Model m = load_model(model());
    auto backend = make_cpu_backend();
    backend->load_weights(m);
    AttentionOptions opt;
    opt.top_k = 3;
    opt.lens_k = 1;
    opt.layers = {0};
    AttentionResult want;
    const auto ids = j["token_ids"].get<std::vector<std::vector<int32_t>>>();
    backend->forward(Batch{ids, 50256}, opt, want);

    ASSERT_EQ(j["predictions"].size(), 2u);
    ASSERT_EQ(j["lens"].size(), 1u);  // the returned layer
    for (int b = 0; b < 2; ++b) {
        const size_t length = ids[b].size();
        ASSERT_EQ(j["predictions"][b].size(), length);
        ASSERT_EQ(j["logprob_next"][b].size(), length);
        ASSERT_EQ(j["lens"][0][b].size(), length);
        double loss = 0;
        for (size_t t = 0; t < length; ++t) {
            const json& top = j["predictions"][b][t];
            ASSERT_EQ(top.size(), 3u);
            for (int k = 0; k < 3; ++k) {
                const Prediction& p = want.predictions_at(b, static_cast<int>(t))[k];
                EXPECT_EQ(top[k]["id"], p.id);
                EXPECT_EQ(top[k]["token"], m.tokenizer.token_bytes(p.id));
                EXPECT_FLOAT_EQ(top[k]["p"].get<float>(), p.p);
                if (k > 0) {
                    EXPECT_GE(top[k - 1]["p"].get<float>(), top[k]["p"].get<float>());
                }
            }
            const Prediction& lens = *want.lens_at(0, b, static_cast<int>(t));
            EXPECT_EQ(j["lens"][0][b][t]["id"], lens.id);
            EXPECT_FLOAT_EQ(j["lens"][0][b][t]["p"].get<float>(), lens.p);
            const json& logprob = j["logprob_next"][b][t];
            if (t + 1 == length) {
                EXPECT_TRUE(logprob.is_null());
            } else {
                EXPECT_FLOAT_EQ(logprob.get<float>(), want.logprob_next[b * want.T + t]);
                loss -= logprob.get<double>();
            }
        }
        EXPECT_NEAR(j["loss"][b].get<double>(), loss / (length - 1), 1e-5);
    }
    // Without the flags, none of it.
    const test::ProcessRun plain = run({"attention", "--model", model(), "--text", "hi", "--format", "none"});
    ASSERT_EQ(plain.status, 0) << plain.err;
    for (const char* key : {"predictions", "logprob_next", "loss", "lens"})
        EXPECT_FALSE(json::parse(plain.out).contains(key)) << key;
}

TEST_F(CliTest, TokenIdsStandInForTheText) {
    const test::ProcessRun text = run({"attention", "--model", model(), "--text", "Hello world", "--top-k", "2"});
    const test::ProcessRun ids = run({"attention", "--model", model(), "--token-ids", "15496,995", "--top-k", "2"});
    ASSERT_EQ(text.status, 0) << text.err;
    ASSERT_EQ(ids.status, 0) << ids.err;
    json a = json::parse(text.out), b = json::parse(ids.out);
    EXPECT_EQ(b["texts"], json::array({"Hello world"}));
    for (const char* key : {"token_ids", "tokens", "attention", "predictions", "logprob_next", "loss"})
        EXPECT_EQ(a[key], b[key]) << key;
    const test::ProcessRun gen_text = run({"generate", "--model", model(), "--text", "Hello world", "--tokens", "2"});
    const test::ProcessRun gen_ids = run({"generate", "--model", model(), "--token-ids", "15496,995", "--tokens", "2"});
    ASSERT_EQ(gen_text.status, 0) << gen_text.err;
    ASSERT_EQ(gen_ids.status, 0) << gen_ids.err;
    EXPECT_EQ(json::parse(gen_text.out)["token_ids"], json::parse(gen_ids.out)["token_ids"]);
}

// A text past the model's positions is refused, one line and exit 2; with
// --truncate it is cut to its first n_positions tokens, stderr says so in one
// line, and the output is that of those tokens given alone.
TEST_F(CliTest, TruncateCutsALongTextToTheModelsPositions) {
    const std::string text =
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen";
    expect_error({"attention", "--model", model(), "--text", text}, "17 tokens, more than the model's limit of 16");
    const test::ProcessRun cut = run({"attention", "--model", model(), "--text", text, "--top-k", "2", "--truncate"});
    ASSERT_EQ(cut.status, 0) << cut.err;
    EXPECT_EQ(cut.err, "headscope-cli: text 1 has 17 tokens; cut to the first 16, the model's limit\n");
    const std::vector<int32_t> ids =
        json::parse(run({"tokenize", "--model", model(), "--text", text}).out)["token_ids"];
    ASSERT_EQ(ids.size(), 17u);
    std::string first;
    for (size_t i = 0; i < 16; ++i) first += (i ? "," : "") + std::to_string(ids[i]);
    const test::ProcessRun alone = run({"attention", "--model", model(), "--token-ids", first, "--top-k", "2"});
    ASSERT_EQ(alone.status, 0) << alone.err;
    const json a = json::parse(cut.out), b = json::parse(alone.out);
    for (const char* key : {"token_ids", "tokens", "attention", "predictions", "logprob_next"})
        EXPECT_EQ(a[key], b[key]) << key;
}

TEST_F(CliTest, GenerateGreedyPrintsEveryStep) {
    const test::ProcessRun r = run({"generate", "--model", model(), "--text", "Hello world", "--tokens", "4"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["backend"], "cpu");
    EXPECT_EQ(j["prompt_ids"], json::array({15496, 995}));
    EXPECT_EQ(j["stop"], "tokens");
    const json& steps = j["steps"];
    ASSERT_EQ(steps.size(), 4u);
    ASSERT_EQ(j["token_ids"].size(), 6u);
    const Model m = load_model(model());
    std::string text = "Hello world";
    for (size_t s = 0; s < 4; ++s) {
        const json& step = steps[s];
        EXPECT_EQ(j["token_ids"][2 + s], step["id"]);
        EXPECT_EQ(step["token"], m.tokenizer.token_bytes(step["id"].get<int32_t>()));
        text += step["token"].get<std::string>();
        ASSERT_EQ(step["top"].size(), 10u);
        EXPECT_EQ(step["top"][0]["id"], step["id"]);  // greedy: the most likely
        EXPECT_NEAR(step["p"].get<double>(), step["top"][0]["p"].get<double>(), 1e-5);
        for (const char* key : {"id", "token", "p"}) EXPECT_TRUE(step["top"][9].contains(key)) << key;
        const json& attention = step["attention"];  // [layer][head][key]
        ASSERT_EQ(attention.size(), 2u);
        ASSERT_EQ(attention[1].size(), 4u);
        ASSERT_EQ(attention[1][3].size(), 3 + s);
        double sum = 0;
        for (const json& w : attention[1][3]) sum += w.get<double>();
        EXPECT_NEAR(sum, 1, 1e-5);
        EXPECT_TRUE(step["timing_ms"].is_number());
    }
    EXPECT_EQ(j["text"], text);
    for (const char* key : {"prompt", "step_median", "step_max"}) EXPECT_TRUE(j["timing_ms"][key].is_number());

    // Seeded sampling repeats itself; the context limit (16) stops a long run.
    const std::vector<std::string> sampled = {"generate", "--model", model(),         "--text", "Hello world",
                                              "--tokens", "5",       "--temperature", "1.5",    "--top-k",
                                              "40",       "--top-p", "0.9",           "--seed", "3"};
    const test::ProcessRun s1 = run(sampled), s2 = run(sampled);
    ASSERT_EQ(s1.status, 0) << s1.err;
    EXPECT_EQ(json::parse(s1.out)["token_ids"], json::parse(s2.out)["token_ids"]);
    const test::ProcessRun full = run({"generate", "--model", model(), "--text", "Hello world", "--tokens", "50"});
    ASSERT_EQ(full.status, 0) << full.err;
    const json jf = json::parse(full.out);
    EXPECT_EQ(jf["stop"], "context");
    EXPECT_EQ(jf["token_ids"].size(), 16u);
    EXPECT_EQ(jf["steps"].size(), 14u);
}

TEST_F(CliTest, GenerateAndTokenIdsRefuseBadInput) {
    const std::string m = model();
    const std::vector<std::string> gen = {"generate", "--model", m, "--text", "Hello"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = gen;
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    };
    expect_error(gen, "--tokens");
    expect_error(with({"--tokens", "0"}), "tokens to generate must be at least 1");
    expect_error(with({"--tokens", "3", "--temperature", "-1"}), "temperature must be at least 0");
    expect_error(with({"--tokens", "3", "--top-p", "0"}), "top-p must be in (0, 1]");
    expect_error(with({"--tokens", "3", "--top-p", "1.5"}), "top-p must be in (0, 1]");
    expect_error(with({"--tokens", "3", "--top-k", "-2"}), "top-k must be at least 0");
    expect_error(with({"--tokens", "3", "--causal", "off"}), "generation needs the causal model: with the causal");
    expect_error(with({"--tokens", "3", "--split", "naive-view"}), "generation needs the causal model: the naive");
    expect_error(with({"--tokens", "3", "--format", "npy"}), "--format");
    expect_error({"generate", "--model", m, "--tokens", "3"}, "--text or --token-ids");
    expect_error({"attention", "--model", m, "--text", "hi", "--token-ids", "1,2"}, "--text or --token-ids");
    expect_error({"attention", "--model", m, "--token-ids", "1,50257"},
                 "--token-ids: 50257 is outside the vocabulary (0..50256)");
    expect_error({"attention", "--model", m, "--token-ids", "-1"}, "--token-ids: -1 is outside the vocabulary");
    expect_error({"attention", "--model", m, "--token-ids", "1,x"}, "--token-ids: 'x' is not a token id");
    expect_error({"attention", "--model", m, "--token-ids", ""}, "--token-ids");
    expect_error({"attention", "--model", m, "--text", "hi", "--top-k", "-1"}, "--top-k must be at least 0");
}

}  // namespace
