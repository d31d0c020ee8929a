// The backward pass of attribution patching (backward.h): a forward of one
// text through a decoder's or an encoder's layers (norms before the
// sublayers, after them or both, or BERT's after the residual sums), as the
// CPU forward computes them from the model description, keeping what the
// backward reads (cpu_backward_forward.cpp; the attention here); then the metric's gradient back through the final
// norm, each MLP (or layer of experts), each attention (softmax over the keys each row sees, with any sink, rotary
// positions, grouped heads) and each norm to layer 0's input. A sink's logit takes weight from the keys but weighs no
// value, so the softmax's backward is the same. Legend: KVw = NKV hs, W = Qw + 2 KVw (a row of [Q | K | V]), F MLP
// hidden size, V vocabulary.
#include <algorithm>
#include <cmath>

#include "backward_trace.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/forward.h"

namespace headscope {

namespace {

// Where a fused product's row keeps head h's part (0: q, 1: k, 2: v):
// [Q | K | V], or per head [q k v] (QkvLayout::fused_per_head, whose heads are not grouped).
size_t fused_column(const Config& cfg, const HeadSplit& split, int part, int h) {
    if (cfg.qkv_layout == QkvLayout::fused_per_head) return static_cast<size_t>(3 * h + part) * split.hs;
    return static_cast<size_t>(part == 0 ? 0 : split.q_width() + (part - 1) * split.kv_width()) + h * split.hs;
}

}  // namespace

// Each head's rows (width apart, the positions from first_ on) rotated to their positions, or back (the transpose: sin
// negated).
void BackwardTrace::rotate(int l, float* rows, int heads, int width, bool inverse) const {
    if (cfg_.positions != Positions::rotary) return;
    RopeTable table = rope_table(layer_rope(cfg_, l), split_.hs, positions_, first_);
    if (inverse)
        for (float& s : table.sin) s = -s;
    for (int h = 0; h < heads; ++h) apply_rope(table, rows + h * split_.hs, first_, T_, width);
}

// A fused product's rows (T, W) split into Q, K and V, or (`join`) Q, K and V put back in their layout.
void BackwardTrace::move_qkv(float* fused, float* q, float* k, float* v, bool join) const {
    const int hs = split_.hs, W = split_.q_width() + 2 * split_.kv_width();
    const auto move = [&](float* row, float* part, size_t at) {
        join ? std::copy_n(part, hs, row + at) : std::copy_n(row + at, hs, part);
    };
    for (int t = 0; t < T_; ++t) {
        float* row = fused + static_cast<size_t>(t) * W;
        for (int h = 0; h < split_.NH; ++h)
            move(row, q + (static_cast<size_t>(t) * split_.NH + h) * hs, fused_column(cfg_, split_, 0, h));
        for (int h = 0; h < split_.NKV; ++h) {
            move(row, k + (static_cast<size_t>(t) * split_.NKV + h) * hs, fused_column(cfg_, split_, 1, h));
            move(row, v + (static_cast<size_t>(t) * split_.NKV + h) * hs, fused_column(cfg_, split_, 2, h));
        }
    }
}

// The softmax of each head's scaled scores over the keys each row sees (plus
// T5's position bias, as ops::attention_weights adds it before the scale), and the heads' outputs.
void BackwardTrace::attend(int l, const Attending& a, std::vector<float>& att, std::vector<float>& y) const {
    const int hs = split_.hs, Qw = split_.q_width(), KVw = split_.kv_width(), T = T_, keys = a.keys, P = positions_;
    att.assign(static_cast<size_t>(split_.NH) * T * keys, 0.f);
    y.assign(static_cast<size_t>(T) * Qw, 0.f);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < split_.NH; ++h) {
        const int g = h / split_.group();
        // gpt-oss's learned logit joins each row's denominator (it weighs no value).
        const double sink = cfg_.attention_sinks && !a.cross ? model_.layers[l].sinks[h] : -INFINITY;
        const float* bias = bias_.empty() || a.cross ? nullptr : bias_.data() + h * (2 * P - 1) + P - 1;
        std::vector<double> scores(keys);
        for (int i = 0; i < T; ++i) {
            const float* q = a.q + static_cast<size_t>(i) * Qw + h * hs;
            double max = sink, sum = 0;
            const auto [first, end] = key_range(l, a, first_ + i);
            for (int j = first; j < end; ++j) {
                const float* k = a.k + static_cast<size_t>(j) * KVw + g * hs;
                const double dot = (bias ? bias[j - first_ - i] : 0) + ops::dot_in_double(q, k, hs);
                scores[j] = capped_score(scale_ * dot, a.cross), max = std::max(max, scores[j]);
            }
            for (int j = first; j < end; ++j) sum += scores[j] = std::exp(scores[j] - max);
            sum += std::exp(sink - max);  // 0 without a sink
            float* row = att.data() + (static_cast<size_t>(h) * T + i) * keys;
            float* yi = y.data() + static_cast<size_t>(i) * Qw + h * hs;
            for (int j = first; j < end; ++j) {
                row[j] = static_cast<float>(scores[j] / sum);
                const float* v = a.v + static_cast<size_t>(j) * KVw + g * hs;
                for (int d = 0; d < hs; ++d) yi[d] += row[j] * v[d];
            }
        }
    }
}

