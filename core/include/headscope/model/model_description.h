// The one description of a model, shared by everything that reads or writes
// one: its hyperparameters (Config: what varies between the families) and the
// tensors they imply (model_tensors), each by its name in Hugging Face's files
// and by the weight of the forward it is. The loader checks a file against it;
// the engine runs it; the trainer lays out its parameters and writes its
// checkpoints by it. Plain data: a family is a table, not a type.
// Legend: C channels, V vocab, L layers, NH query heads, NKV key/value heads,
// hs head size, F the MLP's hidden size, E experts, k experts per token,
// Fe an expert's hidden size.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/choices.h"

namespace headscope {

// What differs between the families, each with its words (headscope-cli
// info's JSON) and labels (the window), in this one place.
enum class Norm { layer_norm, rms_norm };
inline constexpr Choices<Norm, 2> norm_choices = {"norm", {"layernorm", "rmsnorm"}, {"LayerNorm", "RMSNorm"}};
// Learned rows (wpe); rotary; T5's learned bias per head on each score, by
// the bucket of the key's distance from the query; the paper's fixed
// sinusoids added to the embeddings (Marian's).
enum class Positions { learned, rotary, relative, sinusoidal };
inline constexpr Choices<Positions, 4> positions_choices = {
    "positions",
    {"learned", "rotary", "relative", "sinusoidal"},
    {"learned (wpe)", "rotary (RoPE)", "relative buckets (T5)", "sinusoidal"}};
// GPT-2's tanh GELU, erf GELU, SiLU(gate) * up, GELU(gate) * up (ModernBERT's,
// gate and up one fused matrix), T5's ReLU, Marian's SiLU (swish), T5 v1.1's
// tanh GELU(gate) * up (separate matrices).
enum class Mlp { gelu_tanh, gelu_exact, swiglu, geglu, relu, silu, gated_gelu };
// The word names the kind, so both GELUs are "gelu"; the labels tell them apart.
inline constexpr Choices<Mlp, 7> mlp_choices = {
    "mlp",
    {"gelu", "gelu", "swiglu", "geglu", "relu", "silu", "gated-gelu"},
    {"GELU (tanh)", "GELU (erf)", "SwiGLU", "GeGLU", "ReLU", "SiLU", "gated GELU (tanh)"}};
// Whether the MLP multiplies a gate by an up projection.
inline bool gated(Mlp mlp) { return mlp == Mlp::swiglu || mlp == Mlp::geglu || mlp == Mlp::gated_gelu; }

// How a family stores its attention's Q, K and V projections.
enum class QkvLayout {
    fused,           // one product, its outputs [Q | K | V] (GPT-2's c_attn)
    fused_per_head,  // one product, its outputs per head [q k v], (NH, 3, hs) (GPT-NeoX's query_key_value)
    separate,        // three products (q_proj, k_proj, v_proj)
};

// Rotary positions as Hugging Face computes them: the first `fraction` of each
// head's dims rotate in rotate-half pairs (d, d + dims/2) by angle
// position * inv_freq[d], inv_freq[d] = theta^(-2d/dims), in float32.
struct Rope {
    float theta = 10000;
    float fraction = 1;  // Pythia's rotary_pct
    // Llama 3's rope_scaling (rope_type "llama3"); factor 0 means none.
    float factor = 0, low_freq_factor = 1, high_freq_factor = 4;
    int original_max_positions = 8192;
    // GPT-NeoX joins the rotated dims and the others with torch.cat, which
    // writes a new contiguous buffer; Llama's elementwise rotation keeps its
    // input's memory order (the reshape dance shows which).
    bool joined_by_cat = false;
    // Dims (2d, 2d + 1) are a pair instead of (d, d + dims/2): llama.cpp's
    // GGUF files of the llama architecture, whose converter reorders each
    // head's rows of Q and K so (the same scores, the dims in another order).
    bool adjacent_pairs = false;
    // Llama 3's scaling as llama.cpp's files store it (their rope_freqs):
    // pair d's frequency divided by entry d (dims / 2 of them); empty: none.
    std::vector<float> frequency_divisors;
    // Phi-3's LongRoPE: frequency_divisors hold its short factors, and a
    // forward of more than long_after positions (the padded length) divides
    // by these long ones instead (empty: never); cos and sin are both scaled
    // by cos_sin_scale (its attention factor) at every length.
    std::vector<float> long_divisors;
    int long_after = 0;
    float cos_sin_scale = 1;
    // rope_type "linear": every frequency divided by this (Gemma 3's global
    // layers; its local ones' rope has none: layer_rope).
    float linear_factor = 1;
};

// How a mixture of experts' router turns its E logits into each row's k
// experts and their weights. softmax_then_top_k (Mixtral, Qwen 3 MoE,
// OLMoE): softmax over all E, the k largest (equal ones: the lower expert
// first), divided by their sum where Config::normalize_top_k says.
// top_k_then_softmax (gpt-oss): the k largest logits (equal ones: the lower
// expert first), then the softmax over those k.
enum class Routing { softmax_then_top_k, top_k_then_softmax };

struct Config {
    int n_layer = 0;      // L
    int n_head = 0;       // NH
    int n_embd = 0;       // C
    int n_positions = 0;  // longest T
    int vocab_size = 0;   // V
    int eos_token_id = 50256;
    std::vector<int> more_eos_ids = {};  // the rest of a listed eos_token_id (Llama 3 Instruct's <|eot_id|>, ...)
    float layer_norm_epsilon = 1e-5f;    // of every norm, LayerNorm or RMSNorm
    nlohmann::ordered_json training = nullptr;  // the "headscope_training" record of a model we trained

