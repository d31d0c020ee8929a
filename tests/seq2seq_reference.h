// Test support: the encoder–decoders' forward written again from Hugging
// Face's modeling_t5.py, modeling_bart.py and modeling_marian.py in plain
// double-precision loops, one text and one head at a time. T5: RMSNorm (no
// mean) before each block, the relative position bias of block 0 added to
// every layer's scores of its stack (bidirectional buckets in the encoder,
// causal ones in the decoder), no 1/sqrt(hs), ReLU or gated tanh-GELU, the
// final norms, and the tied head's C^-1/2. BART and Marian: embeddings
// (scaled by sqrt(C) where scale_embedding says) plus learned positions from
// row 2 (BART, then its embedding LayerNorm) or the sinusoids (Marian),
// LayerNorm after each sublayer, the output embedding plus final_logits_bias.
// It reads the writer's floats (seq2seq_models.h), never the engine.
#pragma once
#include <cstdint>
#include <vector>

#include "family_reference.h"
#include "headscope/compute/attention.h"
#include "seq2seq_models.h"

namespace headscope::test {

struct Seq2SeqReference {
    int S = 0, T = 0, NH = 0, V = 0;
    std::vector<double> encoder;  // (L_enc, NH, S, S): the encoder's self-attention
    std::vector<double> decoder;  // (L_dec, NH, T, T): the decoder's self-attention
    std::vector<double> cross;    // (L_dec, NH, T, S): the decoder's cross-attention
    std::vector<double> logits;   // (T, V): the next token's at every target position
};

// What a run's hooks see and edit (family_reference.h's, text 0): the
// encoder's and the decoder's layer inputs, self-attention maps and heads'
// outputs and MLP outputs, and the decoder's cross-attention maps (T, S) and
// heads' outputs (T, hs) (`cross`: its pattern and head_output alone).
struct Seq2SeqHooks {
    FamilyHooks encoder, decoder, cross;
};

// One source and one target (the decoder's input, its start token first), no
// padding; the decoder's self-attention causal as options.causal says, the
// scores scaled by options.scale (the encoder is always bidirectional).
Seq2SeqReference seq2seq_reference(const Seq2SeqCheckpoint& model, const std::vector<int32_t>& source,
                                   const std::vector<int32_t>& target, const AttentionOptions& options,
                                   const Seq2SeqHooks& hooks = {});

}  // namespace headscope::test
