// Exact activation patching of encoder–decoders (a T5 and a BART layout)
// against their double-precision reference (seq2seq_reference.h) patched
// the same way: the source run's activations recorded by its hooks, each
// patch a whole reference forward of the run being patched with one
// activation replaced, the metric read from the decoder's logits. Every
// kind in every stack (the encoder's, the decoder's, the cross-attention's),
// both directions, every metric; a cell's patched run's maps; and what
// encoder–decoders are refused, each in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "patch_reference.h"
#include "seq2seq_models.h"
#include "seq2seq_reference.h"

using namespace headscope;
using namespace headscope::test;

namespace {

class PatchSeq2Seq : public ::testing::TestWithParam<Seq2SeqVariant> {
protected:
    void SetUp() override {
        write_seq2seq_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        backend_->load_weights(model_);
        options_.scale = own_scale(model_.config.scaled_scores);  // T5's none, BART's 1/sqrt(hs)
    }

    const Seq2SeqSpec& spec() const { return checkpoint_.spec; }
    const Seq2SeqCheckpoint checkpoint_ = make_seq2seq_checkpoint(GetParam().spec);
    const int V = checkpoint_.spec.vocab_size;
    // Sources of 6 tokens, two changed; targets of 5 (the start token first), one changed.
    const std::vector<int32_t> clean_source_ = {7, 100, V - 1, 2000, 45, spec().eos_id};
    const std::vector<int32_t> corrupted_source_ = {7, V / 3, V - 1, 2000, 300, spec().eos_id};
    const std::vector<int32_t> clean_target_ = {spec().start_id, 12, V - 7, 400, 31};
    const std::vector<int32_t> corrupted_target_ = {spec().start_id, 12, V - 7, 900, 31};
    TempDir dir_;
    Model model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    AttentionOptions options_;

    Batch batch(bool clean) const {
        Batch batch{{clean ? clean_target_ : corrupted_target_}, model_.config.pad_id()};
        batch.source_ids = {clean ? clean_source_ : corrupted_source_};
        return batch;
    }
    std::vector<double> metrics(bool clean, const PatchRequest& request, const Seq2SeqHooks& hooks = {}) const {
        return seq2seq_metrics(checkpoint_, clean ? clean_source_ : corrupted_source_,
                               clean ? clean_target_ : corrupted_target_, clean_target_, options_, request, hooks);
    }
    // The grid of `kind` in `stack`: (layers, heads or positions).
    std::pair<int, int> shape(PatchKind kind, PatchStack stack) const {
        const bool encoder = stack == PatchStack::encoder;
        const int L = encoder ? spec().encoder_layers : spec().decoder_layers;
        if (kind == PatchKind::heads || kind == PatchKind::pattern) return {L, spec().n_head};
        return {L, static_cast<int>(encoder ? clean_source_.size() : clean_target_.size())};
    }
};

TEST_P(PatchSeq2Seq, EveryKindInEveryStackMatchesTheReference) {
    PatchRequest request;
    request.answer = 300, request.wrong = 901, request.position = 4;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const std::vector<double> clean = metrics(true, request), corrupted = metrics(false, request);
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const Seq2SeqActivations from = denoise ? record(checkpoint_, clean_source_, clean_target_, options_)
                                                : record(checkpoint_, corrupted_source_, corrupted_target_, options_);
        // [grid][cell][metric]: the reference's patched metrics, in the grids' order.
        std::vector<std::vector<std::vector<double>>> want;
        for (PatchKind kind : request.kinds)
            for (PatchStack stack : patch_stacks(model_.config, kind)) {
                const auto [rows, cols] = shape(kind, stack);
                want.emplace_back();
                for (int cell = 0; cell < rows * cols; ++cell)
                    want.back().push_back(
                        metrics(!denoise, request, patch_hooks(kind, stack, cell / cols, cell % cols, from)));
            }
        for (PatchMetric metric : {PatchMetric::logit_diff, PatchMetric::logprob, PatchMetric::loss}) {
            request.metric = metric, request.direction = direction;
            const int m = static_cast<int>(metric);
            const std::string what = std::string(to_string(metric)) + ", " + to_string(direction);
            Patching got;
            backend_->patch(batch(true), batch(false), options_, request, got);
            EXPECT_NEAR(got.clean_metric, clean[m], 1e-4 * std::max(1.0, std::abs(clean[m]))) << what;
            EXPECT_NEAR(got.corrupted_metric, corrupted[m], 1e-4 * std::max(1.0, std::abs(corrupted[m]))) << what;
            ASSERT_EQ(got.grids.size(), want.size()) << what;
            double restored = 0;  // the largest cell: a patch does move the metric
            for (size_t g = 0; g < want.size(); ++g) {
                const PatchGrid& grid = got.grids[g];
                const std::string name = what + ", " + patch_grid_name(grid.kind, grid.stack);
                EXPECT_EQ(std::make_pair(grid.rows, grid.cols), shape(grid.kind, grid.stack)) << name;
                ASSERT_EQ(grid.cells.size(), want[g].size()) << name;
                for (size_t i = 0; i < want[g].size(); ++i) {
                    const double fraction = patched_fraction(direction, clean[m], corrupted[m], want[g][i][m]);
                    EXPECT_NEAR(grid.cells[i], fraction, 1e-4 * std::max(1.0, std::abs(fraction)))
                        << name << " cell " << i;
                    restored = std::max(restored, std::abs(fraction));
                }
            }
            EXPECT_GT(restored, 0.1) << what;
        }
    }
}

