// headscope-cli on encoder–decoders (T5, BART and Marian test checkpoints,
// seq2seq_models.h) as a user runs them: info says the kind; the source and
// the target tokenize as the reference tokenizer (@lenml/tokenizers; for
// Marian's SentencePiece models, spm_encode) does;
// attention gives encoder_attention, decoder_attention and cross_attention,
// each equal to the double-precision reference (seq2seq_reference.h) with
// the model's own scale (none for T5); generate continues the target with
// the reference's argmax at every step and reports each step's
// cross-attention row, from the start token alone without a target, its
// first token forced where the config says; a BART with vocab.json and
// merges.txt alone tokenizes as BartTokenizer; what they cannot do is one
// line, exit 2; and a T5 GGUF file of every type (gguf_models.h) tokenizes as
// llama.cpp does and gives the reference's attentions and top 5 next tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_test.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "model_writer.h"
#include "prediction_checks.h"
#include "process.h"
#include "sentencepiece_models.h"
#include "seq2seq_models.h"
#include "seq2seq_reference.h"
#include "tokenizer_tests.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string source = "The cat sat on the mat.", target = "Die Katze";

// headscope-cli's JSON for `args` on the model in `dir`; an empty object, and a failure, when it fails.
json cli_json(const fs::path& dir, std::vector<std::string> args) {
    args.insert(args.begin(), test::cli_program());
    args.insert(args.end(), {"--model", dir.string()});
    const ProcessRun r = run_program(args, dir);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? json::parse(r.out) : json::object();
}

// The (layers, 1, NH, rows, cols) array `got` against the reference's (layers, NH, rows, cols).
double worst(const json& got, const std::vector<double>& want, int rows, int cols) {
    double worst = 0;
    for (size_t l = 0; l < got.size(); ++l)
        for (size_t h = 0; h < got[l][0].size(); ++h)
            for (int i = 0; i < rows; ++i)
                for (int j = 0; j < cols; ++j) {
                    const double w = want[((l * got[l][0].size() + h) * rows + i) * cols + j];
                    worst = std::max(worst, std::abs(got[l][0][h][i][j].get<double>() - w));
                }
    return worst;
}

class CliEncoderDecoderTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        checkpoint_ = make_seq2seq_checkpoint(seq2seq_variant(GetParam()));
        write_seq2seq_checkpoint(dir_.path / "model", checkpoint_);
    }

    ProcessRun run(std::vector<std::string> args) {
        args.insert(args.begin(), test::cli_program());
        args.insert(args.end(), {"--model", (dir_.path / "model").string()});
        return run_program(args, dir_.path);
    }
    json run_json(const std::vector<std::string>& args) { return cli_json(dir_.path / "model", args); }

    TempDir dir_;
    Seq2SeqCheckpoint checkpoint_;
};

TEST_P(CliEncoderDecoderTest, InfoSaysTheKindAndBothStacks) {
    const json info = run_json({"info", "--format", "json"});
    EXPECT_EQ(info["kind"], "encoder-decoder");
    EXPECT_EQ(info["encoder_layers"], checkpoint_.spec.encoder_layers);
    EXPECT_EQ(info["n_layer"], checkpoint_.spec.decoder_layers);
}

TEST_P(CliEncoderDecoderTest, SourceAndTargetTokenizeAsTheReference) {
    const Seq2Seq family = checkpoint_.spec.family;
    // Marian's: SentencePiece's spm_encode on each side's model; the others': @lenml/tokenizers.
    const json expected =
        family == Seq2Seq::marian
            ? json{marian_reference_ids(Side::source, source), marian_reference_ids(Side::target, target)}
            : reference_encoding(dir_.path, dir_.path / "model/tokenizer.json",
                                 family == Seq2Seq::bart ? "BartTokenizer" : "T5Tokenizer",
                                 {{"texts", {source, target}}});
    if (expected.is_null()) GTEST_SKIP() << "node cannot be run: run tools/setup";
    const json got = run_json({"attention", "--text", source, "--target", target, "--format", "none"});
    EXPECT_EQ(got["source_token_ids"][0], expected[0]);
    // The decoder reads its start token, then the target's tokens without the final </s>.
    json decoder = json::array({checkpoint_.spec.start_id});
    for (size_t i = 0; i + 1 < expected[1].size(); ++i) decoder.push_back(expected[1][i]);
    EXPECT_EQ(got["token_ids"][0], decoder);
}

