// libFuzzer harness for the GGUF model reader: the input is a whole .gguf
// file, which load_model opens as a model, mapping its architecture's keys
// and tensors onto the model description (core/src/model/
// gguf_architectures.cpp, gguf_rope.cpp, gguf_checkpoint.cpp, gguf_gemma.cpp,
// gguf_experts.cpp) and reading its tokenizer. A model it opens runs a
// forward of a short text with the model's own mask, scale and window and
// its top 5 next tokens where it predicts, as the CLI's attention does: what the reader
// accepts must compute, or be refused in one line. Its seeds are a small
// file of each architecture Headscope reads, written by the tests' writer
// (GgufFuzzSeeds in test_gguf_models writes them and checks each opens).
#include "fuzz_support.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/text_batch.h"
#include "headscope/model/model.h"

using namespace headscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir() / "model.gguf";
    fuzz::write_file(path, fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] {
        const Model model = load_model(path.string());
        const Batch batch = text_batch(model, {{"It was soft."}}).batch;
        AttentionOptions options;
        options.causal = model.config.causal;
        options.scale = own_scale(model.config.scaled_scores);
        options.sliding_window = model.config.sliding_window;
        options.top_k = model.config.predicts() ? 5 : 0;  // a bare encoder (BERT as converted) gives maps alone
        const std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(model);
        AttentionResult result;
        backend->forward(batch, options, result);
    });
    return 0;
}
