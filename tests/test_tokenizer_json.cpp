// Tests of tokenizer.json on small hand-written files: what the real files
// (test_tokenizer_json_real) do not use (Metaspace, Digits, added-token
// options, byte fallback, unknown tokens, merges that make pairs ranked
// before them). A one-line Error for each kind of bad file is
// test_tokenizer_json_bad.cpp's, of this program too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "tokenizer_json_files.h"
#include "tokenizer_texts.h"

namespace {

namespace fs = std::filesystem;
using headscope::Error;
using headscope::Tokenizer;
using nlohmann::json;
using namespace headscope::test::tokenizer_json;

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

}  // namespace
