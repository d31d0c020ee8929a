// Why a head attends and what it writes (inspect/explanations.h): the score's
// head-dimension terms add up to the score that gives the engine's own map
// through the softmax, for every family (RoPE, qk-norm, grouped-query heads,
// biases); the bias terms against the model's biases; and the tokens a head
// promotes and suppresses against GPT-2's double-precision reference and, for
// every family, against the engine's logit attribution; the pairs of dims
// RoPE turns, as the neuron view and the dance name them, against a GGUF
// file's reordered rows and the Hugging Face folder of the same weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gguf_models.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/matmul.h"
#include "headscope/inspect/dance.h"
#include "headscope/inspect/explanations.h"
#include "prediction_checks.h"
#include "reference_forward.h"

using namespace headscope;
using namespace headscope::test;

namespace {

AttentionOptions explaining() {
    AttentionOptions opt;
    opt.contributions = true, opt.capture_outputs = true, opt.top_k = 1;
    return opt;
}

// Every explained score of every returned map row of text b: the terms add up
// to the score, the largest and smallest terms are the terms' extremes, and
// the scaled (and, for Gemma 2, soft-capped) scores of the keys the row
// attends to in its layer, through a softmax written here (with gpt-oss's
// sink), give the engine's map row.
void expect_scores_give_the_maps(const Model& model, const AttentionResult& got, const AttentionOptions& opt, int b,
                                 int length) {
    double worst = 0;
    for (int slot = 0; slot < static_cast<int>(got.layers.size()); ++slot)
        for (int h = 0; h < got.NH; ++h)
            for (int i = 0; i < length; ++i) {
                std::vector<double> scores;
                std::vector<int> keys;
                const AttentionOptions at = layer_options(model.config, opt, got.layers[slot]);  // its window
                for (int j = 0; j < got.T; ++j) {
                    if (!attends(at, i, j, length, got.T)) continue;
                    const ScoreTerms s = explain_score(model, got, opt, slot, b, h, i, j);
                    const double sum = std::accumulate(s.terms.begin(), s.terms.end(), 0.0);
                    ASSERT_NEAR(sum, s.score, 1e-4 * (1 + std::abs(s.score)));
                    ASSERT_EQ(s.terms[s.largest[0]], *std::max_element(s.terms.begin(), s.terms.end()));
                    ASSERT_EQ(s.terms[s.smallest[0]], *std::min_element(s.terms.begin(), s.terms.end()));
                    scores.push_back(s.softmax_input);
                    keys.push_back(j);
                }
                if (keys.empty()) continue;
                // gpt-oss's sink logit joins the denominator.
                const float* sinks = model.layers[got.layers[slot]].sinks;
                const double sink = sinks ? sinks[h] : -INFINITY;
                const double max = std::max(sink, *std::max_element(scores.begin(), scores.end()));
                double total = std::exp(sink - max);
                for (double& s : scores) total += (s = std::exp(s - max));
                for (size_t n = 0; n < keys.size(); ++n)
                    worst = std::max(worst, std::abs(scores[n] / total - got.row(slot, b, h, i)[keys[n]]));
            }
    EXPECT_LT(worst, 2e-5) << "the softmax of the explained scores against the maps";
}

// Layer `l`'s query and key of a head's columns [col, col + hs) at text b's
// position t without their biases: ln_1 of the reference's residual stream
// before the layer, times c_attn's Q or K columns, in double precision.
std::vector<double> unbiased(const Model& model, const Reference& ref, int B, int T, int l, int b, int t, int col,
                             int hs) {
    const Config& cfg = model.config;
    const int C = cfg.n_embd;
    const double* x = &ref.residual[((size_t(l - 1) * B + b) * T + t) * C];
    double mean = 0, var = 0;
    for (int c = 0; c < C; ++c) mean += x[c] / C;
    for (int c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean) / C;
    const LayerWeights& w = model.layers[l];
    const std::vector<float> W = to_floats(w.attn);
    const auto weight = [&](int i, int o) {
        return w.attn.out_by_in ? W[size_t(o) * C + i] : W[size_t(i) * 3 * C + o];
    };
    std::vector<double> out(hs, 0.0);
    for (int c = 0; c < C; ++c) {
        const double ln = (x[c] - mean) / std::sqrt(var + cfg.layer_norm_epsilon) * w.ln_1_w[c] + w.ln_1_b[c];
        for (int d = 0; d < hs; ++d) out[d] += ln * weight(c, col + d);
    }
    return out;
}

// The four parts of a score against q' and k' (no biases) computed here
// from the reference's residual stream and GPT-2's fused [Q | K | V]
// weights and bias, for the model's heads and a re-split.
TEST_F(Gpt2, ScoreTermsAddUpToTheScoresOfTheMapsAndTheBiasesApart) {
    for (int n_head : {0, 2}) {
        AttentionOptions opt = explaining();
        opt.n_head = n_head;
        const AttentionResult got = run(texts_, opt);
        for (int b = 0; b < got.B; ++b) expect_scores_give_the_maps(*model_, got, opt, b, int(texts_[b].size()));
        const Reference ref = reference_attention(*model_, texts_, opt);
        const int C = model_->config.n_embd, hs = got.hs, head = 1, query = 6, key = 3;
        const float* bias = model_->layers[2].attn_b;
        const std::vector<double> q = unbiased(*model_, ref, got.B, got.T, 2, 0, query, head * hs, hs);
        const std::vector<double> k = unbiased(*model_, ref, got.B, got.T, 2, 0, key, C + head * hs, hs);
        double ww = 0, wb = 0, bw = 0, bb = 0;
        for (int d = 0; d < hs; ++d) {
            const double bq = bias[head * hs + d], bk = bias[C + head * hs + d];
            ww += q[d] * k[d], wb += q[d] * bk, bw += bq * k[d], bb += bq * bk;
        }
        const ScoreTerms s = explain_score(*model_, got, opt, 2, 0, head, query, key);
        ASSERT_TRUE(s.biases_apart);
        const double tolerance = 1e-4 * (1 + std::abs(ww));
        EXPECT_NEAR(s.weights_weights, ww, tolerance);
        EXPECT_NEAR(s.weights_bias, wb, tolerance);
        EXPECT_NEAR(s.bias_weights, bw, tolerance);
        EXPECT_NEAR(s.bias_bias, bb, tolerance);
        EXPECT_NEAR(s.score, ww + wb + bw + bb, tolerance);
        EXPECT_NEAR(s.scale, 1 / std::sqrt(double(hs)), 1e-7);  // float32
    }
}

TEST_F(Gpt2, ExplainingAForwardWithoutContributionsOrOutOfRangeIsAnError) {
    const AttentionResult plain = run(texts_, {});
    EXPECT_THROW(explain_score(*model_, plain, {}, 0, 0, 0, 1, 0), Error);
    EXPECT_THROW(head_writes(*model_, plain, 0, 0, 0, 1), Error);
    const AttentionResult got = run(texts_, explaining());
    EXPECT_THROW(explain_score(*model_, got, explaining(), 0, 0, 0, got.T, 0), Error);
    EXPECT_THROW(explain_score(*model_, got, explaining(), 3, 0, 0, 1, 0), Error);
    EXPECT_THROW(head_writes(*model_, got, 0, 2, 0, 1), Error);
}

// Head h's output at a position through its rows of c_proj (the reference's
// head_writes), through ln_f with the scale of the final residual frozen
// (gamma (c - mean c) / sigma, no shift), through wte: (V).
std::vector<double> reference_head_logits(const Model& model, const Reference& ref, int B, int T, int NH, int l, int b,
                                          int h, int t) {
    const Config& cfg = model.config;
    const int C = cfg.n_embd, V = cfg.vocab_size;
    const double* x = &ref.residual[((size_t(cfg.n_layer - 1) * B + b) * T + t) * C];
    const double* part = &ref.head_writes[(((size_t(l) * B + b) * NH + h) * T + t) * C];
    double mean = 0, var = 0, part_mean = 0;
    for (int c = 0; c < C; ++c) mean += x[c] / C, part_mean += part[c] / C;
    for (int c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean) / C;
    const double sigma = std::sqrt(var + cfg.layer_norm_epsilon);
    const std::vector<float> wte = to_floats(model.wte);
    std::vector<double> logits(V, 0.0);
    for (int v = 0; v < V; ++v)
        for (int c = 0; c < C; ++c)
            logits[v] += (part[c] - part_mean) * model.ln_f_w[c] / sigma * wte[size_t(v) * C + c];
    return logits;
}

TEST_F(Gpt2, WhatAHeadWritesIsTheReferences) {
    const AttentionOptions opt = explaining();
    const AttentionResult got = run(texts_, opt);
    const Reference want = reference_attention(*model_, texts_, opt);
    const int NH = got.NH, k = 10;
    for (const auto& [l, b, h, t] : {std::tuple{0, 0, 1, 4}, {2, 1, 3, 6}, {1, 0, 0, 0}}) {
        const std::vector<double> z = reference_head_logits(*model_, want, got.B, got.T, NH, l, b, h, t);
        std::vector<int> order(z.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int c) { return z[a] > z[c]; });
        const HeadWrites w = head_writes(*model_, got, l, b, h, t, k);
        ASSERT_EQ(w.promoted.size(), size_t(k));
        ASSERT_EQ(w.suppressed.size(), size_t(k));
        const double scale = std::abs(z[order.front()]) + std::abs(z[order.back()]);
        for (int r = 0; r < k; ++r) {
            const std::string at = "L" + std::to_string(l) + " H" + std::to_string(h) + " rank " + std::to_string(r);
            EXPECT_NEAR(w.promoted[r].logit, z[order[r]], 1e-4 * scale) << at;
            EXPECT_NEAR(w.promoted[r].logit, z[w.promoted[r].id], 1e-4 * scale) << at;
            EXPECT_NEAR(w.suppressed[r].logit, z[order[z.size() - 1 - r]], 1e-4 * scale) << at;
            EXPECT_NEAR(w.suppressed[r].logit, z[w.suppressed[r].id], 1e-4 * scale) << at;
        }
    }
}

