// Generation: the sampling function against the exact distribution it should
// draw from (chi-square), determinism per seed, greedy generation against a
// full recompute at every step (GPT-2 and a family checkpoint; a long text's,
// keeping no map, through a cache given), and the three stop reasons.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "family_models.h"
#include "headscope/base/error.h"
#include "headscope/compute/generate.h"
#include "model_writer.h"

using namespace headscope;

namespace {

// A small hand-made logits row, with a tie (ids 2 and 5).
const std::vector<float> logits = {1.0f, -0.5f, 2.0f, 0.3f, -2.0f, 2.0f, 0.9f, -1.0f};

// What sample_token should draw from, computed the plain way: softmax of
// logits / temperature, the top_k most likely (lower id first on ties), then
// the shortest most-likely-first head reaching top_p, renormalised.
std::vector<double> expected_distribution(const Sampling& s) {
    const int V = static_cast<int>(logits.size());
    std::vector<double> p(V);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += p[i] = std::exp(logits[i] / s.temperature);
    for (double& x : p) x /= sum;
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    const int k = s.top_k > 0 ? std::min(s.top_k, V) : V;
    double kept_sum = 0;
    for (int r = 0; r < k; ++r) kept_sum += p[order[r]];
    std::vector<double> q(V, 0.0);
    double cumulative = 0, q_sum = 0;
    for (int r = 0; r < k && cumulative < s.top_p * kept_sum; ++r) {
        cumulative += p[order[r]];
        q_sum += q[order[r]] = p[order[r]];
    }
    for (double& x : q) x /= q_sum;
    return q;
}

TEST(Sampling, GreedyTakesTheLowestArgmaxAndDrawsNothing) {
    std::mt19937_64 rng(7), untouched(7);
    EXPECT_EQ(sample_token(logits.data(), static_cast<int>(logits.size()), Sampling{}, rng), 2);
    EXPECT_EQ(rng(), untouched());
}

TEST(Sampling, IsDeterministicPerSeed) {
    const Sampling s{.temperature = 1.5f, .top_k = 6, .top_p = 0.95f};
    auto draws = [&](uint64_t seed) {
        std::mt19937_64 rng(seed);
        std::vector<int32_t> ids;
        for (int i = 0; i < 64; ++i) ids.push_back(sample_token(logits.data(), 8, s, rng));
        return ids;
    };
    EXPECT_EQ(draws(3), draws(3));
    EXPECT_NE(draws(3), draws(4));
    std::mt19937_64 rng(0);
    EXPECT_EQ(uniform01(rng), 0x1.0p-53 * static_cast<double>(std::mt19937_64(0)() >> 11));
}

TEST(Sampling, FollowsTheRenormalisedDistribution) {
    // Critical chi-square values at p = 0.001 for 1..7 degrees of freedom.
    const double critical[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
    const std::vector<Sampling> cases = {
        {.temperature = 1},
        {.temperature = 0.5f},
        {.temperature = 2, .top_k = 3},
        {.temperature = 1, .top_p = 0.7f},
        {.temperature = 0.8f, .top_k = 5, .top_p = 0.9f},
        {.temperature = 3, .top_k = 1},
    };
    const int draws = 20000;
    for (const Sampling& s : cases) {
        const std::vector<double> q = expected_distribution(s);
        std::vector<int> counts(q.size(), 0);
        std::mt19937_64 rng(42);
        for (int i = 0; i < draws; ++i) ++counts[sample_token(logits.data(), static_cast<int>(q.size()), s, rng)];
        double chi2 = 0;
        int kept = 0;
        for (size_t i = 0; i < q.size(); ++i) {
            if (q[i] == 0) {
                EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the kept set";
                continue;
            }
            ++kept;
            const double expected = q[i] * draws;
            chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
        }
        const std::string what = "temperature " + std::to_string(s.temperature) + ", top-k " + std::to_string(s.top_k) +
                                 ", top-p " + std::to_string(s.top_p);
        if (kept > 1)
            EXPECT_LT(chi2, critical[kept - 1]) << what;
        else
            EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), draws) << what;
    }
}

