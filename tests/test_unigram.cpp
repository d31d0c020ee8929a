// Unigram models in tokenizer.json (XLM-R's and T5's kind: SentencePiece's
// Precompiled normalizer, Metaspace, <s> A </s>) against the JavaScript port
// of transformers' tokenizers (tests/reference/encode_hf.js), on a
// tokenizer.json written here from a real vocabulary: GPT-2's all-letter
// words as SentencePiece pieces ("Ġword" as "▁word"), scored by their
// merge rank, with single characters for most of ASCII (so that CJK, emoji
// and accented letters are unknown, and consecutive unknowns fuse). And a
// one-line Error for each kind of bad Unigram file.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/tokenize/tokenizer.h"
#include "model_writer.h"
#include "process.h"
#include "tokenizer_tests.h"
#include "written_tokenizers.h"

namespace {

namespace fs = std::filesystem;
using headscope::Tokenizer;
using nlohmann::json;

const std::string meta = "\xE2\x96\x81";  // ▁

// Hand-written cases (NFKC's compatibility forms, the spaces and controls
// nmt_nfkc changes, unknown runs, <mask>) and generated sentences.
std::vector<std::string> unigram_texts() {
    std::vector<std::string> out = {
        "The cat <mask> on the mat.",
        "Hello, WORLD! Isn't it (really) $5?",
        "\xEF\xAC\x81ne \xE2\x91\xA0\xE2\x91\xA1 \xEF\xBC\xA6\xEF\xBC\xB5\xEF\xBC\xAC\xEF\xBC\xAC width",
        "tabs\tand\nnew lines\r\n and \x01 controls \xEF\xBF\xBD gone",
        "caf\x65\xCC\x81 na\xC3\xAFve \xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97 \xF0\x9F\x98\x80\xF0\x9F\x98\x80!",
        "\xEF\xBD\x9E tilde\xEF\xBD\x9E and " + meta +
            " already, zero\xE2\x80\x8Bwidth, no\xC2\xA0"
            "break",
        "   spaces   around   ",
        "supercalifragilisticexpialidocious unbelievably",
    };
    const std::vector<std::string> words = {"the",
                                            "Cat",
                                            "running",
                                            "jumped",
                                            "quickly",
                                            "unbelievable",
                                            "\xC3\xBC"
                                            "ber",
                                            "transformers",
                                            "data",
                                            "tokens",
                                            "Unigram",
                                            "42",
                                            "\xEF\xAC\x81",
                                            "learning",
                                            "x",
                                            "naïve"};
    const std::vector<std::string> sentences = headscope::test::generated_sentences(words, 11);
    out.insert(out.end(), sentences.begin(), sentences.end());
    return out;
}

TEST(Unigram, XlmrLikeTokenizerMatchesTheReference) {
    const headscope::test::TempDir scratch;
    const fs::path file = scratch.path / "tokenizer.json";
    std::ofstream(file) << unigram_tokenizer_json(headscope::test::UnigramLayout::xlm_r).dump();
    const Tokenizer tokenizer = Tokenizer::load_json(file);
    const std::vector<std::string> strings = unigram_texts();
    for (const bool add_special : {true, false}) {
        const json reference = headscope::test::reference_encoding(scratch.path, file, "XLMRobertaTokenizer",
                                                                   {{"texts", strings}}, add_special);
        if (reference.is_null()) GTEST_SKIP() << "node cannot be run: run tools/setup";
        const auto expected = reference.get<std::vector<std::vector<int32_t>>>();
        ASSERT_EQ(expected.size(), strings.size());
        for (size_t i = 0; i < strings.size(); ++i)
            EXPECT_EQ(tokenizer.encode(strings[i], add_special), expected[i])
                << "add_special " << add_special << ", text " << json(strings[i]).dump();
    }
    // A run of unknown characters is one <unk>; a word its best-scoring split.
    const std::vector<int32_t> unknown = tokenizer.encode("\xE4\xB8\xAD\xE6\x96\x87", false);
    EXPECT_EQ(std::count(unknown.begin(), unknown.end(), 3), 1);
    EXPECT_EQ(tokenizer.token_bytes(tokenizer.encode("the", false).front()), " the");
}

// A bad Unigram file: one line naming the field.
TEST(Unigram, BadFilesAreOneLineErrors) {
    const headscope::test::TempDir scratch;
    const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
        {[](json& j) { j["model"].erase("unk_id"); }, "a Unigram model needs its unk_id"},
        {[](json& j) { j["model"]["unk_id"] = 99; }, "model.unk_id"},
        {[](json& j) { j["model"]["vocab"][1] = {"a"}; }, "model.vocab[1]: expected [token, score]"},
        {[](json& j) {
             j["model"]["vocab"][1] = {"a", 0.5};
         },
         "model.vocab[1]: the score is not a log-probability"},
        {[](json& j) {
             j["model"]["vocab"][2] = {"a", -1.0};
         },
         "model.vocab[2]: \"a\" is listed twice"},
        {[](json& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback: true is not supported"},
        {[](json& j) { j["model"]["vocab"] = json::object(); }, "model.vocab: expected an array of [token, score]"},
        {[](json& j) {
             j["model"]["vocab"][1] = {std::string(1025, 'a'), -1.0};
         },
         "model: a token of 1025 bytes, over the 1024 Headscope reads"},
    };
    for (const auto& [change, message] : cases) {
        const json vocab =
            json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0}), json::array({"b", -2.0})});
        json j = {{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}}}};
        change(j);
        headscope::test::expect_tokenizer_refused(scratch.path, j, message);
    }
}

// A text of 120,000 letters against a piece of 1,000 (the encoder walks the
// tokens starting at each place along a trie, as far as one goes: it hashed
// every candidate substring, text x longest piece^2), and a score beyond
// float32's range (kept in double, as Hugging Face's tokenizers keeps it:
// in float32 it was -inf, and the split found no path).
TEST(Unigram, LongPiecesAndScoresPastFloat32ComeOutRight) {
    const headscope::test::TempDir scratch;
    const json vocab = json::array({json::array({"<unk>", 0.0}), json::array({std::string(1000, 'a'), -1.0}),
                                    json::array({"a", -2.0}), json::array({"b", -1e39})});
    const fs::path file = scratch.path / "tokenizer.json";
    std::ofstream(file) << json{{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}}}}.dump();
    const std::vector<int32_t> ids = Tokenizer::load_json(file).encode(std::string(120000, 'a') + "b", false);
    std::vector<int32_t> expected(120, 1);
    expected.push_back(3);
    EXPECT_EQ(ids, expected);
}

}  // namespace
