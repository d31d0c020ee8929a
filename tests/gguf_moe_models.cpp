// Test support: the mixtures of experts' layers as llama.cpp's converter
// writes them to GGUF (gguf_models.h): each layer's router as
// blk.N.ffn_gate_inp in F32 (llama.cpp's quantizer leaves it so), and its
// experts' gate, up and down each one 3-D tensor blk.N.ffn_{gate,up,down}_exps
// of ne [in, out, E], expert e's matrix its e-th slice, in the file's type.
#include <stdexcept>
#include <string>

#include "gguf_models.h"

namespace headscope::test {

namespace {

const char* const expert_parts[] = {"gate", "up", "down"};

}  // namespace

bool written_with_experts(const FamilySpec& spec, const std::string& hf) {
    for (int l = 0; l < spec.n_layer; ++l) {
        if (!spec.expert_layer(l)) continue;
        if (hf == spec.router_name(l)) return true;
        for (int e = 0; e < spec.n_experts; ++e)
            for (const char* part : expert_parts)
                if (hf == spec.expert_name(l, e, part)) return true;
    }
    return false;
}

void write_expert_tensors(GgufSpec& gguf, FamilyCheckpoint& checkpoint, DType matrices, uint64_t seed) {
    const FamilySpec& spec = checkpoint.spec;
    std::mt19937 rng(static_cast<unsigned>(seed + 1000));
    const auto find = [&](const std::string& name) -> NamedTensor& {
        for (NamedTensor& t : checkpoint.tensors)
            if (t.name == name) return t;
        throw std::out_of_range(name);
    };
    for (int l = 0; l < spec.n_layer; ++l) {
        if (!spec.expert_layer(l)) continue;
        const std::string layer = "blk." + std::to_string(l) + ".";
        NamedTensor& router = find(spec.router_name(l));
        Written w = tensor_as_stored(router, {layer + "ffn_gate_inp.weight", nullptr, false, false}, matrices, rng);
        gguf.tensors.push_back(std::move(w.spec));
        router.values = std::move(w.values);
        for (const char* part : expert_parts) {
            GgufTensorSpec stacked{layer + "ffn_" + part + "_exps.weight", {}, 0, ""};
            StoredAs as;
            as.name = stacked.name;
            for (int e = 0; e < spec.n_experts; ++e) {
                NamedTensor& expert = find(spec.expert_name(l, e, part));
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
