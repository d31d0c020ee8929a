// The GGUF architectures Headscope reads (private to core/src/model), one
// row each, as llama.cpp's converter (convert_hf_to_gguf.py) writes them:
// the family it is (config.json's model_type), the {arch}.* keys that stand
// for config.json's, the tensor names (gguf-py's) by the weight each is in
// the model description, and what the converter did besides.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/io/gguf.h"
#include "headscope/model/model_description.h"

namespace headscope {

// A GGUF model's keys and tensors, as an architecture's row reads them.
struct GgufSource {
    const GgufModelFiles& files;
    std::string arch;  // general.architecture

    const GgufFile& file() const { return files.metadata(); }
    std::string key(std::string_view name) const { return arch + "." + std::string(name); }
    const GgufTensor* tensor(std::string_view name) const;  // null when absent
    [[noreturn]] void refuse(const std::string& what) const;
};

// How many of each head's dims RoPE turns, where the Config cannot say it.
[[noreturn]] void refuse_rotated_dims(const GgufSource& s, uint64_t rotated, uint64_t head_dim);

enum class GgufKeyKind { count, number, flag };

// config.json's key `config` from the file's key {arch}.`gguf`.
struct GgufKey {
    const char* gguf;
    const char* config;
    GgufKeyKind kind = GgufKeyKind::count;
    bool required = true;  // else absent: the family's default
};

// One of llama.cpp's tensor names and the weight it is.
struct GgufName {
    const char* name;  // whole, or a layer's after its prefix and number ("attn_q.weight")
    Weight weight;
};

// The names of one stack's tensors (a decoder's or an encoder's, or one of an encoder–decoder's two).
struct GgufStackNames {
    bool encoder_of_two;            // the encoder of an encoder–decoder: its weights are encoder_config's
    std::vector<GgufName> outside;  // whole names
    const char* layer_prefix;       // "blk." (T5's "enc.blk.", "dec.blk."), then the layer's number and "."
    std::vector<GgufName> layer;
};

struct GgufArchitecture {
    std::string_view name;   // general.architecture
    const char* model_type;  // config.json's: the family it is
    std::vector<GgufKey> keys;
    std::vector<GgufStackNames> stacks;
    // config.json's keys that no {arch}.* key holds one for one (read from
    // the tensors present, or computed), and the keys' values refused.
    void (*more_keys)(const GgufSource& source, nlohmann::json& config) = nullptr;
    // Where the converter laid the tensors out otherwise than Hugging Face,
    // and where llama.cpp computes otherwise than transformers.
    void (*layout)(const GgufSource& source, Config& config) = nullptr;
};

// llama's and its kin's: the output embedding tied where the file has none,
// biases where layer 0's Q has one; RoPE over whole heads
// (llama_attention_keys), unscaled or as rope_freqs scales it.
void llama_more_keys(const GgufSource& source, nlohmann::json& config);
void llama_attention_keys(const GgufSource& source, nlohmann::json& config);

// RoPE's factors (gguf_rope.cpp). Tensor `name`, one positive divisor per
// pair of rotary dims in F32: Llama 3.1's rope_freqs, LongRoPE's short and long.
std::vector<float> gguf_rope_factors(const GgufSource& source, const std::string& name, uint64_t pairs);
// Whether `name` is one of LongRoPE's two tensors, which longrope_keys reads.
bool longrope_tensor(std::string_view name);
// Phi-3's LongRoPE where the file has its factors (for heads of `pairs`
// pairs of rotary dims), as config.json's rope_scaling and
// original_max_position_embeddings.
void longrope_keys(const GgufSource& source, nlohmann::json& config, uint64_t pairs);

// The mixtures of experts' helpers (gguf_experts.cpp).
void qwen3moe_more_keys(const GgufSource& source, nlohmann::json& config);
void olmoe_more_keys(const GgufSource& source, nlohmann::json& config);
void llama_or_mixtral_more_keys(const GgufSource& source, nlohmann::json& config);
void gpt_oss_more_keys(const GgufSource& source, nlohmann::json& config);
void gpt_oss_layout(const GgufSource& source, Config& config);

// Gemma 2's and Gemma 3's helpers (gguf_gemma.cpp).
void gemma2_more_keys(const GgufSource& source, nlohmann::json& config);
void gemma3_more_keys(const GgufSource& source, nlohmann::json& config);
void gemma2_layout(const GgufSource& source, Config& config);
void gemma3_layout(const GgufSource& source, Config& config);

// The row of architecture `name`; null for one Headscope does not read.
const GgufArchitecture* gguf_architecture(std::string_view name);
// Their names, for messages: "llama, qwen2, ... and t5".
std::string gguf_architecture_names();

}  // namespace headscope
