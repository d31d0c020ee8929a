// Test support: GPT-2's forward written again in plain double-precision
// loops, one head at a time (the tutorials' mha_by_loop), independently of
// core's engine, through the final norm and the output embedding; the engine
// and core's checks are compared with it.
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/model/model.h"

namespace headscope::test {

struct Reference {
    std::vector<double> weights;        // (layers, B, NH, T, T)
    std::vector<uint8_t> fully_masked;  // (B, T)
    std::vector<double> outputs;        // (layers, B, T, C) heads merged, before c_proj
    std::vector<double> residual;       // (L, B, T, C): the residual stream after every layer (after its MLP)
    // With opt.contributions (view + transpose), else empty:
    std::vector<double> value_weighted;  // (layers, B, NH, T, T): att[q][k] |v_k W_O^h|
    std::vector<double> rollout;         // (B, T, T): the product over the layers of (mean of the maps + I) / 2
    std::vector<double> embedding;       // (B, T, C): wte + wpe
    std::vector<double> head_writes;     // (L, B, NH, T, C): each head's output through its rows of c_proj
    std::vector<double> mlp_writes;      // (L, B, T, C): each MLP's output
};

// A position's logit of `token` through ln_f with its scale frozen at the
// final residual's, and each part's share of it (opt.contributions).
struct Attribution {
    double logit = 0, embedding = 0, shift = 0;
    std::vector<double> bias, mlp;           // (L): c_proj's bias, the MLP
    std::vector<std::vector<double>> heads;  // (L, NH)
};
Attribution reference_attribution(const Model& model, const Reference& ref, int B, int T, int b, int t, int32_t token);

// Every option is honoured (masks, head count, scale, split, layers); the
// texts are right-padded with the model's end-of-text id.
Reference reference_attention(const Model& model, const std::vector<std::vector<int32_t>>& texts,
                              const AttentionOptions& opt);

// The logits of N rows of the residual stream (N, C): GPT-2's final
// LayerNorm ln_f, then the output embedding, which is wte (tied); (N, V).
std::vector<double> reference_logits(const Model& model, const std::vector<double>& rows);

}  // namespace headscope::test
