// The forward on the device (cuda_backend.cu includes it, once): the layer
// loop (layer_ops.h) over the device's operations, its weights kept there in
// their stored types (F32, F16, BF16; 16-bit ones widened block by block
// for cuBLAS's FP32 products, never with TF32), what the host plans
// (cuda_forward_plan.h) uploaded once per forward, and only what the caller
// asked copied back: the returned layers' maps and outputs, and the logits
// of the rows read out, a chunk at a time, whose top tokens the host takes
// (read_logits_row, forward.h).
// Legend: B batch, T padded length, R = B T rows (every row is computed),
// C channels, Qw = NH hs, KVw = NKV hs, F MLP hidden size, V vocabulary.
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_forward_plan.h"
#include "cuda_layer_kernels.cuh"
#include "headscope/base/progress.h"
#include "headscope/compute/layer_ops.h"

namespace headscope {
namespace {

class DeviceForward {
public:
    explicit DeviceForward(cublasHandle_t cublas) : cublas_(cublas) {}

    // Uploads every vector of `model` and the matrices the layers and the read-out multiply by; "" or why the
    // device cannot hold them.
    std::string load(const Model& model) {
        model_ = &model;
        matrix_at_.clear();
        // The embeddings are read on the host (the plan embeds the rows): the output embedding and head only.
        std::vector<const Matrix*> matrices = {&model.lm_head, &model.head_dense};
        for (const LayerWeights& w : model.layers)
            for (const Matrix* m : {&w.attn, &w.q, &w.k, &w.v, &w.attn_proj, &w.fc, &w.gate, &w.fc_proj})
                matrices.push_back(m);
        std::vector<const Matrix*> uploads;
        size_t bytes = 0;
        for (const Matrix* m : matrices) {
            if (!*m || matrix_at_.count(m->data)) continue;
            if (quantized(m->dtype))
                return std::string("the CUDA backend reads F32, F16 and BF16 weights, not ") + to_string(m->dtype);
            matrix_at_[m->data] = bytes;
            uploads.push_back(m);
            bytes += (dtype_row_bytes(m->dtype, m->in * m->out) + 255) / 256 * 256;  // each 256-byte aligned
        }
        vectors_.upload(model.storage.data(), model.storage.size());
        matrices_.reserve(bytes);
        for (const Matrix* m : uploads)
            HEADSCOPE_CUDA_CHECK(cudaMemcpy(matrices_.data() + matrix_at_[m->data], m->data,
                                            dtype_row_bytes(m->dtype, m->in * m->out), cudaMemcpyHostToDevice));
        return "";
    }

    // As CpuForward::run without a cache: `progress` hears "computing layers" before each layer; Cancelled
    // thrown by it ends the forward.
    void run(const Batch& batch, const AttentionOptions& options, AttentionResult& result, const Progress& progress);

private:
    class LayerRun;
    friend class LayerRun;

    // The device copy of a vector of model_->storage.
    const float* vector(const float* host) const {
        if (!host) return nullptr;
        if (host < model_->storage.data() || host >= model_->storage.data() + model_->storage.size())
            throw CudaError("a weight vector outside the model's storage");
        return vectors_.data() + (host - model_->storage.data());
    }

