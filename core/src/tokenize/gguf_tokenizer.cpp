// Tokenizer::load_gguf: a GGUF file's tokenizer.ggml.* metadata (as llama.cpp's
// src/llama-vocab.cpp reads it) written out as the tokenizer.json it stands
// for, which the tokenizer.json loader then reads. Here: the tokenizer
// models and their defaults, the tokens, the special ids, the user-defined
// tokens and what goes around a text; each model's pieces are in
// gguf_vocab_models.cpp.
#include "gguf_vocab.h"
#include "headscope/base/error.h"
#include "headscope/io/gguf.h"
#include "headscope/tokenize/tokenizer.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace headscope {

namespace {

// Texts llama.cpp takes for the end-of-turn token when tokenizer.ggml.eot_token_id is absent, first found first.
constexpr const char* eot_texts[] = {"<|eot_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>",     "<|endoftext|>",
                                     "<|end_of_text|>", "<EOT>",      "_<EOT>",  "<end_of_utterance>"};

}  // namespace

const std::vector<GgufVocabReader::Model>& GgufVocabReader::models() {
    static const std::vector<Model> table = {
        {"gpt2", {11, 11, -1, -1, -1, -1, false, false}, &GgufVocabReader::byte_level_json},
        {"llama", {1, 2, 0, -1, -1, -1, true, false}, &GgufVocabReader::sentencepiece_json},
        // BERT's [CLS] [SEP] [UNK] [PAD] [MASK] as bert-base-uncased numbers them; its [CLS] is bos.
        {"bert", {101, -1, 100, 102, 0, 103, true, false}, &GgufVocabReader::wordpiece_json},
        {"t5", {-1, 1, 2, -1, 0, -1, false, true}, &GgufVocabReader::unigram_json},
    };
    return table;
}

GgufVocabReader::json GgufVocabReader::tokenizer_json() {
    const std::string name = required_string("tokenizer.ggml.model");
    std::string known;
    for (const Model& model : models()) {
        if (name == model.name) return tokenizer_json(model);
        known += std::string(known.empty() ? "" : ", ") + model.name;
    }
    fail("tokenizer.ggml.model", "\"" + name + "\" is not supported (supported: " + known + ")");
}

GgufVocabReader::json GgufVocabReader::tokenizer_json(const Model& model) {
    read_tokens();
    defaults_ = model.defaults;
    // llama.cpp reads no tokenizer.ggml.cls_token_id: BERT's [CLS] is its bos.
    ids_.bos = special_id("tokenizer.ggml.bos_token_id", defaults_.bos);
    ids_.eos = special_id("tokenizer.ggml.eos_token_id", defaults_.eos);
    ids_.unk = special_id("tokenizer.ggml.unknown_token_id", defaults_.unk);
    ids_.sep = special_id("tokenizer.ggml.seperator_token_id", defaults_.sep);  // [sic], llama.cpp's key
    ids_.pad = special_id("tokenizer.ggml.padding_token_id", defaults_.pad);
    ids_.mask = special_id("tokenizer.ggml.mask_token_id", defaults_.mask);
    ids_.eot = special_id("tokenizer.ggml.eot_token_id", eot_by_text());
    json root = (this->*model.model_json)();
    root["added_tokens"] = added_tokens();
    root["post_processor"] = model.name == std::string_view("bert") ? bert_post_processor() : post_processor();
    return root;
}

void GgufVocabReader::fail(const std::string& key, const std::string& what) const {
    throw Error(file_.file() + ": key '" + key + "' " + what);
}

std::string GgufVocabReader::required_string(const char* key) const {
    const std::optional<std::string_view> value = file_.string(key);
    if (!value) fail(key, "is missing: the file has no tokenizer");
    return std::string(*value);
}

std::optional<GgufArray> GgufVocabReader::array_of_tokens_size(const char* key) const {
    std::optional<GgufArray> array = file_.array(key);
    if (array && array->size() != tokens_.size()) {
        fail(key, "has " + std::to_string(array->size()) + " elements, but tokenizer.ggml.tokens has " +
                      std::to_string(tokens_.size()));
    }
    return array;
}

