// The families' configs and tensor tables: see model_description.h. Each
// family's keys, defaults and tensor names are those of its Hugging Face
// configuration_*.py and modeling_*.py. A family is one entry of `families`:
// its config.json reader, which sets the Config's layout fields, and its
// tensor names in the order of its files.
#include "headscope/model/model_description.h"

#include <cmath>
#include <limits>
#include <string_view>

#include "headscope/base/error.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"

namespace headscope {

namespace {

using json = nlohmann::json;

// Reads config.json's keys through JsonFields, each error one line naming
// the file and the key with its value ("n_layer is 0, not a positive integer").
class ConfigReader {
public:
    ConfigReader(const json& j, const std::string& file, std::string field = "")
        : j_(j), fields_(file), field_(std::move(field)) {}

    const json* find(const std::string& key) const { return fields_.optional(j_, field_, key); }

    int positive_int(const std::string& key) const {
        const json* v = find(key);
        if (!v) refuse(key + " missing");
        return checked_positive(key, *v);
    }
    int positive_int(const std::string& key, int fallback) const {
        const json* v = find(key);
        return v ? checked_positive(key, *v) : fallback;
    }
    // A token id below vocab_size, or -1; a list (Llama 3's several EOS ids) gives its first.
    int token_id(const std::string& key, int vocab_size, int fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        const json& id = v->is_array() && !v->empty() ? v->front() : *v;
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
            refuse(key + " " + describe_json(*v) + " is not a token id below vocab_size");
        return id.get<int>();
    }
    float epsilon(const std::string& key, float fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() < 1))
            refuse(key + " " + describe_json(*v) + " is not a small positive number");
        return as_float(key, *v);
    }
    float positive_number(const std::string& key, float fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() < 1e12))
            refuse(key + " " + describe_json(*v) + " is not a positive number");
        return as_float(key, *v);
    }
    bool flag(const std::string& key, bool fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_boolean()) refuse(key + " " + describe_json(*v) + " is not true or false");
        return v->get<bool>();
    }
    std::string word(const std::string& key, const std::string& fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_string()) refuse(key + " " + describe_json(*v) + " is not a string");
        return v->get<std::string>();
    }
    // The reader of the object at `key`.
    ConfigReader object(const std::string& key) const {
        const json& value = fields_.required(j_, field_, key, json::value_t::object, "an object");
        return ConfigReader(value, fields_.file(), JsonFields::join(field_, key));
    }
    [[noreturn]] void refuse(const std::string& what) const { fields_.fail(field_, what); }

private:
    // A positive number as the engine computes with it: in float32, where
    // 1e-50 is 0 and 1e-40 subnormal (a norm's epsilon, RoPE's theta).
    float as_float(const std::string& key, const json& v) const {
        const float f = v.get<float>();
        if (!std::isnormal(f))
            refuse(key + " " + describe_json(v) + " is " + (f == 0 ? "0" : "subnormal") +
                   " in float32, the type the engine computes in");
        return f;
    }
    int checked_positive(const std::string& key, const json& v) const {
        // Any integer type: a parsed file gives unsigned, a config built in code signed.
        if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > std::numeric_limits<int>::max())
            refuse(key + " is " + describe_json(v) + ", not a positive integer");
        return v.get<int>();
    }

    const json& j_;
    JsonFields fields_;
    std::string field_;
};

// ---- The families' config.json keys ----

