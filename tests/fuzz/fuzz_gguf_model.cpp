// libFuzzer harness for the GGUF model reader: the input is a whole .gguf
// file, which load_model opens as a model, mapping its architecture's keys
// and tensors onto the model description (core/src/model/
// gguf_architectures.cpp, gguf_rope.cpp, gguf_checkpoint.cpp, gguf_gemma.cpp,
// gguf_experts.cpp) and reading its tokenizer. Its seeds are a small file of
// each architecture Headscope reads, written by the tests' writer
// (GgufFuzzSeeds in test_gguf_models writes them and checks each loads).
#include "fuzz_support.h"
#include "headscope/model/model.h"

using namespace headscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir() / "model.gguf";
    fuzz::write_file(path, fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] { load_model(path.string()); });
    return 0;
}
