// The families' tensor names: see family_tensors.h.
#include "family_tensors.h"

namespace headscope {

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
     {Weight::fc_proj_w, "mlp.down_proj.weight"},
     // Qwen 3 MoE's and OLMoE's layers of experts, in place of the MLP above.
     {Weight::router_w, "mlp.gate.weight"},
     {Weight::expert_gate_w, "mlp.experts.*.gate_proj.weight"},
     {Weight::expert_up_w, "mlp.experts.*.up_proj.weight"},
     {Weight::expert_down_w, "mlp.experts.*.down_proj.weight"}},
    {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

// Mixtral: Llama's attention; every layer's MLP the block_sparse_moe, its
// experts' w1 the gate, w3 up and w2 down.
const TensorNames mixtral_names = {
    "",
    {{Weight::wte, "model.embed_tokens.weight"}},
    "model.layers.",
    {{Weight::ln_1_w, "input_layernorm.weight"},
     {Weight::q_w, "self_attn.q_proj.weight"},
     {Weight::k_w, "self_attn.k_proj.weight"},
     {Weight::v_w, "self_attn.v_proj.weight"},
     {Weight::attn_proj_w, "self_attn.o_proj.weight"},
     {Weight::ln_2_w, "post_attention_layernorm.weight"},
     {Weight::router_w, "block_sparse_moe.gate.weight"},
     {Weight::expert_gate_w, "block_sparse_moe.experts.*.w1.weight"},
     {Weight::expert_up_w, "block_sparse_moe.experts.*.w3.weight"},
     {Weight::expert_down_w, "block_sparse_moe.experts.*.w2.weight"}},
    {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

// gpt-oss: Llama's attention with every bias and each head's sink; the
// router mlp.router with its bias; the experts packed (packed_experts.cpp),
// or (a GGUF file's, which splits gate_up_proj) each expert's gate, up and
// down with their biases under these names.
const TensorNames gpt_oss_names = {
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
     {Weight::sinks, "self_attn.sinks"},
     {Weight::attn_proj_w, "self_attn.o_proj.weight"},
     {Weight::attn_proj_b, "self_attn.o_proj.bias"},
     {Weight::ln_2_w, "post_attention_layernorm.weight"},
     {Weight::router_w, "mlp.router.weight"},
     {Weight::router_b, "mlp.router.bias"},
     {Weight::expert_gate_w, "mlp.experts.*.gate_proj.weight"},
     {Weight::expert_gate_b, "mlp.experts.*.gate_proj.bias"},
     {Weight::expert_up_w, "mlp.experts.*.up_proj.weight"},
     {Weight::expert_up_b, "mlp.experts.*.up_proj.bias"},
     {Weight::expert_down_w, "mlp.experts.*.down_proj.weight"},
     {Weight::expert_down_b, "mlp.experts.*.down_proj.bias"}},
    {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

// OLMo 2: no norm before either sublayer; post_attention_layernorm and
// post_feedforward_layernorm normalize their outputs; q_norm and k_norm are
// as wide as the projections.
const TensorNames olmo2_names = {
    "",
    {{Weight::wte, "model.embed_tokens.weight"}},
    "model.layers.",
    {{Weight::q_w, "self_attn.q_proj.weight"},
     {Weight::k_w, "self_attn.k_proj.weight"},
     {Weight::v_w, "self_attn.v_proj.weight"},
     {Weight::q_b, "self_attn.q_proj.bias"},
     {Weight::k_b, "self_attn.k_proj.bias"},
     {Weight::v_b, "self_attn.v_proj.bias"},
     {Weight::q_norm, "self_attn.q_norm.weight"},
     {Weight::k_norm, "self_attn.k_norm.weight"},
     {Weight::attn_proj_w, "self_attn.o_proj.weight"},
     {Weight::attn_proj_b, "self_attn.o_proj.bias"},
     {Weight::attn_out_norm_w, "post_attention_layernorm.weight"},
     {Weight::gate_w, "mlp.gate_proj.weight"},
     {Weight::fc_w, "mlp.up_proj.weight"},
     {Weight::fc_proj_w, "mlp.down_proj.weight"},
     {Weight::mlp_out_norm_w, "post_feedforward_layernorm.weight"}},
    {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

// Phi-3's: Llama's, with Q, K and V one product (its outputs [Q | K | V])
// and the MLP's gate and up one product (its outputs [gate | up]).
const TensorNames phi3_names = {
    "",
    {{Weight::wte, "model.embed_tokens.weight"}},
    "model.layers.",
    {{Weight::ln_1_w, "input_layernorm.weight"},
     {Weight::attn_w, "self_attn.qkv_proj.weight"},
     {Weight::attn_proj_w, "self_attn.o_proj.weight"},
     {Weight::ln_2_w, "post_attention_layernorm.weight"},
     {Weight::gate_up_w, "mlp.gate_up_proj.weight"},
     {Weight::fc_proj_w, "mlp.down_proj.weight"}},
    {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

// Gemma 2's and 3's layer: a norm before each sublayer (input_layernorm,
// pre_feedforward_layernorm) and one on each one's output
// (post_attention_layernorm, post_feedforward_layernorm); Gemma 3's q_norm
// and k_norm per head.
const std::vector<Named> gemma_layer = {{Weight::ln_1_w, "input_layernorm.weight"},
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
                                        {Weight::attn_out_norm_w, "post_attention_layernorm.weight"},
                                        {Weight::ln_2_w, "pre_feedforward_layernorm.weight"},
                                        {Weight::gate_w, "mlp.gate_proj.weight"},
                                        {Weight::fc_w, "mlp.up_proj.weight"},
                                        {Weight::fc_proj_w, "mlp.down_proj.weight"},
                                        {Weight::mlp_out_norm_w, "post_feedforward_layernorm.weight"}};

const TensorNames gemma_names = {"",
                                 {{Weight::wte, "model.embed_tokens.weight"}},
                                 "model.layers.",
                                 gemma_layer,
                                 {{Weight::ln_f_w, "model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}}};

// A gemma3 checkpoint's language model as transformers 4.52 on saves it;
// older saves (the Hub's) name it language_model.model. and its head
// language_model.lm_head. The vision tower's tensors are not read.
const TensorNames gemma3_names = {
    "",
    {{Weight::wte, "model.language_model.embed_tokens.weight"}},
    "model.language_model.layers.",
    gemma_layer,
    {{Weight::ln_f_w, "model.language_model.norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
    {{"model.language_model.", "language_model.model."}, {"lm_head.", "language_model.lm_head."}}};

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

// ---- Encoder–decoders: each stack's names ----

namespace {

bool ungated_mlp(const Config& c) { return !gated(c.mlp); }
bool gated_mlp(const Config& c) { return gated(c.mlp); }

}  // namespace

// T5ForConditionalGeneration's: the self-attention in each block's layer.0,
// the decoder's cross-attention in layer.1 and the feed-forward after them
// (wi with ReLU; wi_0, the gate, and wi_1 with gated GELU); the position
// bias in block 0's self-attention only.
const TensorNames t5_encoder_names = {
    "",
    {{Weight::wte, "shared.weight"},
     {Weight::rel_bias, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}},
    "encoder.block.",
    {{Weight::q_w, "layer.0.SelfAttention.q.weight"},
     {Weight::k_w, "layer.0.SelfAttention.k.weight"},
     {Weight::v_w, "layer.0.SelfAttention.v.weight"},
     {Weight::attn_proj_w, "layer.0.SelfAttention.o.weight"},
     {Weight::ln_1_w, "layer.0.layer_norm.weight"},
     {Weight::fc_w, "layer.1.DenseReluDense.wi.weight", ungated_mlp},
     {Weight::gate_w, "layer.1.DenseReluDense.wi_0.weight"},
     {Weight::fc_w, "layer.1.DenseReluDense.wi_1.weight", gated_mlp},
     {Weight::fc_proj_w, "layer.1.DenseReluDense.wo.weight"},
     {Weight::ln_2_w, "layer.1.layer_norm.weight"}},
    {{Weight::ln_f_w, "encoder.final_layer_norm.weight"}},
};

const TensorNames t5_decoder_names = {
    "",
    {{Weight::wte, "shared.weight"},
     {Weight::rel_bias, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}},
    "decoder.block.",
    {{Weight::q_w, "layer.0.SelfAttention.q.weight"},
     {Weight::k_w, "layer.0.SelfAttention.k.weight"},
     {Weight::v_w, "layer.0.SelfAttention.v.weight"},
     {Weight::attn_proj_w, "layer.0.SelfAttention.o.weight"},
     {Weight::ln_1_w, "layer.0.layer_norm.weight"},
     {Weight::cross_q_w, "layer.1.EncDecAttention.q.weight"},
     {Weight::cross_k_w, "layer.1.EncDecAttention.k.weight"},
     {Weight::cross_v_w, "layer.1.EncDecAttention.v.weight"},
     {Weight::cross_proj_w, "layer.1.EncDecAttention.o.weight"},
     {Weight::ln_x_w, "layer.1.layer_norm.weight"},
     {Weight::fc_w, "layer.2.DenseReluDense.wi.weight", ungated_mlp},
     {Weight::gate_w, "layer.2.DenseReluDense.wi_0.weight"},
     {Weight::fc_w, "layer.2.DenseReluDense.wi_1.weight", gated_mlp},
     {Weight::fc_proj_w, "layer.2.DenseReluDense.wo.weight"},
     {Weight::ln_2_w, "layer.2.layer_norm.weight"}},
    {{Weight::ln_f_w, "decoder.final_layer_norm.weight"}, {Weight::lm_head, "lm_head.weight"}},
};

namespace {

// A BART or Marian layer's self-attention and MLP, each followed by its LayerNorm.
const std::vector<Named> bart_layer = {{Weight::k_w, "self_attn.k_proj.weight"},
                                       {Weight::k_b, "self_attn.k_proj.bias"},
                                       {Weight::v_w, "self_attn.v_proj.weight"},
                                       {Weight::v_b, "self_attn.v_proj.bias"},
                                       {Weight::q_w, "self_attn.q_proj.weight"},
                                       {Weight::q_b, "self_attn.q_proj.bias"},
                                       {Weight::attn_proj_w, "self_attn.out_proj.weight"},
                                       {Weight::attn_proj_b, "self_attn.out_proj.bias"},
                                       {Weight::ln_1_w, "self_attn_layer_norm.weight"},
                                       {Weight::ln_1_b, "self_attn_layer_norm.bias"},
                                       {Weight::fc_w, "fc1.weight"},
                                       {Weight::fc_b, "fc1.bias"},
                                       {Weight::fc_proj_w, "fc2.weight"},
                                       {Weight::fc_proj_b, "fc2.bias"},
                                       {Weight::ln_2_w, "final_layer_norm.weight"},
                                       {Weight::ln_2_b, "final_layer_norm.bias"}};

std::vector<Named> with_cross_attention(std::vector<Named> layer) {
    layer.insert(layer.begin() + 10, {{Weight::cross_k_w, "encoder_attn.k_proj.weight"},
                                      {Weight::cross_k_b, "encoder_attn.k_proj.bias"},
                                      {Weight::cross_v_w, "encoder_attn.v_proj.weight"},
                                      {Weight::cross_v_b, "encoder_attn.v_proj.bias"},
                                      {Weight::cross_q_w, "encoder_attn.q_proj.weight"},
                                      {Weight::cross_q_b, "encoder_attn.q_proj.bias"},
                                      {Weight::cross_proj_w, "encoder_attn.out_proj.weight"},
                                      {Weight::cross_proj_b, "encoder_attn.out_proj.bias"},
                                      {Weight::ln_x_w, "encoder_attn_layer_norm.weight"},
                                      {Weight::ln_x_b, "encoder_attn_layer_norm.bias"}});
    return layer;
}

}  // namespace

// BartForConditionalGeneration's and MarianMTModel's ("model." optional, as a
// bare BartModel saves them); Marian has no position table or embedding norm.
const TensorNames bart_encoder_names = {"model.",
                                        {{Weight::wte, "shared.weight"},
                                         {Weight::wpe, "encoder.embed_positions.weight"},
                                         {Weight::emb_ln_w, "encoder.layernorm_embedding.weight"},
                                         {Weight::emb_ln_b, "encoder.layernorm_embedding.bias"}},
                                        "encoder.layers.",
                                        bart_layer,
                                        {}};

const TensorNames bart_decoder_names = {"model.",
                                        {{Weight::wte, "shared.weight"},
                                         {Weight::wpe, "decoder.embed_positions.weight"},
                                         {Weight::emb_ln_w, "decoder.layernorm_embedding.weight"},
                                         {Weight::emb_ln_b, "decoder.layernorm_embedding.bias"}},
                                        "decoder.layers.",
                                        with_cross_attention(bart_layer),
                                        {{Weight::lm_bias, "final_logits_bias"}, {Weight::lm_head, "lm_head.weight"}}};

}  // namespace headscope
