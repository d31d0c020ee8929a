// What every forward shares, whichever computes it (the CPU backend, the
// CUDA backend, the checks' per-head loop): the checks on its input, the
// result's shape and fully masked rows, and the token embedding.
// Legend: B batch, T padded length, C channels, NH heads, hs = C/NH, L layers.
#pragma once
#include "headscope/attention.h"
#include "headscope/model.h"

namespace headscope {

// The most the returned attention maps of one forward may take.
inline constexpr double max_attention_bytes = 8e9;

// The heads a forward splits C into: `n_head`, or the model's own when 0.
// Throws Error unless it divides C.
int head_count(const Config& config, int n_head);

// What every forward checks first: the batch and options suit `model` (texts
// non-empty and within n_positions, ids in the vocabulary, the head count
// divides C, layers in range, the maps within max_attention_bytes). Throws
// Error naming the problem.
void validate_forward(const Model& model, const Batch& batch, const AttentionOptions& options);

// Shapes `result` for a validated forward, reusing its storage: B, T, NH, hs,
// the returned layers (options.layers, or all), weights (layers, B, NH, T, T)
// and outputs (layers, B, T, C) when options.capture_outputs, else none, both
// left for the forward to write; and fully_masked (B, T) from visible_end.
void set_up_result(const Config& config, const Batch& batch, const AttentionOptions& options, AttentionResult& result);

// x (T, C) = wte[id] + wpe[t] for text b, padded to batch.T() with the pad id.
void embed_text(const Model& model, const Batch& batch, int b, float* x);

}  // namespace headscope
