// What the user controls about the attention (masks, head split, scale) and
// what the engine hands back: every returned layer's per-head weights.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/base/choices.h"

namespace headscope {

struct Config;

enum class Scale { head, model, none };  // 1/sqrt(hs), 1/sqrt(C), 1
inline constexpr Choices<Scale, 3> scale_choices = {
    "scale", {"head", "model", "none"}, {"1/sqrt(d_head)", "1/sqrt(C)", "none"}};

enum class Split { transpose, naive_view };  // view+transpose (correct), or view straight to (B,NH,T,hs)
inline constexpr Choices<Split, 2> split_choices = {
    "split", {"transpose", "naive-view"}, {"view + transpose", "naive view"}};

// How a knocked-out head's output is replaced: by zero at every position,
// or at every position by its mean output over the text's real (unpadded)
// positions, in the same forward.
enum class Ablation { zero, mean };
inline constexpr Choices<Ablation, 2> ablation_choices = {"ablation", {"zero", "mean"}, {"zero", "mean over the text"}};

// What a forward keeps of each returned layer's attention: every head's
// T x T map (the default); or no map but each layer's queries and keys, from
// which attention_maps.h recomputes any map, region or pooled map on demand;
// or nothing of it (the summaries alone, where asked). Without maps the
// attention runs over blocks of query rows, so a long text needs no T x T memory.
enum class Maps { full, queries_and_keys, none };
inline constexpr Choices<Maps, 3> maps_choices = {
    "maps", {"full", "queries-and-keys", "none"}, {"every map", "queries and keys", "none"}};

// A query head of a layer, in the forward's split.
struct HeadRef {
    int layer = 0, head = 0;
};
bool operator==(const HeadRef& a, const HeadRef& b);
bool operator<(const HeadRef& a, const HeadRef& b);

// An expert of a layer's mixture of experts (model_description.h's Config::expert_layer).
struct ExpertRef {
    int layer = 0, expert = 0;
};
bool operator==(const ExpertRef& a, const ExpertRef& b);
bool operator<(const ExpertRef& a, const ExpertRef& b);

struct AttentionOptions {
    bool causal = true;
    bool padding_mask = true;
    int n_head = 0;  // 0: the model's own; else a re-split (head_split in forward.h)
    Scale scale = Scale::head;
    Split split = Split::transpose;
    std::vector<int> layers;       // ascending, unique; empty: all
    bool capture_outputs = false;  // also return each returned layer's merged head outputs
    // Query i sees only keys j > i - sliding_window (Mistral's), and with
    // window_both_ways also j < i + sliding_window (ModernBERT's local
    // layers: |i - j| < W); 0: no such mask.
    int sliding_window = 0;
    bool window_both_ways = false;
    // Predictions: > 0 runs every layer, the final norm and the output
    // embedding, and returns the top_k most likely next tokens at every
    // position, the log-probability of each actual next token and each text's
    // last logits (AttentionResult). 0: the forward stops after the last
    // returned layer's attention.
    int top_k = 0;
    // The logit lens: > 0 also returns the lens_k most likely tokens of the
    // residual stream after each returned layer, read through the final norm
    // and the output embedding. Runs every layer, like top_k.
    int lens_k = 0;
    // The lens of the rows from lens_from only (a long text's positions in
    // view): earlier rows hold id -1, and a forward that computes no row
    // from it reads no lens out at all (filling a prefix cache up to the rows
    // asked costs no output embedding). Not part of a prefix cache's key:
    // rows a cache supplies keep its forward's lens, read out or not.
    int lens_from = 0;
    // The maps hold only the query rows this forward computes, not those a
    // prefix cache supplies (AttentionResult::first_row): a generation's step
    // then costs its new row, not the whole map again. One text only.
    bool new_rows_only = false;
    // Heads knocked out of the forward, ascending and unique: their output
    // before the output projection is replaced as `ablation` says, and every
    // later layer, prediction and lens is the ablated model's.
    std::vector<HeadRef> ablate = {};
    Ablation ablation = Ablation::zero;
    bool knocks_out(const HeadRef& head) const { return std::binary_search(ablate.begin(), ablate.end(), head); }
    // Experts knocked out of their layers' choices, ascending and unique: each
    // router's logit for them is taken as -infinity, so that the next expert is
    // chosen in their place (a layer must keep experts_per_token of its experts).
    std::vector<ExpertRef> ablate_experts = {};
    bool knocks_out_expert(const ExpertRef& expert) const {
        return std::binary_search(ablate_experts.begin(), ablate_experts.end(), expert);
    }
    // What each head contributes (AttentionResult's value_weighted, rollout
    // and logit attribution): runs every layer and needs top_k >= 1 (the
    // attribution is to the top token), the view + transpose split and no
    // prefix reuse.
    bool contributions = false;
    // Long texts: what is kept of the maps (Maps), and whether each returned
    // layer's row summaries (AttentionResult::kept) are computed, in the
    // attention's pass. Anything but Maps::full needs the view + transpose
    // split, no contributions and a decoder or an encoder (not an
    // encoder–decoder). A prefix cache serves it as any other forward: the
    // cached rows' summaries, queries and keys are kept where they are
    // (KeptRows), only the new rows computed.
    Maps maps = Maps::full;
    bool summaries = false;
};
// Every field equal (not defaulted: the CUDA translation unit is C++17).
bool operator==(const AttentionOptions& a, const AttentionOptions& b);
// Whether forwards with `a` and with `b` of the same tokens compute the same
// keys and values: every field that changes a layer's input equal; what they
// read out or keep aside (maps, summaries, predictions, lens, the layers
// returned, outputs) may differ.
bool same_keys_and_values(const AttentionOptions& a, const AttentionOptions& b);

// A token and its probability.
struct Prediction {
    int32_t id = -1;  // -1: none (a padded position)
    float p = 0;
};

// Which device computed a result ("cpu", "cuda") and, when it is not the
// device of the backend chosen, why ("" when it is).
struct ComputedOn {
    std::string device;
    std::string fallback;
};
// What several forwards report together (the probes', a generation's, a
// comparison's): the first that fell back, else the latest.
inline ComputedOn together(const ComputedOn& so_far, const ComputedOn& latest) {
    return so_far.fallback.empty() ? latest : so_far;
}

// B texts' token ids, right-padded to the longest with the model's pad id (Config::pad_id: its pad token, else its
// EOS).
struct Batch {
    std::vector<std::vector<int32_t>> token_ids;  // (B, length_b), unpadded
    int32_t pad_id = 0;
    // Each token's type (segment: 0 for a pair's first text, 1 for its
    // second), as token_ids; empty: every token's is 0.
    std::vector<std::vector<int32_t>> token_types = {};
    // An encoder–decoder's sources, one per text, unpadded: the encoder reads
    // these, the decoder token_ids (what it has produced so far).
    std::vector<std::vector<int32_t>> source_ids = {};

