// GGUF's keys and tensor names onto Hugging Face's (gguf_checkpoint.h), for
// the architectures llama.cpp writes from the families Headscope runs: llama
// (Llama 2 and 3, SmolLM, TinyLlama, Mistral as llama.cpp writes it), qwen2
// and qwen3. Their names are llama.cpp's gguf-py constants.
#include "gguf_checkpoint.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>

#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"

namespace headscope {
namespace {

using json = nlohmann::json;

// The families by their GGUF architecture: config.json's model_type.
constexpr std::array<std::pair<const char*, const char*>, 3> architectures = {
    {{"llama", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"}}};

// llama.cpp's tensor names, without "blk.N." for a layer's, and Hugging Face's.
constexpr std::array<std::pair<const char*, const char*>, 3> model_names = {{
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
}};
constexpr std::array<std::pair<const char*, const char*>, 15> layer_names = {{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
}};
// Llama 3.1's scaled RoPE, as llama.cpp's converter stores it: each pair's divisor.
constexpr const char* rope_frequencies_name = "rope_freqs.weight";

// "blk.7.attn_q.weight" -> "model.layers.7.self_attn.q_proj.weight"; nullopt for any other name.
std::optional<std::string> hugging_face_name(std::string_view name) {
    for (const auto& [gguf, hf] : model_names)
        if (name == gguf) return hf;
    if (!name.starts_with("blk.")) return std::nullopt;
    const std::string_view rest = name.substr(4);
    const size_t dot = rest.find('.');
    int layer = -1;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + std::min(dot, rest.size()), layer);
    // "blk.07" would name layer 7 a second time: digits as llama.cpp writes them only.
    if (dot == std::string_view::npos || error != std::errc() || end != rest.data() + dot || layer < 0 ||
        (dot > 1 && rest[0] == '0'))
        return std::nullopt;
    for (const auto& [gguf, hf] : layer_names)
        if (rest.substr(dot + 1) == gguf) return "model.layers." + std::to_string(layer) + "." + hf;
    return std::nullopt;
}

class Keys {
public:
    Keys(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

    uint64_t required(const char* key) const {
        const std::optional<uint64_t> value = file_.integer(arch_ + "." + key);
        if (!value) throw Error(file_.file() + ": key '" + arch_ + "." + key + "' missing");
        return *value;
    }
    std::optional<uint64_t> integer(const char* key) const { return file_.integer(arch_ + "." + key); }
    std::optional<double> number(const char* key) const { return file_.number(arch_ + "." + key); }
    std::optional<std::string_view> string(const char* key) const { return file_.string(arch_ + "." + key); }

private:
    const GgufFile& file_;
    std::string arch_;
};

// config.json's keys from the {arch}.* keys, the tokenizer's ids and the tensors present.
json config_of(const GgufFile& file, const std::string& arch, const GgufModelFiles& files) {
    const Keys keys(file, arch);
    json c = {{"model_type",
               std::find_if(architectures.begin(), architectures.end(), [&](const auto& a) { return arch == a.first; })
                   ->second},
              {"num_hidden_layers", keys.required("block_count")},
              {"hidden_size", keys.required("embedding_length")},
              {"intermediate_size", keys.required("feed_forward_length")},
              {"num_attention_heads", keys.required("attention.head_count")},
              {"max_position_embeddings", keys.required("context_length")},
              {"rope_theta", keys.number("rope.freq_base").value_or(10000)},
              {"rms_norm_eps", keys.number("attention.layer_norm_rms_epsilon").value_or(1e-5)},
              {"tie_word_embeddings", !files.tensors.count("output.weight")},
              {"attention_bias", files.tensors.count("blk.0.attn_q.bias") > 0}};
    if (const auto kv = keys.integer("attention.head_count_kv")) c["num_key_value_heads"] = *kv;
    if (const auto head_dim = keys.integer("attention.key_length")) c["head_dim"] = *head_dim;
    if (const auto embedding = files.tensors.find("token_embd.weight"); embedding != files.tensors.end())
        c["vocab_size"] = embedding->second->ne[1];  // its rows, as config.json's vocab_size counts them
    for (const char* id : {"bos_token_id", "eos_token_id", "padding_token_id"})
        if (const auto value = file.integer(std::string("tokenizer.ggml.") + id))
            c[std::string(id) == "padding_token_id" ? "pad_token_id" : id] = *value;
    if (const auto scaling = keys.string("rope.scaling.type"); scaling && *scaling != "none")
        throw Error(file.file() + ": RoPE scaling of type '" + std::string(*scaling) + "' is not read yet");
    const uint64_t heads = c["num_attention_heads"], width = c["hidden_size"];
    const uint64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<uint64_t>() : heads ? width / heads : 0;
    if (const auto rotated = keys.integer("rope.dimension_count"); rotated && *rotated != head_dim)
        throw Error(file.file() + ": RoPE turns " + std::to_string(*rotated) + " of each head's " +
                    std::to_string(head_dim) + " dims, which is not read yet");
    return c;
}

// rope_freqs as float32: one positive divisor per pair of a head's dims.
std::vector<float> rope_divisors(const GgufFile& file, const GgufTensor& tensor) {
    const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
    if (tensor.n_dims != 1 || !traits || traits->type != GgmlType::F32)
        throw Error(file.file() + ": tensor '" + rope_frequencies_name + "' must be one row of F32");
    std::vector<float> divisors(static_cast<size_t>(tensor.ne[0]));
    widen_to_f32(DType::F32, tensor.bytes.data(), divisors.size(), divisors.data());
    for (float d : divisors)
        if (!(d > 0) || !std::isfinite(d))
            throw Error(file.file() + ": tensor '" + rope_frequencies_name + "' holds " + std::to_string(d) +
                        ", not a positive divisor");
    return divisors;
}

}  // namespace

GgufCheckpoint gguf_checkpoint(const GgufModelFiles& files) {
    const GgufFile& file = files.metadata();
    const std::optional<std::string_view> arch_name = file.string("general.architecture");
    if (!arch_name) throw Error(file.file() + ": key 'general.architecture' missing");
    const std::string arch(*arch_name);
    if (std::none_of(architectures.begin(), architectures.end(), [&](const auto& a) { return arch == a.first; }))
        throw Error(file.file() + ": GGUF files of architecture '" + arch +
                    "' are not read yet (Headscope reads llama, qwen2 and qwen3)");

    GgufCheckpoint checkpoint;
    checkpoint.config = config_of(file, arch, files);
    checkpoint.adjacent_rope_pairs = arch == "llama";
    for (const auto& [name, tensor] : files.tensors) {
        if (name == rope_frequencies_name) {
            checkpoint.rope_frequency_divisors = rope_divisors(file, *tensor);
            continue;
        }
        const std::optional<std::string> hf = hugging_face_name(name);
        if (!hf)
            throw Error(file.file() + ": tensor '" + std::string(name) + "' is not one of architecture " + arch +
                        "'s that Headscope reads");
        const GgmlTypeTraits* traits = ggml_type_traits(tensor->type);
        const std::optional<DType> dtype = traits ? dtype_of(traits->type) : std::nullopt;
        if (!dtype) {
            checkpoint.unread[*hf] = ggml_type_name(tensor->type) + " (" + std::string(name) + " in the file)";
            continue;
        }
        std::vector<int64_t> shape;  // Hugging Face's order: ne reversed
        for (uint32_t d = tensor->n_dims; d-- > 0;) shape.push_back(static_cast<int64_t>(tensor->ne[d]));
        checkpoint.tensors[*hf] = TensorView{*dtype, shape, tensor->bytes};
    }
    return checkpoint;
}

}  // namespace headscope