// Every family: the scores give the maps (after RoPE and qk-norm, in groups),
// and what a head writes, read for the whole vocabulary, holds at the top
// token the head's logit attribution, which the engine computes apart.
TEST_P(FamilyPredictions, ScoresGiveTheMapsAndWritesMatchTheAttribution) {
    AttentionOptions opt = explaining();
    opt.sliding_window = checkpoint_.spec.sliding_window;
    AttentionResult got;
    backend_->forward(Batch{texts_, model_.config.pad_id()}, opt, got);
    for (int b = 0; b < got.B; ++b) expect_scores_give_the_maps(model_, got, opt, b, int(texts_[b].size()));
    const int V = model_.config.vocab_size, B = got.B, T = got.T, NH = got.NH;
    for (const auto& [l, b, h, t] : {std::tuple{0, 0, 0, 3}, {2, 1, NH - 1, 5}}) {
        const HeadWrites w = head_writes(model_, got, l, b, h, t, V);
        const int32_t top = got.predictions_at(b, t)[0].id;
        const auto it =
            std::find_if(w.promoted.begin(), w.promoted.end(), [&](const TokenPush& p) { return p.id == top; });
        ASSERT_NE(it, w.promoted.end());
        const float attribution = got.head_logit_attribution[((size_t(l) * B + b) * NH + h) * T + t];
        EXPECT_NEAR(it->logit, attribution, 1e-4 * (1 + std::abs(attribution))) << "L" << l << " H" << h;
    }
    // With biases on Q and K and RoPE (Qwen 2's separate biases, Pythia's
    // fused per head), the bias-bias term depends only on the distance
    // between query and key, and is bq . bk at distance 0 (times the square
    // of the rotations' scale, YaRN's attention factor).
    const LayerWeights& layer = model_.layers[1];
    const Config& cfg = model_.config;
    if (cfg.qk_norm) return;  // a norm is not linear: no parts to split the score into
    const int hs = got.hs, kv = 1 / (got.NH / got.NKV);
    std::vector<float> bq(cfg.n_head * hs), bk(cfg.kv_heads() * hs);  // head 1's columns are what matter
    if (layer.q_b) {
        std::copy_n(layer.q_b, bq.size(), bq.begin());
        std::copy_n(layer.k_b, bk.size(), bk.begin());
    } else if (layer.attn_b && cfg.qkv_layout == QkvLayout::fused_per_head) {  // (NH, [q k v], hs)
        for (int h = 0; h < cfg.n_head; ++h) {
            std::copy_n(layer.attn_b + 3 * h * hs, hs, bq.begin() + h * hs);
            std::copy_n(layer.attn_b + (3 * h + 1) * hs, hs, bk.begin() + h * hs);
        }
    } else {
        return;
    }
    ASSERT_EQ(got.hs, cfg.head_size()) << "the model's own split";
    const ScoreTerms a = explain_score(model_, got, opt, 1, 0, 1, 6, 4),
                     c = explain_score(model_, got, opt, 1, 0, 1, 8, 6);
    const ScoreTerms same = explain_score(model_, got, opt, 1, 0, 1, 5, 5);
    ASSERT_TRUE(a.biases_apart);
    EXPECT_NEAR(a.bias_bias, c.bias_bias, 1e-4 * (1 + std::abs(a.bias_bias)));
    double bq_bk = 0;
    for (int d = 0; d < hs; ++d) bq_bk += double(bq[hs + d]) * bk[kv * hs + d];
    bq_bk *= double(cfg.rope.cos_sin_scale) * cfg.rope.cos_sin_scale;  // YaRN's factor on q's and k's rotations
    EXPECT_NEAR(same.bias_bias, bq_bk, 1e-4 * (1 + std::abs(bq_bk)));
}

