// Test support for the engine's predictions: the checks that compare a
// forward's predictions, lens, maps and outputs with the double-precision
// references (reference_forward.h for GPT-2, family_reference.h for every
// family), and the two fixtures that load their test models.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "family_models.h"
#include "family_writer.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "headscope/model/model.h"
#include "model_writer.h"

namespace headscope::test {

using Texts = std::vector<std::vector<int32_t>>;

// Probabilities closer than this are a tie: float32 may order them either way.
constexpr double tie = 1e-6;

// The first of a comparison's mismatches and how many there were, so that a
// broken engine fails with one readable line per check rather than thousands.
struct Mismatches {
    int count = 0;
    std::string first;
    void add(const std::string& what) {
        if (count++ == 0) first = what;
    }
};

inline std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
inline std::vector<int32_t> slice(const std::vector<int32_t>& ids, int from, int to) {
    return {ids.begin() + from, ids.begin() + to};
}

// One reference row of logits as a distribution: its log-probabilities and its
// `count` most likely ids, by p descending.
struct ReferenceRow {
    std::vector<double> logp;  // (V)
    std::vector<int> order;    // (count)
};
ReferenceRow reference_row(const double* logits, int V, int count);

// The engine's K predictions at one position (`got`) against the reference's
// row: each p within 1e-5 of the reference's, ids by p descending, and the
// reference's id wherever its p stands apart from its neighbours' by more than a tie.
void compare_top(const Prediction* got, int K, int V, const ReferenceRow& want, const std::string& what, Mismatches& m);

// A text's mean loss over its next tokens and the p of ids[t].id at each
// position t, from the reference's logits of its rows (T, V): what the
// effects grid tracks.
std::pair<double, std::vector<double>> loss_and_p(const std::vector<double>& logits, int V,
                                                  const std::vector<int32_t>& text, const std::vector<Prediction>& ids);

// At every real position of each text, the engine's 5 most likely next
// tokens against the reference's logits (N, V) of those positions: each
// probability within `tolerance`, the same id wherever the reference's p
// leads the next rank's by more than that.
void expect_top_5(const AttentionResult& got, const std::vector<std::vector<int32_t>>& texts,
                  const std::vector<double>& logits, int V, double tolerance);

// How far llama.cpp's probabilities may lie from exact arithmetic: the
// larger of `absolute` and `relative` times the probability, at most `most`.
// llama.cpp moves the logits a little (rounding activations), which moves
// each probability in proportion to itself: a bound fit for a likely token
// is above every probability of a flat distribution, where no check could fail.
struct ProbabilityTolerance {
    double absolute, relative, most;
    double at(double p) const { return std::min(most, std::max(absolute, relative * p)); }
};

// llama.cpp's 5 most likely next tokens after each of `texts` (`theirs`,
// [[id, p], ...] a text, as tests/reference/llama_cpp.js answers) against
// the engine's forward of each text alone (its window on, as llama.cpp's
// always is): each of its tokens with our probability within the tolerance
// of its own; the same five tokens, but for one within the tolerance of the
// border between 5th and 6th (a token of ours it leaves out at most the
// tolerance above its 5th's probability); and the same order wherever its
// consecutive probabilities differ by more than the tolerance.
void expect_llama_cpps_next_tokens(Backend& backend, const Config& config, const Texts& texts,
                                   const nlohmann::json& theirs, const ProbabilityTolerance& tolerance);
// The same check of one text's: our next-token logits (V) and our top 5
// `ranked` against llama.cpp's five [[id, p], ...] `theirs`.
void expect_llama_cpps_top_5(const double* logits, int V, const Prediction* ranked, const nlohmann::json& theirs,
                             const ProbabilityTolerance& tolerance, const std::string& what);

// The reference's residual rows of `layer` at each text's real positions, (N, C).
std::vector<double> real_rows(const std::vector<double>& residual, int layer, const Texts& texts, int T, int C);

using Logits = std::function<std::vector<double>(const std::vector<double>&)>;  // rows (N, C) -> (N, V)

// Every prediction field of `got` against the reference's residual stream
// (L, B, T, C) read through `logits`: top-k, logprob_next, loss, last_logits
// and the lens of every returned layer, and the padded positions.
void expect_predictions_match(const AttentionResult& got, const Texts& texts, const AttentionOptions& opt,
                              const std::vector<double>& residual, int L, int C, int V, const Logits& logits,
                              const std::string& what);

// The options in words, for a failure's message.
std::string describe(const AttentionOptions& o);

AttentionOptions with(AttentionOptions o, auto&& change) {
    change(o);
    return o;
}

// Heads knocked out (zero, or each text's mean over its real positions), one
// and several, in either split, for a model of `heads` heads a layer.
std::vector<AttentionOptions> knock_out_options(int heads);

// The maps within `maps` (1e-5) and the outputs within `outputs` (2e-5) of the largest.
template <typename Want>
void expect_maps_and_outputs_match(const AttentionResult& got, const Want& want, const std::string& what,
                                   double maps = 1e-5, double outputs_of_largest = 2e-5) {
    ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
    ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
    double weights = 0, outputs = 0, largest = 0;
    for (size_t n = 0; n < want.weights.size(); ++n)
        weights = std::max(weights, std::abs(got.weights[n] - want.weights[n]));
    for (size_t n = 0; n < want.outputs.size(); ++n) {
        outputs = std::max(outputs, std::abs(got.outputs[n] - want.outputs[n]));
        largest = std::max(largest, std::abs(want.outputs[n]));
    }
    EXPECT_LT(weights, maps) << what;
    EXPECT_LT(outputs, outputs_of_largest * largest) << what;
}

// GPT-2's test model, shared by the suite's tests.
class Gpt2 : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        write_test_model(dir_->path, {.n_layer = 3, .n_head = 4, .n_embd = 32, .n_positions = 24});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }
    Gpt2() { backend_->load_weights(*model_); }

    AttentionResult run(const Texts& texts, const AttentionOptions& opt) {
        AttentionResult result;
        backend_->forward(Batch{texts, model_->config.eos_token_id}, opt, result);
        return result;
    }

    static TempDir* dir_;
    static Model* model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    // Two texts of different lengths: the second is padded.
    const Texts texts_ = {{464, 3797, 3332, 319, 262, 2603, 780, 340, 373, 2705}, {40, 716, 257, 1332, 286, 262, 5951}};
};

using FamilyParam = std::tuple<FamilyVariant, FileDType>;

class FamilyPredictions : public ::testing::TestWithParam<FamilyParam> {
protected:
    FamilyPredictions() { backend_->load_weights(model_); }

    // The parameter's checkpoint as written and loaded, which its tests share (loaded_family).
    static const LoadedFamily& parameter_family(const FamilyParam& param) {
        FamilySpec spec = std::get<0>(param).spec;
        spec.dtype = std::get<1>(param);
        return loaded_family(std::get<0>(param).name + "_" + dtype_name(std::get<1>(param)), spec);
    }

    const LoadedFamily& family_ = parameter_family(GetParam());
    const FamilyCheckpoint& checkpoint_ = family_.checkpoint;
    const Model& model_ = family_.model;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    Texts texts_ = family_texts(std::get<0>(GetParam()).spec);  // 11 and 7 tokens
};
// Every family in float32, and the tied Llama's output embedding as BF16.
std::vector<FamilyParam> family_params();
// A test's name for a family parameter.
std::string family_param_name(const ::testing::TestParamInfo<FamilyParam>& info);

}  // namespace headscope::test
