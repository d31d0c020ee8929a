// Gemma 2's and Gemma 3's GGUF rows' helpers (gguf_architectures.h): the
// keys as llama.cpp reads them (its llama_model_gemma2 and llama_model_gemma3
// hparams), and the Config where llama.cpp computes otherwise than
// transformers: norms used as stored, sqrt(C) unrounded, and the head scale
// chosen by the model's size rather than by query_pre_attn_scalar, which
// the converter does not write.
#include <cmath>

#include "gguf_architectures.h"

namespace headscope {

namespace {

using json = nlohmann::json;

// llama.cpp's defaults where the file says none (K/V heads NH, heads of C /
// NH, RoPE base 10000), where transformers' Gemma configs have others; keys
// and values of one head size; RoPE over whole heads.
void gguf_gemma_keys(const GgufSource& s, json& c) {
    if (!c.contains("num_key_value_heads")) c["num_key_value_heads"] = c["num_attention_heads"];
    const uint64_t heads = c["num_attention_heads"], width = c["hidden_size"];
    if (!c.contains("head_dim")) c["head_dim"] = heads ? width / heads : 0;
    if (!c.contains("rope_theta")) c["rope_theta"] = 10000.0;
    const uint64_t head_dim = c["head_dim"];
    if (const auto values = s.file().integer(s.key("attention.value_length")); values && *values != head_dim)
        s.refuse("values of " + std::to_string(*values) + " dims beside keys of " + std::to_string(head_dim) +
                 " are not read yet");
    if (const auto rotated = s.file().integer(s.key("rope.dimension_count")); rotated && *rotated != head_dim)
        refuse_rotated_dims(s, *rotated, head_dim);
}

// llama.cpp divides RoPE's frequencies by rope.scaling.factor (else the
// older rope.scale_linear; 0: none) where rope.scaling.type is linear, its
// default. 1: none.
double linear_rope_factor(const GgufSource& s) {
    const auto type = s.file().string(s.key("rope.scaling.type"));
    if (type && *type != "none" && *type != "linear")
        s.refuse("RoPE scaling of type '" + std::string(*type) + "' is not read yet");
    auto factor = s.file().number(s.key("rope.scaling.factor"));
    if (!factor) factor = s.file().number(s.key("rope.scale_linear"));
    if (!factor || *factor == 0 || *factor == 1) return 1;
    if (!(*factor > 0) || !std::isfinite(*factor))
        s.refuse("RoPE's scaling factor " + std::to_string(*factor) + " is not a positive number");
    if (type == "none") s.refuse("RoPE's scaling factor " + std::to_string(*factor) + " with scaling type none");
    return *factor;
}

// A soft cap's key: absent, `fallback`; else a positive number (0 where `none_allowed`: no cap).
json soft_cap(const GgufSource& s, const char* name, double fallback, bool none_allowed) {
    const double cap = s.file().number(s.key(name)).value_or(fallback);
    if (cap == 0 && none_allowed) return nullptr;
    if (!(cap > 0) || !std::isfinite(cap))
        s.refuse("key '" + s.key(name) + "' is " + std::to_string(cap) + ", not a positive cap");
    return cap;
}

// A positive RoPE base from key `name`, else `fallback`.
float rope_base(const GgufSource& s, const char* name, float fallback) {
    const double base = s.file().number(s.key(name)).value_or(fallback);
    if (!(base > 0) || !std::isfinite(base))
        s.refuse("key '" + s.key(name) + "' is " + std::to_string(base) + ", not a positive RoPE base");
    return static_cast<float>(base);
}

// What both share: the converter added 1 to every norm's weight, so they
// scale by w as stored; the embeddings times sqrtf(C), in float32 whatever
// the table's type (transformers rounds sqrt(C) to the weights' dtype); the
// scores times 1 / sqrtf(C / NH) for the 27B (`layers_27b` layers, as
// llama.cpp tells it), else 1 / sqrtf(hs), where transformers reads
// query_pre_attn_scalar (the same for Google's models); with a window, the
// layers of sliding_window_pattern (default `pattern`): each pattern-th
// from layer pattern - 1 global, every layer windowed for 0.
void gemma_layout(const GgufSource& s, Config& c, int layers_27b, uint64_t pattern) {
    c.norm_offset = 0;
    c.embedding_scale_rounded = false;
    const int scale_width = c.n_layer == layers_27b ? c.n_embd / c.n_head : c.head_size();
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(scale_width));
    if (!c.sliding_window) return;
    pattern = s.file().integer(s.key("attention.sliding_window_pattern")).value_or(pattern);
    c.windowed_layers.assign(static_cast<size_t>(c.n_layer), true);
    for (uint64_t l = 0; pattern && l < c.windowed_layers.size(); ++l) c.windowed_layers[l] = l % pattern < pattern - 1;
}

}  // namespace

// Every score capped (attn_logit_softcapping, default 50) and the logits
// (final_logit_softcapping, default 30), which llama.cpp always applies:
// neither may be 0. The window 4096 where the file says none, its layers
// the even ones; a local RoPE base where rope.freq_base_swa gives one. RoPE
// scaling, which llama.cpp applies to the local layers too, is not read.
void gemma2_more_keys(const GgufSource& s, json& c) {
    gguf_gemma_keys(s, c);
    c["tie_word_embeddings"] = true;
    if (linear_rope_factor(s) != 1) s.refuse("Gemma 2's RoPE scaling is not read yet");
    c["attn_logit_softcapping"] = soft_cap(s, "attn_logit_softcapping", 50, false);
    c["final_logit_softcapping"] = soft_cap(s, "final_logit_softcapping", 30, false);
    const uint64_t window = s.file().integer(s.key("attention.sliding_window")).value_or(4096);
    if (window == 0) s.refuse("key '" + s.key("attention.sliding_window") + "' is 0: a window of no keys");
    c["sliding_window"] = window;
}

void gemma2_layout(const GgufSource& s, Config& c) {
    gemma_layout(s, c, 46, 2);
    if (s.file().number(s.key("rope.freq_base_swa"))) c.local_rope_theta = rope_base(s, "rope.freq_base_swa", 0);
}

// No score cap; the logits capped where final_logit_softcapping says (0 or
// absent: none); untied where the file has output.weight. A window only
// where attention.sliding_window is above 0, its layers five local to one
// global, rotating by rope.freq_base_swa (default 10000) unscaled; the
// global ones by rope.freq_base and the linear factor.
void gemma3_more_keys(const GgufSource& s, json& c) {
    gguf_gemma_keys(s, c);
    c["tie_word_embeddings"] = !s.tensor("output.weight");
    if (const double factor = linear_rope_factor(s); factor != 1)
        c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
    c["final_logit_softcapping"] = soft_cap(s, "final_logit_softcapping", 0, true);
    if (const uint64_t window = s.file().integer(s.key("attention.sliding_window")).value_or(0))
        c["sliding_window"] = window;
}

void gemma3_layout(const GgufSource& s, Config& c) {
    if (!s.file().integer(s.key("attention.sliding_window")).value_or(0)) c.sliding_window = 0;  // not 4096
    gemma_layout(s, c, 62, 6);
    c.local_rope_theta = rope_base(s, "rope.freq_base_swa", 10000);
}

}  // namespace headscope