void read_gpt2(const ConfigReader& r, Config& c) {
    c.n_layer = r.positive_int("n_layer");
    c.n_head = r.positive_int("n_head");
    c.n_embd = r.positive_int("n_embd");
    // Old GPT-2 configs name the context length n_ctx only.
    c.n_positions = r.positive_int(r.find("n_positions") || !r.find("n_ctx") ? "n_positions" : "n_ctx");
    c.vocab_size = r.positive_int("vocab_size");
    if (c.n_embd % c.n_head != 0)
        r.refuse("n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, c.eos_token_id);
    c.layer_norm_epsilon = r.epsilon("layer_norm_epsilon", c.layer_norm_epsilon);
}

// Llama and the families built on it (SmolLM, TinyLlama: model_type llama).
// Biases as transformers has them: attention_bias on all four projections.
void read_llama(const ConfigReader& r, Config& c) {
    c.n_layer = r.positive_int("num_hidden_layers");
    c.n_head = r.positive_int("num_attention_heads");
    c.n_embd = r.positive_int("hidden_size");
    c.n_positions = r.positive_int("max_position_embeddings");
    c.vocab_size = r.positive_int("vocab_size");
    c.n_kv_head = r.positive_int("num_key_value_heads", c.n_head);
    c.head_dim = r.positive_int("head_dim", 0);
    if (!c.head_dim) {
        if (c.n_embd % c.n_head != 0)
            r.refuse("hidden_size " + std::to_string(c.n_embd) + " is not divisible by num_attention_heads " +
                     std::to_string(c.n_head) + " and head_dim is not given");
        c.head_dim = c.n_embd / c.n_head;
    }
    c.mlp_dim = r.positive_int("intermediate_size");
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, -1);
    c.bos_token_id = r.token_id("bos_token_id", c.vocab_size, -1);
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, -1);
    if (c.eos_token_id < 0) c.eos_token_id = c.bos_token_id >= 0 ? c.bos_token_id : 0;
    c.layer_norm_epsilon = r.epsilon("rms_norm_eps", 1e-6f);
    c.norm = Norm::rms_norm;
    c.positions = Positions::rotary;
    c.rope.theta = r.positive_number("rope_theta", 10000);
    if (r.find("rope_scaling")) {
        const ConfigReader s = r.object("rope_scaling");
        const std::string type = s.word("rope_type", s.word("type", "default"));
        if (type == "llama3") {
            c.rope.factor = s.positive_number("factor", 8);
            c.rope.low_freq_factor = s.positive_number("low_freq_factor", 1);
            c.rope.high_freq_factor = s.positive_number("high_freq_factor", 4);
            c.rope.original_max_positions = s.positive_int("original_max_position_embeddings", 8192);
            if (!(c.rope.high_freq_factor > c.rope.low_freq_factor))
                r.refuse("rope_scaling's high_freq_factor must exceed its low_freq_factor");
        } else if (type != "default") {
            r.refuse("rope_scaling of type '" + type + "' is not supported (only llama3)");
        }
    }
    if (const std::string act = r.word("hidden_act", "silu"); act != "silu")
        r.refuse("hidden_act '" + act + "' is not supported (only silu)");
    c.mlp = Mlp::swiglu;
    c.qkv_layout = QkvLayout::separate;
    c.weights_out_by_in = true;
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
    if (r.flag("mlp_bias", false)) r.refuse("mlp_bias is true: biases in the SwiGLU MLP are not supported");
    c.tied_embeddings = r.flag("tie_word_embeddings", false);
    if (r.flag("use_sliding_window", false))
        r.refuse("use_sliding_window is true: Qwen's per-layer sliding window is not supported");
}

// Qwen 2: biases on Q, K and V, never on the output projection.
void read_qwen2(const ConfigReader& r, Config& c) {
    read_llama(r, c);
    c.qkv_bias = true;
    c.o_bias = false;
}

// Qwen 3: Llama's biases, and each head's Q and K RMS-normed.
void read_qwen3(const ConfigReader& r, Config& c) {
    read_llama(r, c);
    c.qk_norm = true;
}

// Mistral: no attention biases whatever attention_bias says, and a sliding window.
void read_mistral(const ConfigReader& r, Config& c) {
    read_llama(r, c);
    c.qkv_bias = c.o_bias = false;
    c.sliding_window = r.positive_int("sliding_window", 0);
}

