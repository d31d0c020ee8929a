// The one place that picks a backend and says why (CLI and window).
#include <string>

#include "headscope/backend.h"
#include "headscope/cuda_backend.h"
#include "headscope/error.h"

namespace headscope {

BackendChoice parse_backend_choice(std::string_view word) { return parse_choice(backend_choices, word); }

const char* to_string(BackendChoice choice) { return word_of(backend_choices, choice); }

BackendPick make_backend(BackendChoice choice) {
    if (choice == BackendChoice::cpu) return {make_cpu_backend(), "cpu chosen"};
    const CudaStatus cuda = cuda_status();
    if (!cuda.usable) {
        if (choice == BackendChoice::cuda) throw Error("the CUDA backend is not usable: " + cuda.reason);
        return {make_cpu_backend(), cuda.reason};
    }
    try {
        return {make_cuda_backend(), cuda.reason};
    } catch (const Error& e) {  // a device that cannot start (out of memory, cuBLAS failing)
        if (choice == BackendChoice::cuda) throw;
        return {make_cpu_backend(), std::string("CUDA failed: ") + e.what()};
    }
}

}  // namespace headscope
