// The families' configs and tensor tables: see model_description.h. Each
// family's keys, defaults and tensor names are those of its Hugging Face
// configuration_*.py and modeling_*.py. A family is one entry of `families`:
// its config.json reader, which sets the Config's layout fields, and its
// tensor names in the order of its files.
#include "headscope/model/model_description.h"

#include <string_view>

#include "config_reader.h"
#include "family_configs.h"
#include "headscope/base/error.h"

namespace headscope {

namespace {

using json = nlohmann::json;

// ---- The families' tensor names ----

struct Named {
    Weight weight;
    const char* name;  // after the layer's prefix for a layer's weight
};

// Hugging Face's names of a family's tensors, each list in its files' order.
struct TensorNames {
    const char* optional_prefix;  // found with or without it
    std::vector<Named> before_layers;
    const char* layer_prefix;  // + the layer's index + "."
    std::vector<Named> layer;
    std::vector<Named> after_layers;
};

const TensorNames gpt2_names = {
    "transformer.",
    {{Weight::wte, "wte.weight"}, {Weight::wpe, "wpe.weight"}},
    "h.",
    {{Weight::ln_1_w, "ln_1.weight"},
     {Weight::ln_1_b, "ln_1.bias"},
     {Weight::attn_w, "attn.c_attn.weight"},
     {Weight::attn_b, "attn.c_attn.bias"},
     {Weight::attn_proj_w, "attn.c_proj.weight"},
     {Weight::attn_proj_b, "attn.c_proj.bias"},
     {Weight::ln_2_w, "ln_2.weight"},
     {Weight::ln_2_b, "ln_2.bias"},
     {Weight::fc_w, "mlp.c_fc.weight"},
     {Weight::fc_b, "mlp.c_fc.bias"},
     {Weight::fc_proj_w, "mlp.c_proj.weight"},
     {Weight::fc_proj_b, "mlp.c_proj.bias"}},
    {{Weight::ln_f_w, "ln_f.weight"}, {Weight::ln_f_b, "ln_f.bias"}, {Weight::lm_head, "lm_head.weight"}},
};

const TensorNames llama_names = {
    "",
    {{Weight::wte, "model.embed_tokens.weight"}},
    "model.layers.",
    {{Weight::ln_1_w, "input_layernorm.weight"},
     {Weight::q_w, "self_attn.q_proj.weight"},
     {Weight::k_w, "self_attn.k_proj.weight"},
     {Weight::v_w, "self_attn.v_proj.weight"},
     {Weight::q_b, "self_attn.q_proj.bias"},
     {Weight::k_b, "self_attn.k_proj.bias"},
     {Weight::v_b, "self_attn.v_proj.bias"},
     {Weight::q_norm, "self_attn.q_norm.weight"},
     {Weight::k_norm, "self_attn.k_norm.weight"},
     {Weight::attn_proj_w, "self_attn.o_proj.weight"},
     {Weight::attn_proj_b, "self_attn.o_proj.bias"},
     {Weight::ln_2_w, "post_attention_layernorm.weight"},
     {Weight::gate_w, "mlp.gate_proj.weight"},
     {Weight::fc_w, "mlp.up_proj.weight"},
     {Weight::fc_proj_w, "mlp.down_proj.weight"}},
    {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

const TensorNames gpt_neox_names = {
    "",
    {{Weight::wte, "gpt_neox.embed_in.weight"}},
    "gpt_neox.layers.",
    {{Weight::ln_1_w, "input_layernorm.weight"},
     {Weight::ln_1_b, "input_layernorm.bias"},
     {Weight::ln_2_w, "post_attention_layernorm.weight"},
     {Weight::ln_2_b, "post_attention_layernorm.bias"},
     {Weight::attn_w, "attention.query_key_value.weight"},
     {Weight::attn_b, "attention.query_key_value.bias"},
     {Weight::attn_proj_w, "attention.dense.weight"},
     {Weight::attn_proj_b, "attention.dense.bias"},
     {Weight::fc_w, "mlp.dense_h_to_4h.weight"},
     {Weight::fc_b, "mlp.dense_h_to_4h.bias"},
     {Weight::fc_proj_w, "mlp.dense_4h_to_h.weight"},
     {Weight::fc_proj_b, "mlp.dense_4h_to_h.bias"}},
    {{Weight::ln_f_w, "gpt_neox.final_layer_norm.weight"},
     {Weight::ln_f_b, "gpt_neox.final_layer_norm.bias"},
     {Weight::lm_head, "embed_out.weight"}},
};

// BERT's layers, which RoBERTa and XLM-RoBERTa share.
const std::vector<Named> bert_embeddings = {{Weight::wte, "embeddings.word_embeddings.weight"},
                                            {Weight::wpe, "embeddings.position_embeddings.weight"},
                                            {Weight::wtt, "embeddings.token_type_embeddings.weight"},
                                            {Weight::emb_ln_w, "embeddings.LayerNorm.weight"},
                                            {Weight::emb_ln_b, "embeddings.LayerNorm.bias"}};
const std::vector<Named> bert_layer = {{Weight::q_w, "attention.self.query.weight"},
                                       {Weight::q_b, "attention.self.query.bias"},
                                       {Weight::k_w, "attention.self.key.weight"},
                                       {Weight::k_b, "attention.self.key.bias"},
                                       {Weight::v_w, "attention.self.value.weight"},
                                       {Weight::v_b, "attention.self.value.bias"},
                                       {Weight::attn_proj_w, "attention.output.dense.weight"},
                                       {Weight::attn_proj_b, "attention.output.dense.bias"},
                                       {Weight::ln_1_w, "attention.output.LayerNorm.weight"},
                                       {Weight::ln_1_b, "attention.output.LayerNorm.bias"},
                                       {Weight::fc_w, "intermediate.dense.weight"},
                                       {Weight::fc_b, "intermediate.dense.bias"},
                                       {Weight::fc_proj_w, "output.dense.weight"},
                                       {Weight::fc_proj_b, "output.dense.bias"},
                                       {Weight::ln_2_w, "output.LayerNorm.weight"},
                                       {Weight::ln_2_b, "output.LayerNorm.bias"}};

// BertForMaskedLM's names; the masked-LM head's are never prefixed.
const TensorNames bert_names = {"bert.",
                                bert_embeddings,
                                "encoder.layer.",
                                bert_layer,
                                {{Weight::head_dense_w, "cls.predictions.transform.dense.weight"},
                                 {Weight::head_dense_b, "cls.predictions.transform.dense.bias"},
                                 {Weight::head_ln_w, "cls.predictions.transform.LayerNorm.weight"},
                                 {Weight::head_ln_b, "cls.predictions.transform.LayerNorm.bias"},
                                 {Weight::lm_bias, "cls.predictions.bias"},
                                 {Weight::lm_head, "cls.predictions.decoder.weight"}}};

const TensorNames roberta_names = {"roberta.",
                                   bert_embeddings,
                                   "encoder.layer.",
                                   bert_layer,
                                   {{Weight::head_dense_w, "lm_head.dense.weight"},
                                    {Weight::head_dense_b, "lm_head.dense.bias"},
                                    {Weight::head_ln_w, "lm_head.layer_norm.weight"},
                                    {Weight::head_ln_b, "lm_head.layer_norm.bias"},
                                    {Weight::lm_bias, "lm_head.bias"},
                                    {Weight::lm_head, "lm_head.decoder.weight"}}};

const TensorNames distilbert_names = {
    "distilbert.",
    {{Weight::wte, "embeddings.word_embeddings.weight"},
     {Weight::wpe, "embeddings.position_embeddings.weight"},
     {Weight::emb_ln_w, "embeddings.LayerNorm.weight"},
     {Weight::emb_ln_b, "embeddings.LayerNorm.bias"}},
    "transformer.layer.",
    {{Weight::q_w, "attention.q_lin.weight"},
     {Weight::q_b, "attention.q_lin.bias"},
     {Weight::k_w, "attention.k_lin.weight"},
     {Weight::k_b, "attention.k_lin.bias"},
     {Weight::v_w, "attention.v_lin.weight"},
     {Weight::v_b, "attention.v_lin.bias"},
     {Weight::attn_proj_w, "attention.out_lin.weight"},
     {Weight::attn_proj_b, "attention.out_lin.bias"},
     {Weight::ln_1_w, "sa_layer_norm.weight"},
     {Weight::ln_1_b, "sa_layer_norm.bias"},
     {Weight::fc_w, "ffn.lin1.weight"},
     {Weight::fc_b, "ffn.lin1.bias"},
     {Weight::fc_proj_w, "ffn.lin2.weight"},
     {Weight::fc_proj_b, "ffn.lin2.bias"},
     {Weight::ln_2_w, "output_layer_norm.weight"},
     {Weight::ln_2_b, "output_layer_norm.bias"}},
    {{Weight::head_dense_w, "vocab_transform.weight"},
     {Weight::head_dense_b, "vocab_transform.bias"},
     {Weight::head_ln_w, "vocab_layer_norm.weight"},
     {Weight::head_ln_b, "vocab_layer_norm.bias"},
     {Weight::lm_bias, "vocab_projector.bias"},
     {Weight::lm_head, "vocab_projector.weight"}},
};

const TensorNames modernbert_names = {
    "",
    {{Weight::wte, "model.embeddings.tok_embeddings.weight"},
     {Weight::emb_ln_w, "model.embeddings.norm.weight"},
     {Weight::emb_ln_b, "model.embeddings.norm.bias"}},
    "model.layers.",
    {{Weight::ln_1_w, "attn_norm.weight"},
     {Weight::ln_1_b, "attn_norm.bias"},
     {Weight::attn_w, "attn.Wqkv.weight"},
     {Weight::attn_b, "attn.Wqkv.bias"},
     {Weight::attn_proj_w, "attn.Wo.weight"},
     {Weight::attn_proj_b, "attn.Wo.bias"},
     {Weight::ln_2_w, "mlp_norm.weight"},
     {Weight::ln_2_b, "mlp_norm.bias"},
     {Weight::gate_up_w, "mlp.Wi.weight"},
     {Weight::fc_proj_w, "mlp.Wo.weight"},
     {Weight::fc_proj_b, "mlp.Wo.bias"}},
    {{Weight::ln_f_w, "model.final_norm.weight"},
     {Weight::ln_f_b, "model.final_norm.bias"},
     {Weight::head_dense_w, "head.dense.weight"},
     {Weight::head_dense_b, "head.dense.bias"},
     {Weight::head_ln_w, "head.norm.weight"},
     {Weight::head_ln_b, "head.norm.bias"},
     {Weight::lm_bias, "decoder.bias"},
     {Weight::lm_head, "decoder.weight"}},
};

// The one dispatch on the family's name: its config.json reader and tensor names.
struct Family {
    std::string_view model_type;
    void (*read)(const ConfigReader&, Config&);
    const TensorNames& names;
};

const Family families[] = {
    {"gpt2", read_gpt2, gpt2_names},
    {"llama", read_llama, llama_names},
    {"qwen2", read_qwen2, llama_names},
    {"qwen3", read_qwen3, llama_names},
    {"mistral", read_mistral, llama_names},
    {"gpt_neox", read_gpt_neox, gpt_neox_names},
    {"bert", read_bert, bert_names},
    {"roberta", read_roberta, roberta_names},
    {"xlm-roberta", read_roberta, roberta_names},
    {"distilbert", read_distilbert, distilbert_names},
    {"modernbert", read_modernbert, modernbert_names},
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

// Whether `config`'s model has `weight` at all.
bool has_weight(const Config& c, Weight weight) {
    const bool layer_norm = c.norm == Norm::layer_norm && c.norm_bias, fused = c.qkv_layout != QkvLayout::separate;
    const bool gated = c.mlp == Mlp::swiglu || c.mlp == Mlp::geglu;
    switch (weight) {
        case Weight::wpe: return c.positions == Positions::learned;
        case Weight::lm_head: return !c.tied_embeddings;
        case Weight::ln_1_b:
        case Weight::ln_2_b: return layer_norm;
        case Weight::ln_f_w: return !c.post_norm;
        case Weight::ln_f_b: return layer_norm && !c.post_norm;
        case Weight::wtt: return c.type_vocab_size > 0;
        case Weight::emb_ln_w: return c.embedding_norm;
        case Weight::emb_ln_b: return c.embedding_norm && c.norm_bias;
        case Weight::head_dense_w:
        case Weight::head_ln_w: return c.mlm_head;
        case Weight::head_dense_b: return c.mlm_head && c.head_bias;
        case Weight::head_ln_b: return c.mlm_head && c.norm_bias;
        case Weight::lm_bias: return c.mlm_head && c.logits_bias;
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
        case Weight::attn_proj_b: return c.o_bias;
        case Weight::gate_w: return c.mlp == Mlp::swiglu;
        case Weight::fc_w: return c.mlp != Mlp::geglu;
        case Weight::gate_up_w: return c.mlp == Mlp::geglu;
        case Weight::fc_b: return !gated && c.mlp_bias;
        case Weight::fc_proj_b: return c.mlp != Mlp::swiglu && c.mlp_bias;
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
        case Weight::lm_bias: return {V};
        case Weight::attn_w: return matrix(Q + 2 * KV, C);
        case Weight::attn_b: return {Q + 2 * KV};
        case Weight::q_w: return matrix(Q, C);
        case Weight::k_w:
        case Weight::v_w: return matrix(KV, C);
        case Weight::q_b: return {Q};
        case Weight::k_b:
        case Weight::v_b: return {KV};
        case Weight::q_norm:
        case Weight::k_norm: return {hs};
        case Weight::attn_proj_w: return matrix(C, Q);
        case Weight::fc_w:
        case Weight::gate_w: return matrix(F, C);
        case Weight::gate_up_w: return matrix(2 * F, C);
        case Weight::fc_b: return {F};
        case Weight::fc_proj_w: return matrix(C, F);
        default: return {C};  // the norms' vectors and the output biases
    }
}

}  // namespace

const char* to_string(Norm norm) { return word_of(norm_choices, norm); }
const char* to_string(Positions positions) { return word_of(positions_choices, positions); }
const char* to_string(Mlp mlp) { return word_of(mlp_choices, mlp); }

const char* model_kind(const Config& config) { return config.is_encoder() ? "encoder" : "decoder"; }

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
    if (c.n_head % c.kv_heads() != 0)
        r.refuse("num_attention_heads " + std::to_string(c.n_head) + " is not a multiple of num_key_value_heads " +
                 std::to_string(c.kv_heads()));
    if (c.positions == Positions::rotary && c.head_size() * c.rope.fraction < 2)
        r.refuse("the rotary part of a head (" + std::to_string(c.head_size()) + " x " +
                 std::to_string(c.rope.fraction) + ") is less than one pair of dims");
    if (const json* training = r.find("headscope_training")) c.training = *training;
    return c;
}

std::vector<TensorSpec> model_tensors(const Config& config) {
    const TensorNames& names = family_of(config).names;
    std::vector<TensorSpec> t;
    const auto add = [&](const Named& named, const std::string& prefix, int layer) {
        const bool unnormed = layer == 0 && !config.first_attention_norm &&
                              (named.weight == Weight::ln_1_w || named.weight == Weight::ln_1_b);
        if (has_weight(config, named.weight) && !unnormed)
            t.push_back({prefix + named.name, weight_shape(config, named.weight), named.weight, layer});
    };
    for (const Named& named : names.before_layers) add(named, "", -1);
    for (int l = 0; l < config.n_layer; ++l)
        for (const Named& named : names.layer) add(named, names.layer_prefix + std::to_string(l) + ".", l);
    for (const Named& named : names.after_layers) add(named, "", -1);
    return t;
}

bool stored_out_by_in(const Config& config, Weight weight) {
    return config.weights_out_by_in && weight != Weight::wte && weight != Weight::wpe && weight != Weight::wtt;
}

const char* optional_tensor_prefix(const Config& config) { return family_of(config).names.optional_prefix; }

std::string legacy_tensor_name(const std::string& name) {
    for (const auto& [now, then] :
         {std::pair{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}})
        if (name.ends_with(now)) return name.substr(0, name.size() - std::string_view(now).size()) + then;
    return "";
}

std::string masked_lm_head_name(const Config& config) {
    for (const Named& named : family_of(config).names.after_layers)
        if (named.weight == Weight::head_dense_w) return named.name;
    throw Error("the family has no masked-LM head");
}

std::string output_embedding_name(const Config& config) {
    for (const Named& named : family_of(config).names.after_layers)
        if (named.weight == Weight::lm_head) return named.name;
    throw Error("the family names no output embedding");
}

std::string module_name(const Config& config, Weight weight) {
    for (const Named& named : family_of(config).names.layer) {
        if (named.weight != weight) continue;
        std::string name = named.name;  // "attn.c_attn.weight": its last part before ".weight"
        name.erase(name.rfind('.'));
        return name.substr(name.rfind('.') + 1);
    }
    throw Error("the family has no weight of that role");
}

}  // namespace headscope
