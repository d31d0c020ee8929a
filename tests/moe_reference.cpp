// Test support: a layer of experts in double precision, from the families'
// SparseMoeBlock (modeling_mixtral.py, modeling_qwen3_moe.py,
// modeling_olmoe.py) and gpt-oss's MLP (modeling_gpt_oss.py); see family_reference.h.
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

// gpt-oss's router (GptOssTopKRouter): the k largest of the logits with
// their bias (equal ones: the lower expert first), the softmax over those k.
// Its experts (GptOssExperts): gate_up's even outputs the gate, its odd ones
// up, each with its bias; the gate capped at the limit, up clamped to
// [-limit, limit]; down((up + 1) * gate * sigmoid(1.702 gate)) plus its bias.
std::vector<double> gpt_oss_expert(const FamilyCheckpoint& m, int layer, int e, const std::vector<double>& h) {
    const FamilySpec& s = m.spec;
    const int C = s.n_embd, Fe = s.expert_mlp_dim;
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
    const std::vector<float>&gate_up = m[p + "gate_up_proj"], &gate_up_bias = m[p + "gate_up_proj_bias"];
    const std::vector<float>&down = m[p + "down_proj"], &down_bias = m[p + "down_proj_bias"];
    const double limit = s.swiglu_limit;
    std::vector<double> hidden(size_t(Fe), 0.0), out(size_t(C), 0.0);
    for (int f = 0; f < Fe; ++f) {
        double gate = gate_up_bias[size_t(e) * 2 * Fe + 2 * f], up = gate_up_bias[size_t(e) * 2 * Fe + 2 * f + 1];
        for (int c = 0; c < C; ++c) {
            gate += h[c] * gate_up[(size_t(e) * 2 * Fe + 2 * f) * C + c];
            up += h[c] * gate_up[(size_t(e) * 2 * Fe + 2 * f + 1) * C + c];
        }
        gate = std::min(gate, limit), up = std::clamp(up, -limit, limit);
        hidden[f] = (up + 1) * gate / (1 + std::exp(-1.702 * gate));
    }
    for (int c = 0; c < C; ++c) {
        out[c] = down_bias[size_t(e) * C + c];
        for (int f = 0; f < Fe; ++f) out[c] += hidden[f] * down[(size_t(e) * C + c) * Fe + f];
    }
    return out;
}

}  // namespace

std::vector<std::vector<double>> expert_mlp(const FamilyCheckpoint& m, int layer,
                                            const std::vector<std::vector<double>>& h,
                                            const std::vector<int>& knocked_out, int32_t* experts, double* weights) {
    const FamilySpec& s = m.spec;
    const int C = s.n_embd, E = s.n_experts, k = s.experts_per_token, Fe = s.expert_mlp_dim;
    const bool renormalize = s.family == Family::mixtral || s.norm_topk_prob, gpt_oss = s.family == Family::gpt_oss;
    auto logits = times_linear(h, m[s.router_name(layer)], C, E);
    if (gpt_oss)
        for (auto& row : logits)
            for (int e = 0; e < E; ++e) row[e] += m["model.layers." + std::to_string(layer) + ".mlp.router.bias"][e];
    std::vector<std::vector<double>> out(h.size(), std::vector<double>(size_t(C), 0.0));
    for (size_t t = 0; t < h.size(); ++t) {
        std::vector<double> p(size_t(E), 0.0);
        std::vector<int> candidates;
        double sum = 0;
        for (int e = 0; e < E; ++e)
            if (std::find(knocked_out.begin(), knocked_out.end(), e) == knocked_out.end()) candidates.push_back(e);
        // gpt-oss: the top k by logit, then their softmax; the others: the softmax, then its top k.
        if (gpt_oss) {
            std::stable_sort(candidates.begin(), candidates.end(),
                             [&](int a, int b) { return logits[t][a] > logits[t][b]; });
            candidates.resize(size_t(k));
        }
        for (int e : candidates) sum += p[e] = std::exp(logits[t][e]);
        for (double& v : p) v /= sum;
        std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return p[a] > p[b]; });
        double chosen = 0;
        for (int i = 0; i < k; ++i) chosen += p[candidates[i]];
        for (int i = 0; i < k; ++i) {
            const int e = candidates[i];
            experts[t * k + i] = e;
            weights[t * k + i] = renormalize ? p[e] / chosen : p[e];
            if (gpt_oss) {
                const std::vector<double> y = gpt_oss_expert(m, layer, e, h[t]);
                for (int c = 0; c < C; ++c) out[t][c] += weights[t * k + i] * y[c];
                continue;
            }
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
