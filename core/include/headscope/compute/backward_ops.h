// The backward pass's elementwise pieces (cpu_backward_ops.cpp): a norm that
// keeps what its backward reads, that backward, and each MLP activation with
// its derivative, as the CPU forward computes them (norms in double precision).
#pragma once
#include <vector>

#include "headscope/model/model_description.h"

namespace headscope {

// A norm over rows of `width` values: LayerNorm (centred) or RMSNorm.
struct NormShape {
    bool centred;
    int width;
    double epsilon;
};

// Each row's mean (LayerNorm's; 0 for RMSNorm) and 1 / sqrt(its variance or mean square + eps).
struct NormStats {
    std::vector<double> mean, inverse;
};

// out = the norm of each of the `rows` rows of x, times w, plus b (where not null); its stats kept.
void norm_forward(const NormShape& shape, const float* x, const float* w, const float* b, float* out, int rows,
                  NormStats& stats);
// dx += the norm's Jacobian transposed times dy, at x.
void norm_backward(const NormShape& shape, const float* x, const float* w, const NormStats& stats, const float* dy,
                   float* dx, int rows);

// The MLP's activation of n values x in place, activate()'s (the forward's own), with its derivative at each
// into `slope`, in float32 like the forward.
void activate_with_slopes(Mlp mlp, float* x, float* slope, size_t n);

// An expert's SwiGLU of one gate and up value, SiLU(gate) up, or gpt-oss's
// clamped one where config.swiglu_limit is set (the forward's
// clamped_swiglu); its derivatives with respect to each (0 where clamped).
double expert_swiglu(const Config& config, double gate, double up, double& d_gate, double& d_up);

}  // namespace headscope
