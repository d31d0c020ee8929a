// The CPU forward's mixture of experts (cpu_forward.h): each row's router
// picks its experts, then each expert runs over the rows that chose it (its
// gate, up and down as batched products over those rows, small_rows at a
// time, its matrices as the file stores them), its output scaled by each row's routing weight
// and added into that row, experts in ascending order as transformers'
// index_add_ adds them; gpt-oss's biases and clamped SwiGLU where it has them. Legend: R rows, C channels, E experts, k
// experts per row, Fe an expert's hidden size, n the rows of one expert.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "expert_routing.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"
#include "headscope/compute/matmul_detail.h"

namespace headscope {

namespace {

// The k experts not knocked out with the largest `score`s into `order`'s
// first k (equal ones: the lower expert first; torch.topk leaves their
// order unspecified).
void top_k(const float* score, int E, int k, const std::vector<bool>& knocked_out, std::vector<int>& order) {
    order.resize(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    order.erase(std::remove_if(order.begin(), order.end(), [&](int e) { return knocked_out[e]; }), order.end());
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
}

// The softmax of the `n` logits of `experts` (in double, rounded to float32
// as transformers' float32 softmax leaves it) into `probability`.
void softmax_of(const float* logits, const int* experts, int n, float* probability) {
    double max_logit = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int i = 0; i < n; ++i) max_logit = std::max(max_logit, double(logits[experts[i]]));
    for (int i = 0; i < n; ++i) sum += std::exp(logits[experts[i]] - max_logit);
    for (int i = 0; i < n; ++i) probability[i] = static_cast<float>(std::exp(logits[experts[i]] - max_logit) / sum);
}

// gpt-oss's clamped SwiGLU (Config::swiglu_limit) of n gate and up values
// into gate, in transformers' order: (up + 1) * (gate * sigmoid(alpha gate)).
void clamped_swiglu(float* gate, const float* up, size_t n, float limit, float alpha) {
    for (size_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
        gate[i] = (u + 1) * (g * (1 / (1 + std::exp(-alpha * g))));
    }
}

}  // namespace

// softmax_then_top_k: the softmax over every expert, its k largest kept,
// divided by their sum when normalize_top_k; top_k_then_softmax: the k
// largest logits, the softmax over them.
void route_row(const float* logits, const Config& cfg, const std::vector<bool>& knocked_out, std::vector<int>& order,
               int32_t* experts, float* weights) {
    const int E = cfg.n_experts, k = cfg.experts_per_token;
    if (cfg.routing == Routing::top_k_then_softmax) {
        top_k(logits, E, k, knocked_out, order);
        softmax_of(logits, order.data(), k, weights);
        std::copy_n(order.begin(), k, experts);
        return;
    }
    std::vector<int> kept;
    for (int e = 0; e < E; ++e)
        if (!knocked_out[e]) kept.push_back(e);
    std::vector<float> kept_probability(kept.size()), probability(static_cast<size_t>(E), 0.f);
    softmax_of(logits, kept.data(), static_cast<int>(kept.size()), kept_probability.data());
    for (size_t i = 0; i < kept.size(); ++i) probability[kept[i]] = kept_probability[i];
    top_k(probability.data(), E, k, knocked_out, order);
    float chosen = 0;
    for (int i = 0; i < k; ++i) chosen += probability[order[i]];
    for (int i = 0; i < k; ++i) {
        experts[i] = order[i];
        weights[i] = cfg.normalize_top_k ? probability[order[i]] / chosen : probability[order[i]];
    }
}

void CpuForward::mix_experts(const Config& cfg, const LayerWeights& w, const AttentionOptions& options, int layer,
                             bool apart, AttentionResult& result) {
    const int C = cfg.n_embd, E = cfg.n_experts, k = cfg.experts_per_token, R = rows_;
    linear(ln_.data(), R, w.router, w.router_b, router_logits_.data(), E);
    std::vector<bool> knocked_out(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) knocked_out[e] = options.knocks_out_expert({layer, e});
    std::vector<int> order;
    for (int r = 0; r < R; ++r)
        route_row(router_logits_.data() + static_cast<size_t>(r) * E, cfg, knocked_out, order,
                  chosen_experts_.data() + static_cast<size_t>(r) * k,
                  chosen_weights_.data() + static_cast<size_t>(r) * k);

    // Each expert's rows, in row order: a counting sort of the R k choices.
    std::vector<int> first(static_cast<size_t>(E) + 1, 0);
    for (int i = 0; i < R * k; ++i) ++first[chosen_experts_[i] + 1];
    std::partial_sum(first.begin(), first.end(), first.begin());
    std::vector<int> next(first.begin(), first.end() - 1);
    for (int i = 0; i < R * k; ++i) expert_choices_[next[chosen_experts_[i]]++] = i;  // choice i: row i / k

    std::fill_n(experts_out_.data(), static_cast<size_t>(R) * C, 0.f);
    for (int e = 0; e < E; ++e)  // an expert no row chose costs nothing
        for (int from = first[e]; from < first[e + 1]; from += matmul_detail::small_rows)
            run_expert(w.experts[e], cfg, from, std::min(first[e + 1] - from, matmul_detail::small_rows), k);
    float* out = sublayer_output(apart);
    if (apart)
        std::copy_n(experts_out_.data(), static_cast<size_t>(R) * C, out);
    else
        ops::add(out, experts_out_.data(), static_cast<size_t>(R) * C);
    keep_routes(layer, result);
}

// Expert `expert` over the n <= small_rows choices from expert_choices_[from]:
// their rows of ln_ through its gate, up and down, each output times its
// routing weight into its row of experts_out_. At most small_rows rows a
// product: each row's output is then the same sum whichever other rows chose
// the expert (larger products go to OpenBLAS, whose sums do not keep that
// order), so that a causal model's earlier rows never move with a later token.
void CpuForward::run_expert(const ExpertWeights& expert, const Config& cfg, int from, int n, int k) {
    const int C = cfg.n_embd, Fe = cfg.expert_mlp_dim;
    const int* choices = expert_choices_.data() + from;
    for (int i = 0; i < n; ++i)
        std::copy_n(ln_.data() + static_cast<size_t>(choices[i] / k) * C, C, expert_in_.data() + size_t(i) * C);
    const size_t hidden = static_cast<size_t>(n) * Fe;
    linear(expert_in_.data(), n, expert.gate, expert.gate_b, hidden_.data(), Fe);
    linear(expert_in_.data(), n, expert.up, expert.up_b, up_.data(), Fe);
    if (cfg.swiglu_limit > 0) {
        clamped_swiglu(hidden_.data(), up_.data(), hidden, cfg.swiglu_limit, cfg.swiglu_alpha);
    } else {
        ops::silu(hidden_.data(), hidden_.data(), hidden);
        ops::times(hidden_.data(), up_.data(), hidden);
    }
    linear(hidden_.data(), n, expert.down, expert.down_b, expert_in_.data(), C);  // its output over its input
    for (int i = 0; i < n; ++i) {
        const float weight = chosen_weights_[choices[i]];
        float* out = experts_out_.data() + static_cast<size_t>(choices[i] / k) * C;
        const float* y = expert_in_.data() + static_cast<size_t>(i) * C;
        for (int c = 0; c < C; ++c) out[c] += weight * y[c];
    }
}

// The rows' choices into the result's router_experts and router_weights at (layer, b, t).
void CpuForward::keep_routes(int layer, AttentionResult& result) const {
    const int k = result.router_k;
    for (int b = 0; b < result.B; ++b)
        for (int r = first_row_[b]; r < first_row_[b + 1]; ++r) {
            const size_t at = result.router_at(layer, b, begin_[b] + r - first_row_[b]);
            std::copy_n(chosen_experts_.data() + static_cast<size_t>(r) * k, k, result.router_experts.data() + at);
            std::copy_n(chosen_weights_.data() + static_cast<size_t>(r) * k, k, result.router_weights.data() + at);
        }
}

}  // namespace headscope
