// cuBLAS, opened when a CUDA backend starts rather than when the program
// does (cuda_backend.cu includes it, once): linked, its cuBLASLt (540 MB,
// 360,000 relocations) cost every start of the window and the CLI 0.17 s and
// 210 MB of memory, with a GPU or without one.
#pragma once
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "headscope/base/error.h"

namespace headscope {
namespace {

// The cuBLAS calls the backend makes, found in the library once opened.
struct Cublas {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSgemm_v2) sgemm;
    decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
    decltype(&cublasGetStatusString) status_string;
};

// Opens HEADSCOPE_CUBLAS (the soname this build compiled against) where the
// system finds libraries, then in the toolkit's directory; throws Error
// naming the library and why when neither opens or a call is missing.
Cublas open_cublas() {
    void* library = dlopen(HEADSCOPE_CUBLAS, RTLD_NOW | RTLD_LOCAL);
    if (!library) library = dlopen(HEADSCOPE_CUBLAS_DIR "/" HEADSCOPE_CUBLAS, RTLD_NOW | RTLD_LOCAL);
    if (!library) throw Error(std::string("cuBLAS (" HEADSCOPE_CUBLAS ") could not be opened: ") + dlerror());
    const auto find = [library](auto& call, const char* name) {
        call = reinterpret_cast<std::remove_reference_t<decltype(call)>>(dlsym(library, name));
        if (!call) throw Error(std::string("cuBLAS (" HEADSCOPE_CUBLAS ") lacks ") + name);
    };
    Cublas cublas{};
    find(cublas.create, "cublasCreate_v2");
    find(cublas.destroy, "cublasDestroy_v2");
    find(cublas.set_math_mode, "cublasSetMathMode");
    find(cublas.sgemm, "cublasSgemm_v2");
    find(cublas.sgemm_strided_batched, "cublasSgemmStridedBatched");
    find(cublas.status_string, "cublasGetStatusString");
    return cublas;  // the library stays open for the program's life
}

// The library, opened on the first call (a failed open is tried again on the next).
const Cublas& cublas() {
    static const Cublas opened = open_cublas();
    return opened;
}

}  // namespace
}  // namespace headscope
