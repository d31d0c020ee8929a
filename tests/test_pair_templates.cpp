// The post-processors' templates for one text and a sentence pair against
// the JavaScript port of transformers' tokenizers (tests/reference/encode_hf.js):
// RoBERTa's RobertaProcessing (<s> A </s></s> B </s>) on a byte-level BPE
// tokenizer.json written here from GPT-2's real vocabulary and merges, and
// BERT's BertProcessing on its WordPiece one; then the token types, and a
// bad pair template as a one-line error naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bert_tokenizer.h"
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

const std::vector<std::pair<std::string, std::string>> pairs = {
    {"The cat <mask> on the mat.", "It was soft."},
    {"Hello, WORLD! Isn't it (really) $5?", "na\xC3\xAFve caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87"},
    {"a", "b"},
    {"  spaces  ", "\ttabs\nand lines"}};

TEST(PairTemplates, RobertaAndBertPairsMatchTheReference) {
    const headscope::test::TempDir scratch;
    const fs::path roberta = scratch.path / "roberta.json", bert = scratch.path / "bert.json";
    std::ofstream(roberta) << headscope::test::roberta_tokenizer_json().dump();
    std::ofstream(bert) << headscope::test::bert_tokenizer_json(headscope::test::wordpiece_vocab()).dump();
    for (const auto& [file, tokenizer_class] : {std::pair{roberta, "RobertaTokenizer"}, {bert, "BertTokenizer"}}) {
        SCOPED_TRACE(tokenizer_class);
        const Tokenizer tokenizer = Tokenizer::load_json(file);
        std::vector<std::string> singles;
        for (const auto& [first, second] : pairs) singles.push_back(first);
        const json single_ids =
            headscope::test::reference_encoding(scratch.path, file, tokenizer_class, {{"texts", singles}});
        if (single_ids.is_null()) GTEST_SKIP() << "node cannot be run: run tools/setup";
        const json pair_ids =
            headscope::test::reference_encoding(scratch.path, file, tokenizer_class, {{"pairs", pairs}});
        for (size_t i = 0; i < pairs.size(); ++i) {
            EXPECT_EQ(json(tokenizer.encode(pairs[i].first)), single_ids[i]) << pairs[i].first;
            const Tokenizer::Pair pair = tokenizer.encode_pair(pairs[i].first, pairs[i].second);
            EXPECT_EQ(json(pair.ids), pair_ids[i]["ids"]) << pairs[i].first;
            const std::vector<int32_t> second = tokenizer.encode(pairs[i].second, false);
            ASSERT_GE(pair.second_start, 0);
            EXPECT_EQ(std::vector<int32_t>(pair.ids.begin() + pair.second_start,
                                           pair.ids.begin() + pair.second_start + second.size()),
                      second);
            if (std::string(tokenizer_class) == "BertTokenizer") {
                EXPECT_EQ(json(pair.types), pair_ids[i]["types"]) << pairs[i].first;
            } else {  // RoBERTa has one token type: transformers gives 0 everywhere (the port, 1 for B)
                EXPECT_EQ(pair.types, std::vector<int32_t>(pair.ids.size(), 0));
            }
        }
    }
}

// A pair template must have A and B once each: one line naming the field.
TEST(PairTemplates, BadPairTemplatesAreOneLineErrors) {
    const headscope::test::TempDir scratch;
    json j = headscope::test::bert_tokenizer_json(headscope::test::wordpiece_vocab());
    j["post_processor"]["pair"][3]["Sequence"]["id"] = "A";
    headscope::test::expect_tokenizer_refused(
        scratch.path, j, "post_processor.pair[3]: the pair template's sequence \"A\" is not one of AB given once");
    const fs::path file = scratch.path / "bad.json";
    const json no_pair = {{"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", {{"[UNK]", 0}}}}}};
    std::ofstream(file) << no_pair.dump();
    try {
        Tokenizer::load_json(file).encode_pair("a", "b");
        ADD_FAILURE() << "a pair encoded without a template";
    } catch (const headscope::Error& e) {
        EXPECT_STREQ(e.what(), "the tokenizer has no template for a pair of texts");
    }
}

}  // namespace
