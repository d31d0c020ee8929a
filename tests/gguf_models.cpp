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

namespace fs = std::filesystem;

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

// Each family's Hugging Face names and llama.cpp's for its tensors.
const NameTable llama_names = {"model.layers.",
                               "blk.",
                               {{"model.embed_tokens.weight", "token_embd.weight"},
                                {"model.norm.weight", "output_norm.weight"},
                                {"lm_head.weight", "output.weight"}},
                               {{"input_layernorm.weight", "attn_norm.weight"},
                                {"self_attn.q_proj.weight", "attn_q.weight"},
                                {"self_attn.q_proj.bias", "attn_q.bias"},
                                {"self_attn.k_proj.weight", "attn_k.weight"},
                                {"self_attn.k_proj.bias", "attn_k.bias"},
                                {"self_attn.v_proj.weight", "attn_v.weight"},
                                {"self_attn.v_proj.bias", "attn_v.bias"},
                                {"self_attn.o_proj.weight", "attn_output.weight"},
                                {"self_attn.o_proj.bias", "attn_output.bias"},
                                {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                                {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                                {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                {"mlp.up_proj.weight", "ffn_up.weight"},
                                {"mlp.down_proj.weight", "ffn_down.weight"}}};
const NameTable gpt_neox_names = {"gpt_neox.layers.",
                                  "blk.",
                                  {{"gpt_neox.embed_in.weight", "token_embd.weight"},
                                   {"gpt_neox.final_layer_norm.weight", "output_norm.weight"},
                                   {"gpt_neox.final_layer_norm.bias", "output_norm.bias"},
                                   {"embed_out.weight", "output.weight"}},
                                  {{"input_layernorm.weight", "attn_norm.weight"},
                                   {"input_layernorm.bias", "attn_norm.bias"},
                                   {"attention.query_key_value.weight", "attn_qkv.weight"},
                                   {"attention.query_key_value.bias", "attn_qkv.bias"},
                                   {"attention.dense.weight", "attn_output.weight"},
                                   {"attention.dense.bias", "attn_output.bias"},
                                   {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                   {"post_attention_layernorm.bias", "ffn_norm.bias"},
                                   {"mlp.dense_h_to_4h.weight", "ffn_up.weight"},
                                   {"mlp.dense_h_to_4h.bias", "ffn_up.bias"},
                                   {"mlp.dense_4h_to_h.weight", "ffn_down.weight"},
                                   {"mlp.dense_4h_to_h.bias", "ffn_down.bias"}}};
const NameTable gpt2_names = {"h.",
                              "blk.",
                              {{"wte.weight", "token_embd.weight"},
                               {"wpe.weight", "position_embd.weight"},
                               {"ln_f.weight", "output_norm.weight"},
                               {"ln_f.bias", "output_norm.bias"},
                               {"lm_head.weight", "output.weight"}},
                              {{"ln_1.weight", "attn_norm.weight"},
                               {"ln_1.bias", "attn_norm.bias"},
                               {"attn.c_attn.weight", "attn_qkv.weight"},
                               {"attn.c_attn.bias", "attn_qkv.bias"},
                               {"attn.c_proj.weight", "attn_output.weight"},
                               {"attn.c_proj.bias", "attn_output.bias"},
                               {"ln_2.weight", "ffn_norm.weight"},
                               {"ln_2.bias", "ffn_norm.bias"},
                               {"mlp.c_fc.weight", "ffn_up.weight"},
                               {"mlp.c_fc.bias", "ffn_up.bias"},
                               {"mlp.c_proj.weight", "ffn_down.weight"},
                               {"mlp.c_proj.bias", "ffn_down.bias"}}};
const NameTable olmo2_names = {"model.layers.",
                               "blk.",
                               llama_names.outside,
                               {{"self_attn.q_proj.weight", "attn_q.weight"},
                                {"self_attn.k_proj.weight", "attn_k.weight"},
                                {"self_attn.v_proj.weight", "attn_v.weight"},
                                {"self_attn.o_proj.weight", "attn_output.weight"},
                                {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                                {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                                {"post_attention_layernorm.weight", "post_attention_norm.weight"},
                                {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                {"mlp.up_proj.weight", "ffn_up.weight"},
                                {"mlp.down_proj.weight", "ffn_down.weight"},
                                {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}}};
const NameTable phi3_names = {"model.layers.",
                              "blk.",
                              llama_names.outside,
                              {{"input_layernorm.weight", "attn_norm.weight"},
                               {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
                               {"self_attn.o_proj.weight", "attn_output.weight"},
                               {"post_attention_layernorm.weight", "ffn_norm.weight"},
                               {"mlp.gate_up_proj.weight", "ffn_up.weight"},
                               {"mlp.down_proj.weight", "ffn_down.weight"}}};
const NameTable gemma_names = {"model.layers.",
                               "blk.",
                               llama_names.outside,
                               {{"input_layernorm.weight", "attn_norm.weight"},
                                {"self_attn.q_proj.weight", "attn_q.weight"},
                                {"self_attn.k_proj.weight", "attn_k.weight"},
                                {"self_attn.v_proj.weight", "attn_v.weight"},
                                {"self_attn.o_proj.weight", "attn_output.weight"},
                                {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                                {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                                {"post_attention_layernorm.weight", "post_attention_norm.weight"},
                                {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                                {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                {"mlp.up_proj.weight", "ffn_up.weight"},
                                {"mlp.down_proj.weight", "ffn_down.weight"},
                                {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}}};

// gpt-oss's: llama's attention with its output's bias and each head's sink;
// the norm before the MLP post_attention_norm (its experts: gguf_moe_models.cpp).
const NameTable gpt_oss_names = {"model.layers.",
                                 "blk.",
                                 llama_names.outside,
                                 {{"input_layernorm.weight", "attn_norm.weight"},
                                  {"self_attn.q_proj.weight", "attn_q.weight"},
                                  {"self_attn.q_proj.bias", "attn_q.bias"},
                                  {"self_attn.k_proj.weight", "attn_k.weight"},
                                  {"self_attn.k_proj.bias", "attn_k.bias"},
                                  {"self_attn.v_proj.weight", "attn_v.weight"},
                                  {"self_attn.v_proj.bias", "attn_v.bias"},
                                  {"self_attn.o_proj.weight", "attn_output.weight"},
                                  {"self_attn.o_proj.bias", "attn_output.bias"},
                                  {"self_attn.sinks", "attn_sinks.weight"},
                                  {"post_attention_layernorm.weight", "post_attention_norm.weight"}}};

const NameTable& name_table(Family family) {
    switch (family) {
        case Family::gemma2:
        case Family::gemma3_text: return gemma_names;
        case Family::gpt_neox: return gpt_neox_names;
        case Family::gpt2: return gpt2_names;
        case Family::olmo2: return olmo2_names;
        case Family::phi3: return phi3_names;
        case Family::gpt_oss: return gpt_oss_names;
        default: return llama_names;
    }
}

// The Hugging Face row of GGUF row r of a llama Q or K (heads of hs): the
// converter's permute puts each head's rotate-half pair (i, i + hs/2) at
// rows (2i, 2i + 1).
int64_t hugging_face_row(int64_t r, int64_t hs) {
    const int64_t head = r / hs, within = r % hs;
    return head * hs + (within % 2) * (hs / 2) + within / 2;
}

// The Hugging Face row of GGUF row r of GPT-NeoX's query_key_value (NH heads
// of hs): the converter gathers its per-head [q k v] rows into [Q | K | V].
int64_t neox_row(int64_t r, int64_t NH, int64_t hs) {
    const int64_t part = r / (NH * hs), head = r % (NH * hs) / hs, d = r % hs;
    return (head * 3 + part) * hs + d;
}

// The half holding 2^exponent. exact_half searches every half, and a
// tensor's blocks all take the same few scales, so each is searched once.
uint16_t power_of_two_half(int exponent) {
    static std::map<int, uint16_t> found;
    const auto [it, added] = found.try_emplace(exponent, 0);
    if (added) it->second = exact_half(std::ldexp(1.0, exponent));
    return it->second;
}

}  // namespace

Block block_of_spread(GgmlType type, double spread, std::mt19937& rng) {
    Block block = random_block(type, rng);
    const auto set_half = [&](size_t at, double value) {
        const uint16_t bits = power_of_two_half(static_cast<int>(std::floor(std::log2(value))));
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
        case GgmlType::Q4_1:  // d * q + m, codes 0..15, m below zero to centre them
        case GgmlType::Q5_1:  // the same with codes 0..31
            set_half(0, spread / (type == GgmlType::Q4_1 ? 4.6 : 9.2));
            set_half(2, spread * 8 / 4.6);  // half the codes' range: 8 d, or 16 d
            block[3] |= 0x80;               // the sign bit of m
            break;
        case GgmlType::Q5_0: set_half(0, spread / 9.2); break;  // codes -16..15
        case GgmlType::Q2_K:                                    // 4-bit scales and minima, 2-bit codes
            set_half(80, spread / 12);
            set_half(82, spread / 20);
            break;
        case GgmlType::Q3_K: set_half(108, spread / 70); break;  // 6-bit signed scales, codes -4..3
        case GgmlType::Q5_K:                                     // Q4_K's scales, 5-bit codes
            set_half(0, spread / 330);
            set_half(2, spread / 22);
            break;
        case GgmlType::IQ4_NL: set_half(0, spread / 60); break;    // a codebook of -127..113
        case GgmlType::IQ4_XS: set_half(0, spread / 1200); break;  // its 6-bit scales less 32 too
        case GgmlType::MXFP4:                                      // one E8M0 scale byte, codes of FP4 up to 6
            block[0] = static_cast<uint8_t>(127 + static_cast<int>(std::floor(std::log2(spread / 3))));
            break;
        default: throw std::invalid_argument("gguf_models: no spread rule for this type");
    }
    return block;
}

std::string NameTable::gguf_name(const std::string& hf) const {
    if (const auto it = outside.find(hf); it != outside.end()) return it->second;
    if (!hf.starts_with(hf_layer_prefix)) return "";
    const size_t layer_end = hf.find('.', hf_layer_prefix.size());
    const std::string n = hf.substr(hf_layer_prefix.size(), layer_end - hf_layer_prefix.size());
    return gguf_layer_prefix + n + "." + layer.at(hf.substr(layer_end + 1));
}

Written tensor_as_stored(const NamedTensor& t, const StoredAs& as, const MatrixTypes& matrices, std::mt19937& rng) {
    const bool matrix = t.shape.size() == 2;
    const int64_t rows = matrix ? t.shape[as.transposed ? 1 : 0] : 1;
    const int64_t cols = matrix ? t.shape[as.transposed ? 0 : 1] : t.shape[0];
    const auto from = [&](int64_t r, int64_t c) -> size_t {               // where stored element (r, c) is in t.values
        if (!matrix) return static_cast<size_t>(as.row ? as.row(c) : c);  // a vector reorders as its matrix's rows
        const int64_t row = as.row ? as.row(r) : r;
        return static_cast<size_t>(as.transposed ? c * rows + row : row * cols + c);
    };
    const DType type = matrix && as.quantized ? matrices(as.name, cols) : DType::F32;
    if (!t.name.empty() && type != DType::F32) matrices.fix(t.name, type);  // the name the loader gives it
    const GgmlType ggml = ggml_type(type);
    Written w{{as.name, {}, static_cast<uint32_t>(ggml), ""}, t.values};
    w.spec.ne = matrix ? std::vector<uint64_t>{uint64_t(cols), uint64_t(rows)} : std::vector<uint64_t>{uint64_t(cols)};
    double sum = 0, squares = 0;
    for (float v : t.values) sum += v, squares += double(v) * v;
    const double n = double(t.values.size()), spread = std::sqrt(std::max(squares / n - (sum / n) * (sum / n), 1e-12));
    for (int64_t r = 0; r < rows; ++r) {
        if (type == DType::F32) {
            for (int64_t c = 0; c < cols; ++c) {
                const float v = t.values[from(r, c)] + as.added;
                w.spec.data.append(reinterpret_cast<const char*>(&v), sizeof v);
                w.values[from(r, c)] = v - as.added;  // exact: v lies within [0.5, 2] of 1 for a norm
            }
            continue;
        }
        if (type == DType::F16 || type == DType::BF16) {  // each value rounded to the nearest half
            const FileDType half = type == DType::F16 ? FileDType::F16 : FileDType::BF16;
            std::vector<float> row(static_cast<size_t>(cols));
            for (int64_t c = 0; c < cols; ++c) row[size_t(c)] = t.values[from(r, c)];
            const std::vector<uint8_t> bytes = encode(row, half);
            w.spec.data.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
            for (int64_t c = 0; c < cols; ++c) w.values[from(r, c)] = rounded(row[size_t(c)], half);
            continue;
        }
        const int64_t per_block = ggml_type_traits(ggml).block_elements;
        for (int64_t b = 0; b < cols / per_block; ++b) {
            const Block block = block_of_spread(ggml, spread, rng);
            w.spec.data.append(reinterpret_cast<const char*>(block.data()), block.size());
            const std::vector<double> values = reference_values(ggml, block);
            for (int64_t i = 0; i < per_block; ++i) w.values[from(r, b * per_block + i)] = float(values[i]);
        }
    }
    return w;
}

namespace {

// How the converter stores tensor `hf` of `spec`'s family.
StoredAs stored_as(const FamilySpec& spec, const std::string& hf) {
    StoredAs as;
    if (written_with_experts(spec, hf)) return as;  // write_expert_tensors's
    as.name = name_table(spec.family).gguf_name(hf);
    const bool q_or_k = hf.find("q_proj") != std::string::npos || hf.find("k_proj") != std::string::npos;
    const int64_t hs = spec.head_dim, NH = spec.n_head;
    const bool llama = spec.family == Family::llama || spec.family == Family::mixtral;
    if (llama && q_or_k) as.row = [hs](int64_t r) { return hugging_face_row(r, hs); };
    if (spec.family == Family::gpt_neox && hf.find("query_key_value") != std::string::npos)
        as.row = [NH, hs](int64_t r) { return neox_row(r, NH, hs); };
    as.transposed = spec.family == Family::gpt2 && hf.find(".c_") != std::string::npos;  // Conv1D
    as.quantized = as.name != "position_embd.weight";
    if (gemma(spec.family) && hf.ends_with("norm.weight")) as.added = 1;  // the converter's 1 + w
    return as;
}

// The keys of `spec`'s family, as its converter writes them.
void write_family_keys(GgufSpec& gguf, const FamilySpec& spec, const std::string& arch) {
    const auto key = [&](const std::string& name, GgufMetaValue value) {
        gguf.metadata.emplace_back(arch + "." + name, std::move(value));
    };
    key("block_count", gguf_uint32(uint32_t(spec.n_layer)));
    key("context_length", gguf_uint32(uint32_t(spec.max_positions)));
    key("embedding_length", gguf_uint32(uint32_t(spec.n_embd)));
    key("feed_forward_length", gguf_uint32(uint32_t(spec.mlp_dim)));
    key("attention.head_count", gguf_uint32(uint32_t(spec.n_head)));
    if (spec.family == Family::gpt2 || spec.family == Family::gpt_neox) {
        key("attention.layer_norm_epsilon", gguf_float32(float(spec.norm_eps)));
        if (spec.family == Family::gpt2) return;
        key("rope.dimension_count", gguf_uint32(uint32_t(spec.rotary_pct * spec.head_dim)));
        key("use_parallel_residual", gguf_bool(spec.parallel_residual));
        return;
    }
    key("attention.head_count_kv", gguf_uint32(uint32_t(spec.n_kv_head)));
    if (spec.family != Family::phi3) key("attention.key_length", gguf_uint32(uint32_t(spec.head_dim)));
    key("rope.dimension_count", gguf_uint32(uint32_t(spec.rotary_pct * spec.head_dim)));
    key("rope.freq_base", gguf_float32(float(spec.rope_theta)));
    key("attention.layer_norm_rms_epsilon", gguf_float32(float(spec.norm_eps)));
    if (spec.n_experts) {
        key("expert_count", gguf_uint32(uint32_t(spec.n_experts)));
        key("expert_used_count", gguf_uint32(uint32_t(spec.experts_per_token)));
        if (spec.family == Family::qwen3_moe || spec.family == Family::gpt_oss)
            key("expert_feed_forward_length", gguf_uint32(uint32_t(spec.expert_mlp_dim)));
    }
    if (spec.family == Family::gpt_oss) {
        key("attention.sliding_window", gguf_uint32(uint32_t(spec.sliding_window)));
        key("rope.scaling.type", gguf_string("yarn"));
        key("rope.scaling.factor", gguf_float32(float(spec.max_positions / spec.original_max_positions)));
        key("rope.scaling.original_context_length", gguf_uint32(uint32_t(spec.original_max_positions)));
    }
    if (!gemma(spec.family)) return;
    key("attention.value_length", gguf_uint32(uint32_t(spec.head_dim)));
    key("attention.sliding_window", gguf_uint32(uint32_t(spec.sliding_window)));
    if (spec.window_pattern) key("attention.sliding_window_pattern", gguf_uint32(uint32_t(spec.window_pattern)));
    if (spec.attn_softcap > 0) key("attn_logit_softcapping", gguf_float32(float(spec.attn_softcap)));
    if (spec.final_softcap > 0) key("final_logit_softcapping", gguf_float32(float(spec.final_softcap)));
    if (spec.rope_linear_factor > 0) {
        key("rope.scaling.type", gguf_string("linear"));
        key("rope.scaling.factor", gguf_float32(float(spec.rope_linear_factor)));
    }
}

}  // namespace

void write_tensors(GgufSpec& gguf, std::vector<NamedTensor>& tensors,
                   const std::function<StoredAs(const std::string&)>& stored_as, const MatrixTypes& matrices,
                   uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    for (NamedTensor& t : tensors) {
        const StoredAs as = stored_as(t.name);
        if (as.name.empty()) continue;
        Written w = tensor_as_stored(t, as, matrices, rng);
        gguf.tensors.push_back(std::move(w.spec));
        t.values = std::move(w.values);
    }
}

FamilySpec gguf_family_spec(Family family) {
    FamilySpec s = family_spec(family);
    s.n_layer = 2, s.n_embd = 256, s.n_head = 8, s.n_kv_head = 2, s.head_dim = 32, s.mlp_dim = 512;
    s.vocab_size = 259, s.bos_id = 257, s.eos_ids = {258}, s.pad_token_id = -1, s.max_positions = 64;
    if (family == Family::llama) s.rope_theta = 500000;
    if (family == Family::gpt2) s.mlp_dim = 4 * s.n_embd;
    // Gemma: pad 0, the reader's default where the file names none.
    if (gemma(family)) s.query_pre_attn_scalar = s.head_dim, s.sliding_window = 4, s.pad_token_id = 0;
    if (family == Family::gemma2) s.attn_softcap = 2, s.final_softcap = 3;
    if (family == Family::gemma3_text) s.n_layer = 3, s.window_pattern = 3, s.local_rope_theta = 10000;
    if (family == Family::gemma3_text) s.rope_linear_factor = 8;
    if (s.n_experts) s.expert_mlp_dim = 256;
    s.norm_topk_prob =
        family == Family::qwen3_moe;  // llama.cpp renormalizes Qwen 3 MoE's chosen weights, never OLMoE's
    if (s.n_experts && family != Family::qwen3_moe) s.mlp_dim = s.expert_mlp_dim;  // intermediate_size: the experts'
    if (family == Family::olmoe) s.n_kv_head = s.n_head;  // OLMoE's own; llama.cpp norms its K over all C
    // gpt-oss: YaRN stretching 64 positions 32 times, rounded as llama.cpp rounds it.
    if (family == Family::gpt_oss) s.max_positions = 2048, s.original_max_positions = 64, s.yarn_truncate = true;
    return s;
}

void write_gguf_header(GgufSpec& gguf, const std::string& arch, const MatrixTypes& matrices) {
    gguf.metadata.emplace_back("general.architecture", gguf_string(arch));
    gguf.metadata.emplace_back("general.file_type", gguf_uint32(matrices.file_type()));
}

void write_byte_tokenizer(GgufSpec& gguf, const std::string& pre, int bos, int eos) {
    const auto key = [&](const std::string& name, GgufMetaValue value) {
        gguf.metadata.emplace_back("tokenizer.ggml." + name, std::move(value));
    };
    std::vector<std::string> tokens;
    std::vector<GgufMetaValue> types;
    for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b)), types.push_back(gguf_int32(1));
    tokens.push_back(byte_token(' ') + "t"), types.push_back(gguf_int32(1));
    for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>"})
        tokens.push_back(special), types.push_back(gguf_int32(3));
    key("model", gguf_string("gpt2"));
    key("pre", gguf_string(pre));
    key("tokens", gguf_strings(tokens));
    key("token_type", gguf_array(5, types));
    key("merges", gguf_strings({byte_token(' ') + " t"}));
    key("bos_token_id", gguf_uint32(uint32_t(bos)));
    key("eos_token_id", gguf_uint32(uint32_t(eos)));
}

FamilyCheckpoint write_gguf_family(const fs::path& file, const FamilySpec& spec, const MatrixTypes& matrices,
                                   const std::function<void(GgufSpec&)>& edit) {
    FamilyCheckpoint checkpoint = make_family_checkpoint(spec);
    if (gemma(spec.family) && !spec.tied_embeddings) {  // Hugging Face's Gemma is tied: an untied one's own head
        std::mt19937_64 rng(spec.seed);
        draw_tensor(checkpoint.tensors, rng, "lm_head.weight", {spec.vocab_size, spec.n_embd}, 0,
                    1 / std::sqrt(float(spec.n_embd)));
    }
    const std::string arch = spec.family == Family::gpt_neox      ? "gptneox"
                             : spec.family == Family::gemma3_text ? "gemma3"
                             : spec.family == Family::qwen3_moe   ? "qwen3moe"
                             : spec.family == Family::mixtral     ? "llama"
                             : spec.family == Family::gpt_oss     ? "gpt-oss"
                                                                  : model_type(spec.family);
    // A tied table drawn as an embedding (std 1) makes logits of std sqrt(C),
    // 16: one token would take all the probability, and no comparison of
    // probabilities could fail. A quarter of it leaves the likeliest about 0.1.
    for (NamedTensor& t : checkpoint.tensors)
        if (spec.tied_embeddings && name_table(spec.family).gguf_name(t.name) == "token_embd.weight")
            for (float& v : t.values) v /= 4;
    GgufSpec gguf;
    write_gguf_header(gguf, arch, matrices);
    write_family_keys(gguf, spec, arch);
    const char* pre = spec.family == Family::llama || spec.family == Family::mixtral ? "llama-bpe"
                      : spec.family == Family::gpt2                                  ? "gpt-2"
                      : spec.family == Family::gpt_neox                              ? "olmo"
                                                                                     : "qwen2";
    write_byte_tokenizer(gguf, pre, spec.bos_id, spec.eos_ids.at(0));
    // Mixtral's converter writes tokenizer_config.json's add_bos_token (true).
    if (spec.family == Family::mixtral) gguf.metadata.emplace_back("tokenizer.ggml.add_bos_token", gguf_bool(true));
    write_tensors(
        gguf, checkpoint.tensors, [&](const std::string& hf) { return stored_as(spec, hf); }, matrices, spec.seed);
    write_expert_tensors(gguf, checkpoint, matrices, spec.seed);
    if (edit) edit(gguf);
    write_gguf(file, gguf);
    return checkpoint;
}

}  // namespace headscope::test
