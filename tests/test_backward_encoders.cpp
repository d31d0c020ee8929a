// The backward pass (backward.h) of encoders against central finite
// differences of the encoders' double-precision reference
// (encoder_reference.h, its hooks moving one activation): the gradient of
// the logit difference and the log-probability at the mask with respect to
// every kind of activation patching copies, on BERT (post-norm, a pair's
// token types: its second text's 1; erf's and tanh's GELU) and ModernBERT (pre-norm, no norm
// before its first attention, a window both ways on its local layers,
// GeGLU, the final norm), through the masked-LM head; attribution patching's
// cells against the reference's derivative along each patch; the effects
// grid's estimate refused (an encoder has no next-token loss).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "encoder_reference.h"
#include "headscope/base/error.h"
#include "headscope/compute/backward.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "patch_reference.h"

using namespace headscope;
using namespace headscope::test;

namespace {

constexpr double step = 1e-4;  // of the central differences

class EncoderBackward : public ::testing::TestWithParam<EncoderVariant> {
protected:
    void SetUp() override {
        write_encoder_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        options_.causal = false;
        options_.sliding_window = model_.config.sliding_window;  // ModernBERT's local layers'
        request_.answer = 300, request_.wrong = 901, request_.position = 5;
    }

    const EncoderCheckpoint checkpoint_ = make_encoder_checkpoint(GetParam().spec);
    const int V = GetParam().spec.vocab_size, L = GetParam().spec.n_layer, NH = GetParam().spec.n_head;
    const int C = GetParam().spec.n_embd, hs = C / NH;
    // [CLS] ... [MASK] ... [SEP], the mask (id 4) at position 5; the corrupted text two tokens changed.
    const std::vector<int32_t> clean_ = {2, 9, 1000, 2024, V / 2, 4, 300, 3, V - 1, 42, 3};
    const std::vector<int32_t> corrupted_ = {2, 9, V / 3, 2024, V / 2, 4, 300, 3, V - 5, 42, 3};
    const int T = static_cast<int>(clean_.size());
    // A pair's token types where the model has two (BERT's: the second text after the first [SEP]); else none.
    const std::vector<int32_t> types_ = GetParam().spec.type_vocab_size > 1
                                            ? std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}
                                            : std::vector<int32_t>{};
    TempDir dir_;
    Model model_;
    AttentionOptions options_;
    PatchRequest request_;

    // The reference's logit difference and log-probability at the request's position, with `hooks`.
    std::vector<double> metrics(const std::vector<int32_t>& ids, const FamilyHooks& hooks = {}) const {
        return encoder_metrics(checkpoint_, ids, types_, options_, request_, hooks);
    }
    // One text as the engine reads it, with the pair's token types.
    Batch text(const std::vector<int32_t>& ids) const {
        Batch batch{{ids}, 0};
        if (!types_.empty()) batch.token_types = {types_};
        return batch;
    }
    Activations record(const std::vector<int32_t>& ids) const {
        Activations kept;
        encoder_reference(checkpoint_, ids, types_, options_, recording_hooks(kept, L, NH));
        return kept;
    }
};

TEST_P(EncoderBackward, GradientsMatchCentralDifferences) {
    std::vector<RunActivations> gradients(2);  // logit difference, log-probability
    for (int m = 0; m < 2; ++m) {
        PatchRequest request = request_;
        request.metric = static_cast<PatchMetric>(m);
        metric_gradients(model_, text(corrupted_), clean_, options_, request, nullptr, &gradients[m]);
    }
    const Activations own = record(corrupted_);
    for (PatchKind kind : {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern}) {
        const size_t size = of_kind(gradients[0], kind).size();
        int checked = 0;  // values whose gradient is not tiny
        for (int k = 0; k < 150 && checked < 40; ++k) {
            const size_t at = (k * size_t(7919) + 13) % size;
            // A weight ModernBERT's window masks (exactly 0 in the reference's map) has no value to move.
            if (kind == PatchKind::pattern && own.maps[at / (NH * T * T)][at / (T * T) % NH][at / T % T][at % T] == 0)
                continue;
            const std::vector<double> up = metrics(corrupted_, moved_hooks(kind, at, step, T, T, NH, hs, C));
            const std::vector<double> down = metrics(corrupted_, moved_hooks(kind, at, -step, T, T, NH, hs, C));
            for (int m = 0; m < 2; ++m) {
                const std::vector<float>& got = of_kind(gradients[m], kind);
                ASSERT_EQ(got.size(), size);
                double largest = 0;
                for (float g : got) largest = std::max(largest, std::abs(static_cast<double>(g)));
                const double want = (up[m] - down[m]) / (2 * step);
                const bool tiny = std::abs(want) < 1e-2 * largest;
                checked += !tiny;
                EXPECT_NEAR(got[at], want, 1e-3 * (tiny ? 1e-2 * largest : std::abs(want)))
                    << to_string(kind) << " value " << at << ", " << to_string(static_cast<PatchMetric>(m));
            }
        }
        EXPECT_GE(checked, 30) << to_string(kind);
    }
}

