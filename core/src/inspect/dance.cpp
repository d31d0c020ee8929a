// The reshape dance: see dance.h.
#include "headscope/inspect/dance.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "dance_walk.h"
#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/compute/forward.h"
#include "headscope/inspect/explanations.h"
#include "headscope/model/model.h"

namespace headscope {

namespace {

using namespace dance_walk;

// Q's projection as the family's code makes it, and its title: `width`
// outputs per token.
std::string q_title(const Config& config, const std::string& width) {
    switch (config.qkv_layout) {
        case QkvLayout::fused:
            return "Q: the first " + width + " of each token's outputs of the fused " +
                   module_name(config, Weight::attn_w) +
                   " [Q | K | V], split off as a view: its rows are the whole projection's width apart";
        case QkvLayout::fused_per_head:
            return "Q: the query columns of the fused " + module_name(config, Weight::attn_w) +
                   " (stored per head [q k v], gathered into [Q | K | V]), a (B, T, " + width + ") buffer";
        case QkvLayout::separate:
            return "Q: " + module_name(config, Weight::q_w) + "'s " + width + " outputs per token, a (B, T, " + width +
                   ") buffer";
    }
    return "";
}
std::string q_code(const Config& config, const std::string& width) {
    switch (config.qkv_layout) {
        case QkvLayout::fused: {
            const std::string sizes = config.kv_heads() == config.n_head ? width : "[NH*hs, NKV*hs, NKV*hs]";
            return "q, k, v = " + module_name(config, Weight::attn_w) + "(x).split(" + sizes + ", dim=2)";
        }
        case QkvLayout::fused_per_head:
            return "q = qkv[..., Q columns]  # qkv = " + module_name(config, Weight::attn_w) + "(x)";
        case QkvLayout::separate: return "q = " + module_name(config, Weight::q_w) + "(x)";
    }
    return "";
}

// The scores and weights as the model computes them, for the steps' title
// ("softmax(...)") and code: 1/sqrt(hs); Gemma's own scale
// (query_pre_attn_scalar^-1/2) and Gemma 2's soft cap; T5's none; gpt-oss's
// learned sink logit per head, a column joined to each row's scores for the
// softmax and dropped after it, so the row's weights sum to 1 less its sink
// weight (as modeling_gpt_oss.py computes them).
std::string scores(const Config& config, bool code) {
    std::string s = code ? "q @ k.transpose(-2, -1)" : "q k^T";
    char scale[64];
    std::snprintf(scale, sizeof scale, " * %.6g", config.attention_scale);
    if (config.scaled_scores) s += config.attention_scale > 0 ? scale : " / sqrt(hs)";
    if (const float cap = config.attention_softcap; cap > 0) {
        char capped[32];
        std::snprintf(capped, sizeof capped, "%g", cap);
        s = std::string(capped) + " * tanh(" + s + " / " + capped + ")";
    }
    if (config.attention_sinks)
        return code ? "att = softmax(cat([" + s + ", sinks], dim=-1))[..., :-1]  # sinks: the head's logit, NH"
                    : "softmax(" + s +
                          ") with the head's learned sink logit in each row's denominator (its rows sum to 1 less "
                          "their sink weight)";
    return code ? "att = softmax(" + s + ")" : "softmax(" + s + ")";
}

// Q's or K's channels of a fused [Q | K | V] projection, (B, T, heads * hs):
// a view of its (B, T, NH*hs + 2 NKV*hs) buffer, which Q's step writes and
// K's views again, as the projection's split gives them.
StridedLayout fused_part(Dance& d, Walk& walk, std::string title, std::string code, bool keys,
                         std::vector<std::string> dims) {
    const int64_t B = d.B, T = d.T, Qw = int64_t{d.NH} * d.hs, KVw = int64_t{d.NKV} * d.hs, width = Qw + 2 * KVw;
    const StridedLayout whole = StridedLayout::contiguous({B, T, width});
    if (keys) {
        const auto qkv = std::find_if(d.buffers.begin(), d.buffers.end(), [](const auto& b) { return b.q_width; });
        return walk.view(std::move(title), std::move(code), static_cast<int>(qkv - d.buffers.begin()), std::move(dims),
                         whole.narrow(2, Qw, KVw));
    }
    const std::string name = Qw == d.C && KVw == Qw ? "3C" : "(NH+2NKV)*hs";
    const StridedLayout q = walk.write(std::move(title), std::move(code), "qkv", {"B", "T", name}, {B, T, width}, false,
                                       std::move(dims), whole.narrow(2, 0, Qw));
    d.buffers.back().q_width = Qw;
    return q;
}

// The naive split of Q or K (`x`, split as `at`, (B, T, H*hs)) straight to
// (B, H, T, hs). view succeeds on a projection of its own; a fused one's
// split, its rows the whole projection's width apart, takes reshape, which
// copies it contiguous and then carves it (view would refuse, unless T = H
// or H = 1).
StridedLayout naive_split(Dance& d, Walk& walk, const StridedLayout& at, const std::string& x, const std::string& H,
                          int64_t heads, bool keys) {
    const int64_t B = d.B, T = d.T, hs = d.hs;
    const std::vector<int64_t> shape = {B, heads, T, hs};
    if (const std::optional<StridedLayout> viewed = at.try_view(shape)) {
        const std::string what = heads == 1   ? "with a single head it carves nothing wrong: the correct split's values"
                                 : heads == T ? "but \"head\" n holds token n's channels of every head"
                                              : "but each \"head\" now holds pieces of several tokens";
        return walk.again("view straight to (B, " + H + ", T, hs): it succeeds, " + what,
                          x + " = " + x + ".view(B, " + H + ", T, hs)  # the bug", {"B", H, "T", "hs"}, *viewed);
    }
    return walk.write("reshape straight to (B, " + H +
                          ", T, hs): view refuses this split (each token's channels lie a whole projection apart), so "
                          "reshape copies them contiguous into a new buffer, then carves it: each \"head\" holds "
                          "pieces of several tokens",
                      x + " = " + x + ".reshape(B, " + H + ", T, hs)  # the bug", x + "_copied", {"B", "T", H + "*hs"},
                      {B, T, heads * hs}, keys, {"B", H, "T", "hs"},
                      StridedLayout::contiguous({B, T, heads * hs}).view(shape));
}

// The walk of a model without groups or rotation (GPT-2's): Q alone (K and V
// go the same way), split, attended, merged.
void plain_walk(Dance& d, Walk& walk, const Config& config) {
    const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH, hs = d.hs;
    const std::string out_proj = module_name(config, Weight::attn_proj_w);
    const std::string title = q_title(config, "C"), code = q_code(config, "C");
    const StridedLayout q_flat = config.qkv_layout == QkvLayout::fused
                                     ? fused_part(d, walk, title, code, false, {"B", "T", "C"})
                                     : walk.write(title, code, "q", {"B", "T", "C"}, {B, T, C});
    walk.weigh_q();
    if (d.split == Split::transpose) {
        const StridedLayout split_heads =
            walk.again("view: each token's C channels become NH heads of hs; no data moves", "q = q.view(B, T, NH, hs)",
                       {"B", "T", "NH", "hs"}, q_flat.view({B, T, NH, hs}));
        walk.again("transpose(1, 2): heads before tokens, only the strides swap; no longer contiguous",
                   "q = q.transpose(1, 2)", {"B", "NH", "T", "hs"}, split_heads.transpose(1, 2));
        walk.write("scores and weights per head: " + scores(config, false) + ", a new buffer", scores(config, true),
                   "att", {"B", "NH", "T", "T_k"}, {B, NH, T, T});
        const StridedLayout y = walk.write("weights times V, per head: a new buffer", "y = att @ v", "y",
                                           {"B", "NH", "T", "hs"}, {B, NH, T, hs});
        walk.again("transpose back: tokens before heads, only the strides swap", "y = y.transpose(1, 2)",
                   {"B", "T", "NH", "hs"}, y.transpose(1, 2));
        const StridedLayout copied =
            walk.write("contiguous(): the copy that puts each token's heads side by side", "y = y.contiguous()",
                       "y_merged", {"B", "T", "NH", "hs"}, {B, T, NH, hs});
        walk.again("view back to (B, T, C), then the output projection mixes the heads",
                   "y = " + out_proj + "(y.view(B, T, C))", {"B", "T", "C"}, copied.view({B, T, C}));
        walk.weigh_output();
    } else {
        naive_split(d, walk, q_flat, "q", "NH", NH, false);
        walk.write("scores and weights per \"head\": mixed tokens attend to mixed tokens", scores(config, true), "att",
                   {"B", "NH", "T", "T_k"}, {B, NH, T, T});
        const StridedLayout y =
            walk.write("weights times V, per \"head\"", "y = att @ v", "y", {"B", "NH", "T", "hs"}, {B, NH, T, hs});
        walk.again("view back to (B, T, C): succeeds silently, rows are not tokens' outputs",
                   "y = " + out_proj + "(y.view(B, T, C))  # the bug", {"B", "T", "C"}, y.view({B, T, C}));
        walk.weigh_output();
    }
}

// Q's or K's steps in a grouped or rotary model: projected and split into
// heads (qk-normed, Qwen 3). Returns the split's layout.
StridedLayout project_and_split(Dance& d, Walk& walk, const Config& config, bool keys) {
    const int64_t B = d.B, T = d.T, hs = d.hs, heads = keys ? d.NKV : d.NH;
    const std::string x = keys ? "k" : "q", H = keys ? "NKV" : "NH", width = H + "*hs";
    const bool fused = config.qkv_layout != QkvLayout::separate;
    std::string title, code;
    if (!keys) {
        title = q_title(config, "NH*hs");
        code = q_code(config, "NH*hs") + (fused ? "" : "  # NH * hs = " + std::to_string(d.NH * hs) + " columns");
    } else if (config.qkv_layout == QkvLayout::fused) {
        title =
            "K: the split's second piece, a view of the same buffer from channel NH*hs of each row; V, the "
            "third, takes the same steps";
        code = "k  # the split's second piece; v, its third, alike";
    } else if (fused) {
        title = "K: the key columns of the same projection; V (its value columns) takes the same steps";
        code = "k = qkv[..., K columns]  # v = qkv[..., V columns] alike";
    } else {
        const std::string k = module_name(config, Weight::k_w), v = module_name(config, Weight::v_w);
        title = "K: " + k + "'s NKV*hs outputs per token, NKV key/value heads; V (" + v + ") takes the same steps";
        code = "k = " + k + "(x)  # NKV * hs = " + std::to_string(d.NKV * hs) + " columns; v = " + v + "(x) alike";
    }
    StridedLayout at = config.qkv_layout == QkvLayout::fused
                           ? fused_part(d, walk, title, code, keys, {"B", "T", width})
                           : walk.write(title, code, x, {"B", "T", width}, {B, T, heads * hs}, keys);
    if (!keys)
        walk.weigh_q();
    else if (!fused)
        walk.weigh({{Weight::k_w, &LayerWeights::k}, {Weight::v_w, &LayerWeights::v}});

    const bool per_head_norm = config.qk_norm && !config.qk_norm_whole;
    if (config.qk_norm_whole)
        at = walk.write("RMSNorm over each token's " + width + " values at once (OLMo 2's " + x +
                            "_norm), before the heads: a new buffer, the same layout",
                        x + " = " + x + "_norm(" + x + ")", x + "_normed", {"B", "T", width}, {B, T, heads * hs}, keys);
    if (d.split == Split::transpose || per_head_norm)
        at = walk.again("view: each token's " + width + " channels become " + H + " heads of hs; no data moves",
                        x + " = " + x + ".view(B, T, " + H + ", hs)", {"B", "T", H, "hs"}, at.view({B, T, heads, hs}));
    if (per_head_norm)
        at =
            walk.write("RMSNorm over each head's hs values (Qwen 3's " + x + "_norm): a new buffer, the same layout",
                       x + " = " + x + "_norm(" + x + ")", x + "_normed", {"B", "T", H, "hs"}, {B, T, heads, hs}, keys);
    if (d.split == Split::transpose)
        at = walk.again("transpose(1, 2): heads before tokens, only the strides swap; no longer contiguous",
                        x + " = " + x + ".transpose(1, 2)", {"B", H, "T", "hs"}, at.transpose(1, 2));
    else
        at = naive_split(d, walk, at, x, H, heads, keys);
    return at;
}

// RoPE on Q's or K's heads, split as `at`: a new buffer, whose layout it returns.
StridedLayout rotate(Dance& d, Walk& walk, const Config& config, bool keys, const StridedLayout& at) {
    const int64_t B = d.B, T = d.T, hs = d.hs, heads = keys ? d.NKV : d.NH;
    const std::string x = keys ? "k" : "q", H = keys ? "NKV" : "NH";
    const bool cat = config.rope.joined_by_cat;
    const std::string D = std::to_string(d.rope_dims), half = std::to_string(d.rope_dims / 2);
    std::string title = "RoPE, on Q and K before the scores: position t turns the first " + D + " of each head's " +
                        std::to_string(hs) + " dims in " + rope_pairs_in_words(config, d.rope_dims) +
                        ", by the angle t * " + number(config.rope.theta) + "^(-2d/" + D + ")";
    if (config.rope.factor > 0) title += " (Llama 3's scaling slows the long wavelengths)";
    if (!config.rope.long_divisors.empty())
        title += " (LongRoPE: each frequency divided by its " +
                 std::string(long_rope(config.rope, d.T) ? "long" : "short") +
                 " factor at this length, cos and sin times " + number(config.rope.cos_sin_scale) + ")";
    title += "; a new buffer";
    const std::string formula = cat ? x + " = cat(" + x + "[..., :" + D + "] * cos + rotate_half(" + x + "[..., :" + D +
                                          "]) * sin, " + x + "[..., " + D + ":])"
                                    : x + " = " + x + " * cos + rotate_half(" + x + ") * sin";
    const std::string code =
        config.rope.adjacent_pairs
            ? x + " = " + x + " * cos + rotate_pairs(" + x +
                  ") * sin  # rotate_pairs(r)[..., 2d], [..., 2d + 1] = -r[..., 2d + 1], r[..., 2d]"
            : formula + "  # rotate_half(r) = cat(-r[..., " + half + ":], r[..., :" + half + "])";
    // x * cos + rotate_half(x) * sin is elementwise, and PyTorch writes its
    // result in its input's memory order: a transposed split (B, T, H, hs),
    // its tokens outside its heads, stays one. GPT-NeoX's torch.cat of the
    // rotated and the passed-through dims writes contiguously.
    const bool tokens_outside_heads = at.strides[2] > at.strides[1];
    if (cat || at.is_contiguous() || !tokens_outside_heads)
        return walk.write(title, code, x + "_rotated", {"B", H, "T", "hs"}, {B, heads, T, hs}, keys);
    return walk.write(title + " in " + x + "'s memory order (an elementwise op keeps its input's strides)", code,
                      x + "_rotated", {"B", "T", H, "hs"}, {B, T, heads, hs}, keys, {"B", H, "T", "hs"},
                      StridedLayout::contiguous({B, T, heads, hs}).transpose(1, 2));
}

// A grouped or rotary model: Q and K each split and rotated, K repeated for
// its group's query heads, then scores, weights times V and the merge.
void grouped_walk(Dance& d, Walk& walk, const Config& config) {
    const int64_t B = d.B, T = d.T, NH = d.NH, NKV = d.NKV, g = d.group(), hs = d.hs;
    const StridedLayout q = project_and_split(d, walk, config, false);
    StridedLayout k = project_and_split(d, walk, config, true);
    if (d.rope_dims) {
        rotate(d, walk, config, false, q);
        k = rotate(d, walk, config, true, k);
    }
    if (g > 1) {
        const StridedLayout expanded = walk.again(
            "expand: a new axis of g = NH/NKV = " + std::to_string(g) +
                " copies of each key/value head, one per query head of its group, with stride 0: every copy reads "
                "the same memory, no float moved",
            "k = k[:, :, None].expand(B, NKV, g, T, hs)  # v alike", {"B", "NKV", "g", "T", "hs"},
            k.unsqueeze(2).expand({B, NKV, g, T, hs}));
        const std::string title = "reshape to (B, NH, T, hs), as the scores need (repeat_kv)";
        const std::string code = "k = k.reshape(B, NH, T, hs)  # v alike";
        if (const std::optional<StridedLayout> viewed = expanded.try_view({B, NH, T, hs}))
            walk.again(title + ": a view, no float moved", code, {"B", "NH", "T", "hs"}, *viewed);
        else
            walk.write(title +
                           ": no view can merge an axis of stride 0, so reshape copies each key/value head g "
                           "times into a new buffer",
                       code, "k_repeated", {"B", "NH", "T", "hs"}, {B, NH, T, hs}, true);
    }
    const bool naive = d.split == Split::naive_view;
    const std::string out_proj = module_name(config, Weight::attn_proj_w);
    walk.write(naive ? "scores and weights per \"head\": mixed tokens attend to mixed tokens"
                     : "scores and weights per query head, against its key/value head's keys: " +
                           scores(config, false) + ", a new buffer",
               scores(config, true), "att", {"B", "NH", "T", "T_k"}, {B, NH, T, T});
    const StridedLayout y =
        walk.write(naive ? "weights times V, per \"head\"" : "weights times V, per head: a new buffer", "y = att @ v",
                   "y", {"B", "NH", "T", "hs"}, {B, NH, T, hs});
    if (naive) {
        walk.again("view back to (B, T, NH*hs): succeeds silently, rows are not tokens' outputs",
                   "y = " + out_proj + "(y.view(B, T, NH * hs))  # the bug", {"B", "T", "NH*hs"},
                   y.view({B, T, NH * hs}));
        walk.weigh_output();
        return;
    }
    walk.again("transpose back: tokens before heads, only the strides swap", "y = y.transpose(1, 2)",
               {"B", "T", "NH", "hs"}, y.transpose(1, 2));
    const StridedLayout copied = walk.write("contiguous(): the copy that puts each token's heads side by side",
                                            "y = y.contiguous()", "y_merged", {"B", "T", "NH", "hs"}, {B, T, NH, hs});
    walk.again("view back to (B, T, NH*hs), then the output projection mixes the heads",
               "y = " + out_proj + "(y.view(B, T, NH * hs))", {"B", "T", "NH*hs"}, copied.view({B, T, NH * hs}));
    walk.weigh_output();
}

}  // namespace

ElementOwner Dance::owner(int buffer, int64_t n) const {
    const DanceBuffer& buf = buffers.at(buffer);
    std::vector<int64_t> index(buf.shape.size());
    for (size_t d = buf.shape.size(); d-- > 0;) {
        index[d] = n % buf.shape[d];
        n /= buf.shape[d];
    }
    const int64_t head_dim = std::max(dim_index(buf.dims, "NH"), dim_index(buf.dims, "NKV"));
    int64_t head;
    bool kv = buf.kv;
    if (head_dim < 0 && buf.q_width && index.back() >= buf.q_width) {
        head = (index.back() - buf.q_width) % (int64_t{NKV} * hs) / hs;  // a key or value channel of [Q | K | V]
        kv = true;
    } else if (head_dim < 0) {
        head = index.back() / hs;  // a channel of (B, T, heads * hs)
    } else if (buf.kv && buf.dims[head_dim] == "NH") {
        head = index[head_dim] / group();  // a copy of a key/value head, repeated for each query head of its group
    } else {
        head = index[head_dim];
    }
    // The query's (target) token where the buffer has one; else the source's (a cross-attention's keys).
    const int64_t query_dim = dim_index(buf.dims, "T");
    const int64_t token_dim = query_dim >= 0 ? query_dim : dim_index(buf.dims, "T_src");
    return {index[dim_index(buf.dims, "B")], index[token_dim], head, kv};
}

namespace {

// An encoder–decoder's cross-attention: Q from the decoder's T tokens, K and
// V from the encoder's output of the source's T_src tokens, each split into
// heads as the self-attention's are (view, then transpose).
void cross_walk(Dance& d, Walk& walk, const Config& config) {
    const int64_t B = d.B, T = d.T, S = d.S, NH = d.NH, NKV = d.NKV, hs = d.hs;
    const std::string q = module_name(config, Weight::cross_q_w), k = module_name(config, Weight::cross_k_w);
    const std::string v = module_name(config, Weight::cross_v_w), o = module_name(config, Weight::cross_proj_w);
    const StridedLayout q_flat =
        walk.write("Q: " + q + " of the decoder's hidden states, (B, T, NH*hs): the target's tokens ask",
                   "q = " + q + "(x)  # x: the decoder's (B, T, C)", "q", {"B", "T", "NH*hs"}, {B, T, NH * hs});
    walk.weigh({{Weight::cross_q_w, &LayerWeights::cross_q}});
    const StridedLayout q_heads =
        walk.again("view: each target token's channels become NH heads of hs", "q = q.view(B, T, NH, hs)",
                   {"B", "T", "NH", "hs"}, q_flat.view({B, T, NH, hs}));
    walk.again("transpose(1, 2): heads before tokens, only the strides swap", "q = q.transpose(1, 2)",
               {"B", "NH", "T", "hs"}, q_heads.transpose(1, 2));
    const StridedLayout k_flat =
        walk.write("K: " + k +
                       " of the encoder's output, (B, T_src, NKV*hs): computed once per source, for every step of the "
                       "target; V (" +
                       v + ") alike",
                   "k = " + k + "(encoder_output)  # (B, T_src, C); v = " + v + "(encoder_output) alike", "k",
                   {"B", "T_src", "NKV*hs"}, {B, S, NKV * hs}, true);
    walk.weigh({{Weight::cross_k_w, &LayerWeights::cross_k}, {Weight::cross_v_w, &LayerWeights::cross_v}});
    const StridedLayout k_heads =
        walk.again("view: each source token's channels become NKV heads of hs", "k = k.view(B, T_src, NKV, hs)",
                   {"B", "T_src", "NKV", "hs"}, k_flat.view({B, S, NKV, hs}));
    walk.again("transpose(1, 2): the source's keys per head", "k = k.transpose(1, 2)", {"B", "NKV", "T_src", "hs"},
               k_heads.transpose(1, 2));
    walk.write(
        "scores and weights: every target query over every source key, (B, NH, T, T_src); only the source's "
        "padding is masked (no causal mask: the whole source is known)",
        "att = softmax(q @ k.transpose(-2, -1) * scale + source_padding_mask)", "att", {"B", "NH", "T", "T_src"},
        {B, NH, T, S});
    const StridedLayout y = walk.write("weights times V: each target token's read of the source, per head",
                                       "y = att @ v", "y", {"B", "NH", "T", "hs"}, {B, NH, T, hs});
    walk.again("transpose back: target tokens before heads, only the strides swap", "y = y.transpose(1, 2)",
               {"B", "T", "NH", "hs"}, y.transpose(1, 2));
    const StridedLayout merged = walk.write("contiguous(): each target token's heads side by side",
                                            "y = y.contiguous()", "y_merged", {"B", "T", "NH", "hs"}, {B, T, NH, hs});
    walk.again("view back to (B, T, NH*hs), then " + o + " adds it to the decoder's residual stream",
               "x = x + " + o + "(y.view(B, T, NH * hs))", {"B", "T", "NH*hs"}, merged.view({B, T, NH * hs}));
    walk.weigh({{Weight::cross_proj_w, &LayerWeights::cross_proj}});
}

}  // namespace

Dance cross_attention_dance(int B, int T, int S, const Config& config, int n_head, const LayerWeights* layer) {
    if (B < 1 || T < 1 || S < 1) throw Error("cross-attention dance: need a positive batch, target and source length");
    if (!config.is_encoder_decoder()) throw Error("cross-attention is an encoder-decoder's");
    const HeadSplit s = head_split(config, n_head);
    Dance d{B, T, config.n_embd, s.NH, s.NKV, s.hs, 0, Split::transpose, {}, {}, S};
    Walk walk(d, config, layer);
    cross_walk(d, walk, config);
    return d;
}

Dance reshape_dance(int B, int T, const Config& config, int n_head, Split split, const LayerWeights* layer) {
    if (B < 1 || T < 1)
        throw Error("reshape dance: need a positive batch and length (got B=" + std::to_string(B) +
                    " T=" + std::to_string(T) + ")");
    const HeadSplit s = head_split(config, n_head);
    const int rope = config.positions == Positions::rotary ? rope_dims(config.rope, s.hs) : 0;
    Dance d{B, T, config.n_embd, s.NH, s.NKV, s.hs, rope, split, {}, {}};
    Walk walk(d, config, layer);
    if (s.NKV == s.NH && !rope)
        plain_walk(d, walk, config);
    else
        grouped_walk(d, walk, config);
    return d;
}

}  // namespace headscope
