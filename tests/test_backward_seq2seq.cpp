// The backward pass (backward.h) of encoder–decoders against central finite
// differences of their double-precision reference (seq2seq_reference.h, its
// hooks moving one activation): the gradient of each metric read from the
// decoder's logits with respect to every activation patching copies, in the
// decoder (self-attention, residual, MLPs), its cross-attention (heads'
// outputs and maps: the gradient flowing into the encoder's output) and the
// encoder, on T5 (RMSNorm before each block, relative position bias, no
// biases, the tied head's C^-1/2) and BART (LayerNorm after each sublayer,
// learned positions, biases); attribution patching's ten grids against the
// reference's derivative along each patch, both directions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/compute/backward.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "patch_reference.h"
#include "seq2seq_models.h"
#include "seq2seq_reference.h"

using namespace headscope;
using namespace headscope::test;

namespace {

constexpr double central_step = 1e-4;  // of the central differences

// One stack's sizes: L layers over T rows whose maps have `keys` columns.
struct Sizes {
    int L, T, keys;
};

class Seq2SeqBackward : public ::testing::TestWithParam<Seq2SeqVariant> {
protected:
    void SetUp() override {
        write_seq2seq_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        options_.scale = own_scale(model_.config.scaled_scores);  // T5's none, BART's 1/sqrt(hs)
        request_.answer = 300, request_.wrong = 901, request_.position = 3;
    }

    const Seq2SeqSpec& spec() const { return checkpoint_.spec; }
    const Seq2SeqCheckpoint checkpoint_ = make_seq2seq_checkpoint(GetParam().spec);
    const int V = checkpoint_.spec.vocab_size, NH = checkpoint_.spec.n_head, hs = checkpoint_.spec.head_dim;
    const int C = checkpoint_.spec.n_embd;
    // Sources of 5 tokens, two changed; targets of 4 (the start token first), one changed.
    const std::vector<int32_t> clean_source_ = {7, 100, V - 1, 45, spec().eos_id};
    const std::vector<int32_t> corrupted_source_ = {7, V / 3, V - 1, 300, spec().eos_id};
    const std::vector<int32_t> clean_target_ = {spec().start_id, 12, V - 7, 400};
    const std::vector<int32_t> corrupted_target_ = {spec().start_id, 12, 900, 400};
    const int S = 5, T = 4;
    TempDir dir_;
    Model model_;
    AttentionOptions options_;
    PatchRequest request_;

