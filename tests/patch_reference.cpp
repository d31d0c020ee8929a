// Test support: activation patching's double-precision reference
// (patch_reference.h), on the families' reference forward and logits.
#include "patch_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace headscope::test {

FamilyHooks recording_hooks(Activations& kept, int L, int NH) {
    kept.inputs.resize(L), kept.mlp.resize(L), kept.maps.assign(L, std::vector<Rows>(NH));
    kept.heads.assign(L, std::vector<Rows>(NH));
    FamilyHooks hooks;
    hooks.layer_input = [&kept](int l, int, Rows& x) { kept.inputs[l] = x; };
    hooks.mlp_output = [&kept](int l, int, Rows& mlp) { kept.mlp[l] = mlp; };
    hooks.pattern = [&kept](int l, int, int head, Rows& att) { kept.maps[l][head] = att; };
    hooks.head_output = [&kept](int l, int, int head, Rows& y) { kept.heads[l][head] = y; };
    return hooks;
}

Activations record(const FamilyCheckpoint& model, const std::vector<int32_t>& text, const AttentionOptions& options) {
    Activations kept;
    family_reference(model, {text}, options, recording_hooks(kept, model.spec.n_layer, model.spec.n_head));
    return kept;
}

FamilyHooks moved_hooks(PatchKind kind, size_t at, double by, int rows, int keys, int NH, int hs, int C) {
    FamilyHooks hooks;
    const size_t Qw = static_cast<size_t>(NH) * hs;
    if (kind == PatchKind::heads) {
        const int l = at / (rows * Qw), t = at / Qw % rows, h = at % Qw / hs, d = at % hs;
        hooks.head_output = [=](int hl, int, int head, Rows& y) {
            if (hl == l && head == h) y[t][d] += by;
        };
    } else if (kind == PatchKind::pattern) {
        const int l = at / (NH * rows * keys), h = at / (rows * keys) % NH, i = at / keys % rows, j = at % keys;
        hooks.pattern = [=](int hl, int, int head, Rows& att) {
            if (hl == l && head == h) att[i][j] += by;
        };
    } else {
        const int l = at / (rows * C), t = at / C % rows, c = at % C;
        const auto move = [=](int hl, int, Rows& x) {
            if (hl == l) x[t][c] += by;
        };
        (kind == PatchKind::residual ? hooks.layer_input : hooks.mlp_output) = move;
    }
    return hooks;
}

FamilyHooks patch_hooks(PatchKind kind, int layer, int index, const Activations& from) {
    FamilyHooks hooks;
    switch (kind) {
        case PatchKind::heads:
            hooks.head_output = [=, &from](int l, int, int head, Rows& y) {
                if (l == layer && head == index) y = from.heads[l][head];
            };
            break;
        case PatchKind::pattern:
            hooks.pattern = [=, &from](int l, int, int head, Rows& att) {
                if (l == layer && head == index) att = from.maps[l][head];
            };
            break;
        case PatchKind::residual:
            hooks.layer_input = [=, &from](int l, int, Rows& x) {
                if (l == layer) x[index] = from.inputs[l][index];
            };
            break;
        case PatchKind::mlp:
            hooks.mlp_output = [=, &from](int l, int, Rows& mlp) {
                if (l == layer) mlp[index] = from.mlp[l][index];
            };
            break;
    }
    return hooks;
}