    // out (rows, w.out), row stride ldo, = x (rows, w.in), row stride ldx, W + bias, or += with `accumulate`.
    // cuBLAS is column-major: out^T = op(W) x^T, W (in, out) row-major being (out x in) column-major, and W
    // stored (out, in) its transpose. A 16-bit W is widened a block at a time into w_scratch_: blocks of
    // outputs where it is stored (out, in), blocks of inputs (whose products add up) where (in, out).
    void linear(const float* x, int rows, int ldx, const Matrix& w, const float* bias, float* out, int ldo,
                bool accumulate) {
        const std::byte* stored = matrices_.data() + matrix_at_.at(w.data);
        const int in = static_cast<int>(w.in), n = static_cast<int>(w.out);
        const float one = 1.f, zero = 0.f;
        const cublasOperation_t op = w.out_by_in ? CUBLAS_OP_T : CUBLAS_OP_N;
        const int lda = w.out_by_in ? in : n;
        if (w.dtype == DType::F32) {
            HEADSCOPE_CUDA_CHECK(cublas().sgemm(cublas_, op, CUBLAS_OP_N, n, rows, in, &one,
                                                reinterpret_cast<const float*>(stored), lda, x, ldx,
                                                accumulate ? &one : &zero, out, ldo));
        } else {
            const int stride = w.out_by_in ? in : n;  // values in a stored row
            const int block = std::max(1, static_cast<int>(widen_block_floats / stride));
            const int count = w.out_by_in ? n : in;  // stored rows
            w_scratch_.reserve(static_cast<size_t>(std::min(block, count)) * stride);
            for (int first = 0; first < count; first += block) {
                const int m = std::min(block, count - first);
                const size_t values = static_cast<size_t>(m) * stride;
                widen_kernel<<<blocks_for(values), threads>>>(
                    reinterpret_cast<const uint16_t*>(stored) + static_cast<size_t>(first) * stride, w_scratch_.data(),
                    values, w.dtype == DType::BF16);
                HEADSCOPE_CUDA_CHECK(cudaGetLastError());
                if (w.out_by_in)  // outputs [first, first + m)
                    HEADSCOPE_CUDA_CHECK(cublas().sgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, rows, in, &one,
                                                        w_scratch_.data(), in, x, ldx, accumulate ? &one : &zero,
                                                        out + first, ldo));
                else  // inputs [first, first + m), added to the earlier ones
                    HEADSCOPE_CUDA_CHECK(cublas().sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, rows, m, &one,
                                                        w_scratch_.data(), n, x + first, ldx,
                                                        accumulate || first > 0 ? &one : &zero, out, ldo));
            }
        }
        if (bias) {
            const size_t count = static_cast<size_t>(rows) * n;
            bias_rows_kernel<<<blocks_for(count), threads>>>(out, ldo, vector(bias), n, count);
            HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        }
    }

    // LayerNorm (`layer_norm`) or RMSNorm of each of `rows` rows' `groups`
    // groups of n values (row stride `stride`), w and b host vectors of model_->storage (b may be null).
    void norm(const float* x, const float* w, const float* b, float* out, int rows, int n, int groups, size_t stride,
              bool layer_norm) {
        norm_kernel<<<rows * groups, threads>>>(x, out, vector(w), vector(b), n, groups, stride,
                                                model_->config.layer_norm_epsilon, layer_norm);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }

    // Throws Error naming the layer where x (R, C) stopped being finite.
    void check_finite(const float* x, size_t n, const std::string& what) {
        HEADSCOPE_CUDA_CHECK(cudaMemset(flag_.data(), 0, sizeof(int)));
        not_finite_kernel<<<blocks_for(n), threads>>>(x, n, flag_.data());
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        int flag = 0;
        HEADSCOPE_CUDA_CHECK(cudaMemcpy(&flag, flag_.data(), sizeof flag, cudaMemcpyDeviceToHost));
        if (flag) throw Error(what + " (a value past float32's range, from weights too large)");
    }

    void attention(const DeviceForwardPlan& plan, const DeviceLayerPlan& layer, const AttentionOptions& options);
    void read_out_rows(int n, const float* x);
    void predict(const Batch& batch, const AttentionOptions& options, int lens_slots, AttentionResult& result);

    static constexpr size_t widen_block_floats = size_t(1) << 24;  // 64 MB of a weight widened at a time
    static constexpr int unembed_chunk = 64;                       // rows read out at a time

