// The effects grid's estimate and its hybrid (head_effects.h): each head's
// estimated change in loss against the double-precision reference's
// derivative along its knock-out (central differences, zero and mean); the
// hybrid's exact cells against the exact grid's, the cells it chose against
// the largest estimates (dense, experts, gpt-oss's sinks), and the options
// and grids it computes exactly instead, each saying why in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "family_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/backward.h"
#include "patch_reference.h"

using namespace headscope;
using namespace headscope::test;

namespace {

constexpr double step = 1e-4;  // of the central differences

struct EstimateModel {
    std::string name;
    FamilySpec spec;
};

std::ostream& operator<<(std::ostream& os, const EstimateModel& m) { return os << m.name; }

// `family` with 4 layers of 8 heads: 32 cells, more than the hybrid runs exactly.
FamilySpec wide(Family family) {
    FamilySpec spec = family_spec(family);
    spec.n_layer = 4, spec.n_head = 8, spec.n_kv_head = 4, spec.head_dim = 4;
    return spec;
}

class EffectsEstimate : public ::testing::TestWithParam<EstimateModel> {
protected:
    const LoadedFamily& family_ = loaded_family("effects_" + GetParam().name, GetParam().spec);
    const Model& model_ = family_.model;
    const std::vector<int32_t> text_ = family_texts(GetParam().spec)[0];
    std::unique_ptr<Backend> backend_ = [&] {
        std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(model_);
        return backend;
    }();

    HeadEffects grid(EffectsMethod method, const AttentionOptions& options = {}, EffectsOf of = EffectsOf::heads,
                     int* updates = nullptr) const {
        HeadEffects effects;
        const EffectsUpdate count = [&](const HeadEffects&) { ++*updates; };
        backend_->head_effects(Batch{{text_}, model_.config.pad_id()}, options, effects, of, {}, method,
                               updates ? count : EffectsUpdate());
        return effects;
    }
};

// Each head's estimate is the reference's derivative of the loss along its
// knock-out: its output moved by `by` times (knocked-out - actual), zero or
// the head's mean over the text.
TEST_P(EffectsEstimate, IsTheReferencesDerivativeAlongEachKnockOut) {
    const FamilyCheckpoint& checkpoint = family_.checkpoint;
    const int L = model_.config.n_layer, NH = model_.config.n_head;
    PatchRequest loss;
    loss.metric = PatchMetric::loss, loss.position = 0, loss.answer = 0, loss.wrong = 0;
    const int m = static_cast<int>(PatchMetric::loss);
    const Activations actual = record(checkpoint, text_);
    for (Ablation ablation : {Ablation::zero, Ablation::mean}) {
        AttentionOptions options;
        options.ablation = ablation;
        const std::vector<float> got = estimated_loss_changes(model_, text_, options);
        ASSERT_EQ(got.size(), size_t(L) * NH);
        double largest = 0;
        for (float g : got) largest = std::max(largest, std::abs(double(g)));
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < NH; ++h) {
                const Rows& own = actual.heads[l][h];
                std::vector<double> mean(own[0].size(), 0.0);
                if (ablation == Ablation::mean)
                    for (const auto& row : own)
                        for (size_t d = 0; d < row.size(); ++d) mean[d] += row[d] / double(own.size());
                const auto along = [&](double by) {
                    FamilyHooks hooks;
                    hooks.head_output = [&, by](int hl, int, int head, Rows& y) {
                        if (hl != l || head != h) return;
                        for (size_t t = 0; t < y.size(); ++t)
                            for (size_t d = 0; d < y[t].size(); ++d) y[t][d] += by * (mean[d] - own[t][d]);
                    };
                    return hooks;
                };
                const double up = reference_metrics(checkpoint, text_, text_, loss, along(step))[m];
                const double down = reference_metrics(checkpoint, text_, text_, loss, along(-step))[m];
                const double want = (up - down) / (2 * step);
                EXPECT_NEAR(got[size_t(l) * NH + h], want, 1e-3 * std::max(std::abs(want), 1e-2 * largest))
                    << to_string(ablation) << " L" << l << " H" << h;
            }
    }
}

