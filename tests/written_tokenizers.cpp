// Test support: written tokenizer.json files; see written_tokenizers.h.
#include "written_tokenizers.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "model_writer.h"

namespace headscope::test {

using json = nlohmann::json;

namespace {

const std::string meta = "\xE2\x96\x81";  // ▁

json make_unigram_tokenizer_json(UnigramLayout layout) {
    const bool t5 = layout == UnigramLayout::t5;
    json vocab = json::array();
    const std::vector<const char*> specials = t5 ? std::vector<const char*>{"<pad>", "</s>", "<unk>"}
                                                 : std::vector<const char*>{"<s>", "<pad>", "</s>", "<unk>"};
    for (const char* special : specials) vocab.push_back({special, 0.0});
    vocab.push_back({meta, -2.0});
    for (char c = '!'; c <= '~'; ++c) vocab.push_back({std::string(1, c), -8.0 - (c % 7) * 0.01});
    for (const auto& [token, id] : gpt2_vocab().items()) {
        const bool starts = token.rfind("\xC4\xA0", 0) == 0;  // Ġ
        const std::string word = starts ? token.substr(2) : token;
        if (word.size() < 2 || word.size() > 12) continue;
        bool letters = true;
        for (char c : word) letters &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (letters) vocab.push_back({starts ? meta + word : word, -3.0 - std::log(id.get<double>() + 2)});
    }
    const int mask = static_cast<int>(vocab.size());
    vocab.push_back({t5 ? "<extra_id_0>" : "<mask>", 0.0});  // T5's first sentinel, which masks a span
    std::vector<int> added_ids(specials.size());
    for (size_t i = 0; i < specials.size(); ++i) added_ids[i] = static_cast<int>(i);
    added_ids.push_back(mask);
    json added = json::array();
    for (int id : added_ids)
        added.push_back({{"id", id},
                         {"content", vocab[id][0]},
                         {"single_word", false},
                         {"lstrip", id == mask && !t5},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    const auto special = [](const char* token, int id) {
        return json{{"id", token}, {"ids", {id}}, {"tokens", {token}}};
    };
    const auto item = [](const char* kind, const char* id) { return json{{kind, {{"id", id}, {"type_id", 0}}}}; };
    // XLM-R's <s> A </s>; T5's A </s>.
    const json xlm_r_template = {
        {"type", "TemplateProcessing"},
        {"single", {item("SpecialToken", "<s>"), item("Sequence", "A"), item("SpecialToken", "</s>")}},
        {"pair", json::array()},
        {"special_tokens", {{"<s>", special("<s>", 0)}, {"</s>", special("</s>", 2)}}}};
    const json t5_template = {{"type", "TemplateProcessing"},
                              {"single", {item("Sequence", "A"), item("SpecialToken", "</s>")}},
                              {"pair", json::array()},
                              {"special_tokens", {{"</s>", special("</s>", 1)}}}};
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}}},
            {"pre_tokenizer",
             {{"type", "Metaspace"},
              {"replacement", meta},
              {"add_prefix_space", true},
              {"prepend_scheme", "always"},
              {"split", true}}},
            {"post_processor", t5 ? t5_template : xlm_r_template},
            {"decoder", {{"type", "Metaspace"}, {"replacement", meta}, {"add_prefix_space", true}}},
            {"model", {{"type", "Unigram"}, {"unk_id", t5 ? 2 : 3}, {"vocab", vocab}, {"byte_fallback", false}}}};
}

// RoBERTa's tokenizer.json shape: GPT-2's BPE, ByteLevel, its special tokens after GPT-2's ids.
json make_roberta_tokenizer_json() {
    std::ifstream merges_in(gpt2_merges_txt());
    json vocab = gpt2_vocab();
    json merges = json::array();
    std::string line;
    std::getline(merges_in, line);  // #version
    while (std::getline(merges_in, line))
        if (!line.empty()) merges.push_back(line);
    json added = json::array();
    for (const char* token : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}) {
        const int id = static_cast<int>(vocab.size());
        vocab[token] = id;
        added.push_back({{"id", id},
                         {"content", token},
                         {"single_word", false},
                         {"lstrip", std::string(token) == "<mask>"},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    }
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}}},
            {"post_processor",
             {{"type", "RobertaProcessing"},
              {"sep", {"</s>", vocab["</s>"]}},
              {"cls", {"<s>", vocab["<s>"]}},
              {"trim_offsets", true},
              {"add_prefix_space", false}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

}  // namespace

const json& unigram_tokenizer_json(UnigramLayout layout) {
    static const json xlm_r = make_unigram_tokenizer_json(UnigramLayout::xlm_r);
    static const json t5 = make_unigram_tokenizer_json(UnigramLayout::t5);
    return layout == UnigramLayout::t5 ? t5 : xlm_r;
}

const json& roberta_tokenizer_json() {
    static const json tokenizer = make_roberta_tokenizer_json();
    return tokenizer;
}

}  // namespace headscope::test