// A sublayer's input: the norm of x, or x itself where it is not `normed` (normed_input).
void BackwardTrace::input_norm(bool normed, const float* w, const float* b, const std::vector<float>& x,
                               std::vector<float>& out, NormStats& stats) const {
    out.resize(x.size());
    if (normed)
        norm_forward(residual_norm_, x.data(), w, b, out.data(), T_, stats);
    else
        out = x;
}

// dx += the gradient through input_norm from that of its output, dn.
void BackwardTrace::input_norm_backward(bool normed, const float* w, const std::vector<float>& x,
                                        const NormStats& stats, const std::vector<float>& dn,
                                        std::vector<float>& dx) const {
    if (normed)
        norm_backward(residual_norm_, x.data(), w, stats, dn.data(), dx.data(), T_);
    else
        ops::add(dx.data(), dn.data(), dx.size());
}

// x (the residual plus a sublayer's output) normed in place after the sublayer (BERT's post-norm), the sum kept.
void BackwardTrace::post_norm(const float* w, const float* b, std::vector<float>& x, std::vector<float>& sum,
                              NormStats& stats) const {
    sum = x;
    norm_forward(residual_norm_, sum.data(), w, b, x.data(), T_, stats);
}

// d, the gradient with respect to post_norm's output, into that with respect to the sum it normed.
void BackwardTrace::post_norm_backward(const float* w, const std::vector<float>& sum, const NormStats& stats,
                                       std::vector<float>& d) const {
    std::vector<float> d_sum(d.size(), 0.f);
    norm_backward(residual_norm_, sum.data(), w, stats, d.data(), d_sum.data(), T_);
    d = std::move(d_sum);
}

// A sublayer's output normed in place where the model norms it (Config::output_norms), kept as it was in `raw`.
void BackwardTrace::output_norm(const float* w, std::vector<float>& output, std::vector<float>& raw,
                                NormStats& stats) const {
    if (!cfg_.output_norms) return;
    raw = output;
    norm_forward(residual_norm_, raw.data(), w, nullptr, output.data(), T_, stats);
}

// The gradient with respect to a sublayer's output before output_norm, from that after it (d).
std::vector<float> BackwardTrace::output_norm_backward(const float* w, const std::vector<float>& raw,
                                                       const NormStats& stats, const std::vector<float>& d) const {
    if (!cfg_.output_norms) return d;
    std::vector<float> d_raw(d.size(), 0.f);
    norm_backward(residual_norm_, raw.data(), w, stats, d.data(), d_raw.data(), T_);
    return d_raw;
}

// The gradient with respect to the MLP's input (its norm's output) from that of its output.
std::vector<float> BackwardTrace::mlp_backward(const LayerWeights& w, const LayerTrace& lt, const float* dm) const {
    const int C = cfg_.n_embd, F = cfg_.mlp_size();
    const size_t hidden = static_cast<size_t>(T_) * F;
    std::vector<float> dh(hidden), dn(static_cast<size_t>(T_) * C);
    backward_linear(dm, T_, w.fc_proj.transposed(), nullptr, dh.data(), F);
    if (gated(cfg_.mlp)) {
        std::vector<float> dup(hidden);
        for (size_t i = 0; i < hidden; ++i) dup[i] = dh[i] * lt.act[i], dh[i] *= lt.up[i] * lt.slope[i];
        backward_linear(dh.data(), T_, w.gate.transposed(), nullptr, dn.data(), C);
        backward_linear(dup.data(), T_, w.fc.transposed(), nullptr, dn.data(), C, /*accumulate=*/true);
    } else {
        for (size_t i = 0; i < hidden; ++i) dh[i] *= lt.slope[i];
        backward_linear(dh.data(), T_, w.fc.transposed(), nullptr, dn.data(), C);
    }
    return dn;
}