    int B() const { return static_cast<int>(token_ids.size()); }
    int T() const;                           // the longest length
    int S() const;                           // the longest source; 0 without sources
    int32_t padded_id(int b, int t) const;   // text b's token t, pad_id past its end
    int32_t token_type(int b, int t) const;  // text b's token t's type, 0 past its end
};

// Each query row's weights w over the keys k, summed up: the entropy -sum w
// ln w (nats), the weight on key 0 (first_key) and on key q - 1
// (previous_key, 0 for q = 0), the largest weight (max) and the mean
// distance sum w (q - k). All 0 for a fully masked row. Each (layers.size(),
// B, NH, rows), at ((slot * B + b) * NH + h) * rows + q: rows is KeptRows'
// capacity, or T (AttentionResult::row_summaries).
struct RowSummary {
    float entropy = 0, first_key = 0, previous_key = 0, max = 0, distance = 0;
};
struct RowSummaries {
    std::vector<float> entropy, first_key, previous_key, max, distance;
    void assign(size_t rows);  // that many rows of zeros, or none
    void put(size_t at, const RowSummary& summary);
    RowSummary at(size_t at) const;
    // n rows of `from` from its row from_at into rows [to_at, to_at + n).
    void copy_rows(const RowSummaries& from, size_t from_at, size_t to_at, size_t n);
};

// What a forward keeps row by row of each returned layer: a long text's
// queries and keys (Maps::queries_and_keys, what its maps are recomputed
// from) and row summaries, and the contributions' queries and keys. Per layer
// slot and text, `capacity` rows, of which a result reads its first T: a
// prefix cache writes a keystroke's new rows straight into them
// (prefix_cache.h's take_kept_rows), so that typing copies no earlier row, and the results
// share them with the cache rather than copy them.
struct KeptRows {
    struct Shape {
        int slots = 0, B = 0, NH = 0;
        size_t Qw = 0, KVw = 0;  // 0: no queries and keys kept
        bool summaries = false;
        bool any() const { return Qw > 0 || summaries; }
        bool operator==(const Shape& o) const {
            return slots == o.slots && B == o.B && NH == o.NH && Qw == o.Qw && KVw == o.KVw && summaries == o.summaries;
        }
    };
    KeptRows(const Shape& shape, int capacity);
    Shape shape;
    int capacity = 0;
    AlignedVector<float> queries;  // (slots, B, capacity, Qw)
    AlignedVector<float> keys;     // (slots, B, capacity, KVw): each key/value head's once
    RowSummaries summaries;        // each (slots, B, NH, capacity); empty without summaries
    // Per text, the rows [0, covered[b]) that the results handed out read
    // here (each reads its last rows from its own copy, AttentionResult::
    // tail): a forward writes only past them while a result holds these rows.
    std::vector<int> covered;  // (B)

