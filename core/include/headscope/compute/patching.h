// Activation patching: two texts of the same length, a clean one and a
// corrupted one; one component's activation is copied from one run into the
// other, and a metric says how much of the difference between the runs that
// component carries. Exact patching runs one forward per component, from the
// patched layer's input on (cpu_patching.cpp); an encoder–decoder's, a whole
// forward with the encoder's output reused (cpu_patching_seq2seq.cpp).
// Legend: L layers, NH query heads (of the options' split), T tokens.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/base/choices.h"
#include "headscope/compute/attention.h"

namespace headscope {

struct Config;

// What is measured of a run: the logit of the answer minus that of the wrong
// token at a position, the log-probability of the answer there, or the loss
// (the mean over positions 0..T-2 of -log p of the clean text's next token).
enum class PatchMetric { logit_diff, logprob, loss };
inline constexpr Choices<PatchMetric, 3> patch_metric_choices = {
    "metric", {"logit-diff", "logprob", "loss"}, {"logit difference", "log-probability", "loss"}};

// denoise: the clean run's activation copied into the corrupted run; noise: the other way.
enum class PatchDirection { denoise, noise };
inline constexpr Choices<PatchDirection, 2> patch_direction_choices = {
    "direction", {"denoise", "noise"}, {"clean into corrupted", "corrupted into clean"}};

// The components patched: each head's output before the output projection
// at every position (L, NH); the residual stream entering each layer at each
// position, row 0 the embeddings (L, T); each MLP's output with its bias at
// each position, a mixture of experts' mixed output (L, T); each head's
// attention weights at every position (L, NH). A head is a query head.
enum class PatchKind { heads, residual, mlp, pattern };
inline constexpr Choices<PatchKind, 4> patch_kind_choices = {
    "component", {"heads", "residual", "mlp", "pattern"}, {"heads", "residual stream", "MLPs", "attention patterns"}};

// Where a component sits: a decoder's or an encoder's one stack (`own`), or
// in an encoder–decoder its encoder, its decoder (the self-attention, the
// residual, the MLPs) or its decoder's cross-attention (heads, patterns).
enum class PatchStack { own, encoder, decoder, cross };
inline constexpr Choices<PatchStack, 4> patch_stack_choices = {
    "stack", {"own", "encoder", "decoder", "cross"}, {"", "encoder", "decoder", "cross-attention"}};

struct PatchRequest {
    PatchMetric metric = PatchMetric::logit_diff;
    int32_t answer = -1, wrong = -1;  // token ids: logit_diff reads both, logprob the answer
    int position = -1;                // where logit_diff and logprob read; -1: the last token
    PatchDirection direction = PatchDirection::denoise;
    std::vector<PatchKind> kinds;  // ascending, unique
};

// One kind's grid of one stack: (rows, cols) fractions, row-major; an
// encoder–decoder's positions are the encoder's source tokens or the
// decoder's target tokens.
struct PatchGrid {
    PatchKind kind = PatchKind::heads;
    int rows = 0, cols = 0;
    std::vector<double> cells;
    PatchStack stack = PatchStack::own;
    double at(int row, int col) const { return cells[static_cast<size_t>(row) * cols + col]; }
};

struct Patching {
    PatchRequest request;      // its position resolved (never -1)
    int L = 0, NH = 0, T = 0;  // an encoder–decoder's decoder's, T its target's tokens
    double clean_metric = std::nan(""), corrupted_metric = std::nan("");
    // One per requested kind, in the request's order (an encoder–decoder's:
    // per kind the encoder's, the decoder's, then the cross-attention's where
    // the kind has one, patch_stacks). Each cell is the
    // fraction of the clean - corrupted difference the patch restores
    // (denoise: (patched - corrupted) / (clean - corrupted)) or destroys
    // (noise: (clean - patched) / (clean - corrupted)): 1 where the
    // component carries the whole difference, either way.
    std::vector<PatchGrid> grids;
    ComputedOn computed_on;
};

// One cell of a grid: the component of `kind` at `layer`, `index` its head
// (heads, pattern) or its position (residual, mlp).
struct PatchCell {
    PatchKind kind = PatchKind::heads;
    int layer = 0, index = 0;
    PatchStack stack = PatchStack::own;
};
// Every field equal (not defaulted: the CUDA translation unit is C++17).
bool operator==(const PatchCell& a, const PatchCell& b);

// The fraction a patched run's metric restores or destroys (Patching::grids).
double patched_fraction(PatchDirection direction, double clean, double corrupted, double patched);

// The first position whose row a patch can change: where the texts first
// differ, when every row before it is the same in both runs and in every
// patched one (a causal mask, no mean over the text knocked in, a metric
// read there or after: `request`'s position resolved); else 0. Texts the
// same throughout give the last row (their metrics are equal, which patching
// refuses once it has them).
int first_changed_row(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                      const AttentionOptions& options, const PatchRequest& request);

// Throws Error, in one line, where `config`'s model cannot be patched (no
// predictions) or the texts differ in length (an encoder–decoder's targets;
// check_patch_sources its sources).
void check_patch_texts(const Config& config, const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted);
void check_patch_sources(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted);

// Throws Error, in one line, where the clean and the corrupted runs' metrics
// are equal (or not numbers): no difference for a patch to restore.
void check_patched_difference(PatchMetric metric, double clean, double corrupted);

// The stacks a kind's grids cover, in the grids' order: `own` of a decoder
// or an encoder; an encoder–decoder's encoder and decoder, and its
// cross-attention for heads and patterns.
std::vector<PatchStack> patch_stacks(const Config& config, PatchKind kind);
// A grid's name, as the command line's JSON keys and files name it: the
// kind's word ("heads"), an encoder–decoder's prefixed by its stack ("encoder_heads", "cross_pattern").
std::string patch_grid_name(PatchKind kind, PatchStack stack);

// Throws Error as check_patch_texts does, where the texts are too short for the metric, the tokens or the position are
// not the model's, the kinds are none or repeated, or an encoder is asked for the loss (its metric is read at a
// position: the masked-language-model logits there). Returns the request with its position resolved.
PatchRequest checked_patch_request(const Config& config, const std::vector<int32_t>& clean,
                                   const std::vector<int32_t>& corrupted, PatchRequest request);

PatchMetric parse_patch_metric(std::string_view word);
PatchDirection parse_patch_direction(std::string_view word);
// "heads,residual,..." as ascending unique kinds; throws Error naming the word that is not one.
std::vector<PatchKind> parse_patch_kinds(std::string_view words);
const char* to_string(PatchMetric metric);
const char* to_string(PatchDirection direction);
const char* to_string(PatchKind kind);

}  // namespace headscope
