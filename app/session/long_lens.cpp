// A long text's lens of the positions in view: see long_lens.h.
#include "session/long_lens.h"

#include <algorithm>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/prefix_cache.h"

namespace headscope {

namespace {

// Text b's first n tokens, a batch of their own.
Batch first_tokens(const KeptMaps& kept, int b, int n) {
    const std::vector<int32_t>& ids = kept.batch.token_ids.at(b);
    return Batch{{std::vector<int32_t>(ids.begin(), ids.begin() + n)}, kept.batch.pad_id};
}

}  // namespace

LensAnswer compute_lens(Backend& backend, PrefixCache& cache, const KeptMaps& kept, const LensAsk& ask,
                        const Progress& progress) {
    const auto start = Clock::now();
    const int length = static_cast<int>(kept.batch.token_ids.at(ask.b).size());
    if (ask.first < 0 || ask.first >= ask.end || ask.end > length || ask.k < 1)
        throw Error("the lens asks for positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end) +
                    " of a text of " + std::to_string(length));
    AttentionOptions options = kept.options;
    options.maps = Maps::none, options.summaries = false, options.new_rows_only = false;
    options.top_k = 0, options.lens_k = ask.k, options.lens_from = ask.first;
    AttentionResult result;
    if (prefix_reuse_refusal(options).empty()) {
        // The rows before the first asked, from where the cache's tokens part
        // from the text's, without the lens: then the cache holds them exactly
        // (a text shorter than the cache's computes its last row again), and
        // the rows asked are the only ones the last forward computes.
        const std::vector<int32_t>& ids = kept.batch.token_ids[ask.b];
        const std::vector<int32_t> none;
        const std::vector<int32_t>& cached = cache.token_ids.empty() ? none : cache.token_ids[0];
        int done = static_cast<int>(std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first -
                                    cached.begin());
        if (cache.model != kept.model.get() || !(cache.options == options)) done = 0;
        cache.rows_planned = ask.end;
        for (int to = std::min(done, ask.first); to < ask.first;) {
            to = std::min(to + lens_fill_chunk, ask.first);
            report_progress(progress, "the rows before the lens", to, ask.first, ProgressUnit::steps);
            backend.forward(first_tokens(kept, ask.b, to), options, result, &cache);
        }
        if (ask.first > 0 && done > ask.first)
            backend.forward(first_tokens(kept, ask.b, ask.first), options, result, &cache);
        backend.forward(first_tokens(kept, ask.b, ask.end), options, result, ask.first > 0 ? &cache : nullptr);
    } else {  // every row sees the whole text (an encoder's): the whole text, read out from the first asked
        backend.forward(first_tokens(kept, ask.b, length), options, result, nullptr, progress);
    }
    LensAnswer answer{ask, result.layers, {}};
    const int n = ask.end - ask.first;
    answer.tops.resize(result.layers.size() * n * ask.k);
    for (size_t slot = 0; slot < result.layers.size(); ++slot)
        for (int t = ask.first; t < ask.end; ++t)
            std::copy_n(result.lens_at(static_cast<int>(slot), 0, t), ask.k,
                        answer.tops.data() + (slot * n + t - ask.first) * ask.k);
    answer.ms = ms_since(start);
    return answer;
}

void LongLens::open(std::shared_ptr<const Model> model) {
    backend_ = std::shared_ptr<Backend>(make_cpu_backend());
    backend_->load_weights(*model);
    cache_ = std::make_shared<PrefixCache>();
    asked_of_.reset(), asked_.reset(), answer_.reset(), message_.clear();
}

void LongLens::forget() {
    if (!asked_) return;
    cache_ = std::make_shared<PrefixCache>();  // a running job keeps the one it has
    asked_of_.reset(), asked_.reset(), answer_.reset(), message_.clear();
}

void LongLens::ask(std::shared_ptr<const KeptMaps> kept, const LensAsk& ask) {
    if (!kept || (asked_of_ == kept && asked_ == ask)) return;
    asked_of_ = kept, asked_ = ask;
    worker_.submit([backend = backend_, cache = cache_, kept = std::move(kept), ask](std::stop_token stop) {
        const Progress progress = [stop](const ProgressReport&) {
            if (stop.stop_requested()) throw Cancelled();
        };
        return compute_lens(*backend, *cache, *kept, ask, progress);
    });
}

bool LongLens::collect() {
    std::optional<Worker<LensAnswer>::Outcome> done = worker_.take();
    if (!done) return false;
    message_ = done->error;
    if (!done->error.empty() || asked_ != done->result.ask) return false;
    answer_ = std::move(done->result);
    ++answered_;
    return true;
}

}  // namespace headscope
