// The device's layer operations (layer_ops.h) over DeviceForward's buffers
// (cuda_forward.cuh), and its forward: the layer loop, then the rows read
// out (cuda_backend.cu includes it, once).
// Legend: B batch, T padded length, R = B T rows, C channels, Qw = NH hs,
// KVw = NKV hs, V vocabulary.
#pragma once
#include <string>

#include "cuda_forward.cuh"

namespace headscope {
namespace {

class DeviceForward::LayerRun final : public LayerOps {
public:
    LayerRun(DeviceForward& f, const DeviceForwardPlan& plan, const AttentionOptions& options, int slot, bool lens,
             AttentionResult& result)
        : f_(f), cfg_(f.model_->config), plan_(plan), options_(options), slot_(slot), lens_(lens), result_(result) {}

    void copy(Tensor from, Tensor to) override {
        HEADSCOPE_CUDA_CHECK(
            cudaMemcpy(data(to), data(from), rows() * width(from) * sizeof(float), cudaMemcpyDeviceToDevice));
    }
    void norm(Tensor in, const float* w, const float* b, Tensor out) override {
        f_.norm(data(in), w, b, data(out), plan_.B * plan_.T, cfg_.n_embd, 1, cfg_.n_embd,
                cfg_.norm == Norm::layer_norm);
    }
    void linear(Tensor in, const Matrix& w, const float* bias, Tensor out, bool accumulate) override {
        f_.linear(data(in), static_cast<int>(rows()), width(in), w, bias, data(out), width(out), accumulate);
    }
    void project_qkv(const LayerWeights& w) override;
    void rotary(int layer) override;
    void attention(int layer) override {
        f_.attention(plan_, plan_.layers[layer], options_);
        const HeadSplit& s = plan_.split;
        f_.check_finite(f_.y_.data(), rows() * s.q_width(),
                        "layer " + std::to_string(layer) + ": the attention is not finite");
    }
    void cross_attention(int) override { throw Error("the CUDA backend runs no cross-attention"); }
    void mlp(const LayerWeights& w, Tensor out) override;
    void experts(const LayerWeights&, int, Tensor) override { throw Error("the CUDA backend runs no experts"); }
    void add(Sublayer, int, const float* norm_w) override {
        const size_t n = rows() * cfg_.n_embd;
        if (cfg_.output_norms) norm(Tensor::out, norm_w, nullptr, Tensor::out);
        combine_kernel<<<blocks_for(n), threads>>>(f_.x_.data(), f_.out_.data(), n, /*add=*/true);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }
    void check_finite(int layer, const char* after) override {
        f_.check_finite(f_.x_.data(), rows() * cfg_.n_embd,
                        "layer " + std::to_string(layer) + ": the residual stream is not finite after " + after);
    }
    void at(LayerPoint point, int layer) override;

private:
    size_t rows() const { return static_cast<size_t>(plan_.B) * plan_.T; }
    float* data(Tensor tensor) {
        switch (tensor) {
            case Tensor::x: return f_.x_.data();
            case Tensor::ln: return f_.ln_.data();
            case Tensor::out: return f_.out_.data();
            case Tensor::y: return f_.y_.data();
        }
        return nullptr;
    }
    int width(Tensor tensor) const { return tensor == Tensor::y ? plan_.split.q_width() : cfg_.n_embd; }