    size_t row(size_t slot, int b, int t) const { return (slot * shape.B + b) * capacity + t; }
    size_t summary_row(size_t slot, int b, int h, int q) const {
        return ((slot * shape.B + b) * shape.NH + h) * capacity + q;
    }
    // Text b's n rows from row `first` of every slot and head of `from` (the
    // same shape but maybe B and capacity), into its rows from `to`.
    void copy_rows(const KeptRows& from, int b, int first, int to, int n);
};

// The rows at the end of each text that a result handed out by a prefix
// cache keeps its own copy of (AttentionResult::tail): a keystroke that
// changes the last token recomputes the last two rows, a deletion the rows
// from the new last one; within these the next keystroke writes in place
// while the window still shows the result, where a whole second set of kept
// rows would be needed otherwise (a GB at 8,192 tokens on a 1B model). 32:
// deleting a word or a line, or the tokens the text box drops after
// generating (17 in the window's test of every tab), stays in place; each
// result's copy is 5.6 MB on a 1B model, well under a millisecond to make.
inline constexpr int held_rows = 32;

// One head's summary over a text's query rows [0, T): the kept rows' below
// own_from, the result's own copy from there (AttentionResult::tail).
struct SummaryRows {
    const float* shared = nullptr;
    const float* own = nullptr;
    int own_from = 0;
    float operator[](int q) const { return q < own_from ? shared[q] : own[q - own_from]; }
};

struct AttentionResult {
    int B = 0, T = 0, NH = 0, hs = 0;
    int NKV = 0;                        // key/value heads: NH / NKV query heads share each
    std::vector<int> layers;            // the returned layer indices
    int first_row = 0;                  // the first query row the maps hold (options.new_rows_only), else 0
    AlignedVector<float> weights;       // (layers.size(), B, NH, T - first_row, T); fully masked rows are 0
    std::vector<uint8_t> fully_masked;  // (B, T): 1 where a query row had no key to attend to
    AlignedVector<float> outputs;       // (layers.size(), B, T, NH * hs) attention output before c_proj, if asked
    Maps maps = Maps::full;             // options.maps: weights is empty unless full
    // The queries, keys and summaries kept (KeptRows; rows [0, T) of each are
    // this result's), shared with the prefix cache that wrote them and other
    // results; null where the forward keeps none. Read them through the accessors below.
    std::shared_ptr<const KeptRows> kept;
    // Where a prefix cache wrote them, this result's own copy of text b's
    // last rows [tail_from[b], T) (at rows from 0 of `tail`), which a later
    // keystroke may write anew among the shared ones (held_rows); else null.
    std::shared_ptr<const KeptRows> tail;
    std::vector<int> tail_from;  // (B) with a tail
    bool keeps_queries() const { return kept && kept->shape.Qw > 0; }
    bool has_summaries() const { return kept && kept->shape.summaries; }
    // Where text b's row t is: in the tail, or the shared rows.
    std::pair<const KeptRows*, int> kept_row(int b, int t) const {
        if (tail && t >= tail_from[b]) return {tail.get(), t - tail_from[b]};
        return {kept.get(), t};
    }
    // Text b's query row t (NH * hs floats), key row t (NKV * hs) in layer slot `slot`.
    const float* query(size_t slot, int b, int t) const {
        const auto [rows, at] = kept_row(b, t);
        return rows->queries.data() + rows->row(slot, b, at) * rows->shape.Qw;
    }
    const float* key(size_t slot, int b, int t) const {
        const auto [rows, at] = kept_row(b, t);
        return rows->keys.data() + rows->row(slot, b, at) * rows->shape.KVw;
    }
    // Head h's summary `values` (a RowSummaries member) of text b in layer slot `slot`, one a query row.
    SummaryRows summary(const std::vector<float> RowSummaries::*values, size_t slot, int b, int h) const {
        SummaryRows s{((kept->summaries).*values).data() + kept->summary_row(slot, b, h, 0), nullptr, T};
        if (tail)
            s.own = ((tail->summaries).*values).data() + tail->summary_row(slot, b, h, 0), s.own_from = tail_from[b];
        return s;
    }
    // Every summary as the exports write them: each (layers.size(), B, NH, T),
    // at ((slot * B + b) * NH + h) * T + q (RowSummaries); empty without summaries.
    RowSummaries row_summaries() const;

