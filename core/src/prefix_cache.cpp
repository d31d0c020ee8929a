// The prefix cache's rules: see prefix_cache.h (the CPU forward fills and reads it).
#include "headscope/prefix_cache.h"

#include <algorithm>

namespace headscope {

std::string prefix_reuse_refusal(const AttentionOptions& options) {
    if (!options.causal) return "with the causal mask off every token sees the later ones: nothing can be reused";
    if (options.split == Split::naive_view)
        return "the naive-view split mixes tokens into every head: nothing can be reused";
    return "";
}

int common_prefix(const std::vector<int32_t>& cached, const std::vector<int32_t>& ids) {
    return static_cast<int>(std::mismatch(cached.begin(), cached.end(), ids.begin(), ids.end()).first - cached.begin());
}

}  // namespace headscope
