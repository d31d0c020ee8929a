// GPT-2's tensor table: see model_description.h.
#include "headscope/model_description.h"

namespace headscope {

std::vector<TensorSpec> gpt2_tensors(const Config& config) {
    const int64_t C = config.n_embd, V = config.vocab_size, P = config.n_positions;
    std::vector<TensorSpec> tensors = {{"wte.weight", {V, C}, Weight::wte, -1},
                                       {"wpe.weight", {P, C}, Weight::wpe, -1}};
    tensors.reserve(2 + 12 * static_cast<size_t>(config.n_layer) + 2);
    for (int l = 0; l < config.n_layer; ++l) {
        const std::string h = "h." + std::to_string(l) + ".";
        tensors.insert(tensors.end(), {{h + "ln_1.weight", {C}, Weight::ln_1_w, l},
                                       {h + "ln_1.bias", {C}, Weight::ln_1_b, l},
                                       {h + "attn.c_attn.weight", {C, 3 * C}, Weight::attn_w, l},  // [Q | K | V]
                                       {h + "attn.c_attn.bias", {3 * C}, Weight::attn_b, l},
                                       {h + "attn.c_proj.weight", {C, C}, Weight::attn_proj_w, l},
                                       {h + "attn.c_proj.bias", {C}, Weight::attn_proj_b, l},
                                       {h + "ln_2.weight", {C}, Weight::ln_2_w, l},
                                       {h + "ln_2.bias", {C}, Weight::ln_2_b, l},
                                       {h + "mlp.c_fc.weight", {C, 4 * C}, Weight::fc_w, l},
                                       {h + "mlp.c_fc.bias", {4 * C}, Weight::fc_b, l},
                                       {h + "mlp.c_proj.weight", {4 * C, C}, Weight::fc_proj_w, l},
                                       {h + "mlp.c_proj.bias", {C}, Weight::fc_proj_b, l}});
    }
    tensors.insert(tensors.end(), {{"ln_f.weight", {C}, Weight::ln_f_w, -1}, {"ln_f.bias", {C}, Weight::ln_f_b, -1}});
    return tensors;
}

}  // namespace headscope
