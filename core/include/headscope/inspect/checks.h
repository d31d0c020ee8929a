// The figures of the window's checks panel, computed here (the window only
// shows them): the engine's batched heads against a plain per-head loop, the
// causality check, and the model's configuration, parameter and shape tables.
// Legend: B batch, T padded length, C channels, NH query heads, NKV key/value
// heads (g = NH / NKV query heads share each), hs head size, L layers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headscope/base/progress.h"
#include "headscope/compute/backend.h"

namespace headscope {

// The forward with each head's attention written plainly, as the tutorials'
// mha_by_loop: head h's q, k and v are its columns of the projections, its
// scores are dot products, masked by visible_begin..visible_end and
// softmaxed, its output the weights times v. The non-attention parts are the
// CPU forward's own (cpu_forward.h). Every layer is returned, with outputs
// (options.layers and capture_outputs are ignored), and options.split too:
// the loop always splits heads by columns, the correct split. Throws Error on
// input Backend::forward would refuse. `progress` hears each layer (CpuForward::run).
AttentionResult forward_by_head_loop(const Model& model, const Batch& batch, const AttentionOptions& options,
                                     const Progress& progress = {});

// How two results that should agree compare: exactly (the difference is 0),
// up to float round-off (at most relative_round_off times the size of what
// is compared, taken as at least 1; summation order alone moves floats by
// far less, a wrong split or a leaking mask by far more), or not.
enum class Agreement { exact, round_off, differs };
inline constexpr double relative_round_off = 1e-4;
double round_off_tolerance(double size);
Agreement agreement(double max_diff, double size);

struct HeadLoopComparison {
    double max_weight_diff = 0;  // max |engine - loop| over every layer's (B, NH, T, T) weights
    double max_output_diff = 0;  // the same over every layer's (B, T, NH * hs) outputs, heads merged before c_proj
    double max_output = 0;       // max |loop output|: the scale float round-off is relative to
};

// Runs `backend` (which has `model` loaded) and forward_by_head_loop on the
// same batch and options, every layer, and compares them. `progress` hears
// L + 1 steps: the loop's layers, then the backend's forward; Cancelled
// thrown by it ends the comparison.
HeadLoopComparison compare_with_head_loop(Backend& backend, const Model& model, const Batch& batch,
                                          const AttentionOptions& options, const Progress& progress = {});

struct CausalityCheck {
    int position = 0;                 // the changed token: the last of the text
    int32_t token = 0;                // its id before
    int32_t replacement = 0;          // and after
    int earlier_rows = 0;             // query rows before it, compared
    double max_earlier_diff = 0;      // max |w - w'| over those rows, every layer and head
    double max_changed_row_diff = 0;  // the same over the changed token's own row
};

// Replaces the last token of text `b` with another id, runs the batch again
// and compares text b's weights before and after. With the causal mask on,
// the earlier rows cannot see the change: max_earlier_diff is exactly 0.
// `progress` hears its two forwards; Cancelled thrown by it ends the check.
CausalityCheck check_causality(Backend& backend, const Model& model, const Batch& batch, int b,
                               const AttentionOptions& options, const Progress& progress = {});

struct ParameterRow {
    std::string name;  // as in the model file
    std::vector<int64_t> shape;
    int64_t count = 0;  // product of the shape
};

// One row per weight tensor, sorted by name; the counts add up to model.params.
std::vector<ParameterRow> parameter_table(const Model& model);

struct ConfigRow {
    std::string name;   // e.g. "key/value heads NKV"
    std::string value;  // e.g. "2 (groups of 2 query heads)"
};

// What the model is, in words: architecture, L, C, NH, NKV, hs, norm,
// positions (with RoPE's theta), MLP, sliding window, weights' dtype, V.
std::vector<ConfigRow> config_table(const Model& model);

struct ShapeRow {
    std::string name;            // e.g. "att"
    std::string dims;            // e.g. "(B, NH, T, T)"
    std::vector<int64_t> shape;  // the sizes for this compute
    std::string what;            // in words
};

// The shapes of one layer's attention for a batch of B texts padded to T,
// split into NH query heads: the projections, q (B, NH, T, hs), k and v
// (B, NKV, T, hs) and, grouped, their expand and repeat, the weights and y
// (B, T, NH*hs). Throws Error unless B and T are positive, or where
// head_split refuses NH.
std::vector<ShapeRow> compute_shapes(const Config& config, int B, int T, int NH);

// What the naive split costs: the largest |naive - correct| over layer
// `layer`'s attention output (B, T, C), heads merged, before c_proj. Runs
// `backend` twice with `options` but for the split (and the layers and
// capture_outputs, set here), and says on what device in `computed_on` when
// given. Throws Error as Backend::forward does.
double naive_view_max_diff(Backend& backend, const Batch& batch, AttentionOptions options, int layer,
                           ComputedOn* computed_on = nullptr);

}  // namespace headscope
