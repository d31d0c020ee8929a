// The families' config.json readers: see family_configs.h.
#include "family_configs.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace headscope {

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
    c.tied_embeddings = r.flag("tie_word_embeddings", true);
}

// Llama and the families built on it (SmolLM, TinyLlama: model_type llama).
// Biases as transformers has them: attention_bias on all four projections.
void read_llama(const ConfigReader& r, Config& c) { read_llama_keys(r, c, true); }

void read_llama_keys(const ConfigReader& r, Config& c, bool rope_scaling) {
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
    if (rope_scaling && r.find("rope_scaling")) {
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

// OLMo 2: Llama's layout with each sublayer's norm moved onto its output
// (inside the residual: x + norm(attn(x))), and Q and K each RMS-normed as a
// whole (over NH * hs and NKV * hs values) before RoPE.
void read_olmo2(const ConfigReader& r, Config& c) {
    read_llama(r, c);
    c.layer_norm_epsilon = r.epsilon("rms_norm_eps", 1e-5f);
    c.input_norms = false;
    c.output_norms = true;
    c.qk_norm = c.qk_norm_whole = true;
}

namespace {

// The sizes most families name alike: layers, heads, width (divisible by the
// heads), positions, vocabulary and the MLP's hidden size.
void read_sizes(const ConfigReader& r, Config& c) {
    c.n_layer = r.positive_int("num_hidden_layers");
    c.n_head = r.positive_int("num_attention_heads");
    c.n_embd = r.positive_int("hidden_size");
    c.n_positions = r.positive_int("max_position_embeddings");
    c.vocab_size = r.positive_int("vocab_size");
    if (c.n_embd % c.n_head != 0)
        r.refuse("hidden_size " + std::to_string(c.n_embd) + " is not divisible by num_attention_heads " +
                 std::to_string(c.n_head));
    c.mlp_dim = r.positive_int("intermediate_size");
}

}  // namespace

void read_gpt_neox(const ConfigReader& r, Config& c) {
    read_sizes(r, c);
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

namespace {

// LongRoPE's `key` list of rope_scaling: one positive factor for each of the `count` pairs of rotary dims.
std::vector<float> longrope_factors(const ConfigReader& s, const std::string& key, int count) {
    const ConfigReader::json* v = s.find(key);
    if (!v) s.refuse(key + " missing");
    if (!v->is_array() || v->size() != static_cast<size_t>(count))
        s.refuse(key + " must be a list of " + std::to_string(count) + " numbers, one per pair of rotary dims" +
                 (v->is_array() ? " (it has " + std::to_string(v->size()) + ")" : ""));
    std::vector<float> factors;
    for (const auto& f : *v) {
        if (!f.is_number() || !(f.get<double>() > 0) || !(f.get<double>() < 1e12))
            s.refuse(key + " holds " + describe_json(f) + ", not a positive number");
        factors.push_back(f.get<float>());
    }
    return factors;
}

// Phi-3's rope_scaling, LongRoPE ("su" and "yarn" are its older names, as
// configuration_phi3.py maps them): short factors up to
// original_max_position_embeddings positions, long ones past it, and cos and
// sin scaled by the attention factor, as modeling_rope_utils.py's
// _compute_longrope_parameters has them (the choice by length of the newer
// transformers: the older chose the long factors at every length).
// `pairs`: the pairs of rotary dims of each head.
void read_longrope(const ConfigReader& r, Config& c, int pairs) {
    const ConfigReader s = r.object("rope_scaling");
    const std::string type = s.word("rope_type", s.word("type", "default"));
    if (type == "default") return;
    if (type != "longrope" && type != "su" && type != "yarn")
        r.refuse("rope_scaling of type '" + type + "' is not supported (longrope, su, yarn)");
    c.rope.frequency_divisors = longrope_factors(s, "short_factor", pairs);
    c.rope.long_divisors = longrope_factors(s, "long_factor", pairs);
    const int original = r.positive_int("original_max_position_embeddings", 4096);
    c.rope.long_after = original;
    const double factor = static_cast<double>(c.n_positions) / original;
    if (s.find("attention_factor")) {
        c.rope.cos_sin_scale = s.positive_number("attention_factor", 1);
    } else if (factor > 1) {
        if (original < 2) r.refuse("original_max_position_embeddings 1 leaves LongRoPE's attention factor undefined");
        c.rope.cos_sin_scale = static_cast<float>(std::sqrt(1 + std::log(factor) / std::log(original)));
    }
}

}  // namespace

// Phi-3, Phi-3.5 and Phi-4: Llama's layer with Q, K and V one product
// (qkv_proj) and the MLP's gate and up one (gate_up_proj), no biases, heads
// of C / NH, the first partial_rotary_factor of each head's dims rotating
// (joined to the rest by torch.cat), LongRoPE where rope_scaling says so,
// and Mistral's window where the config has one.
void read_phi3(const ConfigReader& r, Config& c) {
    read_sizes(r, c);
    c.n_kv_head = r.positive_int("num_key_value_heads", c.n_head);
    c.head_dim = c.n_embd / c.n_head;
    // Phi3Config's ids (Phi-3's tokenizer) where the config names none and the vocabulary holds them.
    const auto own = [&](int id) { return id < c.vocab_size ? id : -1; };
    c.bos_token_id = r.token_id("bos_token_id", c.vocab_size, own(1));
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, own(32000));
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, own(32000));
    if (c.eos_token_id < 0) c.eos_token_id = std::max(c.bos_token_id, 0);
    c.layer_norm_epsilon = r.epsilon("rms_norm_eps", 1e-5f);
    if (const std::string act = r.word("hidden_act", "silu"); act != "silu")
        r.refuse("hidden_act '" + act + "' is not supported (only silu)");
    c.norm = Norm::rms_norm;
    c.mlp = Mlp::swiglu;
    c.fused_gate_up = true;
    c.qkv_layout = QkvLayout::fused;  // qkv_proj's outputs [Q | K | V]
    c.weights_out_by_in = true;
    c.qkv_bias = c.o_bias = c.mlp_bias = false;
    c.tied_embeddings = r.flag("tie_word_embeddings", false);
    c.sliding_window = r.positive_int("sliding_window", 0);
    c.positions = Positions::rotary;
    c.rope.theta = r.positive_number("rope_theta", 10000);
    c.rope.fraction = r.positive_number("partial_rotary_factor", 1);
    c.rope.joined_by_cat = true;
    if (c.rope.fraction > 1) r.refuse("partial_rotary_factor " + std::to_string(c.rope.fraction) + " is above 1");
    // Hugging Face rotates int(hs * factor) dims in rotate-half pairs: an odd count has no pairing.
    const int dims = static_cast<int>(c.head_size() * static_cast<double>(c.rope.fraction));
    if (dims % 2 != 0)
        r.refuse("partial_rotary_factor " + std::to_string(c.rope.fraction) + " rotates " + std::to_string(dims) +
                 " of each head's " + std::to_string(c.head_size()) + " dims, an odd count: rotary dims come in pairs");
    if (r.find("rope_scaling")) read_longrope(r, c, dims / 2);
}

namespace {

// BERT's and DistilBERT's activations: "gelu" is erf's, "gelu_new" and "gelu_pytorch_tanh" the tanh approximation.
Mlp encoder_activation(const ConfigReader& r, const std::string& key) {
    const std::string act = r.word(key, "gelu");
    if (act == "gelu") return Mlp::gelu_exact;
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") return Mlp::gelu_tanh;
    r.refuse(key + " '" + act + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh)");
}

// What every BERT-like encoder shares: attention both ways, LayerNorm after
// each sublayer and over the embeddings, biases everywhere, Linear weights,
// and the masked-LM head (dense, GELU, LayerNorm, the tied decoder and its bias).
void encoder_layout(Config& c) {
    c.causal = false;
    c.post_norm = true;
    c.embedding_norm = true;
    c.mlm_head = true;
    c.qkv_layout = QkvLayout::separate;
    c.weights_out_by_in = true;
    c.tied_embeddings = true;
}

}  // namespace

void read_bert(const ConfigReader& r, Config& c) {
    read_sizes(r, c);
    c.type_vocab_size = r.positive_int("type_vocab_size", 2);
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, 0);
    c.bos_token_id = r.token_id("bos_token_id", c.vocab_size, -1);
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, c.pad_token_id);
    c.layer_norm_epsilon = r.epsilon("layer_norm_eps", 1e-12f);
    c.mlp = encoder_activation(r, "hidden_act");
    if (const std::string kind = r.word("position_embedding_type", "absolute"); kind != "absolute")
        r.refuse("position_embedding_type '" + kind + "' is not supported (only absolute)");
    encoder_layout(c);
}

