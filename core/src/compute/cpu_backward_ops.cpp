// The backward pass's elementwise pieces (backward_ops.h): norms that keep
// what their backward reads, and the MLPs' activations with their derivatives.
#include <algorithm>
#include <cmath>

#include "headscope/compute/backward_ops.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/forward.h"

namespace headscope {

void norm_forward(const NormShape& shape, const float* x, const float* w, const float* b, float* out, int T,
                  NormStats& stats) {
    const int C = shape.width;
    const bool centred = shape.centred;
    stats.mean.assign(T, 0.0), stats.inverse.resize(T);
    for (int t = 0; t < T; ++t) {
        const float* row = x + static_cast<size_t>(t) * C;
        double mean = 0, squares = 0;
        for (int c = 0; c < C; ++c) mean += row[c];
        mean = centred ? mean / C : 0;
        for (int c = 0; c < C; ++c) squares += (row[c] - mean) * (row[c] - mean);
        const double inverse = 1 / std::sqrt(squares / C + shape.epsilon);
        stats.mean[t] = mean, stats.inverse[t] = inverse;
        for (int c = 0; c < C; ++c)
            out[static_cast<size_t>(t) * C + c] =
                static_cast<float>((row[c] - mean) * inverse * w[c] + (b ? b[c] : 0.f));
    }
}

void norm_backward(const NormShape& shape, const float* x, const float* w, const NormStats& stats, const float* dy,
                   float* dx, int T) {
    const int C = shape.width;
    const bool centred = shape.centred;
    std::vector<double> xhat(C), g(C);
    for (int t = 0; t < T; ++t) {
        const size_t at = static_cast<size_t>(t) * C;
        double mean_g = 0, mean_gx = 0;
        for (int c = 0; c < C; ++c) {
            xhat[c] = (x[at + c] - stats.mean[t]) * stats.inverse[t];
            g[c] = static_cast<double>(dy[at + c]) * w[c];
            mean_g += g[c], mean_gx += g[c] * xhat[c];
        }
        mean_g = centred ? mean_g / C : 0, mean_gx /= C;
        for (int c = 0; c < C; ++c)
            dx[at + c] += static_cast<float>(stats.inverse[t] * (g[c] - mean_g - xhat[c] * mean_gx));
    }
}

void activate_with_slopes(Mlp mlp, float* x, float* slope, size_t n) {
    switch (mlp) {
        case Mlp::gelu_exact:
        case Mlp::geglu: ops::gelu_exact_slope(x, slope, n); break;
        case Mlp::gelu_tanh:
        case Mlp::gated_gelu: ops::gelu_slope(x, slope, n); break;
        case Mlp::swiglu:
        case Mlp::silu: ops::silu_slope(x, slope, n); break;
        case Mlp::relu: ops::relu_slope(x, slope, n); break;
    }
    activate(mlp, x, n);
}

double expert_swiglu(const Config& config, double gate, double up, double& d_gate, double& d_up) {
    const double limit = config.swiglu_limit;
    if (limit <= 0) {
        const double s = 1 / (1 + std::exp(-gate)), silu = gate * s;
        d_gate = s * (1 + gate * (1 - s)) * up, d_up = silu;
        return silu * up;
    }
    // (up + 1) (g sigmoid(alpha g)) with g = min(gate, limit), up clamped to [-limit, limit].
    const double g = std::min(gate, limit), u = std::clamp(up, -limit, limit), alpha = config.swiglu_alpha;
    const double s = 1 / (1 + std::exp(-alpha * g)), glu = g * s;
    d_gate = gate < limit ? (u + 1) * (s + alpha * g * s * (1 - s)) : 0;
    d_up = std::abs(up) < limit ? glu : 0;
    return (u + 1) * glu;
}

}  // namespace headscope
