// The live forward: see live.h.
#include "headscope/compute/live.h"

#include "headscope/base/clock.h"
#include "headscope/compute/text_batch.h"

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache,
                        const Progress& progress) {
    LiveResult result;
    const auto start = Clock::now();
    TextBatch encoded = text_batch(model, {request.texts, request.text_pairs, request.targets});
    result.token_ids = encoded.batch.token_ids;
    result.source_ids = encoded.batch.source_ids;
    result.token_types = std::move(encoded.token_types);
    result.second_starts = std::move(encoded.second_starts);
    result.tokenize_ms = ms_since(start);
    backend.forward(encoded.batch, request.options, result.attention, cache, progress);
    result.compute_ms = ms_since(start);
    return result;
}

}  // namespace headscope
