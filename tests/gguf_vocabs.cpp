// Test support: GGUF vocabularies and the compared texts; see gguf_vocabs.h.
#include "gguf_vocabs.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>

#include "bert_tokenizer.h"
#include "llama_cpp.h"
#include "model_writer.h"
#include "process.h"

namespace headscope::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json read_json(const fs::path& path) { return json::parse(std::ifstream(path)); }

// convert_hf_to_gguf.py's test of an added token that is not marked special.
bool looks_special(const std::string& token) {
    auto between = [&](const char* open, const char* close) {
        return token.starts_with(open) && token.ends_with(close);
    };
    return token == "<pad>" || token == "<mask>" || between("<|", "|>") || between("<unused", ">");
}

void add_token(GgufVocab& v, const std::string& token, int32_t type, float score = 0) {
    v.tokens.push_back(token);
    v.types.push_back(type);
    if (!v.scores.empty()) v.scores.push_back(score);
}

}  // namespace

GgufVocab byte_level_gguf_vocab(const json& file) {
    GgufVocab v;
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

GgufVocab sentencepiece_gguf_vocab(const json& file) {
    GgufVocab v;
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

GgufVocab gpt2_gguf_vocab() {
    const fs::path dir(HEADSCOPE_GPT2_REFERENCE_DIR);
    const json encoder = read_json(dir / "encoder.json");
    GgufVocab v;
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

GgufVocab bert_gguf_vocab() {
    const json& vocab = wordpiece_vocab();
    GgufVocab v;
    // bert-base-uncased's first 104: [PAD], [unused0] to [unused98], [UNK] [CLS] [SEP] [MASK].
    add_token(v, "[PAD]", 3);
    for (int i = 0; i < 99; ++i) add_token(v, "[unused" + std::to_string(i) + "]", 1);
    for (const char* special : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) add_token(v, special, 3);
    std::vector<std::string> pieces(vocab.size());
    for (const auto& [token, id] : vocab.items()) pieces.at(id.get<size_t>()) = token;
    const std::string meta = "\xE2\x96\x81";  // ▁
    for (const std::string& piece : pieces) {
        if (piece.starts_with("[")) continue;  // the special tokens, placed above
        add_token(v, piece.starts_with("##") ? piece.substr(2) : meta + piece, 1);
    }
    // Accents and case (for the files that keep them), Hangul syllables as
    // llama.cpp strips their accents (to the leading consonant: ᄋ ᄂ ᄒ ᄉ ᄋ
    // for 안녕하세요), CJK, fullwidth punctuation and an emoji.
    const auto add_new = [&](const std::string& token) {
        if (std::find(v.tokens.begin(), v.tokens.end(), token) == v.tokens.end()) add_token(v, token, 1);
    };
    for (const char* word : {"Hello", "HEADSCOPE", "café", "naïve", "Straße", "İstanbul", "Ærøskøbing", "Привет", "мир",
                             "\xE1\x84\x8B", "你", "好", "世", "界", "，", "😀", "cafe"})
        add_new(meta + word);
    for (const char* piece : {"\xE1\x84\x82", "\xE1\x84\x92", "\xE1\x84\x89", "\xE1\x84\x8B", "\xCC\x81"})
        add_new(piece);
    add_token(v, "<tool_call>", 4);
    return v;
}

namespace {

// A protobuf message's fields (field number, wire type, and the varint or the bytes).
struct ProtoField {
    uint64_t number, wire, varint;
    std::string_view bytes;
};

std::vector<ProtoField> proto_fields(std::string_view in) {
    auto varint = [&] {
        uint64_t value = 0;
        for (int shift = 0;; shift += 7) {
            if (in.empty() || shift > 63) throw std::runtime_error("a SentencePiece model's varint is cut short");
            const auto byte = static_cast<uint8_t>(in.front());
            in.remove_prefix(1);
            value |= uint64_t{byte & 0x7Fu} << shift;
            if (!(byte & 0x80)) return value;
        }
    };
    std::vector<ProtoField> fields;
    while (!in.empty()) {
        const uint64_t key = varint();
        ProtoField f{key >> 3, key & 7, 0, {}};
        const size_t size = f.wire == 0 ? 0 : f.wire == 1 ? 8 : f.wire == 5 ? 4 : varint();
        if (f.wire == 0) f.varint = varint();
        if (size > in.size()) throw std::runtime_error("a SentencePiece model's field is cut short");
        f.bytes = in.substr(0, size);
        in.remove_prefix(size);
        fields.push_back(f);
    }
    return fields;
}

// ModelProto: pieces (field 1: piece 1, score 2, type 3) and normalizer_spec
// (field 3: precompiled_charsmap 2, add_dummy_prefix 3 and
// remove_extra_whitespaces 4, both true unless written).
SpmGgufVocab read_spm_model(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SpmGgufVocab out{{}, true, true};
    GgufVocab& v = out.vocab;
    for (const ProtoField& f : proto_fields(bytes)) {
        if (f.number == 1) {
            std::string piece;
            float score = 0;
            int32_t type = 1;
            for (const ProtoField& p : proto_fields(f.bytes)) {
                if (p.number == 1) piece = p.bytes;
                if (p.number == 2) std::memcpy(&score, p.bytes.data(), sizeof score);
                if (p.number == 3) type = static_cast<int32_t>(p.varint);
            }
            v.tokens.push_back(piece);
            v.types.push_back(type);
            v.scores.push_back(score);
        } else if (f.number == 3) {
            for (const ProtoField& n : proto_fields(f.bytes)) {
                if (n.number == 2) v.charsmap = n.bytes;
                if (n.number == 3) out.add_dummy_prefix = n.varint != 0;
                if (n.number == 4) out.remove_extra_whitespaces = n.varint != 0;
            }
        }
    }
    return out;
}

SpmGgufVocab trained_unigram(const std::string& rule) {
    const TempDir dir;
    const fs::path docs = fs::path(HEADSCOPE_TESTS_DIR).parent_path() / "docs";
    const fs::path prefix = dir.path / rule;
    const ProcessRun run = run_program(
        {HEADSCOPE_SPM_TRAIN, "--input=" + (docs / "cli.md").string() + "," + (docs / "architecture.md").string(),
         "--model_prefix=" + prefix.string(), "--vocab_size=400", "--model_type=unigram", "--character_coverage=1.0",
         "--normalization_rule_name=" + rule, "--num_threads=1", "--minloglevel=2"},
        dir.path);
    if (run.status != 0) throw std::runtime_error("spm_train failed: " + run.err);
    SpmGgufVocab out = read_spm_model(prefix.string() + ".model");
    add_token(out.vocab, "<extra_id_0>", 4, -1000);
    add_token(out.vocab, "<think>", 4, -1000);
    add_token(out.vocab, "[PAD" + std::to_string(out.vocab.tokens.size()) + "]", 5, -10000);
    // An unused piece of two characters the model lacks, which llama.cpp
    // matches yet leaves out of the unknown character's score.
    add_token(out.vocab, "\xF0\x9F\x98\x80\xF0\x9F\x98\x80", 5, -10000);
    return out;
}

}  // namespace

const SpmGgufVocab& unigram_gguf_vocab(const std::string& rule) {
    static std::map<std::string, SpmGgufVocab> trained;
    if (!trained.contains(rule)) trained.emplace(rule, trained_unigram(rule));
    return trained.at(rule);
}

GgufMetaValue gguf_byte_array(const std::string& bytes) {
    std::vector<GgufMetaValue> elements;
    for (char c : bytes) elements.push_back(gguf_uint8(static_cast<uint8_t>(c)));
    return gguf_array(0, elements);
}

GgufMetadata gguf_tokenizer_metadata(const GgufVocab& v, const std::string& model, const std::string& pre) {
    GgufMetadata m = {{"tokenizer.ggml.model", gguf_string(model)}, {"tokenizer.ggml.tokens", gguf_strings(v.tokens)}};
    if (!pre.empty()) m.emplace_back("tokenizer.ggml.pre", gguf_string(pre));
    std::vector<GgufMetaValue> types, scores;
    for (int32_t type : v.types) types.push_back(gguf_int32(type));
    for (float score : v.scores) scores.push_back(gguf_float32(score));
    m.emplace_back("tokenizer.ggml.token_type", gguf_array(5, types));
    if (!v.scores.empty()) m.emplace_back("tokenizer.ggml.scores", gguf_array(6, scores));
    if (!v.merges.empty()) m.emplace_back("tokenizer.ggml.merges", gguf_strings(v.merges));
    if (!v.charsmap.empty()) m.emplace_back("tokenizer.ggml.precompiled_charsmap", gguf_byte_array(v.charsmap));
    return m;
}

int32_t token_id(const GgufVocab& v, const std::string& token) {
    const auto it = std::find(v.tokens.begin(), v.tokens.end(), token);
    if (it == v.tokens.end()) throw std::out_of_range("no token " + token);
    return static_cast<int32_t>(it - v.tokens.begin());
}

GgufMetadata bert_gguf_tokenizer() {
    const GgufVocab v = bert_gguf_vocab();
    const auto id = [&](const char* token) { return gguf_uint32(static_cast<uint32_t>(token_id(v, token))); };
    return with(gguf_tokenizer_metadata(v, "bert", "default"), {{"tokenizer.ggml.bos_token_id", id("[CLS]")},
                                                                {"tokenizer.ggml.eos_token_id", id("[SEP]")},
                                                                {"tokenizer.ggml.unknown_token_id", id("[UNK]")},
                                                                {"tokenizer.ggml.seperator_token_id", id("[SEP]")},
                                                                {"tokenizer.ggml.padding_token_id", id("[PAD]")},
                                                                {"tokenizer.ggml.cls_token_id", id("[CLS]")},
                                                                {"tokenizer.ggml.mask_token_id", id("[MASK]")},
                                                                {"tokenizer.ggml.add_bos_token", gguf_bool(true)},
                                                                {"tokenizer.ggml.add_eos_token", gguf_bool(true)}});
}

GgufMetadata t5_gguf_tokenizer(const SpmGgufVocab& spm) {
    const auto id = [&](const char* token) { return gguf_uint32(static_cast<uint32_t>(token_id(spm.vocab, token))); };
    return with(gguf_tokenizer_metadata(spm.vocab, "t5", "default"),
                {{"tokenizer.ggml.add_space_prefix", gguf_bool(spm.add_dummy_prefix)},
                 {"tokenizer.ggml.remove_extra_whitespaces", gguf_bool(spm.remove_extra_whitespaces)},
                 {"tokenizer.ggml.unknown_token_id", id("<unk>")},
                 {"tokenizer.ggml.eos_token_id", id("</s>")},
                 {"tokenizer.ggml.add_bos_token", gguf_bool(false)},
                 {"tokenizer.ggml.add_eos_token", gguf_bool(true)}});
}

GgufMetadata gguf_vocab_only(const GgufMetadata& tokenizer) {
    return with({{"general.architecture", gguf_string("llama")},
                 {"llama.context_length", gguf_uint32(4096)},
                 {"llama.embedding_length", gguf_uint32(64)},
                 {"llama.block_count", gguf_uint32(1)},
                 {"llama.feed_forward_length", gguf_uint32(128)},
                 {"llama.attention.head_count", gguf_uint32(4)},
                 {"llama.attention.layer_norm_rms_epsilon", gguf_float32(1e-5F)}},
                tokenizer);
}

GgufMetadata gguf_vocab_metadata(const GgufVocab& v, const std::string& model, const std::string& pre) {
    return gguf_vocab_only(gguf_tokenizer_metadata(v, model, pre));
}

GgufMetadata with(GgufMetadata m, const GgufMetadata& more) {
    m.insert(m.end(), more.begin(), more.end());
    return m;
}

GgufMetadata replaced(GgufMetadata m, const std::string& key, const GgufMetaValue& value) {
    for (auto& [k, v] : m)
        if (k == key) v = value;
    return m;
}

GgufMetadata without(GgufMetadata m, const std::string& key) {
    std::erase_if(m, [&](const auto& entry) { return entry.first == key; });
    return m;
}

// clang-format off
namespace {
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
}  // namespace
// clang-format on

std::vector<std::string> gguf_tokenizer_texts() {
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

std::optional<std::vector<std::vector<int32_t>>> llama_cpp_token_ids(const fs::path& model,
                                                                     const std::vector<std::string>& texts) {
    const std::optional<json> ids = ask_llama_cpp({{"tokenize", model.string()}, {"texts", texts}});
    if (!ids) return std::nullopt;
    return ids->get<std::vector<std::vector<int32_t>>>();
}

}  // namespace headscope::test
