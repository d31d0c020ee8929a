// libFuzzer harness for Ollama's manifests, read through resolve_model_path:
// the input is the manifest of "fuzz:latest" in a store made once per process
// (its $OLLAMA_MODELS) that holds one blob, sha256-aaa...a, the 24 bytes of
// an empty GGUF file. The seed corpus's valid manifest names it. Beyond
// success or a one-line Error: a name that resolves gives a file in blobs/,
// named by a sha256 digest.
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "headscope/model/model.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

const fs::path& ollama_store() {
    static const fs::path store = [] {
        const fs::path store = fuzz::scratch_dir() / "ollama";
        fs::create_directories(store / "manifests" / "registry.ollama.ai" / "library" / "fuzz");
        fs::create_directories(store / "blobs");
        // "GGUF", version 3, no tensors, no metadata.
        const std::string empty_gguf = std::string("GGUF\x03\0\0\0", 8) + std::string(16, '\0');
        fuzz::write_file(store / "blobs" / ("sha256-" + std::string(64, 'a')), empty_gguf);
        return store;
    }();
    return store;
}

bool is_blob_name(const std::string& name) {
    return name.size() == 7 + 64 && name.starts_with("sha256-") &&
           name.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const fs::path& store = ollama_store();
    setenv("OLLAMA_MODELS", store.c_str(), 1);
    fuzz::write_file(store / "manifests" / "registry.ollama.ai" / "library" / "fuzz" / "latest",
                     fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] {
        const fs::path blob = resolve_model_path("fuzz:latest");
        if (blob.parent_path() != store / "blobs" || !is_blob_name(blob.filename().string()))
            fuzz::fail("a manifest resolved outside the store's blobs: " + blob.string());
    });
    return 0;
}
