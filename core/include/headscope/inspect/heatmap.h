// A head's attention map as the window draws it: weights in [0, 1], masked
// cells marked, max-pooled down to the size it is drawn at so that a single
// strong weight never disappears from a small map.
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/base/choices.h"
#include "headscope/compute/attention.h"

namespace headscope {

// The value of a cell whose key the query may not see (drawn hatched, not as
// a weight of zero).
inline constexpr float masked_cell = -1.f;

struct HeatmapImage {
    int rows = 0, cols = 0;    // queries, keys (after pooling)
    std::vector<float> cells;  // (rows, cols) row-major
};

// What a map's cells show. value_weighted: ||alpha_qk v_k W_O^h|| (the
// result's value_weighted, which needs options.contributions), each row
// divided by its largest visible value. hide_first_key: key 0 (where many
// heads park their weight, the "sink") masked and each row of weights
// renormalised over the other keys (w_j / (1 - w_0)); value-weighted rows
// are scaled to their largest value past key 0.
// sentences: of a sentence pair whose second text starts at token
// second_start, only the queries of one text and the keys of one (BertViz's
// sentence filter); the other cells are masked.
enum class Sentences : uint8_t { all, a_to_a, a_to_b, b_to_a, b_to_b };
inline constexpr Choices<Sentences, 5> sentences_choices = {
    "sentences", {"all", "a-a", "a-b", "b-a", "b-b"}, {"all", "A -> A", "A -> B", "B -> A", "B -> B"}};
struct MapShading {
    bool value_weighted = false;
    bool hide_first_key = false;
    Sentences sentences = Sentences::all;
    int second_start = 0;
    bool operator==(const MapShading&) const = default;
};

// Map (layer_slot, b, h) of `result`, computed with `options` for a text of
// `length` tokens. Each output cell covers a block of about T/rows queries by
// T/cols keys and holds the largest visible value in it; it is masked only
// when every cell of the block is.
HeatmapImage heatmap_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b, int h,
                           int length, int max_side, MapShading shading = {});

// The learned sink's column of the same map (a model with attention_sinks):
// row i holds learned_sink_weight, pooled over queries as heatmap_image pools
// them and scaled as `shading` scales row i, so that with the row's keys it
// adds up to 1 (hide_first_key: with the keys past key 0); 0 when
// value-weighted (the sink has no value); masked where the row shows no key.
HeatmapImage sink_column_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b,
                               int h, int length, int max_side, MapShading shading = {});

// An encoder–decoder's cross-attention map (layer_slot, b, h): T target
// queries by S source keys, pooled as heatmap_image pools, the source's
// padding masked (cross_visible_end).
HeatmapImage cross_heatmap_image(const AttentionResult& result, const AttentionOptions& options, int layer_slot, int b,
                                 int h, int target_length, int source_length, int max_side);

// Text b's rollout (options.contributions) pooled as heatmap_image pools a
// map: query row i shows keys [0, visible_end) (products over the layers
// reach past a sliding window).
HeatmapImage rollout_image(const AttentionResult& result, const AttentionOptions& options, int b, int length,
                           int max_side);

// The difference `changed` - `base` of map (layer_slot, h) of two texts of
// the same `length` (text b_base of `base`, b_changed of `changed`), drawn
// in the diverging colormap: each cell 0.5 + difference / (2 scale),
// clamped to [0, 1], so that 0.5 is no difference. Its side is base's T,
// pooled as heatmap_image pools but keeping each block's difference of
// largest magnitude; cells past `length`, and those the query may not see,
// masked.
HeatmapImage difference_image(const AttentionResult& base, int b_base, const AttentionResult& changed, int b_changed,
                              const AttentionOptions& options, int layer_slot, int h, int length, int max_side,
                              float scale);

// The largest |changed - base| over the visible cells of the same map (a
// symmetric scale for difference_image).
float largest_difference(const AttentionResult& base, int b_base, const AttentionResult& changed, int b_changed,
                         const AttentionOptions& options, int layer_slot, int h, int length);

// Head h's sink mass: the weight its query rows 1..length-1 give key 0, on
// average (under the causal mask row 0 sees only key 0 and says nothing; an
// encoder's row 0 is left out alike, so that the measure is the same one).
// 0 for a one-token text.
float sink_mass(const AttentionResult& result, int layer_slot, int b, int h, int length);

// The share of query row i's softmax that head h's learned sink took (a
// model with attention_sinks: gpt-oss's): 1 less the row's weights on the
// keys. 1 for a row that saw no key; 0 (to rounding) for a model without sinks.
float learned_sink_weight(const AttentionResult& result, int layer_slot, int b, int h, int i);

}  // namespace headscope
