// The live forward: see live.h.
#include "headscope/compute/live.h"

#include "headscope/base/clock.h"

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache,
                        const Progress& progress) {
    LiveResult result;
    const auto start = Clock::now();
    result.token_ids = model.tokenizer.encode_texts(request.texts);
    result.tokenize_ms = ms_since(start);
    backend.forward(Batch{result.token_ids, model.config.pad_id()}, request.options, result.attention, cache, progress);
    result.compute_ms = ms_since(start);
    return result;
}

}  // namespace headscope
