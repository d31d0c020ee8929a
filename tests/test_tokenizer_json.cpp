// Tests of tokenizer.json on small hand-written files: what the real files
// (test_tokenizer_json_real) do not use (Metaspace, Digits, added-token
// options, byte fallback, unknown tokens, merges that make pairs ranked
// before them), and a one-line Error for each kind of bad file.
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_writer.h"
#include "tokenizer_texts.h"

namespace {

namespace fs = std::filesystem;
using headscope::Error;
using headscope::Tokenizer;
using nlohmann::json;

std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', true); }

void write_file(const fs::path& path, const std::string& contents) {
    std::ofstream(path, std::ios::binary) << contents;
}

// A code point below U+0800 as UTF-8 (all of GPT-2's byte alphabet is).
std::string utf8_of(char32_t cp) {
    if (cp < 0x80) return std::string(1, static_cast<char>(cp));
    return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

// A byte in GPT-2's byte alphabet.
std::string byte_char(int byte) { return utf8_of(headscope::byte_to_unicode()[byte]); }

// A byte-level BPE tokenizer.json: the 256 byte tokens (id = the byte),
// `tokens` from id 256 on, `merges` as given, GPT-2's pre-tokenizer.
json byte_level(const std::vector<std::string>& tokens, const json& merges) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
    for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = 256 + i;
    return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"added_tokens", json::array()}};
}

// A character-level BPE tokenizer.json (SentencePiece-style, as Llama 2's):
// `tokens` with ids in order, `merges` as given, no normalizer or pre-tokenizer.
json char_level(const std::vector<std::string>& tokens, const json& merges) {
    json vocab = json::object();
    for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
    return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}, {"added_tokens", json::array()}};
}

json added_token(int id, const std::string& content, json options = json::object()) {
    json token = {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                  {"rstrip", false}, {"normalized", false}, {"special", true}};
    token.update(options);
    return token;
}

class TokenizerJsonFile : public ::testing::Test {
protected:
    // The tokenizer `j` (or `text`) describes, through a file.
    Tokenizer load(const json& j) { return load_text(j.dump()); }
    Tokenizer load_text(const std::string& text) {
        write_file(path(), text);
        return Tokenizer::load_json(path());
    }
    // The one-line Error loading it gives.
    std::string load_error(const json& j) { return load_error_text(j.dump()); }
    std::string load_error_text(const std::string& text) {
        try {
            load_text(text);
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_EQ(message.rfind(path().string() + ": ", 0), 0u) << message;
            EXPECT_EQ(message.find('\n'), std::string::npos) << message;
            return message;
        }
        ADD_FAILURE() << "no error for " << text.substr(0, 200);
        return "";
    }
    fs::path path() const { return dir_.path / "tokenizer.json"; }

    headscope::test::TempDir dir_;
};

TEST_F(TokenizerJsonFile, ByteLevelMergesInBothFormsAndTokenBytes) {
    const Tokenizer t = load(byte_level({"ab", "abc", "Ġab"}, json::array({"a b", json::array({"ab", "c"}), "Ġ ab"})));
    EXPECT_EQ(t.vocab_size(), 259);
    EXPECT_EQ(t.encode("abc ab a"), (std::vector<int32_t>{257, 258, 32, 'a'}));
    EXPECT_EQ(t.token_bytes(258), " ab");
    EXPECT_EQ(t.token_bytes(10), "\n");
    EXPECT_THROW(t.token_bytes(259), Error);
    EXPECT_TRUE(t.encode("").empty());
    try {
        t.encode("ok\xC3(");
        ADD_FAILURE() << "no error for invalid UTF-8";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "invalid UTF-8 at byte 2");
    }
}

// Llama 3's ignore_merges: a piece that is a token is that token, whatever the merges would make.
TEST_F(TokenizerJsonFile, IgnoreMergesTakesAWholePieceThatIsAToken) {
    json j = byte_level({"ab", "abc"}, json::array({"a b"}));
    j["model"]["merges"] = json::array({"a b"});  // "abc" is never made by merging
    EXPECT_EQ(load(j).encode("abc"), (std::vector<int32_t>{256, 'c'}));
    j["model"]["ignore_merges"] = true;
    EXPECT_EQ(load(j).encode("abc"), (std::vector<int32_t>{257}));
}