    DeviceForward& f_;
    const Config& cfg_;
    const DeviceForwardPlan& plan_;
    const AttentionOptions& options_;
    int slot_;   // the returned layer's slot, -1: not returned
    bool lens_;  // the lens is read out: each returned layer's residual kept
    AttentionResult& result_;
};

// ln -> qkv_ [Q | K | V] in the model's own heads, as CpuForward::project_qkv.
void DeviceForward::LayerRun::project_qkv(const LayerWeights& w) {
    const int hs = cfg_.head_size(), Qw = cfg_.n_head * hs, KVw = cfg_.kv_heads() * hs, width = Qw + 2 * KVw;
    const int R = static_cast<int>(rows());
    float* qkv = f_.qkv_.data();
    if (cfg_.qkv_layout == QkvLayout::separate) {
        f_.linear(f_.ln_.data(), R, cfg_.n_embd, w.q, w.q_b, qkv, width, false);
        f_.linear(f_.ln_.data(), R, cfg_.n_embd, w.k, w.k_b, qkv + Qw, width, false);
        f_.linear(f_.ln_.data(), R, cfg_.n_embd, w.v, w.v_b, qkv + Qw + KVw, width, false);
    } else if (cfg_.qkv_layout == QkvLayout::fused) {
        f_.linear(f_.ln_.data(), R, cfg_.n_embd, w.attn, w.attn_b, qkv, width, false);
    } else {
        f_.linear(f_.ln_.data(), R, cfg_.n_embd, w.attn, w.attn_b, f_.fused_.data(), width, false);
        const size_t n = rows() * width;
        reorder_per_head_kernel<<<blocks_for(n), threads>>>(f_.fused_.data(), qkv, cfg_.n_head, hs, n);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }
    if (!cfg_.qk_norm) return;
    const int q_group = cfg_.qk_norm_whole ? Qw : hs, k_group = cfg_.qk_norm_whole ? KVw : hs;
    f_.norm(qkv, w.q_norm, nullptr, qkv, R, q_group, Qw / q_group, width, /*layer_norm=*/false);
    f_.norm(qkv + Qw, w.k_norm, nullptr, qkv + Qw, R, k_group, KVw / k_group, width, /*layer_norm=*/false);
}

// As CpuForward::rotate: the naive view first copies Q, K and V out
// contiguous, each (R, width), its head h of text b then the flat rows of hs
// from (b NH + h) T hs, rotated by their row within the block.
void DeviceForward::LayerRun::rotary(int layer) {
    const HeadSplit& s = plan_.split;
    const int Qw = s.q_width(), KVw = s.kv_width(), width = Qw + 2 * KVw, R = static_cast<int>(rows());
    const bool naive = options_.split == Split::naive_view;
    float *q = f_.qkv_.data(), *k = q + Qw;
    if (naive) {
        float* to = f_.contiguous_.data();
        const int widths[3] = {Qw, KVw, KVw}, from[3] = {0, Qw, Qw + KVw};
        for (int part = 0; part < 3; ++part) {
            HEADSCOPE_CUDA_CHECK(cudaMemcpy2D(to, widths[part] * sizeof(float), f_.qkv_.data() + from[part],
                                              width * sizeof(float), widths[part] * sizeof(float), R,
                                              cudaMemcpyDeviceToDevice));
            to += static_cast<size_t>(R) * widths[part];
        }
        q = f_.contiguous_.data(), k = q + static_cast<size_t>(R) * Qw;
    }
    const RopeTable& rope = plan_.layers[layer].rope;
    if (rope.dims == 0) return;
    const int half = rope.dims / 2;
    f_.cos_.upload(rope.cos.data(), rope.cos.size());
    f_.sin_.upload(rope.sin.data(), rope.sin.size());
    const auto turn = [&](float* x, int heads) {
        // transpose: R rows of `heads` heads; naive: R * heads rows of one head, at their row in a block of T.
        const int n_rows = naive ? R * heads : R, n_heads = naive ? 1 : heads;
        const size_t n = static_cast<size_t>(n_rows) * n_heads * half;
        rope_kernel<<<blocks_for(n), threads>>>(x, n_rows, n_heads, s.hs, naive ? s.hs : width,
                                                naive ? nullptr : f_.positions_.data(), plan_.T, f_.cos_.data(),
                                                f_.sin_.data(), half, rope.adjacent_pairs);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    };
    turn(q, s.NH);
    turn(k, s.NKV);
}

// ln -> the MLP's output into `out` (Tensor::out, or added into x), as CpuForward::mlp.
void DeviceForward::LayerRun::mlp(const LayerWeights& w, Tensor out) {
    const int R = static_cast<int>(rows()), C = cfg_.n_embd, F = cfg_.mlp_size();
    const size_t hidden = rows() * F;
    int kind = 0;  // activate_kernel's
    switch (cfg_.mlp) {
        case Mlp::gelu_tanh:
        case Mlp::gated_gelu: kind = 0; break;
        case Mlp::gelu_exact:
        case Mlp::geglu: kind = 1; break;
        case Mlp::swiglu:
        case Mlp::silu: kind = 2; break;
        case Mlp::relu: kind = 3; break;
    }
    if (gated(cfg_.mlp)) {
        f_.linear(f_.ln_.data(), R, C, w.gate, nullptr, f_.hidden_.data(), F, false);
        f_.linear(f_.ln_.data(), R, C, w.fc, w.fc_b, f_.up_.data(), F, false);
    } else {
        f_.linear(f_.ln_.data(), R, C, w.fc, w.fc_b, f_.hidden_.data(), F, false);
    }
    activate_kernel<<<blocks_for(hidden), threads>>>(f_.hidden_.data(), hidden, kind);
    HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    if (gated(cfg_.mlp)) {
        combine_kernel<<<blocks_for(hidden), threads>>>(f_.hidden_.data(), f_.up_.data(), hidden, /*add=*/false);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }
    f_.linear(f_.hidden_.data(), R, F, w.fc_proj, w.fc_proj_b, data(out), C, /*accumulate=*/out == Tensor::x);
}

// The returned layer's maps and heads' outputs copied back; the heads knocked out; the lens's rows kept.
void DeviceForward::LayerRun::at(LayerPoint point, int layer) {
    const HeadSplit& s = plan_.split;
    const int B = plan_.B, T = plan_.T;
    if (point == LayerPoint::heads) {
        const size_t map_floats = static_cast<size_t>(B) * s.NH * T * T, Qw = s.q_width();
        if (slot_ >= 0)
            HEADSCOPE_CUDA_CHECK(cudaMemcpy(result_.weights.data() + slot_ * map_floats, f_.att_.data(),
                                            map_floats * sizeof(float), cudaMemcpyDeviceToHost));
        for (const HeadRef& knocked : options_.ablate) {
            if (knocked.layer != layer) continue;
            knock_out_kernel<<<blocks_for(static_cast<size_t>(B) * s.hs), threads>>>(
                f_.y_.data(), B, T, static_cast<int>(Qw), s.hs, knocked.head, f_.lengths_.data(),
                options_.ablation == Ablation::mean, options_.split == Split::naive_view);
            HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        }
        if (slot_ >= 0 && options_.capture_outputs)
            HEADSCOPE_CUDA_CHECK(cudaMemcpy(result_.outputs.data() + slot_ * rows() * Qw, f_.y_.data(),
                                            rows() * Qw * sizeof(float), cudaMemcpyDeviceToHost));
    } else if (point == LayerPoint::output && slot_ >= 0 && lens_) {
        const size_t n = rows() * cfg_.n_embd;
        HEADSCOPE_CUDA_CHECK(
            cudaMemcpy(f_.unembed_in_.data() + slot_ * n, f_.x_.data(), n * sizeof(float), cudaMemcpyDeviceToDevice));
    }
}

void DeviceForward::run(const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                        const Progress& progress) {
    const Config& cfg = model_->config;
    set_up_result(cfg, batch, options, result);
    result.kept.reset();
    const DeviceForwardPlan plan = plan_device_forward(*model_, batch, options, result);
    const HeadSplit& s = plan.split;
    const size_t R = static_cast<size_t>(plan.B) * plan.T, C = cfg.n_embd;
    // The lens is read out where a row from lens_from is computed (the rows end at T - 1), as on the CPU.
    const bool lens = options.lens_k > 0 && options.lens_from < plan.T;
    const int lens_slots = lens ? static_cast<int>(result.layers.size()) : 0;
    x_.upload(plan.x.data(), plan.x.size());
    positions_.upload(plan.positions.data(), plan.positions.size());
    lengths_.upload(plan.lengths.data(), plan.lengths.size());
    flag_.reserve(1);
    const size_t read_rows = std::max<size_t>(R, unembed_chunk);  // read_out_rows writes ln_ a chunk at a time
    ln_.reserve(read_rows * C);
    out_.reserve(read_rows * C);
    qkv_.reserve(R * (s.q_width() + 2 * s.kv_width()));
    if (cfg.qkv_layout == QkvLayout::fused_per_head) fused_.reserve(R * 3 * cfg.n_head * cfg.head_size());
    if (options.split == Split::naive_view) contiguous_.reserve(R * (s.q_width() + 2 * s.kv_width()));
    y_.reserve(R * s.q_width());
    hidden_.reserve(R * cfg.mlp_size());
    if (gated(cfg.mlp)) up_.reserve(R * cfg.mlp_size());
    att_.reserve(static_cast<size_t>(plan.B) * s.NH * plan.T * plan.T);
    if (plan.every_layer) unembed_in_.reserve((lens_slots + 1) * R * C);

    size_t slot = 0;
    for (int l = 0; l < plan.layers_run; ++l) {
        const bool returned = slot < result.layers.size() && result.layers[slot] == l;
        const bool last = !plan.every_layer && l == plan.layers_run - 1;
        report_progress(progress, "computing layers", l, plan.layers_run, ProgressUnit::steps);
        LayerRun ops{*this, plan, options, returned ? static_cast<int>(slot) : -1, lens, result};
        forward_layer(ops, cfg, model_->layers[l], {l, last, cfg.output_norms});
        if (last) break;
        slot += returned;
    }
    if (plan.every_layer) {
        HEADSCOPE_CUDA_CHECK(cudaMemcpy(unembed_in_.data() + lens_slots * R * C, x_.data(), R * C * sizeof(float),
                                        cudaMemcpyDeviceToDevice));
        predict(batch, options, lens_slots, result);
    }
    HEADSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace headscope
