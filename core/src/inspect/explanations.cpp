// Why a head attends, and what it writes: see explanations.h.
#include "headscope/inspect/explanations.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/matmul.h"

namespace headscope {

namespace {

double dot(const float* a, const float* b, int n) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
    return sum;
}

// The bias `bias` (hs values of head `h`'s part) rotated to `position` as
// RoPE rotates its head in a forward of T positions.
std::vector<float> rotated_bias(const Config& config, const float* bias, int hs, int position, int T) {
    std::vector<float> b(bias, bias + hs);
    if (config.positions == Positions::rotary) {
        const RopeTable table = rope_table(config.rope, hs, T);
        apply_rope(table, b.data(), position, 1, hs);
    }
    return b;
}

// A layer's Q and K biases as the [Q | K | V] columns the scores read, in
// the model's own heads (a re-split reads the same columns); empty without.
std::pair<std::vector<float>, std::vector<float>> qk_biases(const Config& cfg, const LayerWeights& w) {
    const int hs = cfg.head_size(), Qw = cfg.n_head * hs, KVw = cfg.kv_heads() * hs;
    if (w.q_b && w.k_b) return {{w.q_b, w.q_b + Qw}, {w.k_b, w.k_b + KVw}};
    if (!w.attn_b) return {};
    if (cfg.qkv_layout == QkvLayout::fused) return {{w.attn_b, w.attn_b + Qw}, {w.attn_b + Qw, w.attn_b + Qw + KVw}};
    std::vector<float> bq(Qw), bk(KVw);  // fused per head: (NH, [q k v], hs)
    for (int h = 0; h < cfg.n_head; ++h) {
        std::copy_n(w.attn_b + 3 * h * hs, hs, bq.begin() + h * hs);
        std::copy_n(w.attn_b + (3 * h + 1) * hs, hs, bk.begin() + h * hs);
    }
    return {bq, bk};
}

void check_head(const AttentionResult& result, int head) {
    if (head < 0 || head >= result.NH)
        throw Error("no head " + std::to_string(head) + " among the forward's " + std::to_string(result.NH));
}

void check_position(const AttentionResult& result, int slot, int b, int position) {
    if (slot < 0 || slot >= static_cast<int>(result.layers.size()) || b < 0 || b >= result.B || position < 0 ||
        position >= result.T)
        throw Error("no such map row: layer slot " + std::to_string(slot) + ", text " + std::to_string(b) +
                    ", position " + std::to_string(position));
}

}  // namespace

ScoreTerms explain_score(const Model& model, const AttentionResult& result, const AttentionOptions& options, int slot,
                         int b, int head, int query, int key) {
    if (!result.keeps_queries()) throw Error("the forward kept no queries and keys (its contributions are off)");
    check_head(result, head);
    check_position(result, slot, b, query);
    check_position(result, slot, b, key);
    const Config& cfg = model.config;
    const int hs = result.hs, kv = head / (result.NH / result.NKV);
    ScoreTerms s;
    const float* q = result.query(slot, b, query) + head * hs;
    const float* k = result.key(slot, b, key) + kv * hs;
    s.q.assign(q, q + hs);
    s.k.assign(k, k + hs);
    for (int i = 0; i < hs; ++i) s.terms.push_back(q[i] * k[i]);
    s.score = dot(q, k, hs);
    s.scale = score_scale(options.scale, cfg, hs);
    const double cap = cfg.attention_softcap, scaled = s.score * s.scale;  // Gemma 2: cap tanh(x / cap)
    s.softmax_input = cap > 0 ? cap * std::tanh(scaled / cap) : scaled;
    std::vector<int> order(hs);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int c) { return s.terms[a] > s.terms[c]; });
    s.largest.assign(order.begin(), order.begin() + std::min(5, hs));
    s.smallest.assign(order.rbegin(), order.rbegin() + std::min(5, hs));
    const int turned = cfg.positions == Positions::rotary ? rope_dims(cfg.rope, hs) : 0;
    for (int d = 0; d < turned / 2; ++d)
        s.rope_pairs.push_back(cfg.rope.adjacent_pairs ? std::pair{2 * d, 2 * d + 1} : std::pair{d, d + turned / 2});

    const auto [bq, bk] = qk_biases(cfg, model.layers[result.layers[slot]]);
    if (bq.empty() || cfg.qk_norm) return s;
    s.biases_apart = true;
    const std::vector<float> rq = rotated_bias(cfg, bq.data() + head * hs, hs, query, result.T);
    const std::vector<float> rk = rotated_bias(cfg, bk.data() + kv * hs, hs, key, result.T);
    std::vector<float> q_weights(hs), k_weights(hs);
    for (int i = 0; i < hs; ++i) q_weights[i] = q[i] - rq[i], k_weights[i] = k[i] - rk[i];
    s.weights_weights = dot(q_weights.data(), k_weights.data(), hs);
    s.weights_bias = dot(q_weights.data(), rk.data(), hs);
    s.bias_weights = dot(rq.data(), k_weights.data(), hs);
    s.bias_bias = dot(rq.data(), rk.data(), hs);
    return s;
}

