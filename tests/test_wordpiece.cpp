// BERT's tokenizer (a WordPiece model with BertNormalizer, BertPreTokenizer
// and [CLS] ... [SEP]) against the JavaScript port of transformers'
// tokenizers (tests/reference/encode_hf.js under node), on a tokenizer.json
// written here from a real vocabulary: GPT-2's words, those that start a word
// as themselves and the rest as "##" continuations, plus BERT's special
// tokens, some CJK ideographs and punctuation. And a one-line Error for each
// kind of bad WordPiece file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bert_tokenizer.h"
#include "headscope/base/error.h"
#include "headscope/tokenize/tokenizer.h"
#include "model_writer.h"
#include "process.h"
#include "tokenizer_tests.h"

namespace {

namespace fs = std::filesystem;
using headscope::Tokenizer;
using headscope::test::bert_tokenizer_json;
using headscope::test::wordpiece_vocab;
using nlohmann::json;

// Hand-written cases (accents, case, CJK, controls, [MASK], unknown and
// over-long words) and generated sentences of GPT-2 words and punctuation.
std::vector<std::string> texts() {
    std::vector<std::string> out = {
        "The cat sat on the mat.",
        "Hello, WORLD! Isn't it (really) $5?",
        "Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\x85ngstr\xC3\xB6m",
        "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97 and text\xE4\xB8\xAD",
        "tabs\tand\nnew lines\r\n and \x01 controls \xEF\xBF\xBD gone",
        "The cat [MASK] on the mat.",
        "supercalifragilisticexpialidocious xqzjv emoji \xF0\x9F\x98\x80!",
        std::string(120, 'a') + " long",
        "   spaces   around   ",
        "well-known co-operation e.g. U.S.A.",
    };
    const std::vector<std::string> words = {"the",  "Cat",      "running", "jumped", "quickly",   "unbelievable",
                                            "über", "ÉCOLE",    "data",    "tokens", "WordPiece", "héllo",
                                            "Ö",    "learning", "x",       "42",     "naïveté",   "transformers"};
    const std::vector<std::string> sentences = headscope::test::generated_sentences(words, 7);
    out.insert(out.end(), sentences.begin(), sentences.end());
    return out;
}

TEST(WordPiece, BertTokenizerMatchesTheReference) {
    const headscope::test::TempDir scratch;
    const fs::path file = scratch.path / "tokenizer.json";
    std::ofstream(file) << bert_tokenizer_json(wordpiece_vocab()).dump();
    const Tokenizer tokenizer = Tokenizer::load_json(file);
    const std::vector<std::string> strings = texts();
    for (const bool add_special : {true, false}) {
        const json reference =
            headscope::test::reference_encoding(scratch.path, file, "BertTokenizer", {{"texts", strings}}, add_special);
        if (reference.is_null()) GTEST_SKIP() << "node cannot be run: run tools/setup";
        const auto expected = reference.get<std::vector<std::vector<int32_t>>>();
        ASSERT_EQ(expected.size(), strings.size());
        for (size_t i = 0; i < strings.size(); ++i) {
            EXPECT_EQ(tokenizer.encode(strings[i], add_special), expected[i])
                << "add_special " << add_special << ", text " << json(strings[i]).dump();
        }
    }
    // A continuation shows as the vocabulary spells it.
    const std::vector<int32_t> split = tokenizer.encode("jumpedss", false);
    ASSERT_GE(split.size(), 2u);
    EXPECT_EQ(tokenizer.token_bytes(split.front()), "jumped");
    EXPECT_TRUE(tokenizer.token_bytes(split.back()).starts_with("##")) << tokenizer.token_bytes(split.back());
}

// A bad WordPiece file: one line naming the field.
TEST(WordPiece, BadFilesAreOneLineErrors) {
    const headscope::test::TempDir scratch;
    const json vocab = {{"[UNK]", 0}, {"a", 1}, {"##b", 2}};
    const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
        {[](json& j) { j["model"].erase("unk_token"); }, "a WordPiece model needs its unk_token"},
        {[](json& j) { j["model"]["unk_token"] = "[NOPE]"; }, "model.unk_token: \"[NOPE]\" is not in the vocabulary"},
        {[](json& j) { j["model"]["max_input_chars_per_word"] = 0; }, "model.max_input_chars_per_word"},
        {[](json& j) { j["normalizer"]["lowercase"] = "yes"; }, "normalizer.lowercase"},
        {[](json& j) {
             j["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"[CLS]"}}, {"sep", {"[SEP]", 0}}};
         },
         "post_processor.cls: expected [token, id]"},
        {[](json& j) { j["model"]["continuing_subword_prefix"] = std::string(1 << 20, '#'); },
         "model: a continuing_subword_prefix of 1048576 bytes, over the 1024 Headscope reads"},
        {[](json& j) { j["model"]["vocab"][std::string(1025, 'a')] = 3; },
         "model: a token of 1025 bytes, over the 1024 Headscope reads"},
    };
    for (const auto& [change, message] : cases) {
        json j = {{"normalizer", {{"type", "BertNormalizer"}}},
                  {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
                  {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", vocab}}}};
        change(j);
        headscope::test::expect_tokenizer_refused(scratch.path, j, message);
    }
}

// A word of 100,000 letters under no word-length limit: the longest match
// walks the tokens along a trie from each place (it assembled and hashed
// every candidate from the end of the word down: cubic in its length).
TEST(WordPiece, ALongWordIsSplitInTimeLinearInIt) {
    const headscope::test::TempDir scratch;
    const json vocab = {{"[UNK]", 0}, {"a", 1}, {"##a", 2}, {"##" + std::string(1000, 'a'), 3}};
    const fs::path file = scratch.path / "tokenizer.json";
    std::ofstream(file) << json{
        {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
        {"model",
         {{"type", "WordPiece"},
          {"unk_token", "[UNK]"},
          {"max_input_chars_per_word", 1000000000},
          {"vocab", vocab}}}}.dump();
    const std::vector<int32_t> ids = Tokenizer::load_json(file).encode(std::string(100000, 'a'), false);
    std::vector<int32_t> expected = {1};  // "a", then 99 of the longest, then the 999 letters left one by one
    expected.insert(expected.end(), 99, 3);
    expected.insert(expected.end(), 999, 2);
    EXPECT_EQ(ids, expected);
}

}  // namespace
