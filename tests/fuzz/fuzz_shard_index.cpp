// libFuzzer harness for model.safetensors.index.json, read through the model
// loader: the input is the index, written beside two valid shards of a small
// Llama-layout model made once per process (1 layer, C 8, 2 query heads
// sharing 1 key/value head, V 256, zero weights): shard 1 holds the
// embedding and the final norm, shard 2 the layer. The seed corpus's valid
// index names them so; the fuzzer varies names, files and structure.
#include <vector>

#include "fuzz_support.h"
#include "headscope/base/shape.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

const char* const config_json = R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 8,
 "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16, "max_position_embeddings": 16,
 "vocab_size": 256, "tie_word_embeddings": true, "eos_token_id": 0})";

const fs::path& sharded_model_dir() {
    static const fs::path dir = [] {
        const fs::path dir = fuzz::scratch_dir() / "sharded";
        fs::create_directories(dir);
        fuzz::write_file(dir / "config.json", config_json);
        const std::vector<TensorSpec> specs =
            model_tensors(config_from_json(nlohmann::ordered_json::parse(config_json), "config.json"));
        const std::vector<float> zeros(256 * 8);
        std::vector<SafetensorsEntry> first, second;
        for (const TensorSpec& t : specs)
            (t.layer < 0 ? first : second)
                .push_back({t.name, t.shape, {zeros.data(), static_cast<size_t>(element_count(t.shape))}});
        write_safetensors(dir / "model-00001-of-00002.safetensors", first);
        write_safetensors(dir / "model-00002-of-00002.safetensors", second);
        fuzz::write_byte_vocab(dir);
        return dir;
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const fs::path& dir = sharded_model_dir();
    fuzz::write_file(dir / "model.safetensors.index.json", fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] { load_model(dir.string()); });
    return 0;
}
