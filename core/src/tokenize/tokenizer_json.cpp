// Hugging Face's tokenizer.json (the `tokenizers` library's format) with a
// BPE or WordPiece model, read into the Tokenizer's pipeline: the model's vocab, merges
// and options, the added tokens, the normalizer, the pre-tokenizer and the
// post-processor (the decoder is not needed: token_bytes is worked out from
// the rest). Every field is checked before use; a type or option not
// supported is refused by name, in one line naming the file and the field.
// Not Hugging Face's but the GGUF reader's, for where llama.cpp differs: the
// Charsmap normalizer, BertNormalizer's accents_as_llama_cpp, WordPiece's
// word_prefix, Unigram's unmatched_ids and unknown_score (gguf_vocab_models.cpp).
#include "charsmap.h"
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"
#include "headscope/tokenize/tokenizer.h"
#include "pattern.h"
#include "tokenizer_internal.h"
#include "unicode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace headscope {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The largest tokenizer.json in use, Gemma 3's, has 33 MB; Qwen 3's has 11.4
// MB and 758,000 nodes (measured), so Gemma 3's about 2.2 million. Twice
// those: parsed, at most about 500 MB (json_input.h).
constexpr JsonLimits file_limits{64 << 20, 4 << 20};
// Finding added tokens costs up to the longest one's length at each byte of a
// text; real ones are at most a few dozen bytes.
constexpr size_t max_added_token_bytes = 1024;
// Every normalizer and pre-tokenizer runs over the whole text; real files
// have at most three of each.
constexpr size_t max_steps = 64;

// The pattern of a ByteLevel pre-tokenizer with use_regex: GPT-2's.
constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

[[noreturn]] void unsupported_type(const JsonFields& f, const std::string& field, const std::string& type,
                                   const char* supported) {
    f.fail(field, "type " + describe_json(type) + " is not supported (supported: " + supported + ")");
}

// A pattern object: {"Regex": "..."} or {"String": "..."}.
std::shared_ptr<const Pattern> read_pattern(const JsonFields& f, const json& object, const std::string& field) {
    const json& pattern = f.required(object, field, "pattern", json::value_t::object, "an object");
    const std::string where = JsonFields::join(field, "pattern");
    if (const json* regex = f.optional(pattern, where, "Regex")) {
        if (!regex->is_string()) f.fail(where + ".Regex", "expected a string, got " + describe_json(*regex));
        return std::make_shared<const Pattern>(regex->get<std::string>(), false, f.file() + ": " + where);
    }
    return std::make_shared<const Pattern>(f.string(pattern, where, "String"), true, f.file() + ": " + where);
}

}  // namespace

class Tokenizer::JsonLoader {
public:
    explicit JsonLoader(const std::string& file) : f_(file) {}