// RoBERTa and XLM-RoBERTa: BERT's layers; positions count from padding_idx + 1
// (the pad token's id), so the table has that many rows more than a text may have tokens.
void read_roberta(const ConfigReader& r, Config& c) {
    read_bert(r, c);
    c.type_vocab_size = r.positive_int("type_vocab_size", 1);
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, 1);
    c.position_offset = c.pad_token_id + 1;
    c.pad_positions = true;
    c.roberta_vocab_files = true;
    if (c.n_positions <= c.position_offset)
        r.refuse("max_position_embeddings " + std::to_string(c.n_positions) + " leaves no position after padding_idx " +
                 std::to_string(c.pad_token_id));
    c.n_positions -= c.position_offset;
}

// DistilBERT: BERT's layers under other keys, no token types, LayerNorm's epsilon fixed at 1e-12.
void read_distilbert(const ConfigReader& r, Config& c) {
    c.n_layer = r.positive_int("n_layers");
    c.n_head = r.positive_int("n_heads");
    c.n_embd = r.positive_int("dim");
    c.n_positions = r.positive_int("max_position_embeddings");
    c.vocab_size = r.positive_int("vocab_size");
    if (c.n_embd % c.n_head != 0)
        r.refuse("dim " + std::to_string(c.n_embd) + " is not divisible by n_heads " + std::to_string(c.n_head));
    c.mlp_dim = r.positive_int("hidden_dim");
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, 0);
    c.eos_token_id = c.pad_token_id;
    c.layer_norm_epsilon = 1e-12f;
    c.mlp = encoder_activation(r, "activation");
    encoder_layout(c);
}

