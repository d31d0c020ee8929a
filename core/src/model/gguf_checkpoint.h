// A GGUF model as the loader reads a Hugging Face checkpoint (private to
// core/src/model): its Config, from the file's {arch}.* keys read as the
// config.json keys they stand for, and its tensors under Hugging Face's names
// and shapes, from llama.cpp's names (token_embd, blk.N.attn_q, ...), each
// shape checked against the Config, the data still in the file (a layer's
// experts' 3-D tensor as one tensor an expert, each its slice). Each
// architecture is a row of gguf_architectures.h.
#pragma once
#include <map>
#include <string>

#include "headscope/io/gguf.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model_description.h"

namespace headscope {

struct GgufCheckpoint {
    Config config;
    std::map<std::string, TensorView> tensors;  // by Hugging Face's name, shaped as its files shape them
    std::map<std::string, std::string> unread;  // a tensor of a type Headscope does not read: its type's name
};

// Throws Error "<file>: <what>" for an architecture Headscope does not read,
// a key it needs missing, or a tensor named outside the architecture's
// scheme or shaped otherwise than the keys imply.
GgufCheckpoint gguf_checkpoint(const GgufModelFiles& files);

}  // namespace headscope