    // With options.top_k = K > 0 (else these four are empty, whatever
    // lens_k): at each text's position t < its length, the K most likely tokens at t + 1 (an encoder's: at t itself,
    // the masked-LM's fill), by p descending (softmax over
    // the whole vocabulary in float32, max subtracted); padded positions hold
    // id -1.
    int top_k = 0;
    std::vector<Prediction> predictions;  // (B, T, K)
    // log p of the text's actual token t + 1 at position t; NaN at its last
    // token, at padded positions and everywhere for an encoder. A text's loss is the mean of the others' negatives.
    std::vector<float> logprob_next;   // (B, T)
    int V = 0;                         // the vocabulary
    AlignedVector<float> last_logits;  // (B, V): the logits at each text's last token (generation samples them)
    // With options.lens_k > 0: the logit lens, the lens_k most likely tokens
    // after each returned layer, padded positions id -1.
    int lens_k = 0;
    std::vector<Prediction> lens;  // (layers.size(), B, T, lens_k)
    // Per text, how many leading tokens' rows a PrefixCache supplied instead
    // of computing them (prefix_cache.h); 0 without one.
    std::vector<int> reused;  // (B)
    ComputedOn computed_on;
    // The heads knocked out of this forward (options.ablate) and how.
    std::vector<HeadRef> ablated;
    Ablation ablation = Ablation::zero;
    // The experts knocked out of this forward (options.ablate_experts).
    std::vector<ExpertRef> ablated_experts;

    // A mixture of experts' routing (else router_k is 0 and these are empty):
    // at every layer l of the model, text b and position t, the router_k
    // experts its router chose, by falling weight (equal weights: the lower
    // expert first), and their weights, as the layer scales their outputs.
    // Expert -1 (weight 0) where layer l's MLP is dense or the forward stopped
    // before it (no predictions asked: it ends after the last returned layer's MLP).
    int router_k = 0;
    int router_layers = 0;                // the model's L
    std::vector<int32_t> router_experts;  // (router_layers, B, T, router_k)
    std::vector<float> router_weights;    // (router_layers, B, T, router_k)
    size_t router_at(int layer, int b, int t) const {
        return ((static_cast<size_t>(layer) * B + b) * T + t) * router_k;
    }

    // With options.contributions (else empty), in float32:
    // ||alpha_qk v_k W_O^h||_2, the size of what key k sends query q through
    // head h (Kobayashi et al. 2020; W_O^h the head's rows of the output
    // projection, no bias).
    AlignedVector<float> value_weighted;  // (layers.size(), B, NH, T, T)
    // Abnar and Zuidema's rollout over every layer: R = A'_{L-1} ... A'_0,
    // A'_l = (the mean of layer l's heads' maps + I) / 2, rows renormalised to 1.
    AlignedVector<float> rollout;  // (B, T, T)
    // The direct logit attribution of the top-1 next token at each position
    // (predictions_at(b, t)[0]; 0 at padded positions): each part's
    // contribution through the final norm, its scale frozen at the whole
    // residual's (LayerNorm: gamma (c - mean c) / sigma; RMSNorm: gamma c /
    // rms), dotted with the token's row of the output embedding. The parts
    // add up to the token's logit.
    int L = 0;                                  // layers in the attribution
    std::vector<float> head_logit_attribution;  // (L, B, NH, T): each head's output through W_O^h
    // (B, T, 2L + 2): [0] the embeddings; [1 + l] layer l's output-projection
    // bias; [1 + L + l] layer l's MLP; [2L + 1] the final norm's shift.
    std::vector<float> part_logit_attribution;
    // (B, T): the top token's logit the parts add up to (before a final soft-cap: Gemma's cap is not additive)
    std::vector<float> attributed_logit;
    std::vector<float> final_scale;  // (B, T): the final norm's sigma (LayerNorm) or rms (RMSNorm) there
    // (L, B, T) where each attention's output is normed (OLMo 2): that norm's rms there; else empty.
    std::vector<float> attention_output_scale;
    // Each returned layer's queries and keys as the scores read them (after
    // qk-norm and RoPE), in the split's heads, are in `kept`: why a head
    // attends (with options.contributions), and what maps on demand are
    // computed from (with Maps::queries_and_keys).
    int parts() const { return 2 * L + 2; }

