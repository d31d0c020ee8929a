// The GGUF architectures' rows: see gguf_architectures.h. The names are
// gguf-py's (constants.py, tensor_mapping.py), the keys and the converter's
// changes its convert_hf_to_gguf.py's.
#include "gguf_architectures.h"

#include "headscope/base/error.h"

namespace headscope {

using json = nlohmann::json;

const GgufTensor* GgufSource::tensor(std::string_view name) const {
    const auto it = files.tensors.find(name);
    return it == files.tensors.end() ? nullptr : it->second;
}

void GgufSource::refuse(const std::string& what) const { throw Error(file().file() + ": " + what); }

namespace {

// RoPE's scaling types other than none (Llama 3.1's is its rope_freqs tensor).
void refuse_rope_scaling(const GgufSource& s) {
    if (const auto scaling = s.file().string(s.key("rope.scaling.type")); scaling && *scaling != "none")
        s.refuse("RoPE scaling of type '" + std::string(*scaling) + "' is not read yet");
}

}  // namespace

void llama_more_keys(const GgufSource& s, json& c) {
    refuse_rope_scaling(s);
    llama_attention_keys(s, c);
}

void llama_attention_keys(const GgufSource& s, json& c) {
    c["tie_word_embeddings"] = !s.tensor("output.weight");
    c["attention_bias"] = s.tensor("blk.0.attn_q.bias") != nullptr;
    const uint64_t heads = c["num_attention_heads"], width = c["hidden_size"];
    const uint64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<uint64_t>() : heads ? width / heads : 0;
    if (const auto rotated = s.file().integer(s.key("rope.dimension_count")); rotated && *rotated != head_dim)
        refuse_rotated_dims(s, *rotated, head_dim);
}

void refuse_rotated_dims(const GgufSource& s, uint64_t rotated, uint64_t head_dim) {
    s.refuse("RoPE turns " + std::to_string(rotated) + " of each head's " + std::to_string(head_dim) +
             " dims, which is not read yet");
}

namespace {

using K = GgufKeyKind;

// ---- llama, qwen2, qwen3 ----

const GgufStackNames llama_names = {
    false,
    {{"token_embd.weight", Weight::wte}, {"output_norm.weight", Weight::ln_f_w}, {"output.weight", Weight::lm_head}},
    "blk.",
    {{"attn_norm.weight", Weight::ln_1_w},
     {"attn_q.weight", Weight::q_w},
     {"attn_q.bias", Weight::q_b},
     {"attn_k.weight", Weight::k_w},
     {"attn_k.bias", Weight::k_b},
     {"attn_v.weight", Weight::v_w},
     {"attn_v.bias", Weight::v_b},
     {"attn_output.weight", Weight::attn_proj_w},
     {"attn_output.bias", Weight::attn_proj_b},
     {"attn_q_norm.weight", Weight::q_norm},
     {"attn_k_norm.weight", Weight::k_norm},
     {"ffn_norm.weight", Weight::ln_2_w},
     {"ffn_gate.weight", Weight::gate_w},
     {"ffn_up.weight", Weight::fc_w},
     {"ffn_down.weight", Weight::fc_proj_w},
     // A mixture of experts' layer (gguf_experts.cpp): its router, and each
     // of gate, up and down one 3-D tensor, the experts its outermost dim.
     {"ffn_gate_inp.weight", Weight::router_w},
     {"ffn_gate_exps.weight", Weight::expert_gate_w},
     {"ffn_up_exps.weight", Weight::expert_up_w},
     {"ffn_down_exps.weight", Weight::expert_down_w}}};

const std::vector<GgufKey> llama_keys = {
    {"block_count", "num_hidden_layers"},
    {"embedding_length", "hidden_size"},
    {"feed_forward_length", "intermediate_size"},
    {"attention.head_count", "num_attention_heads"},
    {"context_length", "max_position_embeddings"},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", K::number},
    {"attention.head_count_kv", "num_key_value_heads", K::count, false},
    {"attention.key_length", "head_dim", K::count, false},
    {"rope.freq_base", "rope_theta", K::number, false},
};

// llama's, and a mixture of experts' count and per token (the converter's
// num_experts, or num_local_experts, and num_experts_per_tok).
const std::vector<GgufKey> expert_keys = [] {
    std::vector<GgufKey> keys = llama_keys;
    keys.push_back({"expert_count", "num_experts"});
    keys.push_back({"expert_used_count", "num_experts_per_tok"});
    return keys;
}();

// ---- gpt-oss ----

// Every attention bias, each head's sink (attn_sinks), the norm before the
// MLP post_attention_norm; the router with its bias, the experts' gate and
// up (the converter splits gate_up_proj) and down with their biases.
const GgufStackNames gpt_oss_names = {
    false,
    {{"token_embd.weight", Weight::wte}, {"output_norm.weight", Weight::ln_f_w}, {"output.weight", Weight::lm_head}},
    "blk.",
    {{"attn_norm.weight", Weight::ln_1_w},
     {"attn_q.weight", Weight::q_w},
     {"attn_q.bias", Weight::q_b},
     {"attn_k.weight", Weight::k_w},
     {"attn_k.bias", Weight::k_b},
     {"attn_v.weight", Weight::v_w},
     {"attn_v.bias", Weight::v_b},
     {"attn_output.weight", Weight::attn_proj_w},
     {"attn_output.bias", Weight::attn_proj_b},
     {"attn_sinks.weight", Weight::sinks},
     {"post_attention_norm.weight", Weight::ln_2_w},
     {"ffn_gate_inp.weight", Weight::router_w},
     {"ffn_gate_inp.bias", Weight::router_b},
     {"ffn_gate_exps.weight", Weight::expert_gate_w},
     {"ffn_gate_exps.bias", Weight::expert_gate_b},
     {"ffn_up_exps.weight", Weight::expert_up_w},
     {"ffn_up_exps.bias", Weight::expert_up_b},
     {"ffn_down_exps.weight", Weight::expert_down_w},
     {"ffn_down_exps.bias", Weight::expert_down_b}}};

// llama's, the experts' (configuration_gpt_oss.py's num_local_experts) and the window.
const std::vector<GgufKey> gpt_oss_keys = [] {
    std::vector<GgufKey> keys = llama_keys;
    keys.push_back({"expert_count", "num_local_experts"});
    keys.push_back({"expert_used_count", "num_experts_per_tok"});
    keys.push_back({"attention.sliding_window", "sliding_window"});
    return keys;
}();

// The converter reorders each head's rows of Q and K in llama files (its
// LlamaModel.permute), so that RoPE pairs adjacent dims.
void llama_layout(const GgufSource&, Config& c) { c.rope.adjacent_pairs = true; }

// ---- olmo2 ----

// No norm before either sublayer; each one's output normed (post_attention_norm,
// post_ffw_norm); Q and K normed as a whole. The converter reorders no rows.
const GgufStackNames olmo2_names = {
    false,
    {{"token_embd.weight", Weight::wte}, {"output_norm.weight", Weight::ln_f_w}, {"output.weight", Weight::lm_head}},
    "blk.",
    {{"attn_q.weight", Weight::q_w},
     {"attn_k.weight", Weight::k_w},
     {"attn_v.weight", Weight::v_w},
     {"attn_output.weight", Weight::attn_proj_w},
     {"attn_q_norm.weight", Weight::q_norm},
     {"attn_k_norm.weight", Weight::k_norm},
     {"post_attention_norm.weight", Weight::attn_out_norm_w},
     {"ffn_gate.weight", Weight::gate_w},
     {"ffn_up.weight", Weight::fc_w},
     {"ffn_down.weight", Weight::fc_proj_w},
     {"post_ffw_norm.weight", Weight::mlp_out_norm_w}}};

// ---- gemma2, gemma3 ----

// A norm before and after each sublayer (attn_norm, post_attention_norm;
// ffn_norm, post_ffw_norm), their weights 1 + w, the converter's sum (the
// helpers are gguf_gemma.cpp's). Gemma 2's output embedding is always
// token_embd, an output.weight refused as llama.cpp leaves it unread.
const std::vector<GgufName> gemma_layer = {{"attn_norm.weight", Weight::ln_1_w},
                                           {"attn_q.weight", Weight::q_w},
                                           {"attn_k.weight", Weight::k_w},
                                           {"attn_v.weight", Weight::v_w},
                                           {"attn_output.weight", Weight::attn_proj_w},
                                           {"attn_q_norm.weight", Weight::q_norm},
                                           {"attn_k_norm.weight", Weight::k_norm},
                                           {"post_attention_norm.weight", Weight::attn_out_norm_w},
                                           {"ffn_norm.weight", Weight::ln_2_w},
                                           {"ffn_gate.weight", Weight::gate_w},
                                           {"ffn_up.weight", Weight::fc_w},
                                           {"ffn_down.weight", Weight::fc_proj_w},
                                           {"post_ffw_norm.weight", Weight::mlp_out_norm_w}};

const GgufStackNames gemma2_names = {
    false, {{"token_embd.weight", Weight::wte}, {"output_norm.weight", Weight::ln_f_w}}, "blk.", gemma_layer};

const GgufStackNames gemma3_names = {
    false,
    {{"token_embd.weight", Weight::wte}, {"output_norm.weight", Weight::ln_f_w}, {"output.weight", Weight::lm_head}},
    "blk.",
    gemma_layer};

// ---- phi3 ----

// Q, K and V one product (attn_qkv) and the MLP's gate and up one (ffn_up, 2F
// rows, the gate's first), as Phi-3's own files have them: the converter
// reorders no rows.
const GgufStackNames phi3_names = {
    false,
    {{"token_embd.weight", Weight::wte}, {"output_norm.weight", Weight::ln_f_w}, {"output.weight", Weight::lm_head}},
    "blk.",
    {{"attn_norm.weight", Weight::ln_1_w},
     {"attn_qkv.weight", Weight::attn_w},
     {"attn_output.weight", Weight::attn_proj_w},
     {"ffn_norm.weight", Weight::ln_2_w},
     {"ffn_up.weight", Weight::gate_up_w},
     {"ffn_down.weight", Weight::fc_proj_w}}};

// llama's, and the window.
const std::vector<GgufKey> phi3_keys = [] {
    std::vector<GgufKey> keys = llama_keys;
    keys.push_back({"attention.sliding_window", "sliding_window", K::count, false});
    return keys;
}();

// Tied where the file has no output.weight; partial_rotary_factor from the
// dims RoPE turns (Phi-4-mini's 96 of 128); LongRoPE where the file has its factors.
void phi3_more_keys(const GgufSource& s, json& c) {
    c["tie_word_embeddings"] = !s.tensor("output.weight");
    refuse_rope_scaling(s);
    const uint64_t heads = c["num_attention_heads"], width = c["hidden_size"];
    const uint64_t head_dim = heads ? width / heads : 0;
    const uint64_t rotated = s.file().integer(s.key("rope.dimension_count")).value_or(head_dim);
    const float fraction = head_dim ? float(rotated) / float(head_dim) : 1;
    if (rotated % 2 || rotated == 0 || rotated > head_dim ||
        static_cast<uint64_t>(double(head_dim) * double(fraction)) != rotated)
        refuse_rotated_dims(s, rotated, head_dim);
    longrope_keys(s, c, rotated / 2);
    c["partial_rotary_factor"] = fraction;
}

// ---- gpt2, gptneox ----

// GPT-2's and GPT-NeoX's layers: LayerNorms and products with biases, Q, K and V fused.
const std::vector<GgufName> layer_norm_layer = {{"attn_norm.weight", Weight::ln_1_w},
                                                {"attn_norm.bias", Weight::ln_1_b},
                                                {"attn_qkv.weight", Weight::attn_w},
                                                {"attn_qkv.bias", Weight::attn_b},
                                                {"attn_output.weight", Weight::attn_proj_w},
                                                {"attn_output.bias", Weight::attn_proj_b},
                                                {"ffn_norm.weight", Weight::ln_2_w},
                                                {"ffn_norm.bias", Weight::ln_2_b},
                                                {"ffn_up.weight", Weight::fc_w},
                                                {"ffn_up.bias", Weight::fc_b},
                                                {"ffn_down.weight", Weight::fc_proj_w},
                                                {"ffn_down.bias", Weight::fc_proj_b}};

const GgufStackNames gpt2_names = {false,
                                   {{"token_embd.weight", Weight::wte},
                                    {"position_embd.weight", Weight::wpe},
                                    {"output_norm.weight", Weight::ln_f_w},
                                    {"output_norm.bias", Weight::ln_f_b},
                                    {"output.weight", Weight::lm_head}},
                                   "blk.",
                                   layer_norm_layer};

const GgufStackNames gpt_neox_names = {false,
                                       {{"token_embd.weight", Weight::wte},
                                        {"output_norm.weight", Weight::ln_f_w},
                                        {"output_norm.bias", Weight::ln_f_b},
                                        {"output.weight", Weight::lm_head}},
                                       "blk.",
                                       layer_norm_layer};

// The MLP is 4C wide in GPT-2: its feed_forward_length is checked by ffn_up's shape.
const std::vector<GgufKey> gpt2_keys = {
    {"block_count", "n_layer"},
    {"embedding_length", "n_embd"},
    {"attention.head_count", "n_head"},
    {"context_length", "n_positions"},
    {"attention.layer_norm_epsilon", "layer_norm_epsilon", K::number},
};

void gpt2_more_keys(const GgufSource& s, json& c) { c["tie_word_embeddings"] = !s.tensor("output.weight"); }

// The converter transposes GPT-2's Conv1D weights (in, out) into (out, in).
void gpt2_layout(const GgufSource&, Config& c) { c.weights_out_by_in = true; }

const std::vector<GgufKey> gpt_neox_keys = {
    {"block_count", "num_hidden_layers"},
    {"embedding_length", "hidden_size"},
    {"feed_forward_length", "intermediate_size"},
    {"attention.head_count", "num_attention_heads"},
    {"context_length", "max_position_embeddings"},
    {"attention.layer_norm_epsilon", "layer_norm_eps", K::number},
    {"use_parallel_residual", "use_parallel_residual", K::flag},
    {"rope.freq_base", "rope_theta", K::number, false},
};

// Pythia's rotary_pct from the dims RoPE turns (llama.cpp's default: the
// whole head), which the Config must give back exactly.
void gpt_neox_more_keys(const GgufSource& s, json& c) {
    c["tie_word_embeddings"] = false;
    refuse_rope_scaling(s);
    const uint64_t heads = c["num_attention_heads"], width = c["hidden_size"];
    const uint64_t head_dim = heads ? width / heads : 0;
    const uint64_t rotated = s.file().integer(s.key("rope.dimension_count")).value_or(head_dim);
    const float fraction = head_dim ? float(rotated) / float(head_dim) : 1;
    if (rotated % 2 || rotated > head_dim || static_cast<uint64_t>(float(head_dim) * fraction) != rotated)
        refuse_rotated_dims(s, rotated, head_dim);
    c["rotary_pct"] = fraction;
}

// The converter reorders query_key_value's rows, per head [q k v], into [Q | K | V].
void gpt_neox_layout(const GgufSource&, Config& c) { c.qkv_layout = QkvLayout::fused; }

// ---- bert ----

// BERT without its masked-LM head, which the converter leaves out.
const GgufStackNames bert_names = {false,
                                   {{"token_embd.weight", Weight::wte},
                                    {"token_types.weight", Weight::wtt},
                                    {"position_embd.weight", Weight::wpe},
                                    {"token_embd_norm.weight", Weight::emb_ln_w},
                                    {"token_embd_norm.bias", Weight::emb_ln_b}},
                                   "blk.",
                                   {{"attn_q.weight", Weight::q_w},
                                    {"attn_q.bias", Weight::q_b},
                                    {"attn_k.weight", Weight::k_w},
                                    {"attn_k.bias", Weight::k_b},
                                    {"attn_v.weight", Weight::v_w},
                                    {"attn_v.bias", Weight::v_b},
                                    {"attn_output.weight", Weight::attn_proj_w},
                                    {"attn_output.bias", Weight::attn_proj_b},
                                    {"attn_output_norm.weight", Weight::ln_1_w},
                                    {"attn_output_norm.bias", Weight::ln_1_b},
                                    {"ffn_up.weight", Weight::fc_w},
                                    {"ffn_up.bias", Weight::fc_b},
                                    {"ffn_down.weight", Weight::fc_proj_w},
                                    {"ffn_down.bias", Weight::fc_proj_b},
                                    {"layer_output_norm.weight", Weight::ln_2_w},
                                    {"layer_output_norm.bias", Weight::ln_2_b}}};

const std::vector<GgufKey> bert_keys = {
    {"block_count", "num_hidden_layers"},          {"embedding_length", "hidden_size"},
    {"feed_forward_length", "intermediate_size"},  {"attention.head_count", "num_attention_heads"},
    {"context_length", "max_position_embeddings"}, {"attention.layer_norm_epsilon", "layer_norm_eps", K::number},
};

// The token types' count is the tokenizer's key (llama.cpp refuses a BERT without it).
void bert_more_keys(const GgufSource& s, json& c) {
    const char* key = "tokenizer.ggml.token_type_count";
    const auto types = s.file().integer(key);
    if (!types) s.refuse(std::string("key '") + key + "' missing");
    c["type_vocab_size"] = *types;
}

// ---- t5 ----

const GgufStackNames t5_decoder_names = {false,
                                         {{"token_embd.weight", Weight::wte},
                                          {"dec.blk.0.attn_rel_b.weight", Weight::rel_bias},
                                          {"dec.output_norm.weight", Weight::ln_f_w},
                                          {"output.weight", Weight::lm_head}},
                                         "dec.blk.",
                                         {{"attn_norm.weight", Weight::ln_1_w},
                                          {"attn_q.weight", Weight::q_w},
                                          {"attn_k.weight", Weight::k_w},
                                          {"attn_v.weight", Weight::v_w},
                                          {"attn_o.weight", Weight::attn_proj_w},
                                          {"cross_attn_norm.weight", Weight::ln_x_w},
                                          {"cross_attn_q.weight", Weight::cross_q_w},
                                          {"cross_attn_k.weight", Weight::cross_k_w},
                                          {"cross_attn_v.weight", Weight::cross_v_w},
                                          {"cross_attn_o.weight", Weight::cross_proj_w},
                                          {"ffn_norm.weight", Weight::ln_2_w},
                                          {"ffn_gate.weight", Weight::gate_w},
                                          {"ffn_up.weight", Weight::fc_w},
                                          {"ffn_down.weight", Weight::fc_proj_w}}};

const GgufStackNames t5_encoder_names = {
    true,
    {{"enc.blk.0.attn_rel_b.weight", Weight::rel_bias}, {"enc.output_norm.weight", Weight::ln_f_w}},
    "enc.blk.",
    {{"attn_norm.weight", Weight::ln_1_w},
     {"attn_q.weight", Weight::q_w},
     {"attn_k.weight", Weight::k_w},
     {"attn_v.weight", Weight::v_w},
     {"attn_o.weight", Weight::attn_proj_w},
     {"ffn_norm.weight", Weight::ln_2_w},
     {"ffn_gate.weight", Weight::gate_w},
     {"ffn_up.weight", Weight::fc_w},
     {"ffn_down.weight", Weight::fc_proj_w}}};

// The position bias's largest distance is not in the file: llama.cpp's is
// fixed at 128, transformers' default.
const std::vector<GgufKey> t5_keys = {
    {"block_count", "num_layers"},
    {"decoder_block_count", "num_decoder_layers", K::count, false},
    {"embedding_length", "d_model"},
    {"feed_forward_length", "d_ff"},
    {"attention.head_count", "num_heads"},
    {"attention.key_length", "d_kv"},
    {"context_length", "n_positions"},
    {"attention.layer_norm_rms_epsilon", "layer_norm_epsilon", K::number},
    {"attention.relative_buckets_count", "relative_attention_num_buckets"},
    {"decoder_start_token_id", "decoder_start_token_id", K::count, false},
};

// Gated GELU (T5 v1.1, Flan-T5) where the encoder's first layer has a gate,
// else ReLU; the output embedding tied where the file has none, and then
// reading the decoder's output times d_model^-1/2 as transformers' does
// (llama.cpp's does not scale it).
void t5_more_keys(const GgufSource& s, json& c) {
    c["feed_forward_proj"] = s.tensor("enc.blk.0.ffn_gate.weight") ? "gated-gelu" : "relu";
    c["tie_word_embeddings"] = !s.tensor("output.weight");
}

const GgufArchitecture architectures[] = {
    // llama: Mixtral too, where expert_count is above 0.
    {"llama", "llama", llama_keys, {llama_names}, llama_or_mixtral_more_keys, llama_layout},
    {"qwen2", "qwen2", llama_keys, {llama_names}, llama_more_keys},
    {"qwen3", "qwen3", llama_keys, {llama_names}, llama_more_keys},
    {"qwen3moe", "qwen3_moe", expert_keys, {llama_names}, qwen3moe_more_keys},
    {"olmoe", "olmoe", expert_keys, {llama_names}, olmoe_more_keys},
    {"gpt-oss", "gpt_oss", gpt_oss_keys, {gpt_oss_names}, gpt_oss_more_keys, gpt_oss_layout},
    {"olmo2", "olmo2", llama_keys, {olmo2_names}, llama_more_keys},
    {"phi3", "phi3", phi3_keys, {phi3_names}, phi3_more_keys},
    // Gemma: llama's keys; the soft caps, the window and RoPE's scaling are gguf_gemma.cpp's.
    {"gemma2", "gemma2", llama_keys, {gemma2_names}, gemma2_more_keys, gemma2_layout},
    {"gemma3", "gemma3_text", llama_keys, {gemma3_names}, gemma3_more_keys, gemma3_layout},
    {"gpt2", "gpt2", gpt2_keys, {gpt2_names}, gpt2_more_keys, gpt2_layout},
    {"gptneox", "gpt_neox", gpt_neox_keys, {gpt_neox_names}, gpt_neox_more_keys, gpt_neox_layout},
    {"bert", "bert", bert_keys, {bert_names}, bert_more_keys},
    {"t5", "t5", t5_keys, {t5_decoder_names, t5_encoder_names}, t5_more_keys},
};

}  // namespace

const GgufArchitecture* gguf_architecture(std::string_view name) {
    for (const GgufArchitecture& a : architectures)
        if (a.name == name) return &a;
    return nullptr;
}

std::string gguf_architecture_names() {
    std::string names;
    const size_t n = std::size(architectures);
    for (size_t i = 0; i < n; ++i)
        names += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + std::string(architectures[i].name);
    return names;
}

}  // namespace headscope