// A llama GGUF file, whose converter reordered each head's rows of Q and K
// so that RoPE turns adjacent dims (2d, 2d + 1), and the Hugging Face folder
// of the same weights, where it turns (d, d + hs / 2): the pairs each names
// hold the same q and k values, pair by pair (the converter's permutation),
// and the dance's RoPE step says the same pairs in the same words.
TEST(RopePairs, TheNeuronViewAndTheDanceNameThePairsRopeTurns) {
    TempDir dir;
    const FamilySpec spec = gguf_family_spec(Family::llama);
    const FamilyCheckpoint checkpoint = write_gguf_family(dir.path / "llama.gguf", spec, DType::F32);
    write_family_checkpoint(dir.path / "hf", checkpoint);
    // The GGUF file's byte-level vocabulary (the family's tokenizer.json has more ids than its 259).
    std::filesystem::remove(dir.path / "hf" / "tokenizer.json");
    nlohmann::json vocab;
    for (int b = 0; b < 256; ++b) vocab[byte_token(b)] = b;
    vocab[byte_token(' ') + "t"] = 256, vocab["<|begin_of_text|>"] = 257, vocab["<|end_of_text|>"] = 258;
    std::ofstream(dir.path / "hf" / "vocab.json") << vocab.dump();
    std::ofstream(dir.path / "hf" / "merges.txt") << "#version: 0.2\n" << byte_token(' ') << " t\n";
    const Model gguf = load_model((dir.path / "llama.gguf").string()), hf = load_model((dir.path / "hf").string());
    ASSERT_TRUE(gguf.config.rope.adjacent_pairs);
    ASSERT_FALSE(hf.config.rope.adjacent_pairs);
    const Batch text{{{257, 9, 100, 200, 129, 17, 30}}, gguf.config.pad_id()};
    const AttentionOptions opt = explaining();
    AttentionResult from_gguf, from_hf;
    for (const auto& [model, result] : {std::pair{&gguf, &from_gguf}, std::pair{&hf, &from_hf}}) {
        std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(*model);
        backend->forward(text, opt, *result);
    }
    const int hs = spec.head_dim;
    for (const auto& [slot, head, i, j] : {std::tuple{0, 0, 5, 2}, {1, 3, 6, 6}, {1, spec.n_head - 1, 4, 0}}) {
        const ScoreTerms g = explain_score(gguf, from_gguf, opt, slot, 0, head, i, j);
        const ScoreTerms h = explain_score(hf, from_hf, opt, slot, 0, head, i, j);
        ASSERT_EQ(g.rope_pairs.size(), size_t(hs / 2));
        ASSERT_EQ(h.rope_pairs.size(), size_t(hs / 2));
        for (int p = 0; p < hs / 2; ++p) {
            EXPECT_EQ(g.rope_pairs[p], std::pair(2 * p, 2 * p + 1));
            EXPECT_EQ(h.rope_pairs[p], std::pair(p, p + hs / 2));
            for (const auto& [ours, theirs] : {std::pair{g.rope_pairs[p].first, h.rope_pairs[p].first},
                                               std::pair{g.rope_pairs[p].second, h.rope_pairs[p].second}}) {
                EXPECT_NEAR(g.q[ours], h.q[theirs], 1e-4 * (1 + std::abs(h.q[theirs]))) << "pair " << p;
                EXPECT_NEAR(g.k[ours], h.k[theirs], 1e-4 * (1 + std::abs(h.k[theirs]))) << "pair " << p;
            }
        }
    }
    const std::string adjacent = rope_pairs_in_words(gguf.config, hs), half = rope_pairs_in_words(hf.config, hs);
    EXPECT_EQ(adjacent.rfind("adjacent pairs (2d, 2d + 1)", 0), 0u) << adjacent;
    EXPECT_EQ(half, "rotate-half pairs (d, d + " + std::to_string(hs / 2) + ")");
    for (const auto& [model, words] : {std::pair{&gguf, adjacent}, std::pair{&hf, half}}) {
        const Dance dance = reshape_dance(1, 7, model->config, 0, Split::transpose);
        const bool named = std::any_of(dance.steps.begin(), dance.steps.end(), [&](const DanceStep& step) {
            return step.title.find("RoPE") != std::string::npos && step.title.find(words) != std::string::npos;
        });
        EXPECT_TRUE(named) << words;
    }
}

// FamilyPredictions' families are instantiated once for the program, in test_head_effects.cpp.

}  // namespace
