// The CPU backend: GPT-2's forward in float32 with Eigen (batched matrix
// products, OpenMP threads), capturing every returned layer's attention.
// Legend: B batch, T padded length, C channels, NH heads, hs = C/NH, L layers.
// All buffers are row-major and sized once per (B, T, NH); a later call with
// the same or a smaller shape allocates nothing.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/backend.h"
#include "headscope/cpu_ops.h"
#include "headscope/error.h"

namespace headscope {
namespace {

using MatrixMap = ops::MatrixMap<float>;
using ConstMatrixMap = ops::ConstMatrixMap<float>;
using StridedMap = ops::StridedMap<float>;
using ConstStridedMap = ops::ConstStridedMap<float>;
using ConstVectorMap = ops::ConstRowVectorMap<float>;

// Grows `buffer` to at least `n` floats; never shrinks, so steady state allocates nothing.
void reserve_floats(std::vector<float>& buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
}

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    void load_weights(const Model& model) override { model_ = &model; }

    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result) override {
        if (!model_) throw Error("no model loaded");
        const Config& cfg = model_->config;
        const int B = batch.B(), T = batch.T(), C = cfg.n_embd;
        validate_forward(*model_, batch, options);
        const int NH = options.n_head ? options.n_head : cfg.n_head;
        const int hs = C / NH;

        result.B = B;
        result.T = T;
        result.NH = NH;
        result.hs = hs;
        result.layers = options.layers;
        if (result.layers.empty())
            for (int l = 0; l < cfg.n_layer; ++l) result.layers.push_back(l);
        const size_t map_floats = static_cast<size_t>(B) * NH * T * T;
        result.weights.resize(result.layers.size() * map_floats);
        result.fully_masked.assign(static_cast<size_t>(B) * T, 0);
        result.outputs.resize(options.capture_outputs ? result.layers.size() * B * T * C : 0);

        const int BT = B * T;
        const size_t BTC = static_cast<size_t>(BT) * C;
        reserve_floats(x_, BTC);
        reserve_floats(ln_, BTC);
        reserve_floats(qkv_, 3 * BTC);
        reserve_floats(y_, BTC);
        reserve_floats(fc_, 4 * BTC);
        if (options.split == Split::naive_view) reserve_floats(qkv_contiguous_, 3 * BTC);
        if (result.layers.size() < static_cast<size_t>(cfg.n_layer)) reserve_floats(scratch_att_, map_floats);

        embed(batch);
        const int last_layer = result.layers.back();
        size_t slot = 0;
        for (int l = 0; l <= last_layer; ++l) {
            const LayerWeights& w = model_->layers[l];
            const bool returned = slot < result.layers.size() && result.layers[slot] == l;
            float* att = returned ? result.weights.data() + slot * map_floats : scratch_att_.data();

            ops::layer_norm(x_.data(), w.ln_1_w, w.ln_1_b, ln_.data(), BT, C, cfg.layer_norm_epsilon);
            ops::linear(ln_.data(), w.attn_w, w.attn_b, qkv_.data(), BT, C, 3 * C);
            attention(batch, options, NH, att, result.fully_masked.data());
            if (returned && options.capture_outputs)
                std::copy_n(y_.data(), BTC, result.outputs.data() + slot * BTC);
            slot += returned;
            if (l == last_layer) break;  // everything after this layer's weights is not needed

            MatrixMap x(x_.data(), BT, C);
            x.noalias() += ConstMatrixMap(y_.data(), BT, C) * ConstMatrixMap(w.attn_proj_w, C, C);
            x.rowwise() += ConstVectorMap(w.attn_proj_b, C);
            ops::layer_norm(x_.data(), w.ln_2_w, w.ln_2_b, ln_.data(), BT, C, cfg.layer_norm_epsilon);
            ops::linear(ln_.data(), w.fc_w, w.fc_b, fc_.data(), BT, C, 4 * C);
            ops::gelu(fc_.data(), fc_.data(), static_cast<size_t>(BT) * 4 * C);
            x.noalias() += ConstMatrixMap(fc_.data(), BT, 4 * C) * ConstMatrixMap(w.fc_proj_w, 4 * C, C);
            x.rowwise() += ConstVectorMap(w.fc_proj_b, C);
        }
    }

private:
    // x[b, t] = wte[token] + wpe[t], pads filled with the pad token.
    void embed(const Batch& batch) {
        const int B = batch.B(), T = batch.T(), C = model_->config.n_embd;
        for (int b = 0; b < B; ++b) {
            const auto& ids = batch.token_ids[b];
            for (int t = 0; t < T; ++t) {
                const int32_t id = t < static_cast<int>(ids.size()) ? ids[t] : batch.pad_id;
                const float* te = model_->wte + static_cast<size_t>(id) * C;
                const float* pe = model_->wpe + static_cast<size_t>(t) * C;
                float* xr = x_.data() + (static_cast<size_t>(b) * T + t) * C;
                for (int c = 0; c < C; ++c) xr[c] = te[c] + pe[c];
            }
        }
    }

