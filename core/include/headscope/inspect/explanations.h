// Why a head attends where it does, and what it writes: read off a forward
// run with options.contributions and capture_outputs (AttentionResult's
// queries, keys, outputs and final_scale). BertViz's neuron view, for every
// family, and the tokens a head's output promotes and suppresses.
// Legend: hs head size, C channels, V vocabulary.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/model/model.h"

namespace headscope {

// Head `head`'s score of `query` on `key` (returned layer `slot`, text b),
// before the scale: q . k as the sum of its head dimensions' terms q_i k_i.
struct ScoreTerms {
    std::vector<float> q, k;   // (hs) after qk-norm and RoPE, as the scores read them
    std::vector<float> terms;  // (hs) q_i k_i
    double score = 0;          // their sum
    double scale = 0;          // what the softmax multiplies it by
    double softmax_input = 0;  // score * scale, then soft-capped where the model caps scores (Gemma 2)
    // With biases on Q and K (and no qk-norm, which is not linear): the score
    // as (q' + bq) . (k' + bk), each bias rotated to its position with its
    // vector: q'.k', q'.bk, bq.k', bq.bk, adding up to `score`.
    bool biases_apart = false;
    double weights_weights = 0, weights_bias = 0, bias_weights = 0, bias_bias = 0;
    std::vector<int> largest, smallest;  // the dims of the 5 largest and 5 most negative terms
    // The dims RoPE turned together, each pair by one angle of its
    // position: a pair's two terms together see only the distance between
    // query and key. Empty without rotary positions.
    std::vector<std::pair<int, int>> rope_pairs;
};
// Throws Error where the result holds no queries (no contributions) or a
// position is out of range.
ScoreTerms explain_score(const Model& model, const AttentionResult& result, const AttentionOptions& options, int slot,
                         int b, int head, int query, int key);

// Which dims of a head RoPE turns together, in words, of a model whose
// heads rotate their first `turned_dims` dims: "adjacent pairs (2d, 2d + 1)
// ..." where the file's rows of Q and K were reordered for them (GGUF's
// llama), else "rotate-half pairs (d, d + turned_dims / 2)". The dance and
// the neuron view both say it so.
std::string rope_pairs_in_words(const Config& config, int turned_dims);

// A token and how much a head's output adds to its logit.
struct TokenPush {
    int32_t id = -1;
    float logit = 0;
};
// What head `head` writes at `position` (returned layer `slot`, text b): its
// output through its rows of the output projection (and its layer's output
// norm where the model has one, its scale frozen), through the final norm
// with the scale frozen at the position's (final_scale), through the output
// embedding: the `k` tokens it promotes most (largest first) and suppresses
// most (most negative first). Needs capture_outputs and contributions.
struct HeadWrites {
    std::vector<TokenPush> promoted, suppressed;
};
HeadWrites head_writes(const Model& model, const AttentionResult& result, int slot, int b, int head, int position,
                       int k = 10);

}  // namespace headscope
