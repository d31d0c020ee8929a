// The backward pass's record of one text's forward (cpu_backward.cpp, whose
// legend it shares): what each layer's backward reads, and the passes over it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/backward_ops.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/matmul_detail.h"
#include "panel_products.h"

namespace headscope {

// The backward's products: linear()'s, but of a weight stored (out, in) (every product of W transposed in GPT-2's
// layout) our kernels up to turned_rows_max() rows as well, where linear() takes OpenBLAS above 8 rows: in the
// forward a text's rows then come out the same alone and in a batch of patched runs, both OpenBLAS's
// (own_kernel_rows, matmul_detail.h).
inline void backward_linear(const float* x, int rows, const Matrix& w, const float* bias, float* out, int64_t ldo,
                            bool accumulate = false) {
    const int own_rows = w.out_by_in && !quantized(w.dtype) ? std::max(2 * matmul_detail::small_rows, turned_rows_max())
                                                            : matmul_detail::own_kernel_rows(w);
    matmul_detail::linear_with(matmul_detail::float_gemm, own_rows, x, rows, w, bias, out, ldo, accumulate);
}

// What the backward reads of one layer's forward.
struct LayerTrace {
    std::vector<float> x, n1, q, k, v, att, y, xm, n2, up, m;  // q and k rotated; xm the MLP's residual
    // (T, F) the MLP's activation (of the gate, where gated) and its derivative; aligned, so that Eigen's
    // vectorised functions (activate_with_slopes) take the same path at each value on every run (aligned.h).
    AlignedVector<float> act, slope;
    NormStats s1, s2;                 // the norms before the sublayers, or after them (post-norm: BERT's)
    std::vector<float> sum1, sum2;    // post-norm: x + attention and x + MLP before their norms
    std::vector<float> q_raw, k_raw;  // Q and K before their norms (Config::qk_norm)
    // An encoder–decoder's decoder layer's cross-attention (cpu_backward_cross.cpp): its residual before it (T, C),
    // its input (its norm's output, pre-norm), queries (T, Qw), keys and values of the encoder's output (S, KVw),
    // weights (NH, T, S) and heads' outputs (T, Qw); post-norm, the sum it norms.
    std::vector<float> xc, nc, cq, ck, cv, catt, cy, sumc;
    NormStats sc;
    std::vector<float> a_raw, m_raw;  // the sublayers' outputs before their norms (Config::output_norms)
    NormStats sq, sk, sa, sm;
    // A layer of experts (cpu_backward_experts.cpp): each row's k choices and
    // their weights, held as the forward chose them; the softmax the weights
    // come from (the chosen experts', or every expert's where the weights are
    // not renormalized; 0 elsewhere); each choice's gate and up before the
    // activation and its expert's output.
    std::vector<int32_t> chosen;                // (T, k)
    std::vector<float> weights;                 // (T, k)
    std::vector<double> routed;                 // (T, E)
    std::vector<float> choice_gate, choice_up;  // (T k, Fe)
    std::vector<float> choice_out;              // (T k, C)
};

// One attention of a layer: its self-attention over the text's own keys
// (as its mask, window, position bias, sink and cap say), or an
// encoder–decoder's cross-attention over every token of the encoder's output.
struct Attending {
    const float *q, *k, *v;  // (T, Qw), (keys, KVw), (keys, KVw)
    int keys;                // the text's positions, or the source's S
    bool cross;
};

// One text's forward, kept: `text` one text (with its token types where it
// has them); an encoder–decoder's decoder reads `memory`, the encoder's output (S, C).
class BackwardTrace {
public:
    // Where `prefix` is set, a trace of a text the same as this one before position `first` (a causal decoder's,
    // first_changed_row's), this trace computes only the positions from `first` on: their rows are the same in both
    // runs before it. Its attention reads the prefix's keys and values there, keep() hands out the prefix's
    // activations there and backward() zero gradients (the prefix is kept, and its metric() taken, first).
    // The trace is computed by forward().
    BackwardTrace(const Model& model, const Batch& text, const AttentionOptions& options,
                  const std::vector<float>* memory = nullptr, const BackwardTrace* prefix = nullptr, int first = 0);
    // The forwards of `traces` (of one model), layer by layer, each weight's product over all their rows at once, so
    // that it is read once for them all (a short text's products are the weights' reads); a trace with a prefix
    // after that prefix.
    static void forward(const std::vector<BackwardTrace*>& traces);
    // The loss's terms of this trace's rows are kept, for a trace that reads this one as its prefix.
    double metric(const PatchRequest& request, const std::vector<int32_t>& clean, std::vector<float>* d_final);
    // The stack's output (T, C): its final norm's (an encoder–decoder's encoder's output, what its decoder reads).
    const std::vector<float>& output() const { return final_n_; }
    // The gradient with respect to the last layer's output from that with respect to output().
    std::vector<float> output_backward(const std::vector<float>& d_output) const;
    // An encoder–decoder's decoder adds the gradient with respect to its memory into `d_memory` (S, C).
    void backward(std::vector<float> dx, RunActivations& gradients, std::vector<float>* d_memory = nullptr) const;
    void keep(RunActivations& activations) const;

private:
    double logit_difference(const PatchRequest& request, float* d_norm) const;
    double metric_of_logits(const PatchRequest& request, const std::vector<int32_t>& clean, float* d_norm);
    static void run_layer(int l, const std::vector<BackwardTrace*>& traces);
    template <typename In, typename Out>
    static void together(const std::vector<BackwardTrace*>& traces, const Matrix& w, const float* bias, In in, Out out,
                         int64_t ldo);
    void begin_layer(int l);
    void attend_layer(int l);
    void before_mlp(int l);
    void end_layer(int l);
    void attend(int l, const Attending& a, std::vector<float>& att, std::vector<float>& y) const;
    void attend_backward(int l, const Attending& a, const std::vector<float>& att, const std::vector<float>& dy,
                         float* d_att, std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv) const;
    // The keys [begin, end) the query at position i of layer l's attention `a` sees.
    std::pair<int, int> key_range(int l, const Attending& a, int i) const {
        if (a.cross) return {0, a.keys};
        return {first_key(l, i), key_end(l, i)};
    }
    // The cross-attention of an encoder–decoder's decoder layer (cpu_backward_cross.cpp): lt.xc in, lt.xm out.
    void cross_attend(int l, LayerTrace& lt) const;
    // dx, the gradient with respect to lt.xm, into that with respect to lt.xc; the cross-attention's heads' and
    // maps' gradients into `gradients`, the memory's added into `d_memory`.
    void cross_backward(int l, const LayerTrace& lt, std::vector<float>& dx, RunActivations& gradients,
                        std::vector<float>& d_memory) const;
    // The first key position i of layer l sees: 0, or its sliding window's first.
    int first_key(int l, int i) const { return visible_begin(layer_options(cfg_, options_, l), i); }
    void move_qkv(float* fused, float* q, float* k, float* v, bool join) const;
    // Q's or K's norm (Config::qk_norm), of all their `width` values of a row or each head's.
    NormShape qk_norm(int width) const {
        return {false, cfg_.qk_norm_whole ? width : split_.hs, cfg_.layer_norm_epsilon};
    }
    // A scaled score soft-capped, cap tanh(s / cap), where the model caps them (Gemma 2; not a cross-attention's).
    double capped_score(double s, bool cross) const {
        const double cap = cross ? 0 : cfg_.attention_softcap;
        return cap != 0 ? cap * std::tanh(s / cap) : s;
    }
    // The keys position i of layer l sees end before this one: i + 1, or an encoder's text's end or window's.
    int key_end(int l, int i) const { return visible_end(layer_options(cfg_, options_, l), i, positions_, positions_); }
    void rotate(int l, float* rows, int heads, int width, bool inverse) const;
    // Whether layer l's attention (or MLP) reads its input normed: not after a post-norm, nor where the model has no
    // norm there (OLMo 2's layers, ModernBERT's first attention).
    bool normed_input(int l, bool attention) const {
        return !cfg_.post_norm && cfg_.input_norms && !(attention && l == 0 && !cfg_.first_attention_norm);
    }
    void input_norm(bool normed, const float* w, const float* b, const std::vector<float>& x, std::vector<float>& out,
                    NormStats& stats) const;
    void input_norm_backward(bool normed, const float* w, const std::vector<float>& x, const NormStats& stats,
                             const std::vector<float>& dn, std::vector<float>& dx) const;
    void post_norm(const float* w, const float* b, std::vector<float>& x, std::vector<float>& sum,
                   NormStats& stats) const;
    void post_norm_backward(const float* w, const std::vector<float>& sum, const NormStats& stats,
                            std::vector<float>& d) const;
    // The masked-LM head's transform (cpu_backward_metric.cpp): read_ from final_n_, and back.
    void read_head();
    // The head's GELU, the forward's read_out's: tanh's where the model's MLP has it, else erf's.
    Mlp head_gelu() const { return cfg_.mlp == Mlp::gelu_tanh ? Mlp::gelu_tanh : Mlp::gelu_exact; }
    std::vector<float> read_head_backward(const std::vector<float>& d_read) const;
    void output_norm(const float* w, std::vector<float>& output, std::vector<float>& raw, NormStats& stats) const;
    std::vector<float> output_norm_backward(const float* w, const std::vector<float>& raw, const NormStats& stats,
                                            const std::vector<float>& d) const;
    static void mlp(int l, const std::vector<BackwardTrace*>& traces);
    std::vector<float> mlp_backward(const LayerWeights& w, const LayerTrace& lt, const float* dm) const;
    void experts(int l, const LayerWeights& w, LayerTrace& lt) const;
    std::vector<float> experts_backward(const LayerWeights& w, const LayerTrace& lt, const float* dm) const;
    // Each expert's choices (flat indices t k + i into LayerTrace::chosen), in row order.
    std::vector<std::vector<int>> choices_by_expert(const LayerTrace& lt) const;

