// Each row of x split into 8-bit parts (integer_split.h), as
// integer_products.cpp's comment says. (Compiled, as that file, without
// contracting a product and a sum into one FMA: the same bits everywhere.)
#include "integer_split.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace headscope {
namespace {

// v to the nearest integer in [-127, 127].
float rounded(float v) { return std::min(std::max(std::nearbyint(v), -127.f), 127.f); }

// n values at x into hi and lo, and rest where it is given (see the top of
// integer_products.cpp).
void split_group(const float* x, size_t n, int8_t* hi, int8_t* lo, int8_t* rest, float& scale, float& fine) {
    // The largest |x| by its bits (a sum of integers, which the compiler
    // vectorises): ordered as the values, and Inf and NaN above the rest.
    uint32_t largest = 0;
    for (size_t j = 0; j < n; ++j) largest = std::max(largest, std::bit_cast<uint32_t>(x[j]) & 0x7fffffffu);
    const bool finite = largest < 0x7f800000u;
    const float s = std::bit_cast<float>(largest) / 127;
    if (!finite || !(s >= std::numeric_limits<float>::min())) {
        std::fill(hi, hi + n, 0);
        std::fill(lo, lo + n, 0);
        if (rest) std::fill(rest, rest + n, 0);
        scale = fine = finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
        return;
    }
    scale = s;
    fine = rest ? s / 64516 : s / 254;
    for (size_t j = 0; j < n; ++j) {  // (a loop of its own, which the compiler vectorises)
        const float h = rounded(x[j] / s);
        hi[j] = static_cast<int8_t>(h);
        lo[j] = static_cast<int8_t>(rounded((x[j] - s * h) * 254 / s));
    }
    if (!rest) return;
    for (size_t j = 0; j < n; ++j) {  // what hi and lo leave, in double
        const double left = double(x[j]) - double(s) * hi[j] - double(s) * lo[j] / 254;
        rest[j] = static_cast<int8_t>(rounded(static_cast<float>(left * 64516 / s)));
    }
}

}  // namespace

const SplitRows& split_rows(const float* x, int rows, int64_t in, const SplitPlan& plan) {
    thread_local SplitRows split;
    const auto values = static_cast<size_t>(rows * in), groups = static_cast<size_t>(rows * in / plan.group);
    split.hi.resize(values), split.lo.resize(values), split.rest.resize(plan.three_parts ? values : 0);
    split.joined.resize(plan.joined ? values : 0);
    split.scale.resize(groups), split.fine.resize(groups);
    split.sums.resize(plan.sum_group ? values / static_cast<size_t>(plan.sum_group) : 0);
    for (size_t g = 0; g < groups; ++g) {
        const auto at = static_cast<int64_t>(g) * plan.group;
        split_group(x + at, static_cast<size_t>(plan.group), split.hi.data() + at, split.lo.data() + at,
                    plan.three_parts ? split.rest.data() + at : nullptr, split.scale[g], split.fine[g]);
    }
    for (size_t j = 0; j < split.joined.size(); ++j)  // at most 254 * 127 + 127 = 32385
        split.joined[j] = static_cast<int16_t>(254 * split.hi[j] + split.lo[j]);
    for (size_t c = 0; plan.nibble_order && c < split.joined.size(); c += 128) {
        std::array<int16_t, 128> natural;
        std::copy_n(split.joined.begin() + static_cast<int64_t>(c), 128, natural.begin());
        for (size_t v = 0; v < 4; ++v)
            for (size_t k = 0; k < 32; ++k)
                split.joined[c + 32 * v + k] = natural[64 * (k / 16) + 32 * (v / 2) + 2 * (k % 16) + v % 2];
    }
    for (size_t k = 0; k < split.sums.size(); ++k) {
        const auto at = static_cast<size_t>(static_cast<int64_t>(k) * plan.sum_group);
        int32_t sum = 0;
        for (size_t j = at; j < at + static_cast<size_t>(plan.sum_group); ++j)
            sum += plan.three_parts ? 64516 * split.hi[j] + 254 * split.lo[j] + split.rest[j]
                                    : 254 * split.hi[j] + split.lo[j];
        split.sums[k] = plan.sum_factor * sum;  // (a few thousand a call)
    }
    return split;
}

}  // namespace headscope
