// The gradient of a patching metric (patching.h) with respect to the
// activations patching copies, by a backward pass through the CPU forward's
// layers (cpu_backward.cpp), read from the model description as the forward
// reads it; and attribution patching, which estimates every grid cell as
// (clean - corrupted activation) . gradient, and the effects grid's estimate
// (cpu_attribution.cpp).
// An encoder–decoder's backward goes from its decoder's metric through each
// decoder layer's cross-attention into the encoder's output, and through the
// encoder (cpu_backward_cross.cpp).
// Legend: L layers, NH query heads, T tokens, C channels, hs head size, Qw = NH hs, S an encoder–decoder's source
// tokens.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"

namespace headscope {

// One run's activations, or the metric's gradients with respect to them, in float32.
struct RunActivations {
    std::vector<float> heads;     // (L, T, Qw) each head's output before the output projection
    std::vector<float> residual;  // (L, T, C) the residual stream entering each layer
    std::vector<float> mlp;       // (L, T, C) each MLP's output, its bias included
    std::vector<float> pattern;   // (L, NH, T, T) each head's attention weights
    // An encoder–decoder's decoder's cross-attention: its heads' outputs (L, T, Qw) and weights (L, NH, T, S);
    // empty elsewhere.
    std::vector<float> cross_heads, cross_pattern;
    // An encoder–decoder's encoder's activations (its layers, its S tokens for T): one; none elsewhere.
    std::vector<RunActivations> encoder;
};

// Throws Error in one line naming the first feature of `config`'s model or
// of `options` the backward does not support yet.
void check_backward_supported(const Config& config, const AttentionOptions& options);

// The forward of `text` (one text: its token types where it has them, an
// encoder–decoder's source and target) and, where `gradients` is set, the
// backward of the request's metric (the loss reads `clean`'s next tokens, an
// encoder–decoder's next target tokens); the activations into `activations`
// where set. Returns the metric. Products in float32 (the engine's matmul),
// norm and softmax sums in double.
double metric_gradients(const Model& model, const Batch& text, const std::vector<int32_t>& clean,
                        const AttentionOptions& options, const PatchRequest& request, RunActivations* activations,
                        RunActivations* gradients);

// Both texts' forwards, their activations into `clean_run` and `corrupted_run`,
// and the backward of the run being patched (the corrupted one when
// denoising, the clean one when noising) into `gradients`, as
// metric_gradients gives them; but of a causal decoder the run being patched
// only from the first row a patch can change (first_changed_row): its rows
// before it are the other run's, whose keys and values it reads, and its
// gradients there are not computed (0). Returns the clean and the corrupted
// metrics. Throws Error as metric_gradients does.
std::pair<double, double> patching_gradients(const Model& model, const Batch& clean, const Batch& corrupted,
                                             const AttentionOptions& options, const PatchRequest& request,
                                             RunActivations& clean_run, RunActivations& corrupted_run,
                                             RunActivations& gradients);

// Attribution patching: the grids of exact patching (Patching's fractions)
// estimated from a forward of each text and a backward of the run being
// patched (the corrupted one when denoising, the clean one when noising):
// an encoder–decoder's ten grids as exact patching's, in its order. Each
// text is one (Batch, as metric_gradients reads it). Throws Error as
// checked_patch_request, check_patch_sources and check_backward_supported do.
void attribution_patch(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                       const PatchRequest& request, Patching& patching);

// The effects grid's estimate (head_effects.h) of one text: for each head
// (L, NH), (its output knocked out as options.ablation says - its output) .
// the gradient of the text's loss with respect to it, summed over the
// positions. Throws Error as check_backward_supported does, and for an
// encoder (whose loss over next tokens does not exist).
std::vector<float> estimated_loss_changes(const Model& model, const std::vector<int32_t>& ids,
                                          const AttentionOptions& options);

}  // namespace headscope
