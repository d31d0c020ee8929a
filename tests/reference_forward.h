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
};

// Every option is honoured (masks, head count, scale, split, layers); the
// texts are right-padded with the model's end-of-text id.
Reference reference_attention(const Model& model, const std::vector<std::vector<int32_t>>& texts,
                              const AttentionOptions& opt);

// The logits of N rows of the residual stream (N, C): GPT-2's final
// LayerNorm ln_f, then the output embedding, which is wte (tied); (N, V).
std::vector<double> reference_logits(const Model& model, const std::vector<double>& rows);

}  // namespace headscope::test
