// The benchmarks' synthetic checkpoints: config.json of a real model's shape
// (Llama 3.2 1B, SmolLM2-135M, Gemma 3 1B, gpt-oss-20b with a chosen number
// of layers) and random weights streamed into model.safetensors, so that the
// writer never holds a model in memory.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

namespace headscope::test {

// A Llama-family config.json: L layers, C channels, NH and NKV heads, F the MLP's, V the vocabulary.
nlohmann::json llama_config(int layers, int C, int NH, int NKV, int F, int V);
// Gemma 3 1B's config.json (google/gemma-3-1b-pt): 26 layers, C=1152, 4 heads and 1 K/V head of 256,
// F=6912, V=262144, a window of 512 on five layers in six.
nlohmann::json gemma3_1b_config();
// gpt-oss-20b's config.json with `layers` of its 24: C=2880, 64 heads and 8 K/V heads of 64,
// 32 experts of 2880 (4 a token), V=201088, a window of 128 on every other layer, YaRN.
nlohmann::json gpt_oss_20b_config(int layers);

// Writes config.json, a random BF16 model.safetensors (gpt-oss's experts as
// MXFP4 blocks and scales) and a 256-byte-token tokenizer into `dir`.
// Norm weights are 1, everything else small uniform noise.
void write_random_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config_json);

}  // namespace headscope::test
