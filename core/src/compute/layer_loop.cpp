// The layer loop, once for every family and device (layer_ops.h): what
// differs between families is read from the model description here, and
// what differs between devices is in their operations.
#include "headscope/compute/layer_ops.h"

namespace headscope {

// Pre-LN: x += attn(norm(x)), x += mlp(norm(x)); post-LN (BERT): x =
// ln_1(x + attn(x)), x = ln_2(x + mlp(x)); a parallel residual (Pythia):
// both sublayers read the layer's input. The last layer needed stops after
// its attention (an encoder–decoder's after its cross-attention's maps).
void forward_layer(LayerOps& ops, const Config& cfg, const LayerWeights& w, const LayerStep& step) {
    const int l = step.layer;
    ops.at(LayerPoint::input, l);
    // The attention reads the residual itself: BERT's norm comes after; ModernBERT's layer 0 has none, nor OLMo 2's
    // layers.
    if (cfg.post_norm || !cfg.input_norms || (l == 0 && !cfg.first_attention_norm))
        ops.copy(Tensor::x, Tensor::ln);
    else
        ops.norm(Tensor::x, w.ln_1_w, w.ln_1_b, Tensor::ln);
    ops.project_qkv(w);
    ops.rotary(l);
    ops.attention(l);
    ops.at(LayerPoint::heads, l);
    if (step.last && !cfg.is_encoder_decoder()) return;  // a decoder layer's cross-attention maps come after
    ops.at(LayerPoint::attention_end, l);

    if (cfg.parallel_residual) ops.norm(Tensor::x, w.ln_2_w, w.ln_2_b, Tensor::ln);
    ops.linear(Tensor::y, w.attn_proj, w.attn_proj_b, step.apart ? Tensor::out : Tensor::x, !step.apart);
    if (step.apart) ops.add(Sublayer::attention, l, w.attn_out_norm);
    ops.check_finite(l, "the attention");
    if (cfg.post_norm) ops.norm(Tensor::x, w.ln_1_w, w.ln_1_b, Tensor::x);
    if (cfg.is_encoder_decoder()) ops.cross_attention(l);
    if (step.last) return;
    ops.at(LayerPoint::mlp_input, l);

    if (cfg.post_norm || !cfg.input_norms)  // the MLP reads x itself
        ops.copy(Tensor::x, Tensor::ln);
    else if (!cfg.parallel_residual)
        ops.norm(Tensor::x, w.ln_2_w, w.ln_2_b, Tensor::ln);
    const Tensor out = step.apart ? Tensor::out : Tensor::x;
    if (cfg.expert_layer(l))
        ops.experts(w, l, out);
    else
        ops.mlp(w, out);
    ops.at(LayerPoint::mlp_output, l);
    if (step.apart) ops.add(Sublayer::mlp, l, w.mlp_out_norm);
    if (cfg.post_norm) ops.norm(Tensor::x, w.ln_2_w, w.ln_2_b, Tensor::x);
    ops.check_finite(l, "the MLP");
    ops.at(LayerPoint::output, l);
}

}  // namespace headscope
