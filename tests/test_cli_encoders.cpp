// headscope-cli on an encoder (a BERT test checkpoint, encoder_models.h) as a
// user runs it: info says the kind; sentence pairs tokenize as the
// reference tokenizer (@lenml/tokenizers) does, and their attention, with
// the token types, equals the double-precision reference; attention is
// bidirectional unless --causal on; --top-k fills a [MASK] as the reference's
// masked-LM head does; and what an encoder cannot do is one line, exit 2.
// A BERT GGUF file of every type (gguf_models.h) tokenizes as llama.cpp does and gives the
// reference's maps, without predictions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "encoder_models.h"
#include "encoder_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string masked = "The cat [MASK] on the mat.";

// The largest difference between `attention` (layers, 1, NH, T, T) and the reference's maps.
double worst_map(const json& attention, const EncoderReference& want) {
    const int T = want.T;
    double worst = 0;
    for (size_t l = 0; l < attention.size(); ++l)
        for (int h = 0; h < want.NH; ++h)
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < T; ++j) {
                    const double w = attention[l][0][h][i][j];
                    worst = std::max(worst, std::abs(w - want.weights[((l * want.NH + h) * T + i) * T + j]));
                }
    return worst;
}

class CliEncoderTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        checkpoint_ = new EncoderCheckpoint(make_encoder_checkpoint(encoder_spec(Encoder::bert)));
        write_encoder_checkpoint(dir_->path / "bert", *checkpoint_);
    }
    static void TearDownTestSuite() {
        delete dir_;
        delete checkpoint_;
    }

    ProcessRun run(std::vector<std::string> args) {
        args.insert(args.begin(), test::cli_program());
        args.insert(args.end(), {"--model", (dir_->path / "bert").string()});
        return run_program(args, dir_->path);
    }
    json run_json(const std::vector<std::string>& args) {
        const ProcessRun r = run(args);
        EXPECT_EQ(r.status, 0) << r.err;
        return json::parse(r.out);
    }

    static TempDir* dir_;
    static EncoderCheckpoint* checkpoint_;
};
TempDir* CliEncoderTest::dir_ = nullptr;
EncoderCheckpoint* CliEncoderTest::checkpoint_ = nullptr;

TEST_F(CliEncoderTest, InfoSaysTheKind) {
    const json info = run_json({"info", "--format", "json"});
    EXPECT_EQ(info["kind"], "encoder");
    EXPECT_EQ(info["architecture"], "bert");
}

TEST_F(CliEncoderTest, PairsTokenizeAsTheReference) {
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {masked, "It was happy."}, {"Hello, WORLD!", "na\xC3\xAFve caf\xC3\xA9 \xE4\xB8\xAD"}, {"a", "b"}};
    const fs::path request = dir_->path / "pairs.json";
    std::ofstream(request) << json{
        {"tokenizer_json", (dir_->path / "bert/tokenizer.json").string()},
        {"tokenizer_config", {{"tokenizer_class", "BertTokenizer"}}},
        {"pairs", pairs}}.dump();
    const ProcessRun r =
        run_program({"node", std::string(HEADSCOPE_TESTS_DIR) + "/reference/encode_hf.js"}, dir_->path, request);
    if (r.status == 127) GTEST_SKIP() << "node cannot be run: run tools/setup";
    ASSERT_EQ(r.status, 0) << r.err;
    const json expected = json::parse(r.out);
    for (size_t i = 0; i < pairs.size(); ++i) {
        const json got = run_json({"tokenize", "--text", pairs[i].first, "--text-pair", pairs[i].second});
        EXPECT_EQ(got["token_ids"], expected[i]["ids"]) << pairs[i].first;
        EXPECT_EQ(got["token_type_ids"], expected[i]["types"]) << pairs[i].first;
    }
}

// A pair's maps, bidirectional by default, equal the reference given its ids and types.
TEST_F(CliEncoderTest, PairAttentionEqualsTheReference) {
    const json got = run_json({"attention", "--text", masked, "--text-pair", "It was happy."});
    const std::vector<int32_t> ids = got["token_ids"][0], types = got["token_type_ids"][0];
    ASSERT_NE(std::count(types.begin(), types.end(), 1), 0);
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(*checkpoint_, ids, types, options);
    ASSERT_EQ(got["attention"].size(), static_cast<size_t>(checkpoint_->spec.n_layer));
    EXPECT_LT(worst_map(got["attention"], want), 2e-5);
    double above_diagonal = 0;
    for (const json& layer : got["attention"])
        for (const json& head : layer[0])
            for (int i = 0; i < want.T; ++i)
                for (int j = i + 1; j < want.T; ++j) above_diagonal += head[i][j].get<double>();
    EXPECT_GT(above_diagonal, 1.0) << "an encoder's queries see the keys after them";
    // Forced on, the causal mask hides them.
    const json causal = run_json({"attention", "--text", masked, "--causal", "on", "--layers", "0"});
    for (int i = 0; i < int(causal["seq_len"]); ++i)
        for (int j = i + 1; j < int(causal["seq_len"]); ++j) EXPECT_EQ(causal["attention"][0][0][0][i][j], 0.0);
}

