// GPT-2 training step on the CPU: forward with the engine's ops, backward by
// hand (llm.c's derivations), AdamW with global-norm clipping.
#include "gpt2_trainer.h"

#include <cmath>
#include <ostream>
#include <random>

#include "headscope/base/shape.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/io/files.h"
#include "headscope/io/safetensors.h"

namespace headscope::train {

std::vector<ParameterTensor> parameter_layout(const Config& config) {
    std::vector<ParameterTensor> layout;
    size_t offset = 0;
    for (TensorSpec& spec : model_tensors(config)) {
        const size_t size = static_cast<size_t>(element_count(spec.shape));
        layout.push_back({std::move(spec), offset, size});
        offset += size;
    }
    return layout;
}

namespace {

constexpr double layer_norm_eps = 1e-5;

// Weight decay applies to the matrices, not to LayerNorm gains or biases.
bool decayed(const TensorSpec& t) { return t.shape.size() == 2; }

template <typename S>
using MatrixMap = ops::MatrixMap<S>;
template <typename S>
using ConstMatrixMap = ops::ConstMatrixMap<S>;

// dx += d(LayerNorm)/dx . dout; dw, db += their gradients. Mean and inverse
// standard deviation are recomputed from x rather than stored.
template <typename S>
void layer_norm_backward(const S* dout, const S* x, const S* w, S* dw, S* db, S* dx, int rows, int C) {
    for (int r = 0; r < rows; ++r) {
        const S* xr = x + static_cast<size_t>(r) * C;
        const S* dr = dout + static_cast<size_t>(r) * C;
        S* dxr = dx + static_cast<size_t>(r) * C;
        S mean = 0, var = 0;
        for (int c = 0; c < C; ++c) mean += xr[c];
        mean /= C;
        for (int c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
        const S inv_std = 1 / std::sqrt(var / C + S(layer_norm_eps));
        S dnorm_mean = 0, dnorm_xhat_mean = 0;
        for (int c = 0; c < C; ++c) {
            const S xhat = (xr[c] - mean) * inv_std;
            dnorm_mean += dr[c] * w[c];
            dnorm_xhat_mean += dr[c] * w[c] * xhat;
        }
        dnorm_mean /= C;
        dnorm_xhat_mean /= C;
        for (int c = 0; c < C; ++c) {
            const S xhat = (xr[c] - mean) * inv_std;
            db[c] += dr[c];
            dw[c] += dr[c] * xhat;
            dxr[c] += inv_std * (dr[c] * w[c] - dnorm_mean - xhat * dnorm_xhat_mean);
        }
    }
}

// For out = x W + b: dW += x^T dout, db += column sums of dout, dx = dout W^T.
template <typename S>
void linear_backward(const S* dout, const S* x, const S* w, S* dw, S* db, S* dx, int rows, int in, int out) {
    ConstMatrixMap<S> d(dout, rows, out);
    MatrixMap<S>(dw, in, out).noalias() += ConstMatrixMap<S>(x, rows, in).transpose() * d;
    ops::MatrixMap<S>(db, 1, out) += d.colwise().sum();
    MatrixMap<S>(dx, rows, in).noalias() = d * ConstMatrixMap<S>(w, in, out).transpose();
}

// d_in = d_out * gelu'(x), the tanh approximation's derivative.
template <typename S>
void gelu_backward(const S* x, const S* d_out, S* d_in, size_t n) {
    const S k = std::sqrt(S(2) / S(M_PI));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) {
        const S v = x[i];
        const S th = std::tanh(k * (v + S(0.044715) * v * v * v));
        const S derivative = S(0.5) * (1 + th) + S(0.5) * v * (1 - th * th) * k * (1 + 3 * S(0.044715) * v * v);
        d_in[i] = d_out[i] * derivative;
    }
}

}  // namespace

template <typename S>
Gpt2Trainer<S>::Gpt2Trainer(const Config& config, uint64_t seed) : config_(config), layout_(parameter_layout(config)) {
    const size_t n = layout_.back().offset + layout_.back().size;
    params_.assign(n, 0);
    grads_.assign(n, 0);
    adam_m_.assign(n, 0);
    adam_v_.assign(n, 0);
    // GPT-2's initialisation: N(0, 0.02) matrices, residual projections scaled
    // by 1/sqrt(2L), zero biases, unit LayerNorm gains.
    std::mt19937_64 rng(seed);
    for (const ParameterTensor& t : layout_) {
        const Weight w = t.spec.weight;
        const bool gain = w == Weight::ln_1_w || w == Weight::ln_2_w || w == Weight::ln_f_w;
        const bool residual_projection = w == Weight::attn_proj_w || w == Weight::fc_proj_w;
        const double std = residual_projection ? 0.02 / std::sqrt(2.0 * config.n_layer) : 0.02;
        std::normal_distribution<double> normal(0.0, std);
        for (size_t i = 0; i < t.size; ++i)
            params_[t.offset + i] = gain ? S(1) : decayed(t.spec) ? static_cast<S>(normal(rng)) : S(0);
    }
    p_ = tensors_in(params_);
    g_ = tensors_in(grads_);
}

template <typename S>
typename Gpt2Trainer<S>::Tensors Gpt2Trainer<S>::tensors_in(Buffer<S>& buffer) const {
    Tensors t;
    t.layers.resize(config_.n_layer);
    for (const ParameterTensor& p : layout_) gpt2_weight_pointer(t, p.spec) = buffer.data() + p.offset;
    return t;
}

template <typename S>
void Gpt2Trainer<S>::resize_activations(int B, int T) {
    B_ = B;
    T_ = T;
    const size_t L = config_.n_layer, C = config_.n_embd, NH = config_.n_head, V = config_.vocab_size;
    const size_t BT = static_cast<size_t>(B) * T, BTC = BT * C;
    residual_.resize((L + 1) * BTC);
    ln_1_.resize(L * BTC);
    qkv_.resize(L * 3 * BTC);
    att_.resize(L * B * NH * T * T);
    att_y_.resize(L * BTC);
    residual_mid_.resize(L * BTC);
    ln_2_.resize(L * BTC);
    fc_.resize(L * 4 * BTC);
    fc_gelu_.resize(L * 4 * BTC);
    ln_f_.resize(BTC);
    probs_.resize(BT * V);
    d_residual_.resize(BTC);
    d_buffer_.resize(BTC);
    d_qkv_.resize(3 * BTC);
    d_fc_.resize(4 * BTC);
    d_att_.resize(B * NH * T * T);
    d_logits_.resize(BT * V);
}

template <typename S>
S Gpt2Trainer<S>::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
    resize_activations(B, T);
    const int C = config_.n_embd, NH = config_.n_head, hs = C / NH, V = config_.vocab_size, BT = B * T;
    const size_t BTC = static_cast<size_t>(BT) * C;
    inputs_.assign(inputs, inputs + BT);
    targets_.assign(targets, targets + BT);

