// The logit lens of a long text (long_maps.h): only for the positions in
// view, asked of a worker as the maps are. The long forward keeps no
// residual (every layer's rows would be T x C floats a layer: 1 GB for a 1B
// model at 8,192 tokens), so the lens runs the forward again up to the last
// position asked, computing only the positions asked: the keys and values
// of the rows before them are read from the live forward's prefix cache, a
// layer at a time, into a store of one layer (ForwardRequest::cached_rows:
// 32 MB for Llama-3.2-1B at 8,192 tokens, where a cache of every layer's
// would be 512 MB). Where the live cache no longer holds them (the text was
// edited before the positions asked, a keystroke's forward cut them, the
// cache is another model's or options'), the lens computes them as the
// forward before the first asked without the output embedding
// (AttentionOptions::lens_from), in chunks, over a prefix cache of its own,
// which a later ask reuses and which is freed once the live cache serves again.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/progress.h"
#include "headscope/base/worker.h"
#include "headscope/compute/cpu_forward.h"
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
    int read = 0;   // the rows before the first asked read from the live cache (0: none, or computed)
    double ms = 0;  // the compute's time
};

// How many positions the forward before the first asked computes at once.
inline constexpr int lens_fill_chunk = 512;

// The lens `ask` asks of `kept`'s text, by `forward` on `kept`'s model: the
// rows before the first asked read from `live` (the live forward's cache;
// null: none) where it holds them, else computed over `own` (kept for the
// next ask; cleared when `live` serves). Throws Cancelled when `progress`
// does, between the layers or the chunks (`own` stays whole).
LensAnswer compute_lens(CpuForward& forward, const PrefixCache* live, PrefixCache& own, const KeptMaps& kept,
                        const LensAsk& ask, const Progress& progress = {});

// The window's: the newest lens asked, computed on a worker of its own.
class LongLens {
public:
    explicit LongLens(std::function<void()> wake) : worker_(std::move(wake)) {}
    // Another model: the live forward's cache on it, which the lens reads; nothing asked.
    void open(std::shared_ptr<const PrefixCache> live);
    // Frees the lens's stores and the answer (the text shown is not long).
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
    std::shared_ptr<CpuForward> forward_;
    std::shared_ptr<const PrefixCache> live_;
    std::shared_ptr<PrefixCache> own_;
    // What the last ask was of, not held: a long text's kept rows (345 MB at 8,192 tokens on four layers
    // of the 1B shape) go as soon as the view lets go of them, not at the lens's next ask.
    std::weak_ptr<const KeptMaps> asked_of_;
    std::optional<LensAsk> asked_;
    std::optional<LensAnswer> answer_;
    std::string message_;
    uint64_t answered_ = 0;
    Worker<LensAnswer> worker_;  // last: its thread stops before the members its jobs read
};

}  // namespace headscope