// A cell's patched run (the maps and predictions the window shows on a
// click on any stack's grid): every map of the encoder, the decoder and the
// cross-attention that of the reference patched the same way, and the top 5
// at the last target token the reference's logits' most likely tokens, with their probabilities.
TEST_P(PatchSeq2Seq, APatchedRunIsTheReferencesWhole) {
    const int NH = spec().n_head, S = static_cast<int>(clean_source_.size()),
              T = static_cast<int>(clean_target_.size());
    const Seq2SeqActivations from = record(checkpoint_, clean_source_, clean_target_, options_);
    for (const PatchCell& cell : {PatchCell{PatchKind::residual, 1, 2, PatchStack::encoder},
                                  PatchCell{PatchKind::pattern, 0, 1, PatchStack::cross},
                                  PatchCell{PatchKind::heads, 1, 3, PatchStack::decoder}}) {
        AttentionResult got;
        AttentionOptions predicted = options_;
        predicted.top_k = 5;
        backend_->patched_run(batch(true), batch(false), predicted, PatchDirection::denoise, cell, got);
        const Seq2SeqReference want =
            seq2seq_reference(checkpoint_, corrupted_source_, corrupted_target_, options_,
                              patch_hooks(cell.kind, cell.stack, cell.layer, cell.index, from));
        ASSERT_TRUE(got.encoder);
        double worst = 0;
        const auto compare = [&](double engine, double reference) {
            worst = std::max(worst, std::abs(engine - reference));
        };
        for (int l = 0; l < spec().decoder_layers; ++l)
            for (int h = 0; h < NH; ++h)
                for (int i = 0; i < T; ++i) {
                    for (int j = 0; j < T; ++j)
                        compare(got.row(l, 0, h, i)[j],
                                want.decoder[((static_cast<size_t>(l) * NH + h) * T + i) * T + j]);
                    for (int j = 0; j < S; ++j)
                        compare(got.cross_row(l, 0, h, i)[j],
                                want.cross[((static_cast<size_t>(l) * NH + h) * T + i) * S + j]);
                }
        for (int l = 0; l < spec().encoder_layers; ++l)
            for (int h = 0; h < NH; ++h)
                for (int i = 0; i < S; ++i)
                    for (int j = 0; j < S; ++j)
                        compare(got.encoder->row(l, 0, h, i)[j],
                                want.encoder[((static_cast<size_t>(l) * NH + h) * S + i) * S + j]);
        EXPECT_LT(worst, 2e-5) << patch_grid_name(cell.kind, cell.stack);
        const double* logits = want.logits.data() + static_cast<size_t>(T - 1) * want.V;
        double log_sum = -INFINITY;  // of exp(logits)
        for (int v = 0; v < want.V; ++v)
            log_sum = std::max(log_sum, logits[v]) + std::log1p(std::exp(-std::abs(log_sum - logits[v])));
        std::vector<int> order(want.V);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                          [&](int a, int b) { return logits[a] > logits[b]; });
        for (int k = 0; k < 5; ++k) {
            const Prediction& p = got.predictions_at(0, T - 1)[k];
            EXPECT_EQ(p.id, order[k]) << patch_grid_name(cell.kind, cell.stack) << " rank " << k + 1;
            EXPECT_NEAR(p.p, std::exp(logits[order[k]] - log_sum), 1e-5) << patch_grid_name(cell.kind, cell.stack);
        }
    }
}

// What patching refuses of an encoder–decoder, each in one line: sources of
// other lengths (exactly and by attribution), a cell of no grid.
TEST_P(PatchSeq2Seq, RefusesInOneLine) {
    const auto refusal = [](const auto& call) {
        try {
            call();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    PatchRequest request;
    request.answer = 300, request.wrong = 901, request.kinds = {PatchKind::heads};
    Batch shorter = batch(false);
    shorter.source_ids[0].pop_back();
    Patching patching;
    patching.clean_metric = 7;
    EXPECT_EQ(refusal([&] { backend_->patch(batch(true), shorter, options_, request, patching); }),
              "patching copies the encoder's activations position by position, so both sources need the same "
              "length: the clean source has 6 tokens, the corrupted 5");
    EXPECT_EQ(patching.clean_metric, 7);  // left as it was
    AttentionResult result;
    EXPECT_EQ(refusal([&] {
                  backend_->patched_run(batch(true), batch(false), options_, PatchDirection::denoise,
                                        {PatchKind::residual, 0, 0, PatchStack::cross}, result);
              }),
              "this model has no residual to patch in the cross-attention");
    EXPECT_EQ(refusal([&] {
                  backend_->patched_run(batch(true), batch(false), options_, PatchDirection::denoise,
                                        {PatchKind::mlp, 0, 6, PatchStack::encoder}, result);
              }),
              "there is no mlp cell (layer 0, position 6) in 2 layers of 6");
    EXPECT_EQ(refusal([&] { attribution_patch(model_, batch(true), shorter, options_, request, patching); }),
              "patching copies the encoder's activations position by position, so both sources need the same "
              "length: the clean source has 6 tokens, the corrupted 5");
}

INSTANTIATE_TEST_SUITE_P(EncoderDecoders, PatchSeq2Seq,
                         ::testing::Values(Seq2SeqVariant{"t5", seq2seq_variant("t5")},
                                           Seq2SeqVariant{"bart", seq2seq_variant("bart")}),
                         [](const ::testing::TestParamInfo<Seq2SeqVariant>& info) { return info.param.name; });

}  // namespace
