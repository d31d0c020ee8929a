// The live forward: see live.h.
#include "headscope/compute/live.h"

#include <utility>

#include "headscope/base/clock.h"
#include "headscope/compute/text_batch.h"

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache,
                        const Progress& progress) {
    LiveResult result;
    const auto start = Clock::now();
    BatchTexts texts{request.texts, request.text_pairs, request.targets};
    texts.cut_long_texts = request.cut_long_texts;
    TextBatch encoded = text_batch(model, texts);
    result.token_ids = encoded.batch.token_ids;
    result.source_ids = encoded.batch.source_ids;
    result.token_types = std::move(encoded.token_types);
    result.second_starts = std::move(encoded.second_starts);
    result.cuts = std::move(encoded.cuts);
    result.tokenize_ms = ms_since(start);
    backend.forward(encoded.batch, request.options, result.attention, cache, progress);
    result.compute_ms = ms_since(start);
    return result;
}

}  // namespace headscope
