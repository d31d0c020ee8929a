// Pooled heatmaps: see heatmap.h.
#include "headscope/inspect/heatmap.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace headscope {

namespace {

// What a row of a map shows: its values, the keys [begin, end) that are
// visible, and what its values are multiplied by.
struct ShownRow {
    const float* values;
    int begin, end;
    float scale;
};

// A map of `rows` queries by `cols` keys pooled to at most max_side a side:
// each cell the largest shown value of its block, masked only when no key of
// the block is shown.
template <typename RowOf>
HeatmapImage pooled(int rows, int cols, int max_side, RowOf row_of) {
    HeatmapImage image;
    image.rows = std::min(rows, std::max(1, max_side));
    image.cols = std::min(cols, std::max(1, max_side));
    image.cells.assign(static_cast<size_t>(image.rows) * image.cols, masked_cell);
    // Block r covers queries [r*rows/image.rows, ...): every query in exactly one block.
    // Each key's column once, not a division per cell: the window pools 144 maps a keystroke.
    std::vector<int> column(static_cast<size_t>(cols));
    for (int j = 0; j < cols; ++j) column[j] = j * image.cols / cols;
    for (int i = 0; i < rows; ++i) {
        float* out_row = image.cells.data() + static_cast<size_t>(i * image.rows / rows) * image.cols;
        const ShownRow row = row_of(i);
        for (int j = row.begin; j < row.end; ++j) {
            float& cell = out_row[column[j]];
            cell = std::max(cell, row.values[j] * row.scale);
        }
    }
    return image;
}

// Row i of map (layer_slot, b, h) as `shading` shows it (heatmap_image).
ShownRow shaded_row(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b, int h,
                    int length, MapShading shading, int i) {
    const int T = result.T;
    const float* map =
        shading.value_weighted
            ? result.value_weighted.data() + ((static_cast<size_t>(layer_slot) * result.B + b) * result.NH + h) * T * T
            : result.map(layer_slot, b, h);
    const float* row = map + static_cast<size_t>(i) * T;
    int begin = std::max(visible_begin(options, i), shading.hide_first_key ? 1 : 0);
    int end = visible_end(options, i, length, T);
    if (shading.sentences != Sentences::all) {  // the query's text, then the keys' text
        const Sentences s = shading.sentences;
        const bool query_in_b = i >= shading.second_start, want_b = s == Sentences::b_to_a || s == Sentences::b_to_b;
        const bool keys_b = s == Sentences::a_to_b || s == Sentences::b_to_b;
        if (query_in_b != want_b) end = begin;
        if (keys_b)
            begin = std::max(begin, shading.second_start);
        else
            end = std::min(end, shading.second_start);
    }
    float scale = 1;
    if (shading.value_weighted) {
        const float largest = begin < end ? *std::max_element(row + begin, row + end) : 0.f;
        scale = largest > 0 ? 1 / largest : 0;
    } else if (shading.hide_first_key) {
        const float rest = 1 - (visible_begin(options, i) == 0 && end > 0 ? row[0] : 0.f);
        scale = rest > 0 ? 1 / rest : 0;
    }
    return ShownRow{row, begin, end, scale};
}

}  // namespace

HeatmapImage heatmap_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b, int h,
                           int length, int max_side, MapShading shading) {
    return pooled(result.T, result.T, max_side,
                  [&](int i) { return shaded_row(result, options, layer_slot, b, h, length, shading, i); });
}

HeatmapImage sink_column_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b,
                               int h, int length, int max_side, MapShading shading) {
    std::vector<float> sink(1);
    return pooled(result.T, 1, max_side, [&](int i) {
        const ShownRow row = shaded_row(result, options, layer_slot, b, h, length, shading, i);
        // The sink has no value: value-weighted, it adds nothing to the output.
        sink[0] = shading.value_weighted ? 0.f : learned_sink_weight(result, layer_slot, b, h, i);
        return ShownRow{sink.data(), 0, row.begin < row.end ? 1 : 0, row.scale};
    });
}

HeatmapImage rollout_image(const AttentionResult& result, const AttentionOptions& options, int b, int length,
                           int max_side) {
    const int T = result.T;
    return pooled(T, T, max_side, [&](int i) {
        return ShownRow{result.rollout.data() + (static_cast<size_t>(b) * T + i) * T, 0,
                        visible_end(options, i, length, T), 1.f};
    });
}

HeatmapImage cross_heatmap_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b,
                                 int h, int target_length, int source_length, int max_side) {
    return pooled(result.T, result.S, max_side, [&](int i) {
        return ShownRow{result.cross_row(layer_slot, b, h, i), 0,
                        cross_visible_end(options, i, target_length, source_length, result.S), 1.f};
    });
}

namespace {

// Calls visit(i, j, changed - base) for every visible cell of the two maps' first `length` rows and keys.
template <typename Visit>
void each_difference(const AttentionResult& base, int b_base, const AttentionResult& changed, int b_changed,
                     const AttentionOptions& options, int layer_slot, int h, int length, Visit visit) {
    for (int i = 0; i < std::min(length, base.T); ++i) {
        const float* a = base.row(layer_slot, b_base, h, i);
        const float* b = changed.row(layer_slot, b_changed, h, i);
        const int end = std::min(visible_end(options, i, length, base.T), length);
        for (int j = visible_begin(options, i); j < end; ++j) visit(i, j, b[j] - a[j]);
    }
}

}  // namespace

HeatmapImage difference_image(const AttentionResult& base, int b_base, const AttentionResult& changed, int b_changed,
                              const AttentionOptions& options, int layer_slot, int h, int length, int max_side,
                              float scale) {
    const int T = base.T;
    HeatmapImage image;
    image.rows = image.cols = std::min(T, std::max(1, max_side));
    image.cells.assign(static_cast<size_t>(image.rows) * image.cols, masked_cell);
    std::vector<float> magnitude(image.cells.size(), -1.f);  // of the difference each cell holds
    each_difference(base, b_base, changed, b_changed, options, layer_slot, h, length, [&](int i, int j, float d) {
        const size_t cell = static_cast<size_t>(i * image.rows / T) * image.cols + j * image.cols / T;
        if (std::abs(d) <= magnitude[cell]) return;
        magnitude[cell] = std::abs(d);
        image.cells[cell] = scale > 0 ? std::clamp(0.5f + d / (2 * scale), 0.f, 1.f) : 0.5f;
    });
    return image;
}

float largest_difference(const AttentionResult& base, int b_base, const AttentionResult& changed, int b_changed,
                         const AttentionOptions& options, int layer_slot, int h, int length) {
    float largest = 0;
    each_difference(base, b_base, changed, b_changed, options, layer_slot, h, length,
                    [&](int, int, float d) { largest = std::max(largest, std::abs(d)); });
    return largest;
}

float sink_mass(const AttentionResult& result, int layer_slot, int b, int h, int length) {
    double sum = 0;
    const int first = std::max(1, result.first_row);  // a generation's step holds its new rows only
    if (first >= length) return 0;
    for (int i = first; i < length; ++i) sum += result.row(layer_slot, b, h, i)[0];
    return static_cast<float>(sum / (length - first));
}

float learned_sink_weight(const AttentionResult& result, int layer_slot, int b, int h, int i) {
    const float* row = result.row(layer_slot, b, h, i);
    double keys = 0;
    for (int j = 0; j < result.T; ++j) keys += row[j];
    return static_cast<float>(std::max(0.0, 1 - keys));
}

}  // namespace headscope