namespace {

// log softmax(row)[id] over a row of V logits.
double log_probability(const double* row, int V, int32_t id) {
    const double max = *std::max_element(row, row + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(row[v] - max);
    return row[id] - max - std::log(sum);
}

// Every metric of a run's next-token logits (T, V), in PatchMetric's order.
std::vector<double> next_token_metrics(const std::vector<double>& logits, int T, int V,
                                       const std::vector<int32_t>& clean, const PatchRequest& request) {
    const auto logprob = [&](int t, int32_t id) { return log_probability(logits.data() + size_t(t) * V, V, id); };
    const double* at = logits.data() + static_cast<size_t>(request.position) * V;
    double loss = 0;
    for (int t = 0; t + 1 < T; ++t) loss -= logprob(t, clean[t + 1]) / (T - 1);
    return {at[request.answer] - at[request.wrong], logprob(request.position, request.answer), loss};
}

}  // namespace

std::vector<double> reference_metrics(const FamilyCheckpoint& model, const std::vector<int32_t>& text,
                                      const std::vector<int32_t>& clean, const PatchRequest& request,
                                      const FamilyHooks& hooks, const AttentionOptions& options) {
    const FamilySpec& s = model.spec;
    const int T = static_cast<int>(text.size()), C = s.n_embd, V = s.vocab_size;
    const FamilyReference ref = family_reference(model, {text}, options, hooks);
    const std::vector<double> last(ref.residual.end() - static_cast<size_t>(T) * C, ref.residual.end());
    return next_token_metrics(family_logits(model, last), T, V, clean, request);
}

Seq2SeqActivations record(const Seq2SeqCheckpoint& model, const std::vector<int32_t>& source,
                          const std::vector<int32_t>& target, const AttentionOptions& options) {
    const Seq2SeqSpec& s = model.spec;
    Seq2SeqActivations kept;
    const Seq2SeqHooks hooks{recording_hooks(kept.encoder, s.encoder_layers, s.n_head),
                             recording_hooks(kept.decoder, s.decoder_layers, s.n_head),
                             recording_hooks(kept.cross, s.decoder_layers, s.n_head)};
    seq2seq_reference(model, source, target, options, hooks);
    return kept;
}

Seq2SeqHooks patch_hooks(PatchKind kind, PatchStack stack, int layer, int index, const Seq2SeqActivations& from) {
    Seq2SeqHooks hooks;
    switch (stack) {
        case PatchStack::encoder: hooks.encoder = patch_hooks(kind, layer, index, from.encoder); break;
        case PatchStack::cross: hooks.cross = patch_hooks(kind, layer, index, from.cross); break;
        default: hooks.decoder = patch_hooks(kind, layer, index, from.decoder); break;
    }
    return hooks;
}

std::vector<double> seq2seq_metrics(const Seq2SeqCheckpoint& model, const std::vector<int32_t>& source,
                                    const std::vector<int32_t>& target, const std::vector<int32_t>& clean,
                                    const AttentionOptions& options, const PatchRequest& request,
                                    const Seq2SeqHooks& hooks) {
    const Seq2SeqReference ref = seq2seq_reference(model, source, target, options, hooks);
    return next_token_metrics(ref.logits, ref.T, ref.V, clean, request);
}

std::vector<double> encoder_metrics(const EncoderCheckpoint& model, const std::vector<int32_t>& ids,
                                    const std::vector<int32_t>& types, const AttentionOptions& options,
                                    const PatchRequest& request, const FamilyHooks& hooks) {
    const int V = model.spec.vocab_size;
    const EncoderReference ref = encoder_reference(model, ids, types, options, hooks);
    const double* row = ref.logits.data() + static_cast<size_t>(request.position) * V;
    return {row[request.answer] - row[request.wrong], log_probability(row, V, request.answer)};
}

const std::vector<float>& of_kind(const RunActivations& run, PatchKind kind) {
    switch (kind) {
        case PatchKind::heads: return run.heads;
        case PatchKind::residual: return run.residual;
        case PatchKind::mlp: return run.mlp;
        case PatchKind::pattern: return run.pattern;
    }
    return run.heads;
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> induction_pair(const Model& model, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> id(0, model.config.vocab_size - 2);
    std::vector<int32_t> first(12), other(12);
    for (int32_t& t : first) t = id(rng);
    for (int32_t& t : other) t = id(rng);
    std::vector<int32_t> clean = first, corrupted = first;
    clean.insert(clean.end(), first.begin(), first.end());
    corrupted.insert(corrupted.end(), other.begin(), other.end());
    return {clean, corrupted};
}

namespace {

// The hooks that move the target's activation of `grid`'s cell by `by` times (source - target).
FamilyHooks along(const PatchGrid& grid, int cell, double by, const Activations& from, const Activations& to) {
    const int l = cell / grid.cols, index = cell % grid.cols;
    FamilyHooks hooks;
    const auto mix = [by](Rows& x, const Rows& source, const Rows& own) {
        for (size_t r = 0; r < x.size(); ++r)
            for (size_t c = 0; c < x[r].size(); ++c) x[r][c] += by * (source[r][c] - own[r][c]);
    };
    if (grid.kind == PatchKind::heads) {
        hooks.head_output = [=](int hl, int, int h, Rows& y) {
            if (hl == l && h == index) mix(y, from.heads[l][h], to.heads[l][h]);
        };
    } else if (grid.kind == PatchKind::pattern) {
        hooks.pattern = [=](int hl, int, int h, Rows& att) {
            if (hl == l && h == index) mix(att, from.maps[l][h], to.maps[l][h]);
        };
    } else {
        const Rows& source = (grid.kind == PatchKind::residual ? from.inputs : from.mlp)[l];
        const Rows& own = (grid.kind == PatchKind::residual ? to.inputs : to.mlp)[l];
        const auto row = [=](int hl, int, Rows& x) {
            if (hl == l)
                for (size_t c = 0; c < x[index].size(); ++c) x[index][c] += by * (source[index][c] - own[index][c]);
        };
        (grid.kind == PatchKind::residual ? hooks.layer_input : hooks.mlp_output) = row;
    }
    return hooks;
}

}  // namespace

void expect_attribution_is_the_derivative(const FamilyCheckpoint& checkpoint, const Model& model,
                                          const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                                          const AttentionOptions& options, PatchRequest request,
                                          const std::vector<PatchMetric>& metrics) {
    constexpr double step = 1e-4;  // of the central differences
    const std::vector<double> clean_metrics = reference_metrics(checkpoint, clean, clean, request, {}, options);
    const std::vector<double> corrupted_metrics = reference_metrics(checkpoint, corrupted, clean, request, {}, options);
    const Activations clean_run = record(checkpoint, clean, options),
                      corrupted_run = record(checkpoint, corrupted, options);
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const Activations& from = denoise ? clean_run : corrupted_run;
        const Activations& to = denoise ? corrupted_run : clean_run;
        const std::vector<int32_t>& target = denoise ? corrupted : clean;
        std::vector<Patching> got(metrics.size());  // in `metrics`' order
        for (size_t m = 0; m < metrics.size(); ++m) {
            request.metric = metrics[m], request.direction = direction;
            attribution_patch(model, Batch{{clean}}, Batch{{corrupted}}, options, request, got[m]);
            const double want_clean = clean_metrics[static_cast<int>(metrics[m])],
                         want_corrupted = corrupted_metrics[static_cast<int>(metrics[m])];
            EXPECT_NEAR(got[m].clean_metric, want_clean, 1e-4 * std::max(1.0, std::abs(want_clean)));
            EXPECT_NEAR(got[m].corrupted_metric, want_corrupted, 1e-4 * std::max(1.0, std::abs(want_corrupted)));
            ASSERT_EQ(got[m].grids.size(), request.kinds.size());
        }
        for (size_t g = 0; g < request.kinds.size(); ++g) {
            const PatchGrid& grid = got[0].grids[g];
            std::vector<double> largest(metrics.size(), 0);  // of the grid's cells
            for (size_t m = 0; m < metrics.size(); ++m) {
                ASSERT_EQ(got[m].grids[g].kind, grid.kind);
                ASSERT_EQ(got[m].grids[g].cells.size(), grid.cells.size());
                for (double cell : got[m].grids[g].cells) largest[m] = std::max(largest[m], std::abs(cell));
            }
            for (int cell = 0; cell < grid.rows * grid.cols; ++cell) {
                const std::vector<double> up =
                    reference_metrics(checkpoint, target, clean, request, along(grid, cell, step, from, to), options);
                const std::vector<double> down =
                    reference_metrics(checkpoint, target, clean, request, along(grid, cell, -step, from, to), options);
                for (size_t m = 0; m < metrics.size(); ++m) {
                    const int k = static_cast<int>(metrics[m]);
                    const double own = denoise ? corrupted_metrics[k] : clean_metrics[k];
                    const double want = patched_fraction(direction, clean_metrics[k], corrupted_metrics[k],
                                                         own + (up[k] - down[k]) / (2 * step));
                    EXPECT_NEAR(got[m].grids[g].cells[cell], want, 1e-3 * std::max(std::abs(want), 1e-2 * largest[m]))
                        << to_string(metrics[m]) << ", " << to_string(direction) << ", " << to_string(grid.kind)
                        << " cell " << cell;
                }
            }
        }
    }
}

}  // namespace headscope::test