// ModernBERT: pre-norm (layer 0 without a norm before its attention),
// rotary positions with a global base and a local one, a window of
// local_attention / 2 keys each way on every layer but each
// global_attn_every_n_layers-th, GeGLU, a final norm, then the masked-LM
// head; biases where its flags say.
void read_modernbert(const ConfigReader& r, Config& c) {
    read_sizes(r, c);
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, -1);
    c.bos_token_id = r.token_id("bos_token_id", c.vocab_size, -1);
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, std::max(c.pad_token_id, 0));
    c.layer_norm_epsilon = r.epsilon("norm_eps", 1e-5f);
    for (const char* key : {"hidden_activation", "classifier_activation"})
        if (const std::string act = r.word(key, "gelu"); act != "gelu")
            r.refuse(std::string(key) + " '" + act + "' is not supported (only gelu)");
    if (r.flag("mlp_bias", false)) r.refuse("mlp_bias is true: biases in the GeGLU MLP are not supported");
    c.mlp = Mlp::geglu;
    c.fused_gate_up = true;  // Wi's outputs [gate | up]
    c.mlp_bias = false;
    c.norm_bias = r.flag("norm_bias", false);
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
    c.head_bias = r.flag("classifier_bias", false);
    c.logits_bias = r.flag("decoder_bias", true);
    c.positions = Positions::rotary;
    c.rope.theta = r.positive_number("global_rope_theta", 160000);
    c.local_rope_theta = r.positive_number("local_rope_theta", 10000);
    c.sliding_window = r.positive_int("local_attention", 128) / 2 + 1;  // |i - j| <= local_attention / 2
    c.global_every = r.positive_int("global_attn_every_n_layers", 3);
    c.first_attention_norm = false;
    c.causal = false;
    c.embedding_norm = true;
    c.mlm_head = true;
    c.qkv_layout = QkvLayout::fused;  // Wqkv's outputs [Q | K | V]
    c.weights_out_by_in = true;
    c.tied_embeddings = true;
}

// T5, T5 v1.1 and Flan-T5: RMSNorm before each block (T5's LayerNorm has no
// mean or bias), no biases, T5's relative position bias, no 1/sqrt(hs) on
// the scores (folded into the weights at training), ReLU or gated tanh-GELU,
// and, with the output embedding tied to the input one, the decoder's output
// scaled by d_model^-1/2 before it.
void read_t5(const ConfigReader& r, Config& c) {
    c.vocab_size = r.positive_int("vocab_size");
    c.n_embd = r.positive_int("d_model");
    c.head_dim = r.positive_int("d_kv");
    c.mlp_dim = r.positive_int("d_ff");
    c.encoder_layers = r.positive_int("num_layers");
    c.n_layer = r.positive_int("num_decoder_layers", c.encoder_layers);
    c.n_head = r.positive_int("num_heads");
    c.n_positions = r.positive_int("n_positions", 512);
    c.relative_buckets = r.positive_int("relative_attention_num_buckets", 32);
    c.relative_max_distance = r.positive_int("relative_attention_max_distance", 128);
    if (c.relative_buckets < 4) r.refuse("relative_attention_num_buckets must be at least 4");
    // The decoder's buckets below half the count are distances taken exactly,
    // the rest spaced logarithmically from there to the maximum distance:
    // one at or below it leaves log(max / exact) zero or negative.
    if (c.relative_max_distance <= c.relative_buckets / 2)
        r.refuse("relative_attention_max_distance " + std::to_string(c.relative_max_distance) +
                 " must be more than half of relative_attention_num_buckets " + std::to_string(c.relative_buckets) +
                 ", the distances its buckets hold exactly");
    c.layer_norm_epsilon = r.epsilon("layer_norm_epsilon", 1e-6f);
    const std::string act = r.word("feed_forward_proj", "relu");
    if (act != "relu" && act != "gated-gelu")
        r.refuse("feed_forward_proj '" + act + "' is not supported (relu, gated-gelu)");
    c.mlp = act == "relu" ? Mlp::relu : Mlp::gated_gelu;
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, 0);
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, 1);
    c.decoder_start_token_id = r.token_id("decoder_start_token_id", c.vocab_size, c.pad_token_id);
    c.norm = Norm::rms_norm;
    c.positions = Positions::relative;
    c.scaled_scores = false;
    c.qkv_layout = QkvLayout::separate;
    c.weights_out_by_in = true;
    c.qkv_bias = c.o_bias = c.mlp_bias = c.logits_bias = false;
    c.tied_embeddings = r.flag("tie_word_embeddings", true);
    c.output_scale = c.tied_embeddings ? 1 / std::sqrt(static_cast<float>(c.n_embd)) : 1;
}