    Tokenizer load(const json& root) {
        if (!root.is_object()) f_.fail("", "expected a JSON object, got " + describe_json(root));
        // Byte-level when a ByteLevel pre-tokenizer says so, which comes first.
        t_.byte_level_ = false;
        if (const json* normalizer = f_.optional(root, "", "normalizer")) read_normalizer(*normalizer, "normalizer");
        if (const json* pre = f_.optional(root, "", "pre_tokenizer")) read_pre_tokenizer(*pre, "pre_tokenizer");
        const json* added = f_.optional(root, "", "added_tokens");
        if (added && !added->is_array()) f_.fail("added_tokens", "expected an array, got " + describe_json(*added));
        // Token ids run below the number of tokens the file lists: dense, as
        // every tokenizer has them, yet with room for gaps, and never more
        // than the file can pay for.
        const json& model = f_.required(root, "", "model", json::value_t::object, "an object");
        const bool unigram = f_.type(model, "model") == "Unigram";  // its vocab a list of [token, score]
        id_bound_ = f_.required(model, "model", "vocab", unigram ? json::value_t::array : json::value_t::object,
                                unigram ? "an array of [token, score]" : "an object of token -> id")
                        .size() +
                    (added ? added->size() : 0);
        read_model(model);
        if (added) read_added_tokens(*added);
        if (const json* post = f_.optional(root, "", "post_processor"))
            t_.post_.read(f_, *post, "post_processor", t_.id_to_bytes_.size());
        return std::move(t_);
    }

private:
    void read_normalizer(const json& value, const std::string& field) {
        const std::string type = f_.type(value, field);
        if (t_.normalizers_.size() == max_steps) {
            f_.fail(field, "more than " + std::to_string(max_steps) + " normalizers in all");
        }
        if (type == "Sequence") {
            const json& list = f_.required(value, field, "normalizers", json::value_t::array, "an array");
            for (size_t i = 0; i < list.size(); ++i)
                read_normalizer(list[i], JsonFields::at(field + ".normalizers", i));
        } else if (type == "NFC") {
            t_.normalizers_.push_back({.kind = Normalizer::Kind::nfc});
        } else if (type == "Prepend") {
            t_.normalizers_.push_back(
                {.kind = Normalizer::Kind::prepend, .content = f_.string(value, field, "prepend")});
        } else if (type == "Replace") {
            // A String (Llama 2's " " by "▁"), or a Regex (T5's and XLM-R's " {2,}").
            std::shared_ptr<const Pattern> pattern = read_pattern(f_, value, field);
            // Hugging Face's would put the replacement between every two characters.
            if (pattern->matches_empty())
                f_.fail(JsonFields::join(field, "pattern"), "matches the empty string, which is not supported");
            const std::string to = f_.string(value, field, "content");
            const json& spec = value.at("pattern");
            if (const auto from = spec.find("String"); from != spec.end() && *from == " ") space_symbol_ = to;
            t_.normalizers_.push_back(
                {.kind = Normalizer::Kind::replace, .pattern = std::move(pattern), .content = to});
        } else if (type == "Strip") {  // both fields required, as Hugging Face reads them
            t_.normalizers_.push_back({.kind = Normalizer::Kind::strip,
                                       .strip_left = f_.boolean(value, field, "strip_left"),
                                       .strip_right = f_.boolean(value, field, "strip_right")});
        } else if (type == "Precompiled") {  // SentencePiece's charsmap: nmt_nfkc, as the reference port reads it
            t_.normalizers_.push_back({.kind = Normalizer::Kind::nmt_nfkc});
        } else if (type == "Charsmap") {  // the GGUF reader's, checked there: bytes as JSON binary, in no file
            const auto& bytes = f_.required(value, field, "charsmap", json::value_t::binary, "binary").get_binary();
            t_.normalizers_.push_back(
                {.kind = Normalizer::Kind::charsmap,
                 .charsmap = std::make_shared<const Charsmap>(std::string(bytes.begin(), bytes.end()))});
        } else if (type == "BertNormalizer") {
            const bool lowercase = f_.boolean(value, field, "lowercase", true);
            const json* strip = f_.optional(value, field, "strip_accents");  // null: as lowercase
            t_.normalizers_.push_back(
                {.kind = Normalizer::Kind::bert,
                 .clean_text = f_.boolean(value, field, "clean_text", true),
                 .chinese_chars = f_.boolean(value, field, "handle_chinese_chars", true),
                 .strip_accents =
                     strip && !strip->is_null() ? f_.boolean(value, field, "strip_accents", lowercase) : lowercase,
                 .lowercase = lowercase,
                 .accents_as_llama_cpp = f_.boolean(value, field, "accents_as_llama_cpp", false)});
        } else {
            unsupported_type(f_, field, type, "NFC, Prepend, Replace, Strip, BertNormalizer, Precompiled, Sequence");
        }
    }

