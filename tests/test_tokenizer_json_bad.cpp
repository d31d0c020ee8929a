// tokenizer.json files the loader refuses, each in one line naming the file,
// the field and the problem (the fixture and files: tokenizer_json_files.h):
// types not supported, bad normalizers, pre-tokenizers, model fields, added
// tokens and templates, files that are not a JSON object or too large; and
// normalizers and patterns that would explode the text or backtrack without
// end, an Error at once.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer_json_files.h"

namespace {

namespace fs = std::filesystem;
using headscope::Error;
using headscope::Tokenizer;
using nlohmann::json;
using namespace headscope::test::tokenizer_json;

// A model, normalizer, pre-tokenizer or post-processor of a type not supported.
TEST_F(TokenizerJsonFile, UnsupportedTypesAreOneLineErrors) {
    expect_one_line_errors({
        {"model type", [](json& j) { j["model"]["type"] = "WordLevel"; },
         "model: type \"WordLevel\" is not supported (supported: BPE, WordPiece, Unigram)"},
        {"normalizer type",
         [](json& j) {
             j["normalizer"] = {{"type", "Lowercase"}};
         },
         "normalizer: type \"Lowercase\" is not supported (supported: NFC, Prepend, Replace, Strip, BertNormalizer, "
         "Precompiled, Sequence)"},
        {"normalizer in a sequence",
         [](json& j) {
             j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "NFKC"}}}}};
         },
         "normalizer.normalizers[1]: type \"NFKC\" is not supported"},
        {"pre-tokenizer type",
         [](json& j) {
             j["pre_tokenizer"] = {{"type", "Whitespace"}};
         },
         "pre_tokenizer: type \"Whitespace\" is not supported (supported: Split, ByteLevel, Metaspace, Digits, "
         "BertPreTokenizer, WhitespaceSplit, Sequence)"},
        {"post-processor type",
         [](json& j) {
             j["post_processor"] = {{"type", "XLNetProcessing"}};
         },
         "post_processor: type \"XLNetProcessing\" is not supported (supported: ByteLevel, TemplateProcessing, "
         "BertProcessing, RobertaProcessing, Sequence)"},
    });
}

// Normalizers and pre-tokenizers whose patterns, options or number are refused.
TEST_F(TokenizerJsonFile, BadNormalizersAndPreTokenizersAreOneLineErrors) {
    expect_one_line_errors({
        {"Replace by a bad regex",
         [](json& j) {
             j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " +("}}}, {"content", "_"}};
         },
         "normalizer.pattern: missing closing parenthesis at byte 3 of the pattern"},
        {"Replace of the empty string",
         [](json& j) {
             j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "x*"}}}, {"content", "_"}};
         },
         "normalizer.pattern: matches the empty string, which is not supported"},
        {"Strip without strip_right",
         [](json& j) {
             j["normalizer"] = {{"type", "Strip"}, {"strip_left", true}};
         },
         "normalizer.strip_right: missing"},
        {"a regex PCRE2 refuses",
         [](json& j) {
             j["pre_tokenizer"] = {
                 {"type", "Sequence"},
                 {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(a|b"}}}, {"behavior", "Isolated"}}}}};
         },
         "pre_tokenizer.pretokenizers[0].pattern: missing closing parenthesis at byte 4 of the pattern"},
        {"a giant regex",
         [](json& j) {
             j["pre_tokenizer"] = {
                 {"type", "Split"}, {"pattern", {{"Regex", std::string(100'000, 'a')}}}, {"behavior", "Isolated"}};
         },
         "pre_tokenizer.pattern: pattern string is longer than the limit set by the application at byte 0 of the "
         "pattern"},
        {"a split behaviour",
         [](json& j) {
             j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
         },
         "pre_tokenizer.behavior: \"Sideways\" is not supported (supported: Removed, Isolated, MergedWithPrevious, "
         "MergedWithNext, Contiguous)"},
        {"an inverted split",
         [](json& j) {
             j["pre_tokenizer"] = {
                 {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}, {"invert", true}};
         },
         "pre_tokenizer.invert: true is not supported"},
        {"a prepend scheme",
         [](json& j) {
             j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "often"}};
         },
         "pre_tokenizer.prepend_scheme: \"often\" is not supported (supported: always, first, never)"},
        {"a Metaspace replacement of two characters",
         [](json& j) {
             j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "__"}};
         },
         "pre_tokenizer.replacement: expected one character, got \"__\""},
        {"too many pre-tokenizers",
         [](json& j) {
             j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array()}};
             for (int i = 0; i < 65; ++i) j["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Digits"}});
         },
         "pre_tokenizer.pretokenizers[64]: more than 64 pre-tokenizers in all"},
        {"no type", [](json& j) { j["pre_tokenizer"].erase("type"); }, "pre_tokenizer.type: missing"},
    });
}

