// The backward pass through a layer of experts (backward_trace.h), routing
// held fixed: each row keeps the k experts the forward chose (route_row, the
// forward's own), and the gradient flows through those experts and through
// their weights' values, which are differentiated through the router's
// softmax (a small move of the input moves the weights, not the choice; the
// choice itself has no gradient). Legend: E experts, k experts per row, Fe an
// expert's hidden size, n the choices of one expert.
#include <algorithm>
#include <cmath>

#include "backward_trace.h"
#include "expert_routing.h"
#include "headscope/compute/cpu_ops.h"

namespace headscope {

std::vector<std::vector<int>> BackwardTrace::choices_by_expert(const LayerTrace& lt) const {
    std::vector<std::vector<int>> by_expert(static_cast<size_t>(cfg_.n_experts));
    for (size_t i = 0; i < lt.chosen.size(); ++i) by_expert[lt.chosen[i]].push_back(static_cast<int>(i));
    return by_expert;
}

namespace {

// The softmax the row's weights come from (LayerTrace::routed) into `routed` (E):
// over the k chosen where the weights sum to 1 (top_k_then_softmax, or
// renormalized), else over every expert not knocked out.
void routed_softmax(const Config& cfg, const float* logits, const int32_t* chosen, const std::vector<bool>& knocked_out,
                    double* routed) {
    const int E = cfg.n_experts, k = cfg.experts_per_token;
    std::vector<bool> support(static_cast<size_t>(E), false);
    const bool over_chosen = cfg.routing == Routing::top_k_then_softmax || cfg.normalize_top_k;
    for (int e = 0; e < E; ++e) support[e] = !over_chosen && !knocked_out[e];
    for (int i = 0; i < k && over_chosen; ++i) support[chosen[i]] = true;
    double max = -INFINITY, sum = 0;
    for (int e = 0; e < E; ++e)
        if (support[e]) max = std::max(max, static_cast<double>(logits[e]));
    for (int e = 0; e < E; ++e) sum += routed[e] = support[e] ? std::exp(logits[e] - max) : 0;
    for (int e = 0; e < E; ++e) routed[e] /= sum;
}

// Rows `choices` / k of x (rows of `width`) gathered into (n, width).
std::vector<float> gathered(const std::vector<float>& x, const std::vector<int>& choices, int k, int width) {
    std::vector<float> rows(choices.size() * width);
    for (size_t i = 0; i < choices.size(); ++i)
        std::copy_n(x.data() + static_cast<size_t>(choices[i] / k) * width, width, rows.data() + i * width);
    return rows;
}

}  // namespace

// The layer's MLP as the forward's mix_experts computes it: each row's route,
// then each expert over the rows that chose it, its output times the row's
// weight added into the row, experts in ascending order.
void BackwardTrace::experts(int l, const LayerWeights& w, LayerTrace& lt) const {
    const int C = cfg_.n_embd, E = cfg_.n_experts, k = cfg_.experts_per_token, Fe = cfg_.expert_mlp_dim;
    std::vector<float> logits(static_cast<size_t>(T_) * E);  // (T, E)
    backward_linear(lt.n2.data(), T_, w.router, w.router_b, logits.data(), E);
    std::vector<bool> knocked_out(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) knocked_out[e] = options_.knocks_out_expert({l, e});
    lt.chosen.resize(static_cast<size_t>(T_) * k), lt.weights.resize(lt.chosen.size());
    lt.routed.resize(static_cast<size_t>(T_) * E);
    std::vector<int> order;
    for (int t = 0; t < T_; ++t) {
        const float* row = logits.data() + static_cast<size_t>(t) * E;
        route_row(row, cfg_, knocked_out, order, lt.chosen.data() + t * k, lt.weights.data() + t * k);
        routed_softmax(cfg_, row, lt.chosen.data() + t * k, knocked_out, lt.routed.data() + t * E);
    }
    lt.choice_gate.resize(lt.chosen.size() * Fe), lt.choice_up.resize(lt.chosen.size() * Fe);
    lt.choice_out.resize(lt.chosen.size() * C), lt.m.assign(static_cast<size_t>(T_) * C, 0.f);
    const std::vector<std::vector<int>> by_expert = choices_by_expert(lt);
    for (int e = 0; e < E; ++e) {
        const std::vector<int>& choices = by_expert[e];
        const int n = static_cast<int>(choices.size());
        if (n == 0) continue;
        const ExpertWeights& x = w.experts[e];
        const std::vector<float> in = gathered(lt.n2, choices, k, C);
        std::vector<float> gate(static_cast<size_t>(n) * Fe), up(gate.size()), out(static_cast<size_t>(n) * C);
        backward_linear(in.data(), n, x.gate, x.gate_b, gate.data(), Fe);
        backward_linear(in.data(), n, x.up, x.up_b, up.data(), Fe);
        std::vector<float> hidden(gate.size());
        for (size_t i = 0; i < hidden.size(); ++i) {
            double d_gate = 0, d_up = 0;
            hidden[i] = static_cast<float>(expert_swiglu(cfg_, gate[i], up[i], d_gate, d_up));
        }
        backward_linear(hidden.data(), n, x.down, x.down_b, out.data(), C);
        for (int i = 0; i < n; ++i) {
            const size_t choice = choices[i];
            std::copy_n(gate.data() + static_cast<size_t>(i) * Fe, Fe, lt.choice_gate.data() + choice * Fe);
            std::copy_n(up.data() + static_cast<size_t>(i) * Fe, Fe, lt.choice_up.data() + choice * Fe);
            std::copy_n(out.data() + static_cast<size_t>(i) * C, C, lt.choice_out.data() + choice * C);
            float* m = lt.m.data() + choice / k * C;
            for (int c = 0; c < C; ++c) m[c] += lt.weights[choice] * out[static_cast<size_t>(i) * C + c];
        }
    }
}

// The gradient with respect to the layer's input (its norm's output) from
// that of its output, dm (T, C): through each chosen expert, and through the
// weights' softmax into the router's logits.
std::vector<float> BackwardTrace::experts_backward(const LayerWeights& w, const LayerTrace& lt, const float* dm) const {
    const int C = cfg_.n_embd, E = cfg_.n_experts, k = cfg_.experts_per_token, Fe = cfg_.expert_mlp_dim;
    std::vector<float> dn(static_cast<size_t>(T_) * C, 0.f), d_logits(static_cast<size_t>(T_) * E, 0.f);
    for (int t = 0; t < T_; ++t) {
        // dw_i = dm . expert i's output; the softmax's backward over its support.
        std::vector<double> d_routed(static_cast<size_t>(E), 0.0);
        double weighted = 0;
        for (int i = 0; i < k; ++i) {
            const size_t choice = static_cast<size_t>(t) * k + i;
            const float *d = dm + static_cast<size_t>(t) * C, *out = lt.choice_out.data() + choice * C;
            double dw = 0;
            for (int c = 0; c < C; ++c) dw += static_cast<double>(d[c]) * out[c];
            d_routed[lt.chosen[choice]] = dw, weighted += lt.weights[choice] * dw;
        }
        const double* routed = lt.routed.data() + static_cast<size_t>(t) * E;
        for (int e = 0; e < E; ++e)
            d_logits[static_cast<size_t>(t) * E + e] = static_cast<float>(routed[e] * (d_routed[e] - weighted));
    }
    backward_linear(d_logits.data(), T_, w.router.transposed(), nullptr, dn.data(), C);
    const std::vector<std::vector<int>> by_expert = choices_by_expert(lt);
    for (int e = 0; e < E; ++e) {
        const std::vector<int>& choices = by_expert[e];
        const int n = static_cast<int>(choices.size());
        if (n == 0) continue;
        const ExpertWeights& x = w.experts[e];
        std::vector<float> d_out(static_cast<size_t>(n) * C), d_hidden(static_cast<size_t>(n) * Fe);
        for (int i = 0; i < n; ++i)
            for (int c = 0; c < C; ++c)
                d_out[static_cast<size_t>(i) * C + c] = lt.weights[choices[i]] * dm[choices[i] / k * C + c];
        backward_linear(d_out.data(), n, x.down.transposed(), nullptr, d_hidden.data(), Fe);
        std::vector<float> d_gate(d_hidden.size()), d_up(d_hidden.size());
        for (int i = 0; i < n; ++i)
            for (int f = 0; f < Fe; ++f) {
                const size_t at = static_cast<size_t>(i) * Fe + f, kept = static_cast<size_t>(choices[i]) * Fe + f;
                double slope_gate = 0, slope_up = 0;
                expert_swiglu(cfg_, lt.choice_gate[kept], lt.choice_up[kept], slope_gate, slope_up);
                d_gate[at] = static_cast<float>(d_hidden[at] * slope_gate);
                d_up[at] = static_cast<float>(d_hidden[at] * slope_up);
            }
        std::vector<float> d_in(static_cast<size_t>(n) * C);
        backward_linear(d_gate.data(), n, x.gate.transposed(), nullptr, d_in.data(), C);
        backward_linear(d_up.data(), n, x.up.transposed(), nullptr, d_in.data(), C, /*accumulate=*/true);
        for (int i = 0; i < n; ++i)
            ops::add(dn.data() + static_cast<size_t>(choices[i] / k) * C, d_in.data() + static_cast<size_t>(i) * C, C);
    }
    return dn;
}

}  // namespace headscope
