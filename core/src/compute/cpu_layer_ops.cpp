// The CPU's layer operations (layer_ops.h): each one the CPU forward's own
// code over its buffers (cpu_backend.cpp, cpu_attention.cpp,
// cpu_experts.cpp, cpu_contributions.cpp, cpu_patching.cpp) with the call's
// context, and the request's keeps and edits at the loop's named points.
#include <algorithm>

#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/layer_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {

class CpuForward::LayerRun final : public LayerOps {
public:
    LayerRun(CpuForward& f, const Model& model, const Batch& batch, const AttentionOptions& options,
             const HeadSplit& split, PrefixCache& store, const LayerAt& at, Heads heads, const ForwardRequest& request,
             AttentionResult& result)
        : f_(f),
          model_(model),
          cfg_(model.config),
          batch_(batch),
          options_(options),
          split_(split),
          store_(store),
          at_(at),
          heads_(heads),
          request_(request),
          result_(result) {}

    void copy(Tensor from, Tensor to) override {
        std::copy_n(data(from), static_cast<size_t>(f_.rows_) * width(from), data(to));
    }
    void norm(Tensor in, const float* w, const float* b, Tensor out) override {
        normalize(cfg_, data(in), w, b, data(out), f_.rows_);
    }
    void linear(Tensor in, const Matrix& w, const float* bias, Tensor out, bool accumulate) override {
        headscope::linear(data(in), f_.rows_, w, bias, data(out), width(out), accumulate);
    }
    void project_qkv(const LayerWeights& w) override { f_.project_qkv(model_, w); }
    void rotary(int layer) override { f_.rotate(cfg_, batch_, options_, split_, layer); }
    void attention(int layer) override {
        if (request_.cached_rows.from)
            f_.read_cached_rows(model_, batch_, options_, split_, request_.cached_rows, store_, layer);
        f_.attention(model_, batch_, options_, split_, store_, at_, heads_);
        f_.check_attention(at_.layer, at_.att, batch_.B(), split_.NH, batch_.T(), split_.hs);
    }
    void cross_attention(int) override {
        f_.cross_attend(model_, batch_, options_, split_, at_, heads_, request_, result_);
    }
    void mlp(const LayerWeights& w, Tensor out) override { f_.mlp(cfg_, w, /*apart=*/out == Tensor::out); }
    void experts(const LayerWeights& w, int layer, Tensor out) override {
        f_.mix_experts(cfg_, w, options_, layer, /*apart=*/out == Tensor::out, result_);
    }
    void add(Sublayer sublayer, int layer, const float* norm_w) override {
        // Each row's scale of the attention's output norm, for the contributions (every row computed: R = B T).
        float* rms = sublayer == Sublayer::attention && options_.contributions
                         ? result_.attention_output_scale.data() + static_cast<size_t>(layer) * f_.rows_
                         : nullptr;
        f_.add_sublayer_output(cfg_, norm_w, rms);
    }
    void check_finite(int layer, const char* after) override { f_.check_residual(layer, cfg_.n_embd, after); }
    void at(LayerPoint point, int layer) override;

private:
    float* data(Tensor tensor) {
        switch (tensor) {
            case Tensor::x: return f_.x_.data();
            case Tensor::ln: return f_.ln_.data();
            case Tensor::out: return f_.out_.data();
            case Tensor::y: return f_.y_.data();
        }
        return nullptr;
    }
    int width(Tensor tensor) const { return tensor == Tensor::y ? split_.q_width() : cfg_.n_embd; }

    CpuForward& f_;
    const Model& model_;
    const Config& cfg_;
    const Batch& batch_;
    const AttentionOptions& options_;
    const HeadSplit& split_;
    PrefixCache& store_;
    const LayerAt& at_;
    Heads heads_;
    const ForwardRequest& request_;
    AttentionResult& result_;
};

void CpuForward::LayerRun::at(LayerPoint point, int l) {
    const int B = batch_.B(), T = batch_.T(), C = cfg_.n_embd;
    const size_t rows = static_cast<size_t>(f_.rows_), Qw = split_.q_width();
    switch (point) {
        case LayerPoint::input:
            if (request_.layer_inputs) std::copy_n(f_.x_.data(), rows * C, request_.layer_inputs + l * rows * C);
            f_.patch_residual(request_, l, C);
            return;
        case LayerPoint::heads:
            if (at_.slot >= 0 && options_.maps == Maps::queries_and_keys)
                f_.keep_queries_keys(split_, at_.slot, result_);
            f_.patch_attention(request_, PatchKind::pattern, split_, store_, l, at_.att);
            f_.knock_out(options_, batch_, split_, l);
            f_.patch_attention(request_, PatchKind::heads, split_, store_, l, at_.att);
            if (at_.slot >= 0 && options_.capture_outputs)
                for (int b = 0; b < B; ++b)
                    std::copy_n(f_.y_.data() + f_.first_row_[b] * Qw, (T - f_.begin_[b]) * Qw,
                                result_.outputs.data() + ((at_.slot * B + b) * T + f_.begin_[b]) * Qw);
            if (options_.contributions) f_.contribute(model_, batch_, options_, split_, at_, result_);
            return;
        case LayerPoint::attention_end: f_.keep_metric_rows(request_, l, cfg_.n_layer, Qw, C); return;
        case LayerPoint::mlp_input:
            if (options_.contributions)
                std::copy_n(f_.x_.data(), rows * C, f_.residuals_.data() + (2 * l + 1) * rows * C);
            return;
        case LayerPoint::mlp_output: f_.patch_mlp(request_, l, C); return;
        case LayerPoint::output:
            if (options_.contributions)
                std::copy_n(f_.x_.data(), rows * C, f_.residuals_.data() + (2 * l + 2) * rows * C);
            if (at_.slot >= 0 && f_.lens_)
                std::copy_n(f_.x_.data(), rows * C, f_.unembed_in_.data() + at_.slot * rows * C);
            return;
    }
}

// One layer of the CPU forward: the layer loop over the CPU's operations.
void CpuForward::run_layer(const Model& model, const Batch& batch, const AttentionOptions& options,
                           const HeadSplit& split, PrefixCache& store, LayerAt at, Heads heads,
                           const ForwardRequest& request, AttentionResult& result) {
    LayerRun ops{*this, model, batch, options, split, store, at, heads, request, result};
    forward_layer(ops, model.config, model.layers[at.layer],
                  {at.layer, at.last, sublayers_apart(model.config, request)});
}

}  // namespace headscope