// The model's fields missing or of the wrong kind, ids and merges that do not fit, options not supported.
TEST_F(TokenizerJsonFile, BadModelFieldsAreOneLineErrors) {
    expect_one_line_errors({
        {"no model", [](json& j) { j.erase("model"); }, "model: missing"},
        {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab: missing"},
        {"no merges", [](json& j) { j["model"].erase("merges"); }, "model.merges: missing"},
        {"vocab of the wrong kind",
         [](json& j) {
             j["model"]["vocab"] = json::array({1, 2});
         },
         "model.vocab: expected an object of token -> id, got [1,2]"},
        {"an id that is a string", [](json& j) { j["model"]["vocab"]["ab"] = "256"; },
         "model.vocab[\"ab\"]: expected an integer id, got \"256\""},
        {"a negative id", [](json& j) { j["model"]["vocab"]["ab"] = -1; },
         "model.vocab[\"ab\"]: id -1 is out of range (must be below 257)"},
        {"an id past the tokens", [](json& j) { j["model"]["vocab"]["ab"] = 1'000'000'000; },
         "model.vocab[\"ab\"]: id 1000000000 is out of range"},
        {"a duplicate id", [](json& j) { j["model"]["vocab"]["ab"] = 7; }, "id 7 is another token's too"},
        {"a merge of unknown symbols", [](json& j) { j["model"]["merges"].push_back("ab zz"); },
         "model.merges[1]: \"zz\" is not in the vocabulary"},
        {"a merge into an unknown token",
         [](json& j) {
             j["model"]["merges"].push_back(json::array({"a", "c"}));
         },
         "model.merges[1]: their merge \"ac\" is not in the vocabulary"},
        {"a merge of three", [](json& j) { j["model"]["merges"] = {"a b c"}; },
         "model.merges[0]: expected \"left right\", got \"a b c\""},
        {"a merge that is a number", [](json& j) { j["model"]["merges"] = {5}; },
         "model.merges[0]: expected \"left right\" or [\"left\", \"right\"], got 5"},
        {"a subword prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
         "model.continuing_subword_prefix: \"##\" is not supported (only empty or null)"},
        {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout: 0.1: BPE dropout is not supported"},
        {"an unknown unk", [](json& j) { j["model"]["unk_token"] = "<unk>"; },
         "model.unk_token: \"<unk>\" is not in the vocabulary"},
        {"a boolean of the wrong kind", [](json& j) { j["model"]["byte_fallback"] = "yes"; },
         "model.byte_fallback: expected true or false, got \"yes\""},
    });
}

// Added tokens of the wrong kind, empty, too long or listed twice; templates naming what is not there.
TEST_F(TokenizerJsonFile, BadAddedTokensAndTemplatesAreOneLineErrors) {
    const json template_processing = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
    expect_one_line_errors({
        {"added tokens of the wrong kind",
         [](json& j) {
             j["added_tokens"] = {{"a", 1}};
         },
         "added_tokens: expected an array, got an object of 1 keys"},
        {"an added token without content",
         [](json& j) {
             j["added_tokens"] = {{{"id", 257}}};
         },
         "added_tokens[0].content: missing"},
        {"an added token without content", [](json& j) { j["added_tokens"] = {added_token(257, "")}; },
         "added_tokens[0].content: empty"},
        {"a giant added token", [](json& j) { j["added_tokens"] = {added_token(257, std::string(2000, 'x'))}; },
         "added_tokens[0].content: 2000 bytes, more than the 1024 an added token may have"},
        {"an added token twice",
         [](json& j) {
             j["added_tokens"] = {added_token(257, "<s>"), added_token(258, "<s>")};
         },
         "added_tokens[1]: \"<s>\" is listed twice"},
        {"an added id twice",
         [](json& j) {
             j["added_tokens"] = {added_token(257, "<s>"), added_token(257, "</s>")};
         },
         "added_tokens[1]: id 257 is listed twice"},
        {"a template's unknown special token",
         [&](json& j) {
             j["post_processor"] = template_processing;
             j["post_processor"]["special_tokens"] = json::object();
         },
         "post_processor.single[0]: special token \"<s>\" is not in special_tokens"},
        {"a template's sequence B",
         [&](json& j) {
             j["post_processor"] = template_processing;
             j["post_processor"]["single"][1]["Sequence"]["id"] = "B";
         },
         "post_processor.single[1]: the single template's sequence \"B\" is not one of A given once"},
        {"a template's id out of range",
         [&](json& j) {
             j["post_processor"] = template_processing;
             j["post_processor"]["special_tokens"]["<s>"]["ids"] = {300};
         },
         "post_processor.special_tokens[\"<s>\"].ids[0]: id 300 is out of range"},
    });
}

// A file that is not a JSON object, not valid JSON or nested too deep.
TEST_F(TokenizerJsonFile, FilesThatAreNotAJsonObjectAreOneLineErrors) {
    expect_one_line_errors({
        {"not an object", [](json& j) { j = json::array({1}); }, "expected a JSON object, got [1]"},
    });
    EXPECT_NE(load_error_text("{\"model\": ").find("not valid JSON"), std::string::npos);
    EXPECT_NE(load_error_text(std::string(100'000, '[')).find("JSON nested deeper than 64 levels"), std::string::npos);
}

// A file too large is refused before it is read.
TEST_F(TokenizerJsonFile, HugeFileIsRefusedUnread) {
    write_file(path(), "");
    fs::resize_file(path(), size_t{300} << 20);  // sparse: nothing is written
    try {
        Tokenizer::load_json(path());
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  path().string() + ": 314572800 bytes, more than the 64 MiB a tokenizer.json may have");
    }
}

// Normalizers that would make a text grow without bound (each Replace
// doubling it) stop with an Error instead of exhausting memory.
TEST_F(TokenizerJsonFile, NormalizersThatExplodeTheTextAreAnError) {
    json j = byte_level({}, json::array());
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
    for (int i = 0; i < 60; ++i) {
        j["normalizer"]["normalizers"].push_back(
            {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
    }
    auto expect_refused = [&] {
        try {
            load(j).encode("aaaa");
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_STREQ(e.what(), "the tokenizer's normalizers make this text over 16 times longer");
        }
    };
    expect_refused();
    for (json& step : j["normalizer"]["normalizers"]) step["pattern"] = {{"Regex", "a"}};  // T5's kind of Replace
    expect_refused();
}

// A Replace normalizer's pattern meets the same limits as a Split's.
TEST_F(TokenizerJsonFile, CatastrophicBacktrackingInAReplaceIsAnError) {
    json j = byte_level({}, json::array());
    j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"content", "x"}};
    EXPECT_EQ(load(j).encode("aa"), (std::vector<int32_t>{'x'}));
    try {
        load(j).encode(std::string(40, 'a') + "b");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("normalizer.pattern: the pattern took too many steps"), std::string::npos)
            << e.what();
    }
}

// A pattern that backtracks catastrophically meets PCRE2's match limit: an
// Error, at once, not a hang.
TEST_F(TokenizerJsonFile, CatastrophicBacktrackingIsAnError) {
    json j = byte_level({}, json::array());
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}};
    const Tokenizer t = load(j);
    EXPECT_EQ(t.encode("aab"), (std::vector<int32_t>{'a', 'a', 'b'}));
    const auto start = std::chrono::steady_clock::now();
    try {
        t.encode(std::string(40, 'a') + "b");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), path().string() +
                                             ": pre_tokenizer.pattern: the pattern took too many steps on this text "
                                             "(match limit exceeded)");
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