// Each attribution cell is the reference's derivative of the metric along
// its patch, (source - target activation), on the run being patched.
TEST_P(EncoderBackward, AttributionIsTheDerivativeAlongEachPatch) {
    PatchRequest request = request_;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const std::vector<double> clean = metrics(clean_), corrupted = metrics(corrupted_);
    const Activations clean_run = record(clean_), corrupted_run = record(corrupted_);
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const Activations& from = denoise ? clean_run : corrupted_run;
        const Activations& to = denoise ? corrupted_run : clean_run;
        request.direction = direction, request.metric = PatchMetric::logit_diff;
        Patching got;
        attribution_patch(model_, text(clean_), text(corrupted_), options_, request, got);
        EXPECT_NEAR(got.clean_metric, clean[0], 1e-4 * std::max(1.0, std::abs(clean[0])));
        EXPECT_NEAR(got.corrupted_metric, corrupted[0], 1e-4 * std::max(1.0, std::abs(corrupted[0])));
        for (const PatchGrid& grid : got.grids) {
            double largest = 0;
            for (double cell : grid.cells) largest = std::max(largest, std::abs(cell));
            for (int cell = 0; cell < grid.rows * grid.cols; ++cell) {
                const int l = cell / grid.cols, index = cell % grid.cols;
                // The patch's hooks copying own + by (source - own): patch_hooks copies a head's whole
                // output or map, or one row of the residual or MLP output, of `mixed`.
                const auto along = [&](double by) {
                    Activations mixed = to;
                    const auto pick = [&](auto& run) -> auto& {
                        return grid.kind == PatchKind::heads      ? run.heads[l][index]
                               : grid.kind == PatchKind::pattern  ? run.maps[l][index]
                               : grid.kind == PatchKind::residual ? run.inputs[l]
                                                                  : run.mlp[l];
                    };
                    Rows& x = pick(mixed);
                    const Rows& source = pick(from);
                    for (size_t r = 0; r < x.size(); ++r)
                        for (size_t c = 0; c < x[r].size(); ++c) x[r][c] += by * (source[r][c] - x[r][c]);
                    return metrics(denoise ? corrupted_ : clean_, patch_hooks(grid.kind, l, index, mixed))[0];
                };
                const double own = denoise ? corrupted[0] : clean[0];
                const double want = patched_fraction(direction, clean[0], corrupted[0],
                                                     own + (along(step) - along(-step)) / (2 * step));
                EXPECT_NEAR(grid.cells[cell], want, 1e-3 * std::max(std::abs(want), 1e-2 * largest))
                    << to_string(direction) << ", " << to_string(grid.kind) << " cell " << cell;
            }
        }
    }
    // The effects grid's estimate reads the loss over next tokens, which an encoder has none of.
    EXPECT_THROW(estimated_loss_changes(model_, clean_, options_), Error);
}

INSTANTIATE_TEST_SUITE_P(Encoders, EncoderBackward,
                         ::testing::Values(EncoderVariant{"bert", encoder_variant("bert")},
                                           EncoderVariant{"bert_tanh_gelu", encoder_variant("bert_tanh_gelu")},
                                           EncoderVariant{"modernbert", encoder_variant("modernbert")}),
                         [](const ::testing::TestParamInfo<EncoderVariant>& info) { return info.param.name; });

}  // namespace
