// The forward of every family on the CPU, capturing each returned layer's
// attention: the CPU backend runs it with batched per-head products, the
// checks with the tutorials' loop of dot products (the same layer code
// around both, so the check compares only the attention).
// Legend: B batch, T padded length, C channels, NH query heads, NKV key/value
// heads, hs head size, Qw = NH * hs, KVw = NKV * hs, F MLP hidden size.
// Buffers are row-major and sized once per shape; a later call with the same
// or a smaller shape allocates nothing.
#pragma once
#include "headscope/aligned.h"
#include "headscope/attention.h"
#include "headscope/forward.h"
#include "headscope/model.h"
#include "headscope/prefix_cache.h"

namespace headscope {

class CpuForward {
public:
    enum class Heads { batched, loop };

    // Validates (validate_forward, throws Error), then fills `result`.
    void run(const Model& model, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
             Heads heads, PrefixCache* cache = nullptr);

private:
    void project_qkv(const Model& model, const LayerWeights& w, int rows);
    void attention(const Model& model, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                   float* att, Heads heads);
    void mlp(const Config& config, const LayerWeights& w, int rows);

    AlignedVector<float> x_;               // (B, T, C) residual stream
    AlignedVector<float> ln_;              // (B, T, C) norm output
    AlignedVector<float> qkv_;             // (B, T, Qw + 2 KVw) [Q | K | V]
    AlignedVector<float> fused_;           // (B, T, 3C) Pythia's per-head [q k v], before reordering
    AlignedVector<float> qkv_contiguous_;  // (B, T, Qw), (B, T, KVw) twice: naive-view only
    AlignedVector<float> y_;               // (B, T, Qw) attention output, heads merged
    AlignedVector<float> hidden_;          // (B, T, F) MLP hidden (SwiGLU: the gate)
    AlignedVector<float> up_;              // (B, T, F) SwiGLU's up projection
    AlignedVector<float> scratch_att_;     // (B, NH, T, T) weights of layers not returned
};

}  // namespace headscope