// The tokens, their types (normal when absent) and scores (0 when absent), checked.
void GgufVocabReader::read_tokens() {
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
            // Shown as JSON, a byte that is not UTF-8 as U+FFFD.
            const std::string shown = json(token).dump(-1, ' ', false, json::error_handler_t::replace);
            fail("tokenizer.ggml.tokens",
                 "lists " + shown + " twice (ids " + std::to_string(it->second) + " and " + std::to_string(i) + ")");
        }
        tokens_.push_back(std::move(token));
    }
    types_.assign(tokens_.size(), GgufTokenType::normal);
    if (const std::optional<GgufArray> types = array_of_tokens_size("tokenizer.ggml.token_type")) {
        for (uint64_t i = 0; i < types->size(); ++i) {
            const uint64_t type = types->integer(i);
            if (type > static_cast<uint64_t>(GgufTokenType::byte))
                fail("tokenizer.ggml.token_type",
                     "[" + std::to_string(i) + "] is " + std::to_string(type) + ", not a token type (0 to 6)");
            types_[i] = static_cast<GgufTokenType>(type);
        }
    }
    scores_.assign(tokens_.size(), 0.0);
    if (const std::optional<GgufArray> scores = array_of_tokens_size("tokenizer.ggml.scores")) {
        for (uint64_t i = 0; i < scores->size(); ++i) scores_[i] = scores->number(i);
    }
}

int32_t GgufVocabReader::special_id(const char* key, int32_t fallback) const {
    const std::optional<uint64_t> id = file_.integer(key);
    if (!id) return fallback < static_cast<int64_t>(tokens_.size()) ? fallback : -1;
    if (*id >= tokens_.size())
        fail(key, "is " + std::to_string(*id) + ", past the " + std::to_string(tokens_.size()) + " tokens");
    return static_cast<int32_t>(*id);
}

int32_t GgufVocabReader::added_id(const char* key, int32_t id) const {
    if (id < 0) fail(key, "is missing, yet the tokenizer is to add that token");
    return id;
}

int32_t GgufVocabReader::unknown_id(const char* model) const {
    if (ids_.unk < 0)
        fail("tokenizer.ggml.unknown_token_id",
             std::string("is missing: a ") + model + " tokenizer needs its unknown token");
    return ids_.unk;
}

int32_t GgufVocabReader::eot_by_text() const {
    for (const char* text : eot_texts) {
        const auto it = std::find(tokens_.begin(), tokens_.end(), text);
        if (it != tokens_.end()) return static_cast<int32_t>(it - tokens_.begin());
    }
    return -1;
}

// The user-defined tokens, found in the text as written (llama.cpp finds
// control tokens only when told to parse special tokens, which Headscope's
// encode does not).
GgufVocabReader::json GgufVocabReader::added_tokens() const {
    json out = json::array();
    for (size_t id = 0; id < tokens_.size(); ++id) {
        if (types_[id] == GgufTokenType::user_defined)
            out.push_back({{"id", id}, {"content", tokens_[id]}, {"special", false}, {"normalized", false}});
    }
    return out;
}

// bos and eos around a text, as tokenizer.ggml.add_bos_token and
// add_eos_token (or the model's defaults) say.
GgufVocabReader::json GgufVocabReader::post_processor() const {
    const bool add_bos = file_.boolean("tokenizer.ggml.add_bos_token").value_or(defaults_.add_bos);
    const bool add_eos = file_.boolean("tokenizer.ggml.add_eos_token").value_or(defaults_.add_eos);
    return template_processing(add_bos ? added_id("tokenizer.ggml.bos_token_id", ids_.bos) : -1,
                               add_eos ? added_id("tokenizer.ggml.eos_token_id", ids_.eos) : -1);
}

// llama.cpp's WPM puts bos ([CLS]) and sep ([SEP]) around a text, whatever the keys say.
GgufVocabReader::json GgufVocabReader::bert_post_processor() const {
    return template_processing(added_id("tokenizer.ggml.bos_token_id", ids_.bos),
                               added_id("tokenizer.ggml.seperator_token_id", ids_.sep));
}

// `first` (-1: none), the text, then `last` (-1: none).
GgufVocabReader::json GgufVocabReader::template_processing(int32_t first, int32_t last) const {
    json single = json::array(), special_tokens = json::object();
    const auto add = [&](const char* name, int32_t id) {
        single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0U}}}});
        special_tokens[name] = {{"id", name}, {"ids", {id}}, {"tokens", {tokens_[static_cast<size_t>(id)]}}};
    };
    if (first >= 0) add("first", first);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0U}}}});
    if (last >= 0) add("last", last);
    return {
        {"type", "TemplateProcessing"}, {"single", std::move(single)}, {"special_tokens", std::move(special_tokens)}};
}

Tokenizer Tokenizer::load_gguf(const GgufFile& file) {
    GgufVocabReader reader(file);
    Tokenizer tokenizer = from_json(reader.tokenizer_json(), file.file() + ": tokenizer.ggml");
    tokenizer.special_ids_ = reader.special_ids();
    return tokenizer;
}

}  // namespace headscope
