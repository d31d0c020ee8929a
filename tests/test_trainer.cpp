// The trainer's hand-written backward against central finite differences in
// double precision on a tiny model, and a short float training run whose
// loss must fall and repeat exactly for the same seed, and a saved model that
// the engine loads and attends with exactly as the trainer did; and
// headscope-train's bad options answered by one line and exit status 2.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bpe_trainer.h"
#include "gpt2_trainer.h"
#include "headscope/compute/backend.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
using namespace headscope::train;

namespace {

Config tiny_config() {
    Config s;
    s.n_layer = 2;
    s.n_head = 2;
    s.n_embd = 8;
    s.n_positions = 6;
    s.vocab_size = 13;
    return s;
}

TEST(Trainer, BackwardMatchesFiniteDifferences) {
    Gpt2Trainer<double> model(tiny_config(), 3);
    // Larger weights than the initialisation, so every path carries signal.
    std::mt19937_64 rng(5);
    std::normal_distribution<double> normal(0.0, 0.5);
    for (double& p : model.params()) p += normal(rng);

    const int B = 2, T = 5;
    std::vector<int32_t> inputs(B * T), targets(B * T);
    for (auto& t : inputs) t = static_cast<int32_t>(rng() % 13);
    for (auto& t : targets) t = static_cast<int32_t>(rng() % 13);
    model.forward(inputs.data(), targets.data(), B, T);
    model.backward();
    const Buffer<double> analytic = model.grads();

    const double h = 1e-5;
    double worst = 0;
    std::string worst_name;
    for (const ParameterTensor& t : model.layout())
        for (size_t i = t.offset; i < t.offset + t.size; ++i) {
            double& p = model.params()[i];
            const double saved = p;
            p = saved + h;
            const double up = model.forward(inputs.data(), targets.data(), B, T);
            p = saved - h;
            const double down = model.forward(inputs.data(), targets.data(), B, T);
            p = saved;
            const double numeric = (up - down) / (2 * h);
            // Relative, with a floor: some gradients are zero in theory (K's
            // bias shifts a whole score row, which softmax ignores).
            const double error =
                std::abs(numeric - analytic[i]) / std::max(1e-3, std::abs(numeric) + std::abs(analytic[i]));
            if (error > worst) {
                worst = error;
                worst_name = t.spec.name + "[" + std::to_string(i - t.offset) + "]";
            }
        }
    EXPECT_LT(worst, 1e-6) << "worst relative error at " << worst_name;
}

// Two identical seeded runs of 40 steps on a repeating sequence: the loss falls
// well below its start, and both runs agree exactly.
TEST(Trainer, SmokeTrainingLossFallsAndIsDeterministic) {
    auto train = [] {
        Config s = tiny_config();
        s.n_embd = 16;
        s.n_positions = 16;
        Gpt2Trainer<float> model(s, 11);
        std::vector<int32_t> stream;
        for (int i = 0; i < 64; ++i) stream.push_back(static_cast<int32_t>((i * 5) % 13));
        const int B = 4, T = 16;
        std::vector<int32_t> inputs(B * T), targets(B * T);
        std::vector<float> losses;
        AdamW adamw;
        adamw.learning_rate = 1e-2f;
        for (int step = 1; step <= 40; ++step) {
            for (int b = 0; b < B; ++b)
                for (int t = 0; t < T; ++t) {
                    inputs[b * T + t] = stream[(step + b * 3 + t) % 60];
                    targets[b * T + t] = stream[(step + b * 3 + t + 1) % 60];
                }
            losses.push_back(model.forward(inputs.data(), targets.data(), B, T));
            model.backward();
            model.step(adamw, step);
        }
        return losses;
    };
    const std::vector<float> first = train(), second = train();
    EXPECT_EQ(first, second);
    EXPECT_NEAR(first.front(), std::log(13.f), 0.1f);  // a fresh model guesses uniformly
    EXPECT_LT(first.back(), 0.5f * first.front());
}

TEST(Trainer, SavedModelLoadsAndTheEngineAttendsAsTheTrainerDid) {
    test::TempDir dir;
    PieceCounts pieces;
    count_pieces("ab ab ab", pieces);
    write_gpt2_tokenizer(train_bpe(pieces, 257), dir.path);  // the 256 bytes, "ab" and <|endoftext|>
    Config s;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_embd = 16;
    s.n_positions = 16;
    s.vocab_size = 258;
    Gpt2Trainer<float> model(s, 5);
    std::vector<int32_t> inputs(12), targets(12);
    for (int t = 0; t < 12; ++t) {
        inputs[t] = (t * 37) % 256;
        targets[t] = (t * 37 + 37) % 256;
    }
    AdamW adamw;
    adamw.learning_rate = 1e-2f;
    for (int step = 1; step <= 5; ++step) {  // LayerNorm gains and biases move off their start
        model.forward(inputs.data(), targets.data(), 1, 12);
        model.backward();
        model.step(adamw, step);
    }
    model.forward(inputs.data(), targets.data(), 1, 12);
    save_gpt2(model, dir.path, {{"seed", 5}});

    const Model loaded = load_model(dir.path.string());
    EXPECT_EQ(loaded.config.eos_token_id, 257);
    EXPECT_EQ(loaded.config.training["seed"], 5);
    std::unique_ptr<Backend> engine = make_cpu_backend();
    engine->load_weights(loaded);
    AttentionResult result;
    engine->forward(Batch{{inputs}, 257}, AttentionOptions{}, result);
    ASSERT_EQ(result.weights.size(), model.attention().size());
    for (size_t n = 0; n < result.weights.size(); ++n) ASSERT_NEAR(result.weights[n], model.attention()[n], 1e-6) << n;
}

// Rejected before any corpus is read: the repeat share in 0..1, the short
// context within 2..the context, and no negative step count.
TEST(Trainer, BadSequenceOptionsAreOneLineErrorsWithStatusTwo) {
    test::TempDir dir;
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--repeat-fraction", "1.5"}, "--repeat-fraction"},
        {{"--repeat-fraction", "-0.1"}, "--repeat-fraction"},
        {{"--short-context-steps", "-5"}, "--short-context-steps"},
        {{"--short-context", "1"}, "--short-context 1 is not in 2..256"},
        {{"--short-context", "300", "--context", "128"}, "--short-context 300 is not in 2..128"},
    };
    for (const auto& [options, names] : cases) {
        // A missing corpus too, so that a share let through fails fast on another error.
        std::vector<std::string> command = {HEADSCOPE_TRAIN,
                                            "--corpus",
                                            (dir.path / "none").string(),
                                            "--tokenizer",
                                            (dir.path / "none").string(),
                                            "--out",
                                            (dir.path / "out").string()};
        command.insert(command.end(), options.begin(), options.end());
        test::expect_one_line_error(test::run_program(command, dir.path), "headscope-train", names);
        EXPECT_FALSE(std::filesystem::exists(dir.path / "out"));
    }
}

}  // namespace
