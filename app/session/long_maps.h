// Long texts in the window: from how many tokens the live forward keeps no
// T x T map but each layer's queries and keys and every head's row summaries
// (core's Maps::queries_and_keys), and the maps the long view asks for,
// computed from what it kept: a region exactly, or pooled to the pixels shown.
#pragma once
#include <memory>
#include <vector>

#include "headscope/compute/attention_maps.h"
#include "headscope/compute/live.h"
#include "headscope/inspect/heatmap.h"
#include "headscope/model/model.h"

namespace headscope {

// A text of this many tokens or more is a long text; so is one whose maps,
// every head's T x T floats, would take more than full_maps_budget bytes.
inline constexpr int long_text_tokens = 2048;
inline constexpr double full_maps_budget = 2.0 * (1 << 30);
bool is_long_text(int layers, int heads, int tokens);

// `options` as a long text's forward runs: the queries and keys kept, the
// summaries computed; no lens, no contributions (which need every map).
AttentionOptions long_text_options(AttentionOptions options);

// `request` as the live forward runs it: a long text's (the longest text's
// tokens, cut to the model's positions, say so) with long_text_options where
// the model and split can go without maps; else as it is.
LiveRequest long_text_request(const Model& model, LiveRequest request);

// What a long text's forward kept, shared by the jobs that compute maps from it.
struct KeptMaps {
    std::shared_ptr<const Model> model;
    Batch batch;
    AttentionOptions options;  // the forward's (long_text_options)
    AttentionResult result;    // its sizes and kept rows (shared with the shown result): no predictions
    KeptForward kept() const { return {*model, batch, options, result}; }
};

// A long text's forward's queries and keys, shared by `shown` and what its
// maps are computed from, computed with `options` (as asked: long_text_options
// says how they ran); null for a forward with its maps.
std::shared_ptr<const KeptMaps> keep_maps(std::shared_ptr<const Model> model, const LiveResult& shown,
                                          const AttentionOptions& options);

// What the long view asks for: `region` of head (layer, head)'s map of text
// b, in at most `pixels` cells a side, each pooled from its block of
// weights by `pooling` (a region at most `pixels` tokens a side is exact):
// max, the block's largest weight; mean, the weight its rows give its keys
// together, averaged over its rows (so that a cell, like a weight, is at
// most 1: the mean of the block's weights would fade as T grows).
struct MapAsk {
    int layer = 0, head = 0, b = 0;
    MapRegion region;
    int pixels = 1;
    Pooling pooling = Pooling::mean;
    bool operator==(const MapAsk& o) const {
        return layer == o.layer && head == o.head && b == o.b && region.row_begin == o.region.row_begin &&
               region.row_end == o.region.row_end && region.col_begin == o.region.col_begin &&
               region.col_end == o.region.col_end && pixels == o.pixels && pooling == o.pooling;
    }
};

// A map asked for, as computed: its cells (rows, cols), each `step_rows` x
// `step_cols` weights of the region (the last row and column of cells hold
// what is left); a cell none of whose weights the query may see is masked
// (masked_cell).
struct MapAnswer {
    MapAsk ask;
    HeatmapImage image;
    int step_rows = 1, step_cols = 1;
    double ms = 0;  // the compute's time
};
MapAnswer compute_map(const KeptMaps& kept, const MapAsk& ask);

// Query row i of head (layer, head)'s map of text b over every key, exactly.
std::vector<float> query_row(const KeptMaps& kept, int layer, int head, int b, int i);

}  // namespace headscope
