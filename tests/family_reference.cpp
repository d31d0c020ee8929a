// Test support: the families' double-precision reference; see family_reference.h.
#include "family_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace headscope::test {

namespace {

using Rows = std::vector<std::vector<double>>;  // [row][column]

Rows zeros(int rows, int cols) { return Rows(rows, std::vector<double>(cols, 0.0)); }

// Hugging Face's Linear: y = x W^T + b, W stored (out, in); b may be null.
Rows linear(const Rows& x, const std::vector<float>& w, const std::vector<float>* b, int in, int out) {
    Rows y = zeros(static_cast<int>(x.size()), out);
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o) {
            double sum = b ? (*b)[o] : 0.0;
            for (int i = 0; i < in; ++i) sum += x[t][i] * w[static_cast<size_t>(o) * in + i];
            y[t][o] = sum;
        }
    return y;
}

// GPT-2's Conv1D: y = x W + b, W stored (in, out).
Rows conv1d(const Rows& x, const std::vector<float>& w, const std::vector<float>& b, int in, int out) {
    Rows y = zeros(static_cast<int>(x.size()), out);
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o) {
            double sum = b[o];
            for (int i = 0; i < in; ++i) sum += x[t][i] * w[static_cast<size_t>(i) * out + o];
            y[t][o] = sum;
        }
    return y;
}

}  // namespace

void rms_norm(double* x, int n, const std::vector<float>& w, double eps, float offset) {
    double square_sum = 0;
    for (int c = 0; c < n; ++c) square_sum += x[c] * x[c];
    const double inverse = 1 / std::sqrt(square_sum / n + eps);
    for (int c = 0; c < n; ++c) x[c] = x[c] * inverse * double(offset + w[c]);
}

// Gemma's sqrt(C) as transformers makes it: torch.tensor(hidden_size**0.5,
// dtype) in the weights' dtype (the test files' dtype is the model's).
double gemma_embedding_scale(const FamilySpec& s) { return rounded(float(std::sqrt(double(s.n_embd))), s.dtype); }

double soft_capped(double score, double cap) { return cap > 0 ? cap * std::tanh(score / cap) : score; }

namespace {

// Where element d of row r of head `head` lives in a (T, width) buffer.
struct Place {
    int row, col;
};
Place head_place(Split split, int head, int r, int d, int T, int width, int hs) {
    if (split == Split::transpose) return {r, head * hs + d};
    const int flat = (head * T + r) * hs + d;  // (heads, T, hs) read straight off the buffer
    return {flat / width, flat % width};
}

// Head `head`'s (T, hs) rows of a (T, width) buffer, each rotated to its row's
// position (cos and sin times cos_sin_scale, LongRoPE's attention factor).
Rows head_rows(const Rows& buffer, Split split, int head, int hs, const std::vector<float>& inv_freq, bool rotary,
               double cos_sin_scale = 1) {
    const int T = static_cast<int>(buffer.size()), width = static_cast<int>(buffer[0].size());
    Rows rows = zeros(T, hs);
    for (int r = 0; r < T; ++r) {
        for (int d = 0; d < hs; ++d) {
            const Place p = head_place(split, head, r, d, T, width, hs);
            rows[r][d] = buffer[p.row][p.col];
        }
        if (rotary) rotate(inv_freq, r, rows[r].data(), cos_sin_scale);
    }
    return rows;
}

// The full names of one layer's tensors.
struct LayerNames {
    std::string prefix;
    std::string operator()(const std::string& name) const { return prefix + name; }
};

}  // namespace

