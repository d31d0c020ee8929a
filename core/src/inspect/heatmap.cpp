// Pooled heatmaps: see heatmap.h.
#include "headscope/inspect/heatmap.h"

#include <algorithm>
#include <vector>

namespace headscope {

HeatmapImage heatmap_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b, int h,
                           int length, int max_side) {
    const int T = result.T;
    HeatmapImage image;
    image.rows = image.cols = std::min(T, std::max(1, max_side));
    image.cells.assign(static_cast<size_t>(image.rows) * image.cols, masked_cell);
    const float* map = result.map(layer_slot, b, h);
    // Block r covers queries [r*T/rows, (r+1)*T/rows): every query in exactly one block.
    // Each key's column once, not a division per cell: the window pools 144 maps a keystroke.
    std::vector<int> column(static_cast<size_t>(T));
    for (int j = 0; j < T; ++j) column[j] = j * image.cols / T;
    for (int i = 0; i < T; ++i) {
        float* out_row = image.cells.data() + static_cast<size_t>(i * image.rows / T) * image.cols;
        const int end = visible_end(options, i, length, T);
        for (int j = visible_begin(options, i); j < end; ++j) {
            float& cell = out_row[column[j]];
            cell = std::max(cell, map[static_cast<size_t>(i) * T + j]);
        }
    }
    return image;
}

}  // namespace headscope
