// The families' configs and tensor tables: see model_description.h. Each
// family's keys, defaults and tensor names are those of its Hugging Face
// configuration_*.py and modeling_*.py.
#include "headscope/model_description.h"

#include <limits>

#include "headscope/error.h"
#include "headscope/json_input.h"

namespace headscope {

namespace {

using json = nlohmann::ordered_json;

// Reads config.json's fields for one file, each error naming the file and key.
class ConfigReader {
public:
    ConfigReader(const json& j, const std::string& file) : j_(j), file_(file) {}

    const json* find(const std::string& key) const {
        const auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? nullptr : &*it;
    }

    int positive_int(const std::string& key) const {
        const json* v = find(key);
        if (!v) throw Error(file_ + ": " + key + " missing");
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
            throw Error(file_ + ": " + key + " " + describe_json(*v) + " is not a token id below vocab_size");
        return id.get<int>();
    }
    float epsilon(const std::string& key, float fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() < 1))
            throw Error(file_ + ": " + key + " " + describe_json(*v) + " is not a small positive number");
        return v->get<float>();
    }
    float positive_number(const std::string& key, float fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() < 1e12))
            throw Error(file_ + ": " + key + " " + describe_json(*v) + " is not a positive number");
        return v->get<float>();
    }
    bool flag(const std::string& key, bool fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_boolean()) throw Error(file_ + ": " + key + " " + describe_json(*v) + " is not true or false");
        return v->get<bool>();
    }
    std::string word(const std::string& key, const std::string& fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_string()) throw Error(file_ + ": " + key + " " + describe_json(*v) + " is not a string");
        return v->get<std::string>();
    }
    const std::string& file() const { return file_; }
    [[noreturn]] void refuse(const std::string& what) const { throw Error(file_ + ": " + what); }

private:
    int checked_positive(const std::string& key, const json& v) const {
        // Any integer type: a parsed file gives unsigned, a config built in code signed.
        if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > std::numeric_limits<int>::max())
            throw Error(file_ + ": " + key + " is " + describe_json(v) + ", not a positive integer");
        return v.get<int>();
    }

    const json& j_;
    std::string file_;
};

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

// Llama and the families built on it: Qwen 2 and 3, Mistral (and SmolLM, TinyLlama: model_type llama).
void read_llama_like(const ConfigReader& r, Config& c) {
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
    if (const json* scaling = r.find("rope_scaling")) {
        if (!scaling->is_object()) r.refuse("rope_scaling " + describe_json(*scaling) + " is not an object");
        const ConfigReader s(*scaling, r.file() + ": rope_scaling");
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
    const bool attention_bias = r.flag("attention_bias", false);
    c.qkv_bias = c.architecture == "qwen2" || attention_bias;
    c.o_bias = attention_bias;
    if (r.flag("mlp_bias", false)) r.refuse("mlp_bias is true: biases in the SwiGLU MLP are not supported");
    c.qk_norm = c.architecture == "qwen3";
    c.tied_embeddings = r.flag("tie_word_embeddings", false);
    if (c.architecture == "mistral") c.sliding_window = r.positive_int("sliding_window", 0);
    if (r.flag("use_sliding_window", false))
        r.refuse("use_sliding_window is true: Qwen's per-layer sliding window is not supported");
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
    if (const std::string act = r.word("hidden_act", "gelu"); act != "gelu")
        r.refuse("hidden_act '" + act + "' is not supported (only gelu)");
    c.mlp = Mlp::gelu_exact;
    c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
    c.parallel_residual = r.flag("use_parallel_residual", true);
    c.tied_embeddings = r.flag("tie_word_embeddings", false);
}

}  // namespace

const char* to_string(Norm norm) { return word_of(norm_choices, norm); }
const char* to_string(Positions positions) { return word_of(positions_choices, positions); }
const char* to_string(Mlp mlp) { return word_of(mlp_choices, mlp); }

const char* supported_architectures() { return "gpt2, llama, qwen2, qwen3, mistral, gpt_neox"; }