std::string rope_pairs_in_words(const Config& config, int turned_dims) {
    return config.rope.adjacent_pairs
               ? "adjacent pairs (2d, 2d + 1), as the GGUF file's reordered rows of Q and K put them"
               : "rotate-half pairs (d, d + " + std::to_string(turned_dims / 2) + ")";
}

HeadWrites head_writes(const Model& model, const AttentionResult& result, int slot, int b, int head, int position,
                       int k) {
    if (result.outputs.empty() || result.final_scale.empty())
        throw Error("the forward kept no head outputs or final norm scale (capture its outputs and contributions)");
    check_head(result, head);
    check_position(result, slot, b, position);
    const Config& cfg = model.config;
    const int hs = result.hs, Qw = result.NH * hs, C = cfg.n_embd, V = cfg.vocab_size;
    const float* y = result.outputs.data() + ((static_cast<size_t>(slot) * result.B + b) * result.T + position) * Qw;
    std::vector<float> rows(static_cast<size_t>(hs) * C), written(C, 0.f);
    input_rows(model.layers[result.layers[slot]].attn_proj, static_cast<int64_t>(head) * hs, hs, rows.data());
    for (int d = 0; d < hs; ++d)
        for (int c = 0; c < C; ++c) written[c] += y[head * hs + d] * rows[static_cast<size_t>(d) * C + c];
    if (cfg.output_norms) {  // through the layer's norm of its attention output, its scale frozen (OLMo 2)
        const int layer = result.layers[slot];
        const float rms =
            result.attention_output_scale[(static_cast<size_t>(layer) * result.B + b) * result.T + position];
        for (int c = 0; c < C; ++c) written[c] *= model.layers[layer].attn_out_norm[c] / rms;
    }
    // Through the final norm, its scale frozen: LayerNorm centres, then gamma / sigma.
    const double mean = cfg.norm == Norm::layer_norm ? std::accumulate(written.begin(), written.end(), 0.0) / C : 0;
    const float scale = result.final_scale[static_cast<size_t>(b) * result.T + position];
    for (int c = 0; c < C; ++c) written[c] = static_cast<float>((written[c] - mean) * model.ln_f_w[c] / scale);
    std::vector<float> logits(V);
    linear(written.data(), 1, model.lm_head, nullptr, logits.data(), V);
    std::vector<int32_t> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    const int n = std::min(k, V);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t c) { return logits[a] > logits[c]; });
    HeadWrites out;
    for (int i = 0; i < n; ++i) out.promoted.push_back({ids[i], logits[ids[i]]});
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t c) { return logits[a] < logits[c]; });
    for (int i = 0; i < n; ++i) out.suppressed.push_back({ids[i], logits[ids[i]]});
    return out;
}

}  // namespace headscope
