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
#include "headscope/forward.h"

namespace headscope {
namespace {

using MatrixMap = ops::MatrixMap<float>;
using ConstMatrixMap = ops::ConstMatrixMap<float>;
using StridedMap = ops::StridedMap<float>;
using ConstStridedMap = ops::ConstStridedMap<float>;
using ConstVectorMap = ops::ConstRowVectorMap<float>;

// Grows `buffer` to at least `n` floats; never shrinks, so steady state allocates nothing.
void reserve_floats(AlignedVector<float>& buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
}

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    void load_weights(const Model& model) override { model_ = &model; }

    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result) override {
        if (!model_) throw Error("no model loaded");
        validate_forward(*model_, batch, options);
        set_up_result(model_->config, batch, options, result);
        const Config& cfg = model_->config;
        const int B = result.B, T = result.T, C = cfg.n_embd, NH = result.NH;
        const size_t map_floats = static_cast<size_t>(B) * NH * T * T;

        const int BT = B * T;
        const size_t BTC = static_cast<size_t>(BT) * C;
        reserve_floats(x_, BTC);
        reserve_floats(ln_, BTC);
        reserve_floats(qkv_, 3 * BTC);
        reserve_floats(y_, BTC);
        reserve_floats(fc_, 4 * BTC);
        if (options.split == Split::naive_view) reserve_floats(qkv_contiguous_, 3 * BTC);
        if (result.layers.size() < static_cast<size_t>(cfg.n_layer)) reserve_floats(scratch_att_, map_floats);

        for (int b = 0; b < B; ++b) embed_text(*model_, batch, b, x_.data() + static_cast<size_t>(b) * T * C);
        const int last_layer = result.layers.back();
        size_t slot = 0;
        for (int l = 0; l <= last_layer; ++l) {
            const LayerWeights& w = model_->layers[l];
            const bool returned = slot < result.layers.size() && result.layers[slot] == l;
            float* att = returned ? result.weights.data() + slot * map_floats : scratch_att_.data();

            ops::layer_norm(x_.data(), w.ln_1_w, w.ln_1_b, ln_.data(), BT, C, cfg.layer_norm_epsilon);
            ops::linear(ln_.data(), w.attn_w, w.attn_b, qkv_.data(), BT, C, 3 * C);
            attention(batch, options, NH, att);
            if (returned && options.capture_outputs) std::copy_n(y_.data(), BTC, result.outputs.data() + slot * BTC);
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
    // From qkv_ (B, T, 3C): att (B, NH, T, T) weights and y_ (B, T, C), heads merged.
    // transpose: head h of Q is the (T, hs) block at column h*hs of qkv_, row
    // stride 3C, read in place; y for head h goes to columns h*hs of y_ (the
    // transpose back and the contiguous copy in one write).
    // naive-view: Q, K, V are copied out contiguous (B, T, C); head h is then
    // the flat floats [h*T*hs, (h+1)*T*hs) of a batch, whatever tokens they
    // belong to; y (B, NH, T, hs) is read back as (B, T, C) unchanged.
    void attention(const Batch& batch, const AttentionOptions& options, int NH, float* att) {
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
            }
        }
    }

    const Model* model_ = nullptr;
    AlignedVector<float> x_;               // (B, T, C) residual stream
    AlignedVector<float> ln_;              // (B, T, C) LayerNorm output
    AlignedVector<float> qkv_;             // (B, T, 3C) fused projection
    AlignedVector<float> qkv_contiguous_;  // (3, B, T, C) Q, K, V copied out, naive-view only
    AlignedVector<float> y_;               // (B, T, C) attention output, heads merged
    AlignedVector<float> fc_;              // (B, T, 4C) MLP hidden
    AlignedVector<float> scratch_att_;     // (B, NH, T, T) weights of layers not returned
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace headscope
