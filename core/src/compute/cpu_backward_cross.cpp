// The backward pass through an encoder–decoder (backward.h): each decoder
// layer's cross-attention after its self-attention, as the CPU forward's
// cross_attend computes it (queries from the decoder's residual, its norm
// first where the layers norm their inputs, or the norm after the sum where
// they norm after; keys and values of the encoder's output; every source
// token seen; no position bias), and back: the gradients of its heads'
// outputs and maps, of the residual it read, and of the encoder's output,
// which the encoder's own backward then carries to its layer 0.
// Legend: S source tokens, KVw = NKV hs.
#include "backward_trace.h"
#include "headscope/compute/cpu_ops.h"

namespace headscope {

void BackwardTrace::cross_attend(int l, LayerTrace& lt) const {
    const LayerWeights& w = model_.layers[l];
    const int C = cfg_.n_embd, Qw = split_.q_width(), KVw = split_.kv_width();
    lt.xc = lt.xm;
    input_norm(!cfg_.post_norm, w.ln_x_w, w.ln_x_b, lt.xc, lt.nc, lt.sc);
    lt.cq.resize(static_cast<size_t>(T_) * Qw);
    backward_linear(lt.nc.data(), T_, w.cross_q, w.cross_q_b, lt.cq.data(), Qw);
    lt.ck.resize(static_cast<size_t>(S_) * KVw), lt.cv.resize(lt.ck.size());
    backward_linear(memory_->data(), S_, w.cross_k, w.cross_k_b, lt.ck.data(), KVw);
    backward_linear(memory_->data(), S_, w.cross_v, w.cross_v_b, lt.cv.data(), KVw);
    attend(l, {lt.cq.data(), lt.ck.data(), lt.cv.data(), S_, true}, lt.catt, lt.cy);
    std::vector<float> attended(static_cast<size_t>(T_) * C);
    backward_linear(lt.cy.data(), T_, w.cross_proj, w.cross_proj_b, attended.data(), C);
    ops::add(lt.xm.data(), attended.data(), lt.xm.size());
    if (cfg_.post_norm) post_norm(w.ln_x_w, w.ln_x_b, lt.xm, lt.sumc, lt.sc);
}

void BackwardTrace::cross_backward(int l, const LayerTrace& lt, std::vector<float>& dx, RunActivations& gradients,
                                   std::vector<float>& d_memory) const {
    const LayerWeights& w = model_.layers[l];
    const int C = cfg_.n_embd, Qw = split_.q_width(), T = T_;
    const size_t head_rows = static_cast<size_t>(T) * Qw, maps = static_cast<size_t>(split_.NH) * T * S_;
    if (cfg_.post_norm) post_norm_backward(w.ln_x_w, lt.sumc, lt.sc, dx);
    std::vector<float> dy(head_rows), dq, dk, dv;
    backward_linear(dx.data(), T, w.cross_proj.transposed(), nullptr, dy.data(), Qw);
    std::copy(dy.begin(), dy.end(), gradients.cross_heads.begin() + l * head_rows);
    attend_backward(l, {lt.cq.data(), lt.ck.data(), lt.cv.data(), S_, true}, lt.catt, dy,
                    gradients.cross_pattern.data() + l * maps, dq, dk, dv);
    backward_linear(dk.data(), S_, w.cross_k.transposed(), nullptr, d_memory.data(), C, /*accumulate=*/true);
    backward_linear(dv.data(), S_, w.cross_v.transposed(), nullptr, d_memory.data(), C, /*accumulate=*/true);
    std::vector<float> dn(static_cast<size_t>(T) * C);
    backward_linear(dq.data(), T, w.cross_q.transposed(), nullptr, dn.data(), C);
    input_norm_backward(!cfg_.post_norm, w.ln_x_w, lt.xc, lt.sc, dn, dx);
}

}  // namespace headscope
