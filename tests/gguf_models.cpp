// Test support: GGUF files of today's llama-architecture families (gguf_models.h).
#include "gguf_models.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>

#include "ggml_blocks_reference.h"
#include "headscope/base/ggml_types.h"

namespace headscope::test {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string byte_token(int byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
    int code = byte;
    if (!printable) {
        code = 256;
        for (int b = 0; b < byte; ++b)
            if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) ++code;
    }
    std::string s;
    if (code < 0x80) {
        s += static_cast<char>(code);
    } else {
        s += static_cast<char>(0xC0 | (code >> 6));
        s += static_cast<char>(0x80 | (code & 0x3F));
    }
    return s;
}

namespace {

// llama.cpp's names for Hugging Face's (gguf-py's TENSOR_NAMES for LLAMA).
std::string gguf_name(const std::string& hf) {
    static const std::map<std::string, std::string> model = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                             {"model.norm.weight", "output_norm.weight"},
                                                             {"lm_head.weight", "output.weight"}};
    static const std::map<std::string, std::string> layer = {
        {"input_layernorm.weight", "attn_norm"},           {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},          {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.k_proj.bias", "attn_k.bias"},          {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.v_proj.bias", "attn_v.bias"},          {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.o_proj.bias", "attn_output.bias"},     {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},       {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"}};
    if (const auto it = model.find(hf); it != model.end()) return it->second;
    const size_t layer_end = hf.find('.', std::string("model.layers.").size());
    const std::string rest = hf.substr(layer_end + 1), n = hf.substr(13, layer_end - 13);
    const std::string name = layer.at(rest);
    return "blk." + n + "." + (name == "attn_norm" ? "attn_norm.weight" : name);
}

// The Hugging Face row of GGUF row r of a llama Q or K (heads of hs): the
// converter's permute puts each head's rotate-half pair (i, i + hs/2) at
// rows (2i, 2i + 1).
int64_t hugging_face_row(int64_t r, int64_t hs) {
    const int64_t head = r / hs, within = r % hs;
    return head * hs + (within % 2) * (hs / 2) + within / 2;
}

}  // namespace

Block block_of_spread(GgmlType type, double spread, std::mt19937& rng) {
    Block block = random_block(type, rng);
    const auto set_half = [&](size_t at, double value) {
        const uint16_t bits = exact_half(std::ldexp(1.0, static_cast<int>(std::floor(std::log2(value)))));
        std::memcpy(block.data() + at, &bits, 2);
    };
    switch (type) {
        case GgmlType::Q8_0: set_half(0, spread / 73); break;   // codes -128..127
        case GgmlType::Q4_0: set_half(0, spread / 4.6); break;  // codes -8..7
        case GgmlType::Q4_K:  // d * scale * q - dmin * min, 6-bit scales and minima, 4-bit codes
            set_half(0, spread / 166);
            set_half(2, spread / 22);
            break;
        case GgmlType::Q6_K: set_half(208, spread / 1370); break;  // d * scale * (q - 32), int8 scales
        default: throw std::invalid_argument("gguf_models: no spread rule for this type");
    }
    return block;
}

namespace {

struct Written {
    GgufTensorSpec spec;
    std::vector<float> values;  // as the file holds them, in Hugging Face's row order
};

// Tensor `t` as the file stores it, and its values as read back.
Written tensor_as_stored(const NamedTensor& t, const FamilySpec& spec, DType matrices, std::mt19937& rng) {
    const bool matrix = t.shape.size() == 2;
    const int64_t rows = matrix ? t.shape[0] : 1, cols = t.shape.back();
    const bool reordered = spec.family == Family::llama &&
                           (t.name.find("q_proj") != std::string::npos || t.name.find("k_proj") != std::string::npos);
    const auto hf_row = [&](int64_t r) { return reordered ? hugging_face_row(r, spec.head_dim) : r; };
    Written w{{gguf_name(t.name), {}, 0, ""}, t.values};
    w.spec.ne = matrix ? std::vector<uint64_t>{uint64_t(cols), uint64_t(rows)} : std::vector<uint64_t>{uint64_t(cols)};
    const DType type = matrix ? matrices : DType::F32;
    w.spec.type = static_cast<uint32_t>(ggml_type(type));
    if (!matrix) {  // a vector in F32; a llama Q or K bias reordered as the rows are
        for (int64_t r = 0; r < cols; ++r) {
            const float v = t.values[static_cast<size_t>(reordered ? hugging_face_row(r, spec.head_dim) : r)];
            w.spec.data.append(reinterpret_cast<const char*>(&v), sizeof v);
        }
        return w;
    }
    double sum = 0, squares = 0;
    for (float v : t.values) sum += v, squares += double(v) * v;
    const double n = double(t.values.size()), spread = std::sqrt(std::max(squares / n - (sum / n) * (sum / n), 1e-12));
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t from = hf_row(r);
        if (type == DType::F32) {
            w.spec.data.append(reinterpret_cast<const char*>(t.values.data() + from * cols), cols * sizeof(float));
            continue;
        }
        const GgmlType ggml = ggml_type(type);
        const int64_t per_block = ggml_type_traits(ggml).block_elements;
        for (int64_t b = 0; b < cols / per_block; ++b) {
            const Block block = block_of_spread(ggml, spread, rng);
            w.spec.data.append(reinterpret_cast<const char*>(block.data()), block.size());
            const std::vector<double> values = reference_values(ggml, block);
            for (int64_t i = 0; i < per_block; ++i) w.values[from * cols + b * per_block + i] = float(values[i]);
        }
    }
    return w;
}

}  // namespace