TEST_P(CliEncoderDecoderTest, TheThreeAttentionsEqualTheReference) {
    const json got = run_json({"attention", "--text", source, "--target", target, "--top-k", "1"});
    ASSERT_TRUE(got.contains("encoder_attention") && got.contains("cross_attention") &&
                got.contains("decoder_attention"));
    EXPECT_FALSE(got.contains("attention"));
    const std::vector<int32_t> src = got["source_token_ids"][0], tgt = got["token_ids"][0];
    AttentionOptions options;
    options.scale = checkpoint_.spec.family == Seq2Seq::t5 ? Scale::none : Scale::head;
    const Seq2SeqReference want = seq2seq_reference(checkpoint_, src, tgt, options);
    EXPECT_LT(worst(got["encoder_attention"], want.encoder, want.S, want.S), 2e-5);
    EXPECT_LT(worst(got["decoder_attention"], want.decoder, want.T, want.T), 2e-5);
    EXPECT_LT(worst(got["cross_attention"], want.cross, want.T, want.S), 2e-5);
    const auto argmax = [&](int t) {
        const auto row = want.logits.begin() + static_cast<ptrdiff_t>(t) * want.V;
        return static_cast<int>(std::max_element(row, row + want.V) - row);
    };
    EXPECT_EQ(got["predictions"][0][want.T - 1][0]["id"], argmax(want.T - 1));
}

TEST_P(CliEncoderDecoderTest, GenerationFollowsTheReferenceArgmaxWithCrossAttentionRows) {
    const json got = run_json({"generate", "--text", source, "--tokens", "4"});
    std::vector<int32_t> ids = got["prompt_ids"];
    const std::vector<int32_t> src = got["source_ids"];
    EXPECT_EQ(ids.front(), checkpoint_.spec.start_id);
    ASSERT_EQ(got["steps"].size(), 4u);
    AttentionOptions options;
    options.scale = checkpoint_.spec.family == Seq2Seq::t5 ? Scale::none : Scale::head;
    for (const json& step : got["steps"]) {
        const Seq2SeqReference own = seq2seq_reference(checkpoint_, src, ids, options);
        const auto row = own.logits.begin() + static_cast<ptrdiff_t>(own.T - 1) * own.V;
        const int expected = static_cast<int>(std::max_element(row, row + own.V) - row);
        EXPECT_EQ(step["id"], expected);
        ids.push_back(step["id"]);
        // The new token's cross-attention row: (layers, NH, S), each a distribution over the source.
        const Seq2SeqReference next = seq2seq_reference(checkpoint_, src, ids, options);
        const json& cross = step["cross_attention"];
        ASSERT_EQ(cross.size(), static_cast<size_t>(checkpoint_.spec.decoder_layers));
        for (size_t l = 0; l < cross.size(); ++l)
            for (size_t h = 0; h < cross[l].size(); ++h)
                for (int j = 0; j < next.S; ++j)
                    EXPECT_NEAR(cross[l][h][j].get<double>(),
                                next.cross[((l * next.NH + h) * next.T + next.T - 1) * next.S + j], 2e-5);
    }
}

TEST_P(CliEncoderDecoderTest, WhatItCannotDoIsOneLineAndExitTwo) {
    expect_one_line_error(run({"attention", "--text", source, "--text-pair", "b"}), "headscope-cli",
                          "an encoder-decoder");
    expect_one_line_error(run({"attention", "--text", source, "--target", "a", "--target", "b"}), "headscope-cli",
                          "--target: 2 given for 1 texts");
    expect_one_line_error(run({"attention", "--text", source, "--format", "npy", "--out", "x.npy"}), "headscope-cli",
                          "three attentions");
    expect_one_line_error(run({"attention", "--text", source, "--contributions"}), "headscope-cli", "encoder–decoder");
}

// Without --target the decoder reads its start token alone, where
// transformers' generate starts it; a config's forced_bos_token_id then
// forces the first generated token (ForcedBOSTokenLogitsProcessor, at an
// input of one token: BART-large-CNN's <s>), after which the reference's
// argmax goes on; after a --target nothing is forced.
TEST(CliBart, TheDecoderStartsAloneAndForcedBosIsTheFirstStep) {
    TempDir dir;
    Seq2SeqCheckpoint bart = make_seq2seq_checkpoint(seq2seq_variant("bart"));
    const int start = bart.spec.start_id, forced = 1000;
    bart.config["forced_bos_token_id"] = forced;
    write_seq2seq_checkpoint(dir.path, bart);
    EXPECT_EQ(cli_json(dir.path, {"attention", "--text", source, "--format", "none"})["token_ids"][0],
              json::array({start}));
    AttentionOptions options;
    options.scale = Scale::head;
    const auto argmax_after = [&](const std::vector<int32_t>& src, const std::vector<int32_t>& ids) {
        const Seq2SeqReference own = seq2seq_reference(bart, src, ids, options);
        const auto row = own.logits.begin() + static_cast<ptrdiff_t>(own.T - 1) * own.V;
        return static_cast<int>(std::max_element(row, row + own.V) - row);
    };
    const json got = cli_json(dir.path, {"generate", "--text", source, "--tokens", "2"});
    ASSERT_EQ(got["steps"].size(), 2u);
    const std::vector<int32_t> src = got["source_ids"];
    EXPECT_EQ(got["prompt_ids"], json::array({start}));
    ASSERT_NE(argmax_after(src, {start}), forced) << "the model's own choice must differ to show the forcing";
    EXPECT_EQ(got["steps"][0]["id"], forced);
    EXPECT_EQ(got["steps"][0]["forced"], true);
    EXPECT_EQ(got["steps"][1]["id"], argmax_after(src, {start, forced}));
    EXPECT_EQ(got["steps"][1]["forced"], false);
    const json prefixed = cli_json(dir.path, {"generate", "--text", source, "--target", target, "--tokens", "1"});
    std::vector<int32_t> prompt = prefixed["prompt_ids"];
    EXPECT_GT(prompt.size(), 1u);
    EXPECT_EQ(prefixed["steps"][0]["id"], argmax_after(src, prompt));
    EXPECT_EQ(prefixed["steps"][0]["forced"], false);
}