// From the gradient with respect to the heads' outputs (dy): those with
// respect to the maps (into `d_att`), the rotated queries and keys, and the values.
void BackwardTrace::attend_backward(int l, const Attending& a, const std::vector<float>& att,
                                    const std::vector<float>& dy, float* d_att, std::vector<float>& dq,
                                    std::vector<float>& dk, std::vector<float>& dv) const {
    const int hs = split_.hs, Qw = split_.q_width(), KVw = split_.kv_width(), T = T_, keys = a.keys, P = positions_;
    const int group = split_.group();
    const double cap = a.cross ? 0 : cfg_.attention_softcap;
    const bool biased = !bias_.empty() && !a.cross;
    dq.assign(static_cast<size_t>(T) * Qw, 0.f), dk.assign(static_cast<size_t>(keys) * KVw, 0.f);
    dv.assign(static_cast<size_t>(keys) * KVw, 0.f);
#pragma omp parallel for schedule(static)
    for (int g = 0; g < split_.NKV; ++g)  // a key/value head's query heads together: they share dk and dv
        for (int h = g * group; h < (g + 1) * group; ++h)
            for (int i = 0; i < T; ++i) {
                const float* w = att.data() + (static_cast<size_t>(h) * T + i) * keys;
                float* datt = d_att + (static_cast<size_t>(h) * T + i) * keys;
                const float* dyi = dy.data() + static_cast<size_t>(i) * Qw + h * hs;
                double weighted = 0;
                const auto [first, end] = key_range(l, a, first_ + i);
                for (int j = first; j < end; ++j) {
                    const float* v = a.v + static_cast<size_t>(j) * KVw + g * hs;
                    float* dvj = dv.data() + static_cast<size_t>(j) * KVw + g * hs;
                    const double dot = ops::dot_in_double(dyi, v, hs);
                    for (int d = 0; d < hs; ++d) dvj[d] += w[j] * dyi[d];
                    datt[j] = static_cast<float>(dot), weighted += w[j] * dot;
                }
                const float* q = a.q + static_cast<size_t>(i) * Qw + h * hs;
                float* dqi = dq.data() + static_cast<size_t>(i) * Qw + h * hs;
                for (int j = first; j < end; ++j) {
                    const float* k = a.k + static_cast<size_t>(j) * KVw + g * hs;
                    double slope = 1;  // of the soft-cap, where the model has one: 1 - tanh^2
                    if (cap != 0) {
                        const double dot = (biased ? bias_[h * (2 * P - 1) + P - 1 + j - first_ - i] : 0) +
                                           ops::dot_in_double(q, k, hs);
                        const double t = capped_score(scale_ * dot, false) / cap;
                        slope = 1 - t * t;
                    }
                    const float ds = static_cast<float>(scale_ * slope * w[j] * (datt[j] - weighted));
                    float* dkj = dk.data() + static_cast<size_t>(j) * KVw + g * hs;
                    for (int d = 0; d < hs; ++d) dqi[d] += ds * k[d], dkj[d] += ds * q[d];
                }
            }
}

