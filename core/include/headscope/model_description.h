// The one description of a model, shared by everything that reads or writes
// one: its hyperparameters (Config) and the tensors they imply (gpt2_tensors),
// each by its name in Hugging Face's files and by the weight of the forward it
// is. The loader checks a file against it; the trainer lays out its parameters
// and writes its checkpoints by it. Plain data: a family is a table, not a type.
// Legend: C channels, V vocab, L layers; a linear layer's weight is (in, out).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headscope {

struct Config {
    int n_layer = 0;      // L
    int n_head = 0;       // NH
    int n_embd = 0;       // C
    int n_positions = 0;  // longest T
    int vocab_size = 0;   // V
    int eos_token_id = 50256;
    float layer_norm_epsilon = 1e-5f;
    nlohmann::ordered_json training = nullptr;  // the "headscope_training" record of a model we trained
};

// The weights of GPT-2's forward, named as Model's fields.
enum class Weight {
    wte,
    wpe,  // token and position embeddings
    ln_1_w,
    ln_1_b,
    attn_w,
    attn_b,
    attn_proj_w,
    attn_proj_b,  // each layer's attention half
    ln_2_w,
    ln_2_b,
    fc_w,
    fc_b,
    fc_proj_w,
    fc_proj_b,  // each layer's MLP half
    ln_f_w,
    ln_f_b,  // the final LayerNorm
};

struct TensorSpec {
    std::string name;            // in the file, without "transformer.": e.g. "h.0.attn.c_attn.weight"
    std::vector<int64_t> shape;  // as the Config implies: e.g. (C, 3C)
    Weight weight;
    int layer;  // the layer it belongs to; -1 for wte, wpe and ln_f
};

// Every tensor of a GPT-2 checkpoint, in the order of the data in GPT-2's
// own files: wte (V, C), wpe (n_positions, C), each layer's 12, ln_f's 2.
std::vector<TensorSpec> gpt2_tensors(const Config& config);

// The field of `weights` that points at tensor `t`: `weights` is a Model,
// or any struct with Model's weight fields (the trainer's parameters and
// gradients), with `layers` already sized.
template <typename Weights>
auto& weight_pointer(Weights& weights, const TensorSpec& t) {
    switch (t.weight) {
        case Weight::wte: return weights.wte;
        case Weight::wpe: return weights.wpe;
        case Weight::ln_1_w: return weights.layers[t.layer].ln_1_w;
        case Weight::ln_1_b: return weights.layers[t.layer].ln_1_b;
        case Weight::attn_w: return weights.layers[t.layer].attn_w;
        case Weight::attn_b: return weights.layers[t.layer].attn_b;
        case Weight::attn_proj_w: return weights.layers[t.layer].attn_proj_w;
        case Weight::attn_proj_b: return weights.layers[t.layer].attn_proj_b;
        case Weight::ln_2_w: return weights.layers[t.layer].ln_2_w;
        case Weight::ln_2_b: return weights.layers[t.layer].ln_2_b;
        case Weight::fc_w: return weights.layers[t.layer].fc_w;
        case Weight::fc_b: return weights.layers[t.layer].fc_b;
        case Weight::fc_proj_w: return weights.layers[t.layer].fc_proj_w;
        case Weight::fc_proj_b: return weights.layers[t.layer].fc_proj_b;
        case Weight::ln_f_w: return weights.ln_f_w;
        case Weight::ln_f_b: return weights.ln_f_b;
    }
    std::abort();  // every Weight is a case above
}

}  // namespace headscope
