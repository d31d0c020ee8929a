// The CPU forward (cpu_forward.h) and the CPU backend that runs it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/backend.h"
#include "headscope/cpu_forward.h"
#include "headscope/cpu_ops.h"
#include "headscope/error.h"
#include "headscope/matmul.h"

namespace headscope {
namespace {

// Grows `buffer` to at least `n` floats; never shrinks, so steady state allocates nothing.
void reserve_floats(AlignedVector<float>& buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
}

void normalize(const Config& config, const float* x, const float* w, const float* b, float* out, int rows) {
    if (config.norm == Norm::layer_norm)
        ops::layer_norm(x, w, b, out, rows, config.n_embd, config.layer_norm_epsilon);
    else
        ops::rms_norm(x, w, out, rows, config.n_embd, config.layer_norm_epsilon);
}

// A (T, hs) block of one head with its row stride.
struct HeadBlock {
    float* data;
    int stride;
};

// The tutorials' mha_by_loop for one head: every score a dot product, every
// output a weighted sum; the same masks and softmax as the batched path.
void attention_head_by_loop(const HeadBlock& q, const HeadBlock& k, const HeadBlock& v, const HeadBlock& y, float* att,
                            int T, int hs, float scale, const auto& visible) {
    for (int i = 0; i < T; ++i) {
        float* scores = att + static_cast<size_t>(i) * T;
        for (int j = 0; j < T; ++j) {
            float dot = 0;
            for (int d = 0; d < hs; ++d) dot += q.data[i * q.stride + d] * k.data[j * k.stride + d];
            scores[j] = dot;
        }
        const ops::KeyRange keys = visible(i);
        ops::masked_softmax_row(scores, keys.begin, keys.end, T, scale);
        for (int d = 0; d < hs; ++d) {
            float sum = 0;
            for (int j = keys.begin; j < keys.end; ++j) sum += scores[j] * v.data[j * v.stride + d];
            y.data[i * y.stride + d] = sum;
        }
    }
}

}  // namespace

void CpuForward::run(const Model& model, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                     Heads heads, PrefixCache* /*cache*/) {
    validate_forward(model, batch, options);
    set_up_result(model.config, batch, options, result);
    const Config& cfg = model.config;
    const HeadSplit split = head_split(cfg, options.n_head);
    const int B = result.B, T = result.T, C = cfg.n_embd, BT = B * T;
    const size_t map_floats = static_cast<size_t>(B) * split.NH * T * T;
    const size_t rows = static_cast<size_t>(BT), qkv_width = split.q_width() + 2 * split.kv_width();

    reserve_floats(x_, rows * C);
    reserve_floats(ln_, rows * C);
    reserve_floats(qkv_, rows * qkv_width);
    if (cfg.architecture == "gpt_neox") reserve_floats(fused_, rows * qkv_width);
    if (options.split == Split::naive_view) reserve_floats(qkv_contiguous_, rows * qkv_width);
    reserve_floats(y_, rows * split.q_width());
    reserve_floats(hidden_, rows * cfg.mlp_size());
    if (cfg.mlp == Mlp::swiglu) reserve_floats(up_, rows * cfg.mlp_size());
    if (result.layers.size() < static_cast<size_t>(cfg.n_layer)) reserve_floats(scratch_att_, map_floats);

    for (int b = 0; b < B; ++b) embed_text(model, batch, b, x_.data() + static_cast<size_t>(b) * T * C);
    const int last_layer = result.layers.back();
    size_t slot = 0;
    for (int l = 0; l <= last_layer; ++l) {
        const LayerWeights& w = model.layers[l];
        const bool returned = slot < result.layers.size() && result.layers[slot] == l;
        float* att = returned ? result.weights.data() + slot * map_floats : scratch_att_.data();

        normalize(cfg, x_.data(), w.ln_1_w, w.ln_1_b, ln_.data(), BT);
        project_qkv(model, w, BT);
        attention(model, batch, options, split, att, heads);
        const size_t y_floats = rows * split.q_width();
        if (returned && options.capture_outputs)
            std::copy_n(y_.data(), y_floats, result.outputs.data() + slot * y_floats);
        slot += returned;
        if (l == last_layer) break;  // everything after this layer's attention is not needed

        // Pythia's parallel residual: both halves read the layer's input x.
        if (cfg.parallel_residual) normalize(cfg, x_.data(), w.ln_2_w, w.ln_2_b, ln_.data(), BT);
        linear(y_.data(), BT, w.attn_proj, w.attn_proj_b, x_.data(), C, /*accumulate=*/true);
        if (!cfg.parallel_residual) normalize(cfg, x_.data(), w.ln_2_w, w.ln_2_b, ln_.data(), BT);
        mlp(cfg, w, BT);
    }
}

// ln_ (rows, C) -> qkv_ (rows, Qw + 2 KVw) as [Q | K | V] in the model's own
// heads, qk-normed (Qwen 3) over each head's hs values.
void CpuForward::project_qkv(const Model& model, const LayerWeights& w, int rows) {
    const Config& cfg = model.config;
    const int hs = cfg.head_size(), Qw = cfg.n_head * hs, KVw = cfg.kv_heads() * hs, width = Qw + 2 * KVw;
    if (!w.attn) {
        linear(ln_.data(), rows, w.q, w.q_b, qkv_.data(), width);
        linear(ln_.data(), rows, w.k, w.k_b, qkv_.data() + Qw, width);
        linear(ln_.data(), rows, w.v, w.v_b, qkv_.data() + Qw + KVw, width);
    } else if (cfg.architecture != "gpt_neox") {
        linear(ln_.data(), rows, w.attn, w.attn_b, qkv_.data(), width);  // GPT-2: already [Q | K | V]
    } else {
        // Pythia's fused output is per head [q k v] (NH, 3, hs): reorder to [Q | K | V].
        linear(ln_.data(), rows, w.attn, w.attn_b, fused_.data(), width);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; ++r) {
            const float* in = fused_.data() + static_cast<size_t>(r) * width;
            float* out = qkv_.data() + static_cast<size_t>(r) * width;
            for (int h = 0; h < cfg.n_head; ++h)
                for (int part = 0; part < 3; ++part)
                    std::copy_n(in + (3 * h + part) * hs, hs, out + part * Qw + h * hs);
        }
    }
    if (cfg.qk_norm) {
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; ++r) {
            float* row = qkv_.data() + static_cast<size_t>(r) * width;
            ops::rms_norm(row, w.q_norm, row, Qw / hs, hs, cfg.layer_norm_epsilon);
            ops::rms_norm(row + Qw, w.k_norm, row + Qw, KVw / hs, hs, cfg.layer_norm_epsilon);
        }
    }
}

