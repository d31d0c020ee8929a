// libFuzzer harness for config.json, read through the model loader: the
// input is config.json, written beside a small valid model made once per
// process. That model is the one the seed corpus's valid configs describe:
// 1 layer, 2 heads, n_embd 8, 16 positions, zero weights, and a vocabulary
// of the 256 bytes alone (V = 256, no merges).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "fuzz_support.h"
#include "headscope/base/shape.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

// The small model, written on first use: zero weights in the shapes its config implies.
const fs::path& small_model_dir() {
    static const fs::path dir = [] {
        const fs::path dir = fuzz::scratch_dir() / "model";
        fs::create_directories(dir);
        const Config config{.n_layer = 1, .n_head = 2, .n_embd = 8, .n_positions = 16, .vocab_size = 256};
        const std::vector<TensorSpec> specs = model_tensors(config);
        int64_t largest = 0;
        for (const TensorSpec& t : specs) largest = std::max(largest, element_count(t.shape));
        const std::vector<float> zeros(static_cast<size_t>(largest));
        std::vector<SafetensorsEntry> entries;
        for (const TensorSpec& t : specs)
            entries.push_back({t.name, t.shape, {zeros.data(), static_cast<size_t>(element_count(t.shape))}});
        write_safetensors(dir / "model.safetensors", entries);
        fuzz::write_byte_vocab(dir);
        return dir;
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const fs::path& dir = small_model_dir();
    fuzz::write_file(dir / "config.json", fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] { load_model(dir.string()); });
    return 0;
}
