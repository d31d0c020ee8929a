// A GPT-2-family model loaded from a Hugging Face directory (config.json,
// model.safetensors, vocab.json, merges.txt) or a hub name in the local HF
// cache. All weights are float32, row-major, in HF's Conv1D layout: a linear
// layer's weight is (in, out) and y = x W + b.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "headscope/aligned.h"
#include "headscope/model_description.h"
#include "headscope/tokenizer.h"

namespace headscope {

struct LayerWeights {
    const float* ln_1_w;       // (C)
    const float* ln_1_b;       // (C)
    const float* attn_w;       // (C, 3C)  fused [Q | K | V] along the output axis
    const float* attn_b;       // (3C)
    const float* attn_proj_w;  // (C, C)
    const float* attn_proj_b;  // (C)
    const float* ln_2_w;       // (C)
    const float* ln_2_b;       // (C)
    const float* fc_w;         // (C, 4C)
    const float* fc_b;         // (4C)
    const float* fc_proj_w;    // (4C, C)
    const float* fc_proj_b;    // (C)
};

struct TensorInfo {
    std::string name;  // as in the file, e.g. "transformer.h.0.attn.c_attn.weight"
    std::vector<int64_t> shape;
};

// Move-only: the weight pointers point into `storage`, whose buffer a move
// hands over intact but a copy would not.
struct Model {
    Model() = default;
    Model(Model&&) = default;
    Model& operator=(Model&&) = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    std::filesystem::path path;  // the resolved directory
    Config config;
    Tokenizer tokenizer;
    std::vector<TensorInfo> tensors;  // sorted by name
    int64_t params = 0;               // number of weights (the tied output embedding counted once)

    AlignedVector<float> storage;      // every weight, one allocation
    const float* wte = nullptr;        // (V, C)
    const float* wpe = nullptr;        // (n_positions, C)
    std::vector<LayerWeights> layers;  // (L)
    const float* ln_f_w = nullptr;     // (C)
    const float* ln_f_b = nullptr;     // (C)
};

// The name of the model Headscope ships and opens by default: the directory
// $HEADSCOPE_BUILTIN_MODEL if set, else assets/builtin of the source tree.
inline constexpr const char* builtin_model = "builtin";

// `builtin_model`, a directory path, or a hub name ("gpt2",
// "openai-community/gpt2-medium") looked up in the local Hugging Face cache
// only. Throws Error when none of these.
std::filesystem::path resolve_model_path(const std::string& name_or_path);

// Throws Error naming the file, tensor or field on any problem.
// `on_progress`, if given, is called after each tensor is read with the
// fraction of the weights read so far (reaching 1), for a progress bar.
Model load_model(const std::string& name_or_path, const std::function<void(float)>& on_progress = {});

// A GPT-2-family model in the local Hugging Face cache.
struct CachedModel {
    std::string name;            // the hub name load_model takes, e.g. "openai-community/gpt2"
    std::filesystem::path path;  // the snapshot resolve_model_path picks
};

// The cache's models whose config.json says model_type "gpt2", by name.
// Unreadable entries are left out; a missing cache gives none.
std::vector<CachedModel> list_cached_models();

}  // namespace headscope
