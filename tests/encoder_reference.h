// Test support: the encoders' forward written again from Hugging Face's
// modeling_bert.py, modeling_roberta.py and modeling_distilbert.py in plain
// double-precision loops, one text and one head at a time: the embeddings
// (word + position + token type, RoBERTa's positions from padding_idx + 1)
// and their LayerNorm, each layer's attention then LayerNorm(x + attention),
// the MLP then LayerNorm(x + MLP), and the masked-LM head (dense, GELU,
// LayerNorm, the tied word embeddings, the bias); and ModernBERT's from
// modeling_modernbert.py (pre-norm, RoPE with two bases, a local window on
// two layers of three, GeGLU, the final norm, the head). It reads the
// writer's floats (encoder_models.h), never the engine's loader or ops.
#pragma once
#include <cstdint>
#include <vector>

#include "encoder_models.h"
#include "family_reference.h"
#include "headscope/compute/attention.h"

namespace headscope::test {

struct EncoderReference {
    int T = 0, NH = 0;
    std::vector<double> weights;  // (L, NH, T, T): every layer's maps of the text alone
    std::vector<double> logits;   // (T, V): the masked-LM logits at every position
};

// One text (no padding), its token types (empty: all 0), with options.causal,
// options.scale, a re-split into options.n_head heads (0: the model's) and,
// for ModernBERT, its window on its local layers when options.sliding_window is not 0;
// `hooks` (family_reference.h's, text 0) on each layer's input, each head's
// map and output, and each MLP's output (before its residual add and norm).
EncoderReference encoder_reference(const EncoderCheckpoint& model, const std::vector<int32_t>& ids,
                                   const std::vector<int32_t>& types, const AttentionOptions& options,
                                   const FamilyHooks& hooks = {});

}  // namespace headscope::test
