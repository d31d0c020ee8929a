// The logit lens of a long text (long_maps.h): only for the positions in
// view, asked of a worker as the maps are. The long forward keeps no
// residual (every layer's rows would be T x C floats a layer: 1 GB for a 1B
// model at 8,192 tokens), so the lens runs the forward again up to the last
// position asked, on a CPU backend and prefix cache of its own: the rows
// before the first asked without the output embedding (AttentionOptions::
// lens_from), in chunks, so that its buffers stay a chunk's; the cache then
// holds the text up to there, and a later ask reuses it: moving along the
// text computes only the rows between. Its memory is the cache's keys and
// values (L x T x 2 KV width floats: 512 MB for Llama-3.2-1B at 8,192 tokens).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/progress.h"
#include "headscope/base/worker.h"
#include "headscope/compute/backend.h"
#include "session/long_maps.h"

namespace headscope {

// The lens of text b's positions [first, end), the top k of each returned layer.
struct LensAsk {
    int b = 0, first = 0, end = 0, k = 5;
    bool operator==(const LensAsk&) const = default;
};

struct LensAnswer {
    LensAsk ask;
    std::vector<int> layers;       // the returned layers, as the forward's
    std::vector<Prediction> tops;  // (layers.size(), end - first, k)
    const Prediction* at(int slot, int t) const {
        return tops.data() + (static_cast<size_t>(slot) * (ask.end - ask.first) + t - ask.first) * ask.k;
    }
    double ms = 0;  // the compute's time
};

// How many positions the forward before the first asked computes at once.
inline constexpr int lens_fill_chunk = 512;

// The lens `ask` asks of `kept`'s text, by `backend` (`kept`'s model's
// weights loaded) over `cache` (kept for the next ask). Throws Cancelled
// when `progress` does, between the chunks (the cache stays whole).
LensAnswer compute_lens(Backend& backend, PrefixCache& cache, const KeptMaps& kept, const LensAsk& ask,
                        const Progress& progress = {});

// The window's: the newest lens asked, computed on a worker of its own.
class LongLens {
public:
    explicit LongLens(std::function<void()> wake) : worker_(std::move(wake)) {}
    // Another model: a backend and cache for it, nothing asked.
    void open(std::shared_ptr<const Model> model);
    // Frees the cache and the answer (the text shown is not long).
    void forget();
    // Computes `ask` of `kept`, unless it is the one asked last of the same forward.
    void ask(std::shared_ptr<const KeptMaps> kept, const LensAsk& ask);
    // Takes the worker's answer: true when answer() changed.
    bool collect();
    // The newest answer of what was asked last, null before one; pending while one is computed.
    const LensAnswer* answer() const { return answer_ ? &*answer_ : nullptr; }
    bool pending() const { return worker_.busy(); }
    uint64_t answered() const { return answered_; }          // how many answers came, so far
    const std::string& message() const { return message_; }  // why the last ask failed; "" when it did not

private:
    std::shared_ptr<Backend> backend_;
    std::shared_ptr<PrefixCache> cache_;
    std::shared_ptr<const KeptMaps> asked_of_;
    std::optional<LensAsk> asked_;
    std::optional<LensAnswer> answer_;
    std::string message_;
    uint64_t answered_ = 0;
    Worker<LensAnswer> worker_;  // last: its thread stops before the members its jobs read
};

}  // namespace headscope
