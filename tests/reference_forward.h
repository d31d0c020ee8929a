// Test support: GPT-2's forward written again in plain double-precision
// loops, one head at a time (the tutorials' mha_by_loop), independently of
// core's engine; the engine and core's checks are compared with it.
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/attention.h"
#include "headscope/model.h"

namespace headscope::test {

struct Reference {
    std::vector<double> weights;        // (layers, B, NH, T, T)
    std::vector<uint8_t> fully_masked;  // (B, T)
    std::vector<double> outputs;        // (layers, B, T, C) heads merged, before c_proj
};

// Every option is honoured (masks, head count, scale, split, layers); the
// texts are right-padded with the model's end-of-text id.
Reference reference_attention(const Model& model, const std::vector<std::vector<int32_t>>& texts,
                              const AttentionOptions& opt);

}  // namespace headscope::test