    void read_pre_tokenizer(const json& value, const std::string& field) {
        const std::string type = f_.type(value, field);
        if (t_.pre_tokenizers_.size() == max_steps) {
            f_.fail(field, "more than " + std::to_string(max_steps) + " pre-tokenizers in all");
        }
        if (type == "Sequence") {
            const json& list = f_.required(value, field, "pretokenizers", json::value_t::array, "an array");
            for (size_t i = 0; i < list.size(); ++i) {
                read_pre_tokenizer(list[i], JsonFields::at(field + ".pretokenizers", i));
            }
        } else if (type == "Split") {
            if (f_.boolean(value, field, "invert", false))
                f_.fail(JsonFields::join(field, "invert"), "true is not supported");
            t_.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::split,
                                          .pattern = read_pattern(f_, value, field),
                                          .behavior = split_behavior(value, field)});
        } else if (type == "ByteLevel") {
            t_.byte_level_ = true;
            std::shared_ptr<const Pattern> pattern;
            if (f_.boolean(value, field, "use_regex", true)) {
                pattern = std::make_shared<const Pattern>(gpt2_pattern, false, f_.file() + ": " + field);
            }
            t_.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::byte_level,
                                          .pattern = std::move(pattern),
                                          .add_prefix_space = f_.boolean(value, field, "add_prefix_space", true)});
        } else if (type == "Metaspace") {
            const std::string replacement = f_.string(value, field, "replacement");
            // One character, as in Hugging Face's tokenizers (so a text grows at most fourfold).
            if (replacement.empty() || utf8_length(replacement[0]) != replacement.size()) {
                f_.fail(JsonFields::join(field, "replacement"),
                        "expected one character, got " + describe_json(replacement));
            }
            space_symbol_ = replacement;
            t_.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::metaspace,
                                          .replacement = replacement,
                                          .prepend = prepend_scheme(value, field),
                                          .split = f_.boolean(value, field, "split", true)});
        } else if (type == "Digits") {
            t_.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::digits,
                                          .individual_digits = f_.boolean(value, field, "individual_digits", false)});
        } else if (type == "BertPreTokenizer") {
            t_.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::bert});
        } else if (type == "WhitespaceSplit") {  // T5's and XLM-R's, before Metaspace
            t_.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::whitespace_split});
        } else {
            unsupported_type(f_, field, type,
                             "Split, ByteLevel, Metaspace, Digits, BertPreTokenizer, WhitespaceSplit, Sequence");
        }
    }

    SplitBehavior split_behavior(const json& value, const std::string& field) const {
        const std::string behavior = f_.string(value, field, "behavior");
        if (behavior == "Removed") return SplitBehavior::removed;
        if (behavior == "Isolated") return SplitBehavior::isolated;
        if (behavior == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
        if (behavior == "MergedWithNext") return SplitBehavior::merged_with_next;
        if (behavior == "Contiguous") return SplitBehavior::contiguous;
        f_.fail(JsonFields::join(field, "behavior"),
                describe_json(behavior) +
                    " is not supported (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
    }

    PrependScheme prepend_scheme(const json& value, const std::string& field) const {
        // Older files say add_prefix_space instead; false means never.
        if (!f_.boolean(value, field, "add_prefix_space", true)) return PrependScheme::never;
        const json* scheme = f_.optional(value, field, "prepend_scheme");
        if (!scheme) return PrependScheme::always;
        if (*scheme == "always") return PrependScheme::always;
        if (*scheme == "first") return PrependScheme::first;
        if (*scheme == "never") return PrependScheme::never;
        f_.fail(JsonFields::join(field, "prepend_scheme"),
                describe_json(*scheme) + " is not supported (supported: always, first, never)");
    }

    void read_model(const json& model) {
        const std::string type = f_.type(model, "model");
        if (type == "Unigram") return read_unigram(model);
        if (type != "BPE" && type != "WordPiece") unsupported_type(f_, "model", type, "BPE, WordPiece, Unigram");
        t_.word_piece_ = type == "WordPiece";
        if (t_.word_piece_) {
            t_.continuing_prefix_ = f_.string(model, "model", "continuing_subword_prefix", "##");
            t_.word_prefix_ = f_.string(model, "model", "word_prefix", "");
            if (!t_.word_prefix_.empty()) space_symbol_ = t_.word_prefix_;  // where a space was
            t_.max_word_chars_ = static_cast<size_t>(
                f_.integer(model, "model", "max_input_chars_per_word", 1, std::numeric_limits<int32_t>::max(), 100));
        } else {
            read_bpe_options(model);
        }
        read_vocab(model);
        if (t_.word_piece_) {
            if (t_.unk_id_ < 0) f_.fail("model", "a WordPiece model needs its unk_token");
            build_token_trie();
        } else {
            read_merges(model);
        }
    }

    // A Unigram model: its vocabulary as [token, score] by id, and the unknown token's id.
    void read_unigram(const json& model) {
        t_.unigram_ = true;
        if (f_.boolean(model, "model", "byte_fallback", false))
            f_.fail("model.byte_fallback", "true is not supported for a Unigram model");
        const json& vocab = model.at("vocab");
        t_.id_to_bytes_.resize(vocab.size());
        t_.unigram_scores_.resize(vocab.size());
        for (size_t id = 0; id < vocab.size(); ++id) {
            const std::string field = JsonFields::at("model.vocab", id);
            const json& entry = vocab[id];
            if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
                f_.fail(field, "expected [token, score], got " + describe_json(entry));
            const std::string& token = entry[0].get_ref<const std::string&>();
            const double score = entry[1].get<double>();
            if (!std::isfinite(score) || score > 0) f_.fail(field, "the score is not a log-probability");
            if (!t_.symbol_ids_.emplace(token, static_cast<int32_t>(id)).second)
                f_.fail(field, describe_json(token) + " is listed twice");
            t_.id_to_bytes_[id] = shown_bytes(token, token);
            t_.unigram_scores_[id] = score;
        }
        const json* unk = f_.optional(model, "model", "unk_id");
        if (!unk || unk->is_null()) f_.fail("model", "a Unigram model needs its unk_id");
        t_.unk_id_ = f_.id(*unk, "model.unk_id", vocab.size());
        // Hugging Face's: an unknown character scores 10 below the lowest token.
        const double lowest = *std::min_element(t_.unigram_scores_.begin(), t_.unigram_scores_.end());
        t_.unknown_score_ =
            f_.number(model, "model", "unknown_score", -std::numeric_limits<double>::max(), 0, lowest - 10);
        t_.unigram_scores_[static_cast<size_t>(t_.unk_id_)] = t_.unknown_score_;
        if (f_.optional(model, "model", "unmatched_ids")) {  // kept for their ids, never matched in a text
            for (const json& id : f_.required(model, "model", "unmatched_ids", json::value_t::array, "an array"))
                t_.symbol_ids_.erase(vocab[static_cast<size_t>(f_.id(id, "model.unmatched_ids", vocab.size()))][0]);
        }
        build_token_trie();
    }

    // A WordPiece or Unigram model's tokens as a trie (Tokenizer::index_tokens).
    void build_token_trie() {
        try {
            t_.index_tokens();
        } catch (const Error& e) {
            f_.fail("model", e.what());
        }
    }

    void read_bpe_options(const json& model) {
        if (const json* dropout = f_.optional(model, "model", "dropout");
            dropout && !(dropout->is_number() && dropout->get<double>() == 0)) {
            f_.fail("model.dropout", describe_json(*dropout) + ": BPE dropout is not supported");
        }
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
            const json* affix = f_.optional(model, "model", key);
            if (affix && !(affix->is_string() && affix->get_ref<const std::string&>().empty())) {
                f_.fail(JsonFields::join("model", key),
                        describe_json(*affix) + " is not supported (only empty or null)");
            }
        }
        t_.ignore_merges_ = f_.boolean(model, "model", "ignore_merges", false);
        t_.byte_fallback_ = f_.boolean(model, "model", "byte_fallback", false);
        t_.fuse_unk_ = f_.boolean(model, "model", "fuse_unk", false);
    }

    void read_vocab(const json& model) {
        const json& vocab = model.at("vocab");
        std::vector<bool> id_seen(id_bound_, false);
        for (const auto& [token, value] : vocab.items()) {
            const std::string field = "model.vocab[" + describe_json(token) + "]";
            const int32_t id = f_.id(value, field, id_bound_);
            if (id_seen[static_cast<size_t>(id)])
                f_.fail(field, "id " + std::to_string(id) + " is another token's too");
            id_seen[static_cast<size_t>(id)] = true;
            if (static_cast<size_t>(id) >= t_.id_to_bytes_.size()) t_.id_to_bytes_.resize(static_cast<size_t>(id) + 1);
            std::optional<std::string> symbol = symbol_of(token);
            t_.id_to_bytes_[static_cast<size_t>(id)] = shown_bytes(token, symbol);
            if (symbol) t_.symbol_ids_.emplace(std::move(*symbol), id);
        }
        if (t_.byte_level_) {
            for (int b = 0; b < 256; ++b) {
                const auto it = t_.symbol_ids_.find(std::string(1, static_cast<char>(b)));
                t_.byte_symbol_[b] = it == t_.symbol_ids_.end() ? -1 : it->second;
            }
        }
        if (t_.byte_fallback_) {
            for (int b = 0; b < 256; ++b) {
                const auto it = t_.symbol_ids_.find(byte_fallback_token(b));
                t_.byte_fallback_ids_[b] = it == t_.symbol_ids_.end() ? -1 : it->second;
            }
        }
        if (const json* unk = f_.optional(model, "model", "unk_token")) {
            const auto it = unk->is_string() ? vocab.find(unk->get_ref<const std::string&>()) : vocab.end();
            if (it == vocab.end()) f_.fail("model.unk_token", describe_json(*unk) + " is not in the vocabulary");
            t_.unk_id_ = it->get<int32_t>();
        }
    }

    void read_merges(const json& model) {
        const json& merges = f_.required(model, "model", "merges", json::value_t::array, "an array");
        t_.merges_.reserve(merges.size());
        for (size_t rank = 0; rank < merges.size(); ++rank) {
            const std::string field = JsonFields::at("model.merges", rank);
            const json& merge = merges[rank];
            std::string left, right;
            if (merge.is_string()) {
                // The older form: "left right", split at its one space.
                const std::string& pair = merge.get_ref<const std::string&>();
                const size_t space = pair.find(' ');
                if (space == std::string::npos || pair.find(' ', space + 1) != std::string::npos) {
                    f_.fail(field, "expected \"left right\", got " + describe_json(merge));
                }
                left = pair.substr(0, space);
                right = pair.substr(space + 1);
            } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
                left = merge[0].get<std::string>();
                right = merge[1].get<std::string>();
            } else {
                f_.fail(field, "expected \"left right\" or [\"left\", \"right\"], got " + describe_json(merge));
            }
            const int32_t left_id = merge_symbol(left, field, "");
            const int32_t right_id = merge_symbol(right, field, "");
            const int32_t result = merge_symbol(left + right, field, "their merge ");
            // A repeated pair takes its last rank, as Hugging Face's tokenizers does.
            t_.merges_[pair_key(left_id, right_id)] = Merge{static_cast<int32_t>(rank), result};
        }
    }

    // A vocabulary token as a BPE symbol: its bytes when byte-level, else itself.
    std::optional<std::string> symbol_of(const std::string& token) const {
        if (t_.byte_level_) return byte_level_bytes(token);
        return token;
    }

    // The bytes a token (its `symbol`) stands for, as Hugging Face's decoders
    // make them of any token, added ones too (Gemma 3's "▁▁" as two spaces):
    // ▁ as a space, <0xAB> as its byte. A token outside the byte alphabet
    // cannot come out of byte-level BPE; it stands for its own text.
    std::string shown_bytes(const std::string& token, const std::optional<std::string>& symbol) const {
        return symbol ? t_.shown_bytes(*symbol, space_symbol_) : token;
    }

    // The id of a merge's symbol, which the vocabulary must have.
    int32_t merge_symbol(const std::string& token, const std::string& field, const char* what) const {
        const std::optional<std::string> symbol = symbol_of(token);
        const auto it = symbol ? t_.symbol_ids_.find(*symbol) : t_.symbol_ids_.end();
        if (it == t_.symbol_ids_.end()) f_.fail(field, what + describe_json(token) + " is not in the vocabulary");
        return it->second;
    }

    void read_added_tokens(const json& added) {
        std::vector<bool> id_seen(id_bound_, false);
        MatchScratch scratch;  // one for the file: its Replace patterns' work budget covers every token
        std::set<std::string> contents;
        for (size_t i = 0; i < added.size(); ++i) {
            const std::string field = JsonFields::at("added_tokens", i);
            const json& entry = added[i];
            const int32_t id = f_.id(f_.required(entry, field, "id"), JsonFields::join(field, "id"), id_bound_);
            if (id_seen[static_cast<size_t>(id)]) f_.fail(field, "id " + std::to_string(id) + " is listed twice");
            id_seen[static_cast<size_t>(id)] = true;
            const std::string content = f_.string(entry, field, "content");
            if (content.empty()) f_.fail(JsonFields::join(field, "content"), "empty");
            if (content.size() > max_added_token_bytes) {
                f_.fail(JsonFields::join(field, "content"), std::to_string(content.size()) + " bytes, more than the " +
                                                                std::to_string(max_added_token_bytes) +
                                                                " an added token may have");
            }
            if (!contents.insert(content).second) f_.fail(field, describe_json(content) + " is listed twice");
            const AddedTokens::Token token{id, f_.boolean(entry, field, "lstrip", false),
                                           f_.boolean(entry, field, "rstrip", false),
                                           f_.boolean(entry, field, "single_word", false)};
            // Hugging Face's default, as for a token without the field: normalized.
            if (f_.boolean(entry, field, "normalized", true)) {
                t_.normalized_added_.add(t_.normalize(content, scratch), token);
            } else {
                t_.added_.add(content, token);
            }
            if (static_cast<size_t>(id) >= t_.id_to_bytes_.size()) t_.id_to_bytes_.resize(static_cast<size_t>(id) + 1);
            t_.id_to_bytes_[static_cast<size_t>(id)] = shown_bytes(content, symbol_of(content));
        }
    }

    JsonFields f_;
    Tokenizer t_;
    size_t id_bound_ = 0;       // every id is below it
    std::string space_symbol_;  // what stands for a space in the vocabulary (Llama 2's ▁), if anything
};

Tokenizer Tokenizer::load_json(const fs::path& tokenizer_json) {
    const std::string file = tokenizer_json.string();
    const size_t size = OpenFile(tokenizer_json, "the tokenizer").size();
    if (size > file_limits.max_bytes) {
        throw Error(file + ": " + std::to_string(size) + " bytes, more than the " +
                    std::to_string(file_limits.max_bytes >> 20) + " MiB a tokenizer.json may have");
    }
    return from_json(read_json_file(tokenizer_json, file_limits, "the tokenizer"), file);
}

Tokenizer Tokenizer::from_json(const json& root, const std::string& name) { return JsonLoader(name).load(root); }

}  // namespace headscope
