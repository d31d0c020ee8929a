// A head's attention map as the window draws it: weights in [0, 1], masked
// cells marked, max-pooled down to the size it is drawn at so that a single
// strong weight never disappears from a small map.
#pragma once
#include <vector>

#include "headscope/compute/attention.h"

namespace headscope {

// The value of a cell whose key the query may not see (drawn hatched, not as
// a weight of zero).
inline constexpr float masked_cell = -1.f;

struct HeatmapImage {
    int rows = 0, cols = 0;    // queries, keys (after pooling)
    std::vector<float> cells;  // (rows, cols) row-major
};

// Map (layer_slot, b, h) of `result`, computed with `options` for a text of
// `length` tokens. Each output cell covers a block of about T/rows queries by
// T/cols keys and holds the largest visible weight in it; it is masked only
// when every cell of the block is.
HeatmapImage heatmap_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b, int h,
                           int length, int max_side);

}  // namespace headscope