// From the gradient with respect to the last layer's output back through
// every layer, keeping those with respect to the activations patching copies
// at every position (0 before first_: a prefix's rows, which no patch of this run changes).
void BackwardTrace::backward(std::vector<float> dx, RunActivations& gradients, std::vector<float>* d_memory) const {
    const int L = cfg_.n_layer, C = cfg_.n_embd, Qw = split_.q_width(), KVw = split_.kv_width(), T = T_;
    const size_t P = positions_, first = first_, layer_rows = static_cast<size_t>(T) * C;
    const size_t head_rows = static_cast<size_t>(T) * Qw, maps = static_cast<size_t>(split_.NH) * T * P;
    gradients.residual.assign(L * P * C, 0.f), gradients.mlp.assign(L * P * C, 0.f);
    gradients.heads.assign(L * P * Qw, 0.f), gradients.pattern.assign(L * split_.NH * P * P, 0.f);
    gradients.cross_heads.clear(), gradients.cross_pattern.clear();
    if (memory_) {
        gradients.cross_heads.assign(L * head_rows, 0.f);
        gradients.cross_pattern.assign(L * static_cast<size_t>(split_.NH) * T * S_, 0.f);
        d_memory->assign(memory_->size(), 0.f);
    }
    std::vector<float> dy(head_rows), d_att, dq, dk, dv;
    for (int l = L - 1; l >= 0; --l) {
        const LayerWeights& w = model_.layers[l];
        const LayerTrace& lt = layers_[l];
        if (cfg_.post_norm) post_norm_backward(w.ln_2_w, lt.sum2, lt.s2, dx);
        std::copy(dx.begin(), dx.end(), gradients.mlp.begin() + (l * P + first) * C);
        const std::vector<float> dm = output_norm_backward(w.mlp_out_norm, lt.m_raw, lt.sm, dx);
        const std::vector<float> dn2 =
            cfg_.expert_layer(l) ? experts_backward(w, lt, dm.data()) : mlp_backward(w, lt, dm.data());
        if (!cfg_.parallel_residual) input_norm_backward(normed_input(l, false), w.ln_2_w, lt.xm, lt.s2, dn2, dx);
        if (memory_) cross_backward(l, lt, dx, gradients, *d_memory);
        if (cfg_.post_norm) post_norm_backward(w.ln_1_w, lt.sum1, lt.s1, dx);
        const std::vector<float> d_attended = output_norm_backward(w.attn_out_norm, lt.a_raw, lt.sa, dx);
        backward_linear(d_attended.data(), T, w.attn_proj.transposed(), nullptr, dy.data(), Qw);
        std::copy(dy.begin(), dy.end(), gradients.heads.begin() + (l * P + first) * Qw);
        d_att.assign(maps, 0.f);  // the masked weights' stay 0
        attend_backward(l, {lt.q.data(), lt.k.data(), lt.v.data(), positions_, false}, lt.att, dy, d_att.data(), dq, dk,
                        dv);
        for (int h = 0; h < split_.NH; ++h)  // head h's rows (T, P) among its (P, P)
            std::copy_n(d_att.begin() + h * T * P, T * P,
                        gradients.pattern.begin() + ((static_cast<size_t>(l) * split_.NH + h) * P + first) * P);
        // The keys and values before first_ are the prefix's: their gradients are not followed.
        dk.erase(dk.begin(), dk.begin() + first * KVw), dv.erase(dv.begin(), dv.begin() + first * KVw);
        rotate(l, dq.data(), split_.NH, Qw, true);
        rotate(l, dk.data(), split_.NKV, KVw, true);
        if (cfg_.qk_norm) {
            const auto before_norm = [&](const std::vector<float>& raw, const float* w_norm, const NormStats& stats,
                                         std::vector<float>& d, int width) {
                std::vector<float> d_raw(d.size(), 0.f);
                norm_backward(qk_norm(width), raw.data(), w_norm, stats, d.data(), d_raw.data(),
                              T * width / qk_norm(width).width);
                d = std::move(d_raw);
            };
            before_norm(lt.q_raw, w.q_norm, lt.sq, dq, Qw);
            before_norm(lt.k_raw, w.k_norm, lt.sk, dk, KVw);
        }
        std::vector<float> dn1(layer_rows);
        if (cfg_.qkv_layout == QkvLayout::separate) {
            backward_linear(dq.data(), T, w.q.transposed(), nullptr, dn1.data(), C);
            backward_linear(dk.data(), T, w.k.transposed(), nullptr, dn1.data(), C, /*accumulate=*/true);
            backward_linear(dv.data(), T, w.v.transposed(), nullptr, dn1.data(), C, /*accumulate=*/true);
        } else {
            std::vector<float> dqkv(static_cast<size_t>(T) * (Qw + 2 * KVw));
            move_qkv(dqkv.data(), dq.data(), dk.data(), dv.data(), true);
            backward_linear(dqkv.data(), T, w.attn.transposed(), nullptr, dn1.data(), C);
        }
        input_norm_backward(normed_input(l, true), w.ln_1_w, lt.x, lt.s1, dn1, dx);
        if (cfg_.parallel_residual) input_norm_backward(normed_input(l, false), w.ln_2_w, lt.x, lt.s2, dn2, dx);
        std::copy(dx.begin(), dx.end(), gradients.residual.begin() + (l * P + first) * C);
    }
}

}  // namespace headscope