    for (int r = 0; r < BT; ++r) {
        const S* te = p_.wte + static_cast<size_t>(inputs[r]) * C;
        const S* pe = p_.wpe + static_cast<size_t>(r % T) * C;
        for (int c = 0; c < C; ++c) residual_[static_cast<size_t>(r) * C + c] = te[c] + pe[c];
    }
    for (int l = 0; l < config_.n_layer; ++l) {
        const Layer& w = p_.layers[l];
        const S* x = residual_.data() + l * BTC;
        S* ln_1 = ln_1_.data() + l * BTC;
        S* qkv = qkv_.data() + l * 3 * BTC;
        S* att = att_.data() + static_cast<size_t>(l) * B * NH * T * T;
        S* y = att_y_.data() + l * BTC;
        S* mid = residual_mid_.data() + l * BTC;
        S* ln_2 = ln_2_.data() + l * BTC;
        S* fc = fc_.data() + l * 4 * BTC;
        S* fc_gelu = fc_gelu_.data() + l * 4 * BTC;
        S* out = residual_.data() + (l + 1) * BTC;

        ops::layer_norm(x, w.ln_1_w, w.ln_1_b, ln_1, BT, C, S(layer_norm_eps));
        ops::linear(ln_1, w.attn_w, w.attn_b, qkv, BT, C, 3 * C);
#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < NH; ++h) {
                const S* q = qkv + static_cast<size_t>(b) * T * 3 * C + h * hs;
                ops::attention_head(
                    q, 3 * C, q + C, 3 * C, q + 2 * C, 3 * C, y + static_cast<size_t>(b) * T * C + h * hs, C,
                    att + (static_cast<size_t>(b) * NH + h) * T * T, 0, T, T, hs, S(1) / std::sqrt(S(hs)), [](int i) {
                        return ops::KeyRange{0, i + 1};
                    });
            }
        ops::linear(y, w.attn_proj_w, w.attn_proj_b, mid, BT, C, C);
        MatrixMap<S>(mid, BT, C) += ConstMatrixMap<S>(x, BT, C);
        ops::layer_norm(mid, w.ln_2_w, w.ln_2_b, ln_2, BT, C, S(layer_norm_eps));
        ops::linear(ln_2, w.fc_w, w.fc_b, fc, BT, C, 4 * C);
        ops::gelu(fc, fc_gelu, 4 * BTC);
        ops::linear(fc_gelu, w.fc_proj_w, w.fc_proj_b, out, BT, 4 * C, C);
        MatrixMap<S>(out, BT, C) += ConstMatrixMap<S>(mid, BT, C);
    }
    ops::layer_norm(residual_.data() + config_.n_layer * BTC, p_.ln_f_w, p_.ln_f_b, ln_f_.data(), BT, C,
                    S(layer_norm_eps));
    // Logits with the tied output embedding, then softmax per row.
    MatrixMap<S>(probs_.data(), BT, V).noalias() =
        ConstMatrixMap<S>(ln_f_.data(), BT, C) * ConstMatrixMap<S>(p_.wte, V, C).transpose();
