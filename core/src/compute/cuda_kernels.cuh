// The CUDA backend's device side (cuda_backend.cu includes it, once): the one
// check every CUDA and cuBLAS call goes through, DeviceBuffer (the one owner
// of device memory), and the kernels of the forward: embedding, bias, GELU,
// LayerNorm and the fused scale + mask + softmax.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "cublas_library.cuh"
#include "headscope/base/error.h"

namespace headscope {
namespace {

// A failed CUDA or cuBLAS call: forward falls back to the CPU on it.
struct CudaError : Error {
    using Error::Error;
};

void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) throw CudaError(std::string(call) + ": " + cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* call) {
    if (status != CUBLAS_STATUS_SUCCESS) throw CudaError(std::string(call) + ": " + cublas().status_string(status));
}
// Every CUDA and cuBLAS call goes through this.
#define HEADSCOPE_CUDA_CHECK(call) check((call), #call)

// Device memory for `size()` elements of T, grown (never shrunk) by reserve;
// growing drops the contents.
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { cudaFree(data_); }

    void reserve(size_t n) {
        if (n <= size_) return;
        cudaFree(data_);
        data_ = nullptr;
        size_ = 0;
        HEADSCOPE_CUDA_CHECK(cudaMalloc(&data_, n * sizeof(T)));
        size_ = n;
    }
    void upload(const T* host, size_t n) {
        reserve(n);
        HEADSCOPE_CUDA_CHECK(cudaMemcpy(data_, host, n * sizeof(T), cudaMemcpyHostToDevice));
    }
    T* data() const { return data_; }

private:
    T* data_ = nullptr;
    size_t size_ = 0;
};

constexpr int threads = 256;

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + threads - 1) / threads); }

__device__ size_t global_index() { return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

// x (B*T, C) = wte[ids] + wpe[t]; ids are already padded.
__global__ void embed_kernel(const int32_t* ids, const float* wte, const float* wpe, float* x, int T, int C, size_t n) {
    const size_t i = global_index();
    if (i >= n) return;
    const size_t row = i / C;
    const int c = static_cast<int>(i % C), t = static_cast<int>(row % T);
    x[i] = wte[static_cast<size_t>(ids[row]) * C + c] + wpe[static_cast<size_t>(t) * C + c];
}

// out (n / N, N) += bias (N) on every row.
__global__ void add_bias_kernel(float* out, const float* bias, int N, size_t n) {
    const size_t i = global_index();
    if (i < n) out[i] += bias[i % N];
}

// GELU, tanh approximation, in place (as ops::gelu).
__global__ void gelu_kernel(float* x, size_t n) {
    const size_t i = global_index();
    if (i >= n) return;
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    const float v = x[i];
    x[i] = 0.5f * v * (1.f + tanhf(k * (v + 0.044715f * v * v * v)));
}

__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// The sum of `v` over the block, returned to every thread; `partial` holds one float per warp.
__device__ float block_sum(float v, float* partial) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();  // a previous call's readers are done with `partial`
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? partial[lane] : 0.f);
}

// One block per row of C: out = LayerNorm(x), GPT-2's biased variance, two passes as ops::layer_norm.
__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float* out, int C, float eps) {
    __shared__ float partial[32];
    const float* xr = x + static_cast<size_t>(blockIdx.x) * C;
    float* yr = out + static_cast<size_t>(blockIdx.x) * C;
    float sum = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) sum += xr[c];
    const float mean = block_sum(sum, partial) / C;
    float squares = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) squares += (xr[c] - mean) * (xr[c] - mean);
    const float inv_std = 1.f / sqrtf(block_sum(squares, partial) / C + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) yr[c] = (xr[c] - mean) * inv_std * w[c] + b[c];
}

// One warp per score row (b, h, i) of att (B, NH, T, T), in place: the first
// ends[b, i] entries become softmax(scale * row), the rest 0. A row with
// end 0 (fully masked) becomes all zeros, never NaN.
__global__ void masked_softmax_kernel(float* att, const int* ends, int T, int NH, float scale, size_t rows) {
    const size_t row = global_index() / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp: blockDim is a multiple of 32
    const int i = static_cast<int>(row % T);
    const size_t b = row / T / NH;
    const int end = ends[b * T + i];
    float* r = att + row * T;

    float largest = -INFINITY;
    for (int j = lane; j < end; j += 32) largest = fmaxf(largest, r[j] * scale);
    largest = warp_max(largest);
    float sum = 0;
    for (int j = lane; j < end; j += 32) sum += expf(r[j] * scale - largest);
    sum = warp_sum(sum);
    for (int j = lane; j < T; j += 32) r[j] = j < end ? expf(r[j] * scale - largest) / sum : 0.f;
}

}  // namespace
}  // namespace headscope
