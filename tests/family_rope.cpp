// Test support: RoPE as the families' transformers code computes it, in
// double precision (family_reference.h): the inverse frequencies with each
// family's scaling, LongRoPE's and YaRN's attention factors, and the rotate-half turn.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "family_reference.h"

namespace headscope::test {

std::vector<float> rope_inverse_frequencies(const FamilySpec& spec, int hs, int T) {
    int dims = static_cast<int>(hs * spec.rotary_pct);
    dims -= dims % 2;
    std::vector<float> inv_freq(dims / 2);
    // LongRoPE (the newer transformers' choice): the long factors when the
    // forward's length is past original_max_position_embeddings, else the short.
    const std::vector<double>& longrope = T > spec.original_max_positions ? spec.long_factors : spec.short_factors;
    for (int d = 0; d < dims / 2; ++d) {
        const double divisor = longrope.empty() ? 1.0 : longrope.at(d);
        inv_freq[d] = static_cast<float>(1 / (divisor * std::pow(spec.rope_theta, 2.0 * d / dims)));
    }
    if (spec.rope_linear_factor > 0)  // rope_type linear: inv_freq / factor
        for (float& f : inv_freq) f = static_cast<float>(f / spec.rope_linear_factor);
    if (spec.rope_factor > 0) {
        // Llama 3: wavelengths past original / low_freq_factor slow by the
        // factor, those under original / high_freq_factor stay, and those
        // between blend the two.
        const double original = spec.original_max_positions, factor = spec.rope_factor;
        const double low = spec.low_freq_factor, high = spec.high_freq_factor;
        for (float& f : inv_freq) {
            const double wavelength = 2 * std::numbers::pi / f;
            if (wavelength > original / low) {
                f = static_cast<float>(f / factor);
            } else if (wavelength >= original / high) {
                const double smooth = (original / wavelength - low) / (high - low);
                f = static_cast<float>((1 - smooth) * f / factor + smooth * f);
            }
        }
    }
    if (spec.family == Family::gpt_oss) {
        // YaRN (_compute_yarn_parameters, truncate false): pair d's ramp runs
        // from the dim turning beta_fast = 32 times over the original length
        // to the one turning beta_slow = 1 time; below it the frequency
        // stays, past it it is divided by the factor, between the two blend.
        const double factor = double(spec.max_positions) / spec.original_max_positions;
        const auto correction_dim = [&](double rotations) {
            return dims * std::log(spec.original_max_positions / (rotations * 2 * std::numbers::pi)) /
                   (2 * std::log(spec.rope_theta));
        };
        const double fast = correction_dim(32), slow = correction_dim(1);
        const double low = std::max(spec.yarn_truncate ? std::floor(fast) : fast, 0.0);
        const double high = std::min(spec.yarn_truncate ? std::ceil(slow) : slow, dims - 1.0);
        for (int d = 0; d < dims / 2; ++d) {
            const double ramp = std::clamp((d - low) / (high - low), 0.0, 1.0), f = inv_freq[d];
            inv_freq[d] = static_cast<float>(f / factor * ramp + f * (1 - ramp));
        }
    }
    return inv_freq;
}

double rope_attention_factor(const FamilySpec& spec) {
    if (spec.family == Family::gpt_oss)  // YaRN's: 0.1 ln(factor) + 1
        return 0.1 * std::log(double(spec.max_positions) / spec.original_max_positions) + 1;
    if (spec.long_factors.empty()) return 1;
    const double factor = double(spec.max_positions) / spec.original_max_positions;
    return factor <= 1 ? 1 : std::sqrt(1 + std::log(factor) / std::log(double(spec.original_max_positions)));
}

void rotate(const std::vector<float>& inv_freq, int position, double* x, double cos_sin_scale) {
    const size_t half = inv_freq.size();
    for (size_t d = 0; d < half; ++d) {
        const double angle = position * static_cast<double>(inv_freq[d]);
        const double c = std::cos(angle) * cos_sin_scale, s = std::sin(angle) * cos_sin_scale;
        const double x1 = x[d], x2 = x[d + half];
        x[d] = x1 * c - x2 * s;
        x[d + half] = x2 * c + x1 * s;
    }
}

}  // namespace headscope::test