    cublasHandle_t cublas_;
    const Model* model_ = nullptr;
    std::unordered_map<const std::byte*, size_t> matrix_at_;       // a matrix's host bytes -> its offset in matrices_
    DeviceBuffer<float> vectors_;                                  // model_->storage
    DeviceBuffer<std::byte> matrices_;                             // every matrix, in its stored type
    DeviceBuffer<float> w_scratch_;                                // a block of a 16-bit matrix widened
    DeviceBuffer<int> flag_;                                       // not_finite_kernel's
    DeviceBuffer<int> positions_, lengths_, key_begin_, key_end_;  // (R), (B), (B, T) twice
    DeviceBuffer<float> cos_, sin_;                                // (T, dims / 2) a layer's rotation
    DeviceBuffer<float> x_, ln_, out_;                             // (R, C) each
    DeviceBuffer<float> qkv_;                                      // (R, Qw + 2 KVw) [Q | K | V]
    DeviceBuffer<float> fused_;                                    // (R, 3 C) per-head [q k v] before reordering
    DeviceBuffer<float> contiguous_;   // (R, Qw), (R, KVw) twice: the naive view's Q, K, V copied out
    DeviceBuffer<float> y_;            // (R, Qw) the attention's output, heads merged
    DeviceBuffer<float> hidden_, up_;  // (R, F) the MLP's hidden layer, and a gated one's up projection
    DeviceBuffer<float> att_;          // (B, NH, T, T) a layer's weights
    DeviceBuffer<float> unembed_in_;   // (lens slots + 1, R, C) the rows to read out
    DeviceBuffer<float> logits_;       // (unembed_chunk, V)
    std::vector<float> host_logits_;   // the same, copied back
};

// qkv_ (or the naive view's contiguous_) -> att_ (B, NH, T, T) and y_ (R,
// Qw), as CpuForward::attention: per text and per head of a group, one
// strided-batched product over the key/value heads (query head kv * group +
// g reads key/value head kv), the layer's scores softmaxed by its plan.
// transpose: head h of text b is the (T, hs) block at column h hs of its
// rows; naive view: the flat floats (b NH + h) T hs of the copied-out part.
void DeviceForward::attention(const DeviceForwardPlan& plan, const DeviceLayerPlan& layer,
                              const AttentionOptions& options) {
    const HeadSplit& s = plan.split;
    const int B = plan.B, T = plan.T, hs = s.hs, group = s.group();
    const int Qw = s.q_width(), KVw = s.kv_width(), width = Qw + 2 * KVw;
    const size_t R = static_cast<size_t>(B) * T, TT = static_cast<size_t>(T) * T;
    const bool naive = options.split == Split::naive_view;
    key_begin_.upload(layer.key_begin.data(), layer.key_begin.size());
    key_end_.upload(layer.key_end.data(), layer.key_end.size());
    // Text b's Q, K, V and y, their row strides, and the step from one head to the next.
    struct Part {
        float* data;
        int stride;
        long long head_step;
    };
    const auto part = [&](int b, int which) -> Part {  // 0 Q, 1 K, 2 V, 3 y
        const int part_width = which == 0 || which == 3 ? Qw : KVw;
        if (naive) {
            float* base =
                which == 3 ? y_.data() : contiguous_.data() + (which == 0 ? 0 : R * Qw + (which - 1) * R * KVw);
            return {base + static_cast<size_t>(b) * T * part_width, hs, static_cast<long long>(T) * hs};
        }
        if (which == 3) return {y_.data() + static_cast<size_t>(b) * T * Qw, Qw, hs};
        return {qkv_.data() + static_cast<size_t>(b) * T * width + (which == 0 ? 0 : Qw + (which - 1) * KVw), width,
                hs};
    };
    const float one = 1.f, zero = 0.f;
    for (int b = 0; b < B; ++b) {
        const Part q = part(b, 0), k = part(b, 1);
        for (int g = 0; g < group; ++g)  // att = Q K^T, asked as att^T = K Q^T
            HEADSCOPE_CUDA_CHECK(cublas().sgemm_strided_batched(
                cublas_, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &one, k.data, k.stride, k.head_step,
                q.data + g * q.head_step, q.stride, group * q.head_step, &zero,
                att_.data() + (static_cast<size_t>(b) * s.NH + g) * TT, T, group * TT, s.NKV));
    }
    const size_t score_rows = static_cast<size_t>(B) * s.NH * T;
    score_softmax_kernel<<<blocks_for(score_rows * 32), threads>>>(att_.data(), key_begin_.data(), key_end_.data(), T,
                                                                   s.NH, layer.scale, layer.softcap,
                                                                   vector(layer.sinks), score_rows);
    HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    for (int b = 0; b < B; ++b) {
        const Part v = part(b, 2), y = part(b, 3);
        for (int g = 0; g < group; ++g)  // y = att V, asked as y^T = V^T att^T
            HEADSCOPE_CUDA_CHECK(cublas().sgemm_strided_batched(
                cublas_, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &one, v.data, v.stride, v.head_step,
                att_.data() + (static_cast<size_t>(b) * s.NH + g) * TT, T, group * TT, &zero, y.data + g * y.head_step,
                y.stride, group * y.head_step, s.NKV));
    }
}

