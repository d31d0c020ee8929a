// The benchmarks' synthetic checkpoints (bench_checkpoints.h): each tensor
// streamed a megabyte at a time from a xorshift generator.
#include "bench_checkpoints.h"

#include <bit>
#include <fstream>

#include "family_writer.h"
#include "headscope/base/shape.h"
#include "headscope/model/model_description.h"
#include "headscope/tokenize/tokenizer.h"

namespace headscope::test {

namespace {

struct WrittenTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    enum Fill { noise, gain, mxfp4_scale } fill;
};

// The tensors model_tensors lists, as BF16, and gpt-oss's packed experts after them.
std::vector<WrittenTensor> checkpoint_tensors(const Config& config) {
    std::vector<WrittenTensor> out;
    for (const TensorSpec& t : model_tensors(config))
        out.push_back({t.name, "BF16", t.shape, t.shape.size() == 1 ? WrittenTensor::gain : WrittenTensor::noise});
    if (!config.packed_experts) return out;
    const int64_t E = config.n_experts, C = config.n_embd, Fe = config.expert_mlp_dim;
    for (int l = 0; l < config.n_layer; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
        out.push_back({p + "gate_up_proj_blocks", "U8", {E, 2 * Fe, C / 32, 16}, WrittenTensor::noise});
        out.push_back({p + "gate_up_proj_scales", "U8", {E, 2 * Fe, C / 32}, WrittenTensor::mxfp4_scale});
        out.push_back({p + "gate_up_proj_bias", "BF16", {E, 2 * Fe}, WrittenTensor::noise});
        out.push_back({p + "down_proj_blocks", "U8", {E, C, Fe / 32, 16}, WrittenTensor::noise});
        out.push_back({p + "down_proj_scales", "U8", {E, C, Fe / 32}, WrittenTensor::mxfp4_scale});
        out.push_back({p + "down_proj_bias", "BF16", {E, C}, WrittenTensor::noise});
    }
    return out;
}

void write_tensor_bytes(std::ofstream& out, const WrittenTensor& t, uint32_t& state) {
    const int64_t element_bytes = t.dtype == "U8" ? 1 : 2;
    std::vector<uint8_t> chunk(1 << 20);
    for (int64_t left = element_count(t.shape) * element_bytes; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(chunk.size())));
        for (size_t i = 0; i < n; i += static_cast<size_t>(element_bytes)) {
            state ^= state << 13, state ^= state >> 17, state ^= state << 5;  // xorshift32
            if (t.fill == WrittenTensor::mxfp4_scale) {
                chunk[i] = static_cast<uint8_t>(120 + state % 2);  // 2^-7 or 2^-6: values near 1 / sqrt(C)
            } else if (element_bytes == 1) {
                chunk[i] = static_cast<uint8_t>(state >> 24);
            } else {
                const float value =
                    t.fill == WrittenTensor::gain ? 1.f : (static_cast<float>(state >> 8) / 16777216.f - 0.5f) * 0.04f;
                const auto bits = static_cast<uint16_t>(std::bit_cast<uint32_t>(value) >> 16);
                chunk[i] = static_cast<uint8_t>(bits), chunk[i + 1] = static_cast<uint8_t>(bits >> 8);
            }
        }
        out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n));
        left -= static_cast<int64_t>(n);
    }
}

// The tokenizer is not benchmarked here: 256 byte tokens and one merge
// (" t", token 256), so that the directory loads and reads any text.
void write_byte_tokenizer(const std::filesystem::path& dir) {
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    std::string utf8;
    for (int b = 0; b < 256; ++b) {
        utf8.clear();
        const char32_t c = byte_to_unicode()[b];
        if (c < 0x80)
            utf8 += static_cast<char>(c);
        else
            utf8 += {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
        vocab[utf8] = b;
    }
    vocab["\xc4\xa0t"] = 256;  // what the merge makes
    std::ofstream(dir / "vocab.json") << vocab.dump();
    std::ofstream(dir / "merges.txt") << "#version: 0.2\n\xc4\xa0 t\n";
}

}  // namespace

nlohmann::json llama_config(int layers, int C, int NH, int NKV, int F, int V) {
    return {{"model_type", "llama"},
            {"num_hidden_layers", layers},
            {"hidden_size", C},
            {"num_attention_heads", NH},
            {"num_key_value_heads", NKV},
            {"intermediate_size", F},
            {"max_position_embeddings", 2048},
            {"vocab_size", V},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 500000.0},
            {"tie_word_embeddings", true},
            {"eos_token_id", 0}};
}

nlohmann::json gemma3_1b_config() {
    FamilySpec s;
    s.family = Family::gemma3_text;
    s.n_layer = 26, s.n_embd = 1152, s.n_head = 4, s.n_kv_head = 1, s.head_dim = 256, s.mlp_dim = 6912;
    s.vocab_size = 262144, s.bos_id = 2, s.eos_ids = {1}, s.pad_token_id = 0;
    s.tied_embeddings = true, s.norm_eps = 1e-6, s.max_positions = 32768;
    s.query_pre_attn_scalar = 256, s.sliding_window = 512, s.window_pattern = 6;
    s.rope_theta = 1e6, s.local_rope_theta = 1e4, s.dtype = FileDType::BF16;
    return gemma_config_json(s);
}

nlohmann::json gpt_oss_20b_config(int layers) {
    FamilySpec s;
    s.family = Family::gpt_oss;
    s.n_layer = layers, s.n_embd = 2880, s.n_head = 64, s.n_kv_head = 8, s.head_dim = 64;
    s.n_experts = 32, s.experts_per_token = 4, s.expert_mlp_dim = 2880, s.swiglu_limit = 7;
    s.vocab_size = 201088, s.eos_ids = {200002}, s.pad_token_id = 199999;
    s.attention_bias = true, s.tied_embeddings = false, s.norm_eps = 1e-5, s.rope_theta = 150000;
    s.sliding_window = 128, s.max_positions = 131072, s.original_max_positions = 4096, s.dtype = FileDType::BF16;
    return gpt_oss_config_json(s);
}

void write_random_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config_json) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << config_json.dump(2);
    const std::vector<WrittenTensor> tensors = checkpoint_tensors(config_from_json(config_json, "config.json"));
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    int64_t offset = 0;
    for (const WrittenTensor& t : tensors) {
        const int64_t bytes = (t.dtype == "U8" ? 1 : 2) * element_count(t.shape);
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t length = text.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << text;
    uint32_t state = 12345;
    for (const WrittenTensor& t : tensors) write_tensor_bytes(out, t, state);
    write_byte_tokenizer(dir);
}

}  // namespace headscope::test