namespace {

// BART's and Marian's activation_function.
Mlp seq2seq_activation(const ConfigReader& r) {
    const std::string act = r.word("activation_function", "gelu");
    if (act == "gelu") return Mlp::gelu_exact;
    if (act == "gelu_new") return Mlp::gelu_tanh;
    if (act == "relu") return Mlp::relu;
    if (act == "swish" || act == "silu") return Mlp::silu;
    r.refuse("activation_function '" + act + "' is not supported (gelu, gelu_new, relu, swish)");
}

// What BART and Marian share: LayerNorm after each sublayer (the
// cross-attention's too), biases everywhere, Linear weights, the output
// embedding tied to the input one, a bias on the logits; one head count and
// MLP width for both stacks.
void read_bart_layout(const ConfigReader& r, Config& c) {
    c.vocab_size = r.positive_int("vocab_size");
    c.n_embd = r.positive_int("d_model");
    c.encoder_layers = r.positive_int("encoder_layers");
    c.n_layer = r.positive_int("decoder_layers");
    c.n_head = r.positive_int("decoder_attention_heads");
    c.mlp_dim = r.positive_int("decoder_ffn_dim");
    if (r.positive_int("encoder_attention_heads") != c.n_head || r.positive_int("encoder_ffn_dim") != c.mlp_dim)
        r.refuse("the encoder's heads or MLP width differ from the decoder's (not supported)");
    if (c.n_embd % c.n_head != 0)
        r.refuse("d_model " + std::to_string(c.n_embd) + " is not divisible by the attention heads " +
                 std::to_string(c.n_head));
    c.n_positions = r.positive_int("max_position_embeddings");
    c.mlp = seq2seq_activation(r);
    if (r.flag("scale_embedding", false)) c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.post_norm = true;
    c.qkv_layout = QkvLayout::separate;
    c.weights_out_by_in = true;
    c.tied_embeddings = true;
}

}  // namespace

// BART: learned positions from row 2 on (offset 2), a LayerNorm over the embeddings.
void read_bart(const ConfigReader& r, Config& c) {
    read_bart_layout(r, c);
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, 1);
    c.bos_token_id = r.token_id("bos_token_id", c.vocab_size, 0);
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, 2);
    c.decoder_start_token_id = r.token_id("decoder_start_token_id", c.vocab_size, c.eos_token_id);
    c.position_offset = 2;
    c.embedding_norm = true;
    c.roberta_vocab_files = true;
}

// Marian (MarianMT): the paper's sinusoidal positions, embeddings scaled by sqrt(d_model).
void read_marian(const ConfigReader& r, Config& c) {
    read_bart_layout(r, c);
    if (!r.flag("share_encoder_decoder_embeddings", true))
        r.refuse("share_encoder_decoder_embeddings is false: separate decoder embeddings are not supported");
    c.pad_token_id = r.token_id("pad_token_id", c.vocab_size, c.vocab_size - 1);
    c.eos_token_id = r.token_id("eos_token_id", c.vocab_size, 0);
    c.decoder_start_token_id = r.token_id("decoder_start_token_id", c.vocab_size, c.pad_token_id);
    c.positions = Positions::sinusoidal;
    if (c.n_embd % 2 != 0) r.refuse("d_model " + std::to_string(c.n_embd) + " is odd: sinusoidal positions need pairs");
}

}  // namespace headscope