FamilySpec gguf_family_spec(Family family) {
    FamilySpec s = family_spec(family);
    s.n_layer = 2, s.n_embd = 256, s.n_head = 8, s.n_kv_head = 2, s.head_dim = 32, s.mlp_dim = 512;
    s.vocab_size = 259, s.bos_id = 257, s.eos_ids = {258}, s.pad_token_id = -1, s.max_positions = 64;
    if (family == Family::llama) s.rope_theta = 500000;
    return s;
}

FamilyCheckpoint write_gguf_family(const fs::path& file, const FamilySpec& spec, DType matrices,
                                   const std::function<void(GgufSpec&)>& edit) {
    FamilyCheckpoint checkpoint = make_family_checkpoint(spec);
    const std::string arch = model_type(spec.family);
    GgufSpec gguf;
    const auto key = [&](const std::string& name, GgufMetaValue value) {
        gguf.metadata.emplace_back(name, std::move(value));
    };
    key("general.architecture", gguf_string(arch));
    // llama.cpp's file type of a file of these matrices (its llama_ftype): F32, Q8_0, Q4_K_S, Q6_K.
    const uint32_t file_type = matrices == DType::F32    ? 0
                               : matrices == DType::Q8_0 ? 7
                               : matrices == DType::Q4_K ? 14
                                                         : 18;
    key("general.file_type", gguf_uint32(file_type));
    key(arch + ".block_count", gguf_uint32(uint32_t(spec.n_layer)));
    key(arch + ".context_length", gguf_uint32(uint32_t(spec.max_positions)));
    key(arch + ".embedding_length", gguf_uint32(uint32_t(spec.n_embd)));
    key(arch + ".feed_forward_length", gguf_uint32(uint32_t(spec.mlp_dim)));
    key(arch + ".attention.head_count", gguf_uint32(uint32_t(spec.n_head)));
    key(arch + ".attention.head_count_kv", gguf_uint32(uint32_t(spec.n_kv_head)));
    key(arch + ".attention.key_length", gguf_uint32(uint32_t(spec.head_dim)));
    key(arch + ".rope.dimension_count", gguf_uint32(uint32_t(spec.head_dim)));
    key(arch + ".rope.freq_base", gguf_float32(float(spec.rope_theta)));
    key(arch + ".attention.layer_norm_rms_epsilon", gguf_float32(float(spec.norm_eps)));
    std::vector<std::string> tokens;
    std::vector<GgufMetaValue> types;
    for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b)), types.push_back(gguf_int32(1));
    tokens.push_back(byte_token(' ') + "t"), types.push_back(gguf_int32(1));
    for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>"})
        tokens.push_back(special), types.push_back(gguf_int32(3));
    key("tokenizer.ggml.model", gguf_string("gpt2"));
    key("tokenizer.ggml.pre", gguf_string(spec.family == Family::llama ? "llama-bpe" : "qwen2"));
    key("tokenizer.ggml.tokens", gguf_strings(tokens));
    key("tokenizer.ggml.token_type", gguf_array(5, types));
    key("tokenizer.ggml.merges", gguf_strings({byte_token(' ') + " t"}));
    key("tokenizer.ggml.bos_token_id", gguf_uint32(uint32_t(spec.bos_id)));
    key("tokenizer.ggml.eos_token_id", gguf_uint32(uint32_t(spec.eos_ids.at(0))));

    std::mt19937 rng(static_cast<unsigned>(spec.seed));
    for (NamedTensor& t : checkpoint.tensors) {
        Written w = tensor_as_stored(t, spec, matrices, rng);
        gguf.tensors.push_back(std::move(w.spec));
        t.values = std::move(w.values);
    }
    if (edit) edit(gguf);
    write_gguf(file, gguf);
    return checkpoint;
}

}  // namespace headscope::test