// Hugging Face's BPE merges one (rank, position) at a time: a pair that a
// merge makes and that ranks before it merges at once ("aa a" before the
// next "a a"), where GPT-2's bpe() would first merge "a a" everywhere
// ("aaaa" as "aa" "aa"). Gemma 3's runs of ▁ are merged so.
TEST_F(TokenizerJsonFile, APairAMergeMakesRankedBeforeItMergesFirst) {
    const Tokenizer t = load(char_level({"a", "aa", "aaa"}, json::array({"aa a", "a a"})));
    using Ids = std::vector<int32_t>;
    EXPECT_EQ(t.encode("aaaa"), (Ids{2, 0}));
    EXPECT_EQ(t.encode("aaaaa"), (Ids{2, 1}));
    EXPECT_EQ(t.encode("aaaaaaa"), (Ids{2, 2, 0}));
}

TEST_F(TokenizerJsonFile, AddedTokensLongestFirstWithTheirOptions) {
    json j = byte_level({}, json::array());
    j["added_tokens"] = {added_token(256, "<x>"), added_token(257, "<x><y>"),
                         added_token(258, "[L]", {{"lstrip", true}}), added_token(259, "[R]", {{"rstrip", true}}),
                         added_token(260, "w", {{"single_word", true}})};
    const Tokenizer t = load(j);
    EXPECT_EQ(t.vocab_size(), 261);
    EXPECT_EQ(t.encode("<x><y><x>"), (std::vector<int32_t>{257, 256}));
    EXPECT_EQ(t.token_bytes(257), "<x><y>");
    // lstrip and rstrip take the whitespace beside them.
    EXPECT_EQ(t.encode("a  [L]  b"), (std::vector<int32_t>{'a', 258, 32, 32, 'b'}));
    EXPECT_EQ(t.encode("a  [R]  b"), (std::vector<int32_t>{'a', 32, 32, 259, 'b'}));
    // single_word: only where no word character touches it.
    EXPECT_EQ(t.encode("a w b"), (std::vector<int32_t>{'a', 32, 260, 32, 'b'}));
    EXPECT_EQ(t.encode("aw w."), (std::vector<int32_t>{'a', 'w', 32, 260, '.'}));
}

