// The CUDA backend: the CPU forward (cpu_forward.h) of GPT-2's layout on the
// device, in FP32 (no TF32) so that its maps match the CPU's. cuBLAS does the
// projections and, per head, Q K^T and weights V; small kernels do the
// embedding, LayerNorm, GELU, biases and the fused scale + mask + softmax.
// Legend: B batch, T padded length, C channels, NH heads, hs = C/NH.
// All buffers are row-major; cuBLAS is column-major, so each row-major
// product out = a b is asked of it as out^T = b^T a^T.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_kernels.cuh"
#include "headscope/base/error.h"
#include "headscope/compute/cuda_backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/matmul.h"

namespace headscope {
namespace {

class CudaBackend final : public Backend {
public:
    CudaBackend() {
        HEADSCOPE_CUDA_CHECK(cublas().create(&cublas_));
        // FP32 products as on the CPU: the default math mode never uses TF32 tensor cores.
        HEADSCOPE_CUDA_CHECK(cublas().set_math_mode(cublas_, CUBLAS_DEFAULT_MATH));
    }
    ~CudaBackend() override { cublas().destroy(cublas_); }

    std::string name() const override { return "cuda"; }

    void load_weights(const Model& model) override {
        model_ = &model;
        cpu_->load_weights(model);
        device_offset_.clear();
        layout_refusal_ = layout_refusal(model.config);
        if (!layout_refusal_.empty()) return;  // forward says so and runs on the CPU
        // Every weight as float32 in one device buffer: the vectors (storage) and each matrix.
        std::vector<float> staged(model.storage.begin(), model.storage.end());
        device_offset_[model.storage.data()] = 0;
        const auto stage = [&](const Matrix& m) {
            if (!m || device_offset_.count(m.data)) return;
            device_offset_[m.data] = staged.size();
            const std::vector<float> floats = to_floats(m);  // GPT-2's (in, out), as the products read it
            staged.insert(staged.end(), floats.begin(), floats.end());
        };
        stage(model.wte);
        stage(model.wpe);
        for (const LayerWeights& w : model.layers)
            for (const Matrix* m : {&w.attn, &w.attn_proj, &w.fc, &w.fc_proj}) stage(*m);
        try {
            weights_.upload(staged.data(), staged.size());
        } catch (const CudaError& e) {
            fall_back(e);
        }
    }

    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result, PrefixCache* cache,
                 const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        validate_forward(*model_, batch, options);
        const std::string cpu_only = cpu_only_reason(options, cache);
        if (!cpu_only.empty()) {
            if (said_cpu_only_ != cpu_only)
                std::fprintf(stderr, "headscope: %s; computing this on the CPU\n", cpu_only.c_str());
            said_cpu_only_ = cpu_only;
            cpu_->forward(batch, options, result, cache, progress);
            result.computed_on.fallback = cpu_only;
            return;
        }
        if (!on_cpu_) {
            try {
                forward_on_device(batch, options, result);
                result.computed_on = {"cuda", ""};
                return;
            } catch (const CudaError& e) {
                fall_back(e);
            }
        }
        cpu_->forward(batch, options, result, cache, progress);
        result.computed_on.fallback = failure_;
    }

    void head_effects(const Batch& batch, const AttentionOptions& options, HeadEffects& effects, EffectsOf of,
                      const Progress& progress, EffectsMethod method, const EffectsUpdate& on_update) override {
        if (!model_) throw Error("no model loaded");
        cpu_->head_effects(batch, options, effects, of, progress, method, on_update);
        effects.computed_on.fallback = "the CUDA backend computes no effects grid yet";
    }

    void patch(const Batch& clean, const Batch& corrupted, const AttentionOptions& options, const PatchRequest& request,
               Patching& patching, const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        cpu_->patch(clean, corrupted, options, request, patching, progress);
        patching.computed_on.fallback = "the CUDA backend does no activation patching yet";
    }

    void patched_run(const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                     PatchDirection direction, const PatchCell& cell, AttentionResult& result,
                     const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        cpu_->patched_run(clean, corrupted, options, direction, cell, result, progress);
        result.computed_on.fallback = "the CUDA backend does no activation patching yet";
    }

private:
    // Why the device path cannot run a model of `config`, in words; "" when it can.
    static std::string layout_refusal(const Config& c) {
        const bool gpt2_layout = c.norm == Norm::layer_norm && c.positions == Positions::learned &&
                                 c.qkv_layout == QkvLayout::fused && c.mlp == Mlp::gelu_tanh && !c.parallel_residual &&
                                 !c.qk_norm && c.kv_heads() == c.n_head && c.head_size() * c.n_head == c.n_embd &&
                                 c.qkv_bias && c.o_bias && !c.is_encoder_decoder() && c.causal && !c.output_norms &&
                                 c.norm_offset == 0 && c.attention_scale == 0 && c.attention_softcap == 0 &&
                                 c.logit_softcap == 0 && c.embedding_scale == 1;
        if (!gpt2_layout)
            return "the CUDA backend runs GPT-2's layout only (LayerNorm, learned positions, fused [Q | K | V], tanh "
                   "GELU)";
        // A GGUF file's GPT-2 stores its matrices (out, in), the transpose of its checkpoints' Conv1D.
        return c.weights_out_by_in ? "the CUDA backend reads GPT-2's matrices stored (in, out), as its checkpoints "
                                     "store them, and this model stores them (out, in)"
                                   : "";
    }

