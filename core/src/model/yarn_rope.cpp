// YaRN's rope_scaling (rope_type "yarn"), as transformers'
// _compute_yarn_parameters computes it: see family_configs.h.
#include <algorithm>
#include <cmath>

#include "family_configs.h"

namespace headscope {
namespace {

// YaRN's attention factor for a context stretched `factor` times.
double yarn_mscale(double factor, double mscale = 1) { return factor <= 1 ? 1 : 0.1 * mscale * std::log(factor) + 1; }

}  // namespace

void read_yarn(const ConfigReader& s, Config& c, int dims) {
    // A pretrained length given: the stretch is the context's ratio to it (transformers' rule since gpt-oss).
    const int original = s.positive_int("original_max_position_embeddings", c.n_positions);
    const double factor = s.find("original_max_position_embeddings") ? static_cast<double>(c.n_positions) / original
                                                                     : s.positive_number("factor", 1);
    const double mscale = s.positive_number("mscale", 0), mscale_all_dims = s.positive_number("mscale_all_dim", 0);
    const double attention_factor = mscale > 0 && mscale_all_dims > 0
                                        ? yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dims)
                                        : yarn_mscale(factor);
    c.rope.cos_sin_scale =
        static_cast<float>(s.positive_number("attention_factor", static_cast<float>(attention_factor)));
    const double beta_fast = s.positive_number("beta_fast", 32), beta_slow = s.positive_number("beta_slow", 1);
    if (!(beta_fast > beta_slow)) s.refuse("rope_scaling's beta_fast must exceed its beta_slow");
    // The dim whose wavelength turns `rotations` times over the pretrained length.
    const auto correction_dim = [&](double rotations) {
        return dims * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(static_cast<double>(c.rope.theta)));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (s.flag("truncate", true)) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, dims - 1.0);
    if (low == high) high += 0.001;
    // Pair d interpolates (its frequency divided by factor) by its ramp, extrapolates (kept) by the rest,
    // in float32 as transformers blends them; the divisor takes the default frequency there.
    c.rope.frequency_divisors.resize(dims / 2);
    for (int d = 0; d < dims / 2; ++d) {
        const float position_frequency = std::pow(c.rope.theta, static_cast<float>(2 * d) / static_cast<float>(dims));
        const auto ramp = static_cast<float>(std::clamp((d - low) / (high - low), 0.0, 1.0));
        const float extrapolated = 1.f / position_frequency;
        const float interpolated = 1.f / (static_cast<float>(factor) * position_frequency);
        c.rope.frequency_divisors[d] = extrapolated / (interpolated * ramp + extrapolated * (1 - ramp));
    }
}

}  // namespace headscope