    const Model& model_;
    const Config& cfg_;
    AttentionOptions options_;
    NormShape residual_norm_{cfg_.norm == Norm::layer_norm, cfg_.n_embd, cfg_.layer_norm_epsilon};
    HeadSplit split_;
    // The text's positions, the first this trace computes (0 without a prefix), and T_ = positions_ - first_, the rows
    // it computes (the legend's T); an encoder–decoder's source's S.
    int positions_, first_, T_, S_;
    float scale_;
    const std::vector<float>* memory_;  // (S, C) an encoder–decoder's encoder's output; null elsewhere
    const BackwardTrace* prefix_;       // the trace of positions [0, first_); null where first_ is 0
    std::vector<double> losses_;        // the loss's term of each row metric() read, its sign and 1 / (T - 1) in
    std::vector<float> bias_;  // (NH, 2 positions_ - 1) T5's position bias (forward.h's position_bias); else empty
    std::vector<LayerTrace> layers_;
    // final_x_: each layer's input while forward() runs, then the last layer's output.
    std::vector<float> final_x_, final_n_;
    std::vector<float> scratch_;  // a layer's (T, W) fused product, its attention's projected output, MLP hidden
    NormStats final_s_;
    // What the output embedding reads (T, C): final_n_, or the masked-LM head's
    // transform of it (dense, GELU, LayerNorm; the dense output and the norm's stats kept).
    std::vector<float> read_, head_dense_;
    NormStats head_s_;
};

}  // namespace headscope
