// Test support: a layer of experts in double precision, from the families'
// SparseMoeBlock (modeling_mixtral.py, modeling_qwen3_moe.py,
// modeling_olmoe.py); see family_reference.h.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "family_reference.h"

namespace headscope::test {

namespace {

// x (rows, in) times the Linear weight w (out, in): (rows, out).
std::vector<std::vector<double>> times_linear(const std::vector<std::vector<double>>& x, const std::vector<float>& w,
                                              int in, int out) {
    std::vector<std::vector<double>> y(x.size(), std::vector<double>(size_t(out), 0.0));
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o)
            for (int i = 0; i < in; ++i) y[t][o] += x[t][i] * w[size_t(o) * in + i];
    return y;
}

}  // namespace

std::vector<std::vector<double>> expert_mlp(const FamilyCheckpoint& m, int layer,
                                            const std::vector<std::vector<double>>& h,
                                            const std::vector<int>& knocked_out, int32_t* experts, double* weights) {
    const FamilySpec& s = m.spec;
    const int C = s.n_embd, E = s.n_experts, k = s.experts_per_token, Fe = s.expert_mlp_dim;
    const bool renormalize = s.family == Family::mixtral || s.norm_topk_prob;
    const auto logits = times_linear(h, m[s.router_name(layer)], C, E);
    std::vector<std::vector<double>> out(h.size(), std::vector<double>(size_t(C), 0.0));
    for (size_t t = 0; t < h.size(); ++t) {
        std::vector<double> p(size_t(E), 0.0);
        std::vector<int> candidates;
        double sum = 0;
        for (int e = 0; e < E; ++e)
            if (std::find(knocked_out.begin(), knocked_out.end(), e) == knocked_out.end()) candidates.push_back(e);
        for (int e : candidates) sum += p[e] = std::exp(logits[t][e]);
        for (double& v : p) v /= sum;
        std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return p[a] > p[b]; });
        double chosen = 0;
        for (int i = 0; i < k; ++i) chosen += p[candidates[i]];
        for (int i = 0; i < k; ++i) {
            const int e = candidates[i];
            experts[t * k + i] = e;
            weights[t * k + i] = renormalize ? p[e] / chosen : p[e];
            const std::vector<std::vector<double>> row = {h[t]};
            auto gate = times_linear(row, m[s.expert_name(layer, e, "gate")], C, Fe);
            const auto up = times_linear(row, m[s.expert_name(layer, e, "up")], C, Fe);
            for (int f = 0; f < Fe; ++f) gate[0][f] = gate[0][f] / (1 + std::exp(-gate[0][f])) * up[0][f];
            const auto down = times_linear(gate, m[s.expert_name(layer, e, "down")], Fe, C);
            for (int c = 0; c < C; ++c) out[t][c] += weights[t * k + i] * down[0][c];
        }
    }
    return out;
}

}  // namespace headscope::test
