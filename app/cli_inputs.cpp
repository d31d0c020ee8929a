// headscope-cli's inputs: see cli_inputs.h.
#include "cli_inputs.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "headscope/base/error.h"
#include "headscope/compute/forward.h"

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
Batch pair_batch(const Model& model, const CliOptions& opt) {
    if (!model.config.is_encoder())
        throw Error("--text-pair: sentence pairs are for encoders; this model (" + model.config.architecture + ") is " +
                    (model.config.is_encoder_decoder() ? "an encoder-decoder" : "a decoder"));
    if (opt.text_pairs.size() != opt.texts.size())
        throw Error("--text-pair: " + std::to_string(opt.text_pairs.size()) + " given for " +
                    std::to_string(opt.texts.size()) + " texts (one for each --text)");
    Batch batch{{}, model.config.pad_id()};
    for (size_t i = 0; i < opt.texts.size(); ++i) {
        Tokenizer::Pair pair = model.tokenizer.encode_pair(opt.texts[i], opt.text_pairs[i]);
        batch.token_ids.push_back(std::move(pair.ids));
        batch.token_types.push_back(std::move(pair.types));
    }
    return batch;
}

// One text's ids from --token-ids, each checked against the tokenizer's
// vocabulary, or the ids of the --text texts.
std::vector<std::vector<int32_t>> input_ids(const Model& model, const CliOptions& opt) {
    if (!opt.text_pairs.empty()) throw Error("--text-pair: only attention and tokenize take sentence pairs");
    if (opt.token_ids.empty()) return model.tokenizer.encode_texts(opt.texts, opt.special);
    const int32_t V = std::min(model.config.vocab_size, model.tokenizer.vocab_size());
    std::vector<int32_t> ids;
    for (int id : parse_ints("--token-ids", opt.token_ids, "a token id (expected I,J,...)")) {
        if (id < 0 || id >= V)
            throw Error("--token-ids: " + std::to_string(id) + " is outside the vocabulary (0.." +
                        std::to_string(V - 1) + ")");
        ids.push_back(id);
    }
    return {ids};
}

// The texts as the JSON names them: --text's, or the --token-ids text decoded.
std::vector<std::string> input_texts(const Model& model, const CliOptions& opt,
                                     const std::vector<std::vector<int32_t>>& ids) {
    if (opt.token_ids.empty()) return opt.texts;
    std::string text;
    for (int32_t id : ids.front()) text += model.tokenizer.token_bytes(id);
    return {text};
}

namespace {

// Each --text (or --token-ids) as a source, with its --target after the decoder's start token.
Batch seq2seq_batch(const Model& model, const CliOptions& opt) {
    Batch batch{{}, model.config.pad_id()};
    batch.source_ids = input_ids(model, opt);
    if (!opt.targets.empty() && opt.targets.size() != batch.source_ids.size())
        throw Error("--target: " + std::to_string(opt.targets.size()) + " given for " +
                    std::to_string(batch.source_ids.size()) + " texts (one for each --text, or none)");
    for (size_t i = 0; i < batch.source_ids.size(); ++i)
        batch.token_ids.push_back(decoder_input_ids(model, opt.targets.empty() ? "" : opt.targets[i]));
    return batch;
}

}  // namespace

Batch forward_batch(const Model& model, const CliOptions& opt) {
    if (!opt.targets.empty() && !model.config.is_encoder_decoder())
        throw Error(std::string("--target: a target is for encoder-decoders; this model (") +
                    model.config.architecture + ") is " + (model.config.is_encoder() ? "an encoder" : "a decoder"));
    Batch batch = !opt.text_pairs.empty()             ? pair_batch(model, opt)
                  : model.config.is_encoder_decoder() ? seq2seq_batch(model, opt)
                                                      : Batch{input_ids(model, opt), model.config.pad_id()};
    if (opt.truncate)
        for (const TextCut& cut : cut_to_context(model.config, batch))
            std::fprintf(stderr, "headscope-cli: %s\n", cut.message().c_str());
    return batch;
}

}  // namespace headscope