    // An encoder–decoder's (else S is 0 and these are empty): the encoder's
    // forward of the sources (its every layer's self-attention, (L_enc, B, NH,
    // S, S)), computed once per source and shared by the forwards of its
    // targets, and each returned decoder layer's cross-attention: queries
    // from the decoder, keys the encoder's output, only the source's padding masked.
    int S = 0;  // the longest source
    std::shared_ptr<const AttentionResult> encoder;
    AlignedVector<float> cross_weights;  // (layers.size(), B, NH, T - first_row, S)
    const float* cross_row(int layer_slot, int b, int h, int i) const {
        return cross_weights.data() +
               (((static_cast<size_t>(layer_slot) * B + b) * NH + h) * (T - first_row) + i - first_row) * S;
    }
    float* cross_row(int layer_slot, int b, int h, int i) {
        return const_cast<float*>(static_cast<const AttentionResult&>(*this).cross_row(layer_slot, b, h, i));
    }

    // Map (layer_slot, b, h): its rows [first_row, T) of T keys, row-major
    // (T x T without new_rows_only); query row i >= first_row of it; whether
    // row i of text b had no key.
    const float* map(int layer_slot, int b, int h) const {
        return weights.data() + ((static_cast<size_t>(layer_slot) * B + b) * NH + h) * (T - first_row) * T;
    }
    const float* row(int layer_slot, int b, int h, int i) const {
        return map(layer_slot, b, h) + static_cast<size_t>(i - first_row) * T;
    }
    bool row_fully_masked(int b, int i) const { return fully_masked[static_cast<size_t>(b) * T + i] != 0; }
    // The top_k predictions at text b's position t; the lens_k of layer slot `slot` there.
    const Prediction* predictions_at(int b, int t) const {
        return predictions.data() + (static_cast<size_t>(b) * T + t) * top_k;
    }
    const Prediction* lens_at(int slot, int b, int t) const {
        return lens.data() + ((static_cast<size_t>(slot) * B + b) * T + t) * lens_k;
    }
    // Text b's loss: the mean of -logprob_next over its positions that have a next token; NaN for a one-token
    // text and without predictions (top_k 0).
    double loss(int b) const;
};

// Each mask on its own (the window draws them apart): the causal mask lets
// query i see key j when j <= i, the padding mask lets any query see the
// text's own keys, j < length. Off, a mask allows everything.
bool causal_allows(const AttentionOptions& options, int i, int j);
bool padding_allows(const AttentionOptions& options, int j, int length);
bool window_allows(const AttentionOptions& options, int i, int j);  // the sliding window

// The keys query row i of a text of `length` tokens (padded to T) may attend
// to: [0, end), where both masks allow; with the padding mask a pad query
// (i >= length) sees nothing. 0 means the row is fully masked.
int visible_end(const AttentionOptions& options, int i, int length, int T);
// The first key the sliding window lets query i see (0 without a window):
// the keys a row attends to are [visible_begin, visible_end).
int visible_begin(const AttentionOptions& options, int i);
// Whether query row i attends to key j: visible_begin <= j < visible_end.
bool attends(const AttentionOptions& options, int i, int j, int length, int T);
// The keys [0, end) a cross-attention query row i of a target of
// `target_length` tokens sees in a source of `source_length` (padded to S):
// with the padding mask the source's own tokens, and none for a pad query.
int cross_visible_end(const AttentionOptions& options, int i, int target_length, int source_length, int S);

// What scores are multiplied by before the softmax, for `config`'s C channels
// and heads of hs: head is 1/sqrt(hs), or the model's own attention_scale
// where it has one (Gemma's query_pre_attn_scalar^-1/2).
float score_scale(Scale scale, const Config& config, int hs);
// The scale a model was trained with: 1/sqrt(hs), or none (T5's).
Scale own_scale(bool scaled_scores);

// The words of the command lines and the settings file (the choice tables');
// a bad word throws Error naming the option and the words allowed.
bool parse_on_off(std::string_view option, std::string_view word);  // "on" or "off"; `option` names it in errors
Scale parse_scale(std::string_view word);
Ablation parse_ablation(std::string_view word);
Maps parse_maps(std::string_view word);
const char* to_string(Maps maps);
// "L.H,L.H,..." as ascending unique heads (empty: none); throws Error naming the item that is not a head.
std::vector<HeadRef> parse_heads(std::string_view words);
std::vector<ExpertRef> parse_experts(std::string_view words);  // "L.E,L.E,...", as parse_heads
const char* to_string(Ablation ablation);
Split parse_split(std::string_view word);
const char* to_string(Scale scale);
const char* to_string(Split split);

}  // namespace headscope
