// The CPU engine's predictions (top-k next tokens, the log-probability of
// each actual next token, the loss, the last logits) and its logit lens
// against the double-precision references carried through the final norm and
// the output embedding (reference_forward.h for GPT-2, family_reference.h for
// every family).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "family_reference.h"
#include "headscope/io/files.h"
#include "prediction_checks.h"
#include "reference_forward.h"

using namespace headscope;
using namespace headscope::test;

namespace {

TEST_F(Gpt2, PredictionsAndLensMatchTheReference) {
    const Config& config = model_->config;
    const std::vector<AttentionOptions> option_sets = {
        with(AttentionOptions{}, [](auto& o) { o.top_k = 5, o.lens_k = 3; }),
        // The lens of a layer subset, over a forward the options change.
        with(AttentionOptions{},
             [](auto& o) {
                 o.causal = false, o.padding_mask = false, o.n_head = 2, o.scale = Scale::model;
                 o.split = Split::naive_view, o.layers = {0, 2}, o.top_k = 4, o.lens_k = 2;
             }),
        with(AttentionOptions{},
             [](auto& o) { o.padding_mask = false, o.n_head = 8, o.scale = Scale::none, o.layers = {1}, o.top_k = 1; }),
        with(AttentionOptions{}, [](auto& o) { o.layers = {1}, o.top_k = 2, o.lens_k = 5; }),
    };
    const Logits logits = [&](const std::vector<double>& rows) { return reference_logits(*model_, rows); };
    for (const AttentionOptions& opt : option_sets) {
        const AttentionResult got = run(texts_, opt);
        const Reference want = reference_attention(*model_, texts_, opt);
        expect_predictions_match(got, texts_, opt, want.residual, config.n_layer, config.n_embd, config.vocab_size,
                                 logits, describe(opt));
    }
}

// A one-token text has no next token: its logprob_next is NaN and so is its loss.
TEST_F(Gpt2, OneTokenTextHasNoLoss) {
    AttentionOptions opt;
    opt.top_k = 3;
    const Texts texts = {{464}, {40, 716}};
    const AttentionResult got = run(texts, opt);
    const Reference want = reference_attention(*model_, texts, opt);
    ASSERT_NO_FATAL_FAILURE(expect_predictions_match(
        got, texts, opt, want.residual, model_->config.n_layer, model_->config.n_embd, model_->config.vocab_size,
        [&](const std::vector<double>& rows) { return reference_logits(*model_, rows); }, "one-token text"));
    EXPECT_TRUE(std::isnan(got.loss(0)));
    EXPECT_FALSE(std::isnan(got.loss(1)));
}

TEST_F(Gpt2, WithoutTopKOrLensThereAreNoPredictions) {
    const AttentionResult got = run(texts_, {});
    EXPECT_EQ(got.top_k, 0);
    EXPECT_EQ(got.lens_k, 0);
    EXPECT_TRUE(got.predictions.empty());
    EXPECT_TRUE(got.lens.empty());
    EXPECT_EQ(got.reused, std::vector<int>(texts_.size(), 0));
}

// The built-in model predicts its own validation text: through the reference
// (which checks the reference's final norm and output embedding against the
// trainer's loss, independently of the engine) a loss near the training's
// recorded validation loss and far below its unigram loss; and the engine's
// predictions equal the reference's on real, peaked distributions.
TEST(BuiltinPredictions, ReferenceLossIsTheTrainingsAndTheEngineMatchesIt) {
    const Model model = load_model(builtin_model);
    const std::string text = read_file(model.path / "validation.txt");
    const std::vector<int32_t> ids = model.tokenizer.encode(text.substr(0, 6000), false);
    ASSERT_GE(ids.size(), 400u);
    const Texts texts = {slice(ids, 0, 250), slice(ids, 250, 400)};
    AttentionOptions opt;
    opt.top_k = 5, opt.lens_k = 3;
    const Reference want = reference_attention(model, texts, opt);
    const Config& config = model.config;
    const Logits logits = [&](const std::vector<double>& rows) { return reference_logits(model, rows); };

    const std::vector<double> z = logits(real_rows(want.residual, config.n_layer - 1, texts, 250, config.n_embd));
    double loss = 0;
    int count = 0;
    size_t row = 0;
    for (const auto& t : texts)
        for (size_t i = 0; i < t.size(); ++i, ++row)
            if (i + 1 < t.size()) {
                loss -= reference_row(&z[row * config.vocab_size], config.vocab_size, 1).logp[t[i + 1]];
                ++count;
            }
    loss /= count;
    const double recorded = config.training["final_val_loss"].get<double>();
    const double unigram = config.training["unigram_val_loss"].get<double>();
    EXPECT_NEAR(loss, recorded, 0.75) << "the reference's loss on the validation text";
    EXPECT_LT(loss, unigram - 1);

    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionResult got;
    backend->forward(Batch{texts, config.pad_id()}, opt, got);
    expect_predictions_match(got, texts, opt, want.residual, config.n_layer, config.n_embd, config.vocab_size, logits,
                             "the built-in model");
}

// GPT-2 with tie_word_embeddings false (as a GGUF file with output.weight
// has it): its lm_head is a Linear (V, C) though its other matrices are
// Conv1D (in, out), and it predicts through that, not through wte.
TEST(UntiedGpt2Predictions, ReadTheirOwnOutputEmbedding) {
    FamilySpec spec = family_spec(Family::gpt2);
    spec.tied_embeddings = false;
    const FamilyCheckpoint checkpoint = make_family_checkpoint(spec);
    TempDir dir;
    write_family_checkpoint(dir.path, checkpoint);
    const Model model = load_model(dir.path.string());
    EXPECT_FALSE(model.config.tied_embeddings);
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const Texts texts = family_texts(spec);
    const AttentionOptions opt = with(AttentionOptions{}, [](auto& o) { o.top_k = 5, o.lens_k = 3; });
    AttentionResult got;
    backend->forward(Batch{texts, model.config.pad_id()}, opt, got);
    const FamilyReference want = family_reference(checkpoint, texts, opt);
    const Logits logits = [&](const std::vector<double>& rows) { return family_logits(checkpoint, rows); };
    expect_predictions_match(got, texts, opt, want.residual, spec.n_layer, spec.n_embd, spec.vocab_size, logits,
                             "untied GPT-2");
}

TEST_P(FamilyPredictions, MatchTheReference) {
    const FamilySpec& spec = checkpoint_.spec;
    const std::vector<int> counts = head_counts(model_.config);
    const std::vector<AttentionOptions> option_sets = {
        with(AttentionOptions{}, [&](auto& o) { o.sliding_window = spec.sliding_window, o.top_k = 5, o.lens_k = 3; }),
        // A layer subset's lens, over a forward the options change.
        with(AttentionOptions{},
             [&](auto& o) {
                 o.padding_mask = false, o.n_head = counts.front(), o.scale = Scale::model;
                 o.split = Split::naive_view, o.layers = {0, 2}, o.top_k = 2, o.lens_k = 4;
             }),
        with(AttentionOptions{},
             [&](auto& o) { o.causal = false, o.n_head = counts.back(), o.layers = {1}, o.lens_k = 2; }),
    };
    const Logits logits = [&](const std::vector<double>& rows) { return family_logits(checkpoint_, rows); };
    for (const AttentionOptions& opt : option_sets) {
        AttentionResult got;
        backend_->forward(Batch{texts_, model_.config.pad_id()}, opt, got);
        const FamilyReference want = family_reference(checkpoint_, texts_, opt);
        expect_predictions_match(got, texts_, opt, want.residual, spec.n_layer, spec.n_embd, spec.vocab_size, logits,
                                 describe(opt));
    }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyPredictions, ::testing::ValuesIn(family_params()), family_param_name);

}  // namespace
