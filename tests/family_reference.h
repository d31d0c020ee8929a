// Test support: the families' forward written again from Hugging Face's
// modeling code (Llama, Qwen 2, Qwen 3, Mistral, GPT-NeoX, GPT-2, OLMo 2, Phi-3, Gemma 2 and 3, the
// mixtures of experts, gpt-oss's sinks and YaRN) in plain
// double-precision loops, one head at a time, through the final norm and the
// output embedding. It reads the weights from the
// writer's checkpoint (family_writer.h), never through the engine's loader,
// and calls none of the engine's ops; the engine is compared with it.
// Legend: B texts, T padded length, NH query heads, NKV key/value heads, hs
// head size.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "family_writer.h"
#include "headscope/compute/attention.h"

namespace headscope::test {

struct FamilyReference {
    int NH = 0, NKV = 0, hs = 0;        // the split the maps are of
    std::vector<double> weights;        // (layers, B, NH, T, T); fully masked rows are 0
    std::vector<uint8_t> fully_masked;  // (B, T): 1 where a query row has no key to attend to
    std::vector<double> outputs;        // (layers, B, T, NH * hs): the attention output before o_proj
    std::vector<double> residual;       // (L, B, T, C): the residual stream after every layer (after its MLP)
    // A mixture of experts' choices (expert -1, weight 0 in dense layers): (L, B, T, k).
    std::vector<int32_t> router_experts;
    std::vector<double> router_weights;
};

// One layer of experts' MLP over a text's normed rows h (T, C), as the
// families' SparseMoeBlock computes it (moe_reference.cpp): each row's
// router logits, their softmax over every expert but those `knocked_out`
// (whose logits count as -infinity), its k largest (equal ones: the lower
// expert first), renormalized to sum 1 for Mixtral and where norm_topk_prob
// says; then the sum of the chosen experts' down(SiLU(gate h) * up h) times
// their weights; gpt-oss's router (a bias, the top k logits, their softmax)
// and clamped SwiGLU with biases as modeling_gpt_oss.py has them. Each row's
// choices by falling weight into `experts` and `weights` (T, k).
std::vector<std::vector<double>> expert_mlp(const FamilyCheckpoint& model, int layer,
                                            const std::vector<std::vector<double>>& h,
                                            const std::vector<int>& knocked_out, int32_t* experts, double* weights);

// Where a reference forward lets a test read or replace its activations
// (activation patching's reference): each hook, where set, is called with
// text b's rows at layer l, and the forward goes on with them as it leaves them.
struct FamilyHooks {
    // The residual stream entering layer l (T, C).
    std::function<void(int l, int b, std::vector<std::vector<double>>& x)> layer_input;
    // A query head's map (T, T), before it weighs the values.
    std::function<void(int l, int b, int head, std::vector<std::vector<double>>& att)> pattern;
    // A head's output (T, hs), after any knock-out, before the output projection.
    std::function<void(int l, int b, int head, std::vector<std::vector<double>>& y)> head_output;
    // The MLP's output (T, C) (a mixture of experts' mixed output), after its norm where it has one.
    std::function<void(int l, int b, std::vector<std::vector<double>>& mlp)> mlp_output;
};

// Every option is honoured: the masks (causal, padding, sliding window), a
// head re-split (which must keep the group size and divide NH * hs), the
// scale, the split and the layers. Texts are right-padded with the pad id.
//
// A re-split into NH' heads cuts the same Q, K and V columns into heads of
// hs' = NH * hs / NH', NH' / group of them for K and V; Qwen 3's q and k norms
// still act on the model's own heads, and RoPE rotates at hs'. The naive view
// reads head h's T rows of hs' straight off the (T, width) buffer, at flat
// floats [h * T * hs', (h + 1) * T * hs'), RoPE rotating its row r by position r.
FamilyReference family_reference(const FamilyCheckpoint& model, const std::vector<std::vector<int32_t>>& texts,
                                 const AttentionOptions& options, const FamilyHooks& hooks = {});

// Each row of x through a LayerNorm (w, b; epsilon eps), in double precision.
std::vector<std::vector<double>> layer_norm(std::vector<std::vector<double>> x, const std::vector<float>& w,
                                            const std::vector<float>& b, double eps);

// RMSNorm of the n values at x: x / sqrt(mean(x^2) + eps) * (offset + w),
// offset + w in float32 (Gemma's offset 1: Gemma2RMSNorm's 1.0 + weight.float()).
void rms_norm(double* x, int n, const std::vector<float>& w, double eps, float offset = 0);

// A scaled score soft-capped as Gemma 2's eager_attention_forward does: cap tanh(s / cap); no cap at 0.
double soft_capped(double score, double cap);

// The logits of N rows of the residual stream (N, C): the final norm
// (model.norm's RMSNorm, GPT-NeoX's final_layer_norm and GPT-2's ln_f
// LayerNorms), then the output embedding (lm_head, or embed_tokens or GPT-2's
// wte when tie_word_embeddings; GPT-NeoX's embed_out); (N, V).
std::vector<double> family_logits(const FamilyCheckpoint& model, const std::vector<double>& rows);

// Hugging Face's inverse frequencies for heads of hs (rope_type default, or
// llama3 when spec.rope_factor is set), float32 as it holds them: one for
// each rotate-half pair of the first hs * rotary_pct dims, rounded down to even.
// Phi-3's LongRoPE divides each by its short factor, or by its long one when
// the forward's T positions (the padded length) are past original_max_positions.
std::vector<float> rope_inverse_frequencies(const FamilySpec& spec, int hs, int T = 0);

// LongRoPE's attention factor, multiplying cos and sin: with factor =
// max_position_embeddings / original_max_position_embeddings,
// sqrt(1 + ln(factor) / ln(original)) when factor > 1, else 1; 1 without LongRoPE.
double rope_attention_factor(const FamilySpec& spec);

// x (at least 2 * inv_freq.size() values) rotated to `position` as
// apply_rotary_pos_emb does: x * cos + rotate_half(x) * sin on the first
// 2 * inv_freq.size() dims, pairing d with d + inv_freq.size(), cos and sin
// each times cos_sin_scale.
void rotate(const std::vector<float>& inv_freq, int position, double* x, double cos_sin_scale = 1);

}  // namespace headscope::test
