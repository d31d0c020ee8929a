// Wall time in milliseconds: the one way Headscope times its work (the CLI's
// timing_ms, the status bar, the benchmarks).
#pragma once
#include <chrono>

namespace headscope {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace headscope
