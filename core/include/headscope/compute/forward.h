// What every forward shares, whichever computes it (the CPU backend, the
// CUDA backend, the checks' per-head loop): the checks on its input, the
// result's shape and fully masked rows, and the token embedding.
// Legend: B batch, T padded length, C channels, NH query heads, NKV key/value
// heads, hs head size, L layers.
#pragma once
#include "headscope/compute/attention.h"
#include "headscope/model/model.h"

#include <string>
#include <vector>

namespace headscope {

// The most the returned attention maps of one forward may take.
inline constexpr double max_attention_bytes = 8e9;

// How a forward splits the projections into heads. The model's own split, or
// the same weights re-split into `NH` query heads keeping the group size
// (model NH / NKV query heads per key/value head): NH must be a multiple of the
// group size and divide the query width (model NH * hs); then NKV = NH / group
// and hs = width / NH.
struct HeadSplit {
    int NH, NKV, hs;
    int group() const { return NH / NKV; }
    int q_width() const { return NH * hs; }    // the columns of Q
    int kv_width() const { return NKV * hs; }  // of K, and of V
};
// `n_head`, or the model's own split when 0. Throws Error naming the rule broken.
HeadSplit head_split(const Config& config, int n_head);
int head_count(const Config& config, int n_head);  // head_split's NH
// Every head count head_split accepts, ascending (the model's own among them).
std::vector<int> head_counts(const Config& config);
bool accepts_head_count(const Config& config, int n_head);  // n_head is one of them

// The sliding window (AttentionOptions::sliding_window) of a forward of
// `config`: the model's own when `on`, none when off.
inline int sliding_window(const Config& config, bool on) { return on ? config.sliding_window : 0; }
// The options of layer `layer`: without the sliding window where the model
// has none (ModernBERT's global layers), the window both ways for an encoder.
AttentionOptions layer_options(const Config& config, const AttentionOptions& options, int layer);
// An encoder–decoder's encoder's options under the decoder's `options`: its
// own mask (both ways), the same padding mask, head split, scale and split,
// every layer; nothing of what only the decoder computes (predictions, the
// lens, knocked-out heads, the window, new rows only).
AttentionOptions encoder_options(const AttentionOptions& options);
// The rotary positions of layer `layer`: ModernBERT's windowed layers have a base of their own.
Rope layer_rope(const Config& config, int layer);

// Rotary positions (model_description.h's Rope) for heads of hs: the dims that
// rotate (even) and, for positions [0, T), cos and sin (T, dims / 2) of each
// pair's angle, in float32 as Hugging Face computes them.
struct RopeTable {
    int dims = 0;
    bool adjacent_pairs = false;  // Rope's: pairs (2d, 2d + 1), else (d, d + dims / 2)
    int first = 0;                // the first position covered
    std::vector<float> cos, sin;  // (T - first, dims / 2)
};
// A forward of T positions (the padded length) divides by LongRoPE's long
// factors: T is past their switch length.
bool long_rope(const Rope& rope, int T);
// Positions [first, T) of a forward of T: a keystroke's forward rotates
// only its new rows (per layer, 8,192 positions' sines took 29 ms of it).
// LongRoPE's factors are those of a text of `text_length` tokens (0: T): a
// forward of a longer text's first T tokens (its lens) rotates as that text.
RopeTable rope_table(const Rope& rope, int hs, int T, int first = 0, int text_length = 0);
int rope_dims(const Rope& rope, int hs);  // rope_table's dims
// Rotates row r of x (`rows` rows of hs, row stride `stride`) by position
// first_position + r, in place; the table must cover those positions.
void apply_rope(const RopeTable& table, float* x, int first_position, int rows, int stride);

// T5's bucket for a key at `relative` = j - i positions from its query, as
// Hugging Face's _relative_position_bucket computes it (in float32): exact
// below half the buckets (of each direction, when bidirectional), then
// logarithmic up to max_distance.
int relative_position_bucket(int relative, bool bidirectional, int buckets, int max_distance);
// T5's position bias of a stack for texts of T tokens: bias (NH, 2T - 1),
// head h's bias on the score of key j for query i at [h][j - i + T - 1].
void position_bias(const Model& model, int T, std::vector<float>& bias);

// Throws Error unless every head options.ablate knocks out is one of the
// split's, ascending and unique.
void check_ablation(const Config& config, const AttentionOptions& options);
// Throws Error unless every expert options.ablate_experts knocks out is one
// of a layer of experts', ascending and unique, each such layer keeping at
// least experts_per_token of its experts.
void check_expert_ablation(const Config& config, const AttentionOptions& options);

// A text longer than the model's positions (n_positions), cut by cut_to_context.
struct TextCut {
    bool source = false;  // an encoder–decoder's source; else a text (the decoder's input)
    int index = 0;        // which, from 0
    int tokens = 0;       // it had
    int kept = 0;         // its first, the model's limit
    // "text 1 has 301 tokens; cut to the first 256, the model's limit".
    std::string message() const;
};
// Cuts each text of `batch` (its token types with it) and each source
// longer than config.n_positions, which validate_forward refuses, to its
// first n_positions tokens; returns the cuts, the texts' then the sources'.
std::vector<TextCut> cut_to_context(const Config& config, Batch& batch);

// What every forward checks first: the batch and options suit `model` (texts
// non-empty and within n_positions, ids in the vocabulary, the head count
// divides C, layers in range, the maps within max_attention_bytes). Throws
// Error naming the problem.
void validate_forward(const Model& model, const Batch& batch, const AttentionOptions& options);

// Why a model of `config` has no contributions that add up ("" when it has):
// a norm over the whole residual after every layer (post-LN), or a head that is not linear.
std::string contributions_refusal(const Config& config);

// Shapes `result` for a validated forward, reusing its storage: B, T, NH, NKV,
// hs, the returned layers (options.layers, or all), weights (layers, B, NH, T,
// T) and outputs (layers, B, T, NH * hs) when options.capture_outputs, else
// none, the predictions, logprob_next, last_logits and lens sized for
// options.top_k and lens_k, all left for the forward to write; reused zeros;
// and fully_masked (B, T) where visible_begin..visible_end is empty; no kept
// rows yet (the forward takes them: kept_shape).
// With options.new_rows_only, the maps hold rows [first_row, T) (B is 1).
void set_up_result(const Config& config, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                   int first_row = 0);
// What a forward of `options` keeps row by row (KeptRows) into a result set up for it.
KeptRows::Shape kept_shape(const AttentionOptions& options, const AttentionResult& result);

// The MLP's activation of n values in place: of a gated MLP's gate, else of its hidden layer (the CPU
// forward's, cpu_backend.cpp; the backward's forward calls it too).
void activate(Mlp mlp, float* x, size_t n);

// One row's logits (V), of text b's position t, into `result`: the lens's
// top tokens of returned layer `lens_slot` (-1: the predictions' top
// tokens, logprob_next, and at a text's last token its logits); zeros (and
// NaN) at a padded position or one before options.lens_from. With `tracked`
// (B, T), also the p of that row's tracked id into `tracked_p` (B, T).
// Every device's forward reads its logits out through this.
void read_logits_row(const Config& cfg, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                     int lens_slot, int b, int t, const float* logits, const Prediction* tracked = nullptr,
                     float* tracked_p = nullptr);

// x (T - first, C) = wte[id] (+ wpe[t] with learned positions) for text b's
// tokens t in [first, T), padded to T = batch.T() with the pad id.
void embed_text(const Model& model, const Batch& batch, int b, int first, float* x);

}  // namespace headscope
