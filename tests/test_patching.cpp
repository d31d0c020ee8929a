// Exact activation patching against a double-precision reference written
// here on the families' reference forward (patch_reference.h): the
// source run's activations recorded, each patch a whole forward of the run
// being patched with one activation replaced, the metric from the reference
// logits. A GPT-2-layout model, a grouped-query Llama and a mixture of
// experts; every kind, both directions, every metric. Then the requests
// refused, cancelling, and the built-in model's induction heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "headscope/base/error.h"
#include "headscope/base/progress.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/patching.h"
#include "patch_reference.h"

using namespace headscope;
using namespace headscope::test;

namespace {

struct PatchModel {
    std::string name;
    FamilySpec spec;
};

class Patch : public ::testing::TestWithParam<PatchModel> {
protected:
    Patch() { backend_->load_weights(model_); }
    const LoadedFamily& family_ = loaded_family("patch_" + GetParam().name, GetParam().spec);
    const FamilyCheckpoint& checkpoint_ = family_.checkpoint;
    const Model& model_ = family_.model;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    // 11 tokens, the corrupted text two of them changed.
    std::vector<int32_t> clean_ = family_texts(GetParam().spec)[0];
    std::vector<int32_t> corrupted_ = [&] {
        std::vector<int32_t> ids = clean_;
        ids[4] = 123, ids[8] = 4567;
        return ids;
    }();
    Batch batch(const std::vector<int32_t>& ids) const { return Batch{{ids}, model_.config.pad_id()}; }
};

TEST_P(Patch, EveryKindMatchesTheReference) {
    const int L = checkpoint_.spec.n_layer, NH = checkpoint_.spec.n_head, T = static_cast<int>(clean_.size());
    PatchRequest request;
    request.answer = 300, request.wrong = 901, request.position = 7;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    const std::vector<double> clean = reference_metrics(checkpoint_, clean_, clean_, request);
    const std::vector<double> corrupted = reference_metrics(checkpoint_, corrupted_, clean_, request);
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const std::vector<int32_t>& target = denoise ? corrupted_ : clean_;
        const Activations from = record(checkpoint_, denoise ? clean_ : corrupted_);
        // [kind][cell][metric]: the reference's patched metrics.
        std::vector<std::vector<std::vector<double>>> want(4);
        for (PatchKind kind : request.kinds) {
            const int cols = kind == PatchKind::heads || kind == PatchKind::pattern ? NH : T;
            for (int cell = 0; cell < L * cols; ++cell)
                want[static_cast<int>(kind)].push_back(reference_metrics(
                    checkpoint_, target, clean_, request, patch_hooks(kind, cell / cols, cell % cols, from)));
        }
        for (PatchMetric metric : {PatchMetric::logit_diff, PatchMetric::logprob, PatchMetric::loss}) {
            request.metric = metric, request.direction = direction;
            const int m = static_cast<int>(metric);
            const std::string what = std::string(to_string(metric)) + ", " + to_string(direction);
            Patching got;
            backend_->patch(batch(clean_), batch(corrupted_), {}, request, got);
            EXPECT_NEAR(got.clean_metric, clean[m], 1e-4 * std::max(1.0, std::abs(clean[m]))) << what;
            EXPECT_NEAR(got.corrupted_metric, corrupted[m], 1e-4 * std::max(1.0, std::abs(corrupted[m]))) << what;
            ASSERT_EQ(got.grids.size(), request.kinds.size());
            EXPECT_EQ(got.L, L);
            EXPECT_EQ(got.NH, NH);
            EXPECT_EQ(got.T, T);
            double restored = 0;  // the largest cell: a patch does move the metric
            for (const PatchGrid& grid : got.grids) {
                const auto& cells = want[static_cast<int>(grid.kind)];
                ASSERT_EQ(grid.rows, L) << what;
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

// Texts that differ from their first token on: every row of every patched
// run is computed (no rows kept from the run being patched).
TEST_P(Patch, TextsDifferingFromTheFirstTokenMatchTheReference) {
    std::vector<int32_t> corrupted = corrupted_;
    corrupted[0] = 77;
    PatchRequest request;
    request.answer = 300, request.wrong = 901, request.kinds = {PatchKind::heads, PatchKind::mlp};
    Patching got;
    backend_->patch(batch(clean_), batch(corrupted), {}, request, got);
    const double clean = reference_metrics(checkpoint_, clean_, clean_, got.request)[0];
    const double corrupt = reference_metrics(checkpoint_, corrupted, clean_, got.request)[0];
    const Activations from = record(checkpoint_, clean_);
    for (const PatchGrid& grid : got.grids)
        for (int cell = 0; cell < grid.rows * grid.cols; ++cell) {
            const FamilyHooks hooks = patch_hooks(grid.kind, cell / grid.cols, cell % grid.cols, from);
            const double patched = reference_metrics(checkpoint_, corrupted, clean_, got.request, hooks)[0];
            const double fraction = patched_fraction(PatchDirection::denoise, clean, corrupt, patched);
            EXPECT_NEAR(grid.cells[cell], fraction, 1e-4 * std::max(1.0, std::abs(fraction)))
                << to_string(grid.kind) << " cell " << cell;
        }
}

// A cell's patched run, whole (backend.h's patched_run): every layer's maps
// and the log-probability of each next token of the run being patched, as
// the reference's forward with the same patch gives them; the run patch()
// measures, so its metric gives the grid's cell.
TEST_P(Patch, APatchedRunIsTheReferencesWhole) {
    const int L = checkpoint_.spec.n_layer, NH = checkpoint_.spec.n_head, T = static_cast<int>(clean_.size());
    const int C = checkpoint_.spec.n_embd, V = checkpoint_.spec.vocab_size;
    PatchRequest request;
    request.metric = PatchMetric::loss, request.direction = PatchDirection::noise;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    Patching grids;
    backend_->patch(batch(clean_), batch(corrupted_), {}, request, grids);
    AttentionOptions options;
    options.top_k = 1;
    for (PatchDirection direction : {PatchDirection::denoise, PatchDirection::noise}) {
        const bool denoise = direction == PatchDirection::denoise;
        const std::vector<int32_t>& target = denoise ? corrupted_ : clean_;
        const Activations from = record(checkpoint_, denoise ? clean_ : corrupted_);
        for (const PatchCell cell : {PatchCell{PatchKind::heads, 1, NH - 1}, PatchCell{PatchKind::pattern, 0, 1},
                                     PatchCell{PatchKind::residual, 1, 6}, PatchCell{PatchKind::mlp, 0, 8}}) {
            const std::string what = std::string(to_string(direction)) + ", " + to_string(cell.kind);
            AttentionResult got;
            backend_->patched_run(batch(clean_), batch(corrupted_), options, direction, cell, got);
            const FamilyReference want =
                family_reference(checkpoint_, {target}, {}, patch_hooks(cell.kind, cell.layer, cell.index, from));
            ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
            for (size_t i = 0; i < want.weights.size(); ++i)
                ASSERT_NEAR(got.weights[i], want.weights[i], 1e-5) << what << ", weight " << i;
            const std::vector<double> last(want.residual.end() - static_cast<size_t>(T) * C, want.residual.end());
            const std::vector<double> logits = family_logits(checkpoint_, last);
            double loss = 0;  // of the target's own next tokens
            for (int t = 0; t + 1 < T; ++t) {
                const double* row = logits.data() + static_cast<size_t>(t) * V;
                const double max = *std::max_element(row, row + V);
                double sum = 0;
                for (int v = 0; v < V; ++v) sum += std::exp(row[v] - max);
                const double logprob = row[target[t + 1]] - max - std::log(sum);
                EXPECT_NEAR(got.logprob_next[t], logprob, 1e-4 * std::max(1.0, std::abs(logprob))) << what << t;
                loss -= logprob / (T - 1);
            }
            EXPECT_NEAR(got.loss(0), loss, 1e-4) << what;
            if (denoise) continue;
            // Noising patches the clean run, whose own loss is the metric: the grid's cell.
            const PatchGrid& grid = grids.grids[static_cast<size_t>(cell.kind)];
            EXPECT_NEAR(patched_fraction(direction, grids.clean_metric, grids.corrupted_metric, got.loss(0)),
                        grid.at(cell.layer, cell.index), 1e-4)
                << what;
        }
    }
    AttentionResult kept;
    EXPECT_THROW(backend_->patched_run(batch(clean_), batch(corrupted_), options, PatchDirection::denoise,
                                       {PatchKind::residual, L, 0}, kept),
                 Error);
    EXPECT_THROW(backend_->patched_run(batch(clean_), batch(corrupted_), options, PatchDirection::denoise,
                                       {PatchKind::residual, 0, T}, kept),
                 Error);
}

// The texts agree before position 4, and the logit difference at position 7
// reads nothing after it (a causal model): patching the residual or an MLP
// there leaves the run as it was, a fraction of 0 but for float32's
// rounding (the patches run as the texts of one batch, whose products sum
// in another order than the single text's).
TEST_P(Patch, PositionsTheMetricDoesNotSeeRestoreNothing) {
    PatchRequest request;
    request.answer = 300, request.wrong = 901, request.position = 7;
    request.kinds = {PatchKind::residual, PatchKind::mlp};
    Patching got;
    backend_->patch(batch(clean_), batch(corrupted_), {}, request, got);
    ASSERT_EQ(got.grids.size(), 2u);
    for (const PatchGrid& grid : got.grids)
        for (int l = 0; l < got.L; ++l)
            for (int t : {0, 1, 2, 3, 8, 9, 10})
                EXPECT_NEAR(grid.at(l, t), 0.0, 1e-6) << to_string(grid.kind) << l << t;
}

const std::vector<PatchModel> patch_models = {
    {"gpt2", family_spec(Family::gpt2)},
    {"llama", family_variants()[0].spec},  // family_variants' first: groups of 2
    {"mixtral", family_spec(Family::mixtral)},
};

INSTANTIATE_TEST_SUITE_P(Families, Patch, ::testing::ValuesIn(patch_models),
                         [](const ::testing::TestParamInfo<PatchModel>& info) { return info.param.name; });

}  // namespace

class PatchRefusals : public ::testing::Test {
protected:
    PatchRefusals() { backend_->load_weights(model_); }
    const LoadedFamily& family_ = loaded_family("patch_gpt2", family_spec(Family::gpt2));
    const Model& model_ = family_.model;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    std::vector<int32_t> clean_ = {1, 2, 3, 4, 5}, corrupted_ = {1, 2, 9, 4, 5};
    Batch batch(const std::vector<int32_t>& ids) const { return Batch{{ids}, model_.config.pad_id()}; }
    PatchRequest request_ = [] {
        PatchRequest r;
        r.answer = 6, r.wrong = 7, r.kinds = {PatchKind::heads};
        return r;
    }();
    // The error patching `clean` and `corrupted` with `request` throws; `patching` is kept as it was.
    std::string refusal(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                        const PatchRequest& request, const Progress& progress = {}) {
        Patching kept;
        kept.clean_metric = 42;
        try {
            backend_->patch(batch(clean), batch(corrupted), {}, request, kept, progress);
        } catch (const Error& e) {
            EXPECT_EQ(kept.clean_metric, 42);
            EXPECT_TRUE(kept.grids.empty());
            return e.what();
        }
        return "";
    }
};

TEST_F(PatchRefusals, EachSaysWhyInOneLine) {
    PatchRequest same = request_, far = request_, none = request_, loss = request_;
    same.wrong = same.answer, far.position = 5, none.kinds = {}, loss.metric = PatchMetric::loss;
    const std::vector<std::string> refusals = {
        refusal(clean_, {1, 2, 3, 4}, request_), refusal(clean_, corrupted_, same), refusal(clean_, corrupted_, far),
        refusal(clean_, corrupted_, none),       refusal(clean_, clean_, request_), refusal({1}, {2}, loss)};
    EXPECT_EQ(refusals[0],
              "patching copies activations position by position, so both texts need the same length: the clean text "
              "has 5 tokens, the corrupted 4");
    EXPECT_EQ(refusals[1], "the answer and the wrong token are the same token: their logit difference is always 0");
    EXPECT_EQ(refusals[2], "position 5 is outside the texts' 5 tokens (0..4)");
    EXPECT_EQ(refusals[3], "no component to patch was asked for");
    EXPECT_EQ(refusals[4].rfind("the clean and the corrupted text give the same logit difference (", 0), 0u)
        << refusals[4];
    EXPECT_EQ(refusals[5], "the loss metric needs texts of at least two tokens");
    for (const std::string& r : refusals) EXPECT_EQ(r.find('\n'), std::string::npos);
}

// Cancelled at the first cell: the error is Cancelled, the patching kept,
// and the backend's next forward is a plain one (its state reset).
TEST_F(PatchRefusals, CancellingKeepsThePatchingAndTheForward) {
    const Progress cancel = [](const ProgressReport& r) {
        if (r.what == "patching heads") throw Cancelled();
    };
    AttentionOptions opt;
    opt.top_k = 1;
    AttentionResult before, after;
    backend_->forward(batch(clean_), opt, before);
    EXPECT_EQ(refusal(clean_, corrupted_, request_, cancel), "cancelled");
    backend_->forward(batch(clean_), opt, after);
    EXPECT_EQ(before.loss(0), after.loss(0));
    EXPECT_EQ(before.predictions_at(0, 4)[0].p, after.predictions_at(0, 4)[0].p);
}

// The built-in model's induction heads: a text of 12 random tokens repeated
// against the same first copy followed by 12 other random tokens. Patching
// each head's output from the repeated (clean) text into the other, the
// loss over the clean text's next tokens comes back most through L1 H2 and
// L1 H3 (docs/builtin-model.md).
TEST(BuiltinPatching, TheInductionHeadsCarryTheRepeat) {
    const Model model = load_model(builtin_model);
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const auto [clean, corrupted] = induction_pair(model, 7);
    PatchRequest request;
    request.metric = PatchMetric::loss, request.kinds = {PatchKind::heads};
    Patching got;
    const int32_t pad = model.config.pad_id();
    backend->patch(Batch{{clean}, pad}, Batch{{corrupted}, pad}, {}, request, got);
    const PatchGrid& heads = got.grids.at(0);
    std::vector<int> order(heads.cells.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return heads.cells[a] > heads.cells[b]; });
    std::printf("loss: clean %.3f, corrupted %.3f; heads by fraction restored:", got.clean_metric,
                got.corrupted_metric);
    for (int i : order) std::printf(" L%d H%d %.3f", i / heads.cols, i % heads.cols, heads.cells[i]);
    std::printf("\n");
    const std::vector<int> top3(order.begin(), order.begin() + 3);
    for (int induction : {1 * heads.cols + 2, 1 * heads.cols + 3})
        EXPECT_NE(std::find(top3.begin(), top3.end(), induction), top3.end()) << "L1 H" << induction % heads.cols;
}