TEST(Sampling, RefusesBadValuesAndTheNonCausalModel) {
    auto message = [](const Sampling& s, int tokens, const AttentionOptions& options = {}) {
        try {
            validate_generation(s, tokens, options);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(message({}, 1), "");
    EXPECT_NE(message({}, 0).find("tokens to generate"), std::string::npos);
    EXPECT_NE(message({.temperature = -1}, 4).find("temperature"), std::string::npos);
    EXPECT_NE(message({.top_k = -1}, 4).find("top-k"), std::string::npos);
    EXPECT_NE(message({.top_p = 0}, 4).find("top-p"), std::string::npos);
    EXPECT_NE(message({.top_p = 1.5f}, 4).find("top-p"), std::string::npos);
    EXPECT_NE(message({.top_p = NAN}, 4).find("top-p"), std::string::npos);
    AttentionOptions bidirectional, naive;
    bidirectional.causal = false;
    naive.split = Split::naive_view;
    EXPECT_NE(message({}, 4, bidirectional).find("generation needs the causal model"), std::string::npos);
    EXPECT_NE(message({}, 4, naive).find("generation needs the causal model"), std::string::npos);
}

// Greedy generation on `model` against a fresh forward over the whole
// sequence at every step: the same tokens (each the argmax of the recompute's
// last logits), probabilities, top predictions and attention rows (those of
// a recompute keeping every map, where `options` keep none). The generator's
// forwards through `cache` where given.
void expect_greedy_matches_recompute(const Model& model, const std::vector<int32_t>& prompt, int tokens,
                                     const AttentionOptions& options, PrefixCache* cache = nullptr,
                                     Backend* given = nullptr) {
    std::unique_ptr<Backend> own = given ? nullptr : make_cpu_backend();
    Backend* backend = given ? given : own.get();
    if (!given) backend->load_weights(model);
    Generator generator(*backend, model, prompt, options, Sampling{}, tokens, {}, cache);
    while (generator.generation().stop == Stop::running) generator.step();
    const Generation& g = generator.generation();
    ASSERT_EQ(g.stop, Stop::tokens);
    ASSERT_EQ(static_cast<int>(g.steps.size()), tokens);
    ASSERT_EQ(g.token_ids.size(), prompt.size() + tokens);
    EXPECT_EQ(g.prompt_ids, prompt);
    EXPECT_EQ(generator.result().reused.at(0), static_cast<int>(g.token_ids.size()) - 1) << "not one token's step";

    const std::unique_ptr<Backend> fresh = make_cpu_backend();
    fresh->load_weights(model);
    AttentionOptions full = options;
    full.top_k = generation_top;
    full.maps = Maps::full, full.summaries = false;
    AttentionResult before, after;  // the recomputes without and with the step's token
    for (int s = 0; s < tokens; ++s) {
        const GenerationStep& step = g.steps[s];
        const std::vector<int32_t> context(g.token_ids.begin(), g.token_ids.begin() + prompt.size() + s);
        fresh->forward(Batch{{context}, model.config.pad_id()}, full, before);
        const float* row = before.last_logits.data();
        const int32_t argmax = static_cast<int32_t>(std::max_element(row, row + before.V) - row);
        ASSERT_EQ(step.id, argmax) << "step " << s;
        EXPECT_EQ(g.token_ids[prompt.size() + s], step.id);
        const Prediction* top = before.predictions_at(0, before.T - 1);
        ASSERT_EQ(step.top.size(), static_cast<size_t>(before.top_k));
        for (int k = 0; k < before.top_k; ++k) {
            EXPECT_EQ(step.top[k].id, top[k].id) << "step " << s << " rank " << k;
            EXPECT_NEAR(step.top[k].p, top[k].p, 1e-5) << "step " << s << " rank " << k;
        }
        EXPECT_NEAR(step.p, top[0].p, 1e-5);
        EXPECT_EQ(step.token, token_text(model.tokenizer, step.id));

        std::vector<int32_t> with_token = context;
        with_token.push_back(step.id);
        fresh->forward(Batch{{with_token}, model.config.pad_id()}, full, after);
        ASSERT_EQ(step.keys, after.T);
        ASSERT_EQ(step.attention.size(), after.layers.size() * after.NH * after.T);
        for (size_t slot = 0; slot < after.layers.size(); ++slot)
            for (int h = 0; h < after.NH; ++h) {
                const float* expected = after.row(static_cast<int>(slot), 0, h, after.T - 1);
                const float* got = step.attention.data() + (slot * after.NH + h) * step.keys;
                for (int j = 0; j < step.keys; ++j)
                    ASSERT_NEAR(got[j], expected[j], 1e-5) << "step " << s << " layer " << slot << " head " << h;
            }
    }
}

class Gpt2Generation : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path, {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 32});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }

    // Runs to the end and returns the generation.
    static Generation run(const std::vector<int32_t>& prompt, int tokens, const Sampling& sampling = {}) {
        const std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(*model_);
        Generator generator(*backend, *model_, prompt, AttentionOptions{}, sampling, tokens);
        while (generator.generation().stop == Stop::running) generator.step();
        return generator.generation();
    }

    static test::TempDir* dir_;
    static Model* model_;
};
test::TempDir* Gpt2Generation::dir_ = nullptr;
Model* Gpt2Generation::model_ = nullptr;

