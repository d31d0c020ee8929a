// A GGUF model as the loader reads a Hugging Face checkpoint (private to
// core/src/model): its config as config.json would say it, from the file's
// {arch}.* keys, and its tensors under Hugging Face's names and shapes, from
// llama.cpp's names (token_embd, blk.N.attn_q, ...), still in the file.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/io/gguf.h"
#include "headscope/io/safetensors.h"

namespace headscope {

struct GgufCheckpoint {
    nlohmann::json config;                      // config.json's keys (model_type, hidden_size, ...)
    std::map<std::string, TensorView> tensors;  // by Hugging Face's name, shaped as its files shape them
    std::map<std::string, std::string> unread;  // a tensor of a type Headscope does not read: its type's name
    // llama.cpp's converter reorders each head's rows of Q and K in files of
    // the llama architecture, so that RoPE pairs adjacent dims there.
    bool adjacent_rope_pairs = false;
    std::vector<float> rope_frequency_divisors;  // Rope's frequency_divisors (rope_freqs), if the file has them
};

// Throws Error "<file>: <what>" for an architecture Headscope does not read,
// a key it needs missing, or a tensor named outside llama.cpp's scheme.
GgufCheckpoint gguf_checkpoint(const GgufModelFiles& files);

}  // namespace headscope