#pragma omp parallel for schedule(static)
    for (int r = 0; r < BT; ++r) ops::masked_softmax_row(probs_.data() + static_cast<size_t>(r) * V, 0, V, V, S(1));
    S loss = 0;  // summed in order, so a seeded run repeats exactly
    for (int r = 0; r < BT; ++r) loss -= std::log(probs_[static_cast<size_t>(r) * V + targets[r]]);
    return loss / BT;
}

template <typename S>
void Gpt2Trainer<S>::backward() {
    const int B = B_, T = T_, C = config_.n_embd, NH = config_.n_head, hs = C / NH, V = config_.vocab_size, BT = B * T;
    const size_t BTC = static_cast<size_t>(BT) * C;
    std::fill(grads_.begin(), grads_.end(), S(0));

    // Loss = mean over rows of -log softmax: dlogits = (probs - onehot) / BT.
    for (int r = 0; r < BT; ++r) {
        const S* p = probs_.data() + static_cast<size_t>(r) * V;
        S* d = d_logits_.data() + static_cast<size_t>(r) * V;
        for (int v = 0; v < V; ++v) d[v] = p[v] / BT;
        d[targets_[r]] -= S(1) / BT;
    }
    ConstMatrixMap<S> d_logits(d_logits_.data(), BT, V);
    MatrixMap<S>(g_.wte, V, C).noalias() += d_logits.transpose() * ConstMatrixMap<S>(ln_f_.data(), BT, C);
    MatrixMap<S>(d_buffer_.data(), BT, C).noalias() = d_logits * ConstMatrixMap<S>(p_.wte, V, C);
    std::fill(d_residual_.begin(), d_residual_.end(), S(0));
    layer_norm_backward(d_buffer_.data(), residual_.data() + config_.n_layer * BTC, p_.ln_f_w, g_.ln_f_w, g_.ln_f_b,
                        d_residual_.data(), BT, C);

    for (int l = config_.n_layer - 1; l >= 0; --l) {
        const Layer& w = p_.layers[l];
        Layer& gw = g_.layers[l];
        const S* x = residual_.data() + l * BTC;
        const S* ln_1 = ln_1_.data() + l * BTC;
        const S* qkv = qkv_.data() + l * 3 * BTC;
        const S* att = att_.data() + static_cast<size_t>(l) * B * NH * T * T;
        const S* y = att_y_.data() + l * BTC;
        const S* mid = residual_mid_.data() + l * BTC;
        const S* ln_2 = ln_2_.data() + l * BTC;
        const S* fc = fc_.data() + l * 4 * BTC;
        const S* fc_gelu = fc_gelu_.data() + l * 4 * BTC;

        // d_residual_ holds dLoss/d(out); out = mid + MLP(ln_2(mid)).
        linear_backward(d_residual_.data(), fc_gelu, w.fc_proj_w, gw.fc_proj_w, gw.fc_proj_b, d_fc_.data(), BT, 4 * C,
                        C);
        gelu_backward(fc, d_fc_.data(), d_fc_.data(), 4 * BTC);
        linear_backward(d_fc_.data(), ln_2, w.fc_w, gw.fc_w, gw.fc_b, d_buffer_.data(), BT, C, 4 * C);
        layer_norm_backward(d_buffer_.data(), mid, w.ln_2_w, gw.ln_2_w, gw.ln_2_b, d_residual_.data(), BT, C);

        // Now dLoss/d(mid); mid = x + attention(ln_1(x)) projected.
        linear_backward(d_residual_.data(), y, w.attn_proj_w, gw.attn_proj_w, gw.attn_proj_b, d_buffer_.data(), BT, C,
                        C);
        const S scale = S(1) / std::sqrt(S(hs));
#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < NH; ++h) {
                const size_t in_head = static_cast<size_t>(b) * T * 3 * C + h * hs;
                const size_t out_head = static_cast<size_t>(b) * T * C + h * hs;
                const size_t map = (static_cast<size_t>(b) * NH + h) * T * T;
                using Strided = ops::StridedMap<S>;
                using ConstStrided = ops::ConstStridedMap<S>;
                const Eigen::OuterStride<> in_stride(3 * C), out_stride(C);
                ConstStrided Q(qkv + in_head, T, hs, in_stride), K(qkv + in_head + C, T, hs, in_stride),
                    Vv(qkv + in_head + 2 * C, T, hs, in_stride);
                ConstStrided dY(d_buffer_.data() + out_head, T, hs, out_stride);
                Strided dQ(d_qkv_.data() + in_head, T, hs, in_stride),
                    dK(d_qkv_.data() + in_head + C, T, hs, in_stride),
                    dV(d_qkv_.data() + in_head + 2 * C, T, hs, in_stride);
                ConstMatrixMap<S> P(att + map, T, T);
                MatrixMap<S> dS(d_att_.data() + map, T, T);
                dV.noalias() = P.transpose() * dY;
                dS.noalias() = dY * Vv.transpose();  // dLoss/dP first
                // Softmax backward: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik); masked P_ij = 0.
                for (int i = 0; i < T; ++i) {
                    const S dot = P.row(i).dot(dS.row(i));
                    dS.row(i) = (P.row(i).array() * (dS.row(i).array() - dot)).matrix();
                }
                dQ.noalias() = scale * (dS * K);
                dK.noalias() = scale * (dS.transpose() * Q);
            }
        linear_backward(d_qkv_.data(), ln_1, w.attn_w, gw.attn_w, gw.attn_b, d_buffer_.data(), BT, C, 3 * C);
        layer_norm_backward(d_buffer_.data(), x, w.ln_1_w, gw.ln_1_w, gw.ln_1_b, d_residual_.data(), BT, C);
    }
    for (int r = 0; r < BT; ++r) {
        S* te = g_.wte + static_cast<size_t>(inputs_[r]) * C;
        S* pe = g_.wpe + static_cast<size_t>(r % T) * C;
        const S* d = d_residual_.data() + static_cast<size_t>(r) * C;
        for (int c = 0; c < C; ++c) {
            te[c] += d[c];
            pe[c] += d[c];
        }
    }
}

