// The logit lens of a long text (long_maps.h): only for the positions in
// view, asked of a worker as the maps are. The long forward keeps no
// residual (every layer's rows would be T x C floats a layer: 1 GB for a 1B
// model at 8,192 tokens), so the lens runs the forward again up to the last
// position asked, computing only the positions asked: the keys and values
// of the rows before them are read from the live forward's prefix cache, a
// layer at a time, into a store of one layer (ForwardRequest::cached_rows:
// 32 MB for Llama-3.2-1B at 8,192 tokens, where a cache of every layer's
// would be 512 MB, past the memory a long text is given). Where the live
// cache does not hold them because a newer forward is rewriting them (the
// text edited before the positions asked, another option, a generation),
// the lens waits for that forward, whose text needs a lens of its own
// anyway. The lens never computes those rows itself: a forward of them all
// at once would hold a second set of the live forward's buffers (2.4 GB
// over the file and the cache at 8,192 tokens of the 1B shape), and in
// chunks a cache of every layer's. Where no forward computes and the cache
// still does not hold them (a forward that failed part way) it says so.
// Its forwards rotate as the whole text's did (ForwardRequest::text_length:
// LongRoPE's factors).
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
    int read = 0;        // the rows before the first asked read from the live cache (0: none, or computed)
    bool waits = false;  // no lens: the live cache did not hold those rows and a forward was rewriting them
    double ms = 0;       // the compute's time
};

// The lens `ask` asks of `kept`'s text, by `forward` on `kept`'s model: the
// rows before the first asked read from `live` (the live forward's cache;
// null: none) where it holds them; else an answer that `waits` where
// `live_computing` says a live forward is computing or its outcome not yet
// taken, and else throws Error. Positions from 0, and an encoder's text,
// are computed whole. Throws Cancelled when `progress` does.
LensAnswer compute_lens(CpuForward& forward, const PrefixCache* live, const KeptMaps& kept, const LensAsk& ask,
                        const std::function<bool()>& live_computing = {}, const Progress& progress = {});

// The window's: the newest lens asked, computed on a worker of its own.
class LongLens {
public:
    explicit LongLens(std::function<void()> wake) : worker_(std::move(wake)) {}
    // Another model: the live forward's cache on it, which the lens reads,
    // and whether that forward computes (compute_lens); nothing asked.
    // `live_computing` is called on the window's thread and the lens's worker.
    void open(std::shared_ptr<const PrefixCache> live, std::function<bool()> live_computing);
    // Frees the lens's forward's buffers and the answer (the text shown is not long).
    void forget();
    // Computes `ask` of `kept`, unless it is the one asked last of the same
    // forward: again only once the live forward it waited for is done.
    void ask(std::shared_ptr<const KeptMaps> kept, const LensAsk& ask);
    // Takes the worker's answer: true when answer() changed.
    bool collect();
    // The newest answer of what was asked last, null before one; pending while one is computed.
    const LensAnswer* answer() const { return answer_ ? &*answer_ : nullptr; }
    bool pending() const { return worker_.busy(); }
    // What was asked last waits for the live forward (LensAnswer::waits); answer() is an older ask's.
    bool waiting() const { return waiting_; }
    uint64_t answered() const { return answered_; }          // how many answers came, so far
    const std::string& message() const { return message_; }  // why the last ask failed; "" when it did not

private:
    std::shared_ptr<CpuForward> forward_;
    std::shared_ptr<const PrefixCache> live_;
    std::function<bool()> live_computing_;
    // What the last ask was of, not held: a long text's kept rows (345 MB at 8,192 tokens on four layers
    // of the 1B shape) go as soon as the view lets go of them, not at the lens's next ask.
    std::weak_ptr<const KeptMaps> asked_of_;
    std::optional<LensAsk> asked_;
    bool waiting_ = false;
    std::optional<LensAnswer> answer_;
    std::string message_;
    uint64_t answered_ = 0;
    void forget_asks();          // a new CpuForward, nothing asked or answered
    Worker<LensAnswer> worker_;  // last: its thread stops before the members its jobs read
};

}  // namespace headscope
