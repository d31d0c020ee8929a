// What a caller of the layer loop asks of one forward beyond its result: the
// values to keep that an analysis reads afterwards, and the edits to apply
// at named points of each layer. AttentionOptions already asks for what the
// result holds (maps, Q and K, heads' outputs, contributions, predictions)
// and for the heads and experts to knock out; this asks for the rest. A
// plain value passed into the forward, so that a forward is never left in a
// mode: the default request is a plain forward.
// Legend: L layers, R rows computed, C channels.
#pragma once
#include <vector>

#include "headscope/compute/patching.h"

namespace headscope {

struct PrefixCache;

struct ForwardRequest {
    // An edit of one text's run (text b: (*patches)[b]): its `kind` of
    // activation at `layer` and head or position `index` replaced by the
    // source run's, `from` (patching.h's PatchSource layouts); `cross`: a
    // decoder's cross-attention head (heads, pattern), not its self-attention's.
    struct Patch {
        PatchKind kind;
        int layer, index;
        const float* from;
        bool cross = false;
    };

    float* layer_inputs = nullptr;  // (L, R, C) the residual entering each layer, kept (the effects grid, patching)
    float* mlp_outputs = nullptr;   // (L, R, C) each layer's MLP output, kept (patching's source run)
    float* final_states = nullptr;  // (R, C) the output after the final norm, where the model has one (an encoder's)
    const std::vector<Patch>* patches = nullptr;  // edits at the residual, maps, heads' outputs and MLP output
    // An encoder–decoder's edits of its encoder's run (its sources then
    // encoded afresh, and not kept for the next forward).
    const std::vector<Patch>* encoder_patches = nullptr;
    float* cross_outputs = nullptr;  // (L, R, Qw) each decoder layer's cross-attention heads' outputs, kept
    // Every sublayer's output computed apart and then added, as a patching's
    // runs read and replace it, so that all of them add alike (rather than
    // accumulate it into the residual in the product).
    bool sublayers_apart = false;
    // After the last layer's attention, the one position each text's metric
    // reads (-1: every position): the rest of the layer computes that row alone.
    int metric_row = -1;
    // Rows read from another forward's cache rather than computed (a long
    // text's lens reads the live forward's, which a keystroke may change
    // meanwhile): the keys and values of the one text's first `rows` tokens,
    // copied from `from` a layer at a time, before the layer's attention,
    // into this forward's own store (copy_cached_rows); the forward computes
    // the rows after them, and its result holds nothing for those before
    // (no maps, predictions or lens). It throws RowsGone where `from` no
    // longer holds them.
    struct CachedRows {
        const PrefixCache* from = nullptr;
        int rows = 0;
    };
    CachedRows cached_rows;
    // The text whose first tokens this forward computes, where it is longer
    // (0: the batch is the whole text): LongRoPE's factors are chosen by its
    // length, as its own forward and cache chose them (the lens of a long
    // text's earlier positions).
    int text_length = 0;
};

}  // namespace headscope
