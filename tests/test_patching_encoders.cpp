// Exact activation patching of encoders against the encoders'
// double-precision reference (encoder_reference.h) patched the same way:
// the source run's activations recorded by its hooks, each patch a whole
// reference forward of the run being patched with one activation replaced,
// the metric read from the masked-language-model logits at a position. BERT
// (post-norm, a pair's two token types) and ModernBERT (pre-norm, a window
// on its local layers); every kind, both directions, both metrics an encoder
// reads. Then what an encoder is not asked, in one line (the encoder–decoders:
// test_patching_seq2seq).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "encoder_reference.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "patch_reference.h"

using namespace headscope;
using namespace headscope::test;

namespace {

class PatchEncoder : public ::testing::TestWithParam<EncoderVariant> {
protected:
    void SetUp() override {
        write_encoder_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        backend_->load_weights(model_);
        options_.causal = false;
        options_.sliding_window = model_.config.sliding_window;  // ModernBERT's local layers'
    }

    // [CLS] ... [MASK] ... [SEP] (the mask, id 4, at position 5); the corrupted text two tokens changed.
    const EncoderCheckpoint checkpoint_ = make_encoder_checkpoint(GetParam().spec);
    const int V = GetParam().spec.vocab_size;
    const std::vector<int32_t> clean_ = {2, 9, 1000, 2024, V / 2, 4, 300, 3, V - 1, 42, 3};
    const std::vector<int32_t> corrupted_ = {2, 9, V / 3, 2024, V / 2, 4, 300, 3, V - 5, 42, 3};
    // A pair's types where the model has two (BERT's), else none.
    const std::vector<int32_t> types_ = GetParam().spec.type_vocab_size > 1
                                            ? std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}
                                            : std::vector<int32_t>{};
    TempDir dir_;
    Model model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    AttentionOptions options_;

    Batch batch(const std::vector<int32_t>& ids) const {
        Batch batch{{ids}, model_.config.pad_id()};
        if (!types_.empty()) batch.token_types = {types_};
        return batch;
    }
    // The reference's logit difference and log-probability at the request's position, with `hooks`.
    std::vector<double> metrics(const std::vector<int32_t>& ids, const PatchRequest& request,
                                const FamilyHooks& hooks = {}) const {
        return encoder_metrics(checkpoint_, ids, types_, options_, request, hooks);
    }
    Activations record(const std::vector<int32_t>& ids) const {
        Activations kept;
        encoder_reference(checkpoint_, ids, types_, options_,
                          recording_hooks(kept, GetParam().spec.n_layer, GetParam().spec.n_head));
        return kept;
    }
};

TEST_P(PatchEncoder, EveryKindMatchesTheReference) {
    const int L = GetParam().spec.n_layer, NH = GetParam().spec.n_head, T = static_cast<int>(clean_.size());
    PatchRequest request;
    request.answer = 300, request.wrong = 901, request.position = 5;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const std::vector<double> clean = metrics(clean_, request), corrupted = metrics(corrupted_, request);
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const Activations from = record(denoise ? clean_ : corrupted_);
        // [kind][cell][metric]: the reference's patched metrics.
        std::vector<std::vector<std::vector<double>>> want(4);
        for (PatchKind kind : request.kinds) {
            const int cols = kind == PatchKind::heads || kind == PatchKind::pattern ? NH : T;
            for (int cell = 0; cell < L * cols; ++cell)
                want[static_cast<int>(kind)].push_back(
                    metrics(denoise ? corrupted_ : clean_, request, patch_hooks(kind, cell / cols, cell % cols, from)));
        }
        for (PatchMetric metric : {PatchMetric::logit_diff, PatchMetric::logprob}) {
            request.metric = metric, request.direction = direction;
            const int m = static_cast<int>(metric);
            const std::string what = std::string(to_string(metric)) + ", " + to_string(direction);
            Patching got;
            backend_->patch(batch(clean_), batch(corrupted_), options_, request, got);
            EXPECT_NEAR(got.clean_metric, clean[m], 1e-4 * std::max(1.0, std::abs(clean[m]))) << what;
            EXPECT_NEAR(got.corrupted_metric, corrupted[m], 1e-4 * std::max(1.0, std::abs(corrupted[m]))) << what;
            ASSERT_EQ(got.grids.size(), request.kinds.size());
            double restored = 0;  // the largest cell: a patch does move the metric
            for (const PatchGrid& grid : got.grids) {
                const auto& cells = want[static_cast<int>(grid.kind)];
                ASSERT_EQ(grid.cells.size(), cells.size()) << what << ", " << to_string(grid.kind);
                for (size_t i = 0; i < cells.size(); ++i) {
                    const double fraction = patched_fraction(direction, clean[m], corrupted[m], cells[i][m]);
                    EXPECT_NEAR(grid.cells[i], fraction, 1e-4 * std::max(1.0, std::abs(fraction)))
                        << what << ", " << to_string(grid.kind) << " cell " << i;
                    restored = std::max(restored, std::abs(fraction));
                }
            }
            EXPECT_GT(restored, 0.1) << what;
        }
    }
}

// A cell's patched run (the maps the window shows on a click): every layer's
// maps those of the reference patched the same way.
TEST_P(PatchEncoder, APatchedRunIsTheReferencesWhole) {
    const int NH = GetParam().spec.n_head, T = static_cast<int>(clean_.size());
    const Activations from = record(clean_);
    for (const PatchCell& cell : {PatchCell{PatchKind::residual, 1, 2}, PatchCell{PatchKind::pattern, 0, 1}}) {
        AttentionResult got;
        backend_->patched_run(batch(clean_), batch(corrupted_), options_, PatchDirection::denoise, cell, got);
        const EncoderReference want = encoder_reference(checkpoint_, corrupted_, types_, options_,
                                                        patch_hooks(cell.kind, cell.layer, cell.index, from));
        double worst = 0;
        for (int l = 0; l < GetParam().spec.n_layer; ++l)
            for (int h = 0; h < NH; ++h)
                for (int i = 0; i < T; ++i)
                    for (int j = 0; j < T; ++j)
                        worst = std::max(worst,
                                         std::abs(got.row(l, 0, h, i)[j] -
                                                  want.weights[((static_cast<size_t>(l) * NH + h) * T + i) * T + j]));
        EXPECT_LT(worst, 2e-5) << to_string(cell.kind);
    }
}

INSTANTIATE_TEST_SUITE_P(Encoders, PatchEncoder,
                         ::testing::Values(EncoderVariant{"bert", encoder_variant("bert")},
                                           EncoderVariant{"modernbert", encoder_variant("modernbert")}),
                         [](const ::testing::TestParamInfo<EncoderVariant>& info) { return info.param.name; });

// What patching refuses of an encoder-like model, each in one line.
TEST(PatchEncoderRefusals, EachSaysWhyInOneLine) {
    const auto refusal = [](const Config& config, PatchMetric metric) {
        PatchRequest request;
        request.metric = metric, request.answer = 1, request.wrong = 2, request.kinds = {PatchKind::heads};
        try {
            checked_patch_request(config, {1, 2}, {1, 3}, request);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    Config encoder;
    encoder.causal = false, encoder.mlm_head = true, encoder.vocab_size = 8;
    EXPECT_EQ(refusal(encoder, PatchMetric::loss),
              "the loss reads each next token, which an encoder does not predict: its masked-language-model logits "
              "are measured at a position (a logit difference or a log-probability)");
    EXPECT_EQ(refusal(encoder, PatchMetric::logit_diff), "accepted");
}

}  // namespace
