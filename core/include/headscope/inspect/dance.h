// The reshape dance of multi-head attention, as strided views of the flat
// buffers the computation writes: which steps only give the same memory new
// strides and which write a new buffer. For the correct split (view, then
// transpose) and for the naive one (straight to (B,NH,T,hs)). A fused
// projection's Q and K are views into its [Q | K | V] buffer, as its split
// gives them in PyTorch (row stride the whole projection's width). GPT-2's
// walk follows Q alone; a model with grouped key/value heads or rotary
// positions also walks K (V goes the same way), the rotation of Q and K, and
// K's repeat for each query head of its group (expand, then reshape). Given
// a layer's weights, the steps that multiply by a projection say how its
// weight is stored. Legend: B batch, T tokens, C channels, NH query heads,
// NKV key/value heads (g = NH / NKV query heads share each), hs head size.
#pragma once
#include <string>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/inspect/strided.h"
#include "headscope/model/model_description.h"

namespace headscope {

struct LayerWeights;  // model.h

struct DanceBuffer {
    std::string name;               // "qkv", "q", "k", "k_repeated", "att", "y", "y_merged", ...
    std::vector<std::string> dims;  // the dimensions it is written in, e.g. {"B", "NH", "T", "hs"}
    std::vector<int64_t> shape;     // written contiguously in this shape
    bool kv = false;                // holds keys: its floats belong to the NKV key/value heads
    // A fused projection's [Q | K | V] outputs: each token's first q_width
    // channels are the query heads', then NKV * hs of keys and NKV * hs of
    // values. 0 for any other buffer.
    int64_t q_width = 0;
};

struct DanceStep {
    std::string title;              // what happens, in words
    std::string code;               // the PyTorch line, e.g. "q = q.view(B, T, NH, hs)"
    int buffer;                     // index into Dance::buffers of the memory it views
    std::vector<std::string> dims;  // e.g. {"B", "T", "NH", "hs"}
    StridedLayout layout;
    // The stored weights of the projection this step multiplies by, in words:
    // "q_proj's weight, 2048 outputs by 2048 inputs, stored as Q4_K: each
    // stored row of 2048 inputs is 1152 bytes, 8 blocks of 256 values in 144
    // bytes each (...)". Empty for a step without a projection, or a dance
    // walked without its layer's weights.
    std::vector<std::string> weights;
};

// Whose data an element of a buffer is: the batch entry, the token (query
// row for per-head results) and the head that wrote it, a key/value head in
// a buffer of keys (also after the repeat: each copy is its KV head's). For
// a (B, T, NH*hs) projection, the head is the one whose channel slice holds
// it; in a fused [Q | K | V] one, a key or value channel's is a key/value head.
struct ElementOwner {
    int64_t b, t, head;
    bool kv = false;  // `head` is a key/value head
};

struct Dance {
    int B, T, C, NH, NKV, hs;
    int rope_dims;  // the dims of each head that RoPE rotates; 0 without rotary positions
    Split split;
    std::vector<DanceBuffer> buffers;
    std::vector<DanceStep> steps;
    int S = 0;  // the cross-attention's source tokens (T_src); 0 for a self-attention

    int group() const { return NH / NKV; }
    // The owner of element n of buffer `buffer` (its n-th in storage order).
    ElementOwner owner(int buffer, int64_t n) const;
    // How many heads there are of an owner's kind: NKV key/value heads, or NH query heads.
    int heads(const ElementOwner& owner) const { return owner.kv ? NKV : NH; }
};

// The walk for B texts padded to T tokens through the attention of a model of
// `config`, split into `n_head` query heads (0: the model's own); with
// `layer`, a layer's weights, its projections' steps say how their weights
// are stored. Throws Error unless B and T are positive, or where head_split
// refuses the count.
Dance reshape_dance(int B, int T, const Config& config, int n_head, Split split, const LayerWeights* layer = nullptr);

// An encoder–decoder's cross-attention for B targets of T tokens over sources
// of S: Q from the decoder (B, T, NH*hs), K and V from the encoder's output
// (B, T_src, NKV*hs), scores (B, NH, T, T_src), always the view + transpose
// split. Throws Error unless B, T and S are positive and the model is an encoder–decoder.
Dance cross_attention_dance(int B, int T, int S, const Config& config, int n_head, const LayerWeights* layer = nullptr);

}  // namespace headscope
