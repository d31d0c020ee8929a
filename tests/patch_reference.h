// Test support: activation patching's double-precision reference on the
// families' reference forward (family_reference.h's hooks): a run's
// activations recorded, and every patching metric of a run with hooks.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "encoder_reference.h"
#include "family_reference.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"
#include "seq2seq_reference.h"

namespace headscope::test {

using Rows = std::vector<std::vector<double>>;

// What a reference run hands the patches: each layer's input and MLP output, each head's map and output.
struct Activations {
    std::vector<Rows> inputs, mlp;               // [layer]
    std::vector<std::vector<Rows>> maps, heads;  // [layer][head]
};

// The hooks that keep a run's activations in `kept`, sized for L layers of NH heads.
FamilyHooks recording_hooks(Activations& kept, int L, int NH);

Activations record(const FamilyCheckpoint& model, const std::vector<int32_t>& text,
                   const AttentionOptions& options = {});

// The hooks that copy `from`'s activation of `kind` at (layer, index) into
// a run (a residual or MLP cell's row, a head's whole map or output).
FamilyHooks patch_hooks(PatchKind kind, int layer, int index, const Activations& from);

// The hooks that move by `by` the value at flat index `at` of
// RunActivations' vector of `kind` (backward.h), of a stack of layers of NH
// heads of hs over `rows` queries and `keys` keys (rows but for
// cross-attention), C channels: a central difference's step.
FamilyHooks moved_hooks(PatchKind kind, size_t at, double by, int rows, int keys, int NH, int hs, int C);

// Every metric of one reference run of `text` with `hooks`, in PatchMetric's
// order (the loss of `clean`'s next tokens).
std::vector<double> reference_metrics(const FamilyCheckpoint& model, const std::vector<int32_t>& text,
                                      const std::vector<int32_t>& clean, const PatchRequest& request,
                                      const FamilyHooks& hooks = {}, const AttentionOptions& options = {});

// An encoder's metrics at request.position of its masked-LM logits, with
// `hooks`: the logit difference and the answer's log-probability.
std::vector<double> encoder_metrics(const EncoderCheckpoint& model, const std::vector<int32_t>& ids,
                                    const std::vector<int32_t>& types, const AttentionOptions& options,
                                    const PatchRequest& request, const FamilyHooks& hooks = {});

// An encoder–decoder's activations: its encoder's, its decoder's and its
// cross-attention's (maps and heads alone).
struct Seq2SeqActivations {
    Activations encoder, decoder, cross;
};
Seq2SeqActivations record(const Seq2SeqCheckpoint& model, const std::vector<int32_t>& source,
                          const std::vector<int32_t>& target, const AttentionOptions& options);
// The hooks that copy `from`'s activation of `kind` in `stack` at (layer, index) into a run.
Seq2SeqHooks patch_hooks(PatchKind kind, PatchStack stack, int layer, int index, const Seq2SeqActivations& from);
// Every metric of one encoder–decoder run with `hooks`, read from the
// decoder's logits as reference_metrics reads a decoder's (the loss of
// `clean`'s next target tokens).
std::vector<double> seq2seq_metrics(const Seq2SeqCheckpoint& model, const std::vector<int32_t>& source,
                                    const std::vector<int32_t>& target, const std::vector<int32_t>& clean,
                                    const AttentionOptions& options, const PatchRequest& request,
                                    const Seq2SeqHooks& hooks = {});

// Attribution patching's grids of `clean` and `corrupted` (the request's
// kinds and position, each of `metrics`, both directions) against the
// reference's derivative of the metric along each cell's patch, (source -
// target activation), on the run being patched, as a fraction of the clean -
// corrupted difference; relative error 1e-3, or 1e-5 of the grid's largest
// cell where the value is tiny. The metrics against the reference's too.
void expect_attribution_is_the_derivative(const FamilyCheckpoint& checkpoint, const Model& model,
                                          const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                                          const AttentionOptions& options, PatchRequest request,
                                          const std::vector<PatchMetric>& metrics);

// The engine's activations (or gradients) of one kind, from a backward's RunActivations.
const std::vector<float>& of_kind(const RunActivations& run, PatchKind kind);

// An induction pair for `model` drawn from `seed`: 12 random tokens (not the
// last id, GPT-2's <|endoftext|>) repeated, against the same first copy
// followed by 12 others. (clean, corrupted).
std::pair<std::vector<int32_t>, std::vector<int32_t>> induction_pair(const Model& model, unsigned seed);

}  // namespace headscope::test
