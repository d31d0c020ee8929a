// Test support: activation patching's double-precision reference
// (patch_reference.h), on the families' reference forward and logits.
#include "patch_reference.h"

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

}  // namespace headscope::test