// ln_ (n, C) = what the output embedding reads of n residual rows x, as CpuForward::read_out.
void DeviceForward::read_out_rows(int n, const float* x) {
    const Config& cfg = model_->config;
    const int C = cfg.n_embd;
    const size_t values = static_cast<size_t>(n) * C;
    if (!cfg.post_norm)
        norm(x, model_->ln_f_w, model_->ln_f_b, ln_.data(), n, C, 1, C, cfg.norm == Norm::layer_norm);
    else if (!cfg.mlm_head)
        HEADSCOPE_CUDA_CHECK(cudaMemcpy(ln_.data(), x, values * sizeof(float), cudaMemcpyDeviceToDevice));
    if (cfg.output_scale != 1) {
        scale_kernel<<<blocks_for(values), threads>>>(ln_.data(), cfg.output_scale, values);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }
    if (!cfg.mlm_head) return;
    const float* head_in = x;
    if (!cfg.post_norm) {  // the head reads the final norm's output
        HEADSCOPE_CUDA_CHECK(cudaMemcpy(out_.data(), ln_.data(), values * sizeof(float), cudaMemcpyDeviceToDevice));
        head_in = out_.data();
    }
    linear(head_in, n, C, model_->head_dense, model_->head_dense_b, ln_.data(), C, false);
    activate_kernel<<<blocks_for(values), threads>>>(ln_.data(), values, cfg.mlp == Mlp::gelu_tanh ? 0 : 1);
    HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    norm(ln_.data(), model_->head_ln_w, model_->head_ln_b, ln_.data(), n, C, 1, C, /*layer_norm=*/true);
}

// unembed_in_'s rows (each lens layer's, then the last layer's) through the
// output embedding a chunk at a time, the logits copied back and read out
// row by row, as CpuForward::predict.
void DeviceForward::predict(const Batch& batch, const AttentionOptions& options, int lens_slots,
                            AttentionResult& result) {
    const Config& cfg = model_->config;
    const int C = cfg.n_embd, V = cfg.vocab_size, T = result.T, R = result.B * T;
    const int total = (lens_slots + (options.top_k ? 1 : 0)) * R;
    logits_.reserve(static_cast<size_t>(std::min(total, unembed_chunk)) * V);
    for (int start = 0; start < total; start += unembed_chunk) {
        const int n = std::min(unembed_chunk, total - start);
        const size_t values = static_cast<size_t>(n) * V;
        read_out_rows(n, unembed_in_.data() + static_cast<size_t>(start) * C);
        linear(ln_.data(), n, C, model_->lm_head, model_->lm_bias, logits_.data(), V, false);
        if (cfg.logit_softcap > 0) {
            soft_cap_kernel<<<blocks_for(values), threads>>>(logits_.data(), cfg.logit_softcap, values);
            HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        }
        host_logits_.resize(values);
        HEADSCOPE_CUDA_CHECK(
            cudaMemcpy(host_logits_.data(), logits_.data(), values * sizeof(float), cudaMemcpyDeviceToHost));
        for (int r = 0; r < n; ++r) {
            const int row = start + r, slot = row / R, text_row = row % R;
            const float* logits = host_logits_.data() + static_cast<size_t>(r) * V;
            for (int v = 0; v < V; ++v)
                if (!std::isfinite(logits[v]))
                    throw Error("the logits are not finite (a value past float32's range, from weights too large)");
            read_logits_row(cfg, batch, options, result, slot < lens_slots ? slot : -1, text_row / T, text_row % T,
                            logits);
        }
    }
}

}  // namespace
}  // namespace headscope
