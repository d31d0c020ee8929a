// RoPE's factors as llama.cpp's files store them (gguf_architectures.h):
// Llama 3.1's rope_freqs, and Phi-3's LongRoPE as rope_factors_short and
// rope_factors_long with the keys its converter (Phi3MiniModel) writes.
#include <cmath>

#include "gguf_architectures.h"
#include "headscope/base/ggml_types.h"

namespace headscope {

namespace {

constexpr const char* short_factors_name = "rope_factors_short.weight";
constexpr const char* long_factors_name = "rope_factors_long.weight";

}  // namespace

std::vector<float> gguf_rope_factors(const GgufSource& s, const std::string& name, uint64_t pairs) {
    const GgufTensor* tensor = s.tensor(name);
    const std::string quoted = "tensor '" + name + "'";
    if (!tensor) s.refuse(quoted + " missing");
    const GgmlTypeTraits* traits = ggml_type_traits(tensor->type);
    if (tensor->n_dims != 1 || !traits || traits->type != GgmlType::F32) s.refuse(quoted + " must be one row of F32");
    if (tensor->ne[0] != pairs)
        s.refuse(quoted + " has " + std::to_string(tensor->ne[0]) + " entries for heads of " + std::to_string(pairs) +
                 " pairs of rotary dims");
    std::vector<float> factors(static_cast<size_t>(pairs));
    widen_to_f32(DType::F32, tensor->bytes.data(), factors.size(), factors.data());
    for (float f : factors)
        if (!(f > 0) || !std::isfinite(f))
            s.refuse(quoted + " holds " + std::to_string(f) + ", not a positive divisor");
    return factors;
}

bool longrope_tensor(std::string_view name) { return name == short_factors_name || name == long_factors_name; }

// As llama.cpp reads them, where the file has either tensor: the short
// and long factors both (its phi3 graph has no rope_freqs), the switch at
// original_context_length (else the context, llama.cpp's n_ctx_orig_yarn),
// cos and sin times attn_factor (else 1: llama.cpp computes none); into the
// rope_scaling of config.json's LongRoPE, which the same reader reads.
void longrope_keys(const GgufSource& s, nlohmann::json& c, uint64_t pairs) {
    if (!s.tensor(short_factors_name) && !s.tensor(long_factors_name)) return;
    if (s.tensor("rope_freqs.weight"))
        s.refuse("tensor 'rope_freqs.weight' beside LongRoPE's factors (rope_factors_long, rope_factors_short)");
    const std::string original_key = s.key("rope.scaling.original_context_length");
    const uint64_t original = s.file().integer(original_key).value_or(c["max_position_embeddings"].get<uint64_t>());
    if (original == 0) s.refuse("key '" + original_key + "' is 0: LongRoPE's switch length must be positive");
    const std::string factor_key = s.key("rope.scaling.attn_factor");
    const double attention = s.file().number(factor_key).value_or(1);
    if (!(attention > 0) || !std::isfinite(attention))
        s.refuse("key '" + factor_key + "' is " + std::to_string(attention) + ", not a positive factor");
    c["original_max_position_embeddings"] = original;
    c["rope_scaling"] = {{"rope_type", "longrope"},
                         {"short_factor", gguf_rope_factors(s, short_factors_name, pairs)},
                         {"long_factor", gguf_rope_factors(s, long_factors_name, pairs)},
                         {"attention_factor", attention}};
}

}  // namespace headscope