// From qkv_: att (B, NH, T, T) weights and y_ (B, T, Qw), heads merged.
// transpose: head h of Q is the (T, hs) block at column h*hs of qkv_, read in
// place; its key/value head is h / group. y for head h goes to columns h*hs
// of y_ (the transpose back and the contiguous copy in one write).
// naive-view: Q, K, V are copied out contiguous; head h is then the flat
// floats [h*T*hs, (h+1)*T*hs) of a text, whatever tokens they belong to, and
// y (B, NH, T, hs) is read back as (B, T, Qw) unchanged.
// RoPE rotates row t of each head's block by position t, in either split.
void CpuForward::attention(const Model& model, const Batch& batch, const AttentionOptions& options,
                           const HeadSplit& split, float* att, Heads heads) {
    const Config& cfg = model.config;
    const int B = batch.B(), T = batch.T(), NH = split.NH, NKV = split.NKV, hs = split.hs;
    const int Qw = split.q_width(), KVw = split.kv_width(), width = Qw + 2 * KVw;
    const float scale = score_scale(options.scale, cfg.n_embd, hs);
    const bool naive = options.split == Split::naive_view;
    const size_t text_rows = static_cast<size_t>(T);
    float* q_part = qkv_.data();
    float* k_part = q_part + Qw;
    float* v_part = k_part + KVw;
    if (naive) {  // (B, T, Qw), then (B, T, KVw) for K and for V
        const size_t BT = static_cast<size_t>(B) * T;
        q_part = qkv_contiguous_.data();
        k_part = q_part + BT * Qw;
        v_part = k_part + BT * KVw;
        ops::StridedMap<float>(q_part, B * T, Qw, Eigen::OuterStride<>(Qw)) =
            ops::ConstStridedMap<float>(qkv_.data(), B * T, Qw, Eigen::OuterStride<>(width));
        ops::StridedMap<float>(k_part, B * T, KVw, Eigen::OuterStride<>(KVw)) =
            ops::ConstStridedMap<float>(qkv_.data() + Qw, B * T, KVw, Eigen::OuterStride<>(width));
        ops::StridedMap<float>(v_part, B * T, KVw, Eigen::OuterStride<>(KVw)) =
            ops::ConstStridedMap<float>(qkv_.data() + Qw + KVw, B * T, KVw, Eigen::OuterStride<>(width));
    }
    // Head `h` of a part whose rows are `part_width` wide in the merged layout.
    const auto block = [&](float* part, int part_width, int b, int h) {
        if (naive) return HeadBlock{part + b * text_rows * part_width + static_cast<size_t>(h) * T * hs, hs};
        return HeadBlock{part + b * text_rows * width + static_cast<size_t>(h) * hs, width};
    };

    if (cfg.positions == Positions::rotary) {
        const RopeTable table = rope_table(cfg.rope, hs, T);
#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < NH + NKV; ++h) {
                const HeadBlock x = h < NH ? block(q_part, Qw, b, h) : block(k_part, KVw, b, h - NH);
                apply_rope(table, x.data, T, x.stride);
            }
    }

