// SentencePiece models trained here by spm_train on the project's docs
// (sentencepiece_models.h), with SentencePiece's own spm_encode as the
// reference: the hand-written Unigram of a tokenizer.json port equals it in
// both of transformers' converter layouts, and Marian's tokenizer
// (source.spm, target.spm, vocab.json) gives MarianTokenizer's ids on each
// side. Bad Marian files are refused in one line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"
#include "model_writer.h"
#include "sentencepiece_models.h"

namespace {

namespace fs = std::filesystem;
using headscope::Tokenizer;
using namespace headscope::test;

// Hand-written cases (runs of spaces and tabs, leading and trailing spaces,
// NFKC's forms, unknown characters, digits) and every line of two docs the
// models were not trained on.
std::vector<std::string> texts() {
    std::vector<std::string> out = {
        "Hello world",
        "  The   attention\theads,  again.  ",
        "\xEF\xAC\x81ne \xE2\x91\xA0 \xEF\xBC\xA6\xEF\xBC\xB5\xEF\xBC\xAC\xEF\xBC\xAC width",  // ﬁne ① ＦＵＬＬ
        "caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80\xF0\x9F\x98\x80 ok",  // café
                                                                                                              // naïve
                                                                                                              // 日本語
                                                                                                              // 😀😀
        "x = 12345 * 3.14; // the layer's 1/sqrt(d_head)",
    };
    const fs::path docs = fs::path(HEADSCOPE_TESTS_DIR).parent_path() / "docs";
    for (const char* doc : {"testing.md", "benchmarks.md"}) {
        std::ifstream in(docs / doc);
        for (std::string line; std::getline(in, line);) {
            // The control pieces' text is an added token to the port, plain text to spm_encode.
            bool control = false;
            for (const char* token : {"<s>", "</s>", "<unk>", "<pad>"})
                control |= line.find(token) != std::string::npos;
            if (!line.empty() && !control) out.push_back(line);
        }
    }
    return out;
}

class PortedUnigram : public ::testing::TestWithParam<SpmLayout> {};

TEST_P(PortedUnigram, EqualsSpmEncodeOnBothModels) {
    const std::vector<std::string> lines = texts();
    ASSERT_GT(lines.size(), 100u);
    TempDir dir;
    for (Side side : {Side::source, Side::target}) {
        const nlohmann::json port = unigram_json_of(side, GetParam());
        std::ofstream(dir.path / "tokenizer.json") << port.dump();
        const Tokenizer tokenizer = Tokenizer::load_json(dir.path / "tokenizer.json");
        nlohmann::json id_of = nlohmann::json::object();
        for (size_t id = 0; id < port["model"]["vocab"].size(); ++id) id_of[port["model"]["vocab"][id][0]] = id;
        const std::vector<std::vector<std::string>> pieces = reference_pieces(side, lines);
        int unknown = 0;
        for (size_t i = 0; i < lines.size(); ++i) {
            std::vector<int32_t> expected;
            for (const std::string& piece : pieces[i]) {
                unknown += !id_of.contains(piece);
                expected.push_back(id_of.contains(piece) ? id_of[piece].get<int32_t>() : 0);  // <unk>
            }
            EXPECT_EQ(tokenizer.encode(lines[i], false), expected) << "line " << i << ": \"" << lines[i] << "\"";
        }
        EXPECT_GT(unknown, 0) << "no text had an unknown character";
    }
}

INSTANTIATE_TEST_SUITE_P(ConverterLayouts, PortedUnigram, ::testing::Values(SpmLayout::first, SpmLayout::current),
                         [](const auto& info) { return info.param == SpmLayout::first ? "first" : "current"; });

struct MarianFiles : ::testing::Test {
    MarianFiles() { write_marian_tokenizer(dir.path); }
    TempDir dir;
};

TEST_F(MarianFiles, EachSideAsMarianTokenizer) {
    const Tokenizer tokenizer = Tokenizer::load_directory(dir.path);
    EXPECT_EQ(tokenizer.vocab_size(), static_cast<int32_t>(marian_vocab().size()));
    std::vector<std::string> cases = texts();
    cases.resize(60);
    for (const char* text : {">>fr<< Hello world", ">>xx<<Hello", ">>de<<", "Hi >>fr<< there", ">>fr<< a << b"})
        cases.push_back(text);
    int sides_differ = 0;
    for (const std::string& text : cases) {
        const std::vector<int32_t> source = tokenizer.encode(text), target = tokenizer.encode_target(text);
        EXPECT_EQ(source, marian_reference_ids(Side::source, text)) << text;
        EXPECT_EQ(target, marian_reference_ids(Side::target, text)) << text;
        sides_differ += source != target;
    }
    EXPECT_GT(sides_differ, 10) << "the two models encode too alike for the test to tell the sides apart";
    EXPECT_EQ(tokenizer.encode(">>fr<< Hello").front(), marian_vocab()[">>fr<<"].get<int32_t>());
    EXPECT_EQ(tokenizer.encode(">>xx<< Hello").front(), marian_unk_id);
}

TEST_F(MarianFiles, SpecialTokensSplitTheTextAndTokensShowTheirSpaces) {
    const Tokenizer tokenizer = Tokenizer::load_directory(dir.path);
    // MarianTokenizer: "Hello ", </s>, "<pad>" and " world" each on their own, then </s>.
    const std::vector<int32_t> ids = tokenizer.encode("Hello </s><pad> world");
    std::vector<int32_t> expected = marian_reference_ids(Side::source, "Hello ");
    expected.push_back(marian_pad_id);
    const std::vector<int32_t> world = marian_reference_ids(Side::source, " world");
    expected.insert(expected.end(), world.begin(), world.end());
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(tokenizer.encode("Hello", false).size() + 1, tokenizer.encode("Hello").size());

    std::string joined;
    for (int32_t id : tokenizer.encode("the attention heads", false)) joined += tokenizer.token_bytes(id);
    EXPECT_EQ(joined, " the attention heads");
    EXPECT_EQ(tokenizer.token_bytes(marian_eos_id), "</s>");
}

TEST_F(MarianFiles, BadFilesAreRefusedInOneLine) {
    auto error_of = [&] {
        try {
            Tokenizer::load_directory(dir.path);
        } catch (const headscope::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    auto expect_error = [&](const std::string& names) {
        const std::string error = error_of();
        EXPECT_NE(error.find(names), std::string::npos) << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
        write_marian_tokenizer(dir.path);
    };
    fs::remove(dir.path / "target.spm");
    expect_error("target.spm: missing");
    std::ofstream(dir.path / "source.spm") << "sentencepiece";
    expect_error("source.spm: not a SentencePiece model");
    const std::string model = headscope::read_file(dir.path / "target.spm");
    std::ofstream(dir.path / "target.spm") << model.substr(0, model.size() / 2);
    expect_error("target.spm: not a SentencePiece model");
    fs::remove(dir.path / "vocab.json");
    expect_error("vocab.json");
    std::ofstream(dir.path / "vocab.json") << R"({"</s>": 0, "<pad>": 1})";
    expect_error("vocab.json: Marian's vocabulary needs <unk> and </s>");
    std::ofstream(dir.path / "vocab.json") << R"({"</s>": 0, "<unk>": 5})";
    expect_error("vocab.json: token ids must be 0..1, each once; found 5");
    // Printed as the file writes them, past int64 and below zero alike.
    std::ofstream(dir.path / "vocab.json") << R"({"</s>": 0, "<unk>": 9223372036854775808})";
    expect_error("vocab.json: token ids must be 0..1, each once; found 9223372036854775808");
    std::ofstream(dir.path / "vocab.json") << R"({"</s>": 0, "<unk>": -1})";
    expect_error("vocab.json: token ids must be 0..1, each once; found -1");
    std::ofstream(dir.path / "tokenizer_config.json") << R"({"separate_vocabs": true})";
    expect_error("tokenizer_config.json: separate_vocabs");
    std::ofstream(dir.path / "tokenizer_config.json") << R"({"separate_vocabs": "no"})";  // true to Python
    expect_error("tokenizer_config.json: separate_vocabs \"no\"");
    std::ofstream(dir.path / "tokenizer_config.json") << R"({"separate_vocabs": [)";
    expect_error("tokenizer_config.json: ");
    std::ofstream(dir.path / "tokenizer_config.json") << R"({"separate_vocabs": false, "source_lang": "en"})";
    EXPECT_EQ(error_of(), "no error");
}

// A SentencePiece model with a normalizer_spec appended whose
// precompiled_charsmap is `charsmap`: protobuf merges it into the model's own.
std::string with_charsmap(const std::string& model, const std::string& charsmap) {
    return model + protobuf_bytes_field(3, protobuf_bytes_field(2, charsmap));  // normalizer_spec's field 2
}

// A charsmap in darts-clone's layout, 256 units: the root's children at
// `root_offset` ^ byte; at 1 ^ 'a', the unit of 'a', whose leaf (at 97)
// points at `replacement_at` in `replacements`.
std::string charsmap(uint32_t root_offset, uint32_t replacement_at, const std::string& replacements) {
    std::vector<uint32_t> units(256, 0);
    units[0] = root_offset << 10;
    units[1 ^ 'a'] = 'a' | (1u << 8) | (1u << 10);  // its label, a leaf, and the leaf at (1 ^ 'a') ^ 1
    units[(1 ^ 'a') ^ 1] = replacement_at | (1u << 31);
    const uint32_t trie_bytes = 4 * units.size();
    std::string blob(reinterpret_cast<const char*>(&trie_bytes), 4);
    blob.append(reinterpret_cast<const char*>(units.data()), trie_bytes);
    return blob + replacements;
}

// libsentencepiece follows a model's charsmap without bounds checks: a trie
// that leads outside itself, or to a replacement past the blob's end, is
// refused before the library sees it; a well-formed one is applied ('a' as 'b').
TEST_F(MarianFiles, AModelsNormalizationRulesAreCheckedBeforeUse) {
    const std::string model = headscope::read_file(dir.path / "source.spm");
    const std::string words = "a cat", replaced = "b cbt";
    const std::vector<int32_t> own = Tokenizer::load_directory(dir.path).encode(words);
    std::ofstream(dir.path / "source.spm") << with_charsmap(model, charsmap(1, 0, std::string("b\0", 2)));
    const Tokenizer a_as_b = Tokenizer::load_directory(dir.path);
    EXPECT_EQ(a_as_b.encode(words), a_as_b.encode(replaced));
    EXPECT_NE(a_as_b.encode(words), own);
    for (const std::string& bad :
         {charsmap(4096, 0, std::string("b\0", 2)), charsmap(1, 5000, std::string("b\0", 2)), charsmap(1, 0, "b")}) {
        std::ofstream(dir.path / "source.spm") << with_charsmap(model, bad);
        try {
            Tokenizer::load_directory(dir.path);
            ADD_FAILURE() << "a malformed charsmap was loaded";
        } catch (const headscope::Error& e) {
            EXPECT_NE(std::string(e.what()).find("source.spm: not a SentencePiece model (its normalization rules, "
                                                 "precompiled_charsmap, are malformed)"),
                      std::string::npos)
                << e.what();
        }
    }
    std::ofstream(dir.path / "source.spm") << model + "\x1A\xFF";
    try {
        Tokenizer::load_directory(dir.path);
        ADD_FAILURE() << "a broken protobuf was loaded";
    } catch (const headscope::Error& e) {
        EXPECT_NE(std::string(e.what()).find("its protobuf encoding is broken"), std::string::npos) << e.what();
    }
}

// What libsentencepiece cannot take is kept from it: a piece of 130,000
// bytes (its trie builder recursed once a byte, past the thread's stack) is
// refused in one line; self-test samples, which it runs while loading (a
// million characters hung it, and a failing one made it print its own
// lines), are dropped, and the model loads as it is, silently.
TEST_F(MarianFiles, WhatTheLibraryCannotTakeIsKeptFromIt) {
    const std::string model = headscope::read_file(dir.path / "target.spm");
    std::ofstream(dir.path / "target.spm")
        << model + protobuf_bytes_field(1, protobuf_bytes_field(1, std::string(130000, 'a')));
    try {
        Tokenizer::load_directory(dir.path);
        ADD_FAILURE() << "a piece of 130,000 bytes was loaded";
    } catch (const headscope::Error& e) {
        EXPECT_NE(std::string(e.what()).find("target.spm: not a SentencePiece model (a piece of 130000 bytes, over "
                                             "the 1024 Headscope reads)"),
                  std::string::npos)
            << e.what();
    }
    const std::string failing_sample =
        protobuf_bytes_field(1, protobuf_bytes_field(1, "a cat") + protobuf_bytes_field(2, "not its pieces"));
    const std::string long_sample =
        protobuf_bytes_field(1, protobuf_bytes_field(1, std::string(1 << 20, 'a')) + protobuf_bytes_field(2, "x"));
    std::ofstream(dir.path / "target.spm")
        << model + protobuf_bytes_field(4, failing_sample + long_sample);  // self_test_data
    ::testing::internal::CaptureStderr();
    const Tokenizer tokenizer = Tokenizer::load_directory(dir.path);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(tokenizer.encode_target("a cat"), marian_reference_ids(Side::target, "a cat"));
}

}  // namespace
