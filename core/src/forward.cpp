// What every forward shares: see forward.h.
#include "headscope/forward.h"

#include <string>

#include "headscope/error.h"

namespace headscope {

int head_count(const Config& config, int n_head) {
    const int NH = n_head ? n_head : config.n_head;
    if (NH <= 0 || config.n_embd % NH != 0)
        throw Error("head count " + std::to_string(NH) + " does not divide C = " + std::to_string(config.n_embd));
    return NH;
}

void validate_forward(const Model& model, const Batch& batch, const AttentionOptions& options) {
    const Config& cfg = model.config;
    if (batch.B() == 0) throw Error("no text given");
    for (int b = 0; b < batch.B(); ++b) {
        const auto& ids = batch.token_ids[b];
        if (ids.empty()) throw Error("text " + std::to_string(b + 1) + " is empty");
        if (ids.size() > static_cast<size_t>(cfg.n_positions))
            throw Error("text " + std::to_string(b + 1) + " has " + std::to_string(ids.size()) +
                        " tokens, more than the model's limit of " + std::to_string(cfg.n_positions));
        for (int32_t id : ids)
            if (id < 0 || id >= cfg.vocab_size)
                throw Error("token id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(cfg.vocab_size));
    }
    if (batch.pad_id < 0 || batch.pad_id >= cfg.vocab_size)
        throw Error("pad token id " + std::to_string(batch.pad_id) + " outside the vocabulary");
    const int NH = head_count(cfg, options.n_head);
    int previous = -1;
    for (int l : options.layers) {
        if (l < 0 || l >= cfg.n_layer)
            throw Error("layer " + std::to_string(l) + " out of range (the model has layers 0.." +
                        std::to_string(cfg.n_layer - 1) + ")");
        if (l <= previous) throw Error("layers must be ascending and unique");
        previous = l;
    }
    // Every returned map is kept: heads = C at a long T would ask for tens of GB.
    const double layers = options.layers.empty() ? cfg.n_layer : options.layers.size();
    const double map_bytes = layers * batch.B() * NH * double(batch.T()) * batch.T() * sizeof(float);
    if (map_bytes > max_attention_bytes)
        throw Error("the attention maps would need " + std::to_string(static_cast<int>(map_bytes / 1e9 + 0.5)) +
                    " GB (" + std::to_string(batch.B()) + " texts x " + std::to_string(NH) + " heads x " +
                    std::to_string(batch.T()) + "^2 tokens x " + std::to_string(static_cast<int>(layers)) +
                    " layers); the limit is " + std::to_string(static_cast<int>(max_attention_bytes / 1e9)) +
                    " GB: fewer heads, tokens or layers");
}

void set_up_result(const Config& config, const Batch& batch, const AttentionOptions& options, AttentionResult& result) {
    const int B = batch.B(), T = batch.T(), C = config.n_embd;
    result.B = B;
    result.T = T;
    result.NH = head_count(config, options.n_head);
    result.hs = C / result.NH;
    result.layers = options.layers;
    if (result.layers.empty())
        for (int l = 0; l < config.n_layer; ++l) result.layers.push_back(l);
    const size_t slots = result.layers.size();
    result.weights.resize(slots * B * result.NH * T * T);
    result.outputs.resize(options.capture_outputs ? slots * B * T * C : 0);
    result.fully_masked.resize(static_cast<size_t>(B) * T);
    for (int b = 0; b < B; ++b) {
        const int length = static_cast<int>(batch.token_ids[b].size());
        for (int t = 0; t < T; ++t)
            result.fully_masked[static_cast<size_t>(b) * T + t] = visible_end(options, t, length, T) == 0;
    }
}

void embed_text(const Model& model, const Batch& batch, int b, float* x) {
    const int T = batch.T(), C = model.config.n_embd;
    for (int t = 0; t < T; ++t) {
        const float* te = model.wte + static_cast<size_t>(batch.padded_id(b, t)) * C;
        const float* pe = model.wpe + static_cast<size_t>(t) * C;
        float* xt = x + static_cast<size_t>(t) * C;
        for (int c = 0; c < C; ++c) xt[c] = te[c] + pe[c];
    }
}

}  // namespace headscope
