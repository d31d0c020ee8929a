// The live forward: see live.h.
#include "headscope/live.h"

#include <chrono>

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache,
                        const Progress& progress) {
    LiveResult result;
    const auto start = std::chrono::steady_clock::now();
    auto ms_since_start = [&] {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    result.token_ids = model.tokenizer.encode_texts(request.texts);
    result.tokenize_ms = ms_since_start();
    backend.forward(Batch{result.token_ids, model.config.pad_id()}, request.options, result.attention, cache, progress);
    result.compute_ms = ms_since_start();
    return result;
}

}  // namespace headscope
