// Test support: a BERT tokenizer.json; see bert_tokenizer.h.
#include "bert_tokenizer.h"

#include <fstream>

#include "model_writer.h"

namespace headscope::test {

using json = nlohmann::json;

namespace {

// GPT-2's all-letter tokens, lowercased: "Ġword" starts a word, "word" continues one ("##word").
json make_wordpiece_vocab() {
    json vocab = json::object();
    for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) vocab[special] = vocab.size();
    for (const char* piece : {"中", "文", "字", "!", ",", ".", "?", "'", "-", "(", ")", "$", "##s", "a", "e"})
        vocab[piece] = vocab.size();
    for (const auto& [token, id] : gpt2_vocab().items()) {
        const bool starts = token.rfind("\xC4\xA0", 0) == 0;  // Ġ
        std::string word = starts ? token.substr(2) : token;
        if (word.empty() || word.size() > 12) continue;
        bool letters = true;
        for (char& c : word) {
            letters &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        if (!letters) continue;
        const std::string entry = starts ? word : "##" + word;
        if (!vocab.contains(entry)) vocab[entry] = vocab.size();
    }
    return vocab;
}

}  // namespace

const json& wordpiece_vocab() {
    static const json vocab = make_wordpiece_vocab();
    return vocab;
}

json bert_tokenizer_json(const json& vocab) {
    const auto special = [&](const char* token) {
        return json{{"id", vocab[token]}, {"content", token},    {"single_word", false}, {"lstrip", false},
                    {"rstrip", false},    {"normalized", false}, {"special", true}};
    };
    return {
        {"version", "1.0"},
        {"added_tokens", {special("[PAD]"), special("[UNK]"), special("[CLS]"), special("[SEP]"), special("[MASK]")}},
        {"normalizer",
         {{"type", "BertNormalizer"},
          {"clean_text", true},
          {"handle_chinese_chars", true},
          {"strip_accents", nullptr},
          {"lowercase", true}}},
        {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
        {"post_processor",
         {{"type", "TemplateProcessing"},
          {"single",
           {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
            {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
          {"pair",
           {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
            {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "B"}, {"type_id", 1}}}},
            {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 1}}}}}},
          {"special_tokens",
           {{"[CLS]", {{"id", "[CLS]"}, {"ids", {vocab["[CLS]"]}}, {"tokens", {"[CLS]"}}}},
            {"[SEP]", {{"id", "[SEP]"}, {"ids", {vocab["[SEP]"]}}, {"tokens", {"[SEP]"}}}}}}}},
        {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
        {"model",
         {{"type", "WordPiece"},
          {"unk_token", "[UNK]"},
          {"continuing_subword_prefix", "##"},
          {"max_input_chars_per_word", 100},
          {"vocab", vocab}}}};
}

}  // namespace headscope::test
