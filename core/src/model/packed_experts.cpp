// gpt-oss's experts as its Hugging Face files pack them (packed_experts.h):
// per layer, mlp.experts.gate_up_proj_blocks (E, 2Fe, C / 32, 16) and
// _scales (E, 2Fe, C / 32) as U8, gate_up_proj_bias (E, 2Fe), rows
// interleaving gate (even) and up (odd); down_proj_blocks (E, C, Fe / 32, 16),
// _scales (E, C, Fe / 32) and down_proj_bias (E, C).
#include "packed_experts.h"

#include "model_files.h"

#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/base/shape.h"
#include "headscope/io/safetensors.h"

namespace headscope {

namespace {

constexpr int64_t block_values = 32, block_bytes = 17;  // ggml's MXFP4 block

// One layer's packed tensors, found and checked.
struct PackedLayer {
    const RawTensor *gate_up_blocks, *gate_up_scales, *down_blocks, *down_scales;
    const TensorView *gate_up_bias, *down_bias;
};

std::string experts_prefix(int layer) { return "model.layers." + std::to_string(layer) + ".mlp.experts."; }

// Tensor `name` missing: said so, or that the file holds the experts unpacked.
[[noreturn]] void missing(const Model& m, const std::string& where, const std::string& name) {
    const std::string unpacked = name.substr(0, name.rfind('_'));  // gate_up_proj_blocks -> gate_up_proj
    for (const auto& file : m.files)
        if (file->tensors().count(unpacked) || file->unread_tensors().count(unpacked))
            throw Error(where + ": tensor '" + unpacked +
                        "' holds the experts unpacked; only gpt-oss's MXFP4 files (its _blocks and _scales) are read");
    throw Error(where + ": tensor '" + name + "' missing");
}

// An MXFP4 part: U8 of `shape`, a scale of 255 (NaN) refused.
const RawTensor& u8_tensor(const Model& m, const std::string& where, const std::string& name,
                           const std::vector<int64_t>& shape, bool scales) {
    for (const auto& file : m.files) {
        if (const auto view = file->tensors().find(name); view != file->tensors().end())
            throw Error(where + ": tensor '" + name + "' has dtype " + to_string(view->second.dtype) +
                        ", expected U8 (MXFP4)");
        const auto raw = file->unread_tensors().find(name);
        if (raw == file->unread_tensors().end()) continue;
        if (raw->second.dtype != "U8")
            throw Error(where + ": tensor '" + name + "' has dtype " + raw->second.dtype + ", expected U8 (MXFP4)");
        check_shape(where, name, raw->second.shape, shape);
        for (size_t i = 0; scales && i < raw->second.bytes.size(); ++i)
            if (raw->second.bytes[i] == std::byte{255})
                throw Error(where + ": tensor '" + name + "' holds a scale of 255, which is NaN in MXFP4");
        return raw->second;
    }
    missing(m, where, name);
}

const TensorView& bias_tensor(const Model& m, const std::string& where, const std::string& name,
                              const std::vector<int64_t>& shape) {
    for (const auto& file : m.files)
        if (const auto view = file->tensors().find(name); view != file->tensors().end()) {
            check_shape(where, name, view->second.shape, shape);
            return view->second;
        }
    for (const auto& file : m.files)
        if (const auto raw = file->unread_tensors().find(name); raw != file->unread_tensors().end())
            throw Error(where + ": tensor '" + name + "' has dtype " + raw->second.dtype +
                        ", which Headscope does not read");
    missing(m, where, name);
}

PackedLayer find_layer(const Model& m, const std::string& where, int layer) {
    const int64_t E = m.config.n_experts, Fe = m.config.expert_mlp_dim, C = m.config.n_embd;
    const std::string p = experts_prefix(layer);
    return {&u8_tensor(m, where, p + "gate_up_proj_blocks", {E, 2 * Fe, C / block_values, 16}, false),
            &u8_tensor(m, where, p + "gate_up_proj_scales", {E, 2 * Fe, C / block_values}, true),
            &u8_tensor(m, where, p + "down_proj_blocks", {E, C, Fe / block_values, 16}, false),
            &u8_tensor(m, where, p + "down_proj_scales", {E, C, Fe / block_values}, true),
            &bias_tensor(m, where, p + "gate_up_proj_bias", {E, 2 * Fe}),
            &bias_tensor(m, where, p + "down_proj_bias", {E, C})};
}

// Row `row` of expert `e` of a (E, rows, groups, 16) blocks tensor and its scales, as ggml's blocks at `out`.
void repack_row(const RawTensor& blocks, const RawTensor& scales, int64_t e, int64_t rows, int64_t row,
                std::byte* out) {
    const int64_t groups = scales.shape[2], at = (e * rows + row) * groups;
    mxfp4_blocks_from_split(blocks.bytes.data() + at * 16, scales.bytes.data() + at, static_cast<size_t>(groups), out);
}

}  // namespace

void read_packed_experts(Model& m, const std::string& where) {
    const Config& c = m.config;
    const int64_t E = c.n_experts, Fe = c.expert_mlp_dim, C = c.n_embd, L = static_cast<int64_t>(m.layers.size());
    if (C % block_values != 0 || Fe % block_values != 0)
        throw Error(where + ": MXFP4 experts need hidden_size (" + std::to_string(C) + ") and intermediate_size (" +
                    std::to_string(Fe) + ") to be multiples of 32");
    std::vector<PackedLayer> layers;
    for (int l = 0; l < L; ++l) layers.push_back(find_layer(m, where, l));

    const int64_t gate_up_row = C / block_values * block_bytes, down_row = Fe / block_values * block_bytes;
    const int64_t expert_bytes = 2 * Fe * gate_up_row + C * down_row, expert_floats = 2 * Fe + C;
    m.expert_blocks.resize(static_cast<size_t>(L * E * expert_bytes));
    m.expert_biases.resize(static_cast<size_t>(L * E * expert_floats));
    std::vector<float> gate_up_bias(static_cast<size_t>(E * 2 * Fe)), down_bias(static_cast<size_t>(E * C));
    for (int l = 0; l < L; ++l) {
        const PackedLayer& p = layers[static_cast<size_t>(l)];
        const std::string prefix = experts_prefix(l);
        convert_to_f32(prefix + "gate_up_proj_bias", *p.gate_up_bias, gate_up_bias.data());
        convert_to_f32(prefix + "down_proj_bias", *p.down_bias, down_bias.data());
        m.layers[l].experts.resize(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) {
            std::byte* blocks = m.expert_blocks.data() + (l * E + e) * expert_bytes;
            float* biases = m.expert_biases.data() + (l * E + e) * expert_floats;
            // Gate's rows (the even ones) first, then up's (the odd ones), each bias beside.
            for (int64_t r = 0; r < 2 * Fe; ++r) {
                const int64_t to = r % 2 * Fe + r / 2;
                repack_row(*p.gate_up_blocks, *p.gate_up_scales, e, 2 * Fe, r, blocks + to * gate_up_row);
                biases[to] = gate_up_bias[static_cast<size_t>(e * 2 * Fe + r)];
            }
            std::byte* down = blocks + 2 * Fe * gate_up_row;
            for (int64_t r = 0; r < C; ++r) repack_row(*p.down_blocks, *p.down_scales, e, C, r, down + r * down_row);
            std::copy_n(down_bias.data() + e * C, C, biases + 2 * Fe);
            ExpertWeights& expert = m.layers[l].experts[static_cast<size_t>(e)];
            expert.gate = Matrix{blocks, DType::MXFP4, C, Fe, true};
            expert.up = Matrix{blocks + Fe * gate_up_row, DType::MXFP4, C, Fe, true};
            expert.down = Matrix{down, DType::MXFP4, Fe, C, true};
            expert.gate_b = biases, expert.up_b = biases + Fe, expert.down_b = biases + 2 * Fe;
        }
        // The file's pages of the blocks and scales just copied are dropped:
        // kept, the open would hold the experts twice.
        for (const RawTensor* copied : {p.gate_up_blocks, p.gate_up_scales, p.down_blocks, p.down_scales})
            for (const auto& file : m.files) file->release(copied->bytes);
        // Listed as the weights they are (transformers' parameters), each with its file's bytes.
        const auto list = [&](const std::string& name, std::vector<int64_t> shape, DType dtype, size_t bytes) {
            m.tensors.push_back({prefix + name, shape, dtype, static_cast<int64_t>(bytes)});
            m.params += element_count(shape);
        };
        list("gate_up_proj", {E, 2 * Fe, C}, DType::MXFP4,
             p.gate_up_blocks->bytes.size() + p.gate_up_scales->bytes.size());
        list("gate_up_proj_bias", {E, 2 * Fe}, p.gate_up_bias->dtype, p.gate_up_bias->bytes.size());
        list("down_proj", {E, C, Fe}, DType::MXFP4, p.down_blocks->bytes.size() + p.down_scales->bytes.size());
        list("down_proj_bias", {E, C}, p.down_bias->dtype, p.down_bias->bytes.size());
    }
}

}  // namespace headscope