// The hybrid: the estimate in every cell, then exactly the exact grid's
// values (and top-token p changes) in the 16 cells of largest |estimate| and
// 8 others, each stage handed over; the rest keep the estimate.
TEST_P(EffectsEstimate, HybridRefinesTheLargestEstimatesWithTheExactGrids) {
    const HeadEffects exact = grid(EffectsMethod::exact);
    int updates = 0;
    const HeadEffects hybrid = grid(EffectsMethod::hybrid, {}, EffectsOf::heads, &updates);
    EXPECT_EQ(hybrid.method, EffectsMethod::hybrid);
    EXPECT_EQ(hybrid.fallback, "");
    EXPECT_EQ(exact.method, EffectsMethod::exact);
    EXPECT_TRUE(std::all_of(exact.exact.begin(), exact.exact.end(), [](uint8_t e) { return e == 1; }));
    EXPECT_EQ(hybrid.estimate, estimated_loss_changes(model_, text_, {}));
    EXPECT_EQ(hybrid.loss, exact.loss);
    const int cells = hybrid.L * hybrid.N;
    ASSERT_EQ(cells, 32);
    EXPECT_EQ(updates, 1 + hybrid_largest + hybrid_others);

    // The chosen: the 16 largest |estimate| (counted here by rank), and 8 of the other 16.
    std::vector<int> by_size(cells);
    for (int c = 0; c < cells; ++c) by_size[c] = c;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](int a, int b) { return std::abs(hybrid.estimate[a]) > std::abs(hybrid.estimate[b]); });
    const std::set<int> largest(by_size.begin(), by_size.begin() + hybrid_largest);
    int chosen_largest = 0, chosen_others = 0;
    for (int c = 0; c < cells; ++c) {
        const int l = c / hybrid.N, h = c % hybrid.N;
        const std::string at = "L" + std::to_string(l) + " H" + std::to_string(h);
        if (!hybrid.exact_at(l, h)) {
            EXPECT_EQ(largest.count(c), 0u) << at << " is among the largest but was not run";
            EXPECT_EQ(hybrid.loss_change_at(l, h), hybrid.estimate[c]) << at;
            for (int t = 0; t < hybrid.T; ++t) EXPECT_TRUE(std::isnan(hybrid.top_p_change_at(l, h, t))) << at;
            continue;
        }
        (largest.count(c) ? chosen_largest : chosen_others) += 1;
        EXPECT_EQ(hybrid.loss_change_at(l, h), exact.loss_change_at(l, h)) << at;
        for (int t = 0; t < hybrid.T; ++t)
            EXPECT_EQ(hybrid.top_p_change_at(l, h, t), exact.top_p_change_at(l, h, t)) << at << " position " << t;
    }
    EXPECT_EQ(chosen_largest, hybrid_largest);
    EXPECT_EQ(chosen_others, hybrid_others);
    // Drawn by a fixed seed: the same cells every time.
    EXPECT_EQ(grid(EffectsMethod::hybrid).exact, hybrid.exact);

    const HeadEffects estimate = grid(EffectsMethod::attribution);
    EXPECT_EQ(estimate.method, EffectsMethod::attribution);
    EXPECT_EQ(estimate.loss_change, hybrid.estimate);
    EXPECT_TRUE(std::none_of(estimate.exact.begin(), estimate.exact.end(), [](uint8_t e) { return e == 1; }));
}

// Heads already knocked out, which the backward does not follow, make every cell exact, saying why.
TEST_P(EffectsEstimate, KnockedOutHeadsFallBackToTheExactGrid) {
    AttentionOptions options;
    options.ablate = {{1, 2}};
    const HeadEffects exact = grid(EffectsMethod::exact, options);
    for (EffectsMethod method : {EffectsMethod::attribution, EffectsMethod::hybrid}) {
        const HeadEffects got = grid(method, options);
        EXPECT_EQ(got.method, EffectsMethod::exact);
        EXPECT_EQ(got.fallback,
                  "attribution patching does not support options other than the model's own mask, heads and split, "
                  "or knocked-out heads yet: every cell computed exactly");
        EXPECT_TRUE(got.estimate.empty());
        ASSERT_EQ(got.loss_change.size(), exact.loss_change.size());
        for (size_t c = 0; c < got.loss_change.size(); ++c)
            EXPECT_TRUE(got.loss_change[c] == exact.loss_change[c] ||
                        (std::isnan(got.loss_change[c]) && std::isnan(exact.loss_change[c])))
                << "cell " << c;
    }
}

