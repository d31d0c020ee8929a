// The families' configs and tensor tables: see model_description.h. Each
// family's keys, defaults and tensor names are those of its Hugging Face
// configuration_*.py and modeling_*.py. A family is one entry of `families`:
// its config.json reader, which sets the Config's layout fields, and its
// tensor names in the order of its files.
#include "headscope/model/model_description.h"

#include <optional>
#include <string_view>

#include "config_reader.h"
#include "family_configs.h"
#include "family_tensors.h"
#include "headscope/base/error.h"

namespace headscope {

namespace {

using json = nlohmann::json;

// The one dispatch on the family's name: its config.json reader and tensor names.
struct Family {
    std::string_view model_type;
    void (*read)(const ConfigReader&, Config&);
    const TensorNames& names;                    // an encoder–decoder's: its decoder's
    const TensorNames* encoder_names = nullptr;  // an encoder–decoder's encoder's
};

const Family families[] = {
    {"gpt2", read_gpt2, gpt2_names},
    {"llama", read_llama, llama_names},
    {"qwen2", read_qwen2, llama_names},
    {"qwen3", read_qwen3, llama_names},
    {"mistral", read_mistral, llama_names},
    {"mixtral", read_mixtral, mixtral_names},
    {"qwen3_moe", read_qwen3_moe, llama_names},
    {"olmoe", read_olmoe, llama_names},
    {"gpt_oss", read_gpt_oss, gpt_oss_names},
    {"olmo2", read_olmo2, olmo2_names},
    {"gpt_neox", read_gpt_neox, gpt_neox_names},
    {"phi3", read_phi3, phi3_names},
    {"gemma2", read_gemma2, gemma_names},
    {"gemma3_text", read_gemma3_text, gemma_names},
    {"gemma3", read_gemma3, gemma3_names},
    {"bert", read_bert, bert_names},
    {"roberta", read_roberta, roberta_names},
    {"xlm-roberta", read_roberta, roberta_names},
    {"distilbert", read_distilbert, distilbert_names},
    {"modernbert", read_modernbert, modernbert_names},
    {"t5", read_t5, t5_decoder_names, &t5_encoder_names},
    {"bart", read_bart, bart_decoder_names, &bart_encoder_names},
    {"marian", read_marian, bart_decoder_names, &bart_encoder_names},
};

const Family* find_family(std::string_view model_type) {
    for (const Family& family : families)
        if (family.model_type == model_type) return &family;
    return nullptr;
}

const Family& family_of(const Config& config) {
    const Family* family = find_family(config.architecture);
    if (!family) throw Error("model_type '" + config.architecture + "' is not supported");
    return *family;
}

// The names of the stack `config` describes: an encoder–decoder's encoder's, or the family's own.
const TensorNames& stack_names(const Config& config) {
    const Family& family = family_of(config);
    return config.encoder_stack ? *family.encoder_names : family.names;
}

// Whether `config`'s model has `weight` at all.
bool has_weight(const Config& c, Weight weight) {
    const bool layer_norm = c.norm == Norm::layer_norm && c.norm_bias, fused = c.qkv_layout != QkvLayout::separate;
    const bool gated_mlp = gated(c.mlp), cross = c.is_encoder_decoder();
    switch (weight) {
        case Weight::wpe: return c.positions == Positions::learned;
        case Weight::rel_bias: return c.positions == Positions::relative;
        case Weight::lm_head: return !c.tied_embeddings;
        case Weight::ln_1_w:
        case Weight::ln_2_w: return c.input_norms;
        case Weight::ln_1_b:
        case Weight::ln_2_b: return layer_norm && c.input_norms;
        case Weight::attn_out_norm_w:
        case Weight::mlp_out_norm_w: return c.output_norms;
        case Weight::ln_f_w: return !c.post_norm;
        case Weight::ln_f_b: return layer_norm && !c.post_norm;
        case Weight::wtt: return c.type_vocab_size > 0;
        case Weight::emb_ln_w: return c.embedding_norm;
        case Weight::emb_ln_b: return c.embedding_norm && c.norm_bias;
        case Weight::head_dense_w:
        case Weight::head_ln_w: return c.mlm_head;
        case Weight::head_dense_b: return c.mlm_head && c.head_bias;
        case Weight::head_ln_b: return c.mlm_head && c.norm_bias;
        case Weight::lm_bias: return (c.mlm_head || cross) && c.logits_bias;
        case Weight::attn_w: return fused;
        case Weight::attn_b: return fused && c.qkv_bias;
        case Weight::q_w:
        case Weight::k_w:
        case Weight::v_w: return !fused;
        case Weight::q_b:
        case Weight::k_b:
        case Weight::v_b: return !fused && c.qkv_bias;
        case Weight::q_norm:
        case Weight::k_norm: return c.qk_norm;
        case Weight::sinks: return c.attention_sinks;
        case Weight::attn_proj_b: return c.o_bias;
        case Weight::gate_w: return gated_mlp && !c.fused_gate_up;
        case Weight::fc_w: return !c.fused_gate_up;
        case Weight::gate_up_w: return c.fused_gate_up;
        case Weight::fc_b: return !gated_mlp && c.mlp_bias;
        case Weight::fc_proj_b: return c.mlp != Mlp::swiglu && c.mlp_bias;
        case Weight::cross_q_w:
        case Weight::cross_k_w:
        case Weight::cross_v_w:
        case Weight::cross_proj_w:
        case Weight::ln_x_w: return cross;
        case Weight::cross_q_b:
        case Weight::cross_k_b:
        case Weight::cross_v_b: return cross && c.qkv_bias;
        case Weight::cross_proj_b: return cross && c.o_bias;
        case Weight::ln_x_b: return cross && layer_norm;
        case Weight::router_w: return c.has_experts();
        case Weight::router_b: return c.has_experts() && c.router_bias;
        case Weight::expert_gate_w:
        case Weight::expert_up_w:
        case Weight::expert_down_w: return c.has_experts() && !c.packed_experts;
        case Weight::expert_gate_b:
        case Weight::expert_up_b:
        case Weight::expert_down_b: return c.has_experts() && !c.packed_experts && c.expert_biases;
        default: return true;
    }
}

// A weight's shape in the file: a vector's length, an embedding table (rows,
// C), or a matrix (out, in), stored (in, out) where the family does so.
std::vector<int64_t> weight_shape(const Config& c, Weight weight) {
    const int64_t C = c.n_embd, V = c.vocab_size, P = c.n_positions, F = c.mlp_size();
    const int64_t hs = c.head_size(), Q = c.n_head * hs, KV = c.kv_heads() * hs;
    const auto matrix = [&](int64_t out, int64_t in) {
        return c.weights_out_by_in ? std::vector<int64_t>{out, in} : std::vector<int64_t>{in, out};
    };
    switch (weight) {
        case Weight::wte:
        case Weight::lm_head: return {V, C};
        case Weight::wpe: return {P + c.position_offset, C};
        case Weight::wtt: return {c.type_vocab_size, C};
        case Weight::head_dense_w: return matrix(C, C);
        case Weight::lm_bias: return c.is_encoder_decoder() ? std::vector<int64_t>{1, V} : std::vector<int64_t>{V};
        case Weight::rel_bias: return {c.relative_buckets, c.n_head};
        case Weight::cross_q_w: return matrix(Q, C);
        case Weight::cross_k_w:
        case Weight::cross_v_w: return matrix(KV, C);
        case Weight::cross_q_b: return {Q};
        case Weight::cross_k_b:
        case Weight::cross_v_b: return {KV};
        case Weight::cross_proj_w: return matrix(C, Q);
        case Weight::attn_w: return matrix(Q + 2 * KV, C);
        case Weight::attn_b: return {Q + 2 * KV};
        case Weight::q_w: return matrix(Q, C);
        case Weight::k_w:
        case Weight::v_w: return matrix(KV, C);
        case Weight::q_b: return {Q};
        case Weight::k_b:
        case Weight::v_b: return {KV};
        case Weight::q_norm: return {c.qk_norm_whole ? Q : hs};
        case Weight::k_norm: return {c.qk_norm_whole ? KV : hs};
        case Weight::sinks: return {c.n_head};
        case Weight::attn_proj_w: return matrix(C, Q);
        case Weight::fc_w:
        case Weight::gate_w: return matrix(F, C);
        case Weight::gate_up_w: return matrix(2 * F, C);
        case Weight::fc_b: return {F};
        case Weight::fc_proj_w: return matrix(C, F);
        case Weight::router_w: return matrix(c.n_experts, C);
        case Weight::router_b: return {c.n_experts};
        case Weight::expert_gate_w:
        case Weight::expert_up_w: return matrix(c.expert_mlp_dim, C);
        case Weight::expert_down_w: return matrix(C, c.expert_mlp_dim);
        case Weight::expert_gate_b:
        case Weight::expert_up_b: return {c.expert_mlp_dim};
        default: return {C};  // the norms' vectors and the output biases
    }
}

}  // namespace

const char* to_string(Norm norm) { return word_of(norm_choices, norm); }
const char* to_string(Positions positions) { return word_of(positions_choices, positions); }
const char* to_string(Mlp mlp) { return word_of(mlp_choices, mlp); }

std::string routing_words(const Config& config) {
    if (!config.has_experts()) return "";
    const std::string E = std::to_string(config.n_experts), k = std::to_string(config.experts_per_token);
    const std::string bias = config.router_bias ? " (with its bias)" : "";
    if (config.routing == Routing::top_k_then_softmax)
        return "the " + k + " largest of the " + E + " experts' logits" + bias +
               " (equal ones: the lower expert), a softmax over them";
    return "softmax over the " + E + " experts" + bias + ", the " + k + " largest kept (equal ones: the lower expert)" +
           (config.normalize_top_k ? ", divided by their sum" : ", as they are");
}

const char* model_kind(const Config& config) {
    return config.is_encoder_decoder() ? "encoder-decoder" : config.is_encoder() ? "encoder" : "decoder";
}

Config encoder_config(const Config& decoder) {
    Config c = decoder;
    c.n_layer = decoder.encoder_layers;
    c.encoder_layers = 0;
    c.encoder_stack = true;
    c.causal = false;
    return c;
}

const char* supported_architectures() {
    static const std::string words = [] {
        std::string joined;
        for (const Family& family : families) joined += (joined.empty() ? "" : ", ") + std::string(family.model_type);
        return joined;
    }();
    return words.c_str();
}

Config config_from_json(const json& j, const std::string& file) {
    if (!j.is_object()) throw Error(file + ": not a JSON object");
    const ConfigReader r(j, file);
    Config c;
    c.architecture = r.word("model_type", "gpt2");  // configs older than model_type are GPT-2's
    const Family* family = find_family(c.architecture);
    if (!family)
        r.refuse("model_type '" + c.architecture + "' is not supported (supported: " + supported_architectures() + ")");
    family->read(r, c);
    if (c.more_eos_ids.empty()) c.more_eos_ids = r.more_token_ids("eos_token_id", c.vocab_size);
    c.forced_bos_token_id = r.token_id("forced_bos_token_id", c.vocab_size, -1);
    if (c.n_head % c.kv_heads() != 0)
        r.refuse("num_attention_heads " + std::to_string(c.n_head) + " is not a multiple of num_key_value_heads " +
                 std::to_string(c.kv_heads()));
    if (c.positions == Positions::rotary && c.head_size() * c.rope.fraction < 2)
        r.refuse("the rotary part of a head (" + std::to_string(c.head_size()) + " x " +
                 std::to_string(c.rope.fraction) + ") is less than one pair of dims");
    if (const json* training = r.find("headscope_training")) c.training = *training;
    return c;
}

namespace {

// Whether `weight` is one of a dense MLP's.
bool dense_mlp_weight(Weight weight) {
    switch (weight) {
        case Weight::fc_w:
        case Weight::fc_b:
        case Weight::gate_w:
        case Weight::gate_up_w:
        case Weight::fc_proj_w:
        case Weight::fc_proj_b: return true;
        default: return false;
    }
}

// Whether a model of `config` has the tensor `named` names in layer `layer`
// (-1: outside the layers): a layer of experts has a router and experts, the others a dense MLP.
bool has_tensor(const Config& config, const Named& named, int layer) {
    const bool unnormed = layer == 0 && !config.first_attention_norm &&
                          (named.weight == Weight::ln_1_w || named.weight == Weight::ln_1_b);
    const bool applies = !named.applies || named.applies(config);
    const bool experts = layer >= 0 && config.expert_layer(layer);
    const bool expert_part =
        named.weight == Weight::router_w || named.weight == Weight::router_b || expert_weight(named.weight);
    const bool in_mlp = experts ? !dense_mlp_weight(named.weight) : !expert_part;
    return has_weight(config, named.weight) && !unnormed && applies && in_mlp;
}

// An expert's tensor name: the '*' of the family's name replaced by the expert's index.
std::string expert_name(const char* name, int expert) {
    std::string named = name;
    const size_t star = named.find('*');
    return star == std::string::npos ? named : named.replace(star, 1, std::to_string(expert));
}

TensorSpec spec_of(const Config& config, const Named& named, const std::string& prefix, int layer, int expert = -1) {
    return {prefix + expert_name(named.name, expert), weight_shape(config, named.weight), named.weight, layer, expert};
}

std::string layer_prefix(const TensorNames& names, int layer) {
    return names.layer_prefix + std::to_string(layer) + ".";
}

}  // namespace

std::vector<TensorSpec> model_tensors(const Config& config) {
    const TensorNames& names = stack_names(config);
    std::vector<TensorSpec> t;
    const auto add = [&](const Named& named, const std::string& prefix, int layer) {
        if (!has_tensor(config, named, layer)) return;
        if (!expert_weight(named.weight)) t.push_back(spec_of(config, named, prefix, layer));
        for (int e = 0; expert_weight(named.weight) && e < config.n_experts; ++e)
            t.push_back(spec_of(config, named, prefix, layer, e));
    };
    for (const Named& named : names.before_layers) add(named, "", -1);
    for (int l = 0; l < config.n_layer; ++l)
        for (const Named& named : names.layer) add(named, layer_prefix(names, l), l);
    for (const Named& named : names.after_layers) add(named, "", -1);
    return t;
}

std::optional<TensorSpec> tensor_spec(const Config& config, Weight weight, int layer, int expert) {
    const TensorNames& names = stack_names(config);
    if (layer >= config.n_layer || expert >= config.n_experts) return std::nullopt;
    const auto find = [&](const std::vector<Named>& list, const std::string& prefix) -> std::optional<TensorSpec> {
        for (const Named& named : list)
            if (named.weight == weight && has_tensor(config, named, layer))
                return spec_of(config, named, prefix, layer, expert);
        return std::nullopt;
    };
    if (layer >= 0) return find(names.layer, layer_prefix(names, layer));
    if (auto before = find(names.before_layers, "")) return before;
    return find(names.after_layers, "");
}

bool stored_out_by_in(const Config& config, Weight weight) {
    // An untied output embedding is a Linear (V, C) in every family, GPT-2's too.
    return weight == Weight::lm_head ||
           (config.weights_out_by_in && weight != Weight::wte && weight != Weight::wpe && weight != Weight::wtt);
}

const char* optional_tensor_prefix(const Config& config) { return stack_names(config).optional_prefix; }

std::string legacy_tensor_name(const std::string& name) {
    for (const auto& [now, then] :
         {std::pair{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}})
        if (name.ends_with(now)) return name.substr(0, name.size() - std::string_view(now).size()) + then;
    return "";
}

std::string older_tensor_name(const Config& config, const std::string& name) {
    for (const auto& [now, then] : stack_names(config).older_prefixes)
        if (name.starts_with(now)) return then + name.substr(std::string_view(now).size());
    return "";
}

std::string tensor_name(const Config& config, Weight weight) {
    const TensorNames& names = stack_names(config);
    for (const auto* list : {&names.before_layers, &names.after_layers})
        for (const Named& named : *list)
            if (named.weight == weight) return named.name;
    throw Error("the family has no tensor of that role outside its layers");
}

std::string masked_lm_head_name(const Config& config) { return tensor_name(config, Weight::head_dense_w); }

std::string output_embedding_name(const Config& config) { return tensor_name(config, Weight::lm_head); }

std::string module_name(const Config& config, Weight weight) {
    for (const Named& named : stack_names(config).layer) {
        if (named.weight != weight) continue;
        std::string name = named.name;  // "attn.c_attn.weight": its last part before ".weight"
        name.erase(name.rfind('.'));
        return name.substr(name.rfind('.') + 1);
    }
    throw Error("the family has no weight of that role");
}

}  // namespace headscope
