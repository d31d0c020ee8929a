// The live forward: see live.h.
#include "headscope/compute/live.h"

#include <algorithm>
#include <utility>

#include "headscope/base/clock.h"

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache,
                        const Progress& progress) {
    LiveResult result;
    const auto start = Clock::now();
    const bool pairs = std::any_of(request.text_pairs.begin(), request.text_pairs.end(),
                                   [](const std::string& pair) { return !pair.empty(); });
    if (pairs) {
        for (size_t b = 0; b < request.texts.size(); ++b) {
            const std::string& second = b < request.text_pairs.size() ? request.text_pairs[b] : std::string();
            Tokenizer::Pair pair = second.empty() ? Tokenizer::Pair{model.tokenizer.encode(request.texts[b]), {}}
                                                  : model.tokenizer.encode_pair(request.texts[b], second);
            pair.types.resize(pair.ids.size(), 0);
            result.second_starts.push_back(pair.second_start);
            result.token_ids.push_back(std::move(pair.ids));
            result.token_types.push_back(std::move(pair.types));
        }
    } else if (model.config.is_encoder_decoder()) {
        result.source_ids = model.tokenizer.encode_texts(request.texts);
        for (size_t b = 0; b < request.texts.size(); ++b)
            result.token_ids.push_back(decoder_input_ids(model, b < request.targets.size() ? request.targets[b] : ""));
    } else {
        result.token_ids = model.tokenizer.encode_texts(request.texts);
    }
    if (request.cut_long_texts) {
        Batch whole{std::move(result.token_ids), model.config.pad_id(), std::move(result.token_types),
                    std::move(result.source_ids)};
        result.cuts = cut_to_context(model.config, whole);
        result.token_ids = std::move(whole.token_ids);
        result.token_types = std::move(whole.token_types);
        result.source_ids = std::move(whole.source_ids);
    }
    result.tokenize_ms = ms_since(start);
    // A model with one token type (RoBERTa) is given none, as transformers does.
    Batch batch{result.token_ids, model.config.pad_id()};
    if (model.config.type_vocab_size > 1) batch.token_types = result.token_types;
    batch.source_ids = result.source_ids;
    backend.forward(batch, request.options, result.attention, cache, progress);
    result.compute_ms = ms_since(start);
    return result;
}

}  // namespace headscope