    // What the device path does not compute yet, in words; "" when it computes this forward.
    std::string cpu_only_reason(const AttentionOptions& options, const PrefixCache* cache) const {
        if (!layout_refusal_.empty()) return layout_refusal_;
        if (options.sliding_window > 0) return "the CUDA backend computes no sliding window yet";
        if (!options.ablate.empty()) return "the CUDA backend knocks out no heads yet";
        if (options.top_k > 0 || options.lens_k > 0)
            return "the CUDA backend computes no predictions or logit lens yet";
        if (cache) return "the CUDA backend keeps no prefix cache yet";
        if (options.maps != Maps::full || options.summaries)
            return "the CUDA backend keeps every map and computes no summaries yet";
        return "";
    }

    // The window and CLI keep running on the CPU after a CUDA failure, saying so once.
    void fall_back(const CudaError& e) {
        std::fprintf(stderr, "headscope: CUDA error (%s); computing on the CPU from now on\n", e.what());
        on_cpu_ = true;
        failure_ = std::string("a CUDA error (") + e.what() + ") moved every forward to the CPU";
    }

    // The device copy of a vector of model_->storage.
    const float* on_device(const float* host) const { return weights_.data() + (host - model_->storage.data()); }
    // The device copy of a matrix, (in, out) row-major.
    const float* on_device(const Matrix& m) const { return weights_.data() + device_offset_.at(m.data); }

    // out (rows, n) = x (rows, k) w (k, n), plus out's old value when `accumulate`.
    void matmul(const float* x, const Matrix& w, float* out, int rows, int k, int n, bool accumulate) {
        const float one = 1.f, zero = 0.f;
        HEADSCOPE_CUDA_CHECK(cublas().sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, rows, k, &one, on_device(w), n, x, k,
                                            accumulate ? &one : &zero, out, n));
    }

    void add_bias(float* out, const float* bias, int rows, int n) {
        const size_t count = static_cast<size_t>(rows) * n;
        add_bias_kernel<<<blocks_for(count), threads>>>(out, on_device(bias), n, count);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }

    void layer_norm(const float* x, const float* w, const float* b, float* out, int rows) {
        const Config& cfg = model_->config;
        layer_norm_kernel<<<rows, threads>>>(x, on_device(w), on_device(b), out, cfg.n_embd, cfg.layer_norm_epsilon);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
    }

    // As CpuForward::run, result set up the same way.
    void forward_on_device(const Batch& batch, const AttentionOptions& options, AttentionResult& result) {
        set_up_result(model_->config, batch, options, result);
        const int B = result.B, T = result.T, C = model_->config.n_embd, NH = result.NH;
        const size_t map_floats = static_cast<size_t>(B) * NH * T * T;

        // Padded ids and each query row's visible keys, from core's
        // Batch::padded_id and visible_end (host side, so there is one rule).
        const int BT = B * T;
        std::vector<int32_t> ids(BT);
        std::vector<int> ends(BT);
        for (int b = 0; b < B; ++b) {
            const int length = static_cast<int>(batch.token_ids[b].size());
            for (int t = 0; t < T; ++t) {
                ids[b * T + t] = batch.padded_id(b, t);
                ends[b * T + t] = visible_end(options, t, length, T);
            }
        }
        ids_.upload(ids.data(), BT);
        ends_.upload(ends.data(), BT);

        const size_t BTC = static_cast<size_t>(BT) * C;
        x_.reserve(BTC);
        ln_.reserve(BTC);
        qkv_.reserve(3 * BTC);
        y_.reserve(BTC);
        fc_.reserve(4 * BTC);
        att_.reserve(map_floats);
        if (options.split == Split::naive_view) qkv_contiguous_.reserve(3 * BTC);

        embed_kernel<<<blocks_for(BTC), threads>>>(ids_.data(), on_device(model_->wte), on_device(model_->wpe),
                                                   x_.data(), T, C, BTC);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        const int last_layer = result.layers.back();
        size_t slot = 0;
        for (int l = 0; l <= last_layer; ++l) {
            const LayerWeights& w = model_->layers[l];
            const bool returned = slot < result.layers.size() && result.layers[slot] == l;

            layer_norm(x_.data(), w.ln_1_w, w.ln_1_b, ln_.data(), BT);
            matmul(ln_.data(), w.attn, qkv_.data(), BT, C, 3 * C, false);
            add_bias(qkv_.data(), w.attn_b, BT, 3 * C);
            attention(B, T, NH, options);
            if (returned) {
                HEADSCOPE_CUDA_CHECK(cudaMemcpy(result.weights.data() + slot * map_floats, att_.data(),
                                                map_floats * sizeof(float), cudaMemcpyDeviceToHost));
                if (options.capture_outputs)
                    HEADSCOPE_CUDA_CHECK(cudaMemcpy(result.outputs.data() + slot * BTC, y_.data(), BTC * sizeof(float),
                                                    cudaMemcpyDeviceToHost));
            }
            slot += returned;
            if (l == last_layer) break;  // everything after this layer's weights is not needed

            matmul(y_.data(), w.attn_proj, x_.data(), BT, C, C, true);
            add_bias(x_.data(), w.attn_proj_b, BT, C);
            layer_norm(x_.data(), w.ln_2_w, w.ln_2_b, ln_.data(), BT);
            matmul(ln_.data(), w.fc, fc_.data(), BT, C, 4 * C, false);
            add_bias(fc_.data(), w.fc_b, BT, 4 * C);
            gelu_kernel<<<blocks_for(4 * BTC), threads>>>(fc_.data(), 4 * BTC);
            HEADSCOPE_CUDA_CHECK(cudaGetLastError());
            matmul(fc_.data(), w.fc_proj, x_.data(), BT, 4 * C, C, true);
            add_bias(x_.data(), w.fc_proj_b, BT, C);
        }
        HEADSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    }

