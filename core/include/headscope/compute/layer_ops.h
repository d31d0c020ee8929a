// The operations a transformer layer is written in, and the layer loop
// written once over them (layer_loop.cpp), after ggml's backend interface:
// the loop reads the model description (which norm and where, which
// projections, parallel or sequential residual, cross-attention, dense MLP
// or experts) and calls the operations in order; a backend implements them
// over buffers it owns, holding the call's context (the batch, options,
// ForwardRequest and result). The CPU is the one implementation today
// (CpuForward::LayerRun, cpu_layer_ops.cpp, over the code in cpu_*.cpp).
// Legend: R rows computed, C channels, Qw = NH hs, KVw = NKV hs.
#pragma once
#include "headscope/model/model.h"

namespace headscope {

// A layer's buffers, R rows each, row-major.
enum class Tensor {
    x,    // (R, C) the residual stream
    ln,   // (R, C) a norm's output: a sublayer's input
    out,  // (R, C) a sublayer's output, apart before it is added
    y,    // (R, Qw) the attention's output, heads merged
};

// Where the loop lets the backend apply the request's keeps and edits
// (forward_request.h) and take into the result what the options ask for.
enum class LayerPoint {
    input,          // the residual entering the layer: kept, a residual patch
    heads,          // each head's output and map: Q and K, maps and outputs kept; knock-outs, patches; contributions
    attention_end,  // before the output projection: a metric's one row kept alone
    mlp_input,      // the residual after the attention: contributions
    mlp_output,     // the MLP's output, apart: kept, an MLP patch
    output,         // the residual leaving the layer: contributions, the logit lens
};

enum class Sublayer { attention, mlp };

class LayerOps {
public:
    virtual ~LayerOps() = default;
    virtual void copy(Tensor from, Tensor to) = 0;
    // The model's norm (LayerNorm or RMSNorm over C, weight w, bias b or
    // null) of each row of `in` into `out`, which may be `in`.
    virtual void norm(Tensor in, const float* w, const float* b, Tensor out) = 0;
    // out = in W + bias, or out += that with `accumulate`, W in its stored type (matmul.h).
    virtual void linear(Tensor in, const Matrix& w, const float* bias, Tensor out, bool accumulate) = 0;
    // ln -> [Q | K | V] in the model's heads, from its layout (separate,
    // fused, fused per head), qk-normed where the model has qk norms.
    virtual void project_qkv(const LayerWeights& w) = 0;
    // Q and K of the rows computed rotated by position with the layer's table, where positions are rotary.
    virtual void rotary(int layer) = 0;
    // Each head's scores (and position bias), mask (causal, padding,
    // window), soft-cap, sink, softmax and weighted sum of the values -> y;
    // the layer's keys and values stored for the later rows.
    virtual void attention(int layer) = 0;
    // An encoder–decoder's cross-attention over its source, added into x (and normed, post-LN).
    virtual void cross_attention(int layer) = 0;
    // A dense MLP of ln (its products and activation, gated or not) into
    // `out`: Tensor::out, or added into Tensor::x.
    virtual void mlp(const LayerWeights& w, Tensor out) = 0;
    // A layer of experts in the MLP's place, as mlp: each row's router, its experts' weighted outputs.
    virtual void experts(const LayerWeights& w, int layer, Tensor out) = 0;
    // x += out, normed by norm_w first where the model has output norms.
    virtual void add(Sublayer sublayer, int layer, const float* norm_w) = 0;
    // Throws Error naming the layer where x stopped being finite, `after` naming the step.
    virtual void check_finite(int layer, const char* after) = 0;
    virtual void at(LayerPoint point, int layer) = 0;
};

// One step of the loop: the layer, whether it is the last one needed (its
// attention only, and an encoder–decoder's cross-attention), and whether
// each sublayer's output is computed apart in Tensor::out and then added.
struct LayerStep {
    int layer;
    bool last, apart;
};

// One layer of `config` over the R rows of x, in the operations of `ops`.
void forward_layer(LayerOps& ops, const Config& config, const LayerWeights& w, const LayerStep& step);

}  // namespace headscope