TEST_F(CliEncoderTest, TopKFillsTheMask) {
    const json got = run_json({"attention", "--text", masked, "--top-k", "3", "--layers", "0"});
    const std::vector<int32_t> ids = got["token_ids"][0];
    const auto at = static_cast<size_t>(std::find(ids.begin(), ids.end(), 4) - ids.begin());  // [MASK]
    ASSERT_LT(at, ids.size());
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(*checkpoint_, ids, {}, options);
    const int V = checkpoint_->spec.vocab_size;
    const double* logits = want.logits.data() + at * V;
    EXPECT_EQ(got["predictions"][0][at][0]["id"], std::max_element(logits, logits + V) - logits);
    EXPECT_TRUE(got["loss"][0].is_null()) << "an encoder has no next-token loss";
}

// A text in brackets is taken as written (the option parser reads "[a,b]" as a list unless told not to).
TEST_F(CliEncoderTest, TextsInBracketsAreTakenAsWritten) {
    const json got = run_json(
        {"attention", "--text", "[MASK] sat on the [MASK]", "--text-pair", "[MASK]", "--top-k", "3", "--layers", "0"});
    const std::vector<int32_t> ids = got["token_ids"][0], types = got["token_type_ids"][0];
    std::vector<size_t> masks;
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == 4) masks.push_back(i);  // [MASK]
    ASSERT_EQ(masks.size(), 3u) << got["token_ids"].dump();
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(*checkpoint_, ids, types, options);
    const int V = checkpoint_->spec.vocab_size;
    for (size_t at : masks) {
        const double* logits = want.logits.data() + at * V;
        EXPECT_EQ(got["predictions"][0][at][0]["id"], std::max_element(logits, logits + V) - logits) << at;
    }
}

TEST_F(CliEncoderTest, WhatAnEncoderCannotDoIsOneLine) {
    expect_one_line_error(run({"generate", "--text", "a b", "--tokens", "2"}), "headscope-cli",
                          "is an encoder: it fills masked tokens and does not generate");
    expect_one_line_error(run({"attention", "--text", "a", "--text-pair", "b", "--text-pair", "c"}), "headscope-cli",
                          "--text-pair: 2 given for 1 texts");
    expect_one_line_error(run({"attention", "--text", "a b", "--contributions"}), "headscope-cli", "post-LN");
    expect_one_line_error(run({"generate", "--text", "a", "--text-pair", "b", "--tokens", "1"}), "headscope-cli",
                          "not expected: b --text-pair");
}

// A BERT GGUF file as llama.cpp's converter writes it, every type Headscope
// reads among its matrices (rotated_types, over every_type_spec's 3 layers): its texts
// tokenize as llama.cpp's own tokenizer on the same file does ([CLS] and
// [SEP] around), its maps equal the reference's on the values the file
// holds, and asked for predictions it says in one line that it has none:
// the converter leaves the masked-LM head out.
TEST(CliEncoders, AGgufBertFileTokenizesAsLlamaCppAndGivesTheReferenceMaps) {
    TempDir dir;
    const fs::path file = dir.path / "bert.gguf";
    const MatrixTypes matrices = rotated_types(0);
    const EncoderCheckpoint checkpoint = write_gguf_bert(file, every_type_spec(gguf_bert_spec()), matrices);
    EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
    const auto run = [&](std::vector<std::string> args) {
        args.insert(args.begin(), test::cli_program());
        args.insert(args.end(), {"--model", file.string()});
        return run_program(args, dir.path);
    };
    const auto cli = [&](const std::vector<std::string>& args) {
        const ProcessRun r = run(args);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? json::parse(r.out) : json::object();
    };
    const std::vector<std::string> texts = {"The cat sat on the mat.",
                                            "Hello, WORLD! na\xC3\xAFve caf\xC3\xA9 \xE4\xB8\xAD"};
    const json got = cli({"attention", "--text", texts[0]});
    const std::vector<int32_t> ids = got["token_ids"][0];
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(checkpoint, ids, {}, options);
    ASSERT_EQ(got["attention"].size(), static_cast<size_t>(checkpoint.spec.n_layer));
    EXPECT_LT(worst_map(got["attention"], want),
              2e-5 * tiles_widen(matrices));  // 9 rows: the tiles', where they run
    EXPECT_FALSE(got.contains("predictions"));
    expect_one_line_error(run({"attention", "--text", texts[0], "--top-k", "5"}), "headscope-cli", "no masked-LM head");
    const auto expected = llama_cpp_token_ids(file, texts);
    if (!expected) GTEST_SKIP() << "node cannot be run: run tools/setup";
    EXPECT_EQ(ids, (*expected)[0]);
    EXPECT_EQ(cli({"tokenize", "--text", texts[1]})["token_ids"], json((*expected)[1]));
}

// A decoder takes no pair.
TEST(CliEncoders, ADecoderTakesNoPair) {
    TempDir dir;
    write_test_model(dir.path / "gpt2", {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 16});
    expect_one_line_error(run_program({test::cli_program(), "attention", "--model", (dir.path / "gpt2").string(),
                                       "--text", "a", "--text-pair", "b"},
                                      dir.path),
                          "headscope-cli", "sentence pairs are for encoders; this model (gpt2) is a decoder");
}

}  // namespace
