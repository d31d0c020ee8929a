// Long texts (AttentionOptions::maps and summaries): how a layer builds its
// score rows, each row's summary, which the forward takes while the row is
// in hand, and maps recomputed on demand from the queries and keys a forward
// kept (Maps::queries_and_keys): a region exactly, or a whole map pooled.
// Legend: B texts, T padded length, NH query heads, hs head size.
#pragma once
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/base/choices.h"
#include "headscope/compute/attention.h"
#include "headscope/model/model.h"

namespace headscope {

namespace ops {
struct KeyRange;  // cpu_ops.h's, which only the compute files include (OpenMP)
}  // namespace ops

// The query rows computed at a time where no map is held (the forward
// without maps, maps on demand): their weights over the keys they see take
// at most map_block_rows x T floats.
inline constexpr int map_block_rows = 64;

// Throws Error unless `config` and `options` allow a forward without maps
// (attention.h's maps and summaries: the view + transpose split, no
// contributions, not an encoder–decoder); validate_forward calls it.
void check_maps_options(const Config& config, const AttentionOptions& options);

// What a layer's score rows are built with, as the forward builds them: the
// scale, Gemma 2's soft-cap, the layer's masks (layer_options) and gpt-oss's
// learned sink logit of each head.
struct ScoreRule {
    AttentionOptions options;  // the layer's
    float scale = 1, softcap = 0;
    const float* sinks = nullptr;  // one per head, or none
    // The keys query i of a text of `length` tokens, padded to T, sees.
    ops::KeyRange visible(int i, int length, int T) const;
    float sink(int head) const;  // -infinity without sinks
};
ScoreRule score_rule(const Model& model, const AttentionOptions& options, int layer, int hs);

// Query i's summary (RowSummaries) from its weights `w`, zero outside the
// keys [begin, end) it sees (none: all 0).
RowSummary summarize_row(const float* w, int begin, int end, int i);

// Rows [row_begin, row_end) and keys [col_begin, col_end) of a T x T map.
struct MapRegion {
    int row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;
    int rows() const { return row_end - row_begin; }
    int cols() const { return col_end - col_begin; }
};
// Throws Error unless `region` is non-empty and within a T x T map.
void check_region(const MapRegion& region, int T);

enum class Pooling { mean, max };
inline constexpr Choices<Pooling, 2> pooling_choices = {"pool mode", {"mean", "max"}, {"mean", "max"}};
Pooling parse_pooling(std::string_view word);

// What a forward with Maps::queries_and_keys leaves to recompute its maps
// from: the model, the forward's batch and options, and its result.
struct KeptForward {
    const Model& model;
    const Batch& batch;
    const AttentionOptions& options;
    const AttentionResult& result;
};

// The exact weights of `region` of head h's map of returned layer `slot` and
// text b, (rows, cols) row-major: the forward's full map's, recomputed with
// the same score rows (ops::attention_weights, score_rule). Throws Error
// (check_region, and a result without queries and keys).
std::vector<float> map_region(const KeptForward& kept, int slot, int b, int h, const MapRegion& region);

// A T x T map pooled into cells of step x step weights (the last row and
// column of cells hold what is left), step = ceil(T / n): at most n x n
// cells, each the mean or the max of its weights (masked ones count, as 0).
struct PooledMap {
    int step = 0, cells = 0;    // cells x cells
    std::vector<float> values;  // (cells, cells)
};
PooledMap pooled_map(const KeptForward& kept, int slot, int b, int h, int n, Pooling pooling);

// map_region and pooled_map of every returned layer, text and head, in
// parallel: (layers, B, NH, rows, cols), and (layers, B, NH, cells, cells)
// with the cells' count into `cells`. n must be at least 1.
AlignedVector<float> every_region(const KeptForward& kept, const MapRegion& region);
AlignedVector<float> every_pooled_map(const KeptForward& kept, int n, Pooling pooling, int& cells);

}  // namespace headscope