    // What the families change; the defaults are GPT-2's. Code outside this
    // description reads these fields, never the family's name.
    std::string architecture = "gpt2";  // config.json's model_type: the family's keys and tensor names
    int n_kv_head = 0;                  // NKV; 0: NH (no grouping)
    int head_dim = 0;                   // hs; 0: C / NH
    int mlp_dim = 0;                    // F; 0: 4C
    int bos_token_id = -1;              // -1: none
    // Generation's first token after a one-token input, whatever the model
    // predicts (BART-large-CNN's <s> after its decoder's start token); -1: none.
    int forced_bos_token_id = -1;
    // Its vocab.json and merges.txt (without a tokenizer.json) are read as
    // RobertaTokenizer and BartTokenizer read them (tokenizer.h), else as GPT2Tokenizer.
    bool roberta_vocab_files = false;
    int pad_token_id = -1;  // -1: none (texts are padded with EOS)
    Norm norm = Norm::layer_norm;
    Positions positions = Positions::learned;
    Rope rope = {};
    Mlp mlp = Mlp::gelu_tanh;
    QkvLayout qkv_layout = QkvLayout::fused;
    bool weights_out_by_in = false;       // matrices stored (out, in) (Linear), else (in, out) (GPT-2's Conv1D)
    bool qkv_bias = true, o_bias = true;  // biases on Q, K and V; on the output projection
    bool qk_norm = false;                 // Qwen 3: RMSNorm over each head's hs values of Q and K, before RoPE
    bool qk_norm_whole = false;           // OLMo 2: qk_norm over all of Q's NH * hs values (K's NKV * hs) at once
    bool parallel_residual = false;       // Pythia: x + attn(ln_1(x)) + mlp(ln_2(x))
    bool tied_embeddings = true;          // the output embedding is wte
    int sliding_window = 0;               // Mistral: query i sees keys j > i - window; 0: none
    // ModernBERT: the window skips every global_every-th layer from layer 0,
    // whose rotary base is rope.theta; the others' is local_rope_theta. 0: every layer has it.
    int global_every = 0;
    float local_rope_theta = 0;
    bool norm_bias = true;             // LayerNorms have biases (ModernBERT's have none)
    bool mlp_bias = true;              // a GELU MLP's products have biases
    bool fused_gate_up = false;        // a gated MLP's gate and up are one (2F, C) matrix, gate first (gate_up_w)
    bool first_attention_norm = true;  // layer 0 normalizes before its attention (ModernBERT's does not)
    bool input_norms = true;           // a norm before each sublayer (ln_1, ln_2); OLMo 2's read the residual itself
    bool output_norms = false;  // OLMo 2: x = x + norm(attn(x)), x = x + norm(mlp(x)) (attn_out_norm, mlp_out_norm)
    // Gemma: every RMSNorm scales by (norm_offset + w), its files storing w;
    // the loader adds it to the float32 copy of each norm weight, once.
    float norm_offset = 0;
    // Gemma: the layers with the sliding window, one flag per layer (its
    // layer_types); empty: global_every's rule.
    std::vector<bool> windowed_layers = {};
    float attention_scale = 0;    // Gemma: the head scale, query_pre_attn_scalar^-1/2; 0: 1/sqrt(hs)
    float attention_softcap = 0;  // Gemma 2: scores = cap tanh(scores / cap) after the scale, before the mask; 0: none
    float logit_softcap = 0;      // Gemma: logits = cap tanh(logits / cap); 0: none
    // gpt-oss: each head's learned logit (sinks) joins its softmax's
    // denominator, taking a share of the weight from the keys (its sink weight).
    bool attention_sinks = false;
    // Encoders (BERT, RoBERTa, DistilBERT):
    bool causal = true;           // the model's own mask: a decoder's is causal, an encoder attends both ways
    bool post_norm = false;       // x = ln_1(x + attn(x)), x = ln_2(x + mlp(x)); no final norm
    bool embedding_norm = false;  // a LayerNorm over the embeddings (emb_ln)
    int type_vocab_size = 0;      // token-type (segment) embeddings' rows; 0: none
    int position_offset = 0;      // RoBERTa: text position t is row t + padding_idx + 1 of wpe
    bool mlm_head = false;        // the masked-LM head: dense, GELU, LayerNorm, the output embedding + bias
    bool head_bias = true;        // its dense product has a bias (ModernBERT's classifier_bias)
    bool logits_bias = true;      // its logits have a bias (ModernBERT's decoder_bias; BART's final_logits_bias)
    bool pad_positions = false;   // RoBERTa: a pad's position is padding_idx (position_offset - 1)
    // Encoder–decoders (T5, BART, Marian): this Config is the decoder's, and
    // each of its layers attends to the encoder's output after its own
    // self-attention (cross-attention); encoder_config() describes the encoder.
    int encoder_layers = 0;           // the encoder's layers; 0: not an encoder–decoder
    bool encoder_stack = false;       // this Config is an encoder–decoder's encoder (encoder_config)
    int decoder_start_token_id = -1;  // the decoder's first input token
    float embedding_scale = 1;        // token embeddings times this (scale_embedding: sqrt(C))
    // Gemma: the loader rounds embedding_scale to the dtype of the file's
    // embedding table, as transformers rounds sqrt(C) to the model's dtype.
    bool embedding_scale_rounded = false;
    bool vision_tower_left_out = false;  // a gemma3 checkpoint: its language model is read, its vision tower not
    float output_scale = 1;              // the decoder's output times this before the output embedding (T5: C^-1/2)
    bool scaled_scores = true;           // the model's own scale is 1/sqrt(hs); T5's is none
    int relative_buckets = 0;            // T5's position bias: buckets (half each way in an encoder)...
    int relative_max_distance = 128;     // ... and the distance past which they all share the last
    // Mixtures of experts: a layer's MLP is E SwiGLU MLPs of Fe (its experts),
    // of which its router (C -> E) picks k for each row, adding their outputs
    // times their routing weights. 0 experts: every MLP is dense.
    int n_experts = 0;          // E
    int experts_per_token = 0;  // k
    int expert_mlp_dim = 0;     // Fe
    bool normalize_top_k = false;
    Routing routing = Routing::softmax_then_top_k;
    bool router_bias = false;  // gpt-oss: the router's logits have a bias (router_b)
    // gpt-oss: the experts are stored fused per layer as MXFP4 blocks with
    // biases (packed_experts.cpp), not as tensors of their own.
    bool packed_experts = false;
    // gpt-oss: each expert's gate, up and down have biases (expert_*_b
    // tensors where its experts are tensors of their own: a GGUF file's).
    bool expert_biases = false;
    // gpt-oss's clamped SwiGLU in the experts: gate = min(gate, limit), up =
    // clamp(up, -limit, limit), (up + 1) * gate * sigmoid(alpha gate); a limit of 0: plain SwiGLU.
    float swiglu_limit = 0, swiglu_alpha = 1.702f;
    // With experts, the layers whose MLP is the mixture, one flag per layer
    // (the others' a dense MLP of F: Qwen 3 MoE's mlp_only_layers); empty: every layer's.
    std::vector<bool> expert_layers = {};

