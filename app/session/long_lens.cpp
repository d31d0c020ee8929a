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

// The forward of the positions asked, the keys and values before them read
// from `live`: false (the result to be discarded) where `live` no longer holds them.
bool read_live_rows(CpuForward& forward, const PrefixCache& live, const KeptMaps& kept, const LensAsk& ask,
                    const AttentionOptions& options, AttentionResult& result, const Progress& progress) {
    ForwardRequest request;
    request.cached_rows = {&live, ask.first};
    try {
        forward.run(*kept.model, first_tokens(kept, ask.b, ask.end), options, result, CpuForward::Heads::batched,
                    nullptr, progress, request);
        return true;
    } catch (const RowsGone&) {
        return false;
    }
}

// The rows before the first asked, from where `own`'s tokens part from the
// text's, without the lens: then `own` holds them exactly (a text shorter
// than its tokens computes its last row again), and the rows asked are the
// only ones the last forward computes.
void compute_over_own_cache(CpuForward& forward, PrefixCache& own, const KeptMaps& kept, const LensAsk& ask,
                            const AttentionOptions& options, AttentionResult& result, const Progress& progress) {
    const Model& model = *kept.model;
    const std::vector<int32_t>& ids = kept.batch.token_ids[ask.b];
    const std::vector<int32_t> none;
    const std::vector<int32_t>& cached = own.token_ids.empty() ? none : own.token_ids[0];
    int done =
        static_cast<int>(std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first - cached.begin());
    if (own.model != &model || !(own.options == options)) done = 0;
    own.rows_planned = ask.end;
    const auto run = [&](int n, PrefixCache* cache) {
        forward.run(model, first_tokens(kept, ask.b, n), options, result, CpuForward::Heads::batched, cache);
    };
    for (int to = std::min(done, ask.first); to < ask.first;) {
        to = std::min(to + lens_fill_chunk, ask.first);
        report_progress(progress, "the rows before the lens", to, ask.first, ProgressUnit::steps);
        run(to, &own);
    }
    if (ask.first > 0 && done > ask.first) run(ask.first, &own);
    run(ask.end, ask.first > 0 ? &own : nullptr);
}

}  // namespace

LensAnswer compute_lens(CpuForward& forward, const PrefixCache* live, PrefixCache& own, const KeptMaps& kept,
                        const LensAsk& ask, const Progress& progress) {
    const auto start = Clock::now();
    const int length = static_cast<int>(kept.batch.token_ids.at(ask.b).size());
    if (ask.first < 0 || ask.first >= ask.end || ask.end > length || ask.k < 1)
        throw Error("the lens asks for positions " + std::to_string(ask.first) + " to " + std::to_string(ask.end) +
                    " of a text of " + std::to_string(length));
    AttentionOptions options = kept.options;
    options.maps = Maps::none, options.summaries = false, options.new_rows_only = false;
    options.top_k = 0, options.lens_k = ask.k, options.lens_from = ask.first;
    AttentionResult result;
    int read = 0;
    if (!prefix_reuse_refusal(options).empty()) {  // every row sees the whole text (an encoder's): all of it
        forward.run(*kept.model, first_tokens(kept, ask.b, length), options, result, CpuForward::Heads::batched,
                    nullptr, progress);
    } else if (live && ask.first > 0 && read_live_rows(forward, *live, kept, ask, options, result, progress)) {
        read = ask.first;
        own.clear();  // the live cache serves: the lens's own rows go
    } else {
        compute_over_own_cache(forward, own, kept, ask, options, result, progress);
    }
    LensAnswer answer{ask, result.layers, {}};
    const int n = ask.end - ask.first;
    answer.tops.resize(result.layers.size() * n * ask.k);
    for (size_t slot = 0; slot < result.layers.size(); ++slot)
        for (int t = ask.first; t < ask.end; ++t)
            std::copy_n(result.lens_at(static_cast<int>(slot), 0, t), ask.k,
                        answer.tops.data() + (slot * n + t - ask.first) * ask.k);
    answer.read = read;
    answer.ms = ms_since(start);
    return answer;
}

void LongLens::open(std::shared_ptr<const PrefixCache> live) {
    live_ = std::move(live);
    forward_ = std::make_shared<CpuForward>();
    own_ = std::make_shared<PrefixCache>();
    asked_of_.reset(), asked_.reset(), answer_.reset(), message_.clear();
}

void LongLens::forget() {
    if (!asked_) return;
    forward_ = std::make_shared<CpuForward>();  // a running job keeps the ones it has
    own_ = std::make_shared<PrefixCache>();
    asked_of_.reset(), asked_.reset(), answer_.reset(), message_.clear();
}

void LongLens::ask(std::shared_ptr<const KeptMaps> kept, const LensAsk& ask) {
    const bool same_kept = !asked_of_.owner_before(kept) && !kept.owner_before(asked_of_) && !asked_of_.expired();
    if (!kept || (same_kept && asked_ == ask)) return;
    asked_of_ = kept, asked_ = ask;
    worker_.submit([forward = forward_, live = live_, own = own_, kept = std::move(kept), ask](std::stop_token stop) {
        const Progress progress = [stop](const ProgressReport&) {
            if (stop.stop_requested()) throw Cancelled();
        };
        return compute_lens(*forward, live.get(), *own, *kept, ask, progress);
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
