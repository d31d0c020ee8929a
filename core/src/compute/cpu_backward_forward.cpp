// The backward pass's forward (backward_trace.h): one text's, or several
// texts' of one model layer by layer (the clean and the corrupted texts of
// attribution patching), as the CPU forward computes them from the model
// description, keeping what the backward reads (cpu_backward.cpp). Each of
// a layer's products takes every text's rows at once: a short text's
// products are the reads of the weights, so two texts in one product cost
// little more than one.
// Legend: KVw = NKV hs, W = Qw + 2 KVw (a row of [Q | K | V]), F MLP hidden size.
#include <algorithm>

#include "backward_trace.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/forward.h"

namespace headscope {

BackwardTrace::BackwardTrace(const Model& model, const Batch& text, const AttentionOptions& options,
                             const std::vector<float>* memory, const BackwardTrace* prefix, int first)
    : model_(model),
      cfg_(model.config),
      options_(options),
      split_(head_split(cfg_, 0)),
      positions_(static_cast<int>(text.token_ids.at(0).size())),
      first_(prefix ? first : 0),
      T_(positions_ - first_),
      S_(memory ? static_cast<int>(memory->size() / cfg_.n_embd) : 0),
      scale_(score_scale(options.scale, cfg_, split_.hs)),
      memory_(memory),
      prefix_(first_ > 0 ? prefix : nullptr),
      layers_(cfg_.n_layer) {
    if (cfg_.positions == Positions::relative) position_bias(model, positions_, bias_);
    final_x_.resize(static_cast<size_t>(T_) * cfg_.n_embd);
    embed_text(model, text, 0, first_, final_x_.data());
}

void BackwardTrace::forward(const std::vector<BackwardTrace*>& traces) {
    for (int l = 0; l < traces.front()->cfg_.n_layer; ++l) run_layer(l, traces);
    for (BackwardTrace* trace : traces) {
        trace->final_n_ = trace->final_x_;  // a post-norm model's last layer's norm was the final one
        if (!trace->cfg_.post_norm)
            norm_forward(trace->residual_norm_, trace->final_x_.data(), trace->model_.ln_f_w, trace->model_.ln_f_b,
                         trace->final_n_.data(), trace->T_, trace->final_s_);
        trace->read_head();
    }
}

// out(trace) = in(trace) W (+ bias), rows ldo apart, for each trace: their rows stacked into one product, which
// reads W once for them all.
template <typename In, typename Out>
void BackwardTrace::together(const std::vector<BackwardTrace*>& traces, const Matrix& w, const float* bias, In in,
                             Out out, int64_t ldo) {
    if (traces.size() == 1) return backward_linear(in(*traces[0]), traces[0]->T_, w, bias, out(*traces[0]), ldo);
    thread_local std::vector<float> rows_in, rows_out;
    int rows = 0;
    for (const BackwardTrace* trace : traces) rows += trace->T_;
    rows_in.resize(static_cast<size_t>(rows) * w.in), rows_out.resize(static_cast<size_t>(rows) * w.out);
    size_t row = 0;
    for (BackwardTrace* trace : traces) {
        std::copy_n(in(*trace), static_cast<size_t>(trace->T_) * w.in, rows_in.data() + row * w.in);
        row += trace->T_;
    }
    backward_linear(rows_in.data(), rows, w, bias, rows_out.data(), w.out);
    row = 0;
    for (BackwardTrace* trace : traces)
        for (int t = 0; t < trace->T_; ++t, ++row)
            std::copy_n(rows_out.data() + row * w.out, w.out, out(*trace) + t * ldo);
}

// Layer l of each trace, its products over all the traces' rows at once (together); a trace with a prefix after
// that prefix in `traces` (it reads the prefix's keys and values of the layer).
void BackwardTrace::run_layer(int l, const std::vector<BackwardTrace*>& traces) {
    const BackwardTrace& first = *traces.front();
    const LayerWeights& w = first.model_.layers[l];
    const int Qw = first.split_.q_width(), KVw = first.split_.kv_width(), W = Qw + 2 * KVw;
    for (BackwardTrace* trace : traces) trace->begin_layer(l);
    const auto n1 = [l](BackwardTrace& t) -> const float* { return t.layers_[l].n1.data(); };
    const auto own_k = [l, KVw](BackwardTrace& t) {
        return t.layers_[l].k.data() + static_cast<size_t>(t.first_) * KVw;
    };
    const auto own_v = [l, KVw](BackwardTrace& t) {
        return t.layers_[l].v.data() + static_cast<size_t>(t.first_) * KVw;
    };
    if (first.cfg_.qkv_layout == QkvLayout::separate) {
        together(
            traces, w.q, w.q_b, n1, [l](BackwardTrace& t) { return t.layers_[l].q.data(); }, Qw);
        together(traces, w.k, w.k_b, n1, own_k, KVw);
        together(traces, w.v, w.v_b, n1, own_v, KVw);
    } else {
        together(
            traces, w.attn, w.attn_b, n1, [](BackwardTrace& t) { return t.scratch_.data(); }, W);
        for (BackwardTrace* t : traces)
            t->move_qkv(t->scratch_.data(), t->layers_[l].q.data(), own_k(*t), own_v(*t), false);
    }
    for (BackwardTrace* trace : traces) trace->attend_layer(l);
    together(
        traces, w.attn_proj, w.attn_proj_b, [l](BackwardTrace& t) -> const float* { return t.layers_[l].y.data(); },
        [](BackwardTrace& t) { return t.scratch_.data(); }, first.cfg_.n_embd);
    for (BackwardTrace* trace : traces) trace->before_mlp(l);
    if (first.cfg_.expert_layer(l))
        for (BackwardTrace* trace : traces) trace->experts(l, w, trace->layers_[l]);
    else
        mlp(l, traces);
    for (BackwardTrace* trace : traces) trace->end_layer(l);
}

// Layer l's input (the last layer's output) and its attention's normed input; room for Q, K and V.
void BackwardTrace::begin_layer(int l) {
    const LayerWeights& w = model_.layers[l];
    LayerTrace& lt = layers_[l];
    const int Qw = split_.q_width(), KVw = split_.kv_width(), W = Qw + 2 * KVw;
    const size_t rows = T_;
    lt.x = std::move(final_x_);
    input_norm(normed_input(l, true), w.ln_1_w, w.ln_1_b, lt.x, lt.n1, lt.s1);
    // K and V of every position: the prefix's before first_ (its rotated keys), this trace's rows after.
    lt.q.resize(rows * Qw), lt.k.resize(static_cast<size_t>(positions_) * KVw), lt.v.resize(lt.k.size());
    scratch_.resize(rows * std::max(W, cfg_.n_embd));
}

// From Q, K and V of the trace's rows: their norms and rotations, the prefix's keys and values, the attention.
void BackwardTrace::attend_layer(int l) {
    const LayerWeights& w = model_.layers[l];
    LayerTrace& lt = layers_[l];
    const int Qw = split_.q_width(), KVw = split_.kv_width();
    const size_t rows = T_;
    if (prefix_) {
        const LayerTrace& before = prefix_->layers_[l];
        std::copy_n(before.k.begin(), static_cast<size_t>(first_) * KVw, lt.k.begin());
        std::copy_n(before.v.begin(), static_cast<size_t>(first_) * KVw, lt.v.begin());
    }
    float* k = lt.k.data() + static_cast<size_t>(first_) * KVw;
    if (cfg_.qk_norm) {
        lt.q_raw = lt.q, lt.k_raw.assign(k, k + rows * KVw);
        norm_forward(qk_norm(Qw), lt.q_raw.data(), w.q_norm, nullptr, lt.q.data(), T_ * Qw / qk_norm(Qw).width, lt.sq);
        norm_forward(qk_norm(KVw), lt.k_raw.data(), w.k_norm, nullptr, k, T_ * KVw / qk_norm(KVw).width, lt.sk);
    }
    rotate(l, lt.q.data(), split_.NH, Qw, false);
    rotate(l, k, split_.NKV, KVw, false);
    attend(l, {lt.q.data(), lt.k.data(), lt.v.data(), positions_, false}, lt.att, lt.y);
}

// After the attention's output projection (in scratch_): the residual, the cross-attention, the MLP's normed input.
void BackwardTrace::before_mlp(int l) {
    const LayerWeights& w = model_.layers[l];
    LayerTrace& lt = layers_[l];
    std::vector<float> attended(scratch_.begin(), scratch_.begin() + lt.x.size());
    output_norm(w.attn_out_norm, attended, lt.a_raw, lt.sa);
    lt.xm = lt.x;
    ops::add(lt.xm.data(), attended.data(), lt.xm.size());
    if (cfg_.post_norm) post_norm(w.ln_1_w, w.ln_1_b, lt.xm, lt.sum1, lt.s1);
    if (memory_) cross_attend(l, lt);
    // A parallel residual's MLP reads the layer's input, beside the attention.
    input_norm(normed_input(l, false), w.ln_2_w, w.ln_2_b, cfg_.parallel_residual ? lt.x : lt.xm, lt.n2, lt.s2);
}

// After the MLP: the layer's output, the next one's input.
void BackwardTrace::end_layer(int l) {
    const LayerWeights& w = model_.layers[l];
    LayerTrace& lt = layers_[l];
    output_norm(w.mlp_out_norm, lt.m, lt.m_raw, lt.sm);
    final_x_ = lt.xm;
    ops::add(final_x_.data(), lt.m.data(), final_x_.size());
    if (cfg_.post_norm) post_norm(w.ln_2_w, w.ln_2_b, final_x_, lt.sum2, lt.s2);
}

// Layer l's MLP of each trace: lt.n2 in, lt.m out.
void BackwardTrace::mlp(int l, const std::vector<BackwardTrace*>& traces) {
    const BackwardTrace& first = *traces.front();
    const LayerWeights& w = first.model_.layers[l];
    const int C = first.cfg_.n_embd, F = first.cfg_.mlp_size();
    const bool gate = gated(first.cfg_.mlp);
    for (BackwardTrace* t : traces) {
        const size_t hidden = static_cast<size_t>(t->T_) * F;
        t->layers_[l].act.resize(hidden), t->layers_[l].slope.resize(hidden),
            t->layers_[l].up.resize(gate ? hidden : 0);
        t->layers_[l].m.resize(static_cast<size_t>(t->T_) * C);
    }
    const auto n2 = [l](BackwardTrace& t) -> const float* { return t.layers_[l].n2.data(); };
    if (gate)
        together(
            traces, w.fc, w.fc_b, n2, [l](BackwardTrace& t) { return t.layers_[l].up.data(); }, F);
    together(
        traces, gate ? w.gate : w.fc, gate ? nullptr : w.fc_b, n2,
        [l](BackwardTrace& t) { return t.layers_[l].act.data(); }, F);
    for (BackwardTrace* t : traces) {
        LayerTrace& lt = t->layers_[l];
        activate_with_slopes(t->cfg_.mlp, lt.act.data(), lt.slope.data(), lt.act.size());
        t->scratch_.assign(lt.act.begin(), lt.act.end());
        if (gate) ops::times(t->scratch_.data(), lt.up.data(), lt.act.size());
    }
    together(
        traces, w.fc_proj, w.fc_proj_b, [](BackwardTrace& t) -> const float* { return t.scratch_.data(); },
        [l](BackwardTrace& t) { return t.layers_[l].m.data(); }, C);
}

}  // namespace headscope
