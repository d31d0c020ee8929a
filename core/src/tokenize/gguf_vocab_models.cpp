// The tokenizer.json of each tokenizer.ggml.model llama.cpp reads (see
// gguf_vocab.h): "gpt2" as a byte-level BPE behind llama.cpp's regex splits
// for its pre-tokenizer, "llama" as SentencePiece's BPE with merges taken from
// the tokens' scores, "bert" as WordPiece and "t5" as Unigram, each as
// llama.cpp's own tokenizer for it runs, where it differs from Hugging Face's.
#include "charsmap.h"
#include "gguf_vocab.h"
#include "headscope/base/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace headscope {

namespace {

using json = nlohmann::json;

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
         true,
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
        // o200k's split (gpt-oss's files), in llama.cpp's form of its case classes as Tekken's.
        {"gpt-4o",
         {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
    };
    return table;
}

const PreTokenizer* pre_tokenizer(const std::string& name) {
    for (const PreTokenizer& pre : pre_tokenizers())
        if (name == pre.name) return &pre;
    return nullptr;
}

std::string pre_tokenizer_names() {
    std::string names;
    for (const PreTokenizer& pre : pre_tokenizers()) names += std::string(names.empty() ? "" : ", ") + pre.name;
    return names;
}

}  // namespace

GgufVocabReader::json GgufVocabReader::vocab() const {
    json out = json::object();
    for (size_t id = 0; id < tokens_.size(); ++id) out[tokens_[id]] = id;
    return out;
}

// Byte-level BPE: the pre-tokenizer's splits, then GPT-2's bytes as characters.
GgufVocabReader::json GgufVocabReader::byte_level_json() {
    // llama.cpp reads a file without the key as "default" (warning that its output suffers).
    const std::string name(file_.string("tokenizer.ggml.pre").value_or("default"));
    const PreTokenizer* found = pre_tokenizer(name);
    if (!found)
        fail("tokenizer.ggml.pre", "\"" + name + "\" is not supported (supported: " + pre_tokenizer_names() + ")");
    const PreTokenizer& pre = *found;
    defaults_.add_bos = pre.add_bos;
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
    return {
        {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}},
        {"model",
         {{"type", "BPE"}, {"vocab", vocab()}, {"merges", std::move(pairs)}, {"ignore_merges", pre.ignore_merges}}}};
}