void read_gpt_neox(const ConfigReader& r, Config& c) {
    c.n_layer = r.positive_int("num_hidden_layers");
    c.n_head = r.positive_int("num_attention_heads");
    c.n_embd = r.positive_int("hidden_size");
    c.n_positions = r.positive_int("max_position_embeddings");
    c.vocab_size = r.positive_int("vocab_size");
    if (c.n_embd % c.n_head != 0)
        r.refuse("hidden_size " + std::to_string(c.n_embd) + " is not divisible by num_attention_heads " +
                 std::to_string(c.n_head));
    c.mlp_dim = r.positive_int("intermediate_size");
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, 0);
    c.bos_token_id = r.token_id("bos_token_id", c.vocab_size, -1);
    c.layer_norm_epsilon = r.epsilon("layer_norm_eps", 1e-5f);
    c.positions = Positions::rotary;
    c.rope.theta = r.positive_number("rotary_emb_base", r.positive_number("rope_theta", 10000));
    c.rope.fraction = r.positive_number("rotary_pct", 0.25f);
    if (c.rope.fraction > 1) r.refuse("rotary_pct " + std::to_string(c.rope.fraction) + " is above 1");
    c.rope.joined_by_cat = true;
    if (const std::string act = r.word("hidden_act", "gelu"); act != "gelu")
        r.refuse("hidden_act '" + act + "' is not supported (only gelu)");
    c.mlp = Mlp::gelu_exact;
    c.qkv_layout = QkvLayout::fused_per_head;
    c.weights_out_by_in = true;
    c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
    c.parallel_residual = r.flag("use_parallel_residual", true);
    c.tied_embeddings = r.flag("tie_word_embeddings", false);
}

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

// The one dispatch on the family's name: its config.json reader and tensor names.
struct Family {
    std::string_view model_type;
    void (*read)(const ConfigReader&, Config&);
    const TensorNames& names;
};

const Family families[] = {
    {"gpt2", read_gpt2, gpt2_names},        {"llama", read_llama, llama_names},
    {"qwen2", read_qwen2, llama_names},     {"qwen3", read_qwen3, llama_names},
    {"mistral", read_mistral, llama_names}, {"gpt_neox", read_gpt_neox, gpt_neox_names},
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
    const bool layer_norm = c.norm == Norm::layer_norm, fused = c.qkv_layout != QkvLayout::separate;
    switch (weight) {
        case Weight::wpe: return c.positions == Positions::learned;
        case Weight::lm_head: return !c.tied_embeddings;
        case Weight::ln_1_b:
        case Weight::ln_2_b:
        case Weight::ln_f_b: return layer_norm;
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
        case Weight::fc_b:
        case Weight::fc_proj_b: return c.mlp != Mlp::swiglu;
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
        case Weight::wpe: return {P, C};
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
        case Weight::fc_b: return {F};
        case Weight::fc_proj_w: return matrix(C, F);
        default: return {C};  // the norms' vectors and the output biases
    }
}

}  // namespace

const char* to_string(Norm norm) { return word_of(norm_choices, norm); }
const char* to_string(Positions positions) { return word_of(positions_choices, positions); }
const char* to_string(Mlp mlp) { return word_of(mlp_choices, mlp); }

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
        if (has_weight(config, named.weight))
            t.push_back({prefix + named.name, weight_shape(config, named.weight), named.weight, layer});
    };
    for (const Named& named : names.before_layers) add(named, "", -1);
    for (int l = 0; l < config.n_layer; ++l)
        for (const Named& named : names.layer) add(named, names.layer_prefix + std::to_string(l) + ".", l);
    for (const Named& named : names.after_layers) add(named, "", -1);
    return t;
}

bool stored_out_by_in(const Config& config, Weight weight) {
    return config.weights_out_by_in && weight != Weight::wte && weight != Weight::wpe;
}

const char* optional_tensor_prefix(const Config& config) { return family_of(config).names.optional_prefix; }

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