// A BART fine-tune that ships vocab.json and merges.txt without a
// tokenizer.json: its source reads as transformers' BartTokenizer reads it,
// <s> A </s> (build_inputs_with_special_tokens); the reference is
// transformers' tokenizer on the same vocabulary's tokenizer.json.
TEST(CliBart, VocabFilesAloneTokenizeAsBartTokenizer) {
    TempDir dir;
    write_seq2seq_checkpoint(dir.path, make_seq2seq_checkpoint(seq2seq_variant("bart")));
    const json expected =
        reference_encoding(dir.path, dir.path / "tokenizer.json", "BartTokenizer", {{"texts", {"A cat", source}}});
    if (expected.is_null()) GTEST_SKIP() << "node cannot be run: run tools/setup";
    write_bart_vocab_files(dir.path);
    ASSERT_FALSE(fs::exists(dir.path / "tokenizer.json"));
    const json tokens = cli_json(dir.path, {"tokenize", "--text", "A cat"});
    EXPECT_EQ(tokens["token_ids"], expected[0]);
    EXPECT_EQ(tokens["tokens"], json::array({"<s>", "A", " cat", "</s>"}));
    EXPECT_EQ(cli_json(dir.path, {"attention", "--text", source, "--format", "none"})["source_token_ids"][0],
              expected[1]);
}

TEST(CliMarian, AModelThatCannotBeReadIsOneLine) {
    TempDir dir;
    write_seq2seq_checkpoint(dir.path, make_seq2seq_checkpoint(seq2seq_variant("marian")));
    fs::resize_file(dir.path / "target.spm", 100);
    expect_one_line_error(
        run_program({test::cli_program(), "attention", "--text", source, "--model", dir.path.string()}, dir.path),
        "headscope-cli", "target.spm: not a SentencePiece model");
}

// A T5 GGUF file as llama.cpp's converter writes it, every type Headscope
// reads among its matrices (rotated_types): the
// source tokenizes as llama.cpp's own tokenizer on the same file does (</s>
// after it), the decoder reads the start token, then the target's tokens
// without that </s>; the three attentions equal the reference's on the
// values the file holds, and so do the top 5 next tokens and their
// probabilities at every target position. llama.cpp's next tokens are not
// compared: node-llama-cpp 3.21.1's addon runs llama_decode alone, never
// llama_encode, so T5's decoder has no encoder output to read there.
TEST(CliT5, AGgufFileTokenizesAsLlamaCppAndGivesTheReferenceAttentions) {
    TempDir dir;
    const fs::path file = dir.path / "t5.gguf";
    const MatrixTypes matrices = rotated_types(0);
    const Seq2SeqCheckpoint checkpoint = write_gguf_t5(file, gguf_t5_spec("t5", 16), matrices);
    EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
    const ProcessRun r = run_program({test::cli_program(), "attention", "--text", source, "--target", target, "--top-k",
                                      "5", "--model", file.string()},
                                     dir.path);
    ASSERT_EQ(r.status, 0) << r.err;
    const json got = json::parse(r.out);
    const std::vector<int32_t> src = got["source_token_ids"][0], tgt = got["token_ids"][0];
    AttentionOptions options;
    options.scale = Scale::none;
    const Seq2SeqReference want = seq2seq_reference(checkpoint, src, tgt, options);
    const double tolerance = 5e-5 * tiles_widen(matrices);  // test_gguf_encoders' for quantized matrices
    EXPECT_LT(worst(got["encoder_attention"], want.encoder, want.S, want.S), tolerance);
    EXPECT_LT(worst(got["decoder_attention"], want.decoder, want.T, want.T), tolerance);
    EXPECT_LT(worst(got["cross_attention"], want.cross, want.T, want.S), tolerance);
    expect_top_5(cli_predictions(got), {tgt}, want.logits, want.V, tolerance);
    const auto expected = llama_cpp_token_ids(file, {source, target});
    if (!expected) GTEST_SKIP() << "node cannot be run: run tools/setup";
    EXPECT_EQ(src, (*expected)[0]);
    std::vector<int32_t> decoder = {checkpoint.spec.start_id};
    decoder.insert(decoder.end(), (*expected)[1].begin(), (*expected)[1].end() - 1);
    EXPECT_EQ(tgt, decoder);
}

INSTANTIATE_TEST_SUITE_P(Families, CliEncoderDecoderTest, ::testing::Values("t5", "bart", "marian"),
                         [](const auto& info) { return info.param; });

}  // namespace
