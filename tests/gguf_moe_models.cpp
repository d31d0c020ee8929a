// Test support: the mixtures of experts' layers as llama.cpp's converter
// writes them to GGUF (gguf_models.h): each layer's router as
// blk.N.ffn_gate_inp in F32 (llama.cpp's quantizer leaves it so), and its
// experts' gate, up and down each one 3-D tensor blk.N.ffn_{gate,up,down}_exps
// of ne [in, out, E], expert e's matrix its e-th slice, each tensor in the
// type its MatrixTypes gives. gpt-oss's as its converter splits them:
// gate_up_proj's even rows the gate, its odd ones up, each expert's in
// MXFP4 as the converter leaves them whatever the file's other matrices
// (F32 in a file of general.file_type F32, which llama.cpp reads as
// well), each with its bias ffn_{gate,up,down}_exps.bias (ne [out, E]), and
// the router's bias ffn_gate_inp.bias, in F32.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gguf_models.h"

namespace headscope::test {

namespace {

const char* const expert_parts[] = {"gate", "up", "down"};

NamedTensor& find(FamilyCheckpoint& checkpoint, const std::string& name) {
    for (auto* list : {&checkpoint.tensors, &checkpoint.unpacked})
        for (NamedTensor& t : *list)
            if (t.name == name) return t;
    throw std::out_of_range(name);
}

// `values` (E times `out` rows of `in`) as one F32 or 3-D tensor `name` of
// ne [in, out, E].
GgufTensorSpec f32_tensor(const std::string& name, const std::vector<float>& values, uint64_t in, uint64_t out,
                          uint64_t E) {
    GgufTensorSpec t{name, {in, out, E}, 0, ""};
    if (out == 1) t.ne = {in, E};
    t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    return t;
}

// gpt-oss's layer `l`: its router and bias, each expert's gate (gate_up_proj's
// even rows), up (its odd rows) and down in MXFP4 (F32 in an F32 file), their biases in F32.
void write_gpt_oss_layer(GgufSpec& gguf, FamilyCheckpoint& checkpoint, int l, const MatrixTypes& matrices,
                         std::mt19937& rng) {
    const DType experts = matrices.file_type() == 0 ? DType::F32 : DType::MXFP4;  // an F32 file's: F32
    const auto expert_as_stored = [&](const NamedTensor& rows, const StoredAs& as) {
        matrices.fix(as.name, experts), matrices.fix(rows.name, experts);
        return tensor_as_stored(rows, as, experts, rng);
    };
    const FamilySpec& spec = checkpoint.spec;
    const int64_t C = spec.n_embd, E = spec.n_experts, Fe = spec.expert_mlp_dim;
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.", layer = "blk." + std::to_string(l) + ".";
    for (const auto& [hf, name] :
         {std::pair{p + "router.weight", "ffn_gate_inp.weight"}, std::pair{p + "router.bias", "ffn_gate_inp.bias"}}) {
        NamedTensor& t = find(checkpoint, hf);
        StoredAs as;
        as.name = layer + name, as.quantized = false;
        gguf.tensors.push_back(tensor_as_stored(t, as, DType::F32, rng).spec);
    }
    NamedTensor &gate_up = find(checkpoint, p + "experts.gate_up_proj"),
                &down = find(checkpoint, p + "experts.down_proj");
    const std::vector<float>& gate_up_bias = find(checkpoint, p + "experts.gate_up_proj_bias").values;
    for (int parity = 0; parity < 2; ++parity) {
        GgufTensorSpec stacked{layer + (parity ? "ffn_up_exps.weight" : "ffn_gate_exps.weight"), {}, 0, ""};
        std::vector<float> bias;
        for (int64_t e = 0; e < E; ++e) {
            NamedTensor rows{p + "experts." + std::to_string(e) + (parity ? ".up_proj.weight" : ".gate_proj.weight"),
                             {Fe, C},
                             {}};  // the loader's name
            const auto at = [&](int64_t f, int64_t c) { return size_t(((e * 2 * Fe) + 2 * f + parity) * C + c); };
            for (int64_t f = 0; f < Fe; ++f)
                for (int64_t c = 0; c < C; ++c) rows.values.push_back(gate_up.values[at(f, c)]);
            StoredAs as;
            as.name = stacked.name;
            const Written w = expert_as_stored(rows, as);
            stacked.ne = {uint64_t(C), uint64_t(Fe), uint64_t(E)}, stacked.type = w.spec.type;
            stacked.data += w.spec.data;
            for (int64_t f = 0; f < Fe; ++f) {
                for (int64_t c = 0; c < C; ++c) gate_up.values[at(f, c)] = w.values[size_t(f * C + c)];
                bias.push_back(gate_up_bias[size_t(e * 2 * Fe + 2 * f + parity)]);
            }
        }
        gguf.tensors.push_back(std::move(stacked));
        gguf.tensors.push_back(f32_tensor(layer + (parity ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"), bias,
                                          uint64_t(Fe), 1, uint64_t(E)));
    }
    GgufTensorSpec stacked{layer + "ffn_down_exps.weight", {}, 0, ""};
    for (int64_t e = 0; e < E; ++e) {
        NamedTensor rows{p + "experts." + std::to_string(e) + ".down_proj.weight",
                         {C, Fe},
                         {down.values.begin() + e * C * Fe, down.values.begin() + (e + 1) * C * Fe}};
        StoredAs as;
        as.name = stacked.name;
        const Written w = expert_as_stored(rows, as);
        stacked.ne = {uint64_t(Fe), uint64_t(C), uint64_t(E)}, stacked.type = w.spec.type;
        stacked.data += w.spec.data;
        std::copy(w.values.begin(), w.values.end(), down.values.begin() + e * C * Fe);
    }
    gguf.tensors.push_back(std::move(stacked));
    gguf.tensors.push_back(f32_tensor(layer + "ffn_down_exps.bias",
                                      find(checkpoint, p + "experts.down_proj_bias").values, uint64_t(C), 1,
                                      uint64_t(E)));
}

}  // namespace

bool written_with_experts(const FamilySpec& spec, const std::string& hf) {
    for (int l = 0; l < spec.n_layer; ++l) {
        if (!spec.expert_layer(l)) continue;
        if (spec.family == Family::gpt_oss && hf.starts_with("model.layers." + std::to_string(l) + ".mlp."))
            return true;
        if (hf == spec.router_name(l)) return true;
        for (int e = 0; e < spec.n_experts; ++e)
            for (const char* part : expert_parts)
                if (hf == spec.expert_name(l, e, part)) return true;
    }
    return false;
}

void write_expert_tensors(GgufSpec& gguf, FamilyCheckpoint& checkpoint, const MatrixTypes& matrices, uint64_t seed) {
    const FamilySpec& spec = checkpoint.spec;
    std::mt19937 rng(static_cast<unsigned>(seed + 1000));
    for (int l = 0; l < spec.n_layer; ++l) {
        if (!spec.expert_layer(l)) continue;
        if (spec.family == Family::gpt_oss) {
            write_gpt_oss_layer(gguf, checkpoint, l, matrices, rng);
            continue;
        }
        const std::string layer = "blk." + std::to_string(l) + ".";
        NamedTensor& router = find(checkpoint, spec.router_name(l));
        Written w = tensor_as_stored(router, {layer + "ffn_gate_inp.weight", nullptr, false, false}, matrices, rng);
        gguf.tensors.push_back(std::move(w.spec));
        router.values = std::move(w.values);
        for (const char* part : expert_parts) {
            GgufTensorSpec stacked{layer + "ffn_" + part + "_exps.weight", {}, 0, ""};
            StoredAs as;
            as.name = stacked.name;
            for (int e = 0; e < spec.n_experts; ++e) {
                NamedTensor& expert = find(checkpoint, spec.expert_name(l, e, part));
                Written slice = tensor_as_stored(expert, as, matrices, rng);
                stacked.ne = {slice.spec.ne[0], slice.spec.ne[1], uint64_t(spec.n_experts)};
                stacked.type = slice.spec.type;
                stacked.data += slice.spec.data;
                expert.values = std::move(slice.values);
            }
            gguf.tensors.push_back(std::move(stacked));
        }
    }
}

}  // namespace headscope::test