INSTANTIATE_TEST_SUITE_P(Families, EffectsEstimate,
                         ::testing::Values(EstimateModel{"gpt2", wide(Family::gpt2)},
                                           EstimateModel{"llama", wide(Family::llama)},  // groups of 2
                                           // layers of experts, their routes held; gpt-oss's sinks
                                           EstimateModel{"mixtral", wide(Family::mixtral)},
                                           EstimateModel{"gpt_oss", wide(Family::gpt_oss)}),
                         [](const ::testing::TestParamInfo<EstimateModel>& info) { return info.param.name; });

// The grid of experts (the estimate is of heads): exact, saying why.
TEST(EffectsEstimateRefusals, TheGridOfExpertsFallsBackToTheExactGrid) {
    const LoadedFamily& family = loaded_family("effects_grid_of_experts", family_spec(Family::mixtral));
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(family.model);
    const Batch batch{{family_texts(family.checkpoint.spec)[0]}, family.model.config.pad_id()};
    HeadEffects exact, hybrid;
    backend->head_effects(batch, {}, exact, EffectsOf::experts);
    backend->head_effects(batch, {}, hybrid, EffectsOf::experts, {}, EffectsMethod::hybrid);
    EXPECT_EQ(hybrid.method, EffectsMethod::exact);
    EXPECT_EQ(hybrid.fallback, "the estimate is of heads, not experts: every cell computed exactly");
    ASSERT_EQ(hybrid.loss_change.size(), exact.loss_change.size());
    for (size_t c = 0; c < exact.loss_change.size(); ++c)
        EXPECT_TRUE(hybrid.loss_change[c] == exact.loss_change[c] ||
                    (std::isnan(hybrid.loss_change[c]) && std::isnan(exact.loss_change[c])))
            << "cell " << c;
}

// hybrid_cells on estimates whose order is known: cell c's magnitude is
// rank[c] (a permutation), its sign alternating, two cells NaN.
TEST(HybridCells, AreTheLargestThenOthersDrawnOnce) {
    const int n = 40;
    std::vector<float> estimate(n);
    for (int c = 0; c < n; ++c) estimate[c] = float((c * 17) % n + 1) * (c % 2 ? -1.f : 1.f);
    estimate[1] = estimate[3] = std::nanf("");  // magnitudes 18 and 12
    const std::vector<int> cells = hybrid_cells(estimate);
    ASSERT_EQ(cells.size(), size_t(hybrid_largest + hybrid_others));
    // (c * 17) % 40 + 1 runs over 1..40: the largest 16 are magnitudes 25..40 (none of them NaN here).
    for (int i = 0; i < hybrid_largest; ++i) EXPECT_EQ(std::abs(estimate[cells[i]]), float(n - i)) << "rank " << i;
    const std::set<int> distinct(cells.begin(), cells.end());
    EXPECT_EQ(distinct.size(), cells.size());
    for (int i = hybrid_largest; i < int(cells.size()); ++i) {
        ASSERT_GE(cells[i], 0);
        ASSERT_LT(cells[i], n);
        EXPECT_FALSE(std::isnan(estimate[cells[i]])) << cells[i];
        EXPECT_LT(std::abs(estimate[cells[i]]), float(n - hybrid_largest + 1)) << cells[i];
    }
    EXPECT_EQ(hybrid_cells(estimate), cells);
    // Fewer cells than the hybrid runs: every one that is not NaN.
    const std::vector<float> few = {0.5f, std::nanf(""), -2.f, 1.f};
    EXPECT_EQ(hybrid_cells(few), (std::vector<int>{2, 3, 0}));
}

}  // namespace
