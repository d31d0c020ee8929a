// A long text's lens of the positions in view: see long_lens.h.
#include "session/long_lens.h"

#include <algorithm>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/prefix_cache.h"

namespace headscope {

namespace {

// The forward of text b's first `tokens` tokens, rotated as the whole
// batch's (ForwardRequest::text_length), the keys and values of the rows
// before the first asked read from `live` where set (ForwardRequest::cached_rows).
void run_lens_forward(CpuForward& forward, const KeptMaps& kept, const LensAsk& ask, int tokens,
                      const AttentionOptions& options, const PrefixCache* live, AttentionResult& result,
                      const Progress& progress) {
    const std::vector<int32_t>& ids = kept.batch.token_ids.at(ask.b);
    ForwardRequest request;
    request.text_length = kept.batch.T();
    if (live) request.cached_rows = {live, ask.first};
    forward.run(*kept.model, Batch{{std::vector<int32_t>(ids.begin(), ids.begin() + tokens)}, kept.batch.pad_id},
                options, result, CpuForward::Heads::batched, nullptr, progress, request);
}

// run_lens_forward with the rows before the first asked read from `live`:
// false (the result to be discarded) where it does not hold them.
bool read_live_rows(CpuForward& forward, const KeptMaps& kept, const LensAsk& ask, const AttentionOptions& options,
                    const PrefixCache& live, AttentionResult& result, const Progress& progress) {
    try {
        run_lens_forward(forward, kept, ask, ask.end, options, &live, result, progress);
        return true;
    } catch (const RowsGone&) {
        return false;
    }
}

}  // namespace

LensAnswer compute_lens(CpuForward& forward, const PrefixCache* live, const KeptMaps& kept, const LensAsk& ask,
                        const std::function<bool()>& live_computing, const Progress& progress) {
    const auto start = Clock::now();
    const int length = static_cast<int>(kept.batch.token_ids.at(ask.b).size());
    if (ask.first < 0 || ask.first >= ask.end || ask.end > length || ask.k < 1)
        throw Error("the lens asks for positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end) +
                    " of a text of " + std::to_string(length));
    AttentionOptions options = kept.options;
    options.maps = Maps::none, options.summaries = false, options.new_rows_only = false;
    options.top_k = 0, options.lens_k = ask.k, options.lens_from = ask.first;
    LensAnswer answer{ask, {}, {}};
    AttentionResult result;
    // Where no prefix can be reused (an encoder's text, the causal mask off,
    // the naive-view split, mean knock-outs) every row sees the whole text:
    // all of it, a second whole forward beside the live one's buffers.
    if (!prefix_reuse_refusal(options).empty()) {
        run_lens_forward(forward, kept, ask, length, options, nullptr, result, progress);
    } else if (ask.first == 0) {
        run_lens_forward(forward, kept, ask, ask.end, options, nullptr, result, progress);
    } else if (live && read_live_rows(forward, kept, ask, options, *live, result, progress)) {
        answer.read = ask.first;
    } else if (live_computing && live_computing()) {
        answer.waits = true;
        answer.ms = ms_since(start);
        return answer;
    } else {
        throw Error("the live forward's cache does not hold the keys and values of the " + std::to_string(ask.first) +
                    " positions before: the text's next forward computes them");
    }
    answer.layers = result.layers;
    const int n = ask.end - ask.first;
    answer.tops.resize(result.layers.size() * n * ask.k);
    for (size_t slot = 0; slot < result.layers.size(); ++slot)
        for (int t = ask.first; t < ask.end; ++t)
            std::copy_n(result.lens_at(static_cast<int>(slot), 0, t), ask.k,
                        answer.tops.data() + (slot * n + t - ask.first) * ask.k);
    answer.ms = ms_since(start);
    return answer;
}

void LongLens::open(std::shared_ptr<const PrefixCache> live, std::function<bool()> live_computing) {
    live_ = std::move(live), live_computing_ = std::move(live_computing);
    forget_asks();
}

void LongLens::forget() {
    if (asked_) forget_asks();
}

void LongLens::forget_asks() {
    forward_ = std::make_shared<CpuForward>();  // a running job keeps the one it has
    asked_of_.reset(), asked_.reset(), answer_.reset(), message_.clear();
    waiting_ = false;
}

void LongLens::ask(std::shared_ptr<const KeptMaps> kept, const LensAsk& ask) {
    const bool waited_for = waiting_ && !live_computing_();  // the forward it waited for is done
    if (!kept) {  // the forward that had the rows lent failed: no text of its own to ask of
        if (waited_for) waiting_ = false, message_ = "the text's forward, which the lens waited for, did not complete";
        return;
    }
    const bool same_kept = !asked_of_.owner_before(kept) && !kept.owner_before(asked_of_) && !asked_of_.expired();
    if (same_kept && asked_ == ask && !waited_for) return;
    asked_of_ = kept, asked_ = ask, waiting_ = false;
    worker_.submit([forward = forward_, live = live_, live_computing = live_computing_, kept = std::move(kept),
                    ask](std::stop_token stop) {
        const Progress progress = [stop](const ProgressReport&) {
            if (stop.stop_requested()) throw Cancelled();
        };
        return compute_lens(*forward, live.get(), *kept, ask, live_computing, progress);
    });
}

bool LongLens::collect() {
    std::optional<Worker<LensAnswer>::Outcome> done = worker_.take();
    if (!done) return false;
    message_ = done->error;
    if (!done->error.empty() || asked_ != done->result.ask) return false;
    if (done->result.waits) {  // the answer shown stays until the live forward's text is asked
        waiting_ = true;
        return false;
    }
    answer_ = std::move(done->result);
    ++answered_;
    return true;
}

}  // namespace headscope