Config config_from_json(const json& j, const std::string& file) {
    if (!j.is_object()) throw Error(file + ": not a JSON object");
    const ConfigReader r(j, file);
    Config c;
    c.architecture = r.word("model_type", "gpt2");  // configs older than model_type are GPT-2's
    if (c.architecture == "gpt2")
        read_gpt2(r, c);
    else if (c.architecture == "llama" || c.architecture == "qwen2" || c.architecture == "qwen3" ||
             c.architecture == "mistral")
        read_llama_like(r, c);
    else if (c.architecture == "gpt_neox")
        read_gpt_neox(r, c);
    else
        r.refuse("model_type '" + c.architecture + "' is not supported (supported: " + supported_architectures() + ")");
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
    const int64_t C = config.n_embd, V = config.vocab_size, P = config.n_positions, F = config.mlp_size();
    const int64_t hs = config.head_size(), Q = config.n_head * hs, KV = config.kv_heads() * hs;
    std::vector<TensorSpec> t;
    if (config.architecture == "gpt2") {
        t = {{"wte.weight", {V, C}, Weight::wte, -1}, {"wpe.weight", {P, C}, Weight::wpe, -1}};
        for (int l = 0; l < config.n_layer; ++l) {
            const std::string h = "h." + std::to_string(l) + ".";
            t.insert(t.end(), {{h + "ln_1.weight", {C}, Weight::ln_1_w, l},
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
        t.insert(t.end(), {{"ln_f.weight", {C}, Weight::ln_f_w, -1}, {"ln_f.bias", {C}, Weight::ln_f_b, -1}});
    } else if (config.architecture == "gpt_neox") {
        t = {{"gpt_neox.embed_in.weight", {V, C}, Weight::wte, -1}};
        for (int l = 0; l < config.n_layer; ++l) {
            const std::string h = "gpt_neox.layers." + std::to_string(l) + ".";
            t.insert(t.end(), {{h + "input_layernorm.weight", {C}, Weight::ln_1_w, l},
                               {h + "input_layernorm.bias", {C}, Weight::ln_1_b, l},
                               {h + "post_attention_layernorm.weight", {C}, Weight::ln_2_w, l},
                               {h + "post_attention_layernorm.bias", {C}, Weight::ln_2_b, l},
                               {h + "attention.query_key_value.weight", {3 * C, C}, Weight::attn_w, l},  // (NH, 3, hs)
                               {h + "attention.query_key_value.bias", {3 * C}, Weight::attn_b, l},
                               {h + "attention.dense.weight", {C, C}, Weight::attn_proj_w, l},
                               {h + "attention.dense.bias", {C}, Weight::attn_proj_b, l},
                               {h + "mlp.dense_h_to_4h.weight", {F, C}, Weight::fc_w, l},
                               {h + "mlp.dense_h_to_4h.bias", {F}, Weight::fc_b, l},
                               {h + "mlp.dense_4h_to_h.weight", {C, F}, Weight::fc_proj_w, l},
                               {h + "mlp.dense_4h_to_h.bias", {C}, Weight::fc_proj_b, l}});
        }
        if (!config.qkv_bias) std::erase_if(t, [](const TensorSpec& s) { return s.weight == Weight::attn_b; });
        if (!config.o_bias) std::erase_if(t, [](const TensorSpec& s) { return s.weight == Weight::attn_proj_b; });
        t.insert(t.end(), {{"gpt_neox.final_layer_norm.weight", {C}, Weight::ln_f_w, -1},
                           {"gpt_neox.final_layer_norm.bias", {C}, Weight::ln_f_b, -1}});
        if (!config.tied_embeddings) t.push_back({"embed_out.weight", {V, C}, Weight::lm_head, -1});
    } else {  // llama, qwen2, qwen3, mistral
        t = {{"model.embed_tokens.weight", {V, C}, Weight::wte, -1}};
        for (int l = 0; l < config.n_layer; ++l) {
            const std::string h = "model.layers." + std::to_string(l) + ".";
            const std::string a = h + "self_attn.", m = h + "mlp.";
            t.push_back({h + "input_layernorm.weight", {C}, Weight::ln_1_w, l});
            t.push_back({a + "q_proj.weight", {Q, C}, Weight::q_w, l});
            t.push_back({a + "k_proj.weight", {KV, C}, Weight::k_w, l});
            t.push_back({a + "v_proj.weight", {KV, C}, Weight::v_w, l});
            if (config.qkv_bias) {
                t.push_back({a + "q_proj.bias", {Q}, Weight::q_b, l});
                t.push_back({a + "k_proj.bias", {KV}, Weight::k_b, l});
                t.push_back({a + "v_proj.bias", {KV}, Weight::v_b, l});
            }
            if (config.qk_norm) {
                t.push_back({a + "q_norm.weight", {hs}, Weight::q_norm, l});
                t.push_back({a + "k_norm.weight", {hs}, Weight::k_norm, l});
            }
            t.push_back({a + "o_proj.weight", {C, Q}, Weight::attn_proj_w, l});
            if (config.o_bias) t.push_back({a + "o_proj.bias", {C}, Weight::attn_proj_b, l});
            t.push_back({h + "post_attention_layernorm.weight", {C}, Weight::ln_2_w, l});
            t.push_back({m + "gate_proj.weight", {F, C}, Weight::gate_w, l});
            t.push_back({m + "up_proj.weight", {F, C}, Weight::fc_w, l});
            t.push_back({m + "down_proj.weight", {C, F}, Weight::fc_proj_w, l});
        }
        t.push_back({"model.norm.weight", {C}, Weight::ln_f_w, -1});
        if (!config.tied_embeddings) t.push_back({"lm_head.weight", {V, C}, Weight::lm_head, -1});
    }
    return t;
}

bool stored_out_by_in(const Config& config, Weight weight) {
    return config.architecture != "gpt2" && weight != Weight::wte && weight != Weight::wpe;
}

}  // namespace headscope