    // From qkv_ (B, T, 3C): att_ (B, NH, T, T) weights and y_ (B, T, C), as
    // CpuForward::attention. transpose: head h of Q is the (T, hs) block at
    // column h*hs of qkv_ with row stride 3C; its y goes to column h*hs of y_
    // (row stride C). naive-view: Q, K, V copied out contiguous (B, T, C), head
    // h of text b is the flat floats [(b*NH + h)*T*hs, ...) whatever tokens
    // they hold, and y_ is written (B, NH, T, hs) and read as (B, T, C).
    void attention(int B, int T, int NH, const AttentionOptions& options) {
        const int C = model_->config.n_embd, hs = C / NH;
        const size_t BTC = static_cast<size_t>(B) * T * C, TT = static_cast<size_t>(T) * T;
        // Heads evenly spaced in memory, one strided-batched product each.
        struct HeadGroup {
            const float* q;  // K at q + k_offset, V at q + 2 k_offset
            float* att;
            float* y;
            int count;
        };
        std::vector<HeadGroup> groups;
        int in_stride, out_stride;    // row strides of Q, K, V and of y
        long long in_step, out_step;  // from one head to the next
        size_t k_offset;
        if (options.split == Split::naive_view) {
            for (int part = 0; part < 3; ++part)  // Q, K, V
                HEADSCOPE_CUDA_CHECK(cudaMemcpy2D(qkv_contiguous_.data() + part * BTC, C * sizeof(float),
                                                  qkv_.data() + part * C, 3 * C * sizeof(float), C * sizeof(float),
                                                  static_cast<size_t>(B) * T, cudaMemcpyDeviceToDevice));
            groups.push_back({qkv_contiguous_.data(), att_.data(), y_.data(), B * NH});
            in_stride = out_stride = hs;
            in_step = out_step = static_cast<long long>(T) * hs;
            k_offset = BTC;
        } else {
            for (int b = 0; b < B; ++b)
                groups.push_back({qkv_.data() + static_cast<size_t>(b) * T * 3 * C, att_.data() + b * NH * TT,
                                  y_.data() + static_cast<size_t>(b) * T * C, NH});
            in_stride = 3 * C;
            out_stride = C;
            in_step = out_step = hs;
            k_offset = C;
        }

        const float one = 1.f, zero = 0.f;
        for (const HeadGroup& g : groups)  // att = Q K^T, asked as att^T = K Q^T
            HEADSCOPE_CUDA_CHECK(cublas().sgemm_strided_batched(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &one,
                                                                g.q + k_offset, in_stride, in_step, g.q, in_stride,
                                                                in_step, &zero, g.att, T, TT, g.count));
        const size_t rows = static_cast<size_t>(B) * NH * T;
        masked_softmax_kernel<<<blocks_for(rows * 32), threads>>>(att_.data(), ends_.data(), T, NH,
                                                                  score_scale(options.scale, model_->config, hs), rows);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        for (const HeadGroup& g : groups)  // y = att V, asked as y^T = V^T att^T
            HEADSCOPE_CUDA_CHECK(cublas().sgemm_strided_batched(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &one,
                                                                g.q + 2 * k_offset, in_stride, in_step, g.att, T, TT,
                                                                &zero, g.y, out_stride, out_step, g.count));
    }