TEST_F(Gpt2Generation, GreedyEqualsTheArgmaxOfAFullRecompute) {
    expect_greedy_matches_recompute(*model_, model_->tokenizer.encode("The cat sat on the"), 8, AttentionOptions{});
    AttentionOptions resplit;
    resplit.n_head = 8;
    resplit.scale = Scale::model;
    resplit.layers = {1};
    expect_greedy_matches_recompute(*model_, model_->tokenizer.encode("Hello"), 4, resplit);
}

// A long text's generation in the window: its options keep no map (the
// queries and keys, the summaries), and its forwards go through the live
// forward's cache, which already holds the prompt: the same tokens and rows
// as a recompute keeping every map, and the cache left holding the whole
// generated text, the queries and keys kept there.
TEST_F(Gpt2Generation, ALongTextsGenerationKeepsNoMapAndGoesThroughTheCacheGiven) {
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(*model_);
    AttentionOptions options;
    options.maps = Maps::queries_and_keys, options.summaries = true, options.top_k = generation_top;
    const std::vector<int32_t> prompt = model_->tokenizer.encode("The cat sat on the mat and the dog");
    PrefixCache live;
    AttentionResult shown;
    backend->forward(Batch{{prompt}, model_->config.pad_id()}, options, shown, &live);
    expect_greedy_matches_recompute(*model_, prompt, 5, options, &live, backend.get());
    ASSERT_EQ(live.token_ids.size(), 1u);
    EXPECT_EQ(live.token_ids[0].size(), prompt.size() + 5);
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), live.token_ids[0].begin()));
    EXPECT_TRUE(live.kept && live.kept->shape.any());
}

TEST_F(Gpt2Generation, SamplingIsDeterministicPerSeed) {
    const std::vector<int32_t> prompt = model_->tokenizer.encode("Once upon a time");
    const Sampling a{.temperature = 1.2f, .top_k = 50, .top_p = 0.9f, .seed = 11};
    Sampling b = a;
    b.seed = 12;
    const Generation first = run(prompt, 6, a);
    EXPECT_EQ(run(prompt, 6, a).token_ids, first.token_ids);
    EXPECT_NE(run(prompt, 6, b).token_ids, first.token_ids);
}

TEST_F(Gpt2Generation, StopsAtTokensEosAndTheContextLimit) {
    const std::vector<int32_t> prompt = model_->tokenizer.encode("The cat sat on the");
    const Generation three = run(prompt, 3);
    EXPECT_EQ(three.stop, Stop::tokens);
    EXPECT_EQ(three.steps.size(), 3u);

    // The model's EOS made the second greedy token: generation stops at its first appearance.
    const int32_t eos = model_->config.eos_token_id;
    model_->config.eos_token_id = three.steps[1].id;
    const Generation at_eos = run(prompt, 3);
    model_->config.eos_token_id = eos;
    EXPECT_EQ(at_eos.stop, Stop::eos);
    const size_t first = three.steps[0].id == three.steps[1].id ? 1 : 2;
    ASSERT_EQ(at_eos.steps.size(), first);
    EXPECT_EQ(at_eos.steps.back().id, three.steps[1].id);
    // Likewise at any other EOS id the config lists (Llama 3 Instruct's <|eot_id|>).
    model_->config.more_eos_ids = {three.steps[1].id};
    const Generation at_listed = run(prompt, 3);
    model_->config.more_eos_ids.clear();
    EXPECT_EQ(at_listed.stop, Stop::eos);
    EXPECT_EQ(at_listed.steps.size(), first);

    // n_positions is 32: a 29-token prompt leaves room for 3 tokens of 10.
    const std::vector<int32_t> long_prompt(29, prompt[0]);
    const Generation full = run(long_prompt, 10);
    EXPECT_EQ(full.stop, Stop::context);
    EXPECT_EQ(full.steps.size(), 3u);
    EXPECT_EQ(full.token_ids.size(), 32u);
    // A prompt already at the limit makes none.
    EXPECT_EQ(run(std::vector<int32_t>(32, prompt[0]), 1).stop, Stop::context);
}

TEST(FamilyGeneration, GreedyEqualsTheArgmaxOfAFullRecompute) {
    // Grouped heads, rotary positions and a sliding window shorter than the text.
    const test::FamilySpec spec = test::family_variant("mistral");
    test::TempDir dir;
    test::write_family_model(dir.path, spec);
    const Model model = load_model(dir.path.string());
    AttentionOptions options;
    options.sliding_window = model.config.sliding_window;
    expect_greedy_matches_recompute(model, test::family_texts(spec)[0], 5, options);
}

}  // namespace
