// The prefix cache's rules: see prefix_cache.h (the CPU forward fills and reads it).
#include "headscope/compute/prefix_cache.h"

#include <algorithm>
#include <atomic>

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

int reusable_rows(const std::vector<int32_t>& cached, const std::vector<int32_t>& ids) {
    const auto shared =
        static_cast<int>(std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first - cached.begin());
    const bool appends = shared == static_cast<int>(cached.size()) && shared < static_cast<int>(ids.size());
    return appends ? shared : std::max(0, shared - 1);
}

namespace {

// Whether only the cache holds `rows`: then no result reads them, and what the
// last one to let go of them read happened before this forward writes.
bool held_by_the_cache_alone(const std::shared_ptr<KeptRows>& rows) {
    if (!rows || rows.use_count() != 1) return false;
    std::atomic_thread_fence(std::memory_order_acquire);
    return true;
}

}  // namespace

std::shared_ptr<KeptRows> take_kept_rows(PrefixCache* cache, const KeptRows::Shape& shape,
                                         const std::vector<std::vector<int32_t>>& ids, const std::vector<int>& begin,
                                         int T, int max_rows) {
    if (!cache) return shape.any() ? std::make_shared<KeptRows>(shape, T) : nullptr;
    if (!shape.any()) {  // a text that keeps no rows: nothing to hold on to
        cache->kept.reset(), cache->spare.reset();
        return nullptr;
    }
    const int B = shape.B;
    const bool reuses = std::any_of(begin.begin(), begin.end(), [](int rows) { return rows > 0; });
    if (!reuses) cache->spare.reset();  // its rows may be another model's or options'
    std::shared_ptr<KeptRows>&current = cache->kept, &spare = cache->spare;
    const auto fits = [&](const std::shared_ptr<KeptRows>& rows) {
        return rows && rows->shape == shape && rows->capacity >= T;
    };
    const bool past_what_results_read =
        current && std::all_of(begin.begin(), begin.end(), [&](int rows) { return rows >= current->covered; });
    std::shared_ptr<KeptRows> taken;
    if (fits(current) && (held_by_the_cache_alone(current) || past_what_results_read)) {
        taken = current;
    } else if (fits(spare) && held_by_the_cache_alone(spare)) {
        for (int b = 0; b < B; ++b) {  // the spare's rows of a shared prefix of tokens are this text's too
            const std::vector<int32_t>& had = spare->token_ids[b];
            const int same = static_cast<int>(
                std::mismatch(had.begin(), had.end(), ids[b].begin(), ids[b].end()).first - had.begin());
            spare->copy_rows(*current, b, std::min(same, begin[b]), begin[b]);
        }
        std::swap(current, spare);
        taken = current;
    } else {
        const int room = T + T / 10;
        taken = std::make_shared<KeptRows>(shape, max_rows > 0 ? std::max(T, std::min(room, max_rows)) : room);
        for (int b = 0; b < B && reuses; ++b) taken->copy_rows(*current, b, 0, begin[b]);
        // A result reads the last rows: the next rewrite's spare, where they are of these options.
        spare = reuses && fits(current) ? std::move(current) : nullptr;
        current = taken;
    }
    // Rows from begin[b] are about to change: the tokens they were made of no longer say so.
    for (int b = 0; b < B; ++b)
        if (static_cast<int>(taken->token_ids[b].size()) > begin[b]) taken->token_ids[b].resize(begin[b]);
    return taken;
}

}  // namespace headscope