template <typename S>
void Gpt2Trainer<S>::step(const AdamW& adamw, int step_number) {
    // Clip the global gradient norm to 1: early steps of a fresh model can spike.
    S norm = 0;
    for (S g : grads_) norm += g * g;
    norm = std::sqrt(norm);
    const S clip = norm > 1 ? 1 / norm : S(1);
    const S bias1 = 1 - std::pow(S(adamw.beta1), step_number), bias2 = 1 - std::pow(S(adamw.beta2), step_number);
    for (const ParameterTensor& t : layout_) {
        const S decay = decayed(t.spec) ? S(adamw.weight_decay) : S(0);
        for (size_t i = t.offset; i < t.offset + t.size; ++i) {
            const S g = grads_[i] * clip;
            adam_m_[i] = adamw.beta1 * adam_m_[i] + (1 - adamw.beta1) * g;
            adam_v_[i] = adamw.beta2 * adam_v_[i] + (1 - adamw.beta2) * g * g;
            const S m_hat = adam_m_[i] / bias1, v_hat = adam_v_[i] / bias2;
            params_[i] -= adamw.learning_rate * (m_hat / (std::sqrt(v_hat) + adamw.eps) + decay * params_[i]);
        }
    }
}

template class Gpt2Trainer<float>;
template class Gpt2Trainer<double>;

void save_gpt2(const Gpt2Trainer<float>& model, const std::filesystem::path& dir,
               const nlohmann::ordered_json& record) {
    std::filesystem::create_directories(dir);
    std::vector<SafetensorsEntry> entries;
    for (const ParameterTensor& t : model.layout())
        entries.push_back(
            {t.spec.name, t.spec.shape, std::span<const float>(model.params().data() + t.offset, t.size)});
    write_safetensors(dir / "model.safetensors", entries);
    const Config& m = model.config();
    // The last token is <|endoftext|>, as in GPT-2's vocabulary.
    const nlohmann::ordered_json config = {{"model_type", "gpt2"},
                                           {"architectures", {"GPT2LMHeadModel"}},
                                           {"n_layer", m.n_layer},
                                           {"n_head", m.n_head},
                                           {"n_embd", m.n_embd},
                                           {"n_positions", m.n_positions},
                                           {"n_ctx", m.n_positions},
                                           {"vocab_size", m.vocab_size},
                                           {"bos_token_id", m.vocab_size - 1},
                                           {"eos_token_id", m.vocab_size - 1},
                                           {"activation_function", "gelu_new"},
                                           {"layer_norm_epsilon", layer_norm_eps},
                                           {"tie_word_embeddings", true},
                                           {"headscope_training", record}};
    const std::string text = config.dump(2) + '\n';
    write_file_atomically(dir / "config.json", "the model's configuration", [&](std::ostream& out) { out << text; });
}

}  // namespace headscope::train
