// The CUDA backend behind a plain C++ header: callers build without nvcc.
// A build without CUDA links core/src/compute/cuda_unavailable.cpp instead, whose
// status says so.
#pragma once
#include <memory>
#include <string>

#include "headscope/compute/backend.h"

namespace headscope {

struct CudaStatus {
    bool usable = false;
    std::string reason;  // the device's name when usable, else why not
};

// Whether this build has the CUDA backend at all (a device may still be missing).
bool cuda_built_in();

// Whether a CUDA device this build can run on exists (checked once, cached).
CudaStatus cuda_status();

// The CUDA backend on device 0; throws Error when cuda_status() is not usable.
// A forward the device does not compute yet, and every forward after a CUDA
// error, runs on the CPU: its result says so (AttentionResult::computed_on), and stderr hears it once.
std::unique_ptr<Backend> make_cuda_backend();

// The fused scale + mask + softmax kernel alone, for the benchmark: the median
// time of `repeats` runs over (B, NH, T, T) scores with every key visible, the
// bandwidth that achieves (each score read once and written once), and the
// device's peak (2 x memory clock x bus width). Throws Error without a device.
struct SoftmaxTiming {
    double median_ms = 0, achieved_gb_s = 0, peak_gb_s = 0;
};
SoftmaxTiming time_cuda_softmax(int B, int NH, int T, int repeats);

}  // namespace headscope