    Batch batch(bool clean) const {
        Batch batch{{clean ? clean_target_ : corrupted_target_}, model_.config.pad_id()};
        batch.source_ids = {clean ? clean_source_ : corrupted_source_};
        return batch;
    }
    // Every metric of the reference's run of one text, with `hooks`.
    std::vector<double> metrics(bool clean, const Seq2SeqHooks& hooks = {}) const {
        return seq2seq_metrics(checkpoint_, clean ? clean_source_ : corrupted_source_,
                               clean ? clean_target_ : corrupted_target_, clean_target_, options_, request_, hooks);
    }
    Sizes sizes(PatchStack stack) const {
        if (stack == PatchStack::encoder) return {spec().encoder_layers, S, S};
        return {spec().decoder_layers, T, stack == PatchStack::cross ? S : T};
    }
    // The value at flat index `at` of RunActivations' vector of `kind` in `stack`, moved by `by`.
    Seq2SeqHooks moved(PatchKind kind, PatchStack stack, size_t at, double by) const {
        Seq2SeqHooks hooks;
        FamilyHooks& of = stack == PatchStack::encoder ? hooks.encoder
                          : stack == PatchStack::cross ? hooks.cross
                                                       : hooks.decoder;
        const Sizes sized = sizes(stack);
        of = moved_hooks(kind, at, by, sized.T, sized.keys, NH, hs, C);
        return hooks;
    }
};

// A run's vector of `kind` in `stack`.
const std::vector<float>& of_stack(const RunActivations& run, PatchKind kind, PatchStack stack) {
    if (stack == PatchStack::encoder) return of_kind(run.encoder.at(0), kind);
    if (stack == PatchStack::cross) return kind == PatchKind::heads ? run.cross_heads : run.cross_pattern;
    return of_kind(run, kind);
}

// A reference map's weight at flat index `at` of `stack`'s pattern vector.
double weight(const Seq2SeqActivations& run, PatchStack stack, size_t at, int NH, const Sizes& s) {
    const Activations& of = stack == PatchStack::encoder ? run.encoder
                            : stack == PatchStack::cross ? run.cross
                                                         : run.decoder;
    return of.maps[at / (NH * s.T * s.keys)][at / (s.T * s.keys) % NH][at / s.keys % s.T][at % s.keys];
}

TEST_P(Seq2SeqBackward, GradientsMatchCentralDifferences) {
    std::vector<RunActivations> gradients(3);  // in PatchMetric's order
    for (int m = 0; m < 3; ++m) {
        PatchRequest request = request_;
        request.metric = static_cast<PatchMetric>(m);
        metric_gradients(model_, batch(false), clean_target_, options_, request, nullptr, &gradients[m]);
    }
    const Seq2SeqActivations own = record(checkpoint_, corrupted_source_, corrupted_target_, options_);
    for (PatchKind kind : {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern})
        for (PatchStack stack : patch_stacks(model_.config, kind)) {
            const std::string name = patch_grid_name(kind, stack);
            const size_t size = of_stack(gradients[0], kind, stack).size();
            int checked = 0;  // values whose gradient is not tiny
            for (int k = 0; k < 60 && checked < 20; ++k) {
                const size_t at = (k * size_t(7919) + 13) % size;
                // A weight the causal mask sets to 0 has no value to move.
                if (kind == PatchKind::pattern && weight(own, stack, at, NH, sizes(stack)) == 0) continue;
                const std::vector<double> up = metrics(false, moved(kind, stack, at, central_step));
                const std::vector<double> down = metrics(false, moved(kind, stack, at, -central_step));
                for (int m = 0; m < 3; ++m) {
                    const std::vector<float>& got = of_stack(gradients[m], kind, stack);
                    ASSERT_EQ(got.size(), size) << name;
                    double largest = 0;
                    for (float g : got) largest = std::max(largest, std::abs(static_cast<double>(g)));
                    const double want = (up[m] - down[m]) / (2 * central_step);
                    const bool tiny = std::abs(want) < 1e-2 * largest;
                    checked += !tiny;
                    EXPECT_NEAR(got[at], want, 1e-3 * (tiny ? 1e-2 * largest : std::abs(want)))
                        << name << " value " << at << ", " << to_string(static_cast<PatchMetric>(m));
                }
            }
            EXPECT_GE(checked, 15) << name;
        }
}

// Each of the ten grids' cells is the reference's derivative of the metric
// along its patch, (source - target activation), on the run being patched.
TEST_P(Seq2SeqBackward, AttributionIsTheDerivativeAlongEachPatch) {
    PatchRequest request = request_;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const std::vector<double> clean = metrics(true), corrupted = metrics(false);
    const Seq2SeqActivations clean_run = record(checkpoint_, clean_source_, clean_target_, options_),
                             corrupted_run = record(checkpoint_, corrupted_source_, corrupted_target_, options_);
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const Seq2SeqActivations& from = denoise ? clean_run : corrupted_run;
        const Seq2SeqActivations& to = denoise ? corrupted_run : clean_run;
        request.direction = direction;
        Patching got;
        attribution_patch(model_, batch(true), batch(false), options_, request, got);
        EXPECT_NEAR(got.clean_metric, clean[0], 1e-4 * std::max(1.0, std::abs(clean[0])));
        EXPECT_NEAR(got.corrupted_metric, corrupted[0], 1e-4 * std::max(1.0, std::abs(corrupted[0])));
        ASSERT_EQ(got.grids.size(), 10u);
        for (const PatchGrid& grid : got.grids) {
            const std::string name = std::string(to_string(direction)) + ", " + patch_grid_name(grid.kind, grid.stack);
            const Sizes s = sizes(grid.stack);
            const bool per_head = grid.kind == PatchKind::heads || grid.kind == PatchKind::pattern;
            ASSERT_EQ(std::make_pair(grid.rows, grid.cols), std::make_pair(s.L, per_head ? NH : s.T)) << name;
            double largest = 0;
            for (double cell : grid.cells) largest = std::max(largest, std::abs(cell));
            EXPECT_GT(largest, 1e-3) << name;
            for (int cell = 0; cell < grid.rows * grid.cols; ++cell) {
                const int l = cell / grid.cols, index = cell % grid.cols;
                // The patch's hooks copying own + by (source - own) of the one activation the cell patches.
                const auto along = [&](double by) {
                    Seq2SeqActivations mixed = to;
                    const auto pick = [&](auto& run) -> auto& {
                        auto& of = grid.stack == PatchStack::encoder ? run.encoder
                                   : grid.stack == PatchStack::cross ? run.cross
                                                                     : run.decoder;
                        return grid.kind == PatchKind::heads      ? of.heads[l][index]
                               : grid.kind == PatchKind::pattern  ? of.maps[l][index]
                               : grid.kind == PatchKind::residual ? of.inputs[l]
                                                                  : of.mlp[l];
                    };
                    Rows& x = pick(mixed);
                    const Rows& source = pick(from);
                    for (size_t r = 0; r < x.size(); ++r)
                        for (size_t c = 0; c < x[r].size(); ++c) x[r][c] += by * (source[r][c] - x[r][c]);
                    return metrics(!denoise, patch_hooks(grid.kind, grid.stack, l, index, mixed))[0];
                };
                const double own = denoise ? corrupted[0] : clean[0];
                const double want =
                    patched_fraction(direction, clean[0], corrupted[0],
                                     own + (along(central_step) - along(-central_step)) / (2 * central_step));
                EXPECT_NEAR(grid.cells[cell], want, 1e-3 * std::max(std::abs(want), 1e-2 * largest))
                    << name << " cell " << cell;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(EncoderDecoders, Seq2SeqBackward,
                         ::testing::Values(Seq2SeqVariant{"t5", seq2seq_variant("t5")},
                                           Seq2SeqVariant{"bart", seq2seq_variant("bart")}),
                         [](const ::testing::TestParamInfo<Seq2SeqVariant>& info) { return info.param.name; });

}  // namespace