// SentencePiece's BPE as llama.cpp runs it: ▁ for each space (and one
// before the text unless tokenizer.ggml.add_space_prefix is false), then
// the adjacent pair that makes the highest-scoring token merged first, and
// what is left of a character without a token spelled in <0xAB> byte tokens.
GgufVocabReader::json GgufVocabReader::sentencepiece_json() {
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
GgufVocabReader::json GgufVocabReader::merges_from_scores() const {
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

// llama.cpp's WPM: each word (split at whitespace, and around each
// punctuation character and CJK ideograph; controls dropped, lowercased
// and accents stripped unless tokenizer.ggml.normalizer.* says not) spelled
// behind a "▁" by the longest tokens that fit, or the unknown token when
// it cannot be. convert_hf_to_gguf.py writes BERT's word-starting tokens
// with that ▁ and its "##" continuations without the ##. (Unassigned code
// points, which llama.cpp keeps, go with the controls here.)
GgufVocabReader::json GgufVocabReader::wordpiece_json() {
    const int32_t unk = unknown_id("bert");
    const bool lowercase = file_.boolean("tokenizer.ggml.normalizer.lowercase").value_or(true);
    const bool strip_accents = file_.boolean("tokenizer.ggml.normalizer.strip_accents").value_or(lowercase);
    json normalizer = {{"type", "BertNormalizer"},       {"clean_text", true},           {"handle_chinese_chars", true},
                       {"strip_accents", strip_accents}, {"accents_as_llama_cpp", true}, {"lowercase", lowercase}};
    json model = {{"type", "WordPiece"},
                  {"vocab", vocab()},
                  {"unk_token", tokens_[static_cast<size_t>(unk)]},
                  {"word_prefix", "\u2581"},
                  {"continuing_subword_prefix", ""},
                  {"max_input_chars_per_word", std::numeric_limits<int32_t>::max()}};
    return {{"normalizer", std::move(normalizer)},
            {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
            {"model", std::move(model)}};
}

// llama.cpp's UGM: the text through the precompiled charsmap, its spaces
// as tokenizer.ggml.remove_extra_whitespaces and add_space_prefix say and
// each a ▁, then the split of all of it whose tokens' scores add up to the
// most. Only normal, user-defined (scored 0) and unused tokens are
// matched; an unknown character scores 10 below the lowest normal token.
// (llama.cpp also keeps out of the charsmap any start of a user-defined
// token in the text: that differs only where such a start holds a character
// the charsmap changes, which T5's <extra_id_N> do not.)
GgufVocabReader::json GgufVocabReader::unigram_json() {
    if (!file_.array("tokenizer.ggml.scores")) fail("tokenizer.ggml.scores", "is missing: a t5 tokenizer needs them");
    const int32_t unk = unknown_id("t5");
    json vocab = json::array(), unmatched = json::array();
    double lowest_normal = std::numeric_limits<double>::infinity();
    for (size_t id = 0; id < tokens_.size(); ++id) {
        const GgufTokenType type = types_[id];
        const bool matched =
            type == GgufTokenType::normal || type == GgufTokenType::user_defined || type == GgufTokenType::unused;
        const double score = type == GgufTokenType::user_defined || !matched ? 0.0 : scores_[id];
        if (!std::isfinite(score) || score > 0) {
            char what[80];
            std::snprintf(what, sizeof what, "[%zu] is %g, not a log-probability", id, score);
            fail("tokenizer.ggml.scores", what);
        }
        if (type == GgufTokenType::normal) lowest_normal = std::min(lowest_normal, score);
        if (!matched) unmatched.push_back(id);
        vocab.push_back({tokens_[id], score});
    }
    if (std::isinf(lowest_normal)) fail("tokenizer.ggml.token_type", "has no normal token");
    json model = {{"type", "Unigram"},
                  {"vocab", std::move(vocab)},
                  {"unk_id", unk},
                  {"unmatched_ids", std::move(unmatched)},
                  {"unknown_score", static_cast<float>(lowest_normal) - 10.0F}};
    return {{"normalizer", {{"type", "Sequence"}, {"normalizers", unigram_normalizers()}}},
            {"model", std::move(model)}};
}

GgufVocabReader::json GgufVocabReader::unigram_normalizers() const {
    json steps = json::array();
    if (std::optional<std::string> charsmap = precompiled_charsmap())
        steps.push_back({{"type", "Charsmap"},
                         {"charsmap", json::binary_t(std::vector<uint8_t>(charsmap->begin(), charsmap->end()))}});
    const auto replace = [&](const char* regex, const char* content) {
        steps.push_back({{"type", "Replace"}, {"pattern", {{"Regex", regex}}}, {"content", content}});
    };
    const json prepend = {{"type", "Prepend"}, {"prepend", "\u2581"}};
    if (file_.boolean("tokenizer.ggml.remove_extra_whitespaces").value_or(false)) {
        // Each run of other characters after one ▁, every space gone.
        replace("^ +| +\\z", "");
        replace(" {2,}", " ");
        steps.push_back(prepend);
    } else if (file_.boolean("tokenizer.ggml.add_space_prefix").value_or(false)) {
        // The ▁ goes before the first character that is not a space: a text of spaces gets none.
        steps.push_back(prepend);
        replace("^\u2581(?= *\\z)", "");
    }
    steps.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
    return steps;
}

// tokenizer.ggml.precompiled_charsmap's bytes, checked; nothing when the key is absent.
std::optional<std::string> GgufVocabReader::precompiled_charsmap() const {
    const char* key = "tokenizer.ggml.precompiled_charsmap";
    const std::optional<GgufArray> array = file_.array(key);
    if (!array) return std::nullopt;
    if (array->element_type() != GgufValueType::uint8 && array->element_type() != GgufValueType::int8)
        fail(key, std::string("is an array of ") + to_string(array->element_type()) + ", not of bytes");
    std::string bytes(array->size(), '\0');
    for (uint64_t i = 0; i < array->size(); ++i) bytes[i] = static_cast<char>(static_cast<int>(array->number(i)));
    try {
        Charsmap check(bytes);
    } catch (const Error& e) {
        fail(key, std::string("is not a charsmap: ") + e.what());
    }
    return bytes;
}

}  // namespace headscope
