// The CUDA backend: the layer loop (layer_ops.h) on the device, in FP32
// (no TF32) so that its maps match the CPU's (cuda_forward.cuh,
// cuda_layer_run.cuh); what the device does not compute yet runs on the
// CPU, the result naming why (AttentionResult::computed_on), as does every
// forward after a CUDA error.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cuda_layer_run.cuh"
#include "headscope/base/error.h"
#include "headscope/compute/cuda_backend.h"
#include "headscope/compute/forward.h"

namespace headscope {
namespace {

class CudaBackend final : public Backend {
public:
    CudaBackend() {
        HEADSCOPE_CUDA_CHECK(cublas().create(&cublas_));
        // FP32 products as on the CPU: the default math mode never uses TF32 tensor cores.
        HEADSCOPE_CUDA_CHECK(cublas().set_math_mode(cublas_, CUBLAS_DEFAULT_MATH));
        device_ = std::make_unique<DeviceForward>(cublas_);
    }
    ~CudaBackend() override {
        device_.reset();  // its buffers before the handle
        cublas().destroy(cublas_);
    }

    std::string name() const override { return "cuda"; }

    void load_weights(const Model& model) override {
        model_ = &model;
        cpu_->load_weights(model);
        load_refusal_.clear();
        try {
            load_refusal_ = device_->load(model);  // forward says so and runs on the CPU
        } catch (const CudaError& e) {
            fall_back(e);
        }
    }

    // The device computes every row and keeps no prefix cache yet: `cache` is emptied (backend.h).
    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result, PrefixCache* cache,
                 const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        validate_forward(*model_, batch, options);
        const std::string cpu_only = load_refusal_.empty() ? device_forward_refusal(*model_, options) : load_refusal_;
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
                device_->run(batch, options, result, progress);
                if (cache) cache->clear();
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
    // The window and CLI keep running on the CPU after a CUDA failure, saying so once.
    void fall_back(const CudaError& e) {
        std::fprintf(stderr, "headscope: CUDA error (%s); computing on the CPU from now on\n", e.what());
        on_cpu_ = true;
        failure_ = std::string("a CUDA error (") + e.what() + ") moved every forward to the CPU";
    }

    const Model* model_ = nullptr;
    std::unique_ptr<Backend> cpu_ = make_cpu_backend();  // what the device does not compute, and all after an error
    bool on_cpu_ = false;
    std::string failure_;  // the CUDA error that set on_cpu_
    cublasHandle_t cublas_ = nullptr;
    std::unique_ptr<DeviceForward> device_;
    std::string load_refusal_;   // why the device cannot hold this model's weights; "" when it can
    std::string said_cpu_only_;  // the last reason given for computing on the CPU
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
    const std::vector<int> first_key(static_cast<size_t>(B) * T, 0), every_key(first_key.size(), T);
    DeviceBuffer<int> begins, ends;
    begins.upload(first_key.data(), first_key.size());
    ends.upload(every_key.data(), every_key.size());

    cudaEvent_t start, stop;
    HEADSCOPE_CUDA_CHECK(cudaEventCreate(&start));
    HEADSCOPE_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms(repeats + 1);
    for (float& run : ms) {  // the first run warms up and is dropped
        HEADSCOPE_CUDA_CHECK(cudaEventRecord(start));
        score_softmax_kernel<<<blocks_for(rows * 32), threads>>>(att.data(), begins.data(), ends.data(), T, NH, 0.125f,
                                                                 0.f, nullptr, rows);
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
