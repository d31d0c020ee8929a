// The mixtures of experts' config.json readers (family_configs.h): Mixtral,
// Qwen 3 MoE, OLMoE and gpt-oss, each its attention's family's reader and
// then its experts' keys, as configuration_mixtral.py,
// configuration_qwen3_moe.py, configuration_olmoe.py and
// configuration_gpt_oss.py name them and default them.
#include <string>

#include "family_configs.h"

namespace headscope {

namespace {

// The experts' count (`count_key`), per token and hidden size, checked
// against each other; the routing every one of these families has.
void read_experts(const ConfigReader& r, Config& c, const char* count_key, int default_count, int default_per_token,
                  int expert_mlp_dim) {
    c.n_experts = r.positive_int(count_key, default_count);
    c.experts_per_token = r.positive_int("num_experts_per_tok", default_per_token);
    if (c.experts_per_token > c.n_experts)
        r.refuse("num_experts_per_tok " + std::to_string(c.experts_per_token) + " is more than the " +
                 std::to_string(c.n_experts) + " experts (" + count_key + ")");
    c.expert_mlp_dim = expert_mlp_dim;
    c.routing = Routing::softmax_then_top_k;
}

// Qwen 3 MoE's layers of dense MLPs: those mlp_only_layers lists, and those
// whose (layer + 1) is not a multiple of decoder_sparse_step.
std::vector<bool> qwen3_moe_expert_layers(const ConfigReader& r, const Config& c) {
    const int step = r.positive_int("decoder_sparse_step", 1);
    std::vector<bool> experts(static_cast<size_t>(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) experts[static_cast<size_t>(l)] = (l + 1) % step == 0;
    const ConfigReader::json* dense = r.find("mlp_only_layers");
    if (dense && !dense->is_array()) r.refuse("mlp_only_layers is " + describe_json(*dense) + ", not a list of layers");
    for (const auto& layer : dense ? *dense : ConfigReader::json::array()) {
        if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() >= c.n_layer)
            r.refuse("mlp_only_layers holds " + describe_json(layer) + ", not a layer below num_hidden_layers " +
                     std::to_string(c.n_layer));
        experts[layer.get<size_t>()] = false;
    }
    return experts;
}

}  // namespace

// Mixtral: Mistral's attention (its window possibly null); every layer's MLP
// is the mixture, experts of intermediate_size, the chosen weights always
// renormalized.
void read_mixtral(const ConfigReader& r, Config& c) {
    read_mistral(r, c);
    read_experts(r, c, "num_local_experts", 8, 2, c.mlp_dim);
    c.normalize_top_k = true;
}

// Qwen 3 MoE: Qwen 3's attention; experts of moe_intermediate_size, the
// chosen weights renormalized when norm_topk_prob; dense layers of
// intermediate_size where qwen3_moe_expert_layers says.
void read_qwen3_moe(const ConfigReader& r, Config& c) {
    read_qwen3(r, c);
    read_experts(r, c, "num_experts", 128, 8, r.positive_int("moe_intermediate_size", 768));
    c.normalize_top_k = r.flag("norm_topk_prob", false);
    c.expert_layers = qwen3_moe_expert_layers(r, c);
}

// OLMoE: OLMo's pre-norm layers with Q and K each RMS-normed as a whole
// (OLMo 2's qk-norm), heads of C / NH whatever the config says, every MLP
// the mixture of experts of intermediate_size. clip_qkv (clamping Q, K and V)
// is not supported.
void read_olmoe(const ConfigReader& r, Config& c) {
    read_llama(r, c);
    if (c.n_embd % c.n_head != 0)
        r.refuse("hidden_size " + std::to_string(c.n_embd) + " is not divisible by num_attention_heads " +
                 std::to_string(c.n_head));
    c.head_dim = c.n_embd / c.n_head;
    c.layer_norm_epsilon = r.epsilon("rms_norm_eps", 1e-5f);
    c.qk_norm = c.qk_norm_whole = true;
    if (const ConfigReader::json* clip = r.find("clip_qkv"))
        r.refuse("clip_qkv is " + describe_json(*clip) + ": clamping Q, K and V is not supported (only null)");
    read_experts(r, c, "num_experts", 64, 8, c.mlp_dim);
    c.normalize_top_k = r.flag("norm_topk_prob", false);
}

// gpt-oss: Llama's attention with biases on all four projections (attention_bias,
// true unless false), a learned sink logit per head, the sliding window on the
// layers layer_types names (default: the even ones), YaRN's rope_scaling (its
// default where none is given); every MLP the mixture of experts of
// intermediate_size, routed top-k then softmax by a router with a bias, its
// experts' clamped SwiGLU (swiglu_limit, swiglu_alpha) stored as MXFP4 blocks.
void read_gpt_oss(const ConfigReader& r, Config& c) {
    read_llama_keys(r, c, false);
    c.layer_norm_epsilon = r.epsilon("rms_norm_eps", 1e-5f);
    c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
    c.attention_sinks = true;
    c.sliding_window = r.positive_int("sliding_window", 128);
    c.windowed_layers = windowed_layers(r, c.n_layer, 2);
    c.rope.theta = r.positive_number("rope_theta", 150000);
    const ConfigReader::json* scaling = r.find("rope_scaling");
    const bool given = scaling && !scaling->is_null();  // null, as absent: configuration_gpt_oss.py's default
    if (r.find("rope_parameters") && !given)
        r.refuse("rope_parameters is not read (only rope_scaling with rope_theta)");
    const ConfigReader::json default_yarn = {{"rope_type", "yarn"}, {"factor", 32.0},
                                             {"beta_fast", 32.0},   {"beta_slow", 1.0},
                                             {"truncate", false},   {"original_max_position_embeddings", 4096}};
    const ConfigReader s = given ? r.object("rope_scaling") : ConfigReader(default_yarn, "", "rope_scaling");
    if (const std::string type = s.word("rope_type", s.word("type", "yarn")); type != "yarn")
        r.refuse("rope_scaling of type '" + type + "' is not supported (only yarn)");
    read_yarn(s, c, c.head_dim);
    read_experts(r, c, "num_local_experts", 128, 4, c.mlp_dim);
    c.routing = Routing::top_k_then_softmax;
    c.router_bias = c.packed_experts = c.expert_biases = true;
    c.swiglu_limit = r.positive_number("swiglu_limit", 7);
    c.swiglu_alpha = r.positive_number("swiglu_alpha", 1.702f);
}

}  // namespace headscope
