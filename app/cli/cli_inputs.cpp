// headscope-cli's inputs: see cli_inputs.h.
#include "cli/cli_inputs.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "state/text_options.h"

namespace headscope {

// "I,J,..." as integers; an item that is not one fails naming `flag` and `what` it expects.
std::vector<int> parse_ints(const std::string& flag, const std::string& word, const std::string& what) {
    std::vector<int> values;
    size_t start = 0;
    while (start <= word.size()) {
        const size_t end = std::min(word.find(',', start), word.size());
        const std::string item = word.substr(start, end - start);
        int value = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
            throw Error(flag + ": '" + item + "' is not " + what);
        values.push_back(value);
        start = end + 1;
    }
    return values;
}

// Each --text with its --text-pair: the pair template's ids and token types.
TextBatch pair_batch(const Model& model, const CliOptions& opt) {
    check_text_options(model, opt.texts.size(), opt.text_pairs.size(), 0);
    BatchTexts texts{opt.texts, opt.text_pairs};
    texts.cut_long_texts = opt.truncate;
    return text_batch(model, texts);
}

namespace {

// The ids of --token-ids, one text's, each checked against the tokenizer's vocabulary.
std::vector<int32_t> given_token_ids(const Model& model, const std::string& word) {
    const int32_t V = std::min(model.config.vocab_size, model.tokenizer.vocab_size());
    std::vector<int32_t> ids;
    for (int id : parse_ints("--token-ids", word, "a token id (expected I,J,...)")) {
        if (id < 0 || id >= V)
            throw Error("--token-ids: " + std::to_string(id) + " is outside the vocabulary (0.." +
                        std::to_string(V - 1) + ")");
        ids.push_back(id);
    }
    return ids;
}

// The texts (or --token-ids) alone, or an encoder–decoder's sources with their targets.
TextBatch text_only_batch(const Model& model, const CliOptions& opt) {
    BatchTexts texts{opt.texts, {}, opt.targets, {}, opt.special, opt.truncate};
    if (!opt.token_ids.empty()) texts.ids = {given_token_ids(model, opt.token_ids)};
    check_text_options(model, texts.ids.empty() ? texts.texts.size() : texts.ids.size(), 0, opt.targets.size());
    return text_batch(model, texts);
}

}  // namespace

// The texts as the JSON names them: --text's, or the --token-ids text decoded.
std::vector<std::string> input_texts(const Model& model, const CliOptions& opt,
                                     const std::vector<std::vector<int32_t>>& ids) {
    if (opt.token_ids.empty()) return opt.texts;
    std::string text;
    for (int32_t id : ids.front()) text += model.tokenizer.token_bytes(id);
    return {text};
}

TextBatch forward_batch(const Model& model, const CliOptions& opt) {
    TextBatch batch = !opt.text_pairs.empty() ? pair_batch(model, opt) : text_only_batch(model, opt);
    for (const TextCut& cut : batch.cuts) std::fprintf(stderr, "headscope-cli: %s\n", cut.message().c_str());
    return batch;
}

}  // namespace headscope
