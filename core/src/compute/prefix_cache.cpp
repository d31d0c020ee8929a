// The prefix cache's rules: see prefix_cache.h (the CPU forward fills and reads it).
#include "headscope/compute/prefix_cache.h"

#include <algorithm>

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

}  // namespace headscope
