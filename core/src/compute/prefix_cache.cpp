// The prefix cache's rules: see prefix_cache.h (the CPU forward fills and reads it).
#include "headscope/compute/prefix_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "headscope/compute/forward.h"
#include "headscope/model/model.h"

namespace headscope {

std::string prefix_reuse_refusal(const AttentionOptions& options) {
    if (!options.causal) return "with the causal mask off every token sees the later ones: nothing can be reused";
    if (options.split == Split::naive_view)
        return "the naive-view split mixes tokens into every head: nothing can be reused";
    if (options.contributions) return "the contributions are computed over every row of the text: nothing is reused";
    if (!options.ablate.empty() && options.ablation == Ablation::mean)
        return "a head knocked out to its mean takes the mean over the whole text, which every token changes: "
               "nothing can be reused";
    return "";
}

int reusable_rows(const std::vector<int32_t>& cached, const std::vector<int32_t>& ids, bool whole) {
    const auto shared =
        static_cast<int>(std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first - cached.begin());
    const bool appends = whole && shared == static_cast<int>(cached.size()) && shared < static_cast<int>(ids.size());
    return appends ? shared : std::max(0, shared - 1);
}

void PrefixCache::keep_rows(const std::vector<int>& rows) {
    std::unique_lock hold(lock.mutex);
    token_ids.resize(rows.size());
    for (size_t b = 0; b < rows.size(); ++b)
        token_ids[b].resize(std::min(token_ids[b].size(), static_cast<size_t>(rows[b])));
    whole = false;
}

bool copy_cached_rows(const PrefixCache& cache, const Model& model, const AttentionOptions& options,
                      const std::vector<int32_t>& ids, int rows, int text_length, int layer, int width, float* to) {
    std::shared_lock hold(cache.lock.mutex);
    if (cache.model != &model || !same_keys_and_values(cache.options, options) || layer >= cache.layers ||
        !cache.source_ids.empty() ||
        long_rope(model.config.rope, cache.result.T) != long_rope(model.config.rope, text_length))
        return false;
    for (size_t b = 0; b < cache.token_ids.size(); ++b) {
        const std::vector<int32_t>& cached = cache.token_ids[b];
        if (static_cast<int>(cached.size()) < rows || static_cast<int>(ids.size()) < rows ||
            !std::equal(ids.begin(), ids.begin() + rows, cached.begin()))
            continue;
        const size_t layer_floats = static_cast<size_t>(cache.capacity) * width;
        std::copy_n(cache.kv[b].data() + layer * layer_floats, static_cast<size_t>(rows) * width, to);
        return true;
    }
    return false;
}

namespace {

// Whether only the cache holds `rows`: then no result reads them, and what the
// last one to let go of them read happened before this forward writes.
bool held_by_the_cache_alone(const std::shared_ptr<KeptRows>& rows) {
    if (!rows || rows.use_count() != 1) return false;
    std::atomic_thread_fence(std::memory_order_acquire);
    return true;
}

// Where the cache may (ask_for_rows), asks the results that read `rows` to
// let go of them and waits until they have; false where it may not, or they
// hold on past a few seconds (a holder that was not asked: a second set
// rather than a hang). The waiting reports to `progress`, which ends it by
// throwing Cancelled (the cache as it was; the next forward finds the rows free).
bool results_let_go(PrefixCache& cache, const std::shared_ptr<KeptRows>& rows, const Progress& progress) {
    if (!cache.ask_for_rows) return false;
    cache.ask_for_rows();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!held_by_the_cache_alone(rows)) {
        if (std::chrono::steady_clock::now() > until) return false;
        report_progress(progress, "waiting for the view to let go of the last text's rows", 0, 1, ProgressUnit::steps);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

}  // namespace

std::shared_ptr<KeptRows> take_kept_rows(PrefixCache* cache, const KeptRows::Shape& shape,
                                         const std::vector<int>& begin, int T, int max_rows, const Progress& progress) {
    if (!cache) return shape.any() ? std::make_shared<KeptRows>(shape, T) : nullptr;
    std::shared_ptr<KeptRows>& current = cache->kept;
    if (!shape.any()) {  // a text that keeps no rows: nothing to hold on to
        current.reset();
        return nullptr;
    }
    const bool fits = current && current->shape == shape && current->capacity >= T;
    if (fits && held_by_the_cache_alone(current)) {
        std::fill(current->covered.begin(), current->covered.end(), 0);  // no result reads them
        return current;
    }
    const auto past_what_results_read = [&] {
        for (int b = 0; b < shape.B; ++b)
            if (begin[b] < current->covered[b]) return false;
        return true;
    };
    if (fits && past_what_results_read()) return current;
    // Rows a result reads would be written (an edit deeper than held_rows),
    // or there is no room. Where the results let go of the rows, written in
    // place (or, without room, copied from once and freed); else new rows,
    // the reused ones copied once, and the last set stays with the results
    // that read it, and goes as they let go of it.
    if (current && current->shape == shape && results_let_go(*cache, current, progress) && fits) {
        std::fill(current->covered.begin(), current->covered.end(), 0);
        return current;
    }
    const int room = T + T / 10;
    auto taken = std::make_shared<KeptRows>(shape, max_rows > 0 ? std::max(T, std::min(room, max_rows)) : room);
    for (int b = 0; b < shape.B; ++b)
        if (begin[b] > 0) taken->copy_rows(*current, b, 0, 0, begin[b]);
    current = taken;
    return taken;
}

void hand_out_kept_rows(KeptRows& kept, const std::vector<std::vector<int32_t>>& ids, AttentionResult& result) {
    const int B = result.B, T = result.T;
    result.tail_from.assign(B, 0);
    int most = 0;
    for (int b = 0; b < B; ++b) {
        const int length = std::min(static_cast<int>(ids[b].size()), T);
        result.tail_from[b] = std::max(0, length - held_rows);
        most = std::max(most, T - result.tail_from[b]);
        kept.covered[b] = std::max(kept.covered[b], result.tail_from[b]);
    }
    auto tail = std::make_shared<KeptRows>(kept.shape, most);
    for (int b = 0; b < B; ++b) tail->copy_rows(kept, b, result.tail_from[b], 0, T - result.tail_from[b]);
    result.tail = std::move(tail);
}

}  // namespace headscope
