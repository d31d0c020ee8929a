// The CUDA backend's device side (cuda_backend.cu includes it, once): the one
// check every CUDA and cuBLAS call goes through, DeviceBuffer (the one owner
// of device memory), and the reductions the kernels share
// (cuda_layer_kernels.cuh has the kernels).
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

}  // namespace
}  // namespace headscope