// A normalized added token is found in the normalized text, itself normalized
// (so, after a Prepend, with the prefix): Hugging Face's tokenizers does so.
// (The JavaScript reference finds every added token in the raw text; none of
// its three files has a normalized one.)
TEST_F(TokenizerJsonFile, NormalizedAddedTokensAreFoundInTheNormalizedText) {
    json j = char_level({"<unk>", "▁", "a", "b", "é", "e", "\u0301"}, json::array());
    j["model"]["unk_token"] = "<unk>";
    j["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers", {{{"type", "NFC"}}, {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
    j["added_tokens"] = {added_token(7, "é▁b", {{"normalized", true}}), added_token(8, "a b")};
    const Tokenizer t = load(j);
    // "a b" is found before normalizing; "e\u0301 b" only after.
    EXPECT_EQ(t.encode("a b e\u0301 b"), (std::vector<int32_t>{8, 1, 7}));
    // Its bytes as any token's: ▁ as the space it replaced (Gemma 3's "▁▁" tokens are added ones).
    EXPECT_EQ(t.token_bytes(7), "é b");
}

TEST_F(TokenizerJsonFile, MetaspacePrependSchemesAndSplit) {
    json j = char_level({"<unk>", "▁", "a", "b", "▁a", "▁b", "<s>"}, json::array({"▁ a", "▁ b"}));
    j["model"]["unk_token"] = "<unk>";
    j["added_tokens"] = {added_token(6, "<s>")};
    auto with = [&](const std::string& scheme, bool split) {
        json m = j;
        m["pre_tokenizer"] = {
            {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", split}};
        return load(m);
    };
    using Ids = std::vector<int32_t>;
    EXPECT_EQ(with("always", true).encode("a b"), (Ids{4, 5}));
    EXPECT_EQ(with("never", true).encode("a b"), (Ids{2, 5}));
    // "first": only the stretch that starts the text.
    EXPECT_EQ(with("first", true).encode("a<s>a"), (Ids{4, 6, 2}));
    EXPECT_EQ(with("always", true).encode("a<s>a"), (Ids{4, 6, 4}));
    // Not split, "▁a▁▁b" is one piece: ▁a ▁ ▁b.
    EXPECT_EQ(with("always", false).encode("a  b"), (Ids{4, 1, 5}));
    EXPECT_EQ(with("always", true).token_bytes(4), " a");
    // Older files: add_prefix_space false means never.
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}};
    EXPECT_EQ(load(j).encode("a b"), (Ids{2, 5}));
}

TEST_F(TokenizerJsonFile, DigitsAndSplitBehaviours) {
    using Ids = std::vector<int32_t>;
    json j = byte_level({"12", "123"}, json::array({"1 2", "12 3"}));
    j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", false}};
    EXPECT_EQ(load(j).encode("a123"), (Ids{'a', 257}));
    j["pre_tokenizer"]["individual_digits"] = true;
    EXPECT_EQ(load(j).encode("a123"), (Ids{'a', '1', '2', '3'}));

    // Splitting "x1y2" at each digit, by each behaviour, then merging "x1" and "1y" where whole.
    j = byte_level({"x1", "1y", "y2"}, json::array({"x 1", "1 y", "y 2"}));
    auto split = [&](const std::string& behavior) {
        json m = j;
        m["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"Regex", "\\d"}}}, {"behavior", behavior}, {"invert", false}};
        return load(m).encode("x1y2");
    };
    EXPECT_EQ(split("Isolated"), (Ids{'x', '1', 'y', '2'}));
    EXPECT_EQ(split("Removed"), (Ids{'x', 'y'}));
    EXPECT_EQ(split("MergedWithPrevious"), (Ids{256, 258}));
    EXPECT_EQ(split("MergedWithNext"), (Ids{'x', 257, '2'}));
    EXPECT_EQ(split("Contiguous"), (Ids{'x', '1', 'y', '2'}));
}

TEST_F(TokenizerJsonFile, ByteFallbackUnknownTokensAndFusing) {
    using Ids = std::vector<int32_t>;
    std::vector<std::string> tokens = {"<unk>", "a"};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.push_back(name);
    }
    json j = char_level(tokens, json::array());
    j["model"]["unk_token"] = "<unk>";
    j["model"]["byte_fallback"] = true;
    const Tokenizer fallback = load(j);
    // é is C3 A9.
    EXPECT_EQ(fallback.encode("aé"), (Ids{1, 2 + 0xC3, 2 + 0xA9}));
    EXPECT_EQ(fallback.token_bytes(2 + 0xC3), "\xC3");
    EXPECT_EQ(fallback.token_bytes(0), "<unk>");

    j["model"]["byte_fallback"] = false;
    EXPECT_EQ(load(j).encode("aéé"), (Ids{1, 0, 0}));
    j["model"]["fuse_unk"] = true;
    EXPECT_EQ(load(j).encode("aééaé"), (Ids{1, 0, 1, 0}));
    j["model"].erase("unk_token");
    try {
        load(j).encode("aé");
        ADD_FAILURE() << "no error for a character without a token";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "no token for U+00E9, and the tokenizer has no unknown token");
    }
}

TEST_F(TokenizerJsonFile, TemplateProcessingAddsSpecialTokensUnlessAskedNot) {
    using Ids = std::vector<int32_t>;
    json j = byte_level({}, json::array());
    j["added_tokens"] = {added_token(256, "<s>"), added_token(257, "</s>")};
    const json special_tokens = {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}},
                                 {"</s>", {{"id", "</s>"}, {"ids", {257}}, {"tokens", {"</s>"}}}}};
    j["post_processor"] = {
        {"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
          {{"type", "TemplateProcessing"},
           {"single",
            {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
             {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
           {"pair", json::array()},
           {"special_tokens", special_tokens}}}}};
    const Tokenizer t = load(j);
    EXPECT_EQ(t.encode("a"), (Ids{256, 'a', 257}));
    EXPECT_EQ(t.encode("a", false), (Ids{'a'}));
    EXPECT_EQ(t.encode(""), (Ids{256, 257}));
    // Added tokens in the text are found either way.
    EXPECT_EQ(t.encode("<s>a", false), (Ids{256, 'a'}));
    EXPECT_EQ(t.encode_texts({"a", "b"}, false), (std::vector<Ids>{{'a'}, {'b'}}));
}

TEST_F(TokenizerJsonFile, LoadDirectoryPrefersTokenizerJsonAndNamesWhatIsMissing) {
    const fs::path dir = dir_.path / "model";
    fs::create_directories(dir);
    auto error_of = [&] {
        try {
            Tokenizer::load_directory(dir);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error_of(),
              dir.string() + ": no tokenizer: tokenizer.json missing, and vocab.json and merges.txt missing");
    const fs::path gpt2 = fs::path(HEADSCOPE_GPT2_REFERENCE_DIR);
    fs::copy_file(gpt2 / "encoder.json", dir / "vocab.json");
    EXPECT_EQ(error_of(), dir.string() + ": no tokenizer: tokenizer.json missing, and merges.txt missing");
    write_file(dir / "source.spm", "not a model");  // Marian's: read as such, not taken for a missing merges.txt
    EXPECT_NE(error_of().find("source.spm: not a SentencePiece model"), std::string::npos) << error_of();
    fs::remove(dir / "source.spm");
    fs::copy_file(gpt2 / "vocab.bpe", dir / "merges.txt");
    EXPECT_EQ(Tokenizer::load_directory(dir).encode("Hello world"), (std::vector<int32_t>{15496, 995}));
    write_file(dir / "tokenizer.json", byte_level({}, json::array()).dump());
    EXPECT_EQ(Tokenizer::load_directory(dir).encode("Hi"), (std::vector<int32_t>{'H', 'i'}));
}

// GPT-2's own files as a tokenizer.json (ByteLevel with use_regex: GPT-2's
// pattern through PCRE2) encode as vocab.json and merges.txt do (GPT-2's
// pattern written by hand), except at U+0085 and U+180E, which PCRE2 counts
// as \s and GPT-2's Python regex does not.
TEST_F(TokenizerJsonFile, Gpt2AsTokenizerJsonMatchesVocabAndMerges) {
    const fs::path gpt2 = fs::path(HEADSCOPE_GPT2_REFERENCE_DIR);
    const Tokenizer files = Tokenizer::load(gpt2 / "encoder.json", gpt2 / "vocab.bpe");
    json merges = json::array();
    const std::string bpe = headscope::read_file(gpt2 / "vocab.bpe");
    for (size_t start = bpe.find('\n') + 1; start < bpe.size();) {
        const size_t end = std::min(bpe.find('\n', start), bpe.size());
        if (end > start) merges.push_back(bpe.substr(start, end - start));
        start = end + 1;
    }
    json j = byte_level({}, merges);
    j["model"]["vocab"] = json::parse(headscope::read_file(gpt2 / "encoder.json"));
    const Tokenizer from_json = load(j);
    EXPECT_EQ(from_json.vocab_size(), files.vocab_size());
    for (const std::string& text : headscope::test::texts::generated_strings()) {
        EXPECT_EQ(from_json.encode(text), files.encode(text)) << quoted(text);
    }
}

// Each bad file is one line naming the file, the field and the problem.
TEST_F(TokenizerJsonFile, BadFilesAreOneLineErrorsNamingTheField) {
    const json good = byte_level({"ab"}, json::array({"a b"}));
    const json template_processing = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
    struct Case {
        std::string what;
        std::function<void(json&)> change;
        std::string message;  // after "<file>: "
    };
    const std::vector<Case> cases = {
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
        {"no model", [](json& j) { j.erase("model"); }, "model: missing"},
        {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab: missing"},
        {"no merges", [](json& j) { j["model"].erase("merges"); }, "model.merges: missing"},
        {"no type", [](json& j) { j["pre_tokenizer"].erase("type"); }, "pre_tokenizer.type: missing"},
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
        {"not an object", [](json& j) { j = json::array({1}); }, "expected a JSON object, got [1]"},
    };
    for (const Case& c : cases) {
        json j = good;
        c.change(j);
        EXPECT_NE(load_error(j).find(c.message), std::string::npos) << c.what << ": expected \"" << c.message << "\"";
    }
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

// Strip, as Hugging Face's: the Unicode whitespace (here U+3000, a space, a
// tab and U+00A0) off each end it names.
TEST_F(TokenizerJsonFile, StripTakesTheWhitespaceOffTheEndsItNames) {
    json j = byte_level({}, json::array());
    const std::string text = "\xE3\x80\x80 ab\t\xC2\xA0";
    auto bytes_of = [](const std::string& kept) {
        std::vector<int32_t> ids;
        for (char c : kept) ids.push_back(static_cast<unsigned char>(c));
        return ids;
    };
    for (const auto& [left, right, kept] :
         {std::tuple{true, true, std::string("ab")}, std::tuple{true, false, std::string("ab\t\xC2\xA0")},
          std::tuple{false, true, std::string("\xE3\x80\x80 ab")}, std::tuple{false, false, text}}) {
        j["normalizer"] = {{"type", "Strip"}, {"strip_left", left}, {"strip_right", right}};
        EXPECT_EQ(load(j).encode(text), bytes_of(kept)) << left << right;
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