std::vector<std::vector<double>> layer_norm(std::vector<std::vector<double>> x, const std::vector<float>& w,
                                            const std::vector<float>& b, double eps) {
    for (auto& row : x) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= row.size();
        for (double v : row) var += (v - mean) * (v - mean);
        var /= row.size();
        for (size_t c = 0; c < row.size(); ++c) row[c] = (row[c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
    return x;
}

namespace {

// What one layer's attention reads: Q (T, NH * hs) and K, V (T, NKV * hs), qk-normed.
struct Projections {
    Rows q, k, v;
};

// One forward of the reference over every text: the model, the options and
// what every layer reads, each step a function.
class ReferenceForward {
public:
    ReferenceForward(const FamilyCheckpoint& model, const std::vector<std::vector<int32_t>>& texts,
                     const AttentionOptions& opt, const FamilyHooks& hooks)
        : m_(model), s_(model.spec), texts_(texts), opt_(opt), hooks_(hooks) {
        for (const auto& ids : texts) T_ = std::max(T_, static_cast<int>(ids.size()));
        layers_ = opt.layers;
        if (layers_.empty())
            for (int l = 0; l < s_.n_layer; ++l) layers_.push_back(l);
        ref_.NH = opt.n_head ? opt.n_head : s_.n_head;
        ref_.NKV = ref_.NH / group_;
        ref_.hs = width_ / ref_.NH;
        const size_t B = texts.size(), slots = layers_.size();
        ref_.weights.assign(slots * B * ref_.NH * T_ * T_, 0.0);
        ref_.fully_masked.assign(B * T_, 0);
        ref_.outputs.assign(slots * B * T_ * width_, 0.0);
        ref_.residual.assign(size_t(s_.n_layer) * B * T_ * C_, 0.0);
        ref_.router_experts.assign(size_t(s_.n_layer) * B * T_ * s_.experts_per_token, -1);
        ref_.router_weights.assign(ref_.router_experts.size(), 0.0);
        const double head_scale = gemma_ ? 1 / std::sqrt(s_.query_pre_attn_scalar) : 1 / std::sqrt(double(ref_.hs));
        scale_ = opt.scale == Scale::head ? head_scale : opt.scale == Scale::model ? 1 / std::sqrt(double(C_)) : 1.0;
        global_freq_ = rope_inverse_frequencies(s_, ref_.hs, T_);  // GPT-2's none
        // Gemma 3's sliding layers: rope_local_base_freq, without the rope_scaling.
        FamilySpec local = s_;
        local.rope_theta = s_.local_rope_theta, local.rope_linear_factor = 0;
        local_freq_ = s_.local_rope_theta > 0 ? rope_inverse_frequencies(local, ref_.hs, T_) : global_freq_;
    }

    FamilyReference run() {
        for (int b = 0; b < static_cast<int>(texts_.size()); ++b) {
            Rows x = embed(b);
            for (int l = 0; l < s_.n_layer; ++l) {
                const LayerNames name{(gpt2_   ? "h."
                                       : neox_ ? "gpt_neox.layers."
                                               : s_.model_prefix() + "layers.") +
                                      std::to_string(l) + "."};
                if (hooks_.layer_input) hooks_.layer_input(l, b, x);
                const Rows merged = attend(project(norm(x, name, true), name), l, b, m_.find(name("self_attn.sinks")));
                const auto slot = std::find(layers_.begin(), layers_.end(), l);
                if (slot != layers_.end())
                    for (int t = 0; t < T_; ++t)
                        std::copy_n(
                            merged[t].begin(), width_,
                            ref_.outputs.begin() + (((slot - layers_.begin()) * texts_.size() + b) * T_ + t) * width_);
                add_sublayers(x, merged, name, l, b);
                for (int t = 0; t < T_; ++t)
                    std::copy_n(x[t].begin(), C_,
                                ref_.residual.begin() + ((size_t(l) * texts_.size() + b) * T_ + t) * C_);
            }
        }
        return ref_;
    }

private:
    // Text b's embeddings (pads past its length): Gemma's times its rounded sqrt(C), GPT-2's plus its positions.
    Rows embed(int b) const {
        const std::vector<float>& table = m_[gpt2_   ? "wte.weight"
                                             : neox_ ? "gpt_neox.embed_in.weight"
                                                     : s_.model_prefix() + "embed_tokens.weight"];
        const double scale = gemma_ ? gemma_embedding_scale(s_) : 1;
        const int length = static_cast<int>(texts_[b].size());
        Rows x = zeros(T_, C_);
        for (int t = 0; t < T_; ++t) {
            const size_t id = static_cast<size_t>(t < length ? texts_[b][t] : s_.pad_id());
            for (int c = 0; c < C_; ++c)
                x[t][c] = table[id * C_ + c] * scale + (gpt2_ ? m_["wpe.weight"][size_t(t) * C_ + c] : 0.0);
        }
        return x;
    }

    // GPT-NeoX's and GPT-2's LayerNorm, else RMSNorm, each of C values, before
    // the attention (`first`) or the MLP; OLMo 2 has none there.
    Rows norm(const Rows& x, const LayerNames& name, bool first) const {
        if (olmo2_) return x;
        const std::string which = gpt2_    ? (first ? "ln_1" : "ln_2")
                                  : first  ? "input_layernorm"
                                  : gemma_ ? "pre_feedforward_layernorm"
                                           : "post_attention_layernorm";
        if (neox_) return layer_norm(x, m_[name(which + ".weight")], m_[name(which + ".bias")], s_.norm_eps);
        Rows y = x;
        rms_norm_rows(y, C_, m_[name(which + ".weight")]);
        return y;
    }
    // RMSNorm of each row's n values (of (1 + w) for Gemma).
    void rms_norm_rows(Rows& rows, int n, const std::vector<float>& w) const {
        for (auto& row : rows) rms_norm(row.data(), n, w, s_.norm_eps, offset_);
    }
    // A product with a bias: GPT-2's Conv1D, else Hugging Face's Linear.
    Rows product(const Rows& x, const LayerNames& name, const std::string& which, int in, int out) const {
        const std::vector<float>&w = m_[name(which + ".weight")], &b = m_[name(which + ".bias")];
        return gpt2_ ? conv1d(x, w, b, in, out) : linear(x, w, &b, in, out);
    }

    // Q, K and V of the normed input h, as each family lays out its projections, then their norms.
    Projections project(const Rows& h, const LayerNames& name) const {
        const int hs = s_.head_dim, kv_width = s_.kv_heads() * hs;
        Projections p{zeros(T_, width_), zeros(T_, kv_width), zeros(T_, kv_width)};
        if (neox_) {
            // c_attn's outputs are [Q | K | V]; query_key_value's per head [q k v], hs each.
            const Rows qkv = product(h, name, gpt2_ ? "attn.c_attn" : "attention.query_key_value", C_, 3 * width_);
            for (int t = 0; t < T_; ++t)
                for (int head = 0; head < s_.n_head; ++head)
                    for (int d = 0; d < hs; ++d) {
                        const int at = gpt2_ ? head * hs + d : head * 3 * hs + d, apart = gpt2_ ? width_ : hs;
                        p.q[t][head * hs + d] = qkv[t][at];
                        p.k[t][head * hs + d] = qkv[t][at + apart];
                        p.v[t][head * hs + d] = qkv[t][at + 2 * apart];
                    }
        } else if (phi3_) {  // qkv_proj's outputs are [Q | K | V]: NH * hs, then NKV * hs each
            const Rows qkv = linear(h, m_[name("self_attn.qkv_proj.weight")], nullptr, C_, width_ + 2 * kv_width);
            for (int t = 0; t < T_; ++t) {
                std::copy_n(qkv[t].begin(), width_, p.q[t].begin());
                std::copy_n(qkv[t].begin() + width_, kv_width, p.k[t].begin());
                std::copy_n(qkv[t].begin() + width_ + kv_width, kv_width, p.v[t].begin());
            }
        } else {
            const auto proj = [&](const char* which, int out) {
                const std::string w = std::string("self_attn.") + which;
                return linear(h, m_[name(w + ".weight")], m_.find(name(w + ".bias")), C_, out);
            };
            p.q = proj("q_proj", width_), p.k = proj("k_proj", kv_width), p.v = proj("v_proj", kv_width);
        }
        if (olmo2_ || s_.family == Family::olmoe) {  // the whole projections, before the heads and RoPE
            rms_norm_rows(p.q, width_, m_[name("self_attn.q_norm.weight")]);
            rms_norm_rows(p.k, kv_width, m_[name("self_attn.k_norm.weight")]);
        }
        const bool qwen3 = s_.family == Family::qwen3 || s_.family == Family::qwen3_moe;
        if (qwen3 || (gemma_ && s_.family != Family::gemma2))  // the own heads, before RoPE
            for (int t = 0; t < T_; ++t) {
                for (int c = 0; c < width_; c += hs)
                    rms_norm(&p.q[t][c], hs, m_[name("self_attn.q_norm.weight")], s_.norm_eps, offset_);
                for (int c = 0; c < kv_width; c += hs)
                    rms_norm(&p.k[t][c], hs, m_[name("self_attn.k_norm.weight")], s_.norm_eps, offset_);
            }
        return p;
    }

    // One head's (T, T) map of text b: scores scaled (and soft-capped), masked,
    // softmaxed with gpt-oss's `sink` logit in the denominator (-infinity: none).
    Rows head_map(const Rows& qh, const Rows& kh, int window, int b, double sink) {
        const int length = static_cast<int>(texts_[b].size());
        Rows att = zeros(T_, T_);
        for (int i = 0; i < T_; ++i) {
            std::vector<bool> visible(T_);
            bool any = false;
            for (int j = 0; j < T_; ++j) {
                visible[j] = (!opt_.causal || j <= i) && (!opt_.padding_mask || (i < length && j < length)) &&
                             (window <= 0 || j > i - window);
                any = any || visible[j];
            }
            if (!any) {
                ref_.fully_masked[b * T_ + i] = 1;
                continue;
            }
            double max_score = sink;
            for (int j = 0; j < T_; ++j) {
                if (!visible[j]) continue;
                double dot = 0;
                for (int d = 0; d < ref_.hs; ++d) dot += qh[i][d] * kh[j][d];
                att[i][j] = soft_capped(dot * scale_, s_.attn_softcap);  // after the scale, before the mask
                max_score = std::max(max_score, att[i][j]);
            }
            double sum = std::exp(sink - max_score);
            for (int j = 0; j < T_; ++j) {
                att[i][j] = visible[j] ? std::exp(att[i][j] - max_score) : 0.0;
                sum += att[i][j];
            }
            for (int j = 0; j < T_; ++j) att[i][j] /= sum;
        }
        return att;
    }

    // Layer l's heads over text b (their maps kept where the layer is
    // returned, a knocked-out head's output replaced), merged back to (T, NH * hs).
    // gpt-oss's `sinks`, a logit per head, where not null.
    Rows attend(const Projections& p, int l, int b, const std::vector<float>* sinks) {
        const int NH = ref_.NH, hs = ref_.hs, length = static_cast<int>(texts_[b].size());
        const std::vector<float>& inv_freq = s_.windowed(l) ? local_freq_ : global_freq_;
        const int window = s_.windowed(l) || !(gemma_ || s_.family == Family::gpt_oss) ? opt_.sliding_window : 0;
        const double cos_sin_scale = rope_attention_factor(s_);
        const auto slot = std::find(layers_.begin(), layers_.end(), l);
        Rows merged = zeros(T_, width_);
        for (int head = 0; head < NH; ++head) {
            const int kv_head = head / group_;  // repeat_kv: each K/V head serves `group` consecutive heads
            Rows att = head_map(head_rows(p.q, opt_.split, head, hs, inv_freq, true, cos_sin_scale),
                                head_rows(p.k, opt_.split, kv_head, hs, inv_freq, true, cos_sin_scale), window, b,
                                sinks ? (*sinks)[head] : -INFINITY);
            if (hooks_.pattern) hooks_.pattern(l, b, head, att);
            const Rows vh = head_rows(p.v, opt_.split, kv_head, hs, inv_freq, false);
            if (slot != layers_.end())
                for (int i = 0; i < T_; ++i)
                    std::copy_n(att[i].begin(), T_,
                                ref_.weights.begin() +
                                    ((((slot - layers_.begin()) * texts_.size() + b) * NH + head) * T_ + i) * T_);
            Rows y = zeros(T_, hs);
            for (int r = 0; r < T_; ++r)
                for (int d = 0; d < hs; ++d)
                    for (int j = 0; j < T_; ++j) y[r][d] += att[r][j] * vh[j][d];
            if (std::find(opt_.ablate.begin(), opt_.ablate.end(), HeadRef{l, head}) != opt_.ablate.end())
                for (int d = 0; d < hs; ++d) {  // knocked out: zero, or its mean over the text's real positions
                    double mean = 0;
                    for (int r = 0; r < length && opt_.ablation == Ablation::mean; ++r) mean += y[r][d] / length;
                    for (int r = 0; r < T_; ++r) y[r][d] = mean;
                }
            if (hooks_.head_output) hooks_.head_output(l, b, head, y);
            for (int r = 0; r < T_; ++r)
                for (int d = 0; d < hs; ++d) {
                    const Place at = head_place(opt_.split, head, r, d, T_, width_, hs);
                    merged[at.row][at.col] = y[r][d];
                }
        }
        return merged;
    }

    // x += the attention's output and the MLP's, as each family adds them.
    void add_sublayers(Rows& x, const Rows& merged, const LayerNames& name, int l, int b) {
        const bool output_norms = olmo2_ || gemma_;  // each sublayer's output normed inside the residual
        Rows attention = neox_ ? product(merged, name, gpt2_ ? "attn.c_proj" : "attention.dense", width_, C_)
                               : linear(merged, m_[name("self_attn.o_proj.weight")],
                                        m_.find(name("self_attn.o_proj.bias")), width_, C_);
        if (output_norms) rms_norm_rows(attention, C_, m_[name("post_attention_layernorm.weight")]);
        // Pythia's parallel residual: the MLP reads the layer's input; the others the input plus attention.
        Rows mlp_in = x;
        if (!neox_ || gpt2_ || !s_.parallel_residual)
            for (int t = 0; t < T_; ++t)
                for (int c = 0; c < C_; ++c) mlp_in[t][c] += attention[t][c];
        Rows mlp = neox_                ? neox_mlp(norm(mlp_in, name, false), name)
                   : s_.expert_layer(l) ? experts(norm(mlp_in, name, false), l, b)
                                        : gated_mlp(norm(mlp_in, name, false), name);
        if (output_norms) rms_norm_rows(mlp, C_, m_[name("post_feedforward_layernorm.weight")]);
        if (hooks_.mlp_output) hooks_.mlp_output(l, b, mlp);
        for (int t = 0; t < T_; ++t)
            for (int c = 0; c < C_; ++c) x[t][c] += attention[t][c] + mlp[t][c];
    }

    // A layer of experts (expert_mlp) over text b's rows, its choices kept.
    Rows experts(const Rows& h, int l, int b) {
        std::vector<int> knocked_out;
        for (const ExpertRef& e : opt_.ablate_experts)
            if (e.layer == l) knocked_out.push_back(e.expert);
        const size_t at = ((size_t(l) * texts_.size() + b) * T_) * s_.experts_per_token;
        return expert_mlp(m_, l, h, knocked_out, ref_.router_experts.data() + at, ref_.router_weights.data() + at);
    }

    // GPT-2's MLP (tanh GELU, gelu_new) and GPT-NeoX's (exact GELU), with biases.
    Rows neox_mlp(const Rows& h, const LayerNames& name) const {
        const int F = s_.mlp_dim;
        Rows hidden = product(h, name, gpt2_ ? "mlp.c_fc" : "mlp.dense_h_to_4h", C_, F);
        for (auto& row : hidden)
            for (double& u : row)
                u = gpt2_ ? 0.5 * u * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (u + 0.044715 * u * u * u)))
                          : 0.5 * u * (1 + std::erf(u / std::numbers::sqrt2));
        return product(hidden, name, gpt2_ ? "mlp.c_proj" : "mlp.dense_4h_to_h", F, C_);
    }

    // The gated MLPs: SiLU(gate) * up, Gemma's tanh GELU(gate) * up; Phi-3's gate and up one product.
    Rows gated_mlp(const Rows& h, const LayerNames& name) const {
        const int F = s_.mlp_dim;
        Rows gate = zeros(T_, F), up = zeros(T_, F);
        if (phi3_) {  // gate_up_proj's outputs: gate, then up (chunk(2, dim=-1))
            const Rows gate_up = linear(h, m_[name("mlp.gate_up_proj.weight")], nullptr, C_, 2 * F);
            for (int t = 0; t < T_; ++t) {
                std::copy_n(gate_up[t].begin(), F, gate[t].begin());
                std::copy_n(gate_up[t].begin() + F, F, up[t].begin());
            }
        } else {
            gate = linear(h, m_[name("mlp.gate_proj.weight")], nullptr, C_, F);
            up = linear(h, m_[name("mlp.up_proj.weight")], nullptr, C_, F);
        }
        for (int t = 0; t < T_; ++t)
            for (int f = 0; f < F; ++f) {
                const double g = gate[t][f];
                const double tanh_gelu =
                    0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
                gate[t][f] = (gemma_ ? tanh_gelu : g / (1 + std::exp(-g))) * up[t][f];
            }
        return linear(gate, m_[name("mlp.down_proj.weight")], nullptr, F, C_);
    }

    const FamilyCheckpoint& m_;
    const FamilySpec& s_;
    const std::vector<std::vector<int32_t>>& texts_;
    const AttentionOptions& opt_;
    const FamilyHooks& hooks_;
    // GPT-NeoX and GPT-2 have LayerNorms, biases everywhere and Q, K and V fused.
    const bool gpt2_ = s_.family == Family::gpt2, neox_ = s_.family == Family::gpt_neox || gpt2_;
    const bool olmo2_ = s_.family == Family::olmo2;  // no norm before a sublayer, one on each one's output
    const bool gemma_ = test::gemma(s_.family);      // norms before and after each sublayer, of (1 + w)
    const bool phi3_ = s_.family == Family::phi3;
    const float offset_ = gemma_ ? 1.f : 0.f;
    const int C_ = s_.n_embd, width_ = s_.n_head * s_.head_dim, group_ = s_.n_head / s_.kv_heads();
    int T_ = 0;
    std::vector<int> layers_;
    double scale_ = 1;
    std::vector<float> global_freq_, local_freq_;
    FamilyReference ref_;
};

}  // namespace

FamilyReference family_reference(const FamilyCheckpoint& model, const std::vector<std::vector<int32_t>>& texts,
                                 const AttentionOptions& opt, const FamilyHooks& hooks) {
    return ReferenceForward(model, texts, opt, hooks).run();
}

}  // namespace headscope::test
