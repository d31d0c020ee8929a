// The CUDA entry points of a build without CUDA.
#include "headscope/base/error.h"
#include "headscope/compute/cuda_backend.h"

namespace headscope {

bool cuda_built_in() { return false; }

CudaStatus cuda_status() { return {false, "built without CUDA"}; }

std::unique_ptr<Backend> make_cuda_backend() { throw Error("built without CUDA"); }

SoftmaxTiming time_cuda_softmax(int, int, int, int) { throw Error("built without CUDA"); }

}  // namespace headscope
