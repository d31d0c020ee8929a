// See prediction_checks.h.
#include "prediction_checks.h"

#include <numeric>
#include <sstream>

namespace headscope::test {

namespace {

std::string where(int b, int t) { return "text " + std::to_string(b) + " position " + std::to_string(t); }

void expect_none(const Prediction* got, int K, const std::string& what, Mismatches& m) {
    for (int r = 0; r < K; ++r)
        if (got[r].id != -1) m.add(what + ": a padded position holds id " + std::to_string(got[r].id));
}

}  // namespace

// The engine's K predictions at one position against the reference's: each p
// within 1e-5 of the reference's K largest in turn, each id's own reference
// p the p reported, ids distinct and by p descending, and the reference's id
// wherever its p stands apart from its neighbours' by more than a tie.
void compare_top(const Prediction* got, int K, int V, const ReferenceRow& want, const std::string& what,
                 Mismatches& m) {
    const auto p = [&](int rank) { return std::exp(want.logp[want.order[rank]]); };
    for (int r = 0; r < K; ++r) {
        std::ostringstream s;
        s << what << " rank " << r << ": got id " << got[r].id << " p " << got[r].p << ", want id " << want.order[r]
          << " p " << p(r);
        if (got[r].id < 0 || got[r].id >= V) {
            m.add(s.str() + " (id out of the vocabulary)");
            continue;
        }
        if (std::abs(got[r].p - p(r)) > 1e-5) m.add(s.str() + " (p of the rank)");
        if (std::abs(got[r].p - std::exp(want.logp[got[r].id])) > 1e-5) m.add(s.str() + " (p of the id)");
        if (r > 0 && got[r].p > got[r - 1].p) m.add(s.str() + " (not by p descending)");
        for (int q = 0; q < r; ++q)
            if (got[q].id == got[r].id) m.add(s.str() + " (id repeated)");
        const bool apart_above = r == 0 || p(r - 1) - p(r) > tie;
        const bool apart_below = r + 1 == int(want.order.size()) || p(r) - p(r + 1) > tie;
        if (apart_above && apart_below && got[r].id != want.order[r]) m.add(s.str() + " (id)");
    }
}

ReferenceRow reference_row(const double* logits, int V, int count) {
    const double max = *std::max_element(logits, logits + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(logits[v] - max);
    const double log_sum = max + std::log(sum);
    ReferenceRow row{std::vector<double>(V), std::vector<int>(V)};
    for (int v = 0; v < V; ++v) row.logp[v] = logits[v] - log_sum;
    std::iota(row.order.begin(), row.order.end(), 0);
    std::partial_sort(row.order.begin(), row.order.begin() + count, row.order.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    row.order.resize(count);
    return row;
}

std::pair<double, std::vector<double>> loss_and_p(const std::vector<double>& logits, int V,
                                                  const std::vector<int32_t>& text,
                                                  const std::vector<Prediction>& ids) {
    const int T = static_cast<int>(text.size());
    double loss = 0;
    std::vector<double> p(T);
    for (int t = 0; t < T; ++t) {
        const ReferenceRow row = reference_row(&logits[size_t(t) * V], V, 1);
        if (t + 1 < T) loss -= row.logp[text[t + 1]] / (T - 1);
        p[t] = std::exp(row.logp[ids[t].id]);
    }
    return {loss, p};
}

// The reference's residual rows of `layer` at each text's real positions, (N, C).
std::vector<double> real_rows(const std::vector<double>& residual, int layer, const Texts& texts, int T, int C) {
    const int B = static_cast<int>(texts.size());
    std::vector<double> rows;
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < int(texts[b].size()); ++t) {
            const double* x = &residual[((size_t(layer) * B + b) * T + t) * C];
            rows.insert(rows.end(), x, x + C);
        }
    return rows;
}

void expect_predictions_match(const AttentionResult& got, const Texts& texts, const AttentionOptions& opt,
                              const std::vector<double>& residual, int L, int C, int V, const Logits& logits,
                              const std::string& what) {
    SCOPED_TRACE(what);
    const int B = static_cast<int>(texts.size()), T = got.T, K = opt.top_k, LK = opt.lens_k;
    ASSERT_EQ(got.top_k, K);
    ASSERT_EQ(got.lens_k, LK);
    ASSERT_EQ(got.lens.size(), got.layers.size() * B * T * LK);
    ASSERT_EQ(residual.size(), size_t(L) * B * T * C);
    // Each layer's logits at the texts' real positions, computed once (the
    // last layer's serve both the predictions and its lens).
    std::vector<std::vector<double>> layer_logits(L);
    const auto logits_of = [&](int layer) -> const std::vector<double>& {
        if (layer_logits[layer].empty()) layer_logits[layer] = logits(real_rows(residual, layer, texts, T, C));
        return layer_logits[layer];
    };
    if (K == 0) {  // the lens alone (attention.h leaves logprob_next and last_logits unsaid)
        EXPECT_TRUE(got.predictions.empty());
    } else {
        ASSERT_EQ(got.V, V);
        ASSERT_EQ(got.predictions.size(), size_t(B) * T * K);
        ASSERT_EQ(got.logprob_next.size(), size_t(B) * T);
        ASSERT_EQ(got.last_logits.size(), size_t(B) * V);

        // The last layer's rows give the predictions.
        const std::vector<double>& want = logits_of(L - 1);
        Mismatches top, logprob, last, loss, pads;
        size_t row = 0;
        for (int b = 0; b < B; ++b) {
            const int length = static_cast<int>(texts[b].size());
            double loss_sum = 0;
            for (int t = 0; t < length; ++t, ++row) {
                const double* z = &want[row * V];
                const ReferenceRow r = reference_row(z, V, K + 1);
                compare_top(got.predictions_at(b, t), K, V, r, where(b, t), top);
                const float lp = got.logprob_next[size_t(b) * T + t];
                if (t + 1 < length) {
                    const double want_lp = r.logp[texts[b][t + 1]];
                    loss_sum -= want_lp;
                    if (!(std::abs(lp - want_lp) <= 1e-4))
                        logprob.add(where(b, t) + ": " + std::to_string(lp) + " want " + std::to_string(want_lp));
                } else if (!std::isnan(lp)) {
                    logprob.add(where(b, t) + ": the last token's is " + std::to_string(lp) + ", not NaN");
                }
                if (t + 1 == length) {
                    double scale = 0;
                    for (int v = 0; v < V; ++v) scale = std::max(scale, std::abs(z[v]));
                    for (int v = 0; v < V; ++v) {
                        const float l = got.last_logits[size_t(b) * V + v];
                        if (!(std::abs(l - z[v]) <= 1e-5 * scale))
                            last.add("text " + std::to_string(b) + " token " + std::to_string(v) + ": " +
                                     std::to_string(l) + " want " + std::to_string(z[v]));
                    }
                }
            }
            for (int t = length; t < T; ++t) {
                expect_none(got.predictions_at(b, t), K, where(b, t), pads);
                if (!std::isnan(got.logprob_next[size_t(b) * T + t])) pads.add(where(b, t) + ": logprob_next not NaN");
            }
            const double got_loss = got.loss(b);
            if (length == 1) {
                if (!std::isnan(got_loss)) loss.add("text " + std::to_string(b) + ": a one-token text's loss");
            } else if (!(std::abs(got_loss - loss_sum / (length - 1)) <= 1e-4)) {
                loss.add("text " + std::to_string(b) + ": " + std::to_string(got_loss) + " want " +
                         std::to_string(loss_sum / (length - 1)));
            }
        }
        EXPECT_EQ(top.count, 0) << "top-k: " << top.first;
        EXPECT_EQ(logprob.count, 0) << "logprob_next: " << logprob.first;
        EXPECT_EQ(last.count, 0) << "last_logits: " << last.first;
        EXPECT_EQ(loss.count, 0) << "loss: " << loss.first;
        EXPECT_EQ(pads.count, 0) << "padded positions: " << pads.first;
    }

    if (LK == 0) return;
    for (size_t slot = 0; slot < got.layers.size(); ++slot) {
        const int layer = got.layers[slot];
        const std::vector<double>& want = logits_of(layer);
        Mismatches lens;
        size_t row = 0;
        for (int b = 0; b < B; ++b) {
            const int length = static_cast<int>(texts[b].size());
            for (int t = 0; t < length; ++t, ++row)
                compare_top(got.lens_at(int(slot), b, t), LK, V, reference_row(&want[row * V], V, LK + 1), where(b, t),
                            lens);
            for (int t = length; t < T; ++t) expect_none(got.lens_at(int(slot), b, t), LK, where(b, t), lens);
        }
        EXPECT_EQ(lens.count, 0) << "lens of layer " << layer << ": " << lens.first;
    }
}

std::string describe(const AttentionOptions& o) {
    std::ostringstream s;
    s << "causal " << o.causal << " padding " << o.padding_mask << " heads " << o.n_head << " scale "
      << to_string(o.scale) << " split " << to_string(o.split) << " window " << o.sliding_window << " top_k " << o.top_k
      << " lens_k " << o.lens_k << " layers";
    if (o.layers.empty()) s << " all";
    for (int l : o.layers) s << " " << l;
    if (!o.ablate.empty()) s << " ablate " << to_string(o.ablation);
    for (const HeadRef& h : o.ablate) s << " " << h.layer << "." << h.head;
    return s.str();
}

std::vector<AttentionOptions> knock_out_options(int heads) {
    const auto knock = [&](std::vector<HeadRef> ablate, Ablation ablation, auto&& change) {
        AttentionOptions o;
        o.ablate = std::move(ablate), o.ablation = ablation, o.capture_outputs = true, o.top_k = 3, o.lens_k = 2;
        change(o);
        return o;
    };
    const auto same = [](auto&) {};
    return {knock({{0, 1}}, Ablation::zero, same),
            knock({{0, 0}, {1, heads - 1}, {2, 1}}, Ablation::zero, same),
            knock({{1, 0}}, Ablation::mean, same),
            knock({{0, 1}, {0, heads - 1}, {2, 0}}, Ablation::mean, same),
            knock({{1, 1}}, Ablation::mean, [](auto& o) { o.split = Split::naive_view; }),
            knock({{0, 0}, {1, 1}}, Ablation::zero, [](auto& o) {
                o.padding_mask = false, o.layers = {1, 2};
            })};
}

TempDir* Gpt2::dir_ = nullptr;
Model* Gpt2::model_ = nullptr;

std::vector<FamilyParam> family_params() {
    std::vector<FamilyParam> params;
    for (const FamilyVariant& v : family_variants()) params.emplace_back(v, FileDType::F32);
    // A tied output embedding as a BF16 matrix (the input embedding's bytes).
    for (const FamilyVariant& v : family_variants())
        if (v.name == "llama_tied") params.emplace_back(v, FileDType::BF16);
    return params;
}

std::string family_param_name(const ::testing::TestParamInfo<FamilyParam>& info) {
    return std::get<0>(info.param).name + "_" + dtype_name(std::get<1>(info.param));
}

void expect_top_5(const AttentionResult& got, const std::vector<std::vector<int32_t>>& texts,
                  const std::vector<double>& logits, int V, double tolerance) {
    size_t row = 0;
    for (size_t b = 0; b < texts.size(); ++b)
        for (size_t t = 0; t < texts[b].size(); ++t, ++row) {
            const ReferenceRow want = reference_row(&logits[row * V], V, 6);
            const Prediction* ranked = got.predictions_at(int(b), int(t));
            for (int k = 0; k < 5; ++k) {
                const double p = std::exp(want.logp[want.order[k]]), next = std::exp(want.logp[want.order[k + 1]]);
                EXPECT_NEAR(ranked[k].p, p, tolerance) << "text " << b << " position " << t << " rank " << k;
                if (p - next > tolerance) {
                    EXPECT_EQ(ranked[k].id, want.order[k]) << "text " << b << " position " << t;
                }
            }
        }
}

void expect_llama_cpps_top_5(const double* logits, int V, const Prediction* ranked, const nlohmann::json& theirs,
                             const ProbabilityTolerance& tolerance, const std::string& what) {
    ASSERT_EQ(theirs.size(), 5u) << what;
    std::vector<double> p = reference_row(logits, V, 0).logp;
    for (double& x : p) x = std::exp(x);
    std::vector<int> ids;
    std::vector<double> q;
    for (const nlohmann::json& token : theirs) ids.push_back(token[0].get<int>()), q.push_back(token[1].get<double>());
    const std::string all = what + ", llama.cpp's " + theirs.dump();
    for (size_t k = 0; k < 5; ++k) {
        const double mine = p.at(size_t(ids[k]));
        EXPECT_NEAR(mine, q[k], tolerance.at(std::max(mine, q[k]))) << all << ": its rank " << k;
        const int ours = ranked[k].id;
        if (std::find(ids.begin(), ids.end(), ours) == ids.end()) {
            const double border = q[4] + tolerance.at(p.at(size_t(ours)));
            EXPECT_LE(p.at(size_t(ours)), border) << all << ": our rank " << k << " (" << ours << ") not its";
        }
        if (k < 4 && q[k] - q[k + 1] > tolerance.at(q[k])) {
            EXPECT_GT(mine, p.at(size_t(ids[k + 1]))) << all << ": its ranks " << k << " and " << k + 1;
        }
    }
}

void expect_llama_cpps_next_tokens(Backend& backend, const Config& config, const Texts& texts,
                                   const nlohmann::json& theirs, const ProbabilityTolerance& tolerance) {
    ASSERT_EQ(theirs.size(), texts.size());
    for (size_t t = 0; t < texts.size(); ++t) {
        AttentionOptions opt;
        opt.top_k = 5;
        opt.sliding_window = config.sliding_window;  // llama.cpp's windows are always on
        AttentionResult ours;
        backend.forward(Batch{{texts[t]}, config.pad_id()}, opt, ours);
        const std::vector<double> logits(ours.last_logits.begin(), ours.last_logits.begin() + ours.V);
        expect_llama_cpps_top_5(logits.data(), ours.V, ours.predictions_at(0, static_cast<int>(texts[t].size()) - 1),
                                theirs[t], tolerance, "text " + std::to_string(t));
    }
}

}  // namespace headscope::test
