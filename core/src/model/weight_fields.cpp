// Where each weight of a model goes: see weight_fields.h.
#include "weight_fields.h"

#include <cstdlib>

namespace headscope {

Matrix* matrix_field(Model& m, const TensorSpec& t) {
    switch (t.weight) {
        case Weight::wte: return &m.wte;
        case Weight::wpe: return &m.wpe;
        case Weight::lm_head: return &m.lm_head;
        case Weight::attn_w: return &m.layers[t.layer].attn;
        case Weight::q_w: return &m.layers[t.layer].q;
        case Weight::k_w: return &m.layers[t.layer].k;
        case Weight::v_w: return &m.layers[t.layer].v;
        case Weight::attn_proj_w: return &m.layers[t.layer].attn_proj;
        case Weight::fc_w: return &m.layers[t.layer].fc;
        case Weight::gate_w: return &m.layers[t.layer].gate;
        case Weight::fc_proj_w: return &m.layers[t.layer].fc_proj;
        case Weight::wtt: return &m.wtt;
        case Weight::head_dense_w: return &m.head_dense;
        case Weight::gate_up_w: return &m.layers[t.layer].gate_up;
        case Weight::cross_q_w: return &m.layers[t.layer].cross_q;
        case Weight::cross_k_w: return &m.layers[t.layer].cross_k;
        case Weight::cross_v_w: return &m.layers[t.layer].cross_v;
        case Weight::cross_proj_w: return &m.layers[t.layer].cross_proj;
        case Weight::rel_bias: return &m.rel_bias;
        case Weight::router_w: return &m.layers[t.layer].router;
        case Weight::expert_gate_w: return &m.layers[t.layer].experts.at(t.expert).gate;
        case Weight::expert_up_w: return &m.layers[t.layer].experts.at(t.expert).up;
        case Weight::expert_down_w: return &m.layers[t.layer].experts.at(t.expert).down;
        default: return nullptr;
    }
}

const float*& vector_field(Model& m, const TensorSpec& t) {
    switch (t.weight) {
        case Weight::ln_1_w: return m.layers[t.layer].ln_1_w;
        case Weight::ln_1_b: return m.layers[t.layer].ln_1_b;
        case Weight::attn_b: return m.layers[t.layer].attn_b;
        case Weight::q_b: return m.layers[t.layer].q_b;
        case Weight::k_b: return m.layers[t.layer].k_b;
        case Weight::v_b: return m.layers[t.layer].v_b;
        case Weight::q_norm: return m.layers[t.layer].q_norm;
        case Weight::k_norm: return m.layers[t.layer].k_norm;
        case Weight::sinks: return m.layers[t.layer].sinks;
        case Weight::router_b: return m.layers[t.layer].router_b;
        case Weight::expert_gate_b: return m.layers[t.layer].experts.at(t.expert).gate_b;
        case Weight::expert_up_b: return m.layers[t.layer].experts.at(t.expert).up_b;
        case Weight::expert_down_b: return m.layers[t.layer].experts.at(t.expert).down_b;
        case Weight::attn_proj_b: return m.layers[t.layer].attn_proj_b;
        case Weight::ln_2_w: return m.layers[t.layer].ln_2_w;
        case Weight::ln_2_b: return m.layers[t.layer].ln_2_b;
        case Weight::attn_out_norm_w: return m.layers[t.layer].attn_out_norm;
        case Weight::mlp_out_norm_w: return m.layers[t.layer].mlp_out_norm;
        case Weight::fc_b: return m.layers[t.layer].fc_b;
        case Weight::fc_proj_b: return m.layers[t.layer].fc_proj_b;
        case Weight::ln_f_w: return m.ln_f_w;
        case Weight::ln_f_b: return m.ln_f_b;
        case Weight::emb_ln_w: return m.emb_ln_w;
        case Weight::emb_ln_b: return m.emb_ln_b;
        case Weight::head_dense_b: return m.head_dense_b;
        case Weight::head_ln_w: return m.head_ln_w;
        case Weight::head_ln_b: return m.head_ln_b;
        case Weight::lm_bias: return m.lm_bias;
        case Weight::cross_q_b: return m.layers[t.layer].cross_q_b;
        case Weight::cross_k_b: return m.layers[t.layer].cross_k_b;
        case Weight::cross_v_b: return m.layers[t.layer].cross_v_b;
        case Weight::cross_proj_b: return m.layers[t.layer].cross_proj_b;
        case Weight::ln_x_w: return m.layers[t.layer].ln_x_w;
        case Weight::ln_x_b: return m.layers[t.layer].ln_x_b;
        default: std::abort();  // a matrix: matrix_field
    }
}

bool norm_scale(Weight weight) {
    switch (weight) {
        case Weight::ln_1_w:
        case Weight::ln_2_w:
        case Weight::attn_out_norm_w:
        case Weight::mlp_out_norm_w:
        case Weight::q_norm:
        case Weight::k_norm:
        case Weight::ln_f_w: return true;
        default: return false;
    }
}

}  // namespace headscope
