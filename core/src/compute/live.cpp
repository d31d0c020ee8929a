// The live forward: see live.h.
#include "headscope/compute/live.h"

#include "headscope/base/clock.h"

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache,
                        const Progress& progress, PrefixCache* intact_cache) {
    LiveResult result;
    const auto start = Clock::now();
    result.token_ids = model.tokenizer.encode_texts(request.texts);
    result.tokenize_ms = ms_since(start);
    const Batch batch{result.token_ids, model.config.pad_id()};
    backend.forward(batch, request.options, result.attention, cache, progress);
    if (!request.options.ablate.empty() && request.options.top_k > 0) {
        AttentionOptions intact = request.options;
        intact.ablate.clear(), intact.lens_k = 0, intact.contributions = false, intact.capture_outputs = false;
        intact.layers = {model.config.n_layer - 1};
        backend.forward(batch, intact, result.intact, intact_cache, progress);
    }
    result.compute_ms = ms_since(start);
    return result;
}

}  // namespace headscope