    // From qkv_ (B, T, 3C): att (B, NH, T, T) weights and y_ (B, T, C), heads merged.
    // transpose: head h of Q is the (T, hs) block at column h*hs of qkv_, row
    // stride 3C, read in place; y for head h goes to columns h*hs of y_ (the
    // transpose back and the contiguous copy in one write).
    // naive-view: Q, K, V are copied out contiguous (B, T, C); head h is then
    // the flat floats [h*T*hs, (h+1)*T*hs) of a batch, whatever tokens they
    // belong to; y (B, NH, T, hs) is read back as (B, T, C) unchanged.
    void attention(const Batch& batch, const AttentionOptions& options, int NH, float* att, uint8_t* fully_masked) {
        const int B = batch.B(), T = batch.T(), C = model_->config.n_embd, hs = C / NH;
        const float scale = score_scale(options.scale, C, NH);
        const bool naive = options.split == Split::naive_view;
        const size_t BTC = static_cast<size_t>(B) * T * C;
        if (naive) {
            for (int part = 0; part < 3; ++part) {  // Q, K, V
                StridedMap(qkv_contiguous_.data() + part * BTC, B * T, C, Eigen::OuterStride<>(C)) =
                    ConstStridedMap(qkv_.data() + part * C, B * T, C, Eigen::OuterStride<>(3 * C));
            }
        }

#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; ++b) {
            for (int h = 0; h < NH; ++h) {
                const int length = static_cast<int>(batch.token_ids[b].size());
                const float* q;
                const float* k;
                const float* v;
                float* y;
                int in_stride, out_stride;
                if (naive) {
                    const size_t head = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * T * hs;
                    q = qkv_contiguous_.data() + head;
                    k = q + BTC;
                    v = k + BTC;
                    y = y_.data() + head;
                    in_stride = out_stride = hs;
                } else {
                    const size_t head = static_cast<size_t>(b) * T * 3 * C + static_cast<size_t>(h) * hs;
                    q = qkv_.data() + head;
                    k = q + C;
                    v = q + 2 * C;
                    y = y_.data() + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
                    in_stride = 3 * C;
                    out_stride = C;
                }
                auto visible = [&](int i) { return visible_end(options, i, length, T); };
                float* att_bh = att + (static_cast<size_t>(b) * NH + h) * T * T;
                ops::attention_head(q, k, v, in_stride, y, out_stride, att_bh, T, hs, scale, visible);
                if (h == 0)
                    for (int i = 0; i < T; ++i) fully_masked[static_cast<size_t>(b) * T + i] = visible(i) == 0;
            }
        }
    }

    const Model* model_ = nullptr;
    std::vector<float> x_;               // (B, T, C) residual stream
    std::vector<float> ln_;              // (B, T, C) LayerNorm output
    std::vector<float> qkv_;             // (B, T, 3C) fused projection
    std::vector<float> qkv_contiguous_;  // (3, B, T, C) Q, K, V copied out, naive-view only
    std::vector<float> y_;               // (B, T, C) attention output, heads merged
    std::vector<float> fc_;              // (B, T, 4C) MLP hidden
    std::vector<float> scratch_att_;     // (B, NH, T, T) weights of layers not returned
};

}  // namespace

void validate_forward(const Model& model, const Batch& batch, const AttentionOptions& options) {
    const Config& cfg = model.config;
    const int NH = options.n_head ? options.n_head : cfg.n_head;
    if (batch.B() == 0) throw Error("no text given");
    for (int b = 0; b < batch.B(); ++b) {
        const auto& ids = batch.token_ids[b];
        if (ids.empty()) throw Error("text " + std::to_string(b + 1) + " is empty");
        if (ids.size() > static_cast<size_t>(cfg.n_positions))
            throw Error("text " + std::to_string(b + 1) + " has " + std::to_string(ids.size()) +
                        " tokens, more than the model's limit of " + std::to_string(cfg.n_positions));
        for (int32_t id : ids)
            if (id < 0 || id >= cfg.vocab_size)
                throw Error("token id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(cfg.vocab_size));
    }
    if (batch.pad_id < 0 || batch.pad_id >= cfg.vocab_size)
        throw Error("pad token id " + std::to_string(batch.pad_id) + " outside the vocabulary");
    if (NH <= 0 || cfg.n_embd % NH != 0)
        throw Error("--heads " + std::to_string(NH) + " does not divide n_embd " + std::to_string(cfg.n_embd));
    int previous = -1;
    for (int l : options.layers) {
        if (l < 0 || l >= cfg.n_layer)
            throw Error("layer " + std::to_string(l) + " out of range (the model has layers 0.." +
                        std::to_string(cfg.n_layer - 1) + ")");
        if (l <= previous) throw Error("layers must be ascending and unique");
        previous = l;
    }
    // Every returned map is kept: heads = C at a long T would ask for tens of GB.
    const double layers = options.layers.empty() ? cfg.n_layer : options.layers.size();
    const double map_bytes = layers * batch.B() * NH * double(batch.T()) * batch.T() * sizeof(float);
    if (map_bytes > max_attention_bytes)
        throw Error("the attention maps would need " + std::to_string(static_cast<int>(map_bytes / 1e9 + 0.5)) +
                    " GB (" + std::to_string(batch.B()) + " texts x " + std::to_string(NH) + " heads x " +
                    std::to_string(batch.T()) + "^2 tokens x " + std::to_string(static_cast<int>(layers)) +
                    " layers); the limit is " + std::to_string(static_cast<int>(max_attention_bytes / 1e9)) +
                    " GB: fewer heads, tokens or layers");
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace headscope
