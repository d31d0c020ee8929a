// Test support: small GPT-2-layout models with seeded random weights in F32,
// F16 or BF16 (rounded to nearest even by hand), raw safetensors files, and
// self-removing temp directories.
#include "model_writer.h"

#include "headscope/base/shape.h"
#include "headscope/model/model_description.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <system_error>

namespace headscope::test {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kGpt2VocabSize = 50257;

// bfloat16 keeps the top 16 bits of a float; adding 0x7fff plus the lowest
// kept bit rounds the dropped half to nearest, ties to even.
uint16_t f32_to_bf16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // keep NaN a NaN
    return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

// IEEE half, round to nearest even, overflow to infinity.
uint16_t f32_to_f16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const uint32_t abs = x & 0x7fffffff;
    if (abs > 0x7f800000) return sign | 0x7e00;
    // 65520 (0x477ff000) is halfway between the largest half, 65504, and
    // 2^16; the tie goes to the even neighbour, which is infinity.
    if (abs >= 0x477ff000) return sign | 0x7c00;
    if (abs >= 0x38800000) {  // a normal half: rebias the exponent, round away 13 mantissa bits
        const uint32_t rebiased = abs - (112u << 23);
        return sign | static_cast<uint16_t>((rebiased + 0xfff + ((rebiased >> 13) & 1)) >> 13);
    }
    // Below 2^-14 the half is subnormal: a count of 2^-24 units.
    const uint32_t exponent = abs >> 23;
    if (exponent < 102) return sign;                        // under 2^-25, so rounds to zero
    const uint32_t mantissa = (abs & 0x7fffff) | 0x800000;  // value = mantissa * 2^(exponent - 150)
    const uint32_t shift = 126 - exponent;                  // to units of 2^-24
    const uint32_t units = mantissa >> shift, rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
    return sign | static_cast<uint16_t>(units + (rest > half || (rest == half && (units & 1))));
}

void put_le(std::vector<uint8_t>& out, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// The normal distribution a test model's weight is drawn from. Matrices are
// scaled by their fan-in: larger weights make unscaled (`scale none`) scores
// so large that float32's rounding alone moves weights by over 1e-5 against
// the double-precision reference.
std::normal_distribution<float> distribution(Weight weight, float linear_std) {
    switch (weight) {
        case Weight::wte:
        case Weight::wpe: return std::normal_distribution<float>(0, 1);
        case Weight::ln_1_w:
        case Weight::ln_2_w:
        case Weight::ln_f_w: return std::normal_distribution<float>(1, 0.1f);
        case Weight::attn_w:
        case Weight::attn_proj_w:
        case Weight::fc_w: return std::normal_distribution<float>(0, linear_std);
        case Weight::fc_proj_w: return std::normal_distribution<float>(0, linear_std / 2);  // fan-in 4C
        default: return std::normal_distribution<float>(0, 0.1f);                           // the biases
    }
}

}  // namespace

std::vector<uint8_t> encode(const std::vector<float>& values, FileDType dtype) {
    std::vector<uint8_t> bytes;
    bytes.reserve(values.size() * 4);
    for (float v : values) {
        switch (dtype) {
            case FileDType::F32: put_le(bytes, std::bit_cast<uint32_t>(v), 4); break;
            case FileDType::F16: put_le(bytes, f32_to_f16(v), 2); break;
            case FileDType::BF16: put_le(bytes, f32_to_bf16(v), 2); break;
        }
    }
    return bytes;
}

const char* dtype_name(FileDType dtype) {
    switch (dtype) {
        case FileDType::F32: return "F32";
        case FileDType::F16: return "F16";
        case FileDType::BF16: return "BF16";
    }
    return "";
}

float rounded(float value, FileDType dtype) {
    switch (dtype) {
        case FileDType::F32: return value;
        case FileDType::F16: {
            const uint16_t h = f32_to_f16(value);
            const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
            // A subnormal counts units of 2^-24; a normal is 1.mantissa * 2^(exponent - 15).
            const float magnitude = exponent == 0    ? std::ldexp(float(mantissa), -24)
                                    : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                                     : std::ldexp(float(1024 + mantissa), exponent - 25);
            return (h & 0x8000) ? -magnitude : magnitude;
        }
        case FileDType::BF16: return std::bit_cast<float>(static_cast<uint32_t>(f32_to_bf16(value)) << 16);
    }
    return value;
}

fs::path gpt2_vocab_json() { return fs::path(HEADSCOPE_GPT2_REFERENCE_DIR) / "encoder.json"; }
fs::path gpt2_merges_txt() { return fs::path(HEADSCOPE_GPT2_REFERENCE_DIR) / "vocab.bpe"; }

const nlohmann::json& gpt2_vocab() {
    static const nlohmann::json vocab = [] {
        std::ifstream in(gpt2_vocab_json());
        return nlohmann::json::parse(in);
    }();
    return vocab;
}

void write_test_model(const fs::path& dir, const TestModelSpec& spec) {
    fs::create_directories(dir);
    const nlohmann::json config_json = {
        {"model_type", "gpt2"},       {"architectures", {"GPT2LMHeadModel"}},
        {"n_layer", spec.n_layer},    {"n_head", spec.n_head},
        {"n_embd", spec.n_embd},      {"n_positions", spec.n_positions},
        {"n_ctx", spec.n_positions},  {"vocab_size", kGpt2VocabSize},
        {"bos_token_id", 50256},      {"eos_token_id", 50256},
        {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"},
    };
    std::ofstream(dir / "config.json") << config_json.dump(2) << "\n";

    const float linear_std = 1.0f / std::sqrt(static_cast<float>(spec.n_embd));
    std::mt19937_64 rng(spec.seed);
    const std::string prefix = spec.transformer_prefix ? "transformer." : "";
    std::vector<RawTensor> tensors;
    const Config config = {.n_layer = spec.n_layer,
                           .n_head = spec.n_head,
                           .n_embd = spec.n_embd,
                           .n_positions = spec.n_positions,
                           .vocab_size = kGpt2VocabSize};
    for (const TensorSpec& t : model_tensors(config)) {
        std::vector<float> values(static_cast<size_t>(element_count(t.shape)));
        std::normal_distribution<float> normal = distribution(t.weight, linear_std);
        for (float& v : values) v = normal(rng);
        tensors.push_back({prefix + t.name, dtype_name(spec.dtype), t.shape, encode(values, spec.dtype)});
    }
    write_safetensors(dir / "model.safetensors", tensors);

    fs::copy_file(gpt2_vocab_json(), dir / "vocab.json", fs::copy_options::overwrite_existing);
    fs::copy_file(gpt2_merges_txt(), dir / "merges.txt", fs::copy_options::overwrite_existing);
}

void write_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors) {
    nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
    uint64_t offset = 0;
    for (const RawTensor& t : tensors) {
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
        offset += t.bytes.size();
    }
    std::string text = header.dump();
    // Padding keeps the data section 8-byte aligned, as HF's writer does.
    text.resize((text.size() + 7) / 8 * 8, ' ');

    std::vector<uint8_t> length;
    put_le(length, text.size(), 8);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(length.data()), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const RawTensor& t : tensors)
        out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    if (!out) throw std::runtime_error(path.string() + ": write failed");
}

TempDir::TempDir() {
    std::string pattern = (fs::temp_directory_path() / "headscope-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::system_error(errno, std::generic_category(), "mkdtemp");
    path = pattern;
}

TempDir::~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
}

}  // namespace headscope::test
