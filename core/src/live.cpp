// The live forward: see live.h.
#include "headscope/live.h"

#include <chrono>

#include "headscope/error.h"

namespace headscope {

LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request) {
    LiveResult result;
    const auto start = std::chrono::steady_clock::now();
    auto ms_since_start = [&] {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    for (size_t i = 0; i < request.texts.size(); ++i) {
        if (request.texts[i].empty()) throw Error("text " + std::to_string(i + 1) + " is empty");
        result.token_ids.push_back(model.tokenizer.encode(request.texts[i]));
    }
    result.tokenize_ms = ms_since_start();
    backend.forward(Batch{result.token_ids, model.config.eos_token_id}, request.options, result.attention);
    result.compute_ms = ms_since_start();
    return result;
}

}  // namespace headscope