#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
            const int length = static_cast<int>(batch.token_ids[b].size());
            const int kv = h / split.group();
            const HeadBlock q = block(q_part, Qw, b, h), k = block(k_part, KVw, b, kv), v = block(v_part, KVw, b, kv);
            const HeadBlock y = naive ? HeadBlock{y_.data() + b * text_rows * Qw + static_cast<size_t>(h) * T * hs, hs}
                                      : HeadBlock{y_.data() + b * text_rows * Qw + static_cast<size_t>(h) * hs, Qw};
            const auto visible = [&](int i) {
                return ops::KeyRange{visible_begin(options, i), visible_end(options, i, length, T)};
            };
            float* att_bh = att + (static_cast<size_t>(b) * NH + h) * T * T;
            if (heads == Heads::loop) {
                attention_head_by_loop(q, k, v, y, att_bh, T, hs, scale, visible);
            } else {
                ops::attention_head(q.data, q.stride, k.data, k.stride, v.data, v.stride, y.data, y.stride, att_bh, T,
                                    hs, scale, visible);
            }
        }
    }
}

// ln_ (rows, C) -> x_ += the MLP's output.
void CpuForward::mlp(const Config& cfg, const LayerWeights& w, int rows) {
    const int C = cfg.n_embd, F = cfg.mlp_size();
    const size_t hidden = static_cast<size_t>(rows) * F;
    if (cfg.mlp == Mlp::swiglu) {
        linear(ln_.data(), rows, w.gate, nullptr, hidden_.data(), F);
        linear(ln_.data(), rows, w.fc, w.fc_b, up_.data(), F);
        ops::silu_times(hidden_.data(), up_.data(), hidden);
    } else {
        linear(ln_.data(), rows, w.fc, w.fc_b, hidden_.data(), F);
        if (cfg.mlp == Mlp::gelu_exact)
            ops::gelu_exact(hidden_.data(), hidden_.data(), hidden);
        else
            ops::gelu(hidden_.data(), hidden_.data(), hidden);
    }
    linear(hidden_.data(), rows, w.fc_proj, w.fc_proj_b, x_.data(), C, /*accumulate=*/true);
}

namespace {

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    void load_weights(const Model& model) override { model_ = &model; }

    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                 PrefixCache* cache) override {
        if (!model_) throw Error("no model loaded");
        forward_.run(*model_, batch, options, result, CpuForward::Heads::batched, cache);
    }

private:
    const Model* model_ = nullptr;
    CpuForward forward_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace headscope