    const Model* model_ = nullptr;
    std::unique_ptr<Backend> cpu_ = make_cpu_backend();  // what the device does not compute, and all after an error
    bool on_cpu_ = false;
    std::string failure_;  // the CUDA error that set on_cpu_
    cublasHandle_t cublas_ = nullptr;
    std::string layout_refusal_;                             // why the device cannot run this model; "" when it can
    std::string said_cpu_only_;                              // the last reason given for computing on the CPU
    std::unordered_map<const void*, size_t> device_offset_;  // a weight's host data -> its offset in weights_
    DeviceBuffer<float> weights_;                            // every weight as float32, uploaded once per model
    DeviceBuffer<int32_t> ids_;                              // (B, T) padded token ids
    DeviceBuffer<int> ends_;                                 // (B, T) visible keys per query row
    DeviceBuffer<float> x_;                                  // (B, T, C) residual stream
    DeviceBuffer<float> ln_;                                 // (B, T, C) LayerNorm output
    DeviceBuffer<float> qkv_;                                // (B, T, 3C) fused projection
    DeviceBuffer<float> qkv_contiguous_;                     // (3, B, T, C) Q, K, V copied out, naive-view only
    DeviceBuffer<float> y_;                                  // (B, T, C) attention output, heads merged
    DeviceBuffer<float> fc_;                                 // (B, T, 4C) MLP hidden
    DeviceBuffer<float> att_;                                // (B, NH, T, T) one layer's weights
};

}  // namespace

bool cuda_built_in() { return true; }

CudaStatus cuda_status() {
    static const CudaStatus status = [] {
        int count = 0;
        const cudaError_t error = cudaGetDeviceCount(&count);
        int driver = 0;
        cudaDriverGetVersion(&driver);  // 0 when no driver is installed
        if (error == cudaErrorInsufficientDriver && driver > 0)
            return CudaStatus{false, "driver too old for this build"};
        if (error != cudaSuccess || count == 0) return CudaStatus{false, "no CUDA device"};
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return CudaStatus{false, "no CUDA device"};
        if (prop.major * 10 + prop.minor < 75)  // the oldest code CMAKE_CUDA_ARCHITECTURES builds
            return CudaStatus{false, std::string(prop.name) + " is sm_" + std::to_string(prop.major * 10 + prop.minor) +
                                         ", older than this build's sm_75"};
        return CudaStatus{true, prop.name};
    }();
    return status;
}

std::unique_ptr<Backend> make_cuda_backend() {
    const CudaStatus status = cuda_status();
    if (!status.usable) throw Error(status.reason);
    return std::make_unique<CudaBackend>();
}

SoftmaxTiming time_cuda_softmax(int B, int NH, int T, int repeats) {
    const CudaStatus status = cuda_status();
    if (!status.usable) throw Error(status.reason);
    const size_t rows = static_cast<size_t>(B) * NH * T, scores = rows * T;
    DeviceBuffer<float> att;
    att.reserve(scores);
    HEADSCOPE_CUDA_CHECK(cudaMemset(att.data(), 0, scores * sizeof(float)));
    const std::vector<int> every_key(static_cast<size_t>(B) * T, T);
    DeviceBuffer<int> ends;
    ends.upload(every_key.data(), every_key.size());

    cudaEvent_t start, stop;
    HEADSCOPE_CUDA_CHECK(cudaEventCreate(&start));
    HEADSCOPE_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms(repeats + 1);
    for (float& run : ms) {  // the first run warms up and is dropped
        HEADSCOPE_CUDA_CHECK(cudaEventRecord(start));
        masked_softmax_kernel<<<blocks_for(rows * 32), threads>>>(att.data(), ends.data(), T, NH, 0.125f, rows);
        HEADSCOPE_CUDA_CHECK(cudaGetLastError());
        HEADSCOPE_CUDA_CHECK(cudaEventRecord(stop));
        HEADSCOPE_CUDA_CHECK(cudaEventSynchronize(stop));
        HEADSCOPE_CUDA_CHECK(cudaEventElapsedTime(&run, start, stop));
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    ms.erase(ms.begin());
    std::sort(ms.begin(), ms.end());

    int memory_khz = 0, bus_bits = 0;
    HEADSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, 0));
    HEADSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
    SoftmaxTiming timing;
    timing.median_ms = ms[ms.size() / 2];
    timing.achieved_gb_s = 2.0 * scores * sizeof(float) / (timing.median_ms * 1e-3) / 1e9;
    timing.peak_gb_s = 2.0 * memory_khz * 1e3 * (bus_bits / 8.0) / 1e9;
    return timing;
}

}  // namespace headscope