    int kv_heads() const { return n_kv_head ? n_kv_head : n_head; }
    int head_size() const { return head_dim ? head_dim : n_embd / n_head; }
    int mlp_size() const { return mlp_dim ? mlp_dim : 4 * n_embd; }
    int pad_id() const { return pad_token_id >= 0 ? pad_token_id : eos_token_id; }
    // Whether `id` ends a sequence: eos_token_id or any other the config lists.
    bool is_eos(int id) const {
        return id == eos_token_id || std::find(more_eos_ids.begin(), more_eos_ids.end(), id) != more_eos_ids.end();
    }
    bool is_encoder() const { return !causal; }
    bool has_experts() const { return n_experts > 0; }
    // Whether layer l's MLP is the mixture of experts.
    bool expert_layer(int layer) const {
        return n_experts > 0 && (expert_layers.empty() || expert_layers.at(static_cast<size_t>(layer)));
    }
    bool is_encoder_decoder() const { return encoder_layers > 0; }
    // Whether it has a head to predict with: a decoder's final norm and output
    // embedding, or an encoder's masked-LM head (a bare BertModel has none).
    bool predicts() const { return mlm_head || !post_norm || is_encoder_decoder(); }
    // Whether layer l has the sliding window (when the options keep it on).
    bool windowed(int layer) const {
        if (!windowed_layers.empty()) return sliding_window && windowed_layers.at(layer);
        return sliding_window && (!global_every || layer % global_every != 0);
    }
    // Whether some layers are local (windowed) and others global: the views then name each layer's kind.
    bool mixed_windows() const {
        bool local = false, global = false;
        for (int l = 0; l < n_layer; ++l) (windowed(l) ? local : global) = true;
        return local && global;
    }
};

// What a model is, in words: "decoder" (predicts the next token),
// "encoder" (attends both ways, predicts masked tokens) or "encoder-decoder".
const char* model_kind(const Config& config);

// An encoder–decoder's encoder: the decoder's sizes and layout with the
// encoder's layers, attending both ways, without cross-attention or head.
Config encoder_config(const Config& decoder);

const char* to_string(Norm norm);
const char* to_string(Positions positions);
const char* to_string(Mlp mlp);
// How a mixture of experts' router chooses, in words (Config::routing and
// normalize_top_k), e.g. "softmax over the experts, the 2 largest kept
// (equal ones: the lower expert), divided by their sum"; "" without experts.
std::string routing_words(const Config& config);

// The model_type values Headscope runs, for messages: "gpt2, llama, ...".
const char* supported_architectures();

// The Config of a config.json (`file` names it in errors). Throws Error on an
// unknown model_type (naming the supported ones), a missing key the family
// needs, a value out of range, or NH not a multiple of NKV.
Config config_from_json(const nlohmann::json& j, const std::string& file);

// The weights of the forward, by role. A family has a subset.
enum class Weight {
    wte,
    wpe,      // token embedding (V, C); learned positions (n_positions, C)
    lm_head,  // the output embedding (V, C), when not tied
    ln_1_w,
    ln_1_b,
    attn_w,  // fused Q, K, V (QkvLayout): GPT-2 (C, 3C) [Q | K | V]; Pythia (NH * 3 * hs, C), per head [q k v]
    attn_b,
    q_w,  // separate projections, Hugging Face Linear (out, in): Q (NH * hs, C), K and V (NKV * hs, C)
    q_b,
    k_w,
    k_b,
    v_w,
    v_b,
    q_norm,           // (hs); OLMo 2 (qk_norm_whole): (NH * hs)
    k_norm,           // (hs); OLMo 2: (NKV * hs)
    sinks,            // attention_sinks: one logit per head (NH)
    attn_out_norm_w,  // output_norms: the norm on the attention's output (C)
    mlp_out_norm_w,   // and on the MLP's (C)
    attn_proj_w,
    attn_proj_b,  // the output projection: GPT-2 (C, C); else (C, NH * hs)
    ln_2_w,
    ln_2_b,
    fc_w,  // GELU: c_fc (C, 4C) or dense_h_to_4h (F, C); SwiGLU: up_proj (F, C)
    fc_b,
    gate_w,  // SwiGLU: gate_proj (F, C)
    fc_proj_w,
    fc_proj_b,  // GPT-2 (4C, C); else (C, F)
    ln_f_w,
    ln_f_b,  // the final norm
    // Encoders:
    wtt,  // token-type embedding (type_vocab_size, C)
    emb_ln_w,
    emb_ln_b,  // the embeddings' LayerNorm
    head_dense_w,
    head_dense_b,  // the masked-LM head's transform (C, C)
    head_ln_w,
    head_ln_b,  // its LayerNorm
    lm_bias,    // (V) the bias on its logits
    gate_up_w,  // a fused gated MLP input (2F, C) (fused_gate_up): rows [0, F) the gate, [F, 2F) up
    // Encoder–decoders' decoder layers: the cross-attention, queries from the
    // decoder, keys and values from the encoder's output; its norm (ln_x).
    cross_q_w,
    cross_q_b,
    cross_k_w,
    cross_k_b,
    cross_v_w,
    cross_v_b,
    cross_proj_w,
    cross_proj_b,
    ln_x_w,
    ln_x_b,
    rel_bias,  // T5: (relative_buckets, NH), one per stack
    // A mixture of experts' layer (Config::expert_layer): the router (E, C),
    // and each expert's gate and up (Fe, C) and down (C, Fe) (TensorSpec::expert).
    router_w,
    router_b,  // gpt-oss (router_bias): (E)
    expert_gate_w,
    expert_up_w,
    expert_down_w,
    expert_gate_b,  // Config::expert_biases: gate's and up's (Fe), down's (C)
    expert_up_b,
    expert_down_b,
};
// Whether `weight` is one expert's (a TensorSpec of it names the expert).
inline bool expert_weight(Weight weight) {
    return weight == Weight::expert_gate_w || weight == Weight::expert_up_w || weight == Weight::expert_down_w ||
           weight == Weight::expert_gate_b || weight == Weight::expert_up_b || weight == Weight::expert_down_b;
}

struct TensorSpec {
    std::string name;            // in the file, e.g. "h.0.attn.c_attn.weight" (GPT-2 also takes "transformer.")
    std::vector<int64_t> shape;  // as the Config implies: e.g. (C, 3C)
    Weight weight;
    int layer;        // the layer it belongs to; -1 for the embeddings and the final norm
    int expert = -1;  // an expert's weight's expert; -1 for the others
};

// Every tensor a checkpoint of `config`'s family holds, in the order of the
// family's own files (for GPT-2: wte, wpe, each layer's 12, ln_f's 2).
std::vector<TensorSpec> model_tensors(const Config& config);

// The tensor that is `weight` of layer `layer` (-1: outside the layers) in a
// model of `config`'s stack, as model_tensors lists it; nullopt where the
// model has none (a layer past its last among them); an expert's weight's of `expert`.
std::optional<TensorSpec> tensor_spec(const Config& config, Weight weight, int layer, int expert = -1);

// Whether a weight is stored as Hugging Face's Linear (out, in), y = x W^T,
// rather than GPT-2's Conv1D (in, out), y = x W.
bool stored_out_by_in(const Config& config, Weight weight);

// A prefix the family's files may put before every name ("transformer." in
// GPT-2's GPT2LMHeadModel files); "" where names are exact.
const char* optional_tensor_prefix(const Config& config);

// The name older checkpoints (BERT's, converted from TensorFlow) give tensor
// `name`: "...LayerNorm.gamma" for "...LayerNorm.weight" and ".beta" for
// ".bias"; "" for any other name.
std::string legacy_tensor_name(const std::string& name);

// The name older saves of `config`'s family give tensor `name` (a gemma3
// checkpoint's "language_model.model.norm.weight" for
// "model.language_model.norm.weight"); "" where they name it alike.
std::string older_tensor_name(const Config& config, const std::string& name);

// The name of a tensor outside the layers (the embeddings, the final norm, the
// head) in `config`'s stack; throws Error where the family has none of that role.
std::string tensor_name(const Config& config, Weight weight);

// The masked-LM head's first tensor's name ("cls.predictions.transform.dense.weight"):
// a checkpoint without it is a bare encoder, loaded without the head.
std::string masked_lm_head_name(const Config& config);

// The name of the untied output embedding ("lm_head.weight"): a file of a
// tied model may hold it, and then it must have wte's shape.
std::string output_embedding_name(const Config& config);

// The module of a weight as the family's PyTorch code names it ("c_attn",
// "o_proj", "dense"), for the code the reshape dance quotes.
std::string module_name(const Config& config, Weight weight);

// The field of `weights` that points at GPT-2 tensor `t`: `weights` is any
// struct with GPT-2's weight fields (the trainer's parameters and
// gradients), with `layers` already sized.
template <typename Weights>
auto& gpt2_weight_pointer(Weights& weights, const TensorSpec& t) {
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
        default: std::abort();  // not a GPT-2 weight
    }
}

}  // namespace headscope
