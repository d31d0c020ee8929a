// Tokenizer::load_gguf: a GGUF file's tokenizer.ggml.* metadata (as llama.cpp's
// src/llama-vocab.cpp reads it) written out as the tokenizer.json it stands
// for, which the tokenizer.json loader then reads: "gpt2" as a byte-level BPE
// behind llama.cpp's regex splits for its pre-tokenizer, "llama" as
// SentencePiece's BPE with merges taken from the tokens' scores.
#include "headscope/base/error.h"
#include "headscope/io/gguf.h"
#include "headscope/tokenize/tokenizer.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace headscope {

namespace {

using json = nlohmann::json;

// tokenizer.ggml.token_type's values (gguf-py's TokenType).
enum TokenType : int { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// GPT-2's split, as llama.cpp writes it (it splits off trailing whitespace the same without a last \s+).
constexpr const char* gpt2_regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// A tokenizer.ggml.pre name and what llama.cpp makes of it: its regexes, each
// splitting the pieces of the one before (matches and the text between them
// each a piece), whether a piece that is a token skips the merges, and
// whether a bos token is added when tokenizer.ggml.add_bos_token is absent.
struct PreTokenizer {
    const char* name;
    std::vector<const char*> regexes;
    bool ignore_merges = false;
    bool add_bos = false;
};

const std::vector<PreTokenizer>& pre_tokenizers() {
    static const std::vector<PreTokenizer> table = {
        {"default", {R"([\p{P}\$\+<=>\^~\|]+)", gpt2_regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
        {"llama-bpe",
         {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
         true},
        {"qwen2",
         {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
        {"gpt-2", {gpt2_regex}},
        {"olmo", {gpt2_regex}},
        {"smollm", {R"(\p{N})", gpt2_regex}},
        // llama.cpp's form of Tekken's \p{Lu}...\p{Ll} classes: a letter not a-z, a letter not A-Z.
        {"tekken",
         {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
         true,
         true},
    };
    return table;
}

// Texts llama.cpp takes for the end-of-turn token when tokenizer.ggml.eot_token_id is absent, first found first.
constexpr const char* eot_texts[] = {"<|eot_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>",     "<|endoftext|>",
                                     "<|end_of_text|>", "<EOT>",      "_<EOT>",  "<end_of_utterance>"};

class GgufVocabReader {
public:
    explicit GgufVocabReader(const GgufFile& file) : file_(file) {}

    // The tokenizer.json the metadata stands for, and the special ids it names.
    json tokenizer_json() {
        const std::string model = required_string("tokenizer.ggml.model");
        if (model != "gpt2" && model != "llama") {
            if (model == "bert" || model == "t5")
                fail("tokenizer.ggml.model", "\"" + model + "\": this tokenizer model is not read yet");
            fail("tokenizer.ggml.model", "\"" + model + "\" is not supported (supported: gpt2, llama)");
        }
        read_tokens();
        const bool spm = model == "llama";
        const PreTokenizer* pre = spm ? nullptr : &pre_tokenizer();
        json root = spm ? sentencepiece_json() : byte_level_json(*pre);
        root["added_tokens"] = added_tokens();
        // llama.cpp's defaults: SentencePiece's <unk> <s> </s> as 0 1 2, GPT-2's bos and eos 11.
        ids_.bos = special_id("tokenizer.ggml.bos_token_id", spm ? 1 : 11);
        ids_.eos = special_id("tokenizer.ggml.eos_token_id", spm ? 2 : 11);
        ids_.unk = special_id("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
        ids_.pad = special_id("tokenizer.ggml.padding_token_id", -1);
        ids_.eot = special_id("tokenizer.ggml.eot_token_id", eot_by_text());
        const bool add_bos = file_.boolean("tokenizer.ggml.add_bos_token").value_or(spm || pre->add_bos);
        const bool add_eos = file_.boolean("tokenizer.ggml.add_eos_token").value_or(false);
        root["post_processor"] = post_processor(add_bos ? added_id("tokenizer.ggml.bos_token_id", ids_.bos) : -1,
                                                add_eos ? added_id("tokenizer.ggml.eos_token_id", ids_.eos) : -1);
        return root;
    }
    const Tokenizer::SpecialIds& special_ids() const { return ids_; }

private:
    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw Error(file_.file() + ": key '" + key + "' " + what);
    }

    std::string required_string(const char* key) const {
        const std::optional<std::string_view> value = file_.string(key);
        if (!value) fail(key, "is missing: the file has no tokenizer");
        return std::string(*value);
    }

    std::optional<GgufArray> array_of_tokens_size(const char* key) const {
        std::optional<GgufArray> array = file_.array(key);
        if (array && array->size() != tokens_.size()) {
            fail(key, "has " + std::to_string(array->size()) + " elements, but tokenizer.ggml.tokens has " +
                          std::to_string(tokens_.size()));
        }
        return array;
    }

    // The tokens, their types (normal when absent) and scores (0 when absent), checked.
    void read_tokens() {
        const std::optional<GgufArray> tokens = file_.array("tokenizer.ggml.tokens");
        if (!tokens || tokens->size() == 0) fail("tokenizer.ggml.tokens", "is missing or empty");
        if (tokens->size() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
            fail("tokenizer.ggml.tokens", "has more tokens than ids can number");
        tokens_.reserve(tokens->size());
        std::unordered_map<std::string, size_t> seen;
        for (uint64_t i = 0; i < tokens->size(); ++i) {
            std::string token(tokens->string(i));
            // llama.cpp's name for an empty token, which no text spells.
            if (token.empty()) token = "[EMPTY_" + std::to_string(i) + "]";
            if (const auto [it, added] = seen.emplace(token, i); !added) {
                fail("tokenizer.ggml.tokens", "lists " + json(token).dump() + " twice (ids " +
                                                  std::to_string(it->second) + " and " + std::to_string(i) + ")");
            }
            tokens_.push_back(std::move(token));
        }
        types_.assign(tokens_.size(), normal);
        if (const std::optional<GgufArray> types = array_of_tokens_size("tokenizer.ggml.token_type")) {
            for (uint64_t i = 0; i < types->size(); ++i) {
                const uint64_t type = types->integer(i);
                if (type > byte)
                    fail("tokenizer.ggml.token_type",
                         "[" + std::to_string(i) + "] is " + std::to_string(type) + ", not a token type (0 to 6)");
                types_[i] = static_cast<int>(type);
            }
        }
        scores_.assign(tokens_.size(), 0.0);
        if (const std::optional<GgufArray> scores = array_of_tokens_size("tokenizer.ggml.scores")) {
            for (uint64_t i = 0; i < scores->size(); ++i) scores_[i] = scores->number(i);
        }
    }

    const PreTokenizer& pre_tokenizer() const {
        // llama.cpp reads a file without the key as "default" (warning that its output suffers).
        const std::string name(file_.string("tokenizer.ggml.pre").value_or("default"));
        std::string known;
        for (const PreTokenizer& pre : pre_tokenizers()) {
            if (name == pre.name) return pre;
            known += std::string(known.empty() ? "" : ", ") + pre.name;
        }
        fail("tokenizer.ggml.pre", "\"" + name + "\" is not supported (supported: " + known + ")");
    }

    json vocab() const {
        json out = json::object();
        for (size_t id = 0; id < tokens_.size(); ++id) out[tokens_[id]] = id;
        return out;
    }

    // Byte-level BPE: the pre-tokenizer's splits, then GPT-2's bytes as characters.
    json byte_level_json(const PreTokenizer& pre) const {
        json steps = json::array();
        for (const char* regex : pre.regexes)
            steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}});
        steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
        const std::optional<GgufArray> merges = file_.array("tokenizer.ggml.merges");
        if (!merges) fail("tokenizer.ggml.merges", "is missing: a gpt2 tokenizer needs its merges");
        json pairs = json::array();
        for (uint64_t i = 0; i < merges->size(); ++i) {
            const std::string_view merge = merges->string(i);
            // As llama.cpp splits it: at the first space after the first byte.
            const size_t space = merge.find(' ', 1);
            if (space == std::string_view::npos)
                fail("tokenizer.ggml.merges", "[" + std::to_string(i) + "] is not \"left right\"");
            pairs.push_back({merge.substr(0, space), merge.substr(space + 1)});
        }
        return {{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}},
                {"model",
                 {{"type", "BPE"},
                  {"vocab", vocab()},
                  {"merges", std::move(pairs)},
                  {"ignore_merges", pre.ignore_merges}}}};
    }

    // SentencePiece's BPE as llama.cpp runs it: ▁ for each space (and one
    // before the text unless tokenizer.ggml.add_space_prefix is false), then
    // the adjacent pair that makes the highest-scoring token merged first, and
    // what is left of a character without a token spelled in <0xAB> byte tokens.
    json sentencepiece_json() const {
        json normalizers = json::array();
        if (file_.boolean("tokenizer.ggml.add_space_prefix").value_or(true))
            normalizers.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
        normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
        json model = {{"type", "BPE"}, {"vocab", vocab()}, {"merges", merges_from_scores()}, {"byte_fallback", true}};
        return {{"normalizer", {{"type", "Sequence"}, {"normalizers", std::move(normalizers)}}},
                {"model", std::move(model)}};
    }

    // Every split of a token into two tokens is a merge, ranked by the token's
    // score, highest first (on a tie, the token listed first; its splits by
    // their ids), as transformers' SentencePieceExtractor ranks them.
    json merges_from_scores() const {
        std::unordered_map<std::string_view, int32_t> ids;
        for (size_t id = 0; id < tokens_.size(); ++id) ids.emplace(tokens_[id], static_cast<int32_t>(id));
        struct Merge {
            int32_t left, right, result;
        };
        std::vector<Merge> merges;
        for (size_t id = 0; id < tokens_.size(); ++id) {
            const std::string_view token = tokens_[id];
            const size_t first = merges.size();
            for (size_t at = 1; at < token.size(); ++at) {
                if ((static_cast<unsigned char>(token[at]) & 0xC0) == 0x80) continue;  // inside a character
                const auto left = ids.find(token.substr(0, at)), right = ids.find(token.substr(at));
                if (left != ids.end() && right != ids.end())
                    merges.push_back({left->second, right->second, static_cast<int32_t>(id)});
            }
            std::sort(
                merges.begin() + static_cast<std::ptrdiff_t>(first), merges.end(),
                [](const Merge& a, const Merge& b) { return std::pair(a.left, a.right) < std::pair(b.left, b.right); });
        }
        std::stable_sort(merges.begin(), merges.end(),
                         [&](const Merge& a, const Merge& b) { return scores_[a.result] > scores_[b.result]; });
        json out = json::array();
        for (const Merge& m : merges) out.push_back({tokens_[m.left], tokens_[m.right]});
        return out;
    }

    // The user-defined tokens, found in the text as written (llama.cpp finds
    // control tokens only when told to parse special tokens, which Headscope's
    // encode does not).
    json added_tokens() const {
        json out = json::array();
        for (size_t id = 0; id < tokens_.size(); ++id) {
            if (types_[id] == user_defined)
                out.push_back({{"id", id}, {"content", tokens_[id]}, {"special", false}, {"normalized", false}});
        }
        return out;
    }

    int32_t special_id(const char* key, int32_t fallback) const {
        const std::optional<uint64_t> id = file_.integer(key);
        if (!id) return fallback < static_cast<int64_t>(tokens_.size()) ? fallback : -1;
        if (*id >= tokens_.size())
            fail(key, "is " + std::to_string(*id) + ", past the " + std::to_string(tokens_.size()) + " tokens");
        return static_cast<int32_t>(*id);
    }

    // A token the tokenizer adds around each text, which it must have.
    int32_t added_id(const char* key, int32_t id) const {
        if (id < 0) fail(key, "is missing, yet the tokenizer is to add that token");
        return id;
    }

    int32_t eot_by_text() const {
        for (const char* text : eot_texts) {
            const auto it = std::find(tokens_.begin(), tokens_.end(), text);
            if (it != tokens_.end()) return static_cast<int32_t>(it - tokens_.begin());
        }
        return -1;
    }

    json post_processor(int32_t bos, int32_t eos) const {
        json single = json::array(), special_tokens = json::object();
        const auto add = [&](const char* name, int32_t id) {
            single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0U}}}});
            special_tokens[name] = {{"id", name}, {"ids", {id}}, {"tokens", {tokens_[static_cast<size_t>(id)]}}};
        };
        if (bos >= 0) add("bos", bos);
        single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0U}}}});
        if (eos >= 0) add("eos", eos);
        return {{"type", "TemplateProcessing"},
                {"single", std::move(single)},
                {"special_tokens", std::move(special_tokens)}};
    }

    const GgufFile& file_;
    std::vector<std::string> tokens_;
    std::vector<int> types_;
    std::vector<double> scores_;
    Tokenizer::SpecialIds ids_;
};

}  // namespace

Tokenizer Tokenizer::load_gguf(const GgufFile& file) {
    GgufVocabReader reader(file);
    Tokenizer tokenizer = from_json(reader.tokenizer_json(), file.file() + ": tokenizer.ggml");
    tokenizer.special_ids_ = reader.special_ids();
    return tokenizer;
}

}  // namespace headscope
