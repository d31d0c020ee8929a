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

namespace {

namespace fs = std::filesystem;
using headscope::Tokenizer;
using nlohmann::json;

const std::string meta = "\xE2\x96\x81";  // ▁

json unigram_tokenizer_json() {
    json vocab = json::array();
    for (const char* special : {"<s>", "<pad>", "</s>", "<unk>"}) vocab.push_back({special, 0.0});
    vocab.push_back({meta, -2.0});
    for (char c = '!'; c <= '~'; ++c) vocab.push_back({std::string(1, c), -8.0 - (c % 7) * 0.01});
    std::ifstream in(headscope::test::gpt2_vocab_json());
    const json gpt2 = json::parse(in);
    for (const auto& [token, id] : gpt2.items()) {
        const bool starts = token.rfind("\xC4\xA0", 0) == 0;  // Ġ
        const std::string word = starts ? token.substr(2) : token;
        if (word.size() < 2 || word.size() > 12) continue;
        bool letters = true;
        for (char c : word) letters &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (letters) vocab.push_back({starts ? meta + word : word, -3.0 - std::log(id.get<double>() + 2)});
    }
    const int mask = static_cast<int>(vocab.size());
    vocab.push_back({"<mask>", 0.0});
    json added = json::array();
    for (int id : {0, 1, 2, 3, mask})
        added.push_back({{"id", id},
                         {"content", vocab[id][0]},
                         {"single_word", false},
                         {"lstrip", id == mask},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    const auto special = [](const char* token, int id) {
        return json{{"id", token}, {"ids", {id}}, {"tokens", {token}}};
    };
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}}},
            {"pre_tokenizer",
             {{"type", "Metaspace"},
              {"replacement", meta},
              {"add_prefix_space", true},
              {"prepend_scheme", "always"},
              {"split", true}}},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single",
               {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
              {"pair", json::array()},
              {"special_tokens", {{"<s>", special("<s>", 0)}, {"</s>", special("</s>", 2)}}}}},
            {"decoder", {{"type", "Metaspace"}, {"replacement", meta}, {"add_prefix_space", true}}},
            {"model", {{"type", "Unigram"}, {"unk_id", 3}, {"vocab", vocab}, {"byte_fallback", false}}}};
}

// Hand-written cases (NFKC's compatibility forms, the spaces and controls
// nmt_nfkc changes, unknown runs, <mask>) and generated sentences.
std::vector<std::string> texts() {
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
    std::ofstream(file) << unigram_tokenizer_json().dump();
    const Tokenizer tokenizer = Tokenizer::load_json(file);
    const std::vector<std::string> strings = texts();
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
    };
    for (const auto& [change, message] : cases) {
        const json vocab =
            json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0}), json::array({"b", -2.0})});
        json j = {{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}}}};
        change(j);
        headscope::test::expect_tokenizer_refused(scratch.path, j, message);
    }
}

}  // namespace
